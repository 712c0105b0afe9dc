//! Tests of the profile's text rendering.

use super::fixtures::sample;
use super::*;

#[test]
fn text_tree_snapshot() {
    insta::assert_snapshot!(sample().render_text(3));
}

/// Gives `node` the metric `name` at `value`.
fn put(node: &mut ProfileNode, name: &str, value: i64) {
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
