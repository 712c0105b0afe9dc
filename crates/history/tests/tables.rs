//! The `qprof.*` tables against what was logged: qprof's profiles as written, Spark's
//! numbers as its own history server gave them, and logs opened only when a filter keeps
//! them.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use datafusion::arrow::array::{Array, RecordBatch};
use datafusion::prelude::SessionContext;
use qprof_core::profile::{QueryProfile, fixtures};
use qprof_eventlog::fixtures::{ORACLE_APP, copy_oracle_app, write_profiled_app};
use qprof_server::LogStore;
use qprof_server::store::StoreOptions;

fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("qprof-history-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// `sql`'s rows, every column as text (nulls as "null").
async fn rows(ctx: &SessionContext, sql: &str) -> Vec<Vec<String>> {
    let batches: Vec<RecordBatch> = ctx.sql(sql).await.unwrap().collect().await.unwrap();
    let mut out = Vec::new();
    for batch in &batches {
        for row in 0..batch.num_rows() {
            out.push(
                batch
                    .columns()
                    .iter()
                    .map(|c| {
                        if c.is_null(row) {
                            "null".to_string()
                        } else {
                            datafusion::arrow::util::display::array_value_to_string(c, row).unwrap()
                        }
                    })
                    .collect(),
            );
        }
    }
    out
}

/// A store over `dir` counting the logs it replays from their start.
fn counting_store(dir: &Path, options: StoreOptions) -> (Arc<LogStore>, Arc<AtomicUsize>) {
    let loads = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&loads);
    let store = LogStore::open_with(dir, options)
        .unwrap()
        .with_load_hook(Arc::new(move |_| {
            counter.fetch_add(1, Ordering::SeqCst);
        }));
    (Arc::new(store), loads)
}

fn session(store: Arc<LogStore>) -> SessionContext {
    let ctx = SessionContext::new();
    qprof_history::register_store(&ctx, store).unwrap();
    ctx
}

fn profile(id: usize) -> QueryProfile {
    let mut p = fixtures::sample();
    p.id = id;
    p.sql = format!("SELECT {id}");
    p
}

#[tokio::test]
async fn operators_are_the_logged_profiles_nodes() {
    let dir = temp_dir("operators");
    let profiles = [profile(1), profile(2)];
    let app = write_profiled_app(&dir, 1_700_000_000_000, &profiles);
    let ctx = session(counting_store(&dir, StoreOptions::default()).0);
    let got = rows(
        &ctx,
        "SELECT app_id, query_id, node_id, parent_id, name, self_cpu_nanos, output_rows, \
         peak_memory_bytes, source FROM qprof.operators ORDER BY query_id, node_id",
    )
    .await;
    let mut want = Vec::new();
    for (query, p) in profiles.iter().enumerate() {
        let mut parents = BTreeMap::new();
        for node in p.plan.iter() {
            for child in &node.children {
                parents.insert(child.id, node.id);
            }
        }
        for node in p.plan.iter() {
            let value = |name| node.value(name).map_or("null".into(), |v| v.to_string());
            want.push(vec![
                app.clone(),
                query.to_string(),
                node.id.to_string(),
                parents
                    .get(&node.id)
                    .map_or("null".into(), |p| p.to_string()),
                node.name.clone(),
                value("selfCpuNanos"),
                value("outputRows"),
                value("peakMemoryBytes"),
                "qprof".into(),
            ]);
        }
    }
    want.sort_by_key(|r| (r[1].parse::<i64>().unwrap(), r[2].parse::<i64>().unwrap()));
    assert_eq!(got, want);
    assert!(got.len() >= 6, "two queries of three operators each");

    let by_name = rows(
        &ctx,
        "SELECT name, sum(self_cpu_nanos) FROM qprof.operators GROUP BY name ORDER BY 2 DESC",
    )
    .await;
    let mut totals: BTreeMap<String, i64> = BTreeMap::new();
    for p in &profiles {
        for node in p.plan.iter() {
            *totals.entry(node.name.clone()).or_default() += node.value("selfCpuNanos").unwrap();
        }
    }
    assert_eq!(by_name.len(), totals.len());
    for row in &by_name {
        assert_eq!(row[1], totals[&row[0]].to_string(), "{row:?}");
    }
}

#[tokio::test]
async fn queries_carry_the_logged_sql_and_rows() {
    let dir = temp_dir("queries");
    let profiles = [profile(1), profile(2)];
    let app = write_profiled_app(&dir, 1_700_000_000_000, &profiles);
    let ctx = session(counting_store(&dir, StoreOptions::default()).0);
    let got = rows(
        &ctx,
        "SELECT app_id, query_id, status, sql, rows, duration_nanos, operators \
         FROM qprof.queries ORDER BY query_id",
    )
    .await;
    let want: Vec<Vec<String>> = profiles
        .iter()
        .enumerate()
        .map(|(i, p)| {
            vec![
                app.clone(),
                i.to_string(),
                "COMPLETED".into(),
                p.sql.clone(),
                p.rows.to_string(),
                p.duration_nanos.to_string(),
                p.plan.iter().count().to_string(),
            ]
        })
        .collect();
    assert_eq!(got, want);
}

