//! Command-line arguments and dispatch.

use std::path::PathBuf;

use anyhow::{Context, Result, bail};
use clap::{Args, Parser, Subcommand};
use qprof_tpch::ScaleFactor;

use crate::data::{TableFormat, TableSpec, number_and_unit, parse_size};

/// Runtime metrics and query profiles for DataFusion.
#[derive(Debug, Parser)]
#[command(name = "qprof", version, about)]
pub(crate) struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Generate TPC-H data (cached) and run TPC-H queries with profiles.
    Run(RunArgs),
    /// Run one SQL statement over Parquet or CSV files with a profile.
    Sql(SqlArgs),
    /// Benchmarks.
    #[command(subcommand)]
    Bench(BenchCommand),
    /// Serve event logs: Spark's REST API under /api/v1 and a web UI.
    Serve(ServeArgs),
    /// Compare two runs' profiles (--profile-out files or queries in event logs).
    Diff(DiffArgs),
    /// Run a Ballista scheduler or executor with qprof inside.
    #[command(subcommand)]
    Cluster(crate::cluster::ClusterCommand),
    /// The process `qprof serve` runs its SQL statements in (not for use by hand).
    #[command(hide = true)]
    SqlWorker(crate::serve::SqlWorkerArgs),
}

#[derive(Debug, Args)]
pub(crate) struct DiffArgs {
    /// The first run's profile: a --profile-out file, or LOGDIR:APP:SQLID (a query of an
    /// application in an event-log directory).
    pub before: String,
    /// The second run's profile, named the same ways.
    pub after: String,
    /// Flag operators whose self CPU grew by more than this percent (and 1 ms).
    #[arg(long, value_name = "PCT", default_value_t = qprof_eventlog::DEFAULT_REGRESSION_THRESHOLD_PERCENT, value_parser = parse_percent)]
    pub threshold: f64,
    /// Exit non-zero when an operator's self CPU grew by more than this percent (for CI).
    #[arg(long, value_name = "PCT", value_parser = parse_percent)]
    pub fail_on_regression: Option<f64>,
}

/// A percentage: a finite number, zero or more.
fn parse_percent(s: &str) -> Result<f64, String> {
    match s.trim_end_matches('%').parse::<f64>() {
        Ok(p) if p.is_finite() && p >= 0.0 => Ok(p),
        _ => Err(format!("'{s}' is not a percentage (e.g. 10 or 2.5)")),
    }
}

/// Where the event log goes.
#[derive(Debug, Args)]
pub(crate) struct LogOptions {
    /// Directory for Spark-compatible event logs (one application per run).
    #[arg(long, value_name = "DIR", default_value = "qprof-events")]
    pub event_log_dir: PathBuf,
    /// Compress event logs with zstd.
    #[arg(long)]
    pub event_log_compress: bool,
    /// Write no event log.
    #[arg(long, conflicts_with_all = ["event_log_dir", "event_log_compress"])]
    pub no_event_log: bool,
    /// Serve this run's web UI, Spark's REST API and /metrics while it runs, at ADDR
    /// (default 127.0.0.1:4040, as Spark's driver UI): finished queries from its event log,
    /// running ones and the memory now from the run itself.
    #[arg(long, value_name = "ADDR", num_args = 0..=1, default_missing_value = "127.0.0.1:4040",
          conflicts_with = "no_event_log")]
    pub ui: Option<String>,
    /// Keep serving the UI after the run ends, until interrupted (Ctrl-C).
    #[arg(long, requires = "ui")]
    pub ui_keep: bool,
}

