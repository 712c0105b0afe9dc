//! The event log a `qprof run` / `qprof sql` process writes (one application per process),
//! and `qprof serve`.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context, Result};
use qprof_core::clock::epoch_millis;
use qprof_datafusion::{ProfiledQuery, ProfilingSession, QueryFailure, plan_text};
use qprof_eventlog::profile_events::QueryRecord;
use qprof_eventlog::writer::{AppLog, AppStart, LogConfig, process_peak_rss_bytes};

use crate::cli::{LogOptions, ServeArgs};

/// The application log of this process, if logging is on.
#[derive(Debug)]
pub struct History {
    log: Option<AppLog>,
}

fn now_millis() -> i64 {
    i64::try_from(epoch_millis()).unwrap_or(i64::MAX)
}

fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .ok()
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "localhost".to_string())
}

/// One line of SQL for descriptions: the first non-comment line, shortened.
pub fn describe_sql(sql: &str) -> String {
    let line = sql
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty() && !l.starts_with("--"))
        .unwrap_or("");
    let mut text: String = line.chars().take(80).collect();
    if line.chars().count() > 80 {
        text.push('…');
    }
    text
}

impl History {
    /// Starts the application's log (or nothing, with `--no-event-log`).
    pub fn start(options: &LogOptions, session: &ProfilingSession) -> Result<History> {
        if options.no_event_log {
            return Ok(History { log: None });
        }
        let config = LogConfig {
            dir: options.event_log_dir.clone(),
            zstd: options.event_log_compress,
            roll_bytes: qprof_eventlog::writer::DEFAULT_ROLL_BYTES,
        };
        let state = session.context().state();
        let properties: Vec<(String, String)> = state
            .config()
            .options()
            .entries()
            .into_iter()
            .filter_map(|e| e.value.map(|v| (e.key, v)))
            .collect();
        let name = std::iter::once("qprof".to_string())
            .chain(std::env::args().skip(1))
            .collect::<Vec<_>>()
            .join(" ");
        let app = AppStart {
            name,
            user: std::env::var("USER").unwrap_or_else(|_| "unknown".to_string()),
            host: host_name(),
            cores: u32::try_from(state.config().target_partitions()).unwrap_or(u32::MAX),
            start_epoch_millis: now_millis(),
            engine: format!("DataFusion {}", datafusion::DATAFUSION_VERSION),
            properties,
        };
        let log = AppLog::create(&config, &app).with_context(|| {
            format!(
                "cannot write the event log in '{}'",
                options.event_log_dir.display()
            )
        })?;
        Ok(History { log: Some(log) })
    }

    /// Logs a query's outcome.
    pub fn record(
        &mut self,
        description: &str,
        sql: &str,
        outcome: &Result<ProfiledQuery, QueryFailure>,
    ) -> Result<()> {
        let Some(log) = &mut self.log else {
            return Ok(());
        };
        let end = now_millis();
        let record = match outcome {
            Ok(run) => QueryRecord {
                description: description.to_string(),
                sql,
                plan_text: plan_text(&run.plan),
                start_epoch_millis: i64::try_from(run.profile.start_epoch_millis).unwrap_or(0),
                end_epoch_millis: end,
                profile: Some(&run.profile),
                error: None,
            },
            Err(failure) => QueryRecord {
                description: description.to_string(),
                sql,
                plan_text: String::new(),
                start_epoch_millis: i64::try_from(failure.start_epoch_millis).unwrap_or(0),
                end_epoch_millis: end,
                profile: failure.profile.as_deref(),
                error: Some(failure.error.to_string()),
            },
        };
        log.log_query(&record).context("cannot write the event log")
    }

    /// Ends the application; returns where its log is.
    pub fn finish(self, exit_code: i32) -> Result<Option<PathBuf>> {
        match self.log {
            None => Ok(None),
            Some(log) => {
                let dir = log
                    .finish(now_millis(), exit_code, process_peak_rss_bytes())
                    .context("cannot finish the event log")?;
                Ok(Some(dir))
            }
        }
    }
}

/// `qprof serve`: the history server over a log directory, until interrupted.
pub async fn serve(args: ServeArgs) -> Result<()> {
    let dir: &Path = &args.log_dir;
    let store = qprof_server::LogStore::open(dir)
        .with_context(|| format!("cannot read log directory '{}'", dir.display()))?;
    let listener = tokio::net::TcpListener::bind((args.bind.as_str(), args.port))
        .await
        .with_context(|| format!("cannot listen on {}:{}", args.bind, args.port))?;
    let address = listener
        .local_addr()
        .context("cannot read the bound address")?;
    println!(
        "qprof history server for '{}' at http://{address}/",
        dir.display()
    );
    use std::io::Write;
    std::io::stdout().flush().ok();
    axum::serve(listener, qprof_server::router(Arc::new(store)))
        .await
        .context("the server stopped")
}
