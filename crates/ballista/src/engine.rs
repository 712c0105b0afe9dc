//! The executor side: an execution engine that runs each task's stage plan with qprof's
//! wrappers and memory attribution in place, and ships what they measured with the task's
//! metrics.

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use ballista_core::JobId;
use ballista_core::client_pool::BallistaClientPool;
use ballista_core::execution_plans::sort_shuffle::SortShuffleWriterExec;
use ballista_core::execution_plans::{
    RangeShuffleReaderExec, RangeShuffleWriterExec, ShuffleReaderExec, ShuffleWriterExec,
};
use ballista_core::extension::SessionConfigExt;
use ballista_core::serde::protobuf::{
    RuntimeStatsReport, ShuffleWritePartition, TaskColumnStats, WindowStateReport,
};
use ballista_executor::execution_engine::{
    DefaultQueryStageExec, ExecutionEngine, QueryStageExecutor, ShuffleWriterVariant,
};
use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::error::{DataFusionError, Result};
use datafusion::execution::TaskContext;
use datafusion::physical_plan::ExecutionPlan;
use datafusion::physical_plan::metrics::{MetricValue, MetricsSet};
use datafusion::prelude::SessionConfig;
use qprof_core::call_site::FunctionSite;
use qprof_core::catalog::{self, MetricDef, Tally};
use qprof_core::clock::epoch_millis;
use qprof_core::counters::OperatorTaskCounters;
use qprof_core::metric::{TaskRef, TaskValue};
use qprof_core::profile::NodeMetric;
use qprof_datafusion::{
    FunctionTimer, PlanReadings, PlanSites, ProfiledExec, Profiler, QprofOptions, attach_sites,
    claim_sites, operator_label,
};

use crate::functions::Redecoder;
use crate::wire::{self, Packer, TaskFigures};
use qprof_core::metric::saturating_i64;

/// Builds each task's stage as Ballista's default engine does, with every operator under
/// the shuffle writer wrapped by qprof and the task's runtime instrumented.
pub struct QprofExecutionEngine {
    profiler: Profiler,
    client_pool: Option<Arc<dyn BallistaClientPool>>,
    redecoder: Redecoder,
}

impl fmt::Debug for QprofExecutionEngine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("QprofExecutionEngine")
            .field("pooled_clients", &self.client_pool.is_some())
            .finish()
    }
}

impl QprofExecutionEngine {
    /// An engine that measures with `profiler`; its shuffle readers open a connection
    /// per read, as Ballista's standalone executors' do.
    pub fn new(profiler: Profiler) -> Self {
        Self {
            profiler,
            client_pool: None,
            redecoder: Redecoder::default(),
        }
    }

    /// The engine with its shuffle readers reusing connections from `pool`.
    pub fn with_client_pool(mut self, pool: Arc<dyn BallistaClientPool>) -> Self {
        self.client_pool = Some(pool);
        self
    }

    /// The stage plan with its shuffle readers pointed at `work_dir` (and the pool).
    fn with_readers(
        &self,
        plan: Arc<dyn ExecutionPlan>,
        work_dir: &str,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        let pool = self.client_pool.clone();
        Ok(plan
            .transform(|p| {
                if let Some(reader) = p.downcast_ref::<ShuffleReaderExec>() {
                    let reader = reader.with_work_dir(work_dir.to_string());
                    let reader = match &pool {
                        Some(pool) => reader.with_client_pool(Arc::clone(pool)),
                        None => reader,
                    };
                    Ok(Transformed::yes(Arc::new(reader) as Arc<dyn ExecutionPlan>))
                } else if let Some(reader) = p.downcast_ref::<RangeShuffleReaderExec>() {
                    let reader = reader.with_work_dir(work_dir.to_string());
                    let reader = match &pool {
                        Some(pool) => reader.with_client_pool(Arc::clone(pool)),
                        None => reader,
                    };
                    Ok(Transformed::yes(Arc::new(reader) as Arc<dyn ExecutionPlan>))
                } else {
                    Ok(Transformed::no(p))
                }
            })?
            .data)
    }
}

