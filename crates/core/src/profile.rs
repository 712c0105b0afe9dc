//! Query profiles: a tree of operators mirroring the plan, each with its metrics, plus the
//! stages and tasks the plan ran as, rendered as an indented text tree. (Wire formats of
//! profiles live in `qprof-eventlog`.)

use std::fmt::Write as _;

use crate::executor_memory::MemorySample;
use crate::format;
use crate::metric::{Aggregate, MetricKind, TaskValue, spark_string};
use crate::sampling::FunctionStats;

/// One metric of one operator: its per-task values and the operator-level value.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeMetric {
    /// Stable camelCase name, e.g. `selfCpuNanos` or `hashBuildWallNanos`.
    pub name: String,
    /// Spark-style display name, e.g. `time of hash build`.
    pub display_name: String,
    /// How the metric aggregates and renders.
    pub kind: MetricKind,
    /// Operator-level value: the sum over tasks, except where a metric defines it otherwise
    /// (a peak is the true peak of the operator, not a sum of task peaks).
    pub value: i64,
    /// One value per task that ran the operator.
    pub tasks: Vec<TaskValue>,
}

impl NodeMetric {
    /// A metric whose operator-level value is the sum of its task values.
    pub fn summed(
        name: impl Into<String>,
        display_name: impl Into<String>,
        kind: MetricKind,
        tasks: Vec<TaskValue>,
    ) -> Self {
        let value = tasks
            .iter()
            .fold(0_i64, |acc, t| acc.saturating_add(t.value));
        Self {
            name: name.into(),
            display_name: display_name.into(),
            kind,
            value,
            tasks,
        }
    }

    /// Total, min, median and max across tasks.
    pub fn aggregate(&self) -> Aggregate {
        Aggregate::of(self.kind, &self.tasks)
    }

    /// The value as Spark's UI and REST API would show it.
    pub fn spark_string(&self) -> String {
        spark_string(self.kind, &self.tasks)
    }
}

/// One operator of a profiled plan.
#[derive(Debug, Clone, PartialEq)]
pub struct ProfileNode {
    /// Pre-order position in the plan, starting at 0 for the root.
    pub id: usize,
    /// Operator type, e.g. `HashJoinExec`.
    pub name: String,
    /// The operator's one-line description as EXPLAIN prints it.
    pub display: String,
    /// Stage the operator ran in, if the plan was cut into stages.
    pub stage_id: Option<u32>,
    /// Metrics, base metrics first.
    pub metrics: Vec<NodeMetric>,
    /// Free-form facts about the operator (`key`, `value`).
    pub info: Vec<(String, String)>,
    /// Functions the operator's expressions called, by CPU time, largest first.
    pub functions: Vec<FunctionProfile>,
    /// Inputs of the operator.
    pub children: Vec<ProfileNode>,
}

/// Time spent in one function call site (operator, expression, function), exclusive of the
/// functions that computed its arguments.
#[derive(Debug, Clone, PartialEq)]
pub struct FunctionProfile {
    /// The function, e.g. `upper`.
    pub name: String,
    /// The call as written in the plan, e.g. `upper(customer.c_name)`.
    pub expression: String,
    /// Vectors (batches) the function was called on; exact.
    pub vectors: u64,
    /// Rows it was called on; exact.
    pub rows: u64,
    /// Vectors timed with the thread CPU clock.
    pub cpu_timed_vectors: u64,
    /// CPU nanoseconds (an estimate when `cpu_extrapolated`).
    pub cpu_nanos: u64,
    /// Wall nanoseconds (an estimate when `wall_extrapolated`).
    pub wall_nanos: u64,
    /// Whether `cpu_nanos` was extrapolated from sampled vectors.
    pub cpu_extrapolated: bool,
    /// Whether `wall_nanos` was extrapolated from sampled vectors.
    pub wall_extrapolated: bool,
    /// `full`, `sampled 1/N` or `wall only` (see [`FunctionStats::mode_label`]).
    pub mode: String,
    /// Times the sampling re-calibrated because the function's cost drifted.
    pub recalibrations: u32,
}

