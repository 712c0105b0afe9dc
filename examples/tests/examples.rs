//! Every example builds, runs without arguments on the data it makes, writes only under
//! its working directory, and the event-log example's log is read by `qprof serve`.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::Arc;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use serde_json::Value;
use tower::ServiceExt;

/// The example binary `name`, built by `cargo test` next to this test (or built now).
fn example(name: &str) -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let profile_dir = exe.parent().and_then(Path::parent).unwrap();
    let path = profile_dir.join("examples").join(name);
    if !path.exists() {
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_string());
        let status = Command::new(cargo)
            .args(["build", "-p", "qprof-examples", "--example", name])
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .status()
            .unwrap();
        assert!(status.success(), "cannot build example {name}");
    }
    path
}

/// Runs example `name` in a fresh directory; returns its output and the directory.
fn run(name: &str) -> (Output, PathBuf) {
    let dir = std::env::temp_dir().join(format!("qprof-example-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let out = Command::new(example(name))
        .current_dir(&dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{name} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    (out, dir)
}

fn entries(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[test]
fn profile_one_query_prints_the_result_and_its_profile() {
    let (out, dir) = run("profile_one_query");
    let stdout = String::from_utf8_lossy(&out.stdout);
    // the result: eight regions, and the profile of the query that computed it
    for region in qprof_examples::REGIONS {
        assert!(stdout.contains(region), "{region} missing: {stdout}");
    }
    assert!(stdout.contains("query 1: 8 rows"), "{stdout}");
    assert!(stdout.contains("HashJoinExec"), "{stdout}");
    assert!(stdout.contains("top operators by self cpu:"), "{stdout}");
    assert!(entries(&dir).is_empty(), "wrote {:?}", entries(&dir));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn hottest_operators_reads_the_profile() {
    let (out, dir) = run("hottest_operators");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.starts_with("8 rows in "), "{stdout}");
    let hot: Vec<&str> = stdout
        .lines()
        .skip_while(|l| !l.starts_with("hottest operators"))
        .skip(1)
        .take_while(|l| l.starts_with("  #"))
        .collect();
    assert_eq!(hot.len(), 3, "{stdout}");
    let functions: Vec<&str> = stdout
        .lines()
        .skip_while(|l| !l.starts_with("costliest functions"))
        .skip(1)
        .collect();
    // which three cost most depends on timing; that each is one of the query's calls, in
    // an operator, does not
    assert_eq!(functions.len(), 3, "{stdout}");
    let calls = [
        "sum(s.amount)",
        "count(DISTINCT s.customer)",
        "count(Int64(1))",
    ];
    for line in &functions {
        assert!(
            calls.iter().any(|c| line.contains(c)) && line.contains(" in #"),
            "{line:?} in\n{stdout}"
        );
    }
    assert!(entries(&dir).is_empty(), "wrote {:?}", entries(&dir));
    std::fs::remove_dir_all(&dir).unwrap();
}

async fn get(router: &axum::Router, path: &str) -> Value {
    let response = router
        .clone()
        .oneshot(Request::get(path).body(Body::empty()).unwrap())
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK, "{path}");
    let body = axum::body::to_bytes(response.into_body(), usize::MAX)
        .await
        .unwrap();
    serde_json::from_slice(&body).unwrap()
}

#[tokio::test]
async fn keep_event_log_writes_a_log_qprof_serve_reads() {
    let (out, dir) = run("keep_event_log");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("event log written to qprof-events/eventlog_v2_local-"),
        "{stdout}"
    );
    assert_eq!(entries(&dir), ["qprof-events"]);
    let events = dir.join("qprof-events");
    let apps = entries(&events);
    assert_eq!(apps.len(), 1, "{apps:?}");
    // complete: the in-progress marker was renamed at the end
    let files = entries(&events.join(&apps[0]));
    assert!(
        files
            .iter()
            .any(|f| f.starts_with("appstatus_") && !f.ends_with(".inprogress")),
        "{files:?}"
    );

    let store = qprof_server::LogStore::open(&events).unwrap();
    let router = qprof_server::router(Arc::new(store));
    let listed = get(&router, "/api/v1/applications").await;
    let app = &listed[0];
    assert_eq!(app["attempts"][0]["completed"], true);
    assert!(app["name"].as_str().unwrap().starts_with("keep_event_log"));
    let id = app["id"].as_str().unwrap();
    let sql = get(&router, &format!("/api/v1/applications/{id}/1/sql")).await;
    let executions = sql.as_array().unwrap();
    assert_eq!(executions.len(), 3);
    assert!(
        executions.iter().all(|e| e["status"] == "COMPLETED"),
        "{sql}"
    );
    let jobs = get(&router, &format!("/api/v1/applications/{id}/1/jobs")).await;
    assert_eq!(jobs.as_array().unwrap().len(), 3);
    assert!(
        jobs.as_array()
            .unwrap()
            .iter()
            .all(|j| j["status"] == "SUCCEEDED")
    );
    // qprof's own profile of the first query: eight rows, as the example printed
    let profile = get(
        &router,
        &format!("/qprof/v1/applications/{id}/sql/0/profile"),
    )
    .await;
    assert_eq!(profile["query"]["rows"], 8);
    assert!(stdout.contains("query 1: 8 rows"), "{stdout}");
    std::fs::remove_dir_all(&dir).unwrap();
}
