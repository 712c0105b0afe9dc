//! `qprof bench overhead --cluster`: qprof on a Ballista cluster against Ballista alone,
//! interleaved in one process: two local clusters (a scheduler and two executors each),
//! one with qprof's engine and scheduler observer (and its event log), one with
//! Ballista's own, each query run on one then the other.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use datafusion::common::tree_node::{TreeNode, TreeNodeRecursion};
use datafusion::physical_plan::{ExecutionPlan, collect};
use datafusion::prelude::{SessionConfig, SessionContext};
use qprof_ballista::ClusterObserver;
use qprof_ballista::cluster::{
    ExecutorOptions, SchedulerOptions, end_session, remote_session, run_executor, run_scheduler,
};
use qprof_core::clock::{process_cpu_nanos, process_minor_faults};
use qprof_core::events::Listener;
use qprof_datafusion::Profiler;
use qprof_eventlog::EventLogListener;

use crate::bench::{Cost, report, run_alone, tpch_sqls};
use crate::cli::{BenchSide, OverheadArgs, QueryList, data_dir};
use crate::run::prepare_tpch;

/// Executors per cluster.
const EXECUTORS: usize = 2;

/// A port of the loopback address that is free now.
pub(crate) fn free_port() -> Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

/// Starts a scheduler and its executors in this process, with qprof inside if `log_dir` is
/// given (its event logs go there), their shuffle files under `work_dir`; returns the
/// scheduler's URL and its observer.
async fn start_cluster(
    log_dir: Option<&std::path::Path>,
    work_dir: &std::path::Path,
    vcores: usize,
) -> Result<(String, Option<Arc<ClusterObserver>>)> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let scheduler = listener.local_addr()?;
    let observer = log_dir.map(|dir| {
        let dir = dir.to_path_buf();
        ClusterObserver::new(Arc::new(move |_app| {
            vec![Arc::new(EventLogListener::in_dir(dir.clone())) as Arc<dyn Listener>]
        }))
    });
    let options = SchedulerOptions {
        external_host: "127.0.0.1".to_string(),
        ..SchedulerOptions::default()
    };
    let observed = observer.clone();
    tokio::spawn(async move { run_scheduler(listener, observed, &options).await });
    for i in 0..EXECUTORS {
        let work_dir = work_dir.join(format!("executor-{i}"));
        std::fs::create_dir_all(&work_dir).context("cannot create an executor's work dir")?;
        let options = ExecutorOptions {
            scheduler,
            executor_id: None,
            host: "127.0.0.1".to_string(),
            flight_port: free_port()?,
            grpc_port: free_port()?,
            vcores,
            work_dir: Some(work_dir.display().to_string()),
            memory_pool_bytes: None,
            heartbeat_seconds: 1,
        };
        let profiler = log_dir.map(|_| Profiler::new());
        tokio::spawn(async move { run_executor(&options, profiler).await });
    }
    Ok((format!("df://{scheduler}"), observer))
}

