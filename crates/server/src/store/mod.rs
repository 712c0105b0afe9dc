//! The log directory as the server sees it: an index of its applications, kept by a
//! scanner in the background, and their replays in a cache bounded in bytes.
//!
//! Requests read the index and never scan the directory; the scanner rescans it every
//! update interval (and at once when a request names an application the index does not
//! know), re-reading only logs whose files changed. An entry that cannot be read is
//! skipped, reported once and counted, and never fails the listing. Applications are
//! addressed by the ids inside their logs; a client-supplied id is only ever compared
//! with those, never turned into a path.

mod cache;
mod cleaner;
mod disk;
mod index;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock, Weak};
use std::time::{Duration, Instant};

use qprof_eventlog::EventLogError;
use qprof_eventlog::IdCounters;
use qprof_eventlog::Replay;
use qprof_eventlog::{Storage, StorageStats};

pub use cache::CacheStats;
pub use cleaner::CleanerOptions;
pub use disk::DiskStats;
pub use index::{ListedApp, Skipped};

use crate::live::LiveSource;
use cache::ReplayCache;
use index::Index;
pub(crate) use index::ListingEntry;
use std::collections::BTreeMap;

/// Log downloads a store builds or sends at once: each takes as much temporary disk as
/// its logs.
pub const LOG_DOWNLOADS: usize = 4;

/// The least time between two rescans that requests for unknown application ids make.
pub const REQUEST_RESCAN_INTERVAL: Duration = Duration::from_secs(2);

/// How a store scans and what it keeps.
#[derive(Debug, Clone)]
pub struct StoreOptions {
    /// How often the background scanner rescans the directory (Spark's
    /// `spark.history.fs.update.interval`).
    pub update_interval: Duration,
    /// Bytes of replays kept in memory; the least recently used are dropped beyond it.
    pub max_memory_bytes: u64,
    /// Logs replayed at once (Spark's `spark.history.fs.numReplayThreads`).
    pub replay_threads: usize,
    /// Which logs the scanner deletes (none by default).
    pub cleaner: CleanerOptions,
    /// Where replays of completed applications are saved, if anywhere (Spark's
    /// `spark.history.store.path`).
    pub store_dir: Option<PathBuf>,
    /// Bytes of saved replays kept on disk (Spark's `spark.history.store.maxDiskUsage`).
    pub store_max_disk_bytes: u64,
}

impl Default for StoreOptions {
    /// Spark's 10 s interval, 2 GiB of replays, a replay thread per core.
    fn default() -> StoreOptions {
        StoreOptions {
            update_interval: Duration::from_secs(10),
            max_memory_bytes: 2 << 30,
            replay_threads: std::thread::available_parallelism().map_or(2, |n| n.get()),
            cleaner: CleanerOptions::default(),
            store_dir: None,
            store_max_disk_bytes: 10 << 30,
        }
    }
}

/// The state of the store for `/qprof/v1/status`.
#[derive(Debug, Clone)]
pub struct StoreStatus {
    /// The directory served.
    pub dir: PathBuf,
    /// Applications listed.
    pub applications: usize,
    /// Entries skipped, with their reasons.
    pub skipped: Vec<Skipped>,
    /// When the last scan ended, epoch ms (0: never).
    pub last_scan_millis: i64,
    /// Scans of the directory since the server started.
    pub scans: u64,
    /// Why the last scan could not read the directory, if it could not.
    pub dir_error: Option<String>,
    /// Logs the cleaner deleted since the server started.
    pub cleaned: u64,
    /// The saved replays, when there is a store directory.
    pub disk: Option<DiskStats>,
    /// The replay cache.
    pub cache: CacheStats,
    /// Requests to the storage and bytes read, for storages that count them.
    pub storage: Option<StorageStats>,
}

