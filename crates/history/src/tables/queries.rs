//! `qprof.queries`: one row per SQL execution (a query), as Spark logs it, with qprof's
//! profile's facts where the log carries one.

use std::sync::{Arc, LazyLock};

use qprof_eventlog::Execution;

use super::{AppKey, RowSource, RowTable, app_columns};
use crate::columns::{Column, int, saturating, text, time};

/// A query's row.
#[derive(Debug)]
pub(crate) struct QueryRow {
    app: Arc<AppKey>,
    id: i64,
    description: String,
    status: &'static str,
    submission_time: i64,
    completion_time: Option<i64>,
    error: Option<String>,
    spark_query_id: Option<String>,
    jobs: i64,
    profile: Option<ProfileFacts>,
}

/// What a query's qprof profile adds to its row.
#[derive(Debug)]
struct ProfileFacts {
    sql: String,
    rows: i64,
    duration_nanos: i64,
    operators: i64,
    findings: i64,
    pool_peak_bytes: Option<i64>,
    pool_limit_bytes: Option<i64>,
}

of_app!(QueryRow);

static COLUMNS: LazyLock<Vec<Column<QueryRow>>> = LazyLock::new(|| {
    let mut columns = app_columns();
    columns.extend([
        int("query_id", |q: &QueryRow| Some(q.id))
            .about("The query's SQL execution id in its application.", None),
        text("description", |q: &QueryRow| Some(q.description.as_str())).about(
            "Its short description (qprof's: the query's name or its SQL's start).",
            None,
        ),
        text("status", |q: &QueryRow| Some(q.status)).about("RUNNING, COMPLETED or FAILED.", None),
        time("submission_time", |q: &QueryRow| Some(q.submission_time))
            .about("When it was submitted.", None),
        time("completion_time", |q: &QueryRow| q.completion_time)
            .about("When it ended; null while it runs.", None),
        int("duration_ms", |q: &QueryRow| {
            q.completion_time
                .map(|c| c.saturating_sub(q.submission_time))
        })
        .about("From its submission to its end.", Some("ms")),
        text("error", |q: &QueryRow| q.error.as_deref()).about("Why it failed.", None),
        text("spark_query_id", |q: &QueryRow| q.spark_query_id.as_deref())
            .about("Spark's query id (a UUID), when logged.", None),
        int("jobs", |q: &QueryRow| Some(q.jobs)).about("The jobs it ran.", None),
        text("sql", |q: &QueryRow| {
            q.profile.as_ref().map(|p| p.sql.as_str())
        })
        .about("Its SQL text (qprof's profile).", None)
        .needing_profile(),
        int("rows", |q: &QueryRow| q.profile.as_ref().map(|p| p.rows))
            .about("The rows it returned (qprof's profile).", Some("rows"))
            .needing_profile(),
        int("duration_nanos", |q: &QueryRow| {
            q.profile.as_ref().map(|p| p.duration_nanos)
        })
        .about("Its execution's wall time (qprof's profile).", Some("ns"))
        .needing_profile(),
        int("operators", |q: &QueryRow| {
            q.profile.as_ref().map(|p| p.operators)
        })
        .about("The operators of its plan (qprof's profile).", None)
        .needing_profile(),
        int("findings", |q: &QueryRow| {
            q.profile.as_ref().map(|p| p.findings)
        })
        .about("The advisor's findings about it (qprof's profile).", None)
        .needing_profile(),
        int("memory_pool_peak_bytes", |q: &QueryRow| {
            q.profile.as_ref().and_then(|p| p.pool_peak_bytes)
        })
        .about(
            "The memory pool's peak while it ran (qprof's profile).",
            Some("bytes"),
        )
        .needing_profile(),
        int("memory_pool_limit_bytes", |q: &QueryRow| {
            q.profile.as_ref().and_then(|p| p.pool_limit_bytes)
        })
        .about(
            "The memory pool's limit, if it had one (qprof's profile).",
            Some("bytes"),
        )
        .needing_profile(),
    ]);
    columns
});

/// `qprof.queries`.
pub(crate) static TABLE: RowTable<QueryRow> = RowTable {
    name: "queries",
    about: "One row per SQL execution (query): Spark's SQL events, with qprof's profile's facts where the log carries one.",
    needs_replay: true,
    columns: &COLUMNS,
    rows,
};

/// An application's rows.
fn rows(source: &RowSource<'_>) -> Vec<QueryRow> {
    let app = &source.app;
    let selection = source.selection;
    let key = Arc::clone(&source.key);
    let with_profile = source.with_profile;
    app.executions(selection)
        .map(|e| QueryRow {
            app: Arc::clone(&key),
            id: e.id,
            description: e.description.clone(),
            status: e.status(),
            submission_time: e.submission_time,
            completion_time: e.completion_time,
            error: e.error_message.clone().filter(|m| !m.is_empty()),
            spark_query_id: e.query_id.clone(),
            jobs: e.job_ids.len() as i64,
            profile: with_profile.then(|| facts(e)).flatten(),
        })
        .collect()
}

/// The profile's facts of `execution`, if its log carries a profile this qprof reads
/// (its summary: the operators' metrics are not built).
fn facts(execution: &Execution) -> Option<ProfileFacts> {
    let summary = execution.qprof_profile_summary()?.ok()?;
    Some(ProfileFacts {
        rows: saturating(summary.rows),
        duration_nanos: saturating(summary.duration_nanos),
        operators: summary.operators() as i64,
        findings: summary.findings() as i64,
        pool_peak_bytes: summary.memory_pool.map(|p| saturating(p.peak_bytes)),
        pool_limit_bytes: summary
            .memory_pool
            .and_then(|p| p.limit_bytes)
            .map(saturating),
        sql: summary.sql,
    })
}
