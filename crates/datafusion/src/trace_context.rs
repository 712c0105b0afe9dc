//! The span a query runs under: a program that traces its requests runs the query inside
//! [`in_trace`], and the query's end carries that parent to every listener (an
//! OpenTelemetry exporter makes the query's trace a child of it).

use std::future::Future;

use qprof_core::trace_parent::TraceParent;

tokio::task_local! {
    /// The parent span of the queries this task runs, if it has one.
    static TRACE_PARENT: TraceParent;
}

/// Runs `queries` (any future that runs queries through a profiler) with `parent` as the
/// parent span of each query it runs.
pub async fn in_trace<F: Future>(parent: TraceParent, queries: F) -> F::Output {
    TRACE_PARENT.scope(parent, queries).await
}

/// The parent span of a query starting on this task now, if any.
pub(crate) fn current() -> Option<TraceParent> {
    TRACE_PARENT.try_with(|p| *p).ok()
}
