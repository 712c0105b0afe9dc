//! `/qprof/v1/sql` through the router (no socket), with a runner that records the
//! statements it is given: GET and POST, the errors' statuses, and no route without a
//! runner.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};

use axum::body::Body;
use axum::http::{Request, StatusCode};
use qprof_server::sql::{SqlAnswer, SqlColumn, SqlError, SqlRunner, SqlStop};
use qprof_server::{LogStore, router, router_with_sql};
use serde_json::{Value, json};
use tower::ServiceExt;

/// Answers one column `n` with the statement's length, refuses statements starting with
/// `BAD`, fails those starting with `FAIL`, and records every statement.
#[derive(Default)]
struct Recorder {
    seen: Mutex<Vec<String>>,
}

impl SqlRunner for Recorder {
    fn run(
        &self,
        sql: String,
        _: qprof_server::Audience,
    ) -> Pin<Box<dyn Future<Output = Result<SqlAnswer, SqlError>> + Send>> {
        self.seen.lock().unwrap().push(sql.clone());
        Box::pin(async move {
            if sql.starts_with("BAD") {
                return Err(SqlError::Rejected(format!("cannot plan {sql}")));
            }
            if sql.starts_with("FAIL") {
                return Err(SqlError::Failed("the log went away".into()));
            }
            let stopped = if sql.starts_with("BIG") {
                SqlStop::Bytes(64)
            } else {
                SqlStop::Rows(2)
            };
            Ok(SqlAnswer {
                columns: vec![SqlColumn {
                    name: "n".into(),
                    data_type: "Int64".into(),
                }],
                rows: vec![vec![json!(sql.len())], vec![Value::Null]],
                stopped: Some(stopped),
                elapsed_ms: 7,
            })
        })
    }
}

