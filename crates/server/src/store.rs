//! The log directory as the server sees it: applications found by scanning, their listing
//! facts cached by file size and time, and their replays kept and refreshed incrementally.
//!
//! Applications are addressed by the ids inside their logs; a client-supplied id is only
//! ever compared with those, never turned into a path.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::UNIX_EPOCH;

use qprof_eventlog::EventLogError;
use qprof_eventlog::layout::{LogSource, discover};
use qprof_eventlog::profile_events::IdCounters;
use qprof_eventlog::replay::{Replay, scan_info};
use qprof_eventlog::state::AppInfo;

use crate::live::LiveSource;

/// Size and modification time of a log's files: when it changes, the log grew.
type Fingerprint = (u64, i64);

fn fingerprint(source: &LogSource) -> Fingerprint {
    let mut size = 0;
    let mut modified = 0;
    for file in &source.files {
        if let Ok(meta) = std::fs::metadata(&file.path) {
            size += meta.len();
            let ms = meta
                .modified()
                .ok()
                .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
                .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX));
            modified = modified.max(ms);
        }
    }
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
    fingerprint: Fingerprint,
}

impl ListedApp {
    /// The application id, or the log's name for logs without an application start.
    pub fn id(&self) -> &str {
        self.info.id.as_deref().unwrap_or(&self.source.name)
    }
}

#[derive(Default)]
struct Cache {
    listing: HashMap<String, ListedApp>,
    replays: HashMap<String, (Fingerprint, Arc<Replay>)>,
}

/// The applications of one log directory.
pub struct LogStore {
    dir: PathBuf,
    cache: Mutex<Cache>,
    live: Option<Arc<dyn LiveSource>>,
}

impl std::fmt::Debug for LogStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LogStore").field("dir", &self.dir).finish()
    }
}

impl LogStore {
    /// A store over `dir`, which must be a readable directory.
    pub fn open(dir: &Path) -> Result<LogStore, EventLogError> {
        discover(dir)?;
        Ok(LogStore {
            dir: dir.to_path_buf(),
            cache: Mutex::new(Cache::default()),
            live: None,
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

    /// The directory served.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Cache> {
        self.cache.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Every application attempt, rescanning the directory and re-reading only logs that
    /// changed. Logs that cannot be read are left out.
    pub fn list(&self) -> Result<Vec<ListedApp>, EventLogError> {
        let sources = discover(&self.dir)?;
        let mut cache = self.lock();
        let mut out = Vec::with_capacity(sources.len());
        for source in sources {
            let fp = fingerprint(&source);
            let cached = cache
                .listing
                .get(&source.name)
                .filter(|c| c.fingerprint == fp && c.source.in_progress == source.in_progress);
            let app = match cached {
                Some(app) => app.clone(),
                None => {
                    let Ok(info) = scan_info(&source) else {
                        continue;
                    };
                    let app = ListedApp {
                        last_updated: fp.1,
                        info,
                        fingerprint: fp,
                        source: source.clone(),
                    };
                    cache.listing.insert(source.name.clone(), app.clone());
                    app
                }
            };
            out.push(app);
        }
        Ok(out)
    }

    /// The attempts of application `id`, newest first.
    pub fn attempts(&self, id: &str) -> Result<Vec<ListedApp>, EventLogError> {
        let mut attempts: Vec<ListedApp> =
            self.list()?.into_iter().filter(|a| a.id() == id).collect();
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
        let logged = self.replay_log(app)?;
        Ok(self.with_running(logged))
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

    fn replay_log(&self, app: &ListedApp) -> Result<Arc<Replay>, EventLogError> {
        let fp = fingerprint(&app.source);
        let mut cache = self.lock();
        let key = app.source.name.clone();
        match cache.replays.get_mut(&key) {
            Some((seen, replay))
                if *seen == fp && replay.source().in_progress == app.source.in_progress =>
            {
                Ok(Arc::clone(replay))
            }
            Some((seen, replay)) => {
                // read only what was appended
                Arc::make_mut(replay).refresh()?;
                *seen = fp;
                Ok(Arc::clone(replay))
            }
            None => {
                let replay = Arc::new(Replay::load(app.source.clone())?);
                cache.replays.insert(key, (fp, Arc::clone(&replay)));
                Ok(replay)
            }
        }
    }
}
