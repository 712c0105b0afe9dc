//! Spark's `/api/v1` JSON shapes, rendered from a replayed [`AppState`]: the same keys,
//! key order, omissions and number types as Spark 4.3's history server.
//!
//! Everything here is a pure function of the state and typed parameters, so the shapes are
//! testable without HTTP; the server only parses requests and routes them here.

use std::collections::BTreeSet;

use serde_json::{Map, Value, json};

use crate::spark::{SPARK_VERSION, format_date};
use crate::state::{AppState, Stage, TaskStatus};

mod applications;
mod executors;
mod jobs;
mod sql;
mod stages;
mod tasks;

pub use applications::{AttemptSource, application_info, attempt_info, environment};
pub use executors::executors;
pub use jobs::{job, jobs};
pub use sql::{
    GraphNode, logged_profile, plan_graph, qprof_differential_flame_graph, qprof_flame_graph,
    qprof_operator_flame_graph, qprof_profile, sql, sql_list,
};
pub use stages::{StageOptions, parse_quantiles, stage, stage_attempt, stages};
pub use tasks::{task_list, task_summary};

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
