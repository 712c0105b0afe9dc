//! Typed, borrowing decoders of the task events, which make up most of a log: only the
//! fields the state keeps are decoded, everything else is skipped without allocating.

use std::borrow::Cow;
use std::fmt;

use serde::de::{self, Deserializer, MapAccess, Visitor};
use serde::ser::SerializeSeq;
use serde::{Deserialize, Serialize};

use crate::spark::EXECUTOR_METRIC_NAMES;
use crate::state::{ExecutorPeaks, TaskMetrics};

/// `SparkListenerTaskStart` / `SparkListenerTaskEnd`.
#[derive(Debug, Deserialize)]
pub(crate) struct TaskEvent<'a> {
    #[serde(rename = "Stage ID")]
    pub stage_id: i64,
    #[serde(rename = "Stage Attempt ID", default)]
    pub stage_attempt: i64,
    #[serde(rename = "Task End Reason", default, borrow)]
    pub reason: Option<EndReason<'a>>,
    #[serde(rename = "Task Info", borrow)]
    pub info: TaskInfo<'a>,
    #[serde(rename = "Task Executor Metrics", default)]
    pub executor_metrics: Option<Peaks>,
    #[serde(rename = "Task Metrics", default)]
    pub metrics: Option<MetricsLog>,
}

#[derive(Debug, Deserialize)]
pub(crate) struct EndReason<'a> {
    #[serde(rename = "Reason", borrow)]
    pub reason: Cow<'a, str>,
    #[serde(rename = "Description", default, borrow)]
    pub description: Option<Cow<'a, str>>,
    #[serde(rename = "Full Stack Trace", default, borrow)]
    pub full_stack_trace: Option<Cow<'a, str>>,
    /// `ExecutorLostFailure`'s executor.
    #[serde(rename = "Executor ID", default, borrow)]
    pub executor_id: Option<Cow<'a, str>>,
    #[serde(rename = "Exit Caused By App", default)]
    pub exit_caused_by_app: bool,
    #[serde(rename = "Loss Reason", default, borrow)]
    pub loss_reason: Option<Cow<'a, str>>,
    /// `FetchFailed`'s parts.
    #[serde(rename = "Block Manager Address", default, borrow)]
    pub block_manager: Option<BlockManagerAddress<'a>>,
    #[serde(rename = "Shuffle ID", default)]
    pub shuffle_id: i64,
    #[serde(rename = "Map ID", default)]
    pub map_id: i64,
    #[serde(rename = "Map Index", default)]
    pub map_index: i64,
    #[serde(rename = "Reduce ID", default)]
    pub reduce_id: i64,
    #[serde(rename = "Message", default, borrow)]
    pub message: Option<Cow<'a, str>>,
}

/// Where a `FetchFailed` task fetched from.
#[derive(Debug, Deserialize)]
pub(crate) struct BlockManagerAddress<'a> {
    #[serde(rename = "Executor ID", default, borrow)]
    pub executor_id: Cow<'a, str>,
    #[serde(rename = "Host", default, borrow)]
    pub host: Cow<'a, str>,
    #[serde(rename = "Port", default)]
    pub port: i64,
}

impl EndReason<'_> {
    /// The reason as Spark's history server shows a failed task's error (its
    /// `TaskEndReason.toErrorString`).
    pub(crate) fn error_text(&self) -> String {
        match self.reason.as_ref() {
            "ExecutorLostFailure" => {
                let exit = if self.exit_caused_by_app {
                    "caused by one of the running tasks"
                } else {
                    "unrelated to the running tasks"
                };
                let reason = self
                    .loss_reason
                    .as_deref()
                    .map(|r| format!(" Reason: {r}"))
                    .unwrap_or_default();
                format!(
                    "ExecutorLostFailure (executor {} exited {exit}){reason}",
                    self.executor_id.as_deref().unwrap_or_default()
                )
            }
            "FetchFailed" => {
                let address = self.block_manager.as_ref().map_or_else(
                    || "null".to_string(),
                    |b| {
                        format!(
                            "BlockManagerId({}, {}, {}, None)",
                            b.executor_id, b.host, b.port
                        )
                    },
                );
                format!(
                    "FetchFailed({address}, shuffleId={}, mapIndex={}, mapId={}, reduceId={}, message=\n{}\n)",
                    self.shuffle_id,
                    self.map_index,
                    self.map_id,
                    self.reduce_id,
                    self.message.as_deref().unwrap_or_default()
                )
            }
            other => self
                .full_stack_trace
                .as_deref()
                .or(self.description.as_deref())
                .unwrap_or(other)
                .to_string(),
        }
    }
}

