//! qprof embedded in an application's own session: the session's extension planner, memory
//! pool and functions keep working, queries of any kind are profiled, and the event bus
//! tells listeners what happened.

use std::cmp::Ordering;
use std::fmt;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use datafusion::arrow::array::{AsArray, Int64Array, RecordBatch};
use datafusion::arrow::datatypes::{DataType, Field, Int64Type, Schema};
use datafusion::catalog::Session;
use datafusion::common::{DFSchema, DFSchemaRef, Result};
use datafusion::datasource::memory::MemorySourceConfig;
use datafusion::execution::context::QueryPlanner;
use datafusion::execution::memory_pool::MemoryLimit;
use datafusion::execution::runtime_env::RuntimeEnvBuilder;
use datafusion::execution::{FunctionRegistry, SessionStateBuilder};
use datafusion::logical_expr::physical_planning_context::PhysicalPlanningContext;
use datafusion::logical_expr::{
    ColumnarValue, Expr, Extension, LogicalPlan, UserDefinedLogicalNode,
    UserDefinedLogicalNodeCore, Volatility, create_udf,
};
use datafusion::physical_plan::ExecutionPlan;
use datafusion::physical_planner::{DefaultPhysicalPlanner, ExtensionPlanner, PhysicalPlanner};
use datafusion::prelude::{DataFrame, SessionConfig, SessionContext, col};
use futures::StreamExt;
use qprof_core::events::{Event, Listener, ListenerError};
use qprof_core::profile::{QueryProfile, names};
use qprof_datafusion::{Profiler, ProfilingSession};

mod common;
use common::AuditedPool;

/// A leaf node of the application's own: the numbers 1..=n in column `x`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Numbers {
    n: i64,
    schema: DFSchemaRef,
}

impl PartialOrd for Numbers {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        self.n.partial_cmp(&other.n)
    }
}

fn numbers_schema() -> Arc<Schema> {
    Arc::new(Schema::new(vec![Field::new("x", DataType::Int64, false)]))
}

impl UserDefinedLogicalNodeCore for Numbers {
    fn name(&self) -> &str {
        "Numbers"
    }
    fn inputs(&self) -> Vec<&LogicalPlan> {
        vec![]
    }
    fn schema(&self) -> &DFSchemaRef {
        &self.schema
    }
    fn expressions(&self) -> Vec<Expr> {
        vec![]
    }
    fn fmt_for_explain(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "Numbers: n={}", self.n)
    }
    fn with_exprs_and_inputs(&self, _exprs: Vec<Expr>, _inputs: Vec<LogicalPlan>) -> Result<Self> {
        Ok(self.clone())
    }
}

/// Plans `Numbers` as an in-memory scan; without it DataFusion cannot plan the node.
#[derive(Debug)]
struct NumbersPlanner;

#[async_trait]
impl ExtensionPlanner for NumbersPlanner {
    async fn plan_extension(
        &self,
        _planner: &dyn PhysicalPlanner,
        node: &dyn UserDefinedLogicalNode,
        _logical_inputs: &[&LogicalPlan],
        _physical_inputs: &[Arc<dyn ExecutionPlan>],
        _session: &dyn Session,
        _planning_ctx: &PhysicalPlanningContext,
    ) -> Result<Option<Arc<dyn ExecutionPlan>>> {
        let Some(numbers) = node.as_any().downcast_ref::<Numbers>() else {
            return Ok(None);
        };
        let values = Int64Array::from_iter_values(1..=numbers.n);
        let batch = RecordBatch::try_new(numbers_schema(), vec![Arc::new(values)])?;
        Ok(Some(MemorySourceConfig::try_new_exec(
            &[vec![batch]],
            numbers_schema(),
            None,
        )?))
    }
}

/// The application's query planner: DataFusion's, with its extension planner.
#[derive(Debug)]
struct AppPlanner;

#[async_trait]
impl QueryPlanner for AppPlanner {
    async fn create_physical_plan(
        &self,
        logical_plan: &LogicalPlan,
        session: &dyn Session,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        DefaultPhysicalPlanner::with_extension_planners(vec![Arc::new(NumbersPlanner)])
            .create_physical_plan(logical_plan, session)
            .await
    }
}

/// A listener that keeps what it is told.
#[derive(Debug, Default)]
struct Recorder(Mutex<Vec<Event>>);

impl Listener for Recorder {
    fn on_event(&self, event: &Event) -> Result<(), ListenerError> {
        self.0.lock().unwrap().push(event.clone());
        Ok(())
    }
}

impl Recorder {
    fn kinds(&self) -> Vec<&'static str> {
        self.0.lock().unwrap().iter().map(Event::kind).collect()
    }
}

const LIMIT: usize = 64 << 20;