impl ExecutionEngine for QprofExecutionEngine {
    fn create_query_stage_exec(
        &self,
        job_id: JobId,
        stage_id: usize,
        task_id: usize,
        global_output_partition_ids: Vec<usize>,
        plan: Arc<dyn ExecutionPlan>,
        work_dir: &str,
        config: &SessionConfig,
    ) -> Result<Arc<dyn QueryStageExecutor>> {
        // the calls the scheduler shipped timed are this task's, unless another task that
        // shares the decoded plan took them: then the plan is decoded again with calls
        // timed for this task
        let options = QprofOptions::of(config.options());
        let (plan, sites) = match claim_sites(&plan) {
            PlanSites::Claimed(sites) => (plan, CallSites::Shipped(sites)),
            PlanSites::Taken | PlanSites::Untimed if options.tracks_functions() => match self
                .redecoder
                .with_timed_functions(&plan, config, FunctionTimer::new(options))
            {
                Some((plan, timer)) => (plan, CallSites::Redecoded(timer)),
                None => (plan, CallSites::None),
            },
            PlanSites::Taken | PlanSites::Untimed => (plan, CallSites::None),
        };
        let plan = self.with_readers(plan, work_dir)?;
        let Some(decoded) = plan.children().first().map(|c| Arc::clone(c)) else {
            return Err(DataFusionError::Internal(
                "a stage plan without a shuffle writer's input".to_string(),
            ));
        };
        let input = self.profiler.instrument_plan(Arc::clone(&decoded))?;
        measure_fetch_waits(&input);
        match sites {
            CallSites::Shipped(sites) => attach_sites(&decoded, &input, sites),
            CallSites::Redecoded(timer) => timer.attach(&decoded, &input),
            CallSites::None => {}
        }
        let work_dir = work_dir.to_string();
        let readers_work_dir = work_dir.clone();
        let (writer, variant): (Arc<dyn ExecutionPlan>, ShuffleWriterVariant) = if plan
            .downcast_ref::<ShuffleWriterExec>()
            .is_some()
        {
            let exec = ShuffleWriterExec::try_new(job_id, stage_id, Arc::clone(&input), work_dir)?
                .with_task_id(task_id)
                .with_global_output_partition_ids(global_output_partition_ids);
            (
                Arc::new(exec.clone()),
                ShuffleWriterVariant::Passthrough(exec),
            )
        } else if plan.downcast_ref::<RangeShuffleWriterExec>().is_some() {
            let exec =
                RangeShuffleWriterExec::try_new(job_id, stage_id, Arc::clone(&input), work_dir)?
                    .with_task_id(task_id);
            (Arc::new(exec.clone()), ShuffleWriterVariant::Range(exec))
        } else if let Some(sort) = plan.downcast_ref::<SortShuffleWriterExec>() {
            // the sort writer buckets, buffers and spills each input batch as it takes it
            // up, synchronously: its consumer time is its own work
            if let Some(top) = ProfiledExec::of(input.as_ref()) {
                top.measure_consumer_cpu();
            }
            let exec = SortShuffleWriterExec::try_new(
                job_id,
                stage_id,
                Arc::clone(&input),
                work_dir,
                sort.shuffle_output_partitioning().clone(),
                sort.config().clone(),
            )?
            .with_task_id(task_id)
            .with_global_output_partition_ids(global_output_partition_ids);
            (Arc::new(exec.clone()), ShuffleWriterVariant::Sort(exec))
        } else {
            return Err(DataFusionError::Internal(format!(
                "a stage plan must start with a shuffle writer, not {}",
                plan.name()
            )));
        };
        let measures_writer_cpu = matches!(variant, ShuffleWriterVariant::Sort(_));
        Ok(Arc::new(QprofStageExec {
            measures_writer_cpu,
            inner: DefaultQueryStageExec::new(variant),
            writer,
            input,
            work_dir: readers_work_dir,
            profiler: self.profiler.clone(),
            run: Mutex::new(None),
        }))
    }
}

/// Where the sites of a task's timed function calls come from.
enum CallSites {
    /// Shipped timed by the scheduler, decoded by Ballista.
    Shipped(Vec<Arc<FunctionSite>>),
    /// Handed out by a second decode.
    Redecoded(Arc<FunctionTimer>),
    /// No call of the task is timed.
    None,
}

