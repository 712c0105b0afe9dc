//! The advisor: rules that read a query profile as an engineer would and say what stands
//! out. Each finding names its rule, how much it matters, the operator or stage it is
//! about, one sentence, and the numbers behind the sentence.
//!
//! Rules: `bottleneck`, `skewed-tasks`, `spill`, `io-bound`, `low-read-concurrency`,
//! `dominating-function`, `unused-dynamic-filters`, `unselective-filter`,
//! `memory-near-limit`, `slow-planning`, `exploding-join`, and the rules of
//! [`estimates`]: `misestimate` and `untracked-memory`.
//!
//! Rules look only at the profile (no engine), and each has a threshold under which it
//! stays quiet, so a healthy query gets no findings.

mod estimates;

use std::fmt;

use crate::format;
use crate::metric::saturating_i64;
use crate::profile::{ProfileNode, QueryProfile, names};

/// How much a finding matters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Severity {
    /// Worth knowing: where the time went.
    Info,
    /// Likely a problem worth fixing.
    Warning,
}

impl fmt::Display for Severity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Severity::Info => "info",
            Severity::Warning => "warn",
        })
    }
}

/// One thing the advisor noticed.
#[derive(Debug, Clone, PartialEq)]
pub struct Finding {
    /// The rule that produced it, e.g. `skewed-tasks`.
    pub rule: &'static str,
    /// How much it matters.
    pub severity: Severity,
    /// The operator it is about (its pre-order id), if one.
    pub node_id: Option<usize>,
    /// The stage it is about, if one.
    pub stage_id: Option<u32>,
    /// What was noticed, in one sentence.
    pub message: String,
    /// The numbers behind the sentence, by name (nanoseconds, bytes, rows or ratios in
    /// thousandths, as the name says).
    pub numbers: Vec<(&'static str, i64)>,
}

/// Thresholds of the rules.
pub mod thresholds {
    /// An operator with at least this share (percent) of the query's operator CPU is its
    /// bottleneck.
    pub const BOTTLENECK_PERCENT: i64 = 50;
    /// ... when the query's operator CPU is at least this (ns).
    pub const BOTTLENECK_MIN_CPU_NANOS: i64 = 10_000_000;
    /// A stage's slowest task at least this many times its median task is skew ...
    pub const SKEW_RATIO: f64 = 4.0;
    /// ... when the stage has at least this many tasks ...
    pub const SKEW_MIN_TASKS: usize = 4;
    /// ... and the slowest task ran at least this much longer than the median (ms).
    pub const SKEW_MIN_EXTRA_MILLIS: u64 = 100;
    /// A function with at least this share (percent) of its operator's own CPU dominates
    /// it ...
    pub const FUNCTION_PERCENT: i64 = 50;
    /// ... when that operator has at least this share (percent) of the query's CPU.
    pub const FUNCTION_MIN_OPERATOR_PERCENT: i64 = 10;
    /// An operator keeping its tasks waiting on storage for at least this share (percent)
    /// of their time ...
    pub const IO_WAIT_PERCENT: i64 = 50;
    /// ... and at least this long (ns), is I/O bound.
    pub const IO_WAIT_MIN_NANOS: i64 = 10_000_000;
    /// Fewer reads in flight on average than this (tenths, Spark's `average`) is low read
    /// concurrency for an I/O-bound operator with ...
    pub const LOW_CONCURRENCY_TENTHS: i64 = 15;
    /// ... at least this many read requests.
    pub const LOW_CONCURRENCY_MIN_REQUESTS: i64 = 8;
    /// A filter right above a scan that keeps at least this share (percent) of the rows
    /// the scan read, when the scan skipped nothing, filters in vain ...
    pub const UNSELECTIVE_FILTER_PERCENT: i64 = 95;
    /// ... over at least this many rows.
    pub const UNSELECTIVE_FILTER_MIN_ROWS: i64 = 100_000;
    /// A query whose memory pool held at least this share (percent) of its limit ran
    /// near the limit.
    pub const MEMORY_NEAR_LIMIT_PERCENT: i64 = 90;
    /// Planning that took at least as long as the execution, and at least this long (ns),
    /// is slow planning.
    pub const SLOW_PLANNING_MIN_NANOS: u64 = 10_000_000;
    /// A join emitting at least this many times the rows of its larger input explodes ...
    pub const EXPLODING_JOIN_RATIO: i64 = 10;
    /// ... when it emits at least this many rows.
    pub const EXPLODING_JOIN_MIN_ROWS: i64 = 100_000;
    /// An input of a join, or an aggregate's output, whose rows are at least this many
    /// times the optimizer's estimate, or at most its inverse, was misestimated ...
    pub const MISESTIMATE_RATIO: u64 = 10;
    /// ... when the larger of the two is at least this many rows.
    pub const MISESTIMATE_MIN_ROWS: u64 = 10_000;
    /// Heap above what the memory pools and caches hold, while a stage ran, of at least
    /// this many bytes is memory the engine does not account for ...
    pub const UNTRACKED_MEMORY_MIN_BYTES: u64 = 256 << 20;
    /// ... when it is also at least this many times what they hold.
    pub const UNTRACKED_MEMORY_RATIO: u64 = 2;
}

/// Everything the advisor notices in `profile`, warnings first, then by the query's
/// order (operators in plan order, stages by id).
pub fn advise(profile: &QueryProfile) -> Vec<Finding> {
    let mut findings = Vec::new();
    bottleneck(profile, &mut findings);
    skewed_tasks(profile, &mut findings);
    for node in profile.plan.iter() {
        spill(node, &mut findings);
        io_bound(profile, node, &mut findings);
    }
    dominating_function(profile, &mut findings);
    unused_dynamic_filters(profile, &mut findings);
    unselective_filters(profile, &mut findings);
    memory_near_limit(profile, &mut findings);
    slow_planning(profile, &mut findings);
    exploding_joins(profile, &mut findings);
    estimates::misestimates(profile, &mut findings);
    estimates::untracked_memory(profile, &mut findings);
    findings.sort_by_key(|f| std::cmp::Reverse(f.severity));
    findings
}

/// The query's operator CPU: the sum of every operator's self CPU.
fn query_cpu(profile: &QueryProfile) -> i64 {
    profile
        .plan
        .iter()
        .filter_map(|n| n.value(names::SELF_CPU_NANOS))
        .map(|v| v.max(0))
        .sum()
}

fn value(node: &ProfileNode, name: &str) -> i64 {
    node.value(name).unwrap_or(0).max(0)
}

fn pct(part: i64, whole: i64) -> i64 {
    if whole <= 0 {
        0
    } else {
        part.saturating_mul(100) / whole
    }
}

fn nanos(ns: i64) -> String {
    format::human_nanos(ns.max(0) as u64)
}

/// `bottleneck`: one operator takes most of the query's CPU.
fn bottleneck(profile: &QueryProfile, out: &mut Vec<Finding>) {
    let total = query_cpu(profile);
    if total < thresholds::BOTTLENECK_MIN_CPU_NANOS {
        return;
    }
    let Some(top) = profile.top_by_self_cpu().into_iter().next() else {
        return;
    };
    let own = value(top, names::SELF_CPU_NANOS);
    let share = pct(own, total);
    if share < thresholds::BOTTLENECK_PERCENT {
        return;
    }
    out.push(Finding {
        rule: "bottleneck",
        severity: Severity::Info,
        node_id: Some(top.id),
        stage_id: top.stage_id,
        message: format!(
            "#{} {} is the bottleneck: {share}% of the query's operator CPU ({} of {})",
            top.id,
            top.name,
            nanos(own),
            nanos(total)
        ),
        numbers: vec![(names::SELF_CPU_NANOS, own), ("queryCpuNanos", total)],
    });
}

/// `skewed-tasks`: a stage's slowest task ran far longer than its median task.
fn skewed_tasks(profile: &QueryProfile, out: &mut Vec<Finding>) {
    for stage in &profile.stages {
        let mut times: Vec<u64> = stage
            .tasks
            .iter()
            .filter(|t| t.finish_epoch_millis >= t.start_epoch_millis && t.finish_epoch_millis > 0)
            .map(|t| t.finish_epoch_millis - t.start_epoch_millis)
            .collect();
        if times.len() < thresholds::SKEW_MIN_TASKS {
            continue;
        }
        times.sort_unstable();
        let median = times[times.len() / 2];
        let max = times[times.len() - 1];
        let skewed = (max as f64) >= thresholds::SKEW_RATIO * (median.max(1) as f64)
            && max - median >= thresholds::SKEW_MIN_EXTRA_MILLIS;
        if !skewed {
            continue;
        }
        let ms = |v: u64| nanos((v as i64).saturating_mul(1_000_000));
        out.push(Finding {
            rule: "skewed-tasks",
            severity: Severity::Warning,
            node_id: None,
            stage_id: Some(stage.id),
            message: format!(
                "stage {}: the slowest of its {} tasks ran {:.1}x its median task ({} vs {}): skewed partitions",
                stage.id,
                times.len(),
                max as f64 / median.max(1) as f64,
                ms(max),
                ms(median)
            ),
            numbers: vec![
                ("maxTaskMillis", max as i64),
                ("medianTaskMillis", median as i64),
                ("tasks", times.len() as i64),
            ],
        });
    }
}

/// `spill`: an operator wrote spill files.
fn spill(node: &ProfileNode, out: &mut Vec<Finding>) {
    let bytes = value(node, names::SPILL_WRITTEN_BYTES);
    let files = value(node, names::SPILL_FILES_CREATED);
    if bytes == 0 && files == 0 {
        return;
    }
    let partitions = value(node, names::SPILLED_PARTITIONS);
    let tasks = node
        .metric(names::SELF_CPU_NANOS)
        .map_or(0, |m| m.tasks.len());
    out.push(Finding {
        rule: "spill",
        severity: Severity::Warning,
        node_id: Some(node.id),
        stage_id: node.stage_id,
        message: format!(
            "#{} {} spilled {} to {} file{} in {} of {} partitions: it ran out of memory",
            node.id,
            node.name,
            format::bytes(bytes),
            files,
            if files == 1 { "" } else { "s" },
            partitions,
            tasks
        ),
        numbers: vec![
            (names::SPILL_WRITTEN_BYTES, bytes),
            (names::SPILL_FILES_CREATED, files),
            (names::SPILLED_PARTITIONS, partitions),
        ],
    });
}

/// The time the tasks of stage `id` ran, summed over them (ns).
fn stage_task_nanos(profile: &QueryProfile, id: u32) -> i64 {
    profile
        .stages
        .iter()
        .filter(|s| s.id == id)
        .flat_map(|s| &s.tasks)
        .filter(|t| t.finish_epoch_millis >= t.start_epoch_millis)
        .map(|t| (t.finish_epoch_millis - t.start_epoch_millis) as i64 * 1_000_000)
        .sum()
}

/// `io-bound` and `low-read-concurrency`: an operator's tasks spent most of their time
/// waiting on its reads, perhaps with too few reads in flight. (Waiting is measured
/// against the tasks' time, not the operator's: a scan waits between its polls.)
fn io_bound(profile: &QueryProfile, node: &ProfileNode, out: &mut Vec<Finding>) {
    let wait = value(node, names::IO_WAIT_NANOS);
    let Some(stage) = node.stage_id else {
        return;
    };
    let tasks = stage_task_nanos(profile, stage);
    let share = pct(wait, tasks);
    if wait < thresholds::IO_WAIT_MIN_NANOS || share < thresholds::IO_WAIT_PERCENT {
        return;
    }
    out.push(Finding {
        rule: "io-bound",
        severity: Severity::Info,
        node_id: Some(node.id),
        stage_id: node.stage_id,
        message: format!(
            "#{} {} kept its tasks waiting on storage for {share}% of their time ({} of {}; {} read)",
            node.id,
            node.name,
            nanos(wait),
            nanos(tasks),
            format::bytes(value(node, names::READ_BYTES))
        ),
        numbers: vec![(names::IO_WAIT_NANOS, wait), ("stageTaskNanos", tasks)],
    });
    let requests = value(node, names::READ_REQUESTS);
    let Some(concurrency) = node.value(names::AVERAGE_READ_CONCURRENCY) else {
        return;
    };
    if requests >= thresholds::LOW_CONCURRENCY_MIN_REQUESTS
        && concurrency < thresholds::LOW_CONCURRENCY_TENTHS
    {
        out.push(Finding {
            rule: "low-read-concurrency",
            severity: Severity::Warning,
            node_id: Some(node.id),
            stage_id: node.stage_id,
            message: format!(
                "#{} {} kept {:.1} reads in flight on average over {requests} requests while waiting on storage: more partitions or prefetching would overlap them",
                node.id,
                node.name,
                concurrency as f64 / 10.0
            ),
            numbers: vec![
                ("averageReadConcurrencyTenths", concurrency),
                (names::READ_REQUESTS, requests),
            ],
        });
    }
}

/// `dominating-function`: one function takes most of a costly operator's own CPU.
fn dominating_function(profile: &QueryProfile, out: &mut Vec<Finding>) {
    let total = query_cpu(profile);
    for node in profile.plan.iter() {
        let own = value(node, names::SELF_CPU_NANOS);
        if pct(own, total) < thresholds::FUNCTION_MIN_OPERATOR_PERCENT {
            continue;
        }
        let Some(top) = node.functions.iter().max_by_key(|f| f.cpu_nanos) else {
            continue;
        };
        let cpu = saturating_i64(top.cpu_nanos);
        let share = pct(cpu, own);
        if share < thresholds::FUNCTION_PERCENT {
            continue;
        }
        out.push(Finding {
            rule: "dominating-function",
            severity: Severity::Info,
            node_id: Some(node.id),
            stage_id: node.stage_id,
            message: format!(
                "{} takes {share}% of #{} {}'s own CPU ({}{} of {})",
                top.expression,
                node.id,
                node.name,
                if top.cpu_extrapolated { "~" } else { "" },
                nanos(cpu),
                nanos(own)
            ),
            numbers: vec![
                (names::FUNCTION_CPU_NANOS, cpu),
                (names::SELF_CPU_NANOS, own),
            ],
        });
    }
}

/// `unused-dynamic-filters`: operators produced dynamic filters that no scan took.
fn unused_dynamic_filters(profile: &QueryProfile, out: &mut Vec<Finding>) {
    let accepted: i64 = profile
        .plan
        .iter()
        .map(|n| value(n, names::DYNAMIC_FILTERS_ACCEPTED))
        .sum();
    if accepted > 0 {
        return;
    }
    for node in profile.plan.iter() {
        let produced = value(node, names::DYNAMIC_FILTERS_PRODUCED);
        if produced == 0 {
            continue;
        }
        out.push(Finding {
            rule: "unused-dynamic-filters",
            severity: Severity::Info,
            node_id: Some(node.id),
            stage_id: node.stage_id,
            message: format!(
                "#{} {} produced {produced} dynamic filter{} that no scan accepted: the scans read every row the filter could have skipped",
                node.id,
                node.name,
                if produced == 1 { "" } else { "s" }
            ),
            numbers: vec![(names::DYNAMIC_FILTERS_PRODUCED, produced)],
        });
    }
}

/// `unselective-filter`: a filter right above a scan keeps almost every row the scan read,
/// and the scan skipped no file or row group with it: its predicate costs CPU and prunes
/// nothing (a predicate on an unsorted column, or one that statistics cannot decide).
fn unselective_filters(profile: &QueryProfile, out: &mut Vec<Finding>) {
    for filter in profile.plan.iter().filter(|n| n.name == "FilterExec") {
        let [scan] = filter.children.as_slice() else {
            continue;
        };
        if scan.name != "DataSourceExec" {
            continue;
        }
        let (read, kept) = (
            value(scan, names::OUTPUT_ROWS),
            value(filter, names::OUTPUT_ROWS),
        );
        let skipped = value(scan, names::SKIPPED_SPLITS) + value(scan, names::SKIPPED_STRIDES);
        if read < thresholds::UNSELECTIVE_FILTER_MIN_ROWS
            || pct(kept, read) < thresholds::UNSELECTIVE_FILTER_PERCENT
            || skipped > 0
        {
            continue;
        }
        out.push(Finding {
            rule: "unselective-filter",
            severity: Severity::Info,
            node_id: Some(filter.id),
            stage_id: filter.stage_id,
            message: format!(
                "#{} FilterExec keeps {}% of the {} rows #{} {} read, which skipped no file or row group with it: the predicate costs {} of CPU to remove {} rows",
                filter.id,
                pct(kept, read),
                format::integer(read),
                scan.id,
                scan.name,
                nanos(value(filter, names::SELF_CPU_NANOS)),
                format::integer(read - kept),
            ),
            numbers: vec![
                ("scanOutputRows", read),
                ("filterOutputRows", kept),
                (names::SELF_CPU_NANOS, value(filter, names::SELF_CPU_NANOS)),
            ],
        });
    }
}

/// `memory-near-limit`: the memory pool came within a tenth of its limit while the query
/// ran; an operator that cannot spill fails there, the others spill.
fn memory_near_limit(profile: &QueryProfile, out: &mut Vec<Finding>) {
    let Some(pool) = profile.memory_pool else {
        return;
    };
    let Some(limit) = pool.limit_bytes.filter(|l| *l > 0) else {
        return;
    };
    let (peak, limit) = (saturating_i64(pool.peak_bytes), saturating_i64(limit));
    let share = pct(peak, limit);
    if share < thresholds::MEMORY_NEAR_LIMIT_PERCENT {
        return;
    }
    out.push(Finding {
        rule: "memory-near-limit",
        severity: Severity::Warning,
        node_id: None,
        stage_id: None,
        message: format!(
            "the query's memory pool held up to {} of its {} limit ({share}%): operators that can spill did or will, those that cannot fail at the limit",
            format::bytes(peak),
            format::bytes(limit),
        ),
        numbers: vec![("memoryPoolPeakBytes", peak), ("memoryLimitBytes", limit)],
    });
}

/// `exploding-join`: a join emitted many times the rows of its larger input (a key that
/// repeats on both sides, or a missing join condition).
fn exploding_joins(profile: &QueryProfile, out: &mut Vec<Finding>) {
    let joins = profile
        .plan
        .iter()
        .filter(|n| n.name.ends_with("JoinExec") && n.children.len() == 2);
    for join in joins {
        let emitted = value(join, names::OUTPUT_ROWS);
        let inputs = [
            value(&join.children[0], names::OUTPUT_ROWS),
            value(&join.children[1], names::OUTPUT_ROWS),
        ];
        let larger = inputs[0].max(inputs[1]);
        if emitted < thresholds::EXPLODING_JOIN_MIN_ROWS
            || emitted < larger.saturating_mul(thresholds::EXPLODING_JOIN_RATIO)
        {
            continue;
        }
        out.push(Finding {
            rule: "exploding-join",
            severity: Severity::Warning,
            node_id: Some(join.id),
            stage_id: join.stage_id,
            message: format!(
                "#{} {} emitted {} rows from inputs of {} and {} rows ({}x its larger input): a join key that repeats on both sides, or a missing join condition",
                join.id,
                join.name,
                format::integer(emitted),
                format::integer(inputs[0]),
                format::integer(inputs[1]),
                emitted / larger.max(1),
            ),
            numbers: vec![
                (names::OUTPUT_ROWS, emitted),
                ("firstInputRows", inputs[0]),
                ("secondInputRows", inputs[1]),
            ],
        });
    }
}

/// `slow-planning`: planning took as long as running the query, or longer.
fn slow_planning(profile: &QueryProfile, out: &mut Vec<Finding>) {
    let Some(planning) = &profile.planning else {
        return;
    };
    let planned = planning.wall_nanos();
    let executed = profile.duration_nanos.saturating_sub(planned);
    if planned < thresholds::SLOW_PLANNING_MIN_NANOS || planned < executed {
        return;
    }
    let phase = planning.phases.iter().max_by_key(|p| p.wall_nanos);
    let rule = planning.rules.iter().max_by_key(|r| r.wall_nanos);
    let mut message = format!(
        "planning took {} and running the query {}",
        format::human_nanos(planned),
        format::human_nanos(executed)
    );
    if let Some(phase) = phase {
        message.push_str(&format!(
            ": most in {} ({})",
            phase.phase.as_str(),
            format::human_nanos(phase.wall_nanos)
        ));
    }
    if let Some(rule) = rule.filter(|r| r.wall_nanos > 0) {
        message.push_str(&format!(
            ", the slowest rule {} ({} in {} calls)",
            rule.name,
            format::human_nanos(rule.wall_nanos),
            rule.calls
        ));
    }
    out.push(Finding {
        rule: "slow-planning",
        severity: Severity::Warning,
        node_id: None,
        stage_id: None,
        message,
        numbers: vec![
            ("planningNanos", saturating_i64(planned)),
            ("executionNanos", saturating_i64(executed)),
        ],
    });
}

/// The findings as text lines (`  [warn] ...`), under a `findings:` header;
/// `findings: none` when there are none.
pub fn render_findings(findings: &[Finding]) -> String {
    if findings.is_empty() {
        return "findings: none\n".to_string();
    }
    let mut out = String::from("findings:\n");
    for f in findings {
        out.push_str(&format!("  [{}] {}\n", f.severity, f.message));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metric::{MetricKind, TaskValue};
    use crate::profile::fixtures::sample;
    use crate::profile::{StageProfile, TaskProfile};

    /// Sets operator `id`'s metric `name` to `value` (one task).
    fn set(profile: &mut QueryProfile, id: usize, name: &str, value: i64) {
        fn find(node: &mut ProfileNode, id: usize) -> Option<&mut ProfileNode> {
            if node.id == id {
                return Some(node);
            }
            node.children.iter_mut().find_map(|c| find(c, id))
        }
        let node = find(&mut profile.plan, id).expect("the operator");
        node.metrics.retain(|m| m.name != name);
        node.metrics.push(crate::profile::NodeMetric::summed(
            name,
            name,
            MetricKind::Sum,
            vec![TaskValue { task: None, value }],
        ));
    }

    fn rules(profile: &QueryProfile) -> Vec<(&'static str, Option<usize>, Option<u32>)> {
        advise(profile)
            .into_iter()
            .map(|f| (f.rule, f.node_id, f.stage_id))
            .collect()
    }

    fn fired(profile: &QueryProfile, rule: &str) -> Vec<Finding> {
        advise(profile)
            .into_iter()
            .filter(|f| f.rule == rule)
            .collect()
    }

    #[test]
    fn a_healthy_query_has_no_findings() {
        let mut p = sample();
        // three operators sharing the CPU evenly
        for id in 0..3 {
            set(&mut p, id, names::SELF_CPU_NANOS, 10_000_000);
        }
        assert_eq!(rules(&p), []);
        assert_eq!(render_findings(&advise(&p)), "findings: none\n");
    }

    #[test]
    fn bottleneck_names_the_operator_with_most_of_the_cpu() {
        let p = sample();
        let found = fired(&p, "bottleneck");
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].node_id, Some(2));
        assert!(
            found[0]
                .message
                .starts_with("#2 DataSourceExec is the bottleneck: 93%"),
            "{}",
            found[0].message
        );
        // a query too small to matter
        let mut small = sample();
        for id in 0..3 {
            set(&mut small, id, names::SELF_CPU_NANOS, 1_000);
        }
        set(&mut small, 2, names::SELF_CPU_NANOS, 5_000_000);
        assert!(fired(&small, "bottleneck").is_empty());
    }

