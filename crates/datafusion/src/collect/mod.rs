//! Turning an executed, wrapped plan into a [`QueryProfile`].

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use datafusion::physical_plan::{ExecutionPlan, displayable};
use qprof_core::clock::epoch_millis;
use qprof_core::counters::{OperatorTaskCounters, OperatorTaskSnapshot};
use qprof_core::executor_memory::{MemoryRecorder, MemorySample};
use qprof_core::io::{CONCURRENCY_BUCKETS, IoSnapshot};
use qprof_core::metric::{MetricKind, TaskRef, TaskValue};
use qprof_core::periodic::{bucket_info_string, bucket_percentages};
use qprof_core::phases::JoinPhase;
use qprof_core::profile::{
    FunctionProfile, NodeMetric, ProfileNode, QueryProfile, StageProfile, TaskMetric, TaskProfile,
    names,
};
use qprof_core::sampling::FunctionStats;
use qprof_core::spill::SpillSnapshot;

mod dynamic_filters;
mod joins;
mod replaced_rows;

use crate::definitions;
use crate::exec::ProfiledExec;
use crate::native_metrics::{add_stride_totals, native_metrics};
use qprof_core::call_site::FunctionSite;

/// Hands out stage and task ids that are unique within one run (one application), as
/// Spark's are: every query's stages and tasks get ids no earlier query used.
#[derive(Debug, Default)]
pub(crate) struct RunIds {
    stages: AtomicU32,
    tasks: AtomicU64,
}

impl RunIds {
    /// Reserves `count` consecutive stage ids and returns the first.
    fn reserve_stages(&self, count: u32) -> u32 {
        self.stages.fetch_add(count, Ordering::Relaxed)
    }

    fn next_task(&self) -> u64 {
        self.tasks.fetch_add(1, Ordering::Relaxed)
    }

    /// Counters starting where these are now, reserving nothing here: the ids a running
    /// query's snapshot gets are those its profile will get if no other query ends first.
    pub(crate) fn continuing(&self) -> RunIds {
        RunIds {
            stages: AtomicU32::new(self.stages.load(Ordering::Relaxed)),
            tasks: AtomicU64::new(self.tasks.load(Ordering::Relaxed)),
        }
    }
}

/// What is known about a query apart from its plan.
#[derive(Debug, Clone)]
pub(crate) struct QueryInfo {
    /// Query id within the run.
    pub id: usize,
    /// SQL text.
    pub sql: String,
    /// Rows returned.
    pub rows: u64,
    /// Wall time of planning and execution, in nanoseconds.
    pub duration_nanos: u64,
    /// Whether the query ended (else this is a snapshot of a running query: its tasks
    /// still running get no finish time).
    pub ended: bool,
    /// When the query started, in milliseconds since the Unix epoch.
    pub start_epoch_millis: u64,
    /// Whether operators get their display text (an engine that ships only the values
    /// leaves it out: formatting every operator is most of a small task's profile).
    pub operator_texts: bool,
    /// Whether operators get DataFusion's own metrics (an engine that ships those itself,
    /// as Ballista does, leaves them out: mapping them is most of a task's profile).
    pub native_metrics: bool,
}

/// Counters of one operator, read once so that every figure of a profile comes from the
/// same moment (spawned work can still finish after the last batch).
struct OperatorSnapshot {
    stage: Option<u32>,
    tasks: Vec<(usize, OperatorTaskSnapshot)>,
    /// Work on tasks the operator spawned, if there was any.
    spawned: Option<OperatorTaskSnapshot>,
    peak: u64,
    /// I/O of the tasks that touched storage, by partition (`None`: spawned work).
    io: Vec<(Option<usize>, IoSnapshot)>,
    /// Spilling of the tasks that spilled, by partition (`None`: spawned work).
    spill: Vec<(Option<usize>, SpillSnapshot)>,
    /// For a join: each task's phases, by partition.
    phases: Vec<joins::PhaseReading>,
    /// The tasks that failed, with why, by partition.
    errors: Vec<(usize, String)>,
}

