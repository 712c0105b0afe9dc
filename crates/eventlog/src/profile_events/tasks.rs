//! A task's part of a query's events: its info, its end with the SQL metric values of
//! the task, and the task metrics Spark's pages read.

use std::collections::HashMap;

use qprof_core::profile::{
    EXECUTOR_LOST_FAILURE, FETCH_FAILED, ProfileNode, StageProfile, TaskProfile, names,
};
use serde::Serialize;
use serde_json::{Value, json};

use super::DRIVER;
use super::stages::NodeIndex;
use crate::state::task_event::{InputLog, MetricsLog, ShuffleReadLog, ShuffleWriteLog};

/// Per-task figures Spark's task metrics need, read from the profile's nodes.
pub(super) struct TaskFigures {
    input_rows: i64,
    input_bytes: i64,
    shuffle_read_rows: i64,
    /// Bytes and blocks read at the stage's boundary: on a cluster, its shuffle readers'
    /// files, local and remote; in one process, the exchanged batches' bytes, all local.
    shuffle_local_bytes: i64,
    shuffle_remote_bytes: i64,
    shuffle_local_blocks: i64,
    shuffle_remote_blocks: i64,
    /// Time the task waited on its shuffle readers' fetches (ns).
    shuffle_fetch_wait_nanos: i64,
    shuffle_write_nanos: i64,
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
        shuffle_local_bytes: 0,
        shuffle_remote_bytes: 0,
        shuffle_local_blocks: 0,
        shuffle_remote_blocks: 0,
        shuffle_fetch_wait_nanos: 0,
        shuffle_write_nanos: 0,
        output_rows: task.value(names::OUTPUT_ROWS).unwrap_or(0),
        output_bytes: task.value(names::OUTPUT_BYTES).unwrap_or(0),
        spilled_bytes: 0,
    };
    for id in &stage.node_ids {
        let Some(node) = nodes.get(id) else {
            continue;
        };
        let value = |metric: &str| task_value(node, metric, task.task_id);
        f.spilled_bytes += value(names::SPILL_WRITTEN_BYTES);
        f.shuffle_write_nanos += value(names::SHUFFLE_WRITE_NANOS);
        let leaf = node.children.is_empty();
        let boundary = !leaf && node.children.iter().all(|c| c.stage_id != Some(stage.id));
        if leaf {
            f.input_rows += task_value(node, names::OUTPUT_ROWS, task.task_id);
            f.input_bytes += task_value(node, names::BYTES_SCANNED, task.task_id);
        } else if boundary {
            f.shuffle_read_rows += value(names::OUTPUT_ROWS);
            if node.metric(names::SHUFFLE_LOCAL_BYTES_READ).is_some() {
                f.shuffle_local_bytes += value(names::SHUFFLE_LOCAL_BYTES_READ);
                f.shuffle_remote_bytes += value(names::SHUFFLE_REMOTE_BYTES_READ);
                f.shuffle_local_blocks += value(names::SHUFFLE_LOCAL_BLOCKS_READ);
                f.shuffle_remote_blocks += value(names::SHUFFLE_REMOTE_BLOCKS_READ);
                f.shuffle_fetch_wait_nanos += value(names::SHUFFLE_FETCH_WAIT_NANOS);
            } else {
                f.shuffle_local_bytes += value(names::OUTPUT_BYTES);
            }
        }
    }
    f
}

/// Spark's `Task Metrics` of `task`: what qprof measures in its slots, 0 in the JVM's.
pub(super) fn task_metrics(task: &TaskProfile, f: &TaskFigures, result_task: bool) -> MetricsLog {
    let v = |name: &str| task.value(name).unwrap_or(0);
    let (shuffle_bytes, shuffle_rows) = if result_task {
        (0, 0)
    } else {
        (f.output_bytes, f.output_rows)
    };
    MetricsLog {
        executor_run_time: v(names::WALL_NANOS) / 1_000_000,
        executor_cpu_time: v(names::CPU_NANOS),
        peak_execution_memory: v(names::PEAK_MEMORY_BYTES),
        peak_off_heap_execution_memory: v(names::PEAK_MEMORY_BYTES),
        result_size: if result_task { f.output_bytes } else { 0 },
        disk_bytes_spilled: f.spilled_bytes,
        shuffle_read: ShuffleReadLog {
            local_bytes_read: f.shuffle_local_bytes,
            remote_bytes_read: f.shuffle_remote_bytes,
            local_blocks_fetched: f.shuffle_local_blocks,
            remote_blocks_fetched: f.shuffle_remote_blocks,
            // Spark's fetch wait is in milliseconds
            fetch_wait_time: f.shuffle_fetch_wait_nanos / 1_000_000,
            records_read: f.shuffle_read_rows,
            ..ShuffleReadLog::default()
        },
        shuffle_write: ShuffleWriteLog {
            bytes_written: shuffle_bytes,
            records_written: shuffle_rows,
            write_time: if result_task {
                0
            } else {
                f.shuffle_write_nanos
            },
        },
        input: InputLog {
            bytes_read: f.input_bytes,
            records_read: f.input_rows,
        },
        ..MetricsLog::default()
    }
}

