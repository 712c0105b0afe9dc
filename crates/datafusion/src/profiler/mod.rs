//! The embedding API: a [`Profiler`] instruments any DataFusion session builder, runs
//! queries (SQL or any `DataFrame`) with profiles, and posts what happens to the listeners
//! of its [`EventBus`].
//!
//! ```no_run
//! # async fn example() -> Result<(), Box<dyn std::error::Error>> {
//! use datafusion::execution::SessionStateBuilder;
//! use datafusion::prelude::SessionContext;
//! use qprof_datafusion::Profiler;
//!
//! let profiler = Profiler::new();
//! let state = profiler
//!     .instrument(SessionStateBuilder::new().with_default_features())
//!     .build();
//! let ctx = SessionContext::new_with_state(state);
//! let run = profiler.run(ctx.sql("SELECT 1 + 1").await?, "add").await?;
//! println!("{}", run.profile.render_text(3));
//! # Ok(())
//! # }
//! ```

mod outcome;
mod queries;
mod stream;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use datafusion::error::DataFusionError;
use datafusion::execution::runtime_env::RuntimeEnv;
use datafusion::execution::{SessionStateBuilder, TaskContext};
use datafusion::physical_optimizer::PhysicalOptimizerRule;
use datafusion::physical_plan::ExecutionPlan;
use datafusion::prelude::SessionConfig;
use qprof_core::call_site::timer_costs;
use qprof_core::clock::epoch_millis;
use qprof_core::counters::OperatorTaskCounters;
use qprof_core::events::{AppEnd, AppInfo, Event, EventBus, Listener, ListenerFailure};
use qprof_core::executor_memory::MemorySample;
use qprof_core::profile::QueryProfile;
use qprof_core::progress::{Progress, ProgressTracker, WorkDone};
use qprof_core::stacks::SamplingSession;

use crate::collect::{PlanReadings, QueryInfo, RunIds, collect_profile, read_plan};
use crate::executor_memory::{DEFAULT_HEARTBEAT, MemoryMonitor};
use crate::io::{ProfilingObjectStoreRegistry, process_updater};
use crate::memory::AttributingPool;
use crate::options::QprofOptions;
use crate::planner::ProfilingQueryPlanner;
use crate::read_cache::ReadCache;
use crate::rule::ProfilingRule;
use crate::spawn::install_spawn_attribution;
use crate::spill::counting_disk_manager;

use crate::text::plan_text;
pub use outcome::{ProfileError, ProfiledQuery, QueryFailure};
use queries::Started;
pub use stream::QueryStream;

/// qprof for one application: instruments session builders, runs queries with their
/// profiles, and tells its listeners (an event log, live state, …) what happened.
///
/// Clones share everything. Stage and task ids are unique across all queries of a
/// profiler, as in one Spark application. The application starts when the first session
/// builder is instrumented (or at [`Profiler::start`], or at the first query) and ends at
/// [`Profiler::finish`]. Like a Spark context stopped by its shutdown hook, a profiler
/// whose last clone (a [`QueryStream`] holds one) is dropped without `finish` ends the
/// application with exit code 0, or 1 while the thread panics.
///
/// Queries are profiled when their session was instrumented by a profiler; run through a
/// profiler on another session, they report their rows and time but no operators.
#[derive(Clone, Debug)]
pub struct Profiler {
    shared: Arc<Shared>,
}

#[derive(Debug)]
struct Shared {
    bus: EventBus,
    ids: RunIds,
    next_query: AtomicUsize,
    spawned_work_attributed: bool,
    /// Queries planned and not yet ended, for snapshots.
    running: Mutex<Vec<RunningQuery>>,
    /// The cache the object stores of instrumented sessions read through.
    read_cache: Option<Arc<ReadCache>>,
    /// The executor's memory, sampled.
    memory: Arc<MemoryMonitor>,
}

/// A query between its planning and its end.
#[derive(Debug)]
struct RunningQuery {
    id: usize,
    description: String,
    text: String,
    clock: Instant,
    start_epoch_millis: u64,
    plan: Arc<dyn ExecutionPlan>,
    /// Its progress as shown so far, kept so it moves back by a bounded step at most.
    progress: ProgressTracker,
}

