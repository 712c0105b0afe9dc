//! The profiles of a cluster client's jobs: served by the scheduler, on its own port, to
//! the client that ran them, which prints them as one process prints its own and writes
//! them with `--profile-out` and `--trace-out`.
//!
//! The scheduler builds a job's profile when the job ends (it alone sees every task); the
//! client asks for it by its session and the id it sent with the job (`qprof.query.id`,
//! e.g. `q3#7`), and the scheduler answers once that job's profile is built.

use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use axum::Router;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use qprof_ballista::job_profiles::{JobProfile, JobProfiles};
use qprof_eventlog::ServedProfile;

/// Where the scheduler serves the profile of a client's job.
const ROUTE: &str = "/qprof/v1/sessions/{session}/jobs/{job}/profile";

/// The start of what the scheduler answers for a job it does not know: the client's
/// statement ran no job (e.g. DDL), which is no error.
const UNKNOWN_JOB: &str = "no job";

/// How long the scheduler waits for a job's profile to be built.
const PATIENCE: Duration = Duration::from_secs(60);

/// The query of a profile request.
#[derive(Debug, serde::Deserialize)]
struct Wanted {
    /// Operators to list by self CPU under the profile's tree.
    top: Option<usize>,
}

/// The scheduler's routes serving `profiles` to the clients.
pub(crate) fn routes(profiles: Arc<JobProfiles>) -> Router {
    Router::new().route(ROUTE, get(served)).with_state(profiles)
}

async fn served(
    State(profiles): State<Arc<JobProfiles>>,
    Path((session, job)): Path<(String, String)>,
    Query(wanted): Query<Wanted>,
) -> Response {
    match profiles.wait_for(&session, &job, PATIENCE).await {
        JobProfile::Ended { profile, error } => {
            // rendering and serializing a large profile is work: off the async workers
            let top = wanted.top.unwrap_or(5);
            let json = tokio::task::spawn_blocking(move || {
                serde_json::to_string(&ServedProfile::new(&profile, top, error))
            })
            .await;
            match json {
                Ok(Ok(json)) => (
                    StatusCode::OK,
                    [(axum::http::header::CONTENT_TYPE, "application/json")],
                    json,
                )
                    .into_response(),
                Ok(Err(e)) => {
                    (StatusCode::INTERNAL_SERVER_ERROR, format!("{e}\n")).into_response()
                }
                Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, format!("{e}\n")).into_response(),
            }
        }
        JobProfile::Unknown => (
            StatusCode::NOT_FOUND,
            format!(
                "{UNKNOWN_JOB} {job:?} in session {session}: none ran under it, or its profile was handed out\n"
            ),
        )
            .into_response(),
        JobProfile::Running => (
            StatusCode::SERVICE_UNAVAILABLE,
            format!(
                "job {job:?} of session {session} has no profile after {} s\n",
                PATIENCE.as_secs()
            ),
        )
            .into_response(),
    }
}

/// A client of the profiles the scheduler at a `df://HOST:PORT` URL serves.
pub(crate) struct ProfileClient {
    http: reqwest::Client,
    base: url::Url,
    session: String,
    top: usize,
}

impl ProfileClient {
    /// A client for session `session` of the scheduler at `url`, asking for `top`
    /// operators under each tree.
    pub(crate) fn new(url: &str, session: &str, top: usize) -> Result<ProfileClient> {
        let address = url.strip_prefix("df://").unwrap_or(url);
        let base = url::Url::parse(&format!("http://{address}/"))
            .with_context(|| format!("'{url}' is no scheduler address"))?;
        let http = reqwest::Client::builder()
            // the scheduler waits for a profile at most a minute
            .timeout(PATIENCE + Duration::from_secs(10))
            // straight to the scheduler, as the session's gRPC goes
            .no_proxy()
            .build()
            .context("cannot make an HTTP client")?;
        Ok(ProfileClient {
            http,
            base,
            session: session.to_string(),
            top,
        })
    }

    /// The profile of the job the session ran under `job`; `None` if the scheduler has no
    /// job under it (the statement ran none).
    pub(crate) async fn fetch(&self, job: &str) -> Result<Option<ServedProfile>> {
        let mut url = self.base.clone();
        url.path_segments_mut()
            .map_err(|()| anyhow::anyhow!("'{}' takes no path", self.base))?
            .extend([
                "qprof",
                "v1",
                "sessions",
                self.session.as_str(),
                "jobs",
                job,
                "profile",
            ]);
        url.query_pairs_mut()
            .append_pair("top", &self.top.to_string());
        let response = self
            .http
            .get(url)
            .send()
            .await
            .map_err(|e| anyhow::anyhow!("cannot ask the scheduler for it: {e}"))?;
        let status = response.status();
        let body = response
            .text()
            .await
            .map_err(|e| anyhow::anyhow!("cannot read the scheduler's answer: {e}"))?;
        if status == reqwest::StatusCode::NOT_FOUND && body.starts_with(UNKNOWN_JOB) {
            return Ok(None);
        }
        if !status.is_success() {
            bail!("the scheduler answered {status}: {}", body.trim());
        }
        ServedProfile::parse(&body)
            .map(Some)
            .context("the scheduler's answer is no profile")
    }
}
