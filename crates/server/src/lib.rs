//! qprof's history server: Spark's `/api/v1` REST API and a web UI over a directory of
//! event logs written by qprof or by Spark. It reads logs only and runs no query itself:
//! `/qprof/v1/sql` hands its statements to a [`SqlRunner`] the program gives
//! ([`router_with_sql`]).
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! let store = qprof_server::LogStore::open(std::path::Path::new("qprof-events"))?;
//! let app = qprof_server::router(std::sync::Arc::new(store));
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:18080").await?;
//! axum::serve(listener, app).await?;
//! # Ok(()) }
//! ```
#![deny(missing_docs)]

use std::sync::Arc;

use axum::Router;
use axum::extract::{Path, Query, State};
use axum::http::header;
use axum::response::{IntoResponse, Response};
use axum::routing::get;

pub mod access;
pub mod acl;
mod api;
pub mod live;
mod metrics;
pub mod object_storage;
pub mod sql;
pub mod sql_worker;
pub mod store;
mod ui;

pub use access::AccessOptions;
pub use acl::{AclOptions, Audience, Viewer};
pub use live::LiveSource;
pub use object_storage::ObjectStorage;
pub use sql::{SqlAnswer, SqlColumn, SqlError, SqlRunner, SqlStop};
pub use store::LogStore;

pub use api::public_text;
use api::{Answer, ApiError, Params};

type Shared = Arc<LogStore>;

/// The routes of [`router`] plus `/qprof/v1/live`, answered by `live`: the UI of an
/// application while it runs (its log, in progress, is in `store`'s directory). Its
/// queries running now appear among the logged ones, as far as they got (their stages
/// active, their ended tasks); its `/metrics` adds the live gauges (running queries, their
/// progress, the memory now).
pub fn live_router(store: LogStore, live: Arc<dyn LiveSource>) -> Router {
    let store = Arc::new(store.with_live(Arc::clone(&live)));
    LogStore::spawn_scanner(&store);
    let answer = {
        let live = Arc::clone(&live);
        move || {
            let live = Arc::clone(&live);
            async move {
                match tokio::task::spawn_blocking(move || live.live()).await {
                    Ok(value) => axum::Json(value).into_response(),
                    Err(e) => ApiError::Internal(format!("request failed: {e}")).into_response(),
                }
            }
        }
    };
    routes(Some(live))
        .route("/qprof/v1/live", get(answer))
        .fallback(not_found)
        .with_state(store)
        .layer(axum::middleware::map_response(access::security_headers))
}

/// The server's routes: `/api/v1/...`, `/qprof/v1/...`, Prometheus' `/metrics`, and the
/// web UI at `/`.
pub fn router(store: Shared) -> Router {
    routes(None)
        .fallback(not_found)
        .with_state(store)
        .layer(axum::middleware::map_response(access::security_headers))
}

/// The routes of [`router`] plus `/qprof/v1/sql` (`GET ?q=…`, or `POST` with the
/// statement), answered by `sql`: a read-only statement over the logs, within the
/// runner's limits, and the web UI's query box.
pub fn router_with_sql(store: Shared, sql: Arc<dyn SqlRunner>) -> Router {
    let statements = Router::new()
        .route("/qprof/v1/sql", get(sql::get_sql).post(sql::post_sql))
        .with_state(sql);
    routes(None)
        .fallback(not_found)
        .with_state(store)
        .merge(statements)
        .layer(axum::middleware::map_response(access::security_headers))
}

/// `router` (any of this crate's) behind `access`: a request for a host it does not
/// allow, or without its token or user, is refused before any route sees it.
pub fn guarded(router: Router, access: AccessOptions) -> Router {
    let acls = access.acls.clone().map(Arc::new);
    let guard = access::Guard {
        options: access,
        acls,
    };
    router.layer(axum::middleware::from_fn_with_state(
        Arc::new(guard),
        access::guard,
    ))
}

/// The routes both servers have; `/metrics` adds `live`'s gauges when there is one.
fn routes(live: Option<Arc<dyn LiveSource>>) -> Router<Shared> {
    let metrics = move |State(store): State<Shared>, audience: MaybeAudience| {
        let live = live.clone();
        async move { prometheus(store, audience_of(audience), live).await }
    };
    Router::new()
        .route("/", get(ui::index))
        .route("/static/{*file}", get(ui::asset))
        .route("/api/v1/{*path}", get(api_v1))
        .route("/qprof/v1/{*path}", get(qprof_v1))
        .route("/metrics", get(metrics))
}