/// What one run of a task left for its metrics.
#[derive(Debug)]
struct TaskRun {
    readings: PlanReadings,
    figures: TaskFigures,
    /// Bytes and batches the writer wrote to its shuffle files.
    written_bytes: u64,
    written_batches: u64,
    /// The most memory the writer reserved at once.
    writer_peak_bytes: u64,
    /// The writer's own CPU time, where it is measured (a sort shuffle's bucketing).
    writer_cpu_nanos: Option<u64>,
    /// What each shuffle reader read, by node id.
    shuffle_reads: HashMap<usize, Vec<NodeMetric>>,
}

/// One task's stage: Ballista's own stage executor over qprof's wrapped plan.
pub struct QprofStageExec {
    inner: DefaultQueryStageExec,
    /// The shuffle writer (a clone sharing its metrics with the one `inner` runs).
    writer: Arc<dyn ExecutionPlan>,
    /// The writer's input, every operator wrapped.
    input: Arc<dyn ExecutionPlan>,
    /// The executor's directory of shuffle files: what its readers find there is local.
    work_dir: String,
    /// Whether the writer's own CPU time is measured (a sort shuffle writer's is).
    measures_writer_cpu: bool,
    profiler: Profiler,
    run: Mutex<Option<TaskRun>>,
}

impl fmt::Debug for QprofStageExec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("QprofStageExec")
            .field("inner", &self.inner)
            .finish_non_exhaustive()
    }
}

impl fmt::Display for QprofStageExec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "qprof {}", self.inner)
    }
}

/// `ctx` with its runtime instrumented by `profiler`, the memory of consumers registered
/// outside every operator (the shuffle writer's) counted in `writer`: the context itself
/// when nothing else holds it (Ballista hands each task a context of its own), else a copy
/// (copying its function registries costs a few hundred allocations).
fn instrumented_context(
    profiler: &Profiler,
    ctx: Arc<TaskContext>,
    writer: &Arc<OperatorTaskCounters>,
) -> Arc<TaskContext> {
    let runtime =
        profiler.instrument_runtime_counting_unframed(ctx.runtime_env(), Arc::clone(writer));
    let own = Arc::try_unwrap(ctx).unwrap_or_else(|shared| {
        TaskContext::new(
            shared.task_id(),
            shared.session_id(),
            shared.session_config().clone(),
            shared.scalar_functions().clone(),
            shared.higher_order_functions().clone(),
            shared.aggregate_functions().clone(),
            shared.window_functions().clone(),
            shared.runtime_env(),
        )
    });
    Arc::new(own.with_runtime(runtime))
}

#[async_trait::async_trait]
impl QueryStageExecutor for QprofStageExec {
    async fn execute_query_stage(
        &self,
        task_id: usize,
        context: Arc<TaskContext>,
    ) -> Result<Vec<ShuffleWritePartition>> {
        // the writer's memory: Ballista drives it on tasks of its own, outside every frame
        let writer = Arc::new(OperatorTaskCounters::new());
        let context = instrumented_context(&self.profiler, context, &writer);
        let start = epoch_millis();
        let clock = Instant::now();
        let force_remote = context
            .session_config()
            .ballista_shuffle_reader_force_remote_read();
        let result = self.inner.execute_query_stage(task_id, context).await;
        let wall = clock.elapsed();
        let finish = epoch_millis();
        let total = |f: fn(&ShuffleWritePartition) -> u64| {
            result.as_ref().map_or(0, |parts| parts.iter().map(f).sum())
        };
        let (written_bytes, written_batches) = (total(|p| p.num_bytes), total(|p| p.num_batches));
        let readings = self.profiler.plan_readings(&self.input);
        let writer_cpu_nanos = self.measures_writer_cpu.then(|| writer_cpu(&self.input));
        let mut figures = task_figures(&self.profiler, &readings, start, finish, wall);
        figures.cpu_nanos += writer_cpu_nanos.unwrap_or(0);
        let local_dir = (!force_remote).then_some(self.work_dir.as_str());
        let shuffle_reads = shuffle_reads(&self.input, &readings, local_dir);
        *self.run.lock().unwrap_or_else(PoisonError::into_inner) = Some(TaskRun {
            readings,
            figures,
            written_bytes,
            written_batches,
            writer_peak_bytes: writer.memory().peak(),
            writer_cpu_nanos,
            shuffle_reads,
        });
        result
    }

