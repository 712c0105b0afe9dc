//! `qprof bench overhead`: qprof against plain DataFusion, interleaved in one process;
//! `qprof bench functions`: what function tracking costs, and how close sampling gets.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use datafusion::execution::SessionStateBuilder;
use datafusion::execution::runtime_env::RuntimeEnv;
use datafusion::prelude::{SessionConfig, SessionContext};
use qprof_core::alloc;
use qprof_core::call_site::timer_costs;
use qprof_core::clock::{process_cpu_nanos, process_minor_faults};
use qprof_core::sampling::median;
use qprof_datafusion::ProfilingSession;
use qprof_datafusion::function_bench::{BenchFunction, BenchInput, Variant};

use crate::cli::{BenchSide, FunctionsArgs, OverheadArgs, QueryList, data_dir};
use crate::run::{millis, prepare_tpch, session_config};

/// A plain DataFusion context with the configuration a profiled session gets, without
/// instrumentation: the baseline.
fn plain_context(config: SessionConfig, runtime: Arc<RuntimeEnv>) -> SessionContext {
    let state = SessionStateBuilder::new()
        .with_config(config)
        .with_runtime_env(runtime)
        .with_default_features()
        .build();
    SessionContext::new_with_state(state)
}

/// Wall time and process CPU time of one query run, and on a cluster the job's own time.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Cost {
    pub(crate) wall: Duration,
    pub(crate) cpu: Duration,
    /// On a cluster: the job's time there, from the scheduler's accepting it to its last
    /// stage's end (milliseconds, as the scheduler reports it); zero in one process.
    pub(crate) job: Duration,
    /// Minor page faults of the whole process during the run: memory the allocator had
    /// returned to the kernel (or never had) and touched again.
    pub(crate) faults: u64,
}

impl Cost {
    /// The mean of two runs' costs.
    fn mean(self, other: Cost) -> Cost {
        Cost {
            wall: (self.wall + other.wall) / 2,
            cpu: (self.cpu + other.cpu) / 2,
            job: (self.job + other.job) / 2,
            faults: (self.faults + other.faults) / 2,
        }
    }
}

async fn time_plain(ctx: &SessionContext, sql: &str) -> Result<Cost> {
    alloc::set_counting(false);
    let (start, cpu, faults) = (Instant::now(), process_cpu_nanos(), process_minor_faults());
    let result = ctx.sql(sql).await?.collect().await;
    let cost = Cost {
        wall: start.elapsed(),
        cpu: Duration::from_nanos(process_cpu_nanos().saturating_sub(cpu)),
        job: Duration::ZERO,
        faults: process_minor_faults().saturating_sub(faults),
    };
    alloc::set_counting(true);
    result?;
    Ok(cost)
}

async fn time_profiled(session: &ProfilingSession, q: usize, sql: &str) -> Result<Cost> {
    let (start, cpu, faults) = (Instant::now(), process_cpu_nanos(), process_minor_faults());
    session.run(q, sql).await?;
    Ok(Cost {
        wall: start.elapsed(),
        cpu: Duration::from_nanos(process_cpu_nanos().saturating_sub(cpu)),
        job: Duration::ZERO,
        faults: process_minor_faults().saturating_sub(faults),
    })
}