impl Drop for Shared {
    fn drop(&mut self) {
        if self.bus.started() && !self.bus.ended() {
            let exit_code = i32::from(std::thread::panicking());
            self.bus
                .post(&Event::AppEnd(AppEnd::new(epoch_millis(), exit_code)));
        }
    }
}

impl Default for Profiler {
    fn default() -> Self {
        Self::new()
    }
}

/// The application's name unless told otherwise: the program's file name and its
/// arguments.
fn default_app_name() -> String {
    let mut args = std::env::args_os();
    let program = args
        .next()
        .map(|p| {
            std::path::Path::new(&p)
                .file_name()
                .unwrap_or(&p)
                .to_string_lossy()
                .into_owned()
        })
        .unwrap_or_else(|| "qprof".to_string());
    std::iter::once(program)
        .chain(args.map(|a| a.to_string_lossy().into_owned()))
        .collect::<Vec<_>>()
        .join(" ")
}

impl Profiler {
    /// A profiler without listeners. Installs the spawn tracer (once per process) and
    /// measures the timer costs function tracking budgets with (once per process).
    pub fn new() -> Profiler {
        Profiler::with_cache(None)
    }

    /// A profiler whose instrumented sessions read their object stores through `cache`
    /// (which sessions of other profilers may share); each scan's bytes are then counted
    /// by the tier that served them.
    pub fn with_read_cache(cache: Arc<ReadCache>) -> Profiler {
        Profiler::with_cache(Some(cache))
    }

    fn with_cache(read_cache: Option<Arc<ReadCache>>) -> Profiler {
        let spawned_work_attributed = install_spawn_attribution();
        // measured once per process; better now than inside the first query
        let _ = timer_costs();
        Profiler {
            shared: Arc::new(Shared {
                bus: EventBus::new(),
                ids: RunIds::default(),
                next_query: AtomicUsize::new(1),
                spawned_work_attributed,
                running: Mutex::new(Vec::new()),
                memory: MemoryMonitor::new(read_cache.clone()),
                read_cache,
            }),
        }
    }

    /// Registers `listener` on the profiler's bus; if the application already started, it
    /// receives that start now.
    ///
    /// # Errors
    /// The listener's failure on the replayed start (e.g. a log it cannot create).
    pub fn add_listener(&self, listener: Arc<dyn Listener>) -> Result<(), ListenerFailure> {
        self.shared.bus.add_listener(listener)
    }

    /// The event bus, for listeners and for posting events of one's own.
    pub fn event_bus(&self) -> &EventBus {
        &self.shared.bus
    }

    /// Failures of listeners since the last call (e.g. an event log that could not be
    /// written). Queries are not failed by their listeners.
    pub fn take_listener_failures(&self) -> Vec<ListenerFailure> {
        self.shared.bus.take_failures()
    }

    /// The read cache instrumented sessions read through, if the profiler has one.
    pub fn read_cache(&self) -> Option<&Arc<ReadCache>> {
        self.shared.read_cache.as_ref()
    }

    /// Whether work that operators run on spawned tasks is attributed to them. It is not
    /// when another `JoinSetTracer` was installed in the process first; that work is then
    /// missing from the profile (never counted twice).
    pub fn attributes_spawned_work(&self) -> bool {
        self.shared.spawned_work_attributed
    }

