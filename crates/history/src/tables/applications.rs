//! `qprof.applications`: one row per application attempt, from the index alone (no log
//! is replayed to answer it).

use std::sync::LazyLock;

use qprof_server::store::ListedApp;

use super::{RowSource, RowTable, attempt_id};
use crate::columns::{Column, boolean, int, text, time};

static COLUMNS: LazyLock<Vec<Column<ListedApp>>> = LazyLock::new(|| {
    vec![
        text("app_id", |a: &ListedApp| Some(a.id())).about("The application id.", None),
        text("attempt_id", |a: &ListedApp| attempt_id(a))
            .about("The attempt id, for applications with attempts.", None),
        text("name", |a: &ListedApp| a.info.name.as_deref()).about("The application's name.", None),
        text("user", |a: &ListedApp| a.info.user.as_deref()).about("The user who ran it.", None),
        text("spark_version", |a: &ListedApp| {
            a.info.spark_version.as_deref()
        })
        .about(
            "The Spark version its log declares (qprof's logs declare the version they follow).",
            None,
        ),
        time("start_time", |a: &ListedApp| a.info.start_time).about("When it started.", None),
        time("end_time", |a: &ListedApp| a.info.end_time)
            .about("When it ended; null while it runs.", None),
        time("last_updated", |a: &ListedApp| Some(a.last_updated))
            .about("The last change of its log's files.", None),
        boolean("completed", |a: &ListedApp| Some(!a.source.in_progress)).about(
            "Whether its log is complete (false while the application runs, or if it died).",
            None,
        ),
        int("exit_code", |a: &ListedApp| a.info.exit_code)
            .about("The exit code it ended with, when logged.", None),
        text("log_name", |a: &ListedApp| Some(a.source.name.as_str()))
            .about("Its log's entry in the log directory.", None),
        int("log_bytes", |a: &ListedApp| {
            Some(a.source.files.iter().map(|f| f.len).sum::<u64>() as i64)
        })
        .about("The size of its log's files.", Some("bytes")),
    ]
});

/// `qprof.applications`.
pub(crate) static TABLE: RowTable<ListedApp> = RowTable {
    name: "applications",
    about: "One row per application attempt, from the log directory's index: no log is read.",
    needs_replay: false,
    columns: &COLUMNS,
    rows,
};

/// An application's rows.
fn rows(source: &RowSource<'_>) -> Vec<ListedApp> {
    let app = &source.app;
    vec![app.listed.clone()]
}
