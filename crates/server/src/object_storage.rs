//! Log directories in an object store (S3 and the like), as Spark's history server reads
//! `s3a://` log directories: one recursive listing gives every object's size and time,
//! listing facts come from ranged reads of a log's head and tail, and a log in progress is
//! refreshed by reading only the bytes past what was read.
//!
//! Objects are named by paths of the form `<base>/<key>` (e.g. `s3://bucket/logs/app-1`),
//! so a message shows where a log is. The store's client runs on a small runtime of its
//! own; callers block on it from the scanner's and the loaders' threads.

use std::collections::BTreeSet;
use std::future::Future;
use std::io::ErrorKind;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use futures::TryStreamExt;
use object_store::path::Path as ObjectPath;
use object_store::{GetOptions, GetRange, ObjectMeta, ObjectStore, ObjectStoreExt};
use qprof_eventlog::ROLLING_DIR_PREFIX;
use qprof_eventlog::{EntryKind, Listed, LogStorage, StorageStats, StoredEntry};

/// A log directory's objects in an [`ObjectStore`].
pub struct ObjectStorage {
    store: Arc<dyn ObjectStore>,
    /// What object paths start with, without a trailing slash (`s3://bucket`).
    base: String,
    runtime: Option<tokio::runtime::Runtime>,
    lists: AtomicU64,
    reads: AtomicU64,
    bytes_read: AtomicU64,
}

impl std::fmt::Debug for ObjectStorage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ObjectStorage")
            .field("base", &self.base)
            .finish()
    }
}

impl Drop for ObjectStorage {
    fn drop(&mut self) {
        // without waiting: a storage may be dropped on an async task
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

/// An object store's error as an I/O error (not found stays not found), on one line.
fn io_error(e: object_store::Error) -> std::io::Error {
    let kind = match e {
        object_store::Error::NotFound { .. } => ErrorKind::NotFound,
        _ => ErrorKind::Other,
    };
    std::io::Error::new(kind, e.to_string().replace('\n', " "))
}

impl ObjectStorage {
    /// Objects of `store`, named `<base>/<key>` (`base` such as `s3://bucket`).
    ///
    /// # Errors
    /// If the client's runtime cannot start.
    pub fn new(store: Arc<dyn ObjectStore>, base: &str) -> std::io::Result<ObjectStorage> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("qprof-object-store")
            .enable_all()
            .build()?;
        Ok(ObjectStorage {
            store,
            base: base.trim_end_matches('/').to_string(),
            runtime: Some(runtime),
            lists: AtomicU64::new(0),
            reads: AtomicU64::new(0),
            bytes_read: AtomicU64::new(0),
        })
    }

    /// Runs `future` on the client's runtime and waits for it; callable from any thread,
    /// an async task's included.
    fn run<T: Send + 'static>(
        &self,
        future: impl Future<Output = std::io::Result<T>> + Send + 'static,
    ) -> std::io::Result<T> {
        let Some(runtime) = &self.runtime else {
            return Err(std::io::Error::other("the object store client stopped"));
        };
        let (tx, rx) = std::sync::mpsc::sync_channel(1);
        runtime.spawn(async move {
            let _ = tx.send(future.await);
        });
        rx.recv()
            .map_err(|_| std::io::Error::other("the object store request was dropped"))?
    }

    /// The key of the object (or prefix) at `path`; `None` for the store's root.
    fn key(&self, path: &Path) -> std::io::Result<Option<ObjectPath>> {
        let text = path.to_str().unwrap_or_default();
        let Some(rest) = text.strip_prefix(&self.base) else {
            return Err(std::io::Error::new(
                ErrorKind::InvalidInput,
                format!("{} is not under {}", path.display(), self.base),
            ));
        };
        let key = rest.trim_matches('/');
        if key.is_empty() {
            return Ok(None);
        }
        ObjectPath::parse(key)
            .map(Some)
            .map_err(|e| std::io::Error::new(ErrorKind::InvalidInput, e.to_string()))
    }

    /// The path naming `key`.
    fn path(&self, key: &ObjectPath) -> PathBuf {
        PathBuf::from(format!("{}/{key}", self.base))
    }

    /// A file entry for `meta`, named by its last segment.
    fn file_entry(&self, meta: &ObjectMeta, within: Option<String>) -> StoredEntry {
        StoredEntry {
            name: meta.location.filename().unwrap_or_default().to_string(),
            path: self.path(&meta.location),
            kind: EntryKind::File,
            len: meta.size,
            modified_millis: meta.last_modified.timestamp_millis(),
            within,
        }
    }

    /// A directory entry named `name` under `parent`.
    fn dir_entry(&self, parent: Option<&ObjectPath>, name: &str) -> StoredEntry {
        let key = match parent {
            Some(p) => format!("{p}/{name}"),
            None => name.to_string(),
        };
        StoredEntry {
            name: name.to_string(),
            path: PathBuf::from(format!("{}/{key}", self.base)),
            kind: EntryKind::Dir,
            len: 0,
            modified_millis: 0,
            within: None,
        }
    }

    /// Every object under `prefix` (the whole store for `None`).
    fn list_all(&self, prefix: Option<ObjectPath>) -> std::io::Result<Vec<ObjectMeta>> {
        self.lists.fetch_add(1, Ordering::Relaxed);
        let store = Arc::clone(&self.store);
        self.run(async move {
            store
                .list(prefix.as_ref())
                .try_collect::<Vec<_>>()
                .await
                .map_err(io_error)
        })
    }
}