impl OperatorSnapshot {
    fn of(exec: &ProfiledExec) -> Self {
        let stats = exec.stats();
        let executed = stats.executed_tasks();
        let io_of =
            |p: Option<usize>, c: &OperatorTaskCounters| c.io().map(|io| (p, io.snapshot()));
        let spill_of = |p: Option<usize>, c: &OperatorTaskCounters| {
            c.spill().map(|spill| (p, spill.snapshot()))
        };
        let spill = executed
            .iter()
            .filter_map(|(p, c)| spill_of(Some(*p), c))
            .chain(spill_of(None, &stats.spawned))
            .collect();
        let phases = executed
            .iter()
            .filter_map(|(p, c)| {
                let phases = c.phases()?;
                Some((Some(*p), JoinPhase::ALL.map(|phase| phases.snapshot(phase))))
            })
            .collect();
        let errors = executed
            .iter()
            .filter_map(|(p, c)| Some((*p, c.error()?.to_string())))
            .collect();
        Self {
            phases,
            errors,
            stage: stats.stage(),
            tasks: executed.iter().map(|(p, c)| (*p, c.snapshot())).collect(),
            spawned: Some(stats.spawned.snapshot())
                .filter(|s| *s != OperatorTaskSnapshot::default()),
            peak: stats.memory.peak(),
            spill,
            io: executed
                .iter()
                .filter_map(|(p, c)| io_of(Some(*p), c))
                .chain(io_of(None, &stats.spawned))
                .collect(),
        }
    }

    fn error(&self, partition: usize) -> Option<&str> {
        self.errors
            .iter()
            .find(|(p, _)| *p == partition)
            .map(|(_, e)| e.as_str())
    }

    fn task(&self, partition: usize) -> Option<&OperatorTaskSnapshot> {
        self.tasks
            .iter()
            .find(|(p, _)| *p == partition)
            .map(|(_, s)| s)
    }
}

/// The tasks of a query: which stage partitions ran, and the id each task got.
struct TaskMap(BTreeMap<(u32, usize), TaskRef>);

impl TaskMap {
    fn get(&self, stage: Option<u32>, partition: usize) -> Option<TaskRef> {
        self.0.get(&(stage?, partition)).copied()
    }
}