fn empty_store() -> Arc<LogStore> {
    let dir = std::env::temp_dir().join(format!("qprof-server-sql-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    Arc::new(LogStore::open(&dir).unwrap())
}

/// A GET of a statement, as a client that is no browser page sends it: with the header
/// that shows it is not a cross-site request.
fn sql_get(uri: &str) -> axum::http::request::Builder {
    Request::get(uri).header("x-requested-by", "qprof-tests")
}

async fn send(app: axum::Router, request: Request<Body>) -> (StatusCode, Value) {
    let response = app.oneshot(request).await.unwrap();
    let status = response.status();
    let body = axum::body::to_bytes(response.into_body(), usize::MAX)
        .await
        .unwrap();
    (status, serde_json::from_slice(&body).unwrap())
}

#[tokio::test]
async fn get_and_post_hand_the_statement_to_the_runner() {
    let runner = Arc::new(Recorder::default());
    let app = router_with_sql(empty_store(), runner.clone());
    let (status, body) = send(
        app.clone(),
        sql_get("/qprof/v1/sql?q=SELECT%201")
            .body(Body::empty())
            .unwrap(),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        body,
        json!({
            "columns": [{"name": "n", "type": "Int64"}],
            "rows": [[8], [null]],
            "stopped": {"limit": "rows", "rows": 2},
            "elapsedMs": 7,
        })
    );
    let (status, _) = send(
        app.clone(),
        Request::post("/qprof/v1/sql")
            .header("content-type", "application/json")
            .body(Body::from(r#"{"sql": "SELECT 22"}"#))
            .unwrap(),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    let (status, _) = send(
        app.clone(),
        Request::post("/qprof/v1/sql")
            .header("x-requested-by", "qprof-tests")
            .body(Body::from("SELECT 333"))
            .unwrap(),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        *runner.seen.lock().unwrap(),
        ["SELECT 1", "SELECT 22", "SELECT 333"]
    );
    // the other qprof routes are still there
    let (status, body) = send(
        app,
        Request::get("/qprof/v1/status")
            .body(Body::empty())
            .unwrap(),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
}

#[tokio::test]
async fn refused_failed_and_empty_statements_have_their_statuses() {
    let runner = Arc::new(Recorder::default());
    let app = router_with_sql(empty_store(), runner.clone());
    let cases = [
        (
            sql_get("/qprof/v1/sql?q=BAD%20SQL"),
            StatusCode::BAD_REQUEST,
            "cannot plan BAD SQL",
        ),
        (
            sql_get("/qprof/v1/sql?q=FAIL"),
            StatusCode::INTERNAL_SERVER_ERROR,
            "the log went away",
        ),
        (
            sql_get("/qprof/v1/sql"),
            StatusCode::BAD_REQUEST,
            "no statement",
        ),
        (
            sql_get("/qprof/v1/sql?q=%20%20"),
            StatusCode::BAD_REQUEST,
            "no statement",
        ),
    ];
    for (request, want, message) in cases {
        let (status, body) = send(app.clone(), request.body(Body::empty()).unwrap()).await;
        assert_eq!(status, want, "{body}");
        assert!(
            body["message"].as_str().unwrap().contains(message),
            "{body}"
        );
    }
    let (status, body) = send(
        app.clone(),
        Request::post("/qprof/v1/sql")
            .header("content-type", "application/json")
            .body(Body::from(r#"{"query": "SELECT 1"}"#))
            .unwrap(),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    let long = "x".repeat(70_000);
    let (status, _) = send(
        app,
        Request::post("/qprof/v1/sql")
            .header("x-requested-by", "qprof-tests")
            .body(Body::from(long))
            .unwrap(),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    // neither the empty nor the over-long statement reached the runner
    assert_eq!(*runner.seen.lock().unwrap(), ["BAD SQL", "FAIL"]);
}

#[tokio::test]
async fn a_server_without_a_runner_has_no_sql() {
    let (status, body) = send(
        router(empty_store()),
        sql_get("/qprof/v1/sql?q=SELECT%201")
            .body(Body::empty())
            .unwrap(),
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
}

#[tokio::test]
async fn an_answer_cut_at_its_size_says_so() {
    let app = router_with_sql(empty_store(), Arc::new(Recorder::default()));
    let (status, body) = send(
        app,
        sql_get("/qprof/v1/sql?q=BIG").body(Body::empty()).unwrap(),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body["stopped"], json!({"limit": "bytes", "bytes": 64}));
}

#[tokio::test]
async fn a_statement_a_page_of_another_site_could_send_is_refused_before_it_runs() {
    let runner = Arc::new(Recorder::default());
    let app = router_with_sql(empty_store(), runner.clone());
    let refused = [
        // a link or an <img> on any page: a GET without the header
        Request::get("/qprof/v1/sql?q=SELECT%201").body(Body::empty()),
        // a form's "simple" POST: text, no header
        Request::post("/qprof/v1/sql")
            .header("content-type", "text/plain")
            .body(Body::from(r#"{"sql": "SELECT 2"}"#)),
        // JSON from another site's script (the browser says where it comes from)
        Request::post("/qprof/v1/sql")
            .header("content-type", "application/json")
            .header("sec-fetch-site", "cross-site")
            .body(Body::from(r#"{"sql": "SELECT 3"}"#)),
        // an older browser: its origin is not the host asked
        Request::post("/qprof/v1/sql")
            .header("content-type", "application/json")
            .header("host", "127.0.0.1:18080")
            .header("origin", "http://evil.example")
            .body(Body::from(r#"{"sql": "SELECT 4"}"#)),
        // the header does not make a cross-site request good
        sql_get("/qprof/v1/sql?q=SELECT%205")
            .header("sec-fetch-site", "same-site")
            .body(Body::empty()),
    ];
    for request in refused {
        let (status, body) = send(app.clone(), request.unwrap()).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
        assert!(
            body["message"].as_str().unwrap().contains("refused"),
            "{body}"
        );
    }
    assert!(runner.seen.lock().unwrap().is_empty());
    // the UI's own request: JSON from the same origin
    let (status, body) = send(
        app,
        Request::post("/qprof/v1/sql")
            .header("content-type", "application/json")
            .header("host", "127.0.0.1:18080")
            .header("origin", "http://127.0.0.1:18080")
            .header("sec-fetch-site", "same-origin")
            .body(Body::from(r#"{"sql": "SELECT 6"}"#))
            .unwrap(),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(*runner.seen.lock().unwrap(), ["SELECT 6"]);
}
