//! Executors: `/executors`, `/allexecutors`, and each stage's per-executor summaries.

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

use super::tasks::quantile_values;
use super::{opt_date, put_opt};
use crate::spark::{EXECUTOR_METRIC_NAMES, format_date};
use crate::state::{AppState, ExecutorPeaks, Stage, TaskStatus};

pub(super) fn peaks_json(p: &ExecutorPeaks) -> Value {
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
pub(super) struct ExecutorStage {
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
    pub(super) fn fields(&self) -> [(&'static str, i64); 14] {
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

pub(super) fn executor_stage_summaries(stage: &Stage) -> BTreeMap<&str, ExecutorStage> {
    let mut out: BTreeMap<&str, ExecutorStage> = BTreeMap::new();
    for t in stage
        .tasks
        .values()
        .filter(|t| t.status != TaskStatus::Running)
    {
        let e = out.entry(t.executor_id.as_str()).or_default();
        e.task_time = e.task_time.saturating_add(t.duration().unwrap_or(0));
        match t.status {
            TaskStatus::Success => e.succeeded += 1,
            TaskStatus::Failed => e.failed += 1,
            TaskStatus::Killed => e.killed += 1,
            TaskStatus::Running => {}
        }
        if let Some(m) = &t.metrics {
            e.input_bytes = e.input_bytes.saturating_add(m.input_bytes);
            e.input_records = e.input_records.saturating_add(m.input_records);
            e.output_bytes = e.output_bytes.saturating_add(m.output_bytes);
            e.output_records = e.output_records.saturating_add(m.output_records);
            e.shuffle_read = e.shuffle_read.saturating_add(m.shuffle_read_bytes());
            e.shuffle_read_records = e.shuffle_read_records.saturating_add(m.records_read);
            e.shuffle_write = e.shuffle_write.saturating_add(m.bytes_written);
            e.shuffle_write_records = e.shuffle_write_records.saturating_add(m.records_written);
            e.memory_spilled = e.memory_spilled.saturating_add(m.memory_bytes_spilled);
            e.disk_spilled = e.disk_spilled.saturating_add(m.disk_bytes_spilled);
        }
    }
    for id in stage.executor_peaks.keys() {
        out.entry(id.as_str()).or_default();
    }
    out
}

pub(super) fn executor_distributions(stage: &Stage, quantiles: &[f64]) -> Value {
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

/// `/executors` (active only) or `/allexecutors`.
pub fn executors(state: &AppState, all: bool) -> Value {
    // Spark's store lists executors by id: all of them ascending, the active ones (through
    // its reversed "active" index) descending
    let mut listed: Vec<_> = state
        .executors
        .iter()
        .filter(|e| all || e.remove_time.is_none())
        .collect();
    listed.sort_by(|a, b| a.id.cmp(&b.id));
    if !all {
        listed.reverse();
    }
    let mut out = Vec::new();
    for e in listed {
        let tasks = state
            .stages
            .values()
            .flat_map(|s| s.tasks.values())
            .filter(|t| t.executor_id == e.id);
        let (mut active, mut failed, mut completed) = (0, 0, 0);
        let (mut duration, mut gc, mut input, mut read, mut write) = (0i64, 0i64, 0i64, 0i64, 0i64);
        for t in tasks {
            match t.status {
                TaskStatus::Running => active += 1,
                TaskStatus::Success => completed += 1,
                TaskStatus::Failed | TaskStatus::Killed => failed += 1,
            }
            duration = duration.saturating_add(t.duration().unwrap_or(0));
            if let Some(m) = &t.metrics {
                gc = gc.saturating_add(m.jvm_gc_time);
                input = input.saturating_add(m.input_bytes);
                read = read.saturating_add(m.shuffle_read_bytes());
                write = write.saturating_add(m.bytes_written);
            }
        }
        // Spark reports the driver's whole lifetime and its peak GC time once the app ends
        if e.id == "driver"
            && let (Some(start), Some(end)) = (state.info.start_time, state.info.end_time)
        {
            duration = end.saturating_sub(start);
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
