//! TPC-H answers of an instrumented session, checked value by value against DuckDB's on
//! the same Parquet files: an engine independent of DataFusion answers each of the 22
//! queries (`tests/support/duckdb_answers.py`, with the DuckDB that
//! `scripts/install-test-deps.sh` installs in `target/test-venv`).

use std::path::Path;
use std::process::Command;

use datafusion::arrow::array::RecordBatch;
use datafusion::arrow::util::display::{ArrayFormatter, FormatOptions};
use datafusion::execution::SessionStateBuilder;
use datafusion::prelude::SessionContext;
use qprof_datafusion::Profiler;
use qprof_tpch::{ScaleFactor, generate, query, register_all};
use serde_json::Value;

/// A query's rows, each cell as text (`None`: NULL).
type Rows = Vec<Vec<Option<String>>>;

fn rows_of(batches: &[RecordBatch]) -> Rows {
    let options = FormatOptions::default().with_null("\u{0}");
    let mut rows = Vec::new();
    for batch in batches {
        let formatters: Vec<ArrayFormatter<'_>> = batch
            .columns()
            .iter()
            .map(|c| ArrayFormatter::try_new(c.as_ref(), &options).unwrap())
            .collect();
        for row in 0..batch.num_rows() {
            rows.push(
                batch
                    .columns()
                    .iter()
                    .zip(&formatters)
                    .map(|(column, f)| (!column.is_null(row)).then(|| f.value(row).to_string()))
                    .collect(),
            );
        }
    }
    rows
}

/// Whether two cells hold the same value: equal text, or numbers within a millionth of
/// the larger of 1 and DuckDB's (DataFusion averages decimals to six places, DuckDB in
/// floating point).
fn same(ours: Option<&str>, theirs: Option<&str>) -> bool {
    match (ours, theirs) {
        (None, None) => true,
        (Some(a), Some(b)) if a == b => true,
        (Some(a), Some(b)) => match (a.parse::<f64>(), b.parse::<f64>()) {
            (Ok(x), Ok(y)) => (x - y).abs() <= 1e-6 * y.abs().max(1.0),
            _ => false,
        },
        _ => false,
    }
}

/// DuckDB's answers to the 22 queries on the tables in `data`.
fn duckdb_answers(data: &Path) -> Value {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let python = root.join("../../target/test-venv/bin/python");
    let out = Command::new(&python)
        .arg(root.join("tests/support/duckdb_answers.py"))
        .arg(data)
        .arg(root.join("../tpch/queries"))
        .output()
        .unwrap_or_else(|e| {
            panic!(
                "cannot run {} (scripts/install-test-deps.sh installs it): {e}",
                python.display()
            )
        });
    assert!(
        out.status.success(),
        "DuckDB failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_tpch_answer_of_an_instrumented_session_is_duckdbs() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("sf0.01");
    let sf: ScaleFactor = "0.01".parse().unwrap();
    let paths = generate(sf, &dir, &mut |_| {}).unwrap();
    let answers = duckdb_answers(&dir);
    let profiler = Profiler::new();
    let ctx = SessionContext::new_with_state(
        profiler
            .instrument(SessionStateBuilder::new().with_default_features())
            .build(),
    );
    register_all(&ctx, &paths).await.unwrap();
    let mut rows_seen = 0;
    for n in 1..=22 {
        let frame = ctx.sql(query(n).unwrap()).await.unwrap();
        let run = profiler.run(frame, &format!("q{n}")).await.unwrap();
        let ours = rows_of(&run.batches);
        let theirs: Rows = serde_json::from_value(answers[n.to_string()].clone()).unwrap();
        assert_eq!(
            ours.len(),
            theirs.len(),
            "q{n}: {ours:?}\nDuckDB: {theirs:?}"
        );
        for (i, (a, b)) in ours.iter().zip(&theirs).enumerate() {
            assert_eq!(a.len(), b.len(), "q{n} row {i}");
            for (x, y) in a.iter().zip(b) {
                assert!(
                    same(x.as_deref(), y.as_deref()),
                    "q{n} row {i}: {a:?}\nDuckDB: {b:?}"
                );
            }
        }
        // the profile saw the rows the query returned
        assert_eq!(run.profile.rows, ours.len() as u64, "q{n}");
        rows_seen += ours.len();
    }
    assert!(rows_seen > 22, "{rows_seen} rows in all");
}

#[test]
fn cells_compare_by_value_within_a_millionth() {
    assert!(same(Some("25.537587"), Some("25.537587116854997")));
    assert!(same(Some("0.050145"), Some("0.05014459706340077")));
    assert!(same(Some("3774200.00"), Some("3774200.00")));
    assert!(same(None, None));
    assert!(!same(Some("0.05"), Some("0.06")));
    assert!(!same(Some("3774200.00"), Some("3774210.00")));
    assert!(!same(Some("BRAZIL"), Some("BRAZIL ")));
    assert!(!same(None, Some("0")));
}
