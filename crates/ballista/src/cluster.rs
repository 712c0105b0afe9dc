//! A Ballista scheduler and executors with qprof inside, as processes start them.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use ballista_core::config::TaskSchedulingPolicy;
use ballista_core::extension::{
    ballista_aggregate_functions, ballista_scalar_functions, ballista_window_functions,
};
use ballista_core::optimizer::ballista_default_optimizer_rules;
use ballista_core::registry::BallistaFunctionRegistry;
use ballista_core::utils::default_config_producer;
use ballista_executor::executor_process::{ExecutorProcessConfig, start_executor_process};
use ballista_executor::metrics::ExecutorMetricCollectionPolicy;
use ballista_scheduler::cluster::BallistaCluster;
use ballista_scheduler::config::{SchedulerConfig, TaskDistributionPolicy};
use ballista_scheduler::scheduler_process::{create_scheduler, start_grpc_service_with_listener};
use datafusion::execution::runtime_env::RuntimeEnvBuilder;
use datafusion::execution::{SessionState, SessionStateBuilder};
use datafusion::prelude::SessionConfig;
use datafusion_proto::protobuf::{LogicalPlanNode, PhysicalPlanNode};
use qprof_datafusion::{Profiler, QprofOptions, plan_timed_calls};

use crate::client_pool::ConnectionPool;
use crate::codec::QprofPhysicalCodec;
use crate::engine::QprofExecutionEngine;
pub use crate::guard::{EXECUTOR_LOST_FAILURE, FETCH_FAILED};
use crate::guard::{GuardTimes, guard_jobs};
use crate::observer::ClusterObserver;
use crate::scheduler_port;

