//! Read a profile: the operators that took the most CPU time of their own, how much memory
//! they held, which task was the slowest, and the functions that cost the most. Writes
//! nothing.
//!
//! ```sh
//! cargo run -p qprof-examples --example hottest_operators
//! ```

use std::error::Error;

use datafusion::execution::SessionStateBuilder;
use datafusion::prelude::SessionContext;
use qprof_core::format;
use qprof_core::profile::names;
use qprof_datafusion::Profiler;

#[tokio::main]
async fn main() -> Result<(), Box<dyn Error>> {
    let profiler = Profiler::new();
    let ctx = SessionContext::new_with_state(
        profiler
            .instrument(SessionStateBuilder::new().with_default_features())
            .build(),
    );
    qprof_examples::register_tables(&ctx)?;
    let run = profiler
        .run_sql(&ctx, qprof_examples::REVENUE_BY_REGION)
        .await?;
    let profile = &run.profile;

    let total: i64 = profile
        .plan
        .iter()
        .filter_map(|n| n.value(names::SELF_CPU_NANOS))
        .sum();
    println!(
        "{} rows in {}; operators used {} of CPU",
        profile.rows,
        format::human_nanos(profile.duration_nanos),
        format::human_nanos(total.max(0) as u64)
    );
    println!("hottest operators (self CPU, share, peak memory, slowest task):");
    for node in profile.top_by_self_cpu().into_iter().take(3) {
        let self_cpu = node.value(names::SELF_CPU_NANOS).unwrap_or(0);
        let slowest = node
            .metric(names::SELF_CPU_NANOS)
            .and_then(|m| m.aggregate().max_task)
            .map_or("-".to_string(), |t| format!("task {}", t.task_id));
        println!(
            "  #{:<3} {:<28} {:>10} {:>6.1}%  {:>10}  {}",
            node.id,
            node.name,
            format::human_nanos(self_cpu.max(0) as u64),
            self_cpu as f64 * 100.0 / total.max(1) as f64,
            format::bytes(node.value(names::PEAK_MEMORY_BYTES).unwrap_or(0)),
            slowest,
        );
    }
    let mut functions: Vec<_> = profile
        .plan
        .iter()
        .flat_map(|n| n.functions.iter().map(move |f| (n, f)))
        .collect();
    functions.sort_by_key(|(_, f)| std::cmp::Reverse(f.cpu_nanos));
    println!("costliest functions:");
    for (node, f) in functions.into_iter().take(3) {
        println!(
            "  {:<40} in #{} {:<20} {:>10}  {} rows",
            f.expression,
            node.id,
            node.name,
            format::human_nanos(f.cpu_nanos),
            f.rows
        );
    }
    Ok(())
}