impl FunctionProfile {
    /// The call site's profile from the statistics of its samplers (one per thread).
    pub fn from_stats(
        name: impl Into<String>,
        expression: impl Into<String>,
        samplers: &[FunctionStats],
    ) -> FunctionProfile {
        let mut total = FunctionStats::default();
        for s in samplers {
            total.vectors += s.vectors;
            total.rows += s.rows;
            total.cpu_timed_vectors += s.cpu_timed_vectors;
            total.cpu_nanos += s.cpu_nanos;
            total.wall_nanos += s.wall_nanos;
            total.cpu_extrapolated |= s.cpu_extrapolated;
            total.wall_extrapolated |= s.wall_extrapolated;
            total.recalibrations += s.recalibrations;
        }
        FunctionProfile {
            name: name.into(),
            expression: expression.into(),
            vectors: total.vectors,
            rows: total.rows,
            cpu_timed_vectors: total.cpu_timed_vectors,
            cpu_nanos: total.cpu_nanos.max(0.0).round() as u64,
            wall_nanos: total.wall_nanos.max(0.0).round() as u64,
            cpu_extrapolated: total.cpu_extrapolated,
            wall_extrapolated: total.wall_extrapolated,
            mode: total.mode_label(),
            recalibrations: total.recalibrations,
        }
    }
}

impl ProfileNode {
    /// The metric called `name`, if the operator has it.
    pub fn metric(&self, name: &str) -> Option<&NodeMetric> {
        self.metrics.iter().find(|m| m.name == name)
    }

    /// Operator-level value of the metric called `name`.
    pub fn value(&self, name: &str) -> Option<i64> {
        self.metric(name).map(|m| m.value)
    }

    /// This node and all its descendants, in pre-order.
    pub fn iter(&self) -> impl Iterator<Item = &ProfileNode> {
        let mut stack = vec![self];
        std::iter::from_fn(move || {
            let node = stack.pop()?;
            stack.extend(node.children.iter().rev());
            Some(node)
        })
    }
}

/// One metric of one task.
#[derive(Debug, Clone, PartialEq)]
pub struct TaskMetric {
    /// Metric name, as on operators.
    pub name: String,
    /// Metric kind.
    pub kind: MetricKind,
    /// The task's value.
    pub value: i64,
}

/// One task: one partition of a stage.
#[derive(Debug, Clone, PartialEq)]
pub struct TaskProfile {
    /// Task id, unique within the run.
    pub task_id: u64,
    /// Partition of the stage the task computed.
    pub partition: u32,
    /// When the task started, in milliseconds since the Unix epoch.
    pub start_epoch_millis: u64,
    /// When the task finished, in milliseconds since the Unix epoch; 0 while it runs (in a
    /// running query's snapshot).
    pub finish_epoch_millis: u64,
    /// Task-level metrics (work of all the stage's operators in this partition).
    pub metrics: Vec<TaskMetric>,
    /// Why the task failed, on one line; `None` if it did not.
    pub error: Option<String>,
    /// The attempt: 0 for a task's first run, more for its reruns (after a failure or a
    /// lost executor).
    pub attempt: u32,
    /// The executor that ran it; `None` for the local process (Spark's `driver`).
    pub executor: Option<ExecutorRef>,
}

/// An executor of a cluster, as a task names it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ExecutorRef {
    /// The executor's id, unique in the cluster.
    pub id: String,
    /// The host it runs on.
    pub host: String,
}

impl TaskProfile {
    /// Value of the task metric called `name`.
    pub fn value(&self, name: &str) -> Option<i64> {
        self.metrics
            .iter()
            .find(|m| m.name == name)
            .map(|m| m.value)
    }
}

/// A stage: operators that run together in the same tasks, between exchanges.
#[derive(Debug, Clone, PartialEq)]
pub struct StageProfile {
    /// Stage id; child stages have smaller ids than their consumers.
    pub id: u32,
    /// Ids of the operators in the stage.
    pub node_ids: Vec<usize>,
    /// The stage's tasks, by partition.
    pub tasks: Vec<TaskProfile>,
    /// The executor's memory peaks while the stage ran, by region: execution memory is the
    /// exact peak of the stage's own reservations; the other regions are the largest
    /// samples taken from its start to its end. `None` if nothing was sampled.
    pub memory: Option<MemorySample>,
    /// On a cluster: each executor's memory peaks while it ran the stage's tasks, by
    /// executor id (empty in one process, where `memory` is the executor's).
    pub executor_memory: Vec<(String, MemorySample)>,
}

