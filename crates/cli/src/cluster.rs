//! `qprof cluster scheduler|executor`: Ballista processes with qprof inside, and TPC-H
//! runs and SQL on them (`qprof run --cluster`, `qprof sql --cluster`).
//!
//! The event log is written where the scheduler lives: only the scheduler sees every
//! task, every executor and every heartbeat (and the loss of an executor), and it keeps
//! them while a client comes and goes. Each client session is one application there.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use clap::{Args, Subcommand};
use qprof_ballista::ClusterObserver;
use qprof_ballista::cluster::{
    ExecutorOptions, SchedulerOptions, end_session, failed_for_a_lost_executor, remote_session,
    run_executor, run_scheduler,
};
use qprof_core::events::Listener;
use qprof_datafusion::Profiler;
use qprof_eventlog::EventLogListener;
use qprof_eventlog::{DEFAULT_ROLL_BYTES, LogConfig};
use qprof_eventlog::{FORMAT_VERSION, ProfilesDocument, ServedProfile};

use crate::cli::{ExecOptions, QueryList, RunArgs, SqlArgs, data_dir, parse_duration};
use crate::cluster_profiles::ProfileClient;
use crate::data::{TableSpec, parse_size, register_tables, split_statements};
use crate::run::prepare_tpch;

/// `qprof cluster …`
#[derive(Debug, Subcommand)]
pub(crate) enum ClusterCommand {
    /// Run a Ballista scheduler that writes each client session's event log.
    Scheduler(SchedulerArgs),
    /// Run a Ballista executor whose tasks qprof measures.
    Executor(ExecutorArgs),
}

#[derive(Debug, Args)]
pub(crate) struct SchedulerArgs {
    /// Address to listen on for executors and clients (gRPC).
    #[arg(long, default_value = "127.0.0.1:50050", value_name = "ADDR")]
    pub bind: SocketAddr,
    /// Directory for the event logs (one application per client session).
    #[arg(long, value_name = "DIR", default_value = "qprof-events")]
    pub event_log_dir: std::path::PathBuf,
    /// Compress event logs with zstd.
    #[arg(long)]
    pub event_log_compress: bool,
    /// How long an executor may go without a heartbeat before it counts as lost, e.g. 15s.
    #[arg(long, value_name = "DURATION", default_value = "15s", value_parser = parse_duration)]
    pub executor_timeout: std::time::Duration,
    /// Run Ballista's own scheduler, without qprof (and no event log): to tell
    /// Ballista's behaviour from qprof's.
    #[arg(long, conflicts_with_all = ["otlp_endpoint", "otlp_protocol"])]
    pub without_qprof: bool,
    #[command(flatten)]
    pub otlp: crate::otlp::OtlpOptions,
}

#[derive(Debug, Args)]
pub(crate) struct ExecutorArgs {
    /// The scheduler's address.
    #[arg(long, value_name = "HOST:PORT", default_value = "127.0.0.1:50050")]
    pub scheduler: SocketAddr,
    /// Host to bind to and be reached by.
    #[arg(long, default_value = "127.0.0.1", value_name = "HOST")]
    pub host: String,
    /// Arrow Flight port other executors fetch shuffle data from.
    #[arg(long, default_value_t = 50051)]
    pub flight_port: u16,
    /// gRPC port the scheduler sends tasks to.
    #[arg(long, default_value_t = 50052)]
    pub grpc_port: u16,
    /// The executor's id (default: a new one).
    #[arg(long, value_name = "ID")]
    pub id: Option<String>,
    /// Task slots (default: the number of cores).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..=1024))]
    pub vcores: Option<u16>,
    /// Directory for shuffle files (default: a new temporary directory).
    #[arg(long, value_name = "DIR")]
    pub work_dir: Option<std::path::PathBuf>,
    /// Memory pool per task, e.g. 2G (default: unbounded).
    #[arg(long, value_name = "SIZE", value_parser = parse_size)]
    pub memory_limit: Option<usize>,
    /// Seconds between heartbeats to the scheduler.
    #[arg(long, value_name = "DURATION", default_value = "1s", value_parser = parse_duration)]
    pub heartbeat: std::time::Duration,
    /// Run Ballista's own executor, without qprof: to tell Ballista's behaviour from
    /// qprof's.
    #[arg(long)]
    pub without_qprof: bool,
}

pub(crate) async fn dispatch(command: ClusterCommand) -> Result<()> {
    match command {
        ClusterCommand::Scheduler(args) => scheduler(args).await,
        ClusterCommand::Executor(args) => executor(args).await,
    }
}

