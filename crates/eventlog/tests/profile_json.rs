//! qprof's JSON profile: the documented shape, typed reading, and the round trip.

use qprof_core::profile::fixtures::sample;
use qprof_core::profile::names;
use qprof_eventlog::{FORMAT_VERSION, ProfileJsonError, ProfilesDocument, QueryJson};
use serde_json::{Value, json};

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
            "stages",
            "findings",
            "criticalPath"
        ]
    );
    // one stage: its one task is the whole path, its scan the task's hottest operator
    assert_eq!(q["criticalPath"].as_array().unwrap().len(), 1);
    assert_eq!(q["criticalPath"][0]["taskId"], 0);
    assert_eq!(q["criticalPath"][0]["nodeId"], 2);
    // the advisor's findings: the scan has 93 % of the CPU, a minor finding (unranked)
    assert_eq!(
        q["findings"],
        json!([{
            "rule": "bottleneck",
            "severity": "info",
            "nodeId": 2,
            "stageId": 0,
            "nodeIds": [2],
            "stageIds": [0],
            "message": "#2 DataSourceExec is the bottleneck: 93% of the query's operator CPU (80.00 ms of 85.50 ms)",
            "cost": {"kind": "cpu", "amount": 80_000_000, "whole": 85_500_000, "sharePermille": 935},
            "action": "look at this operator first: its metrics and the functions it calls say what it spent the time on",
            "numbers": {"selfCpuNanos": 80_000_000, "queryCpuNanos": 85_500_000},
        }])
    );
    let plan = &q["plan"];
    assert_eq!(plan["name"], "AggregateExec");
    // each operator's stable id, in pre-order
    let stable = qprof_core::stable_id::stable_ids(&sample().plan);
    assert_eq!(plan["stableId"], stable[0].as_str());
    assert_eq!(
        plan["children"][0]["children"][0]["stableId"],
        stable[2].as_str()
    );
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

#[test]
fn a_log_tells_why_it_cannot_serve_a_profile() {
    use qprof_eventlog::AppState;
    use qprof_eventlog::rest;
    let profile = serde_json::to_value(QueryJson::from(&sample())).unwrap();
    let mut state = AppState::default();
    state.apply(&json!({
        "Event": "org.apache.spark.sql.execution.ui.SparkListenerSQLExecutionStart",
        "executionId": 0, "rootExecutionId": 0, "description": "q", "details": "",
        "physicalPlanDescription": "", "time": 1,
        "sparkPlanInfo": {"nodeName": "X", "simpleString": "X", "children": [], "metadata": {}, "metrics": []},
    }));
    let extension = |version: Value| {
        json!({"Event": "org.qprof.eventlog.QueryProfile", "executionId": 0,
               "formatVersion": version, "profile": profile})
    };
    state.apply(&extension(json!(FORMAT_VERSION)));
    let served = rest::qprof_profile(&state, 0).unwrap();
    assert_eq!(served["query"]["rows"], 1);
    state.apply(&extension(json!(FORMAT_VERSION + 1)));
    let err = rest::qprof_profile(&state, 0).unwrap_err().to_string();
    assert!(
        err.contains("cannot read") && err.contains("newer"),
        "{err}"
    );
    state.apply(&extension(json!("one")));
    let err = rest::qprof_profile(&state, 0).unwrap_err().to_string();
    assert!(err.contains("not a version number"), "{err}");
    // the same events as log lines, which a replay parses apart from the state (keeping
    // the profile as the line's text), serve the same, with no version or a null one too
    let mut without_version = extension(Value::Null);
    without_version
        .as_object_mut()
        .unwrap()
        .remove("formatVersion");
    let events = [
        extension(json!(FORMAT_VERSION)),
        extension(json!(FORMAT_VERSION + 1)),
        extension(json!("one")),
        extension(Value::Null),
        without_version,
    ];
    for event in events {
        let mut by_value = state.clone();
        by_value.apply(&event);
        let mut by_line = state.clone();
        by_line.apply_line(event.to_string().as_bytes());
        let served = |s: &AppState| rest::qprof_profile(s, 0).map_err(|e| e.to_string());
        assert_eq!(served(&by_line), served(&by_value), "{event}");
        assert_eq!(by_line.skipped, by_value.skipped, "{event}");
    }
}
