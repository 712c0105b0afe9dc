//! A [`SqlRunner`] that runs statements in a worker process of the program's own, so that
//! nothing a statement computes can take the server down: the worker has a memory limit
//! of its own, and a statement that would go past it ends the worker, not the server. The
//! statements it was running fail with an error naming the limit; the next statement
//! starts a new worker. A worker that keeps a statement past its time (plus a grace) is
//! killed.
//!
//! The worker reads one request a line on its standard input and writes one reply a line
//! on its standard output ([`worker_request`], [`worker_reply`], in this module's JSON).

use std::collections::HashMap;
use std::ffi::OsString;
use std::future::Future;
use std::io::{BufRead, Write};
use std::path::PathBuf;
use std::pin::Pin;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::oneshot;

use crate::acl::Audience;
use crate::sql::{SqlAnswer, SqlError, SqlRunner, SqlStop};

/// How long past its own time limit a statement's reply may take before its worker is
/// killed.
const GRACE: Duration = Duration::from_secs(5);

/// How a worker process is started.
#[derive(Debug, Clone)]
pub struct WorkerCommand {
    /// The program.
    pub program: PathBuf,
    /// Its arguments.
    pub args: Vec<OsString>,
    /// The memory limit the worker puts on itself, bytes (named in the error of a
    /// statement that went past it).
    pub memory_limit_bytes: u64,
    /// A statement's time limit in the worker; its reply is awaited this long plus a grace.
    pub timeout: Duration,
    /// The worker's scratch directory (where its statements spill), emptied before each
    /// worker starts: what a worker that ended left there goes with it.
    pub scratch_dir: Option<PathBuf>,
}

type Reply = Result<SqlAnswer, SqlError>;

/// One running worker.
struct Worker {
    stdin: Mutex<ChildStdin>,
    child: Mutex<Child>,
    /// The statements sent and not answered yet, by id.
    pending: Mutex<HashMap<u64, oneshot::Sender<Reply>>>,
    alive: AtomicBool,
}

/// Runs statements in a worker process ([`WorkerCommand`]), started when the first
/// statement comes and again after a worker ended.
pub struct WorkerRunner {
    command: WorkerCommand,
    worker: Mutex<Option<Arc<Worker>>>,
    next_id: AtomicU64,
    started: AtomicU64,
}

impl std::fmt::Debug for WorkerRunner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WorkerRunner")
            .field("command", &self.command)
            .finish()
    }
}

/// The request line for statement `id`, over what `audience` may view.
pub fn worker_request(id: u64, sql: &str, audience: &Audience) -> String {
    json!({ "id": id, "sql": sql, "audience": audience.to_json() }).to_string()
}

/// The reply line for statement `id`.
pub fn worker_reply(id: u64, reply: &Result<SqlAnswer, SqlError>) -> String {
    match reply {
        Ok(answer) => json!({ "id": id, "answer": answer.to_json() }),
        Err(SqlError::Rejected(m)) => json!({ "id": id, "rejected": m }),
        Err(SqlError::Failed(m)) => json!({ "id": id, "failed": m }),
    }
    .to_string()
}

/// A request line read back: its id, statement and audience.
pub fn read_worker_request(line: &str) -> Option<(u64, String, Audience)> {
    let value: Value = serde_json::from_str(line).ok()?;
    Some((
        value["id"].as_u64()?,
        value["sql"].as_str()?.to_string(),
        Audience::from_json(&value["audience"])?,
    ))
}

/// A reply line read back.
fn read_reply(line: &str) -> Option<(u64, Reply)> {
    let value: Value = serde_json::from_str(line).ok()?;
    let id = value["id"].as_u64()?;
    let reply = if let Some(m) = value["rejected"].as_str() {
        Err(SqlError::Rejected(m.to_string()))
    } else if let Some(m) = value["failed"].as_str() {
        Err(SqlError::Failed(m.to_string()))
    } else {
        Ok(SqlAnswer::from_json(&value["answer"])?)
    };
    Some((id, reply))
}

/// Why a worker ended, as the statements it was running are told.
fn ended_because(status: Option<std::process::ExitStatus>, limit: u64) -> String {
    use std::os::unix::process::ExitStatusExt;
    let mib = limit >> 20;
    match status.and_then(|s| s.signal()) {
        // an allocation past the limit aborts; the kernel's OOM killer kills
        Some(libc::SIGABRT) | Some(libc::SIGKILL) => format!(
            "the statement was stopped: it needed more memory than the SQL worker's limit of {mib} MiB (--sql-memory and a margin)"
        ),
        Some(signal) => {
            format!("the SQL worker ended on signal {signal}; the statement was stopped")
        }
        None => match status.and_then(|s| s.code()) {
            Some(code) => {
                format!("the SQL worker exited with status {code}; the statement was stopped")
            }
            None => "the SQL worker ended; the statement was stopped".to_string(),
        },
    }
}

impl WorkerRunner {
    /// A runner that starts its workers with `command`.
    pub fn new(command: WorkerCommand) -> WorkerRunner {
        WorkerRunner {
            command,
            worker: Mutex::new(None),
            next_id: AtomicU64::new(1),
            started: AtomicU64::new(0),
        }
    }

