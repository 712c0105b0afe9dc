//! The advisor's rules against hand-built profiles: each fires at its threshold and stays
//! quiet just under it, says what it cost, and is a warning only above the floor of cost.

use super::*;
use crate::metric::{MetricKind, TaskValue};
use crate::profile::fixtures::sample;
use crate::profile::{StageProfile, TaskProfile};

/// Sets operator `id`'s metric `name` to `value` (one task).
fn set(profile: &mut QueryProfile, id: usize, name: &'static str, value: i64) {
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
fn a_cost_is_material_above_both_floors() {
    let ms = 1_000_000;
    // time: 10 ms and 5 % of the query's
    assert!(Cost::new(CostKind::Wall, 10 * ms, 200 * ms).is_material());
    assert!(!Cost::new(CostKind::Wall, 10 * ms - 1, 100 * ms).is_material());
    assert!(!Cost::new(CostKind::Cpu, 10 * ms, 201 * ms).is_material());
    // memory: 64 MiB and 10 % of the limit
    assert!(Cost::new(CostKind::Memory, 64 << 20, 640 << 20).is_material());
    assert!(!Cost::new(CostKind::Memory, (64 << 20) - 1, 64 << 20).is_material());
    assert!(!Cost::new(CostKind::Memory, 64 << 20, (640 << 20) + 1024).is_material());
    // no whole: no share, never material
    assert!(!Cost::new(CostKind::TaskTime, 10 * ms, 0).is_material());
    assert_eq!(
        Cost::new(CostKind::Wall, 12 * ms, 40 * ms).to_string(),
        "12.00 ms of wall time (30.0% of the query's)"
    );
    assert_eq!(
        Cost::new(CostKind::Memory, 3 << 30, 4 << 30).to_string(),
        "3.0 GiB of memory (75.0% of the limit)"
    );
    for kind in [
        CostKind::Wall,
        CostKind::Cpu,
        CostKind::TaskTime,
        CostKind::Memory,
    ] {
        assert_eq!(CostKind::parse(kind.as_str()), Some(kind));
    }
}

#[test]
fn findings_are_ranked_by_their_share_of_the_query_warnings_first() {
    let mut p = sample();
    // a spill costing 30 % of the task time, planning costing 60 % of the wall time
    set(&mut p, 0, names::SPILL_WRITTEN_BYTES, 3 << 20);
    set(&mut p, 0, names::SPILL_FILES_CREATED, 2);
    set(&mut p, 0, names::SPILL_WRITE_NANOS, 12_000_000);
    p.planning = Some(planned(thresholds::SLOW_PLANNING_MIN_NANOS * 3));
    p.duration_nanos = thresholds::SLOW_PLANNING_MIN_NANOS * 5;
    let found = advise(&p);
    let order: Vec<(&str, Severity)> = found.iter().map(|f| (f.rule, f.severity)).collect();
    assert_eq!(
        order,
        [
            ("slow-planning", Severity::Warning),
            ("spill", Severity::Warning),
            ("bottleneck", Severity::Info)
        ]
    );
    assert_eq!(found[0].cost.share_permille(), 600);
    assert_eq!(found[1].cost.share_permille(), 300);
    // the text ranks the warnings with cost and fix, and folds the minor ones
    let text = render_findings(&found);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines[0], "findings:");
    assert!(
        lines[1].starts_with("  1. [warn] slow-planning: planning took"),
        "{text}"
    );
    assert!(
        lines[2].starts_with("     cost 300.00 ms of wall time (60.0% of the query's); fix: "),
        "{text}"
    );
    assert!(
        lines[3].starts_with("  2. [warn] spill: #0 AggregateExec spilled"),
        "{text}"
    );
    assert_eq!(
        lines[5],
        "  (1 minor: bottleneck; the JSON profile and qprof.findings hold them)"
    );
    assert_eq!(lines.len(), 6, "{text}");
    // the same spill costing 2 ms: below the floor, minor
    set(&mut p, 0, names::SPILL_WRITE_NANOS, 2_000_000);
    let spill = fired(&p, "spill");
    assert_eq!(spill[0].severity, Severity::Info);
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
    p.duration_nanos = 2_000_000_000;
    let found = fired(&p, "skewed-tasks");
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0].stage_id, Some(0));
    assert_eq!(found[0].stage_ids, [0]);
    assert_eq!(found[0].severity, Severity::Warning);
    assert!(found[0].numbers.contains(&("maxTaskMillis", 900)));
    assert!(found[0].numbers.contains(&("medianTaskMillis", 100)));
    // it cost the 800 ms the stage waited on its slowest task beyond the median
    assert_eq!(
        found[0].cost,
        Cost::new(CostKind::Wall, 800_000_000, 2_000_000_000)
    );
    // a second skewed stage is listed in the same finding, and adds its wait
    p.stages.push(stage(3, &[100, 100, 100, 100, 500]));
    let found = fired(&p, "skewed-tasks");
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0].stage_ids, [0, 3]);
    assert!(
        found[0].message.contains("so are stages 3 (5.0x)"),
        "{}",
        found[0].message
    );
    assert_eq!(found[0].cost.amount, 1_200_000_000);
}

