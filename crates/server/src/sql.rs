//! `/qprof/v1/sql`: a read-only SQL statement over the served logs, answered by a runner
//! the embedding program gives (the server runs no query itself: `qprof serve` hands it
//! `qprof-history`'s service).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use axum::extract::{Query, State};
use axum::http::{HeaderMap, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use crate::acl::Audience;
use crate::api::ApiError;

/// One column of an answer: its name and its type as the engine names it.
#[derive(Debug, Clone, PartialEq)]
pub struct SqlColumn {
    /// The column's name.
    pub name: String,
    /// Its type, e.g. `Int64` or `Utf8`.
    pub data_type: String,
}

/// Why an answer holds fewer rows than the statement would give.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SqlStop {
    /// It reached the row limit.
    Rows(usize),
    /// It ran out of time, after this many milliseconds.
    Time(u64),
    /// Its values reached the answer's size limit, in bytes (as text).
    Bytes(usize),
}

/// A statement's answer: its columns and rows, as JSON values (numbers and booleans as
/// such, everything else as the engine displays it, nulls as null).
#[derive(Debug, Clone, PartialEq)]
pub struct SqlAnswer {
    /// The columns.
    pub columns: Vec<SqlColumn>,
    /// The rows, each a value per column.
    pub rows: Vec<Vec<Value>>,
    /// Set when a limit stopped the statement before its last row.
    pub stopped: Option<SqlStop>,
    /// How long the statement ran, milliseconds.
    pub elapsed_ms: u64,
}

/// Why a statement has no answer.
#[derive(Debug, Clone, thiserror::Error)]
pub enum SqlError {
    /// The statement is wrong or not allowed (a write, a DDL): the client's to fix (400).
    #[error("{0}")]
    Rejected(String),
    /// It failed while it ran (500).
    #[error("{0}")]
    Failed(String),
}

/// What answers `/qprof/v1/sql`: runs one read-only statement within its limits.
pub trait SqlRunner: Send + Sync {
    /// The answer to `sql`, over the applications `audience` may view.
    fn run(
        &self,
        sql: String,
        audience: Audience,
    ) -> Pin<Box<dyn Future<Output = Result<SqlAnswer, SqlError>> + Send>>;
}

/// The longest statement accepted, in bytes.
const MAX_STATEMENT_BYTES: usize = 64 * 1024;

/// The statement of a request: `?q=` on a GET, the body (`{"sql": …}` or the text) on a POST.
fn statement(sql: Option<&str>) -> Result<String, ApiError> {
    let sql = sql.map(str::trim).unwrap_or_default();
    if sql.is_empty() {
        return Err(ApiError::BadRequest(
            "no statement: give one as ?q=SELECT … or in a POST's body".into(),
        ));
    }
    if sql.len() > MAX_STATEMENT_BYTES {
        return Err(ApiError::BadRequest(format!(
            "the statement is {} bytes, over the limit of {MAX_STATEMENT_BYTES}",
            sql.len()
        )));
    }
    Ok(sql.to_string())
}

async fn answer(
    runner: Arc<dyn SqlRunner>,
    audience: Audience,
    sql: Result<String, ApiError>,
) -> Response {
    let sql = match sql {
        Ok(sql) => sql,
        Err(e) => return e.into_response(),
    };
    match runner.run(sql, audience).await {
        Ok(answer) => (
            [(header::CONTENT_TYPE, "application/json")],
            axum::Json(answer.to_json()),
        )
            .into_response(),
        Err(SqlError::Rejected(message)) => ApiError::BadRequest(message).into_response(),
        Err(SqlError::Failed(message)) => ApiError::Internal(message).into_response(),
    }
}

