//! The executor's memory: per-stage peaks against the memory pool's own peak, plausible
//! process samples, one stage-executor-metrics event per stage in the event log, and the
//! same peaks replayed from it.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use datafusion::execution::SessionStateBuilder;
use datafusion::execution::memory_pool::MemoryPool;
use datafusion::execution::runtime_env::RuntimeEnvBuilder;
use datafusion::prelude::{SessionConfig, SessionContext};
use qprof_core::profile::{ProfileNode, QueryProfile, names};
use qprof_datafusion::Profiler;
use qprof_eventlog::EXECUTOR_METRIC_NAMES;
use qprof_eventlog::EventLogListener;
use qprof_eventlog::Replay;
use qprof_eventlog::discover;
use serde_json::Value;

mod common;
use common::AuditedPool;

fn find<'a>(node: &'a ProfileNode, name: &str) -> Option<&'a ProfileNode> {
    if node.name == name {
        return Some(node);
    }
    node.children.iter().find_map(|c| find(c, name))
}

/// Sorts 1 M random values in two partitions, with the event log in `dir`; the profile and
/// the pool's peak.
async fn sort_run(dir: &std::path::Path) -> (QueryProfile, usize) {
    let pool = Arc::new(AuditedPool::new(1 << 30));
    let runtime = RuntimeEnvBuilder::new()
        .with_memory_pool(Arc::clone(&pool) as Arc<dyn MemoryPool>)
        .build_arc()
        .unwrap();
    let profiler = Profiler::new();
    profiler
        .add_listener(Arc::new(EventLogListener::in_dir(dir)))
        .unwrap();
    let state = profiler
        .instrument(
            SessionStateBuilder::new()
                .with_config(SessionConfig::new().with_target_partitions(2))
                .with_runtime_env(runtime)
                .with_default_features(),
        )
        .build();
    let ctx = SessionContext::new_with_state(state);
    let run = profiler
        .run_sql(
            &ctx,
            "SELECT v, r FROM (SELECT v, random() AS r FROM generate_series(1, 1000000) AS s(v)) \
             ORDER BY r",
        )
        .await
        .unwrap();
    profiler.finish(0).unwrap();
    (run.profile, pool.peak.load(Ordering::Relaxed))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stages_have_their_own_memory_peaks_and_the_log_one_event_each() {
    let dir = std::env::temp_dir().join(format!("qprof-memory-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let (profile, pool_peak) = sort_run(&dir).await;
    let text = profile.render_text(0);

    // the sorts' stage held what the sorts held, and never more than the pool
    let sort = find(&profile.plan, "SortExec").expect("a sort");
    let sort_stage = sort.stage_id.unwrap();
    let stage_of = |id: u32| profile.stages.iter().find(|s| s.id == id).unwrap();
    let held = stage_of(sort_stage)
        .memory
        .expect("the sort's stage was sampled");
    let sorted = sort.value(names::PEAK_MEMORY_BYTES).unwrap() as u64;
    assert!(sorted > 8 << 20, "the sort held {sorted} B:\n{text}");
    assert!(held.execution_bytes >= sorted, "{held:?} < {sorted}");
    assert!(
        held.execution_bytes <= pool_peak as u64,
        "{held:?} > {pool_peak}"
    );
    // the stage generating the values reserves little: its peak is its own, not the run's
    let source = find(&profile.plan, "LazyMemoryExec").unwrap();
    let generated = stage_of(source.stage_id.unwrap()).memory.unwrap();
    assert!(
        generated.execution_bytes < held.execution_bytes / 4,
        "{generated:?}"
    );

    // the process samples are plausible
    assert!(!profile.memory.is_empty());
    let peak_rss = qprof_core::process::peak_rss_bytes().unwrap();
    for s in &profile.memory {
        assert!(
            s.rss_bytes > 0 && s.rss_bytes <= peak_rss,
            "{s:?} vs {peak_rss}"
        );
        assert!(s.heap_bytes <= s.rss_bytes + (64 << 20), "{s:?}");
        assert!(s.virtual_bytes >= s.rss_bytes, "{s:?}");
    }

    // the log: one StageExecutorMetrics event per stage, with the profile's peaks
    let app = std::fs::read_dir(&dir)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let events: Vec<Value> = std::fs::read_dir(&app)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("events_")
        })
        .flat_map(|p| {
            let text = std::fs::read_to_string(p).unwrap();
            text.lines()
                .map(|l| serde_json::from_str::<Value>(l).unwrap())
                .collect::<Vec<_>>()
        })
        .collect();
    let stage_metrics: Vec<&Value> = events
        .iter()
        .filter(|e| e["Event"] == "SparkListenerStageExecutorMetrics")
        .collect();
    assert_eq!(stage_metrics.len(), profile.stages.len());
    for stage in &profile.stages {
        let logged: Vec<&&Value> = stage_metrics
            .iter()
            .filter(|e| e["Stage ID"] == stage.id)
            .collect();
        assert_eq!(logged.len(), 1, "stage {}", stage.id);
        // a metric left out is 0, as Spark reads it
        let metric = |name: &str| logged[0]["Executor Metrics"][name].as_u64().unwrap_or(0);
        let memory = stage.memory.unwrap();
        assert_eq!(metric("OffHeapExecutionMemory"), memory.execution_bytes);
        assert_eq!(metric("JVMHeapMemory"), memory.heap_bytes);
        assert_eq!(metric("ProcessTreeJVMRSSMemory"), memory.rss_bytes);
        assert_eq!(
            metric("OffHeapUnifiedMemory"),
            memory.execution_bytes + memory.storage_bytes
        );
        assert_eq!(metric("MinorGCCount"), 0);
    }

    // replayed, the log has the same peaks per stage, and the executor's lifetime peaks
    // are the largest of them
    let source = discover(&dir).unwrap().remove(0);
    let replay = Replay::load(source).unwrap();
    let state = replay.state();
    let slot = |name: &str| {
        EXECUTOR_METRIC_NAMES
            .iter()
            .position(|n| *n == name)
            .unwrap()
    };
    let (heap, execution) = (slot("JVMHeapMemory"), slot("OffHeapExecutionMemory"));
    let mut largest = (0, 0);
    for stage in &profile.stages {
        let replayed = *state.stages[&(i64::from(stage.id), 0)].executor_peaks["driver"];
        let memory = stage.memory.unwrap();
        assert_eq!(replayed[heap], memory.heap_bytes as i64);
        assert_eq!(replayed[execution], memory.execution_bytes as i64);
        assert_eq!(
            replayed[slot("ProcessTreeJVMRSSMemory")],
            memory.rss_bytes as i64
        );
        largest = (
            largest.0.max(memory.heap_bytes as i64),
            largest.1.max(memory.execution_bytes as i64),
        );
    }
    let driver = state.executors.iter().find(|e| e.id == "driver").unwrap();
    let lifetime = driver.peaks.expect("the driver's peaks");
    assert_eq!((lifetime[heap], lifetime[execution]), largest);
    let _ = std::fs::remove_dir_all(&dir);
}
