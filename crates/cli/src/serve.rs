//! `qprof serve`: the history server over a log directory.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context, Result, bail};
use qprof_eventlog::EventLogError;
use qprof_eventlog::Storage;
use qprof_server::ObjectStorage;

use crate::cli::ServeArgs;

/// Where the logs are: a local directory, or a prefix in an object store.
struct LogLocation {
    storage: Storage,
    dir: PathBuf,
}

impl LogLocation {
    /// The location `dir` names: an `s3://bucket/prefix` URL (through the S3 client
    /// `qprof sql` uses, with `endpoint`) or a local directory, which must be readable.
    fn of(dir: &Path, endpoint: Option<&str>) -> Result<LogLocation> {
        let text = dir.to_string_lossy();
        if let Some(rest) = text.strip_prefix("s3://") {
            let bucket = rest.split('/').next().unwrap_or_default();
            if bucket.is_empty() {
                bail!("'{text}' names no bucket (s3://bucket/prefix/)");
            }
            let client = crate::data::s3_store(bucket, endpoint)?;
            let storage = ObjectStorage::new(Arc::new(client), &format!("s3://{bucket}"))
                .context("cannot start the object store client")?;
            return Ok(LogLocation {
                storage: Storage::new(Arc::new(storage)),
                dir: PathBuf::from(text.trim_end_matches('/')),
            });
        }
        if let Some((scheme, _)) = text.split_once("://") {
            bail!("'{text}': log directories are local paths or s3:// URLs, not {scheme}://");
        }
        if endpoint.is_some() {
            bail!("--s3-endpoint is for an s3:// --log-dir, and '{text}' is a local directory");
        }
        std::fs::read_dir(dir)
            .with_context(|| format!("cannot read log directory '{}'", dir.display()))?;
        Ok(LogLocation {
            storage: Storage::local(),
            dir: dir.to_path_buf(),
        })
    }
}

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
    let store = {
        let (storage, root) = (location.storage.clone(), location.dir.clone());
        tokio::task::spawn_blocking(move || {
            qprof_server::LogStore::open_in(storage, &root, options)
        })
        .await
        .context("the first scan stopped")?
        .map_err(|e| match e {
            // the directory is named once, by the context
            EventLogError::Io { path, cause } if path == location.dir => anyhow::anyhow!(cause),
            other => anyhow::anyhow!(other),
        })
        .with_context(|| format!("cannot read log directory '{}'", dir.display()))?
    };
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
    axum::serve(listener, qprof_server::router(store))
        .await
        .context("the server stopped")
}
