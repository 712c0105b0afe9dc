//! The server's HTTP answers, through the router (no socket): Spark 4.3's own answers for
//! the oracle log, error statuses, attempts, filters and the log download.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use qprof_core::profile::fixtures::sample;
use qprof_core::profile::names;
use qprof_eventlog::compare::{first_difference as first_diff, strip_host_fields as strip};
use qprof_eventlog::fixtures::write_profiled_app;
use qprof_server::{LogStore, router};
use serde_json::Value;
use tower::ServiceExt;

const APP: &str = "local-1795333320377";

fn oracle() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../testdata/spark-4.3")
}

struct Reply {
    status: StatusCode,
    content_type: String,
    headers: axum::http::HeaderMap,
    body: Vec<u8>,
}

impl Reply {
    fn json(&self) -> Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&self.body)))
    }
}

async fn get(dir: &Path, uri: &str) -> Reply {
    let store = Arc::new(LogStore::open(dir).unwrap());
    let response = router(store)
        .oneshot(Request::get(uri).body(Body::empty()).unwrap())
        .await
        .unwrap();
    let status = response.status();
    let headers = response.headers().clone();
    let content_type = headers
        .get(header::CONTENT_TYPE)
        .map(|v| v.to_str().unwrap().to_string())
        .unwrap_or_default();
    let body = axum::body::to_bytes(response.into_body(), usize::MAX)
        .await
        .unwrap()
        .to_vec();
    Reply {
        status,
        content_type,
        headers,
        body,
    }
}

#[tokio::test]
async fn every_oracle_endpoint_answers_as_spark_does() {
    let events = oracle().join("events");
    let index = std::fs::read_to_string(oracle().join("expect/index.tsv")).unwrap();
    let mut failures = Vec::new();
    let mut checked = 0;
    for line in index.lines() {
        let (file, path) = line.split_once('\t').unwrap();
        let reply = get(&events, &format!("/api/v1/{path}")).await;
        assert_eq!(reply.status, StatusCode::OK, "{path}");
        assert!(reply.content_type.starts_with("application/json"), "{path}");
        let mut got = reply.json();
        let text = std::fs::read_to_string(oracle().join("expect").join(file)).unwrap();
        let mut want: Value = serde_json::from_str(&text).unwrap();
        strip(&mut got);
        strip(&mut want);
        if let Some(d) = first_diff(path, &got, &want) {
            failures.push(d);
        }
        checked += 1;
    }
    assert_eq!(checked, 27);
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[tokio::test]
async fn bad_ids_and_parameters_get_json_errors() {
    let events = oracle().join("events");
    let cases = [
        ("/api/v1/applications/nope", 404, "no such app: nope"),
        (
            &format!("/api/v1/applications/{APP}/jobs/99"),
            404,
            "unknown job: 99",
        ),
        (
            &format!("/api/v1/applications/{APP}/jobs/x"),
            404,
            "unknown job: x",
        ),
        (
            &format!("/api/v1/applications/{APP}/stages/99"),
            404,
            "unknown stage: 99",
        ),
        (
            &format!("/api/v1/applications/{APP}/stages/1/5"),
            404,
            "unknown attempt for stage 1.  Found attempts: [0]",
        ),
        (
            &format!("/api/v1/applications/{APP}/stages/7/0/taskSummary"),
            404,
            "No tasks reported metrics for 7 / 0 yet.",
        ),
        (
            &format!("/api/v1/applications/{APP}/stages/1/0/taskSummary?quantiles=0.5,2"),
            400,
            "Bad value for parameter \"quantiles\": 0.5,2",
        ),
        (
            &format!("/api/v1/applications/{APP}/sql/42"),
            404,
            "unknown query execution id: 42",
        ),
        (
            &format!("/api/v1/applications/{APP}/sql?details=maybe"),
            400,
            "parameter 'details' must be true or false, not 'maybe'",
        ),
        (
            &format!("/api/v1/applications/{APP}/jobs?status=weird"),
            400,
            "unknown status 'weird' (expected one of RUNNING, SUCCEEDED, FAILED, UNKNOWN)",
        ),
        (
            &format!("/api/v1/applications/{APP}/sql?offset=-1"),
            400,
            "parameter 'offset' must be a non-negative integer, not '-1'",
        ),
        (
            "/api/v1/applications?minDate=yesterday",
            400,
            "parameter 'minDate': 'yesterday' is not a date (yyyy-MM-dd or yyyy-MM-dd'T'HH:mm:ss.SSS'GMT')",
        ),
        (
            &format!("/api/v1/applications/{APP}/7"),
            404,
            &format!("unknown app attempt: {APP}/7"),
        ),
        // ids never become paths: traversal attempts are unknown applications
        (
            "/api/v1/applications/..%2F..%2Fetc/jobs",
            404,
            "no such app: ..",
        ),
        ("/api/v1/applications/%2e%2e/logs", 404, "no such app: .."),
        ("/api/v1/nothing", 404, "no such endpoint: /api/v1/nothing"),
    ];
    for (uri, status, message) in cases {
        let reply = get(&events, uri).await;
        assert_eq!(reply.status.as_u16(), status, "{uri}");
        assert_eq!(reply.json()["message"], message, "{uri}");
    }
}

#[tokio::test]
async fn filters_select_what_spark_would() {
    let events = oracle().join("events");
    let ids = |v: Value, key: &str| -> Vec<i64> {
        v.as_array()
            .unwrap()
            .iter()
            .map(|j| j[key].as_i64().unwrap())
            .collect()
    };
    // repeated and comma-separated status values both work
    let jobs = get(
        &events,
        &format!("/api/v1/applications/{APP}/jobs?status=failed&status=SUCCEEDED"),
    )
    .await;
    assert_eq!(ids(jobs.json(), "jobId"), [5, 4, 3, 2, 1, 0]);
    let failed = get(
        &events,
        &format!("/api/v1/applications/{APP}/jobs?status=failed"),
    )
    .await;
    assert_eq!(ids(failed.json(), "jobId"), [5]);
    let skipped = get(
        &events,
        &format!("/api/v1/applications/{APP}/stages?status=skipped,failed"),
    )
    .await;
    assert_eq!(ids(skipped.json(), "stageId"), [7, 5, 2]);
    let tasks = get(
        &events,
        &format!("/api/v1/applications/{APP}/stages/1/0/taskList?sortBy=-runtime&length=1"),
    )
    .await;
    let tasks = tasks.json();
    assert_eq!(tasks.as_array().unwrap().len(), 1);
    assert_eq!(tasks[0]["taskMetrics"]["executorRunTime"], 394);
    let page = get(
        &events,
        &format!("/api/v1/applications/{APP}/sql?offset=2&length=2&details=false"),
    )
    .await;
    let page = page.json();
    assert_eq!(ids(page.clone(), "id"), [2, 3]);
    assert_eq!(page[0]["nodes"], serde_json::json!([]));
    for (query, count) in [
        ("status=completed", 1),
        ("status=running", 0),
        ("minDate=2026-11-23", 0),
        ("maxDate=2026-11-23", 1),
        ("limit=0", 0),
    ] {
        let apps = get(&events, &format!("/api/v1/applications?{query}")).await;
        assert_eq!(apps.json().as_array().unwrap().len(), count, "{query}");
    }
}

fn copy_dir(from: &Path, to: &Path, rename: impl Fn(&str) -> String) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let name = rename(e.file_name().to_str().unwrap());
        std::fs::copy(e.path(), to.join(name)).unwrap();
    }
}

