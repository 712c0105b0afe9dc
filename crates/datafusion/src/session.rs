//! Sessions that profile every query they run.

use std::sync::Arc;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use datafusion::arrow::array::RecordBatch;
use datafusion::error::DataFusionError;
use datafusion::execution::SessionStateBuilder;
use datafusion::execution::runtime_env::RuntimeEnv;
use datafusion::physical_plan::{ExecutionPlan, collect};
use datafusion::prelude::{SessionConfig, SessionContext};
use qprof_core::profile::QueryProfile;

use crate::collect::{QueryInfo, RunIds, collect_profile};
use crate::functions::{ProfilingQueryPlanner, timer_costs};
use crate::memory::AttributingPool;
use crate::options::QprofOptions;
use crate::rule::ProfilingRule;
use crate::spawn::install_spawn_attribution;

/// Errors of running a profiled query.
#[derive(Debug, thiserror::Error)]
pub enum ProfileError {
    /// Planning or execution failed in DataFusion.
    #[error("{}", one_line(.0))]
    DataFusion(#[from] DataFusionError),
}

/// DataFusion errors sometimes span lines (e.g. with backtraces or contexts); qprof
/// reports them on one.
fn one_line(err: &DataFusionError) -> String {
    err.to_string()
        .lines()
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

/// A DataFusion session whose physical plans are profiled operator by operator.
///
/// Results, plans and EXPLAIN output are the same as without qprof; each query run through
/// [`ProfilingSession::run`] also returns its [`QueryProfile`]. Stage and task ids are
/// unique across the queries of one session.
pub struct ProfilingSession {
    context: SessionContext,
    ids: RunIds,
    spawned_work_attributed: bool,
}

impl std::fmt::Debug for ProfilingSession {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProfilingSession")
            .field("session_id", &self.context.session_id())
            .field("ids", &self.ids)
            .finish()
    }
}

impl ProfilingSession {
    /// A profiling session with `config` and a default runtime.
    pub fn new(config: SessionConfig) -> Self {
        Self::with_runtime(config, Arc::new(RuntimeEnv::default()))
    }

    /// A profiling session with `config` and `runtime` (memory pool, disk manager, …).
    pub fn with_runtime(config: SessionConfig, runtime: Arc<RuntimeEnv>) -> Self {
        let spawned_work_attributed = install_spawn_attribution();
        let runtime = Arc::new(RuntimeEnv {
            memory_pool: Arc::new(AttributingPool::new(Arc::clone(&runtime.memory_pool))),
            ..RuntimeEnv::clone(&runtime)
        });
        let config = if config.options().extensions.get::<QprofOptions>().is_some() {
            config
        } else {
            config.with_option_extension(QprofOptions::default())
        };
        let state = SessionStateBuilder::new()
            .with_config(config)
            .with_runtime_env(runtime)
            .with_default_features()
            .with_query_planner(Arc::new(ProfilingQueryPlanner))
            .with_physical_optimizer_rule(Arc::new(ProfilingRule))
            .build();
        // measured once per process; better before the first query than inside it
        let _ = timer_costs();
        Self {
            context: SessionContext::new_with_state(state),
            ids: RunIds::default(),
            spawned_work_attributed,
        }
    }

    /// Whether work that operators run on spawned tasks is attributed to them. It is not
    /// when another `JoinSetTracer` was installed in the process first; that work is then
    /// missing from the profile (never counted twice).
    pub fn attributes_spawned_work(&self) -> bool {
        self.spawned_work_attributed
    }

    /// The underlying DataFusion context, e.g. to register tables.
    pub fn context(&self) -> &SessionContext {
        &self.context
    }

    /// Plans and runs `sql`, returning its result and profile.
    ///
    /// # Errors
    /// Fails if DataFusion cannot plan or execute the statement.
    pub async fn run(&self, query_id: usize, sql: &str) -> Result<ProfiledQuery, ProfileError> {
        self.run_recorded(query_id, sql).await.map_err(|f| f.error)
    }

    /// Like [`ProfilingSession::run`], but a query that fails while running still yields
    /// the profile of what ran until the failure.
    ///
    /// # Errors
    /// Fails if DataFusion cannot plan or execute the statement; the failure carries the
    /// partial profile when the statement was planned.
    pub async fn run_recorded(
        &self,
        query_id: usize,
        sql: &str,
    ) -> Result<ProfiledQuery, QueryFailure> {
        let start = Instant::now();
        let start_epoch_millis = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
        let unplanned = |e: DataFusionError| QueryFailure {
            error: e.into(),
            profile: None,
            start_epoch_millis,
        };
        let frame = self.context.sql(sql).await.map_err(unplanned)?;
        let plan = frame.create_physical_plan().await.map_err(unplanned)?;
        let outcome = collect(Arc::clone(&plan), self.context.task_ctx()).await;
        let duration = start.elapsed();
        let rows = outcome.as_ref().map_or(0, |batches| {
            batches.iter().map(|b| b.num_rows() as u64).sum()
        });
        let mut profile = collect_profile(
            &plan,
            QueryInfo {
                id: query_id,
                sql: sql.to_string(),
                rows,
                duration_nanos: u64::try_from(duration.as_nanos()).unwrap_or(u64::MAX),
                start_epoch_millis,
            },
            &self.ids,
        );
        if !self.spawned_work_attributed {
            profile.plan.info.push((
                "warning".to_string(),
                "work on spawned tasks is not attributed: another JoinSetTracer is installed"
                    .to_string(),
            ));
        }
        match outcome {
            Ok(batches) => Ok(ProfiledQuery {
                batches,
                plan,
                profile,
            }),
            Err(e) => Err(QueryFailure {
                error: e.into(),
                profile: Some(Box::new(profile)),
                start_epoch_millis,
            }),
        }
    }
}

/// A query that failed, with what is known about it.
#[derive(Debug)]
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

/// A plain DataFusion context with the same configuration as a [`ProfilingSession`] would
/// have, without instrumentation: the baseline for overhead measurements.
pub fn plain_context(config: SessionConfig, runtime: Arc<RuntimeEnv>) -> SessionContext {
    let state = SessionStateBuilder::new()
        .with_config(config)
        .with_runtime_env(runtime)
        .with_default_features()
        .build();
    SessionContext::new_with_state(state)
}