pub(crate) async fn overhead(args: OverheadArgs) -> Result<()> {
    let config = session_config(args.partitions, &args.functions, args.sample_stacks)?;
    let dir = data_dir(args.data_dir.as_ref(), &args.tpch);
    let paths = prepare_tpch(&args.tpch, &dir)?;
    let runtime = Arc::new(RuntimeEnv::default());
    let plain = plain_context(config.clone(), Arc::clone(&runtime));
    let unsampled = if args.against_unsampled {
        Some(ProfilingSession::with_runtime(
            session_config(args.partitions, &args.functions, None)?,
            Arc::clone(&runtime),
        ))
    } else {
        None
    };
    let profiled = ProfilingSession::with_runtime(config, runtime);
    qprof_tpch::register_all(&plain, &paths).await?;
    qprof_tpch::register_all(profiled.context(), &paths).await?;
    if let Some(unsampled) = &unsampled {
        qprof_tpch::register_all(unsampled.context(), &paths).await?;
    }
    // the baseline: plain DataFusion, or qprof without stack sampling
    let time_baseline = async |q: usize, sql: &str| match &unsampled {
        Some(unsampled) => time_profiled(unsampled, q, sql).await,
        None => time_plain(&plain, sql).await,
    };
    let sides = if unsampled.is_some() {
        ["unsamp", "sampled"]
    } else {
        PLAIN_AGAINST_QPROF
    };
    let queries = QueryList::or_all(args.queries.as_ref());
    let sqls = tpch_sqls(&queries)?;
    let traces = match args.otlp.listener()? {
        Some(listener) => Some(crate::otlp::export_traces(profiled.profiler(), listener)?),
        None => None,
    };
    if let Some(side) = args.side {
        return one_side(side, &plain, &profiled, &queries, &sqls, args.rounds).await;
    }
    let updater_cpu_before = updater_cpu();
    let bench_start = Instant::now();

    // warm-up: page cache, lazy initialisation
    for (&q, sql) in queries.iter().zip(&sqls) {
        time_baseline(q, sql).await?;
        time_profiled(&profiled, q, sql).await?;
    }
    let rounds = args.rounds as usize;
    let mut plain_times = vec![vec![Cost::default(); rounds]; queries.len()];
    let mut profiled_times = plain_times.clone();
    // names are resolved once per code address and process: mostly in the first round
    let mut resolving_in_first_round = 0;
    for round in 0..rounds {
        for (i, (&q, sql)) in queries.iter().zip(&sqls).enumerate() {
            // each side twice, as A B B A, and which side is A alternates: a run that goes
            // better or worse after the other side's is first and second once a round, so
            // neither side profits from the order, however many rounds. Before them one
            // unmeasured run of A: a query's first run after the others costs more (what
            // they left in the caches and the heap; q5 at SF 1 up to a fifth more CPU),
            // which would otherwise fall on A alone, on one side more often when the
            // rounds are odd
            let baseline_first = (round + i) % 2 == 0;
            let run = async |baseline: bool| match baseline {
                true => time_baseline(q, sql).await,
                false => time_profiled(&profiled, q, sql).await,
            };
            run(baseline_first).await?;
            let a = run(baseline_first).await?;
            let b = run(!baseline_first)
                .await?
                .mean(run(!baseline_first).await?);
            let a = a.mean(run(baseline_first).await?);
            let (baseline_cost, profiled_cost) = if baseline_first { (a, b) } else { (b, a) };
            plain_times[i][round] = baseline_cost;
            profiled_times[i][round] = profiled_cost;
        }
        eprintln!("round {}/{} done", round + 1, rounds);
        if round == 0 {
            resolving_in_first_round = qprof_core::stacks::SamplingSession::cost().resolving_nanos;
        }
    }
    println!(
        "qprof overhead, TPC-H SF {}, {} rounds of each side twice (A B B A, after a warm-up run of A): medians; ratios are medians over rounds of {}/{}",
        args.tpch, rounds, sides[1], sides[0]
    );
    report(sides, &queries, &plain_times, &profiled_times);
    let elapsed = bench_start.elapsed().as_secs_f64();
    if args.sample_stacks.is_some() {
        let cost = qprof_core::stacks::SamplingSession::cost();
        let profiled_cpu: f64 = profiled_times
            .iter()
            .flatten()
            .map(|c| c.cpu.as_secs_f64())
            .sum();
        let share = |nanos: u64| nanos as f64 / 1e9 * 100.0 / profiled_cpu.max(1e-9);
        println!(
            "stack sampler: {} samples, {:.1} µs each in the signal handler ({:.3}% of the profiled side's CPU); resolving names {:.2} ms ({:.3}%), {:.2} ms of it in the first round, {:.2} ms beside the queries rather than at their ends",
            cost.samples,
            cost.handler_nanos as f64 / 1e3 / cost.samples.max(1) as f64,
            share(cost.handler_nanos),
            cost.resolving_nanos as f64 / 1e6,
            share(cost.resolving_nanos),
            resolving_in_first_round as f64 / 1e6,
            cost.resolving_ahead_nanos as f64 / 1e6,
        );
    }
    let updater = (updater_cpu().saturating_sub(updater_cpu_before)) as f64 / 1e9;
    println!(
        "periodic updater thread: {:.2} ms cpu in {elapsed:.1} s ({:.4}% of one core)",
        updater * 1e3,
        100.0 * updater / elapsed.max(1e-9)
    );
    if let Some(traces) = traces {
        report_export(&traces);
    }
    Ok(())
}