/// The profile of one query.
#[derive(Debug, Clone, PartialEq)]
pub struct QueryProfile {
    /// Query id within the run (e.g. the TPC-H query number).
    pub id: usize,
    /// The SQL text.
    pub sql: String,
    /// Rows returned.
    pub rows: u64,
    /// Wall time from planning to the last batch, in nanoseconds.
    pub duration_nanos: u64,
    /// When the query started, in milliseconds since the Unix epoch.
    pub start_epoch_millis: u64,
    /// The operator tree.
    pub plan: ProfileNode,
    /// Stages and their tasks.
    pub stages: Vec<StageProfile>,
    /// The executor's memory samples from the query's start to its end, oldest first.
    pub memory: Vec<MemorySample>,
    /// The memory pool the query reserved from: its limit and its high-water mark while
    /// the query ran (`None` when the session's pool is not qprof's).
    pub memory_pool: Option<MemoryPoolUsage>,
}

/// A memory pool's limit and the most it held while a query ran (with the reservations
/// of any query running beside it: they share the pool).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemoryPoolUsage {
    /// The pool's limit in bytes; `None` for an unbounded pool.
    pub limit_bytes: Option<u64>,
    /// The most bytes reserved from it at once while the query ran.
    pub peak_bytes: u64,
}

/// Names of the base metrics every operator has, and of the I/O metrics of operators that
/// touch storage.
pub mod names {
    /// Wall time inside the operator's polls, children polled inline included (ns).
    pub const WALL_NANOS: &str = "wallNanos";
    /// Wall time of the operator's own code (ns).
    pub const SELF_WALL_NANOS: &str = "selfWallNanos";
    /// CPU time inside the operator's polls, children polled inline included (ns).
    pub const CPU_NANOS: &str = "cpuNanos";
    /// CPU time of the operator's own code, children excluded wherever they ran (ns).
    pub const SELF_CPU_NANOS: &str = "selfCpuNanos";
    /// Polls that produced a batch.
    pub const CPU_COUNT: &str = "cpuCount";
    /// Rows produced.
    pub const OUTPUT_ROWS: &str = "outputRows";
    /// Batches produced.
    pub const OUTPUT_VECTORS: &str = "outputVectors";
    /// Bytes produced.
    pub const OUTPUT_BYTES: &str = "outputBytes";
    /// Peak memory reserved by the operator.
    pub const PEAK_MEMORY_BYTES: &str = "peakMemoryBytes";
    /// Heap allocations made while the operator's code ran.
    pub const NUM_MEMORY_ALLOCATIONS: &str = "numMemoryAllocations";
    /// Read requests to storage.
    pub const READ_REQUESTS: &str = "numReadRequests";
    /// Bytes the reads delivered, from every tier.
    pub const READ_BYTES: &str = "readBytes";
    /// Bytes read from the store itself.
    pub const STORAGE_READ_BYTES: &str = "storageReadBytes";
    /// Bytes read from a local disk cache.
    pub const LOCAL_READ_BYTES: &str = "localReadBytes";
    /// Bytes read from a memory cache.
    pub const RAM_READ_BYTES: &str = "ramReadBytes";
    /// Time reads were in flight, summed over reads (ns).
    pub const DATA_SOURCE_READ_NANOS: &str = "dataSourceReadNanos";
    /// Time the operator's polls were blocked on its reads (ns).
    pub const IO_WAIT_NANOS: &str = "ioWaitNanos";
    /// Requests that move no data (head, list, delete, copy).
    pub const METADATA_REQUESTS: &str = "numMetadataRequests";
    /// Bytes read per second.
    pub const READ_BYTES_PER_SECOND: &str = "readBytesPerSecond";
    /// Time average of reads in flight (Spark `average`: tenths).
    pub const AVERAGE_READ_CONCURRENCY: &str = "averageReadConcurrency";
    /// Share of time at each read concurrency; as metrics `readConcurrencyBucket{i}Percent`,
    /// and as Impala's info string under this key.
    pub const READ_CONCURRENCY_BUCKET: &str = "readConcurrencyBucket";
    /// Write requests (whole objects or parts).
    pub const WRITE_REQUESTS: &str = "numWriteRequests";
    /// Bytes sent to storage by writes.
    pub const PHYSICAL_WRITTEN_BYTES: &str = "physicalWrittenBytes";
    /// Files (objects) completely written.
    pub const WRITTEN_FILES: &str = "numWrittenFiles";
    /// Time of the write requests (ns).
    pub const WRITE_IO_NANOS: &str = "writeIONanos";
    /// Spill files an operator created (counted where they are created).
    pub const SPILL_FILES_CREATED: &str = "spillFilesCreated";
    /// Bytes written to spill files.
    pub const SPILL_WRITTEN_BYTES: &str = "spillWrittenBytes";
    /// Rows written to spill files (read from the Arrow IPC stream as it is written).
    pub const SPILL_WRITTEN_ROWS: &str = "spillWrittenRows";
    /// Partitions (tasks) of an operator that spilled.
    pub const SPILLED_PARTITIONS: &str = "spilledPartitions";
    /// Time of writing spill files (ns).
    pub const SPILL_WRITE_NANOS: &str = "spillWriteNanos";
    /// Bytes read back from spill files.
    pub const SPILL_READ_BYTES: &str = "spillReadBytes";
    /// Time of reading spill files back (ns).
    pub const SPILL_READ_NANOS: &str = "spillReadNanos";
    /// Files and file ranges a scan left out: by partition values while planning, by
    /// statistics when opening them.
    pub const SKIPPED_SPLITS: &str = "skippedSplits";
    /// Dynamic filters an operator produced (hash join, TopK sort, aggregate).
    pub const DYNAMIC_FILTERS_PRODUCED: &str = "numDynamicFiltersProduced";
    /// Dynamic filters an operator (a scan) took in from others.
    pub const DYNAMIC_FILTERS_ACCEPTED: &str = "numDynamicFiltersAccepted";
    /// Updates of the dynamic filters an operator produced, after their creation.
    pub const DYNAMIC_FILTER_UPDATES: &str = "numDynamicFilterUpdates";
    /// Rows a scan did not read because of the dynamic filters it accepted.
    pub const REPLACED_WITH_DYNAMIC_FILTER_ROWS: &str = "numReplacedWithDynamicFilterRows";
    /// Info key naming the operators whose dynamic filters an operator took in.
    pub const DYNAMIC_FILTER_PRODUCERS: &str = "dynamicFilterProducers";
    /// The metric-name prefixes of the two phases of each kind of join, build (or held)
    /// side first: `hashBuildInputRows`, `hashProbeWallNanos`, ...
    pub const JOIN_PHASE_PREFIXES: [(&str, &str); 6] = [
        ("hashBuild", "hashProbe"),
        ("crossBuild", "crossProbe"),
        ("nestedLoopBuild", "nestedLoopProbe"),
        ("piecewiseMergeBuffered", "piecewiseMergeStream"),
        ("sortMergeBuffered", "sortMergeStream"),
        ("symmetricHashLeft", "symmetricHashRight"),
    ];
    /// All base metric names, in display order.
    pub const BASE: [&str; 10] = [
        WALL_NANOS,
        SELF_WALL_NANOS,
        CPU_NANOS,
        SELF_CPU_NANOS,
        CPU_COUNT,
        OUTPUT_ROWS,
        OUTPUT_VECTORS,
        OUTPUT_BYTES,
        PEAK_MEMORY_BYTES,
        NUM_MEMORY_ALLOCATIONS,
    ];
}

