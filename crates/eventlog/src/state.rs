//! The state of one application rebuilt from its events: what Spark's
//! `AppStatusListener` and `SQLAppStatusListener` keep, enough to answer the REST API.
//!
//! Events are applied one line at a time; unknown events and corrupt lines are counted,
//! never fatal, so a log can be replayed incrementally as it grows.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use qprof_core::metric::{MetricKind, TaskRef, TaskValue};
use serde_json::Value;

use serde::Deserialize;

use crate::profile_json::QueryJson;
use crate::scala_order::scala_order;
use crate::spark::{EXECUTOR_METRIC_NAMES, events};
use crate::task_event::{Peaks, TaskEvent, TaskInfo};

/// Peak values of Spark's 23 executor metrics, in [`EXECUTOR_METRIC_NAMES`] order.
pub type ExecutorPeaks = [i64; 23];

/// How many lines a replay could not use.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SkipCounts {
    /// Well-formed events of a kind this reader does not know (kept out of the state).
    pub unknown_events: u64,
    /// Lines that are not a JSON object with an `"Event"` name, or miss required fields.
    pub corrupt_lines: u64,
}

/// Status of a stage attempt, named as in Spark's REST API.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StageStatus {
    /// Declared by a job, not submitted yet.
    Pending,
    /// Submitted, running.
    Active,
    /// Completed successfully.
    Complete,
    /// Failed.
    Failed,
    /// Never submitted by the job that declared it (its output was reused).
    Skipped,
}

impl StageStatus {
    /// The status word of Spark's REST API.
    pub fn as_str(self) -> &'static str {
        match self {
            StageStatus::Pending => "PENDING",
            StageStatus::Active => "ACTIVE",
            StageStatus::Complete => "COMPLETE",
            StageStatus::Failed => "FAILED",
            StageStatus::Skipped => "SKIPPED",
        }
    }
}

/// Status of a task, named as in Spark's REST API.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TaskStatus {
    /// Started, not ended.
    Running,
    /// Ended successfully.
    Success,
    /// Ended with a failure.
    Failed,
    /// Killed.
    Killed,
}

impl TaskStatus {
    /// The status word of Spark's REST API.
    pub fn as_str(self) -> &'static str {
        match self {
            TaskStatus::Running => "RUNNING",
            TaskStatus::Success => "SUCCESS",
            TaskStatus::Failed => "FAILED",
            TaskStatus::Killed => "KILLED",
        }
    }
}

/// The application-level facts of a log.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AppInfo {
    /// Spark version that wrote the log (`SparkListenerLogStart`).
    pub spark_version: Option<String>,
    /// Application id.
    pub id: Option<String>,
    /// Application name.
    pub name: Option<String>,
    /// Attempt id, when the application has attempts.
    pub attempt_id: Option<String>,
    /// Start time, epoch ms.
    pub start_time: Option<i64>,
    /// User who ran the application.
    pub user: Option<String>,
    /// End time, epoch ms, once the application ended.
    pub end_time: Option<i64>,
    /// Exit code given at the end.
    pub exit_code: Option<i64>,
}

impl AppInfo {
    /// Applies one of the events the listing needs; returns false for other events.
    pub fn apply(&mut self, event: &Value) -> bool {
        match event.get("Event").and_then(Value::as_str) {
            Some(events::LOG_START) => {
                self.spark_version = str_field(event, "Spark Version");
            }
            Some(events::APPLICATION_START) => {
                self.name = str_field(event, "App Name");
                self.id = str_field(event, "App ID");
                self.attempt_id = str_field(event, "App Attempt ID");
                self.start_time = i64_field(event, "Timestamp");
                self.user = str_field(event, "User");
            }
            Some(events::APPLICATION_END) => {
                self.end_time = i64_field(event, "Timestamp");
                self.exit_code = i64_field(event, "ExitCode");
            }
            _ => return false,
        }
        true
    }
}

/// An executor and its block manager.
#[derive(Debug, Clone, Default)]
pub struct Executor {
    /// Executor id (`driver` for the local process).
    pub id: String,
    /// Host name.
    pub host: String,
    /// Block manager port, when one registered.
    pub port: Option<i64>,
    /// Cores offered.
    pub total_cores: i64,
    /// When it was added, epoch ms.
    pub add_time: i64,
    /// When it was removed, epoch ms.
    pub remove_time: Option<i64>,
    /// Why it was removed.
    pub remove_reason: Option<String>,
    /// Log URLs, attributes and resources, as logged.
    pub log_urls: Value,
    /// Executor attributes as logged.
    pub attributes: Value,
    /// Executor resources as logged.
    pub resources: Value,
    /// Resource profile id.
    pub resource_profile_id: i64,
    /// Block manager memory: total, on-heap, off-heap.
    pub max_memory: Option<(i64, i64, i64)>,
    /// Peak executor metrics over heartbeats, stage peaks and task ends.
    pub peaks: Option<ExecutorPeaks>,
}

