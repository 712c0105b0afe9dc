//! Rules that set what the engine expected against what happened: the optimizer's row
//! estimates against the rows operators produced (`misestimate`), and the memory the
//! engine accounted for against the heap the process used (`untracked-memory`).

use super::{Finding, Severity, thresholds, value};
use crate::format;
use crate::metric::saturating_i64;
use crate::profile::{ProfileNode, QueryProfile, names};

/// `misestimate`: an input of a join, or an aggregate's output, produced ten times more
/// or fewer rows than the optimizer estimated: the join order, the build side and the
/// aggregation's strategy were chosen on the wrong numbers.
pub(super) fn misestimates(profile: &QueryProfile, out: &mut Vec<Finding>) {
    for node in profile.plan.iter() {
        if node.name.ends_with("JoinExec") {
            for (side, input) in node.children.iter().enumerate() {
                if let Some(finding) = misestimate(input, Some((node, side))) {
                    out.push(finding);
                }
            }
        } else if node.name == "AggregateExec"
            && let Some(finding) = misestimate(node, None)
        {
            out.push(finding);
        }
    }
}

/// The finding for `node`, an input of `join` (with its side) or an aggregate, if its
/// rows are far from the estimate.
fn misestimate(node: &ProfileNode, join: Option<(&ProfileNode, usize)>) -> Option<Finding> {
    let estimated = node.estimate?.rows.value()?;
    let actual = value(node, names::OUTPUT_ROWS).max(0) as u64;
    let (low, high) = (estimated.min(actual), estimated.max(actual));
    if high < thresholds::MISESTIMATE_MIN_ROWS
        || high < low.max(1).saturating_mul(thresholds::MISESTIMATE_RATIO)
    {
        return None;
    }
    let what = match join {
        Some((join, side)) => format!(
            "the {} input of #{} {} (#{} {})",
            if side == 0 { "first" } else { "second" },
            join.id,
            join.name,
            node.id,
            node.name
        ),
        None => format!("#{} {}", node.id, node.name),
    };
    let direction = if actual > estimated { "more" } else { "fewer" };
    Some(Finding {
        rule: "misestimate",
        severity: Severity::Warning,
        node_id: Some(node.id),
        stage_id: node.stage_id,
        message: format!(
            "{what} produced {} rows where the optimizer expected {} ({}x {direction}): plan choices made on the estimate (join order, build side, aggregation) may be wrong; statistics of its inputs (analyze the tables, collect file statistics) would correct it",
            format::integer(saturating_i64(actual)),
            format::integer(saturating_i64(estimated)),
            high / low.max(1),
        ),
        numbers: vec![
            (names::OUTPUT_ROWS, saturating_i64(actual)),
            ("estimatedRows", saturating_i64(estimated)),
        ],
    })
}

/// `untracked-memory`: while a stage ran, the process's heap was well above what the
/// memory pools and caches held: memory the engine allocates without reserving it (a
/// function's or an operator's buffers), which a memory limit does not bound.
pub(super) fn untracked_memory(profile: &QueryProfile, out: &mut Vec<Finding>) {
    for stage in &profile.stages {
        let Some(memory) = stage.memory else {
            continue;
        };
        // no counting allocator, no heap figure
        if memory.heap_bytes == 0 {
            continue;
        }
        let tracked = memory.unified_bytes();
        let untracked = memory.heap_bytes.saturating_sub(tracked);
        if untracked < thresholds::UNTRACKED_MEMORY_MIN_BYTES
            || untracked < tracked.saturating_mul(thresholds::UNTRACKED_MEMORY_RATIO)
        {
            continue;
        }
        let mut message = format!(
            "while stage {} ran the heap reached {} but the memory pools and caches held at most {}: {} the engine allocated without reserving it, which no memory limit bounds",
            stage.id,
            format::bytes(saturating_i64(memory.heap_bytes)),
            format::bytes(saturating_i64(tracked)),
            format::bytes(saturating_i64(untracked)),
        );
        if profile.stack_samples.is_some() {
            // the symbolizer keeps what it parsed of the binary's debug information
            message.push_str(
                " (stacks were sampled: naming their addresses keeps parts of the binary's debug information on the heap too, hundreds of MiB for a large binary)",
            );
        }
        out.push(Finding {
            rule: "untracked-memory",
            severity: Severity::Warning,
            node_id: None,
            stage_id: Some(stage.id),
            message,
            numbers: vec![
                ("heapBytes", saturating_i64(memory.heap_bytes)),
                ("trackedBytes", saturating_i64(tracked)),
                ("untrackedBytes", saturating_i64(untracked)),
            ],
        });
    }
}

