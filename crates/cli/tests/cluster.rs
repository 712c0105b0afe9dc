//! A Ballista cluster of `qprof cluster` processes on 127.0.0.1 (one scheduler, two
//! executors) runs TPC-H: the results equal one process's; the scheduler's event log
//! shows both executors, per-stage memory peaks and every operator's metrics to
//! `qprof serve` and spark-history-cli. Killed with -9 (each moment driven by what the
//! run shows, never by a sleep): an executor while its tasks run or between queries
//! costs the query it hit a run again, never the run or its answers; every executor
//! fails the run on one line; the scheduler fails the client at once on one line. The
//! log keeps every query, the lost executors and the failed tasks with their reasons.
//!
//! Needs what `scripts/install-test-deps.sh` installs (spark-history-cli in
//! `target/test-venv`).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use common::cluster::LocalCluster;
use common::http_get;
use common::otlp::Receiver;
use common::served::{Server, every_command, qprof, temp_dir};
use serde_json::Value;

mod common;

/// Row counts by query of `qprof run --tpch 0.1` in this process, from its profiles.
fn local_rows(dir: &Path, queries: &str) -> BTreeMap<String, u64> {
    let profiles = dir.join("local.json");
    let out = qprof()
        .args(["run", "--tpch", "0.1", "--top", "0"])
        .arg("--event-log-dir")
        .arg(dir.join("local-events"))
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

/// `qprof run --cluster` of `queries`: 4 partitions per stage (a task each), so that each
/// stage has tasks on both executors.
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

/// An operator's value of `metric` in a logged profile (0 if it has none).
fn metric(node: &Value, metric: &str) -> i64 {
    node["metrics"][metric]["value"].as_i64().unwrap_or(0)
}

/// What a cluster's profiles say the shuffles moved.
#[derive(Default)]
struct Shuffled {
    /// Bytes fetched from the other executor.
    remote_bytes: i64,
    /// The most memory a sort-shuffle writer reserved.
    sort_writer_peak: i64,
    /// The sort-shuffle writers' own CPU time.
    sort_writer_cpu: i64,
    /// Time the readers' tasks waited on their fetches, and the tasks.
    fetch_wait_nanos: i64,
    reader_tasks: i64,
    /// Bytes each query's last stage wrote (the files the cluster keeps after the job).
    final_bytes: Vec<i64>,
}

/// Checks each exchange of a logged cluster profile: the bytes its reader read, locally
/// and remotely, are the bytes the upstream stage's writer wrote, file by file; under a
/// `CoalescePartitionsExec` (a nested loop join's build side), each task of the reader
/// reads every file.
fn check_shuffles(node: &Value, parent: &str, query: &str, shuffled: &mut Shuffled) {
    let children = node["children"].as_array().cloned().unwrap_or_default();
    if node["name"] == "ShuffleReaderExec" {
        let writer = children
            .iter()
            .find(|c| c["name"].as_str().unwrap().ends_with("ShuffleWriterExec"))
            .unwrap_or_else(|| panic!("{query}: a reader without its upstream writer"));
        let local = metric(node, "shuffleLocalBytesRead");
        let remote = metric(node, "shuffleRemoteBytesRead");
        let blocks =
            metric(node, "shuffleLocalBlocksRead") + metric(node, "shuffleRemoteBlocksRead");
        let readers = if parent == "CoalescePartitionsExec" {
            node["metrics"]["shuffleLocalBytesRead"]["tasks"]
                .as_i64()
                .unwrap()
        } else {
            1
        };
        assert_eq!(
            local + remote,
            readers * metric(writer, "outputBytes"),
            "{query}: {} read {local} + {remote} bytes of the {} its writer wrote",
            node["display"],
            metric(writer, "outputBytes")
        );
        assert!(blocks > 0, "{query}: {} read no block", node["display"]);
        shuffled.remote_bytes += remote;
        let waits = &node["metrics"]["shuffleFetchWaitNanos"];
        assert!(
            waits.is_object(),
            "{query}: {} has no fetch wait",
            node["display"]
        );
        shuffled.fetch_wait_nanos += waits["value"].as_i64().unwrap();
        shuffled.reader_tasks += waits["tasks"].as_i64().unwrap();
        if writer["name"] == "SortShuffleWriterExec" {
            shuffled.sort_writer_peak = shuffled
                .sort_writer_peak
                .max(metric(writer, "peakMemoryBytes"));
            // its own CPU time is part of its total, its input's the rest
            let own = metric(writer, "selfCpuNanos");
            assert!(
                own <= metric(writer, "cpuNanos"),
                "{query}: {} self cpu {own} above its total",
                writer["display"]
            );
            shuffled.sort_writer_cpu += own;
        }
    }
    let name = node["name"].as_str().unwrap();
    for child in &children {
        check_shuffles(child, name, query, shuffled);
    }
}

/// The metric names of a profile's plan the catalog does not describe, with their
/// operators.
fn undescribed(node: &Value, out: &mut BTreeMap<String, String>) {
    for name in node["metrics"]
        .as_object()
        .into_iter()
        .flat_map(|m| m.keys())
    {
        if qprof_core::catalog::describe(name).is_none() {
            out.insert(name.clone(), node["name"].as_str().unwrap().to_string());
        }
    }
    for child in node["children"].as_array().into_iter().flatten() {
        undescribed(child, out);
    }
}

/// Per SQL execution of the logs under `events`: the (display name, kind) of each SQL
/// metric of its Spark plan, and of each metric of its qprof profile that the catalog
/// describes (each undescribed one fails) and of each function call, as the catalog's
/// functionCpuNanos shows it.
#[allow(clippy::type_complexity)]
fn logged_metrics(
    events: &Path,
) -> BTreeMap<i64, (BTreeSet<(String, String)>, BTreeSet<(String, String)>)> {
    fn spark_metrics(node: &Value, out: &mut BTreeSet<(String, String)>) {
        for m in node["metrics"].as_array().into_iter().flatten() {
            out.insert((m["name"].to_string(), m["metricType"].to_string()));
        }
        for child in node["children"].as_array().into_iter().flatten() {
            spark_metrics(child, out);
        }
    }
    fn profile_metrics(node: &Value, out: &mut BTreeSet<(String, String)>) {
        for (name, m) in node["metrics"].as_object().into_iter().flatten() {
            assert!(
                qprof_core::catalog::describe(name).is_some(),
                "{name} of {} is not in the catalog",
                node["name"]
            );
            out.insert((m["displayName"].to_string(), m["kind"].to_string()));
        }
        // the Spark plan shows each function call's CPU time as a metric of its own
        let calls = &qprof_core::catalog::FUNCTION_CPU_NANOS;
        for call in node["functions"].as_array().into_iter().flatten() {
            let display = calls.display_for(call["expression"].as_str().unwrap());
            out.insert((
                Value::from(display).to_string(),
                Value::from(calls.kind.as_str()).to_string(),
            ));
        }
        for child in node["children"].as_array().into_iter().flatten() {
            profile_metrics(child, out);
        }
    }
    let mut executions: BTreeMap<i64, (BTreeSet<_>, BTreeSet<_>)> = BTreeMap::new();
    for file in common::files_under(events) {
        for line in std::fs::read_to_string(&file).unwrap().lines() {
            let event: Value = serde_json::from_str(line).unwrap();
            let Some(execution) = event["executionId"].as_i64() else {
                continue;
            };
            let (spark, profile) = executions.entry(execution).or_default();
            match event["Event"].as_str().unwrap() {
                "org.apache.spark.sql.execution.ui.SparkListenerSQLExecutionStart" => {
                    spark_metrics(&event["sparkPlanInfo"], spark);
                }
                "org.qprof.eventlog.QueryProfile" => {
                    profile_metrics(&event["profile"]["plan"], profile);
                }
                _ => {}
            }
        }
    }
    executions.retain(|_, (spark, _)| !spark.is_empty());
    executions
}

/// The operators of a profile's plan, in pre-order.
fn operator_names(node: &Value) -> Vec<String> {
    let mut names = vec![node["name"].as_str().unwrap().to_string()];
    for child in node["children"].as_array().into_iter().flatten() {
        names.extend(operator_names(child));
    }
    names
}

/// The bytes of the shuffle files (Arrow IPC) under `dir`.
fn bytes_under(dir: &Path) -> i64 {
    common::files_under(dir)
        .iter()
        .filter(|f| f.extension().is_some_and(|e| e == "arrow"))
        .map(|f| i64::try_from(std::fs::metadata(f).unwrap().len()).unwrap())
        .sum()
}

const ALL: &str = "1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22";

#[test]
fn tpch_on_two_executors_matches_one_process_and_logs_both() {
    let dir = temp_dir("cluster");
    let expected = local_rows(&dir, ALL);
    assert_eq!(expected.len(), 22);
    // the scheduler also sends each job's trace to a collector
    let receiver = Receiver::start("grpc", &dir);
    let cluster = LocalCluster::start_with(
        &dir,
        &["exec-1", "exec-2"],
        &[
            "--otlp-endpoint",
            &receiver.url(),
            "--otlp-protocol",
            "grpc",
        ],
    );
    let client_profiles = dir.join("client-profiles.json");
    // the client runs under a span of its caller's: the scheduler's traces are its children
    let parent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    let out = cluster_run(&cluster, &dir, ALL)
        .arg("--profile-out")
        .arg(&client_profiles)
        .args(["--top", "2"])
        .env("TRACEPARENT", parent)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(printed_rows(&stdout), expected);
    // the client printed each query's profile as one process does, two operators listed
    // under each, and wrote them all
    assert_eq!(
        stdout.matches("top operators by self cpu:").count(),
        22,
        "{stdout}"
    );
    assert!(stdout.contains("#0 ShuffleWriterExec"), "{stdout}");
    let client: Value =
        serde_json::from_str(&std::fs::read_to_string(&client_profiles).unwrap()).unwrap();
    let client = client["queries"].as_array().unwrap().clone();
    assert_eq!(client.len(), 22);
    // every metric of a profile, in one process and on the cluster, is in the metric
    // catalog (and so in the metrics reference)
    let local: Value =
        serde_json::from_slice(&std::fs::read(dir.join("local.json")).unwrap()).unwrap();
    let mut unknown = BTreeMap::new();
    for query in local["queries"].as_array().unwrap().iter().chain(&client) {
        undescribed(&query["plan"], &mut unknown);
    }
    assert!(unknown.is_empty(), "not in the catalog: {unknown:?}");
    // and so is every metric of the event logs, the local run's and the scheduler's: by
    // name in qprof's profile events, by display name and kind among Spark's SQL metrics
    for events in [dir.join("local-events"), cluster.events.clone()] {
        let executions = logged_metrics(&events);
        assert_eq!(executions.len(), 22, "{}", events.display());
        for (execution, (spark, profile)) in executions {
            let unnamed: Vec<_> = spark.difference(&profile).collect();
            assert!(unnamed.is_empty(), "execution {execution}: {unnamed:?}");
        }
    }

    // the scheduler's traces: one per job, tasks on both executors, operators in tasks
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let spans = loop {
        let spans = receiver.spans();
        let queries = spans
            .iter()
            .filter(|s| s["name"].as_str().unwrap().starts_with("query "))
            .count();
        if queries == 22 {
            break spans;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{queries} of 22 traces arrived"
        );
        std::thread::park_timeout(std::time::Duration::from_millis(100));
    };
    // one query span per job, each a child of the client's span, all in its trace
    for query in spans
        .iter()
        .filter(|s| s["name"].as_str().unwrap().starts_with("query "))
    {
        assert_eq!(query["parentSpanId"], "00f067aa0ba902b7", "{query}");
    }
    let traces: BTreeSet<&str> = spans
        .iter()
        .map(|s| s["traceId"].as_str().unwrap())
        .collect();
    assert_eq!(traces, BTreeSet::from(["4bf92f3577b34da6a3ce929d0e0e4736"]));
    let roots: BTreeSet<&str> = spans
        .iter()
        .filter(|s| s["name"].as_str().unwrap().starts_with("query "))
        .map(|s| s["spanId"].as_str().unwrap())
        .collect();
    assert_eq!(roots.len(), 22, "one query span per job");
    let on: BTreeSet<&str> = spans
        .iter()
        .filter_map(|s| s["attributes"]["qprof.executor.id"].as_str())
        .collect();
    assert_eq!(on, BTreeSet::from(["exec-1", "exec-2"]));
    // every job has operator spans under its query span
    let parent_of: HashMap<&str, &str> = spans
        .iter()
        .map(|s| {
            (
                s["spanId"].as_str().unwrap(),
                s["parentSpanId"].as_str().unwrap(),
            )
        })
        .collect();
    fn root_of<'a>(parent_of: &HashMap<&'a str, &'a str>, mut span: &'a str) -> &'a str {
        while let Some(parent) = parent_of.get(span).filter(|p| parent_of.contains_key(*p)) {
            span = parent;
        }
        span
    }
    let mut jobs_with_operators = BTreeSet::new();
    for operator in spans
        .iter()
        .filter(|s| s["attributes"]["qprof.operator.id"].is_i64())
    {
        assert!(
            operator["attributes"]["qprof.outputRows"].is_i64(),
            "{operator}"
        );
        jobs_with_operators.insert(root_of(&parent_of, operator["spanId"].as_str().unwrap()));
    }
    assert_eq!(jobs_with_operators, roots, "a job without operator spans");
    drop(receiver);

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
    let mut remote_read_by_stages = 0;
    let mut fetch_wait_millis_by_stages = 0;
    for stage in stages.as_array().unwrap() {
        remote_read_by_stages += stage["shuffleRemoteBytesRead"].as_i64().unwrap();
        fetch_wait_millis_by_stages += stage["shuffleFetchWaitTime"].as_i64().unwrap();
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
        // a stage that wrote shuffle records wrote bytes of them (Ballista's writers count
        // the bytes of the files they write)
        if stage["shuffleWriteRecords"].as_i64().unwrap() > 0 {
            assert!(
                stage["shuffleWriteBytes"].as_i64().unwrap() > 0,
                "stage {} wrote records and no bytes",
                stage["stageId"]
            );
        }
    }
    assert!(stages_on_both > 0, "no stage ran on both executors");
    // 22 queries, each with a profile whose every operator has the base metrics
    let sql = json(&server, &format!("{base}/sql?length=100"));
    assert_eq!(sql.as_array().unwrap().len(), 22);
    let mut operators = 0;
    let mut shuffled = Shuffled::default();
    for exec in sql.as_array().unwrap() {
        assert_eq!(exec["status"], "COMPLETED", "{exec}");
        let profile = json(
            &server,
            &format!("/qprof/v1/applications/{app}/sql/{}/profile", exec["id"]),
        );
        let query = exec["description"].as_str().unwrap();
        let plan = &profile["query"]["plan"];
        // the client's profile of the query is the one logged: the same operators, the
        // same SQL (the TPC-H text the client ran, not the plan the scheduler received)
        let number: usize = query.trim_start_matches('q').parse().unwrap();
        let mine = &client[number - 1];
        assert_eq!(
            operator_names(&mine["plan"]),
            operator_names(plan),
            "{query}"
        );
        assert_eq!(mine["sql"], profile["query"]["sql"], "{query}");
        assert!(
            mine["sql"]
                .as_str()
                .unwrap()
                .starts_with(&format!("-- TPC-H Q{number}:")),
            "{query}: {}",
            mine["sql"]
        );
        operators += check_operators(plan, query);
        check_shuffles(plan, "", query, &mut shuffled);
        shuffled.final_bytes.push(metric(plan, "outputBytes"));
    }
    assert!(operators > 22 * 5, "{operators} operators");
    // two executors: some of what the readers read came from the other one
    assert!(shuffled.remote_bytes > 0, "no remote shuffle read");
    // a sort shuffle's writer buffers what it writes, in memory it reserves
    assert!(
        shuffled.sort_writer_peak > 0,
        "no sort-shuffle writer held memory"
    );
    // and Spark's stage data says the same
    assert_eq!(remote_read_by_stages, shuffled.remote_bytes);
    // the sort-shuffle writers' own work is measured
    assert!(shuffled.sort_writer_cpu > 0, "no sort-shuffle writer cpu");
    // the readers' tasks waited on their fetches (remote ones cross the network), and
    // Spark's stages say so in whole milliseconds per task
    assert!(shuffled.fetch_wait_nanos > 0, "no fetch wait measured");
    let fetch_wait_millis = shuffled.fetch_wait_nanos / 1_000_000;
    assert!(
        (fetch_wait_millis - shuffled.reader_tasks..=fetch_wait_millis)
            .contains(&fetch_wait_millis_by_stages),
        "stages waited {fetch_wait_millis_by_stages} ms, the readers' {} tasks {} ns",
        shuffled.reader_tasks,
        shuffled.fetch_wait_nanos
    );
    // Ballista removes a job's intermediate shuffle files when it succeeds (in the
    // background) and keeps its last stage's output for 5 minutes: the bytes its writers
    // reported are those files, in the job's last stage's directory
    // job -> stage -> bytes on both executors
    let mut stages: BTreeMap<String, BTreeMap<u32, i64>> = BTreeMap::new();
    for id in ["exec-1", "exec-2"] {
        let work = dir.join(format!("work-{id}"));
        for job in std::fs::read_dir(&work).unwrap().flatten() {
            // a job's directory holds a directory per stage (DataFusion's temporary
            // directories hold none)
            for stage in std::fs::read_dir(job.path()).unwrap().flatten() {
                let Some(number) = stage.file_name().to_str().and_then(|n| n.parse().ok()) else {
                    continue;
                };
                *stages
                    .entry(job.file_name().to_string_lossy().into_owned())
                    .or_default()
                    .entry(number)
                    .or_default() += bytes_under(&stage.path());
            }
        }
    }
    let kept: BTreeMap<String, i64> = stages
        .into_iter()
        .filter_map(|(job, stages)| Some((job, *stages.values().next_back()?)))
        .filter(|(_, bytes)| *bytes > 0)
        .collect();
    assert!(!kept.is_empty(), "no job's output is kept");
    for (job, bytes) in &kept {
        let at = shuffled.final_bytes.iter().position(|b| b == bytes);
        let at = at.unwrap_or_else(|| {
            panic!(
                "job {job} kept {bytes} bytes, no query's last stage wrote that: {:?}",
                shuffled.final_bytes
            )
        });
        shuffled.final_bytes.swap_remove(at);
    }
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
    // each statement's profile, printed as one process prints it
    assert_eq!(
        stdout.matches("top operators by self cpu:").count(),
        2,
        "{stdout}"
    );
    drop(cluster);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// How long a run may take at most, its executor losses included: the executor timeout
