//! Turning an executed, wrapped plan into a [`QueryProfile`].

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use datafusion::physical_plan::{ExecutionPlan, displayable};
use qprof_core::catalog::{self, MetricDef};
use qprof_core::clock::epoch_millis;
use qprof_core::counters::{OperatorTaskCounters, OperatorTaskSnapshot};
use qprof_core::executor_memory::{MemoryRecorder, MemorySample};
use qprof_core::metric::TaskRef;
use qprof_core::profile::{
    FunctionProfile, OperatorText, ProfileNode, QueryProfile, StageProfile, TaskProfile,
};
use qprof_core::sampling::FunctionStats;

mod dynamic_filters;
mod joins;
mod operator_metrics;
mod reading;
mod replaced_rows;

pub use joins::add_projection_metrics as add_join_projection_metrics;
pub use operator_metrics::{OperatorMetrics, operator_metrics};
pub(crate) use reading::read_plan;
pub use reading::{NodeReading, OperatorReading, PlanReadings};

use crate::definitions;
use crate::exec::ProfiledExec;
use crate::joins::join_shape;
use crate::native_metrics::{add_stride_totals, native_metrics};
use crate::text::operator_text;
use qprof_core::call_site::FunctionSite;
use qprof_core::metric::saturating_i64;

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
    let readings: BTreeMap<usize, OperatorReading> = wrapped
        .iter()
        .map(|e| (e.node_id(), OperatorReading::of(e)))
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
    let plan_state = wrapped.first().map(|e| Arc::clone(&e.counters().plan));
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
        lazy_scan_texts: info.ended,
        native: info.native_metrics,
    };
    let mut root = builder.node(plan);
    let join_shapes: Vec<_> = wrapped
        .iter()
        .filter_map(|e| Some((e.node_id(), join_shape(e.inner().as_ref())?)))
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
        planning: None,
        stack_samples: None,
        overlapping_queries: 0,
    }
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
    readings: &'a BTreeMap<usize, OperatorReading>,
    tasks: &'a TaskMap,
    stage_base: u32,
    /// The id the next operator qprof did not wrap gets.
    next_unwrapped_id: usize,
    /// The function calls not yet placed on their node, by node id.
    functions: HashMap<usize, Vec<FunctionProfile>>,
    producers: &'a dynamic_filters::Producers,
    /// Whether nodes get their display text.
    texts: bool,
    /// Whether a file scan's text is rendered when first read rather than now (at a
    /// query's end: its plan no longer changes).
    lazy_scan_texts: bool,
    /// Whether nodes get DataFusion's own metrics.
    native: bool,
}

impl NodeBuilder<'_> {
    fn node(&mut self, plan: &Arc<dyn ExecutionPlan>) -> ProfileNode {
        let display = match self.texts {
            true if self.lazy_scan_texts => operator_text(plan.as_ref()),
            true => OperatorText::from(displayable(plan.as_ref()).one_line().to_string().trim()),
            false => OperatorText::default(),
        };
        let name = plan.name().to_string();
        let mut info = vec![(
            "outputPartitions".to_string(),
            plan.properties().partitioning.partition_count().to_string(),
        )];
        let tasks = self.tasks;
        let exec = ProfiledExec::of(plan.as_ref());
        let (id, reading) = match exec {
            Some(exec) => (exec.node_id(), self.readings.get(&exec.node_id())),
            None => {
                self.next_unwrapped_id += 1;
                (self.next_unwrapped_id - 1, None)
            }
        };
        let stage_id = reading.and_then(|r| r.stage);
        let task_of = |p| tasks.get(stage_id, p);
        // an engine that ships DataFusion's metrics itself maps them where they arrive
        let native_set = plan.metrics();
        let native = match &native_set {
            Some(set) if self.native => native_metrics(
                set.iter().map(AsRef::as_ref),
                &name,
                &definitions::operator_label(&name),
                task_of,
            ),
            _ => Vec::new(),
        };
        let mut task_spans = Vec::new();
        let mut metrics = match reading {
            Some(reading) => {
                let named = operator_metrics(plan.as_ref(), reading, native, &task_of);
                info.extend(named.info);
                task_spans = named.task_spans;
                named.metrics
            }
            None => {
                let mut native = native;
                add_stride_totals(&mut native);
                native
            }
        };
        let runtime = ProfiledExec::of(plan.as_ref()).and_then(|e| e.counters().runtime.get());
        let (filter_metrics, filter_info) = dynamic_filters::metrics(
            plan.as_ref(),
            native_set.as_ref(),
            self.producers,
            runtime.map(Arc::as_ref),
        );
        metrics.extend(filter_metrics);
        info.extend(filter_info);
        let children = plan.children().into_iter().map(|c| self.node(c)).collect();
        let estimate = exec.and_then(|e| e.counters().estimate.get().copied());
        let mut functions = self.functions.remove(&id).unwrap_or_default();
        sort_functions(&mut functions);
        ProfileNode {
            id,
            name,
            display,
            stage_id: stage_id.map(|s| self.stage_base + s),
            metrics,
            info,
            functions,
            task_spans,
            estimate,
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
        let stats = exec.counters();
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

/// The profile of one stage: per task, the work of all the stage's operators.
fn stage_profile(
    stage: u32,
    node_ids: &[usize],
    readings: &BTreeMap<usize, OperatorReading>,
    tasks: &TaskMap,
    ended: bool,
    stage_task_peak: impl Fn(usize) -> u64,
) -> StageProfile {
    // node ids are in pre-order: the stage's root comes first
    let members: Vec<&OperatorReading> = node_ids.iter().map(|id| &readings[id]).collect();
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
                .map(|s| s.started_epoch_micros / 1000)
                .filter(|&t| t > 0)
                .min()
                .unwrap_or(0);
            // in a running query's snapshot, 0 while any of its operators still runs (at
            // the end, a stream not yet dropped does not count)
            let running = !ended
                && in_task().any(|s| s.started_epoch_micros > 0 && s.finished_epoch_micros == 0);
            let finish = if running {
                0
            } else {
                in_task()
                    .map(|s| s.finished_epoch_micros.div_ceil(1000))
                    .max()
                    .unwrap_or(0)
                    .max(start)
            };
            let m = |def: &MetricDef, value: u64| def.of_task(saturating_i64(value));
            // the deepest operator that failed is where the failure began
            let error = members.iter().rev().find_map(|r| r.error(p));
            TaskProfile {
                error: error.map(str::to_string),
                task_id: t.task_id,
                partition: t.partition,
                start_epoch_millis: start,
                finish_epoch_millis: finish,
                metrics: vec![
                    m(&catalog::WALL_NANOS, sum.self_wall_nanos),
                    m(&catalog::CPU_NANOS, sum.self_cpu_nanos),
                    m(&catalog::CPU_COUNT, out.output_vectors),
                    m(&catalog::OUTPUT_ROWS, out.output_rows),
                    m(&catalog::OUTPUT_VECTORS, out.output_vectors),
                    m(&catalog::OUTPUT_BYTES, out.output_bytes),
                    m(&catalog::PEAK_MEMORY_BYTES, stage_task_peak(p)),
                    m(&catalog::NUM_MEMORY_ALLOCATIONS, sum.memory_allocations),
                    m(&catalog::NUM_POLLS, sum.polls),
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