#[test]
fn spill_flags_operators_that_wrote_spill_files() {
    let mut p = sample();
    assert!(fired(&p, "spill").is_empty());
    set(&mut p, 0, names::SPILL_WRITTEN_BYTES, 3 << 20);
    set(&mut p, 0, names::SPILL_FILES_CREATED, 2);
    set(&mut p, 0, names::SPILLED_PARTITIONS, 1);
    set(&mut p, 0, names::SPILL_WRITE_NANOS, 9_000_000);
    set(&mut p, 0, names::SPILL_READ_NANOS, 3_000_000);
    let found = fired(&p, "spill");
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].node_id, Some(0));
    assert!(
        found[0].message.contains(
            "spilled 3.0 MiB to 2 files (#0 in 1 of its 2 partitions, 12.00 ms writing and reading)"
        ),
        "{}",
        found[0].message
    );
    // it cost the time spent writing and reading, of the query's task time (one task: 40 ms)
    assert_eq!(
        found[0].cost,
        Cost::new(CostKind::TaskTime, 12_000_000, 40_000_000)
    );
    // warnings come first
    assert_eq!(advise(&p)[0].rule, "spill");
    // a second spilling operator joins the same finding
    set(&mut p, 1, names::SPILL_WRITTEN_BYTES, 1 << 20);
    let found = fired(&p, "spill");
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].node_ids, [0, 1]);
    assert!(
        found[0]
            .message
            .starts_with("#0 AggregateExec and #1 FilterExec spilled 4.0 MiB"),
        "{}",
        found[0].message
    );
}

#[test]
fn io_bound_and_low_concurrency_need_a_scan_that_mostly_waits() {
    // the scan's stage: one task of 40 ms
    let mut p = sample();
    set(&mut p, 2, names::IO_WAIT_NANOS, 15_000_000);
    set(&mut p, 2, names::READ_REQUESTS, 40);
    set(&mut p, 2, names::AVERAGE_READ_CONCURRENCY, 11);
    assert!(fired(&p, "io-bound").is_empty());
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
    // few reads in flight: said in the same finding, whose fix is to overlap them
    assert!(
        io[0].message.contains("1.1 reads in flight"),
        "{}",
        io[0].message
    );
    assert!(
        io[0].action.starts_with("overlap the reads"),
        "{}",
        io[0].action
    );
    assert_eq!(
        io[0].cost,
        Cost::new(CostKind::TaskTime, 30_000_000, 40_000_000)
    );
    assert_eq!(io[0].severity, Severity::Warning);
    // enough reads in flight: waiting, but not for want of concurrency
    set(&mut p, 2, names::AVERAGE_READ_CONCURRENCY, 40);
    let io = fired(&p, "io-bound");
    assert!(
        !io[0].message.contains("reads in flight"),
        "{}",
        io[0].message
    );
    assert!(
        io[0].action.starts_with("read less or nearer"),
        "{}",
        io[0].action
    );
    // a scan that waited 75 % of a 4 ms task: true, but it cost the query nothing to speak of
    let mut small = sample();
    small.stages[0].tasks[0].finish_epoch_millis = small.stages[0].tasks[0].start_epoch_millis + 4;
    set(&mut small, 2, names::IO_WAIT_NANOS, 3_000_000);
    let io = fired(&small, "io-bound");
    assert_eq!(io[0].severity, Severity::Info);
}

#[test]
fn a_function_dominating_a_costly_operator_is_named() {
    let mut p = sample();
    // the filter's function: 1.25 ms of a 4 ms operator with 5 % of the CPU
    assert!(fired(&p, "dominating-function").is_empty());
    set(&mut p, 1, names::SELF_CPU_NANOS, 40_000_000);
    p.plan.children[0].functions[0].cpu_nanos = 30_000_000;
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
    // 30 ms of 121.5 ms of operator CPU
    assert_eq!(
        found[0].cost,
        Cost::new(CostKind::Cpu, 30_000_000, 121_500_000)
    );
    assert_eq!(found[0].severity, Severity::Warning);
    assert!(
        found[0].action.contains("regexp_like"),
        "{}",
        found[0].action
    );
    // a sampled estimate above the operator's own CPU costs no more than the operator
    let mut over = p.clone();
    over.plan.children[0].functions[0].cpu_nanos = 55_000_000;
    let found = fired(&over, "dominating-function");
    assert_eq!(
        found[0].cost,
        Cost::new(CostKind::Cpu, 40_000_000, 121_500_000)
    );
    assert!(
        found[0].message.contains("100% of #1 FilterExec's own CPU"),
        "{}",
        found[0].message
    );
    // under half its operator's CPU, or under a fifth of the query's: quiet
    p.plan.children[0].functions[0].cpu_nanos = 19_000_000;
    assert!(fired(&p, "dominating-function").is_empty());
    set(&mut p, 1, names::SELF_CPU_NANOS, 20_000_000);
    p.plan.children[0].functions[0].cpu_nanos = 19_000_000;
    assert!(fired(&p, "dominating-function").is_empty());
}

