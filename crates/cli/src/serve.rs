//! `qprof serve`: the history server over a log directory.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context, Result, bail};
use clap::Args;

use crate::cli::ServeArgs;
use crate::location::LogLocation;

/// The memory a SQL worker may use beyond `--sql-memory`: its runtime, its index of the
/// logs and the replays a statement reads.
const WORKER_MARGIN_BYTES: u64 = 1 << 30;

/// The replays a SQL worker keeps in memory.
const WORKER_CACHE_BYTES: u64 = 256 << 20;

/// `qprof serve`: the history server over a log directory, until interrupted.
pub(crate) async fn serve(args: ServeArgs) -> Result<()> {
    let dir: &Path = &args.log_dir;
    let defaults = qprof_server::store::StoreOptions::default();
    let options = qprof_server::store::StoreOptions {
        update_interval: args.update_interval,
        max_memory_bytes: args.max_memory as u64,
        replay_threads: args
            .replay_threads
            .map_or(defaults.replay_threads, usize::from),
        cleaner: qprof_server::store::CleanerOptions {
            max_age: args.cleaner_max_age,
            max_num: args.cleaner_max_num.map(|n| n as usize),
        },
        store_dir: args.store_dir.clone(),
        store_max_disk_bytes: args.store_max_disk as u64,
    };
    let location = LogLocation::of(dir, args.s3_endpoint.as_deref())?
        .with_max_log_bytes(args.max_log_bytes as u64);
    if let Some(store) = &args.store_dir {
        std::fs::create_dir_all(store)
            .with_context(|| format!("cannot create the store directory '{}'", store.display()))?;
    }
    let access = access_options(&args)?;
    let listener = tokio::net::TcpListener::bind((args.bind.as_str(), args.port))
        .await
        .with_context(|| format!("cannot listen on {}:{}", args.bind, args.port))?;
    // the scan (and its warnings) once the flags proved good, in the background: the
    // server answers at once, its listing filling in as the first scan ends
    let store = location.open_unscanned(options).await?;
    let store = Arc::new(store);
    let address = listener
        .local_addr()
        .context("cannot read the bound address")?;
    say(&format!(
        "qprof history server for '{}' at http://{address}/",
        dir.display()
    ));
    let scanned = Arc::clone(&store);
    tokio::task::spawn_blocking(move || {
        scanned.scan();
        let status = scanned.status();
        let skipped = match status.skipped.len() {
            0 => String::new(),
            1 => ", 1 entry skipped (see /qprof/v1/status)".to_string(),
            n => format!(", {n} entries skipped (see /qprof/v1/status)"),
        };
        say(&format!(
            "first scan: {} applications{skipped}",
            status.applications
        ));
        qprof_server::LogStore::spawn_scanner(&scanned);
    });
    let router = if args.no_sql {
        qprof_server::router(store)
    } else {
        let runner = qprof_server::sql_worker::WorkerRunner::new(worker_command(&args)?);
        qprof_server::router_with_sql(store, Arc::new(runner))
    };
    let router = qprof_server::guarded(router, access);
    axum::serve(listener, router)
        .await
        .context("the server stopped")
}

/// Prints `line` on stdout at once; a closed stdout is no reason to stop serving.
fn say(line: &str) {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}").and_then(|()| out.flush());
}