/// Why a scheduler or an executor could not start or stopped.
#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    /// Ballista's own error.
    #[error("{0}")]
    Ballista(#[from] ballista_core::error::BallistaError),
    /// Binding or reading the address failed.
    #[error("{0}")]
    Io(#[from] std::io::Error),
}

/// How a scheduler with qprof inside runs.
#[derive(Debug, Clone)]
pub struct SchedulerOptions {
    /// The host name executors and clients reach it by.
    pub external_host: String,
    /// Seconds without a heartbeat after which an executor counts as lost.
    pub executor_timeout_seconds: u64,
    /// HTTP routes served on the scheduler's port beside Ballista's gRPC service (by a
    /// scheduler with qprof inside only), e.g. the profiles of the clients' jobs. They
    /// must not claim `/healthz`, `/readyz` or Ballista's gRPC paths, nor a fallback.
    pub routes: axum::Router,
}

impl Default for SchedulerOptions {
    fn default() -> Self {
        Self {
            external_host: "localhost".to_string(),
            executor_timeout_seconds: 15,
            routes: axum::Router::new(),
        }
    }
}

/// Runs a push-staged Ballista scheduler on `listener` until it fails, its jobs and
/// executors observed by `observer` (Ballista's own scheduler, unobserved, if `None`).
///
/// # Errors
/// Ballista's, when the scheduler cannot start or its service stops.
pub async fn run_scheduler(
    listener: tokio::net::TcpListener,
    observer: Option<Arc<ClusterObserver>>,
    options: &SchedulerOptions,
) -> Result<(), ClusterError> {
    let port = listener.local_addr()?.port();
    let mut config = SchedulerConfig::default()
        .with_hostname(options.external_host.clone())
        .with_port(port)
        .with_scheduler_policy(TaskSchedulingPolicy::PushStaged)
        // spread tasks over the executors, as Spark does, rather than fill one first
        .with_task_distribution(TaskDistributionPolicy::RoundRobin);
    config.executor_timeout_seconds = options.executor_timeout_seconds;
    config.expire_dead_executor_interval_seconds = options.executor_timeout_seconds.clamp(1, 15);
    // jobs left when the last executor is lost fail after a timeout, not Ballista's 180 s
    config.no_executors_grace_period_seconds = options.executor_timeout_seconds;
    if observer.is_some() {
        // function calls planned timed, as the client's options ask, and shipped so
        config.override_config_producer = Some(Arc::new(qprof_config));
        config.override_session_builder = Some(Arc::new(timed_calls_session));
        config.override_physical_codec = Some(Arc::new(QprofPhysicalCodec::new(
            &BallistaFunctionRegistry::default(),
        )));
    }
    let cluster = BallistaCluster::new_from_config(&config).await?;
    let cluster = match &observer {
        Some(observer) => {
            let (jobs, executors) = observer.observe(cluster.job_state(), cluster.cluster_state());
            BallistaCluster::new(executors, jobs)
        }
        None => cluster,
    };
    let config = Arc::new(config);
    let scheduler =
        create_scheduler::<LogicalPlanNode, PhysicalPlanNode>(cluster, Arc::clone(&config)).await?;
    // a job left stuck by a lost executor is failed rather than left hanging
    let guard = observer.as_ref().map(|observer| {
        let times = GuardTimes {
            period: Duration::from_secs(1),
            grace: Duration::from_secs(options.executor_timeout_seconds.clamp(2, 30)),
        };
        tokio::spawn(guard_jobs(scheduler.clone(), Arc::clone(observer), times))
    });
    let served = if let Some(observer) = observer
        .as_ref()
        .filter(|_| !config.enable_embedded_flight_proxy)
    {
        let executors = observer.executors();
        scheduler_port::serve(
            listener,
            scheduler,
            &config,
            executors,
            options.routes.clone(),
        )
        .await
    } else {
        start_grpc_service_with_listener(listener, scheduler)
            .await
            .map_err(ClusterError::from)
    };
    if let Some(guard) = guard {
        guard.abort();
    }
    served?;
    Ok(())
}

/// Ballista's session configuration, with qprof's options: a client's `qprof.*` settings
/// reach the scheduler's planner and the executors' tasks.
fn qprof_config() -> SessionConfig {
    default_config_producer().with_option_extension(QprofOptions::default())
}

/// Ballista's scheduler session, planning each function call timed (see
/// [`QprofPhysicalCodec`]): what `default_session_builder` builds, with qprof's query
/// planner, built once (the scheduler builds a session for every job it is sent).
fn timed_calls_session(config: SessionConfig) -> datafusion::common::Result<SessionState> {
    let builder = SessionStateBuilder::new()
        .with_default_features()
        .with_config(config)
        .with_runtime_env(Arc::new(RuntimeEnvBuilder::new().build()?))
        .with_optimizer_rules(ballista_default_optimizer_rules())
        .with_scalar_functions(ballista_scalar_functions())
        .with_aggregate_functions(ballista_aggregate_functions())
        .with_window_functions(ballista_window_functions());
    Ok(plan_timed_calls(builder).build())
}

/// How an executor with qprof inside runs.
#[derive(Debug, Clone)]
pub struct ExecutorOptions {
    /// The scheduler's address.
    pub scheduler: SocketAddr,
    /// Its id (a new one if `None`).
    pub executor_id: Option<String>,
    /// The host it binds to and is reached by.
    pub host: String,
    /// The Arrow Flight port other executors fetch shuffle data from.
    pub flight_port: u16,
    /// The gRPC port the scheduler pushes tasks to.
    pub grpc_port: u16,
    /// Task slots (partitions run at once).
    pub vcores: usize,
    /// Where shuffle files go (if `None`, a new temporary directory that is removed when
    /// the executor stops).
    pub work_dir: Option<String>,
    /// The memory pool's size per task in bytes (unbounded if `None`).
    pub memory_pool_bytes: Option<u64>,
    /// Seconds between heartbeats to the scheduler.
    pub heartbeat_seconds: u64,
}

/// Runs a push-staged Ballista executor whose tasks `profiler` instruments (Ballista's
/// own engine runs them if `None`), until it is stopped (Ctrl-C, SIGTERM or the
/// scheduler).
///
/// # Errors
/// Ballista's, when the executor cannot start or register.
pub async fn run_executor(
    options: &ExecutorOptions,
    profiler: Option<Profiler>,
) -> Result<(), ClusterError> {
    // Ballista's own fallback names a temporary directory that nobody removes; this one
    // lives as long as the executor
    let temporary = options
        .work_dir
        .is_none()
        .then(|| tempfile::Builder::new().prefix("qprof-executor-").tempdir())
        .transpose()?;
    let work_dir = options.work_dir.clone().or_else(|| {
        temporary
            .as_ref()
            .map(|dir| dir.path().display().to_string())
    });
    let mut config = ExecutorProcessConfig {
        bind_host: options.host.clone(),
        external_host: Some(options.host.clone()),
        port: options.flight_port,
        grpc_port: options.grpc_port,
        scheduler_host: options.scheduler.ip().to_string(),
        scheduler_port: options.scheduler.port(),
        scheduler_connect_timeout_seconds: 30,
        vcores: options.vcores,
        task_scheduling_policy: TaskSchedulingPolicy::PushStaged,
        work_dir,
        executor_heartbeat_interval_seconds: options.heartbeat_seconds.max(1),
        metric_collection_policy: ExecutorMetricCollectionPolicy::ProcessOnly,
        memory_pool_size: Some(options.memory_pool_bytes.unwrap_or(0)),
        print_thread_info: false,
        ..ExecutorProcessConfig::default()
    };
    if profiler.is_some() {
        // the functions the codec decodes timed calls of are the ones the tasks look up
        let registry = Arc::new(BallistaFunctionRegistry::default());
        config.override_physical_codec = Some(Arc::new(QprofPhysicalCodec::new(&registry)));
        config.override_function_registry = Some(registry);
        config.override_config_producer = Some(Arc::new(qprof_config));
    }
    // shuffle reads reuse connections, as Ballista's own engine's do
    config.override_execution_engine = profiler.map(|p| {
        let engine = QprofExecutionEngine::new(p);
        let engine = if config.client_ttl > 0 {
            engine.with_client_pool(Arc::new(ConnectionPool::new(Duration::from_secs(
                config.client_ttl,
            ))))
        } else {
            engine
        };
        Arc::new(engine) as Arc<dyn ballista_executor::execution_engine::ExecutionEngine>
    });
    if let Some(id) = &options.executor_id {
        config.executor_id = id.clone();
    }
    let outcome = start_executor_process(Arc::new(config)).await;
    drop(temporary);
    Ok(outcome?)
}

/// `config` with Ballista's options as qprof's clients run: Ballista's static planner
/// (its adaptive one cannot recompute shuffle output lost with an executor: such a job
/// never ends), and a task per partition, as Spark has (Ballista's default packs as many
/// partitions into a task as its executor has free slots, so the first executor offered
/// takes a small stage whole). Statements may set either back.
pub fn client_config(config: SessionConfig) -> SessionConfig {
    use ballista::prelude::SessionConfigExt;
    use ballista_core::config::{
        BALLISTA_ADAPTIVE_PLANNER_ENABLED, BALLISTA_SCHEDULER_MAX_PARTITIONS_PER_TASK,
    };
    config
        .upgrade_for_ballista()
        .set_bool(BALLISTA_ADAPTIVE_PLANNER_ENABLED, false)
        .set_usize(BALLISTA_SCHEDULER_MAX_PARTITIONS_PER_TASK, 1)
}

/// Whether `error`, a job's failure, is the loss of an executor that had some of its
/// tasks or shuffle output ([`EXECUTOR_LOST_FAILURE`], [`FETCH_FAILED`]): the same query
/// run again, on the executors left, may succeed.
pub fn failed_for_a_lost_executor(error: &datafusion::error::DataFusionError) -> bool {
    let text = error.to_string();
    text.contains(EXECUTOR_LOST_FAILURE) || text.contains(FETCH_FAILED)
}

/// A client session on the cluster whose scheduler is at `url` (`df://HOST:PORT`), with
/// `config` (a job's name, partitions, …). It connects with its first query.
///
/// # Errors
/// When `url` is not a scheduler's URL.
pub async fn remote_session(
    url: &str,
    config: SessionConfig,
) -> datafusion::error::Result<datafusion::prelude::SessionContext> {
    use ballista::prelude::SessionContextExt;
    let config = client_config(config);
    let state = datafusion::execution::SessionStateBuilder::new()
        .with_config(config)
        .with_default_features()
        .build();
    datafusion::prelude::SessionContext::remote_with_state(url, state).await
}

/// Tells the scheduler at `url` that the client session `session_id` is over: its
/// application ends (its event log is complete).
///
/// # Errors
/// When the scheduler cannot be reached or refuses.
pub async fn end_session(url: &str, session_id: &str) -> Result<(), ClusterError> {
    use ballista_core::serde::protobuf::RemoveSessionParams;
    use ballista_core::serde::protobuf::scheduler_grpc_client::SchedulerGrpcClient;
    use ballista_core::utils::{GrpcClientConfig, create_grpc_client_connection};
    let address = url
        .strip_prefix("df://")
        .map_or_else(|| url.to_string(), |rest| format!("http://{rest}"));
    let channel = create_grpc_client_connection(address, &GrpcClientConfig::default())
        .await
        .map_err(|e| ballista_core::error::BallistaError::General(e.to_string()))?;
    SchedulerGrpcClient::new(channel)
        .remove_session(RemoveSessionParams {
            session_id: session_id.to_string(),
        })
        .await
        .map_err(|e| ballista_core::error::BallistaError::General(e.message().to_string()))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use ballista_core::utils::default_session_builder;

    fn sorted(names: impl Iterator<Item = String>) -> Vec<String> {
        let mut names: Vec<String> = names.collect();
        names.sort();
        names
    }

    #[test]
    fn the_timed_calls_session_is_ballistas_own_with_qprofs_planner() {
        let ours = timed_calls_session(qprof_config()).unwrap();
        let ballistas = default_session_builder(qprof_config()).unwrap();
        assert_eq!(
            sorted(ours.scalar_functions().keys().cloned()),
            sorted(ballistas.scalar_functions().keys().cloned())
        );
        assert_eq!(
            sorted(ours.aggregate_functions().keys().cloned()),
            sorted(ballistas.aggregate_functions().keys().cloned())
        );
        assert_eq!(
            sorted(ours.window_functions().keys().cloned()),
            sorted(ballistas.window_functions().keys().cloned())
        );
        let rules = |state: &SessionState| -> Vec<String> {
            let logical = state.optimizers().iter().map(|r| r.name().to_string());
            let analyzer = state.analyzer().rules.iter().map(|r| r.name().to_string());
            let physical = state
                .physical_optimizers()
                .iter()
                .map(|r| r.name().to_string());
            logical.chain(analyzer).chain(physical).collect()
        };
        assert_eq!(rules(&ours), rules(&ballistas));
        assert_eq!(
            ours.config().options().entries().len(),
            ballistas.config().options().entries().len()
        );
        assert!(format!("{:?}", ours.query_planner()).contains("ProfilingQueryPlanner"));
        assert!(!format!("{:?}", ballistas.query_planner()).contains("ProfilingQueryPlanner"));
    }
}
