//! `qprof.tasks`: one row per task attempt, as Spark's task list gives it.

use std::sync::{Arc, LazyLock};

use super::task_metrics::{TaskMetricValues, task_metric_columns, values_of};
use super::{AppKey, RowSource, RowTable, app_columns};
use crate::columns::{Column, boolean, int, text, time};

/// A task attempt's row.
#[derive(Debug)]
pub(crate) struct TaskRow {
    app: Arc<AppKey>,
    query_id: Option<i64>,
    stage_id: i64,
    stage_attempt: i64,
    task_id: i64,
    index: i64,
    attempt: i64,
    partition: i64,
    executor_id: String,
    host: String,
    locality: String,
    speculative: bool,
    status: &'static str,
    launch_time: i64,
    finish_time: Option<i64>,
    scheduler_delay_ms: Option<i64>,
    error: Option<String>,
    values: Option<Vec<i64>>,
}

of_app!(TaskRow);

impl TaskMetricValues for TaskRow {
    fn task_metrics(&self) -> Option<&[i64]> {
        self.values.as_deref()
    }
}

static COLUMNS: LazyLock<Vec<Column<TaskRow>>> = LazyLock::new(|| {
    let mut columns = app_columns();
    columns.extend([
        int("query_id", |t: &TaskRow| t.query_id)
            .about("The query whose job ran its stage; null outside SQL.", None),
        int("stage_id", |t: &TaskRow| Some(t.stage_id)).about("Its stage.", None),
        int("stage_attempt", |t: &TaskRow| Some(t.stage_attempt))
            .about("Its stage's attempt.", None),
        int("task_id", |t: &TaskRow| Some(t.task_id))
            .about("The task's id, unique in its application.", None),
        int("index", |t: &TaskRow| Some(t.index)).about("Its index in its stage.", None),
        int("attempt", |t: &TaskRow| Some(t.attempt)).about("Its attempt number.", None),
        int("partition", |t: &TaskRow| Some(t.partition))
            .about("The partition it computed.", None),
        text("executor_id", |t: &TaskRow| Some(t.executor_id.as_str()))
            .about("The executor that ran it.", None),
        text("host", |t: &TaskRow| Some(t.host.as_str())).about("Its executor's host.", None),
        text("locality", |t: &TaskRow| Some(t.locality.as_str()))
            .about("Its locality level.", None),
        boolean("speculative", |t: &TaskRow| Some(t.speculative))
            .about("Whether it was a speculative copy.", None),
        text("status", |t: &TaskRow| Some(t.status))
            .about("RUNNING, SUCCESS, FAILED or KILLED.", None),
        time("launch_time", |t: &TaskRow| Some(t.launch_time))
            .about("When it was launched.", None),
        time("finish_time", |t: &TaskRow| t.finish_time)
            .about("When it ended; null while it runs.", None),
        int("duration_ms", |t: &TaskRow| {
            Some(t.finish_time?.saturating_sub(t.launch_time))
        })
        .about("From its launch to its end.", Some("ms")),
        int("scheduler_delay_ms", |t: &TaskRow| t.scheduler_delay_ms).about(
            "Its time not spent deserializing, running, serializing or fetching its result (Spark's estimate).",
            Some("ms"),
        ),
        text("error", |t: &TaskRow| t.error.as_deref()).about("Why it failed.", None),
    ]);
    columns.extend(task_metric_columns(false));
    columns
});

/// `qprof.tasks`.
pub(crate) static TABLE: RowTable<TaskRow> = RowTable {
    name: "tasks",
    about: "One row per task attempt, with Spark's task metrics.",
    needs_replay: true,
    columns: &COLUMNS,
    rows,
};

/// An application's rows.
fn rows(source: &RowSource<'_>) -> Vec<TaskRow> {
    let app = &source.app;
    let selection = source.selection;
    let key = Arc::clone(&source.key);
    let mut rows = Vec::new();
    for (query_id, stage) in app.stages(selection) {
        for task in stage.tasks.values() {
            let ended = task.duration().is_some();
            rows.push(TaskRow {
                app: Arc::clone(&key),
                query_id,
                stage_id: stage.id,
                stage_attempt: stage.attempt,
                task_id: task.id,
                index: task.index,
                attempt: task.attempt,
                partition: task.partition,
                executor_id: task.executor_id.clone(),
                host: task.host.clone(),
                locality: task.locality.clone(),
                speculative: task.speculative,
                status: task.status.as_str(),
                launch_time: task.launch_time,
                finish_time: ended.then_some(task.finish_time),
                scheduler_delay_ms: ended.then(|| task.scheduler_delay()),
                error: task.error_message.clone(),
                values: task.metrics.as_ref().map(values_of),
            });
        }
    }
    rows
}