/// What exporting the profiled side's traces cost, per query.
fn report_export(traces: &qprof_otel::OtlpListener) {
    traces.flush(qprof_otel::DEFAULT_SHUTDOWN_TIMEOUT);
    let s = traces.status();
    let per = |v: u64| v as f64 / s.traces.max(1) as f64;
    println!(
        "OpenTelemetry export ({}): {} traces, {:.0} spans each; building {:.1} µs per query on the query's thread, sending {:.1} µs per query on the exporter's; {} spans exported, {} dropped, {} failed batches",
        s.protocol,
        s.traces,
        per(s.exported_spans + s.dropped_spans),
        per(s.build_nanos) / 1e3,
        per(s.send_nanos) / 1e3,
        s.exported_spans,
        s.dropped_spans,
        s.failed_exports
    );
}

/// The two sides' names in the report's columns: the plain engine against qprof.
pub(crate) const PLAIN_AGAINST_QPROF: [&str; 2] = ["plain", "qprof"];

/// Prints each query's medians and measured/baseline ratios over the rounds
/// (`times[query][round]`) and the total's (with the jobs' own times on a cluster), and
/// returns the total's wall-time ratio. `sides` names the baseline and the measured side.
pub(crate) fn report(
    sides: [&str; 2],
    queries: &[usize],
    plain_times: &[Vec<Cost>],
    profiled_times: &[Vec<Cost>],
) -> f64 {
    let rounds = plain_times.first().map_or(0, Vec::len);
    let jobs = plain_times.iter().flatten().any(|c| !c.job.is_zero());
    let [base, measured] = sides;
    print!(
        "{:>6} {:>10} {:>10} {:>8} {:>11} {:>11} {:>8}",
        "query",
        format!("{base} ms"),
        format!("{measured} ms"),
        "ratio",
        format!("{base} cpu"),
        format!("{measured} cpu"),
        "cpu"
    );
    if jobs {
        print!(
            " {:>10} {:>10} {:>8}",
            format!("{base} job"),
            format!("{measured} job"),
            "job"
        );
    }
    println!();
    let wall = |c: &Cost| millis(c.wall);
    let cpu = |c: &Cost| millis(c.cpu);
    let job = |c: &Cost| millis(c.job);
    // medians of each side and of the ratios of each round
    let row = |label: &str, plain: &[Cost], profiled: &[Cost]| -> [f64; 3] {
        let med = |costs: &[Cost], f: &dyn Fn(&Cost) -> f64| {
            median(&mut costs.iter().map(f).collect::<Vec<_>>())
        };
        let ratio = |f: &dyn Fn(&Cost) -> f64| {
            let mut r: Vec<f64> = plain
                .iter()
                .zip(profiled)
                .map(|(p, q)| f(q) / f(p).max(1e-9))
                .collect();
            median(&mut r)
        };
        let ratios = [ratio(&wall), ratio(&cpu), ratio(&job)];
        print!(
            "{label:>6} {:>10.1} {:>10.1} {:>8.3} {:>11.1} {:>11.1} {:>8.3}",
            med(plain, &wall),
            med(profiled, &wall),
            ratios[0],
            med(plain, &cpu),
            med(profiled, &cpu),
            ratios[1]
        );
        if jobs {
            print!(
                " {:>10.1} {:>10.1} {:>8.3}",
                med(plain, &job),
                med(profiled, &job),
                ratios[2]
            );
        }
        println!();
        ratios
    };
    for (i, q) in queries.iter().enumerate() {
        row(&format!("q{q}"), &plain_times[i], &profiled_times[i]);
    }
    let totals = |times: &[Vec<Cost>]| -> Vec<Cost> {
        (0..rounds)
            .map(|r| Cost {
                wall: times.iter().map(|t| t[r].wall).sum(),
                cpu: times.iter().map(|t| t[r].cpu).sum(),
                job: times.iter().map(|t| t[r].job).sum(),
                faults: times.iter().map(|t| t[r].faults).sum(),
            })
            .collect()
    };
    let (plain_totals, profiled_totals) = (totals(plain_times), totals(profiled_times));
    let [ratio, _, job_ratio] = row("total", &plain_totals, &profiled_totals);
    println!("overhead ratio: {ratio:.3}");
    print_spread("wall", &plain_totals, &profiled_totals, wall);
    print_faults(sides, queries, plain_times, profiled_times);
    if jobs {
        println!("overhead ratio of the jobs on the cluster: {job_ratio:.3}");
        print_spread("jobs", &plain_totals, &profiled_totals, job);
    }
    ratio
}

