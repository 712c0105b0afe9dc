//! Stages: `/stages`, `/stages/{id}`, `/stages/{id}/{attempt}`.

use serde_json::{Map, Value, json};

use super::executors::{executor_distributions, executor_stage_summaries, peaks_json};
use super::tasks::{task_data, task_distributions};
use super::{
    RestError, RestResult, count_tasks, opt_date, parse_statuses, put_opt, stage_attempts,
};
use crate::state::{AppState, ExecutorPeaks, Stage, StageStatus, Task, TaskMetrics, TaskStatus};

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

fn stage_data(stage: &Stage, opts: &StageOptions) -> Value {
    let tasks: Vec<&Task> = stage.tasks.values().map(|t| &**t).collect();
    let counts = count_tasks(std::iter::once(stage));
    let ended: Vec<&TaskMetrics> = tasks
        .iter()
        .filter(|t| t.status != TaskStatus::Running)
        .filter_map(|t| t.metrics.as_ref())
        .collect();
    let sum = |f: fn(&TaskMetrics) -> i64| ended.iter().map(|m| f(m)).fold(0, i64::saturating_add);
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
                Some(acc) => acc
                    .iter_mut()
                    .zip(p.iter())
                    .for_each(|(a, b)| *a = (*a).max(*b)),
                None => peak = Some(**p),
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

pub(super) fn quantiles_or_default(q: &[f64]) -> Vec<f64> {
    if q.is_empty() {
        vec![0.0, 0.25, 0.5, 0.75, 1.0]
    } else {
        q.to_vec()
    }
}

pub(super) const STAGE_STATUSES: [&str; 5] = ["ACTIVE", "COMPLETE", "FAILED", "PENDING", "SKIPPED"];
pub(super) const TASK_STATUSES: [&str; 4] = ["RUNNING", "SUCCESS", "FAILED", "KILLED"];

pub(super) fn checked_task_statuses(opts: &StageOptions) -> Result<StageOptions, RestError> {
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

pub(super) fn find_attempt(state: &AppState, id: i64, attempt: i64) -> Result<&Stage, RestError> {
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
