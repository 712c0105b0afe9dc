//! Traces to an OpenTelemetry collector: the `--otlp-*` options, OpenTelemetry's
//! variables, and `TRACEPARENT`, the span a run's queries become children of.

use std::future::Future;
use std::sync::Arc;

use anyhow::{Context, Result};
use clap::Args;
use qprof_core::trace_parent::TraceParent;
use qprof_otel::{OtlpConfig, OtlpListener, OtlpProtocol};

/// Where a command's queries' traces go.
#[derive(Debug, Args)]
pub(crate) struct OtlpOptions {
    /// Send a trace of each query (planning, stages, tasks, operators) to the OpenTelemetry
    /// collector at this base address, e.g. http://127.0.0.1:4318 (default: none, unless
    /// OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is set).
    #[arg(long, value_name = "URL")]
    pub otlp_endpoint: Option<String>,
    /// The protocol the collector speaks (default: OTEL_EXPORTER_OTLP_PROTOCOL, else
    /// http/protobuf).
    #[arg(long, value_name = "PROTOCOL", value_parser = parse_protocol)]
    pub otlp_protocol: Option<OtlpProtocol>,
}

fn parse_protocol(value: &str) -> Result<OtlpProtocol, String> {
    value
        .parse()
        .map_err(|e: qprof_otel::OtlpError| e.to_string())
}

impl OtlpOptions {
    /// The exporter these options and the environment ask for, if any.
    pub(crate) fn listener(&self) -> Result<Option<OtlpListener>> {
        let from_env = [
            "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
            "OTEL_EXPORTER_OTLP_ENDPOINT",
        ]
        .iter()
        .any(|v| std::env::var(v).is_ok_and(|v| !v.trim().is_empty()));
        if self.otlp_endpoint.is_none() && !from_env {
            return Ok(None);
        }
        let mut config = OtlpConfig::from_env()?;
        if let Some(protocol) = self.otlp_protocol {
            config = config.with_protocol(protocol);
        }
        if let Some(endpoint) = &self.otlp_endpoint {
            config = config.with_endpoint(endpoint.clone());
        }
        let listener = OtlpListener::new(&config).context("cannot export traces")?;
        Ok(Some(listener))
    }
}

/// The span `TRACEPARENT` names, if it is set.
pub(crate) fn trace_parent() -> Result<Option<TraceParent>> {
    match std::env::var("TRACEPARENT") {
        Ok(value) if !value.trim().is_empty() => Ok(Some(
            value
                .parse()
                .context("TRACEPARENT is not a W3C traceparent")?,
        )),
        _ => Ok(None),
    }
}

/// Registers `listener` on `profiler`'s bus.
pub(crate) fn export_traces(
    profiler: &qprof_datafusion::Profiler,
    listener: OtlpListener,
) -> Result<Arc<OtlpListener>> {
    let listener = Arc::new(listener);
    profiler
        .add_listener(Arc::clone(&listener) as _)
        .map_err(|f| anyhow::anyhow!("{}", f.message))
        .context("cannot export traces")?;
    Ok(listener)
}

/// Runs `queries` under `parent`, if there is one.
pub(crate) async fn in_trace<F: Future>(parent: Option<TraceParent>, queries: F) -> F::Output {
    match parent {
        Some(parent) => qprof_datafusion::in_trace(parent, queries).await,
        None => queries.await,
    }
}