#[derive(Debug, Deserialize)]
pub(crate) struct TaskInfo<'a> {
    #[serde(rename = "Task ID")]
    pub task_id: i64,
    #[serde(rename = "Index", default)]
    pub index: i64,
    #[serde(rename = "Attempt", default)]
    pub attempt: i64,
    #[serde(rename = "Partition ID", default = "minus_one")]
    pub partition: i64,
    #[serde(rename = "Launch Time", default)]
    pub launch_time: i64,
    #[serde(rename = "Executor ID", default, borrow)]
    pub executor_id: Cow<'a, str>,
    #[serde(rename = "Host", default, borrow)]
    pub host: Cow<'a, str>,
    #[serde(rename = "Locality", default, borrow)]
    pub locality: Cow<'a, str>,
    #[serde(rename = "Speculative", default)]
    pub speculative: bool,
    #[serde(rename = "Getting Result Time", default)]
    pub getting_result_time: i64,
    #[serde(rename = "Finish Time", default)]
    pub finish_time: i64,
    #[serde(rename = "Failed", default)]
    pub failed: bool,
    #[serde(rename = "Killed", default)]
    pub killed: bool,
    #[serde(rename = "Accumulables", default)]
    pub accumulables: Vec<Accumulable>,
}

fn minus_one() -> i64 {
    -1
}

#[derive(Debug, Deserialize)]
pub(crate) struct Accumulable {
    #[serde(rename = "ID")]
    pub id: i64,
    #[serde(rename = "Update", default)]
    pub update: Option<LooseI64>,
}

/// An integer logged as a number or as a string of one (SQL metric updates are strings).
#[derive(Debug, Clone, Copy)]
pub(crate) struct LooseI64(pub Option<i64>);

impl<'de> Deserialize<'de> for LooseI64 {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'v> Visitor<'v> for V {
            type Value = LooseI64;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an integer or a string holding one")
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<LooseI64, E> {
                Ok(LooseI64(Some(v)))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<LooseI64, E> {
                Ok(LooseI64(i64::try_from(v).ok()))
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<LooseI64, E> {
                Ok(LooseI64(Some(v as i64)))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<LooseI64, E> {
                Ok(LooseI64(v.trim().parse().ok()))
            }
            fn visit_bool<E: de::Error>(self, _: bool) -> Result<LooseI64, E> {
                Ok(LooseI64(None))
            }
            fn visit_unit<E: de::Error>(self) -> Result<LooseI64, E> {
                Ok(LooseI64(None))
            }
            fn visit_seq<A: de::SeqAccess<'v>>(self, mut seq: A) -> Result<LooseI64, A::Error> {
                while seq.next_element::<de::IgnoredAny>()?.is_some() {}
                Ok(LooseI64(None))
            }
            fn visit_map<A: MapAccess<'v>>(self, mut map: A) -> Result<LooseI64, A::Error> {
                while map
                    .next_entry::<de::IgnoredAny, de::IgnoredAny>()?
                    .is_some()
                {}
                Ok(LooseI64(None))
            }
        }
        d.deserialize_any(V)
    }
}

/// Executor metrics as a map of Spark's names to values; unknown names are skipped.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Peaks(pub ExecutorPeaks);

