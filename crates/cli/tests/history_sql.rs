//! End to end: `qprof sql --history` over a TPC-H run's log and Spark's own, and the web
//! UI's query box in a real headless Chromium, against the profiles the logs carry.
//!
//! Needs what `scripts/install-test-deps.sh` installs (Chromium).

use std::collections::BTreeMap;
use std::path::Path;

use common::served::{Server, chromium, qprof, temp_dir};
use common::{percent_encoded, tpch_event_log};
use qprof_eventlog::Replay;
use qprof_eventlog::fixtures::{ORACLE_APP, copy_oracle_app};

mod common;

const BY_NAME: &str =
    "SELECT name, sum(self_cpu_nanos) FROM qprof.operators GROUP BY name ORDER BY 2 DESC";

/// Each operator type's self CPU summed over every profile the logs in `dir` carry.
fn self_cpu_by_name(dir: &Path) -> BTreeMap<String, i64> {
    let mut totals = BTreeMap::new();
    for source in qprof_eventlog::discover(dir).unwrap() {
        let replay = Replay::load(source).unwrap();
        for execution in replay.state().executions.values() {
            let Some(profile) = execution.qprof_profile() else {
                continue;
            };
            for node in profile.unwrap().plan.iter() {
                if let Some(m) = node.metrics.get("selfCpuNanos") {
                    *totals.entry(node.name.clone()).or_default() += m.value;
                }
            }
        }
    }
    totals
}

/// The rows of a table `qprof sql` printed: the cells of each line between `|`s, the
/// header's included.
fn printed_rows(stdout: &str) -> Vec<Vec<String>> {
    stdout
        .lines()
        .filter(|l| l.starts_with('|'))
        .map(|l| {
            l.trim_matches('|')
                .split('|')
                .map(|c| c.trim().to_string())
                .collect()
        })
        .collect()
}

#[test]
fn sql_history_sums_the_logged_profiles_self_cpu_by_operator() {
    let dir = temp_dir("sql-history");
    let events = tpch_event_log(&dir, Some("3,22"));
    copy_oracle_app(&events, ORACLE_APP);
    let want = self_cpu_by_name(&events);
    assert!(want.contains_key("HashJoinExec"), "{want:?}");
    let rows = history_rows(&events, &dir.join("own"), BY_NAME);
    assert_eq!(rows[0], ["name", "sum(qprof.operators.self_cpu_nanos)"]);
    let mut got = BTreeMap::new();
    for row in &rows[1..] {
        // Spark's operators have no self CPU: their sums are null (empty)
        if !row[1].is_empty() {
            got.insert(row[0].clone(), row[1].parse::<i64>().unwrap());
        }
    }
    assert_eq!(got, want);
    // Spark's plan is there too, by its own operators' names
    assert!(rows.iter().any(|r| r[0] == "Range"), "{rows:?}");
    // sorted by the sum, largest first
    let sums: Vec<i64> = rows[1..]
        .iter()
        .filter(|r| !r[1].is_empty())
        .map(|r| r[1].parse().unwrap())
        .collect();
    assert!(sums.windows(2).all(|w| w[0] >= w[1]), "{sums:?}");
}

/// The rows `qprof sql --history <events> <sql>` printed, its header's first.
fn history_rows(events: &Path, own: &Path, sql: &str) -> Vec<Vec<String>> {
    let out = qprof()
        .args(["sql", "--history"])
        .arg(events)
        .arg("--event-log-dir")
        .arg(own)
        .args(["--top", "0", sql])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    printed_rows(&stdout)
}

