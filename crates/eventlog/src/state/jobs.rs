//! Jobs and the stages they declare.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{AppState, Applied, Missing, StageStatus, i64_field, req_i64, str_field};

/// A job (one per query in qprof logs).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
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

impl AppState {
    pub(super) fn job_start(&mut self, e: &Value) -> Applied {
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
                num_tasks = stage.num_tasks.saturating_add(num_tasks);
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

    pub(super) fn job_end(&mut self, e: &Value) -> Applied {
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
}
