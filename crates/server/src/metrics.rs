//! `/metrics`: the applications a history server holds, in Prometheus' text exposition
//! format: how many there are, their executors' memory peaks, their queries by status and
//! by duration, and what their tasks scanned and spilled.

use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;
use qprof_eventlog::AppState;
use qprof_eventlog::EXECUTOR_METRIC_NAMES;
use qprof_eventlog::{LiveState, RunningQuery};
use std::sync::atomic::AtomicU64;

use crate::acl::Audience;
use crate::api::ApiError;
use crate::store::LogStore;
use qprof_core::metric::saturating_i64;

type Labels = Vec<(String, String)>;

/// Label pairs, each value escaped as the text format wants it (`prometheus-client` writes
/// values as given): an id from a log cannot close its quotes or start a line.
fn labels(pairs: &[(&str, &str)]) -> Labels {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_string(), escape_label_value(v)))
        .collect()
}

/// `value` with the backslash, the double quote and the line feed escaped, as Prometheus'
/// text exposition format defines label values.
fn escape_label_value(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for c in value.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out
}

/// The metrics of every application attempt in `store`, and, for a running application's
/// own server, the gauges of its `live` state ([`crate::LiveSource`]), as Prometheus text.
///
/// # Errors
/// The log directory cannot be listed.
pub(crate) fn exposition(
    store: &LogStore,
    audience: &Audience,
    live: Option<&LiveState>,
) -> Result<String, ApiError> {
    let mut apps = store.list().map_err(ApiError::Log)?;
    apps.retain(|a| audience.may_view(&a.info));
    let applications = Family::<Labels, Gauge>::default();
    let peaks = Family::<Labels, Gauge>::default();
    let queries = Family::<Labels, Gauge>::default();
    let durations = Family::<Labels, Histogram>::new_with_constructor(|| {
        // 1 ms to about 16 minutes
        Histogram::new(exponential_buckets(0.001, 4.0, 11))
    });
    let scanned_bytes = Family::<Labels, Counter>::default();
    let scanned_rows = Family::<Labels, Counter>::default();
    let spilled_bytes = Family::<Labels, Counter>::default();
    for app in &apps {
        let status = if app.source.in_progress {
            "running"
        } else {
            "completed"
        };
        applications
            .get_or_create(&labels(&[("status", status)]))
            .inc();
        let Ok(replay) = store.replay(app) else {
            continue;
        };
        let id = app.id().to_string();
        let state = replay.state();
        add_app(
            &id,
            state,
            &peaks,
            &queries,
            &durations,
            [&scanned_bytes, &scanned_rows, &spilled_bytes],
        );
    }
    let mut registry = Registry::with_prefix("qprof");
    registry.register(
        "applications",
        "Application attempts in the log directory, by status",
        applications,
    );
    registry.register(
        "executor_peak_memory_bytes",
        "Peak of each executor memory metric over the executor's life (Spark's names)",
        peaks,
    );
    registry.register(
        "queries",
        "SQL executions of an application, by status",
        queries,
    );
    registry.register(
        "query_duration_seconds",
        "Duration of the finished SQL executions of an application",
        durations,
    );
    registry.register(
        "scanned_bytes",
        "Bytes the tasks of an application read from storage",
        scanned_bytes,
    );
    registry.register(
        "scanned_rows",
        "Rows the tasks of an application read from storage",
        scanned_rows,
    );
    registry.register(
        "spilled_bytes",
        "Bytes the tasks of an application spilled to disk",
        spilled_bytes,
    );
    if let Some(live) = live {
        register_live(&mut registry, live);
    }
    let mut text = String::new();
    encode(&mut text, &registry).map_err(|e| ApiError::Internal(e.to_string()))?;
    Ok(text)
}

