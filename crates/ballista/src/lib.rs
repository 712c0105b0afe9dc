//! qprof on an Apache DataFusion Ballista 55 cluster.
//!
//! This is the only qprof crate that follows Ballista's API.
//!
//! - On each executor, [`QprofExecutionEngine`] runs every task's stage plan with qprof's
//!   operator wrappers and memory attribution in place (as a session instrumented by
//!   `qprof-datafusion` would), and ships what they measured with the task's own metrics
//!   in the kinds Ballista carries ([`wire`]): never a `Custom` metric, never a set more
//!   or less than the stage's plan has. Each call of a scalar or aggregate function is
//!   timed at a call site of its own, per task, as in one process: the scheduler plans
//!   the calls timed and [`QprofPhysicalCodec`] carries them to the executors.
//! - On the scheduler, [`ClusterObserver`] wraps Ballista's job and cluster state: each
//!   client session becomes an application on its own event bus, each job a query whose
//!   end carries its [`qprof_core::profile::QueryProfile`] ([`profile`]): the stage plans
//!   stitched into one tree, metrics by task, tasks by executor, executors' memory peaks
//!   per stage from the tasks and the heartbeats, executors joining and lost.
//! - [`cluster`] starts both as processes (`qprof cluster scheduler|executor`); the
//!   scheduler's port also serves HTTP routes given to it, e.g. the profiles of the jobs
//!   that ended lately ([`job_profiles`]), which clients fetch when their jobs end.
#![deny(missing_docs)]

pub mod client_pool;
pub mod cluster;
mod codec;
mod engine;
mod functions;
mod guard;
pub mod job_profiles;
mod observer;
pub mod profile;
mod scheduler_port;
pub mod wire;

pub use client_pool::ConnectionPool;
pub use codec::QprofPhysicalCodec;
pub use engine::{QprofExecutionEngine, QprofStageExec};
pub use observer::{ClusterObserver, ListenerFactory, ObservedClusterState, ObservedJobState};