#[derive(Debug, Args)]
pub(crate) struct ServeArgs {
    /// Directory of event logs (qprof's or Spark's), or an S3 prefix
    /// (`s3://bucket/prefix/`).
    #[arg(long, value_name = "DIR|URL", default_value = "qprof-events")]
    pub log_dir: PathBuf,
    /// An S3-compatible endpoint for an s3:// --log-dir, e.g. http://127.0.0.1:9000 (the
    /// credentials and region come from the standard AWS environment variables).
    #[arg(long, value_name = "URL", value_parser = parse_endpoint)]
    pub s3_endpoint: Option<String>,
    /// Port to listen on (0: any free port).
    #[arg(long, default_value_t = 18080)]
    pub port: u16,
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1", value_name = "ADDR")]
    pub bind: String,
    /// How often the log directory is rescanned for new and changed logs, e.g. 10s, 1m.
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = parse_duration)]
    pub update_interval: std::time::Duration,
    /// Memory for replayed applications, e.g. 2G; the least recently used are dropped
    /// (and replayed again when asked for) beyond it.
    #[arg(long, value_name = "SIZE", default_value = "2G", value_parser = parse_size)]
    pub max_memory: usize,
    /// Logs replayed at once (default: one per core).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..=1024))]
    pub replay_threads: Option<u16>,
    /// Delete the logs of completed applications not updated for this long, e.g. 7d
    /// (never a log in progress).
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub cleaner_max_age: Option<std::time::Duration>,
    /// Keep at most this many applications, deleting the completed ones least recently
    /// updated first (never a log in progress).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub cleaner_max_num: Option<u32>,
    /// Save the replays of completed applications in this directory, to read them back
    /// instead of replaying their logs (after eviction or a restart).
    #[arg(long, value_name = "DIR")]
    pub store_dir: Option<PathBuf>,
    /// Disk for saved replays, e.g. 10G (the least recently used are dropped beyond it).
    #[arg(long, value_name = "SIZE", default_value = "10G", value_parser = parse_size)]
    pub store_max_disk: usize,
    /// The most rows one answer of /qprof/v1/sql (the UI's query box) holds.
    #[arg(long, value_name = "N", default_value_t = 10_000, value_parser = clap::value_parser!(u32).range(1..))]
    pub sql_max_rows: u32,
    /// The longest one /qprof/v1/sql statement runs before it is stopped.
    #[arg(long, value_name = "DURATION", default_value = "30s", value_parser = parse_duration)]
    pub sql_timeout: std::time::Duration,
    /// The memory /qprof/v1/sql statements' operators may reserve, together.
    #[arg(long, value_name = "SIZE", default_value = "512M", value_parser = parse_size)]
    pub sql_memory: usize,
    /// The most bytes of values one /qprof/v1/sql answer holds (as text).
    #[arg(long, value_name = "SIZE", default_value = "16M", value_parser = parse_size)]
    pub sql_max_bytes: usize,
    /// How many /qprof/v1/sql statements run at once; more wait their turn (within their
    /// time limit).
    #[arg(long, value_name = "N", default_value_t = 2, value_parser = clap::value_parser!(u32).range(1..))]
    pub sql_concurrent: u32,
    /// Serve no /qprof/v1/sql (nor the UI's query box).
    #[arg(long)]
    pub no_sql: bool,
    /// The most bytes one compressed log file may decompress to; a larger one is skipped
    /// with its reason in /qprof/v1/status.
    #[arg(long, value_name = "SIZE", default_value = "4G", value_parser = parse_size)]
    pub max_log_bytes: usize,
    /// A host name the server answers to (the `Host` header's name; repeatable). Default:
    /// the loopback names when bound to a loopback address, any name otherwise.
    #[arg(long = "allowed-host", value_name = "NAME")]
    pub allowed_hosts: Vec<String>,
    /// Require the token in this file (its first line) of every request: as
    /// `Authorization: Bearer TOKEN`, or once as `?token=TOKEN` in a browser.
    #[arg(long, value_name = "FILE")]
    pub auth_token_file: Option<PathBuf>,
    /// Take the user from this header a trusted reverse proxy sets (e.g.
    /// X-Forwarded-User), and refuse requests without it.
    #[arg(long, value_name = "HEADER")]
    pub auth_user_header: Option<String>,
    /// Take the user's groups from this header the proxy sets, comma-separated (e.g.
    /// X-Forwarded-Groups).
    #[arg(long, value_name = "HEADER", requires = "auth_user_header")]
    pub auth_groups_header: Option<String>,
    /// Show each user only the applications whose Spark settings admit them
    /// (spark.ui.view.acls, spark.admin.acls and their groups; the application's user),
    /// as Spark's spark.history.ui.acls.enable.
    #[arg(long, requires = "auth_user_header")]
    pub acls: bool,
    /// Users who see every application under --acls (comma-separated, repeatable), as
    /// Spark's spark.history.ui.admin.acls.
    #[arg(long, value_name = "USERS", requires = "acls")]
    pub admin_acls: Vec<String>,
    /// Groups whose members see every application under --acls.
    #[arg(long, value_name = "GROUPS", requires = "acls")]
    pub admin_acls_groups: Vec<String>,
}

