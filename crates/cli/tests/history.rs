//! End to end: `qprof sql` / `qprof run` leave event logs; `qprof serve` serves them to
//! spark-history-cli 1.5.0 and to a real headless Chromium.
//!
//! Needs what `scripts/install-test-deps.sh` installs (Chromium, and a virtualenv with
//! spark-history-cli in `target/test-venv`).

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};

use common::http_get;
use common::served::{
    Server, chromium, every_command, first_address, qprof, shc_ok, temp_dir, workspace,
};
use serde_json::Value;

mod common;

/// Writes a small CSV table and runs `qprof sql` over it with the event log in `events`.
fn sql_app(dir: &Path, events: &Path, sql: &str) -> std::process::Output {
    let csv = dir.join("t.csv");
    let mut text = String::from("k,v\n");
    for i in 0..2000 {
        text.push_str(&format!("{},{}\n", i % 7, i));
    }
    std::fs::write(&csv, text).unwrap();
    qprof()
        .args(["sql", sql, "--partitions", "2", "--table"])
        .arg(format!("t={}", csv.display()))
        .arg("--event-log-dir")
        .arg(events)
        .output()
        .unwrap()
}

/// Runs `sql` with [`sql_app`] and serves its log: the server and the application's id.
fn served_sql_app(dir: &Path, sql: &str) -> (Server, String) {
    let events = dir.join("events");
    let out = sql_app(dir, &events, sql);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let server = Server::start(&events);
    let apps: Value = serde_json::from_str(&shc_ok(&server, &["--json", "apps"])).unwrap();
    let app = apps[0]["id"].as_str().unwrap().to_string();
    assert_eq!(apps[0]["attempts"][0]["completed"], true);
    (server, app)
}

