//! Spark 4.3's own history server answers, reproduced from the same log by qprof's
//! replay and REST rendering (without HTTP; the server crate checks the routes).

use std::path::PathBuf;

use qprof_eventlog::Replay;
use qprof_eventlog::compare::{first_difference as first_diff, strip_host_fields as strip};
use qprof_eventlog::discover;
use qprof_eventlog::rest::{self, StageOptions};
use serde_json::Value;

fn oracle() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../testdata/spark-4.3")
}

#[test]
fn rest_answers_equal_spark_history_server() {
    let sources = discover(&oracle().join("events")).unwrap();
    assert_eq!(sources.len(), 1);
    let replay = Replay::load(sources[0].clone()).unwrap();
    let state = replay.state();
    assert_eq!(state.skipped.corrupt_lines, 0);
    let index = std::fs::read_to_string(oracle().join("expect/index.tsv")).unwrap();
    let mut failures = Vec::new();
    let mut checked = 0;
    for line in index.lines() {
        let (file, path) = line.split_once('\t').unwrap();
        let (route, query) = path.split_once('?').unwrap_or((path, ""));
        let parts: Vec<&str> = route.split('/').collect();
        let q = |k: &str| {
            query
                .split('&')
                .find_map(|kv| kv.strip_prefix(&format!("{k}=")))
                .map(str::to_string)
        };
        let flag = |k: &str, d: bool| q(k).map(|v| v == "true").unwrap_or(d);
        let opts = StageOptions {
            details: flag("details", false),
            with_summaries: flag("withSummaries", false),
            quantiles: vec![],
            task_statuses: q("taskStatus").into_iter().collect(),
        };
        let detailed = StageOptions {
            details: true,
            ..StageOptions::default()
        };
        let info = &state.info;
        let attempt = rest::AttemptSource {
            info,
            completed: !replay.source().in_progress,
            last_updated: 0,
            log_source: String::new(),
        };
        let got = match parts.as_slice() {
            ["version"] => rest::version(),
            ["applications"] => Value::Array(vec![rest::application_info(
                info.id.as_deref().unwrap(),
                std::slice::from_ref(&attempt),
            )]),
            ["applications", id] => rest::application_info(id, std::slice::from_ref(&attempt)),
            ["applications", _, "allexecutors"] => rest::executors(state, true),
            ["applications", _, "executors"] => rest::executors(state, false),
            ["applications", _, "environment"] => rest::environment(state).unwrap(),
            ["applications", _, "jobs"] => rest::jobs(state, &[]).unwrap(),
            ["applications", _, "sql"] => rest::sql_list(state, true, true, 0, 20),
            ["applications", _, "sql", id] => rest::sql(
                state,
                id.parse().unwrap(),
                flag("details", true),
                flag("planDescription", true),
            )
            .unwrap(),
            ["applications", _, "stages"] => rest::stages(state, &[], &opts).unwrap(),
            ["applications", _, "stages", id, a] => {
                rest::stage_attempt(state, id.parse().unwrap(), a.parse().unwrap(), &detailed)
                    .unwrap()
            }
            ["applications", _, "stages", id, a, "taskSummary"] => {
                rest::task_summary(state, id.parse().unwrap(), a.parse().unwrap(), &[]).unwrap()
            }
            other => panic!("endpoint not covered: {other:?}"),
        };
        let mut want: Value = serde_json::from_str(
            &std::fs::read_to_string(oracle().join("expect").join(file)).unwrap(),
        )
        .unwrap();
        let mut got = got;
        strip(&mut want);
        strip(&mut got);
        checked += 1;
        if let Some(d) = first_diff(path, &got, &want) {
            failures.push(d);
        }
    }
    assert_eq!(checked, 27);
    assert!(
        failures.is_empty(),
        "{} of {checked} differ:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
