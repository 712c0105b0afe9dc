//! The Spark event log as a listener of qprof's event bus: registered on a profiler, it
//! writes one application's log from the events the engine posts.
//!
//! ```no_run
//! use std::sync::Arc;
//! use qprof_core::events::EventBus;
//! use qprof_eventlog::EventLogListener;
//!
//! let bus = EventBus::new();
//! bus.add_listener(Arc::new(EventLogListener::in_dir("qprof-events"))).unwrap();
//! ```

use std::path::PathBuf;
use std::sync::{Mutex, PoisonError};

use qprof_core::events::{Event, Listener, ListenerError, QueryEnd};

use crate::profile_events::QueryRecord;
use crate::writer::{AppLog, LogConfig};
use qprof_core::metric::saturating_i64;

/// Writes the application's event log: the log is created when the application starts,
/// each query is appended (and flushed) when it ends, and the log is completed when the
/// application ends.
#[derive(Debug)]
pub struct EventLogListener {
    config: LogConfig,
    state: Mutex<LogState>,
}

#[derive(Debug)]
enum LogState {
    NotStarted,
    Open(Box<AppLog>),
    Finished(PathBuf),
    /// Creating, writing or finishing the log failed; nothing more is written (the log
    /// stays in progress, as a killed process's does).
    Broken,
}

impl<'a> From<&'a QueryEnd> for QueryRecord<'a> {
    fn from(end: &'a QueryEnd) -> QueryRecord<'a> {
        QueryRecord::new(
            end.description.clone(),
            &end.text,
            end.plan_text.clone(),
            (end.start_epoch_millis, end.end_epoch_millis),
            end.profile.as_ref(),
            end.error.clone(),
        )
    }
}

impl EventLogListener {
    /// A listener writing as `config` says.
    pub fn new(config: LogConfig) -> EventLogListener {
        EventLogListener {
            config,
            state: Mutex::new(LogState::NotStarted),
        }
    }

    /// A listener writing uncompressed logs into `dir`, rolled at Spark's default size.
    pub fn in_dir(dir: impl Into<PathBuf>) -> EventLogListener {
        EventLogListener::new(LogConfig::new(dir))
    }

    /// The application's log directory, once the application started.
    pub fn log_dir(&self) -> Option<PathBuf> {
        match &*self.state.lock().unwrap_or_else(PoisonError::into_inner) {
            LogState::Open(log) => Some(log.dir().to_path_buf()),
            LogState::Finished(dir) => Some(dir.clone()),
            LogState::NotStarted | LogState::Broken => None,
        }
    }
}

impl Listener for EventLogListener {
    fn on_event(&self, event: &Event) -> Result<(), ListenerError> {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        match event {
            Event::AppStart(app) => {
                if !matches!(*state, LogState::NotStarted) {
                    return Ok(());
                }
                match AppLog::create(&self.config, app) {
                    Ok(log) => {
                        *state = LogState::Open(Box::new(log));
                        Ok(())
                    }
                    Err(e) => {
                        *state = LogState::Broken;
                        Err(e.into())
                    }
                }
            }
            Event::QueryEnd(end) => match &mut *state {
                LogState::Open(log) => {
                    let written = log.log_query(&QueryRecord::from(end.as_ref()));
                    if written.is_err() {
                        // a partial line may be in the file: nothing may follow it
                        *state = LogState::Broken;
                    }
                    Ok(written?)
                }
                _ => Ok(()),
            },
            Event::ExecutorAdded(executor) => match &mut *state {
                LogState::Open(log) => Ok(log.log_executor_added(executor)?),
                _ => Ok(()),
            },
            Event::ExecutorRemoved(executor) => match &mut *state {
                LogState::Open(log) => Ok(log.log_executor_removed(executor)?),
                _ => Ok(()),
            },
            Event::AppEnd(end) => {
                match std::mem::replace(&mut *state, LogState::Broken) {
                    LogState::Open(log) => {
                        let dir = log.finish(
                            saturating_i64(end.end_epoch_millis),
                            end.exit_code,
                            end.peak_rss_bytes,
                        )?;
                        *state = LogState::Finished(dir);
                    }
                    other => *state = other,
                }
                Ok(())
            }
            _ => Ok(()),
        }
    }

    fn name(&self) -> &str {
        "event log"
    }
}