/// Who may reach the server, from the flags: the allowed hosts (by default the loopback
/// names when bound to a loopback address), the token, the proxy's user header.
fn access_options(args: &ServeArgs) -> Result<qprof_server::AccessOptions> {
    let token = match &args.auth_token_file {
        None => None,
        Some(file) => {
            let text = std::fs::read_to_string(file)
                .with_context(|| format!("cannot read the token file '{}'", file.display()))?;
            let token = text.lines().next().unwrap_or("").trim().to_string();
            if token.len() < 16 || !token.bytes().all(|b| b.is_ascii_graphic() && b != b';') {
                bail!(
                    "the token in '{}' must be one line of at least 16 printable characters (no ';')",
                    file.display()
                );
            }
            Some(token)
        }
    };
    if let Some(header) = &args.auth_user_header
        && axum::http::HeaderName::from_bytes(header.as_bytes()).is_err()
    {
        bail!("--auth-user-header: '{header}' is not a header name");
    }
    let allowed_hosts = if args.allowed_hosts.is_empty() {
        qprof_server::AccessOptions::default_hosts(&args.bind)
    } else {
        args.allowed_hosts.clone()
    };
    let names = |lists: &[String]| -> Vec<String> {
        lists
            .iter()
            .flat_map(|l| l.split(','))
            .map(str::trim)
            .filter(|n| !n.is_empty())
            .map(str::to_string)
            .collect()
    };
    let acls = args.acls.then(|| qprof_server::AclOptions {
        admins: names(&args.admin_acls),
        admin_groups: names(&args.admin_acls_groups),
    });
    Ok(qprof_server::AccessOptions {
        allowed_hosts,
        token,
        user_header: args.auth_user_header.clone(),
        groups_header: args.auth_groups_header.clone(),
        acls,
    })
}

/// How `qprof serve` starts its SQL worker: this program, `sql-worker`, the logs and the
/// limits of the flags.
fn worker_command(args: &ServeArgs) -> Result<qprof_server::sql_worker::WorkerCommand> {
    let program =
        std::env::current_exe().context("cannot find this program to start its SQL worker")?;
    let memory_limit = args.sql_memory as u64 + WORKER_MARGIN_BYTES;
    let mut worker: Vec<OsString> = vec!["sql-worker".into(), "--log-dir".into()];
    worker.push(args.log_dir.clone().into_os_string());
    let mut flag = |name: &str, value: String| {
        worker.push(name.into());
        worker.push(value.into());
    };
    flag(
        "--update-interval-ms",
        args.update_interval.as_millis().to_string(),
    );
    flag("--max-log-bytes", args.max_log_bytes.to_string());
    flag("--max-rows", args.sql_max_rows.to_string());
    flag("--timeout-ms", args.sql_timeout.as_millis().to_string());
    flag("--sql-memory", args.sql_memory.to_string());
    flag("--max-bytes", args.sql_max_bytes.to_string());
    flag("--concurrent", args.sql_concurrent.to_string());
    flag("--memory-limit", memory_limit.to_string());
    if let Some(endpoint) = &args.s3_endpoint {
        flag("--s3-endpoint", endpoint.clone());
    }
    if let Some(threads) = args.replay_threads {
        flag("--replay-threads", threads.to_string());
    }
    if let Some(store) = &args.store_dir {
        worker.push("--store-dir".into());
        worker.push(store.clone().into_os_string());
        worker.push("--store-max-disk".into());
        worker.push(args.store_max_disk.to_string().into());
    }
    // the statements' spill, in a directory of this server's own
    let scratch = std::env::temp_dir().join(format!("qprof-sql-{}", std::process::id()));
    worker.push("--spill-dir".into());
    worker.push(scratch.clone().into_os_string());
    Ok(qprof_server::sql_worker::WorkerCommand {
        program,
        args: worker,
        memory_limit_bytes: memory_limit,
        timeout: args.sql_timeout,
        scratch_dir: Some(scratch),
    })
}

/// `qprof sql-worker`: what `qprof serve` starts to run its SQL statements in.
#[derive(Debug, Args)]
pub(crate) struct SqlWorkerArgs {
    #[arg(long)]
    log_dir: PathBuf,
    #[arg(long)]
    s3_endpoint: Option<String>,
    #[arg(long)]
    update_interval_ms: u64,
    #[arg(long)]
    replay_threads: Option<u16>,
    #[arg(long)]
    store_dir: Option<PathBuf>,
    #[arg(long, default_value_t = 0)]
    store_max_disk: u64,
    #[arg(long)]
    max_log_bytes: u64,
    #[arg(long)]
    max_rows: usize,
    #[arg(long)]
    timeout_ms: u64,
    #[arg(long)]
    sql_memory: usize,
    #[arg(long)]
    max_bytes: usize,
    #[arg(long)]
    concurrent: usize,
    /// The most memory this process may map (its data segment), bytes.
    #[arg(long)]
    memory_limit: u64,
    /// Where statements spill.
    #[arg(long)]
    spill_dir: Option<PathBuf>,
}