/// The warning a scheduler or executor prints when it listens beyond this machine:
/// Ballista authenticates no one, and runs whatever plan it is sent.
fn exposed_warning(role: &str, address: &str) -> String {
    format!(
        "warning: the {role} listens on {address}, beyond this machine: anyone who reaches it can run plans that read and write files with this process's rights (Ballista authenticates no one); keep its ports on a private network (see \"Running it for a team\" in the guide)"
    )
}

/// Whether `host` names this machine's loopback interface only.
fn is_loopback_host(host: &str) -> bool {
    host.eq_ignore_ascii_case("localhost")
        || host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

async fn scheduler(args: SchedulerArgs) -> Result<()> {
    crate::cli::check_dir(&args.event_log_dir)?;
    std::fs::create_dir_all(&args.event_log_dir).with_context(|| {
        format!(
            "cannot create the event log directory '{}'",
            args.event_log_dir.display()
        )
    })?;
    let config = LogConfig {
        dir: args.event_log_dir.clone(),
        zstd: args.event_log_compress,
        roll_bytes: DEFAULT_ROLL_BYTES,
    };
    // one exporter for every client session's queries
    let traces = args.otlp.listener()?;
    let observer = ClusterObserver::new(Arc::new(move |_app| {
        let mut listeners =
            vec![Arc::new(EventLogListener::new(config.clone())) as Arc<dyn Listener>];
        if let Some(traces) = &traces {
            listeners.push(Arc::new(traces.sibling()));
        }
        listeners
    }));
    let listener = tokio::net::TcpListener::bind(args.bind)
        .await
        .with_context(|| format!("cannot listen on {}", args.bind))?;
    let bound = listener.local_addr()?;
    if !bound.ip().is_loopback() {
        eprintln!("{}", exposed_warning("scheduler", &bound.to_string()));
    }
    let options = SchedulerOptions {
        external_host: bound.ip().to_string(),
        executor_timeout_seconds: args.executor_timeout.as_secs().max(1),
        routes: crate::cluster_profiles::routes(Arc::clone(observer.profiles())),
    };
    println!(
        "scheduler listening on df://{bound}; event logs in {}",
        args.event_log_dir.display()
    );
    // executors joining and leaving, said as they do
    let mut members = observer.executors();
    let membership = tokio::spawn(async move {
        let mut known: Vec<String> = Vec::new();
        while members.changed().await.is_ok() {
            let now = members.borrow_and_update().clone();
            for id in now.iter().filter(|id| !known.contains(id)) {
                println!("executor {id} joined");
            }
            for id in known.iter().filter(|id| !now.contains(id)) {
                println!("executor {id} left");
            }
            known = now;
        }
    });
    let failures = Arc::clone(&observer);
    let reporter = tokio::spawn(async move {
        loop {
            tokio::time::sleep(std::time::Duration::from_secs(1)).await;
            for (session, failure) in failures.take_listener_failures() {
                eprintln!("error: cannot write the event log of session {session}: {failure}");
            }
        }
    });
    let observed = (!args.without_qprof).then(|| Arc::clone(&observer));
    let outcome = tokio::select! {
        served = run_scheduler(listener, observed, &options) => {
            served.context("the scheduler stopped")
        }
        _ = shutdown_signal() => Ok(()),
    };
    reporter.abort();
    membership.abort();
    // applications still open end with the scheduler
    observer.finish_all(i32::from(outcome.is_err()));
    outcome
}

async fn executor(args: ExecutorArgs) -> Result<()> {
    if let Some(dir) = &args.work_dir
        && !dir.is_dir()
    {
        bail!("work dir '{}' is not a directory", dir.display());
    }
    let vcores = args.vcores.map_or_else(
        || std::thread::available_parallelism().map_or(1, usize::from),
        usize::from,
    );
    let options = ExecutorOptions {
        scheduler: args.scheduler,
        executor_id: args.id.clone(),
        host: args.host.clone(),
        flight_port: args.flight_port,
        grpc_port: args.grpc_port,
        vcores,
        work_dir: args.work_dir.as_ref().map(|d| d.display().to_string()),
        memory_pool_bytes: args.memory_limit.map(|b| b as u64),
        heartbeat_seconds: args.heartbeat.as_secs().max(1),
    };
    if !is_loopback_host(&args.host) {
        eprintln!(
            "{}",
            exposed_warning(
                "executor",
                &format!(
                    "{} (ports {} and {})",
                    args.host, args.flight_port, args.grpc_port
                )
            )
        );
    }
    println!(
        "executor {} on {}:{} with {vcores} task slots, scheduler {}",
        args.id.as_deref().unwrap_or("(new id)"),
        args.host,
        args.flight_port,
        args.scheduler
    );
    // Ballista's executor waits for an unreachable scheduler without a word: give it a
    // while to start, then say so
    let scheduler = options.scheduler.to_string();
    reach_scheduler(&scheduler, &scheduler, SCHEDULER_PATIENCE).await?;
    run_executor(&options, (!args.without_qprof).then(Profiler::new))
        .await
        .context("the executor stopped")
}

/// How long an executor waits for its scheduler to accept connections when it starts.
const SCHEDULER_PATIENCE: Duration = Duration::from_secs(30);

/// Waits up to `patience` for the scheduler at `address` (HOST:PORT), shown as `shown`,
/// to accept a connection.
async fn reach_scheduler(address: &str, shown: &str, patience: Duration) -> Result<()> {
    const ANSWER_WITHIN: Duration = Duration::from_secs(10);
    let deadline = Instant::now() + patience;
    loop {
        match tokio::time::timeout(ANSWER_WITHIN, tokio::net::TcpStream::connect(address)).await {
            Ok(Ok(_)) => return Ok(()),
            Ok(Err(e)) if Instant::now() >= deadline => {
                bail!("cannot reach the scheduler at {shown}: {e}")
            }
            Ok(Err(_)) => tokio::time::sleep(Duration::from_millis(200)).await,
            Err(_) => bail!(
                "cannot reach the scheduler at {shown}: no answer in {} s",
                ANSWER_WITHIN.as_secs()
            ),
        }
    }
}

/// Whether `error`, a job's failure, is a broken connection to the scheduler and the
/// scheduler at `url` no longer accepts connections (the failure then says so, rather
/// than what the broken connection left). A scheduler that just died may still accept
/// for a moment while its process ends: it is asked again for up to five seconds.
async fn scheduler_gone(url: &str, error: &datafusion::error::DataFusionError) -> bool {
    let text = error.to_string().to_lowercase();
    let broken = [
        "transport error",
        "h2 protocol error",
        "broken pipe",
        "connection reset",
    ]
    .iter()
    .any(|sign| text.contains(sign));
    if !broken {
        return false;
    }
    let address = url.strip_prefix("df://").unwrap_or(url);
    for _ in 0..50 {
        if reach_scheduler(address, url, Duration::ZERO).await.is_err() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    false
}

/// Ctrl-C or SIGTERM.
async fn shutdown_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut term =
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(term) => term,
                Err(_) => {
                    let _ = ctrl_c.await;
                    return;
                }
            };
        tokio::select! {
            _ = ctrl_c => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    {
        let _ = ctrl_c.await;
    }
}

/// Checks a `df://HOST:PORT` URL.
pub(crate) fn parse_cluster_url(s: &str) -> Result<String, String> {
    let usage = "(e.g. df://127.0.0.1:50050)";
    let Some(rest) = s.strip_prefix("df://") else {
        return Err(format!("'{s}' is not a df:// URL {usage}"));
    };
    match rest.rsplit_once(':') {
        Some((host, port)) if !host.is_empty() && port.parse::<u16>().is_ok() => Ok(s.to_string()),
        _ => Err(format!("'{s}' names no HOST:PORT {usage}")),
    }
}

/// `qprof run --tpch SF --cluster URL`: the queries as jobs of one client session, whose
/// profiles the scheduler logs.
pub(crate) async fn run_tpch(args: RunArgs, url: &str) -> Result<()> {
    // the executors read the files by these paths, from their own working directories
    let dir = std::path::absolute(data_dir(args.data_dir.as_ref(), &args.tpch))
        .context("cannot resolve the data directory")?;
    let paths = prepare_tpch(&args.tpch, &dir)?;
    crate::run::check_output_dirs(&args.exec)?;
    let parent = crate::otlp::trace_parent()?;
    let ctx = client_session(url, &args.exec).await?;
    qprof_tpch::register_all(&ctx, &paths)
        .await
        .context("cannot register TPC-H tables")?;
    let session_id = ctx.session_id();
    let mut profiles = Profiles::new(url, &session_id, args.exec.top)?;
    let mut failed = Vec::new();
    let mut total_rows = 0_usize;
    let run_start = Instant::now();
    for q in QueryList::or_all(args.queries.as_ref()) {
        let sql = qprof_tpch::query(q).with_context(|| format!("no TPC-H query {q}"))?;
        let start = Instant::now();
        let (outcome, run) = run_job(&ctx, &format!("q{q}"), sql, parent).await;
        match outcome {
            Ok(batches) => {
                let rows: usize = batches.iter().map(|b| b.num_rows()).sum();
                total_rows += rows;
                println!(
                    "q{q:<3} {rows:>8} rows {:>10.1} ms",
                    crate::run::millis(start.elapsed())
                );
                profiles.print(&run).await;
            }
            Err(e) if scheduler_gone(url, &e).await => {
                bail!("TPC-H query {q}: the scheduler at {url} stopped answering");
            }
            Err(e) => {
                let line = qprof_datafusion::error_line(&e);
                eprintln!("error: TPC-H query {q}: {line}");
                profiles.keep(&run).await;
                failed.push(q);
            }
        }
    }
    println!(
        "{total_rows} rows in {:.1} ms on {url} (session {session_id})",
        crate::run::millis(run_start.elapsed())
    );
    let ended = end_session(url, &session_id)
        .await
        .context("cannot end the session on the scheduler");
    profiles.summarize(&args.exec)?;
    ended?;
    println!("the scheduler writes this run's event log (application of session {session_id})");
    if !failed.is_empty() {
        bail!("{} of the queries failed: {failed:?}", failed.len());
    }
    Ok(())
}

/// A client session on the scheduler at `url`, with the partitions per stage and the
/// function tracking `exec` asks for.
async fn client_session(
    url: &str,
    exec: &ExecOptions,
) -> Result<datafusion::prelude::SessionContext> {
    // Ballista's client connects with the first query and reports a refused connection as
    // a debug dump: reach the scheduler first, to say so on one line
    let address = url.strip_prefix("df://").unwrap_or(url);
    reach_scheduler(address, url, Duration::ZERO).await?;
    // with qprof's options (the function-tracking flags), which statements may also set:
    // the scheduler plans by them
    let config = crate::run::session_config(exec.partitions, &exec.functions, None)?;
    remote_session(url, config)
        .await
        .map_err(|e| anyhow::anyhow!("{}", qprof_datafusion::error_line(&e)))
        .with_context(|| format!("cannot open a session on {url}"))
}

/// `qprof sql --cluster URL`: the statements as jobs of one client session, in order, each
/// result printed; the scheduler logs their profiles. A failing statement among several
/// is shown on one line and the others still run; the command then fails.
pub(crate) async fn run_sql(args: SqlArgs, url: &str) -> Result<()> {
    let statements = split_statements(&crate::run::sql_text(&args)?)?;
    // the executors read local files by these paths, from their own working directories
    let tables = args
        .tables
        .iter()
        .map(|t| {
            let local = !t.location.contains("://");
            let location = if local {
                std::path::absolute(&t.location)
                    .with_context(|| format!("cannot resolve '{}'", t.location))?
                    .display()
                    .to_string()
            } else {
                t.location.clone()
            };
            Ok(TableSpec {
                name: t.name.clone(),
                location,
            })
        })
        .collect::<Result<Vec<_>>>()?;
    crate::run::check_output_dirs(&args.exec)?;
    let parent = crate::otlp::trace_parent()?;
    let ctx = client_session(url, &args.exec).await?;
    register_tables(&ctx, &tables, args.format).await?;
    let session_id = ctx.session_id();
    let mut profiles = Profiles::new(url, &session_id, args.exec.top)?;
    let several = statements.len() > 1;
    let mut failed = Vec::new();
    for (i, sql) in statements.iter().enumerate() {
        let label = format!("statement {}", i + 1);
        let start = Instant::now();
        let (outcome, run) = run_job(&ctx, &label, sql, parent).await;
        match outcome {
            Ok(batches) => {
                let pretty = datafusion::arrow::util::pretty::pretty_format_batches(&batches)
                    .context("cannot format the result")?;
                println!("{pretty}");
                println!(
                    "{label}: {} rows in {:.1} ms",
                    batches.iter().map(|b| b.num_rows()).sum::<usize>(),
                    crate::run::millis(start.elapsed())
                );
                profiles.print(&run).await;
            }
            Err(e) if scheduler_gone(url, &e).await => {
                bail!("{label}: the scheduler at {url} stopped answering");
            }
            Err(e) if !several => {
                let _ = end_session(url, &session_id).await;
                bail!("{}", qprof_datafusion::error_line(&e));
            }
            Err(e) => {
                eprintln!("{label} failed: {}", qprof_datafusion::error_line(&e));
                profiles.keep(&run).await;
                failed.push(label);
            }
        }
    }
    let ended = end_session(url, &session_id)
        .await
        .context("cannot end the session on the scheduler");
    profiles.summarize(&args.exec)?;
    ended?;
    println!("the scheduler writes this run's event log (application of session {session_id})");
    match failed.as_slice() {
        [] => Ok(()),
        [one] => bail!("{one} failed"),
        several => bail!(
            "{} statements failed: {}",
            several.len(),
            several.join(", ")
        ),
    }
}

/// Times a query is run again when an executor's loss fails it.
const RUNS_AFTER_A_LOSS: usize = 2;

/// Runs `sql` in the client session `ctx` as the job called `name`; its batches, and the
/// id its last run was sent with (the scheduler serves its profile under it). A query
/// (not a statement that writes) failed by the loss of an executor runs again on the
/// executors left (each loss said on stderr), up to [`RUNS_AFTER_A_LOSS`] times. The
/// scheduler's trace of the job is a child of `parent`, if given.
async fn run_job(
    ctx: &datafusion::prelude::SessionContext,
    name: &str,
    sql: &str,
    parent: Option<qprof_core::trace_parent::TraceParent>,
) -> (
    datafusion::error::Result<Vec<datafusion::arrow::array::RecordBatch>>,
    String,
) {
    static RUNS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let mut id = String::new();
    let outcome = async {
        ctx.sql(&format!(
            "SET ballista.job.name = '{}'",
            name.replace('\'', "''")
        ))
        .await?
        .collect()
        .await?;
        let mut runs = 0;
        loop {
            // the scheduler receives a plan: the SQL text goes with it for the job's
            // profile, and an id of this run, by which the client asks for the profile
            id = format!(
                "{name}#{}",
                RUNS.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
            );
            {
                let state = ctx.state_ref();
                let mut state = state.write();
                if let Some(options) = state
                    .config_mut()
                    .options_mut()
                    .extensions
                    .get_mut::<qprof_datafusion::QprofOptions>()
                {
                    options.query_text = sql.trim().to_string();
                    options.query_id.clone_from(&id);
                    options.query_traceparent = parent.map(|p| p.to_string()).unwrap_or_default();
                }
            }
            let frame = ctx.sql(sql).await?;
            // a statement that writes may have written part of its output: never run twice
            let writes = matches!(
                frame.logical_plan(),
                datafusion::logical_expr::LogicalPlan::Dml(_)
                    | datafusion::logical_expr::LogicalPlan::Copy(_)
            );
            match frame.collect().await {
                Err(e) if !writes && runs < RUNS_AFTER_A_LOSS && failed_for_a_lost_executor(&e) => {
                    runs += 1;
                    eprintln!(
                        "{name}: {}; running it again",
                        qprof_datafusion::error_line(&e)
                    );
                }
                outcome => return outcome,
            }
        }
    }
    .await;
    (outcome, id)
}

/// The profiles of a cluster client's jobs, fetched from the scheduler as each job ends.
struct Profiles {
    client: ProfileClient,
    document: ProfilesDocument,
}

impl Profiles {
    fn new(url: &str, session: &str, top: usize) -> Result<Profiles> {
        Ok(Profiles {
            client: ProfileClient::new(url, session, top)?,
            document: ProfilesDocument {
                format_version: FORMAT_VERSION,
                queries: Vec::new(),
            },
        })
    }

    /// Prints the profile of the job run under `job` as one process prints a query's, and
    /// keeps it; a profile the scheduler does not give is said on one line (none is said
    /// for a statement that ran no job).
    async fn print(&mut self, job: &str) {
        if let Some(served) = self.fetch(job).await {
            println!("{}", served.text);
            self.document.queries.push(served.query);
        }
    }

    /// Keeps the profile of the job run under `job` (one that failed) without printing it.
    async fn keep(&mut self, job: &str) {
        if let Some(served) = self.fetch(job).await {
            self.document.queries.push(served.query);
        }
    }

    async fn fetch(&self, job: &str) -> Option<ServedProfile> {
        match self.client.fetch(job).await {
            Ok(Some(served)) => Some(served),
            Ok(None) => None,
            Err(e) => {
                let name = job.rsplit_once('#').map_or(job, |(name, _)| name);
                eprintln!("{name}: no profile: {e:#}");
                None
            }
        }
    }

    /// The run's totals, and `--profile-out` and `--trace-out` written.
    fn summarize(&self, exec: &ExecOptions) -> Result<()> {
        crate::run::summarize_document(&self.document, exec)
    }
}