/// A duration such as `500ms`, `10s`, `5m`, `2h` or `7d` (a bare number is seconds).
pub(crate) fn parse_duration(s: &str) -> Result<std::time::Duration, String> {
    let (number, unit) = number_and_unit(s);
    let seconds: f64 = match unit.as_str() {
        "ms" => 0.001,
        "" | "s" => 1.0,
        "m" | "min" => 60.0,
        "h" => 3600.0,
        "d" => 86_400.0,
        _ => return Err(format!("'{s}' is not a duration (e.g. 500ms, 10s, 5m, 7d)")),
    };
    match number.parse::<f64>() {
        Ok(n) if n.is_finite() && n > 0.0 && n * seconds >= 0.001 && n * seconds < 1e10 => {
            Ok(std::time::Duration::from_secs_f64(n * seconds))
        }
        _ => Err(format!(
            "'{s}' is not a positive duration (e.g. 500ms, 10s, 5m, 7d)"
        )),
    }
}

/// How function calls are timed: the `qprof.expression.*` session options as flags.
#[derive(Debug, Clone, Default, Args)]
pub(crate) struct FunctionTracking {
    /// Time every function call on every vector (qprof.expression.track_cpu_usage).
    #[arg(long)]
    pub track_cpu_usage: bool,
    /// Functions timed on every vector, e.g. upper,regexp_like
    /// (qprof.expression.track_cpu_usage_for_functions).
    #[arg(long, value_name = "LIST")]
    pub track_cpu_usage_for_functions: Option<String>,
    /// Sample the other functions' CPU time adaptively: true (default) or false
    /// (qprof.expression.adaptive_cpu_sampling).
    #[arg(long, value_name = "BOOL")]
    pub adaptive_cpu_sampling: Option<String>,
    /// Overhead budget of adaptive sampling, in percent of a function's time; default 1.0
    /// (qprof.expression.adaptive_cpu_sampling_max_overhead_pct).
    #[arg(long, value_name = "PCT", allow_negative_numbers = true)]
    pub adaptive_cpu_sampling_max_overhead_pct: Option<String>,
}

/// A read cache's disk tier: `--cache-disk DIR:SIZE`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct DiskCache {
    /// Where the cache keeps its files.
    pub dir: PathBuf,
    /// How many bytes it may use there.
    pub bytes: usize,
}

fn parse_cache_disk(s: &str) -> Result<DiskCache, String> {
    let usage = "(e.g. /var/cache/qprof:10G)";
    let Some((dir, size)) = s.rsplit_once(':') else {
        return Err(format!("'{s}' is not DIR:SIZE {usage}"));
    };
    if dir.is_empty() {
        return Err(format!("'{s}' names no directory {usage}"));
    }
    Ok(DiskCache {
        dir: PathBuf::from(dir),
        bytes: parse_size(size)?,
    })
}

