//! `qprof run` and `qprof sql`: execute queries with profiles.

use std::io::Write;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use datafusion::execution::runtime_env::RuntimeEnvBuilder;
use datafusion::prelude::SessionConfig;
use indicatif::{ProgressBar, ProgressStyle};
use qprof_core::format;
use qprof_core::profile::QueryProfile;
use qprof_core::progress::Progress;
use qprof_datafusion::options::{
    ADAPTIVE_CPU_SAMPLING, ADAPTIVE_MAX_OVERHEAD_PCT, QprofOptions, TRACK_CPU_USAGE,
    TRACK_CPU_USAGE_FOR_FUNCTIONS,
};
use qprof_datafusion::read_cache::DEFAULT_MEMORY_BYTES;
use qprof_datafusion::{
    Profiler, ProfilingSession, QueryFailure, ReadCache, ReadCacheConfig, describe_sql, error_line,
};
use qprof_eventlog::EventLogListener;
use qprof_eventlog::ProfilesDocument;
use qprof_eventlog::ScanProgress;
use qprof_eventlog::{DEFAULT_ROLL_BYTES, LogConfig};
use qprof_tpch::{DatasetPaths, ScaleFactor};

use crate::cli::{
    ExecOptions, FunctionTracking, LogOptions, QueryList, RunArgs, SqlArgs, check_dir, data_dir,
};
use crate::data::{register_s3, register_tables, split_statements};
use crate::live::LiveUi;

/// The session configuration qprof runs with (and benchmarks against).
///
/// # Errors
/// Fails with the option's name when a function-tracking flag has a bad value.
pub(crate) fn session_config(
    partitions: Option<u16>,
    functions: &FunctionTracking,
    stack_sample_hz: Option<u32>,
) -> Result<SessionConfig> {
    let mut options = QprofOptions {
        stack_sample_hz: stack_sample_hz.unwrap_or(0),
        ..QprofOptions::default()
    };
    let flags = [
        (
            TRACK_CPU_USAGE,
            functions.track_cpu_usage.then(|| "true".to_string()),
        ),
        (
            TRACK_CPU_USAGE_FOR_FUNCTIONS,
            functions.track_cpu_usage_for_functions.clone(),
        ),
        (
            ADAPTIVE_CPU_SAMPLING,
            functions.adaptive_cpu_sampling.clone(),
        ),
        (
            ADAPTIVE_MAX_OVERHEAD_PCT,
            functions.adaptive_cpu_sampling_max_overhead_pct.clone(),
        ),
    ];
    for (key, value) in flags {
        if let Some(value) = value {
            options
                .set_option(key, &value)
                .map_err(|e| anyhow::anyhow!("{}", e.strip_backtrace()))?;
        }
    }
    let config = SessionConfig::new().with_option_extension(options);
    Ok(match partitions {
        Some(n) => config.with_target_partitions(usize::from(n)),
        None => config,
    })
}

/// Generates (or finds cached) TPC-H data, showing a progress bar while generating.
pub(crate) fn prepare_tpch(sf: &ScaleFactor, dir: &Path) -> Result<DatasetPaths> {
    check_dir(dir)?;
    let bar = ProgressBar::hidden();
    let mut shown = false;
    let paths = qprof_tpch::generate(*sf, dir, &mut |progress| {
        if !shown {
            bar.set_draw_target(indicatif::ProgressDrawTarget::stderr());
            bar.set_style(
                ProgressStyle::with_template("{msg:>10} [{bar:40}] {pos}/{len} rows")
                    .unwrap_or_else(|_| ProgressStyle::default_bar())
                    .progress_chars("=> "),
            );
            shown = true;
        }
        bar.set_message(progress.table.to_string());
        bar.set_length(progress.total_rows);
        bar.set_position(progress.rows_written);
    })
    .with_context(|| format!("cannot generate TPC-H data in '{}'", dir.display()))?;
    bar.finish_and_clear();
    Ok(paths)
}

/// A profiling session with the options' configuration, memory limit, spill directory
/// and read cache.
async fn session(exec: &ExecOptions) -> Result<ProfilingSession> {
    check_output_dirs(exec)?;
    let config = session_config(exec.partitions, &exec.functions, exec.sample_stacks)?;
    profiling_session(exec, config).await
}

/// Fails when `--profile-out` or `--trace-out` names a file in a directory that does not
/// exist: the files are written at the run's end, the mistake is said before the run.
pub(crate) fn check_output_dirs(exec: &ExecOptions) -> Result<()> {
    for (path, what) in [
        (&exec.profile_out, "profiles"),
        (&exec.trace_out, "the trace"),
        (&exec.pprof_out, "the sampled stacks"),
    ] {
        if let Some(path) = path {
            let dir = path
                .parent()
                .filter(|d| !d.as_os_str().is_empty())
                .unwrap_or(Path::new("."));
            if !dir.is_dir() {
                bail!(
                    "cannot write {what} to '{}': '{}' is not a directory",
                    path.display(),
                    dir.display()
                );
            }
        }
    }
    Ok(())
}

