//! A task's part of a query's events: its info, its end with the SQL metric values of
//! the task, and the task metrics Spark's pages read.

use qprof_core::profile::{ProfileNode, StageProfile, TaskProfile, names};
use serde::Serialize;
use serde_json::{Value, json};

use super::DRIVER;
use super::stages::NodeIndex;

/// Per-task figures Spark's task metrics need, read from the profile's nodes.
pub(super) struct TaskFigures {
    input_rows: i64,
    input_bytes: i64,
    shuffle_read_rows: i64,
    shuffle_read_bytes: i64,
    output_rows: i64,
    output_bytes: i64,
    /// Bytes the task's operators wrote to spill files.
    spilled_bytes: i64,
}

/// The value of `node`'s `metric` for the task `task_id` (0 if it has none).
fn task_value(node: &ProfileNode, metric: &str, task_id: u64) -> i64 {
    node.metric(metric)
        .and_then(|m| {
            m.tasks
                .iter()
                .find(|v| v.task.is_some_and(|t| t.task_id == task_id))
        })
        .map_or(0, |v| v.value)
}

/// The figures of `task` from the nodes of its stage.
pub(super) fn task_figures(
    nodes: &NodeIndex<'_>,
    stage: &StageProfile,
    task: &TaskProfile,
) -> TaskFigures {
    let mut f = TaskFigures {
        input_rows: 0,
        input_bytes: 0,
        shuffle_read_rows: 0,
        shuffle_read_bytes: 0,
        output_rows: task.value(names::OUTPUT_ROWS).unwrap_or(0),
        output_bytes: task.value(names::OUTPUT_BYTES).unwrap_or(0),
        spilled_bytes: 0,
    };
    for id in &stage.node_ids {
        let Some(node) = nodes.get(id) else {
            continue;
        };
        f.spilled_bytes += task_value(node, names::SPILL_WRITTEN_BYTES, task.task_id);
        let leaf = node.children.is_empty();
        let boundary = !leaf && node.children.iter().all(|c| c.stage_id != Some(stage.id));
        if leaf {
            f.input_rows += task_value(node, names::OUTPUT_ROWS, task.task_id);
            f.input_bytes += task_value(node, "bytesScanned", task.task_id);
        } else if boundary {
            f.shuffle_read_rows += task_value(node, names::OUTPUT_ROWS, task.task_id);
            f.shuffle_read_bytes += task_value(node, names::OUTPUT_BYTES, task.task_id);
        }
    }
    f
}

/// Spark's `Task Metrics` of `task`.
pub(super) fn task_metrics(task: &TaskProfile, f: &TaskFigures, result_task: bool) -> Value {
    let v = |name: &str| task.value(name).unwrap_or(0);
    let (shuffle_bytes, shuffle_rows) = if result_task {
        (0, 0)
    } else {
        (f.output_bytes, f.output_rows)
    };
    json!({
        "Executor Deserialize Time": 0,
        "Executor Deserialize CPU Time": 0,
        "Executor Run Time": v(names::WALL_NANOS) / 1_000_000,
        "Executor CPU Time": v(names::CPU_NANOS),
        "Peak Execution Memory": v(names::PEAK_MEMORY_BYTES),
        "Peak On Heap Execution Memory": 0,
        "Peak Off Heap Execution Memory": v(names::PEAK_MEMORY_BYTES),
        "Result Size": if result_task { f.output_bytes } else { 0 },
        "JVM GC Time": 0,
        "Result Serialization Time": 0,
        "Memory Bytes Spilled": 0,
        "Disk Bytes Spilled": f.spilled_bytes,
        "Shuffle Read Metrics": {
            "Remote Blocks Fetched": 0,
            "Local Blocks Fetched": 0,
            "Fetch Wait Time": 0,
            "Remote Bytes Read": 0,
            "Remote Bytes Read To Disk": 0,
            "Local Bytes Read": f.shuffle_read_bytes,
            "Total Records Read": f.shuffle_read_rows,
            "Remote Requests Duration": 0,
            "Push Based Shuffle": {
                "Corrupt Merged Block Chunks": 0,
                "Merged Fetch Fallback Count": 0,
                "Merged Remote Blocks Fetched": 0,
                "Merged Local Blocks Fetched": 0,
                "Merged Remote Chunks Fetched": 0,
                "Merged Local Chunks Fetched": 0,
                "Merged Remote Bytes Read": 0,
                "Merged Local Bytes Read": 0,
                "Merged Remote Requests Duration": 0,
            },
        },
        "Shuffle Write Metrics": {
            "Shuffle Bytes Written": shuffle_bytes,
            "Shuffle Write Time": 0,
            "Shuffle Records Written": shuffle_rows,
        },
        "Input Metrics": {"Bytes Read": f.input_bytes, "Records Read": f.input_rows},
        "Output Metrics": {"Bytes Written": 0, "Records Written": 0},
        "Updated Blocks": [],
    })
}

