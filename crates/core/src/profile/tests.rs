//! Tests of the profile's text rendering.

use super::fixtures::sample;
use super::*;

#[test]
fn text_tree_snapshot() {
    insta::assert_snapshot!(sample().render_text(3));
}

/// Gives `node` the metric `name` at `value`.
fn put(node: &mut ProfileNode, name: &'static str, value: i64) {
    node.metrics.push(NodeMetric::summed(
        name,
        name,
        MetricKind::Sum,
        vec![TaskValue { task: None, value }],
    ));
}

#[test]
fn shuffle_lines_snapshot() {
    let mut profile = sample();
    // the aggregate as a writer, the filter as a reader of what it wrote
    let writer = &mut profile.plan;
    put(writer, names::SHUFFLE_WRITE_NANOS, 1_500_000);
    put(writer, names::OUTPUT_BYTES, 5 << 20);
    let reader = &mut profile.plan.children[0];
    for (name, value) in [
        (names::SHUFFLE_LOCAL_BYTES_READ, 3 << 20),
        (names::SHUFFLE_LOCAL_BLOCKS_READ, 4),
        (names::SHUFFLE_REMOTE_BYTES_READ, 2 << 20),
        (names::SHUFFLE_REMOTE_BLOCKS_READ, 1),
        (names::SHUFFLE_FETCH_WAIT_NANOS, 2_250_000),
    ] {
        put(reader, name, value);
    }
    insta::assert_snapshot!(profile.render_text(0));
}

#[test]
fn spill_and_dynamic_filter_lines_snapshot() {
    let mut profile = sample();
    let aggregate = &mut profile.plan;
    for (name, value) in [
        (names::SPILL_FILES_CREATED, 3),
        (names::SPILL_WRITTEN_BYTES, 3 << 20),
        (names::SPILL_WRITTEN_ROWS, 120_000),
        (names::SPILLED_PARTITIONS, 1),
        (names::SPILL_WRITE_NANOS, 4_000_000),
        (names::SPILL_READ_BYTES, 3 << 20),
        (names::SPILL_READ_NANOS, 2_500_000),
        (names::DYNAMIC_FILTERS_PRODUCED, 1),
        (names::DYNAMIC_FILTER_UPDATES, 2),
    ] {
        put(aggregate, name, value);
    }
    let scan = &mut profile.plan.children[0].children[0];
    put(scan, names::DYNAMIC_FILTERS_ACCEPTED, 1);
    put(scan, names::REPLACED_WITH_DYNAMIC_FILTER_ROWS, 99_000);
    scan.info.push((
        names::DYNAMIC_FILTER_PRODUCERS.to_string(),
        "#0 AggregateExec".to_string(),
    ));
    // the filter neither spilled nor took part in a dynamic filter: no such lines
    put(&mut profile.plan.children[0], names::SPILL_FILES_CREATED, 0);
    insta::assert_snapshot!(profile.render_text(0));
}

#[test]
fn a_call_site_sums_its_samplers() {
    let stats = |vectors, timed, cpu: f64, extrapolated| FunctionStats {
        vectors,
        rows: vectors * 100,
        cpu_timed_vectors: timed,
        cpu_nanos: cpu,
        wall_nanos: cpu * 1.1,
        cpu_extrapolated: extrapolated,
        wall_extrapolated: extrapolated,
        decision: None,
        recalibrations: 1,
    };
    let full = FunctionProfile::from_stats("f", "f(a)", &[stats(10, 10, 500.0, false)]);
    assert_eq!((full.mode.as_str(), full.cpu_extrapolated), ("full", false));
    let mixed = FunctionProfile::from_stats(
        "f",
        "f(a)",
        &[stats(10, 10, 500.0, false), stats(90, 2, 4_500.4, true)],
    );
    assert_eq!(mixed.vectors, 100);
    assert_eq!(mixed.rows, 10_000);
    assert_eq!(mixed.cpu_timed_vectors, 12);
    assert_eq!(mixed.cpu_nanos, 5_000);
    assert!(mixed.cpu_extrapolated && mixed.wall_extrapolated);
    assert_eq!(mixed.mode, "sampled 1/8");
    assert_eq!(mixed.recalibrations, 2);
}

#[test]
fn iteration_is_pre_order_and_top_is_sorted() {
    let p = sample();
    let ids: Vec<usize> = p.plan.iter().map(|n| n.id).collect();
    assert_eq!(ids, vec![0, 1, 2]);
    let top: Vec<usize> = p.top_by_self_cpu().iter().map(|n| n.id).collect();
    assert_eq!(top, vec![2, 1, 0]);
}

#[test]
fn function_names_shorten_to_their_last_two_segments() {
    use super::render::short_function;
    assert_eq!(
        short_function("arrow_select::take::take_impl::<arrow_array::types::Int64Type>"),
        "take::take_impl"
    );
    assert_eq!(
        short_function(
            "<datafusion_physical_plan::joins::hash_join::exec::HashJoinStream as futures_core::stream::Stream>::poll_next"
        ),
        "HashJoinStream::poll_next"
    );
    assert_eq!(short_function("memcpy"), "memcpy");
}