/// Waits (a minute at most) until all the executors of the cluster at `url` registered,
/// as its scheduler's readiness probe counts them (Ballista's `/readyz`, and qprof's in
/// its words): each query then has all of them.
async fn executors_registered(url: &str) -> Result<()> {
    let probe = format!("http://{}/readyz", url.trim_start_matches("df://"));
    let http = reqwest::Client::builder()
        .no_proxy()
        .build()
        .context("cannot make an HTTP client")?;
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        // `ready: N executors registered` or `not ready: N/M executors registered`
        let said = match http.get(&probe).send().await {
            Ok(answer) => answer.text().await.unwrap_or_default(),
            Err(_) => String::new(),
        };
        let registered = said
            .split_once(": ")
            .and_then(|(_, rest)| rest.split(['/', ' ']).next())
            .and_then(|n| n.parse::<usize>().ok());
        if registered == Some(EXECUTORS) {
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!("the executors of {url} did not register within a minute: {said:?}");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A client session on `url` (it connects with its first query).
async fn connect(url: &str, config: &SessionConfig) -> Result<SessionContext> {
    remote_session(url, config.clone())
        .await
        .map_err(|e| anyhow::anyhow!("{}", qprof_datafusion::error_line(&e)))
        .with_context(|| format!("cannot open a session on {url}"))
}

/// Runs `sql` once: its wall time is the client's, from SQL text to the last batch; its CPU
/// time, the whole process's until then, or until `observer` has posted (and logged)
/// everything the query left it, so that no profile is built or written while the
/// other cluster's next query runs; its job's time, the scheduler's, as the client's plan
/// reports it (in milliseconds: it leaves out planning on the client and fetching the
/// results).
async fn time_query(
    ctx: &SessionContext,
    sql: &str,
    observer: Option<&ClusterObserver>,
) -> Result<Cost> {
    let (start, cpu, faults) = (Instant::now(), process_cpu_nanos(), process_minor_faults());
    let plan = ctx.sql(sql).await?.create_physical_plan().await?;
    collect(Arc::clone(&plan), ctx.task_ctx()).await?;
    let wall = start.elapsed();
    if let Some(observer) = observer {
        observer.flushed().await;
    }
    Ok(Cost {
        wall,
        cpu: Duration::from_nanos(process_cpu_nanos().saturating_sub(cpu)),
        job: job_time(&plan)?,
        faults: process_minor_faults().saturating_sub(faults),
    })
}

/// The job's time on the cluster, from the client's distributed plan: its time queued and
/// planned on the scheduler and its time executing.
fn job_time(plan: &Arc<dyn ExecutionPlan>) -> Result<Duration> {
    let mut millis = None;
    plan.apply(|node| {
        if let Some(metrics) = node.metrics()
            && let (Some(queued), Some(executing)) = (
                metrics.sum_by_name("job_scheduling_in_ms"),
                metrics.sum_by_name("job_execution_time_ms"),
            )
        {
            millis = Some(queued.as_usize() + executing.as_usize());
            return Ok(TreeNodeRecursion::Stop);
        }
        Ok(TreeNodeRecursion::Continue)
    })?;
    let millis = millis.context("the client's plan reports no job time")?;
    Ok(Duration::from_millis(millis as u64))
}

pub(crate) async fn overhead(args: OverheadArgs) -> Result<()> {
    let dir = std::path::absolute(data_dir(args.data_dir.as_ref(), &args.tpch))
        .context("cannot resolve the data directory")?;
    let paths = prepare_tpch(&args.tpch, &dir)?;
    // the event logs and both clusters' shuffle files, removed at the end
    let scratch = tempfile::Builder::new()
        .prefix("qprof-bench-cluster-")
        .tempdir()
        .context("cannot create a directory for the event logs and shuffle files")?;
    let logs = scratch.path().join("logs");
    std::fs::create_dir_all(&logs).context("cannot create a directory for the event logs")?;
    let cores = std::thread::available_parallelism().map_or(1, usize::from);
    let vcores = (cores / EXECUTORS).max(1);
    let mut config = SessionConfig::new();
    if let Some(n) = args.partitions {
        config = config.with_target_partitions(usize::from(n));
    }
    let queries = QueryList::or_all(args.queries.as_ref());
    let sqls = tpch_sqls(&queries)?;
    if let Some(side) = args.side {
        let log_dir = matches!(side, BenchSide::Qprof).then_some(logs.as_path());
        let (url, observer) = start_cluster(log_dir, scratch.path(), vcores).await?;
        let ctx = connect(&url, &config).await?;
        executors_registered(&url).await?;
        qprof_tpch::register_all(&ctx, &paths).await?;
        let observer = observer.as_deref();
        run_alone(
            &format!("{side:?} cluster"),
            &queries,
            args.rounds,
            async |i| time_query(&ctx, sqls[i], observer).await,
        )
        .await?;
        end_session(&url, &ctx.session_id()).await?;
        return Ok(());
    }
    let (plain_url, _) = start_cluster(None, &scratch.path().join("plain"), vcores).await?;
    // an A/A run starts the second cluster as plain as the first
    let second_logs = (!args.control).then_some(logs.as_path());
    let (qprof_url, observer) =
        start_cluster(second_logs, &scratch.path().join("qprof"), vcores).await?;
    let observer = observer.as_deref();
    let plain = connect(&plain_url, &config).await?;
    let profiled = connect(&qprof_url, &config).await?;
    executors_registered(&plain_url).await?;
    executors_registered(&qprof_url).await?;
    qprof_tpch::register_all(&plain, &paths).await?;
    qprof_tpch::register_all(&profiled, &paths).await?;
    for sql in &sqls {
        time_query(&plain, sql, None).await?;
        time_query(&profiled, sql, observer).await?;
    }
    let rounds = args.rounds as usize;
    let mut plain_times = vec![vec![Cost::default(); rounds]; queries.len()];
    let mut profiled_times = plain_times.clone();
    for round in 0..rounds {
        for (i, sql) in sqls.iter().enumerate() {
            if (round + i) % 2 == 0 {
                plain_times[i][round] = time_query(&plain, sql, None).await?;
                profiled_times[i][round] = time_query(&profiled, sql, observer).await?;
            } else {
                profiled_times[i][round] = time_query(&profiled, sql, observer).await?;
                plain_times[i][round] = time_query(&plain, sql, None).await?;
            }
        }
        let total = |times: &[Vec<Cost>]| times.iter().map(|t| t[round].wall).sum::<Duration>();
        eprintln!(
            "round {}/{} done: qprof/plain {:.3}",
            round + 1,
            rounds,
            total(&profiled_times).as_secs_f64() / total(&plain_times).as_secs_f64().max(1e-9)
        );
    }
    if args.control {
        println!(
            "control (A/A) run: qprof is off on both clusters; \"qprof\" below is the second plain cluster"
        );
    }
    println!(
        "qprof overhead on Ballista, TPC-H SF {}, {EXECUTORS} executors x {vcores} task slots per cluster, {rounds} rounds: medians; ratios are medians over rounds of qprof/plain (cpu: this whole process, both clusters; job: the scheduler's time from accepting the job to its end)",
        args.tpch
    );
    report(
        crate::bench::PLAIN_AGAINST_QPROF,
        &queries,
        &plain_times,
        &profiled_times,
    );
    end_session(&qprof_url, &profiled.session_id()).await?;
    Ok(())
}