/// The application's session, then qprof on top of it, as an embedder writes it.
fn app_session(profiler: &Profiler, pool: Arc<AuditedPool>) -> SessionContext {
    let runtime = RuntimeEnvBuilder::new()
        .with_memory_pool(pool)
        .build_arc()
        .unwrap();
    let builder = SessionStateBuilder::new()
        .with_config(SessionConfig::new().with_target_partitions(2))
        .with_runtime_env(runtime)
        .with_default_features()
        .with_query_planner(Arc::new(AppPlanner));
    let ctx = SessionContext::new_with_state(profiler.instrument(builder).build());
    let add_one = create_udf(
        "add_one",
        vec![DataType::Int64],
        DataType::Int64,
        Volatility::Immutable,
        Arc::new(|args: &[ColumnarValue]| {
            let arrays = ColumnarValue::values_to_arrays(args)?;
            let input = arrays[0].as_primitive::<Int64Type>();
            let out: Int64Array = input.iter().map(|v| v.map(|v| v + 1)).collect();
            Ok(ColumnarValue::Array(Arc::new(out)))
        }),
    );
    ctx.register_udf(add_one);
    ctx
}

fn audited_pool() -> Arc<AuditedPool> {
    Arc::new(AuditedPool::new(LIMIT))
}

fn numbers_frame(ctx: &SessionContext, n: i64) -> DataFrame {
    let node = Numbers {
        n,
        schema: Arc::new(DFSchema::try_from(numbers_schema().as_ref().clone()).unwrap()),
    };
    DataFrame::new(
        ctx.state(),
        LogicalPlan::Extension(Extension {
            node: Arc::new(node),
        }),
    )
}

fn sum_i64(batches: &[RecordBatch], column: usize) -> i64 {
    batches
        .iter()
        .map(|b| {
            let c = b.column(column).as_primitive::<Int64Type>();
            (0..c.len()).map(|i| c.value(i)).sum::<i64>()
        })
        .sum()
}