#[test]
fn sql_history_stages_are_the_rest_apis_and_operator_tasks_add_up() {
    let dir = temp_dir("sql-history-stages");
    let events = tpch_event_log(&dir, Some("3"));
    let source = qprof_eventlog::discover(&events).unwrap().remove(0);
    let replay = Replay::load(source).unwrap();
    let rest = qprof_eventlog::rest::stages(replay.state(), &[], &Default::default()).unwrap();
    let fields = [
        ("stageId", "stage_id"),
        ("status", "status"),
        ("numTasks", "num_tasks"),
        ("numCompleteTasks", "completed_tasks"),
        ("executorRunTime", "executor_run_time"),
        ("executorCpuTime", "executor_cpu_time"),
        ("peakExecutionMemory", "peak_execution_memory"),
        ("inputRecords", "input_records"),
        ("shuffleWriteBytes", "shuffle_write_bytes"),
        ("diskBytesSpilled", "disk_bytes_spilled"),
    ];
    let columns: Vec<&str> = fields.iter().map(|(_, c)| *c).collect();
    let rows = history_rows(
        &events,
        &dir.join("own"),
        &format!(
            "SELECT {} FROM qprof.stages ORDER BY stage_id",
            columns.join(", ")
        ),
    );
    assert_eq!(rows[0], columns);
    let mut want: Vec<Vec<String>> = rest
        .as_array()
        .unwrap()
        .iter()
        .map(|stage| {
            fields
                .iter()
                .map(|(field, _)| match &stage[*field] {
                    serde_json::Value::String(s) => s.clone(),
                    other => other.to_string(),
                })
                .collect()
        })
        .collect();
    want.sort_by_key(|r| r[0].parse::<i64>().unwrap());
    assert!(want.len() >= 2, "{want:?}");
    assert_eq!(&rows[1..], &want[..]);

    // each operator's output rows are its tasks' summed
    let sums = history_rows(
        &events,
        &dir.join("own"),
        "SELECT o.node_id, o.output_rows, sum(t.output_rows) AS tasks_rows \
         FROM qprof.operators o JOIN qprof.operator_tasks t USING (app_id, query_id, node_id) \
         WHERE o.output_rows IS NOT NULL GROUP BY o.node_id, o.output_rows ORDER BY 1",
    );
    assert!(sums.len() > 5, "{sums:?}");
    for row in &sums[1..] {
        assert_eq!(row[1], row[2], "node {}", row[0]);
    }
}

#[test]
fn sql_history_over_a_missing_directory_is_a_one_line_error() {
    let dir = temp_dir("sql-history-missing");
    let out = qprof()
        .args(["sql", "--history"])
        .arg(dir.join("nothing-here"))
        .arg("--event-log-dir")
        .arg(dir.join("own"))
        .arg(BY_NAME)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
    assert!(
        stderr.contains("cannot read log directory") && stderr.contains("nothing-here"),
        "{stderr}"
    );
}

#[test]
fn the_ui_query_box_answers_in_headless_chromium() {
    let dir = temp_dir("sql-ui");
    let events = tpch_event_log(&dir, Some("3"));
    let want = self_cpu_by_name(&events);
    let server = Server::start(&events);
    let url = format!(
        "{}/#/sql?q={}",
        server.url,
        percent_encoded(&format!("{BY_NAME} LIMIT 50"))
    );
    let dom = chromium(&["--dump-dom"], &url);
    let html = String::from_utf8_lossy(&dom.stdout);
    assert!(html.contains("data-ready=\"1\""), "never rendered:\n{html}");
    assert!(!html.contains("id=\"error\""), "an error:\n{html}");
    for (name, sum) in &want {
        let row = format!("<td>{name}</td><td class=\"num mono\">{sum}</td>");
        assert!(html.contains(&row), "no row {row}:\n{html}");
    }
    // a statement that writes is refused, in the page
    let url = format!(
        "{}/#/sql?q={}",
        server.url,
        percent_encoded("CREATE TABLE t AS SELECT 1")
    );
    let html = String::from_utf8_lossy(&chromium(&["--dump-dom"], &url).stdout).to_string();
    assert!(
        html.contains("data-ready=\"1\"") && html.contains("id=\"error\""),
        "{html}"
    );
}

#[test]
fn a_decompression_bomb_in_the_history_is_skipped_by_sql_and_diff_alike() {
    let dir = temp_dir("sql-history-bomb");
    let events = dir.join("events");
    std::fs::create_dir_all(&events).unwrap();
    copy_oracle_app(&events, "local-1");
    // 1 GiB of zeros in a few KiB
    let bomb = qprof_eventlog::fixtures::zstd_bomb(b"", 1 << 30);
    std::fs::write(events.join("local-2.zstd"), bomb).unwrap();
    let out = qprof()
        .args(["sql", "--history"])
        .arg(&events)
        .arg("--event-log-dir")
        .arg(dir.join("own"))
        .args(["--top", "0", "SELECT app_id FROM qprof.applications"])
        .output()
        .unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(out.status.success(), "{stdout}\n{stderr}");
    let ids: Vec<String> = printed_rows(&stdout)
        .into_iter()
        .skip(1)
        .map(|r| r[0].clone())
        .collect();
    assert_eq!(ids, ["local-1"], "{stdout}");
    assert!(stderr.contains("decompression bomb"), "{stderr}");
    // diff names the application it cannot find, on one line
    let spec = format!("{}:local-2:0", events.display());
    let out = qprof().args(["diff", &spec, &spec]).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert_eq!(stderr.trim_end().lines().count(), 1, "{stderr}");
    assert!(stderr.contains("no application 'local-2'"), "{stderr}");
}
