//! Spark's `/api/v1` endpoints and qprof's `/qprof/v1` extension, resolved from the path
//! segments and query parameters of a request. JSON shapes come from
//! [`qprof_eventlog::rest`]; this module only routes, validates and reports errors.

use std::io::Write;
use std::sync::Arc;

use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use qprof_eventlog::APPSTATUS_PREFIX;
use qprof_eventlog::AppState;
use qprof_eventlog::EventLogError;
use qprof_eventlog::QueryJson;
use qprof_eventlog::Replay;
use qprof_eventlog::rest::{self, AttemptSource, RestError, StageOptions};
use qprof_eventlog::{DEFAULT_REGRESSION_THRESHOLD_PERCENT, diff_queries};
use serde_json::{Value, json};

use std::collections::{BTreeMap, HashMap};

use crate::acl::Audience;
use crate::store::{LOG_DOWNLOADS, ListedApp, ListingEntry, LogStore, StoreStatus};

/// What an API request produces.
#[derive(Debug)]
pub(crate) enum Answer {
    /// A JSON document.
    Json(Value),
    /// A JSON document already rendered.
    JsonText(String),
    /// An SVG image.
    Svg(String),
    /// A zip archive of an application's log files, in a file of the server's own.
    Zip(LogsZip),
}

/// An application's logs as a zip archive in an unnamed temporary file (on disk, not in
/// memory, however large the logs; gone when closed), sent as a stream, holding one of
/// one of its store's [`crate::store::LOG_DOWNLOADS`] permits until it is sent or dropped.
#[derive(Debug)]
pub(crate) struct LogsZip {
    /// Download name.
    file_name: String,
    /// The archive, read from its start.
    file: std::fs::File,
    /// The permit this download holds, while it lives.
    _permit: tokio::sync::OwnedSemaphorePermit,
}

/// Bytes of a log read into an archive at a time.
const DOWNLOAD_PIECE_BYTES: u64 = 8 << 20;

/// Bytes of an archive read and sent at a time.
const DOWNLOAD_CHUNK_BYTES: usize = 256 << 10;

/// Why a request failed, with its HTTP status.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ApiError {
    /// Unknown application, job, stage, ... (404).
    #[error("{0}")]
    NotFound(String),
    /// A malformed parameter (400).
    #[error("{0}")]
    BadRequest(String),
    /// Not for this user (403).
    #[error("{0}")]
    Forbidden(String),
    /// The log could not be read (500).
    #[error("{0}")]
    Log(#[from] EventLogError),
    /// The server failed (500): a handler panicked, or an answer could not be built.
    #[error("{0}")]
    Internal(String),
    /// The server is doing as much of this as it does at once (503).
    #[error("{0}")]
    Busy(String),
}

/// `text` as a client may read it: a path under the local log directory `dir` named
/// relative to it, the directory by its own name, no operating system's error numbers.
/// The server's paths are its operator's business, not its users'.
pub fn public_text(text: &str, dir: &std::path::Path) -> String {
    let mut out = text.to_string();
    let shown = dir.display().to_string();
    // an object store's URL names no path of the machine's
    if !shown.contains("://") && !shown.is_empty() {
        let name = dir
            .file_name()
            .map_or_else(|| ".".to_string(), |n| n.to_string_lossy().into_owned());
        let under = format!("{}/", shown.trim_end_matches('/'));
        out = out
            .replace(&under, "")
            .replace(shown.trim_end_matches('/'), &name);
        if let Ok(absolute) = std::fs::canonicalize(dir) {
            let absolute = absolute.display().to_string();
            out = out
                .replace(&format!("{absolute}/"), "")
                .replace(&absolute, &name);
        }
    }
    // "Permission denied (os error 13)": the words, not the number
    while let Some(at) = out.find(" (os error ") {
        let end = out[at..].find(')').map_or(out.len(), |e| at + e + 1);
        out.replace_range(at..end, "");
    }
    out
}