/// Builds the profile of an executed plan that [`crate::ProfilingRule`] wrapped.
///
/// Operators that are not wrapped (none, unless something rewrote the plan after the rule)
/// appear with their name and DataFusion's metrics only.
pub(crate) fn collect_profile(
    plan: &Arc<dyn ExecutionPlan>,
    info: QueryInfo,
    ids: &RunIds,
) -> QueryProfile {
    let mut wrapped = Vec::new();
    gather(plan, &mut wrapped);
    let readings: BTreeMap<usize, OperatorSnapshot> = wrapped
        .iter()
        .map(|e| (e.node_id(), OperatorSnapshot::of(e)))
        .collect();

    // stages and their tasks, in stage order; a stage's partitions are those any of its
    // operators executed
    let mut stage_nodes: BTreeMap<u32, Vec<usize>> = BTreeMap::new();
    let mut stage_partitions: BTreeMap<u32, Vec<usize>> = BTreeMap::new();
    for exec in &wrapped {
        let reading = &readings[&exec.node_id()];
        if let Some(stage) = reading.stage {
            stage_nodes.entry(stage).or_default().push(exec.node_id());
            let parts = stage_partitions.entry(stage).or_default();
            parts.extend(reading.tasks.iter().map(|(p, _)| *p));
            parts.sort_unstable();
            parts.dedup();
        }
    }
    // the plan numbers its stages from 0; the run's ids continue where the last query's ended
    let stage_count = stage_nodes.keys().next_back().map_or(0, |last| last + 1);
    let base = ids.reserve_stages(stage_count);
    let mut tasks = BTreeMap::new();
    for (&stage, partitions) in &stage_partitions {
        for &p in partitions {
            tasks.insert(
                (stage, p),
                TaskRef {
                    stage_id: base + stage,
                    stage_attempt: 0,
                    task_id: ids.next_task(),
                    partition: p as u32,
                },
            );
        }
    }
    let tasks = TaskMap(tasks);
    let next_unwrapped_id = wrapped.iter().map(|e| e.node_id() + 1).max().unwrap_or(0);
    let plan_state = wrapped.first().map(|e| Arc::clone(&e.stats().plan));
    let (functions, unplaced) = match &plan_state {
        Some(state) => place_functions(&wrapped, &state.sites()),
        None => (HashMap::new(), Vec::new()),
    };
    let producers = dynamic_filters::Producers::of(plan);
    let mut builder = NodeBuilder {
        readings: &readings,
        tasks: &tasks,
        stage_base: base,
        next_unwrapped_id,
        functions,
        producers: &producers,
        texts: info.operator_texts,
        native: info.native_metrics,
    };
    let mut root = builder.node(plan);
    let join_shapes: Vec<_> = wrapped
        .iter()
        .filter_map(|e| Some((e.node_id(), *e.stats().join.get()?)))
        .collect();
    if !join_shapes.is_empty() {
        joins::add_projection_metrics(&mut root, &join_shapes);
    }
    // calls made outside any operator's frame
    if !unplaced.is_empty() {
        root.info.push((
            "functionsOfUnknownOperators".to_string(),
            unplaced.len().to_string(),
        ));
        root.functions.extend(unplaced);
        sort_functions(&mut root.functions);
    }
    // a sample at the query's end (or at this snapshot), so its last stages have one
    let monitor = plan_state.as_ref().map(|s| Arc::clone(&s.memory));
    let now = monitor
        .as_ref()
        .map_or_else(epoch_millis, |m| m.sample_at_boundary().epoch_millis);
    let stages = stage_nodes
        .iter()
        .map(|(&stage, node_ids)| {
            let peak = |p: usize| {
                plan_state
                    .as_ref()
                    .map_or(0, |s| s.stage_task_peak(stage, p))
            };
            let mut profile = stage_profile(stage, node_ids, &readings, &tasks, info.ended, peak);
            profile.id = base + stage;
            if let (Some(state), Some(monitor)) = (&plan_state, &monitor) {
                profile.memory =
                    stage_memory(&profile, state.stage_peak(stage), monitor.recorder(), now);
            }
            profile
        })
        .collect();
    let memory = monitor.map_or_else(Vec::new, |m| {
        m.recorder().between(info.start_epoch_millis, now)
    });
    QueryProfile {
        memory,
        id: info.id,
        sql: info.sql,
        rows: info.rows,
        duration_nanos: info.duration_nanos,
        start_epoch_millis: info.start_epoch_millis,
        plan: root,
        stages,
        memory_pool: None,
    }
}

/// Adds the files planning pruned by partition values to the scan's skipped splits, as a
/// value of no task (Spark's driver-side value).
fn add_listing_pruning(metrics: &mut Vec<NodeMetric>, exec: &ProfiledExec) {
    let pruned = exec.stats().files_pruned_at_listing.load(Ordering::Relaxed);
    if pruned == 0 {
        return;
    }
    let value = TaskValue {
        task: None,
        value: clamp(pruned),
    };
    match metrics.iter_mut().find(|m| m.name == names::SKIPPED_SPLITS) {
        Some(skipped) => {
            skipped.value = skipped.value.saturating_add(value.value);
            skipped.tasks.push(value);
        }
        None => metrics.push(NodeMetric::summed(
            names::SKIPPED_SPLITS,
            "number of skipped splits",
            MetricKind::Sum,
            vec![value],
        )),
    }
}