impl<'de> Deserialize<'de> for Peaks {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Peaks;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a map of executor metric names to integers")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Peaks, A::Error> {
                let mut peaks = [0; 23];
                while let Some(key) = map.next_key::<Cow<'de, str>>()? {
                    let value: LooseI64 = map.next_value()?;
                    if let Some(i) = EXECUTOR_METRIC_NAMES.iter().position(|n| *n == key) {
                        peaks[i] = value.0.unwrap_or(0);
                    }
                }
                Ok(Peaks(peaks))
            }
        }
        d.deserialize_map(V)
    }
}

/// Spark's `Task Metrics` of a task, as a log carries them: read from Spark's logs and
/// qprof's, written into qprof's (Spark's order is the fields' order).
#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(default)]
pub(crate) struct MetricsLog {
    #[serde(rename = "Executor Deserialize Time")]
    pub(crate) executor_deserialize_time: i64,
    #[serde(rename = "Executor Deserialize CPU Time")]
    pub(crate) executor_deserialize_cpu_time: i64,
    #[serde(rename = "Executor Run Time")]
    pub(crate) executor_run_time: i64,
    #[serde(rename = "Executor CPU Time")]
    pub(crate) executor_cpu_time: i64,
    #[serde(rename = "Peak Execution Memory")]
    pub(crate) peak_execution_memory: i64,
    #[serde(rename = "Peak On Heap Execution Memory")]
    pub(crate) peak_on_heap_execution_memory: i64,
    #[serde(rename = "Peak Off Heap Execution Memory")]
    pub(crate) peak_off_heap_execution_memory: i64,
    #[serde(rename = "Result Size")]
    pub(crate) result_size: i64,
    #[serde(rename = "JVM GC Time")]
    pub(crate) jvm_gc_time: i64,
    #[serde(rename = "Result Serialization Time")]
    pub(crate) result_serialization_time: i64,
    #[serde(rename = "Memory Bytes Spilled")]
    pub(crate) memory_bytes_spilled: i64,
    #[serde(rename = "Disk Bytes Spilled")]
    pub(crate) disk_bytes_spilled: i64,
    #[serde(rename = "Shuffle Read Metrics")]
    pub(crate) shuffle_read: ShuffleReadLog,
    #[serde(rename = "Shuffle Write Metrics")]
    pub(crate) shuffle_write: ShuffleWriteLog,
    #[serde(rename = "Input Metrics")]
    pub(crate) input: InputLog,
    #[serde(rename = "Output Metrics")]
    pub(crate) output: OutputLog,
    #[serde(rename = "Updated Blocks")]
    pub(crate) updated_blocks: NoBlocks,
}

#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(default)]
pub(crate) struct ShuffleReadLog {
    #[serde(rename = "Remote Blocks Fetched")]
    pub(crate) remote_blocks_fetched: i64,
    #[serde(rename = "Local Blocks Fetched")]
    pub(crate) local_blocks_fetched: i64,
    #[serde(rename = "Fetch Wait Time")]
    pub(crate) fetch_wait_time: i64,
    #[serde(rename = "Remote Bytes Read")]
    pub(crate) remote_bytes_read: i64,
    #[serde(rename = "Remote Bytes Read To Disk")]
    pub(crate) remote_bytes_read_to_disk: i64,
    #[serde(rename = "Local Bytes Read")]
    pub(crate) local_bytes_read: i64,
    #[serde(rename = "Total Records Read")]
    pub(crate) records_read: i64,
    #[serde(rename = "Remote Requests Duration")]
    pub(crate) remote_reqs_duration: i64,
    #[serde(rename = "Push Based Shuffle")]
    pub(crate) push: PushLog,
}