/// (5 s), the guard's grace (5 s) and the queries run again, with room for a slow debug
/// build on a busy machine.
const RUN_DEADLINE: Duration = Duration::from_secs(240);

/// A cluster run of `queries` started in the background, its output line by line.
struct Background {
    child: Child,
    stdout: mpsc::Receiver<String>,
    printed: Vec<String>,
}

impl Background {
    fn start(cluster: &LocalCluster, dir: &Path, queries: &str) -> Background {
        let mut child = cluster_run(cluster, dir, queries)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let out = BufReader::new(child.stdout.take().unwrap());
        let (sender, stdout) = mpsc::channel();
        std::thread::spawn(move || {
            for line in out.lines().map_while(Result::ok) {
                let _ = sender.send(line);
            }
        });
        Background {
            child,
            stdout,
            printed: Vec::new(),
        }
    }

    /// Waits until the run prints a line starting with `prefix`.
    fn wait_for_line(&mut self, prefix: &str) {
        let deadline = Instant::now() + RUN_DEADLINE;
        while !self.printed.iter().any(|l| l.starts_with(prefix)) {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.stdout.recv_timeout(left) {
                Ok(line) => self.printed.push(line),
                Err(e) => panic!("the run printed no {prefix:?} ({e}): {:?}", self.printed),
            }
        }
    }