    /// Instruments `builder`: appends the profiling rule, wraps the builder's own memory
    /// pool and query planner (so limits, spilling and extension planners keep working),
    /// and adds [`QprofOptions`] (defaults) unless the configuration has them. Call it
    /// last, after everything else is set on the builder. The application starts now if
    /// it has not (its properties are this configuration's).
    ///
    /// Instrumenting an instrumented builder changes nothing.
    pub fn instrument(&self, mut builder: SessionStateBuilder) -> SessionStateBuilder {
        let is_ours =
            |r: &Arc<dyn PhysicalOptimizerRule + Send + Sync>| r.name() == ProfilingRule::NAME;
        let instrumented = builder
            .physical_optimizer_rules()
            .as_ref()
            .is_some_and(|rules| rules.iter().any(is_ours))
            || builder
                .physical_optimizers()
                .as_ref()
                .is_some_and(|optimizer| optimizer.rules.iter().any(is_ours));
        if instrumented {
            if !self.shared.bus.started() {
                self.start(app_info(builder.config().as_ref()));
            }
            return builder;
        }
        let config = builder.config().take().unwrap_or_default();
        let config = if config.options().extensions.get::<QprofOptions>().is_some() {
            config
        } else {
            config.with_option_extension(QprofOptions::default())
        };
        let runtime = builder
            .runtime_env()
            .take()
            .unwrap_or_else(|| Arc::new(RuntimeEnv::default()));
        let runtime = self.wrap_runtime(runtime);
        let heartbeat = config
            .options()
            .extensions
            .get::<QprofOptions>()
            .map_or(DEFAULT_HEARTBEAT, |o| {
                Duration::from_millis(o.heartbeat_interval_ms)
            });
        self.shared.memory.beat_every(heartbeat);
        let planner = builder.query_planner().take();
        if !self.shared.bus.started() {
            self.start(app_info(Some(&config)));
        }
        crate::planning::time_rules(
            builder
                .with_config(config)
                .with_runtime_env(runtime)
                .with_query_planner(Arc::new(ProfilingQueryPlanner::new(planner)))
                .with_physical_optimizer_rule(Arc::new(ProfilingRule::new(Arc::clone(
                    &self.shared.memory,
                )))),
        )
    }

    /// The pool, the object stores and the disk manager of `runtime`, wrapped as
    /// [`Profiler::instrument`] wraps a builder's; a runtime wrapped already is returned as
    /// it is. The executor's memory samples include the pool.
    fn wrap_runtime(&self, runtime: Arc<RuntimeEnv>) -> Arc<RuntimeEnv> {
        self.wrap_runtime_with(runtime, None)
    }

    fn wrap_runtime_with(
        &self,
        runtime: Arc<RuntimeEnv>,
        unframed: Option<Arc<OperatorTaskCounters>>,
    ) -> Arc<RuntimeEnv> {
        // the pool, the object stores and the disk manager are wrapped together: a wrapped
        // pool means a runtime environment instrumented already
        if runtime.memory_pool.is::<AttributingPool>() {
            return runtime;
        }
        let pool = AttributingPool::new(Arc::clone(&runtime.memory_pool));
        let pool = match unframed {
            Some(owner) => pool.with_unframed_owner(owner),
            None => pool,
        };
        let runtime = Arc::new(RuntimeEnv {
            memory_pool: Arc::new(pool),
            object_store_registry: Arc::new(ProfilingObjectStoreRegistry::new(
                Arc::clone(&runtime.object_store_registry),
                process_updater(),
                self.shared.read_cache.clone(),
            )),
            disk_manager: counting_disk_manager(&runtime.disk_manager),
            ..RuntimeEnv::clone(&runtime)
        });
        self.shared.memory.add_pool(&runtime.memory_pool);
        runtime
    }

    /// For an engine that runs plans it did not plan (a cluster's executor): `runtime`
    /// with its memory pool, object stores and disk manager instrumented, so that a plan
    /// from [`Profiler::instrument_plan`] run on it attributes memory, I/O and spilling
    /// to its operators. The executor's memory is sampled on the heartbeat from now on,
    /// the pool's reservations as execution memory while the pool lives.
    pub fn instrument_runtime(&self, runtime: Arc<RuntimeEnv>) -> Arc<RuntimeEnv> {
        self.shared.memory.beat_every(DEFAULT_HEARTBEAT);
        self.wrap_runtime(runtime)
    }

    /// [`Profiler::instrument_runtime`], with the memory of consumers registered outside
    /// every operator's frame counted in `unframed` (an engine's own work beside the plan
    /// it runs, e.g. a cluster's shuffle writer, which Ballista drives on tasks of its own).
    pub fn instrument_runtime_counting_unframed(
        &self,
        runtime: Arc<RuntimeEnv>,
        unframed: Arc<OperatorTaskCounters>,
    ) -> Arc<RuntimeEnv> {
        self.shared.memory.beat_every(DEFAULT_HEARTBEAT);
        self.wrap_runtime_with(runtime, Some(unframed))
    }

