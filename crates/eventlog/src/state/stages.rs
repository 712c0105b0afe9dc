//! Stage attempts and their tasks.

use std::collections::BTreeMap;

use qprof_core::metric::{TaskRef, TaskValue};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{
    AppState, Applied, ExecutorPeaks, Missing, i64_field, merge_peaks, req_i64, str_field,
};
use crate::state::task_event::{Peaks, TaskEvent, TaskInfo};

/// Status of a stage attempt, named as in Spark's REST API.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
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
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
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

/// Metrics of one ended task, in Spark's REST names.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
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
        self.local_bytes_read.saturating_add(self.remote_bytes_read)
    }
}

/// One task attempt.
#[derive(Debug, Clone, Serialize, Deserialize)]
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
        (self.finish_time > 0).then(|| self.finish_time.saturating_sub(self.launch_time))
    }

    /// Spark's scheduler delay estimate for an ended task.
    pub fn scheduler_delay(&self) -> i64 {
        match (self.duration(), &self.metrics) {
            (Some(d), Some(m)) => d
                .saturating_sub(m.executor_run_time)
                .saturating_sub(m.executor_deserialize_time)
                .saturating_sub(m.result_serialization_time)
                .saturating_sub(self.getting_result_duration())
                .max(0),
            _ => 0,
        }
    }

    /// Time spent fetching the result, ms.
    pub fn getting_result_duration(&self) -> i64 {
        if self.getting_result_time > 0 && self.finish_time > 0 {
            self.finish_time.saturating_sub(self.getting_result_time)
        } else {
            0
        }
    }
}

/// One attempt of a stage.
#[derive(Debug, Clone, Serialize, Deserialize)]
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
    pub tasks: BTreeMap<i64, Box<Task>>,
    /// Peak executor metrics per executor during this stage.
    pub executor_peaks: BTreeMap<String, Box<ExecutorPeaks>>,
}

impl AppState {
    pub(super) fn stage_from_info(&self, info: &Value) -> Result<Stage, Missing> {
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

    pub(super) fn stage_event(&mut self, e: &Value, completed: bool) -> Applied {
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

    pub(super) fn task_info(info: &TaskInfo<'_>) -> Task {
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

    pub(super) fn stage_mut(&mut self, id: i64, attempt: i64) -> &mut Stage {
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

    pub(super) fn task_start(&mut self, e: TaskEvent<'_>) -> Applied {
        let task = Self::task_info(&e.info);
        self.stage_mut(e.stage_id, e.stage_attempt)
            .tasks
            .entry(task.id)
            .or_insert_with(|| Box::new(task));
        Ok(())
    }

    pub(super) fn task_end(&mut self, e: TaskEvent<'_>) -> Applied {
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
            task.error_message = e.reason.as_ref().map(|r| r.error_text());
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
                    exec.task_values.push((
                        acc.id,
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
            .insert(task.id, Box::new(task));
        Ok(())
    }
}
