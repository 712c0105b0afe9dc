//! Tasks: their metrics and data, quantile summaries, `/taskSummary`, `/taskList`.

use serde_json::{Map, Value, json};

use super::stages::{TASK_STATUSES, find_attempt};
use super::{RestError, RestResult, parse_statuses, put_opt};
use crate::spark::format_date;
use crate::state::{AppState, Stage, Task, TaskMetrics, TaskStatus};

/// Spark's push-based shuffle read metrics, in the order `TaskMetrics::push` holds them.
pub(super) const PUSH_READ_NAMES: [&str; 9] = [
    "corruptMergedBlockChunks",
    "mergedFetchFallbackCount",
    "remoteMergedBlocksFetched",
    "localMergedBlocksFetched",
    "remoteMergedChunksFetched",
    "localMergedChunksFetched",
    "remoteMergedBytesRead",
    "localMergedBytesRead",
    "remoteMergedReqsDuration",
];

fn task_metrics_json(m: &TaskMetrics) -> Value {
    let push: Map<String, Value> = PUSH_READ_NAMES
        .iter()
        .zip(m.push)
        .map(|(k, v)| (k.to_string(), json!(v)))
        .collect();
    json!({
        "executorDeserializeTime": m.executor_deserialize_time,
        "executorDeserializeCpuTime": m.executor_deserialize_cpu_time,
        "executorRunTime": m.executor_run_time,
        "executorCpuTime": m.executor_cpu_time,
        "resultSize": m.result_size,
        "jvmGcTime": m.jvm_gc_time,
        "resultSerializationTime": m.result_serialization_time,
        "memoryBytesSpilled": m.memory_bytes_spilled,
        "diskBytesSpilled": m.disk_bytes_spilled,
        "peakExecutionMemory": m.peak_execution_memory,
        "inputMetrics": { "bytesRead": m.input_bytes, "recordsRead": m.input_records },
        "outputMetrics": { "bytesWritten": m.output_bytes, "recordsWritten": m.output_records },
        "shuffleReadMetrics": {
            "remoteBlocksFetched": m.remote_blocks_fetched,
            "localBlocksFetched": m.local_blocks_fetched,
            "fetchWaitTime": m.fetch_wait_time,
            "remoteBytesRead": m.remote_bytes_read,
            "remoteBytesReadToDisk": m.remote_bytes_read_to_disk,
            "localBytesRead": m.local_bytes_read,
            "recordsRead": m.records_read,
            "remoteReqsDuration": m.remote_reqs_duration,
            "shufflePushReadMetrics": push,
        },
        "shuffleWriteMetrics": {
            "bytesWritten": m.bytes_written,
            "writeTime": m.write_time,
            "recordsWritten": m.records_written,
        },
    })
}

pub(super) fn task_data(t: &Task) -> Value {
    let mut o = Map::new();
    o.insert("taskId".into(), json!(t.id));
    o.insert("index".into(), json!(t.index));
    o.insert("attempt".into(), json!(t.attempt));
    o.insert("partitionId".into(), json!(t.partition));
    o.insert("launchTime".into(), json!(format_date(t.launch_time)));
    if t.getting_result_time > 0 {
        o.insert(
            "resultFetchStart".into(),
            json!(format_date(t.getting_result_time)),
        );
    }
    // Spark leaves out durations that are not positive
    put_opt(
        &mut o,
        "duration",
        t.duration().filter(|d| *d > 0).map(Value::from),
    );
    o.insert("executorId".into(), json!(t.executor_id));
    o.insert("host".into(), json!(t.host));
    o.insert("status".into(), json!(t.status.as_str()));
    o.insert("taskLocality".into(), json!(t.locality));
    o.insert("speculative".into(), json!(t.speculative));
    o.insert("accumulatorUpdates".into(), json!([]));
    put_opt(
        &mut o,
        "errorMessage",
        t.error_message.clone().map(Value::from),
    );
    put_opt(
        &mut o,
        "taskMetrics",
        t.metrics.as_ref().map(task_metrics_json),
    );
    o.insert("executorLogs".into(), json!({}));
    o.insert("schedulerDelay".into(), json!(t.scheduler_delay()));
    o.insert(
        "gettingResultTime".into(),
        json!(t.getting_result_duration()),
    );
    Value::Object(o)
}

/// Spark's quantile of sorted values: the element at `min(floor(q·n), n−1)`.
pub(super) fn quantile_values(mut values: Vec<i64>, quantiles: &[f64]) -> Value {
    values.sort_unstable();
    let n = values.len();
    Value::Array(
        quantiles
            .iter()
            .map(|q| {
                let idx = ((q * n as f64) as usize).min(n.saturating_sub(1));
                json!(values.get(idx).copied().unwrap_or(0) as f64)
            })
            .collect(),
    )
}