/// Prints each side's minor page faults per run (thousands, medians over the rounds), per
/// query: memory touched afresh, which the allocator's state before the run decides as
/// much as the run itself.
fn print_faults(
    sides: [&str; 2],
    queries: &[usize],
    plain_times: &[Vec<Cost>],
    profiled_times: &[Vec<Cost>],
) {
    let thousands = |costs: &[Cost]| {
        median(
            &mut costs
                .iter()
                .map(|c| c.faults as f64 / 1e3)
                .collect::<Vec<_>>(),
        )
    };
    let per_query: Vec<String> = queries
        .iter()
        .zip(plain_times.iter().zip(profiled_times))
        .map(|(q, (p, m))| format!("q{q} {:.1}/{:.1}", thousands(p), thousands(m)))
        .collect();
    println!(
        "minor page faults per run, thousands ({}/{}): {}",
        sides[0],
        sides[1],
        per_query.join(", ")
    );
}

/// Prints the spread of the rounds' qprof/plain ratios of `f` over all queries.
fn print_spread(what: &str, plain: &[Cost], profiled: &[Cost], f: impl Fn(&Cost) -> f64) {
    let mut spread: Vec<f64> = plain
        .iter()
        .zip(profiled)
        .map(|(p, q)| f(q) / f(p).max(1e-9))
        .collect();
    if spread.is_empty() {
        return;
    }
    spread.sort_by(f64::total_cmp);
    let at = |q: f64| spread[((spread.len() - 1) as f64 * q).round() as usize];
    println!(
        "round ratios ({what}, all queries): min {:.3}, quartiles {:.3} {:.3} {:.3}, max {:.3} over {} rounds",
        at(0.0),
        at(0.25),
        at(0.5),
        at(0.75),
        at(1.0),
        spread.len()
    );
    let (low, high) = median_interval(&spread, MEDIAN_RESAMPLES, MEDIAN_SEED);
    println!(
        "  their median's 95% interval: {low:.3} to {high:.3} ({MEDIAN_RESAMPLES} bootstrap resamples of the rounds)"
    );
}

/// Resamples of the rounds for the median's interval, and their fixed seed (the same
/// rounds give the same interval).
const MEDIAN_RESAMPLES: usize = 2_000;
const MEDIAN_SEED: u64 = 0x5EED;

/// The 2.5 % and 97.5 % points of the medians of `resamples` bootstrap resamples of
/// `values` (each as many values, drawn with replacement): how far the median of rounds
/// like these would move. `(NaN, NaN)` for no values.
fn median_interval(values: &[f64], resamples: usize, seed: u64) -> (f64, f64) {
    if values.is_empty() || resamples == 0 {
        return (f64::NAN, f64::NAN);
    }
    // xorshift64*: enough to draw indices, and the same for the same seed
    let mut state = seed | 1;
    let mut next = move || {
        state ^= state >> 12;
        state ^= state << 25;
        state ^= state >> 27;
        state.wrapping_mul(0x2545_F491_4F6C_DD1D)
    };
    let n = values.len();
    let mut sample = vec![0.0; n];
    let mut medians: Vec<f64> = (0..resamples)
        .map(|_| {
            for slot in &mut sample {
                *slot = values[(next() % n as u64) as usize];
            }
            sample.sort_by(f64::total_cmp);
            if n % 2 == 1 {
                sample[n / 2]
            } else {
                (sample[n / 2 - 1] + sample[n / 2]) / 2.0
            }
        })
        .collect();
    medians.sort_by(f64::total_cmp);
    let at = |q: f64| medians[((resamples - 1) as f64 * q).round() as usize];
    (at(0.025), at(0.975))
}

/// CPU time of the process's periodic updater thread so far, in nanoseconds.
fn updater_cpu() -> u64 {
    qprof_core::periodic::PeriodicUpdater::process().map_or(0, |u| u.thread_cpu_nanos())
}

/// The SQL of each TPC-H query in `queries`.
pub(crate) fn tpch_sqls(queries: &[usize]) -> Result<Vec<&'static str>> {
    queries
        .iter()
        .map(|&q| qprof_tpch::query(q).with_context(|| format!("no TPC-H query {q}")))
        .collect()
}

