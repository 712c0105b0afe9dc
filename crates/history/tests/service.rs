//! The read-only SQL service: statements that write are refused and write nothing, and a
//! statement is stopped at its row and time limits.

use std::sync::Arc;
use std::time::Duration;

use qprof_history::{SqlLimits, SqlService};
use qprof_server::LogStore;
use qprof_server::sql::{SqlError, SqlStop};

/// A service over an empty log directory of the test's own (`name`).
fn service(name: &str, limits: SqlLimits) -> (SqlService, std::path::PathBuf) {
    let dir = std::env::temp_dir().join(format!(
        "qprof-history-service-{name}-{}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let store = Arc::new(LogStore::open(&dir).unwrap());
    (SqlService::new(store, limits).unwrap(), dir)
}

#[tokio::test]
async fn statements_that_write_are_refused_and_write_nothing() {
    let (service, dir) = service("writes", SqlLimits::default());
    let out = dir.join("written.csv");
    let statements = [
        "CREATE TABLE t AS SELECT 1 AS x".to_string(),
        "CREATE VIEW v AS SELECT 1 AS x".to_string(),
        format!(
            "CREATE EXTERNAL TABLE e STORED AS CSV LOCATION '{}'",
            dir.display()
        ),
        "INSERT INTO qprof.queries (app_id) VALUES ('x')".to_string(),
        format!("COPY (SELECT 1 AS x) TO '{}'", out.display()),
        "SET datafusion.execution.batch_size = 1".to_string(),
        "DROP TABLE qprof.queries".to_string(),
    ];
    for sql in &statements {
        match service.answer(sql).await {
            Err(SqlError::Rejected(message)) => {
                assert!(!message.contains('\n'), "{message}");
            }
            other => panic!("{sql}: {other:?}"),
        }
    }
    assert!(!out.exists(), "COPY wrote {}", out.display());
    // the schema is still there, unchanged
    let answer = service
        .answer("SELECT count(*) AS n FROM qprof.queries")
        .await
        .unwrap();
    assert_eq!(answer.rows, vec![vec![serde_json::json!(0)]]);
}

#[tokio::test]
async fn a_statement_stops_at_the_row_limit() {
    let (service, _) = service(
        "rows",
        SqlLimits {
            max_rows: 1_000,
            ..SqlLimits::default()
        },
    );
    let answer = service
        .answer("SELECT value FROM generate_series(1, 100000000)")
        .await
        .unwrap();
    assert_eq!(answer.rows.len(), 1_000);
    assert_eq!(answer.stopped, Some(SqlStop::Rows(1_000)));
    assert_eq!(answer.rows[0], vec![serde_json::json!(1)]);
    assert_eq!(answer.columns[0].name, "value");

    // exactly at the limit: nothing was cut
    let answer = service
        .answer("SELECT value FROM generate_series(1, 1000)")
        .await
        .unwrap();
    assert_eq!((answer.rows.len(), answer.stopped), (1_000, None));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_statement_stops_at_the_time_limit() {
    let (service, _) = service(
        "time",
        SqlLimits {
            max_rows: 10,
            timeout: Duration::from_millis(300),
            ..SqlLimits::default()
        },
    );
    // far more work than the limit allows (a cross join of a billion pairs)
    let answer = service
        .answer(
            "SELECT count(*) FROM generate_series(1, 1000000) a \
             CROSS JOIN generate_series(1, 1000) b WHERE a.value * b.value = -1",
        )
        .await
        .unwrap();
    assert!(
        matches!(answer.stopped, Some(SqlStop::Time(_))),
        "{answer:?}"
    );
    assert!(answer.rows.is_empty());
}

#[tokio::test]
async fn a_bad_statement_is_refused_on_one_line() {
    let (service, _) = service("bad", SqlLimits::default());
    for sql in [
        "SELEC 1",
        "SELECT nope FROM qprof.operators",
        "SELECT * FROM qprof.missing",
    ] {
        match service.answer(sql).await {
            Err(SqlError::Rejected(message)) => assert!(!message.contains('\n'), "{message}"),
            other => panic!("{sql}: {other:?}"),
        }
    }
}
