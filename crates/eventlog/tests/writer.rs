//! qprof's logs: written, replayed, and shaped like Spark's own.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use qprof_core::events::AppInfo;
use qprof_core::metric::{MetricKind, TaskRef, TaskValue};
use qprof_core::profile::{
    FunctionProfile, NodeMetric, ProfileNode, QueryProfile, StageProfile, TaskMetric, TaskProfile,
    names,
};
use qprof_core::stacks::{SampledStack, StackSamples};
use qprof_eventlog::QueryRecord;
use qprof_eventlog::Replay;
use qprof_eventlog::discover;
use qprof_eventlog::rest;
use qprof_eventlog::{AppLog, LogConfig};
use serde_json::Value;

const T0: i64 = 1_795_333_318_986;

fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("qprof-writer-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

fn task(stage: u32, id: u64) -> TaskRef {
    TaskRef {
        stage_id: stage,
        stage_attempt: 0,
        task_id: id,
        partition: (id % 2) as u32,
    }
}

fn metric(name: &str, kind: MetricKind, values: &[(Option<TaskRef>, i64)]) -> NodeMetric {
    let tasks = values
        .iter()
        .map(|(task, value)| TaskValue {
            task: *task,
            value: *value,
        })
        .collect();
    NodeMetric::summed(name.to_string(), format!("{name} shown"), kind, tasks)
}

fn node(
    id: usize,
    name: &str,
    stage: u32,
    metrics: Vec<NodeMetric>,
    children: Vec<ProfileNode>,
) -> ProfileNode {
    ProfileNode {
        id,
        name: name.into(),
        display: format!("{name}: details").into(),
        stage_id: Some(stage),
        metrics,
        info: vec![("note".into(), format!("node {id}"))],
        functions: vec![],
        task_spans: Vec::new(),
        estimate: None,
        children,
    }
}

fn task_profile(id: u64, start: i64, rows: i64) -> TaskProfile {
    let m = |name: &str, kind, value| TaskMetric {
        name: name.to_string().into(),
        kind,
        value,
    };
    TaskProfile {
        task_id: id,
        partition: (id % 2) as u32,
        start_epoch_millis: start as u64,
        finish_epoch_millis: (start + 40) as u64,
        metrics: vec![
            m(names::WALL_NANOS, MetricKind::NsTiming, 30_000_000),
            m(
                names::CPU_NANOS,
                MetricKind::NsTiming,
                20_000_000 + id as i64,
            ),
            m(names::OUTPUT_ROWS, MetricKind::Sum, rows),
            m(names::OUTPUT_BYTES, MetricKind::Size, rows * 8),
            m(names::PEAK_MEMORY_BYTES, MetricKind::Size, 1 << (10 + id)),
        ],
        error: None,
        attempt: 0,
        executor: None,
    }
}

/// A two-stage query: scans and partial aggregates in tasks 10 and 11 (stage 3), a final
/// aggregate in task 12 (stage 4), and a value recorded outside any task. Node ids are
/// pre-order positions, as qprof assigns them.
fn profile() -> QueryProfile {
    let (a, b, c) = (task(3, 10), task(3, 11), task(4, 12));
    let scan = node(
        3,
        "DataSourceExec",
        3,
        vec![
            metric(
                names::OUTPUT_ROWS,
                MetricKind::Sum,
                &[(Some(a), 600), (Some(b), 400)],
            ),
            metric(
                names::SELF_CPU_NANOS,
                MetricKind::NsTiming,
                &[(Some(a), 9_000_000), (Some(b), 9_000_000)],
            ),
        ],
        vec![],
    );
    let mut partial = node(
        2,
        "AggregateExec",
        3,
        vec![
            metric(
                names::OUTPUT_ROWS,
                MetricKind::Sum,
                &[(Some(a), 3), (Some(b), 3)],
            ),
            metric(
                names::PEAK_MEMORY_BYTES,
                MetricKind::Size,
                &[(Some(a), 4096), (Some(b), 4096)],
            ),
        ],
        vec![scan],
    );
    partial.functions = vec![FunctionProfile {
        name: "upper".into(),
        expression: "upper(t.k)".into(),
        vectors: 40,
        rows: 40_000,
        cpu_timed_vectors: 4,
        cpu_nanos: 2_500_000,
        wall_nanos: 2_600_000,
        cpu_extrapolated: true,
        wall_extrapolated: true,
        mode: "sampled 1/10".into(),
        recalibrations: 0,
    }];
    let exchange = node(
        1,
        "RepartitionExec",
        4,
        vec![
            metric(names::OUTPUT_ROWS, MetricKind::Sum, &[(Some(c), 6)]),
            metric(
                names::SELF_WALL_NANOS,
                MetricKind::NsTiming,
                &[(Some(c), 1_000_000), (None, 7_000_000)],
            ),
        ],
        vec![partial],
    );
    let root = node(
        0,
        "AggregateExec",
        4,
        vec![metric(names::OUTPUT_ROWS, MetricKind::Sum, &[(Some(c), 3)])],
        vec![exchange],
    );
    QueryProfile {
        id: 1,
        sql: "select k, count(*) from t group by k".into(),
        rows: 3,
        duration_nanos: 120_000_000,
        start_epoch_millis: (T0 + 1000) as u64,
        plan: root,
        stages: vec![
            StageProfile {
                id: 3,
                node_ids: vec![2, 3],
                tasks: vec![
                    task_profile(10, T0 + 1010, 3),
                    task_profile(11, T0 + 1011, 3),
                ],
                memory: None,
                executor_memory: Vec::new(),
            },
            StageProfile {
                id: 4,
                node_ids: vec![0, 1],
                tasks: vec![task_profile(12, T0 + 1060, 3)],
                memory: None,
                executor_memory: Vec::new(),
            },
        ],
        memory: Vec::new(),
        memory_pool: None,
        planning: None,
        stack_samples: Some(StackSamples {
            period_nanos: 10_101_010,
            functions: vec![
                "arrow_select::take::take_native".into(),
                "upper_kernel".into(),
            ],
            call_sites: vec!["upper(t.k)".into()],
            stacks: vec![
                SampledStack {
                    node_id: 2,
                    task: Some(task(3, 10)),
                    call_site: Some(0),
                    frames: vec![1],
                    count: 7,
                },
                SampledStack {
                    node_id: 1,
                    task: None,
                    call_site: None,
                    frames: vec![0],
                    count: 2,
                },
            ],
        }),
        overlapping_queries: 0,
    }
}

fn app_start() -> AppInfo {
    AppInfo {
        name: "qprof test".into(),
        user: "tester".into(),
        host: "localhost".into(),
        cores: 2,
        start_epoch_millis: T0 as u64,
        engine: "DataFusion 55.2.0".into(),
        properties: vec![("datafusion.execution.target_partitions".into(), "2".into())],
    }
}

fn write_app(dir: &Path, zstd: bool, roll_bytes: u64, failed_second: bool) -> PathBuf {
    let config = LogConfig {
        dir: dir.to_path_buf(),
        zstd,
        roll_bytes,
    };
    let mut log = AppLog::create(&config, &app_start()).unwrap();
    let p = profile();
    let record = |error: Option<String>| QueryRecord {
        description: "q1".into(),
        sql: &p.sql,
        plan_text: "AggregateExec\n  RepartitionExec".into(),
        start_epoch_millis: T0 + 1000,
        end_epoch_millis: T0 + 1120,
        profile: Some(&p),
        error,
    };
    log.log_query(&record(None)).unwrap();
    log.log_query(&record(
        failed_second.then(|| "Execution error: boom".to_string()),
    ))
    .unwrap();
    log.finish(T0 + 2000, 0, Some(1 << 20)).unwrap()
}

fn replay_one(dir: &Path) -> Replay {
    let sources = discover(dir).unwrap();
    assert_eq!(sources.len(), 1);
    Replay::load(sources[0].clone()).unwrap()
}

#[test]
fn a_written_log_replays_to_the_profile() {
    let dir = temp_dir("replay");
    write_app(&dir, false, u64::MAX, true);
    let replay = replay_one(&dir);
    let state = replay.state();
    assert!(!replay.source().in_progress);
    assert_eq!(state.skipped.corrupt_lines, 0);
    // the extension events are known to qprof's reader
    assert_eq!(state.skipped.unknown_events, 0);
    // the sampled stacks travel apart from the profile, and are served with it
    let logged = rest::logged_profile(state, 0).unwrap();
    assert_eq!(
        logged.stack_samples.as_ref().map(StackSamples::from),
        profile().stack_samples
    );
    let mut lines = Vec::new();
    let mut pending = vec![dir.clone()];
    while let Some(path) = pending.pop() {
        if path.is_dir() {
            pending.extend(std::fs::read_dir(&path).unwrap().map(|e| e.unwrap().path()));
        } else {
            let text = std::fs::read_to_string(&path).unwrap();
            lines.extend(
                text.lines()
                    .map(|l| serde_json::from_str::<Value>(l).unwrap()),
            );
        }
    }
    let profiles: Vec<&Value> = lines
        .iter()
        .filter(|e| e["Event"] == "org.qprof.eventlog.QueryProfile")
        .collect();
    assert_eq!(profiles.len(), 2);
    assert!(
        profiles
            .iter()
            .all(|e| e["profile"].get("stackSamples").is_none())
    );
    let samples: Vec<&Value> = lines
        .iter()
        .filter(|e| e["Event"] == "org.qprof.eventlog.StackSamples")
        .collect();
    assert_eq!(samples.len(), 2);
    assert_eq!(samples[0]["stackSamples"]["callSites"][0], "upper(t.k)");
    assert_eq!(state.info.name.as_deref(), Some("qprof test"));
    assert_eq!(state.info.end_time, Some(T0 + 2000));
    assert_eq!(state.executions.len(), 2);
    assert_eq!(state.jobs.len(), 2);
    // stage ids come from the profile; the second query reuses them here (one profile twice)
    let sql = rest::sql(state, 0, true, true).unwrap();
    assert_eq!(sql["status"], "COMPLETED");
    assert_eq!(rest::sql(state, 1, true, true).unwrap()["status"], "FAILED");
    // every node metric renders as the profile renders it
    let p = profile();
    let expected: HashMap<(i64, String), String> = p
        .plan
        .iter()
        .flat_map(|n| {
            n.metrics
                .iter()
                .map(move |m| ((n.id as i64, m.display_name.to_string()), m.spark_string()))
        })
        .collect();
    let mut seen = 0;
    for node in sql["nodes"].as_array().unwrap() {
        for m in node["metrics"].as_array().unwrap() {
            let key = (
                node["nodeId"].as_i64().unwrap(),
                m["name"].as_str().unwrap().to_string(),
            );
            seen += 1;
            if key.1 == "cpu time of upper(t.k)" {
                assert_eq!(key.0, 2);
                let driver_only = NodeMetric::summed(
                    "f",
                    "f",
                    MetricKind::NsTiming,
                    vec![TaskValue {
                        task: None,
                        value: 2_500_000,
                    }],
                );
                assert_eq!(m["value"], driver_only.spark_string().as_str());
                continue;
            }
            assert_eq!(
                Some(m["value"].as_str().unwrap()),
                expected.get(&key).map(String::as_str),
                "{key:?}"
            );
        }
    }
    // each function call site is one more metric of its operator
    let functions = p.plan.iter().map(|n| n.functions.len()).sum::<usize>();
    assert_eq!(functions, 1);
    assert_eq!(seen, expected.len() + functions);
    // the driver value is rendered with its (driver) annotation
    assert!(expected.values().any(|v| v.contains("(driver)")));
    // tasks, task metrics and stage figures
    let stage = rest::stage_attempt(
        state,
        3,
        0,
        &rest::StageOptions {
            details: true,
            ..Default::default()
        },
    )
    .unwrap();
    assert_eq!(stage["numCompleteTasks"], 2);
    assert_eq!(stage["inputRecords"], 1000);
    assert_eq!(stage["shuffleWriteRecords"], 6);
    assert_eq!(stage["executorCpuTime"], 40_000_021);
    let final_stage = rest::stage_attempt(state, 4, 0, &rest::StageOptions::default()).unwrap();
    assert_eq!(final_stage["shuffleReadRecords"], 6);
    let summary = rest::task_summary(state, 3, 0, &[0.0, 1.0]).unwrap();
    assert_eq!(
        summary["peakExecutionMemory"],
        serde_json::json!([1024.0 * 1024.0, 2048.0 * 1024.0])
    );
    // the profile itself is carried along
    let ext = rest::qprof_profile(state, 0).unwrap();
    assert_eq!(ext["query"]["sql"], p.sql.as_str());
    assert_eq!(ext["query"]["plan"]["name"], "AggregateExec");
    let f = &ext["query"]["plan"]["children"][0]["children"][0]["functions"][0];
    assert_eq!(f["expression"], "upper(t.k)");
    assert_eq!(f["cpuNanos"], 2_500_000);
    // environment strings are never null (clients call string methods on them)
    let env = rest::environment(state).unwrap();
    assert!(env["runtime"]["scalaVersion"].is_string());
    assert!(
        env["runtime"]["javaVersion"]
            .as_str()
            .unwrap()
            .contains("DataFusion")
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn zstd_and_rolled_logs_replay_to_the_same_state() {
    let plain = temp_dir("plain");
    let packed = temp_dir("zstd");
    write_app(&plain, false, u64::MAX, false);
    write_app(&packed, true, 4096, false);
    let files = std::fs::read_dir(packed.join(format!("eventlog_v2_local-{T0}_1")))
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .file_name()
                .to_str()
                .unwrap()
                .ends_with(".zstd")
        })
        .count();
    assert!(files > 2, "expected several rolled files, got {files}");
    let (a, b) = (replay_one(&plain), replay_one(&packed));
    let render = |r: &Replay| {
        let s = r.state();
        (
            rest::sql_list(s, true, true, 0, 100),
            rest::stages(
                s,
                &[],
                &rest::StageOptions {
                    details: true,
                    ..Default::default()
                },
            )
            .unwrap(),
            rest::jobs(s, &[]).unwrap(),
        )
    };
    let (x, y) = (render(&a), render(&b));
    // query ids are random per write; everything else must agree
    let strip = |mut v: Value| {
        for e in v.as_array_mut().unwrap() {
            e.as_object_mut().unwrap().shift_remove("queryId");
        }
        v
    };
    assert_eq!(strip(x.0), strip(y.0));
    assert_eq!(x.1, y.1);
    assert_eq!(x.2, y.2);
    std::fs::remove_dir_all(&plain).unwrap();
    std::fs::remove_dir_all(&packed).unwrap();
}

/// Every event qprof writes has the keys, in the order, of the same event in Spark's log.
#[test]
fn events_have_spark_key_lists() {
    let oracle = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../testdata/spark-4.3/events/eventlog_v2_local-1795333320377/events_1_local-1795333320377");
    let mut spark: HashMap<String, Value> = HashMap::new();
    for line in std::fs::read_to_string(oracle).unwrap().lines() {
        let v: Value = serde_json::from_str(line).unwrap();
        let name = v["Event"].as_str().unwrap().to_string();
        // Spark's failed-task and job-failure variants carry more keys; keep the first success
        spark.entry(name).or_insert(v);
    }
    let dir = temp_dir("keys");
    let app = write_app(&dir, false, u64::MAX, false);
    let name = app
        .file_name()
        .unwrap()
        .to_str()
        .unwrap()
        .trim_start_matches("eventlog_v2_")
        .to_string();
    let text = std::fs::read_to_string(app.join(format!("events_1_{name}"))).unwrap();
    fn keys(v: &Value) -> Vec<String> {
        v.as_object()
            .map(|o| o.keys().cloned().collect())
            .unwrap_or_default()
    }
    let mut compared = 0;
    for line in text.lines() {
        let ours: Value = serde_json::from_str(line).unwrap();
        let event = ours["Event"].as_str().unwrap();
        if event.starts_with("org.qprof.") {
            continue;
        }
        let theirs = spark
            .get(event)
            .unwrap_or_else(|| panic!("Spark's log has no {event}"));
        let mut want = keys(theirs);
        if event == "SparkListenerStageSubmitted"
            || event == "SparkListenerStageCompleted"
            || event == "SparkListenerJobStart"
        {
            // compare the nested stage info too
            let info = |v: &Value| {
                let i = v
                    .get("Stage Info")
                    .or_else(|| v["Stage Infos"].get(0))
                    .cloned()
                    .unwrap_or(Value::Null);
                keys(&i)
                    .into_iter()
                    .filter(|k| k != "Failure Reason")
                    .collect::<Vec<_>>()
            };
            assert_eq!(info(&ours), info(theirs), "{event} stage info");
        }
        if event == "SparkListenerTaskEnd" {
            // every level of the task metrics, each value of the JSON type Spark writes
            fn shape(v: &Value) -> Value {
                match v {
                    Value::Object(o) => Value::Array(
                        o.iter()
                            .map(|(k, v)| serde_json::json!([k, shape(v)]))
                            .collect(),
                    ),
                    Value::Array(_) => "array".into(),
                    Value::Number(_) => "number".into(),
                    Value::String(_) => "string".into(),
                    Value::Bool(_) => "bool".into(),
                    Value::Null => "null".into(),
                }
            }
            assert_eq!(shape(&ours["Task Metrics"]), shape(&theirs["Task Metrics"]));
            assert_eq!(keys(&ours["Task Info"]), keys(&theirs["Task Info"]));
            // executor metrics at 0 are left out (Spark reads a missing one as 0): ours
            // are some of Spark's, in Spark's order
            let theirs_metrics = keys(&theirs["Task Executor Metrics"]);
            let ours_metrics = keys(&ours["Task Executor Metrics"]);
            let in_spark_order: Vec<String> = theirs_metrics
                .iter()
                .filter(|k| ours_metrics.contains(k))
                .cloned()
                .collect();
            assert!(!ours_metrics.is_empty());
            assert_eq!(ours_metrics, in_spark_order);
        }
        if event.ends_with("SQLExecutionStart") {
            assert_eq!(keys(&ours["sparkPlanInfo"]), keys(&theirs["sparkPlanInfo"]));
            let id = ours["queryId"].as_str().unwrap();
            let groups: Vec<usize> = id.split('-').map(str::len).collect();
            assert_eq!(groups, [8, 4, 4, 4, 12], "{id} is not a UUID");
        }
        want.retain(|k| !(event == "SparkListenerJobEnd" && k == "Exception"));
        // the oracle application has no attempt id; qprof's have one, where Spark puts it
        if event == "SparkListenerApplicationStart" {
            want.insert(3, "App Attempt ID".to_string());
        }
        assert_eq!(keys(&ours), want, "{event}");
        compared += 1;
    }
    assert!(compared > 20);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_killed_writer_leaves_a_replayable_in_progress_log() {
    let dir = temp_dir("killed");
    let config = LogConfig::new(&dir);
    let mut log = AppLog::create(&config, &app_start()).unwrap();
    let p = profile();
    log.log_query(&QueryRecord {
        description: "q1".into(),
        sql: &p.sql,
        plan_text: String::new(),
        start_epoch_millis: T0 + 1000,
        end_epoch_millis: T0 + 1120,
        profile: Some(&p),
        error: None,
    })
    .unwrap();
    let app_dir = log.dir().to_path_buf();
    // the process dies: nothing more is written, nothing is finished
    std::mem::forget(log);
    // and a half-written line is left at the end
    let events = std::fs::read_dir(&app_dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| {
            p.file_name()
                .unwrap()
                .to_str()
                .unwrap()
                .starts_with("events_")
        })
        .unwrap();
    let mut bytes = std::fs::read(&events).unwrap();
    let complete_lines = bytes.iter().filter(|b| **b == b'\n').count();
    bytes.extend_from_slice(b"{\"Event\":\"SparkListenerTaskStart\",\"Stage ID\":");
    std::fs::write(&events, &bytes).unwrap();
    let replay = replay_one(&dir);
    assert!(replay.source().in_progress);
    let state = replay.state();
    assert_eq!(
        state.skipped.corrupt_lines, 0,
        "the partial line waits for more bytes"
    );
    assert_eq!(state.executions.len(), 1);
    assert_eq!(state.info.end_time, None);
    let info = qprof_eventlog::scan_info(replay.source()).unwrap();
    let attempt = rest::AttemptSource {
        info: &info,
        completed: false,
        last_updated: T0 + 5000,
        log_source: String::new(),
    };
    let json = rest::attempt_info(&attempt);
    assert_eq!(json["completed"], false);
    assert_eq!(json["endTime"], "1969-12-31T23:59:59.999GMT");
    assert!(complete_lines > 10);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A query of a cluster: its tasks ran on two executors, each with its own stage peaks; one
/// executor was lost after the query.
#[test]
fn a_cluster_application_shows_each_executor_with_its_stage_peaks() {
    use qprof_core::events::{ExecutorAdded, ExecutorRemoved};
    use qprof_core::executor_memory::MemorySample;
    use qprof_core::profile::ExecutorRef;
    use qprof_eventlog::rest::StageOptions;

    let dir = temp_dir("cluster");
    let config = LogConfig {
        dir: dir.clone(),
        zstd: false,
        roll_bytes: u64::MAX,
    };
    let mut log = AppLog::create(&config, &app_start()).unwrap();
    for (id, host) in [("exec-a", "host-a"), ("exec-b", "host-b")] {
        log.log_executor_added(&ExecutorAdded {
            id: id.into(),
            host: host.into(),
            port: 7337,
            cores: 2,
            epoch_millis: (T0 + 10) as u64,
        })
        .unwrap();
    }
    let mut p = profile();
    let on = |id: &str, host: &str| {
        Some(ExecutorRef {
            id: id.into(),
            host: host.into(),
        })
    };
    // stage 3: one task per executor; stage 4: its one task on exec-b, a second attempt
    p.stages[0].tasks[0].executor = on("exec-a", "host-a");
    p.stages[0].tasks[1].executor = on("exec-b", "host-b");
    p.stages[1].tasks[0].executor = on("exec-b", "host-b");
    p.stages[1].tasks[0].attempt = 1;
    let peak = |execution: u64, rss: u64| MemorySample {
        execution_bytes: execution,
        rss_bytes: rss,
        ..MemorySample::default()
    };
    p.stages[0].executor_memory = vec![
        ("exec-a".into(), peak(3 << 20, 90 << 20)),
        ("exec-b".into(), peak(5 << 20, 70 << 20)),
    ];
    p.stages[1].executor_memory = vec![("exec-b".into(), peak(7 << 20, 75 << 20))];
    log.log_query(&QueryRecord {
        description: "q1".into(),
        sql: &p.sql,
        plan_text: "AggregateExec\n  RepartitionExec".into(),
        start_epoch_millis: T0 + 1000,
        end_epoch_millis: T0 + 1120,
        profile: Some(&p),
        error: None,
    })
    .unwrap();
    log.log_executor_removed(&ExecutorRemoved {
        id: "exec-a".into(),
        reason: "lost: no heartbeat".into(),
        epoch_millis: (T0 + 1500) as u64,
    })
    .unwrap();
    log.finish(T0 + 2000, 0, None).unwrap();

    let replay = replay_one(&dir);
    let state = replay.state();
    assert_eq!(state.skipped.corrupt_lines, 0);
    let all = rest::executors(state, true);
    let ids: Vec<&str> = all
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids.len(), 3, "{ids:?}");
    assert!(ids.contains(&"exec-a") && ids.contains(&"exec-b") && ids.contains(&"driver"));
    let lost = all
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["id"] == "exec-a")
        .unwrap();
    assert_eq!(lost["isActive"], false);
    assert_eq!(lost["removeReason"], "lost: no heartbeat");
    assert_eq!(lost["hostPort"].as_str().unwrap(), "host-a:7337");
    // each executor's peaks are its own, not another's on the same stage
    let peak_rss = |id: &str| {
        all.as_array()
            .unwrap()
            .iter()
            .find(|e| e["id"] == id)
            .unwrap()["peakMemoryMetrics"]["ProcessTreeJVMRSSMemory"]
            .as_i64()
            .unwrap()
    };
    assert_eq!(peak_rss("exec-a"), 90 << 20);
    assert_eq!(peak_rss("exec-b"), 75 << 20);
    // the active list leaves the lost executor out
    let active = rest::executors(state, false);
    assert!(
        active
            .as_array()
            .unwrap()
            .iter()
            .all(|e| e["id"] != "exec-a")
    );

    let opts = StageOptions {
        details: true,
        with_summaries: false,
        quantiles: vec![0.5],
        task_statuses: Vec::new(),
    };
    let stage = rest::stage(state, 3, &opts).unwrap();
    let stage = &stage.as_array().unwrap()[0];
    let summary = stage["executorSummary"].as_object().unwrap();
    assert_eq!(summary.len(), 2, "{summary:?}");
    assert_eq!(
        summary["exec-a"]["peakMemoryMetrics"]["OffHeapExecutionMemory"],
        3 << 20
    );
    assert_eq!(
        summary["exec-b"]["peakMemoryMetrics"]["OffHeapExecutionMemory"],
        5 << 20
    );
    let tasks = stage["tasks"].as_object().unwrap();
    let on_b: Vec<_> = tasks
        .values()
        .filter(|t| t["executorId"] == "exec-b")
        .collect();
    assert_eq!(on_b.len(), 1);
    assert_eq!(on_b[0]["host"], "host-b");
    let later = rest::stage(state, 4, &opts).unwrap();
    let later = &later.as_array().unwrap()[0];
    let task = later["tasks"]
        .as_object()
        .unwrap()
        .values()
        .next()
        .unwrap()
        .clone();
    assert_eq!(task["attempt"], 1);
    assert_eq!(
        later["executorSummary"]["exec-b"]["peakMemoryMetrics"]["ProcessTreeJVMRSSMemory"],
        75 << 20
    );
    let _ = std::fs::remove_dir_all(&dir);
}