    /// For an engine that runs plans it did not plan: `plan` with every operator wrapped
    /// in a [`ProfiledExec`](crate::ProfiledExec), as the profiling rule wraps a session's plans (a plan that
    /// is wrapped already is returned as it is).
    ///
    /// # Errors
    /// Only if a plan node cannot be rebuilt with its wrapped children.
    pub fn instrument_plan(
        &self,
        plan: Arc<dyn ExecutionPlan>,
    ) -> Result<Arc<dyn ExecutionPlan>, DataFusionError> {
        ProfilingRule::new(Arc::clone(&self.shared.memory))
            .optimize(plan, &datafusion::config::ConfigOptions::default())
    }

    /// The profile of a plan from [`Profiler::instrument_plan`] as it ran so far: its
    /// stages and tasks numbered from 0 (as the plan numbers them, not the run), `rows` its
    /// output and `duration` its wall time. Its operators have their values, not their
    /// display text (the engine that ran the plan has it) nor DataFusion's own metrics
    /// (the engine ships those: map them with
    /// [`operator_native_metrics`](crate::operator_native_metrics)).
    pub fn plan_profile(
        &self,
        plan: &Arc<dyn ExecutionPlan>,
        rows: u64,
        duration: Duration,
        start_epoch_millis: u64,
    ) -> QueryProfile {
        collect_profile(
            plan,
            QueryInfo {
                id: 0,
                sql: String::new(),
                rows,
                duration_nanos: u64::try_from(duration.as_nanos()).unwrap_or(u64::MAX),
                start_epoch_millis,
                ended: true,
                operator_texts: false,
                native_metrics: false,
            },
            &RunIds::default(),
        )
    }

    /// What a run of a plan from [`Profiler::instrument_plan`] left, read now: each
    /// operator's counters, function calls and dynamic filters, unnamed, for an engine that
    /// ships the values and names them where the plan was made (with
    /// [`operator_metrics`](crate::operator_metrics)). Much cheaper than
    /// [`Profiler::plan_profile`]: nothing is named or formatted.
    pub fn plan_readings(&self, plan: &Arc<dyn ExecutionPlan>) -> PlanReadings {
        read_plan(plan)
    }

    /// The executor's memory peaks, by region, over the samples taken from `from_millis`
    /// to `to_millis` (epoch ms) and the last one before; all 0 if there are none.
    pub fn memory_peaks_between(&self, from_millis: u64, to_millis: u64) -> MemorySample {
        self.shared
            .memory
            .recorder()
            .peaks_between(from_millis, to_millis)
            .unwrap_or_default()
    }

    /// Starts the application described by `app` (ignored if it started already).
    pub fn start(&self, app: AppInfo) {
        self.shared.bus.post(&Event::AppStart(app));
    }

    /// Ends the application with `exit_code` (0: success). Nothing is posted after it.
    ///
    /// # Errors
    /// The first listener failure not yet taken (this end's included); the others are
    /// dropped.
    pub fn finish(&self, exit_code: i32) -> Result<(), ListenerFailure> {
        self.shared
            .bus
            .post(&Event::AppEnd(AppEnd::new(epoch_millis(), exit_code)));
        match self.shared.bus.take_failures().into_iter().next() {
            Some(failure) => Err(failure),
            None => Ok(()),
        }
    }

    /// The ids of the queries running now (planned, not yet ended), oldest first.
    pub fn running_queries(&self) -> Vec<usize> {
        self.running().iter().map(|q| q.id).collect()
    }

    /// The profile of running query `id` as of now, from its live counters: what its
    /// operators did so far (rows, bytes read, time, memory), readable while it runs. Its
    /// stage and task ids continue the run's and are provisional (the final profile gets
    /// the next free ones when it ends); a task still running has finish time 0; `rows` is 0.
    /// `None` if no query `id` is running.
    pub fn snapshot(&self, id: usize) -> Option<QueryProfile> {
        let (plan, info) = {
            let running = self.running();
            let q = running.iter().find(|q| q.id == id)?;
            (
                Arc::clone(&q.plan),
                QueryInfo {
                    id,
                    sql: q.text.clone(),
                    rows: 0,
                    duration_nanos: u64::try_from(q.clock.elapsed().as_nanos()).unwrap_or(u64::MAX),
                    start_epoch_millis: q.start_epoch_millis,
                    ended: false,
                    operator_texts: true,
                    native_metrics: true,
                },
            )
        };
        Some(collect_profile(&plan, info, &self.shared.ids.continuing()))
    }

