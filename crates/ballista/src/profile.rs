//! A finished Ballista job as a qprof [`QueryProfile`]: its stage plans stitched into one
//! operator tree (each shuffle reader over the stage it reads), each operator's metrics
//! by Ballista task, and each stage's tasks with the executors that ran them.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::sync::Arc;

use ballista_core::execution_plans::{
    RangeShuffleReaderExec, ShuffleReaderExec, UnresolvedShuffleExec,
};
use ballista_core::serde::protobuf::task_status;
use ballista_scheduler::state::execution_graph::ExecutionGraph;
use ballista_scheduler::state::execution_stage::{ExecutionStage, TaskInfo};
use datafusion::physical_plan::metrics::{MetricValue, MetricsSet};
use datafusion::physical_plan::{ExecutionPlan, displayable};
use qprof_core::catalog::{self, datafusion as datafusion_catalog};
use qprof_core::executor_memory::MemorySample;
use qprof_core::metric::{MetricKind, TaskRef, TaskValue};
use qprof_core::profile::{
    EXECUTOR_LOST_FAILURE, ExecutorRef, FETCH_FAILED, NodeMetric, ProfileNode, QueryProfile,
    StageProfile, TaskProfile, names,
};
use qprof_datafusion::{
    JoinShape, add_join_projection_metrics, join_shape, operator_metrics, operator_native_metrics,
};

use crate::wire::{self, OperatorValues, TaskFigures};
use qprof_core::metric::saturating_i64;

/// A task as the scheduler handed it to an executor.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LaunchedTask {
    /// Ballista's stage id within the job.
    pub stage_id: usize,
    /// Ballista's task id within the stage.
    pub task_id: usize,
    /// The task's attempt.
    pub attempt: u32,
    /// The stage partitions it computes.
    pub partitions: Vec<usize>,
    /// The executor it was given to.
    pub executor_id: String,
    /// When, epoch ms.
    pub launched_epoch_millis: u64,
}

/// What the scheduler saw of the cluster while the job ran.
#[derive(Debug, Default)]
pub struct ClusterView {
    /// Hosts by executor id.
    pub hosts: HashMap<String, String>,
    /// When each removed executor left, and why.
    pub removed: HashMap<String, (u64, String)>,
    /// The job's tasks as launched, in order.
    pub launched: Vec<LaunchedTask>,
    /// Heartbeat samples by executor id, oldest first.
    pub heartbeats: HashMap<String, Vec<MemorySample>>,
}

/// Stage and task ids that are unique within one application, as Spark's are.
#[derive(Debug, Default)]
pub struct AppIds {
    next_stage: u32,
    next_task: u64,
}

/// What a finished job's profile is built from, copied out of its execution graph: each
/// stage's plan, tasks, metrics and consumers, and the job's plan and times. Much less
/// than the whole graph (no shuffle locations, no pending state), so taking it on
/// Ballista's `save_job` path and dropping it later cost little.
pub struct JobRecord {
    stages: HashMap<usize, StageRecord>,
    physical_plan: Arc<dyn ExecutionPlan>,
    start_time: u64,
    end_time: u64,
}

/// One Ballista stage's plan, tasks and metrics, and the stages that read it.
struct StageRecord {
    plan: Arc<dyn ExecutionPlan>,
    tasks: Vec<TaskInfo>,
    metrics: Option<Vec<MetricsSet>>,
    output_links: Vec<usize>,
}

impl fmt::Debug for JobRecord {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("JobRecord")
            .field("stages", &self.stages.len())
            .field("start_time", &self.start_time)
            .field("end_time", &self.end_time)
            .finish_non_exhaustive()
    }
}

impl JobRecord {
    /// The parts of `graph` a profile needs.
    pub fn of(graph: &dyn ExecutionGraph) -> JobRecord {
        let stages = graph
            .stages()
            .iter()
            .map(|(&id, stage)| (id, StageRecord::of(stage)))
            .collect();
        JobRecord {
            stages,
            physical_plan: graph.physical_plan(),
            start_time: graph.start_time(),
            end_time: graph.end_time(),
        }
    }

    /// The job's whole physical plan, as the client's session planned it.
    pub fn physical_plan(&self) -> &Arc<dyn ExecutionPlan> {
        &self.physical_plan
    }

    /// When the job ended, epoch ms (0 if the graph did not say).
    pub fn end_time(&self) -> u64 {
        self.end_time
    }
}

