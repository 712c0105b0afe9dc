//! The optimizer's row estimates against the rows operators produced, where the plan chose
//! on them (`misestimate`). An estimate that was wrong but chose nothing stays in the
//! profile beside the actual rows, as EXPLAIN ANALYZE shows it, without a finding.

use super::{Cost, CostKind, Finding, Severity, listed, num, query_cpu, thresholds, value};
use crate::format;
use crate::profile::{ProfileNode, QueryProfile, names};

/// One hash join whose build side was chosen on a wrong estimate.
struct WrongBuild<'a> {
    join: &'a ProfileNode,
    build: &'a ProfileNode,
    probe: &'a ProfileNode,
    estimated: u64,
    actual: u64,
    probe_rows: u64,
    /// The CPU the wrong choice cost (ns).
    cost: u64,
    /// Why it was wrong: the larger side built, or one table for every partition.
    larger_side: bool,
}

/// `misestimate`: a hash join built its table on an input whose rows were far above the
/// estimate its statistics gave (exact or inexact, not absent), and the plan chose on it:
/// the build side turned out the larger side, or the join built one table for all
/// partitions (`CollectLeft`) on an input too large for one. It cost the part of the build
/// phase's CPU that the right choice would not have spent.
pub(super) fn misestimates(profile: &QueryProfile) -> Option<Finding> {
    let mut found: Vec<WrongBuild<'_>> = profile.plan.iter().filter_map(wrong_build).collect();
    found.sort_by_key(|w| std::cmp::Reverse(w.cost));
    let worst = found.first()?;
    let why = if worst.larger_side {
        format!(
            "it built its hash table on the larger side ({} rows; the other side, #{} {}, {})",
            format::integer(num(worst.actual)),
            worst.probe.id,
            worst.probe.name,
            format::integer(num(worst.probe_rows))
        )
    } else {
        format!(
            "it built one hash table for every partition (CollectLeft) on {} rows",
            format::integer(num(worst.actual))
        )
    };
    let mut message = format!(
        "the build input of #{} {} (#{} {}) produced {} rows where the optimizer expected {} ({}x more): {why}",
        worst.join.id,
        worst.join.name,
        worst.build.id,
        worst.build.name,
        format::integer(num(worst.actual)),
        format::integer(num(worst.estimated)),
        worst.actual / worst.estimated.max(1),
    );
    if found.len() > 1 {
        let others: Vec<String> = found[1..]
            .iter()
            .map(|w| format!("#{} {}", w.join.id, w.join.name))
            .collect();
        message.push_str(&format!("; so did {}", listed(&others)));
    }
    let cost: u64 = found.iter().map(|w| w.cost).sum();
    Some(Finding {
        rule: "misestimate",
        severity: Severity::Warning,
        node_id: Some(worst.join.id),
        stage_id: worst.join.stage_id,
        node_ids: found.iter().map(|w| w.join.id).collect(),
        stage_ids: found.iter().filter_map(|w| w.join.stage_id).collect(),
        message,
        cost: Cost::new(CostKind::Cpu, cost, query_cpu(profile)),
        action: format!(
            "give the optimizer true row counts for #{} {}'s tables (collect file statistics: datafusion.execution.collect_statistics, or a table provider's statistics that do not understate), or write the smaller input first",
            worst.build.id, worst.build.name
        ),
        numbers: vec![
            ("buildRows", num(worst.actual)),
            ("estimatedBuildRows", num(worst.estimated)),
            ("probeRows", num(worst.probe_rows)),
            ("costCpuNanos", num(cost)),
        ],
    })
}

/// `join`'s wrong build side, if it is a hash join whose build input was misestimated and
/// chosen on that estimate.
fn wrong_build(join: &ProfileNode) -> Option<WrongBuild<'_>> {
    if join.name != "HashJoinExec" {
        return None;
    }
    let [build, probe] = join.children.as_slice() else {
        return None;
    };
    let display = join.display.as_str();
    let collect_left = display.contains("mode=CollectLeft");
    if !collect_left && !display.contains("mode=Partitioned") {
        return None;
    }
    let estimated = build.estimate?.rows.value()?;
    let actual = value(build, names::OUTPUT_ROWS);
    let probe_rows = value(probe, names::OUTPUT_ROWS);
    if actual < thresholds::MISESTIMATE_MIN_ROWS
        || actual
            < estimated
                .max(1)
                .saturating_mul(thresholds::MISESTIMATE_RATIO)
    {
        return None;
    }
    let larger_side =
        actual >= probe_rows.saturating_mul(thresholds::MISESTIMATE_BUILD_SIDE_FACTOR);
    let too_large_to_collect = collect_left && actual >= thresholds::COLLECT_LEFT_MAX_ROWS;
    if !larger_side && !too_large_to_collect {
        return None;
    }
    // the hash join's build phase's CPU: `hashBuildCpuNanos`, named from the catalog
    let (hash_build, _) = names::JOIN_PHASE_PREFIXES[0];
    let build_cpu = value(join, &format!("{hash_build}CpuNanos"));
    // building on the smaller side would have cost the build its share of the rows
    let cost = if larger_side {
        (u128::from(build_cpu) * u128::from(actual - probe_rows.min(actual)) / u128::from(actual))
            as u64
    } else {
        build_cpu
    };
    Some(WrongBuild {
        join,
        build,
        probe,
        estimated,
        actual,
        probe_rows,
        cost,
        larger_side,
    })
}

