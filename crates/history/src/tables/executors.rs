//! `qprof.executors`: one row per executor (and the driver), with the peaks of Spark's
//! executor metrics over its life.

use std::sync::{Arc, LazyLock};

use qprof_eventlog::{EXECUTOR_METRIC_NAMES, Executor};

use super::{AppKey, RowSource, RowTable, app_columns};
use crate::columns::{Column, int, snake_case, text, time};

/// An executor's row: the application's key and the executor as the log left it.
#[derive(Debug)]
pub(crate) struct ExecutorRow {
    app: Arc<AppKey>,
    executor: Executor,
}

of_app!(ExecutorRow);

/// The unit of one of Spark's executor metrics, by its name's end.
fn peak_unit(name: &str) -> &'static str {
    if name.ends_with("Count") {
        "count"
    } else if name.ends_with("Time") {
        "ms"
    } else {
        "bytes"
    }
}

/// The column of one of Spark's executor metrics' peaks: `JVMHeapMemory` as
/// `peak_jvm_heap_memory`.
pub(crate) fn peak_column_name(metric: &str) -> String {
    format!("peak_{}", snake_case(metric))
}

static COLUMNS: LazyLock<Vec<Column<ExecutorRow>>> = LazyLock::new(|| {
    let mut columns = app_columns();
    columns.extend([
        text("executor_id", |e: &ExecutorRow| {
            Some(e.executor.id.as_str())
        })
        .about("The executor's id ('driver' for the driver).", None),
        text("host", |e: &ExecutorRow| Some(e.executor.host.as_str())).about("Its host.", None),
        int("total_cores", |e: &ExecutorRow| {
            Some(e.executor.total_cores)
        })
        .about("The cores it offered.", Some("count")),
        time("add_time", |e: &ExecutorRow| Some(e.executor.add_time))
            .about("When it was added.", None),
        time("remove_time", |e: &ExecutorRow| e.executor.remove_time)
            .about("When it was removed; null while it lives.", None),
        text("remove_reason", |e: &ExecutorRow| {
            e.executor.remove_reason.as_deref()
        })
        .about("Why it was removed.", None),
        int("max_memory_bytes", |e: &ExecutorRow| {
            e.executor.max_memory.map(|m| m.0)
        })
        .about("Its storage memory, on and off heap.", Some("bytes")),
    ]);
    for (i, metric) in EXECUTOR_METRIC_NAMES.iter().enumerate() {
        columns.push(
            int(&peak_column_name(metric), move |e: &ExecutorRow| {
                e.executor.peaks.map(|p| p[i])
            })
            .about(
                &format!("The peak of Spark's executor metric {metric} over its life."),
                Some(peak_unit(metric)),
            ),
        );
    }
    columns
});

/// `qprof.executors`.
pub(crate) static TABLE: RowTable<ExecutorRow> = RowTable {
    name: "executors",
    about: "One row per executor (and the driver), with the peaks of Spark's executor metrics over its life.",
    needs_replay: true,
    columns: &COLUMNS,
    rows,
};

/// An application's rows.
fn rows(source: &RowSource<'_>) -> Vec<ExecutorRow> {
    let app = &source.app;
    let key = Arc::clone(&source.key);
    app.state()
        .map(|s| s.executors.iter())
        .into_iter()
        .flatten()
        .map(|executor| ExecutorRow {
            app: Arc::clone(&key),
            executor: executor.clone(),
        })
        .collect()
}