impl QueryProfile {
    /// Operators sorted by self CPU time, largest first.
    pub fn top_by_self_cpu(&self) -> Vec<&ProfileNode> {
        let mut nodes: Vec<&ProfileNode> = self.plan.iter().collect();
        nodes.sort_by_key(|n| std::cmp::Reverse(n.value(names::SELF_CPU_NANOS).unwrap_or(0)));
        nodes
    }

    /// Renders the profile as text: a header line, the operator tree with each operator's
    /// share of the query's CPU, and the `top` operators by self CPU time.
    pub fn render_text(&self, top: usize) -> String {
        let total_self_cpu: i64 = self
            .plan
            .iter()
            .filter_map(|n| n.value(names::SELF_CPU_NANOS))
            .sum();
        let mut out = String::new();
        let _ = writeln!(
            out,
            "query {}: {} row{} in {}, operator cpu {}, {} stage{}",
            self.id,
            format::integer(self.rows as i64),
            if self.rows == 1 { "" } else { "s" },
            format::human_nanos(self.duration_nanos),
            format::human_nanos(total_self_cpu.max(0) as u64),
            self.stages.len(),
            if self.stages.len() == 1 { "" } else { "s" },
        );
        render_node(&self.plan, 0, total_self_cpu, &mut out);
        if top > 0 {
            let _ = writeln!(out, "top operators by self cpu:");
            for node in self.top_by_self_cpu().into_iter().take(top) {
                let self_cpu = node.value(names::SELF_CPU_NANOS).unwrap_or(0);
                let _ = writeln!(
                    out,
                    "  {:>5}  {:>10}  #{} {}",
                    percent(self_cpu, total_self_cpu),
                    format::human_nanos(self_cpu.max(0) as u64),
                    node.id,
                    node.name
                );
            }
        }
        out
    }
}

