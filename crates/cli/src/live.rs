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
use qprof_core::metric::saturating_i64;
use qprof_core::profile::{QueryProfile, names};
use qprof_datafusion::Profiler;
use qprof_eventlog::listener::EventLogListener;
use qprof_eventlog::profile_events::{IdCounters, QueryRecord, running_query_events};
use qprof_eventlog::profile_json::MemoryJson;
use serde_json::{Value, json};
use tokio::task::JoinHandle;

/// The live state of a run, read from its profiler when asked.
#[derive(Debug)]
struct RunLive {
    profiler: Profiler,
    log: Option<Arc<EventLogListener>>,
    host: String,
}

/// Rows a (running) query's scans produced so far, and bytes it read.
pub(crate) fn scan_progress(profile: &QueryProfile) -> (i64, i64) {
    let scans = || profile.plan.iter().filter(|n| n.name == "DataSourceExec");
    let rows: i64 = scans().filter_map(|n| n.value(names::OUTPUT_ROWS)).sum();
    let bytes: i64 = profile
        .plan
        .iter()
        .filter_map(|n| n.value(names::READ_BYTES))
        .sum();
    (rows, bytes)
}

/// `{"id", "sql", "elapsedMillis", "rowsScanned", "bytesRead", "stages", "tasks",
/// "tasksFinished"}` of a running query's snapshot.
fn running_query(profile: &QueryProfile) -> Value {
    let (rows, bytes) = scan_progress(profile);
    let tasks = || profile.stages.iter().flat_map(|s| &s.tasks);
    json!({
        "id": profile.id,
        "sql": profile.sql,
        "elapsedMillis": profile.duration_nanos / 1_000_000,
        "rowsScanned": rows,
        "bytesRead": bytes,
        "stages": profile.stages.len(),
        "tasks": tasks().count(),
        "tasksFinished": tasks().filter(|t| t.finish_epoch_millis > 0).count(),
    })
}

impl qprof_server::LiveSource for RunLive {
    fn live(&self) -> Value {
        let running: Vec<Value> = self
            .profiler
            .running_queries()
            .into_iter()
            .filter_map(|id| self.profiler.snapshot(id))
            .map(|p| running_query(&p))
            .collect();
        let memory = self.profiler.memory_now();
        json!({"running": running, "memory": MemoryJson::from(&memory)})
    }

    fn log_path(&self) -> Option<PathBuf> {
        self.log.as_ref().and_then(|log| log.log_dir())
    }

    fn running_events(&self, ids: &mut IdCounters) -> Vec<Value> {
        let now = epoch_millis();
        let mut events = Vec::new();
        for query in self.profiler.running_snapshots() {
            let record = QueryRecord {
                description: query.description,
                sql: &query.profile.sql,
                plan_text: query.plan_text,
                start_epoch_millis: millis(query.profile.start_epoch_millis),
                end_epoch_millis: millis(now),
                profile: Some(&query.profile),
                error: None,
            };
            events.extend(running_query_events(&record, &self.host, ids));
        }
        events
    }
}

fn millis(ms: u64) -> i64 {
    saturating_i64(ms)
}

/// The UI of a run, serving until the run ends (or, kept, until interrupted).
#[derive(Debug)]
pub(crate) struct LiveUi {
    server: JoinHandle<()>,
    address: std::net::SocketAddr,
}

impl LiveUi {
    /// Serves the UI of the run `profiler` profiles, whose event logs go to `log_dir`, at
    /// `address`.
    pub(crate) async fn start(
        profiler: Profiler,
        log: Option<Arc<EventLogListener>>,
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
        let listener = tokio::net::TcpListener::bind(address)
            .await
            .with_context(|| format!("cannot serve the UI at {address}"))?;
        let address = listener
            .local_addr()
            .context("cannot read the UI's bound address")?;
        let live = RunLive {
            profiler,
            log,
            host: qprof_core::process::host_name(),
        };
        let router = qprof_server::live_router(store, Arc::new(live));
        let server = tokio::spawn(async move {
            if let Err(e) = axum::serve(listener, router).await {
                eprintln!("the UI stopped: {e}");
            }
        });
        eprintln!("live UI at http://{address}/");
        Ok(LiveUi { server, address })
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
        self.server.abort();
    }
}
