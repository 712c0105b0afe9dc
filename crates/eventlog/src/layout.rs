//! Where event logs live on disk: Spark 4's rolling layout
//! (`eventlog_v2_<app>/events_<N>_<app>[.codec]` plus an `appstatus_<app>[.inprogress]`
//! marker) and the single-file layout (`<app>[.codec][.inprogress]`), in any
//! [`Storage`].

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::EventLogError;
use crate::codec::Codec;
use crate::storage::{EntryKind, Storage, StoredEntry};
pub(crate) use crate::storage::{ROLLING_DIR_PREFIX, SkippedEntry};

/// Prefix of a rolling log's event files.
pub(crate) const EVENTS_FILE_PREFIX: &str = "events_";
/// Prefix of a rolling log's status marker.
pub const APPSTATUS_PREFIX: &str = "appstatus_";
/// Suffix of a log (or marker) still being written.
pub(crate) const IN_PROGRESS_SUFFIX: &str = ".inprogress";

/// One event-log file, its codec, and its size and time as last listed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogFile {
    /// Path of the file.
    pub path: PathBuf,
    /// Codec from the file name.
    pub codec: Codec,
    /// Bytes, as listed.
    pub len: u64,
    /// Last modification as listed, epoch ms (0 when unknown).
    pub modified_millis: i64,
}

/// One application's log as found in a log directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogSource {
    /// Name of the directory (rolling) or file (single) under the log directory.
    pub name: String,
    /// Full path of that directory or file.
    pub path: PathBuf,
    /// Event files in replay order.
    pub files: Vec<LogFile>,
    /// Whether the writer is still running (or died): no completion marker.
    pub in_progress: bool,
    /// Whether it is a rolling log (a directory of event files).
    pub rolling: bool,
    /// What its files are read through.
    pub storage: Storage,
}

/// Splits `name` into the codec extension and the rest (`events_1_x.zstd` → `events_1_x`, zstd).
fn strip_codec(name: &str) -> (&str, Codec) {
    if let Some((stem, ext)) = name.rsplit_once('.')
        && let Some(codec) = Codec::from_short_name(ext)
    {
        return (stem, codec);
    }
    (name, Codec::None)
}

/// Index `N` of a rolling event file name `events_<N>_<app>[.codec]`.
fn rolling_index(name: &str) -> Option<u64> {
    let rest = name.strip_prefix(EVENTS_FILE_PREFIX)?;
    rest.split('_').next()?.parse().ok()
}

/// A rolling log from the entries of its directory (named `name`, at `path`).
fn rolling_from<'a>(
    storage: &Storage,
    name: String,
    path: PathBuf,
    entries: impl IntoIterator<Item = &'a StoredEntry>,
) -> LogSource {
    let mut files = Vec::new();
    let mut in_progress = true;
    // an entry named as an event file is one, whatever it is: if it cannot be read, the
    // log is skipped with the reason
    for entry in entries {
        if let Some(status) = entry.name.strip_prefix(APPSTATUS_PREFIX) {
            in_progress = status.ends_with(IN_PROGRESS_SUFFIX);
        } else if let Some(index) = rolling_index(&entry.name) {
            let (_, codec) = strip_codec(&entry.name);
            files.push((
                index,
                LogFile {
                    path: entry.path.clone(),
                    codec,
                    len: entry.len,
                    modified_millis: entry.modified_millis,
                },
            ));
        }
    }
    files.sort_by_key(|(index, _)| *index);
    LogSource {
        name,
        path,
        files: files.into_iter().map(|(_, f)| f).collect(),
        in_progress,
        rolling: true,
        storage: storage.clone(),
    }
}

/// Reads one rolling-log directory through `storage`.
///
/// # Errors
/// If the directory cannot be listed.
pub(crate) fn rolling_source(storage: &Storage, dir: &Path) -> Result<LogSource, EventLogError> {
    let name = dir
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or_default()
        .to_string();
    let entries = storage.list(dir).map_err(|e| EventLogError::io(dir, e))?;
    Ok(rolling_from(
        storage,
        name,
        dir.to_path_buf(),
        entries.iter().filter_map(|e| e.as_ref().ok()),
    ))
}

/// Finds every application log directly under the local directory `dir`, sorted by
/// name. Entries that are neither a rolling directory nor a plausible single-file log are
/// ignored, and so are entries that cannot be read.
///
/// # Errors
/// Only if `dir` itself cannot be read.
pub fn discover(dir: &Path) -> Result<Vec<LogSource>, EventLogError> {
    discover_all(dir).map(|(sources, _)| sources)
}

