//! `qprof bench overhead`: qprof against plain DataFusion, interleaved in one process.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use datafusion::execution::runtime_env::RuntimeEnv;
use datafusion::prelude::SessionContext;
use qprof_core::alloc;
use qprof_datafusion::{ProfilingSession, plain_context};

use crate::cli::{OverheadArgs, QueryList, data_dir};
use crate::run::{median, millis, prepare_tpch, session_config};

async fn time_plain(ctx: &SessionContext, sql: &str) -> Result<Duration> {
    alloc::set_counting(false);
    let start = Instant::now();
    let result = ctx.sql(sql).await?.collect().await;
    let elapsed = start.elapsed();
    alloc::set_counting(true);
    result?;
    Ok(elapsed)
}

async fn time_profiled(session: &ProfilingSession, q: usize, sql: &str) -> Result<Duration> {
    let start = Instant::now();
    session.run(q, sql).await?;
    Ok(start.elapsed())
}

pub async fn overhead(args: OverheadArgs) -> Result<()> {
    let dir = data_dir(args.data_dir.as_ref(), &args.tpch);
    let paths = prepare_tpch(&args.tpch, &dir)?;
    let runtime = Arc::new(RuntimeEnv::default());
    let config = session_config(args.partitions);
    let plain = plain_context(config.clone(), Arc::clone(&runtime));
    let profiled = ProfilingSession::with_runtime(config, runtime);
    qprof_tpch::register_all(&plain, &paths).await?;
    qprof_tpch::register_all(profiled.context(), &paths).await?;
    let queries = QueryList::or_all(args.queries.as_ref());
    let sqls: Vec<&str> = queries
        .iter()
        .map(|&q| qprof_tpch::query(q).with_context(|| format!("no TPC-H query {q}")))
        .collect::<Result<_>>()?;

    // warm-up: page cache, lazy initialisation
    for (&q, sql) in queries.iter().zip(&sqls) {
        time_plain(&plain, sql).await?;
        time_profiled(&profiled, q, sql).await?;
    }
    let rounds = args.rounds as usize;
    let mut plain_times = vec![vec![Duration::ZERO; rounds]; queries.len()];
    let mut profiled_times = plain_times.clone();
    for round in 0..rounds {
        for (i, (&q, sql)) in queries.iter().zip(&sqls).enumerate() {
            // alternate which side goes first, so neither profits from the other's caches
            if (round + i) % 2 == 0 {
                plain_times[i][round] = time_plain(&plain, sql).await?;
                profiled_times[i][round] = time_profiled(&profiled, q, sql).await?;
            } else {
                profiled_times[i][round] = time_profiled(&profiled, q, sql).await?;
                plain_times[i][round] = time_plain(&plain, sql).await?;
            }
        }
        eprintln!("round {}/{} done", round + 1, rounds);
    }
    println!(
        "qprof overhead, TPC-H SF {}, {} rounds, medians (ratio = median over rounds of qprof/plain)",
        args.tpch, rounds
    );
    println!(
        "{:>6} {:>12} {:>12} {:>8}",
        "query", "plain ms", "qprof ms", "ratio"
    );
    for (i, q) in queries.iter().enumerate() {
        let mut p: Vec<f64> = plain_times[i].iter().map(|d| millis(*d)).collect();
        let mut f: Vec<f64> = profiled_times[i].iter().map(|d| millis(*d)).collect();
        let mut ratios: Vec<f64> = (0..rounds)
            .map(|r| millis(profiled_times[i][r]) / millis(plain_times[i][r]).max(1e-9))
            .collect();
        println!(
            "{:>6} {:>12.1} {:>12.1} {:>8.3}",
            format!("q{q}"),
            median(&mut p),
            median(&mut f),
            median(&mut ratios)
        );
    }
    let round_total =
        |times: &Vec<Vec<Duration>>, r: usize| -> f64 { times.iter().map(|t| millis(t[r])).sum() };
    let mut total_plain: Vec<f64> = (0..rounds).map(|r| round_total(&plain_times, r)).collect();
    let mut total_profiled: Vec<f64> = (0..rounds)
        .map(|r| round_total(&profiled_times, r))
        .collect();
    let mut total_ratios: Vec<f64> = (0..rounds)
        .map(|r| round_total(&profiled_times, r) / round_total(&plain_times, r).max(1e-9))
        .collect();
    let ratio = median(&mut total_ratios);
    println!(
        "{:>6} {:>12.1} {:>12.1} {:>8.3}",
        "total",
        median(&mut total_plain),
        median(&mut total_profiled),
        ratio
    );
    println!("overhead ratio: {ratio:.3}");
    Ok(())
}
