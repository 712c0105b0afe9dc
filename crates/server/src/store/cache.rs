//! Replays kept in memory within a byte budget, least recently used evicted first.
//!
//! Loading is single-flight per application: concurrent requests for one application
//! share one load, behind that application's own lock; the cache's lock is held only to
//! look up, insert and evict, never while a log is read, so other applications and the
//! listing answer while a large log loads. At most `threads` logs load at once.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

use qprof_eventlog::EventLogError;
use qprof_eventlog::Replay;

use super::disk::DiskStore;
use super::index::{Fingerprint, ListedApp, fingerprint};

/// One application's place in the cache.
#[derive(Default)]
struct Entry {
    /// Held while the application loads or refreshes.
    load: Arc<Mutex<()>>,
    replay: Option<Arc<Replay>>,
    fingerprint: Fingerprint,
    in_progress: bool,
    bytes: u64,
    last_used: u64,
}

#[derive(Default)]
struct Entries {
    by_name: HashMap<String, Entry>,
    resident_bytes: u64,
    clock: u64,
}

/// A counting semaphore: at most `limit` holders at once.
struct Permits {
    free: Mutex<usize>,
    freed: Condvar,
}

impl Permits {
    fn acquire(&self) -> PermitGuard<'_> {
        let mut free = self.free.lock().unwrap_or_else(|e| e.into_inner());
        while *free == 0 {
            free = self.freed.wait(free).unwrap_or_else(|e| e.into_inner());
        }
        *free -= 1;
        PermitGuard(self)
    }
}

struct PermitGuard<'a>(&'a Permits);

impl Drop for PermitGuard<'_> {
    fn drop(&mut self) {
        *self.0.free.lock().unwrap_or_else(|e| e.into_inner()) += 1;
        self.0.freed.notify_one();
    }
}

/// What the cache holds and did, for the status resource and tests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CacheStats {
    /// Applications whose replay is in memory.
    pub resident: usize,
    /// Their accounted size in bytes.
    pub resident_bytes: u64,
    /// The budget in bytes.
    pub budget_bytes: u64,
    /// Logs replayed from the start since the server started.
    pub loads: u64,
    /// Replays dropped to stay within the budget.
    pub evictions: u64,
}

/// Called with an application log's name before it is replayed from the start.
pub(crate) type LoadHook = Arc<dyn Fn(&str) + Send + Sync>;

/// Whether a replay just read is kept in memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Keep {
    /// Always, evicting the least recently used beyond the budget (a page's).
    Always,
    /// Only if it fits in what the budget has left (a pass over many applications').
    IfRoom,
}

/// Replays by application log, within a byte budget.
pub(crate) struct ReplayCache {
    budget: u64,
    pub(crate) before_load: Option<LoadHook>,
    /// Saved replays of completed applications, read back before replaying.
    pub(crate) disk: Option<DiskStore>,
    entries: Mutex<Entries>,
    permits: Permits,
    loads: AtomicU64,
    evictions: AtomicU64,
    /// Bytes of replays dropped since the allocator last gave memory back.
    freed_since_release: AtomicU64,
}

