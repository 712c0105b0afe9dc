//! Spark's `/api/v1` JSON shapes, rendered from a replayed [`AppState`]: the same keys,
//! key order, omissions and number types as Spark 4.3's history server.
//!
//! Everything here is a pure function of the state and typed parameters, so the shapes are
//! testable without HTTP; the server only parses requests and routes them here.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use serde_json::{Map, Value, json};

use crate::spark::{EXECUTOR_METRIC_NAMES, SPARK_VERSION, format_date};
use crate::state::{
    AppInfo, AppState, Execution, ExecutorPeaks, Stage, StageStatus, Task, TaskMetrics, TaskStatus,
};

/// A request the state cannot answer: Spark's 404 and 400 cases.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RestError {
    /// The thing asked for does not exist.
    #[error("{0}")]
    NotFound(String),
    /// A parameter is malformed.
    #[error("{0}")]
    BadRequest(String),
}

type RestResult = Result<Value, RestError>;

/// The body of `/api/v1/version`.
pub fn version() -> Value {
    json!({ "spark": SPARK_VERSION })
}

/// What the listing knows about one application attempt besides its events.
#[derive(Debug, Clone)]
pub struct AttemptSource<'a> {
    /// Facts from the log.
    pub info: &'a AppInfo,
    /// Whether the log is complete.
    pub completed: bool,
    /// Last modification of the log, epoch ms.
    pub last_updated: i64,
    /// Where the log was read from (a `file://` URI).
    pub log_source: String,
}

/// One attempt as `ApplicationAttemptInfo`.
pub fn attempt_info(a: &AttemptSource<'_>) -> Value {
    let start = a.info.start_time.unwrap_or(-1);
    let end = if a.completed {
        a.info.end_time.unwrap_or(a.last_updated)
    } else {
        -1
    };
    let mut o = Map::new();
    if let Some(attempt) = &a.info.attempt_id {
        o.insert("attemptId".into(), json!(attempt));
    }
    o.insert("startTime".into(), json!(format_date(start)));
    o.insert("endTime".into(), json!(format_date(end)));
    o.insert("lastUpdated".into(), json!(format_date(a.last_updated)));
    o.insert(
        "duration".into(),
        json!(if a.completed { (end - start).max(0) } else { 0 }),
    );
    o.insert(
        "sparkUser".into(),
        json!(a.info.user.clone().unwrap_or_default()),
    );
    o.insert("completed".into(), json!(a.completed));
    o.insert(
        "appSparkVersion".into(),
        json!(a.info.spark_version.clone().unwrap_or_default()),
    );
    if a.completed
        && let Some(code) = a.info.exit_code
    {
        o.insert("exitCode".into(), json!(code));
    }
    o.insert("logSourceName".into(), json!(a.log_source));
    o.insert("logSourceFullPath".into(), json!(a.log_source));
    o.insert("startTimeEpoch".into(), json!(start));
    o.insert("endTimeEpoch".into(), json!(end));
    o.insert("lastUpdatedEpoch".into(), json!(a.last_updated));
    Value::Object(o)
}

/// One application as `ApplicationInfo`, attempts newest first.
pub fn application_info(id: &str, attempts: &[AttemptSource<'_>]) -> Value {
    let name = attempts
        .iter()
        .find_map(|a| a.info.name.clone())
        .unwrap_or_default();
    json!({
        "id": id,
        "name": name,
        "attempts": attempts.iter().map(attempt_info).collect::<Vec<_>>(),
    })
}

fn opt_date(ms: Option<i64>) -> Option<Value> {
    ms.map(|ms| json!(format_date(ms)))
}

fn put_opt(o: &mut Map<String, Value>, key: &str, v: Option<Value>) {
    if let Some(v) = v {
        o.insert(key.into(), v);
    }
}

/// Task counts of a set of stage attempts.
#[derive(Default)]
struct TaskCounts {
    active: i64,
    completed: i64,
    failed: i64,
    killed: i64,
    completed_indices: BTreeSet<(i64, i64)>,
}

fn count_tasks<'a>(stages: impl Iterator<Item = &'a Stage>) -> TaskCounts {
    let mut c = TaskCounts::default();
    for s in stages {
        for t in s.tasks.values() {
            match t.status {
                TaskStatus::Running => c.active += 1,
                TaskStatus::Success => {
                    c.completed += 1;
                    c.completed_indices.insert((s.id, t.index));
                }
                TaskStatus::Failed => c.failed += 1,
                TaskStatus::Killed => c.killed += 1,
            }
        }
    }
    c
}

fn stage_attempts(state: &AppState, id: i64) -> impl Iterator<Item = &Stage> {
    state
        .stages
        .range((id, i64::MIN)..=(id, i64::MAX))
        .map(|(_, s)| s)
}

fn job_status(succeeded: Option<bool>) -> &'static str {
    match succeeded {
        Some(true) => "SUCCEEDED",
        Some(false) => "FAILED",
        None => "RUNNING",
    }
}