/// A job (one per query in qprof logs).
#[derive(Debug, Clone, Default)]
pub struct Job {
    /// Job id.
    pub id: i64,
    /// Name: the name of the job's last stage.
    pub name: String,
    /// `spark.job.description`.
    pub description: Option<String>,
    /// Submission time, epoch ms.
    pub submission_time: Option<i64>,
    /// Completion time, epoch ms.
    pub completion_time: Option<i64>,
    /// Stage ids declared at job start.
    pub stage_ids: Vec<i64>,
    /// `spark.jobGroup.id`.
    pub job_group: Option<String>,
    /// `spark.job.tags`, sorted.
    pub job_tags: Vec<String>,
    /// Tasks of stages not yet computed at job start.
    pub num_tasks: i64,
    /// `Some(true)` succeeded, `Some(false)` failed, `None` running.
    pub succeeded: Option<bool>,
    /// SQL execution the job belongs to.
    pub execution_id: Option<i64>,
}

/// Metrics of one ended task, in Spark's REST names.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[allow(missing_docs)]
pub struct TaskMetrics {
    pub executor_deserialize_time: i64,
    pub executor_deserialize_cpu_time: i64,
    pub executor_run_time: i64,
    pub executor_cpu_time: i64,
    pub result_size: i64,
    pub jvm_gc_time: i64,
    pub result_serialization_time: i64,
    pub memory_bytes_spilled: i64,
    pub disk_bytes_spilled: i64,
    pub peak_execution_memory: i64,
    pub input_bytes: i64,
    pub input_records: i64,
    pub output_bytes: i64,
    pub output_records: i64,
    pub remote_blocks_fetched: i64,
    pub local_blocks_fetched: i64,
    pub fetch_wait_time: i64,
    pub remote_bytes_read: i64,
    pub remote_bytes_read_to_disk: i64,
    pub local_bytes_read: i64,
    pub records_read: i64,
    pub remote_reqs_duration: i64,
    /// Push-based shuffle read metrics, in Spark's order.
    pub push: [i64; 9],
    pub bytes_written: i64,
    pub write_time: i64,
    pub records_written: i64,
}

impl TaskMetrics {
    /// Shuffle bytes read, local and remote.
    pub fn shuffle_read_bytes(&self) -> i64 {
        self.local_bytes_read + self.remote_bytes_read
    }
}

/// One task attempt.
#[derive(Debug, Clone)]
pub struct Task {
    /// Task id, unique within the application.
    pub id: i64,
    /// Index of the task within its stage.
    pub index: i64,
    /// Attempt number of the task.
    pub attempt: i64,
    /// Partition computed.
    pub partition: i64,
    /// Launch time, epoch ms.
    pub launch_time: i64,
    /// Finish time, epoch ms (0 while running).
    pub finish_time: i64,
    /// Time the result fetch started (0 if never).
    pub getting_result_time: i64,
    /// Executor that ran it.
    pub executor_id: String,
    /// Host that ran it.
    pub host: String,
    /// Locality level.
    pub locality: String,
    /// Whether it was a speculative copy.
    pub speculative: bool,
    /// Status.
    pub status: TaskStatus,
    /// Error text of a failed task.
    pub error_message: Option<String>,
    /// Metrics, once ended.
    pub metrics: Option<TaskMetrics>,
    /// Order in which the task ended (Spark breaks max-value ties by it).
    pub end_order: u64,
}

impl Task {
    /// Duration in ms: finish − launch, or `None` while running.
    pub fn duration(&self) -> Option<i64> {
        (self.finish_time > 0).then(|| self.finish_time - self.launch_time)
    }

    /// Spark's scheduler delay estimate for an ended task.
    pub fn scheduler_delay(&self) -> i64 {
        match (self.duration(), &self.metrics) {
            (Some(d), Some(m)) => (d
                - m.executor_run_time
                - m.executor_deserialize_time
                - m.result_serialization_time
                - self.getting_result_duration())
            .max(0),
            _ => 0,
        }
    }

    /// Time spent fetching the result, ms.
    pub fn getting_result_duration(&self) -> i64 {
        if self.getting_result_time > 0 && self.finish_time > 0 {
            self.finish_time - self.getting_result_time
        } else {
            0
        }
    }
}

/// One attempt of a stage.
#[derive(Debug, Clone)]
pub struct Stage {
    /// Stage id.
    pub id: i64,
    /// Attempt number.
    pub attempt: i64,
    /// Stage name.
    pub name: String,
    /// Number of tasks.
    pub num_tasks: i64,
    /// RDD ids, in log order.
    pub rdd_ids: Vec<i64>,
    /// Parent stage ids.
    pub parent_ids: Vec<i64>,
    /// Details text (call site).
    pub details: String,
    /// Submission time, epoch ms.
    pub submission_time: Option<i64>,
    /// Completion time, epoch ms.
    pub completion_time: Option<i64>,
    /// Why it failed.
    pub failure_reason: Option<String>,
    /// Status.
    pub status: StageStatus,
    /// `spark.job.description` at submission.
    pub description: Option<String>,
    /// Scheduling pool.
    pub pool: String,
    /// Resource profile id.
    pub resource_profile_id: i64,
    /// Named, non-internal accumulables of the stage: (id, name, value).
    pub accumulables: Vec<(i64, String, String)>,
    /// Tasks by id.
    pub tasks: BTreeMap<i64, Task>,
    /// Peak executor metrics per executor during this stage.
    pub executor_peaks: BTreeMap<String, ExecutorPeaks>,
}