    /// [`Profiler::snapshot`] of running query `id` and its progress as of now: the
    /// fraction of its work done (below 1 until it ends, never back by more than a small
    /// step between two calls) and the time left at its recent rate (see
    /// [`qprof_core::progress`]). `None` if no query `id` is running.
    pub fn snapshot_progress(&self, id: usize) -> Option<(QueryProfile, Progress)> {
        let profile = self.snapshot(id)?;
        let work = WorkDone::of(&profile);
        let elapsed = Duration::from_nanos(profile.duration_nanos);
        let mut running = self.running();
        let query = running.iter_mut().find(|q| q.id == id)?;
        let progress = query.progress.update(elapsed, work);
        drop(running);
        Some((profile, progress))
    }

    /// Every running query as of now, oldest first: what it is, its plan and its
    /// [`Profiler::snapshot`].
    pub fn running_snapshots(&self) -> Vec<QuerySnapshot> {
        let running: Vec<(usize, String, Arc<dyn ExecutionPlan>)> = self
            .running()
            .iter()
            .map(|q| (q.id, q.description.clone(), Arc::clone(&q.plan)))
            .collect();
        running
            .into_iter()
            .filter_map(|(id, description, plan)| {
                let (profile, progress) = self.snapshot_progress(id)?;
                Some(QuerySnapshot {
                    description,
                    plan_text: plan_text(&plan),
                    profile,
                    progress,
                })
            })
            .collect()
    }

    /// The executor's memory now, by region (also kept among its samples).
    pub fn memory_now(&self) -> MemorySample {
        self.shared.memory.sample()
    }

    fn running(&self) -> std::sync::MutexGuard<'_, Vec<RunningQuery>> {
        self.shared
            .running
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Keeps `plan` of the started query for snapshots until the query ends, and notes the
    /// memory pool it reserves from: a query starting alone starts the pool's high-water
    /// mark afresh.
    fn track(&self, started: &mut Started, plan: &Arc<dyn ExecutionPlan>, task_ctx: &TaskContext) {
        let pool = task_ctx.memory_pool();
        let attributing = pool.downcast_ref::<AttributingPool>();
        started.pool = attributing.map(|_| Arc::clone(pool));
        let mut running = self.running();
        if running.is_empty()
            && let Some(attributing) = attributing
        {
            attributing.restart_high_water();
        }
        let hz = QprofOptions::of(task_ctx.session_config().options()).stack_sample_hz;
        if hz > 0 && started.sampling.is_none() {
            crate::stack_samples::register_operator_entries();
            match SamplingSession::start(hz) {
                Ok(session) => started.sampling = Some(session),
                Err(e) => started.sampling_error = Some(e.to_string()),
            }
        }
        running.push(RunningQuery {
            id: started.id,
            description: started.description.clone(),
            text: started.text.clone(),
            clock: started.clock,
            start_epoch_millis: started.start_epoch_millis,
            plan: Arc::clone(plan),
            progress: ProgressTracker::new(),
        });
    }

    fn next_query_id(&self) -> usize {
        self.shared.next_query.fetch_add(1, Ordering::Relaxed)
    }
}

/// A running query as of a moment: what it is and what it did so far.
#[derive(Debug, Clone)]
pub struct QuerySnapshot {
    /// Short description (e.g. `q5`).
    pub description: String,
    /// The physical plan as indented text.
    pub plan_text: String,
    /// Its profile so far (see [`Profiler::snapshot`]).
    pub profile: QueryProfile,
    /// How far it got and how long it has left (see [`Profiler::snapshot_progress`]).
    pub progress: Progress,
}

/// The application a session with `config` (DataFusion's defaults if `None`) is: the
/// process's name and arguments, the configuration as its properties, a core per target
/// partition.
fn app_info(config: Option<&SessionConfig>) -> AppInfo {
    let default = SessionConfig::new();
    let config = config.unwrap_or(&default);
    let mut app = AppInfo::new(
        default_app_name(),
        format!("DataFusion {}", datafusion::DATAFUSION_VERSION),
        u32::try_from(config.target_partitions()).unwrap_or(u32::MAX),
    );
    app.properties = config
        .options()
        .entries()
        .into_iter()
        .filter_map(|e| e.value.map(|v| (e.key, v)))
        .collect();
    app
}
