//! Logs made for tests and benchmarks from the Spark 4.3 fixture application.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::rest;
use crate::state::AppState;

/// The fixture application's id.
pub const ORACLE_APP: &str = "local-1795333320377";

/// The fixture application's log directory (Spark's rolling layout) in this repository.
pub fn oracle_log_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../testdata/spark-4.3/events")
        .join(format!("eventlog_v2_{ORACLE_APP}"))
}

/// Writes a rolling log of about `target` bytes into `dir`: the fixture's events, with its
/// task starts and ends repeated under fresh task ids before the application end, so the
/// mix of events is Spark's own, dominated by task ends. Returns its size.
///
/// # Panics
/// If the fixture cannot be read or the log cannot be written (test code).
pub fn synthetic_spark_log(dir: &Path, target: usize) -> u64 {
    let text = std::fs::read_to_string(oracle_log_dir().join(format!("events_1_{ORACLE_APP}")))
        .expect("the fixture log");
    let lines: Vec<&str> = text.lines().collect();
    let tasks: Vec<Value> = lines
        .iter()
        .map(|l| serde_json::from_str::<Value>(l).expect("a fixture event"))
        .filter(|e| {
            let n = e["Event"].as_str().unwrap_or_default();
            n == "SparkListenerTaskStart" || n == "SparkListenerTaskEnd"
        })
        .collect();
    let (body, end) = lines.split_at(lines.len() - 1);
    let mut out = body.join("\n");
    out.push('\n');
    let mut next_id = 1_000_i64;
    while out.len() < target {
        for pair in tasks.chunks(2) {
            for e in pair {
                let mut e = e.clone();
                e["Task Info"]["Task ID"] = next_id.into();
                out.push_str(&e.to_string());
                out.push('\n');
            }
            next_id += 1;
        }
    }
    out.push_str(&end.join("\n"));
    out.push('\n');
    let app_dir = dir.join(format!("eventlog_v2_{ORACLE_APP}"));
    std::fs::create_dir_all(&app_dir).expect("the log directory");
    std::fs::write(app_dir.join(format!("events_1_{ORACLE_APP}")), &out).expect("the log");
    std::fs::write(app_dir.join(format!("appstatus_{ORACLE_APP}")), b"").expect("the marker");
    out.len() as u64
}

/// Copies the fixture application into `dir` as application `id` (its id replaced in its
/// file names and events).
///
/// # Panics
/// If the fixture cannot be read or the copy cannot be written (test code).
pub fn copy_oracle_app(dir: &Path, id: &str) {
    let to = dir.join(format!("eventlog_v2_{id}"));
    std::fs::create_dir_all(&to).expect("the log directory");
    for file in std::fs::read_dir(oracle_log_dir()).expect("the fixture") {
        let file = file.expect("a fixture file");
        let name = file.file_name().to_string_lossy().replace(ORACLE_APP, id);
        let text = std::fs::read_to_string(file.path())
            .expect("a fixture file")
            .replace(ORACLE_APP, id);
        std::fs::write(to.join(name), text).expect("the copy");
    }
}

/// Copies the fixture application into `dir` as application `id`, its events file
/// rewritten by `edit`; returns the events' text as copied, before the edit.
///
/// # Panics
/// As [`copy_oracle_app`].
pub fn copy_oracle_app_edited(dir: &Path, id: &str, edit: impl Fn(&str) -> String) -> String {
    copy_oracle_app(dir, id);
    let file = dir
        .join(format!("eventlog_v2_{id}"))
        .join(format!("events_1_{id}"));
    let text = std::fs::read_to_string(&file).expect("the copy");
    std::fs::write(&file, edit(&text)).expect("the copy");
    text
}

/// Every answer of the REST API for `state`, stage by stage and execution by execution,
/// qprof's profiles included: two states that give the same are the same to a client.
///
/// # Panics
/// If an answer that must exist is missing (test code).
pub fn every_answer(state: &AppState) -> Value {
    let details = rest::StageOptions {
        details: true,
        with_summaries: true,
        ..Default::default()
    };
    let stages: Vec<Value> = state
        .stages
        .keys()
        .map(|(id, attempt)| {
            json!([
                rest::stage_attempt(state, *id, *attempt, &details).unwrap(),
                rest::task_summary(state, *id, *attempt, &[]).ok(),
                rest::task_list(state, *id, *attempt, 0, 1000, Some("ID"), &[]).unwrap(),
            ])
        })
        .collect();
    let sql: Vec<Value> = state
        .executions
        .keys()
        .map(|id| {
            json!([
                rest::sql(state, *id, true, true).unwrap(),
                rest::qprof_profile(state, *id).ok(),
            ])
        })
        .collect();
    json!({
        "jobs": rest::jobs(state, &[]).unwrap(),
        "stages": rest::stages(state, &[], &details).unwrap(),
        "stage": stages,
        "sql": sql,
        "executors": rest::executors(state, true),
        "allexecutors": rest::executors(state, false),
        "environment": rest::environment(state).unwrap(),
        "skipped": [state.skipped.unknown_events, state.skipped.corrupt_lines],
    })
}

/// Writes a complete qprof log of `profiles` (one query each, succeeded) under `dir`, as
/// an application started at `start_epoch_millis`; returns the application's id.
pub fn write_profiled_app(
    dir: &Path,
    start_epoch_millis: u64,
    profiles: &[qprof_core::profile::QueryProfile],
) -> String {
    use crate::profile_events::QueryRecord;
    use crate::writer::{AppLog, LogConfig};
    let config = LogConfig::new(dir);
    let app = qprof_core::events::AppInfo {
        name: "qprof fixture".into(),
        user: "tester".into(),
        host: "localhost".into(),
        cores: 2,
        start_epoch_millis,
        engine: "DataFusion 55.2.0".into(),
        properties: Vec::new(),
    };
    let mut log = AppLog::create(&config, &app).expect("a log in the fixture's directory");
    let id = log.app_id().to_string();
    let mut t = start_epoch_millis as i64;
    for profile in profiles {
        let duration = (profile.duration_nanos / 1_000_000) as i64;
        log.log_query(&QueryRecord {
            description: format!("query {}", profile.id),
            sql: &profile.sql,
            plan_text: profile.plan.name.clone(),
            start_epoch_millis: t + 1,
            end_epoch_millis: t + 1 + duration,
            profile: Some(profile),
            error: None,
        })
        .expect("the fixture's query logged");
        t += duration + 2;
    }
    log.finish(t + 1, 0, None)
        .expect("the fixture's log finished");
    id
}

/// A zstd frame of `zeros` zero bytes (in whole MiB) after `head`, compressed hard: a
/// decompression bomb of a few KiB per GiB.
pub fn zstd_bomb(head: &[u8], zeros: usize) -> Vec<u8> {
    use std::io::Write;
    let mut encoder =
        zstd::stream::write::Encoder::new(Vec::new(), 19).expect("zstd's level 19 exists");
    encoder.write_all(head).expect("writes to memory");
    let block = vec![0u8; 1 << 20];
    for _ in 0..zeros >> 20 {
        encoder.write_all(&block).expect("writes to memory");
    }
    encoder.finish().expect("writes to memory")
}
