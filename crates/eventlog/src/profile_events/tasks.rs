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

/// Spark's `Task Metrics` of a task: what qprof measures in its slots, 0 in the JVM's.
#[derive(Debug, Serialize)]
pub(super) struct TaskMetrics {
    #[serde(rename = "Executor Deserialize Time")]
    deserialize_time: i64,
    #[serde(rename = "Executor Deserialize CPU Time")]
    deserialize_cpu_time: i64,
    #[serde(rename = "Executor Run Time")]
    run_time_millis: i64,
    #[serde(rename = "Executor CPU Time")]
    cpu_time_nanos: i64,
    #[serde(rename = "Peak Execution Memory")]
    peak_execution_memory: i64,
    #[serde(rename = "Peak On Heap Execution Memory")]
    peak_on_heap_execution_memory: i64,
    #[serde(rename = "Peak Off Heap Execution Memory")]
    peak_off_heap_execution_memory: i64,
    #[serde(rename = "Result Size")]
    result_size: i64,
    #[serde(rename = "JVM GC Time")]
    gc_time: i64,
    #[serde(rename = "Result Serialization Time")]
    result_serialization_time: i64,
    #[serde(rename = "Memory Bytes Spilled")]
    memory_bytes_spilled: i64,
    #[serde(rename = "Disk Bytes Spilled")]
    disk_bytes_spilled: i64,
    #[serde(rename = "Shuffle Read Metrics")]
    shuffle_read: ShuffleReadMetrics,
    #[serde(rename = "Shuffle Write Metrics")]
    shuffle_write: ShuffleWriteMetrics,
    #[serde(rename = "Input Metrics")]
    input: InputMetrics,
    #[serde(rename = "Output Metrics")]
    output: OutputMetrics,
    #[serde(rename = "Updated Blocks")]
    updated_blocks: [(); 0],
}

/// Spark's `Shuffle Read Metrics`: a stage's reads of its parents' output are local.
#[derive(Debug, Serialize)]
struct ShuffleReadMetrics {
    #[serde(rename = "Remote Blocks Fetched")]
    remote_blocks_fetched: i64,
    #[serde(rename = "Local Blocks Fetched")]
    local_blocks_fetched: i64,
    #[serde(rename = "Fetch Wait Time")]
    fetch_wait_time: i64,
    #[serde(rename = "Remote Bytes Read")]
    remote_bytes_read: i64,
    #[serde(rename = "Remote Bytes Read To Disk")]
    remote_bytes_read_to_disk: i64,
    #[serde(rename = "Local Bytes Read")]
    local_bytes_read: i64,
    #[serde(rename = "Total Records Read")]
    total_records_read: i64,
    #[serde(rename = "Remote Requests Duration")]
    remote_requests_duration: i64,
    #[serde(rename = "Push Based Shuffle")]
    push_based: PushBasedShuffle,
}

/// Spark's push-based shuffle counters, which qprof has no counterpart of.
#[derive(Debug, Default, Serialize)]
struct PushBasedShuffle {
    #[serde(rename = "Corrupt Merged Block Chunks")]
    corrupt_merged_block_chunks: i64,
    #[serde(rename = "Merged Fetch Fallback Count")]
    merged_fetch_fallback_count: i64,
    #[serde(rename = "Merged Remote Blocks Fetched")]
    merged_remote_blocks_fetched: i64,
    #[serde(rename = "Merged Local Blocks Fetched")]
    merged_local_blocks_fetched: i64,
    #[serde(rename = "Merged Remote Chunks Fetched")]
    merged_remote_chunks_fetched: i64,
    #[serde(rename = "Merged Local Chunks Fetched")]
    merged_local_chunks_fetched: i64,
    #[serde(rename = "Merged Remote Bytes Read")]
    merged_remote_bytes_read: i64,
    #[serde(rename = "Merged Local Bytes Read")]
    merged_local_bytes_read: i64,
    #[serde(rename = "Merged Remote Requests Duration")]
    merged_remote_requests_duration: i64,
}

/// Spark's `Shuffle Write Metrics`.
#[derive(Debug, Serialize)]
struct ShuffleWriteMetrics {
    #[serde(rename = "Shuffle Bytes Written")]
    bytes_written: i64,
    #[serde(rename = "Shuffle Write Time")]
    write_time: i64,
    #[serde(rename = "Shuffle Records Written")]
    records_written: i64,
}

/// Spark's `Input Metrics`.
#[derive(Debug, Serialize)]
struct InputMetrics {
    #[serde(rename = "Bytes Read")]
    bytes_read: i64,
    #[serde(rename = "Records Read")]
    records_read: i64,
}

/// Spark's `Output Metrics`.
#[derive(Debug, Serialize)]
struct OutputMetrics {
    #[serde(rename = "Bytes Written")]
    bytes_written: i64,
    #[serde(rename = "Records Written")]
    records_written: i64,
}

/// Spark's `Task Metrics` of `task`.
pub(super) fn task_metrics(task: &TaskProfile, f: &TaskFigures, result_task: bool) -> TaskMetrics {
    let v = |name: &str| task.value(name).unwrap_or(0);
    let (shuffle_bytes, shuffle_rows) = if result_task {
        (0, 0)
    } else {
        (f.output_bytes, f.output_rows)
    };
    TaskMetrics {
        deserialize_time: 0,
        deserialize_cpu_time: 0,
        run_time_millis: v(names::WALL_NANOS) / 1_000_000,
        cpu_time_nanos: v(names::CPU_NANOS),
        peak_execution_memory: v(names::PEAK_MEMORY_BYTES),
        peak_on_heap_execution_memory: 0,
        peak_off_heap_execution_memory: v(names::PEAK_MEMORY_BYTES),
        result_size: if result_task { f.output_bytes } else { 0 },
        gc_time: 0,
        result_serialization_time: 0,
        memory_bytes_spilled: 0,
        disk_bytes_spilled: f.spilled_bytes,
        shuffle_read: ShuffleReadMetrics {
            remote_blocks_fetched: 0,
            local_blocks_fetched: 0,
            fetch_wait_time: 0,
            remote_bytes_read: 0,
            remote_bytes_read_to_disk: 0,
            local_bytes_read: f.shuffle_read_bytes,
            total_records_read: f.shuffle_read_rows,
            remote_requests_duration: 0,
            push_based: PushBasedShuffle::default(),
        },
        shuffle_write: ShuffleWriteMetrics {
            bytes_written: shuffle_bytes,
            write_time: 0,
            records_written: shuffle_rows,
        },
        input: InputMetrics {
            bytes_read: f.input_bytes,
            records_read: f.input_rows,
        },
        output: OutputMetrics {
            bytes_written: 0,
            records_written: 0,
        },
        updated_blocks: [],
    }
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
    pub(super) metrics: TaskMetrics,
}