/// Session setup continued: the runtime and profiler.
async fn profiling_session(exec: &ExecOptions, config: SessionConfig) -> Result<ProfilingSession> {
    let mut runtime = RuntimeEnvBuilder::new();
    if let Some(limit) = exec.memory_limit {
        runtime = runtime.with_memory_limit(limit, 1.0);
    }
    if let Some(dir) = &exec.spill_dir {
        if !dir.is_dir() {
            bail!("spill dir '{}' is not a directory", dir.display());
        }
        runtime = runtime.with_temp_file_path(dir);
    }
    let runtime = runtime
        .build_arc()
        .map_err(|e| anyhow::anyhow!("{}", error_line(&e)))
        .context("cannot set up the runtime")?;
    let profiler = match read_cache_config(exec) {
        None => Profiler::new(),
        Some(cache) => Profiler::with_read_cache(
            // its error names the read cache and the directory
            ReadCache::open(cache).await?,
        ),
    };
    Ok(ProfilingSession::with_profiler(profiler, config, runtime))
}

/// The read cache the options ask for, if any.
fn read_cache_config(exec: &ExecOptions) -> Option<ReadCacheConfig> {
    let memory = exec.cache_memory.map(|bytes| bytes as u64);
    if memory.is_none() && exec.cache_disk.is_none() {
        return None;
    }
    Some(ReadCacheConfig {
        memory_bytes: memory.unwrap_or(DEFAULT_MEMORY_BYTES),
        disk: exec
            .cache_disk
            .as_ref()
            .map(|disk| (disk.dir.clone(), disk.bytes as u64)),
    })
}

pub(crate) async fn run_tpch(args: RunArgs) -> Result<()> {
    let session = session(&args.exec).await?;
    let dir = data_dir(args.data_dir.as_ref(), &args.tpch);
    let paths = prepare_tpch(&args.tpch, &dir)?;
    qprof_tpch::register_all(session.context(), &paths)
        .await
        .context("cannot register TPC-H tables")?;
    let queries = QueryList::or_all(args.queries.as_ref());
    let log = keep_event_log(&args.exec.log, &session)?;
    let traces = export_traces(&args.exec, &session)?;
    let parent = crate::otlp::trace_parent()?;
    let ui = start_ui(&args.exec.log, &session, log.as_ref(), traces).await?;
    let outcome = crate::otlp::in_trace(parent, async {
        let mut profiles = Vec::with_capacity(queries.len());
        let mut failures = Failures::default();
        for q in queries {
            let sql = qprof_tpch::query(q).with_context(|| format!("no TPC-H query {q}"))?;
            let outcome = with_progress(
                &session,
                q,
                &format!("q{q}"),
                session.run_described(q, &format!("q{q}"), sql),
            )
            .await;
            check_listeners(&session)?;
            let run = match outcome {
                Ok(run) => run,
                Err(failure) => {
                    failures.record(&format!("TPC-H query {q}"), failure, &mut profiles);
                    continue;
                }
            };
            print_profile(&run.profile, args.exec.top)?;
            profiles.push(run.profile);
        }
        summarize(&profiles, &args.exec)?;
        failures.into_result()
    })
    .await;
    let ended = end_run(&session, log.as_deref(), outcome).await;
    if let Some(ui) = ui {
        ui.finish(args.exec.log.ui_keep).await;
    }
    ended
}

pub(crate) async fn run_sql(args: SqlArgs) -> Result<()> {
    let statements = split_statements(&sql_text(&args)?)?;
    let session = session(&args.exec).await?.with_url_tables();
    register_s3(
        session.context(),
        &args.tables,
        &statements,
        args.s3_endpoint.as_deref(),
    )?;
    register_tables(session.context(), &args.tables, args.format).await?;
    // before this run's log is started: the history is what was logged before it
    if let Some(history) = &args.history {
        crate::history::register(
            session.context(),
            history,
            args.s3_endpoint.as_deref(),
            args.history_store.as_deref(),
        )
        .await?;
    }
    let log = keep_event_log(&args.exec.log, &session)?;
    let traces = export_traces(&args.exec, &session)?;
    let parent = crate::otlp::trace_parent()?;
    let ui = start_ui(&args.exec.log, &session, log.as_ref(), traces).await?;
    let outcome = crate::otlp::in_trace(parent, async {
        let mut profiles = Vec::new();
        let mut failures = Failures::default();
        let several = statements.len() > 1;
        for (i, sql) in statements.iter().enumerate() {
            let id = profiles.len() + 1;
            let outcome = with_progress(
                &session,
                id,
                &format!("statement {}", i + 1),
                session.run_described(id, &describe_sql(sql), sql),
            )
            .await;
            check_listeners(&session)?;
            let run = match outcome {
                Ok(run) => run,
                // a lone statement's failure is the command's error, as it is
                Err(failure) if !several => {
                    return Err(failure.error.into());
                }
                Err(failure) => {
                    failures.record(&format!("statement {}", i + 1), failure, &mut profiles);
                    continue;
                }
            };
            let pretty = datafusion::arrow::util::pretty::pretty_format_batches(&run.batches)
                .context("cannot format the result")?;
            println!("{pretty}");
            print_profile(&run.profile, args.exec.top)?;
            profiles.push(run.profile);
        }
        summarize(&profiles, &args.exec)?;
        failures.into_result()
    })
    .await;
    let ended = end_run(&session, log.as_deref(), outcome).await;
    if let Some(ui) = ui {
        ui.finish(args.exec.log.ui_keep).await;
    }
    ended
}