    fn stage(id: u32, task_millis: &[u64]) -> StageProfile {
        StageProfile {
            id,
            node_ids: vec![],
            tasks: task_millis
                .iter()
                .enumerate()
                .map(|(i, ms)| TaskProfile {
                    task_id: i as u64,
                    partition: i as u32,
                    start_epoch_millis: 1_000,
                    finish_epoch_millis: 1_000 + ms,
                    metrics: vec![],
                    error: None,
                    attempt: 0,
                    executor: None,
                })
                .collect(),
            memory: None,
            executor_memory: Vec::new(),
        }
    }

    #[test]
    fn skewed_tasks_flags_a_stage_whose_slowest_task_dwarfs_the_median() {
        let mut p = sample();
        p.stages = vec![
            stage(0, &[100, 110, 90, 100, 105, 95, 100, 900]),
            stage(1, &[100, 110, 90, 100, 105, 95, 100, 150]),
            // a large ratio on tasks too short to matter
            stage(2, &[1, 1, 1, 1, 1, 1, 1, 50]),
        ];
        let found = fired(&p, "skewed-tasks");
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].stage_id, Some(0));
        assert_eq!(found[0].severity, Severity::Warning);
        assert!(found[0].numbers.contains(&("maxTaskMillis", 900)));
        assert!(found[0].numbers.contains(&("medianTaskMillis", 100)));
    }

    #[test]
    fn spill_flags_operators_that_wrote_spill_files() {
        let mut p = sample();
        assert!(fired(&p, "spill").is_empty());
        set(&mut p, 0, names::SPILL_WRITTEN_BYTES, 3 << 20);
        set(&mut p, 0, names::SPILL_FILES_CREATED, 2);
        set(&mut p, 0, names::SPILLED_PARTITIONS, 1);
        let found = fired(&p, "spill");
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].node_id, Some(0));
        assert!(
            found[0]
                .message
                .contains("3.0 MiB to 2 files in 1 of 2 partitions"),
            "{}",
            found[0].message
        );
        // warnings come first
        assert_eq!(advise(&p)[0].rule, "spill");
    }

    #[test]
    fn io_bound_and_low_concurrency_need_a_scan_that_mostly_waits() {
        // the scan's stage: one task of 40 ms
        let mut p = sample();
        set(&mut p, 2, names::IO_WAIT_NANOS, 15_000_000);
        set(&mut p, 2, names::READ_REQUESTS, 40);
        set(&mut p, 2, names::AVERAGE_READ_CONCURRENCY, 11);
        assert!(fired(&p, "io-bound").is_empty());
        assert!(fired(&p, "low-read-concurrency").is_empty());
        set(&mut p, 2, names::IO_WAIT_NANOS, 30_000_000);
        let io = fired(&p, "io-bound");
        assert_eq!(io.len(), 1);
        assert!(
            io[0]
                .message
                .contains("for 75% of their time (30.00 ms of 40.00 ms"),
            "{}",
            io[0].message
        );
        let low = fired(&p, "low-read-concurrency");
        assert_eq!(low.len(), 1);
        assert!(
            low[0].message.contains("1.1 reads in flight"),
            "{}",
            low[0].message
        );
        // enough reads in flight: waiting, but not for want of concurrency
        set(&mut p, 2, names::AVERAGE_READ_CONCURRENCY, 40);
        assert_eq!(fired(&p, "io-bound").len(), 1);
        assert!(fired(&p, "low-read-concurrency").is_empty());
    }

    #[test]
    fn a_function_dominating_a_costly_operator_is_named() {
        let mut p = sample();
        // the filter's function: 1.25 ms of a 4 ms operator with 5 % of the CPU
        assert!(fired(&p, "dominating-function").is_empty());
        set(&mut p, 1, names::SELF_CPU_NANOS, 20_000_000);
        p.plan.children[0].functions[0].cpu_nanos = 15_000_000;
        let found = fired(&p, "dominating-function");
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].node_id, Some(1));
        assert!(
            found[0].message.starts_with("regexp_like(t.comment"),
            "{}",
            found[0].message
        );
        assert!(
            found[0].message.contains("75% of #1 FilterExec's own CPU"),
            "{}",
            found[0].message
        );
        p.plan.children[0].functions[0].cpu_nanos = 5_000_000;
        assert!(fired(&p, "dominating-function").is_empty());
    }

    #[test]
    fn dynamic_filters_that_no_scan_accepted_are_flagged() {
        let mut p = sample();
        set(&mut p, 0, names::DYNAMIC_FILTERS_PRODUCED, 1);
        let found = fired(&p, "unused-dynamic-filters");
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].node_id, Some(0));
        set(&mut p, 2, names::DYNAMIC_FILTERS_ACCEPTED, 1);
        assert!(fired(&p, "unused-dynamic-filters").is_empty());
    }

    #[test]
    fn a_filter_keeping_almost_every_row_of_an_unpruned_scan_is_flagged() {
        let mut p = sample();
        set(&mut p, 2, names::OUTPUT_ROWS, 200_000);
        set(&mut p, 1, names::OUTPUT_ROWS, 199_000);
        let found = fired(&p, "unselective-filter");
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].node_id, Some(1));
        assert!(
            found[0].message.contains("keeps 99% of the 200,000 rows"),
            "{}",
            found[0].message
        );
        // controls: a selective filter; a scan that pruned with it; too few rows
        let mut selective = p.clone();
        set(&mut selective, 1, names::OUTPUT_ROWS, 150_000);
        assert!(fired(&selective, "unselective-filter").is_empty());
        let mut pruned = p.clone();
        set(&mut pruned, 2, names::SKIPPED_STRIDES, 3);
        assert!(fired(&pruned, "unselective-filter").is_empty());
        let mut small = p.clone();
        set(&mut small, 2, names::OUTPUT_ROWS, 1_000);
        set(&mut small, 1, names::OUTPUT_ROWS, 999);
        assert!(fired(&small, "unselective-filter").is_empty());
    }

    #[test]
    fn a_pool_near_its_limit_is_flagged() {
        let mut p = sample();
        p.memory_pool = Some(crate::profile::MemoryPoolUsage {
            limit_bytes: Some(100 << 20),
            peak_bytes: 95 << 20,
        });
        let found = fired(&p, "memory-near-limit");
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].severity, Severity::Warning);
        assert!(
            found[0]
                .message
                .contains("95.0 MiB of its 100.0 MiB limit (95%)"),
            "{}",
            found[0].message
        );
        // controls: room to spare; no limit; no pool known
        for pool in [
            Some(crate::profile::MemoryPoolUsage {
                limit_bytes: Some(100 << 20),
                peak_bytes: 80 << 20,
            }),
            Some(crate::profile::MemoryPoolUsage {
                limit_bytes: None,
                peak_bytes: 95 << 20,
            }),
            None,
        ] {
            p.memory_pool = pool;
            assert!(fired(&p, "memory-near-limit").is_empty(), "{pool:?}");
        }
    }

    #[test]
    fn findings_render_one_line_each_under_a_header() {
        let text = render_findings(&advise(&sample()));
        assert!(
            text.starts_with("findings:\n  [info] #2 DataSourceExec is the bottleneck"),
            "{text}"
        );
        assert_eq!(text.lines().count(), 2, "{text}");
    }

    fn planned(wall_nanos: u64) -> crate::planning::PlanningProfile {
        use crate::planning::{PhaseTiming, PlanningPhase, PlanningProfile, RuleTiming};
        PlanningProfile {
            start_epoch_micros: 1,
            phases: vec![PhaseTiming {
                phase: PlanningPhase::Optimizer,
                start_nanos: 0,
                end_nanos: wall_nanos,
                wall_nanos,
                cpu_nanos: wall_nanos,
            }],
            rules: vec![RuleTiming {
                phase: PlanningPhase::Optimizer,
                name: "push_down_filter".into(),
                first_start_nanos: 0,
                last_end_nanos: wall_nanos,
                wall_nanos,
                calls: 7,
                changed: true,
                plans: Vec::new(),
            }],
        }
    }

    #[test]
    fn slow_planning_fires_when_planning_outlasts_the_run() {
        let mut p = sample();
        let min = thresholds::SLOW_PLANNING_MIN_NANOS;
        // planning as long as the execution, at the threshold
        p.planning = Some(planned(min));
        p.duration_nanos = 2 * min;
        let found = fired(&p, "slow-planning");
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(
            found[0].message.contains("push_down_filter"),
            "{}",
            found[0].message
        );
        assert_eq!(
            found[0].numbers,
            vec![
                ("planningNanos", min as i64),
                ("executionNanos", min as i64)
            ]
        );
        // just under the threshold, or shorter than the execution: quiet
        p.planning = Some(planned(min - 1));
        p.duration_nanos = 2 * (min - 1);
        assert!(fired(&p, "slow-planning").is_empty());
        p.planning = Some(planned(min));
        p.duration_nanos = 2 * min + 1;
        assert!(fired(&p, "slow-planning").is_empty());
    }

    #[test]
    fn exploding_join_fires_at_ten_times_the_larger_input() {
        fn join_of(out: i64, left: i64, right: i64) -> QueryProfile {
            let mut p = sample();
            // the sample's filter above its scan becomes a join of the scan with itself
            let node = &mut p.plan.children[0];
            node.name = "HashJoinExec".into();
            let scan = node.children[0].clone();
            let mut other = scan.clone();
            other.id = 3;
            node.children.push(other);
            set(&mut p, 1, names::OUTPUT_ROWS, out);
            set(&mut p, 2, names::OUTPUT_ROWS, left);
            set(&mut p, 3, names::OUTPUT_ROWS, right);
            p
        }
        let min = thresholds::EXPLODING_JOIN_MIN_ROWS;
        let found = fired(&join_of(min, min / 10, min / 20), "exploding-join");
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].node_id, Some(1));
        assert_eq!(found[0].severity, Severity::Warning);
        assert!(
            found[0].message.contains("10x its larger input"),
            "{}",
            found[0].message
        );
        // just under ten times, or under the minimum: quiet
        assert!(fired(&join_of(min, min / 10 + 1, 5), "exploding-join").is_empty());
        assert!(fired(&join_of(min - 1, 10, 10), "exploding-join").is_empty());
    }
}
