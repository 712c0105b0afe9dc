//! Where event logs are: a local directory or an object-store prefix, as `qprof serve`
//! and `qprof sql --history` name them.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context, Result, bail};
use qprof_eventlog::{EventLogError, Storage};
use qprof_server::store::StoreOptions;
use qprof_server::{LogStore, ObjectStorage};

/// Where the logs are: a local directory, or a prefix in an object store.
pub(crate) struct LogLocation {
    /// The storage the logs are in.
    pub(crate) storage: Storage,
    /// The directory (or prefix) in it.
    pub(crate) dir: PathBuf,
}

impl LogLocation {
    /// The location `dir` names: an `s3://bucket/prefix` URL (through the S3 client
    /// `qprof sql` uses, with `endpoint`) or a local directory, which must be readable.
    pub(crate) fn of(dir: &Path, endpoint: Option<&str>) -> Result<LogLocation> {
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

    /// These logs, with a compressed file allowed to decompress to at most `bytes`.
    pub(crate) fn with_max_log_bytes(self, bytes: u64) -> LogLocation {
        LogLocation {
            storage: self.storage.with_max_decoded_bytes(bytes),
            ..self
        }
    }

    /// The store over these logs, scanned once (on a blocking thread: an object store's
    /// client blocks on a runtime of its own).
    pub(crate) async fn open(&self, options: StoreOptions) -> Result<LogStore> {
        self.open_by(options, LogStore::open_in).await
    }

    /// The store over these logs once their directory could be listed, none read yet
    /// ([`LogStore::open_unscanned_in`]): a server's, that answers while the first scan
    /// reads them.
    pub(crate) async fn open_unscanned(&self, options: StoreOptions) -> Result<LogStore> {
        self.open_by(options, LogStore::open_unscanned_in).await
    }

    async fn open_by(
        &self,
        options: StoreOptions,
        open: fn(Storage, &Path, StoreOptions) -> Result<LogStore, EventLogError>,
    ) -> Result<LogStore> {
        let (storage, root) = (self.storage.clone(), self.dir.clone());
        tokio::task::spawn_blocking(move || open(storage, &root, options))
            .await
            .context("the first scan stopped")?
            .map_err(|e| match e {
                // the directory is named once, by the context
                EventLogError::Io { path, cause } if path == self.dir => anyhow::anyhow!(cause),
                other => anyhow::anyhow!(other),
            })
            .with_context(|| format!("cannot read log directory '{}'", self.dir.display()))
    }
}