#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(default)]
pub(crate) struct PushLog {
    #[serde(rename = "Corrupt Merged Block Chunks")]
    pub(crate) corrupt_merged_block_chunks: i64,
    #[serde(rename = "Merged Fetch Fallback Count")]
    pub(crate) merged_fetch_fallback_count: i64,
    #[serde(rename = "Merged Remote Blocks Fetched")]
    pub(crate) merged_remote_blocks_fetched: i64,
    #[serde(rename = "Merged Local Blocks Fetched")]
    pub(crate) merged_local_blocks_fetched: i64,
    #[serde(rename = "Merged Remote Chunks Fetched")]
    pub(crate) merged_remote_chunks_fetched: i64,
    #[serde(rename = "Merged Local Chunks Fetched")]
    pub(crate) merged_local_chunks_fetched: i64,
    #[serde(rename = "Merged Remote Bytes Read")]
    pub(crate) merged_remote_bytes_read: i64,
    #[serde(rename = "Merged Local Bytes Read")]
    pub(crate) merged_local_bytes_read: i64,
    #[serde(rename = "Merged Remote Requests Duration")]
    pub(crate) merged_remote_reqs_duration: i64,
}

#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(default)]
pub(crate) struct ShuffleWriteLog {
    #[serde(rename = "Shuffle Bytes Written")]
    pub(crate) bytes_written: i64,
    #[serde(rename = "Shuffle Write Time")]
    pub(crate) write_time: i64,
    #[serde(rename = "Shuffle Records Written")]
    pub(crate) records_written: i64,
}

#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(default)]
pub(crate) struct InputLog {
    #[serde(rename = "Bytes Read")]
    pub(crate) bytes_read: i64,
    #[serde(rename = "Records Read")]
    pub(crate) records_read: i64,
}

#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(default)]
pub(crate) struct OutputLog {
    #[serde(rename = "Bytes Written")]
    pub(crate) bytes_written: i64,
    #[serde(rename = "Records Written")]
    pub(crate) records_written: i64,
}

/// Spark's `Updated Blocks` of a task: qprof has no block manager, so it writes none and
/// reads past Spark's.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct NoBlocks;

impl Serialize for NoBlocks {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_seq(Some(0))?.end()
    }
}

impl<'de> Deserialize<'de> for NoBlocks {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        de::IgnoredAny::deserialize(deserializer).map(|_| NoBlocks)
    }
}

impl From<&MetricsLog> for TaskMetrics {
    fn from(m: &MetricsLog) -> TaskMetrics {
        let (sr, p) = (&m.shuffle_read, &m.shuffle_read.push);
        TaskMetrics {
            executor_deserialize_time: m.executor_deserialize_time,
            executor_deserialize_cpu_time: m.executor_deserialize_cpu_time,
            executor_run_time: m.executor_run_time,
            executor_cpu_time: m.executor_cpu_time,
            result_size: m.result_size,
            jvm_gc_time: m.jvm_gc_time,
            result_serialization_time: m.result_serialization_time,
            memory_bytes_spilled: m.memory_bytes_spilled,
            disk_bytes_spilled: m.disk_bytes_spilled,
            peak_execution_memory: m.peak_execution_memory,
            input_bytes: m.input.bytes_read,
            input_records: m.input.records_read,
            output_bytes: m.output.bytes_written,
            output_records: m.output.records_written,
            remote_blocks_fetched: sr.remote_blocks_fetched,
            local_blocks_fetched: sr.local_blocks_fetched,
            fetch_wait_time: sr.fetch_wait_time,
            remote_bytes_read: sr.remote_bytes_read,
            remote_bytes_read_to_disk: sr.remote_bytes_read_to_disk,
            local_bytes_read: sr.local_bytes_read,
            records_read: sr.records_read,
            remote_reqs_duration: sr.remote_reqs_duration,
            push: [
                p.corrupt_merged_block_chunks,
                p.merged_fetch_fallback_count,
                p.merged_remote_blocks_fetched,
                p.merged_local_blocks_fetched,
                p.merged_remote_chunks_fetched,
                p.merged_local_chunks_fetched,
                p.merged_remote_bytes_read,
                p.merged_local_bytes_read,
                p.merged_remote_reqs_duration,
            ],
            bytes_written: m.shuffle_write.bytes_written,
            write_time: m.shuffle_write.write_time,
            records_written: m.shuffle_write.records_written,
        }
    }
}
