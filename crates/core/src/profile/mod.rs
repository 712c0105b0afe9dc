//! Query profiles: a tree of operators mirroring the plan, each with its metrics, plus the
//! stages and tasks the plan ran as, rendered as an indented text tree. (Wire formats of
//! profiles live in `qprof-eventlog`.)

mod critical_path;
#[cfg(any(test, feature = "test-util"))]
pub mod fixtures;
pub mod names;
mod render;
mod text;

pub use critical_path::{CriticalStep, HottestOperator};
#[cfg(test)]
mod tests;

use std::borrow::Cow;

use crate::executor_memory::MemorySample;
use crate::metric::{Aggregate, MetricKind, TaskRef, TaskValue, spark_string};
use crate::sampling::FunctionStats;
pub use text::{OperatorText, RenderText};

/// One metric of one operator: its per-task values and the operator-level value.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeMetric {
    /// Stable camelCase name, e.g. `selfCpuNanos` or `hashBuildWallNanos` (the catalog's
    /// own text, shared, for every metric it defines).
    pub name: Cow<'static, str>,
    /// Spark-style display name, e.g. `time of hash build` (shared for every metric the
    /// catalog defines: see [`crate::catalog::MetricDef::display_text`]).
    pub display_name: Cow<'static, str>,
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
        name: impl Into<Cow<'static, str>>,
        display_name: impl Into<Cow<'static, str>>,
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
    pub display: OperatorText,
    /// Stage the operator ran in, if the plan was cut into stages.
    pub stage_id: Option<u32>,
    /// Metrics, base metrics first.
    pub metrics: Vec<NodeMetric>,
    /// Free-form facts about the operator (`key`, `value`).
    pub info: Vec<(String, String)>,
    /// Functions the operator's expressions called, by CPU time, largest first.
    pub functions: Vec<FunctionProfile>,
    /// When each task that ran the operator began and ended it, by task.
    pub task_spans: Vec<TaskSpan>,
    /// What the optimizer's statistics said the operator would produce, before it ran
    /// (`None`: the engine gave no statistics).
    pub estimate: Option<Estimate>,
    /// Inputs of the operator.
    pub children: Vec<ProfileNode>,
}

/// What the optimizer expected an operator to produce, from the engine's statistics at
/// planning.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Estimate {
    /// Rows out, all partitions together.
    pub rows: Estimated,
    /// Bytes out, all partitions together.
    pub bytes: Estimated,
}

/// One estimated figure and how sure the statistics were of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Estimated {
    /// Known exactly (e.g. a file's row count from its footer).
    Exact(u64),
    /// An estimate (e.g. after a filter, from a default selectivity).
    Inexact(u64),
    /// Not known.
    Absent,
}

impl Estimated {
    /// The figure, if there is one.
    pub fn value(self) -> Option<u64> {
        match self {
            Estimated::Exact(v) | Estimated::Inexact(v) => Some(v),
            Estimated::Absent => None,
        }
    }

    /// `exact`, `inexact` or `absent`.
    pub fn precision(self) -> &'static str {
        match self {
            Estimated::Exact(_) => "exact",
            Estimated::Inexact(_) => "inexact",
            Estimated::Absent => "absent",
        }
    }
}

/// When one task ran one operator: from the task executing it to its output's end (or
/// the drop of its output stream, whichever came first).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TaskSpan {
    /// The task.
    pub task: TaskRef,
    /// When the task executed the operator (µs since the Unix epoch).
    pub start_epoch_micros: u64,
    /// When its output ended or was dropped (µs since the Unix epoch); 0 if it had not
    /// when the profile was taken.
    pub finish_epoch_micros: u64,
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
    pub name: Cow<'static, str>,
    /// Metric kind.
    pub kind: MetricKind,
    /// The task's value.
    pub value: i64,
}

/// How a [`TaskProfile`]'s error starts when the task's executor was lost under it
/// (Spark's `ExecutorLostFailure`); the rest of the text is the loss's reason.
pub const EXECUTOR_LOST_FAILURE: &str = "ExecutorLostFailure";
/// How a [`TaskProfile`]'s error starts when the task could not fetch shuffle output
/// (Spark's `FetchFailed`), as `FetchFailed: executor ID stage S partition P: message`.
pub const FETCH_FAILED: &str = "FetchFailed";

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
    /// How planning went, phase by phase and rule by rule (`None` where it was not
    /// measured: a query planned elsewhere, or given as a plan).
    pub planning: Option<crate::planning::PlanningProfile>,
    /// The native stacks sampled while its operators ran (`None`: sampling was off).
    pub stack_samples: Option<crate::stacks::StackSamples>,
    /// Other queries of the same process that ran at some time while it ran: the heap's
    /// growth in [`Self::memory`] is the query's own only when there were none.
    pub overlapping_queries: u32,
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
