//! Instrumentation checked against ground truth on TPC-H SF 0.01: results and plans are
//! unchanged, every operator has every base metric, row counts agree with what parents
//! consumed, self CPU never exceeds what the process used, and peak memory is bounded by
//! the pool's own peak.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::Arc;

use datafusion::arrow::array::RecordBatch;
use datafusion::arrow::util::pretty::pretty_format_batches;
use datafusion::execution::SessionStateBuilder;
use datafusion::execution::memory_pool::{PeakRecordingPool, UnboundedMemoryPool};
use datafusion::execution::runtime_env::{RuntimeEnv, RuntimeEnvBuilder};
use datafusion::physical_plan::ExecutionPlan;
use datafusion::prelude::{SessionConfig, SessionContext};
use qprof_core::alloc::CountingAllocator;
use qprof_core::catalog;
use qprof_core::clock::process_cpu_nanos;
use qprof_core::profile::{ProfileNode, QueryProfile, names};
use qprof_datafusion::ProfilingSession;
use tokio::sync::OnceCell;

#[global_allocator]
static ALLOCATOR: CountingAllocator = CountingAllocator::system();

async fn tpch_dir() -> &'static qprof_tpch::DatasetPaths {
    static DATA: OnceCell<qprof_tpch::DatasetPaths> = OnceCell::const_new();
    DATA.get_or_init(|| async {
        let dir: PathBuf = std::env::temp_dir()
            .join(format!("qprof-test-tpch-{}", std::process::id()))
            .join("sf0.01");
        let sf: qprof_tpch::ScaleFactor = "0.01".parse().unwrap();
        tokio::task::spawn_blocking(move || qprof_tpch::generate(sf, &dir, &mut |_| {}))
            .await
            .unwrap()
            .expect("TPC-H SF 0.01 generates")
    })
    .await
}

fn config() -> SessionConfig {
    SessionConfig::new().with_target_partitions(2)
}

async fn sessions() -> (SessionContext, ProfilingSession) {
    let paths = tpch_dir().await;
    let runtime = Arc::new(RuntimeEnv::default());
    let plain = plain_context(config(), Arc::clone(&runtime));
    let profiled = ProfilingSession::with_runtime(config(), runtime);
    qprof_tpch::register_all(&plain, paths).await.unwrap();
    qprof_tpch::register_all(profiled.context(), paths)
        .await
        .unwrap();
    (plain, profiled)
}

/// The same configuration and runtime without qprof: the baseline.
fn plain_context(config: SessionConfig, runtime: Arc<RuntimeEnv>) -> SessionContext {
    let state = SessionStateBuilder::new()
        .with_config(config)
        .with_runtime_env(runtime)
        .with_default_features()
        .build();
    SessionContext::new_with_state(state)
}

fn render(batches: &[RecordBatch]) -> String {
    pretty_format_batches(batches).unwrap().to_string()
}