/// Spark's `Task End Reason` of a task that ran on `executor`: success; an
/// `ExecutorLostFailure` or a `FetchFailed` for errors that start with those names; else
/// an `ExceptionFailure` carrying the error (its class is DataFusion's error kind, the
/// text before the first colon).
pub(super) fn end_reason(error: Option<&str>, executor: &str) -> Value {
    let Some(error) = error else {
        return json!({"Reason": "Success"});
    };
    if let Some(rest) = error.strip_prefix(EXECUTOR_LOST_FAILURE) {
        return json!({
            "Reason": "ExecutorLostFailure",
            "Executor ID": executor,
            "Exit Caused By App": false,
            "Loss Reason": rest.trim_start_matches(':').trim(),
        });
    }
    if let Some(fetch) = error
        .strip_prefix(FETCH_FAILED)
        .and_then(parse_fetch_failure)
    {
        return json!({
            "Reason": "FetchFailed",
            "Block Manager Address": {
                "Executor ID": fetch.executor,
                "Host": "",
                "Port": 0,
            },
            "Shuffle ID": fetch.stage,
            "Map ID": fetch.partition,
            "Map Index": fetch.partition,
            "Reduce ID": -1,
            "Message": fetch.message,
        });
    }
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

/// A `FetchFailed` error's parts.
struct FetchFailure<'a> {
    executor: &'a str,
    stage: i64,
    partition: i64,
    message: &'a str,
}

