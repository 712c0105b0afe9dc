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

use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use datafusion::arrow::array::RecordBatch;
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::error::DataFusionError;
use datafusion::execution::memory_pool::{MemoryLimit, MemoryPool};
use datafusion::execution::runtime_env::RuntimeEnv;
use datafusion::execution::{
    RecordBatchStream, SendableRecordBatchStream, SessionStateBuilder, TaskContext,
};
use datafusion::physical_optimizer::PhysicalOptimizerRule;
use datafusion::physical_plan::{ExecutionPlan, collect, execute_stream};
use datafusion::prelude::{DataFrame, SessionConfig, SessionContext};
use futures::Stream;
use qprof_core::call_site::timer_costs;
use qprof_core::clock::epoch_millis;
use qprof_core::events::{
    AppEnd, AppInfo, Event, EventBus, Listener, ListenerFailure, QueryEnd, QueryStart,
};
use qprof_core::profile::{MemoryPoolUsage, QueryProfile};

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
use qprof_core::executor_memory::MemorySample;

/// Errors of running a profiled query.
#[derive(Debug, thiserror::Error)]
pub enum ProfileError {
    /// Planning or execution failed in DataFusion. Shown as the root cause on one line;
    /// DataFusion's wrapping layers (which repeat it) are not a `source`.
    #[error("{}", error_line(.0))]
    DataFusion(DataFusionError),
    /// A stream's batch failed; the error itself went to the stream's reader.
    #[error("{0}")]
    Stream(String),
}

impl From<DataFusionError> for ProfileError {
    fn from(err: DataFusionError) -> Self {
        ProfileError::DataFusion(err)
    }
}

/// A DataFusion error as one line: its root cause (DataFusion nests the same cause in
/// layers that each repeat it), a parser error by its own message, no backtrace.
pub fn error_line(err: &DataFusionError) -> String {
    use datafusion::sql::sqlparser::parser::ParserError;
    let root = err.find_root();
    let text = match root {
        DataFusionError::SQL(parse, _) => match parse.as_ref() {
            ParserError::ParserError(m) | ParserError::TokenizerError(m) => {
                format!("SQL error: {m}")
            }
            other => format!("SQL error: {other}"),
        },
        other => other.strip_backtrace(),
    };
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join(" ")
}

/// A query's result and its profile.
#[derive(Debug)]
pub struct ProfiledQuery {
    /// The result batches.
    pub batches: Vec<RecordBatch>,
    /// The executed (wrapped) physical plan.
    pub plan: Arc<dyn ExecutionPlan>,
    /// The profile.
    pub profile: QueryProfile,
}

/// A query that failed, with what is known about it. Shown as its error.
#[derive(Debug, thiserror::Error)]
#[error("{error}")]
pub struct QueryFailure {
    /// Why it failed.
    pub error: ProfileError,
    /// The profile up to the failure, if the query was planned.
    pub profile: Option<Box<QueryProfile>>,
    /// When the query started, epoch ms.
    pub start_epoch_millis: u64,
}

/// The executed plan as indented text (the same text as DataFusion's EXPLAIN shows).
pub fn plan_text(plan: &Arc<dyn ExecutionPlan>) -> String {
    datafusion::physical_plan::displayable(plan.as_ref())
        .indent(true)
        .to_string()
}

