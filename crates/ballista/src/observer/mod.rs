//! The scheduler side: what Ballista's scheduler does, turned into qprof's events.
//!
//! Ballista has no listener API; its scheduler keeps its state behind two traits,
//! `JobState` (jobs, their execution graphs, sessions) and `ClusterState` (executors,
//! heartbeats, task slots). [`ObservedJobState`] and [`ObservedClusterState`] wrap the
//! scheduler's own and tell a [`ClusterObserver`] what passes through, unchanged.
//!
//! Each client session is one application: its first job starts it, each job is a query
//! (its start when submitted, its end with its profile when the job succeeds or fails),
//! and the session's removal (or the scheduler's end) ends it. Every application gets
//! its own [`EventBus`], with the listeners the observer's factory makes for it (the
//! event log, in `qprof cluster scheduler`), and hears of every executor of the cluster.

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, mpsc};

use ballista_core::JobId;
use ballista_core::serde::protobuf::{ExecutorHeartbeat, executor_metric, job_status};
use ballista_core::serde::scheduler::{ExecutorData, ExecutorMetadata};
use ballista_scheduler::cluster::{BoundTask, ClusterState, ExecutorSlot, JobState};
use ballista_scheduler::state::execution_graph::ExecutionGraphBox;
use datafusion::prelude::{SessionConfig, SessionContext};
use qprof_core::clock::epoch_millis;
use qprof_core::events::{
    AppEnd, AppInfo, Event, EventBus, ExecutorAdded, ExecutorRemoved, Listener, QueryEnd,
    QueryStart,
};
use qprof_core::executor_memory::MemorySample;

mod states;

pub use states::{ObservedClusterState, ObservedJobState};

use crate::guard::{executor_lost_reason, failed_with, recovery_reason};
use crate::job_profiles::JobProfiles;
use crate::profile::{AppIds, ClusterView, JobRecord, LaunchedTask, query_profile};

/// Heartbeat samples kept per executor (at one a second, over an hour).
const KEPT_HEARTBEATS: usize = 4096;

/// Makes the listeners of a new application.
pub type ListenerFactory = Arc<dyn Fn(&AppInfo) -> Vec<Arc<dyn Listener>> + Send + Sync>;

/// Turns what the scheduler does into events on one bus per application (client session).
pub struct ClusterObserver {
    listeners: ListenerFactory,
    engine: String,
    state: Mutex<ObserverState>,
    /// Posts every event, in order, on a thread of its own at idle priority: building a
    /// profile and writing it never holds up the scheduler, nor takes a core from a
    /// client fetching the job's results or from the next job.
    poster: Mutex<mpsc::Sender<Work>>,
    /// The ids of the executors the scheduler has, sorted.
    members: tokio::sync::watch::Sender<Vec<String>>,
    /// The profiles of the jobs that ended lately, for their clients.
    profiles: Arc<JobProfiles>,
}

/// Something for the posting thread to do.
type Work = Box<dyn FnOnce() + Send>;

fn start_poster() -> mpsc::Sender<Work> {
    let (sender, receiver) = mpsc::channel::<Work>();
    let spawned = std::thread::Builder::new()
        .name("qprof-cluster-events".to_string())
        .spawn(move || {
            qprof_core::process::run_at_idle_priority();
            for work in receiver {
                work();
            }
        });
    if spawned.is_err() {
        // no thread: the work runs where it is queued (see `ClusterObserver::queue`)
        let (sender, _) = mpsc::channel();
        return sender;
    }
    sender
}

impl fmt::Debug for ClusterObserver {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = self.lock();
        f.debug_struct("ClusterObserver")
            .field("applications", &state.apps.len())
            .field("executors", &state.executors.len())
            .finish()
    }
}

#[derive(Debug)]
struct Executor {
    host: String,
    port: u16,
    cores: u32,
    added_epoch_millis: u64,
}