fn max_peak(profile: &QueryProfile) -> i64 {
    profile
        .plan
        .iter()
        .filter_map(|n| n.value(names::PEAK_MEMORY_BYTES))
        .max()
        .unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_applications_planner_pool_and_functions_keep_working() {
    let profiler = Profiler::new();
    let recorder = Arc::new(Recorder::default());
    profiler.add_listener(recorder.clone()).unwrap();
    let pool = audited_pool();
    let ctx = app_session(&profiler, Arc::clone(&pool));

    // the pool is the application's, seen through qprof's attribution
    assert!(matches!(
        ctx.runtime_env().memory_pool.memory_limit(),
        MemoryLimit::Finite(n) if n == LIMIT
    ));

    // the extension planner plans the application's node, the UDF computes, a sort
    // reserves memory from the application's pool
    const N: i64 = 100_000;
    let frame = numbers_frame(&ctx, N)
        .select(vec![
            ctx.udf("add_one").unwrap().call(vec![col("x")]).alias("y"),
        ])
        .unwrap()
        .sort(vec![col("y").sort(false, false)])
        .unwrap();
    let run = profiler.run(frame, "numbers").await.unwrap();
    let rows: usize = run.batches.iter().map(RecordBatch::num_rows).sum();
    assert_eq!(rows, N as usize);
    assert_eq!(sum_i64(&run.batches, 0), (2..=N + 1).sum::<i64>());
    let first = run.batches[0]
        .column(0)
        .as_primitive::<Int64Type>()
        .value(0);
    assert_eq!(first, N + 1, "sorted descending");

    let profile = &run.profile;
    assert_eq!(profile.rows, N as u64);
    assert_eq!(profile.plan.value(names::OUTPUT_ROWS), Some(N));
    // the scan the extension planner made is a profiled operator
    let scan = profile
        .plan
        .iter()
        .find(|n| n.display.contains("DataSourceExec") || n.name == "DataSourceExec")
        .expect("the extension's scan is in the profile");
    assert_eq!(scan.value(names::OUTPUT_ROWS), Some(N));
    // the registered function is timed where it ran
    let add_one: Vec<_> = profile
        .plan
        .iter()
        .flat_map(|n| &n.functions)
        .filter(|f| f.name == "add_one")
        .collect();
    assert_eq!(add_one.len(), 1, "{add_one:?}");
    assert_eq!(add_one[0].rows, N as u64);
    // memory went through the application's pool, and qprof saw the same reservations
    assert!(pool.grows.load(Relaxed) > 0);
    let peak = max_peak(profile);
    assert!(peak > 0);
    assert!(
        peak as usize <= pool.peak.load(Relaxed),
        "operator peak {peak} above the pool's {}",
        pool.peak.load(Relaxed)
    );

    // the listener heard the application and the query
    profiler.finish(0).unwrap();
    assert_eq!(
        recorder.kinds(),
        ["AppStart", "QueryStart", "QueryEnd", "AppEnd"]
    );
    let events = recorder.0.lock().unwrap();
    let Event::QueryEnd(end) = &events[2] else {
        panic!("not a query end")
    };
    assert_eq!(end.description, "numbers");
    assert!(end.error.is_none());
    assert_eq!(end.profile.as_ref().unwrap(), profile);
    assert!(end.plan_text.contains("SortExec"), "{}", end.plan_text);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_applications_memory_limit_still_applies() {
    let profiler = Profiler::new();
    let pool = Arc::new(AuditedPool::new(1024));
    let ctx = app_session(&profiler, pool);
    ctx.sql("SET datafusion.runtime.disk_manager.mode = 'Disabled'")
        .await
        .ok();
    let frame = numbers_frame(&ctx, 200_000)
        .sort(vec![col("x").sort(false, false)])
        .unwrap();
    let failure = profiler.run(frame, "too big").await.unwrap_err();
    assert!(
        failure.error.to_string().contains("Resources exhausted"),
        "{}",
        failure.error
    );
    assert!(failure.profile.is_some(), "the failed query was planned");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streams_are_profiled_when_they_end_or_are_dropped() {
    let profiler = Profiler::new();
    let recorder = Arc::new(Recorder::default());
    profiler.add_listener(recorder.clone()).unwrap();
    let ctx = app_session(&profiler, audited_pool());

    let mut stream = profiler
        .execute_stream(numbers_frame(&ctx, 5_000), "stream")
        .await
        .unwrap();
    let mut rows = 0;
    while let Some(batch) = stream.next().await {
        rows += batch.unwrap().num_rows();
    }
    assert_eq!(rows, 5_000);
    assert_eq!(stream.profile().unwrap().rows, 5_000);
    drop(stream);

    let frame = ctx
        .sql("SELECT x FROM (VALUES (1), (2), (3)) AS t(x) CROSS JOIN (VALUES (1), (2)) AS u(y)")
        .await
        .unwrap();
    let stream = profiler.execute_stream(frame, "abandoned").await.unwrap();
    drop(stream);
    let events = recorder.0.lock().unwrap();
    let ends: Vec<(&str, Option<&str>)> = events
        .iter()
        .filter_map(|e| match e {
            Event::QueryEnd(end) => Some((end.description.as_str(), end.error.as_deref())),
            _ => None,
        })
        .collect();
    assert_eq!(ends.len(), 2);
    assert_eq!(ends[0], ("stream", None));
    assert_eq!(ends[1].0, "abandoned");
    assert!(ends[1].1.unwrap().contains("dropped before its end"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn instrumenting_twice_changes_nothing_and_sql_errors_reach_listeners() {
    let profiler = Profiler::new();
    let recorder = Arc::new(Recorder::default());
    let builder = profiler.instrument(SessionStateBuilder::new().with_default_features());
    let state = profiler.instrument(builder).build();
    let rules = state
        .physical_optimizers()
        .iter()
        .filter(|r| r.name() == "qprof_profiling")
        .count();
    assert_eq!(rules, 1);
    // nor does instrumenting a builder made from an instrumented state
    let again = profiler
        .instrument(SessionStateBuilder::new_from_existing(state.clone()))
        .build();
    let rules = again
        .physical_optimizers()
        .iter()
        .filter(|r| r.name() == "qprof_profiling")
        .count();
    assert_eq!(rules, 1);
    // a listener registered after the start still gets it first
    profiler.add_listener(recorder.clone()).unwrap();
    let ctx = SessionContext::new_with_state(state);
    let failure = profiler.run_sql(&ctx, "SELEC 1").await.unwrap_err();
    assert!(failure.profile.is_none());
    let run = profiler
        .run_sql(&ctx, "SELECT 41 + 1 AS answer")
        .await
        .unwrap();
    assert_eq!(sum_i64(&run.batches, 0), 42);
    drop(ctx);
    drop(profiler);
    // the last handle gone, the application ended
    assert_eq!(
        recorder.kinds(),
        [
            "AppStart",
            "QueryStart",
            "QueryEnd",
            "QueryStart",
            "QueryEnd",
            "AppEnd"
        ]
    );
    let events = recorder.0.lock().unwrap();
    let Event::QueryEnd(failed) = &events[2] else {
        panic!("not a query end")
    };
    assert!(failed.error.as_deref().unwrap().contains("SELEC"));
    assert!(failed.profile.is_none() && failed.plan_text.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recursive_queries_run_as_without_qprof() {
    let sql = "WITH RECURSIVE t(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM t WHERE n < 100) \
               SELECT count(*) AS c, sum(n) AS s FROM t";
    let session = ProfilingSession::new(SessionConfig::new().with_target_partitions(2));
    let run = session.run(1, sql).await.unwrap();
    let plain = SessionContext::new_with_config(SessionConfig::new().with_target_partitions(2));
    let expected = plain.sql(sql).await.unwrap().collect().await.unwrap();
    assert_eq!(run.batches, expected);
    assert_eq!(sum_i64(&run.batches, 1), 5050);
    let recursive = run
        .profile
        .plan
        .iter()
        .find(|n| n.name == "RecursiveQueryExec")
        .expect("the recursive operator is profiled");
    assert_eq!(recursive.value(names::OUTPUT_ROWS), Some(100));
}
