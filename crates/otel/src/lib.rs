//! OpenTelemetry traces of qprof's queries, sent over OTLP (gRPC or HTTP/protobuf) with
//! OpenTelemetry's own exporter.
//!
//! [`OtlpListener`] listens on a profiler's event bus and turns each query's end into one
//! trace: the query's span (its SQL as `db.query.text`, rows, status, the advisor's
//! findings as events) → its planning (a span per phase and per analyzer, optimizer and
//! physical-optimizer rule) → a span per stage → per task → per operator in each task
//! that ran it, an operator's parent being its parent operator's span in the same task.
//! Each operator's span carries that task's value of each of its metrics, named
//! `qprof.` and the metric's catalog name. A query run under a caller's span
//! (`qprof_core::events::QueryEnd::trace_parent`) is a child of it.
//!
//! Export never blocks or fails a query: spans wait in a bounded queue, a thread sends
//! them in batches, a collector that cannot be reached is reported once and counted
//! ([`ExportStatus`]), and shutting down sends what is queued within a deadline.

mod config;
mod export;
mod listener;
mod spans;

pub use config::{
    DEFAULT_BATCH_SPANS, DEFAULT_QUEUE_SPANS, DEFAULT_SHUTDOWN_TIMEOUT, OtlpConfig, OtlpProtocol,
};
pub use export::{ExportStatus, WarningSink};
pub use listener::OtlpListener;
pub use spans::ATTRIBUTE_PREFIX;

/// Why traces cannot be exported.
#[derive(Debug, thiserror::Error)]
pub enum OtlpError {
    /// A setting or variable that makes no sense.
    #[error("{0}")]
    Config(String),
    /// The exporter's thread or runtime could not start.
    #[error("the OpenTelemetry exporter could not start: {0}")]
    Start(String),
}
