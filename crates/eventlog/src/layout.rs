//! Where event logs live on disk: Spark 4's rolling layout
//! (`eventlog_v2_<app>/events_<N>_<app>[.codec]` plus an `appstatus_<app>[.inprogress]`
//! marker) and the single-file layout (`<app>[.codec][.inprogress]`).

use std::path::{Path, PathBuf};

use crate::EventLogError;
use crate::codec::Codec;

/// Prefix of a rolling log's directory.
pub const ROLLING_DIR_PREFIX: &str = "eventlog_v2_";
/// Prefix of a rolling log's event files.
pub const EVENTS_FILE_PREFIX: &str = "events_";
/// Prefix of a rolling log's status marker.
pub const APPSTATUS_PREFIX: &str = "appstatus_";
/// Suffix of a log (or marker) still being written.
pub const IN_PROGRESS_SUFFIX: &str = ".inprogress";

/// One event-log file and its codec.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogFile {
    /// Path of the file.
    pub path: PathBuf,
    /// Codec from the file name.
    pub codec: Codec,
}

/// One application's log as found on disk.
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

/// Reads one rolling-log directory.
pub fn rolling_source(dir: &Path) -> Result<LogSource, EventLogError> {
    let name = dir
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or_default()
        .to_string();
    let mut files = Vec::new();
    let mut in_progress = true;
    let entries = std::fs::read_dir(dir).map_err(|e| EventLogError::io(dir, e))?;
    for entry in entries {
        let entry = entry.map_err(|e| EventLogError::io(dir, e))?;
        let file_name = entry.file_name();
        let Some(file_name) = file_name.to_str() else {
            continue;
        };
        if let Some(status) = file_name.strip_prefix(APPSTATUS_PREFIX) {
            in_progress = status.ends_with(IN_PROGRESS_SUFFIX);
        } else if let Some(index) = rolling_index(file_name) {
            let (_, codec) = strip_codec(file_name);
            files.push((
                index,
                LogFile {
                    path: entry.path(),
                    codec,
                },
            ));
        }
    }
    files.sort_by_key(|(index, _)| *index);
    Ok(LogSource {
        name,
        path: dir.to_path_buf(),
        files: files.into_iter().map(|(_, f)| f).collect(),
        in_progress,
    })
}

/// An entry of a log directory that is not a log that can be read, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkippedEntry {
    /// The entry's name under the log directory.
    pub name: String,
    /// Why it was skipped, on one line.
    pub reason: String,
}

/// Finds every application log directly under `dir`, sorted by name. Entries that are
/// neither a rolling directory nor a plausible single-file log are ignored; entries that
/// cannot be read are left out (see [`discover_all`] for them).
///
/// # Errors
/// Only if `dir` itself cannot be read.
pub fn discover(dir: &Path) -> Result<Vec<LogSource>, EventLogError> {
    discover_all(dir).map(|(sources, _)| sources)
}

/// Every application log directly under `dir`, sorted by name, and the entries that
/// could not be read (a directory without permission, an entry that vanished while it
/// was read), each with its reason. Hidden entries (`.name`) are not logs.
///
/// # Errors
/// Only if `dir` itself cannot be read: one bad entry never fails the whole.
pub fn discover_all(dir: &Path) -> Result<(Vec<LogSource>, Vec<SkippedEntry>), EventLogError> {
    let entries = std::fs::read_dir(dir).map_err(|e| EventLogError::io(dir, e))?;
    let mut sources = Vec::new();
    let mut skipped = Vec::new();
    for entry in entries {
        let entry = match entry {
            Ok(entry) => entry,
            Err(e) => {
                skipped.push(SkippedEntry {
                    name: "?".to_string(),
                    reason: format!("cannot read a directory entry: {e}"),
                });
                continue;
            }
        };
        let Some(name) = entry.file_name().to_str().map(str::to_string) else {
            continue;
        };
        if name.starts_with('.') {
            continue;
        }
        let skip = |reason: String| SkippedEntry {
            name: name.clone(),
            reason,
        };
        let path = entry.path();
        // a link is what it points to, if anything
        let file_type = match entry.file_type() {
            Ok(t) if t.is_symlink() => std::fs::metadata(&path).map(|m| m.file_type()),
            other => other,
        };
        let file_type = match file_type {
            Ok(t) => t,
            Err(e) => {
                skipped.push(skip(format!("cannot read {}: {e}", path.display())));
                continue;
            }
        };
        if file_type.is_dir() {
            if name.starts_with(ROLLING_DIR_PREFIX) {
                match rolling_source(&path) {
                    Ok(source) => sources.push(source),
                    Err(e) => skipped.push(skip(e.to_string())),
                }
            }
        } else if file_type.is_file() {
            let (rest, in_progress) = match name.strip_suffix(IN_PROGRESS_SUFFIX) {
                Some(rest) => (rest, true),
                None => (name.as_str(), false),
            };
            let (_, codec) = strip_codec(rest);
            sources.push(LogSource {
                name: name.clone(),
                path: path.clone(),
                files: vec![LogFile { path, codec }],
                in_progress,
            });
        }
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
