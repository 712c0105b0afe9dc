//! End-to-end tests against a freshly generated SF 0.01 dataset.
//!
//! The dataset is generated once per test-binary run (into Cargo's
//! per-target scratch dir, wiped first so generation really runs) and
//! shared by the tests below.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::OnceLock;
use std::time::{Duration, SystemTime};

use datafusion::arrow::array::AsArray;
use datafusion::arrow::datatypes::Int64Type;
use datafusion::prelude::SessionContext;
use qprof_tpch::{
    COMPLETE_MARKER, DatasetPaths, Progress, QUERY_COUNT, ScaleFactor, TABLES, expected_row_count,
    generate, query, register_all,
};

struct Fixture {
    sf: ScaleFactor,
    paths: DatasetPaths,
    reports: Vec<Progress>,
    elapsed: Duration,
}

fn fixture() -> &'static Fixture {
    static FIXTURE: OnceLock<Fixture> = OnceLock::new();
    FIXTURE.get_or_init(|| {
        let sf: ScaleFactor = "0.01".parse().unwrap();
        let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
            .join("qprof-tpch-tests")
            .join(sf.dir_name());
        if dir.exists() {
            std::fs::remove_dir_all(&dir).unwrap();
        }
        let mut reports = Vec::new();
        let start = std::time::Instant::now();
        let paths = generate(sf, &dir, &mut |p| reports.push(p)).unwrap();
        let elapsed = start.elapsed();
        eprintln!("generated SF {sf} in {elapsed:?}");
        Fixture {
            sf,
            paths,
            reports,
            elapsed,
        }
    })
}

async fn context() -> SessionContext {
    let ctx = SessionContext::new();
    register_all(&ctx, &fixture().paths).await.unwrap();
    ctx
}

/// The rows of `table` in `ctx`, counted by a query.
async fn row_count(ctx: &SessionContext, table: &str) -> u64 {
    let batches = ctx
        .sql(&format!("select count(*) from {table}"))
        .await
        .unwrap()
        .collect()
        .await
        .unwrap();
    batches[0].column(0).as_primitive::<Int64Type>().value(0) as u64
}

#[test]
fn generation_writes_all_tables_and_marker() {
    let fx = fixture();
    assert!(!fx.paths.cache_hit(), "fresh directory must be generated");
    assert!(fx.elapsed > Duration::ZERO);
    assert_eq!(fx.paths.tables().len(), TABLES.len());
    for ((table, path), expected) in fx.paths.tables().iter().zip(TABLES) {
        assert_eq!(*table, expected);
        assert_eq!(path, &fx.paths.dir().join(format!("{table}.parquet")));
        let len = std::fs::metadata(path).unwrap().len();
        assert!(len > 0, "{table} is empty");
    }
    assert!(fx.paths.dir().join(COMPLETE_MARKER).is_file());
    let leftovers: Vec<_> = std::fs::read_dir(fx.paths.dir())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|name| name.ends_with(".tmp"))
        .collect();
    assert!(leftovers.is_empty(), "temp files left: {leftovers:?}");
}

#[tokio::test]
async fn row_counts_match_tpch_cardinalities() {
    let fx = fixture();
    let ctx = context().await;
    let spec = HashMap::from([
        ("customer", 1_500),
        ("lineitem", 60_175),
        ("nation", 25),
        ("orders", 15_000),
        ("part", 2_000),
        ("partsupp", 8_000),
        ("region", 5),
        ("supplier", 100),
    ]);
    for table in TABLES {
        let count = row_count(&ctx, table).await;
        assert_eq!(count, spec[table], "{table}");
        assert_eq!(Some(count), expected_row_count(fx.sf, table), "{table}");
    }
}