/// One line of a query's text for descriptions: its first line that is not a comment,
/// shortened to 80 characters.
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
        builder
            .with_config(config)
            .with_runtime_env(runtime)
            .with_query_planner(Arc::new(ProfilingQueryPlanner::new(planner)))
            .with_physical_optimizer_rule(Arc::new(ProfilingRule::new(Arc::clone(
                &self.shared.memory,
            ))))
    }

    /// The pool, the object stores and the disk manager of `runtime`, wrapped as
    /// [`Profiler::instrument`] wraps a builder's; a runtime wrapped already is returned as
    /// it is. The executor's memory samples include the pool.
    fn wrap_runtime(&self, runtime: Arc<RuntimeEnv>) -> Arc<RuntimeEnv> {
        // the pool, the object stores and the disk manager are wrapped together: a wrapped
        // pool means a runtime environment instrumented already
        if runtime.memory_pool.is::<AttributingPool>() {
            return runtime;
        }
        let runtime = Arc::new(RuntimeEnv {
            memory_pool: Arc::new(AttributingPool::new(Arc::clone(&runtime.memory_pool))),
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
                let profile = self.snapshot(id)?;
                Some(QuerySnapshot {
                    description,
                    plan_text: plan_text(&plan),
                    profile,
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
        running.push(RunningQuery {
            id: started.id,
            description: started.description.clone(),
            text: started.text.clone(),
            clock: started.clock,
            start_epoch_millis: started.start_epoch_millis,
            plan: Arc::clone(plan),
        });
    }

    fn next_query_id(&self) -> usize {
        self.shared.next_query.fetch_add(1, Ordering::Relaxed)
    }

    /// Plans and runs `sql` in `ctx`; the query gets the next id of the profiler and is
    /// described by its first line.
    ///
    /// # Errors
    /// Fails if DataFusion cannot plan or execute the statement; the failure carries the
    /// partial profile when the statement was planned.
    pub async fn run_sql(
        &self,
        ctx: &SessionContext,
        sql: &str,
    ) -> Result<ProfiledQuery, QueryFailure> {
        let id = self.next_query_id();
        self.run_sql_as(ctx, id, &describe_sql(sql), sql).await
    }

    /// Plans and runs `sql` in `ctx` as query `id`, described as `description`. The id is
    /// the caller's: the profiler does not check it against the ids it hands out.
    ///
    /// # Errors
    /// As [`Profiler::run_sql`].
    pub async fn run_sql_as(
        &self,
        ctx: &SessionContext,
        id: usize,
        description: &str,
        sql: &str,
    ) -> Result<ProfiledQuery, QueryFailure> {
        let started = self.begin(id, description, sql);
        let planned = async {
            let frame = ctx.sql(sql).await?;
            plan(frame).await
        }
        .await;
        self.collect_planned(started, planned).await
    }

    /// Runs `frame` (any DataFrame, built with SQL or the DataFrame API); the query gets the
    /// next id and is described as `description`, its text being the logical plan.
    ///
    /// # Errors
    /// As [`Profiler::run_sql`].
    pub async fn run(
        &self,
        frame: DataFrame,
        description: &str,
    ) -> Result<ProfiledQuery, QueryFailure> {
        let started = self.begin_frame(&frame, description);
        self.collect_planned(started, plan(frame).await).await
    }

    /// Starts `frame` and returns its batches as a stream; the profile is taken, and the
    /// query's end posted, when the stream ends, fails or is dropped.
    ///
    /// # Errors
    /// Fails if the frame cannot be planned or started.
    pub async fn execute_stream(
        &self,
        frame: DataFrame,
        description: &str,
    ) -> Result<QueryStream, QueryFailure> {
        let mut started = self.begin_frame(&frame, description);
        let stream = match plan(frame).await {
            Ok((plan, task_ctx)) => {
                match execute_stream(Arc::clone(&plan), Arc::clone(&task_ctx)) {
                    Ok(stream) => {
                        self.track(&mut started, &plan, &task_ctx);
                        Ok((plan, stream))
                    }
                    Err(e) => Err((e, Some(plan))),
                }
            }
            Err(e) => Err((e, None)),
        };
        match stream {
            Ok((plan, inner)) => Ok(QueryStream {
                inner,
                plan,
                started: Some(started),
                rows: 0,
                profiler: self.clone(),
                profile: None,
            }),
            Err((error, plan)) => Err(self
                .end(started, plan.as_ref(), 0, Some(error.into()))
                .failure()),
        }
    }

    /// Starts a query of `frame`, whose text is its logical plan, under the next id.
    fn begin_frame(&self, frame: &DataFrame, description: &str) -> Started {
        let text = frame.logical_plan().display_indent().to_string();
        self.begin(self.next_query_id(), description, &text)
    }

    fn begin(&self, id: usize, description: &str, text: &str) -> Started {
        if !self.shared.bus.started() {
            self.start(app_info(None));
        }
        let started = Started {
            id,
            description: description.to_string(),
            text: text.to_string(),
            clock: Instant::now(),
            start_epoch_millis: epoch_millis(),
            pool: None,
        };
        self.shared.bus.post(&Event::QueryStart(QueryStart {
            id,
            description: started.description.clone(),
            text: started.text.clone(),
            start_epoch_millis: started.start_epoch_millis,
        }));
        started
    }

    async fn collect_planned(
        &self,
        mut started: Started,
        planned: Result<Planned, DataFusionError>,
    ) -> Result<ProfiledQuery, QueryFailure> {
        let (plan, task_ctx) = match planned {
            Ok(p) => p,
            Err(e) => return Err(self.end(started, None, 0, Some(e.into())).failure()),
        };
        self.track(&mut started, &plan, &task_ctx);
        let outcome = collect(Arc::clone(&plan), task_ctx).await;
        let rows = outcome.as_ref().map_or(0, |batches| {
            batches.iter().map(|b| b.num_rows() as u64).sum()
        });
        match outcome {
            Ok(batches) => {
                let ended = self.end(started, Some(&plan), rows, None);
                match ended.profile {
                    Some(profile) => Ok(ProfiledQuery {
                        batches,
                        plan,
                        profile,
                    }),
                    None => Err(ended.failure()),
                }
            }
            Err(e) => Err(self
                .end(started, Some(&plan), rows, Some(e.into()))
                .failure()),
        }
    }

    /// Ends a query: takes its profile (when it was planned) and posts its end.
    fn end(
        &self,
        started: Started,
        plan: Option<&Arc<dyn ExecutionPlan>>,
        rows: u64,
        error: Option<ProfileError>,
    ) -> Ended {
        let duration = started.clock.elapsed();
        self.running().retain(|q| q.id != started.id);
        let profile = plan.map(|plan| {
            let mut profile = collect_profile(
                plan,
                QueryInfo {
                    id: started.id,
                    sql: started.text.clone(),
                    rows,
                    duration_nanos: u64::try_from(duration.as_nanos()).unwrap_or(u64::MAX),
                    start_epoch_millis: started.start_epoch_millis,
                    ended: true,
                    operator_texts: true,
                    native_metrics: true,
                },
                &self.shared.ids,
            );
            profile.memory_pool = started.pool.as_ref().map(|pool| MemoryPoolUsage {
                limit_bytes: match pool.memory_limit() {
                    MemoryLimit::Finite(bytes) => Some(bytes as u64),
                    MemoryLimit::Infinite | MemoryLimit::Unknown => None,
                },
                peak_bytes: pool
                    .downcast_ref::<AttributingPool>()
                    .map_or(0, |p| p.high_water() as u64),
            });
            if !self.shared.spawned_work_attributed {
                profile.plan.info.push((
                    "warning".to_string(),
                    "work on spawned tasks is not attributed: another JoinSetTracer is installed"
                        .to_string(),
                ));
            }
            profile
        });
        let event = Event::QueryEnd(Box::new(QueryEnd {
            id: started.id,
            description: started.description,
            text: started.text,
            // rendering a plan costs as much as a third of collecting its profile: only
            // for listeners
            plan_text: plan
                .filter(|_| self.shared.bus.has_listeners())
                .map(plan_text)
                .unwrap_or_default(),
            start_epoch_millis: started.start_epoch_millis,
            end_epoch_millis: epoch_millis(),
            profile,
            error: error.as_ref().map(ToString::to_string),
        }));
        self.shared.bus.post(&event);
        // the profile travelled by reference; it comes back out of the event
        let profile = match event {
            Event::QueryEnd(end) => end.profile,
            _ => None,
        };
        Ended {
            profile,
            error,
            start_epoch_millis: started.start_epoch_millis,
        }
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
}

/// What a query's end leaves for its caller.
struct Ended {
    profile: Option<QueryProfile>,
    error: Option<ProfileError>,
    start_epoch_millis: u64,
}

impl Ended {
    /// The failure of a query that ended with an error.
    fn failure(self) -> QueryFailure {
        QueryFailure {
            error: self.error.unwrap_or_else(|| {
                ProfileError::DataFusion(DataFusionError::Internal(
                    "query ended without an error".to_string(),
                ))
            }),
            profile: self.profile.map(Box::new),
            start_epoch_millis: self.start_epoch_millis,
        }
    }
}

/// A physical plan and the task context to run it in.
type Planned = (Arc<dyn ExecutionPlan>, Arc<TaskContext>);

/// The physical plan of `frame` and the task context to run it in.
async fn plan(frame: DataFrame) -> Result<Planned, DataFusionError> {
    let task_ctx = Arc::new(frame.task_ctx());
    if let Some(options) = task_ctx
        .session_config()
        .options()
        .extensions
        .get::<QprofOptions>()
        && let Some(updater) = qprof_core::periodic::PeriodicUpdater::process()
    {
        updater.set_period(std::time::Duration::from_millis(
            options.counter_update_period_ms,
        ));
    }
    let plan = frame.create_physical_plan().await?;
    Ok((plan, task_ctx))
}

/// What is kept of a query between its start and its end.
#[derive(Debug)]
struct Started {
    id: usize,
    description: String,
    text: String,
    clock: Instant,
    start_epoch_millis: u64,
    /// The session's memory pool, once the query is planned (if it is qprof's).
    pool: Option<Arc<dyn MemoryPool>>,
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

/// The batches of a query started with [`Profiler::execute_stream`]. When it ends (or
/// fails, or is dropped first), the profile is taken and the query's end posted.
pub struct QueryStream {
    inner: SendableRecordBatchStream,
    plan: Arc<dyn ExecutionPlan>,
    started: Option<Started>,
    rows: u64,
    profiler: Profiler,
    profile: Option<QueryProfile>,
}

impl std::fmt::Debug for QueryStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("QueryStream")
            .field("rows", &self.rows)
            .field("ended", &self.started.is_none())
            .finish_non_exhaustive()
    }
}

impl QueryStream {
    /// The executed plan.
    pub fn plan(&self) -> &Arc<dyn ExecutionPlan> {
        &self.plan
    }

    /// The profile, once the stream ended.
    pub fn profile(&self) -> Option<&QueryProfile> {
        self.profile.as_ref()
    }

    fn finish(&mut self, error: Option<ProfileError>) {
        if let Some(started) = self.started.take() {
            self.profile = self
                .profiler
                .end(started, Some(&self.plan), self.rows, error)
                .profile;
        }
    }
}

impl Stream for QueryStream {
    type Item = datafusion::error::Result<RecordBatch>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = &mut *self;
        if this.started.is_none() {
            return Poll::Ready(None);
        }
        let next = this.inner.as_mut().poll_next(cx);
        match &next {
            Poll::Ready(Some(Ok(batch))) => this.rows += batch.num_rows() as u64,
            Poll::Ready(Some(Err(e))) => this.finish(Some(ProfileError::Stream(error_line(e)))),
            Poll::Ready(None) => this.finish(None),
            Poll::Pending => {}
        }
        next
    }
}

impl RecordBatchStream for QueryStream {
    fn schema(&self) -> SchemaRef {
        self.inner.schema()
    }
}

impl Drop for QueryStream {
    fn drop(&mut self) {
        self.finish(Some(ProfileError::Stream(
            "cancelled: the stream was dropped before its end".to_string(),
        )));
    }
}
