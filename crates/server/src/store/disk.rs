//! Replays of completed applications saved on disk (`--store-dir`, Spark's
//! `spark.history.store.path`), within a byte budget (`--store-max-disk`, Spark's
//! `spark.history.store.maxDiskUsage`): an application opened again, after its replay was
//! evicted from memory or after a restart, is read back instead of replayed. A saved replay
//! of another format version, of a log that changed since, or damaged is discarded (and the
//! log replayed), never trusted.

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::SystemTime;

use qprof_eventlog::EventLogError;
use qprof_eventlog::LogStamp;
use qprof_eventlog::Replay;

use super::index::ListedApp;

/// The extension of saved replays.
const EXTENSION: &str = "replay";

/// What the disk store holds and did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DiskStats {
    /// Saved replays.
    pub files: usize,
    /// Their bytes.
    pub bytes: u64,
    /// The budget in bytes.
    pub budget_bytes: u64,
    /// Applications read back instead of replayed.
    pub hits: u64,
    /// Replays saved.
    pub writes: u64,
    /// Saved replays discarded: of another version, stale or damaged.
    pub discards: u64,
}

/// Saved replays in one directory.
#[derive(Debug)]
pub(crate) struct DiskStore {
    dir: PathBuf,
    budget: u64,
    /// Held while saving and trimming to the budget: the saved replays' bytes as last
    /// counted, kept up to date by saves (never below what they are: deletions elsewhere
    /// only lower it), so that a save lists the directory only when it may be over the
    /// budget; counted from the directory when first needed.
    writing: Mutex<Option<u64>>,
    hits: AtomicU64,
    writes: AtomicU64,
    discards: AtomicU64,
}

fn stamp(app: &ListedApp) -> LogStamp {
    LogStamp {
        size: app.fingerprint.0,
        modified_millis: app.fingerprint.1,
    }
}

/// Saved replays in `dir` with their size and last use, oldest first.
fn saved(dir: &Path) -> Vec<(PathBuf, u64, SystemTime)> {
    let mut out: Vec<(PathBuf, u64, SystemTime)> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| e.path().extension().is_some_and(|x| x == EXTENSION))
        .filter_map(|e| {
            let meta = e.metadata().ok()?;
            Some((e.path(), meta.len(), meta.modified().ok()?))
        })
        .collect();
    out.sort_by_key(|(_, _, used)| *used);
    out
}

impl DiskStore {
    /// A store in `dir` (created if missing) of at most `budget` bytes.
    pub(crate) fn open(dir: &Path, budget: u64) -> Result<DiskStore, EventLogError> {
        std::fs::create_dir_all(dir).map_err(|e| EventLogError::io(dir, e))?;
        Ok(DiskStore {
            dir: dir.to_path_buf(),
            budget,
            writing: Mutex::new(None),
            hits: AtomicU64::new(0),
            writes: AtomicU64::new(0),
            discards: AtomicU64::new(0),
        })
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.join(format!("{name}.{EXTENSION}"))
    }

    /// The saved replay of completed application `app`, if there is a good one.
    pub(crate) fn load(&self, app: &ListedApp) -> Option<Replay> {
        if app.source.in_progress {
            return None;
        }
        let path = self.path(&app.source.name);
        let bytes = std::fs::read(&path).ok()?;
        match Replay::from_snapshot(app.source.clone(), &bytes, stamp(app)) {
            Ok(replay) => {
                self.hits.fetch_add(1, Ordering::Relaxed);
                // its last use, for the budget
                if let Ok(file) = std::fs::File::options().write(true).open(&path) {
                    let _ = file.set_modified(SystemTime::now());
                }
                Some(replay)
            }
            Err(e) => {
                eprintln!("discarding the saved replay of '{}': {e}", app.source.name);
                let _ = std::fs::remove_file(&path);
                self.discards.fetch_add(1, Ordering::Relaxed);
                None
            }
        }
    }

    /// Saves the replay of completed application `app`, then drops the least recently
    /// used saved replays beyond the budget. Failing to save only costs a replay later.
    pub(crate) fn save(&self, app: &ListedApp, replay: &Replay) {
        if app.source.in_progress {
            return;
        }
        let bytes = match replay.snapshot(stamp(app)) {
            Ok(bytes) => bytes,
            Err(e) => {
                eprintln!("cannot save the replay of '{}': {e}", app.source.name);
                return;
            }
        };
        if bytes.len() as u64 > self.budget {
            return;
        }
        let mut counted = self.writing.lock().unwrap_or_else(|e| e.into_inner());
        let path = self.path(&app.source.name);
        let replaced = std::fs::metadata(&path).map_or(0, |m| m.len());
        let partial = path.with_extension(format!("{EXTENSION}.partial"));
        let written =
            std::fs::write(&partial, &bytes).and_then(|()| std::fs::rename(&partial, &path));
        if let Err(e) = written {
            eprintln!("cannot save the replay of '{}': {e}", app.source.name);
            let _ = std::fs::remove_file(&partial);
            return;
        }
        self.writes.fetch_add(1, Ordering::Relaxed);
        let total = match *counted {
            Some(total) => total.saturating_sub(replaced) + bytes.len() as u64,
            None => saved(&self.dir).iter().map(|(_, size, _)| size).sum(),
        };
        *counted = Some(total);
        if total <= self.budget {
            return;
        }
        let files = saved(&self.dir);
        let mut total: u64 = files.iter().map(|(_, size, _)| size).sum();
        for (old, size, _) in files {
            if total <= self.budget {
                break;
            }
            if old != path && std::fs::remove_file(&old).is_ok() {
                total -= size;
            }
        }
        *counted = Some(total);
    }

    /// Forgets the saved replay of log `name` (its log was deleted).
    pub(crate) fn remove(&self, name: &str) {
        let _ = std::fs::remove_file(self.path(name));
    }

    /// What the store holds and did.
    pub(crate) fn stats(&self) -> DiskStats {
        let files = saved(&self.dir);
        DiskStats {
            files: files.len(),
            bytes: files.iter().map(|(_, size, _)| size).sum(),
            budget_bytes: self.budget,
            hits: self.hits.load(Ordering::Relaxed),
            writes: self.writes.load(Ordering::Relaxed),
            discards: self.discards.load(Ordering::Relaxed),
        }
    }
}