/// Options shared by the commands that execute queries.
#[derive(Debug, Args)]
pub(crate) struct ExecOptions {
    /// Write all profiles as JSON to this file.
    #[arg(long, value_name = "FILE")]
    pub profile_out: Option<PathBuf>,
    /// Write the run as a Chrome trace (queries and their tasks on a timeline) to this
    /// file, for Perfetto or chrome://tracing.
    #[arg(long, value_name = "FILE")]
    pub trace_out: Option<PathBuf>,
    /// How many operators to list by self CPU time under each profile.
    #[arg(long, default_value_t = 5, value_name = "N")]
    pub top: usize,
    /// Partitions per operator (DataFusion's target_partitions); default: the number of cores.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..=1024))]
    pub partitions: Option<u16>,
    /// Memory the queries may reserve, e.g. 512M or 2G; operators that can spill do so
    /// beyond it, the others fail (default: no limit).
    #[arg(long, value_name = "SIZE", value_parser = parse_size)]
    pub memory_limit: Option<usize>,
    /// Where operators spill (default: the system's temporary directory).
    #[arg(long, value_name = "DIR")]
    pub spill_dir: Option<PathBuf>,
    /// Keep what the tables' storage serves in a read cache in memory of this size, e.g.
    /// 256M: queries that read it again read RAM (ramReadBytes).
    #[arg(long, value_name = "SIZE", value_parser = parse_size)]
    pub cache_memory: Option<usize>,
    /// A read cache tier on local disk, as DIR:SIZE (e.g. /var/cache/qprof:10G), behind the
    /// memory tier (--cache-memory, default 64M) and kept for later runs (localReadBytes).
    #[arg(long, value_name = "DIR:SIZE", value_parser = parse_cache_disk)]
    pub cache_disk: Option<DiskCache>,
    /// Sample the native stacks this many times per second of CPU time (99 is a sensible
    /// rate), by operator: each profile lists its operators' hottest functions and keeps
    /// their stacks (qprof.runtime.stack_sample_hz).
    #[arg(long, value_name = "HZ", value_parser = clap::value_parser!(u32).range(1..=250))]
    pub sample_stacks: Option<u32>,
    /// Write the sampled stacks of all queries as a pprof profile to this file (for `go
    /// tool pprof`, speedscope, Pyroscope), each sample labelled with its query, operator,
    /// task and the plan's function call it was taken in.
    #[arg(long, value_name = "FILE", requires = "sample_stacks")]
    pub pprof_out: Option<PathBuf>,
    #[command(flatten)]
    pub functions: FunctionTracking,
    #[command(flatten)]
    pub log: LogOptions,
    #[command(flatten)]
    pub otlp: crate::otlp::OtlpOptions,
}

/// What a run on a cluster does not take: the scheduler writes the event log and exports
/// traces, and the executors own memory, spill and reads.
const NOT_WITH_CLUSTER: [&str; 13] = [
    "memory_limit",
    "spill_dir",
    "cache_memory",
    "cache_disk",
    "event_log_dir",
    "event_log_compress",
    "no_event_log",
    "ui",
    "ui_keep",
    "otlp_endpoint",
    "otlp_protocol",
    "sample_stacks",
    "pprof_out",
];

#[derive(Debug, Args)]
pub(crate) struct RunArgs {
    /// TPC-H scale factor, e.g. 0.1 or 1.
    #[arg(long, value_name = "SF", allow_negative_numbers = true)]
    pub tpch: ScaleFactor,
    /// Queries to run, e.g. 1,5,9 (default: all 22).
    #[arg(long, value_name = "LIST", value_parser = parse_queries)]
    pub queries: Option<QueryList>,
    /// Where generated data is cached (default: ./qprof-data/sf<SF>).
    #[arg(long, value_name = "DIR")]
    pub data_dir: Option<PathBuf>,
    /// Run the queries on a Ballista cluster whose scheduler (`qprof cluster scheduler`)
    /// is at this URL, e.g. df://127.0.0.1:50050; the scheduler writes the event log and
    /// serves each query's profile, printed here as in one process (the options of logs,
    /// memory and reads do not apply; those of profiles and function tracking do).
    #[arg(long, value_name = "URL", value_parser = crate::cluster::parse_cluster_url,
          conflicts_with_all = NOT_WITH_CLUSTER)]
    pub cluster: Option<String>,
    #[command(flatten)]
    pub exec: ExecOptions,
}