#[cfg(test)]
mod tests {
    use super::super::advise;
    use super::*;
    use crate::executor_memory::MemorySample;
    use crate::profile::fixtures::sample;
    use crate::profile::{Estimate, Estimated};

    fn fired(profile: &QueryProfile, rule: &str) -> Vec<Finding> {
        advise(profile)
            .into_iter()
            .filter(|f| f.rule == rule)
            .collect()
    }

    /// The sample with its node `id` estimated at `estimated` rows and producing `actual`,
    /// renamed `name`.
    fn estimated(name: &str, estimated: Estimated, actual: i64) -> QueryProfile {
        let mut p = sample();
        let node = &mut p.plan.children[0];
        node.name = name.to_string();
        node.estimate = Some(Estimate {
            rows: estimated,
            bytes: Estimated::Absent,
        });
        let rows = node
            .metrics
            .iter_mut()
            .find(|m| m.name == names::OUTPUT_ROWS)
            .unwrap();
        rows.value = actual;
        p
    }

    #[test]
    fn an_aggregate_ten_times_off_its_estimate_is_misestimated_either_way() {
        let min = thresholds::MISESTIMATE_MIN_ROWS;
        let over = fired(
            &estimated("AggregateExec", Estimated::Inexact(min / 10), min as i64),
            "misestimate",
        );
        assert_eq!(over.len(), 1, "{over:?}");
        assert!(over[0].message.contains("10x more"), "{}", over[0].message);
        let under = fired(
            &estimated("AggregateExec", Estimated::Exact(min * 20), min as i64),
            "misestimate",
        );
        assert_eq!(under.len(), 1);
        assert!(
            under[0].message.contains("20x fewer"),
            "{}",
            under[0].message
        );
        // just under the ratio, under the floor, no estimate, or not an aggregate: quiet
        for quiet in [
            estimated(
                "AggregateExec",
                Estimated::Inexact(min / 10 + 1),
                min as i64,
            ),
            estimated("AggregateExec", Estimated::Inexact(1), (min - 1) as i64),
            estimated("AggregateExec", Estimated::Absent, min as i64 * 100),
            estimated("FilterExec", Estimated::Inexact(1), min as i64 * 100),
        ] {
            assert!(fired(&quiet, "misestimate").is_empty());
        }
    }

    #[test]
    fn a_stage_whose_heap_dwarfs_its_reservations_has_untracked_memory() {
        let min = thresholds::UNTRACKED_MEMORY_MIN_BYTES;
        let with = |heap: u64, execution: u64| {
            let mut p = sample();
            p.stages[0].memory = Some(MemorySample {
                heap_bytes: heap,
                execution_bytes: execution,
                ..MemorySample::default()
            });
            p
        };
        let found = fired(&with(min + 1_000, 500), "untracked-memory");
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].stage_id, Some(with(0, 0).stages[0].id));
        assert!(!found[0].message.contains("stacks were sampled"));
        // a sampled query's finding says the symbolizer's memory is part of it
        let mut sampled = with(min + 1_000, 500);
        sampled.stack_samples = Some(crate::stacks::StackSamples::default());
        let found = fired(&sampled, "untracked-memory");
        assert!(
            found[0].message.contains("stacks were sampled"),
            "{}",
            found[0].message
        );
        // under the floor, under twice the reservations, or no heap figure: quiet
        assert!(fired(&with(min - 1, 0), "untracked-memory").is_empty());
        assert!(fired(&with(min * 3, min * 2), "untracked-memory").is_empty());
        assert!(fired(&with(0, 0), "untracked-memory").is_empty());
    }
}
