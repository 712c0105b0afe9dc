//! `qprof sql --history`: the `qprof.*` tables over a log directory, registered in the
//! session beside the statements' own tables.

use std::path::Path;
use std::sync::Arc;

use anyhow::{Context, Result};
use datafusion::prelude::SessionContext;
use qprof_server::store::StoreOptions;

use crate::location::LogLocation;

/// Registers the history of the logs at `location` (a directory or an `s3://` prefix,
/// through `endpoint`), its replays kept in `store_dir` when given; the store is scanned
/// once, so logs written later (this run's own) are not in it.
pub(crate) async fn register(
    ctx: &SessionContext,
    location: &Path,
    endpoint: Option<&str>,
    store_dir: Option<&Path>,
) -> Result<()> {
    let remote = location.to_string_lossy().starts_with("s3://");
    let location = LogLocation::of(location, endpoint.filter(|_| remote))?;
    if let Some(dir) = store_dir {
        std::fs::create_dir_all(dir)
            .with_context(|| format!("cannot create the store directory '{}'", dir.display()))?;
    }
    let options = StoreOptions {
        store_dir: store_dir.map(Path::to_path_buf),
        ..StoreOptions::default()
    };
    let store = location.open(options).await?;
    qprof_history::register_store(ctx, Arc::new(store))?;
    Ok(())
}