/// A metric summed over the tasks' snapshots of some counters: name, display name, kind,
/// reading.
type SnapshotMetric<S> = (&'static str, &'static str, MetricKind, fn(&S) -> u64);

/// The metrics of `table`, each summed over the tasks' `snapshots` (by partition; `None`:
/// spawned work).
fn summed_over_tasks<S>(
    table: &[SnapshotMetric<S>],
    snapshots: &[(Option<usize>, S)],
    stage: Option<u32>,
    tasks: &TaskMap,
) -> Vec<NodeMetric> {
    table
        .iter()
        .map(|(name, display, kind, read)| {
            let values = snapshots
                .iter()
                .map(|(p, s)| TaskValue {
                    task: p.and_then(|p| tasks.get(stage, p)),
                    value: clamp(read(s)),
                })
                .collect();
            NodeMetric::summed(*name, *display, *kind, values)
        })
        .collect()
}

#[rustfmt::skip]
const SPILL_METRICS: &[SnapshotMetric<SpillSnapshot>] = &[
    (names::SPILL_FILES_CREATED, "number of spill files created", MetricKind::Sum, |s| s.files),
    (names::SPILL_WRITTEN_BYTES, "bytes written to spill files", MetricKind::Size, |s| s.written_bytes),
    (names::SPILL_WRITTEN_ROWS, "rows written to spill files", MetricKind::Sum, |s| s.written_rows),
    (names::SPILLED_PARTITIONS, "total spilled partitions", MetricKind::Sum, |s| u64::from(s.files > 0)),
    (names::SPILL_WRITE_NANOS, "time of writing spill files", MetricKind::NsTiming, |s| s.write_nanos),
    (names::SPILL_READ_BYTES, "bytes read back from spill files", MetricKind::Size, |s| s.read_bytes),
    (names::SPILL_READ_NANOS, "time of reading spill files", MetricKind::NsTiming, |s| s.read_nanos),
];

/// The spill metrics of an operator whose tasks spilled, counted at the files.
fn spill_metrics(reading: &OperatorSnapshot, tasks: &TaskMap) -> Vec<NodeMetric> {
    if reading.spill.is_empty() {
        return Vec::new();
    }
    summed_over_tasks(SPILL_METRICS, &reading.spill, reading.stage, tasks)
}

fn gather<'a>(plan: &'a Arc<dyn ExecutionPlan>, out: &mut Vec<&'a ProfiledExec>) {
    if let Some(exec) = ProfiledExec::of(plan.as_ref()) {
        out.push(exec);
    }
    for child in plan.children() {
        gather(child, out);
    }
}

/// What building the profile's nodes reads, and what it hands out as it goes.
struct NodeBuilder<'a> {
    readings: &'a BTreeMap<usize, OperatorSnapshot>,
    tasks: &'a TaskMap,
    stage_base: u32,
    /// The id the next operator qprof did not wrap gets.
    next_unwrapped_id: usize,
    /// The function calls not yet placed on their node, by node id.
    functions: HashMap<usize, Vec<FunctionProfile>>,
    producers: &'a dynamic_filters::Producers,
    /// Whether nodes get their display text.
    texts: bool,
    /// Whether nodes get DataFusion's own metrics.
    native: bool,
}

