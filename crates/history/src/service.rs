//! The history as a read-only SQL service, within limits: what answers the history
//! server's `/qprof/v1/sql`.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use datafusion::arrow::array::{Array, ArrayRef};
use datafusion::arrow::datatypes::DataType;
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::arrow::util::display::{ArrayFormatter, FormatOptions};
use datafusion::execution::disk_manager::{DiskManagerBuilder, DiskManagerMode};
use datafusion::execution::runtime_env::RuntimeEnvBuilder;
use datafusion::prelude::{SQLOptions, SessionConfig, SessionContext};
use futures::StreamExt;
use qprof_server::sql::{SqlAnswer, SqlColumn, SqlError, SqlRunner, SqlStop};
use qprof_server::{Audience, LogStore};
use serde_json::Value;
use tokio::sync::Semaphore;

use crate::{HistoryError, register_store};

/// How far one statement may go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SqlLimits {
    /// The most rows an answer holds; a statement with more is stopped there.
    pub max_rows: usize,
    /// The longest a statement runs; one still running then is stopped, with the rows
    /// it gave so far.
    pub timeout: Duration,
    /// The memory the statements' operators may reserve, together.
    pub memory_bytes: usize,
    /// The most bytes of rows an answer holds, as JSON sent; a statement with more is
    /// stopped at the row that reaches it.
    pub max_bytes: usize,
    /// How many statements run at once; the others wait their turn, within their time.
    pub concurrent: usize,
}

impl Default for SqlLimits {
    /// 10,000 rows, 30 seconds, 512 MiB of operators' memory, 16 MiB of answer, two
    /// statements at once.
    fn default() -> SqlLimits {
        SqlLimits {
            max_rows: 10_000,
            timeout: Duration::from_secs(30),
            memory_bytes: 512 << 20,
            max_bytes: 16 << 20,
            concurrent: 2,
        }
    }
}

/// Read-only SQL over one log store's history: queries only (no DDL, no writes, no
/// `SET`), each within [`SqlLimits`].
#[derive(Clone)]
pub struct SqlService {
    ctx: SessionContext,
    limits: SqlLimits,
    turns: Arc<Semaphore>,
    waiting: Arc<AtomicUsize>,
}

impl std::fmt::Debug for SqlService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqlService")
            .field("limits", &self.limits)
            .finish()
    }
}

impl SqlService {
    /// A service over `store`'s history, in a session of its own whose memory is
    /// bounded by `limits`.
    ///
    /// # Errors
    /// If the session cannot be built.
    pub fn new(store: Arc<LogStore>, limits: SqlLimits) -> Result<SqlService, HistoryError> {
        SqlService::spilling_in(store, limits, None)
    }

    /// A service as [`SqlService::new`], whose statements spill to `spill_dir` (by default
    /// a directory of the system's temporary one), at most twice their memory
    /// ([`SqlLimits::memory_bytes`]) together; a spill file is removed when its statement
    /// no longer needs it.
    ///
    /// # Errors
    /// If the session cannot be built.
    pub fn spilling_in(
        store: Arc<LogStore>,
        limits: SqlLimits,
        spill_dir: Option<std::path::PathBuf>,
    ) -> Result<SqlService, HistoryError> {
        let mode = match spill_dir {
            Some(dir) => DiskManagerMode::Directories(vec![dir]),
            None => DiskManagerMode::OsTmpDirectory,
        };
        let spill = DiskManagerBuilder::default()
            .with_mode(mode)
            .with_max_temp_directory_size(2 * limits.memory_bytes as u64);
        let runtime = RuntimeEnvBuilder::new()
            .with_memory_limit(limits.memory_bytes, 1.0)
            .with_disk_manager_builder(spill)
            .build_arc()
            .map_err(|e| HistoryError::Catalog(e.to_string()))?;
        let ctx = SessionContext::new_with_config_rt(SessionConfig::new(), runtime);
        register_store(&ctx, store)?;
        Ok(SqlService {
            ctx,
            limits,
            turns: Arc::new(Semaphore::new(limits.concurrent.max(1))),
            waiting: Arc::new(AtomicUsize::new(0)),
        })
    }

