//! The advisor: rules that read a query profile as an engineer would and say what cost the
//! query. A finding is one cause: what happened, the numbers behind it, what it cost the
//! query (wall time, CPU, task time or memory, and its share of the query's), and the action
//! that would fix it. Findings are ranked by cost; a finding whose cost is below the floor
//! ([`Cost::is_material`]) is `info` whatever its rule, so a healthy query has no warnings.
//!
//! Rules (each gives at most one finding per query, listing every operator or stage it
//! covers): `skewed-tasks`, `spill`, `io-bound`, `dominating-function`,
//! `unselective-filter`, `memory-near-limit`, `slow-planning`, `exploding-join`, the rules of
//! `estimates` (`misestimate`) and `memory` (`untracked-memory`), and the descriptive ones,
//! always `info`: `bottleneck`, `critical-path`, `unused-dynamic-filters`.
//!
//! Rules look only at the profile (no engine).

mod estimates;
mod memory;
mod operators;
mod time;

use std::fmt;

use crate::format;
use crate::profile::{ProfileNode, QueryProfile, names};

/// How much a finding matters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Severity {
    /// Worth knowing, but it cost the query little (or it only says where the time went).
    Info,
    /// A problem whose fix would save a material part of the query.
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

/// What a cost is counted in, and what the query's whole of it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CostKind {
    /// Nanoseconds of the query's wall time (of its duration).
    Wall,
    /// Nanoseconds of operator CPU (of the query's operator CPU).
    Cpu,
    /// Nanoseconds of task time, summed over tasks (of the query's tasks' time).
    TaskTime,
    /// Bytes of memory (of the memory limit, or of the heap's peak without one).
    Memory,
}

impl CostKind {
    /// `wall`, `cpu`, `taskTime` or `memory`: the name in the JSON profile and the tables.
    pub fn as_str(self) -> &'static str {
        match self {
            CostKind::Wall => "wall",
            CostKind::Cpu => "cpu",
            CostKind::TaskTime => "taskTime",
            CostKind::Memory => "memory",
        }
    }

    /// The kind named `name` ([`Self::as_str`]).
    pub fn parse(name: &str) -> Option<CostKind> {
        [
            CostKind::Wall,
            CostKind::Cpu,
            CostKind::TaskTime,
            CostKind::Memory,
        ]
        .into_iter()
        .find(|k| k.as_str() == name)
    }
}

/// What a finding cost the query: an amount, and the query's whole it is a share of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cost {
    /// What the amounts are counted in.
    pub kind: CostKind,
    /// The cost (ns or bytes).
    pub amount: u64,
    /// The query's whole of the same kind (ns or bytes); 0 when unknown.
    pub whole: u64,
}

impl Cost {
    /// A cost of `amount` out of the query's `whole`.
    pub fn new(kind: CostKind, amount: u64, whole: u64) -> Cost {
        Cost {
            kind,
            amount,
            whole,
        }
    }

    /// The cost as thousandths of the query's whole (capped at 1000; 0 without a whole).
    pub fn share_permille(&self) -> u64 {
        permille(self.amount, self.whole).min(1000)
    }

    /// Whether the cost is above the floor under which a finding is only `info`: for time,
    /// [`thresholds::MATERIAL_MIN_NANOS`] and [`thresholds::MATERIAL_PERCENT`] of the
    /// query's; for memory, [`thresholds::MATERIAL_MIN_BYTES`] and
    /// [`thresholds::MATERIAL_MEMORY_PERCENT`] of the limit.
    pub fn is_material(&self) -> bool {
        let (min, percent) = match self.kind {
            CostKind::Memory => (
                thresholds::MATERIAL_MIN_BYTES,
                thresholds::MATERIAL_MEMORY_PERCENT,
            ),
            _ => (thresholds::MATERIAL_MIN_NANOS, thresholds::MATERIAL_PERCENT),
        };
        self.amount >= min && self.share_permille() >= percent * 10
    }
}