impl NodeBuilder<'_> {
    fn node(&mut self, plan: &Arc<dyn ExecutionPlan>) -> ProfileNode {
        let display = if self.texts {
            displayable(plan.as_ref()).one_line().to_string()
        } else {
            String::new()
        };
        let name = plan.name().to_string();
        let label = definitions::operator_label(&name);
        let mut info = vec![(
            "outputPartitions".to_string(),
            plan.properties().partitioning.partition_count().to_string(),
        )];
        let tasks = self.tasks;
        let (id, stage_id, mut metrics) = match ProfiledExec::of(plan.as_ref()) {
            Some(exec) => {
                let reading = &self.readings[&exec.node_id()];
                let mut metrics = base_metrics(reading, &label, tasks);
                let is_sink = name == "DataSinkExec";
                metrics.extend(io_metrics(reading, tasks, is_sink, &mut info));
                metrics.extend(spill_metrics(reading, tasks));
                if let Some(shape) = exec.stats().join.get() {
                    metrics.extend(joins::phase_metrics(
                        shape,
                        &reading.phases,
                        reading.stage,
                        tasks,
                    ));
                }
                (exec.node_id(), reading.stage, metrics)
            }
            None => {
                self.next_unwrapped_id += 1;
                (self.next_unwrapped_id - 1, None, Vec::new())
            }
        };
        // an engine that ships DataFusion's metrics itself maps them where they arrive
        if self.native
            && let Some(set) = plan.metrics()
        {
            metrics.extend(native_metrics(
                set.iter().map(AsRef::as_ref),
                &name,
                &label,
                |p| tasks.get(stage_id, p),
            ));
        }
        if let Some(exec) = ProfiledExec::of(plan.as_ref()) {
            add_listing_pruning(&mut metrics, exec);
        }
        add_stride_totals(&mut metrics);
        let runtime = ProfiledExec::of(plan.as_ref()).and_then(|e| e.stats().runtime.get());
        let (filter_metrics, filter_info) =
            dynamic_filters::metrics(plan.as_ref(), self.producers, runtime.map(Arc::as_ref));
        metrics.extend(filter_metrics);
        info.extend(filter_info);
        let children = plan.children().into_iter().map(|c| self.node(c)).collect();
        let mut functions = self.functions.remove(&id).unwrap_or_default();
        sort_functions(&mut functions);
        ProfileNode {
            id,
            name,
            display: display.trim().to_string(),
            stage_id: stage_id.map(|s| self.stage_base + s),
            metrics,
            info,
            functions,
            children,
        }
    }
}

/// The profiles of the function call sites, by the node that evaluated them, and those
/// called outside any operator. Sites never called are left out.
fn place_functions(
    wrapped: &[&ProfiledExec],
    sites: &[Arc<FunctionSite>],
) -> (HashMap<usize, Vec<FunctionProfile>>, Vec<FunctionProfile>) {
    let mut owners: HashMap<*const OperatorTaskCounters, usize> = HashMap::new();
    for exec in wrapped {
        let stats = exec.stats();
        owners.insert(Arc::as_ptr(&stats.spawned), exec.node_id());
        for (_, task) in stats.executed_tasks() {
            owners.insert(Arc::as_ptr(&task), exec.node_id());
        }
    }
    let mut placed: HashMap<usize, Vec<FunctionProfile>> = HashMap::new();
    let mut unplaced = Vec::new();
    for site in sites {
        // the threads' samplers, by the node they ran in (None: outside any operator)
        let mut by_node: BTreeMap<Option<usize>, Vec<FunctionStats>> = BTreeMap::new();
        for (operator, stats) in site.stats_by_operator() {
            let node = operator.and_then(|op| owners.get(&Arc::as_ptr(&op)).copied());
            by_node.entry(node).or_default().push(stats);
        }
        for (node, stats) in by_node {
            let profile = FunctionProfile::from_stats(site.name(), site.expression(), &stats);
            match node {
                Some(node) => placed.entry(node).or_default().push(profile),
                None => unplaced.push(profile),
            }
        }
    }
    (placed, unplaced)
}

/// Largest CPU first; ties by expression, so the order is stable.
fn sort_functions(functions: &mut [FunctionProfile]) {
    functions.sort_by(|a, b| {
        b.cpu_nanos
            .cmp(&a.cpu_nanos)
            .then_with(|| a.expression.cmp(&b.expression))
    });
}