/// One application: a client session.
struct App {
    bus: Arc<EventBus>,
    ids: Arc<Mutex<AppIds>>,
    next_query: usize,
}

#[derive(Debug, Default)]
struct Job {
    name: String,
    session: Option<String>,
    query: usize,
    text: String,
    start_epoch_millis: u64,
    ended: bool,
    /// The span the client ran the query under, if it said.
    trace_parent: Option<qprof_core::trace_parent::TraceParent>,
}

#[derive(Default)]
struct ObserverState {
    apps: HashMap<String, App>,
    executors: HashMap<String, Executor>,
    removed: HashMap<String, (u64, String)>,
    heartbeats: HashMap<String, Vec<MemorySample>>,
    launched: HashMap<String, Vec<LaunchedTask>>,
    jobs: HashMap<String, Job>,
    /// Sessions that ended: a job of theirs that comes later starts a new application.
    ended_sessions: HashSet<String>,
    /// The client's session id of each session context the scheduler made (it makes its
    /// own contexts, with ids of their own, for a client's session).
    client_sessions: HashMap<String, String>,
    /// Why the guard failed each job it cancelled, until the job's failure is saved.
    guard_reasons: HashMap<String, String>,
    /// Jobs running when an executor they had tasks on was lost, with that executor:
    /// they fail (see [`crate::guard`]).
    hit_by_loss: HashMap<String, String>,
    /// Each executor's task slots, as the scheduler's own count should have them.
    slots: HashMap<String, Slots>,
}

/// An executor's task slots: how many it has, and how many the scheduler's cluster
/// state holds free, followed through every bind and unbind that passes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Slots {
    /// All the executor's slots.
    pub(crate) total: u32,
    /// Those not bound to a task.
    pub(crate) free: i64,
}

impl ClusterObserver {
    /// An observer whose applications get the listeners `listeners` makes.
    pub fn new(listeners: ListenerFactory) -> Arc<ClusterObserver> {
        Arc::new(ClusterObserver {
            listeners,
            engine: format!("DataFusion {} on Ballista", datafusion::DATAFUSION_VERSION),
            state: Mutex::new(ObserverState::default()),
            poster: Mutex::new(start_poster()),
            members: tokio::sync::watch::Sender::new(Vec::new()),
            profiles: Arc::new(JobProfiles::default()),
        })
    }

    /// The profiles of the jobs that ended lately, by client session and job name.
    pub fn profiles(&self) -> &Arc<JobProfiles> {
        &self.profiles
    }

    /// Runs `work` on the posting thread, after everything queued before it.
    fn queue(&self, work: impl FnOnce() + Send + 'static) {
        let sender = self.poster.lock().unwrap_or_else(PoisonError::into_inner);
        if let Err(mpsc::SendError(work)) = sender.send(Box::new(work)) {
            work();
        }
    }

    /// Posts `event` on `bus`, in order with every other event.
    fn post(&self, bus: &Arc<EventBus>, event: Event) {
        let bus = Arc::clone(bus);
        self.queue(move || bus.post(&event));
    }

    /// Waits until everything queued so far was posted.
    pub fn flush(&self) {
        let (done, waited) = mpsc::channel();
        self.queue(move || {
            let _ = done.send(());
        });
        let _ = waited.recv();
    }

    /// Waits, without blocking the async runtime, until everything queued so far was posted.
    pub async fn flushed(&self) {
        let (done, waited) = tokio::sync::oneshot::channel();
        self.queue(move || {
            let _ = done.send(());
        });
        let _ = waited.await;
    }

    fn lock(&self) -> MutexGuard<'_, ObserverState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Wraps the scheduler's job state and cluster state so that this observer sees them.
    pub fn observe(
        self: &Arc<Self>,
        jobs: Arc<dyn JobState>,
        cluster: Arc<dyn ClusterState>,
    ) -> (Arc<dyn JobState>, Arc<dyn ClusterState>) {
        (
            Arc::new(ObservedJobState {
                inner: jobs,
                observer: Arc::clone(self),
            }),
            Arc::new(ObservedClusterState {
                inner: cluster,
                observer: Arc::clone(self),
            }),
        )
    }

