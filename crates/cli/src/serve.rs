//! `qprof serve`: the history server over a log directory.

use std::path::Path;
use std::sync::Arc;

use anyhow::{Context, Result};

use crate::cli::ServeArgs;

/// `qprof serve`: the history server over a log directory, until interrupted.
pub(crate) async fn serve(args: ServeArgs) -> Result<()> {
    let dir: &Path = &args.log_dir;
    let store = qprof_server::LogStore::open(dir)
        .with_context(|| format!("cannot read log directory '{}'", dir.display()))?;
    let listener = tokio::net::TcpListener::bind((args.bind.as_str(), args.port))
        .await
        .with_context(|| format!("cannot listen on {}:{}", args.bind, args.port))?;
    let address = listener
        .local_addr()
        .context("cannot read the bound address")?;
    println!(
        "qprof history server for '{}' at http://{address}/",
        dir.display()
    );
    use std::io::Write;
    std::io::stdout().flush().ok();
    axum::serve(listener, qprof_server::router(Arc::new(store)))
        .await
        .context("the server stopped")
}