/// The base metrics every wrapped operator has, one value per task.
fn base_metrics(reading: &OperatorSnapshot, label: &str, tasks: &TaskMap) -> Vec<NodeMetric> {
    // spawned work belongs to no output task: it is reported without one, as Spark
    // reports driver-side values
    let snapshots: Vec<(Option<TaskRef>, &OperatorTaskSnapshot)> = reading
        .tasks
        .iter()
        .map(|(p, s)| (tasks.get(reading.stage, *p), s))
        .chain(reading.spawned.iter().map(|s| (None, s)))
        .collect();
    let series = |name: &str, kind: MetricKind, read: fn(&OperatorTaskSnapshot) -> u64| {
        let values = snapshots
            .iter()
            .map(|(task, s)| TaskValue {
                task: *task,
                value: clamp(read(s)),
            })
            .collect();
        NodeMetric::summed(
            name,
            definitions::base_display_name(name, label),
            kind,
            values,
        )
    };
    let mut peak = series(names::PEAK_MEMORY_BYTES, MetricKind::Size, |s| {
        s.peak_memory_bytes
    });
    // the operator's true peak, not the sum of its tasks' peaks
    peak.value = clamp(reading.peak);
    vec![
        series(names::WALL_NANOS, MetricKind::NsTiming, |s| s.wall_nanos),
        series(names::SELF_WALL_NANOS, MetricKind::NsTiming, |s| {
            s.self_wall_nanos
        }),
        series(names::CPU_NANOS, MetricKind::NsTiming, |s| s.cpu_nanos),
        series(names::SELF_CPU_NANOS, MetricKind::NsTiming, |s| {
            s.self_cpu_nanos
        }),
        series(names::CPU_COUNT, MetricKind::Sum, |s| s.output_vectors),
        series(names::OUTPUT_ROWS, MetricKind::Sum, |s| s.output_rows),
        series(names::OUTPUT_VECTORS, MetricKind::Sum, |s| s.output_vectors),
        series(names::OUTPUT_BYTES, MetricKind::Size, |s| s.output_bytes),
        peak,
        series(names::NUM_MEMORY_ALLOCATIONS, MetricKind::Sum, |s| {
            s.memory_allocations
        }),
        series("numPolls", MetricKind::Sum, |s| s.polls),
    ]
}

/// An I/O metric summed over tasks.
type IoMetric = SnapshotMetric<IoSnapshot>;

#[rustfmt::skip]
const READ_METRICS: &[IoMetric] = &[
    (names::READ_REQUESTS, "number of read requests", MetricKind::Sum, |s| s.read_requests),
    (names::READ_BYTES, "bytes read", MetricKind::Size, |s| s.read_bytes),
    (names::STORAGE_READ_BYTES, "bytes read from storage", MetricKind::Size, |s| s.storage_read_bytes),
    (names::LOCAL_READ_BYTES, "bytes read from local disk cache", MetricKind::Size, |s| s.local_read_bytes),
    (names::RAM_READ_BYTES, "bytes read from memory cache", MetricKind::Size, |s| s.ram_read_bytes),
    (names::DATA_SOURCE_READ_NANOS, "time of reading from data source", MetricKind::NsTiming, |s| s.read_nanos),
    (names::IO_WAIT_NANOS, "time of I/O wait", MetricKind::NsTiming, |s| s.io_wait_nanos),
    (names::METADATA_REQUESTS, "number of metadata requests", MetricKind::Sum, |s| s.metadata_requests),
    (names::READ_BYTES_PER_SECOND, "read throughput per second", MetricKind::Size, |s| s.read_bytes_per_second.round() as u64),
];

#[rustfmt::skip]
const WRITE_METRICS: &[IoMetric] = &[
    (names::WRITE_REQUESTS, "number of write requests", MetricKind::Sum, |s| s.write_requests),
    (names::PHYSICAL_WRITTEN_BYTES, "number of written bytes", MetricKind::Size, |s| s.written_bytes),
    (names::WRITTEN_FILES, "number of written files", MetricKind::Sum, |s| s.written_files),
    (names::WRITE_IO_NANOS, "time of write I/O", MetricKind::NsTiming, |s| s.write_nanos),
];