impl fmt::Display for Cost {
    /// `1.20 s of wall time (40% of the query's)`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (amount, of, whole) = match self.kind {
            CostKind::Wall => (format::human_nanos(self.amount), "wall time", "the query's"),
            CostKind::Cpu => (format::human_nanos(self.amount), "CPU", "its operator CPU"),
            CostKind::TaskTime => (
                format::human_nanos(self.amount),
                "task time",
                "its tasks' time",
            ),
            CostKind::Memory => (
                format::bytes(i64::try_from(self.amount).unwrap_or(i64::MAX)),
                "memory",
                "the limit",
            ),
        };
        write!(f, "{amount} of {of}")?;
        if self.whole > 0 {
            let permille = self.share_permille();
            write!(f, " ({}.{}% of {whole})", permille / 10, permille % 10)?;
        }
        Ok(())
    }
}

/// One cause the advisor found in a query.
#[derive(Debug, Clone, PartialEq)]
pub struct Finding {
    /// The rule that produced it, e.g. `skewed-tasks`.
    pub rule: &'static str,
    /// How much it matters: `Warning` only for a material cost.
    pub severity: Severity,
    /// The operator it is most about (its pre-order id), if one.
    pub node_id: Option<usize>,
    /// The stage it is most about, if one.
    pub stage_id: Option<u32>,
    /// Every operator it covers, the costliest first.
    pub node_ids: Vec<usize>,
    /// Every stage it covers, the costliest first.
    pub stage_ids: Vec<u32>,
    /// What happened, with its evidence, in one sentence.
    pub message: String,
    /// What it cost the query.
    pub cost: Cost,
    /// What would fix it.
    pub action: String,
    /// The numbers behind the sentence, by name (nanoseconds, bytes, rows or ratios in
    /// thousandths, as the name says).
    pub numbers: Vec<(&'static str, i64)>,
}

/// Thresholds of the rules.
pub mod thresholds {
    /// A cost of time under this (ns) is not material ...
    pub const MATERIAL_MIN_NANOS: u64 = 10_000_000;
    /// ... nor one under this share (percent) of the query's.
    pub const MATERIAL_PERCENT: u64 = 5;
    /// A cost of memory under this (bytes) is not material ...
    pub const MATERIAL_MIN_BYTES: u64 = 64 << 20;
    /// ... nor one under this share (percent) of the memory limit.
    pub const MATERIAL_MEMORY_PERCENT: u64 = 10;
    /// An operator with at least this share (percent) of the query's operator CPU is its
    /// bottleneck.
    pub const BOTTLENECK_PERCENT: u64 = 50;
    /// A stage's slowest task at least this many times its median task is skew ...
    pub const SKEW_RATIO: f64 = 4.0;
    /// ... when the stage has at least this many tasks ...
    pub const SKEW_MIN_TASKS: usize = 4;
    /// ... and the slowest task ran at least this much longer than the median (ms).
    pub const SKEW_MIN_EXTRA_MILLIS: u64 = 100;
    /// A function with at least this share (percent) of its operator's own CPU dominates
    /// it ...
    pub const FUNCTION_PERCENT: u64 = 50;
    /// ... and is a finding at all when it has at least this share (percent) of the
    /// query's operator CPU (a warning from [`super::Cost::is_material`] on).
    pub const FUNCTION_MIN_QUERY_PERCENT: u64 = 20;
    /// An operator keeping its tasks waiting on storage for at least this share (percent)
    /// of their time is I/O bound.
    pub const IO_WAIT_PERCENT: u64 = 50;
    /// Fewer reads in flight on average than this (tenths, Spark's `average`) is low read
    /// concurrency for an I/O-bound operator with ...
    pub const LOW_CONCURRENCY_TENTHS: i64 = 15;
    /// ... at least this many read requests.
    pub const LOW_CONCURRENCY_MIN_REQUESTS: i64 = 8;
    /// A filter right above a scan that keeps at least this share (thousandths) of the
    /// rows the scan read, when the scan skipped nothing, filters in vain: a predicate that
    /// almost always holds (one that removes a few percent is the query's, not a waste) ...
    pub const UNSELECTIVE_FILTER_PERMILLE: u64 = 995;
    /// ... over at least this many rows.
    pub const UNSELECTIVE_FILTER_MIN_ROWS: u64 = 100_000;
    /// A query whose memory pool held at least this share (percent) of its limit ran
    /// near the limit.
    pub const MEMORY_NEAR_LIMIT_PERCENT: u64 = 90;
    /// Planning that took at least this long (ns), and at least as long as the execution,
    /// is slow planning (DataFusion plans a TPC-H query in a few milliseconds).
    pub const SLOW_PLANNING_MIN_NANOS: u64 = 100_000_000;
    /// A join emitting at least this many times the rows of its larger input explodes ...
    pub const EXPLODING_JOIN_RATIO: u64 = 10;
    /// ... when it emits at least this many rows.
    pub const EXPLODING_JOIN_MIN_ROWS: u64 = 100_000;
    /// A hash join's build input whose rows are at least this many times its estimate was
    /// misestimated ...
    pub const MISESTIMATE_RATIO: u64 = 10;
    /// ... when it produced at least this many rows; the plan chose on it when that made
    /// the build side the larger one by ...
    pub const MISESTIMATE_MIN_ROWS: u64 = 10_000;
    /// ... at least this factor, or when it built one hash table for every partition on
    /// an input at least as large as this many rows (DataFusion's
    /// `hash_join_single_partition_threshold_rows`).
    pub const MISESTIMATE_BUILD_SIDE_FACTOR: u64 = 2;
    /// See [`MISESTIMATE_BUILD_SIDE_FACTOR`].
    pub const COLLECT_LEFT_MAX_ROWS: u64 = 128 * 1024;
    /// The heap's growth while a query ran above what its memory pool reserved, of at
    /// least this many bytes, is memory the engine does not account for ...
    pub const UNTRACKED_MEMORY_MIN_BYTES: u64 = 256 << 20;
    /// ... when it is also at least this many times what the pool reserved.
    pub const UNTRACKED_MEMORY_RATIO: u64 = 2;
    /// A query that ran at least this long (ns) has its critical path named.
    pub const CRITICAL_PATH_MIN_NANOS: u64 = 1_000_000_000;
}

/// Everything the advisor finds in `profile`, ranked: warnings first, then by the share of
/// the query each cost, largest first. A finding's rank is its place in the list, from 1.
pub fn advise(profile: &QueryProfile) -> Vec<Finding> {
    let rules: [fn(&QueryProfile) -> Option<Finding>; 13] = [
        time::skewed_tasks,
        time::slow_planning,
        time::bottleneck,
        time::critical_path,
        operators::spill,
        operators::io_bound,
        operators::dominating_function,
        operators::unselective_filters,
        operators::exploding_joins,
        operators::unused_dynamic_filters,
        estimates::misestimates,
        memory::memory_near_limit,
        memory::untracked_memory,
    ];
    let mut findings: Vec<Finding> = rules.iter().filter_map(|rule| rule(profile)).collect();
    one_per_cause(&mut findings);
    for finding in &mut findings {
        if !finding.cost.is_material() {
            finding.severity = Severity::Info;
        }
    }
    findings.sort_by(|a, b| {
        b.severity
            .cmp(&a.severity)
            .then(b.cost.share_permille().cmp(&a.cost.share_permille()))
            .then(b.cost.amount.cmp(&a.cost.amount))
            .then(a.rule.cmp(b.rule))
    });
    findings
}

/// Drops a finding that repeats another's cause: a function dominating a filter already
/// reported as unselective (the predicate is the function), a pool near its limit whose
/// largest holder spilled (the spill is what running out of memory did), and a bottleneck
/// that is the operator of a warning (the warning says why it is one).
fn one_per_cause(findings: &mut Vec<Finding>) {
    let covered = |rule: &str, findings: &[Finding]| -> Vec<usize> {
        findings
            .iter()
            .filter(|f| f.rule == rule)
            .flat_map(|f| f.node_ids.clone())
            .collect()
    };
    let filters = covered("unselective-filter", findings);
    findings.retain(|f| {
        f.rule != "dominating-function" || !f.node_ids.iter().all(|n| filters.contains(n))
    });
    let spilled = covered("spill", findings);
    findings.retain(|f| {
        f.rule != "memory-near-limit"
            || f.node_ids.is_empty()
            || !f.node_ids.iter().all(|n| spilled.contains(n))
    });
    let explained: Vec<usize> = findings
        .iter()
        .filter(|f| !matches!(f.rule, "bottleneck" | "critical-path"))
        .filter(|f| f.cost.is_material())
        .flat_map(|f| f.node_ids.clone())
        .collect();
    findings
        .retain(|f| f.rule != "bottleneck" || !f.node_ids.iter().all(|n| explained.contains(n)));
}

/// The query's operator CPU: the sum of every operator's self CPU (ns).
fn query_cpu(profile: &QueryProfile) -> u64 {
    profile
        .plan
        .iter()
        .map(|n| value(n, names::SELF_CPU_NANOS))
        .sum()
}

/// The time the query's tasks ran, summed over them (ns).
fn query_task_nanos(profile: &QueryProfile) -> u64 {
    profile
        .stages
        .iter()
        .map(|s| stage_task_nanos(profile, s.id))
        .sum()
}

/// The time the tasks of stage `id` ran, summed over them (ns).
fn stage_task_nanos(profile: &QueryProfile, id: u32) -> u64 {
    profile
        .stages
        .iter()
        .filter(|s| s.id == id)
        .flat_map(|s| &s.tasks)
        .map(|t| {
            t.finish_epoch_millis
                .saturating_sub(t.start_epoch_millis)
                .saturating_mul(1_000_000)
        })
        .sum()
}

/// Metric `name` of `node`, 0 if absent or negative.
fn value(node: &ProfileNode, name: &str) -> u64 {
    node.value(name).unwrap_or(0).max(0) as u64
}

/// `part` as a whole percentage of `whole` (0 without a whole).
fn pct(part: u64, whole: u64) -> u64 {
    permille(part, whole) / 10
}

/// `part` in thousandths of `whole` (0 without a whole; saturating).
fn permille(part: u64, whole: u64) -> u64 {
    if whole == 0 {
        0
    } else {
        u64::try_from(u128::from(part) * 1000 / u128::from(whole)).unwrap_or(u64::MAX)
    }
}

/// `v` as a metric number (saturating).
fn num(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

/// `#3 SortExec`, `#3 SortExec and #7 SortExec`, `#3 SortExec, #7 SortExec and 2 more`.
fn operators(nodes: &[&ProfileNode]) -> String {
    let names: Vec<String> = nodes
        .iter()
        .map(|n| format!("#{} {}", n.id, n.name))
        .collect();
    listed(&names)
}

/// Up to three items joined in prose, then how many more.
fn listed(items: &[String]) -> String {
    match items {
        [] => String::new(),
        [one] => one.clone(),
        [a, b] => format!("{a} and {b}"),
        [a, b, c] => format!("{a}, {b} and {c}"),
        [a, b, c, rest @ ..] => format!("{a}, {b}, {c} and {} more", rest.len()),
    }
}

/// The findings as text under a `findings:` header: each warning, ranked, with its cost and
/// fix; then the minor ones folded into one line. `findings: none` when there are none.
pub fn render_findings(findings: &[Finding]) -> String {
    let (warnings, minor): (Vec<&Finding>, Vec<&Finding>) = findings
        .iter()
        .partition(|f| f.severity == Severity::Warning);
    let mut out = String::from("findings:");
    if warnings.is_empty() {
        out.push_str(" none");
    }
    out.push('\n');
    for (rank, f) in warnings.iter().enumerate() {
        out.push_str(&format!(
            "  {}. [{}] {}: {}\n     cost {}; fix: {}\n",
            rank + 1,
            f.severity,
            f.rule,
            f.message,
            f.cost,
            f.action
        ));
    }
    if !minor.is_empty() {
        let rules: Vec<&str> = minor.iter().map(|f| f.rule).collect();
        out.push_str(&format!(
            "  ({} minor: {}; the JSON profile and qprof.findings hold them)\n",
            minor.len(),
            rules.join(", ")
        ));
    }
    out
}

#[cfg(test)]
mod tests;
