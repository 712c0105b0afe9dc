//! `qprof bench overhead`: qprof against plain DataFusion, interleaved in one process.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use datafusion::execution::runtime_env::RuntimeEnv;
use datafusion::prelude::SessionContext;
use qprof_core::alloc;
use qprof_core::clock::process_cpu_nanos;
use qprof_datafusion::{ProfilingSession, plain_context};

use crate::cli::{OverheadArgs, QueryList, data_dir};
use crate::run::{median, millis, prepare_tpch, session_config};

/// Wall time and process CPU time of one query run.
#[derive(Debug, Clone, Copy, Default)]
struct Cost {
    wall: Duration,
    cpu: Duration,
}

async fn time_plain(ctx: &SessionContext, sql: &str) -> Result<Cost> {
    alloc::set_counting(false);
    let (start, cpu) = (Instant::now(), process_cpu_nanos());
    let result = ctx.sql(sql).await?.collect().await;
    let cost = Cost {
        wall: start.elapsed(),
        cpu: Duration::from_nanos(process_cpu_nanos().saturating_sub(cpu)),
    };
    alloc::set_counting(true);
    result?;
    Ok(cost)
}

async fn time_profiled(session: &ProfilingSession, q: usize, sql: &str) -> Result<Cost> {
    let (start, cpu) = (Instant::now(), process_cpu_nanos());
    session.run(q, sql).await?;
    Ok(Cost {
        wall: start.elapsed(),
        cpu: Duration::from_nanos(process_cpu_nanos().saturating_sub(cpu)),
    })
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
    let mut plain_times = vec![vec![Cost::default(); rounds]; queries.len()];
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
        "qprof overhead, TPC-H SF {}, {} rounds: medians; ratios are medians over rounds of qprof/plain",
        args.tpch, rounds
    );
    println!(
        "{:>6} {:>10} {:>10} {:>8} {:>11} {:>11} {:>8}",
        "query", "plain ms", "qprof ms", "ratio", "plain cpu", "qprof cpu", "cpu"
    );
    let wall = |c: &Cost| millis(c.wall);
    let cpu = |c: &Cost| millis(c.cpu);
    let row = |label: String, plain: Vec<Cost>, profiled: Vec<Cost>| -> f64 {
        let med = |costs: &[Cost], f: &dyn Fn(&Cost) -> f64| {
            median(&mut costs.iter().map(f).collect::<Vec<_>>())
        };
        let ratio = |f: &dyn Fn(&Cost) -> f64| {
            let mut r: Vec<f64> = plain
                .iter()
                .zip(&profiled)
                .map(|(p, q)| f(q) / f(p).max(1e-9))
                .collect();
            median(&mut r)
        };
        let wall_ratio = ratio(&wall);
        println!(
            "{label:>6} {:>10.1} {:>10.1} {:>8.3} {:>11.1} {:>11.1} {:>8.3}",
            med(&plain, &wall),
            med(&profiled, &wall),
            wall_ratio,
            med(&plain, &cpu),
            med(&profiled, &cpu),
            ratio(&cpu)
        );
        wall_ratio
    };
    for (i, q) in queries.iter().enumerate() {
        row(
            format!("q{q}"),
            plain_times[i].clone(),
            profiled_times[i].clone(),
        );
    }
    let totals = |times: &Vec<Vec<Cost>>| -> Vec<Cost> {
        (0..rounds)
            .map(|r| Cost {
                wall: times.iter().map(|t| t[r].wall).sum(),
                cpu: times.iter().map(|t| t[r].cpu).sum(),
            })
            .collect()
    };
    let ratio = row(
        "total".to_string(),
        totals(&plain_times),
        totals(&profiled_times),
    );
    println!("overhead ratio: {ratio:.3}");
    Ok(())
}