fn job_data(state: &AppState, job: &crate::state::Job) -> Value {
    let stages: Vec<&Stage> = job
        .stage_ids
        .iter()
        .flat_map(|id| stage_attempts(state, *id))
        .collect();
    let counts = count_tasks(stages.iter().copied());
    // a stage counts once, by its latest attempt
    let latest: Vec<&Stage> = job
        .stage_ids
        .iter()
        .filter_map(|id| stage_attempts(state, *id).last())
        .collect();
    let n = |status: StageStatus| latest.iter().filter(|s| s.status == status).count();
    let skipped_tasks: i64 = latest
        .iter()
        .filter(|s| s.status == StageStatus::Skipped)
        .map(|s| s.num_tasks)
        .sum();
    let mut o = Map::new();
    o.insert("jobId".into(), json!(job.id));
    o.insert("name".into(), json!(job.name));
    put_opt(
        &mut o,
        "description",
        job.description.clone().map(Value::from),
    );
    put_opt(&mut o, "submissionTime", opt_date(job.submission_time));
    put_opt(&mut o, "completionTime", opt_date(job.completion_time));
    o.insert("stageIds".into(), json!(job.stage_ids));
    put_opt(&mut o, "jobGroup", job.job_group.clone().map(Value::from));
    o.insert("jobTags".into(), json!(job.job_tags));
    o.insert("status".into(), json!(job_status(job.succeeded)));
    o.insert("numTasks".into(), json!(job.num_tasks));
    o.insert("numActiveTasks".into(), json!(counts.active));
    o.insert("numCompletedTasks".into(), json!(counts.completed));
    o.insert("numSkippedTasks".into(), json!(skipped_tasks));
    o.insert("numFailedTasks".into(), json!(counts.failed));
    o.insert("numKilledTasks".into(), json!(counts.killed));
    o.insert(
        "numCompletedIndices".into(),
        json!(counts.completed_indices.len()),
    );
    o.insert("numActiveStages".into(), json!(n(StageStatus::Active)));
    o.insert("numCompletedStages".into(), json!(n(StageStatus::Complete)));
    o.insert("numSkippedStages".into(), json!(n(StageStatus::Skipped)));
    o.insert("numFailedStages".into(), json!(n(StageStatus::Failed)));
    o.insert("killedTasksSummary".into(), json!({}));
    Value::Object(o)
}

/// Parses status words case-insensitively against the allowed set.
pub fn parse_statuses(values: &[String], allowed: &[&str]) -> Result<Vec<String>, RestError> {
    values
        .iter()
        .map(|v| {
            let up = v.to_ascii_uppercase();
            if allowed.contains(&up.as_str()) {
                Ok(up)
            } else {
                Err(RestError::BadRequest(format!(
                    "unknown status '{v}' (expected one of {})",
                    allowed.join(", ")
                )))
            }
        })
        .collect()
}

/// `/jobs`: jobs newest first, optionally only those with the given statuses.
pub fn jobs(state: &AppState, statuses: &[String]) -> RestResult {
    let statuses = parse_statuses(statuses, &["RUNNING", "SUCCEEDED", "FAILED", "UNKNOWN"])?;
    Ok(Value::Array(
        state
            .jobs
            .values()
            .rev()
            .filter(|j| {
                statuses.is_empty() || statuses.iter().any(|s| s == job_status(j.succeeded))
            })
            .map(|j| job_data(state, j))
            .collect(),
    ))
}

/// `/jobs/{id}`.
pub fn job(state: &AppState, id: i64) -> RestResult {
    state
        .jobs
        .get(&id)
        .map(|j| job_data(state, j))
        .ok_or_else(|| RestError::NotFound(format!("unknown job: {id}")))
}

