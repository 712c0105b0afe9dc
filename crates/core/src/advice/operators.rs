//! Rules about what operators did: `spill`, `io-bound`, `dominating-function`,
//! `unselective-filter`, `exploding-join` and the descriptive `unused-dynamic-filters`.

use super::{
    Cost, CostKind, Finding, Severity, num, operators, pct, permille, query_cpu, query_task_nanos,
    stage_task_nanos, thresholds, value,
};
use crate::format;
use crate::metric::saturating_i64;
use crate::profile::{ProfileNode, QueryProfile, names};

/// `spill`: operators wrote spill files because they ran out of memory. It cost the time
/// their tasks spent writing and reading them back.
pub(super) fn spill(profile: &QueryProfile) -> Option<Finding> {
    let mut spilled: Vec<&ProfileNode> = profile
        .plan
        .iter()
        .filter(|n| {
            value(n, names::SPILL_WRITTEN_BYTES) > 0 || value(n, names::SPILL_FILES_CREATED) > 0
        })
        .collect();
    let spill_nanos =
        |n: &ProfileNode| value(n, names::SPILL_WRITE_NANOS) + value(n, names::SPILL_READ_NANOS);
    spilled
        .sort_by_key(|n| std::cmp::Reverse((spill_nanos(n), value(n, names::SPILL_WRITTEN_BYTES))));
    let top = *spilled.first()?;
    let bytes: u64 = spilled
        .iter()
        .map(|n| value(n, names::SPILL_WRITTEN_BYTES))
        .sum();
    let files: u64 = spilled
        .iter()
        .map(|n| value(n, names::SPILL_FILES_CREATED))
        .sum();
    let nanos: u64 = spilled.iter().map(|n| spill_nanos(n)).sum();
    let partitions = value(top, names::SPILLED_PARTITIONS);
    let tasks = top
        .metric(names::SELF_CPU_NANOS)
        .map_or(0, |m| m.tasks.len());
    let message = format!(
        "{} spilled {} to {} file{} (#{} in {} of its {} partitions{}): it ran out of memory, wrote its state to disk and read it back",
        operators(&spilled),
        format::bytes(num(bytes)),
        files,
        if files == 1 { "" } else { "s" },
        top.id,
        partitions,
        tasks,
        if nanos > 0 {
            format!(", {} writing and reading", format::human_nanos(nanos))
        } else {
            String::new()
        }
    );
    Some(Finding {
        rule: "spill",
        severity: Severity::Warning,
        node_id: Some(top.id),
        stage_id: top.stage_id,
        node_ids: spilled.iter().map(|n| n.id).collect(),
        stage_ids: stages_of(&spilled),
        message,
        cost: Cost::new(CostKind::TaskTime, nanos, query_task_nanos(profile)),
        action: "give the query more memory (a larger pool limit, or fewer queries at once); a sort under a LIMIT, or input already sorted, needs less".to_string(),
        numbers: vec![
            (names::SPILL_WRITTEN_BYTES, num(bytes)),
            (names::SPILL_FILES_CREATED, num(files)),
            (names::SPILLED_PARTITIONS, num(partitions)),
            ("spillNanos", num(nanos)),
        ],
    })
}

/// The distinct stages of `nodes`, in their order.
fn stages_of(nodes: &[&ProfileNode]) -> Vec<u32> {
    let mut stages = Vec::new();
    for stage in nodes.iter().filter_map(|n| n.stage_id) {
        if !stages.contains(&stage) {
            stages.push(stage);
        }
    }
    stages
}