/// A metric declared by a SQL plan node.
#[derive(Debug, Clone, PartialEq)]
pub struct PlanMetric {
    /// Display name.
    pub name: String,
    /// Accumulator id.
    pub accumulator_id: i64,
    /// Spark metric type (`sum`, `size`, `timing`, `nsTiming`, `average`, or others).
    pub metric_type: String,
}

/// A SQL execution (one query).
#[derive(Debug, Clone, Default)]
pub struct Execution {
    /// Execution id.
    pub id: i64,
    /// Root execution id.
    pub root_id: Option<i64>,
    /// Short description.
    pub description: String,
    /// Long description.
    pub details: String,
    /// Physical plan text (replaced by adaptive updates).
    pub plan_description: String,
    /// The plan tree as logged (`sparkPlanInfo`).
    pub plan_info: Value,
    /// Submission time, epoch ms.
    pub submission_time: i64,
    /// End time, epoch ms.
    pub completion_time: Option<i64>,
    /// Error message given at the end (`""` when it succeeded).
    pub error_message: Option<String>,
    /// Query id.
    pub query_id: Option<String>,
    /// Modified configs.
    pub modified_configs: Value,
    /// Jobs of this execution.
    pub job_ids: Vec<i64>,
    /// Every metric declared by any plan version, by accumulator id.
    pub metric_types: HashMap<i64, String>,
    /// Task values per accumulator, in task-end order.
    pub task_values: HashMap<i64, Vec<(u64, TaskValue)>>,
    /// Driver values per accumulator (the last one wins).
    pub driver_values: HashMap<i64, i64>,
    /// qprof's profile of the query, when the log carries one: the profile, or why it
    /// could not be read (e.g. written by a newer qprof).
    pub qprof_profile: Option<Result<Box<QueryJson>, String>>,
}

impl Execution {
    /// Spark's rendered value per accumulator id, for every accumulator with a value,
    /// aggregated as Spark's SQL listener does.
    ///
    /// Each stage counts with its latest attempt. A stage in which any task reported an
    /// accumulator contributes one value per task index: the index's last report up to its
    /// first success (later ones are ignored), zero for indices that never reported.
    /// The maximum is named after the first report that reached it within its stage, and
    /// across stages after the first stage in Spark's order of the execution's stages
    /// (Scala's iteration order of a set of them); a driver value above it names the driver.
    pub fn metric_strings(&self, state: &AppState) -> HashMap<i64, String> {
        let stage_order = scala_order(
            &self
                .job_ids
                .iter()
                .filter_map(|j| state.jobs.get(j))
                .flat_map(|j| j.stage_ids.iter().copied())
                .collect::<Vec<_>>(),
        );
        let mut out = HashMap::new();
        for (id, kind) in &self.metric_types {
            let mut reported: Vec<(u64, TaskValue)> =
                self.task_values.get(id).cloned().unwrap_or_default();
            reported.sort_by_key(|(order, _)| *order);
            let mut values: Vec<TaskValue> = Vec::new();
            let mut max: Option<(i64, TaskRef)> = None;
            for &stage_id in &stage_order {
                let Some((&(_, attempt), stage)) = state
                    .stages
                    .range((stage_id, i64::MIN)..=(stage_id, i64::MAX))
                    .next_back()
                else {
                    continue;
                };
                let (stage_values, stage_max) = stage_values(stage, attempt, &reported);
                let Some(stage_max) = stage_max else {
                    continue;
                };
                if max.is_none_or(|(m, _)| stage_max.0 > m) {
                    max = Some(stage_max);
                }
                values.extend(stage_values);
            }
            if let Some(v) = self.driver_values.get(id) {
                values.push(TaskValue {
                    task: None,
                    value: *v,
                });
                if max.is_some_and(|(m, _)| *v > m) {
                    max = None;
                }
            }
            if values.is_empty() {
                continue;
            }
            let text = match kind.parse::<MetricKind>() {
                Ok(kind) => {
                    qprof_core::metric::spark_string_naming(kind, &values, max.map(|(_, t)| t))
                }
                // Spark renders unknown (custom) metric types as their plain sum
                Err(_) => values.iter().map(|v| v.value).sum::<i64>().to_string(),
            };
            out.insert(*id, text);
        }
        out
    }
}