/// The SQL text of `qprof sql`: given, or read from `-f FILE`.
pub(crate) fn sql_text(args: &SqlArgs) -> Result<String> {
    match (&args.sql, &args.file) {
        (Some(sql), _) => Ok(sql.clone()),
        (None, Some(file)) => std::fs::read_to_string(file)
            .with_context(|| format!("cannot read '{}'", file.display())),
        (None, None) => bail!("give SQL to run, or -f FILE"),
    }
}

/// The queries of a run that failed. A failure is shown on one line as it happens and the
/// run goes on; its profile up to the failure (its failed tasks with their reasons) is kept
/// with the others, and the run fails at its end.
#[derive(Default)]
struct Failures {
    failed: Vec<String>,
}

impl Failures {
    fn record(&mut self, label: &str, failure: QueryFailure, profiles: &mut Vec<QueryProfile>) {
        eprintln!("{label} failed: {}", failure.error);
        if let Some(profile) = failure.profile {
            profiles.push(*profile);
        }
        self.failed.push(label.to_string());
    }

    fn into_result(self) -> Result<()> {
        match self.failed.as_slice() {
            [] => Ok(()),
            [one] => bail!("{one} failed"),
            several => bail!("{} queries failed: {}", several.len(), several.join(", ")),
        }
    }
}

/// The width of the progress line's bar.
const PROGRESS_BAR_CELLS: usize = 20;

/// How long a query runs before its progress line shows.
const PROGRESS_AFTER: Duration = Duration::from_secs(1);