/// `io-bound` (with low read concurrency named inside it): operators whose tasks spent
/// most of their time waiting on their reads. It cost the time waited. (Waiting is measured
/// against the tasks' time, not the operator's: a scan waits between its polls.)
pub(super) fn io_bound(profile: &QueryProfile) -> Option<Finding> {
    let mut bound: Vec<&ProfileNode> = profile
        .plan
        .iter()
        .filter(|node| {
            let wait = value(node, names::IO_WAIT_NANOS);
            let tasks = node.stage_id.map_or(0, |s| stage_task_nanos(profile, s));
            wait > 0 && pct(wait, tasks) >= thresholds::IO_WAIT_PERCENT
        })
        .collect();
    bound.sort_by_key(|n| std::cmp::Reverse(value(n, names::IO_WAIT_NANOS)));
    let top = *bound.first()?;
    let wait: u64 = bound.iter().map(|n| value(n, names::IO_WAIT_NANOS)).sum();
    let read: u64 = bound.iter().map(|n| value(n, names::READ_BYTES)).sum();
    let requests: i64 = bound
        .iter()
        .map(|n| saturating_i64(value(n, names::READ_REQUESTS)))
        .sum();
    let stage = top.stage_id.map_or(0, |s| stage_task_nanos(profile, s));
    let mut message = format!(
        "{} kept {} tasks waiting on storage for {}% of their time ({} of {}; {} in {} requests)",
        operators(&bound),
        if bound.len() == 1 { "its" } else { "their" },
        pct(value(top, names::IO_WAIT_NANOS), stage),
        format::human_nanos(wait),
        format::human_nanos(stage),
        format::bytes(num(read)),
        requests,
    );
    let concurrency = top.value(names::AVERAGE_READ_CONCURRENCY);
    let low = concurrency.filter(|c| {
        requests >= thresholds::LOW_CONCURRENCY_MIN_REQUESTS
            && *c < thresholds::LOW_CONCURRENCY_TENTHS
    });
    if let Some(c) = low {
        message.push_str(&format!(
            ", {:.1} reads in flight on average",
            c as f64 / 10.0
        ));
    }
    let action = if low.is_some() {
        "overlap the reads: more partitions (target_partitions) or files split into more ranges keep more requests in flight; a cache in front of the store removes them"
    } else {
        "read less or nearer: project fewer columns, let statistics prune files and row groups, or put a cache or a faster tier in front of the store"
    };
    let mut numbers = vec![
        (names::IO_WAIT_NANOS, num(wait)),
        ("stageTaskNanos", num(stage)),
        (names::READ_BYTES, num(read)),
        (names::READ_REQUESTS, requests),
    ];
    if let Some(c) = concurrency {
        numbers.push(("averageReadConcurrencyTenths", c));
    }
    Some(Finding {
        rule: "io-bound",
        severity: Severity::Warning,
        node_id: Some(top.id),
        stage_id: top.stage_id,
        node_ids: bound.iter().map(|n| n.id).collect(),
        stage_ids: stages_of(&bound),
        message,
        cost: Cost::new(CostKind::TaskTime, wait, query_task_nanos(profile)),
        action: action.to_string(),
        numbers,
    })
}

/// `dominating-function`: one function takes most of a costly operator's own CPU, and a
/// good part of the query's. It cost that CPU.
pub(super) fn dominating_function(profile: &QueryProfile) -> Option<Finding> {
    let total = query_cpu(profile);
    let mut found: Vec<(&ProfileNode, &crate::profile::FunctionProfile)> = Vec::new();
    for node in profile.plan.iter() {
        let own = value(node, names::SELF_CPU_NANOS);
        let Some(top) = node.functions.iter().max_by_key(|f| f.cpu_nanos) else {
            continue;
        };
        if pct(top.cpu_nanos, own) >= thresholds::FUNCTION_PERCENT
            && pct(top.cpu_nanos, total) >= thresholds::FUNCTION_MIN_QUERY_PERCENT
        {
            found.push((node, top));
        }
    }
    found.sort_by_key(|(_, f)| std::cmp::Reverse(f.cpu_nanos));
    let (node, top) = *found.first()?;
    let own = value(node, names::SELF_CPU_NANOS);
    // a function costs at most its operator's own CPU (a sampled estimate can exceed it)
    let cpu: u64 = found
        .iter()
        .map(|(n, f)| f.cpu_nanos.min(value(n, names::SELF_CPU_NANOS)))
        .sum();
    let mut message = format!(
        "{} takes {}% of #{} {}'s own CPU ({}{} of {}, {}% of the query's)",
        top.expression,
        pct(top.cpu_nanos, own).min(100),
        node.id,
        node.name,
        if top.cpu_extrapolated { "~" } else { "" },
        format::human_nanos(top.cpu_nanos),
        format::human_nanos(own),
        pct(top.cpu_nanos.min(own), total),
    );
    if found.len() > 1 {
        let others: Vec<String> = found[1..]
            .iter()
            .map(|(n, f)| format!("{} in #{} {}", f.expression, n.id, n.name))
            .collect();
        message.push_str(&format!("; so does {}", super::listed(&others)));
    }
    Some(Finding {
        rule: "dominating-function",
        severity: Severity::Warning,
        node_id: Some(node.id),
        stage_id: node.stage_id,
        node_ids: found.iter().map(|(n, _)| n.id).collect(),
        stage_ids: stages_of(&found.iter().map(|(n, _)| *n).collect::<Vec<_>>()),
        message,
        cost: Cost::new(CostKind::Cpu, cpu, total),
        action: format!(
            "make {} cheaper: compute it once (a column written beside the data, or a subquery it is shared by), call it on fewer rows (filter first), or use a cheaper equivalent",
            top.name
        ),
        numbers: vec![
            (names::FUNCTION_CPU_NANOS, num(top.cpu_nanos)),
            (names::SELF_CPU_NANOS, num(own)),
            ("queryCpuNanos", num(total)),
        ],
    })
}

