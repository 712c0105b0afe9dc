//! A Ballista cluster of `qprof cluster` processes on 127.0.0.1 (one scheduler, two
//! executors) runs TPC-H: the results equal one process's; the scheduler's event log
//! shows both executors, per-stage memory peaks and every operator's metrics to
//! `qprof serve` and spark-history-cli; an executor killed with -9 mid-query is recorded
//! as lost with its tasks, and the run completes.
//!
//! Needs what `scripts/install-test-deps.sh` installs (spark-history-cli in
//! `target/test-venv`).

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};

use common::cluster::LocalCluster;
use common::http_get;
use common::served::{Server, every_command, qprof, temp_dir};
use serde_json::Value;

mod common;

/// Row counts by query of `qprof run --tpch 0.1` in this process, from its profiles.
fn local_rows(dir: &Path, queries: &str) -> BTreeMap<String, u64> {
    let profiles = dir.join("local.json");
    let out = qprof()
        .args(["run", "--tpch", "0.1", "--top", "0", "--no-event-log"])
        .args(["--queries", queries])
        .arg("--data-dir")
        .arg(dir.join("data"))
        .arg("--profile-out")
        .arg(&profiles)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc: Value = serde_json::from_slice(&std::fs::read(&profiles).unwrap()).unwrap();
    doc["queries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|q| (format!("q{}", q["id"]), q["rows"].as_u64().unwrap()))
        .collect()
}

/// `q5  1,234 rows  56.7 ms` lines of a cluster run, as row counts by query.
fn printed_rows(stdout: &str) -> BTreeMap<String, u64> {
    stdout
        .lines()
        .filter_map(|l| {
            let mut words = l.split_whitespace();
            let query = words.next()?.to_string();
            let rows = words.next()?.parse().ok()?;
            (query.starts_with('q') && words.next() == Some("rows")).then_some((query, rows))
        })
        .collect()
}

/// `qprof run --cluster` of `queries`: 4 partitions per stage, so that each stage has a
/// task for each executor (a task takes as many partitions as its executor has slots).
fn cluster_run(cluster: &LocalCluster, dir: &Path, queries: &str) -> Command {
    let mut run = qprof();
    run.args([
        "run",
        "--tpch",
        "0.1",
        "--partitions",
        "4",
        "--queries",
        queries,
    ])
    .arg("--cluster")
    .arg(&cluster.url)
    .arg("--data-dir")
    .arg(dir.join("data"));
    run
}

fn json(server: &Server, path: &str) -> Value {
    let (status, body) = http_get(server.port(), path).unwrap();
    assert_eq!(status, 200, "{path}: {}", String::from_utf8_lossy(&body));
    serde_json::from_slice(&body).unwrap()
}

/// Every operator of a logged profile has qprof's base metrics.
fn check_operators(node: &Value, query: &str) -> usize {
    let metrics = node["metrics"].as_object().unwrap();
    for name in ["wallNanos", "selfWallNanos", "outputRows"] {
        assert!(
            metrics.contains_key(name),
            "{query}: {} has no {name}: {:?}",
            node["name"],
            metrics.keys().collect::<Vec<_>>()
        );
    }
    1 + node["children"]
        .as_array()
        .map_or(0, |c| c.iter().map(|c| check_operators(c, query)).sum())
}

const ALL: &str = "1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22";

#[test]
fn tpch_on_two_executors_matches_one_process_and_logs_both() {
    let dir = temp_dir("cluster");
    let expected = local_rows(&dir, ALL);
    assert_eq!(expected.len(), 22);
    let cluster = LocalCluster::start(&dir, &["exec-1", "exec-2"]);
    let out = cluster_run(&cluster, &dir, ALL).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(printed_rows(&stdout), expected);

    let server = Server::start(&cluster.events);
    let apps = json(&server, "/api/v1/applications");
    let apps = apps.as_array().unwrap();
    assert_eq!(apps.len(), 1);
    assert_eq!(apps[0]["attempts"][0]["completed"], true);
    let app = apps[0]["id"].as_str().unwrap().to_string();
    let base = format!("/api/v1/applications/{app}");
    // both executors, besides the driver entry every Spark application has
    let executors = json(&server, &format!("{base}/allexecutors"));
    let mut ids: Vec<&str> = executors
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["id"].as_str().unwrap())
        .filter(|id| *id != "driver")
        .collect();
    ids.sort_unstable();
    assert_eq!(ids, ["exec-1", "exec-2"]);
    for e in executors.as_array().unwrap() {
        if e["id"] != "driver" {
            assert!(e["totalTasks"].as_i64().unwrap() > 0, "{e}");
            assert!(
                e["peakMemoryMetrics"]["ProcessTreeJVMRSSMemory"]
                    .as_i64()
                    .unwrap()
                    > 0,
                "{e}"
            );
        }
    }
    // every stage has each of its executors' memory peaks
    let stages = json(&server, &format!("{base}/stages?details=true"));
    let mut stages_on_both = 0;
    for stage in stages.as_array().unwrap() {
        let summary = stage["executorSummary"].as_object().unwrap();
        assert!(
            !summary.is_empty(),
            "stage {} has no executors",
            stage["stageId"]
        );
        for (id, s) in summary {
            assert!(
                s["peakMemoryMetrics"]["ProcessTreeJVMRSSMemory"]
                    .as_i64()
                    .unwrap_or(0)
                    > 0,
                "stage {} on {id}: {s}",
                stage["stageId"]
            );
        }
        stages_on_both += usize::from(summary.len() == 2);
    }
    assert!(stages_on_both > 0, "no stage ran on both executors");
    // 22 queries, each with a profile whose every operator has the base metrics
    let sql = json(&server, &format!("{base}/sql?length=100"));
    assert_eq!(sql.as_array().unwrap().len(), 22);
    let mut operators = 0;
    for exec in sql.as_array().unwrap() {
        assert_eq!(exec["status"], "COMPLETED", "{exec}");
        let profile = json(
            &server,
            &format!("/qprof/v1/applications/{app}/sql/{}/profile", exec["id"]),
        );
        operators += check_operators(
            &profile["query"]["plan"],
            exec["description"].as_str().unwrap(),
        );
    }
    assert!(operators > 22 * 5, "{operators} operators");
    every_command(&server, &app, true, &dir);
    drop(server);
    // SQL of its own on the cluster: a table by a relative path, two statements
    let nation = dir.join("data").join("nation.parquet");
    let relative = nation.strip_prefix(&dir).unwrap();
    let out = qprof()
        .current_dir(&dir)
        .args(["sql", "--table"])
        .arg(format!("nation={}", relative.display()))
        .args([
            "SELECT count(*) AS nations FROM nation; \
             SELECT n_name FROM nation WHERE n_nationkey = 7",
            "--cluster",
            &cluster.url,
        ])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("| 25      |"), "{stdout}");
    assert!(stdout.contains("GERMANY"), "{stdout}");
    assert!(stdout.contains("statement 2: 1 rows"), "{stdout}");
    drop(cluster);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn an_executor_killed_mid_query_is_recorded_lost_and_the_run_completes() {
    let dir = temp_dir("cluster-kill");
    let queries = "1,9";
    let expected = local_rows(&dir, queries);
    let mut cluster = LocalCluster::start(&dir, &["exec-1", "exec-2"]);
    let mut run = cluster_run(&cluster, &dir, queries)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = BufReader::new(run.stdout.take().unwrap());
    let mut printed = String::new();
    // the first query's end is logged before the loss
    stdout.read_line(&mut printed).unwrap();
    assert!(printed.starts_with("q1 "), "{printed:?}");
    // exec-2 dies as soon as it writes shuffle output of the next query: a task of an
    // early stage ran there, and the stages after it are still to run
    let work = dir.join("work-exec-2");
    let before: Vec<_> = std::fs::read_dir(&work)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    while std::fs::read_dir(&work)
        .unwrap()
        .all(|e| before.contains(&e.unwrap().path()))
    {
        assert!(std::time::Instant::now() < deadline, "exec-2 got no task");
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
    cluster.kill("exec-2");
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut stdout, &mut rest).unwrap();
    printed.push_str(&rest);
    let status = run.wait().unwrap();
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut run.stderr.take().unwrap(), &mut stderr).unwrap();
    assert!(status.success(), "{printed}\n{stderr}");
    assert_eq!(printed_rows(&printed), expected);

    let server = Server::start(&cluster.events);
    let apps = json(&server, "/api/v1/applications");
    let app = apps[0]["id"].as_str().unwrap().to_string();
    let base = format!("/api/v1/applications/{app}");
    // nothing logged before the loss is lost: every query is there, completed
    let sql = json(&server, &format!("{base}/sql"));
    assert_eq!(sql.as_array().unwrap().len(), 2);
    assert!(
        sql.as_array()
            .unwrap()
            .iter()
            .all(|e| e["status"] == "COMPLETED")
    );
    let executors = json(&server, &format!("{base}/allexecutors"));
    let lost = executors
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["id"] == "exec-2")
        .expect("exec-2 is listed");
    assert_eq!(lost["isActive"], false, "{lost}");
    assert!(
        lost["removeReason"]
            .as_str()
            .unwrap_or("")
            .starts_with("lost"),
        "{lost}"
    );
    // the tasks it took down are failed tasks, with the reason
    let failed = json(
        &server,
        &format!("{base}/stages?details=true&taskStatus=FAILED"),
    );
    let reasons: Vec<String> = failed
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|s| s["tasks"].as_object().unwrap().values())
        .map(|t| t["errorMessage"].as_str().unwrap_or("").to_string())
        .collect();
    assert!(!reasons.is_empty(), "no failed task was recorded");
    assert!(reasons.iter().any(|r| r.contains("exec-2")), "{reasons:?}");
    drop(server);
    drop(cluster);
    std::fs::remove_dir_all(&dir).unwrap();
}