/// Runs the queries on one side only, `rounds` times after one warm-up, and prints the
/// totals: the form to run under a profiler such as callgrind, one side per process.
async fn one_side(
    side: BenchSide,
    plain: &SessionContext,
    profiled: &ProfilingSession,
    queries: &[usize],
    sqls: &[&str],
    rounds: u32,
) -> Result<()> {
    run_alone(
        &format!("{side:?}"),
        queries,
        rounds,
        async |i| match side {
            BenchSide::Plain => time_plain(plain, sqls[i]).await,
            BenchSide::Qprof => time_profiled(profiled, queries[i], sqls[i]).await,
        },
    )
    .await
}

/// Runs each of `queries` (by index) through `time`, `rounds` times after one warm-up,
/// and prints the totals of the rounds under `label`, then each query's median wall time,
/// so that runs of each side alone can be compared query by query.
pub(crate) async fn run_alone(
    label: &str,
    queries: &[usize],
    rounds: u32,
    mut time: impl AsyncFnMut(usize) -> Result<Cost>,
) -> Result<()> {
    let mut total = Cost::default();
    let mut walls = vec![Vec::new(); queries.len()];
    for round in 0..=rounds {
        for (i, query_walls) in walls.iter_mut().enumerate() {
            let cost = time(i).await?;
            if round > 0 {
                total.wall += cost.wall;
                total.cpu += cost.cpu;
                total.job += cost.job;
                total.faults += cost.faults;
                query_walls.push(millis(cost.wall));
            }
        }
    }
    print!(
        "{label} alone, {} queries x {rounds} rounds after a warm-up: {:.1} ms wall, {:.1} ms cpu",
        queries.len(),
        millis(total.wall),
        millis(total.cpu)
    );
    if !total.job.is_zero() {
        print!(", {:.0} ms of jobs on the cluster", millis(total.job));
    }
    println!(
        ", {:.1} thousand minor page faults",
        total.faults as f64 / 1e3
    );
    let medians: Vec<String> = queries
        .iter()
        .zip(&mut walls)
        .map(|(q, query_walls)| format!("q{q} {:.1}", median(query_walls)))
        .collect();
    println!("median ms per query: {}", medians.join(", "));
    Ok(())
}

/// `qprof bench functions`: the cost and the accuracy of function tracking, per function
/// and vector size, each variant interleaved with the others in every round.
pub(crate) fn functions(args: &FunctionsArgs) -> Result<()> {
    let costs = timer_costs();
    println!(
        "timers: cpu+wall {:.0} ns, wall {:.0} ns per measured vector, bookkeeping included (medians)",
        costs.cpu_timer_nanos, costs.wall_timer_nanos
    );
    println!(
        "speed: {} evaluations per cell, median of {} interleaved rounds; % = median of no-tracking time / time per round",
        args.iterations, args.rounds
    );
    let header = Variant::ALL.map(|v| v.to_string());
    println!(
        "{:<18} {:>14} {:>22} {:>22} {:>22}",
        "case", header[0], header[1], header[2], header[3]
    );
    let mut accuracy = Vec::new();
    for function in BenchFunction::ALL {
        for &rows in &args.sizes {
            let input = BenchInput::new(function, rows as usize);
            let mut times = vec![Vec::new(); Variant::ALL.len()];
            for round in 0..args.rounds {
                // rotate the order so no variant always runs first
                for k in 0..Variant::ALL.len() {
                    let i = (k + round as usize) % Variant::ALL.len();
                    let (elapsed, _) = input.run(Variant::ALL[i], args.iterations)?;
                    times[i].push(elapsed.as_secs_f64());
                }
            }
            // speed relative to no tracking in the same round
            let speeds = paired_medians(&times, |time, plain| plain / time.max(1e-12));
            let medians: Vec<f64> = times.iter_mut().map(|t| median(t)).collect();
            let cell = |i: usize| {
                if i == 0 {
                    format!("{:>14}", fmt_secs(medians[0]))
                } else {
                    format!("{:>12} ({:>6.1}%)", fmt_secs(medians[i]), 100.0 * speeds[i])
                }
            };
            println!(
                "{:<18} {} {:>22} {:>22} {:>22}",
                format!("{}, {rows}", function.name()),
                cell(0),
                cell(1),
                cell(2),
                cell(3)
            );
            accuracy.push(accuracy_row(&input, function, args)?);
        }
    }
    println!();
    println!(
        "accuracy: CPU over {} vectors, median of {} runs each; error = median of estimate / full - 1 per round",
        args.accuracy_vectors, args.rounds
    );
    println!(
        "{:<18} {:>12} {:>26} {:>26}",
        "case", "full", "adaptive 1%", "adaptive 0.5%"
    );
    for line in accuracy {
        println!("{line}");
    }
    Ok(())
}