    /// The statements running now.
    pub fn running(&self) -> usize {
        self.limits.concurrent.max(1) - self.turns.available_permits()
    }

    /// The statements waiting for their turn now.
    pub fn waiting(&self) -> usize {
        self.waiting.load(Ordering::SeqCst)
    }

    /// The answer to `sql`, stopped at the limits.
    ///
    /// # Errors
    /// [`SqlError::Rejected`] for a statement that does not parse or plan, or that is not
    /// a query; [`SqlError::Failed`] if it fails while it runs.
    pub async fn answer(&self, sql: &str) -> Result<SqlAnswer, SqlError> {
        self.answer_for(sql, Audience::everyone()).await
    }

    /// The answer to `sql` over the applications `audience` may view (the tables hold no
    /// row of any other), stopped at the limits.
    ///
    /// # Errors
    /// As [`SqlService::answer`].
    pub async fn answer_for(&self, sql: &str, audience: Audience) -> Result<SqlAnswer, SqlError> {
        let started = Instant::now();
        let deadline = tokio::time::Instant::now() + self.limits.timeout;
        let stopped = || SqlAnswer {
            columns: Vec::new(),
            rows: Vec::new(),
            stopped: Some(SqlStop::Time(started.elapsed().as_millis() as u64)),
            elapsed_ms: started.elapsed().as_millis() as u64,
        };
        // waiting for a turn counts against the statement's time
        let waiting = Waiting::count(&self.waiting);
        let turn = tokio::time::timeout_at(deadline, self.turns.acquire()).await;
        drop(waiting);
        let Ok(turn) = turn else {
            return Ok(stopped());
        };
        let _turn = turn.map_err(|e| SqlError::Failed(one_line(e)))?;
        // the statement's session: the service's, knowing who asks
        let mut state = self.ctx.state();
        state.config_mut().set_extension(Arc::new(audience));
        let ctx = SessionContext::new_with_state(state);
        answer(&ctx, self.limits, sql, started, deadline).await
    }
}

impl SqlRunner for SqlService {
    fn run(
        &self,
        sql: String,
        audience: Audience,
    ) -> Pin<Box<dyn Future<Output = Result<SqlAnswer, SqlError>> + Send>> {
        let this = self.clone();
        Box::pin(async move { this.answer_for(&sql, audience).await })
    }
}

/// One statement counted as waiting for its turn while this lives (a statement dropped
/// while it waits is uncounted too).
struct Waiting<'a>(&'a AtomicUsize);

