//! qprof's DataFusion integration: every operator of a physical plan instrumented,
//! transparently, and the result turned into a [`qprof_core::profile::QueryProfile`].
//!
//! This is the only qprof crate that follows DataFusion's API.
//!
//! - [`Profiler::instrument`] takes any `SessionStateBuilder` and adds a physical optimizer
//!   rule, appended last, that wraps each operator in a [`ProfiledExec`]; it wraps the
//!   builder's own memory pool and query planner, so limits, spilling and extension
//!   planners keep working. Plans, EXPLAIN output and results are unchanged.
//! - Each wrapper measures, per task: wall and CPU time inclusive and exclusive of its
//!   children ([`qprof_core::attribution`]), polls, rows, batches and bytes produced, exact
//!   peak memory through a per-operator view of the memory pool, and heap allocations.
//! - DataFusion's own metrics of each operator are kept and renamed through
//!   per-operator-type tables.
//! - The plan is cut into stages at exchanges; each stage partition is a task.
//! - Each scalar and aggregate function call site is timed, fully or by adaptive
//!   sampling, as the session's [`QprofOptions`] (`qprof.expression.*`) ask.
//! - [`Profiler::run`], [`Profiler::run_sql`] and [`Profiler::execute_stream`] run a query
//!   and return its profile; every query's start and end, and the application's, go to
//!   the listeners of the profiler's [`qprof_core::events::EventBus`] (e.g. the Spark event
//!   log of `qprof-eventlog`).
//!
//! - Every object store the session reads and writes through is wrapped: requests, bytes
//!   (by storage tier, with an optional [`ReadCache`]), read time, I/O wait and read
//!   concurrency are counted per operator task.
//!
//! - Each query of SQL text is timed phase by phase and rule by rule while it plans; a
//!   query run inside [`in_trace`] carries its caller's span to its listeners.
//!
//! [`ProfilingSession`] puts a profiler and a `SessionContext` together.
#![deny(missing_docs)]

mod aggregate_functions;
mod collect;
mod consumer;
mod counters;
mod decoded_functions;
mod definitions;
mod exec;
mod executor_memory;
#[cfg(feature = "bench")]
pub mod function_bench;
mod io;
mod joins;
mod memory;
mod native_metrics;
pub mod options;
mod planner;
mod planning;
mod profiler;
pub mod read_cache;
mod rule;
mod scalar_functions;
mod session;
mod spawn;
mod spill;
mod stack_samples;
mod text;
mod trace_context;

pub use collect::{
    NodeReading, OperatorMetrics, OperatorReading, PlanReadings, add_join_projection_metrics,
    operator_metrics,
};
pub use decoded_functions::{
    FunctionTimer, PlanSites, attach_sites, claim_sites, for_each_function_call,
    for_each_own_function_call, timed_aggregate, timed_aggregate_mode, timed_mode, timed_scalar,
    untimed_aggregate, untimed_scalar,
};
pub use definitions::operator_label;
pub use exec::ProfiledExec;
pub use joins::{JoinShape, join_shape};
pub use native_metrics::operator_native_metrics;
pub use options::QprofOptions;
pub use planner::plan_timed_calls;
pub use profiler::{
    ProfileError, ProfiledQuery, Profiler, QueryFailure, QuerySnapshot, QueryStream,
};
pub use read_cache::{ReadCache, ReadCacheConfig};
pub use session::ProfilingSession;
pub use text::{describe_sql, error_line, plan_text};
pub use trace_context::in_trace;
