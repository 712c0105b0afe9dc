//! The profiles of the jobs that ended lately, kept by client session and the client's
//! key for the job (its query id, else the job's name), so that a client can ask the
//! scheduler for the profile of the job it just ran.
//!
//! A job is known from its submission; its profile is built on the observer's posting
//! thread after it ends, so a client that asks as soon as its job ended waits a moment
//! for it. A profile is handed out once. Each session keeps its last [`KEPT_PER_SESSION`]
//! jobs, and the store the [`KEPT_SESSIONS`] sessions that submitted a job last (clients
//! that die never end theirs); a session's jobs are dropped when it ends.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use qprof_core::profile::QueryProfile;

/// Jobs kept per session.
pub const KEPT_PER_SESSION: usize = 64;
/// Sessions kept.
pub const KEPT_SESSIONS: usize = 256;

/// How a job that a client asks for stands.
#[derive(Debug, Clone)]
pub enum JobProfile {
    /// The job ended: its profile, and its error if it failed.
    Ended {
        /// What the job measured.
        profile: Arc<QueryProfile>,
        /// Why it failed, if it did.
        error: Option<String>,
    },
    /// The session ran no job under that key (or its jobs were dropped, or its profile
    /// was handed out, or cannot be built).
    Unknown,
    /// The job did not end within the wait.
    Running,
}

/// One job of a session.
#[derive(Debug)]
struct Entry {
    job_id: String,
    /// The client's key for the job.
    key: String,
    ended: Option<(Arc<QueryProfile>, Option<String>)>,
}

#[derive(Debug, Default)]
struct Store {
    sessions: HashMap<String, VecDeque<Entry>>,
    /// Sessions, the one that submitted a job last at the back.
    order: VecDeque<String>,
}

/// The profiles of the jobs that ended lately, by client session and key.
#[derive(Debug)]
pub struct JobProfiles {
    store: Mutex<Store>,
    /// Bumped whenever a job's profile is kept.
    changed: tokio::sync::watch::Sender<u64>,
}

impl Default for JobProfiles {
    fn default() -> Self {
        JobProfiles {
            store: Mutex::new(Store::default()),
            changed: tokio::sync::watch::Sender::new(0),
        }
    }
}

impl JobProfiles {
    fn lock(&self) -> MutexGuard<'_, Store> {
        self.store.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Job `job_id` of `session`, which its client calls `key`, was submitted.
    pub(crate) fn submitted(&self, session: &str, job_id: &str, key: &str) {
        let mut store = self.lock();
        if store.sessions.contains_key(session) {
            store.order.retain(|s| s != session);
        } else if store.order.len() >= KEPT_SESSIONS
            && let Some(oldest) = store.order.pop_front()
        {
            store.sessions.remove(&oldest);
        }
        store.order.push_back(session.to_string());
        let jobs = store.sessions.entry(session.to_string()).or_default();
        if jobs.len() >= KEPT_PER_SESSION {
            jobs.pop_front();
        }
        jobs.push_back(Entry {
            job_id: job_id.to_string(),
            key: key.to_string(),
            ended: None,
        });
    }

    /// Job `job_id` of `session` will have no profile (Ballista did not take it, or its
    /// profile could not be built): its client hears so at once.
    pub(crate) fn forget(&self, session: &str, job_id: &str) {
        if let Some(jobs) = self.lock().sessions.get_mut(session) {
            jobs.retain(|e| e.job_id != job_id);
        }
        self.changed.send_modify(|n| *n = n.wrapping_add(1));
    }

    /// Job `job_id` of `session` ended with `profile` (and `error` if it failed).
    pub(crate) fn ended(
        &self,
        session: &str,
        job_id: &str,
        profile: QueryProfile,
        error: Option<String>,
    ) {
        {
            let mut store = self.lock();
            let Some(entry) = store
                .sessions
                .get_mut(session)
                .and_then(|jobs| jobs.iter_mut().rev().find(|e| e.job_id == job_id))
            else {
                return;
            };
            entry.ended = Some((Arc::new(profile), error));
        }
        self.changed.send_modify(|n| *n = n.wrapping_add(1));
    }

    /// `session` ended: its jobs are dropped.
    pub(crate) fn session_ended(&self, session: &str) {
        let mut store = self.lock();
        store.sessions.remove(session);
        store.order.retain(|s| s != session);
    }