/// One stage attempt's values of an accumulator from its tasks' `reported` values (in
/// task-end order): one per task index, and the first report that reached the maximum.
/// No values if no task of the attempt reported.
fn stage_values(
    stage: &Stage,
    attempt: i64,
    reported: &[(u64, TaskValue)],
) -> (Vec<TaskValue>, Option<(i64, TaskRef)>) {
    let mut slots: BTreeMap<u32, TaskValue> = BTreeMap::new();
    let mut succeeded: HashSet<u32> = HashSet::new();
    let mut max: Option<(i64, TaskRef)> = None;
    let of_attempt = reported.iter().filter_map(|(_, v)| {
        v.task
            .filter(|t| i64::from(t.stage_id) == stage.id && i64::from(t.stage_attempt) == attempt)
            .map(|t| (t, v.value))
    });
    for (task, value) in of_attempt {
        if succeeded.contains(&task.partition) {
            continue;
        }
        slots.insert(
            task.partition,
            TaskValue {
                task: Some(task),
                value,
            },
        );
        if max.is_none_or(|(m, _)| value > m) {
            max = Some((value, task));
        }
        let success = stage
            .tasks
            .get(&i64::try_from(task.task_id).unwrap_or(-1))
            .is_some_and(|t| t.status == TaskStatus::Success);
        if success {
            succeeded.insert(task.partition);
        }
    }
    let Some(first) = slots.values().next().copied() else {
        return (Vec::new(), None);
    };
    let mut values: Vec<TaskValue> = slots.into_values().collect();
    let reported_indices = values.len() as i64;
    for _ in reported_indices..stage.num_tasks {
        values.push(TaskValue { value: 0, ..first });
    }
    (values, max)
}

/// Everything known about one application.
#[derive(Debug, Clone, Default)]
pub struct AppState {
    /// Application facts.
    pub info: AppInfo,
    /// The `SparkListenerEnvironmentUpdate` event as logged.
    pub environment: Option<Value>,
    /// `SparkListenerResourceProfileAdded` events as logged.
    pub resource_profiles: Vec<Value>,
    /// Executors in the order they were added.
    pub executors: Vec<Executor>,
    /// Jobs by id.
    pub jobs: BTreeMap<i64, Job>,
    /// Stage attempts by (stage id, attempt).
    pub stages: BTreeMap<(i64, i64), Stage>,
    /// SQL executions by id.
    pub executions: BTreeMap<i64, Execution>,
    /// Lines skipped while replaying.
    pub skipped: SkipCounts,
    stage_jobs: HashMap<i64, Vec<i64>>,
    task_ends: u64,
}

/// Why an event could not be applied: it lacks a field the state needs.
#[derive(Debug)]
struct Missing;

type Applied = Result<(), Missing>;

fn str_field(v: &Value, k: &str) -> Option<String> {
    v.get(k).and_then(Value::as_str).map(str::to_string)
}

fn i64_field(v: &Value, k: &str) -> Option<i64> {
    v.get(k).and_then(Value::as_i64)
}

fn req_i64(v: &Value, k: &str) -> Result<i64, Missing> {
    i64_field(v, k).ok_or(Missing)
}

/// Accumulable `Update`/`Value` fields are numbers or strings of numbers.
fn loose_i64(v: &Value) -> Option<i64> {
    match v {
        Value::Number(n) => n.as_i64(),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }
}

fn peaks_of(v: &Value) -> Option<ExecutorPeaks> {
    let obj = v.as_object()?;
    Some(EXECUTOR_METRIC_NAMES.map(|k| obj.get(k).and_then(Value::as_i64).unwrap_or(0)))
}

fn merge_peaks(into: &mut Option<ExecutorPeaks>, new: ExecutorPeaks) {
    match into {
        Some(p) => p.iter_mut().zip(new).for_each(|(a, b)| *a = (*a).max(b)),
        None => *into = Some(new),
    }
}

impl AppState {
    /// Heap bytes the state holds, counted from what it holds (see `heap_size`).
    pub fn heap_bytes(&self) -> usize {
        use crate::heap_size::HeapSize;
        self.info.heap_bytes()
            + self.environment.heap_bytes()
            + self.resource_profiles.heap_bytes()
            + self.executors.heap_bytes()
            + self.jobs.heap_bytes()
            + self.stages.heap_bytes()
            + self.executions.heap_bytes()
            + self.stage_jobs.heap_bytes()
    }