#[derive(Debug, Args)]
pub(crate) struct SqlArgs {
    /// SQL to run: one statement or several separated by `;`.
    #[arg(required_unless_present = "file", conflicts_with = "file")]
    pub sql: Option<String>,
    /// Run the statements of this file, in order (DDL, COPY and INSERT included).
    #[arg(short = 'f', long = "file", value_name = "FILE")]
    pub file: Option<PathBuf>,
    /// A table to register, as NAME=LOCATION: a file, a directory (Hive-style partitions
    /// too) or a glob of Parquet, CSV or JSON files (repeatable).
    #[arg(long = "table", value_name = "NAME=LOCATION")]
    pub tables: Vec<TableSpec>,
    /// The format of every --table, when their names do not tell it.
    #[arg(long, value_enum)]
    pub format: Option<TableFormat>,
    /// An S3-compatible endpoint for s3:// locations, e.g. http://127.0.0.1:9000 (the
    /// credentials and region come from the standard AWS environment variables).
    #[arg(long, value_name = "URL", value_parser = parse_endpoint)]
    pub s3_endpoint: Option<String>,
    /// Run the statements on a Ballista cluster whose scheduler (`qprof cluster scheduler`)
    /// is at this URL, e.g. df://127.0.0.1:50050; the scheduler writes the event log and
    /// serves each query's profile, printed here as in one process (the options of logs,
    /// memory and reads do not apply; those of profiles and function tracking do).
    /// The executors read local tables by the same absolute paths.
    #[arg(long, value_name = "URL", value_parser = crate::cluster::parse_cluster_url,
          conflicts_with_all = NOT_WITH_CLUSTER, conflicts_with = "s3_endpoint")]
    pub cluster: Option<String>,
    /// Add the `qprof.*` tables (applications, queries, operators, …) over the runs qprof
    /// or Spark logged in this event-log directory or s3:// prefix, e.g. qprof-events.
    #[arg(long, value_name = "DIR|s3://…", conflicts_with = "cluster")]
    pub history: Option<PathBuf>,
    /// Keep the history's replays in this directory, so that later queries over the same
    /// logs read none of them again.
    #[arg(long, value_name = "DIR", requires = "history")]
    pub history_store: Option<PathBuf>,
    #[command(flatten)]
    pub exec: ExecOptions,
}

#[derive(Debug, Subcommand)]
enum BenchCommand {
    /// Overhead of qprof against plain DataFusion on TPC-H, interleaved A/B.
    Overhead(OverheadArgs),
    /// Cost and accuracy of per-function CPU tracking (full and adaptive sampling).
    Functions(FunctionsArgs),
    /// The history server over many applications: copies of one log under new ids.
    History(HistoryArgs),
    /// A history server's first answer about an application (its replay of the log):
    /// qprof's against Spark's, each started afresh, in alternating rounds.
    Replay(ReplayArgs),
}

#[derive(Debug, Args)]
pub(crate) struct ReplayArgs {
    /// The log directory, holding one complete application's log.
    #[arg(long, value_name = "DIR", default_value = "qprof-events")]
    pub log_dir: PathBuf,
    /// Spark's installation (with `bin/spark-class`), to time its history server on the
    /// same log; without it, qprof alone.
    #[arg(long, value_name = "DIR")]
    pub spark_home: Option<PathBuf>,
    /// Rounds, each starting each server afresh; medians are reported.
    #[arg(long, default_value_t = 3, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=100))]
    pub rounds: u32,
}

