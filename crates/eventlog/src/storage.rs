//! What a log directory is read through: a seam with the local file system behind it by
//! default, and an object store (the server's) where clusters keep their logs.
//!
//! Paths stay [`PathBuf`]s either way: a store names its objects with paths it can map
//! back to its keys (an S3 store uses `s3://bucket/key`), so messages show where a log is.

use std::fmt;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::UNIX_EPOCH;

use qprof_core::metric::saturating_i64;

/// Prefix of a rolling log's directory: storage lists such a directory's files with the
/// directory itself ([`LogStorage::list_logs`]).
pub const ROLLING_DIR_PREFIX: &str = "eventlog_v2_";

/// What an entry of a log directory is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EntryKind {
    /// A file (or object).
    File,
    /// A directory (or a prefix with objects under it).
    Dir,
}

/// One entry of a listing, with the facts the listing gave.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredEntry {
    /// Its name under its directory.
    pub name: String,
    /// Its full path.
    pub path: PathBuf,
    /// File or directory.
    pub kind: EntryKind,
    /// Bytes (what the storage says of a directory).
    pub len: u64,
    /// Last modification, epoch ms (0 when unknown).
    pub modified_millis: i64,
    /// The rolling log directory it is in, when listed by [`LogStorage::list_logs`] below
    /// the top level.
    pub within: Option<String>,
}

/// An entry that could not be read, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkippedEntry {
    /// The entry's name under the log directory.
    pub name: String,
    /// Why it was skipped, on one line.
    pub reason: String,
}

/// A listed entry, or the reason it cannot be read.
pub type Listed = Result<StoredEntry, SkippedEntry>;

/// Reading a log directory: listing it and reading byte ranges of its files.
pub trait LogStorage: Send + Sync + fmt::Debug {
    /// The entries directly under `dir`.
    ///
    /// # Errors
    /// Only if `dir` itself cannot be listed: an entry that cannot be read is `Err` in
    /// the list instead.
    fn list(&self, dir: &Path) -> std::io::Result<Vec<Listed>>;

    /// The entries under `dir` down to the files of its rolling logs: its own entries,
    /// and those of each directory among them named as a rolling log (marked
    /// [`StoredEntry::within`]). A directory that cannot be listed is `Err` in the list.
    ///
    /// # Errors
    /// Only if `dir` itself cannot be listed.
    fn list_logs(&self, dir: &Path) -> std::io::Result<Vec<Listed>> {
        let top = self.list(dir)?;
        let mut out = Vec::with_capacity(top.len());
        for entry in top {
            let rolling = matches!(&entry, Ok(e) if e.kind == EntryKind::Dir
                && e.name.starts_with(ROLLING_DIR_PREFIX));
            if !rolling {
                out.push(entry);
                continue;
            }
            let Ok(parent) = entry else { continue };
            match self.list(&parent.path) {
                Ok(children) => {
                    out.extend(children.into_iter().map(|child| {
                        child.map(|c| StoredEntry {
                            within: Some(parent.name.clone()),
                            ..c
                        })
                    }));
                    out.push(Ok(parent));
                }
                Err(e) => out.push(Err(SkippedEntry {
                    reason: format!("{}: {e}", parent.path.display()),
                    name: parent.name,
                })),
            }
        }
        Ok(out)
    }

    /// Up to `limit` bytes of the file at `path` from `offset` (none past its end), and
    /// the file's length.
    ///
    /// # Errors
    /// If the file cannot be read.
    fn read_range(&self, path: &Path, offset: u64, limit: u64) -> std::io::Result<(Vec<u8>, u64)>;

    /// Whether a file or directory exists at `path`.
    ///
    /// # Errors
    /// If that cannot be told.
    fn exists(&self, path: &Path) -> std::io::Result<bool>;

    /// Deletes the file, or the directory and everything in it, at `path`.
    ///
    /// # Errors
    /// If it cannot be deleted.
    fn remove(&self, path: &Path) -> std::io::Result<()>;

    /// How many entries a scan should read at once, for storages whose reads wait on a
    /// network rather than on a core (`None`: as many as there are replay threads).
    fn concurrent_reads(&self) -> Option<usize> {
        None
    }

    /// How reads went so far, for stores that count them.
    fn stats(&self) -> Option<StorageStats> {
        None
    }
}

/// Requests a store made and bytes it read.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StorageStats {
    /// Listing requests.
    pub lists: u64,
    /// Read requests (ranged or whole).
    pub reads: u64,
    /// Bytes the reads returned.
    pub bytes_read: u64,
}

/// The most bytes one compressed log file may decode to by default: 4 GiB.
pub const DEFAULT_MAX_DECODED_BYTES: u64 = 4 << 30;

/// A shared handle on a [`LogStorage`], with the most bytes a compressed file read
/// through it may decode to; two handles are equal when they share one storage.
#[derive(Clone)]
pub struct Storage {
    inner: Arc<dyn LogStorage>,
    max_decoded_bytes: u64,
}

impl Storage {
    /// A handle on `storage`.
    pub fn new(storage: Arc<dyn LogStorage>) -> Storage {
        Storage {
            inner: storage,
            max_decoded_bytes: DEFAULT_MAX_DECODED_BYTES,
        }
    }