/// The I/O metrics of an operator whose tasks touched storage: the read group unless it
/// only wrote, the write group if it wrote or is a sink. The read-concurrency histogram of
/// all its tasks together goes to `info` as Impala's string.
fn io_metrics(
    reading: &OperatorSnapshot,
    tasks: &TaskMap,
    is_sink: bool,
    info: &mut Vec<(String, String)>,
) -> Vec<NodeMetric> {
    if reading.io.is_empty() {
        return Vec::new();
    }
    let task_of = |p: &Option<usize>| p.and_then(|p| tasks.get(reading.stage, p));
    let series = |read: &dyn Fn(&IoSnapshot) -> i64| -> Vec<TaskValue> {
        reading
            .io
            .iter()
            .map(|(p, s)| TaskValue {
                task: task_of(p),
                value: read(s),
            })
            .collect()
    };
    let summed = |table| summed_over_tasks(table, &reading.io, reading.stage, tasks);
    let reads: u64 = reading.io.iter().map(|(_, s)| s.read_requests).sum();
    let writes: u64 = reading.io.iter().map(|(_, s)| s.write_requests).sum();
    let mut metrics = Vec::new();
    if reads > 0 || writes == 0 {
        metrics.extend(summed(READ_METRICS));
        // averages as Spark stores them: tenths
        let tenths = |v: f64| (v * 10.0).round() as i64;
        let concurrency = series(&|s| tenths(s.average_read_concurrency));
        let samples: u64 = reading.io.iter().map(|(_, s)| s.concurrency_samples).sum();
        let weighted: f64 = reading
            .io
            .iter()
            .map(|(_, s)| s.average_read_concurrency * s.concurrency_samples as f64)
            .sum();
        metrics.push(NodeMetric {
            name: names::AVERAGE_READ_CONCURRENCY.to_string(),
            display_name: "average read concurrency".to_string(),
            kind: MetricKind::Average,
            value: if samples == 0 {
                0
            } else {
                tenths(weighted / samples as f64)
            },
            tasks: concurrency,
        });
        let mut counts = vec![0_u64; CONCURRENCY_BUCKETS];
        for (_, s) in &reading.io {
            for (total, c) in counts.iter_mut().zip(&s.concurrency_buckets) {
                *total += c;
            }
        }
        let overall = bucket_percentages(&counts);
        for (i, share) in overall.iter().enumerate() {
            let plus = if i + 1 == CONCURRENCY_BUCKETS {
                "+"
            } else {
                ""
            };
            metrics.push(NodeMetric {
                name: format!("{}{i}Percent", names::READ_CONCURRENCY_BUCKET),
                display_name: format!("time at read concurrency {i}{plus} (%)"),
                kind: MetricKind::Average,
                value: tenths(*share),
                tasks: series(&|s| {
                    tenths(
                        bucket_percentages(&s.concurrency_buckets)
                            .get(i)
                            .copied()
                            .unwrap_or(0.0),
                    )
                }),
            });
        }
        info.push((
            names::READ_CONCURRENCY_BUCKET.to_string(),
            bucket_info_string(&counts),
        ));
    }
    if writes > 0 || is_sink {
        metrics.extend(summed(WRITE_METRICS));
    }
    metrics
}

