//! Spark's own history server reads qprof's event logs (of `qprof run`, of a failing
//! `qprof sql`, of a program embedding qprof, and of a run on a two-executor cluster,
//! which its scheduler wrote) and answers every REST endpoint as
//! `qprof serve` does: the proof that qprof's logs are Spark logs.
//!
//! Needs Java and the pyspark 4.3.0 that `scripts/install-test-deps.sh` installs in
//! `target/test-venv`.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::cluster::{LocalCluster, Process, free_port};
use common::{http_get, tpch_event_log};
use qprof_eventlog::compare::{first_difference, strip_host_fields};
use serde_json::Value;

mod common;

fn qprof() -> Command {
    Command::new(env!("CARGO_BIN_EXE_qprof"))
}

fn workspace() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn spark_home() -> PathBuf {
    let lib = workspace().join("target/test-venv/lib");
    std::fs::read_dir(&lib)
        .ok()
        .into_iter()
        .flatten()
        .map(|e| e.unwrap().path().join("site-packages/pyspark"))
        .find(|p| p.join("bin/spark-class").exists())
        .expect("pyspark is missing: run scripts/install-test-deps.sh first")
}

/// What spark-history-cli prints as JSON for `args` against the server on `port`.
fn history_cli_json(port: u16, args: &[String]) -> Value {
    let cli = workspace().join("target/test-venv/bin/spark-history-cli");
    let out = Command::new(&cli)
        .args(["--server", &format!("http://127.0.0.1:{port}"), "--json"])
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", cli.display()));
    assert!(
        out.status.success(),
        "spark-history-cli {args:?} against port {port} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "spark-history-cli {args:?} printed no JSON ({e}): {}",
            String::from_utf8_lossy(&out.stdout)
        )
    })
}

fn json(port: u16, path: &str) -> Value {
    let (status, body) = http_get(port, path).unwrap_or_else(|| panic!("no answer for {path}"));
    assert_eq!(status, 200, "{path}: {}", String::from_utf8_lossy(&body));
    serde_json::from_slice(&body).unwrap()
}

fn make_logs(dir: &Path) -> PathBuf {
    let events = tpch_event_log(dir, Some("1,3,13,21"));
    // and an application whose query fails while running
    let out = qprof()
        .args([
            "sql",
            "select cast(concat('x', n_name) as int) from nation",
            "--table",
        ])
        .arg(format!(
            "nation={}",
            dir.join("data/nation.parquet").display()
        ))
        .arg("--event-log-dir")
        .arg(&events)
        .output()
        .unwrap();
    assert!(!out.status.success());
    // and the log of a program that embeds qprof (the keep_event_log example)
    let embedded = dir.join("embedded");
    std::fs::create_dir_all(&embedded).unwrap();
    let out = Command::new(example("keep_event_log"))
        .current_dir(&embedded)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for app in std::fs::read_dir(embedded.join("qprof-events")).unwrap() {
        let app = app.unwrap();
        std::fs::rename(app.path(), events.join(app.file_name())).unwrap();
    }
    // and the log of a client session on a cluster of two executors, which its
    // scheduler wrote
    let cluster_dir = dir.join("cluster");
    std::fs::create_dir_all(&cluster_dir).unwrap();
    let cluster = LocalCluster::start(&cluster_dir, &["exec-1", "exec-2"]);
    let out = qprof()
        .args(["run", "--tpch", "0.01", "--queries", "1,3", "--cluster"])
        .arg(&cluster.url)
        .arg("--data-dir")
        .arg(dir.join("data"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for app in std::fs::read_dir(&cluster.events).unwrap() {
        let app = app.unwrap();
        std::fs::rename(app.path(), events.join(app.file_name())).unwrap();
    }
    events
}

/// The example binary `name`, which `cargo test` builds next to this test (or built now).
fn example(name: &str) -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let path = exe
        .parent()
        .and_then(Path::parent)
        .unwrap()
        .join("examples")
        .join(name);
    if !path.exists() {
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_string());
        let status = Command::new(cargo)
            .args(["build", "-p", "qprof-examples", "--example", name])
            .current_dir(workspace())
            .status()
            .unwrap();
        assert!(status.success(), "cannot build example {name}");
    }
    path
}