/// The sample cut in two stages: its scan (node 2) in stage 1 with a fast task and a
/// skewed one, the rest in stage 0 reading it.
/// Values of tasks of stage 1: (task id, partition, value).
fn stage_1_values<const N: usize>(values: [(u64, u32, i64); N]) -> Vec<crate::metric::TaskValue> {
    values
        .into_iter()
        .map(|(task_id, partition, value)| crate::metric::TaskValue {
            task: Some(crate::metric::TaskRef {
                stage_id: 1,
                stage_attempt: 0,
                task_id,
                partition,
            }),
            value,
        })
        .collect()
}

fn two_stages_with_a_skewed_task() -> QueryProfile {
    let mut p = fixtures::sample();
    let mut stage1 = p.stages[0].clone();
    stage1.id = 1;
    stage1.node_ids = vec![2];
    let task = |id: u64, partition: u32, start: u64, finish: u64| {
        let mut t = stage1.tasks[0].clone();
        t.task_id = id;
        t.partition = partition;
        t.start_epoch_millis = start;
        t.finish_epoch_millis = finish;
        t
    };
    stage1.tasks = vec![task(10, 0, 1_000, 1_200), task(11, 1, 1_000, 4_000)];
    p.stages[0].node_ids = vec![0, 1];
    p.stages[0].tasks[0].start_epoch_millis = 1_000;
    p.stages[0].tasks[0].finish_epoch_millis = 4_100;
    p.stages.push(stage1);
    let scan = &mut p.plan.children[0].children[0];
    scan.stage_id = Some(1);
    let cpu = scan
        .metrics
        .iter_mut()
        .find(|m| m.name == names::SELF_CPU_NANOS)
        .unwrap();
    cpu.tasks = stage_1_values([(10, 0, 100_000_000), (11, 1, 2_900_000_000)]);
    p.duration_nanos = 3_200_000_000;
    p
}

#[test]
fn the_critical_path_goes_through_each_stages_last_task() {
    let p = two_stages_with_a_skewed_task();
    let path = p.critical_path();
    let steps: Vec<(u32, u64)> = path.iter().map(|s| (s.stage_id, s.task_id)).collect();
    assert_eq!(steps, [(0, 0), (1, 11)]);
    assert_eq!(path[1].millis(), 3_000);
    // stage 0's task ran 3.1 s, all but 100 ms beside its input's
    assert_eq!((path[0].own_millis, path[1].own_millis), (100, 3_000));
    // the skewed task's only operator took all of its CPU
    assert_eq!(
        path[1].hottest,
        Some(super::HottestOperator {
            node_id: 2,
            name: "DataSourceExec".to_string(),
            cpu_percent: 100,
            phase: None,
        })
    );
    let text = p.render_text(0);
    assert!(
        text.contains("critical path: stage 0 task 0 (")
            && text.contains("<- stage 1 task 11 (3.00 s, 100% #2 DataSourceExec)"),
        "{text}"
    );
    let found: Vec<_> = crate::advice::advise(&p)
        .into_iter()
        .filter(|f| f.rule == "critical-path")
        .collect();
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0].stage_id, Some(1));
    assert!(
        found[0].message.contains("stage 1's last task 11")
            && found[0].message.contains("#2 DataSourceExec"),
        "{}",
        found[0].message
    );
    // a query under a second gets no finding; one stage draws no line
    let mut short = p.clone();
    short.duration_nanos = 999_000_000;
    assert!(
        !crate::advice::advise(&short)
            .iter()
            .any(|f| f.rule == "critical-path")
    );
    assert!(!fixtures::sample().render_text(0).contains("critical path"));
}

#[test]
fn a_join_on_the_critical_path_names_the_phase_that_took_its_cpu() {
    let mut p = two_stages_with_a_skewed_task();
    let scan = &mut p.plan.children[0].children[0];
    scan.name = "HashJoinExec".to_string();
    let template = scan.metrics[0].clone();
    // the skewed task's join: 0.4 s building, 2.5 s probing; the other task built longer
    for (name, values) in [
        (
            "hashBuildCpuNanos",
            [(10, 0, 90_000_000), (11, 1, 400_000_000)],
        ),
        (
            "hashProbeCpuNanos",
            [(10, 0, 10_000_000), (11, 1, 2_500_000_000)],
        ),
    ] {
        let mut metric = template.clone();
        metric.name = name.to_string().into();
        metric.tasks = stage_1_values(values);
        metric.value = metric.tasks.iter().map(|t| t.value).sum();
        scan.metrics.push(metric);
    }
    let path = p.critical_path();
    let hottest = path[1].hottest.as_ref().unwrap();
    // 2.5 s of the 2.9 s the two phases measured in task 11
    assert_eq!(hottest.phase, Some(("hash probe".to_string(), 86)));
    assert!(
        p.render_text(0)
            .contains("stage 1 task 11 (3.00 s, 100% #2 HashJoinExec (hash probe 86%))"),
        "{}",
        p.render_text(0)
    );
    let finding = crate::advice::advise(&p)
        .into_iter()
        .find(|f| f.rule == "critical-path")
        .unwrap();
    assert!(
        finding
            .message
            .contains("#2 HashJoinExec, 86% of that in its hash probe phase"),
        "{}",
        finding.message
    );
}
