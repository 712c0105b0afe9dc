//! A join's build and probe phases: the rows each input gave it, and its own time in each
//! phase, never its inputs' work.

use std::sync::Arc;
use std::time::Duration;

use datafusion::arrow::array::{ArrayRef, Int64Array, RecordBatch};
use datafusion::arrow::datatypes::{DataType, Field, Schema};
use datafusion::datasource::MemTable;
use datafusion::execution::SessionStateBuilder;
use datafusion::logical_expr::{ColumnarValue, Volatility, create_udf};
use datafusion::parquet::arrow::ArrowWriter;
use datafusion::parquet::file::properties::WriterProperties;
use datafusion::prelude::{SessionConfig, SessionContext};
use qprof_core::profile::{ProfileNode, QueryProfile, names};
use qprof_datafusion::Profiler;

const BUILD_BATCHES: usize = 4;

fn table(batches: usize, rows: i64) -> Arc<MemTable> {
    let schema = Arc::new(Schema::new(vec![
        Field::new("k", DataType::Int64, false),
        Field::new("v", DataType::Int64, false),
    ]));
    let batches = (0..batches as i64)
        .map(|b| {
            let k: Int64Array = (0..rows).map(|i| (b * rows + i) % 1000).collect();
            let v: Int64Array = (0..rows).map(|i| b * rows + i).collect();
            RecordBatch::try_new(Arc::clone(&schema), vec![Arc::new(k), Arc::new(v)]).unwrap()
        })
        .collect();
    Arc::new(MemTable::try_new(schema, vec![batches]).unwrap())
}

/// A profiler and a session it instruments.
fn profiled(config: SessionConfig) -> (Profiler, SessionContext) {
    let profiler = Profiler::new();
    let state = profiler
        .instrument(
            SessionStateBuilder::new()
                .with_config(config)
                .with_default_features(),
        )
        .build();
    (profiler, SessionContext::new_with_state(state))
}

/// Runs a join whose build side evaluates `slow(k)`, a function that sleeps `pause` per
/// batch, and returns the profile.
async fn join_with_slow_build(pause: Duration) -> QueryProfile {
    let (profiler, ctx) = profiled(SessionConfig::new().with_target_partitions(1));
    ctx.register_table("small", table(BUILD_BATCHES, 50))
        .unwrap();
    ctx.register_table("big", table(8, 2_000)).unwrap();
    let slow = create_udf(
        "slow",
        vec![DataType::Int64],
        DataType::Int64,
        Volatility::Volatile,
        Arc::new(move |args: &[ColumnarValue]| {
            std::thread::sleep(pause);
            let arrays = ColumnarValue::values_to_arrays(args)?;
            Ok(ColumnarValue::Array(Arc::clone(&arrays[0]) as ArrayRef))
        }),
    );
    ctx.register_udf(slow);
    let run = profiler
        .run_sql(
            &ctx,
            "SELECT s.x, big.v FROM (SELECT k, slow(v) AS x FROM small) s JOIN big ON s.k = big.k",
        )
        .await
        .unwrap();
    let rows: usize = run.batches.iter().map(|b| b.num_rows()).sum();
    // 200 distinct build keys, each matching 16 of the big table's 16,000 rows
    assert_eq!(rows, 200 * 16);
    run.profile
}

fn find<'a>(node: &'a ProfileNode, name: &str) -> Option<&'a ProfileNode> {
    if node.name == name {
        return Some(node);
    }
    node.children.iter().find_map(|c| find(c, name))
}