/// `unused-dynamic-filters` (always `info`): operators produced dynamic filters that no
/// scan took. Its cost is an upper bound: the CPU of the scans that could have used them.
pub(super) fn unused_dynamic_filters(profile: &QueryProfile) -> Option<Finding> {
    let accepted: u64 = profile
        .plan
        .iter()
        .map(|n| value(n, names::DYNAMIC_FILTERS_ACCEPTED))
        .sum();
    if accepted > 0 {
        return None;
    }
    let producers: Vec<&ProfileNode> = profile
        .plan
        .iter()
        .filter(|n| value(n, names::DYNAMIC_FILTERS_PRODUCED) > 0)
        .collect();
    let top = *producers.first()?;
    let produced: u64 = producers
        .iter()
        .map(|n| value(n, names::DYNAMIC_FILTERS_PRODUCED))
        .sum();
    let scans: u64 = profile
        .plan
        .iter()
        .filter(|n| n.children.is_empty())
        .map(|n| value(n, names::SELF_CPU_NANOS))
        .sum();
    Some(Finding {
        rule: "unused-dynamic-filters",
        severity: Severity::Info,
        node_id: Some(top.id),
        stage_id: top.stage_id,
        node_ids: producers.iter().map(|n| n.id).collect(),
        stage_ids: stages_of(&producers),
        message: format!(
            "{} produced {produced} dynamic filter{} that no scan accepted: the scans read every row the filter could have skipped",
            operators(&producers),
            if produced == 1 { "" } else { "s" }
        ),
        cost: Cost::new(CostKind::Cpu, scans, query_cpu(profile)),
        action: "a scan takes dynamic filters when its source can push filters down (Parquet does; a custom table provider must accept them)".to_string(),
        numbers: vec![(names::DYNAMIC_FILTERS_PRODUCED, num(produced))],
    })
}

/// `unselective-filter`: filters right above scans keep almost every row the scans read,
/// and the scans skipped no file or row group with them: the predicates cost CPU and
/// prune nothing (a predicate on an unsorted column, or one that statistics cannot
/// decide). It cost the filters' CPU.
pub(super) fn unselective_filters(profile: &QueryProfile) -> Option<Finding> {
    let mut found: Vec<(&ProfileNode, &ProfileNode)> = Vec::new();
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
        if read >= thresholds::UNSELECTIVE_FILTER_MIN_ROWS
            && permille(kept, read) >= thresholds::UNSELECTIVE_FILTER_PERMILLE
            && skipped == 0
        {
            found.push((filter, scan));
        }
    }
    found.sort_by_key(|(f, _)| std::cmp::Reverse(value(f, names::SELF_CPU_NANOS)));
    let (filter, scan) = *found.first()?;
    let (read, kept) = (
        value(scan, names::OUTPUT_ROWS),
        value(filter, names::OUTPUT_ROWS),
    );
    let cpu: u64 = found
        .iter()
        .map(|(f, _)| value(f, names::SELF_CPU_NANOS))
        .sum();
    let mut message = format!(
        "#{} FilterExec keeps {:.1}% of the {} rows #{} {} read, which skipped no file or row group with it: the predicate costs {} of CPU to remove {} rows",
        filter.id,
        permille(kept, read) as f64 / 10.0,
        format::integer(num(read)),
        scan.id,
        scan.name,
        format::human_nanos(value(filter, names::SELF_CPU_NANOS)),
        format::integer(num(read - kept)),
    );
    if found.len() > 1 {
        let others: Vec<&ProfileNode> = found[1..].iter().map(|(f, _)| *f).collect();
        message.push_str(&format!("; so does {}", operators(&others)));
    }
    Some(Finding {
        rule: "unselective-filter",
        severity: Severity::Warning,
        node_id: Some(filter.id),
        stage_id: filter.stage_id,
        node_ids: found.iter().map(|(f, _)| f.id).collect(),
        stage_ids: stages_of(&found.iter().map(|(f, _)| *f).collect::<Vec<_>>()),
        message,
        cost: Cost::new(CostKind::Cpu, cpu, query_cpu(profile)),
        action: "if the predicate is meant to prune, sort or partition the files on its column so that their statistics let the scan skip; if it holds for nearly every row, a cheaper form of it (or none) saves its CPU".to_string(),
        numbers: vec![
            ("scanOutputRows", num(read)),
            ("filterOutputRows", num(kept)),
            (names::SELF_CPU_NANOS, num(cpu)),
        ],
    })
}