    fn collect_plan_metrics(&self) -> Vec<MetricsSet> {
        let mut sets = self.inner.collect_plan_metrics();
        let run = self.run.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(run) = run.as_ref() {
            add_qprof_metrics(&mut sets, &self.writer, run);
        }
        wire::ship_safely(sets)
    }

    fn collect_runtime_stats_reports(&self) -> Vec<RuntimeStatsReport> {
        self.inner.collect_runtime_stats_reports()
    }

    fn collect_window_state_reports(&self) -> Result<Vec<WindowStateReport>> {
        self.inner.collect_window_state_reports()
    }

    fn collect_column_stats(&self) -> Vec<TaskColumnStats> {
        self.inner.collect_column_stats()
    }
}

/// The task's own figures: its span and wall time, the CPU time of its operators, and the
/// executor's memory peaks while it ran (up to the sample its end took), with execution
/// memory the task's own reservation peak.
fn task_figures(
    profiler: &Profiler,
    readings: &PlanReadings,
    start: u64,
    finish: u64,
    wall: Duration,
) -> TaskFigures {
    let mut memory =
        profiler.memory_peaks_between(start, finish.max(readings.sampled_at_epoch_millis));
    memory.epoch_millis = 0;
    memory.execution_bytes = readings.execution_peak_bytes;
    TaskFigures {
        start_epoch_millis: start,
        finish_epoch_millis: finish,
        wall_nanos: u64::try_from(wall.as_nanos()).unwrap_or(u64::MAX),
        cpu_nanos: readings.cpu_nanos,
        memory,
    }
}

/// Appends qprof's metrics to the sets Ballista collected from the stage plan: the task's
/// figures and the writer's own to the first (the writer's), each wrapped operator's to
/// its own. Sets are matched as Ballista matches them, in pre-order over the operators
/// that have metrics; no set is added or removed.
fn add_qprof_metrics(sets: &mut [MetricsSet], writer: &Arc<dyn ExecutionPlan>, run: &TaskRun) {
    let mut slots = sets.iter_mut();
    let mut pending = vec![Arc::clone(writer)];
    // pre-order, as Ballista's `collect_plan_metrics` walks: children pushed in reverse
    while let Some(plan) = pending.pop() {
        pending.extend(plan.children().into_iter().rev().cloned());
        if plan.metrics().is_none() {
            continue;
        }
        let Some(set) = slots.next() else {
            return;
        };
        let mut packer = Packer::new();
        if Arc::ptr_eq(&plan, writer) {
            packer.task(&run.figures);
            packer.operator(&writer_metrics(writer.as_ref(), run));
        } else if let Some(node) =
            ProfiledExec::of(plan.as_ref()).and_then(|e| run.readings.operators.get(&e.node_id()))
        {
            packer.reading(&node.reading);
            packer.operator(&node.filter_metrics);
            if let Some(reads) =
                ProfiledExec::of(plan.as_ref()).and_then(|e| run.shuffle_reads.get(&e.node_id()))
            {
                packer.operator(reads);
            }
            packer.functions(&node.functions);
        }
        for metric in packer.finish() {
            set.push(Arc::new(metric));
        }
    }
}

/// Calls `f` with each wrapped shuffle reader of `input` that reads a shuffle (a
/// broadcast's reader reads none, as in Spark).
fn for_each_shuffle_reader(
    input: &Arc<dyn ExecutionPlan>,
    mut f: impl FnMut(&ProfiledExec, &ShuffleReaderExec),
) {
    let mut pending = vec![Arc::clone(input)];
    while let Some(plan) = pending.pop() {
        pending.extend(plan.children().into_iter().cloned());
        if let Some(exec) = ProfiledExec::of(plan.as_ref())
            && let Some(reader) = exec.inner().downcast_ref::<ShuffleReaderExec>()
            && !reader.broadcast
        {
            f(exec, reader);
        }
    }
}

/// Has each shuffle reader of `input` measure how long its consumers wait on its fetches.
fn measure_fetch_waits(input: &Arc<dyn ExecutionPlan>) {
    const FETCH_WAIT: Tally = Tally::of(&catalog::SHUFFLE_FETCH_WAIT_NANOS);
    for_each_shuffle_reader(input, |exec, _| exec.measure_waits(FETCH_WAIT));
}

