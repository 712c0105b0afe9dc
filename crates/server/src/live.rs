//! What a running application tells the server beyond its log.

use std::path::PathBuf;

use qprof_eventlog::IdCounters;
use qprof_eventlog::LiveState;
use serde_json::Value;

/// What a running application tells about itself beyond its log: the queries running now
/// and the executor's memory now. Its owner computes it; the server only serves it.
pub trait LiveSource: Send + Sync + std::fmt::Debug {
    /// The live state now.
    fn live(&self) -> LiveState;

    /// The application's log (its directory, or its file), once it started: the log whose
    /// replay the running queries complete.
    fn log_path(&self) -> Option<PathBuf>;

    /// The Spark events of the queries running now, as far as each got (its execution,
    /// job, started stages and ended tasks; nothing that ends it), numbered from `ids`.
    fn running_events(&self, ids: &mut IdCounters) -> Vec<Value>;
}