    /// Waits for the run's end (killing it if it does not end by [`RUN_DEADLINE`]):
    /// whether it succeeded, what it printed and its stderr.
    fn finish(mut self) -> (bool, String, String) {
        let deadline = Instant::now() + RUN_DEADLINE;
        let status = loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                break status;
            }
            if Instant::now() >= deadline {
                let _ = self.child.kill();
                panic!("the run did not end: {:?}", self.printed);
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        self.printed.extend(self.stdout.iter());
        let mut stderr = String::new();
        self.child
            .stderr
            .take()
            .unwrap()
            .read_to_string(&mut stderr)
            .unwrap();
        (status.success(), self.printed.join("\n"), stderr)
    }
}

/// The files under executors' work directories now: a later [`wait_for_new_files`]
/// waits for shuffle output written after this.
fn shuffle_files(works: &[PathBuf]) -> Vec<PathBuf> {
    works.iter().flat_map(|w| common::files_under(w)).collect()
}

/// Waits until `works` (executors' work directories) hold a file that `before` did not:
/// shuffle output of a task that ran there since.
fn wait_for_new_files(works: &[PathBuf], before: &[PathBuf]) {
    let deadline = Instant::now() + RUN_DEADLINE;
    while shuffle_files(works).iter().all(|f| before.contains(f)) {
        assert!(Instant::now() < deadline, "no task ran in {works:?}");
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// Waits until a log under `events` holds a line with `text`.
fn wait_for_logged(events: &Path, text: &str) {
    let deadline = Instant::now() + RUN_DEADLINE;
    let logged = || {
        common::files_under(events)
            .iter()
            .any(|f| std::fs::read_to_string(f).is_ok_and(|t| t.contains(text)))
    };
    while !logged() {
        assert!(
            Instant::now() < deadline,
            "no log under {} has {text}",
            events.display()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The application the scheduler logged, as `qprof serve` shows it: its REST base path.
fn logged_app(server: &Server) -> String {
    let apps = json(server, "/api/v1/applications");
    assert_eq!(apps.as_array().unwrap().len(), 1, "{apps}");
    format!("/api/v1/applications/{}", apps[0]["id"].as_str().unwrap())
}

/// Checks the log of a run during which `lost` was killed: the executor is listed
/// removed as lost, the tasks it took down are failed tasks naming it, every query has
/// a completed execution, and each execution the loss failed names the loss.
fn check_loss_logged(server: &Server, lost: &str, queries: usize) {
    let base = logged_app(server);
    let executors = json(server, &format!("{base}/allexecutors"));
    let gone = executors
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["id"] == lost)
        .unwrap_or_else(|| panic!("{lost} is not listed: {executors}"));
    assert_eq!(gone["isActive"], false, "{gone}");
    assert!(
        gone["removeReason"]
            .as_str()
            .unwrap_or("")
            .starts_with("lost")
            || gone["removeReason"]
                .as_str()
                .unwrap_or("")
                .starts_with("removed"),
        "{gone}"
    );
    let sql = json(server, &format!("{base}/sql?length=100"));
    let sql = sql.as_array().unwrap();
    let mut completed: Vec<&str> = sql
        .iter()
        .filter(|e| e["status"] == "COMPLETED")
        .map(|e| e["description"].as_str().unwrap())
        .collect();
    completed.sort_unstable();
    completed.dedup();
    assert_eq!(completed.len(), queries, "{sql:?}");
    for failed in sql.iter().filter(|e| e["status"] == "FAILED") {
        let message = failed["errorMessage"].as_str().unwrap_or("");
        assert!(
            message.contains("ExecutorLostFailure") || message.contains("FetchFailed"),
            "{failed}"
        );
    }
}

#[test]
fn an_executor_killed_while_its_tasks_run_costs_a_rerun_not_the_run() {
    let dir = temp_dir("cluster-kill");
    let queries = "1,9";
    let expected = local_rows(&dir, queries);
    let mut cluster = LocalCluster::start(&dir, &["exec-1", "exec-2"]);
    let mut run = Background::start(&cluster, &dir, queries);
    // the first query's end is logged before the loss
    run.wait_for_line("q1 ");
    let work = [dir.join("work-exec-2")];
    let before = shuffle_files(&work);
    // exec-2 dies as soon as it writes shuffle output of the next query: a task of an
    // early stage ran there, and the stages after it are still to run
    wait_for_new_files(&work, &before);
    cluster.kill("exec-2");
    let (success, printed, stderr) = run.finish();
    assert!(success, "{printed}\n{stderr}");
    assert_eq!(printed_rows(&printed), expected);
    // the query the loss hit was failed, said on one line, and run again
    assert!(!stderr.is_empty(), "no query was run again");
    for line in stderr.lines() {
        assert!(line.ends_with("running it again"), "{stderr}");
        assert!(line.contains("ExecutorLostFailure") || line.contains("FetchFailed"));
    }
    cluster.wait_for("executor exec-2 left");

    let server = Server::start(&cluster.events);
    check_loss_logged(&server, "exec-2", 2);
    // the tasks it took down are failed tasks, with the reason
    let base = logged_app(&server);
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
    // named as Spark names a task its executor's loss took down
    assert!(
        reasons
            .iter()
            .any(|r| r.starts_with("ExecutorLostFailure (executor exec-2 exited")),
        "{reasons:?}"
    );
    drop(server);
    drop(cluster);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn an_executor_killed_between_queries_leaves_the_run_complete() {
    let dir = temp_dir("cluster-idle-kill");
    let queries = "1,3,9";
    let expected = local_rows(&dir, queries);
    let mut cluster = LocalCluster::start(&dir, &["exec-1", "exec-2"]);
    let mut run = Background::start(&cluster, &dir, queries);
    // idle: its tasks of the first query have ended, the next query's are to come (the
    // scheduler learns of the loss when it launches them, or by its heartbeat timeout)
    run.wait_for_line("q1 ");
    cluster.kill("exec-2");
    let (success, printed, stderr) = run.finish();
    assert!(success, "{printed}\n{stderr}");
    assert_eq!(printed_rows(&printed), expected);
    cluster.wait_for("executor exec-2 left");
    let server = Server::start(&cluster.events);
    check_loss_logged(&server, "exec-2", 3);
    drop(server);
    drop(cluster);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn every_executor_killed_fails_the_run_on_one_line_and_keeps_the_log() {
    let dir = temp_dir("cluster-kill-all");
    let queries = "1,9";
    let mut cluster = LocalCluster::start(&dir, &["exec-1", "exec-2"]);
    let mut run = Background::start(&cluster, &dir, queries);
    run.wait_for_line("q1 ");
    let work = [dir.join("work-exec-1")];
    let before = shuffle_files(&work);
    wait_for_new_files(&work, &before);
    cluster.kill("exec-1");
    cluster.kill("exec-2");
    let (success, printed, stderr) = run.finish();
    assert!(!success, "{printed}\n{stderr}");
    // the first query completed; the second failed with one line saying why
    assert_eq!(printed_rows(&printed).len(), 1, "{printed}");
    let last = stderr.lines().last().unwrap_or_default();
    assert!(last.contains("1 of the queries failed"), "{stderr}");
    let failure = stderr
        .lines()
        .find(|l| l.starts_with("error: TPC-H query 9"))
        .unwrap_or_else(|| panic!("{stderr}"));
    assert!(failure.contains("executor"), "{failure}");
    cluster.wait_for("executor exec-1 left");
    cluster.wait_for("executor exec-2 left");
    let server = Server::start(&cluster.events);
    let base = logged_app(&server);
    let sql = json(&server, &format!("{base}/sql?length=100"));
    let sql = sql.as_array().unwrap();
    assert!(
        sql.iter()
            .any(|e| e["description"] == "q1" && e["status"] == "COMPLETED"),
        "{sql:?}"
    );
    assert!(
        sql.iter()
            .any(|e| e["description"] == "q9" && e["status"] == "FAILED"),
        "{sql:?}"
    );
    drop(server);
    drop(cluster);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_scheduler_killed_mid_query_fails_the_client_on_one_line() {
    let dir = temp_dir("cluster-kill-scheduler");
    let mut cluster = LocalCluster::start(&dir, &["exec-1", "exec-2"]);
    let mut run = Background::start(&cluster, &dir, ALL);
    run.wait_for_line("q1 ");
    // the scheduler logs a query's end on a thread of its own: q1 is in the log before
    // the scheduler dies in the middle of a later query (one that writes shuffle output
    // after the log has q1)
    wait_for_logged(&cluster.events, "SparkListenerSQLExecutionEnd");
    let work = [dir.join("work-exec-1"), dir.join("work-exec-2")];
    let before = shuffle_files(&work);
    wait_for_new_files(&work, &before);
    cluster.kill_scheduler();
    let (success, printed, stderr) = run.finish();
    assert!(!success, "{printed}\n{stderr}");
    let errors: Vec<&str> = stderr.lines().collect();
    assert_eq!(errors.len(), 1, "{stderr}");
    assert!(
        errors[0].starts_with("error: TPC-H query ")
            && errors[0].contains(": the scheduler at df://")
            && errors[0].ends_with("stopped answering"),
        "{stderr}"
    );
    // what was logged replays, as an application that did not end
    let server = Server::start(&cluster.events);
    let apps = json(&server, "/api/v1/applications");
    assert_eq!(apps[0]["attempts"][0]["completed"], false, "{apps}");
    let base = logged_app(&server);
    let sql = json(&server, &format!("{base}/sql?length=100"));
    assert!(
        sql.as_array()
            .unwrap()
            .iter()
            .any(|e| e["description"] == "q1" && e["status"] == "COMPLETED"),
        "{sql}"
    );
    drop(server);
    drop(cluster);
    std::fs::remove_dir_all(&dir).unwrap();
}