/// `: executor ID stage S partition P: message`, the text after [`FETCH_FAILED`].
fn parse_fetch_failure(rest: &str) -> Option<FetchFailure<'_>> {
    let rest = rest.strip_prefix(": executor ")?;
    let (head, message) = rest.split_once(": ").unwrap_or((rest, ""));
    let mut words = head.split(' ');
    let executor = words.next()?;
    let stage = (words.next()? == "stage")
        .then(|| words.next())??
        .parse()
        .ok()?;
    let partition = (words.next()? == "partition")
        .then(|| words.next())??
        .parse()
        .ok()?;
    Some(FetchFailure {
        executor,
        stage,
        partition,
        message,
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
    /// The `Accumulables` list as JSON text, written after the other members (see
    /// [`TaskInfo::write_json`]).
    #[serde(skip)]
    accumulables: String,
}

impl TaskInfo {
    /// Writes the task info as a JSON object: its members serialized, then its
    /// accumulables as they were written for the task.
    pub(super) fn write_json(&self, out: &mut Vec<u8>) -> serde_json::Result<()> {
        serde_json::to_writer(&mut *out, self)?;
        // a struct serializes as an object: drop its closing brace to add the last member
        debug_assert_eq!(out.last(), Some(&b'}'));
        out.pop();
        out.extend_from_slice(br#","Accumulables":"#);
        out.extend_from_slice(self.accumulables.as_bytes());
        out.push(b'}');
        Ok(())
    }

    /// The task info as a JSON value.
    pub(super) fn to_value(&self) -> serde_json::Result<Value> {
        let mut json = Vec::new();
        self.write_json(&mut json)?;
        serde_json::from_slice(&json)
    }
}

/// The SQL metric updates of a stage's tasks, as each task's `Accumulables` list: one
/// entry per operator metric with a value for the task, in the stage's operator order. What
/// every task of the stage writes alike (a metric's id and escaped name) is written once.
pub(super) struct StageAccumulables {
    /// Each metric's entry up to its update: `{"ID":…,"Name":"…","Update":"`.
    heads: Vec<String>,
    /// Each task's (metric, value) pairs, in the metrics' order.
    by_task: HashMap<u64, Vec<(usize, i64)>>,
}

/// What follows a metric's value in its entry: Spark's flags of a SQL metric.
const ACCUMULABLE_TAIL: &str = r#"","Internal":true,"Count Failed Values":true,"Metadata":"sql"}"#;

impl StageAccumulables {
    /// The updates of `stage`'s tasks, whose metric `m` of node `n` has the id `id(n, m)`.
    pub(super) fn new(
        nodes: &NodeIndex<'_>,
        stage: &StageProfile,
        id: impl Fn(usize, &str) -> i64,
    ) -> StageAccumulables {
        let mut heads = Vec::new();
        let mut by_task: HashMap<u64, Vec<(usize, i64)>> = HashMap::new();
        for node_id in &stage.node_ids {
            let Some(node) = nodes.get(node_id) else {
                continue;
            };
            for m in &node.metrics {
                let metric = heads.len();
                let mut head = String::from(r#"{"ID":"#);
                head.push_str(itoa::Buffer::new().format(id(node.id, &m.name)));
                head.push_str(r#","Name":"#);
                // a String always serializes
                head.push_str(&serde_json::to_string(&m.display_name).unwrap_or_default());
                head.push_str(r#","Update":""#);
                heads.push(head);
                for v in &m.tasks {
                    let Some(task) = v.task else { continue };
                    let values = by_task.entry(task.task_id).or_default();
                    // a task's first value of a metric is its update
                    if values.last().is_none_or(|(last, _)| *last != metric) {
                        values.push((metric, v.value));
                    }
                }
            }
        }
        StageAccumulables { heads, by_task }
    }

    /// The `Accumulables` of the task `task_id`: each value is both the update and the
    /// value, written as a string, as Spark writes a SQL metric's.
    pub(super) fn of_task(&self, task_id: u64) -> String {
        let values = self.by_task.get(&task_id).map_or(&[][..], Vec::as_slice);
        let mut json = String::with_capacity(
            2 + values
                .iter()
                .map(|(m, _)| self.heads[*m].len() + ACCUMULABLE_TAIL.len() + 40)
                .sum::<usize>(),
        );
        json.push('[');
        let mut number = itoa::Buffer::new();
        for (i, (metric, value)) in values.iter().enumerate() {
            if i > 0 {
                json.push(',');
            }
            let value = number.format(*value);
            json.push_str(&self.heads[*metric]);
            json.push_str(value);
            json.push_str(r#"","Value":""#);
            json.push_str(value);
            json.push_str(ACCUMULABLE_TAIL);
        }
        json.push(']');
        json
    }
}

/// An empty `Accumulables` list, as a task's start has.
pub(super) fn no_accumulables() -> String {
    "[]".to_string()
}

/// Spark's `Task Info` of `task`, run on its executor (or the driver on `host`).
pub(super) fn task_info(
    task: &TaskProfile,
    host: &str,
    finish: i64,
    failed: bool,
    accumulables: String,
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
#[derive(Debug)]
pub(crate) struct TaskEnd {
    pub(super) event: &'static str,
    pub(super) stage_id: u32,
    pub(super) stage_attempt_id: u32,
    pub(super) task_type: &'static str,
    pub(super) reason: Value,
    pub(super) info: TaskInfo,
    pub(super) executor_metrics: Value,
    pub(super) metrics: MetricsLog,
}

impl TaskEnd {
    /// Writes the event as one JSON object, with Spark's keys in Spark's order.
    pub(super) fn write_json(&self, out: &mut Vec<u8>) -> serde_json::Result<()> {
        /// Writes `"key":value` after `{` (the first member) or `,`.
        fn member(
            out: &mut Vec<u8>,
            first: bool,
            key: &str,
            value: &impl Serialize,
        ) -> serde_json::Result<()> {
            out.push(if first { b'{' } else { b',' });
            serde_json::to_writer(&mut *out, key)?;
            out.push(b':');
            serde_json::to_writer(&mut *out, value)
        }
        member(out, true, "Event", &self.event)?;
        member(out, false, "Stage ID", &self.stage_id)?;
        member(out, false, "Stage Attempt ID", &self.stage_attempt_id)?;
        member(out, false, "Task Type", &self.task_type)?;
        member(out, false, "Task End Reason", &self.reason)?;
        out.extend_from_slice(br#","Task Info":"#);
        self.info.write_json(out)?;
        member(out, false, "Task Executor Metrics", &self.executor_metrics)?;
        member(out, false, "Task Metrics", &self.metrics)?;
        out.push(b'}');
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::task_event::EndReason;

    /// What Spark's history server shows for a task that ended for `reason`, written
    /// by qprof.
    fn shown(error: &str, executor: &str) -> (String, String) {
        let reason = end_reason(Some(error), executor);
        let text = serde_json::to_string(&reason).unwrap();
        let parsed: EndReason<'_> = serde_json::from_str(&text).unwrap();
        (parsed.reason.to_string(), parsed.error_text())
    }

    #[test]
    fn lost_executors_and_failed_fetches_end_tasks_as_spark_names_them() {
        let (name, text) = shown(
            "ExecutorLostFailure: executor exec-2 lost while running the task (lost: stopped answering)",
            "exec-2",
        );
        assert_eq!(name, "ExecutorLostFailure");
        assert_eq!(
            text,
            "ExecutorLostFailure (executor exec-2 exited unrelated to the running tasks) \
             Reason: executor exec-2 lost while running the task (lost: stopped answering)"
        );
        let (name, text) = shown(
            "FetchFailed: executor exec-2 stage 3 partition 1: connection refused",
            "exec-1",
        );
        assert_eq!(name, "FetchFailed");
        assert_eq!(
            text,
            "FetchFailed(BlockManagerId(exec-2, , 0, None), shuffleId=3, mapIndex=1, mapId=1, \
             reduceId=-1, message=\nconnection refused\n)"
        );
        // a fetch failure qprof cannot take apart is an exception like any other
        let (name, text) = shown("FetchFailed: somewhere", "exec-1");
        assert_eq!(name, "ExceptionFailure");
        assert_eq!(text, "FetchFailed: somewhere");
        let (name, text) = shown("Arrow error: divide by zero", "exec-1");
        assert_eq!(name, "ExceptionFailure");
        assert_eq!(text, "Arrow error: divide by zero");
    }
}