impl ApiError {
    /// This error as a client may read it ([`public_text`]).
    pub(crate) fn public(self, dir: &std::path::Path) -> ApiError {
        match self {
            ApiError::NotFound(m) => ApiError::NotFound(public_text(&m, dir)),
            ApiError::BadRequest(m) => ApiError::BadRequest(public_text(&m, dir)),
            ApiError::Forbidden(m) => ApiError::Forbidden(m),
            ApiError::Log(e) => ApiError::Internal(public_text(&e.to_string(), dir)),
            ApiError::Internal(m) => ApiError::Internal(public_text(&m, dir)),
            ApiError::Busy(m) => ApiError::Busy(m),
        }
    }
}

impl IntoResponse for ApiError {
    /// Its status, and its message as JSON (`{"message": ...}`).
    fn into_response(self) -> Response {
        let status = match self {
            ApiError::NotFound(_) => StatusCode::NOT_FOUND,
            ApiError::BadRequest(_) => StatusCode::BAD_REQUEST,
            ApiError::Forbidden(_) => StatusCode::FORBIDDEN,
            ApiError::Log(_) | ApiError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
            ApiError::Busy(_) => StatusCode::SERVICE_UNAVAILABLE,
        };
        (status, axum::Json(json!({ "message": self.to_string() }))).into_response()
    }
}

impl IntoResponse for Answer {
    /// The document with its content type; an archive as a download.
    fn into_response(self) -> Response {
        match self {
            Answer::Json(v) => axum::Json(v).into_response(),
            Answer::JsonText(text) => {
                ([(header::CONTENT_TYPE, "application/json")], text).into_response()
            }
            Answer::Svg(svg) => ([(header::CONTENT_TYPE, "image/svg+xml")], svg).into_response(),
            Answer::Zip(zip) => {
                let disposition = content_disposition(&zip.file_name);
                let chunks = futures::stream::try_unfold(zip, |mut zip| async move {
                    let (chunk, zip) = tokio::task::spawn_blocking(move || {
                        use std::io::Read;
                        let mut chunk = vec![0u8; DOWNLOAD_CHUNK_BYTES];
                        let n = zip.file.read(&mut chunk)?;
                        chunk.truncate(n);
                        Ok::<_, std::io::Error>((chunk, zip))
                    })
                    .await
                    .map_err(std::io::Error::other)??;
                    Ok::<_, std::io::Error>((!chunk.is_empty()).then_some((chunk, zip)))
                });
                (
                    [
                        (header::CONTENT_TYPE, "application/octet-stream".to_string()),
                        (header::CONTENT_DISPOSITION, disposition),
                    ],
                    axum::body::Body::from_stream(chunks),
                )
                    .into_response()
            }
        }
    }
}

/// A download's `Content-Disposition` (RFC 6266): the name as a quoted ASCII fallback
/// (any other character `_`) and in full as UTF-8, percent-encoded (RFC 8187), so a name a
/// log chose can neither end the header's value nor name a path.
fn content_disposition(file_name: &str) -> String {
    let fallback: String = file_name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "._-".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect();
    let mut encoded = String::new();
    for byte in file_name.bytes() {
        if byte.is_ascii_alphanumeric() || b"!#$&+-.^_`|~".contains(&byte) {
            encoded.push(char::from(byte));
        } else {
            encoded.push_str(&format!("%{byte:02X}"));
        }
    }
    format!("attachment; filename=\"{fallback}\"; filename*=UTF-8''{encoded}")
}

impl From<RestError> for ApiError {
    fn from(e: RestError) -> ApiError {
        match e {
            RestError::NotFound(m) => ApiError::NotFound(m),
            RestError::BadRequest(m) => ApiError::BadRequest(m),
        }
    }
}

type ApiResult = Result<Answer, ApiError>;

/// Query parameters, repeated keys kept.
#[derive(Debug, Default)]
pub(crate) struct Params(pub Vec<(String, String)>);