fn clamp(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

/// The profile of one stage: per task, the work of all the stage's operators.
fn stage_profile(
    stage: u32,
    node_ids: &[usize],
    readings: &BTreeMap<usize, OperatorSnapshot>,
    tasks: &TaskMap,
    ended: bool,
    stage_task_peak: impl Fn(usize) -> u64,
) -> StageProfile {
    // node ids are in pre-order: the stage's root comes first
    let members: Vec<&OperatorSnapshot> = node_ids.iter().map(|id| &readings[id]).collect();
    let task_profiles = tasks
        .0
        .iter()
        .filter(|((s, _), _)| *s == stage)
        .map(|(&(_, p), t)| {
            let mut sum = OperatorTaskSnapshot::default();
            for s in members.iter().filter_map(|r| r.task(p)) {
                sum.self_wall_nanos += s.self_wall_nanos;
                sum.self_cpu_nanos += s.self_cpu_nanos;
                sum.memory_allocations += s.memory_allocations;
                sum.polls += s.polls;
            }
            let out = members
                .first()
                .and_then(|r| r.task(p))
                .copied()
                .unwrap_or_default();
            // the task runs from its first operator's start to its last operator's finish
            let in_task = || members.iter().filter_map(|r| r.task(p));
            let start = in_task()
                .map(|s| s.started_epoch_millis)
                .filter(|&t| t > 0)
                .min()
                .unwrap_or(0);
            // in a running query's snapshot, 0 while any of its operators still runs (at
            // the end, a stream not yet dropped does not count)
            let running = !ended
                && in_task().any(|s| s.started_epoch_millis > 0 && s.finished_epoch_millis == 0);
            let finish = if running {
                0
            } else {
                in_task()
                    .map(|s| s.finished_epoch_millis)
                    .max()
                    .unwrap_or(0)
                    .max(start)
            };
            let m = |name: &str, kind, value: u64| TaskMetric {
                name: name.to_string(),
                kind,
                value: clamp(value),
            };
            // the deepest operator that failed is where the failure began
            let error = members.iter().rev().find_map(|r| r.error(p));
            TaskProfile {
                error: error.map(str::to_string),
                task_id: t.task_id,
                partition: t.partition,
                start_epoch_millis: start,
                finish_epoch_millis: finish,
                metrics: vec![
                    m(names::WALL_NANOS, MetricKind::NsTiming, sum.self_wall_nanos),
                    m(names::CPU_NANOS, MetricKind::NsTiming, sum.self_cpu_nanos),
                    m(names::CPU_COUNT, MetricKind::Sum, out.output_vectors),
                    m(names::OUTPUT_ROWS, MetricKind::Sum, out.output_rows),
                    m(names::OUTPUT_VECTORS, MetricKind::Sum, out.output_vectors),
                    m(names::OUTPUT_BYTES, MetricKind::Size, out.output_bytes),
                    m(
                        names::PEAK_MEMORY_BYTES,
                        MetricKind::Size,
                        stage_task_peak(p),
                    ),
                    m(
                        names::NUM_MEMORY_ALLOCATIONS,
                        MetricKind::Sum,
                        sum.memory_allocations,
                    ),
                    m("numPolls", MetricKind::Sum, sum.polls),
                ],
                attempt: 0,
                executor: None,
            }
        })
        .collect();
    StageProfile {
        id: stage,
        node_ids: node_ids.to_vec(),
        tasks: task_profiles,
        memory: None,
        executor_memory: Vec::new(),
    }
}

/// The executor's memory peaks while `stage` ran: the samples from its start (the one its
/// start took, or the last before) to its end (`now` if it has not ended), with execution
/// memory the stage's own exact reservation peak `execution_peak`.
fn stage_memory(
    stage: &StageProfile,
    execution_peak: u64,
    recorder: &MemoryRecorder,
    now: u64,
) -> Option<MemorySample> {
    let start = stage
        .tasks
        .iter()
        .map(|t| t.start_epoch_millis)
        .filter(|t| *t > 0)
        .min()?;
    let end = stage
        .tasks
        .iter()
        .map(|t| t.finish_epoch_millis)
        .max()
        .filter(|t| *t >= start)
        .unwrap_or(now);
    Some(MemorySample {
        epoch_millis: 0,
        execution_bytes: execution_peak,
        ..recorder.peaks_between(start, end)?
    })
}