/// Spark's `Task End Reason`: success, or an `ExceptionFailure` carrying the error (its
/// class is DataFusion's error kind, the text before the first colon).
pub(super) fn end_reason(error: Option<&str>) -> Value {
    let Some(error) = error else {
        return json!({"Reason": "Success"});
    };
    let kind: String = error
        .split(':')
        .next()
        .unwrap_or_default()
        .split_whitespace()
        .map(|word| {
            let mut chars = word.chars();
            chars.next().map_or_else(String::new, |first| {
                first.to_uppercase().chain(chars).collect()
            })
        })
        .collect();
    json!({
        "Reason": "ExceptionFailure",
        "Class Name": format!("org.apache.datafusion.{kind}"),
        "Description": error,
        "Stack Trace": [],
        "Full Stack Trace": error,
        "Accumulator Updates": [],
    })
}

/// Spark's `Task Info` of a task.
#[derive(Debug, Serialize)]
pub(super) struct TaskInfo {
    #[serde(rename = "Task ID")]
    task_id: u64,
    #[serde(rename = "Index")]
    index: u32,
    #[serde(rename = "Attempt")]
    attempt: u32,
    #[serde(rename = "Partition ID")]
    partition: u32,
    #[serde(rename = "Launch Time")]
    launch_time: u64,
    #[serde(rename = "Executor ID")]
    executor: String,
    #[serde(rename = "Host")]
    host: String,
    #[serde(rename = "Locality")]
    locality: &'static str,
    #[serde(rename = "Speculative")]
    speculative: bool,
    #[serde(rename = "Getting Result Time")]
    getting_result_time: u64,
    #[serde(rename = "Finish Time")]
    finish_time: i64,
    #[serde(rename = "Failed")]
    failed: bool,
    #[serde(rename = "Killed")]
    killed: bool,
    #[serde(rename = "Accumulables")]
    accumulables: Vec<Accumulable>,
}

/// One SQL metric's update in a task's `Accumulables`.
#[derive(Debug, Serialize)]
pub(super) struct Accumulable {
    #[serde(rename = "ID")]
    pub(super) id: i64,
    #[serde(rename = "Name")]
    pub(super) name: String,
    #[serde(rename = "Update")]
    pub(super) update: Decimal,
    #[serde(rename = "Value")]
    pub(super) value: Decimal,
    #[serde(rename = "Internal")]
    pub(super) internal: bool,
    #[serde(rename = "Count Failed Values")]
    pub(super) count_failed_values: bool,
    #[serde(rename = "Metadata")]
    pub(super) metadata: &'static str,
}

/// A number Spark writes as a JSON string.
#[derive(Debug, Clone, Copy)]
pub(super) struct Decimal(pub(super) i64);

impl Serialize for Decimal {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(itoa::Buffer::new().format(self.0))
    }
}

/// Spark's `Task Info` of `task`, run on its executor (or the driver on `host`).
pub(super) fn task_info(
    task: &TaskProfile,
    host: &str,
    finish: i64,
    failed: bool,
    accumulables: Vec<Accumulable>,
) -> TaskInfo {
    // a task of the local process ran on the driver; a cluster's, on its executor
    let (executor, host) = match &task.executor {
        Some(e) => (e.id.as_str(), e.host.as_str()),
        None => (DRIVER, host),
    };
    TaskInfo {
        task_id: task.task_id,
        index: task.partition,
        attempt: task.attempt,
        partition: task.partition,
        launch_time: task.start_epoch_millis,
        executor: executor.to_string(),
        host: host.to_string(),
        locality: if task.executor.is_some() {
            "NODE_LOCAL"
        } else {
            "PROCESS_LOCAL"
        },
        speculative: false,
        getting_result_time: 0,
        finish_time: finish,
        failed,
        killed: false,
        accumulables,
    }
}

/// Spark's task end event, written from its parts: a query's most numerous event, and
/// with a value per metric of the stage its largest.
#[derive(Debug, Serialize)]
pub struct TaskEnd {
    #[serde(rename = "Event")]
    pub(super) event: &'static str,
    #[serde(rename = "Stage ID")]
    pub(super) stage_id: u32,
    #[serde(rename = "Stage Attempt ID")]
    pub(super) stage_attempt_id: u32,
    #[serde(rename = "Task Type")]
    pub(super) task_type: &'static str,
    #[serde(rename = "Task End Reason")]
    pub(super) reason: Value,
    #[serde(rename = "Task Info")]
    pub(super) info: TaskInfo,
    #[serde(rename = "Task Executor Metrics")]
    pub(super) executor_metrics: Value,
    #[serde(rename = "Task Metrics")]
    pub(super) metrics: Value,
}
