//! The index of a log directory: its applications with their listing facts, and the
//! entries that are not readable logs with the reason, rebuilt by a scan that re-reads
//! only the entries whose files changed.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::{Arc, OnceLock};
use std::time::UNIX_EPOCH;

use qprof_core::metric::saturating_i64;
use qprof_eventlog::AppInfo;
use qprof_eventlog::EventLogError;
use qprof_eventlog::Storage;
use qprof_eventlog::scan_info;
use qprof_eventlog::{LogSource, discover_in};

/// Size and modification time of a log's files: when it changes, the log changed.
pub(crate) type Fingerprint = (u64, i64);

/// Now, epoch ms.
pub(crate) fn now_millis() -> i64 {
    std::time::SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| saturating_i64(d.as_millis()))
}

/// The fingerprint of `source`'s files as they were listed.
pub(crate) fn fingerprint(source: &LogSource) -> Fingerprint {
    let size = source.files.iter().map(|f| f.len).sum();
    let modified = source
        .files
        .iter()
        .map(|f| f.modified_millis)
        .max()
        .unwrap_or(0);
    (size, modified)
}

/// One application attempt found in the log directory.
#[derive(Debug, Clone)]
pub struct ListedApp {
    /// The log on disk.
    pub source: LogSource,
    /// Listing facts read from it.
    pub info: AppInfo,
    /// Last modification of its files, epoch ms.
    pub last_updated: i64,
    pub(crate) fingerprint: Fingerprint,
}

impl ListedApp {
    /// The application id, or the log's name for logs without an application start.
    pub fn id(&self) -> &str {
        self.info.id.as_deref().unwrap_or(&self.source.name)
    }
}

/// An entry of the log directory that is not listed, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skipped {
    /// The entry's name under the directory.
    pub name: String,
    /// Why it is not listed, on one line.
    pub reason: String,
    fingerprint: Option<Fingerprint>,
}

/// One application of the listing, rendered once per index: what the listing's filters
/// look at, and its JSON text.
#[derive(Debug, Clone)]
pub(crate) struct ListingEntry {
    /// Its latest end (`i64::MAX` while running): the listing's order.
    pub order: i64,
    /// Each attempt's start, end (-1 while running) and whether it completed.
    pub attempts: Vec<(i64, i64, bool)>,
    /// Each attempt's facts, for who may view it.
    pub infos: Vec<AppInfo>,
    /// The application's JSON.
    pub json: Box<str>,
}

/// What one scan found.
#[derive(Debug, Clone, Default)]
pub(crate) struct Index {
    /// The listing rendered from this index, once asked for (kept across scans that
    /// change nothing).
    pub listing: OnceLock<Arc<[ListingEntry]>>,
    /// Listed applications by entry name.
    pub apps: BTreeMap<String, ListedApp>,
    /// Entry names of each application id's attempts (an entry the cleaner removed
    /// after the scan may linger here, not in `apps`).
    pub by_id: HashMap<String, Vec<String>>,
    /// Entries not listed, by name.
    pub skipped: BTreeMap<String, Skipped>,
    /// When the last scan ended, epoch ms (0: never).
    pub scanned_at: i64,
    /// Why the last scan could not read the directory (the index is the one before).
    pub dir_error: Option<String>,
}

/// An entry to (re-)read, or the outcome of reading it.
enum Read {
    Listed(Box<ListedApp>),
    Skipped(Skipped),
}

/// Reads one entry's listing facts.
fn read_entry(source: LogSource) -> Read {
    let fp = fingerprint(&source);
    let skip = |reason: String| {
        Read::Skipped(Skipped {
            name: source.name.clone(),
            reason,
            fingerprint: Some(fp),
        })
    };
    if source.files.is_empty() {
        return skip("no event files".to_string());
    }
    if fp.0 == 0 {
        return skip("empty".to_string());
    }
    match scan_info(&source) {
        Err(e) => skip(e.to_string()),
        Ok(info) if info.id.is_none() => {
            skip("no application start (not an event log, or nothing logged yet)".to_string())
        }
        Ok(info) => Read::Listed(Box::new(ListedApp {
            last_updated: fp.1,
            info,
            fingerprint: fp,
            source,
        })),
    }
}

/// Scans `dir` in `storage` into a new index, re-reading (on up to `threads` threads) only
/// the entries whose fingerprint differs from `previous`'s. Entries skipped for the first
/// time are reported once on stderr.
pub(crate) fn scan(storage: &Storage, dir: &Path, previous: &Index, threads: usize) -> Index {
    let (sources, unreadable) = match discover_in(storage, dir) {
        Ok(found) => found,
        Err(e) => {
            if previous.dir_error.is_none() {
                eprintln!("cannot read the log directory: {e}");
            }
            // the cause alone: the directory is known
            let cause = match e {
                EventLogError::Io { cause, .. } => cause.to_string(),
                other => other.to_string(),
            };
            return Index {
                dir_error: Some(cause),
                ..previous.clone()
            };
        }
    };
    let mut index = Index {
        scanned_at: now_millis(),
        ..Index::default()
    };
    let mut to_read = Vec::new();
    for source in sources {
        let fp = fingerprint(&source);
        let same_app = previous
            .apps
            .get(&source.name)
            .filter(|a| a.fingerprint == fp && a.source.in_progress == source.in_progress);
        if let Some(app) = same_app {
            index.apps.insert(source.name.clone(), app.clone());
            continue;
        }
        let same_skip = previous
            .skipped
            .get(&source.name)
            .filter(|s| s.fingerprint == Some(fp));
        if let Some(skipped) = same_skip {
            index.skipped.insert(source.name.clone(), skipped.clone());
            continue;
        }
        to_read.push(source);
    }
    if to_read.is_empty() && index.apps.len() == previous.apps.len() {
        // the same applications, unchanged
        index.listing = previous.listing.clone();
    }
    let threads = storage.concurrent_reads().unwrap_or(threads);
    for read in read_all(to_read, threads) {
        match read {
            Read::Listed(app) => {
                index.apps.insert(app.source.name.clone(), *app);
            }
            Read::Skipped(s) => {
                index.skipped.insert(s.name.clone(), s);
            }
        }
    }
    for entry in unreadable {
        index.skipped.insert(
            entry.name.clone(),
            Skipped {
                name: entry.name,
                reason: entry.reason,
                fingerprint: None,
            },
        );
    }
    for (name, app) in &index.apps {
        index
            .by_id
            .entry(app.id().to_string())
            .or_default()
            .push(name.clone());
    }
    for s in index.skipped.values() {
        let known = previous
            .skipped
            .get(&s.name)
            .is_some_and(|p| p.reason == s.reason);
        if !known {
            eprintln!("skipping log entry '{}': {}", s.name, s.reason);
        }
    }
    index
}

/// Reads `sources` on up to `threads` threads.
fn read_all(sources: Vec<LogSource>, threads: usize) -> Vec<Read> {
    let threads = threads.clamp(1, sources.len().max(1));
    if threads == 1 {
        return sources.into_iter().map(read_entry).collect();
    }
    let chunk = sources.len().div_ceil(threads);
    let mut chunks: Vec<Vec<LogSource>> = Vec::new();
    let mut rest = sources;
    while !rest.is_empty() {
        let tail = rest.split_off(chunk.min(rest.len()));
        chunks.push(std::mem::replace(&mut rest, tail));
    }
    std::thread::scope(|scope| {
        let handles: Vec<_> = chunks
            .into_iter()
            .map(|c| scope.spawn(move || c.into_iter().map(read_entry).collect::<Vec<_>>()))
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap_or_default())
            .collect()
    })
}
