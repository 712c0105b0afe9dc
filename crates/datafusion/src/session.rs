//! A ready-made profiled session: a [`Profiler`] and the `SessionContext` it instruments.

use std::sync::Arc;

use datafusion::execution::SessionStateBuilder;
use datafusion::execution::runtime_env::RuntimeEnv;
use datafusion::prelude::{SessionConfig, SessionContext};

use crate::profiler::{ProfileError, ProfiledQuery, Profiler, QueryFailure};
use crate::text::describe_sql;

/// A DataFusion session whose physical plans are profiled operator by operator: a
/// convenience over [`Profiler::instrument`] for programs that start from a configuration.
///
/// Results, plans and EXPLAIN output are the same as without qprof; each query run through
/// [`ProfilingSession::run`] also returns its [`qprof_core::profile::QueryProfile`]. Stage
/// and task ids are unique across the queries of one session.
pub struct ProfilingSession {
    context: SessionContext,
    profiler: Profiler,
}

impl std::fmt::Debug for ProfilingSession {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProfilingSession")
            .field("session_id", &self.context.session_id())
            .field("profiler", &self.profiler)
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
        Self::with_profiler(Profiler::new(), config, runtime)
    }

    /// A session with `config` and `runtime` instrumented by `profiler` (e.g. one made
    /// with [`Profiler::with_read_cache`]).
    pub fn with_profiler(
        profiler: Profiler,
        config: SessionConfig,
        runtime: Arc<RuntimeEnv>,
    ) -> Self {
        let builder = SessionStateBuilder::new()
            .with_config(config)
            .with_runtime_env(runtime)
            .with_default_features();
        let state = profiler.instrument(builder).build();
        Self {
            context: SessionContext::new_with_state(state),
            profiler,
        }
    }

    /// The same session where files and URLs can be queried as tables by their location
    /// (`SELECT * FROM 'data/x.parquet'`), as in `datafusion-cli`.
    pub fn with_url_tables(self) -> Self {
        Self {
            context: self.context.enable_url_table(),
            profiler: self.profiler,
        }
    }

    /// Whether work that operators run on spawned tasks is attributed to them (see
    /// [`Profiler::attributes_spawned_work`]).
    pub fn attributes_spawned_work(&self) -> bool {
        self.profiler.attributes_spawned_work()
    }

    /// The underlying DataFusion context, e.g. to register tables.
    pub fn context(&self) -> &SessionContext {
        &self.context
    }

    /// The profiler: listeners, the application's end.
    pub fn profiler(&self) -> &Profiler {
        &self.profiler
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
        self.run_described(query_id, &describe_sql(sql), sql).await
    }

    /// Like [`ProfilingSession::run_recorded`], with the description its events carry
    /// (e.g. `q5`).
    ///
    /// # Errors
    /// As [`ProfilingSession::run_recorded`].
    pub async fn run_described(
        &self,
        query_id: usize,
        description: &str,
        sql: &str,
    ) -> Result<ProfiledQuery, QueryFailure> {
        self.profiler
            .run_sql_as(&self.context, query_id, description, sql)
            .await
    }
}
