//! Jobs: `/jobs`, `/jobs/{id}`.

use serde_json::{Map, Value, json};

use super::{
    RestError, RestResult, count_tasks, opt_date, parse_statuses, put_opt, stage_attempts,
};

use crate::state::{AppState, Stage, StageStatus};

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
        .fold(0, i64::saturating_add);
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
