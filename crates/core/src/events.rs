//! The event bus: one path from the engine to every output.
//!
//! The engine side posts typed [`Event`]s (an application starting and ending, each query
//! starting and ending with its profile) to an [`EventBus`]; every [`Listener`] registered
//! on the bus receives each of them, in order, on the posting thread. The Spark event-log
//! writer is one listener; live state, exporters and schedulers are others. This is the
//! role Spark's listener bus plays between its scheduler and its event log and UI.
//!
//! A listener that fails or panics does not stop the others or the query that posted:
//! the bus keeps the failure, and whoever owns the bus asks for it
//! ([`EventBus::take_failures`]).
//!
//! ```
//! use std::sync::{Arc, Mutex};
//! use qprof_core::events::{AppEnd, Event, EventBus, Listener, ListenerError};
//!
//! #[derive(Debug, Default)]
//! struct Count(Mutex<usize>);
//! impl Listener for Count {
//!     fn on_event(&self, _event: &Event) -> Result<(), ListenerError> {
//!         *self.0.lock().unwrap() += 1;
//!         Ok(())
//!     }
//! }
//!
//! let bus = EventBus::new();
//! let count = Arc::new(Count::default());
//! bus.add_listener(count.clone()).unwrap();
//! bus.post(&Event::AppEnd(AppEnd::new(1_700_000_000_000, 0)));
//! assert_eq!(*count.0.lock().unwrap(), 1);
//! ```

use std::fmt;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, RwLock};

use crate::profile::QueryProfile;

/// Why a listener could not handle an event.
pub type ListenerError = Box<dyn std::error::Error + Send + Sync>;

/// What is known about an application (a process, or one profiled session) when it starts.
#[derive(Debug, Clone, PartialEq)]
pub struct AppInfo {
    /// Application name (e.g. the command line).
    pub name: String,
    /// User running it.
    pub user: String,
    /// Host name.
    pub host: String,
    /// Cores (task slots) of the local executor.
    pub cores: u32,
    /// Start time, epoch ms.
    pub start_epoch_millis: u64,
    /// The engine, e.g. `DataFusion 55.2.0`.
    pub engine: String,
    /// Configuration entries (`key`, `value`).
    pub properties: Vec<(String, String)>,
}

impl AppInfo {
    /// An application called `name`, started now by this process's user on this host.
    pub fn new(name: impl Into<String>, engine: impl Into<String>, cores: u32) -> AppInfo {
        AppInfo {
            name: name.into(),
            user: crate::process::user_name(),
            host: crate::process::host_name(),
            cores,
            start_epoch_millis: crate::clock::epoch_millis(),
            engine: engine.into(),
            properties: Vec::new(),
        }
    }
}

/// A query about to be planned and run.
#[derive(Debug, Clone, PartialEq)]
pub struct QueryStart {
    /// Query id within the application.
    pub id: usize,
    /// Short description (e.g. `q5`).
    pub description: String,
    /// The query text (SQL, or the logical plan of a DataFrame).
    pub text: String,
    /// Start, epoch ms.
    pub start_epoch_millis: u64,
}

/// A query that ended, successfully or not.
#[derive(Debug, Clone, PartialEq)]
pub struct QueryEnd {
    /// Query id within the application.
    pub id: usize,
    /// Short description (e.g. `q5`).
    pub description: String,
    /// The query text (SQL, or the logical plan of a DataFrame).
    pub text: String,
    /// The executed physical plan as indented text; empty if it was never planned (or
    /// nobody listened when the query ended).
    pub plan_text: String,
    /// Start, epoch ms.
    pub start_epoch_millis: u64,
    /// End, epoch ms.
    pub end_epoch_millis: u64,
    /// The profile, when the query was planned (also for a query that failed running).
    pub profile: Option<QueryProfile>,
    /// Why the query failed, on one line.
    pub error: Option<String>,
    /// The span the query ran under, if its caller gave one.
    pub trace_parent: Option<crate::trace_parent::TraceParent>,
}

/// The application ended.
#[derive(Debug, Clone, PartialEq)]
pub struct AppEnd {
    /// End, epoch ms.
    pub end_epoch_millis: u64,
    /// The exit code the application reports (0: success).
    pub exit_code: i32,
    /// The peak resident set size of the process, if known.
    pub peak_rss_bytes: Option<u64>,
}

