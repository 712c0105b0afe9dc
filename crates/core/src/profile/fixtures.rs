//! Hand-built profiles for tests (here and in the crates that render profiles).

use super::*;
use crate::metric::TaskRef;

fn tv(task_id: u64, value: i64) -> TaskValue {
    TaskValue {
        task: Some(TaskRef {
            stage_id: 0,
            stage_attempt: 0,
            task_id,
            partition: task_id as u32,
        }),
        value,
    }
}

fn node(
    id: usize,
    name: &str,
    self_cpu: [i64; 2],
    rows: [i64; 2],
    children: Vec<ProfileNode>,
) -> ProfileNode {
    let child_cpu: i64 = children
        .iter()
        .map(|c| c.value(names::CPU_NANOS).unwrap())
        .sum();
    let metric = |n: &'static str, kind, vals: [i64; 2]| {
        NodeMetric::summed(n, n, kind, vec![tv(0, vals[0]), tv(1, vals[1])])
    };
    ProfileNode {
        id,
        name: name.to_string(),
        display: format!("{name}: details").into(),
        stage_id: Some(0),
        metrics: vec![
            metric(names::SELF_CPU_NANOS, MetricKind::NsTiming, self_cpu),
            metric(
                names::CPU_NANOS,
                MetricKind::NsTiming,
                [self_cpu[0] + child_cpu / 2, self_cpu[1] + child_cpu / 2],
            ),
            metric(names::OUTPUT_ROWS, MetricKind::Sum, rows),
            metric(names::OUTPUT_VECTORS, MetricKind::Sum, [1, 1]),
            metric(names::PEAK_MEMORY_BYTES, MetricKind::Size, [0, 4096]),
        ],
        info: vec![],
        functions: vec![],
        task_spans: Vec::new(),
        estimate: None,
        children,
    }
}

/// A three-operator profile (aggregate over filter over scan, two tasks, one function
/// call site) for tests of renderings and wire formats.
pub fn sample() -> QueryProfile {
    let scan = node(
        2,
        "DataSourceExec",
        [30_000_000, 50_000_000],
        [500, 524],
        vec![],
    );
    let mut filter = node(
        1,
        "FilterExec",
        [2_000_000, 2_000_000],
        [10, 12],
        vec![scan],
    );
    filter.functions = vec![FunctionProfile {
        name: "regexp_like".into(),
        expression: "regexp_like(t.comment, Utf8(\"^a.*z$\"))".into(),
        vectors: 250,
        rows: 1_024_000,
        cpu_timed_vectors: 4,
        cpu_nanos: 1_250_000,
        wall_nanos: 1_300_000,
        cpu_extrapolated: true,
        wall_extrapolated: true,
        mode: "sampled 1/63".into(),
        recalibrations: 0,
    }];
    let agg = node(
        0,
        "AggregateExec",
        [1_000_000, 500_000],
        [1, 1],
        vec![filter],
    );
    QueryProfile {
        id: 6,
        sql: "select 1".into(),
        rows: 1,
        duration_nanos: 42_500_000,
        start_epoch_millis: 1_795_333_320_377,
        plan: agg,
        stages: vec![StageProfile {
            id: 0,
            node_ids: vec![0, 1, 2],
            tasks: vec![TaskProfile {
                task_id: 0,
                partition: 0,
                start_epoch_millis: 1_795_333_320_400,
                finish_epoch_millis: 1_795_333_320_440,
                metrics: vec![TaskMetric {
                    name: names::CPU_NANOS.into(),
                    kind: MetricKind::NsTiming,
                    value: 33_000_000,
                }],
                error: None,
                attempt: 0,
                executor: None,
            }],
            memory: None,
            executor_memory: Vec::new(),
        }],
        memory: Vec::new(),
        memory_pool: None,
        planning: None,
        stack_samples: None,
        overlapping_queries: 0,
    }
}