fn percent(part: i64, whole: i64) -> String {
    if whole <= 0 {
        return "-".to_string();
    }
    format!("{:.1}%", part as f64 * 100.0 / whole as f64)
}

fn render_node(node: &ProfileNode, depth: usize, total_self_cpu: i64, out: &mut String) {
    let indent = "  ".repeat(depth);
    let v = |name| node.value(name).unwrap_or(0);
    let stage = node
        .stage_id
        .map(|s| format!(" [stage {s}]"))
        .unwrap_or_default();
    let _ = writeln!(
        out,
        "{indent}#{} {}{stage}  self cpu {} ({})  cpu {}  rows {}  batches {}  peak mem {}",
        node.id,
        node.name,
        format::human_nanos(v(names::SELF_CPU_NANOS).max(0) as u64),
        percent(v(names::SELF_CPU_NANOS), total_self_cpu),
        format::human_nanos(v(names::CPU_NANOS).max(0) as u64),
        format::integer(v(names::OUTPUT_ROWS)),
        format::integer(v(names::OUTPUT_VECTORS)),
        format::bytes(v(names::PEAK_MEMORY_BYTES)),
    );
    let display = node.display.trim();
    if !display.is_empty() && display != node.name {
        let _ = writeln!(out, "{indent}   {}", truncate(display, 110));
    }
    render_io(node, &indent, out);
    render_join_phases(node, &indent, out);
    render_spill(node, &indent, out);
    render_dynamic_filters(node, &indent, out);
    for f in &node.functions {
        let estimated = |yes: bool| if yes { "~" } else { "" };
        let _ = writeln!(
            out,
            "{indent}   fn {}  cpu {}{}  wall {}{}  rows {}  vectors {}  {}",
            truncate(&f.expression, 70),
            estimated(f.cpu_extrapolated),
            format::human_nanos(f.cpu_nanos),
            estimated(f.wall_extrapolated),
            format::human_nanos(f.wall_nanos),
            format::integer(f.rows as i64),
            format::integer(f.vectors as i64),
            f.mode,
        );
    }
    for child in &node.children {
        render_node(child, depth + 1, total_self_cpu, out);
    }
}

/// The phase line of a join: per phase, the rows its input gave, its own time, its peak
/// memory and what it spilled, where measured.
fn render_join_phases(node: &ProfileNode, indent: &str, out: &mut String) {
    let Some((build, probe)) = names::JOIN_PHASE_PREFIXES
        .iter()
        .find(|(build, _)| node.value(&format!("{build}InputRows")).is_some())
    else {
        return;
    };
    let phase = |prefix: &str| {
        let v = |suffix: &str| node.value(&format!("{prefix}{suffix}"));
        let mut parts = vec![format!(
            "{} rows in",
            format::integer(v("InputRows").unwrap_or(0))
        )];
        if let Some(wall) = v("WallNanos") {
            parts.push(format!("own {}", format::human_nanos(wall.max(0) as u64)));
        }
        if let Some(peak) = v("PeakMemoryBytes") {
            parts.push(format!("peak {}", format::bytes(peak)));
        }
        if let Some(spilled) = v("SpilledBytes").filter(|b| *b > 0) {
            parts.push(format!("spilled {}", format::bytes(spilled)));
        }
        format!("{}: {}", format::camel_words(prefix), parts.join(", "))
    };
    let _ = writeln!(out, "{indent}   {}  |  {}", phase(build), phase(probe));
}