/// For each column of per-round values, the median over rounds of `compare(value, first)`
/// where `first` is the first column's value in the same round: pairing by round cancels
/// the machine's drift between rounds.
fn paired_medians(columns: &[Vec<f64>], compare: impl Fn(f64, f64) -> f64) -> Vec<f64> {
    columns
        .iter()
        .map(|column| {
            let mut paired: Vec<f64> = column
                .iter()
                .zip(&columns[0])
                .map(|(&value, &first)| compare(value, first))
                .collect();
            median(&mut paired)
        })
        .collect()
}

fn accuracy_row(
    input: &BenchInput,
    function: BenchFunction,
    args: &FunctionsArgs,
) -> Result<String> {
    let variants = [
        Variant::Full,
        Variant::Adaptive(1.0),
        Variant::Adaptive(0.5),
    ];
    let mut cpu = vec![Vec::new(); variants.len()];
    let mut modes = vec![String::new(); variants.len()];
    for _ in 0..args.rounds {
        for (i, &v) in variants.iter().enumerate() {
            let (_, profile) = input.run(v, args.accuracy_vectors)?;
            let profile = profile.context("a tracked run has a profile")?;
            cpu[i].push(profile.cpu_nanos as f64);
            modes[i] = profile.mode;
        }
    }
    // each estimate against the full run of the same round
    let errors = paired_medians(&cpu, |estimate, full| estimate / full.max(1.0) - 1.0);
    let medians: Vec<f64> = cpu.iter_mut().map(|c| median(c)).collect();
    let estimate = |i: usize| {
        format!(
            "{} {:>+6.2}% ({})",
            fmt_secs(medians[i] / 1e9),
            100.0 * errors[i],
            modes[i]
        )
    };
    Ok(format!(
        "{:<18} {:>12} {:>26} {:>26}",
        format!("{}, {}", function.name(), input.rows()),
        fmt_secs(medians[0] / 1e9),
        estimate(1),
        estimate(2)
    ))
}

/// Seconds as µs or ms, whichever reads better.
fn fmt_secs(s: f64) -> String {
    if s < 1e-3 {
        format!("{:.1} µs", s * 1e6)
    } else if s < 1.0 {
        format!("{:.2} ms", s * 1e3)
    } else {
        format!("{s:.3} s")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn the_interval_lies_within_the_rounds_and_moves_with_them(
            values in proptest::collection::vec(0.5f64..2.0, 1..40),
            shift in -1.0f64..1.0,
            scale in 0.1f64..10.0,
            seed in any::<u64>(),
        ) {
            let (low, high) = median_interval(&values, 200, seed);
            let min = values.iter().copied().fold(f64::INFINITY, f64::min);
            let max = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            prop_assert!(min <= low && low <= high && high <= max, "{low} {high} in {min}..{max}");
            // the same draws on moved and stretched rounds: the interval moves and
            // stretches with them
            let moved: Vec<f64> = values.iter().map(|v| shift + scale * v).collect();
            let (moved_low, moved_high) = median_interval(&moved, 200, seed);
            prop_assert!((moved_low - (shift + scale * low)).abs() < 1e-9);
            prop_assert!((moved_high - (shift + scale * high)).abs() < 1e-9);
        }
    }

    #[test]
    fn equal_rounds_have_no_spread_and_more_rounds_a_narrower_interval() {
        assert_eq!(median_interval(&[1.02; 7], 500, 1), (1.02, 1.02));
        assert!(median_interval(&[], 500, 1).0.is_nan());
        // the same spread of values, four times as many rounds: about half as wide
        let few: Vec<f64> = (0..10).map(|i| 1.0 + f64::from(i) / 100.0).collect();
        let many: Vec<f64> = few.iter().cycle().take(40).copied().collect();
        let width = |v: &[f64]| {
            let (low, high) = median_interval(v, 2_000, 7);
            high - low
        };
        assert!(
            width(&many) < 0.75 * width(&few),
            "{} {}",
            width(&many),
            width(&few)
        );
    }
}