impl ReplayCache {
    /// A cache of at most `budget` bytes loading at most `threads` logs at once.
    pub(crate) fn new(budget: u64, threads: usize) -> ReplayCache {
        ReplayCache {
            budget,
            before_load: None,
            disk: None,
            entries: Mutex::new(Entries::default()),
            permits: Permits {
                free: Mutex::new(threads.max(1)),
                freed: Condvar::new(),
            },
            loads: AtomicU64::new(0),
            evictions: AtomicU64::new(0),
            freed_since_release: AtomicU64::new(0),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Entries> {
        self.entries.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The replay of `app`, up to date with its log: from memory if its files did not
    /// change (a completed application's are taken from the index, a running one's are
    /// looked at), refreshed with what was appended, or loaded.
    pub(crate) fn get(&self, app: &ListedApp) -> Result<Arc<Replay>, EventLogError> {
        self.fetch(app, Keep::Always)
    }

    /// The replay of `app` for a pass over many applications: as [`ReplayCache::get`],
    /// but one read for the pass is kept in memory only if it fits in what the budget has
    /// left (a pass never pushes out what the pages read, nor makes theirs more recent); a
    /// running application's is kept as a page's.
    pub(crate) fn get_passing(&self, app: &ListedApp) -> Result<Arc<Replay>, EventLogError> {
        self.fetch(app, Keep::IfRoom)
    }

    fn fetch(&self, app: &ListedApp, keep: Keep) -> Result<Arc<Replay>, EventLogError> {
        let name = &app.source.name;
        let keep = if app.source.in_progress {
            Keep::Always
        } else {
            keep
        };
        let fp = if app.source.in_progress {
            fingerprint(&app.source)
        } else {
            app.fingerprint
        };
        let load_lock = {
            let mut entries = self.lock();
            let entries = &mut *entries;
            entries.clock += 1;
            let entry = entries.by_name.entry(name.clone()).or_default();
            if let Some(replay) = fresh(entry, fp, app.source.in_progress) {
                if keep == Keep::Always {
                    entry.last_used = entries.clock;
                }
                return Ok(replay);
            }
            Arc::clone(&entry.load)
        };
        // one load per application at a time; whoever waited finds it loaded
        let _loading = load_lock.lock().unwrap_or_else(|e| e.into_inner());
        let stale = {
            let mut entries = self.lock();
            let entry = entries.by_name.entry(name.clone()).or_default();
            if let Some(replay) = fresh(entry, fp, app.source.in_progress) {
                return Ok(replay);
            }
            entry.replay.clone()
        };
        let replay = {
            let _permit = self.permits.acquire();
            match stale {
                // a log that grew: read only what was appended
                Some(mut replay) if app.source.in_progress || replay.source().in_progress => {
                    Arc::make_mut(&mut replay).refresh()?;
                    replay
                }
                _ => Arc::new(self.saved_or_loaded(app)?),
            }
        };
        let bytes = replay.resident_bytes();
        let evicted = {
            let mut entries = self.lock();
            if keep == Keep::IfRoom && entries.resident_bytes + bytes > self.budget {
                return Ok(replay);
            }
            self.insert(&mut entries, name, app, &replay, fp, bytes)
        };
        // freed outside the lock: dropping a large replay takes a while
        let freed: u64 = evicted.iter().map(|(_, b)| *b).sum();
        drop(evicted);
        self.release_freed(freed);
        Ok(replay)
    }

    /// `app`'s saved replay, or its log replayed from the start (and saved).
    fn saved_or_loaded(&self, app: &ListedApp) -> Result<Replay, EventLogError> {
        if let Some(saved) = self.disk.as_ref().and_then(|d| d.load(app)) {
            return Ok(saved);
        }
        if let Some(hook) = &self.before_load {
            hook(&app.source.name);
        }
        self.loads.fetch_add(1, Ordering::Relaxed);
        let replay = Replay::load(app.source.clone())?;
        if let Some(disk) = &self.disk {
            disk.save(app, &replay);
        }
        Ok(replay)
    }

    /// Puts `replay` in `name`'s entry and evicts beyond the budget; returns the evicted
    /// replays (to be dropped once the lock is released) with their sizes.
    fn insert(
        &self,
        entries: &mut Entries,
        name: &str,
        app: &ListedApp,
        replay: &Arc<Replay>,
        fp: Fingerprint,
        bytes: u64,
    ) -> Vec<(Arc<Replay>, u64)> {
        entries.clock += 1;
        let entry = entries.by_name.entry(name.to_string()).or_default();
        entries.resident_bytes -= if entry.replay.is_some() {
            entry.bytes
        } else {
            0
        };
        entry.replay = Some(Arc::clone(replay));
        entry.fingerprint = fp;
        entry.in_progress = app.source.in_progress;
        entry.bytes = bytes;
        entry.last_used = entries.clock;
        entries.resident_bytes += bytes;
        self.evict(entries, name)
    }

    /// Counts `freed` bytes of dropped replays, and gives the allocator's free memory back
    /// to the system once a 64 MiB's worth was dropped since it last did (the allocator
    /// keeps freed memory otherwise, and the process would hold more than its budget).
    fn release_freed(&self, freed: u64) {
        const EVERY: u64 = 64 << 20;
        if freed == 0 {
            return;
        }
        let before = self.freed_since_release.fetch_add(freed, Ordering::Relaxed);
        if before + freed >= EVERY {
            self.freed_since_release.store(0, Ordering::Relaxed);
            qprof_core::executor_memory::release_free_heap();
        }
    }

    /// Takes least recently used replays other than `keep`'s out until the rest fit;
    /// returns them with their sizes.
    fn evict(&self, entries: &mut Entries, keep: &str) -> Vec<(Arc<Replay>, u64)> {
        let mut evicted = Vec::new();
        while entries.resident_bytes > self.budget {
            let victim = entries
                .by_name
                .iter()
                .filter(|(n, e)| e.replay.is_some() && n.as_str() != keep)
                .min_by_key(|(_, e)| e.last_used)
                .map(|(n, _)| n.clone());
            let Some(victim) = victim else {
                break;
            };
            if let Some(entry) = entries.by_name.get_mut(&victim) {
                if let Some(replay) = entry.replay.take() {
                    evicted.push((replay, entry.bytes));
                }
                entries.resident_bytes -= entry.bytes;
                entry.bytes = 0;
                self.evictions.fetch_add(1, Ordering::Relaxed);
            }
        }
        evicted
    }

    /// Forgets applications whose logs are gone.
    pub(crate) fn retain(&self, keep: impl Fn(&str) -> bool) {
        let mut entries = self.lock();
        let entries = &mut *entries;
        let gone: Vec<String> = entries
            .by_name
            .keys()
            .filter(|n| !keep(n))
            .cloned()
            .collect();
        for name in gone {
            if let Some(entry) = entries.by_name.remove(&name)
                && entry.replay.is_some()
            {
                entries.resident_bytes -= entry.bytes;
            }
        }
    }

    /// What the cache holds and did.
    pub(crate) fn stats(&self) -> CacheStats {
        let entries = self.lock();
        CacheStats {
            resident: entries
                .by_name
                .values()
                .filter(|e| e.replay.is_some())
                .count(),
            resident_bytes: entries.resident_bytes,
            budget_bytes: self.budget,
            loads: self.loads.load(Ordering::Relaxed),
            evictions: self.evictions.load(Ordering::Relaxed),
        }
    }
}

/// The entry's replay if it is up to date with fingerprint `fp`.
fn fresh(entry: &Entry, fp: Fingerprint, in_progress: bool) -> Option<Arc<Replay>> {
    entry
        .replay
        .as_ref()
        .filter(|r| {
            entry.fingerprint == fp
                && entry.in_progress == in_progress
                && r.source().in_progress == in_progress
        })
        .cloned()
}