impl SqlAnswer {
    /// The answer as the endpoint sends it.
    pub fn to_json(&self) -> Value {
        let stopped = self.stopped.map(|s| match s {
            SqlStop::Rows(n) => json!({ "limit": "rows", "rows": n }),
            SqlStop::Time(ms) => json!({ "limit": "time", "afterMs": ms }),
            SqlStop::Bytes(n) => json!({ "limit": "bytes", "bytes": n }),
        });
        json!({
            "columns": self.columns.iter().map(|c| json!({ "name": c.name, "type": c.data_type })).collect::<Vec<_>>(),
            "rows": self.rows,
            "stopped": stopped,
            "elapsedMs": self.elapsed_ms,
        })
    }

    /// An answer [`SqlAnswer::to_json`] wrote, read back (`None` if it is not one).
    pub fn from_json(value: &Value) -> Option<SqlAnswer> {
        let columns = value["columns"]
            .as_array()?
            .iter()
            .map(|c| {
                Some(SqlColumn {
                    name: c["name"].as_str()?.to_string(),
                    data_type: c["type"].as_str()?.to_string(),
                })
            })
            .collect::<Option<Vec<_>>>()?;
        let rows = value["rows"]
            .as_array()?
            .iter()
            .map(|r| r.as_array().cloned())
            .collect::<Option<Vec<_>>>()?;
        let stopped = match &value["stopped"] {
            Value::Null => None,
            s => {
                let n = |key: &str| s[key].as_u64();
                Some(match s["limit"].as_str()? {
                    "rows" => SqlStop::Rows(usize::try_from(n("rows")?).ok()?),
                    "time" => SqlStop::Time(n("afterMs")?),
                    "bytes" => SqlStop::Bytes(usize::try_from(n("bytes")?).ok()?),
                    _ => return None,
                })
            }
        };
        Some(SqlAnswer {
            columns,
            rows,
            stopped,
            elapsed_ms: value["elapsedMs"].as_u64()?,
        })
    }
}

/// `GET /qprof/v1/sql?q=…`, with the header [`crate::access::WORK_HEADER`] (the
/// CSRF rule: [`crate::access::check_work_request`]).
pub(crate) async fn get_sql(
    State(runner): State<Arc<dyn SqlRunner>>,
    audience: Option<axum::Extension<Audience>>,
    headers: HeaderMap,
    params: Result<Query<Vec<(String, String)>>, axum::extract::rejection::QueryRejection>,
) -> Response {
    if let Err(refused) = crate::access::check_work_request(&headers, false) {
        return refused.into_response();
    }
    let sql = match params {
        Ok(Query(params)) => statement(
            params
                .iter()
                .find(|(k, _)| k == "q")
                .map(|(_, v)| v.as_str()),
        ),
        Err(e) => Err(ApiError::BadRequest(e.body_text())),
    };
    answer(
        runner,
        audience.map(|axum::Extension(a)| a).unwrap_or_default(),
        sql,
    )
    .await
}

/// `POST /qprof/v1/sql` with `{"sql": "…"}` (as `application/json`), or the statement as
/// the body with the header [`crate::access::WORK_HEADER`].
pub(crate) async fn post_sql(
    State(runner): State<Arc<dyn SqlRunner>>,
    audience: Option<axum::Extension<Audience>>,
    headers: HeaderMap,
    body: String,
) -> Response {
    let parsed = serde_json::from_str::<Value>(&body);
    let json_body = matches!(parsed, Ok(Value::Object(_)));
    if let Err(refused) = crate::access::check_work_request(&headers, json_body) {
        return refused.into_response();
    }
    let sql = match parsed {
        Ok(Value::Object(object)) => match object.get("sql") {
            Some(Value::String(sql)) => statement(Some(sql)),
            _ => Err(ApiError::BadRequest(
                "a JSON body names the statement as {\"sql\": \"SELECT …\"}".into(),
            )),
        },
        _ => statement(Some(&body)),
    };
    answer(
        runner,
        audience.map(|axum::Extension(a)| a).unwrap_or_default(),
        sql,
    )
    .await
}