/// Spark's push-based shuffle read metrics, in the order `TaskMetrics::push` holds them.
const PUSH_READ_NAMES: [&str; 9] = [
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

fn task_data(t: &Task) -> Value {
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

fn peaks_json(p: &ExecutorPeaks) -> Value {
    Value::Object(
        EXECUTOR_METRIC_NAMES
            .iter()
            .zip(p)
            .map(|(k, v)| (k.to_string(), json!(v)))
            .collect(),
    )
}

/// Per-executor totals of one stage attempt (Spark's `ExecutorStageSummary`).
#[derive(Default)]
struct ExecutorStage {
    task_time: i64,
    failed: i64,
    succeeded: i64,
    killed: i64,
    input_bytes: i64,
    input_records: i64,
    output_bytes: i64,
    output_records: i64,
    shuffle_read: i64,
    shuffle_read_records: i64,
    shuffle_write: i64,
    shuffle_write_records: i64,
    memory_spilled: i64,
    disk_spilled: i64,
}

impl ExecutorStage {
    fn fields(&self) -> [(&'static str, i64); 14] {
        [
            ("taskTime", self.task_time),
            ("failedTasks", self.failed),
            ("succeededTasks", self.succeeded),
            ("killedTasks", self.killed),
            ("inputBytes", self.input_bytes),
            ("inputRecords", self.input_records),
            ("outputBytes", self.output_bytes),
            ("outputRecords", self.output_records),
            ("shuffleRead", self.shuffle_read),
            ("shuffleReadRecords", self.shuffle_read_records),
            ("shuffleWrite", self.shuffle_write),
            ("shuffleWriteRecords", self.shuffle_write_records),
            ("memoryBytesSpilled", self.memory_spilled),
            ("diskBytesSpilled", self.disk_spilled),
        ]
    }
}

fn executor_stage_summaries(stage: &Stage) -> BTreeMap<&str, ExecutorStage> {
    let mut out: BTreeMap<&str, ExecutorStage> = BTreeMap::new();
    for t in stage
        .tasks
        .values()
        .filter(|t| t.status != TaskStatus::Running)
    {
        let e = out.entry(t.executor_id.as_str()).or_default();
        e.task_time += t.duration().unwrap_or(0);
        match t.status {
            TaskStatus::Success => e.succeeded += 1,
            TaskStatus::Failed => e.failed += 1,
            TaskStatus::Killed => e.killed += 1,
            TaskStatus::Running => {}
        }
        if let Some(m) = &t.metrics {
            e.input_bytes += m.input_bytes;
            e.input_records += m.input_records;
            e.output_bytes += m.output_bytes;
            e.output_records += m.output_records;
            e.shuffle_read += m.shuffle_read_bytes();
            e.shuffle_read_records += m.records_read;
            e.shuffle_write += m.bytes_written;
            e.shuffle_write_records += m.records_written;
            e.memory_spilled += m.memory_bytes_spilled;
            e.disk_spilled += m.disk_bytes_spilled;
        }
    }
    for id in stage.executor_peaks.keys() {
        out.entry(id.as_str()).or_default();
    }
    out
}

/// Options of the stage endpoints.
#[derive(Debug, Clone, Default)]
pub struct StageOptions {
    /// Include `tasks` and `executorSummary`.
    pub details: bool,
    /// Include task-metric and executor-metric distributions.
    pub with_summaries: bool,
    /// Quantiles of the distributions.
    pub quantiles: Vec<f64>,
    /// Only tasks (and stages having tasks) with these statuses.
    pub task_statuses: Vec<String>,
}

/// Parses a comma-separated quantile list; each must lie in [0, 1].
pub fn parse_quantiles(text: &str) -> Result<Vec<f64>, RestError> {
    text.split(',')
        .map(|q| {
            q.trim()
                .parse::<f64>()
                .ok()
                .filter(|q| (0.0..=1.0).contains(q))
                .ok_or_else(|| {
                    RestError::BadRequest(format!("Bad value for parameter \"quantiles\": {text}"))
                })
        })
        .collect()
}

/// Spark's quantile of sorted values: the element at `min(floor(q·n), n−1)`.
fn quantile_values(mut values: Vec<i64>, quantiles: &[f64]) -> Value {
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

fn task_distributions(stage: &Stage, quantiles: &[f64]) -> Option<Value> {
    let ok: Vec<(&Task, &TaskMetrics)> = stage
        .tasks
        .values()
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

fn executor_distributions(stage: &Stage, quantiles: &[f64]) -> Value {
    let summaries = executor_stage_summaries(stage);
    let mut o = Map::new();
    o.insert("quantiles".into(), json!(quantiles));
    let rows: Vec<[(&str, i64); 14]> = summaries.values().map(ExecutorStage::fields).collect();
    for i in 0..14 {
        let name = ExecutorStage::default().fields()[i].0;
        o.insert(
            name.into(),
            quantile_values(rows.iter().map(|r| r[i].1).collect(), quantiles),
        );
    }
    let peaks: Map<String, Value> = EXECUTOR_METRIC_NAMES
        .iter()
        .enumerate()
        .map(|(i, k)| {
            let values = summaries
                .keys()
                .map(|e| stage.executor_peaks.get(*e).map(|p| p[i]).unwrap_or(0))
                .collect();
            (k.to_string(), quantile_values(values, quantiles))
        })
        .collect();
    o.insert("peakMemoryMetrics".into(), Value::Object(peaks));
    Value::Object(o)
}

fn stage_data(stage: &Stage, opts: &StageOptions) -> Value {
    let tasks: Vec<&Task> = stage.tasks.values().collect();
    let counts = count_tasks(std::iter::once(stage));
    let ended: Vec<&TaskMetrics> = tasks
        .iter()
        .filter(|t| t.status != TaskStatus::Running)
        .filter_map(|t| t.metrics.as_ref())
        .collect();
    let sum = |f: fn(&TaskMetrics) -> i64| ended.iter().map(|m| f(m)).sum::<i64>();
    let mut o = Map::new();
    o.insert("status".into(), json!(stage.status.as_str()));
    o.insert("stageId".into(), json!(stage.id));
    o.insert("attemptId".into(), json!(stage.attempt));
    o.insert("numTasks".into(), json!(stage.num_tasks));
    o.insert("numActiveTasks".into(), json!(counts.active));
    o.insert("numCompleteTasks".into(), json!(counts.completed));
    o.insert("numFailedTasks".into(), json!(counts.failed));
    o.insert("numKilledTasks".into(), json!(counts.killed));
    o.insert(
        "numCompletedIndices".into(),
        json!(counts.completed_indices.len()),
    );
    if stage.status != StageStatus::Skipped {
        put_opt(&mut o, "submissionTime", opt_date(stage.submission_time));
        put_opt(
            &mut o,
            "firstTaskLaunchedTime",
            opt_date(tasks.iter().map(|t| t.launch_time).min()),
        );
        put_opt(&mut o, "completionTime", opt_date(stage.completion_time));
    }
    put_opt(
        &mut o,
        "failureReason",
        stage.failure_reason.clone().map(Value::from),
    );
    let fields: [(&str, i64); 35] = [
        (
            "executorDeserializeTime",
            sum(|m| m.executor_deserialize_time),
        ),
        (
            "executorDeserializeCpuTime",
            sum(|m| m.executor_deserialize_cpu_time),
        ),
        ("executorRunTime", sum(|m| m.executor_run_time)),
        ("executorCpuTime", sum(|m| m.executor_cpu_time)),
        ("resultSize", sum(|m| m.result_size)),
        ("jvmGcTime", sum(|m| m.jvm_gc_time)),
        (
            "resultSerializationTime",
            sum(|m| m.result_serialization_time),
        ),
        ("memoryBytesSpilled", sum(|m| m.memory_bytes_spilled)),
        ("diskBytesSpilled", sum(|m| m.disk_bytes_spilled)),
        // Spark 4 sums task peaks (the stage's worst case if all ran at once)
        ("peakExecutionMemory", sum(|m| m.peak_execution_memory)),
        ("inputBytes", sum(|m| m.input_bytes)),
        ("inputRecords", sum(|m| m.input_records)),
        ("outputBytes", sum(|m| m.output_bytes)),
        ("outputRecords", sum(|m| m.output_records)),
        (
            "shuffleRemoteBlocksFetched",
            sum(|m| m.remote_blocks_fetched),
        ),
        ("shuffleLocalBlocksFetched", sum(|m| m.local_blocks_fetched)),
        ("shuffleFetchWaitTime", sum(|m| m.fetch_wait_time)),
        ("shuffleRemoteBytesRead", sum(|m| m.remote_bytes_read)),
        (
            "shuffleRemoteBytesReadToDisk",
            sum(|m| m.remote_bytes_read_to_disk),
        ),
        ("shuffleLocalBytesRead", sum(|m| m.local_bytes_read)),
        ("shuffleReadBytes", sum(|m| m.shuffle_read_bytes())),
        ("shuffleReadRecords", sum(|m| m.records_read)),
        ("shuffleCorruptMergedBlockChunks", sum(|m| m.push[0])),
        ("shuffleMergedFetchFallbackCount", sum(|m| m.push[1])),
        ("shuffleMergedRemoteBlocksFetched", sum(|m| m.push[2])),
        ("shuffleMergedLocalBlocksFetched", sum(|m| m.push[3])),
        ("shuffleMergedRemoteChunksFetched", sum(|m| m.push[4])),
        ("shuffleMergedLocalChunksFetched", sum(|m| m.push[5])),
        ("shuffleMergedRemoteBytesRead", sum(|m| m.push[6])),
        ("shuffleMergedLocalBytesRead", sum(|m| m.push[7])),
        ("shuffleRemoteReqsDuration", sum(|m| m.remote_reqs_duration)),
        ("shuffleMergedRemoteReqsDuration", sum(|m| m.push[8])),
        ("shuffleWriteBytes", sum(|m| m.bytes_written)),
        ("shuffleWriteTime", sum(|m| m.write_time)),
        ("shuffleWriteRecords", sum(|m| m.records_written)),
    ];
    for (k, v) in fields {
        o.insert(k.into(), json!(v));
    }
    o.insert("name".into(), json!(stage.name));
    put_opt(
        &mut o,
        "description",
        stage.description.clone().map(Value::from),
    );
    o.insert("details".into(), json!(stage.details));
    o.insert("schedulingPool".into(), json!(stage.pool));
    o.insert("rddIds".into(), json!(stage.rdd_ids));
    o.insert(
        "accumulatorUpdates".into(),
        Value::Array(
            stage
                .accumulables
                .iter()
                .map(|(id, name, value)| json!({"id": id, "name": name, "value": value}))
                .collect(),
        ),
    );
    if opts.details {
        let wanted = |t: &&&Task| {
            opts.task_statuses.is_empty()
                || opts.task_statuses.iter().any(|s| s == t.status.as_str())
        };
        let tasks_json: Map<String, Value> = tasks
            .iter()
            .rev()
            .filter(wanted)
            .map(|t| (t.id.to_string(), task_data(t)))
            .collect();
        o.insert("tasks".into(), Value::Object(tasks_json));
        let summaries: Map<String, Value> = executor_stage_summaries(stage)
            .into_iter()
            .map(|(id, e)| {
                let mut s: Map<String, Value> = e
                    .fields()
                    .iter()
                    .map(|(k, v)| (k.to_string(), json!(v)))
                    .collect();
                s.insert("isBlacklistedForStage".into(), json!(false));
                if let Some(p) = stage.executor_peaks.get(id) {
                    s.insert("peakMemoryMetrics".into(), peaks_json(p));
                }
                s.insert("isExcludedForStage".into(), json!(false));
                (id.to_string(), Value::Object(s))
            })
            .collect();
        o.insert("executorSummary".into(), Value::Object(summaries));
    }
    o.insert("killedTasksSummary".into(), json!({}));
    o.insert("resourceProfileId".into(), json!(stage.resource_profile_id));
    if stage.status != StageStatus::Skipped && !stage.executor_peaks.is_empty() {
        let mut peak: Option<ExecutorPeaks> = None;
        for p in stage.executor_peaks.values() {
            match &mut peak {
                Some(acc) => acc.iter_mut().zip(p).for_each(|(a, b)| *a = (*a).max(*b)),
                None => peak = Some(*p),
            }
        }
        put_opt(&mut o, "peakExecutorMetrics", peak.as_ref().map(peaks_json));
    }
    if opts.with_summaries && stage.status != StageStatus::Skipped {
        let q = quantiles_or_default(&opts.quantiles);
        put_opt(
            &mut o,
            "taskMetricsDistributions",
            task_distributions(stage, &q),
        );
        o.insert(
            "executorMetricsDistributions".into(),
            executor_distributions(stage, &q),
        );
    }
    o.insert("isShufflePushEnabled".into(), json!(false));
    o.insert("shuffleMergersCount".into(), json!(0));
    Value::Object(o)
}

fn quantiles_or_default(q: &[f64]) -> Vec<f64> {
    if q.is_empty() {
        vec![0.0, 0.25, 0.5, 0.75, 1.0]
    } else {
        q.to_vec()
    }
}

const STAGE_STATUSES: [&str; 5] = ["ACTIVE", "COMPLETE", "FAILED", "PENDING", "SKIPPED"];
const TASK_STATUSES: [&str; 4] = ["RUNNING", "SUCCESS", "FAILED", "KILLED"];

fn checked_task_statuses(opts: &StageOptions) -> Result<StageOptions, RestError> {
    let mut opts = opts.clone();
    opts.task_statuses = parse_statuses(&opts.task_statuses, &TASK_STATUSES)?;
    Ok(opts)
}

/// `/stages`: every stage attempt, newest stage first.
pub fn stages(state: &AppState, statuses: &[String], opts: &StageOptions) -> RestResult {
    let statuses = parse_statuses(statuses, &STAGE_STATUSES)?;
    let opts = checked_task_statuses(opts)?;
    Ok(Value::Array(
        state
            .stages
            .values()
            .rev()
            .filter(|s| statuses.is_empty() || statuses.iter().any(|w| w == s.status.as_str()))
            .filter(|s| {
                opts.task_statuses.is_empty()
                    || s.tasks
                        .values()
                        .any(|t| opts.task_statuses.iter().any(|w| w == t.status.as_str()))
            })
            .map(|s| stage_data(s, &opts))
            .collect(),
    ))
}

/// `/stages/{id}`: all attempts of one stage.
pub fn stage(state: &AppState, id: i64, opts: &StageOptions) -> RestResult {
    let opts = checked_task_statuses(opts)?;
    let attempts: Vec<Value> = stage_attempts(state, id)
        .map(|s| stage_data(s, &opts))
        .collect();
    if attempts.is_empty() {
        return Err(RestError::NotFound(format!("unknown stage: {id}")));
    }
    Ok(Value::Array(attempts))
}

fn find_attempt(state: &AppState, id: i64, attempt: i64) -> Result<&Stage, RestError> {
    if let Some(s) = state.stages.get(&(id, attempt)) {
        return Ok(s);
    }
    let found: Vec<String> = stage_attempts(state, id)
        .map(|s| s.attempt.to_string())
        .collect();
    if found.is_empty() {
        Err(RestError::NotFound(format!("unknown stage: {id}")))
    } else {
        Err(RestError::NotFound(format!(
            "unknown attempt for stage {id}.  Found attempts: [{}]",
            found.join(", ")
        )))
    }
}

/// `/stages/{id}/{attempt}`.
pub fn stage_attempt(state: &AppState, id: i64, attempt: i64, opts: &StageOptions) -> RestResult {
    let opts = checked_task_statuses(opts)?;
    Ok(stage_data(find_attempt(state, id, attempt)?, &opts))
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
        .filter(|t| statuses.is_empty() || statuses.iter().any(|s| s == t.status.as_str()))
        .collect();
    let run_time = |t: &Task| t.metrics.map(|m| m.executor_run_time).unwrap_or(-1);
    match sort_by.unwrap_or("ID") {
        "ID" => tasks.sort_by_key(|t| t.id),
        "runtime" => tasks.sort_by_key(|t| (run_time(t), t.id)),
        "-runtime" => tasks.sort_by_key(|t| (std::cmp::Reverse(run_time(t)), t.id)),
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

/// `/executors` (active only) or `/allexecutors`.
pub fn executors(state: &AppState, all: bool) -> Value {
    let mut out = Vec::new();
    for e in &state.executors {
        if !all && e.remove_time.is_some() {
            continue;
        }
        let tasks = state
            .stages
            .values()
            .flat_map(|s| s.tasks.values())
            .filter(|t| t.executor_id == e.id);
        let (mut active, mut failed, mut completed, mut duration, mut gc) = (0, 0, 0, 0, 0);
        let (mut input, mut read, mut write) = (0, 0, 0);
        for t in tasks {
            match t.status {
                TaskStatus::Running => active += 1,
                TaskStatus::Success => completed += 1,
                TaskStatus::Failed | TaskStatus::Killed => failed += 1,
            }
            duration += t.duration().unwrap_or(0);
            if let Some(m) = &t.metrics {
                gc += m.jvm_gc_time;
                input += m.input_bytes;
                read += m.shuffle_read_bytes();
                write += m.bytes_written;
            }
        }
        // Spark reports the driver's whole lifetime and its peak GC time once the app ends
        if e.id == "driver"
            && let (Some(start), Some(end)) = (state.info.start_time, state.info.end_time)
        {
            duration = end - start;
            gc = e.peaks.map(|p| p[20]).unwrap_or(gc);
        }
        let task_cpus = 1;
        let mut o = Map::new();
        o.insert("id".into(), json!(e.id));
        o.insert(
            "hostPort".into(),
            json!(match e.port {
                Some(p) => format!("{}:{p}", e.host),
                None => e.host.clone(),
            }),
        );
        o.insert("isActive".into(), json!(e.remove_time.is_none()));
        o.insert("rddBlocks".into(), json!(0));
        o.insert("memoryUsed".into(), json!(0));
        o.insert("diskUsed".into(), json!(0));
        o.insert("totalCores".into(), json!(e.total_cores));
        o.insert("maxTasks".into(), json!(e.total_cores / task_cpus));
        o.insert("activeTasks".into(), json!(active));
        o.insert("failedTasks".into(), json!(failed));
        o.insert("completedTasks".into(), json!(completed));
        o.insert("totalTasks".into(), json!(active + failed + completed));
        o.insert("totalDuration".into(), json!(duration));
        o.insert("totalGCTime".into(), json!(gc));
        o.insert("totalInputBytes".into(), json!(input));
        o.insert("totalShuffleRead".into(), json!(read));
        o.insert("totalShuffleWrite".into(), json!(write));
        o.insert("isBlacklisted".into(), json!(false));
        o.insert(
            "maxMemory".into(),
            json!(e.max_memory.map(|m| m.0).unwrap_or(0)),
        );
        o.insert("addTime".into(), json!(format_date(e.add_time)));
        put_opt(&mut o, "removeTime", opt_date(e.remove_time));
        put_opt(
            &mut o,
            "removeReason",
            e.remove_reason.clone().map(Value::from),
        );
        o.insert("executorLogs".into(), e.log_urls.clone());
        if let Some((_, on, off)) = e.max_memory {
            o.insert(
                "memoryMetrics".into(),
                json!({
                    "usedOnHeapStorageMemory": 0,
                    "usedOffHeapStorageMemory": 0,
                    "totalOnHeapStorageMemory": on,
                    "totalOffHeapStorageMemory": off,
                }),
            );
        }
        o.insert("blacklistedInStages".into(), json!([]));
        put_opt(
            &mut o,
            "peakMemoryMetrics",
            e.peaks.as_ref().map(peaks_json),
        );
        o.insert("attributes".into(), e.attributes.clone());
        o.insert("resources".into(), e.resources.clone());
        o.insert("resourceProfileId".into(), json!(e.resource_profile_id));
        o.insert("isExcluded".into(), json!(false));
        o.insert("excludedInStages".into(), json!([]));
        out.push(Value::Object(o));
    }
    Value::Array(out)
}

fn sorted_pairs(section: Option<&Value>) -> Value {
    let mut pairs: Vec<(String, Value)> = section
        .and_then(Value::as_object)
        .map(|m| m.iter().map(|(k, v)| (k.clone(), v.clone())).collect())
        .unwrap_or_default();
    pairs.sort_by(|a, b| a.0.cmp(&b.0));
    Value::Array(pairs.into_iter().map(|(k, v)| json!([k, v])).collect())
}

/// `/environment`.
pub fn environment(state: &AppState) -> RestResult {
    let env = state.environment.as_ref().ok_or_else(|| {
        RestError::NotFound("no environment recorded for this application".into())
    })?;
    let jvm = env.get("JVM Information");
    let jvm_field = |k: &str| jvm.and_then(|j| j.get(k)).cloned().unwrap_or(json!(""));
    let profiles: Vec<Value> = state
        .resource_profiles
        .iter()
        .map(|p| {
            let mut exec_res = Map::new();
            // Spark lists executor resources in its hash map's order: memory, offHeap, cores, others
            let requests = p.get("Executor Resource Requests").and_then(Value::as_object);
            let mut names: Vec<&String> = requests.map(|r| r.keys().collect()).unwrap_or_default();
            let rank = |n: &str| match n {
                "memory" => 0,
                "offHeap" => 1,
                "cores" => 2,
                _ => 3,
            };
            names.sort_by_key(|n| rank(n));
            for name in names {
                let r = &requests.expect("names come from requests")[name];
                exec_res.insert(
                    name.clone(),
                    json!({
                        "resourceName": r.get("Resource Name").cloned().unwrap_or(json!(name)),
                        "amount": r.get("Amount").cloned().unwrap_or(json!(0)),
                        "discoveryScript": r.get("Discovery Script").cloned().unwrap_or(json!("")),
                        "vendor": r.get("Vendor").cloned().unwrap_or(json!("")),
                    }),
                );
            }
            let task_res: Map<String, Value> = p
                .get("Task Resource Requests")
                .and_then(Value::as_object)
                .map(|m| {
                    m.iter()
                        .map(|(name, r)| {
                            (
                                name.clone(),
                                json!({
                                    "resourceName": r.get("Resource Name").cloned().unwrap_or(json!(name)),
                                    "amount": r.get("Amount").and_then(Value::as_f64).unwrap_or(0.0),
                                }),
                            )
                        })
                        .collect()
                })
                .unwrap_or_default();
            json!({
                "id": p.get("Resource Profile Id").cloned().unwrap_or(json!(0)),
                "executorResources": exec_res,
                "taskResources": task_res,
            })
        })
        .collect();
    Ok(json!({
        "runtime": {
            "javaVersion": jvm_field("Java Version"),
            "javaHome": jvm_field("Java Home"),
            "scalaVersion": jvm_field("Scala Version"),
        },
        "sparkProperties": sorted_pairs(env.get("Spark Properties")),
        "hadoopProperties": sorted_pairs(env.get("Hadoop Properties")),
        "systemProperties": sorted_pairs(env.get("System Properties")),
        "metricsProperties": sorted_pairs(env.get("Metrics Properties")),
        "classpathEntries": sorted_pairs(env.get("Classpath Entries")),
        "resourceProfiles": profiles,
    }))
}

/// A node of Spark's SQL plan graph.
#[derive(Debug, Clone)]
pub struct GraphNode {
    /// Node id (pre-order, wrappers skipped).
    pub id: i64,
    /// Operator name.
    pub name: String,
    /// One-line description.
    pub desc: String,
    /// Declared metrics: (display name, accumulator id).
    pub metrics: Vec<(String, i64)>,
    /// Whole-stage-codegen cluster id of the cluster holding this node.
    pub codegen_id: Option<i64>,
}

/// Spark's `SparkPlanGraph` of a plan tree: nodes and child→parent edges.
pub fn plan_graph(plan: &Value) -> (Vec<GraphNode>, Vec<(i64, i64)>) {
    struct Builder<'a> {
        next: i64,
        nodes: Vec<GraphNode>,
        edges: Vec<(i64, i64)>,
        exchanges: Vec<(&'a Value, i64)>,
    }
    fn children(v: &Value) -> &[Value] {
        v.get("children")
            .and_then(Value::as_array)
            .map(Vec::as_slice)
            .unwrap_or(&[])
    }
    fn metrics(v: &Value) -> Vec<(String, i64)> {
        v.get("metrics")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|m| {
                Some((
                    m.get("name")?.as_str()?.trim().to_string(),
                    m.get("accumulatorId")?.as_i64()?,
                ))
            })
            .collect()
    }
    impl<'a> Builder<'a> {
        fn exchange(&self, v: &Value) -> Option<i64> {
            self.exchanges
                .iter()
                .find(|(p, _)| *p == v)
                .map(|(_, id)| *id)
        }
        fn visit(&mut self, v: &'a Value, parent: Option<i64>, cluster: Option<i64>) {
            let name = v.get("nodeName").and_then(Value::as_str).unwrap_or("");
            let desc = v.get("simpleString").and_then(Value::as_str).unwrap_or("");
            let first = children(v).first();
            if name.starts_with("WholeStageCodegen") {
                let id = self.next;
                self.next += 1;
                self.nodes.push(GraphNode {
                    id,
                    name: name.trim().to_string(),
                    desc: desc.to_string(),
                    metrics: metrics(v),
                    codegen_id: None,
                });
                let codegen = name
                    .trim()
                    .trim_start_matches("WholeStageCodegen")
                    .trim()
                    .trim_matches(|c| c == '(' || c == ')')
                    .parse()
                    .ok();
                if let Some(child) = first {
                    self.visit(child, parent, codegen);
                }
                return;
            }
            match name {
                "InputAdapter" => {
                    if let Some(child) = first {
                        self.visit(child, parent, None);
                    }
                }
                "BroadcastQueryStage"
                | "ShuffleQueryStage"
                | "ResultQueryStage"
                | "TableCacheQueryStage" => {
                    let Some(child) = first else { return };
                    match (self.exchange(child), parent) {
                        (Some(id), Some(p)) => self.edges.push((id, p)),
                        _ => self.visit(child, parent, None),
                    }
                }
                "ReusedExchange" if first.and_then(|c| self.exchange(c)).is_some() => {
                    if let (Some(id), Some(p)) = (first.and_then(|c| self.exchange(c)), parent) {
                        self.edges.push((id, p));
                    }
                }
                "ReusedSubquery" => {
                    if let Some(child) = first {
                        self.visit(child, parent, cluster);
                    }
                }
                _ => {
                    let is_subquery = name == "Subquery" || name == "SubqueryBroadcast";
                    if is_subquery && let Some(id) = self.exchange(v) {
                        if let Some(p) = parent {
                            self.edges.push((id, p));
                        }
                        return;
                    }
                    let cluster = if is_subquery { None } else { cluster };
                    let id = self.next;
                    self.next += 1;
                    self.nodes.push(GraphNode {
                        id,
                        name: name.trim().to_string(),
                        desc: desc.to_string(),
                        metrics: metrics(v),
                        codegen_id: cluster,
                    });
                    if name.contains("Exchange") || is_subquery {
                        self.exchanges.push((v, id));
                    }
                    if let Some(p) = parent {
                        self.edges.push((id, p));
                    }
                    for child in children(v) {
                        self.visit(child, Some(id), cluster);
                    }
                }
            }
        }
    }
    let mut b = Builder {
        next: 0,
        nodes: Vec::new(),
        edges: Vec::new(),
        exchanges: Vec::new(),
    };
    if plan.is_object() {
        b.visit(plan, None, None);
    }
    (b.nodes, b.edges)
}

fn execution_status(exec: &Execution) -> &'static str {
    match (&exec.completion_time, &exec.error_message) {
        (None, _) => "RUNNING",
        (Some(_), Some(e)) if !e.is_empty() => "FAILED",
        _ => "COMPLETED",
    }
}

fn execution_data(
    state: &AppState,
    exec: &Execution,
    details: bool,
    plan_description: bool,
) -> Value {
    let mut running = Vec::new();
    let mut succeeded = Vec::new();
    let mut failed = Vec::new();
    for id in &exec.job_ids {
        match state.jobs.get(id).map(|j| j.succeeded) {
            Some(Some(true)) => succeeded.push(*id),
            Some(Some(false)) => failed.push(*id),
            Some(None) => running.push(*id),
            None => {}
        }
    }
    let (nodes, edges) = if details {
        let values: HashMap<i64, String> = exec.metric_strings(&state.stages);
        let (mut nodes, edges) = plan_graph(&exec.plan_info);
        nodes.sort_by_key(|n| std::cmp::Reverse(n.id));
        let nodes: Vec<Value> = nodes
            .iter()
            .map(|n| {
                let mut o = Map::new();
                o.insert("nodeId".into(), json!(n.id));
                o.insert("nodeName".into(), json!(n.name));
                put_opt(&mut o, "wholeStageCodegenId", n.codegen_id.map(Value::from));
                let metrics: Vec<Value> = n
                    .metrics
                    .iter()
                    .filter_map(|(name, acc)| {
                        let v = values.get(acc)?;
                        let v = v.strip_prefix('\n').unwrap_or(v);
                        Some(json!({"name": name, "value": v}))
                    })
                    .collect();
                o.insert("metrics".into(), Value::Array(metrics));
                o.insert("desc".into(), json!(n.desc));
                Value::Object(o)
            })
            .collect();
        let edges: Vec<Value> = edges
            .iter()
            .map(|(from, to)| json!({"fromId": from, "toId": to}))
            .collect();
        (nodes, edges)
    } else {
        (Vec::new(), Vec::new())
    };
    let mut o = Map::new();
    o.insert("id".into(), json!(exec.id));
    o.insert("status".into(), json!(execution_status(exec)));
    o.insert("description".into(), json!(exec.description));
    o.insert(
        "planDescription".into(),
        json!(if plan_description {
            exec.plan_description.as_str()
        } else {
            ""
        }),
    );
    o.insert(
        "submissionTime".into(),
        json!(format_date(exec.submission_time)),
    );
    o.insert(
        "duration".into(),
        json!(
            exec.completion_time
                .map(|end| end - exec.submission_time)
                .unwrap_or(0)
        ),
    );
    o.insert("runningJobIds".into(), json!(running));
    o.insert("successJobIds".into(), json!(succeeded));
    o.insert("failedJobIds".into(), json!(failed));
    o.insert("nodes".into(), Value::Array(nodes));
    o.insert("edges".into(), Value::Array(edges));
    put_opt(&mut o, "queryId", exec.query_id.clone().map(Value::from));
    put_opt(
        &mut o,
        "errorMessage",
        exec.error_message.clone().map(Value::from),
    );
    put_opt(&mut o, "rootExecutionId", exec.root_id.map(Value::from));
    o.insert("modifiedConfigs".into(), exec.modified_configs.clone());
    Value::Object(o)
}

/// `/sql`: executions in id order, a page of them.
pub fn sql_list(
    state: &AppState,
    details: bool,
    plan_description: bool,
    offset: usize,
    length: usize,
) -> Value {
    Value::Array(
        state
            .executions
            .values()
            .skip(offset)
            .take(length)
            .map(|e| execution_data(state, e, details, plan_description))
            .collect(),
    )
}

/// `/sql/{id}`.
pub fn sql(state: &AppState, id: i64, details: bool, plan_description: bool) -> RestResult {
    state
        .executions
        .get(&id)
        .map(|e| execution_data(state, e, details, plan_description))
        .ok_or_else(|| RestError::NotFound(format!("unknown query execution id: {id}")))
}

/// qprof's extension: the full profile a qprof log carries for a query.
pub fn qprof_profile(state: &AppState, id: i64) -> RestResult {
    let exec = state
        .executions
        .get(&id)
        .ok_or_else(|| RestError::NotFound(format!("unknown query execution id: {id}")))?;
    match &exec.qprof_profile {
        Some(Ok(profile)) => Ok(json!({ "query": profile })),
        Some(Err(why)) => Err(RestError::NotFound(format!(
            "query execution {id} has a qprof profile this server cannot read: {why}"
        ))),
        None => Err(RestError::NotFound(format!(
            "query execution {id} has no qprof profile (the log was not written by qprof)"
        ))),
    }
}