    /// Applies one log line. Blank lines are ignored; corrupt lines and unknown events are
    /// counted in [`AppState::skipped`].
    pub fn apply_line(&mut self, line: &[u8]) {
        let line = line.trim_ascii();
        if line.is_empty() {
            return;
        }
        // task events are most of a log: decode them typed, skipping unused fields
        let task_event = line.strip_prefix(b"{\"Event\":\"").and_then(|rest| {
            if rest.starts_with(b"SparkListenerTaskEnd\"") {
                Some(true)
            } else if rest.starts_with(b"SparkListenerTaskStart\"") {
                Some(false)
            } else {
                None
            }
        });
        if let Some(end) = task_event {
            let applied = match serde_json::from_slice::<TaskEvent<'_>>(line) {
                Ok(event) if end => self.task_end(event),
                Ok(event) => self.task_start(event),
                Err(_) => Err(Missing),
            };
            if applied.is_err() {
                self.skipped.corrupt_lines += 1;
            }
            return;
        }
        match serde_json::from_slice::<Value>(line) {
            Ok(event) => self.apply(&event),
            Err(_) => self.skipped.corrupt_lines += 1,
        }
    }

    /// Applies one parsed event.
    pub fn apply(&mut self, event: &Value) {
        let Some(name) = event.get("Event").and_then(Value::as_str) else {
            self.skipped.corrupt_lines += 1;
            return;
        };
        let applied = match name {
            events::LOG_START | events::APPLICATION_START | events::APPLICATION_END => {
                self.info.apply(event);
                Ok(())
            }
            events::ENVIRONMENT_UPDATE => {
                self.environment = Some(event.clone());
                Ok(())
            }
            events::RESOURCE_PROFILE_ADDED => {
                self.resource_profiles.push(event.clone());
                Ok(())
            }
            events::EXECUTOR_ADDED => self.executor_added(event),
            events::EXECUTOR_REMOVED => self.executor_removed(event),
            events::BLOCK_MANAGER_ADDED => self.block_manager_added(event),
            events::JOB_START => self.job_start(event),
            events::JOB_END => self.job_end(event),
            events::STAGE_SUBMITTED => self.stage_event(event, false),
            events::STAGE_COMPLETED => self.stage_event(event, true),
            events::TASK_START => TaskEvent::deserialize(event)
                .map_err(|_| Missing)
                .and_then(|e| self.task_start(e)),
            events::TASK_END => TaskEvent::deserialize(event)
                .map_err(|_| Missing)
                .and_then(|e| self.task_end(e)),
            events::STAGE_EXECUTOR_METRICS => self.stage_executor_metrics(event),
            events::EXECUTOR_METRICS_UPDATE => self.executor_metrics_update(event),
            events::SQL_EXECUTION_START => self.sql_start(event),
            events::SQL_ADAPTIVE_EXECUTION_UPDATE => self.sql_plan_update(event),
            events::SQL_ADAPTIVE_METRIC_UPDATES => self.sql_metric_updates(event),
            events::SQL_EXECUTION_END => self.sql_end(event),
            events::DRIVER_ACCUM_UPDATES => self.driver_accum_updates(event),
            events::QPROF_QUERY_PROFILE => self.qprof_profile(event),
            _ => {
                self.skipped.unknown_events += 1;
                Ok(())
            }
        };
        if applied.is_err() {
            self.skipped.corrupt_lines += 1;
        }
    }

    /// The executor with this id, created on first mention.
    fn executor_mut(&mut self, id: &str) -> &mut Executor {
        let pos = match self.executors.iter().position(|e| e.id == id) {
            Some(pos) => pos,
            None => {
                self.executors.push(Executor {
                    id: id.to_string(),
                    log_urls: Value::Object(Default::default()),
                    attributes: Value::Object(Default::default()),
                    resources: Value::Object(Default::default()),
                    ..Executor::default()
                });
                self.executors.len() - 1
            }
        };
        &mut self.executors[pos]
    }

    fn executor_added(&mut self, e: &Value) -> Applied {
        let id = str_field(e, "Executor ID").ok_or(Missing)?;
        let time = req_i64(e, "Timestamp")?;
        let info = e.get("Executor Info").ok_or(Missing)?;
        let exec = self.executor_mut(&id);
        exec.add_time = time;
        exec.host = str_field(info, "Host").unwrap_or_default();
        exec.total_cores = i64_field(info, "Total Cores").unwrap_or(0);
        exec.resource_profile_id = i64_field(info, "Resource Profile Id").unwrap_or(0);
        for (key, slot) in [
            ("Log Urls", &mut exec.log_urls),
            ("Attributes", &mut exec.attributes),
            ("Resources", &mut exec.resources),
        ] {
            if let Some(v) = info.get(key).filter(|v| v.is_object()) {
                *slot = v.clone();
            }
        }
        Ok(())
    }

    fn executor_removed(&mut self, e: &Value) -> Applied {
        let id = str_field(e, "Executor ID").ok_or(Missing)?;
        let time = req_i64(e, "Timestamp")?;
        let exec = self.executor_mut(&id);
        exec.remove_time = Some(time);
        exec.remove_reason = str_field(e, "Removed Reason");
        Ok(())
    }

    fn block_manager_added(&mut self, e: &Value) -> Applied {
        let bm = e.get("Block Manager ID").ok_or(Missing)?;
        let id = str_field(bm, "Executor ID").ok_or(Missing)?;
        let max = req_i64(e, "Maximum Memory")?;
        let on = i64_field(e, "Maximum Onheap Memory").unwrap_or(max);
        let off = i64_field(e, "Maximum Offheap Memory").unwrap_or(0);
        let exec = self.executor_mut(&id);
        if exec.host.is_empty() {
            exec.host = str_field(bm, "Host").unwrap_or_default();
        }
        exec.port = i64_field(bm, "Port");
        exec.max_memory = Some((max, on, off));
        Ok(())
    }

    fn job_start(&mut self, e: &Value) -> Applied {
        let id = req_i64(e, "Job ID")?;
        let infos = e
            .get("Stage Infos")
            .and_then(Value::as_array)
            .ok_or(Missing)?;
        let props = e.get("Properties");
        let prop = |k: &str| props.and_then(|p| str_field(p, k));
        let execution_id = prop("spark.sql.execution.id").and_then(|s| s.parse().ok());
        let mut stage_ids = Vec::new();
        let mut num_tasks = 0;
        let mut last_stage: Option<(i64, String)> = None;
        for info in infos {
            let stage = self.stage_from_info(info)?;
            if info.get("Completion Time").is_none() {
                num_tasks += stage.num_tasks;
            }
            if last_stage.as_ref().is_none_or(|(sid, _)| stage.id > *sid) {
                last_stage = Some((stage.id, stage.name.clone()));
            }
            stage_ids.push(stage.id);
            self.stage_jobs.entry(stage.id).or_default().push(id);
            self.stages
                .entry((stage.id, stage.attempt))
                .or_insert(stage);
        }
        let mut job_tags: Vec<String> = prop("spark.job.tags")
            .map(|t| {
                t.split(',')
                    .filter(|s| !s.is_empty())
                    .map(str::to_string)
                    .collect()
            })
            .unwrap_or_default();
        job_tags.sort();
        if let Some(exec) = execution_id.and_then(|x| self.executions.get_mut(&x)) {
            exec.job_ids.push(id);
        }
        self.jobs.insert(
            id,
            Job {
                id,
                name: last_stage.map(|(_, n)| n).unwrap_or_default(),
                description: prop("spark.job.description"),
                submission_time: i64_field(e, "Submission Time"),
                completion_time: None,
                stage_ids,
                job_group: prop("spark.jobGroup.id"),
                job_tags,
                num_tasks,
                succeeded: None,
                execution_id,
            },
        );
        Ok(())
    }

    fn stage_from_info(&self, info: &Value) -> Result<Stage, Missing> {
        let ids = |k: &str| -> Vec<i64> {
            info.get(k)
                .and_then(Value::as_array)
                .map(|a| a.iter().filter_map(Value::as_i64).collect())
                .unwrap_or_default()
        };
        Ok(Stage {
            id: req_i64(info, "Stage ID")?,
            attempt: i64_field(info, "Stage Attempt ID").unwrap_or(0),
            name: str_field(info, "Stage Name").unwrap_or_default(),
            num_tasks: i64_field(info, "Number of Tasks").unwrap_or(0),
            rdd_ids: info
                .get("RDD Info")
                .and_then(Value::as_array)
                .map(|a| a.iter().filter_map(|r| i64_field(r, "RDD ID")).collect())
                .unwrap_or_default(),
            parent_ids: ids("Parent IDs"),
            details: str_field(info, "Details").unwrap_or_default(),
            submission_time: None,
            completion_time: None,
            failure_reason: None,
            status: StageStatus::Pending,
            description: None,
            pool: "default".to_string(),
            resource_profile_id: i64_field(info, "Resource Profile Id").unwrap_or(0),
            accumulables: Vec::new(),
            tasks: BTreeMap::new(),
            executor_peaks: BTreeMap::new(),
        })
    }

    fn stage_event(&mut self, e: &Value, completed: bool) -> Applied {
        let info = e.get("Stage Info").ok_or(Missing)?;
        let fresh = self.stage_from_info(info)?;
        let key = (fresh.id, fresh.attempt);
        let stage = self.stages.entry(key).or_insert(fresh);
        stage.submission_time = i64_field(info, "Submission Time").or(stage.submission_time);
        if let Some(props) = e.get("Properties") {
            stage.description = str_field(props, "spark.job.description");
            if let Some(pool) = str_field(props, "spark.scheduler.pool") {
                stage.pool = pool;
            }
        }
        if completed {
            stage.completion_time = i64_field(info, "Completion Time");
            stage.failure_reason = str_field(info, "Failure Reason");
            stage.status = if stage.failure_reason.is_some() {
                StageStatus::Failed
            } else {
                StageStatus::Complete
            };
            stage.accumulables = info
                .get("Accumulables")
                .and_then(Value::as_array)
                .map(|a| {
                    a.iter()
                        .filter(|acc| {
                            !acc.get("Internal")
                                .and_then(Value::as_bool)
                                .unwrap_or(false)
                        })
                        .filter_map(|acc| {
                            let name = str_field(acc, "Name")?;
                            let value = match acc.get("Value")? {
                                Value::String(s) => s.clone(),
                                other => other.to_string(),
                            };
                            Some((i64_field(acc, "ID")?, name, value))
                        })
                        .collect()
                })
                .unwrap_or_default();
        } else {
            stage.status = StageStatus::Active;
        }
        Ok(())
    }

    fn job_end(&mut self, e: &Value) -> Applied {
        let id = req_i64(e, "Job ID")?;
        let result = e
            .get("Job Result")
            .and_then(|r| r.get("Result"))
            .and_then(Value::as_str);
        let Some(job) = self.jobs.get_mut(&id) else {
            return Err(Missing);
        };
        job.completion_time = i64_field(e, "Completion Time");
        job.succeeded = Some(result == Some("JobSucceeded"));
        for sid in job.stage_ids.clone() {
            for ((_, _), stage) in self.stages.range_mut((sid, i64::MIN)..=(sid, i64::MAX)) {
                if stage.status == StageStatus::Pending {
                    stage.status = StageStatus::Skipped;
                }
            }
        }
        Ok(())
    }

    fn task_info(info: &TaskInfo<'_>) -> Task {
        Task {
            id: info.task_id,
            index: info.index,
            attempt: info.attempt,
            partition: info.partition,
            launch_time: info.launch_time,
            finish_time: info.finish_time,
            getting_result_time: info.getting_result_time,
            executor_id: info.executor_id.to_string(),
            host: info.host.to_string(),
            locality: info.locality.to_string(),
            speculative: info.speculative,
            status: TaskStatus::Running,
            error_message: None,
            metrics: None,
            end_order: 0,
        }
    }

    fn stage_mut(&mut self, id: i64, attempt: i64) -> &mut Stage {
        self.stages.entry((id, attempt)).or_insert_with(|| Stage {
            id,
            attempt,
            name: String::new(),
            num_tasks: 0,
            rdd_ids: Vec::new(),
            parent_ids: Vec::new(),
            details: String::new(),
            submission_time: None,
            completion_time: None,
            failure_reason: None,
            status: StageStatus::Active,
            description: None,
            pool: "default".to_string(),
            resource_profile_id: 0,
            accumulables: Vec::new(),
            tasks: BTreeMap::new(),
            executor_peaks: BTreeMap::new(),
        })
    }

    fn task_start(&mut self, e: TaskEvent<'_>) -> Applied {
        let task = Self::task_info(&e.info);
        self.stage_mut(e.stage_id, e.stage_attempt)
            .tasks
            .entry(task.id)
            .or_insert(task);
        Ok(())
    }

    fn task_end(&mut self, e: TaskEvent<'_>) -> Applied {
        let (stage_id, attempt) = (e.stage_id, e.stage_attempt);
        let mut task = Self::task_info(&e.info);
        let reason_name = e.reason.as_ref().map_or("Success", |r| r.reason.as_ref());
        task.status = if e.info.killed {
            TaskStatus::Killed
        } else if e.info.failed || reason_name != "Success" {
            TaskStatus::Failed
        } else {
            TaskStatus::Success
        };
        if task.status != TaskStatus::Success {
            task.error_message = e.reason.as_ref().map(|r| {
                r.full_stack_trace
                    .as_deref()
                    .or(r.description.as_deref())
                    .unwrap_or(reason_name)
                    .to_string()
            });
        }
        task.metrics = e.metrics.as_ref().map(TaskMetrics::from);
        self.task_ends += 1;
        task.end_order = self.task_ends;
        if let Some(Peaks(peaks)) = e.executor_metrics {
            let exec_id = task.executor_id.clone();
            merge_peaks(&mut self.executor_mut(&exec_id).peaks, peaks);
        }
        // SQL metric values of ended tasks go to the stage's execution; as in Spark's SQL
        // listener, a failed task's values count too
        {
            let execution = self
                .stage_jobs
                .get(&stage_id)
                .into_iter()
                .flatten()
                .find_map(|j| self.jobs.get(j).and_then(|j| j.execution_id));
            if let Some(exec) = execution.and_then(|x| self.executions.get_mut(&x)) {
                let task_ref = TaskRef {
                    stage_id: u32::try_from(stage_id).unwrap_or(0),
                    stage_attempt: u32::try_from(attempt).unwrap_or(0),
                    task_id: u64::try_from(task.id).unwrap_or(0),
                    // Spark keeps one value per task index
                    partition: u32::try_from(task.index).unwrap_or(0),
                };
                for acc in &e.info.accumulables {
                    let Some(value) = acc.update.and_then(|u| u.0) else {
                        continue;
                    };
                    if !exec.metric_types.contains_key(&acc.id) {
                        continue;
                    }
                    exec.task_values.entry(acc.id).or_default().push((
                        task.end_order,
                        TaskValue {
                            task: Some(task_ref),
                            value,
                        },
                    ));
                }
            }
        }
        self.stage_mut(stage_id, attempt)
            .tasks
            .insert(task.id, task);
        Ok(())
    }

    fn stage_executor_metrics(&mut self, e: &Value) -> Applied {
        let exec_id = str_field(e, "Executor ID").ok_or(Missing)?;
        let stage_id = req_i64(e, "Stage ID")?;
        let attempt = i64_field(e, "Stage Attempt ID").unwrap_or(0);
        let peaks = e
            .get("Executor Metrics")
            .and_then(peaks_of)
            .ok_or(Missing)?;
        let stage = self.stage_mut(stage_id, attempt);
        let mut slot = stage.executor_peaks.get(&exec_id).copied();
        merge_peaks(&mut slot, peaks);
        if let Some(p) = slot {
            stage.executor_peaks.insert(exec_id.clone(), p);
        }
        merge_peaks(&mut self.executor_mut(&exec_id).peaks, peaks);
        Ok(())
    }

    fn executor_metrics_update(&mut self, e: &Value) -> Applied {
        let exec_id = str_field(e, "Executor ID").ok_or(Missing)?;
        let updates: Vec<ExecutorPeaks> = e
            .get("Executor Metrics Updated")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|u| u.get("Executor Metrics").and_then(peaks_of))
            .collect();
        for peaks in updates {
            merge_peaks(&mut self.executor_mut(&exec_id).peaks, peaks);
        }
        Ok(())
    }

    fn sql_start(&mut self, e: &Value) -> Applied {
        let id = req_i64(e, "executionId")?;
        let plan_info = e.get("sparkPlanInfo").cloned().unwrap_or(Value::Null);
        let mut exec = Execution {
            id,
            root_id: i64_field(e, "rootExecutionId"),
            description: str_field(e, "description").unwrap_or_default(),
            details: str_field(e, "details").unwrap_or_default(),
            plan_description: str_field(e, "physicalPlanDescription").unwrap_or_default(),
            submission_time: req_i64(e, "time")?,
            query_id: str_field(e, "queryId"),
            modified_configs: e
                .get("modifiedConfigs")
                .filter(|v| v.is_object())
                .cloned()
                .unwrap_or_else(|| Value::Object(Default::default())),
            ..Execution::default()
        };
        declare_metrics(&plan_info, &mut exec.metric_types);
        exec.plan_info = plan_info;
        // jobs may have been logged before the execution in odd logs; link them
        exec.job_ids = self
            .jobs
            .values()
            .filter(|j| j.execution_id == Some(id))
            .map(|j| j.id)
            .collect();
        self.executions.insert(id, exec);
        Ok(())
    }

    fn sql_plan_update(&mut self, e: &Value) -> Applied {
        let id = req_i64(e, "executionId")?;
        let exec = self.executions.get_mut(&id).ok_or(Missing)?;
        if let Some(text) = str_field(e, "physicalPlanDescription") {
            exec.plan_description = text;
        }
        if let Some(info) = e.get("sparkPlanInfo") {
            declare_metrics(info, &mut exec.metric_types);
            exec.plan_info = info.clone();
        }
        Ok(())
    }

    fn sql_metric_updates(&mut self, e: &Value) -> Applied {
        let id = req_i64(e, "executionId")?;
        let exec = self.executions.get_mut(&id).ok_or(Missing)?;
        for m in e
            .get("sqlPlanMetrics")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            if let (Some(acc), Some(kind)) =
                (i64_field(m, "accumulatorId"), str_field(m, "metricType"))
            {
                exec.metric_types.insert(acc, kind);
            }
        }
        Ok(())
    }

    fn sql_end(&mut self, e: &Value) -> Applied {
        let id = req_i64(e, "executionId")?;
        let exec = self.executions.get_mut(&id).ok_or(Missing)?;
        exec.completion_time = i64_field(e, "time");
        exec.error_message = str_field(e, "errorMessage").or_else(|| Some(String::new()));
        Ok(())
    }

    fn driver_accum_updates(&mut self, e: &Value) -> Applied {
        let id = req_i64(e, "executionId")?;
        let exec = self.executions.get_mut(&id).ok_or(Missing)?;
        for pair in e
            .get("accumUpdates")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            if let (Some(acc), Some(value)) = (
                pair.get(0).and_then(Value::as_i64),
                pair.get(1).and_then(loose_i64),
            ) {
                exec.driver_values.insert(acc, value);
            }
        }
        Ok(())
    }

    fn qprof_profile(&mut self, e: &Value) -> Applied {
        let id = req_i64(e, "executionId")?;
        let exec = self.executions.get_mut(&id).ok_or(Missing)?;
        let profile = e.get("profile").ok_or(Missing)?;
        exec.qprof_profile = Some(read_profile(e.get("formatVersion"), profile));
        Ok(())
    }

    /// Jobs that declared stage `id`.
    pub fn jobs_of_stage(&self, id: i64) -> &[i64] {
        self.stage_jobs.get(&id).map(Vec::as_slice).unwrap_or(&[])
    }

    /// Stage ids of all jobs of an execution.
    pub fn stages_of_execution(&self, exec: &Execution) -> BTreeSet<i64> {
        exec.job_ids
            .iter()
            .filter_map(|j| self.jobs.get(j))
            .flat_map(|j| j.stage_ids.iter().copied())
            .collect()
    }
}

fn declare_metrics(plan: &Value, into: &mut HashMap<i64, String>) {
    for m in plan
        .get("metrics")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        if let (Some(acc), Some(kind)) = (i64_field(m, "accumulatorId"), str_field(m, "metricType"))
        {
            into.insert(acc, kind);
        }
    }
    for child in plan
        .get("children")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        declare_metrics(child, into);
    }
}

/// The profile of a qprof extension event, or why it cannot be read. Logs written before
/// the format had a version are version 1.
fn read_profile(version: Option<&Value>, profile: &Value) -> Result<Box<QueryJson>, String> {
    let version = match version {
        None => 1,
        Some(v) => v
            .as_u64()
            .and_then(|v| u32::try_from(v).ok())
            .ok_or_else(|| format!("profile format version {v} is not a version number"))?,
    };
    crate::profile_json::check_version(version).map_err(|e| e.to_string())?;
    QueryJson::deserialize(profile)
        .map(Box::new)
        .map_err(|e| format!("malformed profile: {e}"))
}
