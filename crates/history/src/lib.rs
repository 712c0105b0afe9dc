//! SQL over every run qprof and Spark logged: the `qprof.*` tables of a log directory
//! (or an object-store prefix), for DataFusion.
//!
//! [`register_history`] adds a schema named `qprof` to a session's default catalog; its
//! tables (`applications`, `queries`, `operators`, …) read the logs through the history
//! server's [`LogStore`]: its index lists the applications without reading them, filters
//! on the application id prune them before any is replayed, and a store directory
//! ([`qprof_server::store::StoreOptions::store_dir`]) keeps each replay, so a second query
//! over the same history reads no log.
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! let ctx = datafusion::prelude::SessionContext::new();
//! qprof_history::register_history(&ctx, "qprof-events")?;
//! ctx.sql("SELECT name, sum(self_cpu_nanos) FROM qprof.operators GROUP BY name ORDER BY 2 DESC")
//!     .await?
//!     .show()
//!     .await?;
//! # Ok(()) }
//! ```
#![deny(missing_docs)]

use std::path::Path;
use std::sync::Arc;

use datafusion::prelude::SessionContext;
use qprof_eventlog::EventLogError;
use qprof_server::LogStore;
use qprof_server::store::StoreOptions;

mod columns;
mod prune;
pub mod reference;
mod scan;
mod schema;
mod service;
mod tables;

pub use schema::{HistorySchema, SCHEMA_NAME, TABLE_NAMES};
pub use service::{SqlLimits, SqlService};

/// Why the history cannot be registered.
#[derive(Debug, thiserror::Error)]
pub enum HistoryError {
    /// The log directory cannot be listed (or the store directory created).
    #[error("cannot read log directory '{location}': {cause}")]
    Logs {
        /// The location given.
        location: String,
        /// What went wrong.
        cause: EventLogError,
    },
    /// The session's default catalog is missing or refuses the schema.
    #[error("cannot register the qprof schema: {0}")]
    Catalog(String),
}

/// Registers the `qprof` schema over the local log directory `dir` in `ctx`'s default
/// catalog, with the store's default options (no saved replays); returns the store its
/// tables read, which the caller may keep scanning ([`LogStore::spawn_scanner`]).
///
/// # Errors
/// If `dir` cannot be listed, or the session has no default catalog.
pub fn register_history(
    ctx: &SessionContext,
    dir: impl AsRef<Path>,
) -> Result<Arc<LogStore>, HistoryError> {
    register_history_with(ctx, dir, StoreOptions::default())
}

/// [`register_history`] with the store's options: its memory budget, the number of logs
/// replayed at once and, with a store directory, replays saved for the next query.
///
/// # Errors
/// As [`register_history`], and if the store directory cannot be created.
pub fn register_history_with(
    ctx: &SessionContext,
    dir: impl AsRef<Path>,
    options: StoreOptions,
) -> Result<Arc<LogStore>, HistoryError> {
    let dir = dir.as_ref();
    let store = LogStore::open_with(dir, options).map_err(|cause| HistoryError::Logs {
        location: dir.display().to_string(),
        cause,
    })?;
    let store = Arc::new(store);
    register_store(ctx, Arc::clone(&store))?;
    Ok(store)
}

/// Registers the `qprof` schema over `store` (a local directory or an object-store
/// prefix, opened by the caller) in `ctx`'s default catalog.
///
/// # Errors
/// If the session has no default catalog.
pub fn register_store(ctx: &SessionContext, store: Arc<LogStore>) -> Result<(), HistoryError> {
    let options = ctx.copied_config();
    let catalog_name = &options.options().catalog.default_catalog;
    let catalog = ctx
        .catalog(catalog_name)
        .ok_or_else(|| HistoryError::Catalog(format!("no catalog named '{catalog_name}'")))?;
    catalog
        .register_schema(SCHEMA_NAME, Arc::new(HistorySchema::new(store)))
        .map_err(|e| HistoryError::Catalog(e.to_string()))?;
    Ok(())
}