/// Limits this process's data segment (heap and private mappings) to `bytes`: an
/// allocation past it fails, and ends this process, not the server that started it.
fn limit_memory(bytes: u64) -> Result<()> {
    let limit = libc::rlimit {
        rlim_cur: bytes,
        rlim_max: bytes,
    };
    // SAFETY: setrlimit reads the struct it is given and nothing else.
    let rc = unsafe { libc::setrlimit(libc::RLIMIT_DATA, &limit) };
    if rc != 0 {
        bail!(
            "cannot limit the SQL worker's memory: {}",
            std::io::Error::last_os_error()
        );
    }
    Ok(())
}

/// `qprof sql-worker`: answers the statements on its standard input, one a line, on its
/// standard output, one reply a line, until its input ends.
pub(crate) async fn sql_worker(args: SqlWorkerArgs) -> Result<()> {
    use std::io::{BufRead, Write};
    limit_memory(args.memory_limit)?;
    let defaults = qprof_server::store::StoreOptions::default();
    let options = qprof_server::store::StoreOptions {
        update_interval: std::time::Duration::from_millis(args.update_interval_ms.max(1)),
        max_memory_bytes: WORKER_CACHE_BYTES,
        replay_threads: args
            .replay_threads
            .map_or(defaults.replay_threads, usize::from),
        cleaner: qprof_server::store::CleanerOptions::default(),
        store_dir: args.store_dir.clone(),
        store_max_disk_bytes: args.store_max_disk,
    };
    let location = LogLocation::of(&args.log_dir, args.s3_endpoint.as_deref())?
        .with_max_log_bytes(args.max_log_bytes);
    let store = Arc::new(location.open(options).await?);
    qprof_server::LogStore::spawn_scanner(&store);
    let limits = qprof_history::SqlLimits {
        max_rows: args.max_rows,
        timeout: std::time::Duration::from_millis(args.timeout_ms),
        memory_bytes: args.sql_memory,
        max_bytes: args.max_bytes,
        concurrent: args.concurrent,
    };
    let hidden: Arc<Vec<PathBuf>> = Arc::new(
        std::iter::once(args.log_dir.clone())
            .chain(args.spill_dir.clone())
            .collect(),
    );
    let service = qprof_history::SqlService::spilling_in(store, limits, args.spill_dir)
        .context("cannot start the SQL service")?;
    let (requests, mut incoming) = tokio::sync::mpsc::unbounded_channel();
    std::thread::spawn(move || {
        for line in std::io::stdin().lock().lines() {
            let Ok(line) = line else { break };
            if requests.send(line).is_err() {
                break;
            }
        }
    });
    let out = Arc::new(std::sync::Mutex::new(std::io::stdout()));
    let mut running = tokio::task::JoinSet::new();
    while let Some(line) = incoming.recv().await {
        let Some((id, sql, audience)) = qprof_server::sql_worker::read_worker_request(&line) else {
            continue;
        };
        let (service, out) = (service.clone(), Arc::clone(&out));
        let hidden = hidden.clone();
        running.spawn(async move {
            // an error names no path of the server's: the logs' nor the spill's
            let public = |message: String| {
                hidden
                    .iter()
                    .fold(message, |m, dir| qprof_server::public_text(&m, dir))
            };
            let reply = match service.answer_for(&sql, audience).await {
                Err(qprof_server::SqlError::Rejected(m)) => {
                    Err(qprof_server::SqlError::Rejected(public(m)))
                }
                Err(qprof_server::SqlError::Failed(m)) => {
                    Err(qprof_server::SqlError::Failed(public(m)))
                }
                answer => answer,
            };
            let line = qprof_server::sql_worker::worker_reply(id, &reply);
            let mut out = out.lock().unwrap_or_else(|e| e.into_inner());
            // a server that went away reads nothing more: nothing to do
            let _ = writeln!(out, "{line}").and_then(|()| out.flush());
        });
    }
    running.join_all().await;
    Ok(())
}