impl StageRecord {
    fn of(stage: &ExecutionStage) -> StageRecord {
        let (plan, tasks, metrics, output_links) = match stage {
            ExecutionStage::UnResolved(s) => (&s.plan, None, None, &s.output_links),
            ExecutionStage::Resolved(s) => (&s.plan, None, None, &s.output_links),
            ExecutionStage::Running(s) => (
                &s.plan,
                Some(&s.task_infos),
                s.stage_metrics.as_ref(),
                &s.output_links,
            ),
            ExecutionStage::Successful(s) => (
                &s.plan,
                Some(&s.task_infos),
                Some(&s.stage_metrics),
                &s.output_links,
            ),
            ExecutionStage::Failed(s) => (
                &s.plan,
                Some(&s.task_infos),
                s.stage_metrics.as_ref(),
                &s.output_links,
            ),
        };
        StageRecord {
            plan: Arc::clone(plan),
            tasks: tasks.cloned().unwrap_or_default(),
            metrics: metrics.cloned(),
            output_links: output_links.clone(),
        }
    }
}

/// One Ballista stage's plan, tasks and metrics.
struct StageView<'a> {
    plan: &'a Arc<dyn ExecutionPlan>,
    tasks: &'a [TaskInfo],
    metrics: Option<&'a [MetricsSet]>,
}

fn stage_view(stage: &StageRecord) -> StageView<'_> {
    StageView {
        plan: &stage.plan,
        tasks: &stage.tasks,
        metrics: stage.metrics.as_deref(),
    }
}

/// The stage a shuffle reader reads, if `plan` is one.
fn upstream_stage(plan: &dyn ExecutionPlan) -> Option<usize> {
    if let Some(r) = plan.downcast_ref::<ShuffleReaderExec>() {
        return Some(r.stage_id);
    }
    if let Some(r) = plan.downcast_ref::<RangeShuffleReaderExec>() {
        return Some(r.stage_id);
    }
    plan.downcast_ref::<UnresolvedShuffleExec>()
        .map(|r| r.stage_id)
}

fn millis(t: u128) -> u64 {
    u64::try_from(t).unwrap_or(u64::MAX)
}

/// One task of a stage in the profile: the ids it got and where it ran.
struct TaskSlot {
    task: TaskRef,
    ballista_task: usize,
    partitions: Vec<usize>,
}

/// Values of one metric by partition (`None`: of no task).
type PartitionValues = Vec<(Option<usize>, u64)>;

struct Builder<'a> {
    stages: HashMap<usize, StageView<'a>>,
    /// Application stage id of each Ballista stage.
    stage_ids: HashMap<usize, u32>,
    /// The tasks of each Ballista stage, in task order.
    slots: HashMap<usize, Vec<TaskSlot>>,
    /// Task figures by Ballista stage and global partition.
    figures: HashMap<usize, BTreeMap<usize, TaskFigures>>,
    next_node: usize,
    /// Node ids of each Ballista stage.
    stage_nodes: BTreeMap<usize, Vec<usize>>,
    /// The joins met so far: node id and shape.
    joins: Vec<(usize, JoinShape)>,
}

