//! The read-only SQL service: statements that write are refused and write nothing, and a
//! statement is stopped at its row, time and size limits, and waits its turn beyond the
//! concurrency limit.

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
    // far more work than the limit allows (10^12 values, streamed)
    let answer = service
        .answer("SELECT count(*) FROM generate_series(1, 1000000000000) a WHERE a.value = -1")
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

/// Waits, up to a minute, until `done` holds.
async fn until(what: &str, done: impl Fn() -> bool) {
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while !done() {
        assert!(std::time::Instant::now() < deadline, "never: {what}");
        tokio::task::yield_now().await;
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn statements_beyond_the_concurrency_limit_wait_their_turn() {
    let (service, _) = service(
        "turns",
        SqlLimits {
            concurrent: 1,
            timeout: Duration::from_secs(2),
            ..SqlLimits::default()
        },
    );
    let long = service.clone();
    let first = tokio::spawn(async move {
        // a trillion values streamed, held nowhere: it runs until its time is up
        long.answer("SELECT count(*) FROM generate_series(1, 1000000000000) a WHERE a.value = -1")
            .await
    });
    until("the long statement runs", || service.running() == 1).await;
    let short = service.clone();
    let second = tokio::spawn(async move { short.answer("SELECT 1 AS one").await });
    until("the second statement waits", || service.waiting() == 1).await;
    assert_eq!(service.running(), 1);
    let first = first.await.unwrap().unwrap();
    assert!(matches!(first.stopped, Some(SqlStop::Time(_))), "{first:?}");
    // its turn came when the first stopped: it answered, or its own time (which ends
    // just after the first's) ran out first
    let second = second.await.unwrap().unwrap();
    let answered = second.rows == vec![vec![serde_json::json!(1)]] && second.stopped.is_none();
    let timed_out = second.rows.is_empty() && matches!(second.stopped, Some(SqlStop::Time(_)));
    assert!(answered || timed_out, "{second:?}");
    assert_eq!((service.running(), service.waiting()), (0, 0));
}

#[tokio::test]
async fn an_answer_stops_at_its_size_and_keeps_large_integers_exact() {
    let (service, _) = service(
        "bytes",
        SqlLimits {
            max_bytes: 950,
            ..SqlLimits::default()
        },
    );
    // each row's value is 100 characters: nine rows fit in 950 bytes, the tenth does not
    let answer = service
        .answer("SELECT repeat('x', 100) AS s FROM generate_series(1, 50)")
        .await
        .unwrap();
    assert_eq!(answer.rows.len(), 9);
    assert_eq!(answer.stopped, Some(SqlStop::Bytes(950)));

    let answer = service
        .answer("SELECT 9007199254740993 AS big, 9007199254740992 AS safe, -5 AS small")
        .await
        .unwrap();
    assert_eq!(
        answer.rows,
        vec![vec![
            serde_json::json!("9007199254740993"),
            serde_json::json!(9007199254740992i64),
            serde_json::json!(-5),
        ]]
    );
}

#[tokio::test]
async fn a_user_s_statements_see_only_the_applications_their_acls_admit() {
    use qprof_server::{AclOptions, Audience, Viewer};
    let dir =
        std::env::temp_dir().join(format!("qprof-history-service-acls-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    // three runs of the fixture: ada's, ada's shared with bob, eve's
    for (id, user, acls) in [
        ("local-1", "ada", ""),
        ("local-2", "ada", ",\"spark.ui.view.acls\":\"bob\""),
        ("local-3", "eve", ""),
    ] {
        qprof_eventlog::fixtures::copy_oracle_app_edited(&dir, id, |text| {
            text.replace("\"User\":\"root\"", &format!("\"User\":\"{user}\""))
                .replacen(
                    "\"spark.app.name\":\"oracle-app-1\"",
                    &format!("\"spark.app.name\":\"oracle-app-1\"{acls}"),
                    1,
                )
        });
    }
    let store = Arc::new(LogStore::open(&dir).unwrap());
    let service = SqlService::new(store, SqlLimits::default()).unwrap();
    let audience = |user: &str| Audience {
        acls: Some(Arc::new(AclOptions {
            admins: vec!["root".into()],
            admin_groups: Vec::new(),
        })),
        viewer: Some(Viewer {
            user: user.into(),
            groups: Vec::new(),
        }),
    };
    for (user, sees) in [
        ("ada", vec!["local-1", "local-2"]),
        ("bob", vec!["local-2"]),
        ("zed", vec![]),
        ("root", vec!["local-1", "local-2", "local-3"]),
    ] {
        for table in ["applications", "stages", "queries"] {
            let answer = service
                .answer_for(
                    &format!("SELECT DISTINCT app_id FROM qprof.{table} ORDER BY app_id"),
                    audience(user),
                )
                .await
                .unwrap();
            let ids: Vec<&str> = answer.rows.iter().map(|r| r[0].as_str().unwrap()).collect();
            assert_eq!(ids, sees, "{user}'s qprof.{table}");
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn a_log_stating_trillions_of_tasks_answers_every_table_with_what_it_holds() {
    let dir = std::env::temp_dir().join(format!(
        "qprof-history-service-tasks-{}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let id = "local-7";
    let stated = |text: &str| {
        text.replace("\"Number of Tasks\":2", "\"Number of Tasks\":4000000000000")
            .replace(
                "\"Number of Tasks\":1",
                "\"Number of Tasks\":9223372036854775807",
            )
    };
    let text = qprof_eventlog::fixtures::copy_oracle_app_edited(&dir, id, stated);
    assert_ne!(
        stated(&text),
        text,
        "the fixture states its stages' task counts"
    );
    let store = Arc::new(LogStore::open(&dir).unwrap());
    let service = SqlService::new(store, SqlLimits::default()).unwrap();
    for table in qprof_history::TABLE_NAMES {
        let answer = service
            .answer(&format!("SELECT count(*) AS n FROM qprof.{table}"))
            .await
            .unwrap_or_else(|e| panic!("qprof.{table}: {e}"));
        assert_eq!(answer.rows.len(), 1, "qprof.{table}");
    }
    // as many tasks as the log holds, whatever its stages state
    let logged = text.matches("\"Event\":\"SparkListenerTaskEnd\"").count();
    let tasks = service
        .answer("SELECT count(*) AS n FROM qprof.tasks")
        .await
        .unwrap();
    assert!(logged > 0);
    assert_eq!(tasks.rows[0][0], serde_json::json!(logged));
    let operators = service
        .answer("SELECT count(*) AS n FROM qprof.operators")
        .await
        .unwrap();
    assert!(operators.rows[0][0].as_i64().unwrap() > 0);
    let _ = std::fs::remove_dir_all(&dir);
}
