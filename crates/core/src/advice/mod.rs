//! The advisor: rules that read a query profile as an engineer would and say what stands
//! out. Each finding names its rule, how much it matters, the operator or stage it is
//! about, one sentence, and the numbers behind the sentence.
//!
//! Rules: `bottleneck`, `skewed-tasks`, `spill`, `io-bound`, `low-read-concurrency`,
//! `dominating-function`, `unused-dynamic-filters`, `unselective-filter`,
//! `memory-near-limit`, `slow-planning`, `exploding-join`, `critical-path`, and the rules
//! of `estimates`: `misestimate` and `untracked-memory`.
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
    /// A query that ran at least this long (ns) has its critical path named.
    pub const CRITICAL_PATH_MIN_NANOS: u64 = 1_000_000_000;
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
    critical_path(profile, &mut findings);
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

/// `critical-path`: for a query of a second or more, the chain of stages that bounded its
/// wall time, and the longest of their last tasks with the operator it spent most in.
fn critical_path(profile: &QueryProfile, out: &mut Vec<Finding>) {
    if profile.duration_nanos < thresholds::CRITICAL_PATH_MIN_NANOS {
        return;
    }
    let path = profile.critical_path();
    let Some(longest) = path
        .iter()
        .max_by_key(|s| (s.own_millis, std::cmp::Reverse(s.stage_id)))
    else {
        return;
    };
    let stages: Vec<String> = path.iter().map(|s| s.stage_id.to_string()).collect();
    let own_nanos = longest.own_millis.saturating_mul(1_000_000);
    let share = saturating_i64(own_nanos) * 100 / saturating_i64(profile.duration_nanos).max(1);
    let mut message = format!(
        "the query's wall time ran through stage{} {}; the longest step, stage {}'s last task {} ({} of its own, {share}% of the query), ",
        if path.len() == 1 { "" } else { "s" },
        stages.join(" <- "),
        longest.stage_id,
        longest.task_id,
        format::human_nanos(own_nanos),
    );
    match &longest.hottest {
        Some(hottest) => {
            message.push_str(&format!(
                "spent {}% of its CPU in #{} {}",
                hottest.cpu_percent, hottest.node_id, hottest.name
            ));
            if let Some((phase, share)) = &hottest.phase {
                message.push_str(&format!(", {share}% of that in its {phase} phase"));
            }
        }
        None => message.push_str("measured no operator CPU"),
    }
    out.push(Finding {
        rule: "critical-path",
        severity: Severity::Info,
        node_id: longest.hottest.as_ref().map(|h| h.node_id),
        stage_id: Some(longest.stage_id),
        message,
        numbers: vec![
            ("ownMillis", saturating_i64(longest.own_millis)),
            ("durationNanos", saturating_i64(profile.duration_nanos)),
            ("steps", path.len() as i64),
        ],
    });
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
mod tests;