#[tokio::test]
async fn attempts_are_served_under_both_path_forms() {
    let dir = std::env::temp_dir().join(format!("qprof-server-attempts-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let app_dir = dir.join(format!("eventlog_v2_{APP}_1"));
    copy_dir(
        &oracle().join(format!("events/eventlog_v2_{APP}")),
        &app_dir,
        |n| format!("{n}_1"),
    );
    // give the application an attempt id, as qprof's logs have
    let log = app_dir.join(format!("events_1_{APP}_1"));
    let text = std::fs::read_to_string(&log).unwrap().replace(
        &format!("\"App ID\":\"{APP}\""),
        &format!("\"App ID\":\"{APP}\",\"App Attempt ID\":\"1\""),
    );
    std::fs::write(&log, text).unwrap();
    let app = get(&dir, &format!("/api/v1/applications/{APP}"))
        .await
        .json();
    assert_eq!(app["attempts"][0]["attemptId"], "1");
    let attempt = get(&dir, &format!("/api/v1/applications/{APP}/1"))
        .await
        .json();
    assert_eq!(attempt["attemptId"], "1");
    assert_eq!(attempt["completed"], true);
    let with = get(&dir, &format!("/api/v1/applications/{APP}/1/stages/1/0"))
        .await
        .json();
    let without = get(&dir, &format!("/api/v1/applications/{APP}/stages/1/0"))
        .await
        .json();
    assert_eq!(with, without);
    assert_eq!(with["numCompleteTasks"], 2);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[tokio::test]
async fn logs_download_as_a_zip_of_the_application_files() {
    let events = oracle().join("events");
    let reply = get(&events, &format!("/api/v1/applications/{APP}/logs")).await;
    assert_eq!(reply.status, StatusCode::OK);
    assert_eq!(reply.content_type, "application/octet-stream");
    assert_eq!(
        reply.headers[header::CONTENT_DISPOSITION],
        format!(
            "attachment; filename=\"eventLogs-{APP}.zip\"; filename*=UTF-8''eventLogs-{APP}.zip"
        )
    );
    let mut zip = zip::ZipArchive::new(std::io::Cursor::new(reply.body)).unwrap();
    let mut names: Vec<String> = zip.file_names().map(str::to_string).collect();
    names.sort();
    assert_eq!(
        names,
        [
            format!("eventlog_v2_{APP}/"),
            format!("eventlog_v2_{APP}/appstatus_{APP}"),
            format!("eventlog_v2_{APP}/events_1_{APP}"),
        ]
    );
    let mut entry = zip
        .by_name(&format!("eventlog_v2_{APP}/events_1_{APP}"))
        .unwrap();
    let mut text = String::new();
    std::io::Read::read_to_string(&mut entry, &mut text).unwrap();
    let original =
        std::fs::read_to_string(events.join(format!("eventlog_v2_{APP}/events_1_{APP}"))).unwrap();
    assert_eq!(text, original);
}

#[tokio::test]
async fn the_ui_is_served_without_external_resources() {
    let events = oracle().join("events");
    let page = get(&events, "/").await;
    assert_eq!(page.status, StatusCode::OK);
    let html = String::from_utf8(page.body).unwrap();
    assert!(html.contains("static/app.js") && html.contains("static/style.css"));
    for asset in ["/static/app.js", "/static/style.css"] {
        let reply = get(&events, asset).await;
        assert_eq!(reply.status, StatusCode::OK, "{asset}");
        // the SVG namespace is a name, not something loaded
        let text = String::from_utf8(reply.body)
            .unwrap()
            .replace("http://www.w3.org/2000/svg", "");
        assert!(
            !text.contains("http://") && !text.contains("https://"),
            "{asset} loads something external"
        );
    }
    assert!(!html.contains("https://"));
    assert_eq!(
        get(&events, "/static/../Cargo.toml").await.status,
        StatusCode::NOT_FOUND
    );
}

/// Two logged runs of the same query, the second with its filter 40 ms slower.
fn two_profiled_runs(name: &str) -> (PathBuf, String, String) {
    let dir = std::env::temp_dir().join(format!("qprof-api-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let before = sample();
    let mut after = sample();
    let filter = &mut after.plan.children[0];
    for m in &mut filter.metrics {
        if m.name == names::SELF_CPU_NANOS {
            for t in &mut m.tasks {
                t.value += 20_000_000;
            }
            m.value += 40_000_000;
        }
    }
    let first = write_profiled_app(&dir, 1_795_000_000_000, &[before]);
    let second = write_profiled_app(&dir, 1_795_000_100_000, &[after]);
    (dir, first, second)
}

#[tokio::test]
async fn a_query_s_flame_graph_is_an_svg_of_its_operators() {
    let (dir, app, _) = two_profiled_runs("flame");
    let reply = get(
        &dir,
        &format!("/qprof/v1/applications/{app}/sql/0/flamegraph.svg"),
    )
    .await;
    assert_eq!(reply.status, StatusCode::OK);
    assert_eq!(reply.content_type, "image/svg+xml");
    let svg = String::from_utf8(reply.body).unwrap();
    for frame in [
        "query 6",
        "stage 0",
        "AggregateExec #0",
        "FilterExec #1",
        "DataSourceExec #2",
    ] {
        assert!(svg.contains(frame), "{frame} not in the flame graph");
    }
    // the scan's 80 ms of self CPU: 80,000 µs
    assert!(svg.contains("DataSourceExec #2 (80,000 µs"), "{svg}");
    let missing = get(
        &dir,
        &format!("/qprof/v1/applications/{app}/sql/9/flamegraph.svg"),
    )
    .await;
    assert_eq!(missing.status, StatusCode::NOT_FOUND);
    assert!(missing.json()["message"].as_str().unwrap().contains("9"));
    // a Spark log has no profile to draw
    let spark = get(
        &oracle().join("events"),
        &format!("/qprof/v1/applications/{APP}/sql/0/flamegraph.svg"),
    )
    .await;
    assert_eq!(spark.status, StatusCode::NOT_FOUND);
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn two_runs_compare_operator_by_operator() {
    let (dir, first, second) = two_profiled_runs("compare");
    let uri = |before: &str, after: &str, extra: &str| {
        format!("/qprof/v1/compare?before={before}:0&after={after}:0{extra}")
    };
    let same = get(&dir, &uri(&first, &first, "")).await.json();
    assert_eq!(same["regressed"], false, "{same}");
    assert!(
        same["operators"]
            .as_array()
            .unwrap()
            .iter()
            .all(|o| o["matched"] == "same" && o["regressed"] == false)
    );
    let slower = get(&dir, &uri(&first, &second, "")).await.json();
    assert_eq!(slower["regressed"], true, "{slower}");
    let flagged: Vec<&str> = slower["operators"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|o| o["regressed"] == true)
        .map(|o| o["name"].as_str().unwrap())
        .collect();
    assert_eq!(flagged, ["FilterExec"]);
    let filter = &slower["operators"][1];
    assert_eq!(
        filter["selfCpuNanos"],
        serde_json::json!([4_000_000, 44_000_000])
    );
    // the differential flame graph: the filter's frame grew, the scan's did not
    let diff_svg = get(
        &dir,
        &format!("/qprof/v1/compare/flamegraph.svg?before={first}:0&after={second}:0"),
    )
    .await;
    assert_eq!(diff_svg.status, StatusCode::OK);
    assert!(diff_svg.content_type.starts_with("image/svg+xml"));
    let svg = String::from_utf8_lossy(&diff_svg.body);
    let title_of = |frame: &str| -> String {
        let at = svg
            .find(&format!("<title>{frame} ("))
            .unwrap_or_else(|| panic!("no frame {frame} in {svg}"));
        svg[at..].split("</title>").next().unwrap().to_string()
    };
    let filter_id = filter["id"].as_u64().unwrap();
    assert!(
        title_of(&format!("FilterExec #{filter_id}")).contains("; +"),
        "the filter grew"
    );
    let missing_side = get(
        &dir,
        &format!("/qprof/v1/compare/flamegraph.svg?before={first}:0"),
    )
    .await;
    assert_eq!(missing_side.status, StatusCode::BAD_REQUEST);
    // a threshold above the growth (1,000 %) flags nothing
    let lenient = get(&dir, &uri(&first, &second, "&threshold=1001"))
        .await
        .json();
    assert_eq!(lenient["regressed"], false);
    for (bad, code) in [
        ("/qprof/v1/compare".to_string(), StatusCode::BAD_REQUEST),
        (
            format!("/qprof/v1/compare?before={first}&after={first}:0"),
            StatusCode::BAD_REQUEST,
        ),
        (
            uri(&first, &first, "&threshold=-1"),
            StatusCode::BAD_REQUEST,
        ),
        (uri(&first, "no-such-app", ""), StatusCode::NOT_FOUND),
        (
            format!("/qprof/v1/compare?before={first}:0&after={first}:77"),
            StatusCode::NOT_FOUND,
        ),
    ] {
        let reply = get(&dir, &bad).await;
        assert_eq!(reply.status, code, "{bad}");
        assert!(reply.json()["message"].is_string(), "{bad}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn the_metric_catalog_is_served_whole() {
    use qprof_core::catalog::{self, datafusion};
    let reply = get(&oracle().join("events"), "/qprof/v1/metrics").await;
    assert_eq!(reply.status, StatusCode::OK);
    let body = reply.json();
    let metrics = body["metrics"].as_array().unwrap();
    assert_eq!(metrics.len(), catalog::ALL.len());
    for (got, def) in metrics.iter().zip(catalog::ALL) {
        assert_eq!(got["name"], def.name);
        assert_eq!(got["displayName"], def.display);
        assert_eq!(got["kind"], def.kind.as_str());
        assert_eq!(got["description"], def.description);
        assert_eq!(got["onPlanGraph"], !catalog::PANEL_ONLY.contains(def));
    }
    let on_graph = |m: &serde_json::Value| m["onPlanGraph"].as_bool().unwrap();
    assert!(!on_graph(&metrics[0]), "wallNanos is left to the panel");
    let output_rows = metrics.iter().find(|m| m["name"] == "outputRows").unwrap();
    assert!(on_graph(output_rows));
    let operators = body["datafusion"]["operators"].as_array().unwrap();
    assert_eq!(operators.len(), datafusion::OPERATORS.len());
    for (got, op) in operators.iter().zip(datafusion::OPERATORS) {
        assert_eq!(got["operator"], op.operator);
        let names: Vec<&str> = got["metrics"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["name"].as_str().unwrap())
            .collect();
        let want: Vec<&str> = op.native.iter().map(|d| d.name).collect();
        assert_eq!(names, want, "{}", op.operator);
    }
    assert_eq!(
        body["datafusion"]["common"].as_array().unwrap().len(),
        datafusion::COMMON.len()
    );
}