/// The writer's own CPU time in the task, as its input's task counters measured it: what
/// their consumer spent between batches, over all of the input's partitions.
fn writer_cpu(input: &Arc<dyn ExecutionPlan>) -> u64 {
    ProfiledExec::of(input.as_ref()).map_or(0, |top| {
        top.task_counters()
            .iter()
            .map(|(_, t)| t.consumer_cpu_nanos())
            .sum()
    })
}

/// What each shuffle reader of `input` read in the partitions it computed, as Spark counts
/// a shuffle read: the bytes (as the writers reported them) and the blocks of its
/// partitions' locations, local when the file is in `local_dir` (as Ballista's reader
/// decides; `None` when it fetches every block remotely). How long its tasks waited on its
/// fetches is a tally of the reader's own tasks.
fn shuffle_reads(
    input: &Arc<dyn ExecutionPlan>,
    readings: &PlanReadings,
    local_dir: Option<&str>,
) -> HashMap<usize, Vec<NodeMetric>> {
    let mut out = HashMap::new();
    // a sort shuffle's file serves many partitions: each is looked for once
    let mut on_disk: HashMap<std::path::PathBuf, bool> = HashMap::new();
    for_each_shuffle_reader(input, |exec, reader| {
        let Some(node) = readings.operators.get(&exec.node_id()) else {
            return;
        };
        let mut read = ShuffleRead::default();
        for (partition, _) in &node.reading.tasks {
            let task = TaskRef {
                stage_id: 0,
                stage_attempt: 0,
                task_id: 0,
                partition: *partition as u32,
            };
            let mut sums = BlockSums::default();
            for location in reader.partition.get(*partition).into_iter().flatten() {
                let bytes = location.partition_stats.num_bytes().unwrap_or(0);
                let local = local_dir.is_some_and(|dir| {
                    location.path(dir).is_ok_and(|path| {
                        *on_disk.entry(path).or_insert_with_key(|path| path.exists())
                    })
                });
                if local {
                    sums.local_bytes += bytes;
                    sums.local_blocks += 1;
                } else {
                    sums.remote_bytes += bytes;
                    sums.remote_blocks += 1;
                }
            }
            read.add(task, &sums);
        }
        out.insert(
            exec.node_id(),
            read.metrics(&operator_label(exec.inner().name())),
        );
    });
    out
}

/// What one task of a shuffle reader read.
#[derive(Default)]
struct BlockSums {
    local_bytes: u64,
    remote_bytes: u64,
    local_blocks: u64,
    remote_blocks: u64,
}

/// A shuffle reader's reads: each task's value of each metric.
#[derive(Default)]
struct ShuffleRead {
    local_bytes: Vec<TaskValue>,
    remote_bytes: Vec<TaskValue>,
    local_blocks: Vec<TaskValue>,
    remote_blocks: Vec<TaskValue>,
}

impl ShuffleRead {
    fn add(&mut self, task: TaskRef, sums: &BlockSums) {
        let value = |v: u64| TaskValue {
            task: Some(task),
            value: saturating_i64(v),
        };
        self.local_bytes.push(value(sums.local_bytes));
        self.remote_bytes.push(value(sums.remote_bytes));
        self.local_blocks.push(value(sums.local_blocks));
        self.remote_blocks.push(value(sums.remote_blocks));
    }

    fn metrics(self, label: &str) -> Vec<NodeMetric> {
        vec![
            catalog::SHUFFLE_LOCAL_BYTES_READ.summed(label, self.local_bytes),
            catalog::SHUFFLE_REMOTE_BYTES_READ.summed(label, self.remote_bytes),
            catalog::SHUFFLE_LOCAL_BLOCKS_READ.summed(label, self.local_blocks),
            catalog::SHUFFLE_REMOTE_BLOCKS_READ.summed(label, self.remote_blocks),
        ]
    }
}