impl Builder<'_> {
    /// The task that computed `partition` of `stage`.
    fn task_of(&self, stage: usize, partition: usize) -> Option<TaskRef> {
        let slots = self.slots.get(&stage)?;
        slots
            .iter()
            .find(|s| s.partitions.contains(&partition))
            .or_else(|| slots.get(partition))
            .map(|s| s.task)
    }

    fn node(
        &mut self,
        plan: &Arc<dyn ExecutionPlan>,
        stage: usize,
        slot: &mut usize,
    ) -> ProfileNode {
        let id = self.next_node;
        self.next_node += 1;
        self.stage_nodes.entry(stage).or_default().push(id);
        let set = if plan.metrics().is_some() {
            let at = *slot;
            *slot += 1;
            self.stages
                .get(&stage)
                .and_then(|s| s.metrics)
                .and_then(|m| m.get(at))
        } else {
            None
        };
        let is_root = self
            .stages
            .get(&stage)
            .is_some_and(|s| Arc::ptr_eq(s.plan, plan));
        let mut metrics = Vec::new();
        let mut functions = Vec::new();
        let mut task_spans = Vec::new();
        let mut info = vec![(
            "outputPartitions".to_string(),
            plan.properties().partitioning.partition_count().to_string(),
        )];
        if let Some(set) = set {
            let mut decoded = wire::decode(set);
            functions = decoded.functions.iter().map(|f| f.profile()).collect();
            functions.sort_by(|a, b| {
                b.cpu_nanos
                    .cmp(&a.cpu_nanos)
                    .then_with(|| a.expression.cmp(&b.expression))
            });
            // the shuffle writer's own and a dynamic filter's, which the executor named
            let named_there: Vec<NodeMetric> = decoded
                .operator
                .iter()
                .map(|values| self.node_metric(stage, values))
                .collect();
            if is_root {
                self.figures
                    .insert(stage, std::mem::take(&mut decoded.tasks));
                metrics.extend(named_there);
                metrics.extend(self.writer_native_metrics(stage, plan.name(), set));
            } else {
                let native = self.native_metrics(stage, plan.name(), set);
                if decoded.reading.is_empty() {
                    metrics.extend(native);
                } else {
                    // named as a local profile names them, then folded into tasks
                    let named = operator_metrics(plan.as_ref(), &decoded.reading, native, &|p| {
                        self.task_of(stage, p)
                    });
                    metrics.extend(named.metrics.into_iter().map(folded_into_tasks));
                    info.extend(named.info);
                    task_spans = named.task_spans;
                }
                metrics.extend(named_there);
            }
        }
        if let Some(shape) = join_shape(plan.as_ref()) {
            self.joins.push((id, shape));
        }
        let mut children: Vec<ProfileNode> = Vec::new();
        for child in plan.children() {
            children.push(self.node(child, stage, slot));
        }
        if let Some(upstream) = upstream_stage(plan.as_ref())
            && let Some(up) = self.stages.get(&upstream).map(|s| Arc::clone(s.plan))
        {
            let mut upstream_slot = 0;
            children.push(self.node(&up, upstream, &mut upstream_slot));
        }
        ProfileNode {
            id,
            name: plan.name().to_string(),
            display: displayable(plan.as_ref())
                .one_line()
                .to_string()
                .trim()
                .into(),
            stage_id: self.stage_ids.get(&stage).copied(),
            metrics,
            info,
            functions,
            task_spans,
            estimate: None,
            children,
        }
    }

    /// One metric of an operator, named on the executor, its values folded into tasks.
    fn node_metric(&self, stage: usize, metric: &OperatorValues) -> NodeMetric {
        self.partition_metric(
            stage,
            &metric.name,
            &metric.display_name,
            metric.kind,
            &metric.values,
        )
    }

    /// A metric's values by partition folded into the tasks that computed them, as
    /// [`folded_by_task`] folds them.
    fn partition_metric(
        &self,
        stage: usize,
        name: &str,
        display: &str,
        kind: MetricKind,
        values: &[(Option<usize>, u64)],
    ) -> NodeMetric {
        let values = values.iter().map(|&(partition, value)| TaskValue {
            task: partition.and_then(|p| self.task_of(stage, p)),
            value: saturating_i64(value),
        });
        folded_by_task(name, display, kind, values)
    }

    /// An operator's own metrics from DataFusion's side, as Ballista shipped them by
    /// partition and qprof names them (the executors leave them out of qprof's values),
    /// each folded into its tasks as the packed ones are.
    fn native_metrics(&self, stage: usize, operator: &str, set: &MetricsSet) -> Vec<NodeMetric> {
        let native = set
            .iter()
            .filter(|m| !wire::is_qprof_metric(m.value().name()))
            .map(AsRef::as_ref);
        operator_native_metrics(operator, native, |p| self.task_of(stage, p))
            .into_iter()
            .map(|m| folded_by_task(&m.name, &m.display_name, m.kind, m.tasks))
            .collect()
    }

    /// The shuffle writer's own metrics from DataFusion's side (rows written, write time,
    /// repartitioning and spilling), by task, under the catalog's names for `writer`'s.
    fn writer_native_metrics(
        &self,
        stage: usize,
        writer: &str,
        set: &MetricsSet,
    ) -> Vec<NodeMetric> {
        let mut by_name: BTreeMap<String, (String, MetricKind, PartitionValues)> = BTreeMap::new();
        for m in set.iter() {
            let value = m.value();
            let name = value.name();
            if wire::is_qprof_metric(name) {
                continue;
            }
            let (kind, v) = match value {
                MetricValue::Time { time, .. } | MetricValue::ElapsedCompute(time) => {
                    (MetricKind::NsTiming, time.value() as u64)
                }
                MetricValue::StartTimestamp(_) | MetricValue::EndTimestamp(_) => continue,
                other => (MetricKind::Sum, other.as_usize() as u64),
            };
            // the write time under its catalog name, which Spark's task metrics read
            let (name, display, kind) = if name == "write_time" {
                let def = &catalog::SHUFFLE_WRITE_NANOS;
                (def.name.to_string(), def.display.to_string(), kind)
            } else if let Some(def) = datafusion_catalog::value_def(writer, name) {
                (def.name.to_string(), def.display.to_string(), def.kind)
            } else {
                (format!("shuffle.{name}"), name.replace('_', " "), kind)
            };
            by_name
                .entry(name)
                .or_insert_with(|| (display, kind, Vec::new()))
                .2
                .push((m.partition(), v));
        }
        by_name
            .into_iter()
            .map(|(name, (display, kind, values))| {
                self.partition_metric(stage, &name, &display, kind, &values)
            })
            .collect()
    }
}