    /// The local file system.
    pub fn local() -> Storage {
        static LOCAL: std::sync::OnceLock<Storage> = std::sync::OnceLock::new();
        LOCAL
            .get_or_init(|| Storage::new(Arc::new(LocalStorage)))
            .clone()
    }

    /// This handle, with compressed files allowed to decode to at most `bytes` each (a
    /// file that decodes to more is not read: [`crate::EventLogError::DecodedTooLarge`]).
    pub fn with_max_decoded_bytes(self, bytes: u64) -> Storage {
        Storage {
            max_decoded_bytes: bytes,
            ..self
        }
    }

    /// The most bytes a compressed file read through this handle may decode to.
    pub fn max_decoded_bytes(&self) -> u64 {
        self.max_decoded_bytes
    }

    /// The whole file at `path`.
    ///
    /// # Errors
    /// If it cannot be read.
    pub fn read(&self, path: &Path) -> std::io::Result<Vec<u8>> {
        self.inner
            .read_range(path, 0, u64::MAX)
            .map(|(data, _)| data)
    }
}

impl Default for Storage {
    /// The local file system.
    fn default() -> Storage {
        Storage::local()
    }
}

impl std::ops::Deref for Storage {
    type Target = dyn LogStorage;
    fn deref(&self) -> &Self::Target {
        &*self.inner
    }
}

impl fmt::Debug for Storage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.inner.fmt(f)
    }
}

impl PartialEq for Storage {
    fn eq(&self, other: &Storage) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner) && self.max_decoded_bytes == other.max_decoded_bytes
    }
}

impl Eq for Storage {}

/// The local file system; a symbolic link is not listed, nor followed when read.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct LocalStorage;

/// Epoch ms of a file's modification time, 0 when unknown.
fn modified_millis(meta: &std::fs::Metadata) -> i64 {
    meta.modified()
        .ok()
        .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
        .map_or(0, |d| saturating_i64(d.as_millis()))
}

/// Opens the regular file at `path` for reading, refusing a link in its last component
/// and anything but a regular file (a fifo put there would block the reader), and its
/// length.
fn open_no_follow(path: &Path) -> std::io::Result<(std::fs::File, u64)> {
    use std::os::unix::fs::OpenOptionsExt;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)?;
    let meta = file.metadata()?;
    if meta.is_dir() {
        return Err(std::io::ErrorKind::IsADirectory.into());
    }
    if !meta.is_file() {
        return Err(std::io::Error::other("not a regular file"));
    }
    Ok((file, meta.len()))
}

impl LogStorage for LocalStorage {
    fn list(&self, dir: &Path) -> std::io::Result<Vec<Listed>> {
        let mut out = Vec::new();
        for entry in std::fs::read_dir(dir)? {
            let entry = match entry {
                Ok(entry) => entry,
                Err(e) => {
                    out.push(Err(SkippedEntry {
                        name: "?".to_string(),
                        reason: format!("cannot read a directory entry: {e}"),
                    }));
                    continue;
                }
            };
            let Some(name) = entry.file_name().to_str().map(str::to_string) else {
                continue;
            };
            let path = entry.path();
            // a link could name any file the server can read: logs are the directory's
            // own files, and a link is none
            let meta = match entry.file_type() {
                Ok(t) if t.is_symlink() => {
                    out.push(Err(SkippedEntry {
                        reason: "a symbolic link (not followed: logs are read from the log directory's own files)".into(),
                        name,
                    }));
                    continue;
                }
                Ok(_) => entry.metadata(),
                Err(e) => Err(e),
            };
            out.push(match meta {
                Ok(meta) if meta.is_dir() || meta.is_file() => Ok(StoredEntry {
                    name,
                    kind: if meta.is_dir() {
                        EntryKind::Dir
                    } else {
                        EntryKind::File
                    },
                    len: meta.len(),
                    modified_millis: modified_millis(&meta),
                    path,
                    within: None,
                }),
                // sockets, devices, fifos: not logs
                Ok(_) => continue,
                Err(e) => Err(SkippedEntry {
                    reason: format!("cannot read {}: {e}", path.display()),
                    name,
                }),
            });
        }
        Ok(out)
    }

    fn read_range(&self, path: &Path, offset: u64, limit: u64) -> std::io::Result<(Vec<u8>, u64)> {
        // a listed path is never a link: one that is now was put there since, and is not
        // followed
        let (mut f, len) = open_no_follow(path)?;
        f.seek(SeekFrom::Start(offset))?;
        // no more than the file held when opened, however it grows meanwhile
        let limit = limit.min(len.saturating_sub(offset));
        let mut data = Vec::new();
        f.take(limit).read_to_end(&mut data)?;
        Ok((data, len))
    }

    fn exists(&self, path: &Path) -> std::io::Result<bool> {
        path.try_exists()
    }

    fn remove(&self, path: &Path) -> std::io::Result<()> {
        if path.is_dir() {
            std::fs::remove_dir_all(path)
        } else {
            std::fs::remove_file(path)
        }
    }
}