async fn not_found() -> ApiError {
    ApiError::NotFound("no such page".into())
}

/// Runs a blocking request handler (file reads, replays) off the async workers.
async fn blocking(f: impl FnOnce() -> Result<Answer, ApiError> + Send + 'static) -> Response {
    match tokio::task::spawn_blocking(f).await {
        Ok(result) => result.into_response(),
        Err(e) => ApiError::Internal(format!("request failed: {e}")).into_response(),
    }
}

fn segments(path: &str) -> Vec<String> {
    path.split('/')
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .collect()
}

type QueryParams = Result<Query<Vec<(String, String)>>, axum::extract::rejection::QueryRejection>;

/// The audience of a request: the one [`guarded`] admitted it as, or everyone.
type MaybeAudience = Option<axum::Extension<Audience>>;

fn audience_of(audience: MaybeAudience) -> Audience {
    audience.map(|axum::Extension(a)| a).unwrap_or_default()
}

/// What an API request's handler is given: the store, who asks, the path's segments and
/// the query's parameters.
type Handler = fn(&LogStore, &Audience, &[&str], &Params) -> Result<Answer, ApiError>;

/// Answers a request under an API prefix with `handler`, given the path's segments and
/// the query's parameters (a malformed query string is a 400).
async fn answer_api(
    store: Shared,
    audience: Audience,
    path: String,
    params: QueryParams,
    handler: Handler,
) -> Response {
    let params = match params {
        Ok(Query(p)) => Params(p),
        Err(e) => return ApiError::BadRequest(e.body_text()).into_response(),
    };
    blocking(move || {
        let segs = segments(&path);
        let refs: Vec<&str> = segs.iter().map(String::as_str).collect();
        handler(&store, &audience, &refs, &params).map_err(|e| e.public(store.dir()))
    })
    .await
}

async fn api_v1(
    State(store): State<Shared>,
    audience: MaybeAudience,
    Path(path): Path<String>,
    params: QueryParams,
) -> Response {
    answer_api(store, audience_of(audience), path, params, api::api_v1).await
}

async fn qprof_v1(
    State(store): State<Shared>,
    audience: MaybeAudience,
    Path(path): Path<String>,
    params: QueryParams,
) -> Response {
    answer_api(store, audience_of(audience), path, params, api::qprof_v1).await
}

async fn prometheus(
    store: Shared,
    audience: Audience,
    live: Option<Arc<dyn LiveSource>>,
) -> Response {
    let dir = store.dir().to_path_buf();
    let exposition = move || {
        // the running application's own gauges are its viewers' only
        let live = live.filter(|_| audience.sees_all()).map(|l| l.live());
        metrics::exposition(&store, &audience, live.as_ref())
    };
    match tokio::task::spawn_blocking(exposition).await {
        Ok(Ok(text)) => (
            [(
                header::CONTENT_TYPE,
                "text/plain; version=0.0.4; charset=utf-8",
            )],
            text,
        )
            .into_response(),
        Ok(Err(e)) => e.public(&dir).into_response(),
        Err(e) => ApiError::Internal(format!("request failed: {e}")).into_response(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn public_text_names_entries_relative_to_the_log_directory_and_drops_os_error_numbers() {
        let dir = std::path::Path::new("/srv/qprof/logs");
        assert_eq!(
            public_text(
                "cannot read /srv/qprof/logs/app-1/events_1: Permission denied (os error 13)",
                dir
            ),
            "cannot read app-1/events_1: Permission denied"
        );
        assert_eq!(
            public_text(
                "/srv/qprof/logs: No such file or directory (os error 2)",
                dir
            ),
            "logs: No such file or directory"
        );
        // an object store's URL is no path of the machine's
        let bucket = std::path::Path::new("s3://bucket/logs");
        assert_eq!(
            public_text("s3://bucket/logs/app-1: gone", bucket),
            "s3://bucket/logs/app-1: gone"
        );
    }

    #[tokio::test]
    async fn a_panicking_handler_answers_500_with_a_json_message() {
        let response = blocking(|| panic!("a bug")).await;
        assert_eq!(
            response.status(),
            axum::http::StatusCode::INTERNAL_SERVER_ERROR
        );
        let body = axum::body::to_bytes(response.into_body(), usize::MAX)
            .await
            .unwrap();
        let json: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert!(
            json["message"].as_str().unwrap().contains("request failed"),
            "{json}"
        );
    }
}