#[tokio::test]
async fn spark_operators_have_the_numbers_sparks_server_shows() {
    let dir = temp_dir("spark");
    copy_oracle_app(&dir, ORACLE_APP);
    let ctx = session(counting_store(&dir, StoreOptions::default()).0);
    let expect = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../testdata/spark-4.3/expect");
    let mut compared = 0;
    for query in 0..5 {
        let file = expect.join(format!(
            "applications_{ORACLE_APP}_sql_{query}_details_true_planDescription_true.json"
        ));
        let answer: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(file).unwrap()).unwrap();
        let got = rows(
            &ctx,
            &format!(
                "SELECT node_id, name, output_rows FROM qprof.operators \
                 WHERE app_id = '{ORACLE_APP}' AND query_id = {query} ORDER BY node_id"
            ),
        )
        .await;
        let got: BTreeMap<i64, (String, String)> = got
            .into_iter()
            .map(|r| (r[0].parse().unwrap(), (r[1].clone(), r[2].clone())))
            .collect();
        let nodes = answer["nodes"].as_array().unwrap();
        assert_eq!(got.len(), nodes.len(), "query {query}'s operators");
        for node in nodes {
            let id = node["nodeId"].as_i64().unwrap();
            let (name, rows) = &got[&id];
            assert_eq!(name, node["nodeName"].as_str().unwrap());
            let shown = node["metrics"]
                .as_array()
                .unwrap()
                .iter()
                .find(|m| m["name"] == "number of output rows")
                .map(|m| m["value"].as_str().unwrap().replace(',', ""));
            if let Some(shown) = shown {
                assert_eq!(rows, &shown, "query {query}, node {id} ({name})");
                compared += 1;
            }
        }
    }
    assert!(compared >= 10, "only {compared} row counts compared");
}

#[tokio::test]
async fn a_filter_on_one_application_opens_one_log_of_a_thousand() {
    let dir = temp_dir("prune");
    let mut ids = Vec::new();
    for i in 0..1000u64 {
        ids.push(write_profiled_app(
            &dir,
            1_700_000_000_000 + i * 60_000,
            &[profile(1)],
        ));
    }
    let (store, loads) = counting_store(&dir, StoreOptions::default());
    let ctx = session(store);
    let one = &ids[417];
    let got = rows(
        &ctx,
        &format!(
            "SELECT app_id, count(*) FROM qprof.operators WHERE app_id = '{one}' GROUP BY app_id"
        ),
    )
    .await;
    assert_eq!(got, vec![vec![one.clone(), "3".to_string()]]);
    assert_eq!(loads.load(Ordering::SeqCst), 1, "logs replayed");

    // a time window opens the logs of the applications that ran in it
    let from = 1_700_000_000_000u64 + 10 * 60_000;
    let until = from + 9 * 60_000 + 30_000;
    let got = rows(
        &ctx,
        &format!(
            "SELECT count(DISTINCT app_id) FROM qprof.operators \
             WHERE submission_time >= to_timestamp_millis({from}) \
             AND submission_time <= to_timestamp_millis({until})"
        ),
    )
    .await;
    assert_eq!(got, vec![vec!["10".to_string()]]);
    assert_eq!(loads.load(Ordering::SeqCst), 1 + 10, "logs replayed");

    // the listing alone opens none
    let listed = rows(&ctx, "SELECT count(*) FROM qprof.applications").await;
    assert_eq!(listed, vec![vec!["1000".to_string()]]);
    assert_eq!(loads.load(Ordering::SeqCst), 1 + 10, "logs replayed");
}

#[tokio::test]
async fn a_second_query_over_saved_replays_reads_no_log() {
    let dir = temp_dir("saved");
    for i in 0..5u64 {
        write_profiled_app(
            &dir,
            1_700_000_000_000 + i * 60_000,
            &[profile(1), profile(2)],
        );
    }
    let store_dir = temp_dir("saved-store");
    let options = || StoreOptions {
        store_dir: Some(store_dir.clone()),
        ..StoreOptions::default()
    };
    let sql = "SELECT count(*), sum(rows) FROM qprof.queries";
    let (first_store, first_loads) = counting_store(&dir, options());
    let first = rows(&session(first_store), sql).await;
    assert_eq!(first_loads.load(Ordering::SeqCst), 5);
    // a new store (as in another process) over the same saved replays
    let (second_store, second_loads) = counting_store(&dir, options());
    let second = rows(&session(Arc::clone(&second_store)), sql).await;
    assert_eq!(second, first);
    assert_eq!(first[0][0], "10");
    assert_eq!(second_loads.load(Ordering::SeqCst), 0, "logs replayed");
    let disk = second_store.status().disk.unwrap();
    assert!(disk.hits >= 5, "{disk:?}");
}

#[tokio::test]
async fn metric_columns_say_their_unit() {
    let dir = temp_dir("units");
    let ctx = session(counting_store(&dir, StoreOptions::default()).0);
    let df = ctx.table("qprof.operators").await.unwrap();
    let schema = df.schema();
    let field = schema
        .field_with_unqualified_name("self_cpu_nanos")
        .unwrap();
    assert_eq!(field.metadata().get("unit").map(String::as_str), Some("ns"));
    let field = schema.field_with_unqualified_name("output_rows").unwrap();
    assert_eq!(
        field.metadata().get("unit").map(String::as_str),
        Some("rows")
    );
    // an empty directory: tables without rows
    let none = rows(&ctx, "SELECT count(*) FROM qprof.operators").await;
    assert_eq!(none, vec![vec!["0".to_string()]]);
}