    /// The ids of the executors the scheduler has (sorted), as they change: a client or a
    /// test can wait for the executors it expects.
    pub fn executors(&self) -> tokio::sync::watch::Receiver<Vec<String>> {
        self.members.subscribe()
    }

    fn publish_members(&self, state: &ObserverState) {
        let mut ids: Vec<String> = state.executors.keys().cloned().collect();
        ids.sort();
        self.members.send_replace(ids);
    }

    /// Listener failures of every open application (e.g. an event log that could not be
    /// written), with the session they belong to.
    pub fn take_listener_failures(&self) -> Vec<(String, String)> {
        let state = self.lock();
        let mut out = Vec::new();
        for (session, app) in &state.apps {
            for failure in app.bus.take_failures() {
                out.push((session.clone(), failure.to_string()));
            }
        }
        out
    }

    /// Ends every open application, e.g. when the scheduler stops.
    pub fn finish_all(&self, exit_code: i32) {
        let apps: Vec<App> = self.lock().apps.drain().map(|(_, app)| app).collect();
        for app in apps {
            self.post(
                &app.bus,
                Event::AppEnd(AppEnd::new(epoch_millis(), exit_code)),
            );
        }
        self.flush();
    }

    /// Ends the application of `session`, if it is open.
    fn end_session(&self, session: &str) {
        self.profiles.session_ended(session);
        let mut state = self.lock();
        if let Some(app) = state.apps.remove(session) {
            self.post(&app.bus, Event::AppEnd(AppEnd::new(epoch_millis(), 0)));
        }
        state.ended_sessions.insert(session.to_string());
    }