impl LogStorage for ObjectStorage {
    fn list(&self, dir: &Path) -> std::io::Result<Vec<Listed>> {
        let prefix = self.key(dir)?;
        self.lists.fetch_add(1, Ordering::Relaxed);
        let store = Arc::clone(&self.store);
        let asked = prefix.clone();
        let listed = self.run(async move {
            store
                .list_with_delimiter(asked.as_ref())
                .await
                .map_err(io_error)
        })?;
        let mut out: Vec<Listed> = Vec::new();
        for common in &listed.common_prefixes {
            let name = common.filename().unwrap_or_default();
            out.push(Ok(self.dir_entry(prefix.as_ref(), name)));
        }
        for meta in &listed.objects {
            out.push(Ok(self.file_entry(meta, None)));
        }
        Ok(out)
    }

    /// One recursive listing of the prefix, however many logs it holds.
    fn list_logs(&self, dir: &Path) -> std::io::Result<Vec<Listed>> {
        let prefix = self.key(dir)?;
        let objects = self.list_all(prefix.clone())?;
        let skip = prefix.as_ref().map_or(0, |p| p.parts().count());
        let mut dirs = BTreeSet::new();
        let mut out: Vec<Listed> = Vec::new();
        for meta in &objects {
            let parts: Vec<_> = meta.location.parts().skip(skip).collect();
            match parts.as_slice() {
                [_] => out.push(Ok(self.file_entry(meta, None))),
                [parent, rest @ ..] => {
                    let parent = parent.as_ref();
                    if dirs.insert(parent.to_string()) {
                        out.push(Ok(self.dir_entry(prefix.as_ref(), parent)));
                    }
                    // a rolling log's own files, not what lies deeper
                    if rest.len() == 1 && parent.starts_with(ROLLING_DIR_PREFIX) {
                        out.push(Ok(self.file_entry(meta, Some(parent.to_string()))));
                    }
                }
                [] => {}
            }
        }
        Ok(out)
    }

    fn read_range(&self, path: &Path, offset: u64, limit: u64) -> std::io::Result<(Vec<u8>, u64)> {
        let Some(key) = self.key(path)? else {
            return Err(std::io::Error::new(
                ErrorKind::InvalidInput,
                format!("{} is not an object", path.display()),
            ));
        };
        self.reads.fetch_add(1, Ordering::Relaxed);
        let store = Arc::clone(&self.store);
        let (data, len) = self.run(async move {
            let range = if limit == u64::MAX {
                GetRange::Offset(offset)
            } else {
                GetRange::Bounded(offset..offset.saturating_add(limit))
            };
            let options = GetOptions {
                range: Some(range),
                ..GetOptions::default()
            };
            if limit == 0 {
                let meta = store.head(&key).await.map_err(io_error)?;
                return Ok((Vec::new(), meta.size));
            }
            let asked = store.get_opts(&key, options).await;
            match asked {
                Ok(got) => {
                    let len = got.meta.size;
                    let bytes = got.bytes().await.map_err(io_error)?;
                    Ok((bytes.to_vec(), len))
                }
                Err(e @ object_store::Error::NotFound { .. }) => Err(io_error(e)),
                // a range at or past the end (nothing new), or an empty object
                Err(e) => {
                    let meta = store.head(&key).await.map_err(io_error)?;
                    if offset >= meta.size {
                        Ok((Vec::new(), meta.size))
                    } else {
                        Err(io_error(e))
                    }
                }
            }
        })?;
        self.bytes_read
            .fetch_add(data.len() as u64, Ordering::Relaxed);
        Ok((data, len))
    }

    fn exists(&self, path: &Path) -> std::io::Result<bool> {
        let Some(key) = self.key(path)? else {
            return Ok(true);
        };
        let store = Arc::clone(&self.store);
        self.run(async move {
            match store.head(&key).await {
                Ok(_) => Ok(true),
                Err(object_store::Error::NotFound { .. }) => {
                    // a prefix exists while objects are under it
                    let mut under = store.list(Some(&key));
                    Ok(under.try_next().await.map_err(io_error)?.is_some())
                }
                Err(e) => Err(io_error(e)),
            }
        })
    }

    fn remove(&self, path: &Path) -> std::io::Result<()> {
        let Some(key) = self.key(path)? else {
            return Err(std::io::Error::new(
                ErrorKind::InvalidInput,
                "refusing to delete the whole store",
            ));
        };
        let mut doomed: Vec<ObjectPath> = self
            .list_all(Some(key.clone()))?
            .into_iter()
            .map(|m| m.location)
            .collect();
        if doomed.is_empty() {
            doomed.push(key);
        }
        let store = Arc::clone(&self.store);
        self.run(async move {
            for key in doomed {
                store.delete(&key).await.map_err(io_error)?;
            }
            Ok(())
        })
    }

    /// Requests wait on the network: a scan keeps 16 in flight.
    fn concurrent_reads(&self) -> Option<usize> {
        Some(16)
    }

    fn stats(&self) -> Option<StorageStats> {
        Some(StorageStats {
            lists: self.lists.load(Ordering::Relaxed),
            reads: self.reads.load(Ordering::Relaxed),
            bytes_read: self.bytes_read.load(Ordering::Relaxed),
        })
    }
}