/// Runs `query` (query `id` of the session) with a progress line on the terminal once it
/// has run for a second: elapsed time, rows scanned, bytes read and the read throughput,
/// from snapshots of its live counters. Nothing is drawn when stderr is not a terminal.
async fn with_progress<T>(
    session: &ProfilingSession,
    id: usize,
    label: &str,
    query: impl std::future::Future<Output = T>,
) -> T {
    let bar = ProgressBar::with_draw_target(None, indicatif::ProgressDrawTarget::stderr());
    bar.set_style(
        ProgressStyle::with_template("{spinner} {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_spinner()),
    );
    let started = std::time::Instant::now();
    let ticker = async {
        tokio::time::sleep(PROGRESS_AFTER).await;
        loop {
            if let Some((profile, progress)) = session.profiler().snapshot_progress(id) {
                bar.set_message(progress_line(label, &profile, &progress, started.elapsed()));
                bar.tick();
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    };
    tokio::pin!(query);
    let out = tokio::select! {
        out = &mut query => out,
        () = ticker => unreachable!("the ticker never ends"),
    };
    bar.finish_and_clear();
    out
}

/// `q3  [#####---------------]  25 %  6.3 s left  2.1 s  rows scanned 1,234,567  read
/// 120.5 MiB (57.3 MiB/s)`.
fn progress_line(
    label: &str,
    profile: &QueryProfile,
    progress: &Progress,
    elapsed: Duration,
) -> String {
    let ScanProgress { rows, bytes } = ScanProgress::of(profile);
    let rate = bytes as f64 / elapsed.as_secs_f64().max(1e-3);
    format!(
        "{label}  {}  {:.1} s  rows scanned {}  read {} ({}/s)",
        progress.bar(PROGRESS_BAR_CELLS),
        elapsed.as_secs_f64(),
        format::integer(rows),
        format::bytes(bytes),
        format::bytes(rate as i64)
    )
}

/// The profile as text, then what the advisor noticed in it.
fn print_profile(profile: &QueryProfile, top: usize) -> Result<()> {
    let mut out = std::io::stdout().lock();
    writeln!(out, "{}", profile.render_report(top))?;
    Ok(())
}

/// Registers the event-log listener on the session's profiler (unless `--no-event-log`).
fn keep_event_log(
    options: &LogOptions,
    session: &ProfilingSession,
) -> Result<Option<Arc<EventLogListener>>> {
    if options.no_event_log {
        return Ok(None);
    }
    let listener = Arc::new(EventLogListener::new(LogConfig {
        dir: options.event_log_dir.clone(),
        zstd: options.event_log_compress,
        roll_bytes: DEFAULT_ROLL_BYTES,
    }));
    session
        .profiler()
        .add_listener(Arc::clone(&listener) as _)
        .map_err(|f| anyhow::anyhow!("{}", f.message))
        .with_context(|| {
            format!(
                "cannot write the event log in '{}'",
                options.event_log_dir.display()
            )
        })?;
    Ok(Some(listener))
}

/// Registers the OpenTelemetry exporter on the session's profiler, if the options or the
/// environment ask for one.
fn export_traces(
    options: &ExecOptions,
    session: &ProfilingSession,
) -> Result<Option<Arc<qprof_otel::OtlpListener>>> {
    options
        .otlp
        .listener()?
        .map(|listener| crate::otlp::export_traces(session.profiler(), listener))
        .transpose()
}

/// Starts the run's live UI if `--ui` asks for it.
async fn start_ui(
    options: &LogOptions,
    session: &ProfilingSession,
    log: Option<&Arc<EventLogListener>>,
    traces: Option<Arc<qprof_otel::OtlpListener>>,
) -> Result<Option<LiveUi>> {
    match &options.ui {
        Some(address) => Ok(Some(
            LiveUi::start(
                session.profiler().clone(),
                log.cloned(),
                traces,
                &options.event_log_dir,
                address,
            )
            .await?,
        )),
        None => Ok(None),
    }
}

/// Fails if a listener (the event log) could not handle the last events.
fn check_listeners(session: &ProfilingSession) -> Result<()> {
    match session
        .profiler()
        .take_listener_failures()
        .into_iter()
        .next()
    {
        Some(failure) => {
            Err(anyhow::anyhow!("{}", failure.message)).context("cannot write the event log")
        }
        None => Ok(()),
    }
}

/// Ends the application, successful if `outcome` is, after the read cache (if any) has
/// written what it keeps on disk; says where its log is.
async fn end_run(
    session: &ProfilingSession,
    log: Option<&EventLogListener>,
    outcome: Result<()>,
) -> Result<()> {
    let closed = match session.profiler().read_cache() {
        Some(cache) => cache.close().await.context("cannot close the read cache"),
        None => Ok(()),
    };
    let ended = session
        .profiler()
        .finish(i32::from(outcome.is_err()))
        .map_err(|f| anyhow::anyhow!("{}", f.message))
        .context("cannot finish the event log");
    outcome?;
    ended?;
    closed?;
    if let Some(dir) = log.and_then(EventLogListener::log_dir) {
        println!("event log written to {}", dir.display());
    }
    Ok(())
}

/// Prints the run's totals and writes `--profile-out` and `--trace-out`.
fn summarize(profiles: &[QueryProfile], exec: &ExecOptions) -> Result<()> {
    summarize_document(&ProfilesDocument::new(profiles), exec)
}

/// Prints the totals of the run whose profiles are `document` and writes `--profile-out`
/// and `--trace-out`: for a run in this process or on a cluster.
pub(crate) fn summarize_document(document: &ProfilesDocument, exec: &ExecOptions) -> Result<()> {
    let queries = &document.queries;
    let total: u64 = queries.iter().map(|q| q.duration_nanos).sum();
    println!(
        "{} queries, {} rows, {} in total",
        queries.len(),
        format::integer(queries.iter().map(|q| q.rows as i64).sum()),
        format::human_nanos(total)
    );
    if let Some(path) = &exec.profile_out {
        let json = serde_json::to_string_pretty(document).context("cannot serialize profiles")?;
        std::fs::write(path, json)
            .with_context(|| format!("cannot write profiles to '{}'", path.display()))?;
        println!("profiles written to {}", path.display());
    }
    if let Some(path) = &exec.trace_out {
        let trace = qprof_eventlog::chrome_trace(queries);
        std::fs::write(path, trace.to_string())
            .with_context(|| format!("cannot write the trace to '{}'", path.display()))?;
        println!("trace written to {}", path.display());
    }
    if let Some(path) = &exec.pprof_out {
        let start_nanos = queries
            .iter()
            .map(|q| q.start_epoch_millis)
            .min()
            .unwrap_or(0)
            .saturating_mul(1_000_000);
        let pprof = qprof_eventlog::pprof_profile(queries, i64::try_from(start_nanos).unwrap_or(0));
        std::fs::write(path, pprof)
            .with_context(|| format!("cannot write the sampled stacks to '{}'", path.display()))?;
        println!("sampled stacks written to {}", path.display());
    }
    Ok(())
}

/// Milliseconds of a duration, for tables.
pub(crate) fn millis(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}