/// [`discover_in`] the local file system.
///
/// # Errors
/// Only if `dir` itself cannot be read.
pub(crate) fn discover_all(
    dir: &Path,
) -> Result<(Vec<LogSource>, Vec<SkippedEntry>), EventLogError> {
    discover_in(&Storage::local(), dir)
}

/// Every application log directly under `dir` in `storage`, sorted by name, and the
/// entries that could not be read (a directory without permission, an entry that
/// vanished while it was read), each with its reason; one listing
/// ([`LogStorage::list_logs`](crate::storage::LogStorage::list_logs)) gives every fact.
/// Hidden entries (`.name`) are not logs.
///
/// # Errors
/// Only if `dir` itself cannot be read: one bad entry never fails the whole.
pub fn discover_in(
    storage: &Storage,
    dir: &Path,
) -> Result<(Vec<LogSource>, Vec<SkippedEntry>), EventLogError> {
    let listed = storage
        .list_logs(dir)
        .map_err(|e| EventLogError::io(dir, e))?;
    let mut sources = Vec::new();
    let mut skipped = Vec::new();
    let mut rolling: BTreeMap<String, (Option<PathBuf>, Vec<StoredEntry>)> = BTreeMap::new();
    for entry in listed {
        let entry = match entry {
            Ok(entry) => entry,
            Err(skip) => {
                if !skip.name.starts_with('.') {
                    skipped.push(skip);
                }
                continue;
            }
        };
        if let Some(parent) = &entry.within {
            rolling.entry(parent.clone()).or_default().1.push(entry);
            continue;
        }
        if entry.name.starts_with('.') {
            continue;
        }
        match entry.kind {
            EntryKind::Dir => {
                if entry.name.starts_with(ROLLING_DIR_PREFIX) {
                    rolling.entry(entry.name.clone()).or_default().0 = Some(entry.path);
                }
            }
            EntryKind::File => {
                let (rest, in_progress) = match entry.name.strip_suffix(IN_PROGRESS_SUFFIX) {
                    Some(rest) => (rest, true),
                    None => (entry.name.as_str(), false),
                };
                let (_, codec) = strip_codec(rest);
                sources.push(LogSource {
                    name: entry.name.clone(),
                    path: entry.path.clone(),
                    files: vec![LogFile {
                        path: entry.path,
                        codec,
                        len: entry.len,
                        modified_millis: entry.modified_millis,
                    }],
                    in_progress,
                    rolling: false,
                    storage: storage.clone(),
                });
            }
        }
    }
    for (name, (path, entries)) in rolling {
        // a store without directories names them only through their files
        let path = path.unwrap_or_else(|| dir.join(&name));
        sources.push(rolling_from(storage, name, path, &entries));
    }
    sources.sort_by(|a, b| a.name.cmp(&b.name));
    skipped.sort_by(|a, b| a.name.cmp(&b.name));
    Ok((sources, skipped))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_rolling_and_single_file_logs() {
        let dir = std::env::temp_dir().join(format!("qprof-layout-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let rolling = dir.join("eventlog_v2_local-1");
        std::fs::create_dir_all(&rolling).unwrap();
        for f in [
            "events_10_local-1.zstd",
            "events_2_local-1.zstd",
            "appstatus_local-1.inprogress",
        ] {
            std::fs::write(rolling.join(f), b"").unwrap();
        }
        std::fs::write(dir.join("app-2.lz4"), b"").unwrap();
        std::fs::write(dir.join("app-3.inprogress"), b"").unwrap();
        std::fs::create_dir_all(dir.join("unrelated")).unwrap();
        let found = discover(&dir).unwrap();
        let names: Vec<_> = found.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(
            names,
            ["app-2.lz4", "app-3.inprogress", "eventlog_v2_local-1"]
        );
        assert_eq!(found[0].files[0].codec, Codec::Lz4);
        assert!(!found[0].in_progress && found[1].in_progress && found[2].in_progress);
        let order: Vec<_> = found[2]
            .files
            .iter()
            .map(|f| f.path.file_name().unwrap().to_str().unwrap())
            .collect();
        assert_eq!(order, ["events_2_local-1.zstd", "events_10_local-1.zstd"]);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
