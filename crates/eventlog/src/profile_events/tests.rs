//! Checks that a query's events are written as Spark writes them, key order included.

use super::*;
use qprof_core::metric::{MetricKind, TaskRef, TaskValue};
use qprof_core::profile::{NodeMetric, ProfileNode};

fn node(id: usize, name: &str, children: Vec<ProfileNode>) -> ProfileNode {
    ProfileNode {
        id,
        name: name.to_string(),
        display: format!("{name}: {id}").into(),
        stage_id: None,
        metrics: vec![NodeMetric::summed(
            names::OUTPUT_ROWS,
            "number of output rows",
            MetricKind::Sum,
            Vec::new(),
        )],
        info: vec![("outputPartitions".to_string(), "2".to_string())],
        functions: Vec::new(),
        task_spans: Vec::new(),
        estimate: None,
        children,
    }
}

fn keys(v: &Value) -> Vec<&str> {
    v.as_object().unwrap().keys().map(String::as_str).collect()
}

#[test]
fn a_task_end_is_written_as_spark_writes_it() {
    let task = TaskRef {
        stage_id: 0,
        stage_attempt: 0,
        task_id: 7,
        partition: 3,
    };
    let mut plan = node(0, "ProjectionExec", vec![]);
    plan.stage_id = Some(0);
    plan.metrics = vec![NodeMetric::summed(
        names::OUTPUT_ROWS,
        "number of output rows",
        MetricKind::Sum,
        vec![TaskValue {
            task: Some(task),
            value: 42,
        }],
    )];
    let profile = QueryProfile {
        id: 0,
        sql: "SELECT 1".to_string(),
        rows: 42,
        duration_nanos: 1_000_000,
        start_epoch_millis: 1_000,
        plan,
        stages: vec![StageProfile {
            id: 0,
            node_ids: vec![0],
            tasks: vec![TaskProfile {
                task_id: 7,
                partition: 3,
                start_epoch_millis: 1_000,
                finish_epoch_millis: 1_010,
                metrics: Vec::new(),
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
    };
    let record = QueryRecord {
        description: "q".to_string(),
        sql: "SELECT 1",
        plan_text: String::new(),
        start_epoch_millis: 1_000,
        end_epoch_millis: 1_020,
        profile: Some(&profile),
        error: None,
    };
    let events = query_events(&record, "host", &mut IdCounters::default());
    let ends: Vec<Value> = events
        .iter()
        .filter(|e| matches!(e, QueryEvent::TaskEnd(_)))
        .map(|e| {
            let mut line = Vec::new();
            e.write_json(&mut line).unwrap();
            serde_json::from_slice(&line).unwrap()
        })
        .collect();
    assert_eq!(ends.len(), 1);
    let end = &ends[0];
    assert_eq!(
        keys(end),
        [
            "Event",
            "Stage ID",
            "Stage Attempt ID",
            "Task Type",
            "Task End Reason",
            "Task Info",
            "Task Executor Metrics",
            "Task Metrics"
        ]
    );
    assert_eq!(end["Event"], "SparkListenerTaskEnd");
    assert_eq!(end["Task Type"], "ResultTask");
    let info = &end["Task Info"];
    assert_eq!(
        keys(info),
        [
            "Task ID",
            "Index",
            "Attempt",
            "Partition ID",
            "Launch Time",
            "Executor ID",
            "Host",
            "Locality",
            "Speculative",
            "Getting Result Time",
            "Finish Time",
            "Failed",
            "Killed",
            "Accumulables"
        ]
    );
    assert_eq!(
        (&info["Task ID"], &info["Index"], &info["Finish Time"]),
        (&json!(7), &json!(3), &json!(1_010))
    );
    assert_eq!(
        (&info["Executor ID"], &info["Host"], &info["Locality"]),
        (&json!("driver"), &json!("host"), &json!("PROCESS_LOCAL"))
    );
    let update = &info["Accumulables"][0];
    assert_eq!(
        keys(update),
        [
            "ID",
            "Name",
            "Update",
            "Value",
            "Internal",
            "Count Failed Values",
            "Metadata"
        ]
    );
    // Spark writes a SQL metric's update as a string
    assert_eq!(update["Update"], "42");
    assert_eq!(update["Value"], "42");
    assert_eq!(update["Name"], "number of output rows");
    // the live path turns the same event into a value with the same content
    let live = events
        .into_iter()
        .find(|e| matches!(e, QueryEvent::TaskEnd(_)))
        .unwrap()
        .into_value();
    assert_eq!(&live, end);
}

#[test]
fn plan_info_keeps_spark_key_order_and_every_level_of_the_tree() {
    let plan = node(
        0,
        "ProjectionExec",
        vec![node(
            1,
            "FilterExec",
            vec![node(2, "DataSourceExec", vec![])],
        )],
    );
    let mut ids = IdCounters::default();
    let accs = Accumulators::assign(&plan, &mut ids);
    let info = plan_info(&plan, &accs);
    let keys: Vec<&str> = info
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(
        keys,
        [
            "nodeName",
            "simpleString",
            "children",
            "metadata",
            "metrics"
        ]
    );
    let leaf = &info["children"][0]["children"][0];
    assert_eq!(leaf["nodeName"], "DataSourceExec");
    assert_eq!(leaf["simpleString"], "DataSourceExec: 2");
    assert_eq!(leaf["metadata"]["outputPartitions"], "2");
    assert_eq!(leaf["metrics"][0]["name"], "number of output rows");
    assert_eq!(leaf["metrics"][0]["accumulatorId"], 3);
    assert_eq!(leaf["children"], json!([]));
}

#[test]
fn each_task_lists_its_own_metric_updates_with_names_escaped() {
    let value = |task_id: u64, value: i64| TaskValue {
        task: Some(TaskRef {
            stage_id: 0,
            stage_attempt: 0,
            task_id,
            partition: task_id as u32,
        }),
        value,
    };
    let mut scan = node(1, "DataSourceExec", vec![]);
    scan.metrics[0].tasks = vec![value(10, 5), value(11, 6)];
    let mut plan = node(0, "ProjectionExec", vec![scan]);
    // a name that needs escaping; task 10 reported twice (its first value is its update);
    // task 12 has no value of any metric
    plan.metrics.push(NodeMetric::summed(
        "odd",
        "time \"in\" C:\\ — ünïcode",
        MetricKind::Timing,
        vec![value(10, 7), value(10, 99), value(12, -1)],
    ));
    plan.metrics[0].tasks = vec![value(11, 8)];
    let stage = StageProfile {
        id: 0,
        node_ids: vec![0, 1],
        tasks: Vec::new(),
        memory: None,
        executor_memory: Vec::new(),
    };
    let nodes = stages::index(&plan);
    let id = |node: usize, metric: &str| (node * 100 + metric.len()) as i64;
    let accumulables = StageAccumulables::new(&nodes, &stage, id);
    let list = |task: u64| -> Vec<(i64, String, String, String)> {
        let parsed: Value = serde_json::from_str(&accumulables.of_task(task)).unwrap();
        parsed
            .as_array()
            .unwrap()
            .iter()
            .map(|a| {
                assert_eq!(
                    (&a["Internal"], &a["Count Failed Values"], &a["Metadata"]),
                    (&json!(true), &json!(true), &json!("sql"))
                );
                (
                    a["ID"].as_i64().unwrap(),
                    a["Name"].as_str().unwrap().to_string(),
                    a["Update"].as_str().unwrap().to_string(),
                    a["Value"].as_str().unwrap().to_string(),
                )
            })
            .collect()
    };
    let rows = |v: &str| (10, "number of output rows".to_string(), v.into(), v.into());
    let odd = |v: &str| {
        (
            3,
            "time \"in\" C:\\ — ünïcode".to_string(),
            v.into(),
            v.into(),
        )
    };
    let scan_rows = |v: &str| (110, "number of output rows".to_string(), v.into(), v.into());
    assert_eq!(list(10), [odd("7"), scan_rows("5")]);
    assert_eq!(list(11), [rows("8"), scan_rows("6")]);
    assert_eq!(list(12), [odd("-1")]);
    assert!(list(13).is_empty());
}