#[test]
fn progress_reports_are_consistent() {
    let fx = fixture();
    // First, one zero-row report per table, in TABLES order.
    let initial: Vec<_> = fx.reports[..TABLES.len()].iter().map(|p| p.table).collect();
    assert_eq!(initial, TABLES);
    assert!(
        fx.reports[..TABLES.len()]
            .iter()
            .all(|p| p.rows_written == 0)
    );

    for table in TABLES {
        let reports: Vec<_> = fx.reports.iter().filter(|p| p.table == table).collect();
        let total = expected_row_count(fx.sf, table).unwrap();
        assert!(reports.iter().all(|p| p.total_rows == total), "{table}");
        assert!(
            reports
                .windows(2)
                .all(|w| w[0].rows_written <= w[1].rows_written),
            "{table}: rows_written must not decrease"
        );
        let last = reports.last().unwrap();
        assert_eq!(last.rows_written, total, "{table}");
        assert!(last.is_done());
        // 8192-row batches: lineitem (60,175 rows) needs several reports.
        if table == "lineitem" {
            assert!(reports.len() > 2, "{reports:?}");
        }
    }
}

#[test]
fn second_generate_is_a_cache_hit() {
    let fx = fixture();
    let mtimes = |paths: &DatasetPaths| -> Vec<SystemTime> {
        paths
            .tables()
            .iter()
            .map(|(_, p)| std::fs::metadata(p).unwrap().modified().unwrap())
            .collect()
    };
    let before = mtimes(&fx.paths);
    let mut reports = 0;
    let again = generate(fx.sf, fx.paths.dir(), &mut |_| reports += 1).unwrap();
    assert!(again.cache_hit());
    assert_eq!(reports, 0, "a cache hit reports no progress");
    assert_eq!(again.tables(), fx.paths.tables());
    assert_eq!(mtimes(&again), before);
}

#[tokio::test]
async fn every_query_plans() {
    let ctx = context().await;
    let mut failures = Vec::new();
    for n in 1..=QUERY_COUNT {
        let sql = query(n).unwrap();
        let result = async {
            let df = ctx.sql(sql).await?;
            df.create_physical_plan().await
        }
        .await;
        if let Err(e) = result {
            failures.push(format!("q{n}: {e}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[tokio::test]
async fn every_query_executes() {
    let ctx = context().await;
    let mut failures = Vec::new();
    for n in 1..=QUERY_COUNT {
        let start = std::time::Instant::now();
        match ctx.sql(query(n).unwrap()).await.map(|df| df.collect()) {
            Ok(fut) => match fut.await {
                Ok(batches) => {
                    let rows: usize = batches.iter().map(|b| b.num_rows()).sum();
                    eprintln!("q{n}: {rows} rows in {:?}", start.elapsed());
                }
                Err(e) => failures.push(format!("q{n}: {e}")),
            },
            Err(e) => failures.push(format!("q{n}: {e}")),
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[tokio::test]
async fn some_queries_return_known_sf001_shapes() {
    // Cheap sanity checks on actual results: Q1 groups by
    // (returnflag, linestatus), which has exactly 4 combinations; Q6 is one row.
    let ctx = context().await;
    let rows = |sql: &'static str| {
        let ctx = ctx.clone();
        async move {
            let batches = ctx.sql(sql).await.unwrap().collect().await.unwrap();
            batches.iter().map(|b| b.num_rows()).sum::<usize>()
        }
    };
    assert_eq!(rows(query(1).unwrap()).await, 4);
    assert_eq!(rows(query(6).unwrap()).await, 1);
}

#[tokio::test]
async fn the_smallest_scale_factor_generates_every_table() {
    let sf = ScaleFactor::new(ScaleFactor::MIN).unwrap();
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join("qprof-tpch-tests")
        .join(sf.dir_name());
    if dir.exists() {
        std::fs::remove_dir_all(&dir).unwrap();
    }
    let paths = generate(sf, &dir, &mut |_| {}).unwrap();
    let ctx = SessionContext::new();
    register_all(&ctx, &paths).await.unwrap();
    for table in TABLES {
        let count = row_count(&ctx, table).await;
        assert_eq!(Some(count), expected_row_count(sf, table), "{table}");
    }
    assert_eq!(expected_row_count(sf, "supplier"), Some(1));
    std::fs::remove_dir_all(&dir).unwrap();
}