impl Params {
    fn get(&self, key: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    fn all(&self, key: &str) -> Vec<String> {
        self.0
            .iter()
            .filter(|(k, _)| k == key)
            .flat_map(|(_, v)| v.split(',').map(str::to_string))
            .filter(|v| !v.is_empty())
            .collect()
    }

    fn flag(&self, key: &str, default: bool) -> Result<bool, ApiError> {
        match self.get(key) {
            None => Ok(default),
            Some(v) if v.eq_ignore_ascii_case("true") => Ok(true),
            Some(v) if v.eq_ignore_ascii_case("false") => Ok(false),
            Some(v) => Err(ApiError::BadRequest(format!(
                "parameter '{key}' must be true or false, not '{v}'"
            ))),
        }
    }

    fn number<T: std::str::FromStr>(&self, key: &str, default: T) -> Result<T, ApiError> {
        match self.get(key) {
            None => Ok(default),
            Some(v) => v.parse().map_err(|_| {
                ApiError::BadRequest(format!(
                    "parameter '{key}' must be a non-negative integer, not '{v}'"
                ))
            }),
        }
    }

    fn date(&self, key: &str) -> Result<Option<i64>, ApiError> {
        self.get(key)
            .map(|v| {
                qprof_eventlog::parse_date(v).ok_or_else(|| {
                    ApiError::BadRequest(format!(
                        "parameter '{key}': '{v}' is not a date (yyyy-MM-dd or yyyy-MM-dd'T'HH:mm:ss.SSS'GMT')"
                    ))
                })
            })
            .transpose()
    }
}

fn id_segment(text: &str, what: &str) -> Result<i64, ApiError> {
    text.parse()
        .map_err(|_| ApiError::NotFound(format!("unknown {what}: {text}")))
}

fn attempt_source(app: &ListedApp) -> AttemptSource<'_> {
    AttemptSource {
        info: &app.info,
        completed: !app.source.in_progress,
        last_updated: app.last_updated,
        // an object's full URL; a local log by its name, not the server's paths
        log_source: match app.source.path.to_str() {
            Some(url) if url.contains("://") => url.to_string(),
            _ => format!("file:{}", app.source.name),
        },
    }
}

fn application_json(id: &str, attempts: &[ListedApp]) -> Value {
    let sources: Vec<AttemptSource<'_>> = attempts.iter().map(attempt_source).collect();
    rest::application_info(id, &sources)
}

/// `/api/v1/applications` with Spark's filters.
fn applications(store: &LogStore, audience: &Audience, params: &Params) -> ApiResult {
    let status = match params.get("status").map(str::to_ascii_lowercase).as_deref() {
        None => None,
        Some("completed") => Some(true),
        Some("running") => Some(false),
        Some(other) => {
            return Err(ApiError::BadRequest(format!(
                "unknown status '{other}' (expected completed or running)"
            )));
        }
    };
    let (min_date, max_date) = (params.date("minDate")?, params.date("maxDate")?);
    let (min_end, max_end) = (params.date("minEndDate")?, params.date("maxEndDate")?);
    let limit: usize = params.number("limit", usize::MAX)?;
    let listing = store.listing(render_listing);
    let keep = |&(start, end, completed): &(i64, i64, bool)| {
        status.is_none_or(|c| c == completed)
            && min_date.is_none_or(|d| start >= d)
            && max_date.is_none_or(|d| start <= d)
            && min_end.is_none_or(|d| end >= d)
            && max_end.is_none_or(|d| end <= d)
    };
    let mut text = String::from("[");
    for entry in listing
        .iter()
        .filter(|e| e.attempts.iter().any(keep))
        .filter(|e| e.infos.iter().any(|info| audience.may_view(info)))
        .take(limit)
    {
        if text.len() > 1 {
            text.push(',');
        }
        text.push_str(&entry.json);
    }
    text.push(']');
    Ok(Answer::JsonText(text))
}