impl AppEnd {
    /// The end at `end_epoch_millis` with `exit_code`, with this process's peak RSS.
    pub fn new(end_epoch_millis: u64, exit_code: i32) -> AppEnd {
        AppEnd {
            end_epoch_millis,
            exit_code,
            peak_rss_bytes: crate::process::peak_rss_bytes(),
        }
    }
}

/// An executor that joined a cluster.
#[derive(Debug, Clone, PartialEq)]
pub struct ExecutorAdded {
    /// The executor's id, unique in the cluster.
    pub id: String,
    /// The host it runs on.
    pub host: String,
    /// The port its data is served on (0 if it has none).
    pub port: u16,
    /// Its task slots.
    pub cores: u32,
    /// When it joined (or when the application started, for an executor that joined
    /// before), epoch ms.
    pub epoch_millis: u64,
}

/// An executor that left a cluster.
#[derive(Debug, Clone, PartialEq)]
pub struct ExecutorRemoved {
    /// The executor's id.
    pub id: String,
    /// Why, on one line (e.g. `lost: no heartbeat for 30 s`).
    pub reason: String,
    /// When, epoch ms.
    pub epoch_millis: u64,
}

/// Everything the engine side tells its listeners.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Event {
    /// The application started; a listener registered later still receives it first.
    AppStart(AppInfo),
    /// A query is about to be planned and run.
    QueryStart(QueryStart),
    /// A query ended, with its profile.
    QueryEnd(Box<QueryEnd>),
    /// The application ended; nothing follows.
    AppEnd(AppEnd),
    /// An executor joined the cluster the application runs on.
    ExecutorAdded(ExecutorAdded),
    /// An executor left the cluster (it stopped, or it was lost).
    ExecutorRemoved(ExecutorRemoved),
}

impl Event {
    /// A short name for messages, e.g. `QueryEnd`.
    pub fn kind(&self) -> &'static str {
        match self {
            Event::AppStart(_) => "AppStart",
            Event::QueryStart(_) => "QueryStart",
            Event::QueryEnd(_) => "QueryEnd",
            Event::AppEnd(_) => "AppEnd",
            Event::ExecutorAdded(_) => "ExecutorAdded",
            Event::ExecutorRemoved(_) => "ExecutorRemoved",
        }
    }
}

/// Receives the bus's events. Implementations keep their state behind their own locks: an
/// event can be posted from any thread.
pub trait Listener: Send + Sync + fmt::Debug {
    /// Handles one event.
    ///
    /// # Errors
    /// Whatever keeps the listener from handling it; the bus keeps the failure.
    fn on_event(&self, event: &Event) -> Result<(), ListenerError>;

    /// The listener's name in failure messages.
    fn name(&self) -> &str {
        "listener"
    }
}

/// A listener that ignores every event.
#[derive(Debug, Default, Clone, Copy)]
pub struct NoopListener;

impl Listener for NoopListener {
    fn on_event(&self, _event: &Event) -> Result<(), ListenerError> {
        Ok(())
    }

    fn name(&self) -> &str {
        "no-op"
    }
}

/// A listener that failed (returned an error or panicked) on an event.
#[derive(Debug, thiserror::Error)]
#[error("{listener} failed on {event}: {message}")]
pub struct ListenerFailure {
    /// The listener's name.
    pub listener: String,
    /// The event's kind.
    pub event: &'static str,
    /// What went wrong.
    pub message: String,
}

/// Delivers events to listeners, in registration order, on the posting thread.
///
/// Deliveries are serialized: every listener sees the events in one order, whichever
/// threads post them. A listener must therefore not post to the bus it listens to, add
/// listeners to it, or drop what owns it, from `on_event`: the bus's lock is not
/// re-entrant.
#[derive(Default)]
pub struct EventBus {
    /// Held while an event is delivered or a late listener is caught up.
    dispatch: Mutex<()>,
    listeners: RwLock<Vec<Arc<dyn Listener>>>,
    /// The application's start, replayed to listeners registered after it.
    started: Mutex<Option<AppInfo>>,
    ended: Mutex<bool>,
    failures: Mutex<Vec<ListenerFailure>>,
}

impl fmt::Debug for EventBus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EventBus")
            .field("listeners", &read(&self.listeners).len())
            .field("started", &lock(&self.started).is_some())
            .finish_non_exhaustive()
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

fn read<T>(l: &RwLock<T>) -> std::sync::RwLockReadGuard<'_, T> {
    l.read().unwrap_or_else(PoisonError::into_inner)
}

impl EventBus {
    /// A bus without listeners.
    pub fn new() -> EventBus {
        EventBus::default()
    }