/// The applications of one log directory.
pub struct LogStore {
    storage: Storage,
    dir: PathBuf,
    options: StoreOptions,
    index: RwLock<Arc<Index>>,
    /// Held while scanning: one scan at a time; its value is when the last one started.
    scanning: Mutex<Option<Instant>>,
    /// When a request for an unknown id last made the store rescan.
    rescanned_for_request: Mutex<Option<Instant>>,
    scans: AtomicU64,
    cleaned: AtomicU64,
    cache: ReplayCache,
    live: Option<Arc<dyn LiveSource>>,
    /// One permit per log download under way ([`LOG_DOWNLOADS`]).
    downloads: Arc<tokio::sync::Semaphore>,
}

impl std::fmt::Debug for LogStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LogStore").field("dir", &self.dir).finish()
    }
}

impl LogStore {
    /// A store over `dir` with the default options, scanned once; see
    /// [`LogStore::open_with`].
    pub fn open(dir: &Path) -> Result<LogStore, EventLogError> {
        LogStore::open_with(dir, StoreOptions::default())
    }

    /// A store over the local directory `dir`; see [`LogStore::open_in`].
    ///
    /// # Errors
    /// As [`LogStore::open_in`].
    pub fn open_with(dir: &Path, options: StoreOptions) -> Result<LogStore, EventLogError> {
        LogStore::open_in(Storage::local(), dir, options)
    }

    /// A store over `dir` in `storage` (the local file system, or an object store),
    /// scanned once before it returns (an empty directory is served empty). Call
    /// [`LogStore::spawn_scanner`] to keep it up to date.
    ///
    /// # Errors
    /// If `dir` cannot be listed, or the store directory cannot be created; an entry in
    /// `dir` that cannot be read is skipped instead.
    pub fn open_in(
        storage: Storage,
        dir: &Path,
        options: StoreOptions,
    ) -> Result<LogStore, EventLogError> {
        // not read yet: a failure of the first scan is returned, not reported
        let store = LogStore::unread(storage, dir, options, Some("not read yet".to_string()))?;
        store.scan();
        // the first scan tells whether the directory can be read at all
        if let Some(error) = store.index().dir_error.clone() {
            return Err(EventLogError::io(dir, std::io::Error::other(error)));
        }
        Ok(store)
    }

    /// A store over `dir` in `storage` whose directory could be listed, with no log read
    /// yet: [`LogStore::spawn_scanner`]'s first scan reads them, so a server answers at
    /// once however many or large its logs are (its listing fills in when that scan ends,
    /// as Spark's history server's does).
    ///
    /// # Errors
    /// As [`LogStore::open_in`].
    pub fn open_unscanned_in(
        storage: Storage,
        dir: &Path,
        options: StoreOptions,
    ) -> Result<LogStore, EventLogError> {
        // one listing of the directory itself, not of its rolling logs: the first scan
        // lists those
        storage.list(dir).map_err(|e| EventLogError::io(dir, e))?;
        LogStore::unread(storage, dir, options, None)
    }

    /// A store over `dir` whose index is empty, with `dir_error`.
    fn unread(
        storage: Storage,
        dir: &Path,
        options: StoreOptions,
        dir_error: Option<String>,
    ) -> Result<LogStore, EventLogError> {
        let mut cache = ReplayCache::new(options.max_memory_bytes, options.replay_threads);
        if let Some(store_dir) = &options.store_dir {
            cache.disk = Some(disk::DiskStore::open(
                store_dir,
                options.store_max_disk_bytes,
            )?);
        }
        Ok(LogStore {
            storage,
            dir: dir.to_path_buf(),
            cache,
            options,
            index: RwLock::new(Arc::new(Index {
                dir_error,
                ..Index::default()
            })),
            scanning: Mutex::new(None),
            rescanned_for_request: Mutex::new(None),
            scans: AtomicU64::new(0),
            cleaned: AtomicU64::new(0),
            live: None,
            downloads: Arc::new(tokio::sync::Semaphore::new(LOG_DOWNLOADS)),
        })
    }

    /// This store, with the application `live` runs completed by its running queries:
    /// replays of its log (in progress) include them, as far as they got.
    pub fn with_live(self, live: Arc<dyn LiveSource>) -> LogStore {
        LogStore {
            live: Some(live),
            ..self
        }
    }

