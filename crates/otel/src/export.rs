//! Sending spans without ever holding up a query: a bounded queue that a query's spans
//! enter whole or not at all, and one thread, with a small runtime of its own, that sends
//! them in batches through OpenTelemetry's OTLP exporter. A collector that is down is
//! reported once and counted; shutting down sends what is queued, within a deadline.

use std::collections::VecDeque;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError, mpsc};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use opentelemetry_otlp::{Protocol, WithExportConfig};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::trace::{SpanData, SpanExporter as _};

use crate::OtlpError;
use crate::config::{OtlpConfig, OtlpProtocol};

/// Where the exporter's one warning goes (a collector that cannot be reached).
pub type WarningSink = Arc<dyn Fn(&str) + Send + Sync>;

/// What the exporter has done so far.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExportStatus {
    /// The collector's address, as configured (`None`: from the environment or default).
    pub endpoint: Option<String>,
    /// The protocol's name.
    pub protocol: String,
    /// Spans the collector accepted.
    pub exported_spans: u64,
    /// Spans waiting in the queue or being sent.
    pub queued_spans: u64,
    /// Spans dropped: their query did not fit in the queue, or their batch failed.
    pub dropped_spans: u64,
    /// Batches the collector did not accept (or could not be reached for).
    pub failed_exports: u64,
    /// The last failure, on one line.
    pub last_error: Option<String>,
    /// Queries whose spans were built.
    pub traces: u64,
    /// Time spent building spans on the threads that ended the queries (ns).
    pub build_nanos: u64,
    /// Time the exporter's thread spent sending (ns).
    pub send_nanos: u64,
}

#[derive(Debug, Default)]
struct Queue {
    /// Each query's spans, oldest first.
    traces: VecDeque<Vec<SpanData>>,
    spans: usize,
    /// Spans the thread is sending now.
    sending: usize,
    closed: bool,
    status: ExportStatus,
}

#[derive(Debug, Default)]
struct Shared {
    queue: Mutex<Queue>,
    /// Wakes the thread: spans arrived, or the queue closed.
    arrived: Condvar,
    /// Wakes flushers: a batch was sent.
    sent: Condvar,
}

impl Shared {
    fn queue(&self) -> MutexGuard<'_, Queue> {
        self.queue.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The queue and its sending thread.
pub(crate) struct Exporter {
    shared: Arc<Shared>,
    capacity: usize,
    shutdown_timeout: Duration,
    thread: Mutex<Option<JoinHandle<()>>>,
}

impl std::fmt::Debug for Exporter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Exporter")
            .field("capacity", &self.capacity)
            .finish_non_exhaustive()
    }
}

impl Exporter {
    /// Starts the sending thread with an OTLP exporter built as `config` says.
    pub(crate) fn start(
        config: &OtlpConfig,
        resource: Resource,
        warn: WarningSink,
    ) -> Result<Exporter, OtlpError> {
        let endpoint = config.exporter_endpoint()?;
        let shared = Arc::new(Shared::default());
        {
            let mut queue = shared.queue();
            queue.status.endpoint = config.endpoint.clone();
            queue.status.protocol = config.protocol.as_str().to_string();
        }
        let (ready, started) = mpsc::channel();
        let protocol = config.protocol;
        let batch = config.batch_spans.max(1);
        let thread_shared = Arc::clone(&shared);
        let thread = std::thread::Builder::new()
            .name("qprof-otlp".into())
            .spawn(move || {
                let runtime = match tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                {
                    Ok(runtime) => runtime,
                    Err(e) => {
                        let _ = ready.send(Err(OtlpError::Start(e.to_string())));
                        return;
                    }
                };
                // the clients need the runtime while they are built and while they send
                let built = runtime.block_on(async { build(protocol, endpoint) });
                let mut exporter = match built {
                    Ok(exporter) => exporter,
                    Err(e) => {
                        let _ = ready.send(Err(e));
                        return;
                    }
                };
                exporter.set_resource(&resource);
                let _ = ready.send(Ok(()));
                send_loop(&thread_shared, &runtime, &exporter, batch, &warn);
                let _ = exporter.shutdown();
            })
            .map_err(|e| OtlpError::Start(e.to_string()))?;
        started
            .recv()
            .map_err(|_| OtlpError::Start("the exporter thread ended while starting".into()))??;
        Ok(Exporter {
            shared,
            capacity: config.queue_spans,
            shutdown_timeout: config.shutdown_timeout,
            thread: Mutex::new(Some(thread)),
        })
    }

    /// Queues one query's spans, whole; drops them (counted) if they do not fit or the
    /// exporter is shut down. Never waits for the collector.
    pub(crate) fn submit(&self, spans: Vec<SpanData>, build_nanos: u64) {
        if spans.is_empty() {
            return;
        }
        let mut queue = self.shared.queue();
        queue.status.traces += 1;
        queue.status.build_nanos += build_nanos;
        if queue.closed || queue.spans + queue.sending + spans.len() > self.capacity {
            queue.status.dropped_spans += spans.len() as u64;
            return;
        }
        queue.spans += spans.len();
        queue.traces.push_back(spans);
        drop(queue);
        self.shared.arrived.notify_one();
    }