/// Every application of `apps` (attempts grouped by id) for the listing: running ones
/// first, then by end time, newest first.
fn render_listing(apps: &BTreeMap<String, ListedApp>) -> Vec<ListingEntry> {
    let mut by_id: Vec<(&str, Vec<&ListedApp>)> = Vec::new();
    let mut slot: HashMap<&str, usize> = HashMap::new();
    for app in apps.values() {
        match slot.get(app.id()) {
            Some(&i) => by_id[i].1.push(app),
            None => {
                slot.insert(app.id(), by_id.len());
                by_id.push((app.id(), vec![app]));
            }
        }
    }
    let mut out: Vec<ListingEntry> = by_id
        .into_iter()
        .map(|(id, mut attempts)| {
            attempts.sort_by_key(|a| std::cmp::Reverse(a.info.start_time));
            let order = attempts
                .iter()
                .map(|a| {
                    if a.source.in_progress {
                        i64::MAX
                    } else {
                        a.info.end_time.unwrap_or(0)
                    }
                })
                .max()
                .unwrap_or(0);
            let facts = attempts
                .iter()
                .map(|a| {
                    let end = if a.source.in_progress {
                        -1
                    } else {
                        a.info.end_time.unwrap_or(a.last_updated)
                    };
                    (a.info.start_time.unwrap_or(0), end, !a.source.in_progress)
                })
                .collect();
            let sources: Vec<AttemptSource<'_>> =
                attempts.iter().map(|a| attempt_source(a)).collect();
            ListingEntry {
                order,
                attempts: facts,
                infos: attempts.iter().map(|a| a.info.clone()).collect(),
                json: rest::application_info(id, &sources).to_string().into(),
            }
        })
        .collect();
    out.sort_by_key(|e| std::cmp::Reverse(e.order));
    out
}

/// Application resources that can follow `applications/{id}/` (anything else is an attempt).
const RESOURCES: [&str; 9] = [
    "jobs",
    "stages",
    "executors",
    "allexecutors",
    "sql",
    "environment",
    "logs",
    "storage",
    "allmiscellaneousprocess",
];

/// Answers `GET /api/v1/<segments>`.
pub(crate) fn api_v1(
    store: &LogStore,
    audience: &Audience,
    segments: &[&str],
    params: &Params,
) -> ApiResult {
    match segments {
        ["version"] => Ok(Answer::Json(rest::version())),
        ["applications"] => applications(store, audience, params),
        ["applications", id, rest @ ..] => {
            let attempts = visible_attempts(store, audience, id)?;
            if attempts.is_empty() {
                return Err(ApiError::NotFound(format!("no such app: {id}")));
            }
            match rest {
                [] => Ok(Answer::Json(application_json(id, &attempts))),
                [attempt, rest @ ..] if !RESOURCES.contains(attempt) => {
                    let Some(app) = attempts
                        .iter()
                        .find(|a| a.info.attempt_id.as_deref() == Some(attempt))
                    else {
                        return Err(ApiError::NotFound(format!(
                            "unknown app attempt: {id}/{attempt}"
                        )));
                    };
                    match rest {
                        [] => Ok(Answer::Json(rest::attempt_info(&attempt_source(app)))),
                        _ => app_resource(store, app, rest, params),
                    }
                }
                _ => app_resource(store, &attempts[0], rest, params),
            }
        }
        _ => Err(ApiError::NotFound(format!(
            "no such endpoint: /api/v1/{}",
            segments.join("/")
        ))),
    }
}

fn stage_options(params: &Params, details_default: bool) -> Result<StageOptions, ApiError> {
    Ok(StageOptions {
        details: params.flag("details", details_default)?,
        with_summaries: params.flag("withSummaries", false)?,
        quantiles: match params.get("quantiles") {
            Some(q) => rest::parse_quantiles(q)?,
            None => Vec::new(),
        },
        task_statuses: params.all("taskStatus"),
    })
}