#[test]
fn dynamic_filters_that_no_scan_accepted_are_flagged() {
    let mut p = sample();
    set(&mut p, 0, names::DYNAMIC_FILTERS_PRODUCED, 1);
    let found = fired(&p, "unused-dynamic-filters");
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].node_id, Some(0));
    // descriptive: never a warning, even when the scans are most of the query
    assert_eq!(found[0].severity, Severity::Info);
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
        found[0].message.contains("keeps 99.5% of the 200,000 rows"),
        "{}",
        found[0].message
    );
    // the filter's 4 ms are under the floor of 10 ms; at 40 ms it is a warning
    assert_eq!(found[0].severity, Severity::Info);
    let mut costly = p.clone();
    set(&mut costly, 1, names::SELF_CPU_NANOS, 40_000_000);
    let found = fired(&costly, "unselective-filter");
    assert_eq!(found[0].severity, Severity::Warning);
    assert_eq!(
        found[0].cost,
        Cost::new(CostKind::Cpu, 40_000_000, 121_500_000)
    );
    // its predicate's function is the same cause: no dominating-function beside it
    costly.plan.children[0].functions[0].cpu_nanos = 35_000_000;
    assert_eq!(
        rules(&costly).iter().map(|r| r.0).collect::<Vec<_>>(),
        ["unselective-filter", "bottleneck"]
    );
    // controls: a filter removing a few percent (the query's own predicate, not a
    // waste), just under the threshold; a scan that pruned with it; too few rows
    let mut selective = p.clone();
    set(&mut selective, 1, names::OUTPUT_ROWS, 198_999);
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
    assert_eq!(
        found[0].cost,
        Cost::new(CostKind::Memory, 95 << 20, 100 << 20)
    );
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
fn a_pool_near_its_limit_because_its_holder_spilled_is_the_spill() {
    let mut p = sample();
    p.memory_pool = Some(crate::profile::MemoryPoolUsage {
        limit_bytes: Some(100 << 20),
        peak_bytes: 95 << 20,
    });
    set(&mut p, 0, names::PEAK_MEMORY_BYTES, 90 << 20);
    set(&mut p, 1, names::PEAK_MEMORY_BYTES, 5 << 20);
    assert_eq!(fired(&p, "memory-near-limit")[0].node_ids, [0]);
    // another operator spilled: two causes
    set(&mut p, 1, names::SPILL_WRITTEN_BYTES, 1 << 20);
    assert_eq!(fired(&p, "memory-near-limit").len(), 1);
    assert_eq!(fired(&p, "spill").len(), 1);
    // the holder itself spilled: one cause, told by the spill
    set(&mut p, 0, names::SPILL_WRITTEN_BYTES, 8 << 20);
    assert!(fired(&p, "memory-near-limit").is_empty());
    assert_eq!(fired(&p, "spill")[0].node_ids, [0, 1]);
}

#[test]
fn minor_findings_fold_into_one_line() {
    let text = render_findings(&advise(&sample()));
    assert_eq!(
        text,
        "findings: none\n  (1 minor: bottleneck; the JSON profile and qprof.findings hold them)\n"
    );
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
    // the rule took all of it: the fix names it
    assert!(
        found[0].action.contains("push_down_filter"),
        "{}",
        found[0].action
    );
    assert_eq!(found[0].cost, Cost::new(CostKind::Wall, min, 2 * min));
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
    let min = thresholds::EXPLODING_JOIN_MIN_ROWS as i64;
    let found = fired(&join_of(min, min / 10, min / 20), "exploding-join");
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0].node_id, Some(1));
    assert_eq!(found[0].severity, Severity::Info);
    // it cost its own CPU (4 ms) and the aggregate's above it, which took its rows in
    // (1.5 ms): under the floor here
    assert_eq!(
        found[0].cost,
        Cost::new(CostKind::Cpu, 5_500_000, 85_500_000 + 80_000_000)
    );
    let mut costly = join_of(min, min / 10, min / 20);
    set(&mut costly, 1, names::SELF_CPU_NANOS, 60_000_000);
    let found = fired(&costly, "exploding-join");
    assert_eq!(found[0].severity, Severity::Warning);
    assert_eq!(advise(&costly)[0].rule, "exploding-join");
    assert!(
        found[0].message.contains("10x its larger input"),
        "{}",
        found[0].message
    );
    // just under ten times, or under the minimum: quiet
    assert!(fired(&join_of(min, min / 10 + 1, 5), "exploding-join").is_empty());
    assert!(fired(&join_of(min - 1, 10, 10), "exploding-join").is_empty());
}