#[test]
fn spark_history_cli_reads_qprof_logs_and_spark_logs() {
    let dir = temp_dir("shc");
    let (server, app) = served_sql_app(
        &dir,
        "select k, count(*) as n, sum(v) as s from t group by k order by k",
    );
    every_command(&server, &app, true, &dir);
    drop(server);
    let oracle = workspace().join("testdata/spark-4.3/events");
    let server = Server::start(&oracle);
    every_command(&server, "local-1795333320377", false, &dir);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_failed_query_is_logged_as_failed_and_the_app_completes() {
    let dir = temp_dir("failed");
    let events = dir.join("events");
    // fails while running (a cast error in a task), after planning
    let out = sql_app(&dir, &events, "select cast(concat('x', k) as int) from t");
    assert!(!out.status.success());
    let (lines, complete) = logged_app(&events);
    assert!(complete);
    let end = lines
        .iter()
        .find(|e| e["Event"].as_str().unwrap().ends_with("SQLExecutionEnd"))
        .unwrap();
    let message = end["errorMessage"].as_str().unwrap();
    assert!(
        message.contains("Cast error") || message.contains("cast"),
        "{message}"
    );
    let app_end = lines.last().unwrap();
    assert_eq!(app_end["Event"], "SparkListenerApplicationEnd");
    assert_eq!(app_end["ExitCode"], 1);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn spark_history_cli_shows_a_joins_phases() {
    let dir = temp_dir("phases");
    let (server, app) = served_sql_app(
        &dir,
        "select a.k, count(*) as n from t a join t b on a.k = b.k group by a.k order by a.k",
    );
    let plan = shc_ok(&server, &["--json", "-a", &app, "sql", "0"]);
    for name in [
        "number of hash build input rows",
        "number of hash probe input rows",
        "time of hash build",
        "time of hash probe",
        "hash build peak memory bytes",
    ] {
        assert!(plan.contains(name), "no {name} in\n{plan}");
    }
    drop(server);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_query_over_the_memory_limit_fails_its_tasks_and_the_run_goes_on() {
    let dir = temp_dir("pressure");
    let (events, spill) = (dir.join("events"), dir.join("spill"));
    std::fs::create_dir_all(&spill).unwrap();
    let script = dir.join("script.sql");
    // a hash join's build side cannot spill: 2M rows do not fit in 16 MiB; one partition,
    // so that the aggregation, alone in the pool, spills (two partitions race for it, and
    // one left without memory fails instead)
    std::fs::write(
        &script,
        "SELECT count(*) AS n FROM generate_series(1, 2000000) AS a(x) \
         JOIN generate_series(1, 2000000) AS b(y) ON x = y;\n\
         SELECT count(*) AS groups FROM (SELECT v % 1000000 AS g, count(*) AS c \
         FROM generate_series(1, 3000000) AS s(v) GROUP BY v % 1000000);\n",
    )
    .unwrap();
    let profiles = dir.join("profiles.json");
    let out = qprof()
        .args(["sql", "-f"])
        .arg(&script)
        .args(["--memory-limit", "16M", "--partitions", "1", "--top", "0"])
        .arg("--profile-out")
        .arg(&profiles)
        .arg("--spill-dir")
        .arg(&spill)
        .arg("--event-log-dir")
        .arg(&events)
        .output()
        .unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(!out.status.success());
    // one line for the failure when it happens, one for the run at its end
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(lines.len(), 2, "{stderr}");
    assert!(
        lines[0].starts_with("statement 1 failed: Resources exhausted"),
        "{stderr}"
    );
    assert!(lines[1].contains("statement 1 failed"), "{stderr}");
    // the second statement ran, spilling its aggregation, and printed its answer
    assert!(stdout.contains("| 1000000 |"), "{stdout}");
    let doc: Value = serde_json::from_slice(&std::fs::read(&profiles).unwrap()).unwrap();
    let queries = doc["queries"].as_array().unwrap();
    assert_eq!(queries.len(), 2, "the failed query's profile is kept");
    let failed_tasks: Vec<&Value> = queries[0]["stages"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|s| s["tasks"].as_array().unwrap())
        .filter(|t| t["error"].is_string())
        .collect();
    assert!(!failed_tasks.is_empty(), "no failed task in the profile");
    let mut spilled = 0;
    let mut nodes = vec![&queries[1]["plan"]];
    while let Some(node) = nodes.pop() {
        let metric = |name: &str| node["metrics"][name]["value"].as_i64();
        if let Some(files) = metric("spillFilesCreated").filter(|f| *f > 0) {
            // files counted as they were made, as many as DataFusion counted
            assert_eq!(Some(files), metric("spilledFiles"), "{}", node["name"]);
            spilled += files;
        }
        nodes.extend(node["children"].as_array().unwrap());
    }
    assert!(spilled > 0, "nothing spilled under the limit");

    let (lines, complete) = logged_app(&events);
    assert!(complete);
    let failed: Vec<&Value> = lines
        .iter()
        .filter(|e| e["Event"] == "SparkListenerTaskEnd")
        .filter(|e| e["Task End Reason"]["Reason"] == "ExceptionFailure")
        .collect();
    assert!(!failed.is_empty(), "no failed task in the log");
    for task in &failed {
        assert_eq!(task["Task Info"]["Failed"], true);
        let reason = &task["Task End Reason"];
        assert_eq!(
            reason["Class Name"],
            "org.apache.datafusion.ResourcesExhausted"
        );
        assert!(
            reason["Description"]
                .as_str()
                .unwrap()
                .contains("HashJoinInput")
        );
    }
    let ends: Vec<&Value> = lines
        .iter()
        .filter(|e| e["Event"].as_str().unwrap().ends_with("SQLExecutionEnd"))
        .collect();
    assert_eq!(ends.len(), 2);
    assert_ne!(ends[0]["errorMessage"], "");
    assert_eq!(ends[1]["errorMessage"], "", "the second query succeeded");
    let spill_files = std::fs::read_dir(&spill).unwrap().count();
    assert_eq!(spill_files, 0, "spill files are removed once read back");

    // the REST API lists the failed tasks with their reason
    let server = Server::start(&events);
    let port: u16 = server.url.rsplit(':').next().unwrap().parse().unwrap();
    let (status, body) = http_get(port, "/api/v1/applications").unwrap();
    assert_eq!(status, 200);
    let apps: Value = serde_json::from_slice(&body).unwrap();
    let app = apps[0]["id"].as_str().unwrap();
    let path = format!("/api/v1/applications/{app}/stages?details=true&taskStatus=FAILED");
    let (status, body) = http_get(port, &path).unwrap();
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
    let stages: Value = serde_json::from_slice(&body).unwrap();
    let tasks: Vec<&Value> = stages
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|s| s["tasks"].as_object())
        .flat_map(|t| t.values())
        .collect();
    assert_eq!(tasks.len(), failed.len(), "{stages:#}");
    for task in tasks {
        assert_eq!(task["status"], "FAILED");
        let message = task["errorMessage"].as_str().unwrap();
        assert!(message.starts_with("Resources exhausted"), "{message}");
    }
    // spark-history-cli shows the second query's spilling under the seed's names
    let plan = shc_ok(&server, &["--json", "-a", app, "sql", "1"]);
    for name in [
        "total spilled files",
        "bytes written for spilling",
        "total rows written for spilling",
        "total spilled partitions",
        "rows written to spill files",
    ] {
        assert!(plan.contains(name), "no {name} in\n{plan}");
    }
    // Prometheus' own parser reads /metrics: the run's queries by status, its spilling
    // (as much as its operators wrote), its executor's memory peaks
    let (status, body) = http_get(port, "/metrics").unwrap();
    assert_eq!(status, 200);
    let samples = prometheus_samples(&body);
    let sample = |name: &str, label: (&str, &str)| -> f64 {
        samples
            .iter()
            .find(|s| s["name"] == name && s["labels"][label.0] == label.1)
            .unwrap_or_else(|| panic!("no {name} {label:?} in {samples:#?}"))["value"]
            .as_f64()
            .unwrap()
    };
    assert_eq!(sample("qprof_queries", ("status", "failed")), 1.0);
    assert_eq!(sample("qprof_queries", ("status", "succeeded")), 1.0);
    assert_eq!(sample("qprof_applications", ("status", "completed")), 1.0);
    let written: i64 = queries
        .iter()
        .flat_map(|q| {
            let mut nodes = vec![&q["plan"]];
            let mut values = Vec::new();
            while let Some(node) = nodes.pop() {
                values.extend(node["metrics"]["spillWrittenBytes"]["value"].as_i64());
                nodes.extend(node["children"].as_array().unwrap());
            }
            values
        })
        .sum();
    // what the tasks spilled, as their ends logged it: the operators' spilling but for
    // work of no task (a repartition's input side), which Spark's task metrics cannot hold
    let logged: i64 = lines
        .iter()
        .filter(|e| e["Event"] == "SparkListenerTaskEnd")
        .filter_map(|e| e["Task Metrics"]["Disk Bytes Spilled"].as_i64())
        .sum();
    assert!(logged > 0 && logged <= written, "{logged} of {written}");
    assert_eq!(
        sample("qprof_spilled_bytes_total", ("app", app)),
        logged as f64
    );
    for metric in [
        "JVMHeapMemory",
        "OffHeapExecutionMemory",
        "ProcessTreeJVMRSSMemory",
    ] {
        assert!(sample("qprof_executor_peak_memory_bytes", ("metric", metric)) > 0.0);
    }
    // the web UI's page of the failed stage shows its failed tasks with their reason
    let stage = stages
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["status"] == "FAILED")
        .expect("a failed stage");
    let dom = chromium(
        &["--dump-dom"],
        &format!(
            "{}/#/app/{app}/stage/{}/{}",
            server.url, stage["stageId"], stage["attemptId"]
        ),
    );
    let html = String::from_utf8_lossy(&dom.stdout);
    assert!(
        html.contains("task-row failed") && html.contains("Resources exhausted"),
        "no failed task on the stage page:\n{html}"
    );
    // the advisor flagged the spilling aggregation: in the CLI's output, the profile and
    // on the query's page
    let finding = queries[1]["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["rule"] == "spill")
        .expect("a spill finding in the profile");
    let message = finding["message"].as_str().unwrap();
    // a warning exactly when its cost is material (10 ms and 5 % of the query's); a minor
    // one is folded in the text
    let cost = &finding["cost"];
    let material = cost["amount"].as_u64().unwrap() >= 10_000_000
        && cost["sharePermille"].as_u64().unwrap() >= 50;
    if material {
        assert_eq!(finding["severity"], "warn");
        assert!(
            stdout.contains(&format!("[warn] spill: {message}\n")),
            "{stdout}"
        );
    } else {
        assert_eq!(finding["severity"], "info");
        assert!(!stdout.contains(message), "{stdout}");
        assert!(
            stdout
                .lines()
                .any(|l| l.contains(" minor: ") && l.contains("spill")),
            "{stdout}"
        );
    }
    // a warning is ranked, a minor one not; each with what it cost and its fix
    assert_eq!(
        finding["rank"].as_u64().is_some_and(|r| r >= 1),
        material,
        "{finding}"
    );
    assert_eq!(finding["cost"]["kind"], "taskTime");
    assert!(
        finding["action"].as_str().unwrap().contains("more memory"),
        "{finding}"
    );
    let dom = chromium(
        &["--dump-dom"],
        &format!("{}/#/app/{app}/sql/1", server.url),
    );
    let html = String::from_utf8_lossy(&dom.stdout);
    assert!(
        html.contains("id=\"findings\"")
            && html.contains("data-rule=\"spill\"")
            && html.contains("class=\"finding-action\""),
        "no findings on the query page:\n{html}"
    );
    drop(server);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_run_serves_its_live_ui_while_its_query_runs() {
    let dir = temp_dir("live");
    let events = dir.join("events");
    // 20 G row pairs: most of a minute of work in one query, so that it still runs while
    // a browser starts (itself up to 20 s on a loaded machine) and loads the page
    let mut child = qprof()
        .args([
            "sql",
            "SELECT count(*) AS n FROM generate_series(1, 200000) AS a(x) \
             CROSS JOIN generate_series(1, 100000) AS b(y) WHERE (x + y) % 7 = 3",
            "--top",
            "0",
            "--ui",
            "127.0.0.1:0",
            "--event-log-dir",
        ])
        .arg(&events)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let url = first_address(&mut BufReader::new(child.stderr.take().unwrap()));
    let port: u16 = url.rsplit(':').next().unwrap().parse().unwrap();
    let json = |path: &str| -> Value {
        let (status, body) = http_get(port, path).unwrap_or_else(|| panic!("no answer for {path}"));
        assert_eq!(status, 200, "{path}: {}", String::from_utf8_lossy(&body));
        serde_json::from_slice(&body).unwrap()
    };
    // the running query, its progress and the memory now (a query is running once it is
    // planned, before its first task starts: wait for one)
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let live = loop {
        let live = json("/qprof/v1/live");
        if live["running"]
            .as_array()
            .and_then(|r| r.first())
            .is_some_and(|q| q["tasks"].as_u64() > Some(0))
        {
            break live;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no running query with a task: {live}"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    let query = &live["running"][0];
    assert!(query["sql"].as_str().unwrap().contains("CROSS JOIN"));
    assert!(query["tasks"].as_u64().unwrap() > 0, "{live}");
    // how far it got: below 100 % while it runs, each stage's share too
    let progress = query["progress"].as_f64().unwrap();
    assert!((0.0..1.0).contains(&progress), "{live}");
    let stages = query["stageProgress"].as_array().unwrap();
    assert!(!stages.is_empty(), "{live}");
    assert!(
        stages
            .iter()
            .all(|s| (0.0..=1.0).contains(&s["progress"].as_f64().unwrap())),
        "{live}"
    );
    assert!(live["memory"]["rssBytes"].as_u64().unwrap() > 0, "{live}");
    assert!(live["memory"]["heapBytes"].as_u64().unwrap() > 0, "{live}");
    // the application, running, and its page with the running query
    let apps = json("/api/v1/applications");
    let app = apps[0]["id"].as_str().unwrap().to_string();
    assert_eq!(apps[0]["attempts"][0]["completed"], false);
    // Spark's REST API has the running query's execution, job and active stages
    let stages_url = format!("/api/v1/applications/{app}/stages");
    let active = loop {
        let active = json(&format!("{stages_url}?status=active"));
        if active.as_array().is_some_and(|a| !a.is_empty()) {
            break active;
        }
        assert!(std::time::Instant::now() < deadline, "no active stage");
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    let active = active.as_array().unwrap().clone();
    assert!(active.iter().all(|s| s["status"] == "ACTIVE"), "{active:?}");
    assert!(
        active.iter().all(|s| s["numTasks"].as_u64() > Some(0)),
        "{active:?}"
    );
    let jobs = json(&format!("/api/v1/applications/{app}/jobs"));
    assert_eq!(jobs.as_array().unwrap().len(), 1, "{jobs}");
    assert_eq!(jobs[0]["status"], "RUNNING", "{jobs}");
    let sql = json(&format!("/api/v1/applications/{app}/sql"));
    assert_eq!(sql[0]["status"], "RUNNING", "{sql}");
    let active_id = active[0]["stageId"].clone();
    let dom = chromium(&["--dump-dom"], &format!("{url}/#/app/{app}"));
    let html = String::from_utf8_lossy(&dom.stdout);
    assert!(
        html.contains("id=\"live\"")
            && html.contains("live-query-row")
            && html.contains("class=\"live-progress\""),
        "no running query on the application's page:\n{html}"
    );
    assert!(
        html.contains(&format!(
            "class=\"stage-row active\" data-stage-id=\"{active_id}\""
        )),
        "no active stage {active_id} on the application's page:\n{html}"
    );
    // its /metrics adds live gauges, which move while the query runs
    let live_gauges = || {
        let (status, body) = http_get(port, "/metrics").unwrap();
        assert_eq!(status, 200);
        let samples = prometheus_samples(&body);
        let value = |name: &str| {
            samples
                .iter()
                .find(|s| s["name"] == name)
                .unwrap_or_else(|| panic!("no {name} in {samples:#?}"))["value"]
                .as_f64()
                .unwrap()
        };
        let rss = samples
            .iter()
            .find(|s| s["name"] == "qprof_live_memory_bytes" && s["labels"]["region"] == "rss")
            .expect("the memory now")["value"]
            .as_f64()
            .unwrap();
        (
            value("qprof_live_running_queries"),
            value("qprof_live_query_elapsed_seconds"),
            rss,
            value("qprof_live_query_progress_ratio"),
        )
    };
    let (running, elapsed, rss, progress) = live_gauges();
    assert_eq!(running, 1.0);
    assert!((0.0..1.0).contains(&progress), "{progress}");
    assert!(rss > 0.0);
    // the query's elapsed time moves on while it runs
    loop {
        let (running_later, elapsed_later, _, _) = live_gauges();
        assert_eq!(running_later, 1.0);
        if elapsed_later > elapsed {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{elapsed} then {elapsed_later}"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    // the run ends, and its UI with it; the log replays the query
    assert!(child.wait().unwrap().success());
    assert!(
        http_get(port, "/api/v1/applications").is_none(),
        "still serving"
    );
    let server = Server::start(&events);
    let sqls: Value =
        serde_json::from_str(&shc_ok(&server, &["--json", "-a", &app, "sql"])).unwrap();
    assert_eq!(sqls.as_array().unwrap().len(), 1);
    assert_eq!(sqls[0]["status"], "COMPLETED");
    // the stages that were active are the log's, under the same ids, names and tasks
    let (status, body) = http_get(server.port(), &stages_url).unwrap();
    assert_eq!(status, 200);
    let logged: Value = serde_json::from_slice(&body).unwrap();
    for stage in &active {
        let same = logged
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["stageId"] == stage["stageId"])
            .unwrap_or_else(|| panic!("stage {} not in the log: {logged}", stage["stageId"]));
        assert_eq!(same["status"], "COMPLETE");
        assert_eq!(same["name"], stage["name"]);
        // a running stage counts the tasks that started by then
        let (live_tasks, logged_tasks) = (stage["numTasks"].as_u64(), same["numTasks"].as_u64());
        assert!(
            live_tasks > Some(0) && live_tasks <= logged_tasks,
            "{live_tasks:?} tasks live, {logged_tasks:?} logged"
        );
    }
    drop(server);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The samples of a Prometheus text exposition, as parsed by the Python client's own
/// parser: name, labels and value of each.
fn prometheus_samples(text: &[u8]) -> Vec<Value> {
    let python = workspace().join("target/test-venv/bin/python");
    let script = "import sys, json\n\
        from prometheus_client.parser import text_string_to_metric_families\n\
        out = [{'name': s.name, 'labels': s.labels, 'value': s.value}\n\
               for f in text_string_to_metric_families(sys.stdin.read()) for s in f.samples]\n\
        print(json.dumps(out))";
    let mut child = Command::new(python)
        .args(["-c", script])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the test venv's python: run scripts/install-test-deps.sh first");
    std::io::Write::write_all(&mut child.stdin.take().unwrap(), text).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "the parser refused /metrics: {}\n{}",
        String::from_utf8_lossy(&out.stderr),
        String::from_utf8_lossy(text)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// The events of the one application logged in `events`, and whether it completed.
fn logged_app(events: &Path) -> (Vec<Value>, bool) {
    let app_dir = std::fs::read_dir(events)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let names: Vec<String> = std::fs::read_dir(&app_dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    let complete = names
        .iter()
        .any(|n| n.starts_with("appstatus_") && !n.ends_with(".inprogress"));
    let events_file = names.iter().find(|n| n.starts_with("events_1_")).unwrap();
    let text = std::fs::read_to_string(app_dir.join(events_file)).unwrap();
    let lines = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    (lines, complete)
}

#[test]
fn a_run_failing_after_its_queries_completes_its_log_as_failed() {
    let dir = temp_dir("late-failure");
    let events = dir.join("events");
    let csv = dir.join("t.csv");
    std::fs::write(&csv, "k,v\n1,2\n").unwrap();
    // the query succeeds; writing --profile-out where a directory stands fails at the end
    // (a missing directory is refused before the run)
    let taken = dir.join("p.json");
    std::fs::create_dir_all(&taken).unwrap();
    let out = qprof()
        .args(["sql", "select k from t", "--table"])
        .arg(format!("t={}", csv.display()))
        .arg("--profile-out")
        .arg(&taken)
        .arg("--event-log-dir")
        .arg(&events)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("cannot write profiles"), "{stderr}");
    let (lines, complete) = logged_app(&events);
    assert!(complete);
    let end = lines
        .iter()
        .find(|e| e["Event"].as_str().unwrap().ends_with("SQLExecutionEnd"))
        .unwrap();
    assert_eq!(end["errorMessage"], "", "the query itself succeeded");
    let app_end = lines.last().unwrap();
    assert_eq!(app_end["Event"], "SparkListenerApplicationEnd");
    assert_eq!(app_end["ExitCode"], 1);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_killed_run_leaves_an_in_progress_log_that_replays() {
    let dir = temp_dir("killed");
    let events = dir.join("events");
    let data = dir.join("data");
    let mut child = qprof()
        .args(["run", "--tpch", "0.01", "--top", "0", "--data-dir"])
        .arg(&data)
        .arg("--event-log-dir")
        .arg(&events)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // wait until some queries are logged, then kill -9
    let mut reader = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    let mut profiles = 0;
    while profiles < 3 && reader.read_line(&mut line).unwrap() > 0 {
        if line.starts_with("query ") || line.contains("rows in") {
            profiles += 1;
        }
        line.clear();
    }
    child.kill().unwrap();
    child.wait().unwrap();
    let server = Server::start(&events);
    let apps: Value =
        serde_json::from_str(&shc_ok(&server, &["--json", "apps", "--status", "running"])).unwrap();
    assert_eq!(apps.as_array().unwrap().len(), 1, "{apps}");
    let app = apps[0]["id"].as_str().unwrap();
    let sql: Value = serde_json::from_str(&shc_ok(&server, &["--json", "-a", app, "sql"])).unwrap();
    assert!(!sql.as_array().unwrap().is_empty());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn bench_history_serves_a_directory_of_copies_and_reports_each_measure() {
    let dir = temp_dir("bench-history");
    let from = dir.join("from");
    qprof_eventlog::fixtures::copy_oracle_app(&from, "local-7");
    let work = dir.join("work");
    let out = qprof()
        .args([
            "bench",
            "history",
            "--apps",
            "12",
            "--requests",
            "5",
            "--reopen",
            "3",
        ])
        .arg("--from")
        .arg(&from)
        .arg("--dir")
        .arg(&work)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for expected in [
        "12 copies of",
        "all 12 listed",
        "(1 skipped: eventlog_v2_unreadable-1",
        "/applications/<id>/jobs, 10 apps",
        "/applications/<id>/jobs, 12 apps",
        "opened all 12",
        "12 loads",
        "reopen 3 apps after a restart",
    ] {
        assert!(stdout.contains(expected), "{expected:?} not in:\n{stdout}");
    }
    assert!(!work.exists(), "the copies are removed without --keep");
    // a directory that is not the benchmark's own is refused, and left as it was
    let theirs = dir.join("theirs");
    std::fs::create_dir_all(&theirs).unwrap();
    std::fs::write(theirs.join("precious.txt"), "keep me").unwrap();
    for target in [&theirs, &from] {
        let before = std::fs::read_dir(target).unwrap().count();
        let out = qprof()
            .args(["bench", "history", "--apps", "10", "--from"])
            .arg(&from)
            .arg("--dir")
            .arg(target)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success());
        assert!(
            stderr.contains("not empty and not an earlier run's"),
            "{stderr}"
        );
        assert_eq!(std::fs::read_dir(target).unwrap().count(), before);
    }
    assert_eq!(
        std::fs::read_to_string(theirs.join("precious.txt")).unwrap(),
        "keep me"
    );
    // nothing to copy: one line, and a failure
    let empty = dir.join("empty");
    std::fs::create_dir_all(&empty).unwrap();
    let out = qprof()
        .args(["bench", "history", "--from"])
        .arg(&empty)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        stderr.contains("no complete, uncompressed rolling log")
            && stderr
                .lines()
                .filter(|l| !l.starts_with("warning:"))
                .count()
                == 1,
        "{stderr}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