fn app_resource(store: &LogStore, app: &ListedApp, path: &[&str], params: &Params) -> ApiResult {
    if path == ["logs"] {
        return logs_zip(store, app);
    }
    let replay = store.replay(app)?;
    let state: &AppState = replay.state();
    let json = match path {
        ["jobs"] => rest::jobs(state, &params.all("status"))?,
        ["jobs", id] => rest::job(state, id_segment(id, "job")?)?,
        ["stages"] => rest::stages(state, &params.all("status"), &stage_options(params, false)?)?,
        ["stages", id] => rest::stage(
            state,
            id_segment(id, "stage")?,
            &stage_options(params, true)?,
        )?,
        ["stages", id, attempt] => rest::stage_attempt(
            state,
            id_segment(id, "stage")?,
            id_segment(attempt, "stage attempt")?,
            &stage_options(params, true)?,
        )?,
        ["stages", id, attempt, "taskSummary"] => {
            let quantiles = match params.get("quantiles") {
                Some(q) => rest::parse_quantiles(q)?,
                None => Vec::new(),
            };
            rest::task_summary(
                state,
                id_segment(id, "stage")?,
                id_segment(attempt, "stage attempt")?,
                &quantiles,
            )?
        }
        ["stages", id, attempt, "taskList"] => rest::task_list(
            state,
            id_segment(id, "stage")?,
            id_segment(attempt, "stage attempt")?,
            params.number("offset", 0)?,
            params.number("length", 20)?,
            params.get("sortBy"),
            &params.all("status"),
        )?,
        ["executors"] => rest::executors(state, false),
        ["allexecutors"] => rest::executors(state, true),
        ["environment"] => rest::environment(state)?,
        ["sql"] => rest::sql_list(
            state,
            params.flag("details", true)?,
            params.flag("planDescription", true)?,
            params.number("offset", 0)?,
            params.number("length", 20)?,
        ),
        ["sql", id] => rest::sql(
            state,
            id_segment(id, "query execution id")?,
            params.flag("details", true)?,
            params.flag("planDescription", true)?,
        )?,
        ["storage", "rdd"] | ["allmiscellaneousprocess"] => json!([]),
        ["storage", "rdd", id] => {
            return Err(ApiError::NotFound(format!("unknown rdd: {id}")));
        }
        _ => {
            return Err(ApiError::NotFound(format!(
                "no such endpoint for application {}: {}",
                app.id(),
                path.join("/")
            )));
        }
    };
    Ok(Answer::Json(json))
}

/// Answers `GET /qprof/v1/<segments>`: qprof's additions to Spark's API.
pub(crate) fn qprof_v1(
    store: &LogStore,
    audience: &Audience,
    segments: &[&str],
    params: &Params,
) -> ApiResult {
    match segments {
        ["status"] if !audience.sees_all() => Err(ApiError::Forbidden(
            "the server's status is its admins' (--admin-acls)".into(),
        )),
        ["status"] => {
            let mut status = status_json(&store.status());
            // a running application's own server: its traces' export too
            if let Some(export) = store.live_source().and_then(|l| l.live().trace_export) {
                status["traceExport"] =
                    serde_json::to_value(export).map_err(|e| ApiError::Internal(e.to_string()))?;
            }
            Ok(Answer::Json(status))
        }
        ["metrics"] => Ok(Answer::Json(metric_catalog_json())),
        ["applications", id, "sql", exec, "profile"] => {
            let replay = first_attempt_replay(store, audience, id)?;
            Ok(Answer::Json(rest::qprof_profile(
                replay.state(),
                id_segment(exec, "query execution id")?,
            )?))
        }
        ["applications", id, "sql", exec, "flamegraph.svg"] => {
            let replay = first_attempt_replay(store, audience, id)?;
            Ok(Answer::Svg(rest::qprof_flame_graph(
                replay.state(),
                id_segment(exec, "query execution id")?,
            )?))
        }
        [
            "applications",
            id,
            "sql",
            exec,
            "operators",
            node,
            "flamegraph.svg",
        ] => {
            let replay = first_attempt_replay(store, audience, id)?;
            Ok(Answer::Svg(rest::qprof_operator_flame_graph(
                replay.state(),
                id_segment(exec, "query execution id")?,
                id_segment(node, "operator id")? as usize,
            )?))
        }
        ["applications", id, "skipped"] => {
            let replay = first_attempt_replay(store, audience, id)?;
            let s = replay.state().skipped;
            Ok(Answer::Json(json!({
                "unknownEvents": s.unknown_events,
                "corruptLines": s.corrupt_lines,
                "bytesReplayed": replay.bytes_applied(),
            })))
        }
        ["compare"] => compare(store, audience, params),
        ["compare", "flamegraph.svg"] => Ok(Answer::Svg(rest::qprof_differential_flame_graph(
            &compared_run(store, audience, params, "before")?,
            &compared_run(store, audience, params, "after")?,
        )?)),
        _ => Err(ApiError::NotFound(format!(
            "no such endpoint: /qprof/v1/{}",
            segments.join("/")
        ))),
    }
}