/// `metric` with the values of the same task (several partitions of one task) folded into
/// one, as [`folded_by_task`] folds them; its operator-level value stays as it was named.
fn folded_into_tasks(metric: NodeMetric) -> NodeMetric {
    let value = metric.value;
    NodeMetric {
        value,
        ..folded_by_task(
            &metric.name,
            &metric.display_name,
            metric.kind,
            metric.tasks,
        )
    }
}

/// A metric whose values of the same task (several partitions of one task) are folded
/// into one: a peak or an average is the largest, anything else the sum. Values of no task
/// stay apart.
fn folded_by_task(
    name: &str,
    display: &str,
    kind: MetricKind,
    values: impl IntoIterator<Item = TaskValue>,
) -> NodeMetric {
    let is_peak = name == names::PEAK_MEMORY_BYTES;
    // an average of two partitions is not their sum; their larger one stays in bounds
    let largest = is_peak || kind == MetricKind::Average;
    let mut by_task: Vec<TaskValue> = Vec::new();
    for TaskValue { task, value } in values {
        match by_task
            .iter_mut()
            .find(|v| task.is_some() && v.task == task)
        {
            Some(v) if largest => v.value = v.value.max(value),
            Some(v) => v.value = v.value.saturating_add(value),
            None => by_task.push(TaskValue { task, value }),
        }
    }
    let mut metric = NodeMetric::summed(name.to_string(), display.to_string(), kind, by_task);
    if is_peak {
        metric.value = metric.tasks.iter().map(|v| v.value).max().unwrap_or(0);
    }
    metric
}

/// The profile of the job `graph` describes, query `id` of its application.
pub fn query_profile(
    job: &JobRecord,
    id: usize,
    sql: &str,
    cluster: &ClusterView,
    ids: &mut AppIds,
) -> QueryProfile {
    let stages: HashMap<usize, StageView<'_>> = job
        .stages
        .iter()
        .map(|(&stage, s)| (stage, stage_view(s)))
        .collect();
    let last_stage = job
        .stages
        .iter()
        .filter(|(_, s)| s.output_links.is_empty())
        .map(|(&id, _)| id)
        .max()
        .or_else(|| job.stages.keys().max().copied())
        .unwrap_or(0);
    // application ids: stages in Ballista's order (inputs first), then their tasks
    let mut ballista_stages: Vec<usize> = stages.keys().copied().collect();
    ballista_stages.sort_unstable();
    let base = ids.next_stage;
    let stage_ids: HashMap<usize, u32> = ballista_stages
        .iter()
        .enumerate()
        .map(|(i, &s)| (s, base + i as u32))
        .collect();
    ids.next_stage += ballista_stages.len() as u32;
    let mut slots: HashMap<usize, Vec<TaskSlot>> = HashMap::new();
    for &stage in &ballista_stages {
        let view = &stages[&stage];
        let list = view
            .tasks
            .iter()
            .map(|t| {
                let task = TaskRef {
                    stage_id: stage_ids[&stage],
                    stage_attempt: 0,
                    task_id: ids.next_task,
                    partition: t.global_input_partition_ids.first().copied().unwrap_or(0) as u32,
                };
                ids.next_task += 1;
                TaskSlot {
                    task,
                    ballista_task: t.task_id,
                    partitions: t.global_input_partition_ids.clone(),
                }
            })
            .collect();
        slots.insert(stage, list);
    }
    let mut builder = Builder {
        stages,
        stage_ids,
        slots,
        figures: HashMap::new(),
        next_node: 0,
        stage_nodes: BTreeMap::new(),
        joins: Vec::new(),
    };
    let root_plan = builder
        .stages
        .get(&last_stage)
        .map(|s| Arc::clone(s.plan))
        .unwrap_or_else(|| Arc::clone(&job.physical_plan));
    let mut slot = 0;
    let mut plan = builder.node(&root_plan, last_stage, &mut slot);
    add_join_projection_metrics(&mut plan, &builder.joins);
    let nodes = index(&plan);
    let mut stage_profiles = Vec::new();
    for &stage in &ballista_stages {
        let node_ids = builder.stage_nodes.get(&stage).cloned().unwrap_or_default();
        stage_profiles.push(stage_profile(
            &builder, stage, node_ids, &nodes, cluster, ids,
        ));
    }
    let rows = plan
        .metrics
        .iter()
        .find(|m| m.name == names::OUTPUT_ROWS)
        .map_or(0, |m| u64::try_from(m.value).unwrap_or(0));
    let start = match job.start_time {
        0 => qprof_core::clock::epoch_millis(),
        t => t,
    };
    let end = crate::observer::end_of(job.end_time, start);
    QueryProfile {
        id,
        sql: sql.to_string(),
        rows,
        duration_nanos: (end - start).saturating_mul(1_000_000),
        start_epoch_millis: start,
        plan,
        stages: stage_profiles,
        memory: Vec::new(),
        memory_pool: None,
        planning: None,
        stack_samples: None,
        overlapping_queries: 0,
    }
}