/// The spill line of an operator that wrote spill files: what it wrote, in how many of
/// its partitions, and what it read back.
fn render_spill(node: &ProfileNode, indent: &str, out: &mut String) {
    let files = node.value(names::SPILL_FILES_CREATED).unwrap_or(0);
    if files <= 0 {
        return;
    }
    let v = |name| node.value(name).unwrap_or(0);
    let nanos = |name| format::human_nanos(v(name).max(0) as u64);
    let _ = writeln!(
        out,
        "{indent}   spill  wrote {} ({} rows) to {} file{} from {} partition{} in {}  read back {} in {}",
        format::bytes(v(names::SPILL_WRITTEN_BYTES)),
        format::integer(v(names::SPILL_WRITTEN_ROWS)),
        format::integer(files),
        plural(files),
        format::integer(v(names::SPILLED_PARTITIONS)),
        plural(v(names::SPILLED_PARTITIONS)),
        nanos(names::SPILL_WRITE_NANOS),
        format::bytes(v(names::SPILL_READ_BYTES)),
        nanos(names::SPILL_READ_NANOS),
    );
}

/// The dynamic-filter line of an operator that produced or accepted dynamic filters.
fn render_dynamic_filters(node: &ProfileNode, indent: &str, out: &mut String) {
    let mut parts = Vec::new();
    if let Some(produced) = node
        .value(names::DYNAMIC_FILTERS_PRODUCED)
        .filter(|n| *n > 0)
    {
        parts.push(format!(
            "produced {}, updated {} time{}",
            format::integer(produced),
            format::integer(node.value(names::DYNAMIC_FILTER_UPDATES).unwrap_or(0)),
            plural(node.value(names::DYNAMIC_FILTER_UPDATES).unwrap_or(0)),
        ));
    }
    if let Some(accepted) = node
        .value(names::DYNAMIC_FILTERS_ACCEPTED)
        .filter(|n| *n > 0)
    {
        let from = node
            .info
            .iter()
            .find(|(k, _)| k == names::DYNAMIC_FILTER_PRODUCERS)
            .map(|(_, producers)| format!(" from {producers}"))
            .unwrap_or_default();
        parts.push(format!("accepted {}{from}", format::integer(accepted)));
        if let Some(rows) = node.value(names::REPLACED_WITH_DYNAMIC_FILTER_ROWS) {
            parts.push(format!("{} rows not read", format::integer(rows)));
        }
    }
    if !parts.is_empty() {
        let _ = writeln!(out, "{indent}   dynamic filters  {}", parts.join(", "));
    }
}

fn plural(n: i64) -> &'static str {
    if n == 1 { "" } else { "s" }
}

/// The I/O lines of an operator that touched storage: reads with their tiers, time and
/// concurrency; pruning; writes.
fn render_io(node: &ProfileNode, indent: &str, out: &mut String) {
    let v = |name| node.value(name).unwrap_or(0);
    let nanos = |name| format::human_nanos(v(name).max(0) as u64);
    if node.value(names::READ_REQUESTS).is_some() {
        let buckets = node
            .info
            .iter()
            .find(|(k, _)| k == names::READ_CONCURRENCY_BUCKET)
            .map(|(_, b)| format!(" [{b}]"))
            .unwrap_or_default();
        let _ = writeln!(
            out,
            "{indent}   read {} in {} request{} (storage {}, local {}, ram {})  read time {}  io wait {}  concurrency {}{buckets}",
            format::bytes(v(names::READ_BYTES)),
            format::integer(v(names::READ_REQUESTS)),
            plural(v(names::READ_REQUESTS)),
            format::bytes(v(names::STORAGE_READ_BYTES)),
            format::bytes(v(names::LOCAL_READ_BYTES)),
            format::bytes(v(names::RAM_READ_BYTES)),
            nanos(names::DATA_SOURCE_READ_NANOS),
            nanos(names::IO_WAIT_NANOS),
            format::average(v(names::AVERAGE_READ_CONCURRENCY)),
        );
    }
    let pruning: Vec<String> = [
        ("splits", "skippedSplits", "processedSplits"),
        ("row groups", "skippedStrides", "processedStrides"),
    ]
    .iter()
    .filter_map(|(what, skipped, processed)| {
        let (s, p) = (node.value(skipped)?, node.value(processed)?);
        Some(format!(
            "{what} {} skipped, {} kept",
            format::integer(s),
            format::integer(p)
        ))
    })
    .collect();
    if !pruning.is_empty() {
        let _ = writeln!(out, "{indent}   pruning  {}", pruning.join("  "));
    }
    if node.value(names::WRITE_REQUESTS).is_some() {
        let _ = writeln!(
            out,
            "{indent}   wrote {} in {} file{} ({} requests)  write io {}",
            format::bytes(v(names::PHYSICAL_WRITTEN_BYTES)),
            format::integer(v(names::WRITTEN_FILES)),
            plural(v(names::WRITTEN_FILES)),
            format::integer(v(names::WRITE_REQUESTS)),
            nanos(names::WRITE_IO_NANOS),
        );
    }
}