    /// Waits until everything queued before the call was sent (or failed), at most
    /// `timeout`; returns whether it was.
    pub(crate) fn flush(&self, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        let mut queue = self.shared.queue();
        // spans queued now leave in order: wait until as many have been handled
        let target = handled(&queue.status) + (queue.spans + queue.sending) as u64;
        while handled(&queue.status) < target {
            let now = Instant::now();
            if now >= deadline || queue.closed && queue.spans == 0 && queue.sending == 0 {
                break;
            }
            queue = self
                .shared
                .sent
                .wait_timeout(queue, deadline - now)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
        handled(&queue.status) >= target
    }

    /// What the exporter has done so far.
    pub(crate) fn status(&self) -> ExportStatus {
        let queue = self.shared.queue();
        ExportStatus {
            queued_spans: (queue.spans + queue.sending) as u64,
            ..queue.status.clone()
        }
    }

    /// Sends what is queued (within the shutdown deadline), then stops the thread; what
    /// could not be sent in time is counted as dropped. Later spans are dropped.
    pub(crate) fn shutdown(&self) {
        let Some(thread) = self
            .thread
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
        else {
            return;
        };
        self.flush(self.shutdown_timeout);
        {
            let mut queue = self.shared.queue();
            queue.closed = true;
            let left = queue.spans as u64;
            queue.status.dropped_spans += left;
            queue.traces.clear();
            queue.spans = 0;
        }
        self.shared.arrived.notify_all();
        // a batch still being sent ends within the exporter's own timeout
        let _ = thread.join();
    }
}

impl Drop for Exporter {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// Spans sent or dropped while queued: every span that left the queue is one or the other.
fn handled(status: &ExportStatus) -> u64 {
    status.exported_spans + status.dropped_spans
}

fn build(
    protocol: OtlpProtocol,
    endpoint: Option<String>,
) -> Result<opentelemetry_otlp::SpanExporter, OtlpError> {
    let built = match protocol {
        OtlpProtocol::Grpc => {
            let builder = opentelemetry_otlp::SpanExporter::builder().with_tonic();
            match endpoint {
                Some(e) => builder.with_endpoint(e).build(),
                None => builder.build(),
            }
        }
        OtlpProtocol::HttpProtobuf => {
            let builder = opentelemetry_otlp::SpanExporter::builder()
                .with_http()
                .with_protocol(Protocol::HttpBinary);
            match endpoint {
                Some(e) => builder.with_endpoint(e).build(),
                None => builder.build(),
            }
        }
    };
    built.map_err(|e| OtlpError::Config(e.to_string()))
}

/// The thread's work: take up to `batch` spans (whole queries, at least one), send them,
/// count the outcome; until the queue is closed and empty.
fn send_loop(
    shared: &Shared,
    runtime: &tokio::runtime::Runtime,
    exporter: &opentelemetry_otlp::SpanExporter,
    batch: usize,
    warn: &WarningSink,
) {
    loop {
        let spans = {
            let mut queue = shared.queue();
            while queue.traces.is_empty() && !queue.closed {
                queue = shared
                    .arrived
                    .wait(queue)
                    .unwrap_or_else(PoisonError::into_inner);
            }
            if queue.traces.is_empty() {
                return;
            }
            let mut spans = Vec::new();
            while let Some(next) = queue.traces.front() {
                if !spans.is_empty() && spans.len() + next.len() > batch {
                    break;
                }
                let next = queue.traces.pop_front().unwrap_or_default();
                spans.extend(next);
            }
            queue.spans -= spans.len();
            queue.sending = spans.len();
            spans
        };
        let count = spans.len() as u64;
        let began = Instant::now();
        let outcome = runtime.block_on(exporter.export(spans));
        let took = u64::try_from(began.elapsed().as_nanos()).unwrap_or(u64::MAX);
        let mut queue = shared.queue();
        queue.sending = 0;
        queue.status.send_nanos += took;
        match outcome {
            Ok(()) => queue.status.exported_spans += count,
            Err(error) => {
                let first = queue.status.failed_exports == 0;
                queue.status.failed_exports += 1;
                queue.status.dropped_spans += count;
                let line = error.to_string().replace('\n', " ");
                queue.status.last_error = Some(line.clone());
                if first {
                    let to = queue
                        .status
                        .endpoint
                        .clone()
                        .unwrap_or_else(|| "the collector".to_string());
                    drop(queue);
                    warn(&format!(
                        "OpenTelemetry export to {to} failed ({line}); later failures are counted, not reported"
                    ));
                    queue = shared.queue();
                }
            }
        }
        drop(queue);
        shared.sent.notify_all();
    }
}