/// The metric catalog: each metric qprof measures, and DataFusion's metrics as qprof
/// names them, operator by operator; what the UI shows beside a metric's name.
fn metric_catalog_json() -> Value {
    use qprof_core::catalog::{self, datafusion};
    let native = |d: &datafusion::NativeMetricDef| {
        json!({
            "name": d.name,
            "displayName": d.display,
            "kind": d.kind.as_str(),
            "native": d.native,
            "readAs": d.read_as.as_str(),
            "description": d.description,
            "onPlanGraph": d.name != datafusion::ELAPSED_COMPUTE_NANOS,
        })
    };
    json!({
        "metrics": catalog::ALL.iter().map(|d| json!({
            "name": d.name,
            "displayName": d.display,
            "kind": d.kind.as_str(),
            "unit": d.unit.as_str(),
            "family": d.family.title(),
            "aggregation": d.aggregation.as_str(),
            "description": d.description,
            "onPlanGraph": !catalog::PANEL_ONLY.contains(d),
        })).collect::<Vec<_>>(),
        "datafusion": {
            "common": datafusion::COMMON.iter().map(native).collect::<Vec<_>>(),
            "operators": datafusion::OPERATORS.iter().map(|o| json!({
                "operator": o.operator,
                "label": o.label,
                "metrics": o.native.iter().map(native).collect::<Vec<_>>(),
            })).collect::<Vec<_>>(),
        },
    })
}

/// The replay of application `id`'s first listed attempt.
/// The attempts of application `id` that `audience` may view (none: as for an id that
/// does not exist).
fn visible_attempts(
    store: &LogStore,
    audience: &Audience,
    id: &str,
) -> Result<Vec<ListedApp>, ApiError> {
    let mut attempts = store.attempts(id)?;
    attempts.retain(|a| audience.may_view(&a.info));
    Ok(attempts)
}

fn first_attempt_replay(
    store: &LogStore,
    audience: &Audience,
    id: &str,
) -> Result<Arc<Replay>, ApiError> {
    let attempts = visible_attempts(store, audience, id)?;
    let app = attempts
        .first()
        .ok_or_else(|| ApiError::NotFound(format!("no such app: {id}")))?;
    Ok(store.replay(app)?)
}

/// `/qprof/v1/compare?before=APP:SQLID&after=APP:SQLID[&threshold=PCT]`: two logged runs
/// of a query compared operator by operator ([`profile_diff`]).
fn compare(store: &LogStore, audience: &Audience, params: &Params) -> ApiResult {
    let threshold = match params.get("threshold") {
        None => DEFAULT_REGRESSION_THRESHOLD_PERCENT,
        Some(v) => v
            .parse::<f64>()
            .ok()
            .filter(|t| t.is_finite() && *t >= 0.0)
            .ok_or_else(|| {
                ApiError::BadRequest(format!(
                    "parameter 'threshold' must be a non-negative percentage, not '{v}'"
                ))
            })?,
    };
    let (before, after) = (
        compared_run(store, audience, params, "before")?,
        compared_run(store, audience, params, "after")?,
    );
    let mut answer = diff_queries(&before, &after, threshold).to_json();
    answer["thresholdPercent"] = json!(threshold);
    answer["sql"] = json!([before.sql, after.sql]);
    Ok(Answer::Json(answer))
}

/// The logged profile of the run parameter `key` names (`APP:SQLID`).
fn compared_run(
    store: &LogStore,
    audience: &Audience,
    params: &Params,
    key: &str,
) -> Result<QueryJson, ApiError> {
    let spec = params
        .get(key)
        .ok_or_else(|| ApiError::BadRequest(format!("parameter '{key}' (APP:SQLID) is missing")))?;
    let (app, exec) = spec.rsplit_once(':').ok_or_else(|| {
        ApiError::BadRequest(format!("parameter '{key}' must be APP:SQLID, not '{spec}'"))
    })?;
    let exec = id_segment(exec, "query execution id")?;
    Ok(rest::logged_profile(
        first_attempt_replay(store, audience, app)?.state(),
        exec,
    )?)
}