#[cfg(test)]
mod tests {
    use super::super::advise;
    use super::*;
    use crate::metric::{MetricKind, TaskValue};
    use crate::profile::fixtures::sample;
    use crate::profile::{Estimate, Estimated, NodeMetric, OperatorText};

    fn fired(profile: &QueryProfile, rule: &str) -> Vec<Finding> {
        advise(profile)
            .into_iter()
            .filter(|f| f.rule == rule)
            .collect()
    }

    fn with_metric(node: &mut ProfileNode, name: &'static str, v: i64) {
        node.metrics.retain(|m| m.name != name);
        node.metrics.push(NodeMetric::summed(
            name,
            name,
            MetricKind::Sum,
            vec![TaskValue {
                task: None,
                value: v,
            }],
        ));
    }

    /// The sample's filter turned into a hash join in `mode` of its scan (the build side,
    /// estimated at `estimated` rows, producing `build` rows) with a copy of it (`probe`
    /// rows), whose build phase took `build_cpu` ns.
    fn join(
        mode: &str,
        estimated: Estimated,
        build: i64,
        probe: i64,
        build_cpu: i64,
    ) -> QueryProfile {
        let mut p = sample();
        let node = &mut p.plan.children[0];
        node.name = "HashJoinExec".into();
        node.display = OperatorText::from(format!("HashJoinExec: mode={mode}, join_type=Inner"));
        with_metric(node, "hashBuildCpuNanos", build_cpu);
        let mut other = node.children[0].clone();
        other.id = 3;
        with_metric(&mut other, names::OUTPUT_ROWS, probe);
        node.children.push(other);
        let scan = &mut node.children[0];
        scan.estimate = Some(Estimate {
            rows: estimated,
            bytes: Estimated::Absent,
        });
        with_metric(scan, names::OUTPUT_ROWS, build);
        p
    }

    #[test]
    fn a_build_side_chosen_on_a_wrong_estimate_is_a_misestimate() {
        let min = thresholds::MISESTIMATE_MIN_ROWS as i64;
        // estimated at a tenth of the rows it gave, and four times the probe side
        let p = join(
            "Partitioned",
            Estimated::Inexact(min as u64 / 10),
            min * 4,
            min,
            80_000_000,
        );
        let found = fired(&p, "misestimate");
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].node_id, Some(1));
        assert!(
            found[0].message.contains("produced 40,000 rows where the optimizer expected 1,000 (40x more): it built its hash table on the larger side"),
            "{}",
            found[0].message
        );
        // building on the probe side's 10,000 rows would have saved 3/4 of the 80 ms
        assert_eq!(found[0].cost.kind, CostKind::Cpu);
        assert_eq!(found[0].cost.amount, 60_000_000);
        assert_eq!(found[0].severity, Severity::Warning);
        // CollectLeft on an input too large for one table, even the smaller side
        let big = thresholds::COLLECT_LEFT_MAX_ROWS as i64;
        let p = join(
            "CollectLeft",
            Estimated::Exact(100),
            big,
            big * 3,
            50_000_000,
        );
        let found = fired(&p, "misestimate");
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(
            found[0]
                .message
                .contains("one hash table for every partition"),
            "{}",
            found[0].message
        );
        assert_eq!(found[0].cost.amount, 50_000_000);
    }

    #[test]
    fn a_wrong_estimate_that_chose_nothing_is_no_finding() {
        let min = thresholds::MISESTIMATE_MIN_ROWS as i64;
        for quiet in [
            // right side after all: the build side is the smaller
            join(
                "Partitioned",
                Estimated::Inexact(10),
                min,
                min * 4,
                80_000_000,
            ),
            // off by less than ten times
            join(
                "Partitioned",
                Estimated::Inexact(min as u64 / 9),
                min,
                10,
                80_000_000,
            ),
            // no estimate: nothing was chosen on it
            join("Partitioned", Estimated::Absent, min * 4, min, 80_000_000),
            // too few rows to matter
            join("Partitioned", Estimated::Inexact(1), min - 1, 1, 80_000_000),
            // CollectLeft on a small input, the smaller side
            join(
                "CollectLeft",
                Estimated::Inexact(10),
                min,
                min * 4,
                80_000_000,
            ),
        ] {
            assert!(
                fired(&quiet, "misestimate").is_empty(),
                "{:?}",
                fired(&quiet, "misestimate")
            );
        }
        // an aggregate far off its estimate: shown beside the actual rows, no finding
        let mut p = sample();
        p.plan.estimate = Some(Estimate {
            rows: Estimated::Inexact(1),
            bytes: Estimated::Absent,
        });
        with_metric(&mut p.plan, names::OUTPUT_ROWS, min * 100);
        assert!(fired(&p, "misestimate").is_empty());
    }
}