/// The shuffle writer's base metrics, which no wrapper measured (Ballista drives it
/// directly, on tasks it spawns): its rows, the batches and bytes it wrote, its time as
/// the task's wall time, inclusive and less its input's slowest partition, the most
/// memory it reserved (a sort shuffle's buffers), and, for a sort shuffle, its own CPU
/// time taking up its input's batches (the other writers encode on Ballista's blocking
/// threads, whose time is `shuffleWriteNanos`).
fn writer_metrics(writer: &dyn ExecutionPlan, run: &TaskRun) -> Vec<NodeMetric> {
    let task = TaskRef {
        stage_id: 0,
        stage_attempt: 0,
        task_id: 0,
        partition: 0,
    };
    let label = operator_label(writer.name());
    let one = |def: &MetricDef, value: u64| {
        def.summed(
            &label,
            vec![TaskValue {
                task: Some(task),
                value: saturating_i64(value),
            }],
        )
    };
    let rows = writer
        .metrics()
        .map(|m| {
            m.iter()
                .filter(|m| matches!(m.value(), MetricValue::OutputRows(_)))
                .map(|m| m.value().as_usize() as u64)
                .sum::<u64>()
        })
        .unwrap_or(0);
    let input = writer
        .children()
        .first()
        .and_then(|input| ProfiledExec::of(input.as_ref()))
        .and_then(|e| run.readings.operators.get(&e.node_id()));
    let input_wall = input
        .and_then(|n| n.reading.tasks.iter().map(|(_, s)| s.wall_nanos).max())
        .unwrap_or(0);
    let input_cpu: u64 = input.map_or(0, |n| {
        n.reading.tasks.iter().map(|(_, s)| s.cpu_nanos).sum()
    });
    let wall = run.figures.wall_nanos;
    let cpu = run.writer_cpu_nanos.into_iter().flat_map(|own| {
        [
            one(&catalog::CPU_NANOS, own + input_cpu),
            one(&catalog::SELF_CPU_NANOS, own),
        ]
    });
    let mut metrics = vec![
        one(&catalog::WALL_NANOS, wall),
        one(&catalog::SELF_WALL_NANOS, wall.saturating_sub(input_wall)),
        one(&catalog::OUTPUT_ROWS, rows),
        one(&catalog::OUTPUT_VECTORS, run.written_batches),
        one(&catalog::OUTPUT_BYTES, run.written_bytes),
        one(&catalog::PEAK_MEMORY_BYTES, run.writer_peak_bytes),
    ];
    metrics.extend(cpu);
    metrics
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::execution::memory_pool::MemoryConsumer;
    use datafusion::prelude::SessionContext;

    /// Whether `ctx` runs on a runtime `profiler` instrumented (instrumenting it again
    /// leaves it as it is).
    fn instrumented(profiler: &Profiler, ctx: &TaskContext) -> bool {
        Arc::ptr_eq(
            &profiler.instrument_runtime(ctx.runtime_env()),
            &ctx.runtime_env(),
        )
    }

    #[test]
    fn a_task_context_is_instrumented_in_place_or_as_a_copy_when_shared() {
        let profiler = Profiler::new();
        let session = SessionContext::new();
        let original = session.task_ctx();
        assert!(!instrumented(&profiler, &original));
        let functions = original.scalar_functions().len();
        assert!(functions > 0);

        // held by someone else too: a copy, the original left as it was
        let writer = Arc::new(OperatorTaskCounters::new());
        let copy = instrumented_context(&profiler, Arc::clone(&original), &writer);
        assert!(instrumented(&profiler, &copy));
        assert!(!instrumented(&profiler, &original));
        assert_eq!(copy.scalar_functions().len(), functions);
        assert_eq!(copy.session_id(), original.session_id());

        // its own: the same context, its runtime instrumented
        let own = instrumented_context(&profiler, session.task_ctx(), &writer);
        assert!(instrumented(&profiler, &own));
        assert_eq!(own.scalar_functions().len(), functions);
        assert_eq!(
            own.aggregate_functions().len(),
            original.aggregate_functions().len()
        );
    }

    #[test]
    fn memory_reserved_outside_every_operator_is_the_writers() {
        let profiler = Profiler::new();
        let writer = Arc::new(OperatorTaskCounters::new());
        let ctx = instrumented_context(&profiler, SessionContext::new().task_ctx(), &writer);
        // as Ballista's sort-shuffle writer reserves its buffers, on a task of its own
        let buffers =
            MemoryConsumer::new("SortShuffleWriter[0]").register(&ctx.runtime_env().memory_pool);
        buffers.grow(1000);
        buffers.shrink(400);
        buffers.grow(100);
        assert_eq!(writer.memory().peak(), 1000);
        assert_eq!(writer.memory().current(), 700);
        drop(buffers);
        assert_eq!(writer.memory().current(), 0);
    }
}