    /// This store, calling `hook` with a log's entry name on the loading thread before it
    /// replays that log from the start (for instrumentation, and for tests that hold a
    /// load).
    pub fn with_load_hook(mut self, hook: Arc<dyn Fn(&str) + Send + Sync>) -> LogStore {
        self.cache.before_load = Some(hook);
        self
    }

    /// Rescans the directory every update interval on a thread of its own, for as long
    /// as `store` lives; first at once if it was never scanned
    /// ([`LogStore::open_unscanned_in`]).
    pub fn spawn_scanner(store: &Arc<LogStore>) {
        let weak: Weak<LogStore> = Arc::downgrade(store);
        let interval = store.options.update_interval;
        let mut wait = store.scans.load(Ordering::Relaxed) > 0;
        let spawned = std::thread::Builder::new()
            .name("qprof-log-scanner".into())
            .spawn(move || {
                loop {
                    if wait {
                        std::thread::sleep(interval);
                    }
                    wait = true;
                    let Some(store) = weak.upgrade() else {
                        return;
                    };
                    store.scan();
                }
            });
        if let Err(e) = spawned {
            eprintln!("cannot start the log scanner ({e}): the listing is read at requests");
        }
    }

    /// The directory served.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn index(&self) -> Arc<Index> {
        Arc::clone(&self.index.read().unwrap_or_else(|e| e.into_inner()))
    }

    /// Scans the directory now, re-reading only logs that changed.
    pub fn scan(&self) {
        let mut last = self.scanning.lock().unwrap_or_else(|e| e.into_inner());
        self.scan_holding(&mut last);
    }

    /// Deletes the logs the cleaner's options condemn, and drops them from `index`.
    fn clean(&self, index: &mut Index) {
        let doomed = cleaner::to_delete(
            index.apps.values(),
            index::now_millis(),
            &self.options.cleaner,
        );
        for (name, reason) in doomed {
            let Some(app) = index.apps.get(&name) else {
                continue;
            };
            match self.storage.remove(&app.source.path) {
                Ok(()) => {
                    eprintln!("deleted log '{name}': {reason}");
                    if let Some(disk) = &self.cache.disk {
                        disk.remove(&name);
                    }
                    index.apps.remove(&name);
                    index.listing = std::sync::OnceLock::new();
                    self.cleaned.fetch_add(1, Ordering::Relaxed);
                }
                Err(e) => eprintln!("cannot delete log '{name}' ({reason}): {e}"),
            }
        }
    }

    /// Scans unless a scan started after `asked` (requests that arrive together share
    /// one scan: they wait for the one under way).
    fn scan_since(&self, asked: Instant) {
        let mut last = self.scanning.lock().unwrap_or_else(|e| e.into_inner());
        if last.is_none_or(|started| started < asked) {
            self.scan_holding(&mut last);
        }
    }

    fn scan_holding(&self, last: &mut Option<Instant>) {
        *last = Some(Instant::now());
        let previous = self.index();
        let mut next = index::scan(
            &self.storage,
            &self.dir,
            &previous,
            self.options.replay_threads,
        );
        if self.options.cleaner.enabled() {
            self.clean(&mut next);
        }
        self.cache.retain(|name| next.apps.contains_key(name));
        *self.index.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(next);
        self.scans.fetch_add(1, Ordering::Relaxed);
    }

    /// The listing's entries, rendered by `render` from the index's applications once
    /// per index (the scanner makes a new index only when something changed).
    pub(crate) fn listing(
        &self,
        render: impl FnOnce(&BTreeMap<String, ListedApp>) -> Vec<ListingEntry>,
    ) -> Arc<[ListingEntry]> {
        let index = self.index();
        Arc::clone(index.listing.get_or_init(|| render(&index.apps).into()))
    }

    /// Every application attempt in the index.
    pub fn list(&self) -> Result<Vec<ListedApp>, EventLogError> {
        Ok(self.index().apps.values().cloned().collect())
    }

    /// Whether a request for an id the index does not know may rescan now: at most once
    /// every [`REQUEST_RESCAN_INTERVAL`], however many such requests come (each would
    /// list the whole directory: on S3, a LIST request).
    fn may_rescan_for_request(&self) -> bool {
        let mut last = self
            .rescanned_for_request
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        if last.is_some_and(|at| at.elapsed() < REQUEST_RESCAN_INTERVAL) {
            return false;
        }
        *last = Some(Instant::now());
        true
    }

    /// The attempts of application `id`, newest first; an id the index does not know
    /// makes it rescan first (at most every [`REQUEST_RESCAN_INTERVAL`]), so a new log is
    /// found without waiting for the scanner.
    pub fn attempts(&self, id: &str) -> Result<Vec<ListedApp>, EventLogError> {
        let asked = Instant::now();
        let find = || -> Vec<ListedApp> {
            let index = self.index();
            index.by_id.get(id).map_or_else(Vec::new, |names| {
                names
                    .iter()
                    .filter_map(|name| index.apps.get(name))
                    .cloned()
                    .collect()
            })
        };
        let mut attempts = find();
        if attempts.is_empty() && self.may_rescan_for_request() {
            self.scan_since(asked);
            attempts = find();
        }
        attempts.sort_by(|a, b| {
            b.info
                .start_time
                .cmp(&a.info.start_time)
                .then_with(|| b.info.attempt_id.cmp(&a.info.attempt_id))
        });
        Ok(attempts)
    }

    /// The replayed state of one attempt, brought up to date with its log (and, for the
    /// live application, with the queries it runs now).
    pub fn replay(&self, app: &ListedApp) -> Result<Arc<Replay>, EventLogError> {
        let logged = self.cache.get(app)?;
        Ok(self.with_running(logged))
    }

    /// The replayed state of one attempt for a pass over many (a SQL scan of the
    /// history): a replay in memory is used, one read for the pass is not kept there, so
    /// that the pass does not push out the replays the pages use.
    pub fn replay_passing(&self, app: &ListedApp) -> Result<Arc<Replay>, EventLogError> {
        let logged = self.cache.get_passing(app)?;
        Ok(self.with_running(logged))
    }

    /// What the store holds, skipped and did.
    pub fn status(&self) -> StoreStatus {
        let index = self.index();
        StoreStatus {
            dir: self.dir.clone(),
            applications: index.apps.len(),
            skipped: index.skipped.values().cloned().collect(),
            last_scan_millis: index.scanned_at,
            scans: self.scans.load(Ordering::Relaxed),
            dir_error: index.dir_error.clone(),
            cleaned: self.cleaned.load(Ordering::Relaxed),
            disk: self.cache.disk.as_ref().map(disk::DiskStore::stats),
            cache: self.cache.stats(),
            storage: self.storage.stats(),
        }
    }

    /// A permit for one more log download, unless [`LOG_DOWNLOADS`] are under way.
    pub(crate) fn download_permit(&self) -> Option<tokio::sync::OwnedSemaphorePermit> {
        Arc::clone(&self.downloads).try_acquire_owned().ok()
    }

    /// The running application this store serves beside its logs, if any.
    pub(crate) fn live_source(&self) -> Option<&Arc<dyn LiveSource>> {
        self.live.as_ref()
    }

    /// `replay`, completed by the live application's running queries if it is that
    /// application's and they got anywhere.
    fn with_running(&self, replay: Arc<Replay>) -> Arc<Replay> {
        let Some(live) = &self.live else {
            return replay;
        };
        let source = replay.source();
        let live_log = live.log_path();
        let live_name = live_log.as_deref().and_then(Path::file_name);
        if !source.in_progress || live_name != Some(std::ffi::OsStr::new(&source.name)) {
            return replay;
        }
        let events = live.running_events(&mut IdCounters::after(replay.state()));
        if events.is_empty() {
            return replay;
        }
        Arc::new(replay.with_events(&events))
    }
}
