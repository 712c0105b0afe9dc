//! Running queries through a profiler: planning, tracking while they run, and their end
//! (the profile taken, the end posted).

use std::sync::Arc;
use std::time::Instant;

use datafusion::error::DataFusionError;
use datafusion::execution::TaskContext;
use datafusion::execution::memory_pool::{MemoryLimit, MemoryPool};
use datafusion::physical_plan::{ExecutionPlan, collect, execute_stream};
use datafusion::prelude::{DataFrame, SQLOptions, SessionContext};
use qprof_core::clock::epoch_millis;
use qprof_core::events::{Event, QueryEnd, QueryStart};
use qprof_core::planning::{PlanningPhase, PlanningProfile};
use qprof_core::profile::{MemoryPoolUsage, QueryProfile};
use qprof_core::trace_parent::TraceParent;

use crate::collect::{QueryInfo, collect_profile};
use crate::memory::AttributingPool;
use crate::options::QprofOptions;
use crate::planning::PlanningRecorder;
use crate::stack_samples::take_stack_samples;
use qprof_core::stacks::SamplingSession;

use super::{ProfileError, ProfiledQuery, Profiler, QueryFailure, QueryStream, app_info};
use crate::text::{describe_sql, plan_text};

impl Profiler {
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
        let mut started = self.begin(id, description, sql);
        let recorder = Arc::new(PlanningRecorder::new());
        // `SessionContext::sql`, step by step, each step timed
        let planned = recorder
            .scope(async {
                let state = ctx.state();
                let dialect = state.config().options().sql_parser.dialect;
                let statement = state.sql_to_statement(sql, &dialect)?;
                recorder.end_phase(PlanningPhase::Parse);
                let logical = state.statement_to_plan(statement).await?;
                SQLOptions::new().verify_plan(&logical)?;
                let frame = ctx.execute_logical_plan(logical).await?;
                recorder.end_phase(PlanningPhase::LogicalPlan);
                let planned = plan(frame).await;
                recorder.end_planning();
                planned
            })
            .await;
        started.planning = Some(recorder.take_profile());
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
        let mut started = self.begin_frame(&frame, description);
        let planned = plan_recorded(frame, &mut started).await;
        self.collect_planned(started, planned).await
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
        let stream = match plan_recorded(frame, &mut started).await {
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
    pub(super) fn begin_frame(&self, frame: &DataFrame, description: &str) -> Started {
        let text = frame.logical_plan().display_indent().to_string();
        self.begin(self.next_query_id(), description, &text)
    }

    pub(super) fn begin(&self, id: usize, description: &str, text: &str) -> Started {
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
            planning: None,
            trace_parent: crate::trace_context::current(),
            sampling: None,
            sampling_error: None,
            turn: qprof_core::executor_memory::QueryTurn::begin(),
        };
        self.shared.bus.post(&Event::QueryStart(QueryStart {
            id,
            description: started.description.clone(),
            text: started.text.clone(),
            start_epoch_millis: started.start_epoch_millis,
        }));
        started
    }

    pub(super) async fn collect_planned(
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
    pub(super) fn end(
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
            profile.planning = started.planning.clone();
            profile.overlapping_queries = started.turn.others();
            profile.memory_pool = started.pool.as_ref().map(|pool| MemoryPoolUsage {
                limit_bytes: match pool.memory_limit() {
                    MemoryLimit::Finite(bytes) => Some(bytes as u64),
                    MemoryLimit::Infinite | MemoryLimit::Unknown => None,
                },
                peak_bytes: pool
                    .downcast_ref::<AttributingPool>()
                    .map_or(0, |p| p.high_water() as u64),
            });
            if let Some(session) = &started.sampling {
                profile.stack_samples = Some(take_stack_samples(session, plan, &profile));
            }
            if let Some(error) = &started.sampling_error {
                profile
                    .plan
                    .info
                    .push(("warning".to_string(), error.clone()));
            }
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
            trace_parent: started.trace_parent,
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

/// What a query's end leaves for its caller.
pub(super) struct Ended {
    pub(super) profile: Option<QueryProfile>,
    pub(super) error: Option<ProfileError>,
    pub(super) start_epoch_millis: u64,
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
/// [`plan`], its planning (the analyzer, optimizer and physical planning) recorded in
/// `started`.
async fn plan_recorded(
    frame: DataFrame,
    started: &mut Started,
) -> Result<Planned, DataFusionError> {
    let recorder = Arc::new(PlanningRecorder::new());
    let planned = recorder.scope(plan(frame)).await;
    recorder.end_planning();
    started.planning = Some(recorder.take_profile());
    planned
}

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
pub(super) struct Started {
    pub(super) id: usize,
    pub(super) description: String,
    pub(super) text: String,
    pub(super) clock: Instant,
    pub(super) start_epoch_millis: u64,
    /// The session's memory pool, once the query is planned (if it is qprof's).
    pub(super) pool: Option<Arc<dyn MemoryPool>>,
    /// How its planning went, once it is planned (for a query of SQL text).
    pub(super) planning: Option<PlanningProfile>,
    /// The span it runs under, if its caller gave one.
    pub(super) trace_parent: Option<TraceParent>,
    /// Its share of the process's stack sampler, while it runs, if its session samples.
    pub(super) sampling: Option<SamplingSession>,
    /// Why its session's stack sampling could not start.
    pub(super) sampling_error: Option<String>,
    /// Its turn on the process's heap: which other queries ran beside it.
    pub(super) turn: qprof_core::executor_memory::QueryTurn,
}
