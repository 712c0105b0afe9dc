//! `qprof.stages`: one row per stage attempt, as Spark's stage list gives it, with its
//! tasks' metrics summed.

use std::sync::{Arc, LazyLock};

use qprof_eventlog::{StageStatus, TaskStatus};

use super::task_metrics::{TASK_METRICS, TaskMetricValues, add_values, task_metric_columns};
use super::{AppKey, RowSource, RowTable, app_columns};
use crate::columns::{Column, int, text, time};

/// A stage attempt's row.
#[derive(Debug)]
pub(crate) struct StageRow {
    app: Arc<AppKey>,
    query_id: Option<i64>,
    stage_id: i64,
    attempt: i64,
    name: String,
    status: &'static str,
    num_tasks: i64,
    tasks: [i64; 4],
    submission_time: Option<i64>,
    completion_time: Option<i64>,
    failure_reason: Option<String>,
    sums: Vec<i64>,
}

of_app!(StageRow);

impl TaskMetricValues for StageRow {
    fn task_metrics(&self) -> Option<&[i64]> {
        Some(&self.sums)
    }
}

static COLUMNS: LazyLock<Vec<Column<StageRow>>> = LazyLock::new(|| {
    let mut columns = app_columns();
    columns.extend([
        int("query_id", |s: &StageRow| s.query_id).about(
            "The query whose job ran it; null for stages outside SQL.",
            None,
        ),
        int("stage_id", |s: &StageRow| Some(s.stage_id)).about("The stage's id.", None),
        int("attempt", |s: &StageRow| Some(s.attempt)).about("Its attempt number.", None),
        text("name", |s: &StageRow| Some(s.name.as_str())).about("Its name.", None),
        text("status", |s: &StageRow| Some(s.status))
            .about("PENDING, ACTIVE, COMPLETE, FAILED or SKIPPED.", None),
        int("num_tasks", |s: &StageRow| Some(s.num_tasks))
            .about("The tasks it has (its partitions).", Some("count")),
        int("completed_tasks", |s: &StageRow| Some(s.tasks[0]))
            .about("Its task attempts that succeeded.", Some("count")),
        int("failed_tasks", |s: &StageRow| Some(s.tasks[1]))
            .about("Its task attempts that failed.", Some("count")),
        int("killed_tasks", |s: &StageRow| Some(s.tasks[2]))
            .about("Its task attempts that were killed.", Some("count")),
        int("active_tasks", |s: &StageRow| Some(s.tasks[3]))
            .about("Its task attempts still running.", Some("count")),
        time("submission_time", |s: &StageRow| s.submission_time)
            .about("When it was submitted.", None),
        time("completion_time", |s: &StageRow| s.completion_time)
            .about("When it ended; null while it runs.", None),
        int("duration_ms", |s: &StageRow| {
            Some(s.completion_time?.saturating_sub(s.submission_time?))
        })
        .about("From its submission to its end.", Some("ms")),
        text("failure_reason", |s: &StageRow| s.failure_reason.as_deref())
            .about("Why it failed.", None),
    ]);
    columns.extend(task_metric_columns(true));
    columns
});

/// `qprof.stages`.
pub(crate) static TABLE: RowTable<StageRow> = RowTable {
    name: "stages",
    about: "One row per stage attempt, with its ended tasks' metrics summed as Spark's stage list sums them.",
    needs_replay: true,
    columns: &COLUMNS,
    rows,
};

/// An application's rows.
fn rows(source: &RowSource<'_>) -> Vec<StageRow> {
    let app = &source.app;
    let selection = source.selection;
    let key = Arc::clone(&source.key);
    let mut rows = Vec::new();
    for (query_id, stage) in app.stages(selection) {
        let mut tasks = [0; 4];
        let mut sums = vec![0i64; TASK_METRICS.len()];
        for task in stage.tasks.values() {
            let slot = match task.status {
                TaskStatus::Success => 0,
                TaskStatus::Failed => 1,
                TaskStatus::Killed => 2,
                TaskStatus::Running => 3,
            };
            tasks[slot] += 1;
            if task.status == TaskStatus::Running {
                continue;
            }
            if let Some(metrics) = &task.metrics {
                add_values(&mut sums, metrics);
            }
        }
        let skipped = stage.status == StageStatus::Skipped;
        rows.push(StageRow {
            app: Arc::clone(&key),
            query_id,
            stage_id: stage.id,
            attempt: stage.attempt,
            name: stage.name.clone(),
            status: stage.status.as_str(),
            num_tasks: stage.num_tasks,
            tasks,
            submission_time: stage.submission_time.filter(|_| !skipped),
            completion_time: stage.completion_time.filter(|_| !skipped),
            failure_reason: stage.failure_reason.clone(),
            sums,
        });
    }
    rows
}
