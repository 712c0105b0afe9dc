//! The exporter as a listener of the event bus: each query's end becomes one trace.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use opentelemetry::{InstrumentationScope, KeyValue};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::trace::RandomIdGenerator;
use qprof_core::events::{Event, Listener, ListenerError};

use crate::OtlpError;
use crate::config::OtlpConfig;
use crate::export::{ExportStatus, Exporter, WarningSink};
use crate::spans::{AppFacts, query_spans};

/// Sends a trace of every query that ends to an OpenTelemetry collector over OTLP.
///
/// Register it on a profiler (`profiler.add_listener(Arc::new(OtlpListener::from_env()?))`)
/// or on any event bus. Export never blocks or fails a query: a query's spans wait in a
/// bounded queue and are sent in batches by a thread of the listener's own; the
/// application's end waits (within a deadline) until what is queued was sent, and dropping
/// the listener sends what is left and stops the thread.
#[derive(Debug)]
pub struct OtlpListener {
    exporter: Arc<Exporter>,
    app: Mutex<AppFacts>,
    ids: RandomIdGenerator,
    scope: InstrumentationScope,
    /// Whether the application's end waits for the queue to drain (not for a sibling,
    /// whose exporter serves other applications that go on).
    flush_at_end: bool,
    flush_timeout: Duration,
}

impl OtlpListener {
    /// A listener configured by OpenTelemetry's variables (`OTEL_EXPORTER_OTLP_*`,
    /// `OTEL_SERVICE_NAME`, `OTEL_RESOURCE_ATTRIBUTES`); its one warning goes to stderr.
    ///
    /// # Errors
    /// A variable that makes no sense, or an exporter that cannot be built.
    pub fn from_env() -> Result<OtlpListener, OtlpError> {
        OtlpListener::new(&OtlpConfig::from_env()?)
    }

    /// A listener exporting as `config` says; its one warning goes to stderr.
    ///
    /// # Errors
    /// As [`OtlpListener::from_env`].
    pub fn new(config: &OtlpConfig) -> Result<OtlpListener, OtlpError> {
        OtlpListener::with_warnings(
            config,
            Arc::new(|line: &str| eprintln!("qprof: warning: {line}")),
        )
    }

    /// A listener exporting as `config` says, its one warning (a collector that cannot be
    /// reached) given to `warn`.
    ///
    /// # Errors
    /// As [`OtlpListener::from_env`].
    pub fn with_warnings(
        config: &OtlpConfig,
        warn: WarningSink,
    ) -> Result<OtlpListener, OtlpError> {
        Ok(OtlpListener {
            exporter: Arc::new(Exporter::start(config, resource(), warn)?),
            app: Mutex::default(),
            ids: RandomIdGenerator::default(),
            scope: InstrumentationScope::builder("qprof")
                .with_version(env!("CARGO_PKG_VERSION"))
                .build(),
            flush_at_end: true,
            flush_timeout: config.shutdown_timeout,
        })
    }

    /// A listener for another application's bus (a cluster scheduler's client sessions)
    /// that sends through this one's exporter and queue. Its application's end does not
    /// wait for the queue: the exporter goes on for the others, and sends what is queued
    /// when the last listener sharing it is dropped.
    pub fn sibling(&self) -> OtlpListener {
        OtlpListener {
            exporter: Arc::clone(&self.exporter),
            app: Mutex::default(),
            ids: RandomIdGenerator::default(),
            scope: self.scope.clone(),
            flush_at_end: false,
            flush_timeout: self.flush_timeout,
        }
    }

    /// What the exporter has done so far.
    pub fn status(&self) -> ExportStatus {
        self.exporter.status()
    }

    /// Waits until the traces of the queries that ended so far were sent (or failed), at
    /// most `timeout`; returns whether they were.
    pub fn flush(&self, timeout: Duration) -> bool {
        self.exporter.flush(timeout)
    }

    /// Sends what is queued, within the configured deadline, and stops exporting (for
    /// every sibling too).
    pub fn shutdown(&self) {
        self.exporter.shutdown();
    }
}

/// The resource: OpenTelemetry's detectors (`OTEL_SERVICE_NAME`,
/// `OTEL_RESOURCE_ATTRIBUTES`), the service named `qprof` where they name none.
fn resource() -> Resource {
    let detected = Resource::builder().build();
    let unnamed = detected
        .get(&opentelemetry::Key::from_static_str("service.name"))
        .is_none_or(|name| name.as_str().starts_with("unknown_service"));
    if unnamed {
        Resource::builder()
            .with_attributes([KeyValue::new("service.name", "qprof")])
            .build()
    } else {
        detected
    }
}

impl Listener for OtlpListener {
    fn on_event(&self, event: &Event) -> Result<(), ListenerError> {
        match event {
            Event::AppStart(info) => {
                *self.app.lock().unwrap_or_else(PoisonError::into_inner) = AppFacts {
                    engine: info.engine.clone(),
                    name: info.name.clone(),
                };
            }
            Event::QueryEnd(end) => {
                let began = Instant::now();
                let app = self
                    .app
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .clone();
                let spans = query_spans(end, &app, &self.ids, &self.scope);
                let built = u64::try_from(began.elapsed().as_nanos()).unwrap_or(u64::MAX);
                self.exporter.submit(spans, built);
            }
            Event::AppEnd(_) if self.flush_at_end => {
                self.exporter.flush(self.flush_timeout);
            }
            _ => {}
        }
        Ok(())
    }

    fn name(&self) -> &str {
        "OpenTelemetry exporter"
    }
}