fn value(node: &ProfileNode, name: &str) -> i64 {
    node.value(name)
        .unwrap_or_else(|| panic!("#{} {} has no {name}", node.id, node.name))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expensive_build_input_is_the_inputs_time_not_the_build_phases() {
    let pause = Duration::from_millis(40);
    let profile = join_with_slow_build(pause).await;
    let text = profile.render_text(2);
    let join = find(&profile.plan, "HashJoinExec").expect("a hash join");
    let build = &join.children[0];
    assert_eq!(build.name, "ProjectionExec", "the build side:\n{text}");
    let slept = (pause.as_nanos() as i64) * BUILD_BATCHES as i64;

    // the rows each side gave the join
    assert_eq!(
        value(join, "hashBuildInputRows"),
        value(build, names::OUTPUT_ROWS)
    );
    assert_eq!(
        value(join, "hashProbeInputRows"),
        value(&join.children[1], names::OUTPUT_ROWS)
    );
    assert_eq!(value(join, "hashBuildInputRows"), 200);
    assert_eq!(value(join, "hashProbeInputRows"), 16_000);

    // the sleep is the projection's own time, seen from the join as its pre-projection
    assert!(value(build, names::SELF_WALL_NANOS) >= slept, "{text}");
    assert_eq!(
        value(join, "buildPreProjectionWallNanos"),
        value(build, names::SELF_WALL_NANOS)
    );
    assert_eq!(
        value(join, "buildPreProjectionCpuCount"),
        BUILD_BATCHES as i64
    );
    // DataFusion's build timer counts it; the build phase does not
    assert!(value(join, "buildTimeNanos") >= slept, "{text}");
    let build_phase = value(join, "hashBuildWallNanos");
    // the sleep is counted once: the join's inclusive time is its own time and its
    // inputs' (each poll's clock reads apart), so the build phase, part of the join's own
    // time, cannot hold the input's sleep too
    let own = value(join, names::SELF_WALL_NANOS);
    let inputs = value(build, names::WALL_NANOS) + value(&join.children[1], names::WALL_NANOS);
    let polls = value(join, "numPolls") + value(build, "numPolls");
    assert!(
        (value(join, names::WALL_NANOS) - own - inputs).abs() <= 2 * polls,
        "the join's time is not its own and its inputs' (build phase {build_phase} ns):\n{text}"
    );
    // the phases make up the join's own time
    let phases = build_phase + value(join, "hashProbeWallNanos");
    assert!(
        (own - phases).abs() <= 2 * value(join, "numPolls"),
        "{text}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn phase_metrics_reach_the_rendered_profile() {
    let profile = join_with_slow_build(Duration::ZERO).await;
    let text = profile.render_text(2);
    // the join's phase line: each side's rows, own time and peak
    assert!(
        text.lines()
            .any(|l| l.contains("hash build: 200 rows in, own ")
                && l.contains("|  hash probe: 16,000 rows in, own ")),
        "no phase line in\n{text}"
    );
    let join = find(&profile.plan, "HashJoinExec").unwrap();
    // the hash table is held from the build phase into the probe phase
    let build_peak = value(join, "hashBuildPeakMemoryBytes");
    assert!(build_peak > 0);
    assert!(value(join, "hashProbePeakMemoryBytes") >= build_peak);
}

/// A Parquet file of `x` = 0..100,000 in row groups of 1,000, and a two-row table of keys.
fn selective_join_tables(ctx: &SessionContext, dir: &std::path::Path) {
    let schema = Arc::new(Schema::new(vec![Field::new("x", DataType::Int64, false)]));
    let numbers = RecordBatch::try_new(
        Arc::clone(&schema),
        vec![Arc::new(Int64Array::from_iter_values(0..100_000))],
    )
    .unwrap();
    let props = WriterProperties::builder()
        .set_max_row_group_row_count(Some(1_000))
        .build();
    let path = dir.join("numbers.parquet");
    let mut writer = ArrowWriter::try_new(
        std::fs::File::create(&path).unwrap(),
        Arc::clone(&schema),
        Some(props),
    )
    .unwrap();
    writer.write(&numbers).unwrap();
    writer.close().unwrap();
    let keys = RecordBatch::try_new(
        Arc::clone(&schema),
        vec![Arc::new(Int64Array::from(vec![10, 20]))],
    )
    .unwrap();
    ctx.register_table(
        "keys",
        Arc::new(MemTable::try_new(schema, vec![vec![keys]]).unwrap()),
    )
    .unwrap();
    futures::executor::block_on(ctx.register_parquet(
        "numbers",
        path.to_str().unwrap(),
        Default::default(),
    ))
    .unwrap();
}

/// The profile of the selective join, with dynamic filter pushdown on or off.
async fn selective_join(dynamic_filters: bool) -> QueryProfile {
    let dir = std::env::temp_dir().join(format!(
        "qprof-joins-{}-{dynamic_filters}",
        std::process::id()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let (profiler, ctx) = profiled(SessionConfig::new().with_target_partitions(1).set_bool(
        "datafusion.optimizer.enable_dynamic_filter_pushdown",
        dynamic_filters,
    ));
    selective_join_tables(&ctx, &dir);
    let run = profiler
        .run_sql(
            &ctx,
            "SELECT numbers.x FROM keys JOIN numbers ON keys.x = numbers.x",
        )
        .await
        .unwrap();
    let rows: usize = run.batches.iter().map(|b| b.num_rows()).sum();
    assert_eq!(rows, 2);
    let _ = std::fs::remove_dir_all(&dir);
    run.profile
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_selective_join_produces_a_dynamic_filter_its_probe_scan_accepts() {
    let on = selective_join(true).await;
    let off = selective_join(false).await;
    let text = on.render_text(0);
    let join = find(&on.plan, "HashJoinExec").unwrap();
    let scan = &join.children[1];
    assert_eq!(scan.name, "DataSourceExec", "{text}");
    assert_eq!(value(join, "numDynamicFiltersProduced"), 1);
    assert_eq!(value(scan, "numDynamicFiltersAccepted"), 1);
    // the join's build side set the filter once
    assert_eq!(value(join, "numDynamicFilterUpdates"), 1);
    let producers = scan
        .info
        .iter()
        .find(|(k, _)| k == "dynamicFilterProducers")
        .map(|(_, v)| v.clone());
    assert_eq!(producers, Some(format!("HashJoinExec #{}", join.id)));
    // the filter kept the scan from reading rows it would have read without it
    let scanned = |p: &QueryProfile| {
        let join = find(&p.plan, "HashJoinExec").unwrap();
        value(&join.children[1], names::OUTPUT_ROWS)
    };
    assert!(
        scanned(&on) < scanned(&off),
        "{} vs {}",
        scanned(&on),
        scanned(&off)
    );
    // by skipping row groups: the filter is complete before the probe scan opens its file,
    // so DataFusion prunes with it together with the static predicate
    let skipped = |p: &QueryProfile| {
        let join = find(&p.plan, "HashJoinExec").unwrap();
        value(&join.children[1], "skippedStrides")
    };
    assert_eq!((skipped(&on), skipped(&off)), (99, 0), "{text}");
    // the static predicate (none) keeps every row group: the 99 the filter skipped, of
    // 1,000 rows each, are what it replaced
    assert_eq!(
        value(scan, "numReplacedWithDynamicFilterRows"),
        99_000,
        "{text}"
    );

    // with pushdown off, nothing is produced or accepted
    let join = find(&off.plan, "HashJoinExec").unwrap();
    assert_eq!(join.value("numDynamicFiltersProduced").unwrap_or(0), 0);
    for metric in [
        "numDynamicFiltersAccepted",
        "numReplacedWithDynamicFilterRows",
    ] {
        assert_eq!(join.children[1].value(metric).unwrap_or(0), 0, "{metric}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cross_and_nested_loop_joins_report_their_phases_under_their_own_names() {
    let (profiler, ctx) = profiled(SessionConfig::new().with_target_partitions(1));
    ctx.register_table("small", table(1, 20)).unwrap();
    ctx.register_table("big", table(2, 500)).unwrap();
    for (sql, name, prefixes, rows) in [
        (
            "SELECT small.v, big.v FROM small CROSS JOIN big",
            "CrossJoinExec",
            ("crossBuild", "crossProbe"),
            20 * 1_000,
        ),
        (
            "SELECT small.v, big.v FROM small JOIN big ON small.k + 990 < big.k",
            "NestedLoopJoinExec",
            ("nestedLoopBuild", "nestedLoopProbe"),
            // big.k runs over 0..999: 9 of them beat small.k = 0 by 990, 8 beat 1, ...
            (1..=9).sum::<usize>(),
        ),
    ] {
        let run = profiler.run_sql(&ctx, sql).await.unwrap();
        let produced: usize = run.batches.iter().map(|b| b.num_rows()).sum();
        assert_eq!(produced, rows, "{sql}");
        let text = run.profile.render_text(0);
        let join = find(&run.profile.plan, name).unwrap_or_else(|| panic!("no {name}:\n{text}"));
        let (build, probe) = prefixes;
        let metric = |prefix: &str, suffix: &str| value(join, &format!("{prefix}{suffix}"));
        assert_eq!(metric(build, "InputRows"), 20, "{text}");
        assert_eq!(metric(probe, "InputRows"), 1_000, "{text}");
        assert_eq!(metric(probe, "OutputRows"), rows as i64, "{text}");
        let own = value(join, names::SELF_WALL_NANOS);
        let phases = metric(build, "WallNanos") + metric(probe, "WallNanos");
        assert!(
            (own - phases).abs() <= 2 * value(join, "numPolls"),
            "{text}"
        );
    }
}

#[tokio::test]
async fn a_join_on_a_repeating_key_is_an_exploding_join() {
    let (profiler, ctx) = profiled(SessionConfig::new().with_target_partitions(2));
    // 1,000 rows a side, ten keys: 100 x 100 pairs per key, 100,000 rows out
    let exploding = profiler
        .run_sql(
            &ctx,
            "SELECT count(*) FROM generate_series(1, 1000) AS a(x) \
             JOIN generate_series(1, 1000) AS b(y) ON a.x % 10 = b.y % 10",
        )
        .await
        .unwrap();
    let findings = qprof_core::advice::advise(&exploding.profile);
    let found: Vec<_> = findings
        .iter()
        .filter(|f| f.rule == "exploding-join")
        .collect();
    assert_eq!(found.len(), 1, "{findings:?}");
    let join = exploding
        .profile
        .plan
        .iter()
        .find(|n| Some(n.id) == found[0].node_id)
        .unwrap();
    assert_eq!(join.name, "HashJoinExec");
    assert_eq!(value(join, names::OUTPUT_ROWS), 100_000);
    // the same inputs joined on a unique key: as many rows out as in, quiet
    let unique = profiler
        .run_sql(
            &ctx,
            "SELECT count(*) FROM generate_series(1, 1000) AS a(x) \
             JOIN generate_series(1, 1000) AS b(y) ON a.x = b.y",
        )
        .await
        .unwrap();
    let findings = qprof_core::advice::advise(&unique.profile);
    assert!(
        findings.iter().all(|f| f.rule != "exploding-join"),
        "{findings:?}"
    );
}
