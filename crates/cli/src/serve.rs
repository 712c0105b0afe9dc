//! `qprof serve`: the history server over a log directory.

use std::path::Path;
use std::sync::Arc;

use anyhow::{Context, Result};

use crate::cli::ServeArgs;
use crate::location::LogLocation;

/// `qprof serve`: the history server over a log directory, until interrupted.
pub(crate) async fn serve(args: ServeArgs) -> Result<()> {
    let dir: &Path = &args.log_dir;
    let defaults = qprof_server::store::StoreOptions::default();
    let options = qprof_server::store::StoreOptions {
        update_interval: args.update_interval,
        max_memory_bytes: args.max_memory as u64,
        replay_threads: args
            .replay_threads
            .map_or(defaults.replay_threads, usize::from),
        cleaner: qprof_server::store::CleanerOptions {
            max_age: args.cleaner_max_age,
            max_num: args.cleaner_max_num.map(|n| n as usize),
        },
        store_dir: args.store_dir.clone(),
        store_max_disk_bytes: args.store_max_disk as u64,
    };
    let location = LogLocation::of(dir, args.s3_endpoint.as_deref())?;
    if let Some(store) = &args.store_dir {
        std::fs::create_dir_all(store)
            .with_context(|| format!("cannot create the store directory '{}'", store.display()))?;
    }
    let listener = tokio::net::TcpListener::bind((args.bind.as_str(), args.port))
        .await
        .with_context(|| format!("cannot listen on {}:{}", args.bind, args.port))?;
    // the scan (and its warnings) once the flags proved good
    let store = location.open(options).await?;
    let store = Arc::new(store);
    qprof_server::LogStore::spawn_scanner(&store);
    let address = listener
        .local_addr()
        .context("cannot read the bound address")?;
    println!(
        "qprof history server for '{}' at http://{address}/",
        dir.display()
    );
    use std::io::Write;
    std::io::stdout().flush().ok();
    let router = if args.no_sql {
        qprof_server::router(store)
    } else {
        let limits = qprof_history::SqlLimits {
            max_rows: args.sql_max_rows as usize,
            timeout: args.sql_timeout,
            memory_bytes: args.sql_memory,
            max_bytes: args.sql_max_bytes,
            concurrent: args.sql_concurrent as usize,
        };
        let service = qprof_history::SqlService::new(Arc::clone(&store), limits)
            .context("cannot start the SQL service")?;
        qprof_server::router_with_sql(store, Arc::new(service))
    };
    axum::serve(listener, router)
        .await
        .context("the server stopped")
}