/// Adds one application's figures; `totals` are the scanned bytes, scanned rows and
/// spilled bytes counters.
fn add_app(
    id: &str,
    state: &AppState,
    peaks: &Family<Labels, Gauge>,
    queries: &Family<Labels, Gauge>,
    durations: &Family<Labels, Histogram>,
    totals: [&Family<Labels, Counter>; 3],
) {
    for executor in &state.executors {
        let Some(values) = &executor.peaks else {
            continue;
        };
        for (name, value) in EXECUTOR_METRIC_NAMES.iter().zip(values) {
            if *value != 0 {
                peaks
                    .get_or_create(&labels(&[
                        ("app", id),
                        ("executor", &executor.id),
                        ("metric", name),
                    ]))
                    .set(*value);
            }
        }
    }
    for execution in state.executions.values() {
        let status = match (&execution.completion_time, &execution.error_message) {
            (None, _) => "running",
            (Some(_), Some(e)) if !e.is_empty() => "failed",
            (Some(_), _) => "succeeded",
        };
        queries
            .get_or_create(&labels(&[("app", id), ("status", status)]))
            .inc();
        if let Some(end) = execution.completion_time {
            let seconds = (end - execution.submission_time).max(0) as f64 / 1000.0;
            durations
                .get_or_create(&labels(&[("app", id)]))
                .observe(seconds);
        }
    }
    let [bytes, rows, spilled] = totals;
    let app = labels(&[("app", id)]);
    let metrics = state
        .stages
        .values()
        .flat_map(|s| s.tasks.values())
        .filter_map(|t| t.metrics.as_ref());
    for m in metrics {
        let add = |family: &Family<Labels, Counter>, v: i64| {
            family
                .get_or_create(&app)
                .inc_by(u64::try_from(v).unwrap_or(0));
        };
        add(bytes, m.input_bytes);
        add(rows, m.input_records);
        add(spilled, m.disk_bytes_spilled);
    }
}

/// The gauges of a running application: its running queries and their progress, and the
/// executor's memory now by region.
fn register_live(registry: &mut Registry, live: &LiveState) {
    let queries = Gauge::<i64>::default();
    queries.set(saturating_i64(live.running.len()));
    registry.register("live_running_queries", "Queries running now", queries);
    // one gauge per running query of what `read` reads
    let progress = |read: fn(&RunningQuery) -> f64| {
        let family = Family::<Labels, Gauge<f64, AtomicU64>>::default();
        for q in &live.running {
            let id = q.id.to_string();
            family
                .get_or_create(&labels(&[("query", &id)]))
                .set(read(q));
        }
        family
    };
    registry.register(
        "live_query_elapsed_seconds",
        "How long each running query has run",
        progress(|q| q.elapsed_millis as f64 * 1e-3),
    );
    registry.register(
        "live_query_progress_ratio",
        "The fraction of each running query's work done (below 1 until it ends)",
        progress(|q| q.progress),
    );
    // a query without a rate yet has no gauge of its time left
    let eta = Family::<Labels, Gauge<f64, AtomicU64>>::default();
    for q in &live.running {
        if let Some(millis) = q.eta_millis {
            eta.get_or_create(&labels(&[("query", &q.id.to_string())]))
                .set(millis as f64 * 1e-3);
        }
    }
    registry.register(
        "live_query_eta_seconds",
        "The time each running query has left at its recent rate",
        eta,
    );
    registry.register(
        "live_query_tasks_finished",
        "Tasks each running query has finished",
        progress(|q| q.tasks_finished as f64),
    );
    registry.register(
        "live_query_rows_scanned",
        "Rows each running query's scans have produced",
        progress(|q| q.rows_scanned as f64),
    );
    registry.register(
        "live_query_bytes_read",
        "Bytes each running query has read from storage",
        progress(|q| q.bytes_read as f64),
    );
    let memory = Family::<Labels, Gauge>::default();
    let m = &live.memory;
    for (region, bytes) in [
        ("heap", m.heap_bytes),
        ("execution", m.execution_bytes),
        ("storage", m.storage_bytes),
        ("file_mapped", m.file_mapped_bytes),
        ("rss", m.rss_bytes),
        ("virtual", m.virtual_bytes),
    ] {
        let value = saturating_i64(bytes);
        memory
            .get_or_create(&labels(&[("region", region)]))
            .set(value);
    }
    registry.register(
        "live_memory_bytes",
        "The executor's memory now, by region",
        memory,
    );
    if let Some(export) = &live.trace_export {
        let spans = Family::<Labels, Gauge>::default();
        for (outcome, count) in [
            ("exported", export.exported_spans),
            ("queued", export.queued_spans),
            ("dropped", export.dropped_spans),
        ] {
            spans
                .get_or_create(&labels(&[("outcome", outcome)]))
                .set(saturating_i64(count));
        }
        registry.register(
            "live_trace_spans",
            "Spans of the run's OpenTelemetry traces, by outcome",
            spans,
        );
        let failed = Gauge::<i64>::default();
        failed.set(saturating_i64(export.failed_exports));
        registry.register(
            "live_trace_failed_exports",
            "Batches of spans the OpenTelemetry collector did not accept",
            failed,
        );
    }
}