    /// The application of `session`, started now if it is not open.
    fn app<'s>(
        &self,
        state: &'s mut ObserverState,
        session: &str,
        config: &SessionConfig,
    ) -> &'s mut App {
        if !state.apps.contains_key(session) {
            let mut info = AppInfo::new(
                format!("qprof cluster session {session}"),
                self.engine.clone(),
                state.executors.values().map(|e| e.cores).sum(),
            );
            info.properties = config
                .options()
                .entries()
                .into_iter()
                .filter_map(|e| Some((e.key, e.value?)))
                .collect();
            info.properties
                .push(("qprof.cluster.session".to_string(), session.to_string()));
            let bus = Arc::new(EventBus::new());
            for listener in (self.listeners)(&info) {
                // a failure is kept by the bus for whoever asks
                let _ = bus.add_listener(listener);
            }
            self.post(&bus, Event::AppStart(info.clone()));
            let mut executors: Vec<(&String, &Executor)> = state.executors.iter().collect();
            executors.sort_by_key(|(id, _)| id.as_str());
            for (id, e) in executors {
                self.post(
                    &bus,
                    Event::ExecutorAdded(ExecutorAdded {
                        id: id.clone(),
                        host: e.host.clone(),
                        port: e.port,
                        cores: e.cores,
                        epoch_millis: e.added_epoch_millis.max(info.start_epoch_millis),
                    }),
                );
            }
            state.ended_sessions.remove(session);
            state.apps.insert(
                session.to_string(),
                App {
                    bus,
                    ids: Arc::new(Mutex::new(AppIds::default())),
                    next_query: 0,
                },
            );
        }
        state.apps.get_mut(session).expect("inserted above")
    }

    fn job_accepted(&self, job_id: &JobId, name: &str, queued_at: u64) {
        self.lock().jobs.insert(
            job_id.as_str().to_string(),
            Job {
                name: name.to_string(),
                start_epoch_millis: queued_at,
                ..Job::default()
            },
        );
    }

    fn session_created(&self, client_session: &str, context: &SessionContext) {
        let mut state = self.lock();
        if state.client_sessions.len() > 100_000 {
            // sessions are never removed by clients that die: forget the oldest contexts
            state.client_sessions.clear();
        }
        state
            .client_sessions
            .insert(context.session_id(), client_session.to_string());
    }

    fn job_submitted(&self, job_id: &JobId, graph: &ExecutionGraphBox) {
        let config = graph.session_config();
        let mut state = self.lock();
        let session = state
            .client_sessions
            .get(graph.session_id())
            .cloned()
            .unwrap_or_else(|| graph.session_id().to_string());
        let app = self.app(&mut state, &session, &config);
        let query = app.next_query;
        app.next_query += 1;
        // the SQL the client ran, if it said (it sends plans), else the plan
        let options = qprof_datafusion::QprofOptions::of(config.options());
        let sql = &options.query_text;
        let text = if sql.is_empty() {
            graph
                .logical_plan()
                .map(str::to_string)
                .unwrap_or_else(|| graph.job_name().to_string())
        } else {
            sql.clone()
        };
        let start = match graph.start_time() {
            0 => epoch_millis(),
            t => t,
        };
        let description = if graph.job_name().is_empty() {
            job_id.as_str().to_string()
        } else {
            graph.job_name().to_string()
        };
        let bus = Arc::clone(&app.bus);
        self.post(
            &bus,
            Event::QueryStart(QueryStart {
                id: query,
                description: description.clone(),
                text: text.clone(),
                start_epoch_millis: start,
            }),
        );
        // the client's id of the query if it gave one, else the job's name
        let key = if options.query_id.is_empty() {
            &description
        } else {
            &options.query_id
        };
        self.profiles.submitted(&session, job_id.as_str(), key);
        let job = state.jobs.entry(job_id.as_str().to_string()).or_default();
        job.name = description;
        job.session = Some(session);
        job.query = query;
        job.text = text;
        job.start_epoch_millis = start;
        // a malformed value is the client's to refuse; the job runs untraced
        job.trace_parent = options.query_traceparent.parse().ok();
    }

    fn job_saved(&self, job_id: &JobId, graph: &ExecutionGraphBox) {
        let status = graph.status().status.as_ref();
        let error = match status {
            Some(job_status::Status::Successful(_)) => None,
            Some(job_status::Status::Failed(f)) => Some(first_line(&f.error)),
            _ => return,
        };
        let mut state = self.lock();
        let key = job_id.as_str().to_string();
        let Some(job) = state.jobs.get_mut(&key) else {
            return;
        };
        if job.ended {
            return;
        }
        job.ended = true;
        let trace_parent = job.trace_parent;
        let (Some(session), query, text, name, start) = (
            job.session.clone(),
            job.query,
            job.text.clone(),
            job.name.clone(),
            job.start_epoch_millis,
        ) else {
            return;
        };
        let view = ClusterView {
            hosts: state
                .executors
                .iter()
                .map(|(id, e)| (id.clone(), e.host.clone()))
                .collect(),
            removed: state.removed.clone(),
            launched: state.launched.remove(&key).unwrap_or_default(),
            heartbeats: state.heartbeats.clone(),
        };
        let Some(app) = state.apps.get_mut(&session) else {
            return;
        };
        let (bus, ids) = (Arc::clone(&app.bus), Arc::clone(&app.ids));
        state.jobs.remove(&key);
        drop(state);
        // the profile is built and written on the posting thread, from what it needs of
        // the graph
        let job = JobRecord::of(graph.as_ref());
        let (profiles, job_id) = (Arc::clone(&self.profiles), key);
        self.queue(move || {
            // a profile that cannot be built is not kept waited for
            let built = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                let mut ids = ids.lock().unwrap_or_else(PoisonError::into_inner);
                query_profile(&job, query, &text, &view, &mut ids)
            }));
            let Ok(profile) = built else {
                profiles.forget(&session, &job_id);
                return;
            };
            let plan_text = datafusion::physical_plan::displayable(job.physical_plan().as_ref())
                .indent(false)
                .to_string();
            let (kept_profile, kept_error) = (profile.clone(), error.clone());
            bus.post(&Event::QueryEnd(Box::new(QueryEnd {
                id: query,
                description: name,
                text,
                plan_text,
                start_epoch_millis: start,
                end_epoch_millis: end_of(job.end_time(), start),
                profile: Some(profile),
                error,
                trace_parent,
            })));
            // logged first: a client that has its profile finds it in the log too
            profiles.ended(&session, &job_id, kept_profile, kept_error);
        });
    }

    /// Ballista could not take job `job_id` after all: no profile of it will come.
    fn job_not_submitted(&self, job_id: &JobId) {
        let state = self.lock();
        if let Some(session) = state
            .jobs
            .get(job_id.as_str())
            .and_then(|j| j.session.as_ref())
        {
            self.profiles.forget(session, job_id.as_str());
        }
    }

    /// Records that the guard is failing `job_id` for `reason`: its failure is saved
    /// with that reason instead of Ballista's "Cancelled".
    pub(crate) fn job_failed_by_guard(&self, job_id: &JobId, reason: String) {
        let mut state = self.lock();
        // a job that ended meanwhile is saved already: nothing would take the reason
        if state.jobs.get(job_id.as_str()).is_some_and(|j| !j.ended) {
            state
                .guard_reasons
                .insert(job_id.as_str().to_string(), reason);
        }
    }

    /// The running jobs an executor's loss hit, with that executor, not yet failed by
    /// the guard.
    pub(crate) fn jobs_hit_by_loss(&self) -> Vec<(String, String)> {
        let state = self.lock();
        state
            .hit_by_loss
            .iter()
            .filter(|(job, _)| !state.guard_reasons.contains_key(*job))
            .map(|(job, executor)| (job.clone(), executor.clone()))
            .collect()
    }

    /// `graph` as it should be saved: failed, if the guard failed it, an executor's loss
    /// hit it while it ran, or its graph shows Ballista recovered lost shuffle output
    /// (`None`: as it is).
    fn saved_outcome(
        &self,
        job_id: &JobId,
        graph: &ExecutionGraphBox,
    ) -> Option<ExecutionGraphBox> {
        let ended = matches!(
            graph.status().status,
            Some(job_status::Status::Failed(_) | job_status::Status::Successful(_))
        );
        if !ended {
            return None;
        }
        let reason = {
            let mut state = self.lock();
            let guarded = state.guard_reasons.remove(job_id.as_str());
            let lost = state.hit_by_loss.remove(job_id.as_str());
            guarded
                .or_else(|| lost.map(|executor| executor_lost_reason(&executor)))
                .or_else(|| recovery_reason(graph.as_ref()))?
        };
        Some(failed_with(graph, reason))
    }

    /// The slots of each executor the scheduler has.
    pub(crate) fn slots(&self) -> HashMap<String, Slots> {
        self.lock().slots.clone()
    }

    fn slots_unbound(&self, unbound: &[ExecutorSlot]) {
        let mut state = self.lock();
        for (executor, n) in unbound {
            if let Some(slots) = state.slots.get_mut(executor) {
                slots.free += i64::from(*n);
            }
        }
    }

    fn executor_registered(&self, metadata: &ExecutorMetadata, spec: &ExecutorData) {
        let mut state = self.lock();
        // (a second registration of an executor the scheduler has is refused)
        state.slots.entry(metadata.id.clone()).or_insert(Slots {
            total: spec.total_vcores,
            free: i64::from(spec.available_vcores),
        });
        let now = epoch_millis();
        let executor = Executor {
            host: metadata.host.clone(),
            port: metadata.port,
            cores: spec.total_vcores,
            added_epoch_millis: now,
        };
        for app in state.apps.values() {
            self.post(
                &app.bus,
                Event::ExecutorAdded(ExecutorAdded {
                    id: metadata.id.clone(),
                    host: executor.host.clone(),
                    port: executor.port,
                    cores: executor.cores,
                    epoch_millis: now,
                }),
            );
        }
        state.removed.remove(&metadata.id);
        state.executors.insert(metadata.id.clone(), executor);
        self.publish_members(&state);
    }

    fn executor_removed(&self, executor_id: &str) {
        let mut state = self.lock();
        state.slots.remove(executor_id);
        // the jobs running with tasks on it fail, rather than trust Ballista's recovery
        let hit: Vec<String> = state
            .launched
            .iter()
            .filter(|(job, tasks)| {
                tasks.iter().any(|t| t.executor_id == executor_id)
                    && state.jobs.get(*job).is_some_and(|j| !j.ended)
            })
            .map(|(job, _)| job.clone())
            .collect();
        for job in hit {
            state.hit_by_loss.insert(job, executor_id.to_string());
        }
        if state.executors.remove(executor_id).is_none() {
            return;
        }
        self.publish_members(&state);
        let now = epoch_millis();
        // tasks still out on it when it went: the executor was lost under them
        let busy = state
            .launched
            .values()
            .flatten()
            .any(|t| t.executor_id == executor_id);
        let reason = if busy {
            "lost: stopped answering while it ran tasks".to_string()
        } else {
            "removed from the cluster".to_string()
        };
        for app in state.apps.values() {
            self.post(
                &app.bus,
                Event::ExecutorRemoved(ExecutorRemoved {
                    id: executor_id.to_string(),
                    reason: reason.clone(),
                    epoch_millis: now,
                }),
            );
        }
        state.removed.insert(executor_id.to_string(), (now, reason));
    }

    fn heartbeat(&self, heartbeat: &ExecutorHeartbeat) {
        let mut sample = MemorySample {
            epoch_millis: epoch_millis(),
            ..MemorySample::default()
        };
        for metric in heartbeat.metrics.iter().filter_map(|m| m.metric.as_ref()) {
            match metric {
                executor_metric::Metric::ProcPhysicalMemory(v) => sample.rss_bytes = *v,
                executor_metric::Metric::ProcVirtualMemory(v) => sample.virtual_bytes = *v,
                _ => {}
            }
        }
        if sample.rss_bytes == 0 && sample.virtual_bytes == 0 {
            return;
        }
        let mut state = self.lock();
        let samples = state
            .heartbeats
            .entry(heartbeat.executor_id.clone())
            .or_default();
        if samples.len() >= KEPT_HEARTBEATS {
            samples.remove(0);
        }
        samples.push(sample);
    }

    fn tasks_bound(&self, bound: &[BoundTask]) {
        if bound.is_empty() {
            return;
        }
        let now = epoch_millis();
        let mut state = self.lock();
        for (executor, task) in bound {
            if let Some(slots) = state.slots.get_mut(executor) {
                slots.free -= i64::from(task.vcores_consumed);
            }
            state
                .launched
                .entry(task.key.job_id.as_str().to_string())
                .or_default()
                .push(LaunchedTask {
                    stage_id: task.key.stage_id,
                    task_id: task.key.task_id,
                    attempt: u32::try_from(task.task_attempt).unwrap_or(u32::MAX),
                    partitions: task.global_input_partition_ids.clone(),
                    executor_id: executor.clone(),
                    launched_epoch_millis: now,
                });
        }
    }
}

/// A job's end: Ballista's, or now if it has none yet.
pub(crate) fn end_of(end: u64, start: u64) -> u64 {
    if end >= start && end > 0 {
        end
    } else {
        epoch_millis().max(start)
    }
}

fn first_line(text: &str) -> String {
    text.lines().next().unwrap_or_default().trim().to_string()
}