    /// The latest job under `key` of `session` as it stands now; an ended one is handed
    /// out (and dropped).
    fn take(&self, session: &str, key: &str) -> Option<JobProfile> {
        let mut store = self.lock();
        let Some(jobs) = store.sessions.get_mut(session) else {
            return Some(JobProfile::Unknown);
        };
        let Some(at) = jobs.iter().rposition(|e| e.key == key) else {
            return Some(JobProfile::Unknown);
        };
        jobs[at].ended.as_ref()?;
        let (profile, error) = jobs.remove(at)?.ended?;
        Some(JobProfile::Ended { profile, error })
    }

    /// The profile of the latest job under `key` of `session`, waiting up to `patience`
    /// for it to end and its profile to be built; handed out once.
    pub async fn wait_for(&self, session: &str, key: &str, patience: Duration) -> JobProfile {
        let mut changed = self.changed.subscribe();
        let waited = tokio::time::timeout(patience, async {
            loop {
                changed.borrow_and_update();
                if let Some(found) = self.take(session, key) {
                    return found;
                }
                if changed.changed().await.is_err() {
                    return JobProfile::Running;
                }
            }
        })
        .await;
        waited.unwrap_or(JobProfile::Running)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn profile(id: usize) -> QueryProfile {
        QueryProfile {
            id,
            ..qprof_core::profile::fixtures::sample()
        }
    }

    #[tokio::test]
    async fn a_job_is_found_once_its_profile_is_kept_and_the_latest_of_a_name_wins() {
        let profiles = Arc::new(JobProfiles::default());
        assert!(matches!(
            profiles.wait_for("s", "q1", Duration::ZERO).await,
            JobProfile::Unknown
        ));
        profiles.submitted("s", "job-a", "q1");
        // submitted, not ended: a short wait finds it running
        assert!(matches!(
            profiles.wait_for("s", "q1", Duration::from_millis(1)).await,
            JobProfile::Running
        ));
        // a waiter wakes when the profile is kept
        let waiter = {
            let profiles = Arc::clone(&profiles);
            tokio::spawn(async move { profiles.wait_for("s", "q1", Duration::from_secs(60)).await })
        };
        profiles.ended("s", "job-a", profile(1), Some("lost".to_string()));
        match waiter.await.unwrap() {
            JobProfile::Ended { profile, error } => {
                assert_eq!(profile.id, 1);
                assert_eq!(error.as_deref(), Some("lost"));
            }
            other => panic!("{other:?}"),
        }
        // run again under the same name: the new job is the one found
        profiles.submitted("s", "job-b", "q1");
        profiles.ended("s", "job-b", profile(2), None);
        match profiles.wait_for("s", "q1", Duration::ZERO).await {
            JobProfile::Ended { profile, error } => {
                assert_eq!(profile.id, 2);
                assert_eq!(error, None);
            }
            other => panic!("{other:?}"),
        }
        // handed out once
        assert!(matches!(
            profiles.wait_for("s", "q1", Duration::ZERO).await,
            JobProfile::Unknown
        ));
        // a job that will have no profile is not waited for
        profiles.submitted("s", "job-c", "q2");
        let waiter = {
            let profiles = Arc::clone(&profiles);
            tokio::spawn(async move { profiles.wait_for("s", "q2", Duration::from_secs(60)).await })
        };
        profiles.forget("s", "job-c");
        assert!(matches!(waiter.await.unwrap(), JobProfile::Unknown));
        // another session's jobs are its own; an ended session's are gone
        assert!(matches!(
            profiles.wait_for("t", "q1", Duration::ZERO).await,
            JobProfile::Unknown
        ));
        profiles.session_ended("s");
        assert!(matches!(
            profiles.wait_for("s", "q1", Duration::ZERO).await,
            JobProfile::Unknown
        ));
    }

    #[test]
    fn sessions_and_their_jobs_are_bounded() {
        let profiles = JobProfiles::default();
        for s in 0..KEPT_SESSIONS + 3 {
            profiles.submitted(&format!("s{s}"), "j", "q");
        }
        for j in 0..KEPT_PER_SESSION + 5 {
            profiles.submitted("last", &format!("j{j}"), &format!("q{j}"));
        }
        let store = profiles.lock();
        assert_eq!(store.sessions.len(), KEPT_SESSIONS);
        assert_eq!(store.order.len(), KEPT_SESSIONS);
        assert!(!store.sessions.contains_key("s0"));
        assert_eq!(store.sessions["last"].len(), KEPT_PER_SESSION);
        assert_eq!(store.sessions["last"][0].key, "q5");
        drop(store);
        // a session that submits again is the newest: the oldest others go first
        profiles.submitted("s10", "j2", "q");
        profiles.submitted("new", "j", "q");
        let store = profiles.lock();
        assert!(store.sessions.contains_key("s10"));
        assert!(!store.sessions.contains_key("s4"));
    }
}