fn index(plan: &ProfileNode) -> HashMap<usize, &ProfileNode> {
    fn walk<'a>(n: &'a ProfileNode, out: &mut HashMap<usize, &'a ProfileNode>) {
        out.insert(n.id, n);
        for c in &n.children {
            walk(c, out);
        }
    }
    let mut out = HashMap::new();
    walk(plan, &mut out);
    out
}

fn executor_ref(cluster: &ClusterView, id: &str) -> ExecutorRef {
    ExecutorRef {
        id: id.to_string(),
        host: cluster.hosts.get(id).cloned().unwrap_or_default(),
    }
}

/// One stage: its tasks with their figures and executors (and the launches lost with an
/// executor), and each executor's memory peaks while it ran them.
fn stage_profile(
    builder: &Builder<'_>,
    stage: usize,
    node_ids: Vec<usize>,
    nodes: &HashMap<usize, &ProfileNode>,
    cluster: &ClusterView,
    ids: &mut AppIds,
) -> StageProfile {
    let view = &builder.stages[&stage];
    let figures = builder.figures.get(&stage);
    let root = node_ids.first().and_then(|id| nodes.get(id));
    let stage_id = builder.stage_ids[&stage];
    let mut tasks = Vec::new();
    let mut memory_by_executor: BTreeMap<String, MemorySample> = BTreeMap::new();
    let slots = builder.slots.get(&stage).map(Vec::as_slice).unwrap_or(&[]);
    for (info, slot) in view.tasks.iter().zip(slots) {
        let launch = cluster
            .launched
            .iter()
            .rev()
            .find(|l| l.stage_id == stage && l.task_id == slot.ballista_task);
        let (executor, error) = match &info.task_status {
            task_status::Status::Successful(s) => (Some(s.executor_id.clone()), None),
            task_status::Status::Running(r) => (Some(r.executor_id.clone()), None),
            task_status::Status::Failed(f) => {
                (launch.map(|l| l.executor_id.clone()), Some(failure_text(f)))
            }
        };
        let figure = slot
            .partitions
            .first()
            .and_then(|p| figures.and_then(|f| f.get(p)))
            .copied()
            .unwrap_or_default();
        // what the stage's root (its shuffle writer, or the job's last operator) gave out
        let out = |name: &str| {
            root.and_then(|r| r.metrics.iter().find(|m| m.name == name))
                .and_then(|m| m.tasks.iter().find(|v| v.task == Some(slot.task)))
                .map_or(0, |v| v.value)
        };
        let self_cpu: i64 = node_ids
            .iter()
            .filter_map(|id| nodes.get(id))
            .filter_map(|n| n.metrics.iter().find(|m| m.name == names::SELF_CPU_NANOS))
            .filter_map(|m| m.tasks.iter().find(|v| v.task == Some(slot.task)))
            .map(|v| v.value)
            .sum();
        if let Some(executor) = &executor {
            let peak = memory_by_executor.entry(executor.clone()).or_default();
            *peak = peak.max(figure.memory);
        }
        let start = millis(info.start_exec_time).max(figure.start_epoch_millis);
        tasks.push(TaskProfile {
            task_id: slot.task.task_id,
            partition: slot.task.partition,
            start_epoch_millis: if start > 0 {
                start
            } else {
                millis(info.launch_time)
            },
            finish_epoch_millis: millis(info.end_exec_time).max(figure.finish_epoch_millis),
            metrics: vec![
                catalog::WALL_NANOS.of_task(saturating_i64(figure.wall_nanos)),
                catalog::CPU_NANOS.of_task(self_cpu),
                catalog::OUTPUT_ROWS.of_task(out(names::OUTPUT_ROWS)),
                catalog::OUTPUT_VECTORS.of_task(out(names::OUTPUT_VECTORS)),
                catalog::OUTPUT_BYTES.of_task(out(names::OUTPUT_BYTES)),
                catalog::PEAK_MEMORY_BYTES.of_task(saturating_i64(figure.memory.execution_bytes)),
            ],
            error,
            attempt: launch.map_or(0, |l| l.attempt),
            executor: executor.as_deref().map(|id| executor_ref(cluster, id)),
        });
    }
    // launches that never reported: their executor was lost under them
    for lost in cluster.launched.iter().filter(|l| l.stage_id == stage) {
        let Some((removed_at, reason)) = cluster.removed.get(&lost.executor_id) else {
            continue;
        };
        let reported = view.tasks.iter().any(|t| {
            t.task_id == lost.task_id
                && matches!(&t.task_status, task_status::Status::Successful(s) if s.executor_id == lost.executor_id)
        });
        if reported || *removed_at < lost.launched_epoch_millis {
            continue;
        }
        tasks.push(TaskProfile {
            task_id: ids.next_task,
            partition: lost.partitions.first().copied().unwrap_or(0) as u32,
            start_epoch_millis: lost.launched_epoch_millis,
            finish_epoch_millis: *removed_at,
            metrics: Vec::new(),
            error: Some(format!(
                "{EXECUTOR_LOST_FAILURE}: executor {} lost while running the task ({reason})",
                lost.executor_id
            )),
            attempt: lost.attempt,
            executor: Some(executor_ref(cluster, &lost.executor_id)),
        });
        ids.next_task += 1;
    }
    tasks.sort_by_key(|t| (t.start_epoch_millis, t.task_id));
    // heartbeats while the stage ran add the executors' process peaks
    let span_start = tasks
        .iter()
        .map(|t| t.start_epoch_millis)
        .filter(|t| *t > 0)
        .min();
    let span_end = tasks.iter().map(|t| t.finish_epoch_millis).max();
    if let (Some(from), Some(to)) = (span_start, span_end) {
        for (executor, peak) in &mut memory_by_executor {
            if let Some(samples) = cluster.heartbeats.get(executor) {
                let during = samples
                    .iter()
                    .filter(|s| s.epoch_millis >= from && s.epoch_millis <= to);
                let beat = MemorySample::peaks(during);
                let execution = peak.execution_bytes;
                *peak = peak.max(beat);
                peak.execution_bytes = execution;
                peak.epoch_millis = 0;
            }
        }
    }
    let executor_memory: Vec<(String, MemorySample)> = memory_by_executor.into_iter().collect();
    let memory = (!executor_memory.is_empty())
        .then(|| MemorySample::peaks(executor_memory.iter().map(|(_, m)| m)));
    StageProfile {
        id: stage_id,
        node_ids,
        tasks,
        memory,
        executor_memory,
    }
}

fn first_line(text: &str) -> String {
    text.lines().next().unwrap_or_default().trim().to_string()
}

/// A failed task's error as the profile records it: Spark's reason names for a result
/// lost with its executor and for a failed fetch, else the error's first line.
fn failure_text(failed: &ballista_core::serde::protobuf::FailedTask) -> String {
    use ballista_core::serde::protobuf::failed_task::FailedReason;
    match &failed.failed_reason {
        Some(FailedReason::ResultLost(_) | FailedReason::ExecutorLost(_)) => {
            format!("{EXECUTOR_LOST_FAILURE}: {}", first_line(&failed.error))
        }
        Some(FailedReason::FetchPartitionError(f)) => format!(
            "{FETCH_FAILED}: executor {} stage {} partition {}: {}",
            f.executor_id,
            f.map_stage_id,
            f.map_partition_id,
            first_line(&failed.error)
        ),
        _ => first_line(&failed.error),
    }
}
