//! qprof's DataFusion integration: every operator of a physical plan instrumented,
//! transparently, and the result turned into a [`qprof_core::profile::QueryProfile`].
//!
//! This is the only qprof crate that follows DataFusion's API.
//!
//! - [`ProfilingRule`] is a physical optimizer rule, appended last, that wraps each
//!   operator in a [`ProfiledExec`]. Plans, EXPLAIN output and results are unchanged.
//! - Each wrapper measures, per task: wall and CPU time inclusive and exclusive of its
//!   children ([`qprof_core::attribution`]), polls, rows, batches and bytes produced, exact
//!   peak memory through a per-operator view of the memory pool, and heap allocations.
//! - DataFusion's own metrics of each operator are kept and renamed through
//!   per-operator-type tables ([`definitions`]).
//! - The plan is cut into stages at exchanges; each stage partition is a task.
//! - Each scalar and aggregate function call site is timed, fully or by adaptive
//!   sampling, as the session's [`QprofOptions`] (`qprof.expression.*`) ask ([`functions`],
//!   [`aggregate_functions`]).
//!
//! [`ProfilingSession`] puts it together.
#![deny(missing_docs)]

pub mod aggregate_functions;
mod collect;
pub mod definitions;
mod exec;
pub mod function_bench;
pub mod functions;
mod memory;
pub mod options;
mod rule;
mod session;
mod spawn;
mod stats;

pub use collect::{QueryInfo, RunIds, collect_profile};
pub use exec::ProfiledExec;
pub use functions::ProfilingQueryPlanner;
pub use options::QprofOptions;
pub use rule::ProfilingRule;
pub use session::{
    ProfileError, ProfiledQuery, ProfilingSession, QueryFailure, plain_context, plan_text,
};
pub use spawn::install_spawn_attribution;