fn truncate(s: &str, max_chars: usize) -> String {
    if s.chars().count() <= max_chars {
        s.to_string()
    } else {
        let mut t: String = s.chars().take(max_chars.saturating_sub(1)).collect();
        t.push('…');
        t
    }
}

/// Hand-built profiles for tests (here and in the crates that render profiles).
#[cfg(any(test, feature = "test-util"))]
pub mod fixtures {
    use super::*;
    use crate::metric::TaskRef;

    fn tv(task_id: u64, value: i64) -> TaskValue {
        TaskValue {
            task: Some(TaskRef {
                stage_id: 0,
                stage_attempt: 0,
                task_id,
                partition: task_id as u32,
            }),
            value,
        }
    }

    fn node(
        id: usize,
        name: &str,
        self_cpu: [i64; 2],
        rows: [i64; 2],
        children: Vec<ProfileNode>,
    ) -> ProfileNode {
        let child_cpu: i64 = children
            .iter()
            .map(|c| c.value(names::CPU_NANOS).unwrap())
            .sum();
        let metric = |n: &str, kind, vals: [i64; 2]| {
            NodeMetric::summed(n, n, kind, vec![tv(0, vals[0]), tv(1, vals[1])])
        };
        ProfileNode {
            id,
            name: name.to_string(),
            display: format!("{name}: details"),
            stage_id: Some(0),
            metrics: vec![
                metric(names::SELF_CPU_NANOS, MetricKind::NsTiming, self_cpu),
                metric(
                    names::CPU_NANOS,
                    MetricKind::NsTiming,
                    [self_cpu[0] + child_cpu / 2, self_cpu[1] + child_cpu / 2],
                ),
                metric(names::OUTPUT_ROWS, MetricKind::Sum, rows),
                metric(names::OUTPUT_VECTORS, MetricKind::Sum, [1, 1]),
                metric(names::PEAK_MEMORY_BYTES, MetricKind::Size, [0, 4096]),
            ],
            info: vec![],
            functions: vec![],
            children,
        }
    }

