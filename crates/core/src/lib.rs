//! The engine-free core of qprof: metric kinds with Spark's semantics, clocks, live
//! counters, time attribution across nested operators, function call-site sampling, query
//! profiles and the advisor that reads them, and the event bus that carries them to their
//! outputs.
//!
//! Nothing here knows about DataFusion, Arrow or an async runtime; engine integrations
//! feed these types.
//!
//! ```
//! use qprof_core::metric::{spark_string, MetricKind, TaskValue};
//! let v = |value| TaskValue { task: None, value };
//! assert_eq!(spark_string(MetricKind::Size, &[v(1024)]), "1024.0 B");
//! ```
#![deny(missing_docs)]

pub mod advice;
pub mod alloc;
pub mod attribution;
pub mod call_site;
pub mod catalog;
pub mod clock;
pub mod counters;
pub mod events;
pub mod executor_memory;
pub mod format;
pub mod io;
pub mod metric;
pub mod periodic;
pub mod phases;
pub mod planning;
pub mod process;
pub mod profile;
pub mod progress;
pub mod sampling;
pub mod spill;
pub mod stable_id;
pub mod stacks;
pub mod trace_parent;