impl<'a> Waiting<'a> {
    fn count(waiting: &'a AtomicUsize) -> Waiting<'a> {
        waiting.fetch_add(1, Ordering::SeqCst);
        Waiting(waiting)
    }
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// An error's text on one line.
fn one_line(e: impl std::fmt::Display) -> String {
    e.to_string()
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}

async fn answer(
    ctx: &SessionContext,
    limits: SqlLimits,
    sql: &str,
    started: Instant,
    deadline: tokio::time::Instant,
) -> Result<SqlAnswer, SqlError> {
    let elapsed = || started.elapsed().as_millis() as u64;
    let out_of_time = |columns| SqlAnswer {
        columns,
        rows: Vec::new(),
        stopped: Some(SqlStop::Time(elapsed())),
        elapsed_ms: elapsed(),
    };
    let read_only = SQLOptions::new()
        .with_allow_ddl(false)
        .with_allow_dml(false)
        .with_allow_statements(false);
    // planning (which may list the log directory) counts against the time too
    let Ok(planned) = tokio::time::timeout_at(deadline, ctx.sql_with_options(sql, read_only)).await
    else {
        return Ok(out_of_time(Vec::new()));
    };
    let frame = planned.map_err(|e| SqlError::Rejected(one_line(e)))?;
    let columns = frame
        .schema()
        .fields()
        .iter()
        .map(|f| SqlColumn {
            name: f.name().clone(),
            data_type: f.data_type().to_string(),
        })
        .collect();
    let Ok(started_stream) = tokio::time::timeout_at(deadline, frame.execute_stream()).await else {
        return Ok(out_of_time(columns));
    };
    let mut stream = started_stream.map_err(|e| SqlError::Failed(one_line(e)))?;
    let mut rows = Vec::new();
    let mut bytes = 0;
    let mut stopped = None;
    loop {
        match tokio::time::timeout_at(deadline, stream.next()).await {
            Err(_) => {
                stopped = Some(SqlStop::Time(elapsed()));
                break;
            }
            Ok(None) => break,
            Ok(Some(Err(e))) => return Err(SqlError::Failed(one_line(e))),
            Ok(Some(Ok(batch))) => {
                let room = limits.max_rows - rows.len();
                let appended = append_rows(&batch, room, limits.max_bytes, &mut bytes, &mut rows)
                    .map_err(SqlError::Failed)?;
                if bytes > limits.max_bytes {
                    stopped = Some(SqlStop::Bytes(limits.max_bytes));
                    break;
                }
                if appended < batch.num_rows() {
                    stopped = Some(SqlStop::Rows(limits.max_rows));
                    break;
                }
            }
        }
    }
    // dropping the stream stops the statement's tasks
    drop(stream);
    Ok(SqlAnswer {
        columns,
        rows,
        stopped,
        elapsed_ms: elapsed(),
    })
}

/// Appends up to `room` of `batch`'s rows to `rows`, as JSON values, adding their text's
/// size to `bytes` and stopping before the row that takes it past `max_bytes` (which is
/// left counted); how many rows it appended.
fn append_rows(
    batch: &RecordBatch,
    room: usize,
    max_bytes: usize,
    bytes: &mut usize,
    rows: &mut Vec<Vec<Value>>,
) -> Result<usize, String> {
    let options = FormatOptions::default();
    let formatters = batch
        .columns()
        .iter()
        .map(|c| ArrayFormatter::try_new(c.as_ref(), &options).map_err(one_line))
        .collect::<Result<Vec<_>, _>>()?;
    for row in 0..batch.num_rows().min(room) {
        let values: Vec<Value> = batch
            .columns()
            .iter()
            .zip(&formatters)
            .map(|(column, text)| json_value(column, text, row))
            .collect();
        // the bytes the row takes in the answer sent: its JSON, escapes and all, and a comma
        *bytes += serde_json::to_string(&values).map_or(0, |t| t.len()) + 1;
        if *bytes > max_bytes {
            return Ok(row);
        }
        rows.push(values);
    }
    Ok(batch.num_rows().min(room))
}

/// `column`'s value at `row`: a number or boolean as such, null as null, anything else
/// as its display text.
fn json_value(column: &ArrayRef, text: &ArrayFormatter<'_>, row: usize) -> Value {
    if column.is_null(row) {
        return Value::Null;
    }
    let shown = text.value(row).to_string();
    match column.data_type() {
        DataType::Int8
        | DataType::Int16
        | DataType::Int32
        | DataType::Int64
        | DataType::UInt8
        | DataType::UInt16
        | DataType::UInt32
        | DataType::UInt64 => match shown.parse::<i128>() {
            // beyond 2^53 a JSON reader's double would round it: those go as text
            Ok(n) if n.unsigned_abs() <= 1 << 53 => Value::Number((n as i64).into()),
            _ => Value::String(shown),
        },
        DataType::Float16 | DataType::Float32 | DataType::Float64 => shown
            .parse::<f64>()
            .ok()
            .and_then(serde_json::Number::from_f64)
            .map_or(Value::String(shown), Value::Number),
        DataType::Boolean => Value::Bool(shown == "true"),
        _ => Value::String(shown),
    }
}
