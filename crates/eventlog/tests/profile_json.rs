//! qprof's JSON profile: the documented shape, typed reading, and the round trip.

use qprof_core::metric::{MetricKind, TaskRef, TaskValue};
use qprof_core::profile::{
    FunctionProfile, NodeMetric, ProfileNode, QueryProfile, StageProfile, TaskMetric, TaskProfile,
    names,
};
use qprof_eventlog::profile_json::{FORMAT_VERSION, ProfileJsonError, ProfilesDocument, QueryJson};
use serde_json::json;

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
    let metric = |n: &str, kind, vals: [i64; 2]| {
        NodeMetric::summed(n, n, kind, vec![tv(0, vals[0]), tv(1, vals[1])])
    };
    ProfileNode {
        id,
        name: name.to_string(),
        display: format!("{name}: details"),
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
        children,
    }
}

fn sample() -> QueryProfile {
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
            }],
        }],
    }
}

#[test]
fn the_document_has_the_documented_shape() {
    let json = serde_json::to_value(ProfilesDocument::new([&sample()])).unwrap();
    assert_eq!(json["formatVersion"], FORMAT_VERSION);
    let q = &json["queries"][0];
    let keys: Vec<&str> = q.as_object().unwrap().keys().map(String::as_str).collect();
    assert_eq!(
        keys,
        [
            "id",
            "sql",
            "rows",
            "durationNanos",
            "startEpochMillis",
            "plan",
            "stages"
        ]
    );
    let plan = &q["plan"];
    assert_eq!(plan["name"], "AggregateExec");
    assert_eq!(plan["metrics"]["selfCpuNanos"]["value"], 1_500_000);
    assert_eq!(plan["metrics"]["selfCpuNanos"]["kind"], "nsTiming");
    assert_eq!(plan["metrics"]["peakMemoryBytes"]["maxTaskId"], 1);
    assert_eq!(plan["metrics"]["outputRows"]["min"], 1);
    assert_eq!(plan["metrics"]["outputRows"]["tasks"], 2);
    assert_eq!(plan["children"][0]["children"][0]["id"], 2);
    assert_eq!(q["stages"][0]["nodeIds"], json!([0, 1, 2]));
    let f = &plan["children"][0]["functions"][0];
    assert_eq!(f["name"], "regexp_like");
    assert_eq!(f["cpuNanos"], 1_250_000);
    assert_eq!(f["cpuExtrapolated"], true);
    assert_eq!(f["mode"], "sampled 1/63");
    assert_eq!(plan["functions"], json!([]));
    assert_eq!(
        q["stages"][0]["tasks"][0]["metrics"]["cpuNanos"]["value"],
        33_000_000
    );
    // metric keys keep the profile's order
    let metric_keys: Vec<&str> = plan["metrics"]
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(
        metric_keys,
        [
            names::SELF_CPU_NANOS,
            names::CPU_NANOS,
            names::OUTPUT_ROWS,
            names::OUTPUT_VECTORS,
            names::PEAK_MEMORY_BYTES
        ]
    );
}

#[test]
fn a_document_reads_back_typed_and_writes_the_same_bytes() {
    let written = ProfilesDocument::new([&sample(), &sample()]);
    let text = serde_json::to_string_pretty(&written).unwrap();
    let read = ProfilesDocument::parse(&text).unwrap();
    assert_eq!(read, written);
    assert_eq!(serde_json::to_string_pretty(&read).unwrap(), text);
    // the typed tree is the profile's tree
    let plan = &read.queries[0].plan;
    let ids: Vec<usize> = plan.iter().map(|n| n.id).collect();
    assert_eq!(ids, [0, 1, 2]);
    assert_eq!(plan.metrics.get("selfCpuNanos").unwrap().value, 1_500_000);
    assert_eq!(plan.children[0].functions[0].rows, 1_024_000);
}

#[test]
fn unknown_keys_are_accepted_and_newer_versions_refused() {
    let mut json = serde_json::to_value(ProfilesDocument::new([&sample()])).unwrap();
    json["queries"][0]["plan"]["somethingNew"] = json!({"a": 1});
    json["extra"] = json!(true);
    let read = ProfilesDocument::parse(&json.to_string()).unwrap();
    assert_eq!(read.queries[0], QueryJson::from(&sample()));
    json["formatVersion"] = json!(FORMAT_VERSION + 1);
    let err = ProfilesDocument::parse(&json.to_string()).unwrap_err();
    assert!(matches!(err, ProfileJsonError::TooNew { found } if found == FORMAT_VERSION + 1));
    assert!(matches!(
        ProfilesDocument::parse("{\"queries\": 3}"),
        Err(ProfileJsonError::Malformed(_))
    ));
}