    /// Registers `listener`. If the application already started, the listener receives
    /// its [`Event::AppStart`] now.
    ///
    /// # Errors
    /// The listener's failure on that replayed start (it is registered all the same, and
    /// decides itself what later events mean to it); or, without registering it, that the
    /// application already ended.
    pub fn add_listener(&self, listener: Arc<dyn Listener>) -> Result<(), ListenerFailure> {
        // no event is delivered between the replayed start and the listener joining
        let _dispatch = lock(&self.dispatch);
        if *lock(&self.ended) {
            return Err(ListenerFailure {
                listener: listener.name().to_string(),
                event: "AppEnd",
                message: "the application already ended".to_string(),
            });
        }
        let replay = lock(&self.started).clone().map(Event::AppStart);
        let caught_up = match replay {
            Some(event) => deliver(listener.as_ref(), &event),
            None => Ok(()),
        };
        self.listeners
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .push(listener);
        caught_up
    }

    /// Whether any listener is registered: what only listeners read need not be made.
    pub fn has_listeners(&self) -> bool {
        !read(&self.listeners).is_empty()
    }

    /// Whether the application started.
    pub fn started(&self) -> bool {
        lock(&self.started).is_some()
    }

    /// Whether the application ended.
    pub fn ended(&self) -> bool {
        *lock(&self.ended)
    }

    /// Delivers `event` to every listener; failures are kept (see
    /// [`EventBus::take_failures`]). A second application start or end is ignored, and so
    /// is everything after the end.
    pub fn post(&self, event: &Event) {
        let _dispatch = lock(&self.dispatch);
        {
            let mut ended = lock(&self.ended);
            if *ended {
                return;
            }
            match event {
                Event::AppStart(info) => {
                    let mut started = lock(&self.started);
                    if started.is_some() {
                        return;
                    }
                    *started = Some(info.clone());
                }
                Event::AppEnd(_) => *ended = true,
                _ => {}
            }
        }
        let listeners = read(&self.listeners).clone();
        for listener in listeners {
            if let Err(failure) = deliver(listener.as_ref(), event) {
                lock(&self.failures).push(failure);
            }
        }
    }

    /// The failures of listeners since the last call, oldest first.
    pub fn take_failures(&self) -> Vec<ListenerFailure> {
        std::mem::take(&mut *lock(&self.failures))
    }
}