/// `exploding-join`: joins that emitted many times the rows of their larger input (a key
/// that repeats on both sides, or a missing join condition). It cost the join's CPU and
/// that of the operators above it that took the exploded rows in.
pub(super) fn exploding_joins(profile: &QueryProfile) -> Option<Finding> {
    let mut found: Vec<(&ProfileNode, u64)> = Vec::new();
    let mut above: Vec<&ProfileNode> = Vec::new();
    exploding_under(&profile.plan, &mut above, &mut found);
    found.sort_by_key(|(_, cost)| std::cmp::Reverse(*cost));
    let (join, _) = *found.first()?;
    let emitted = value(join, names::OUTPUT_ROWS);
    let inputs = [
        value(&join.children[0], names::OUTPUT_ROWS),
        value(&join.children[1], names::OUTPUT_ROWS),
    ];
    let larger = inputs[0].max(inputs[1]);
    let mut message = format!(
        "#{} {} emitted {} rows from inputs of {} and {} rows ({}x its larger input)",
        join.id,
        join.name,
        format::integer(num(emitted)),
        format::integer(num(inputs[0])),
        format::integer(num(inputs[1])),
        emitted / larger.max(1),
    );
    if found.len() > 1 {
        let others: Vec<&ProfileNode> = found[1..].iter().map(|(j, _)| *j).collect();
        message.push_str(&format!("; so did {}", operators(&others)));
    }
    let cost: u64 = found.iter().map(|(_, c)| c).sum();
    Some(Finding {
        rule: "exploding-join",
        severity: Severity::Warning,
        node_id: Some(join.id),
        stage_id: join.stage_id,
        node_ids: found.iter().map(|(j, _)| j.id).collect(),
        stage_ids: stages_of(&found.iter().map(|(j, _)| *j).collect::<Vec<_>>()),
        message,
        cost: Cost::new(CostKind::Cpu, cost, query_cpu(profile)),
        action: "check the join condition: a key that repeats on both sides multiplies the rows (join on the full key, or aggregate one side first), and a missing condition pairs every row with every row".to_string(),
        numbers: vec![
            (names::OUTPUT_ROWS, num(emitted)),
            ("firstInputRows", num(inputs[0])),
            ("secondInputRows", num(inputs[1])),
            ("costCpuNanos", num(cost)),
        ],
    })
}

/// Walks `node`'s subtree with the operators `above` it, adding each exploding join with its
/// cost: its own CPU and that of each operator above it whose input was still at least the
/// exploded size.
fn exploding_under<'a>(
    node: &'a ProfileNode,
    above: &mut Vec<&'a ProfileNode>,
    found: &mut Vec<(&'a ProfileNode, u64)>,
) {
    if node.name.ends_with("JoinExec") && node.children.len() == 2 {
        let emitted = value(node, names::OUTPUT_ROWS);
        let larger = value(&node.children[0], names::OUTPUT_ROWS)
            .max(value(&node.children[1], names::OUTPUT_ROWS));
        if emitted >= thresholds::EXPLODING_JOIN_MIN_ROWS
            && emitted >= larger.saturating_mul(thresholds::EXPLODING_JOIN_RATIO)
        {
            let mut cost = value(node, names::SELF_CPU_NANOS);
            let exploded = larger.saturating_mul(thresholds::EXPLODING_JOIN_RATIO);
            let mut input = emitted;
            for parent in above.iter().rev() {
                if input < exploded {
                    break;
                }
                cost += value(parent, names::SELF_CPU_NANOS);
                input = value(parent, names::OUTPUT_ROWS);
            }
            found.push((node, cost));
        }
    }
    above.push(node);
    for child in &node.children {
        exploding_under(child, above, found);
    }
    above.pop();
}