async fn explain(ctx: &SessionContext, sql: &str) -> String {
    let batches = ctx
        .sql(&format!("EXPLAIN {sql}"))
        .await
        .unwrap()
        .collect()
        .await
        .unwrap();
    render(&batches)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tpch_results_and_plans_are_unchanged() {
    let (plain, profiled) = sessions().await;
    for q in 1..=qprof_tpch::QUERY_COUNT {
        let sql = qprof_tpch::query(q).unwrap();
        let expected = plain.sql(sql).await.unwrap().collect().await.unwrap();
        let run = profiled.run(q, sql).await.unwrap();
        assert_eq!(
            render(&run.batches),
            render(&expected),
            "q{q}: results differ"
        );
        assert_eq!(
            explain(profiled.context(), sql).await,
            explain(&plain, sql).await,
            "q{q}: EXPLAIN differs"
        );
        let analyzed = render(
            &profiled
                .context()
                .sql(&format!("EXPLAIN ANALYZE {sql}"))
                .await
                .unwrap()
                .collect()
                .await
                .unwrap(),
        );
        assert!(
            analyzed.contains("output_rows="),
            "q{q}: EXPLAIN ANALYZE lost its metrics"
        );
    }
}

fn value(node: &ProfileNode, name: &str) -> i64 {
    node.value(name)
        .unwrap_or_else(|| panic!("#{} {} has no {name}", node.id, node.name))
}

/// Checks one profile against ground truth; returns the summed self CPU.
fn check_profile(q: usize, p: &QueryProfile) -> i64 {
    assert_eq!(
        value(&p.plan, names::OUTPUT_ROWS),
        p.rows as i64,
        "q{q}: root rows"
    );
    let mut self_cpu = 0;
    for node in p.plan.iter() {
        for name in names::BASE {
            assert!(
                node.metric(name).is_some(),
                "q{q}: #{} {} lacks {name}",
                node.id,
                node.name
            );
        }
        // every operator that was polled was timed; one never polled (e.g. the probe side
        // of a join whose build side came out empty) produced nothing
        if value(node, "numPolls") > 0 {
            assert!(
                value(node, names::SELF_WALL_NANOS) > 0,
                "q{q}: #{} {} has no self time",
                node.id,
                node.name
            );
        } else {
            assert_eq!(
                value(node, names::OUTPUT_ROWS),
                0,
                "q{q}: #{} rows unpolled",
                node.id
            );
        }
        assert!(
            value(node, names::SELF_CPU_NANOS) <= value(node, names::CPU_NANOS),
            "q{q}: #{} {}: self cpu > cpu",
            node.id,
            node.name
        );
        assert!(value(node, names::SELF_WALL_NANOS) <= value(node, names::WALL_NANOS));
        check_polls(q, node);
        self_cpu += value(node, names::SELF_CPU_NANOS);
        check_consumption(q, node);
        let builds_then_probes = matches!(
            node.name.as_str(),
            "HashJoinExec" | "CrossJoinExec" | "NestedLoopJoinExec" | "PiecewiseMergeJoinExec"
        );
        assert_eq!(
            check_phases(q, node),
            builds_then_probes,
            "q{q}: #{} {} phases",
            node.id,
            node.name
        );
    }
    assert!(self_cpu > 0, "q{q}: no CPU recorded");
    self_cpu
}

/// Each task's polls are its batches, its pending polls and at most one more (its end).
fn check_polls(q: usize, node: &ProfileNode) {
    let tasks = |name: &str| {
        node.metric(name)
            .unwrap_or_else(|| panic!("#{} lacks {name}", node.id))
            .tasks
            .clone()
    };
    let pending = tasks(catalog::PENDING_POLLS.name);
    for ((polls, batches), pending) in tasks(names::NUM_POLLS)
        .iter()
        .zip(tasks(names::OUTPUT_VECTORS))
        .zip(pending)
    {
        assert_eq!((polls.task, batches.task), (pending.task, pending.task));
        let rest = polls.value - batches.value - pending.value;
        assert!(
            (0..=1).contains(&rest),
            "q{q}: #{} {}: {} polls, {} batches, {} pending",
            node.id,
            node.name,
            polls.value,
            batches.value,
            pending.value
        );
    }
}

/// Where a parent reports how many rows it consumed, they are its child's output rows.
fn check_consumption(q: usize, node: &ProfileNode) {
    let rows = |i: usize| value(&node.children[i], names::OUTPUT_ROWS);
    let mut checks = Vec::new();
    match node.name.as_str() {
        "FilterExec" => checks.push(("inputRows", 0)),
        "HashJoinExec" => {
            assert_eq!(
                value(node, "hashBuildOutputRows"),
                value(node, "hashBuildInputRows"),
                "q{q}: #{} rows held != build input",
                node.id
            );
            // DataFusion's count agrees on the build side; on the probe side its other
            // join types also count the build rows they emit at the end
            checks.push(("buildInputRows", 0));
            if node.display.contains("join_type=Inner") {
                checks.push(("probeInputRows", 1));
            }
        }
        "AggregateExec" if node.metric("inputRows").is_some() => checks.push(("inputRows", 0)),
        _ => {}
    }
    for (metric, child) in checks {
        assert_eq!(
            value(node, metric),
            rows(child),
            "q{q}: #{} {} {metric} != child #{} output rows",
            node.id,
            node.name,
            node.children[child].id
        );
    }
}

/// For every join that builds before it probes: each input's rows are the rows its phase
/// took in, and its own time is its build phase's plus its probe phase's (each rounded to
/// whole nanoseconds once per published interval). Returns whether `node` is such a join.
fn check_phases(q: usize, node: &ProfileNode) -> bool {
    let Some((build, probe)) = names::JOIN_PHASE_PREFIXES
        .iter()
        .find(|(build, _)| node.value(&format!("{build}WallNanos")).is_some())
    else {
        return false;
    };
    let metric = |prefix: &str, suffix: &str| value(node, &format!("{prefix}{suffix}"));
    let rows = |i: usize| value(&node.children[i], names::OUTPUT_ROWS);
    assert_eq!(
        metric(build, "InputRows"),
        rows(0),
        "q{q}: #{} build input",
        node.id
    );
    assert_eq!(
        metric(probe, "InputRows"),
        rows(1),
        "q{q}: #{} probe input",
        node.id
    );
    let polls = value(node, "numPolls");
    for (total, suffix) in [
        (names::SELF_WALL_NANOS, "WallNanos"),
        (names::SELF_CPU_NANOS, "CpuNanos"),
    ] {
        let (total, b, p) = (
            value(node, total),
            metric(build, suffix),
            metric(probe, suffix),
        );
        assert!(
            (total - (b + p)).abs() <= 2 * polls,
            "q{q}: #{} {}: phases {b} + {p} != own time {total}",
            node.id,
            node.name
        );
    }
    assert_eq!(
        metric(probe, "OutputRows"),
        value(node, names::OUTPUT_ROWS),
        "q{q}: #{} probe output != join output",
        node.id
    );
    true
}

/// DataFusion counts each operator's output rows and bytes itself: qprof's rows must
/// agree, and its bytes (Arrow's buffer sizes, which also count each array's own struct)
/// cannot be fewer than DataFusion's de-duplicated buffer bytes.
fn check_against_native_rows(q: usize, plan: &Arc<dyn ExecutionPlan>, node: &ProfileNode) {
    if let Some(metrics) = plan.metrics() {
        if let Some(native) = metrics.output_rows() {
            assert_eq!(
                value(node, names::OUTPUT_ROWS),
                native as i64,
                "q{q}: #{} {} output rows differ from DataFusion's",
                node.id,
                node.name
            );
        }
        let native_bytes = metrics
            .iter()
            .filter(|m| m.value().name() == "output_bytes")
            .map(|m| m.value().as_usize() as i64)
            .sum::<i64>();
        assert!(
            value(node, names::OUTPUT_BYTES) >= native_bytes,
            "q{q}: #{} {} output bytes {} < DataFusion's {native_bytes}",
            node.id,
            node.name,
            value(node, names::OUTPUT_BYTES)
        );
    }
    if value(node, names::OUTPUT_ROWS) > 0 && !plan.schema().fields().is_empty() {
        assert!(
            value(node, names::OUTPUT_BYTES) > 0,
            "q{q}: #{} rows without bytes",
            node.id
        );
    }
    for (child_plan, child) in plan.children().into_iter().zip(&node.children) {
        check_against_native_rows(q, child_plan, child);
    }
}

fn check_stages(q: usize, p: &QueryProfile) {
    let all: BTreeSet<usize> = p.plan.iter().map(|n| n.id).collect();
    let mut covered = BTreeSet::new();
    let mut task_ids = BTreeSet::new();
    for stage in &p.stages {
        assert!(
            !stage.tasks.is_empty(),
            "q{q}: stage {} has no tasks",
            stage.id
        );
        for id in &stage.node_ids {
            assert!(covered.insert(*id), "q{q}: node {id} in two stages");
        }
        let query_end = p.start_epoch_millis + p.duration_nanos / 1_000_000 + 1;
        for t in &stage.tasks {
            assert!(
                task_ids.insert(t.task_id),
                "q{q}: task id {} reused",
                t.task_id
            );
            // a task runs inside its query (stage tasks that never ran have no times)
            if t.start_epoch_millis > 0 {
                assert!(
                    t.start_epoch_millis >= p.start_epoch_millis
                        && t.start_epoch_millis <= t.finish_epoch_millis
                        && t.finish_epoch_millis <= query_end + 1_000,
                    "q{q}: task {} ran {}..{}, outside the query {}..{query_end}",
                    t.task_id,
                    t.start_epoch_millis,
                    t.finish_epoch_millis,
                    p.start_epoch_millis
                );
            }
        }
        let cpu: i64 = stage
            .tasks
            .iter()
            .map(|t| t.value(names::CPU_NANOS).unwrap())
            .sum();
        let nodes_cpu: i64 = p
            .plan
            .iter()
            .filter(|n| stage.node_ids.contains(&n.id))
            .map(|n| value(n, names::SELF_CPU_NANOS))
            .sum();
        // operators' work on tasks they spawned belongs to no task of the stage
        assert!(
            cpu <= nodes_cpu,
            "q{q}: stage {} task cpu {cpu} > its operators' cpu {nodes_cpu}",
            stage.id
        );
        assert!(cpu > 0, "q{q}: stage {} recorded no cpu", stage.id);
    }
    assert_eq!(covered, all, "q{q}: stages do not cover the plan");
    // the root's stage is last: inputs come first
    assert_eq!(p.plan.stage_id, p.stages.last().map(|s| s.id));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_operator_has_consistent_base_metrics() {
    let (_, profiled) = sessions().await;
    let (mut stage_ids, mut task_ids) = (BTreeSet::new(), BTreeSet::new());
    let mut pending_polls = 0;
    for q in 1..=qprof_tpch::QUERY_COUNT {
        let sql = qprof_tpch::query(q).unwrap();
        let cpu_before = process_cpu_nanos();
        let run = profiled.run(q, sql).await.unwrap();
        let process_cpu = (process_cpu_nanos() - cpu_before) as i64;
        check_against_native_rows(q, &run.plan, &run.profile.plan);
        let self_cpu = check_profile(q, &run.profile);
        assert!(
            self_cpu <= process_cpu,
            "q{q}: operators' self cpu {self_cpu} > process cpu {process_cpu}"
        );
        check_stages(q, &run.profile);
        pending_polls += run
            .profile
            .plan
            .iter()
            .map(|n| value(n, catalog::PENDING_POLLS.name))
            .sum::<i64>();
        // ids are unique across the queries of a session, as in one Spark application
        for stage in &run.profile.stages {
            assert!(
                stage_ids.insert(stage.id),
                "q{q}: stage id {} reused",
                stage.id
            );
            for t in &stage.tasks {
                assert!(
                    task_ids.insert(t.task_id),
                    "q{q}: task id {} reused",
                    t.task_id
                );
            }
        }
    }
    // two worker threads hand batches across exchanges: some polls find none ready
    assert!(pending_polls > 0, "no pending poll in 22 queries");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sort_peak_memory_is_exact_and_bounded_by_the_pool() {
    let pool = Arc::new(PeakRecordingPool::new(Arc::new(
        UnboundedMemoryPool::default(),
    )));
    let runtime = RuntimeEnvBuilder::new()
        .with_memory_pool(Arc::clone(&pool) as _)
        .build_arc()
        .unwrap();
    let session = ProfilingSession::with_runtime(config(), runtime);
    // 200,000 rows: many more than one 8,192-row batch, all buffered by the sort
    let sql = "SELECT value FROM generate_series(1, 200000) ORDER BY (value * 7919) % 200003";
    let run = session.run(1, sql).await.unwrap();
    assert_eq!(run.profile.rows, 200_000);
    let sort = run
        .profile
        .plan
        .iter()
        .find(|n| n.name == "SortExec")
        .expect("plan has a SortExec");
    let peak = value(sort, names::PEAK_MEMORY_BYTES);
    assert!(peak > 0, "sort reserved nothing");
    assert!(
        peak as usize <= pool.peak_reserved(),
        "sort peak {peak} > pool peak {}",
        pool.peak_reserved()
    );
    // each of the two sort tasks buffers its whole input: 100,000 i64 values
    assert!(
        peak >= 100_000 * 8,
        "sort peak {peak} too small for its input"
    );
    // operators that reserve nothing report zero
    let scan = run
        .profile
        .plan
        .iter()
        .find(|n| n.children.is_empty())
        .unwrap();
    assert_eq!(value(scan, names::PEAK_MEMORY_BYTES), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn allocations_are_counted_where_they_happen() {
    let session = ProfilingSession::new(config());
    let sql = "SELECT count(*), sum(length(s)) FROM (SELECT concat('x', value) AS s FROM generate_series(1, 50000))";
    let run = session.run(1, sql).await.unwrap();
    let total: i64 = run
        .profile
        .plan
        .iter()
        .map(|n| value(n, names::NUM_MEMORY_ALLOCATIONS))
        .sum();
    assert!(total > 0, "no allocations counted");
    // allocations land where batches are built, not all on the operator that drives them
    let of = |pred: &dyn Fn(&ProfileNode) -> bool| {
        run.profile
            .plan
            .iter()
            .filter(|n| pred(n))
            .map(|n| value(n, names::NUM_MEMORY_ALLOCATIONS))
            .sum::<i64>()
    };
    let concat = of(&|n| n.name == "ProjectionExec" && n.display.contains("concat"));
    let source = of(&|n| n.children.is_empty());
    assert!(concat > 0, "the concat projection allocated nothing");
    assert!(source > 0, "the series generator allocated nothing");
    assert!(
        value(&run.profile.plan, names::NUM_MEMORY_ALLOCATIONS) < total,
        "all allocations were charged to the root"
    );
}