#[derive(Debug, Args)]
pub(crate) struct HistoryArgs {
    /// Applications in the directory served.
    #[arg(long, default_value_t = 1000, value_name = "N", value_parser = clap::value_parser!(u32).range(10..=1_000_000))]
    pub apps: u32,
    /// The log directory holding the log to copy (its newest complete, uncompressed
    /// rolling log).
    #[arg(long, value_name = "DIR", default_value = "qprof-events")]
    pub from: PathBuf,
    /// Where the copies are written: a new or empty directory, or an earlier run's (cleared
    /// first); removed after unless --keep.
    #[arg(long, value_name = "DIR", default_value = "qprof-bench-history")]
    pub dir: PathBuf,
    /// The replay cache's budget, as `qprof serve --max-memory`.
    #[arg(long, value_name = "SIZE", default_value = "2G", value_parser = parse_size)]
    pub max_memory: usize,
    /// Timed requests per endpoint measurement.
    #[arg(long, default_value_t = 1000, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub requests: u32,
    /// Applications reopened from the disk store and replayed, to compare.
    #[arg(long, default_value_t = 100, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub reopen: u32,
    /// Keep the directory of copies.
    #[arg(long)]
    pub keep: bool,
}

#[derive(Debug, Args)]
pub(crate) struct FunctionsArgs {
    /// Evaluations per measured cell.
    #[arg(long, default_value_t = 10_000, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=10_000_000))]
    pub iterations: u32,
    /// Interleaved rounds; medians are reported.
    #[arg(long, default_value_t = 5, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub rounds: u32,
    /// Vector sizes in rows, e.g. 100,1000,10000.
    #[arg(long, value_name = "LIST", value_delimiter = ',', default_value = "100,1000,10000", value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub sizes: Vec<u32>,
    /// Vectors per run of the accuracy table.
    #[arg(long, default_value_t = 1000, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=10_000_000))]
    pub accuracy_vectors: u32,
}

#[derive(Debug, Args)]
pub(crate) struct OverheadArgs {
    /// TPC-H scale factor.
    #[arg(long, value_name = "SF", allow_negative_numbers = true)]
    pub tpch: ScaleFactor,
    /// Rounds; in one process each runs every query twice plain and twice profiled, as
    /// A B B A after an unmeasured run of A (which side is A alternates); with `--cluster`,
    /// once on each cluster.
    #[arg(long, default_value_t = 5, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub rounds: u32,
    /// Queries to run, e.g. 1,5,9 (default: all 22).
    #[arg(long, value_name = "LIST", value_parser = parse_queries)]
    pub queries: Option<QueryList>,
    /// Where generated data is cached (default: ./qprof-data/sf<SF>).
    #[arg(long, value_name = "DIR")]
    pub data_dir: Option<PathBuf>,
    /// Partitions per operator; default: the number of cores.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..=1024))]
    pub partitions: Option<u16>,
    /// Run one side alone (e.g. under valgrind's callgrind, each side in its own process)
    /// instead of both interleaved; with `--cluster`, that side's cluster alone.
    #[arg(long, value_enum)]
    pub side: Option<BenchSide>,
    /// Compare on two local Ballista clusters (a scheduler and two executors each), one
    /// with qprof inside and one without, instead of in one DataFusion session.
    #[arg(long, conflicts_with_all = ["otlp_endpoint", "otlp_protocol"])]
    pub cluster: bool,
    /// With `--cluster`: leave qprof out of the second cluster too (an A/A run), to see
    /// how far two identical clusters read apart in this harness on this machine.
    #[arg(long, requires = "cluster", conflicts_with = "side")]
    pub control: bool,
    /// The profiled side also samples native stacks this many times per second of CPU
    /// time (qprof.runtime.stack_sample_hz).
    #[arg(long, value_name = "HZ", conflicts_with = "cluster",
          value_parser = clap::value_parser!(u32).range(1..=250))]
    pub sample_stacks: Option<u32>,
    /// With `--sample-stacks`: the baseline is qprof without stack sampling instead of
    /// plain DataFusion, so the ratio is what sampling alone costs (the sampler runs only
    /// while a sampled query does).
    #[arg(long, requires = "sample_stacks", conflicts_with = "side")]
    pub against_unsampled: bool,
    #[command(flatten)]
    pub functions: FunctionTracking,
    /// The profiled side also sends each query's trace to an OpenTelemetry collector.
    #[command(flatten)]
    pub otlp: crate::otlp::OtlpOptions,
}