/// `/qprof/v1/status`: the log directory as the server last scanned it (the entries it
/// skipped and why) and its replay cache.
fn status_json(status: &StoreStatus) -> Value {
    let c = &status.cache;
    let dir = &status.dir;
    let shown = dir.display().to_string();
    json!({
        // an object store's URL; a local directory by its name
        "logDirectory": if shown.contains("://") { shown } else { public_text(&shown, dir) },
        "applications": status.applications,
        "skipped": status.skipped.iter().map(|s| json!({"entry": s.name, "reason": public_text(&s.reason, dir)})).collect::<Vec<_>>(),
        "lastScan": (status.last_scan_millis > 0).then(|| qprof_eventlog::format_date(status.last_scan_millis)),
        "scans": status.scans,
        "directoryError": status.dir_error.as_deref().map(|e| public_text(e, dir)),
        "logsCleaned": status.cleaned,
        "diskStore": status.disk.map(|d| json!({
            "files": d.files,
            "bytes": d.bytes,
            "budgetBytes": d.budget_bytes,
            "hits": d.hits,
            "writes": d.writes,
            "discards": d.discards,
        })),
        "cache": {
            "resident": c.resident,
            "residentBytes": c.resident_bytes,
            "budgetBytes": c.budget_bytes,
            "loads": c.loads,
            "evictions": c.evictions,
        },
        "storage": status.storage.map(|s| json!({
            "lists": s.lists,
            "reads": s.reads,
            "bytesRead": s.bytes_read,
        })),
    })
}

/// The application's log files as a zip, entries named as in the log directory, built in
/// a temporary file (read a piece at a time, so no more of a log is in memory than a
/// piece); a 503 while [`LOG_DOWNLOADS`] others are under way.
fn logs_zip(store: &LogStore, app: &ListedApp) -> Result<Answer, ApiError> {
    use std::io::Seek;
    let permit = store.download_permit().ok_or_else(|| {
        ApiError::Busy(format!(
            "{LOG_DOWNLOADS} log downloads are under way, the most at once: try again later"
        ))
    })?;
    let internal = |what: &str, e: &dyn std::fmt::Display| {
        ApiError::Internal(format!("cannot build the logs' zip ({what}): {e}"))
    };
    let file = tempfile::tempfile().map_err(|e| internal("temporary file", &e))?;
    let mut zip = zip::ZipWriter::new(std::io::BufWriter::new(file));
    let options = zip::write::SimpleFileOptions::default().large_file(true);
    let rolling = app.source.rolling;
    let storage = &app.source.storage;
    let zip_err = |e: zip::result::ZipError| internal("archive", &e);
    if rolling {
        zip.add_directory(format!("{}/", app.source.name), options)
            .map_err(zip_err)?;
    }
    let mut files: Vec<std::path::PathBuf> =
        app.source.files.iter().map(|f| f.path.clone()).collect();
    if rolling {
        // the status marker belongs to the log too
        if let Ok(entries) = storage.list(&app.source.path) {
            files.extend(
                entries
                    .into_iter()
                    .flatten()
                    .filter(|e| e.name.starts_with(APPSTATUS_PREFIX))
                    .map(|e| e.path),
            );
        }
    }
    for path in files {
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let entry = if rolling {
            format!("{}/{name}", app.source.name)
        } else {
            name
        };
        zip.start_file(entry, options).map_err(zip_err)?;
        // up to the length the first piece found: a log still written to grows meanwhile
        let (mut offset, mut len) = (0_u64, None);
        while len.is_none_or(|len| offset < len) {
            let (piece, file_len) = storage
                .read_range(&path, offset, DOWNLOAD_PIECE_BYTES)
                .map_err(|e| EventLogError::io(&path, e))?;
            let len = *len.get_or_insert(file_len);
            if piece.is_empty() {
                break;
            }
            let keep = usize::try_from(len.saturating_sub(offset)).unwrap_or(usize::MAX);
            let piece = &piece[..piece.len().min(keep)];
            zip.write_all(piece)
                .map_err(|e| EventLogError::io(&path, e))?;
            offset = offset.saturating_add(piece.len() as u64);
        }
    }
    let mut file = zip
        .finish()
        .map_err(zip_err)?
        .into_inner()
        .map_err(|e| internal("temporary file", e.error()))?;
    file.rewind().map_err(|e| internal("temporary file", &e))?;
    Ok(Answer::Zip(LogsZip {
        file_name: format!("eventLogs-{}.zip", app.id()),
        file,
        _permit: permit,
    }))
}