fn deliver(listener: &dyn Listener, event: &Event) -> Result<(), ListenerFailure> {
    let failure = |message: String| ListenerFailure {
        listener: listener.name().to_string(),
        event: event.kind(),
        message,
    };
    match catch_unwind(AssertUnwindSafe(|| listener.on_event(event))) {
        Ok(Ok(())) => Ok(()),
        Ok(Err(e)) => Err(failure(e.to_string())),
        Err(panic) => {
            let message = panic
                .downcast_ref::<&str>()
                .map(|s| (*s).to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "panicked".to_string());
            Err(failure(format!("panicked: {message}")))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Default)]
    struct Recorder {
        seen: Mutex<Vec<&'static str>>,
        fail_on: Option<&'static str>,
        panic_on: Option<&'static str>,
    }

    impl Listener for Recorder {
        fn on_event(&self, event: &Event) -> Result<(), ListenerError> {
            lock(&self.seen).push(event.kind());
            if self.panic_on == Some(event.kind()) {
                panic!("boom");
            }
            if self.fail_on == Some(event.kind()) {
                return Err("disk full".into());
            }
            Ok(())
        }

        fn name(&self) -> &str {
            "recorder"
        }
    }

    fn start() -> Event {
        Event::AppStart(AppInfo {
            name: "app".into(),
            user: "u".into(),
            host: "h".into(),
            cores: 2,
            start_epoch_millis: 1,
            engine: "test".into(),
            properties: vec![],
        })
    }

    fn query_start(id: usize) -> Event {
        Event::QueryStart(QueryStart {
            id,
            description: format!("q{id}"),
            text: "select 1".into(),
            start_epoch_millis: 2,
        })
    }

    #[test]
    fn listeners_see_events_in_order_and_late_ones_get_the_start() {
        let bus = EventBus::new();
        let early = Arc::new(Recorder::default());
        bus.add_listener(early.clone()).unwrap();
        bus.post(&start());
        bus.post(&query_start(1));
        let late = Arc::new(Recorder::default());
        bus.add_listener(late.clone()).unwrap();
        bus.post(&query_start(2));
        bus.post(&Event::AppEnd(AppEnd::new(3, 0)));
        assert_eq!(
            *lock(&early.seen),
            ["AppStart", "QueryStart", "QueryStart", "AppEnd"]
        );
        assert_eq!(*lock(&late.seen), ["AppStart", "QueryStart", "AppEnd"]);
        assert!(bus.take_failures().is_empty());
    }

    #[test]
    fn a_second_start_and_anything_after_the_end_are_ignored() {
        let bus = EventBus::new();
        let r = Arc::new(Recorder::default());
        bus.add_listener(r.clone()).unwrap();
        bus.post(&start());
        bus.post(&start());
        bus.post(&Event::AppEnd(AppEnd::new(3, 0)));
        bus.post(&query_start(1));
        bus.post(&Event::AppEnd(AppEnd::new(4, 1)));
        assert_eq!(*lock(&r.seen), ["AppStart", "AppEnd"]);
        assert!(bus.ended());
    }

    #[test]
    fn failing_and_panicking_listeners_do_not_stop_the_others() {
        let bus = EventBus::new();
        let failing = Arc::new(Recorder {
            fail_on: Some("QueryStart"),
            ..Recorder::default()
        });
        let panicking = Arc::new(Recorder {
            panic_on: Some("QueryStart"),
            ..Recorder::default()
        });
        let fine = Arc::new(Recorder::default());
        for l in [failing.clone(), panicking.clone(), fine.clone()] {
            bus.add_listener(l).unwrap();
        }
        bus.post(&query_start(1));
        assert_eq!(*lock(&fine.seen), ["QueryStart"]);
        let failures = bus.take_failures();
        let messages: Vec<String> = failures.iter().map(ToString::to_string).collect();
        assert_eq!(
            messages,
            [
                "recorder failed on QueryStart: disk full",
                "recorder failed on QueryStart: panicked: boom"
            ]
        );
        assert!(bus.take_failures().is_empty(), "failures are taken once");
    }

    #[test]
    fn a_late_listener_failing_on_the_replayed_start_is_told_at_once() {
        let bus = EventBus::new();
        bus.post(&start());
        let failing = Arc::new(Recorder {
            fail_on: Some("AppStart"),
            ..Recorder::default()
        });
        let err = bus.add_listener(failing).unwrap_err();
        assert_eq!(err.to_string(), "recorder failed on AppStart: disk full");
        assert!(bus.started());
    }

    #[derive(Debug, Default)]
    struct Ids(Mutex<Vec<usize>>);

    impl Listener for Ids {
        fn on_event(&self, event: &Event) -> Result<(), ListenerError> {
            let id = match event {
                Event::AppStart(_) => 0,
                Event::QueryStart(q) => q.id,
                _ => usize::MAX,
            };
            lock(&self.0).push(id);
            Ok(())
        }
    }

    #[test]
    fn listeners_agree_on_the_order_of_events_posted_from_many_threads() {
        let bus = Arc::new(EventBus::new());
        bus.post(&start());
        let first = Arc::new(Ids::default());
        bus.add_listener(first.clone()).unwrap();
        let late = Arc::new(Ids::default());
        let posters: Vec<_> = (0..4)
            .map(|t| {
                let bus = Arc::clone(&bus);
                std::thread::spawn(move || {
                    for i in 1..=200 {
                        bus.post(&query_start(t * 1000 + i));
                    }
                })
            })
            .collect();
        bus.add_listener(late.clone()).unwrap();
        for p in posters {
            p.join().unwrap();
        }
        let first = lock(&first.0);
        let late = lock(&late.0);
        assert_eq!(first.len(), 801);
        // the late listener got the start first, then exactly the suffix the first one saw
        assert_eq!(late[0], 0);
        let joined = first.len() - (late.len() - 1);
        assert_eq!(&first[joined..], &late[1..]);
    }

    #[test]
    fn no_listener_joins_after_the_end() {
        let bus = EventBus::new();
        bus.post(&start());
        bus.post(&Event::AppEnd(AppEnd::new(3, 0)));
        let late = Arc::new(Recorder::default());
        let err = bus.add_listener(late.clone()).unwrap_err();
        assert_eq!(
            err.to_string(),
            "recorder failed on AppEnd: the application already ended"
        );
        assert!(lock(&late.seen).is_empty());
    }

    #[test]
    fn the_noop_listener_accepts_everything() {
        let bus = EventBus::new();
        bus.add_listener(Arc::new(NoopListener)).unwrap();
        bus.post(&start());
        bus.post(&query_start(1));
        assert!(bus.take_failures().is_empty());
    }
}