/// One side of the overhead benchmark.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum BenchSide {
    /// Plain DataFusion.
    Plain,
    /// DataFusion instrumented by qprof.
    Qprof,
}

/// TPC-H query numbers, in the order given, without repeats.
#[derive(Debug, Clone)]
pub(crate) struct QueryList(pub Vec<usize>);

impl QueryList {
    /// The given list, or all queries.
    pub(crate) fn or_all(list: Option<&QueryList>) -> Vec<usize> {
        list.map_or_else(|| (1..=qprof_tpch::QUERY_COUNT).collect(), |l| l.0.clone())
    }
}

fn parse_queries(s: &str) -> Result<QueryList, String> {
    let mut out = Vec::new();
    for part in s.split(',') {
        let part = part.trim();
        let n: usize = part
            .parse()
            .map_err(|_| format!("'{part}' is not a query number"))?;
        if !(1..=qprof_tpch::QUERY_COUNT).contains(&n) {
            return Err(format!(
                "there is no TPC-H query {n} (expected 1 to {})",
                qprof_tpch::QUERY_COUNT
            ));
        }
        if !out.contains(&n) {
            out.push(n);
        }
    }
    Ok(QueryList(out))
}

fn parse_endpoint(s: &str) -> Result<String, String> {
    match url::Url::parse(s) {
        Ok(url) if matches!(url.scheme(), "http" | "https") && url.host().is_some() => {
            Ok(s.trim_end_matches('/').to_string())
        }
        _ => Err(format!("'{s}' is not an http:// or https:// URL")),
    }
}

/// Runs the parsed command.
pub(crate) fn dispatch(cli: Cli) -> Result<()> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    match cli.command {
        Command::Run(args) => match args.cluster.clone() {
            Some(url) => runtime.block_on(crate::cluster::run_tpch(args, &url)),
            None => runtime.block_on(crate::run::run_tpch(args)),
        },
        Command::Cluster(command) => runtime.block_on(crate::cluster::dispatch(command)),
        Command::Sql(args) => match args.cluster.clone() {
            Some(url) => runtime.block_on(crate::cluster::run_sql(args, &url)),
            None => runtime.block_on(crate::run::run_sql(args)),
        },
        Command::Serve(args) => runtime.block_on(crate::serve::serve(args)),
        Command::SqlWorker(args) => runtime.block_on(crate::serve::sql_worker(args)),
        Command::Diff(args) => crate::diff::diff(&args),
        Command::Bench(command) => {
            if cfg!(debug_assertions) {
                eprintln!(
                    "warning: this is a debug build; build with --release for meaningful numbers"
                );
            }
            match command {
                BenchCommand::Overhead(args) if args.cluster => {
                    runtime.block_on(crate::bench_cluster::overhead(args))
                }
                BenchCommand::Overhead(args) => runtime.block_on(crate::bench::overhead(args)),
                BenchCommand::Functions(args) => crate::bench::functions(&args),
                BenchCommand::History(args) => crate::bench_history::history(&args),
                BenchCommand::Replay(args) => runtime.block_on(crate::bench_replay::replay(&args)),
            }
        }
    }
}

/// The directory TPC-H data of `sf` is cached in.
pub(crate) fn data_dir(dir: Option<&PathBuf>, sf: &ScaleFactor) -> PathBuf {
    dir.cloned()
        .unwrap_or_else(|| PathBuf::from("qprof-data").join(sf.dir_name()))
}

/// Fails with a clear message if `dir` exists and is not a directory.
pub(crate) fn check_dir(dir: &std::path::Path) -> Result<()> {
    if dir.exists() && !dir.is_dir() {
        bail!("data dir '{}' exists and is not a directory", dir.display());
    }
    Ok(())
}
