//! The cleaner: deletes the logs of completed applications that are too old, or beyond the
//! number to keep, as Spark's history server does (`spark.history.fs.cleaner.*`). A log
//! still in progress is never deleted, and counts toward the number kept.

use std::time::Duration;

use super::index::ListedApp;
use qprof_core::metric::saturating_i64;

/// What the cleaner deletes; nothing by default.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CleanerOptions {
    /// Delete completed applications not updated for this long (Spark's
    /// `spark.history.fs.cleaner.maxAge`).
    pub max_age: Option<Duration>,
    /// Keep at most this many applications, deleting the completed ones least recently
    /// updated first (Spark's `spark.history.fs.cleaner.maxNum`).
    pub max_num: Option<usize>,
}

impl CleanerOptions {
    /// Whether the cleaner deletes anything at all.
    pub fn enabled(&self) -> bool {
        self.max_age.is_some() || self.max_num.is_some()
    }
}

/// The entries of `apps` the cleaner deletes at `now_millis`, each with the reason.
pub(crate) fn to_delete<'a>(
    apps: impl Iterator<Item = &'a ListedApp>,
    now_millis: i64,
    options: &CleanerOptions,
) -> Vec<(String, String)> {
    let apps: Vec<&ListedApp> = apps.collect();
    let mut out = Vec::new();
    if let Some(max_age) = options.max_age {
        let oldest_kept = now_millis - saturating_i64(max_age.as_millis());
        for app in apps.iter().filter(|a| !a.source.in_progress) {
            if app.last_updated < oldest_kept {
                out.push((
                    app.source.name.clone(),
                    format!("not updated for more than {}", duration_text(max_age)),
                ));
            }
        }
    }
    if let Some(max_num) = options.max_num {
        let kept = apps.len() - out.len();
        if kept > max_num {
            let mut completed: Vec<&&ListedApp> = apps
                .iter()
                .filter(|a| !a.source.in_progress && !out.iter().any(|(n, _)| *n == a.source.name))
                .collect();
            completed.sort_by_key(|a| (a.last_updated, a.source.name.clone()));
            for app in completed.into_iter().take(kept - max_num) {
                out.push((
                    app.source.name.clone(),
                    format!("beyond the {max_num} applications kept"),
                ));
            }
        }
    }
    out
}

/// `d` in the largest whole unit that fits (`7d`, `36h`, `90s`).
fn duration_text(d: Duration) -> String {
    let s = d.as_secs();
    match s {
        s if s >= 86_400 && s % 86_400 == 0 => format!("{}d", s / 86_400),
        s if s >= 3_600 && s % 3_600 == 0 => format!("{}h", s / 3_600),
        s if s >= 60 && s % 60 == 0 => format!("{}m", s / 60),
        s if s > 0 => format!("{s}s"),
        _ => format!("{}ms", d.as_millis()),
    }
}