pub(super) fn task_distributions(stage: &Stage, quantiles: &[f64]) -> Option<Value> {
    let ok: Vec<(&Task, &TaskMetrics)> = stage
        .tasks
        .values()
        .map(|t| &**t)
        .filter(|t| t.status == TaskStatus::Success)
        .filter_map(|t| t.metrics.as_ref().map(|m| (t, m)))
        .collect();
    if ok.is_empty() {
        return None;
    }
    let d = |f: &dyn Fn(&Task, &TaskMetrics) -> i64| {
        quantile_values(ok.iter().map(|(t, m)| f(t, m)).collect(), quantiles)
    };
    let push: Map<String, Value> = PUSH_READ_NAMES
        .iter()
        .enumerate()
        .map(|(i, k)| (k.to_string(), d(&|_, m| m.push[i])))
        .collect();
    Some(json!({
        "quantiles": quantiles,
        "duration": d(&|t, _| t.duration().unwrap_or(0)),
        "executorDeserializeTime": d(&|_, m| m.executor_deserialize_time),
        "executorDeserializeCpuTime": d(&|_, m| m.executor_deserialize_cpu_time),
        "executorRunTime": d(&|_, m| m.executor_run_time),
        "executorCpuTime": d(&|_, m| m.executor_cpu_time),
        "resultSize": d(&|_, m| m.result_size),
        "jvmGcTime": d(&|_, m| m.jvm_gc_time),
        "resultSerializationTime": d(&|_, m| m.result_serialization_time),
        "gettingResultTime": d(&|t, _| t.getting_result_duration()),
        "schedulerDelay": d(&|t, _| t.scheduler_delay()),
        "peakExecutionMemory": d(&|_, m| m.peak_execution_memory),
        "memoryBytesSpilled": d(&|_, m| m.memory_bytes_spilled),
        "diskBytesSpilled": d(&|_, m| m.disk_bytes_spilled),
        "inputMetrics": {
            "bytesRead": d(&|_, m| m.input_bytes),
            "recordsRead": d(&|_, m| m.input_records),
        },
        "outputMetrics": {
            "bytesWritten": d(&|_, m| m.output_bytes),
            "recordsWritten": d(&|_, m| m.output_records),
        },
        "shuffleReadMetrics": {
            "readBytes": d(&|_, m| m.shuffle_read_bytes()),
            "readRecords": d(&|_, m| m.records_read),
            "remoteBlocksFetched": d(&|_, m| m.remote_blocks_fetched),
            "localBlocksFetched": d(&|_, m| m.local_blocks_fetched),
            "fetchWaitTime": d(&|_, m| m.fetch_wait_time),
            "remoteBytesRead": d(&|_, m| m.remote_bytes_read),
            "remoteBytesReadToDisk": d(&|_, m| m.remote_bytes_read_to_disk),
            "totalBlocksFetched": d(&|_, m| m.local_blocks_fetched + m.remote_blocks_fetched),
            "remoteReqsDuration": d(&|_, m| m.remote_reqs_duration),
            "shufflePushReadMetricsDist": push,
        },
        "shuffleWriteMetrics": {
            "writeBytes": d(&|_, m| m.bytes_written),
            "writeRecords": d(&|_, m| m.records_written),
            "writeTime": d(&|_, m| m.write_time),
        },
    }))
}

/// `/stages/{id}/{attempt}/taskSummary`.
pub fn task_summary(state: &AppState, id: i64, attempt: i64, quantiles: &[f64]) -> RestResult {
    let stage = find_attempt(state, id, attempt)?;
    let q = if quantiles.is_empty() {
        vec![0.05, 0.25, 0.5, 0.75, 0.95]
    } else {
        quantiles.to_vec()
    };
    task_distributions(stage, &q).ok_or_else(|| {
        RestError::NotFound(format!(
            "No tasks reported metrics for {id} / {attempt} yet."
        ))
    })
}

/// Sort orders of `/taskList`.
pub fn task_list(
    state: &AppState,
    id: i64,
    attempt: i64,
    offset: usize,
    length: usize,
    sort_by: Option<&str>,
    statuses: &[String],
) -> RestResult {
    let stage = find_attempt(state, id, attempt)?;
    let statuses = parse_statuses(statuses, &TASK_STATUSES)?;
    let mut tasks: Vec<&Task> = stage
        .tasks
        .values()
        .map(|t| &**t)
        .filter(|t| statuses.is_empty() || statuses.iter().any(|s| s == t.status.as_str()))
        .collect();
    let run_time = |t: &Task| t.metrics.map(|m| m.executor_run_time).unwrap_or(-1);
    match sort_by.unwrap_or("ID") {
        "ID" => tasks.sort_by_key(|t| t.id),
        "runtime" => tasks.sort_by_key(|t| (run_time(t), t.id)),
        // Spark reverses its run-time index, whose ties are in task order: the later
        // task first
        "-runtime" => tasks.sort_by_key(|t| std::cmp::Reverse((run_time(t), t.id))),
        other => {
            return Err(RestError::BadRequest(format!(
                "unknown sortBy '{other}' (expected ID, runtime or -runtime)"
            )));
        }
    }
    Ok(Value::Array(
        tasks
            .into_iter()
            .skip(offset)
            .take(length)
            .map(task_data)
            .collect(),
    ))
}
