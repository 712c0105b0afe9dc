//! `--ui`: the web UI, Spark's REST API and `/metrics` of a run, served while it runs.
//!
//! The server is the history server's, over the run's own event log: the log writer and
//! this UI hear the same bus, so each query appears there as soon as it ends. What the log
//! cannot have yet comes from the run's profiler: the queries running now, as the Spark
//! events they would have sent so far (their execution and job, active stages, ended
//! tasks), added to the log's replay on each request; their live counters and the
//! executor's memory now through `/qprof/v1/live`. The server never runs a query.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context, Result};
use qprof_core::clock::epoch_millis;
use qprof_datafusion::Profiler;
use qprof_eventlog::EventLogListener;
use qprof_eventlog::MemoryJson;
use qprof_eventlog::{IdCounters, QueryRecord, running_query_events};
use qprof_eventlog::{LiveState, RunningQuery, TraceExportJson};
use qprof_otel::OtlpListener;
use serde_json::Value;

/// The live state of a run, read from its profiler when asked.
#[derive(Debug)]
struct RunLive {
    profiler: Profiler,
    log: Option<Arc<EventLogListener>>,
    traces: Option<Arc<OtlpListener>>,
    host: String,
}

impl qprof_server::LiveSource for RunLive {
    fn live(&self) -> LiveState {
        LiveState {
            running: self
                .profiler
                .running_queries()
                .into_iter()
                .filter_map(|id| self.profiler.snapshot_progress(id))
                .map(|(profile, progress)| RunningQuery::of(&profile, &progress))
                .collect(),
            memory: MemoryJson::from(&self.profiler.memory_now()),
            trace_export: self.traces.as_ref().map(|t| {
                let s = t.status();
                TraceExportJson {
                    endpoint: s.endpoint,
                    protocol: s.protocol,
                    exported_spans: s.exported_spans,
                    queued_spans: s.queued_spans,
                    dropped_spans: s.dropped_spans,
                    failed_exports: s.failed_exports,
                    last_error: s.last_error,
                }
            }),
        }
    }

    fn log_path(&self) -> Option<PathBuf> {
        self.log.as_ref().and_then(|log| log.log_dir())
    }

    fn running_events(&self, ids: &mut IdCounters) -> Vec<Value> {
        let now = epoch_millis();
        let mut events = Vec::new();
        for query in self.profiler.running_snapshots() {
            let record =
                QueryRecord::running(query.description, query.plan_text, &query.profile, now);
            events.extend(running_query_events(&record, &self.host, ids));
        }
        events
    }
}

/// The UI of a run, serving until the run ends (or, kept, until interrupted).
/// Served on a thread and runtime of its own: a query whose operators keep the run's
/// worker threads busy between two batches cannot hold up its pages.
#[derive(Debug)]
pub(crate) struct LiveUi {
    stop: tokio::sync::oneshot::Sender<()>,
    server: std::thread::JoinHandle<()>,
    address: std::net::SocketAddr,
}

impl LiveUi {
    /// Serves the UI of the run `profiler` profiles, whose event logs go to `log_dir`, at
    /// `address`.
    pub(crate) async fn start(
        profiler: Profiler,
        log: Option<Arc<EventLogListener>>,
        traces: Option<Arc<OtlpListener>>,
        log_dir: &Path,
        address: &str,
    ) -> Result<LiveUi> {
        std::fs::create_dir_all(log_dir)
            .with_context(|| format!("cannot create '{}'", log_dir.display()))?;
        // the run's own log appears and grows while it runs: rescan often
        let options = qprof_server::store::StoreOptions {
            update_interval: std::time::Duration::from_secs(1),
            ..Default::default()
        };
        let store = qprof_server::LogStore::open_with(log_dir, options)
            .with_context(|| format!("cannot read log directory '{}'", log_dir.display()))?;
        let listener = std::net::TcpListener::bind(address)
            .with_context(|| format!("cannot serve the UI at {address}"))?;
        listener
            .set_nonblocking(true)
            .with_context(|| format!("cannot serve the UI at {address}"))?;
        let address = listener
            .local_addr()
            .context("cannot read the UI's bound address")?;
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .context("cannot start the UI's runtime")?;
        let live = RunLive {
            profiler,
            log,
            traces,
            host: qprof_core::process::host_name(),
        };
        let router = qprof_server::live_router(store, Arc::new(live));
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let server = std::thread::Builder::new()
            .name("qprof-live-ui".into())
            .spawn(move || {
                runtime.block_on(async move {
                    let served = match tokio::net::TcpListener::from_std(listener) {
                        Ok(listener) => axum::serve(listener, router)
                            .with_graceful_shutdown(async {
                                let _ = stopped.await;
                            })
                            .await
                            .map_err(|e| e.to_string()),
                        Err(e) => Err(e.to_string()),
                    };
                    if let Err(e) = served {
                        eprintln!("the UI stopped: {e}");
                    }
                });
            })
            .context("cannot start the UI's thread")?;
        eprintln!("live UI at http://{address}/");
        Ok(LiveUi {
            stop,
            server,
            address,
        })
    }

    /// Stops serving now, or, if `keep`, once interrupted.
    pub(crate) async fn finish(self, keep: bool) {
        if keep {
            eprintln!(
                "the run ended; the UI stays at http://{}/ until interrupted (Ctrl-C)",
                self.address
            );
            let _ = tokio::signal::ctrl_c().await;
        }
        // the answers under way end (for a short while at most), then the thread
        let _ = self.stop.send(());
        let server = self.server;
        let joined = tokio::task::spawn_blocking(move || server.join());
        let _ = tokio::time::timeout(std::time::Duration::from_secs(2), joined).await;
    }
}