    /// How many workers were started so far.
    pub fn workers_started(&self) -> u64 {
        self.started.load(Ordering::Relaxed)
    }

    /// The worker now running, started if there is none.
    fn worker(&self) -> Result<Arc<Worker>, SqlError> {
        let mut slot = self.worker.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(worker) = slot.as_ref().filter(|w| w.alive.load(Ordering::SeqCst)) {
            return Ok(Arc::clone(worker));
        }
        let worker = self.spawn()?;
        *slot = Some(Arc::clone(&worker));
        Ok(worker)
    }

    fn spawn(&self) -> Result<Arc<Worker>, SqlError> {
        if let Some(dir) = &self.command.scratch_dir {
            // a fresh directory: nothing a worker before left
            let _ = std::fs::remove_dir_all(dir);
            std::fs::create_dir_all(dir).map_err(|e| {
                SqlError::Failed(format!(
                    "cannot make the SQL worker's scratch directory: {e}"
                ))
            })?;
        }
        let mut child = Command::new(&self.command.program)
            .args(&self.command.args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|e| SqlError::Failed(format!("cannot start the SQL worker: {e}")))?;
        self.started.fetch_add(1, Ordering::Relaxed);
        let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
            let _ = child.kill();
            return Err(SqlError::Failed("cannot talk to the SQL worker".into()));
        };
        let worker = Arc::new(Worker {
            stdin: Mutex::new(stdin),
            child: Mutex::new(child),
            pending: Mutex::default(),
            alive: AtomicBool::new(true),
        });
        let limit = self.command.memory_limit_bytes;
        let reading = Arc::clone(&worker);
        std::thread::Builder::new()
            .name("qprof-sql-worker".into())
            .spawn(move || reading.read_replies(stdout, limit))
            .map_err(|e| SqlError::Failed(format!("cannot start the SQL worker's reader: {e}")))?;
        Ok(worker)
    }
}

impl Worker {
    /// Hands each reply on `stdout` to its statement; once the worker's output closed
    /// (it ended), fails the statements still waiting with why it ended.
    fn read_replies(&self, stdout: std::process::ChildStdout, limit: u64) {
        for line in std::io::BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            let Some((id, reply)) = read_reply(&line) else {
                continue;
            };
            let sender = self
                .pending
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .remove(&id);
            if let Some(sender) = sender {
                let _ = sender.send(reply);
            }
        }
        self.alive.store(false, Ordering::SeqCst);
        let status = self
            .child
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .wait()
            .ok();
        self.fail_pending(&ended_because(status, limit));
    }

    fn send(&self, line: &str) -> std::io::Result<()> {
        let mut stdin = self.stdin.lock().unwrap_or_else(|e| e.into_inner());
        stdin.write_all(line.as_bytes())?;
        stdin.write_all(b"\n")?;
        stdin.flush()
    }

    /// Ends the worker and tells the statements waiting why.
    fn kill(&self, reason: &str) {
        self.alive.store(false, Ordering::SeqCst);
        let _ = self.child.lock().unwrap_or_else(|e| e.into_inner()).kill();
        self.fail_pending(reason);
    }

    fn fail_pending(&self, reason: &str) {
        let pending: Vec<_> = self
            .pending
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .drain()
            .collect();
        for (_, sender) in pending {
            let _ = sender.send(Err(SqlError::Failed(reason.to_string())));
        }
    }
}

impl Drop for WorkerRunner {
    /// Ends the worker with its runner (a worker also ends on its own once its input
    /// closes).
    fn drop(&mut self) {
        let worker = self.worker.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(worker) = worker {
            worker.kill("the server stopped");
        }
    }
}

impl SqlRunner for WorkerRunner {
    fn run(&self, sql: String, audience: Audience) -> Pin<Box<dyn Future<Output = Reply> + Send>> {
        let worker = self.worker();
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let wait = self.command.timeout + GRACE;
        let limit = self.command.memory_limit_bytes;
        Box::pin(async move {
            let worker = worker?;
            let (sender, reply) = oneshot::channel();
            worker
                .pending
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .insert(id, sender);
            // a worker that ended since is not waited for: its reader failed the others
            if !worker.alive.load(Ordering::SeqCst) {
                worker.fail_pending(&ended_because(None, limit));
            }
            if let Err(e) = worker.send(&worker_request(id, &sql, &audience)) {
                worker.kill(&format!("the SQL worker is gone ({e}); try again"));
            }
            match tokio::time::timeout(wait, reply).await {
                Ok(Ok(reply)) => reply,
                // the reader fails every statement it leaves; a lost sender is the same
                Ok(Err(_)) => Err(SqlError::Failed(ended_because(None, limit))),
                Err(_) => {
                    worker.kill("the SQL worker kept a statement past its time and was stopped");
                    Ok(SqlAnswer {
                        columns: Vec::new(),
                        rows: Vec::new(),
                        stopped: Some(SqlStop::Time(wait.as_millis() as u64)),
                        elapsed_ms: wait.as_millis() as u64,
                    })
                }
            }
        })
    }
}