#[test]
fn spark_history_server_answers_like_qprof_serve_on_qprof_logs() {
    let dir = std::env::temp_dir().join(format!("qprof-spark-shs-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let events = make_logs(&dir);
    let spark_port = free_port();
    let spark_home = spark_home();
    let spark = Process(
        Command::new(spark_home.join("bin/spark-class"))
            .arg("org.apache.spark.deploy.history.HistoryServer")
            .env("SPARK_HOME", &spark_home)
            .env(
                "SPARK_HISTORY_OPTS",
                format!(
                    "-Dspark.history.fs.logDirectory=file://{} -Dspark.history.ui.port={spark_port} -Dspark.history.fs.update.interval=1s",
                    events.display()
                ),
            )
            .env("SPARK_LOG_DIR", dir.join("spark-logs"))
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(dir.join("shs.log")).unwrap())
            .spawn()
            .expect("spark-class runs (is Java installed?)"),
    );
    let mut serve = qprof()
        .args(["serve", "--port", "0", "--log-dir"])
        .arg(&events)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    let mut out = BufReader::new(serve.stdout.take().unwrap());
    out.read_line(&mut line).unwrap();
    // qprof's listing is whole once it says its first scan ended
    let mut scanned = String::new();
    out.read_line(&mut scanned).unwrap();
    assert!(scanned.starts_with("first scan: "), "{scanned:?}");
    let _serve = Process(serve);
    let qprof_port: u16 = line
        .rsplit(':')
        .next()
        .and_then(|p| p.trim().trim_end_matches('/').parse().ok())
        .unwrap_or_else(|| panic!("no port in {line:?}"));
    // Spark's server scans the directory in the background
    let deadline = Instant::now() + Duration::from_secs(240);
    loop {
        let listed = http_get(spark_port, "/api/v1/applications")
            .filter(|(s, _)| *s == 200)
            .and_then(|(_, b)| serde_json::from_slice::<Value>(&b).ok())
            .map_or(0, |v| v.as_array().map_or(0, Vec::len));
        if listed == 4 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "Spark's history server did not list the applications: {}",
            std::fs::read_to_string(dir.join("shs.log")).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    let apps = json(spark_port, "/api/v1/applications");
    let mut paths = vec!["/api/v1/applications".to_string()];
    for app in apps.as_array().unwrap() {
        let id = app["id"].as_str().unwrap();
        let base = format!("/api/v1/applications/{id}/1");
        paths.extend([
            format!("/api/v1/applications/{id}"),
            base.clone(),
            format!("{base}/jobs"),
            format!("{base}/stages"),
            format!("{base}/stages?withSummaries=true"),
            format!("{base}/executors"),
            format!("{base}/allexecutors"),
            format!("{base}/environment"),
            format!("{base}/sql"),
        ]);
        for stage in json(spark_port, &format!("{base}/stages"))
            .as_array()
            .unwrap()
        {
            let s = &stage["stageId"];
            paths.push(format!("{base}/stages/{s}/0"));
            paths.push(format!("{base}/stages/{s}/0/taskList?length=1000"));
            if stage["numCompleteTasks"].as_i64().unwrap() > 0 {
                paths.push(format!("{base}/stages/{s}/0/taskSummary"));
            }
        }
        for exec in json(spark_port, &format!("{base}/sql")).as_array().unwrap() {
            paths.push(format!(
                "{base}/sql/{}?details=true&planDescription=true",
                exec["id"]
            ));
        }
    }
    let mut failures = Vec::new();
    for path in &paths {
        let mut spark_json = json(spark_port, path);
        let mut qprof_json = json(qprof_port, path);
        strip_host_fields(&mut spark_json);
        strip_host_fields(&mut qprof_json);
        if let Some(d) = first_difference(path, &qprof_json, &spark_json) {
            failures.push(d);
        }
    }
    // spark-history-cli, a client of Spark's REST API, prints the same JSON from both
    let mut commands: Vec<Vec<String>> = vec![vec!["apps".to_string()]];
    for app in apps.as_array().unwrap() {
        let id = app["id"].as_str().unwrap().to_string();
        let on = |args: &[&str]| -> Vec<String> {
            ["-a", id.as_str()]
                .iter()
                .chain(args)
                .map(|a| a.to_string())
                .collect()
        };
        commands.push(vec!["app".to_string(), id.clone()]);
        for args in [
            &["jobs"][..],
            &["stages"],
            &["executors", "--all"],
            &["sql"],
            &["env"],
            &["summary"],
        ] {
            commands.push(on(args));
        }
        let base = format!("/api/v1/applications/{id}/1");
        for stage in json(spark_port, &format!("{base}/stages"))
            .as_array()
            .unwrap()
        {
            let s = stage["stageId"].to_string();
            commands.push(on(&["stage", &s]));
            commands.push(on(&["stage-tasks", &s]));
            if stage["numCompleteTasks"].as_i64().unwrap() > 0 {
                commands.push(on(&["stage-summary", &s]));
            }
        }
        for exec in json(spark_port, &format!("{base}/sql")).as_array().unwrap() {
            commands.push(on(&["sql", &exec["id"].to_string()]));
        }
        for job in json(spark_port, &format!("{base}/jobs"))
            .as_array()
            .unwrap()
        {
            commands.push(on(&["job", &job["jobId"].to_string()]));
        }
    }
    for args in &commands {
        let mut spark_json = history_cli_json(spark_port, args);
        let mut qprof_json = history_cli_json(qprof_port, args);
        strip_host_fields(&mut spark_json);
        strip_host_fields(&mut qprof_json);
        if let Some(d) = first_difference(&args.join(" "), &qprof_json, &spark_json) {
            failures.push(format!("spark-history-cli {d}"));
        }
    }
    drop(spark);
    assert!(paths.len() > 60, "only {} endpoints compared", paths.len());
    assert!(
        commands.len() > 40,
        "only {} commands compared",
        commands.len()
    );
    assert!(
        failures.is_empty(),
        "{} of {} endpoints and commands differ:\n{}",
        failures.len(),
        paths.len() + commands.len(),
        failures.join("\n")
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn bench_replay_times_both_servers_on_the_same_application() {
    let events = workspace().join("testdata/spark-4.3/events");
    let out = qprof()
        .args(["bench", "replay", "--rounds", "1", "--log-dir"])
        .arg(&events)
        .arg("--spark-home")
        .arg(spark_home())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // both servers answered with the application's jobs, as Spark's server recorded them
    let expected: Value = serde_json::from_str(
        &std::fs::read_to_string(
            workspace()
                .join("testdata/spark-4.3/expect/applications_local-1795333320377_jobs.json"),
        )
        .unwrap(),
    )
    .unwrap();
    let jobs = expected.as_array().unwrap().len();
    let round = stdout
        .lines()
        .find(|l| l.starts_with("round 1: qprof "))
        .unwrap_or_else(|| panic!("no round line in {stdout}"));
    assert!(round.contains(&format!("({jobs} jobs)")), "{round}");
    assert!(
        round.contains("  Spark ") && round.contains("  ratio "),
        "{round}"
    );
    assert!(
        stdout
            .lines()
            .any(|l| l.starts_with("median: qprof ") && l.contains("Spark / qprof ")),
        "{stdout}"
    );
}