    /// A three-operator profile (aggregate over filter over scan, two tasks, one function
    /// call site) for tests of renderings and wire formats.
    pub fn sample() -> QueryProfile {
        let scan = node(
            2,
            "DataSourceExec",
            [30_000_000, 50_000_000],
            [500, 524],
            vec![],
        );
        let mut filter = node(
            1,
            "FilterExec",
            [2_000_000, 2_000_000],
            [10, 12],
            vec![scan],
        );
        filter.functions = vec![FunctionProfile {
            name: "regexp_like".into(),
            expression: "regexp_like(t.comment, Utf8(\"^a.*z$\"))".into(),
            vectors: 250,
            rows: 1_024_000,
            cpu_timed_vectors: 4,
            cpu_nanos: 1_250_000,
            wall_nanos: 1_300_000,
            cpu_extrapolated: true,
            wall_extrapolated: true,
            mode: "sampled 1/63".into(),
            recalibrations: 0,
        }];
        let agg = node(
            0,
            "AggregateExec",
            [1_000_000, 500_000],
            [1, 1],
            vec![filter],
        );
        QueryProfile {
            id: 6,
            sql: "select 1".into(),
            rows: 1,
            duration_nanos: 42_500_000,
            start_epoch_millis: 1_795_333_320_377,
            plan: agg,
            stages: vec![StageProfile {
                id: 0,
                node_ids: vec![0, 1, 2],
                tasks: vec![TaskProfile {
                    task_id: 0,
                    partition: 0,
                    start_epoch_millis: 1_795_333_320_400,
                    finish_epoch_millis: 1_795_333_320_440,
                    metrics: vec![TaskMetric {
                        name: names::CPU_NANOS.into(),
                        kind: MetricKind::NsTiming,
                        value: 33_000_000,
                    }],
                    error: None,
                    attempt: 0,
                    executor: None,
                }],
                memory: None,
                executor_memory: Vec::new(),
            }],
            memory: Vec::new(),
            memory_pool: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::fixtures::sample;
    use super::*;

    #[test]
    fn text_tree_snapshot() {
        insta::assert_snapshot!(sample().render_text(3));
    }

    #[test]
    fn spill_and_dynamic_filter_lines_snapshot() {
        let mut profile = sample();
        let put = |node: &mut ProfileNode, name: &str, value: i64| {
            node.metrics.push(NodeMetric::summed(
                name,
                name,
                MetricKind::Sum,
                vec![TaskValue { task: None, value }],
            ));
        };
        let aggregate = &mut profile.plan;
        for (name, value) in [
            (names::SPILL_FILES_CREATED, 3),
            (names::SPILL_WRITTEN_BYTES, 3 << 20),
            (names::SPILL_WRITTEN_ROWS, 120_000),
            (names::SPILLED_PARTITIONS, 1),
            (names::SPILL_WRITE_NANOS, 4_000_000),
            (names::SPILL_READ_BYTES, 3 << 20),
            (names::SPILL_READ_NANOS, 2_500_000),
            (names::DYNAMIC_FILTERS_PRODUCED, 1),
            (names::DYNAMIC_FILTER_UPDATES, 2),
        ] {
            put(aggregate, name, value);
        }
        let scan = &mut profile.plan.children[0].children[0];
        put(scan, names::DYNAMIC_FILTERS_ACCEPTED, 1);
        put(scan, names::REPLACED_WITH_DYNAMIC_FILTER_ROWS, 99_000);
        scan.info.push((
            names::DYNAMIC_FILTER_PRODUCERS.to_string(),
            "#0 AggregateExec".to_string(),
        ));
        // the filter neither spilled nor took part in a dynamic filter: no such lines
        put(&mut profile.plan.children[0], names::SPILL_FILES_CREATED, 0);
        insta::assert_snapshot!(profile.render_text(0));
    }

    #[test]
    fn a_call_site_sums_its_samplers() {
        let stats = |vectors, timed, cpu: f64, extrapolated| FunctionStats {
            vectors,
            rows: vectors * 100,
            cpu_timed_vectors: timed,
            cpu_nanos: cpu,
            wall_nanos: cpu * 1.1,
            cpu_extrapolated: extrapolated,
            wall_extrapolated: extrapolated,
            decision: None,
            recalibrations: 1,
        };
        let full = FunctionProfile::from_stats("f", "f(a)", &[stats(10, 10, 500.0, false)]);
        assert_eq!((full.mode.as_str(), full.cpu_extrapolated), ("full", false));
        let mixed = FunctionProfile::from_stats(
            "f",
            "f(a)",
            &[stats(10, 10, 500.0, false), stats(90, 2, 4_500.4, true)],
        );
        assert_eq!(mixed.vectors, 100);
        assert_eq!(mixed.rows, 10_000);
        assert_eq!(mixed.cpu_timed_vectors, 12);
        assert_eq!(mixed.cpu_nanos, 5_000);
        assert!(mixed.cpu_extrapolated && mixed.wall_extrapolated);
        assert_eq!(mixed.mode, "sampled 1/8");
        assert_eq!(mixed.recalibrations, 2);
    }

    #[test]
    fn iteration_is_pre_order_and_top_is_sorted() {
        let p = sample();
        let ids: Vec<usize> = p.plan.iter().map(|n| n.id).collect();
        assert_eq!(ids, vec![0, 1, 2]);
        let top: Vec<usize> = p.top_by_self_cpu().iter().map(|n| n.id).collect();
        assert_eq!(top, vec![2, 1, 0]);
    }
}
