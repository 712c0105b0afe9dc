//! SQL metric values and job lists of an execution, aggregated as Spark's SQL listener
//! does: which task a maximum is named after when tasks tie or are retried, and the order
//! Spark's REST API lists an execution's jobs in.

use qprof_eventlog::AppState;
use qprof_eventlog::rest;
use serde_json::{Value, json};

/// An execution (id 0) whose plan has one timing metric, accumulator 1.
fn execution_start() -> Value {
    json!({
        "Event": "org.apache.spark.sql.execution.ui.SparkListenerSQLExecutionStart",
        "executionId": 0, "description": "q", "details": "", "physicalPlanDescription": "",
        "sparkPlanInfo": {"nodeName": "Scan", "simpleString": "Scan", "children": [],
            "metadata": {}, "metrics": [{"name": "scan time", "accumulatorId": 1, "metricType": "timing"}]},
        "time": 1000,
    })
}

/// Job `job` of execution 0 with `stages` of `tasks` tasks each.
fn job_start(job: i64, stages: &[i64], tasks: i64) -> Value {
    json!({
        "Event": "SparkListenerJobStart", "Job ID": job, "Submission Time": 1000,
        "Stage Infos": stages.iter().map(|s| json!({"Stage ID": s, "Stage Attempt ID": 0,
            "Stage Name": format!("stage {s}"), "Number of Tasks": tasks, "Parent IDs": []})).collect::<Vec<_>>(),
        "Properties": {"spark.sql.execution.id": "0"},
    })
}

fn stage_submitted(stage: i64, tasks: i64) -> Value {
    json!({"Event": "SparkListenerStageSubmitted", "Stage Info": {"Stage ID": stage,
        "Stage Attempt ID": 0, "Stage Name": format!("stage {stage}"), "Number of Tasks": tasks,
        "Parent IDs": [], "Submission Time": 1000}})
}

/// Task `task` (index `index`) of `stage` ending with `ms` on accumulator 1.
fn task_end(stage: i64, task: i64, index: i64, ms: i64, success: bool) -> Value {
    json!({
        "Event": "SparkListenerTaskEnd", "Stage ID": stage, "Stage Attempt ID": 0,
        "Task Type": "ResultTask",
        "Task End Reason": if success { json!({"Reason": "Success"}) }
            else { json!({"Reason": "ExceptionFailure", "Description": "boom"}) },
        "Task Info": {"Task ID": task, "Index": index, "Attempt": 0, "Launch Time": 1000,
            "Executor ID": "driver", "Host": "h", "Finish Time": 1100, "Failed": !success,
            "Accumulables": [{"ID": 1, "Name": "scan time", "Update": ms.to_string(),
                "Value": ms.to_string(), "Metadata": "sql"}]},
    })
}

fn job_end(job: i64) -> Value {
    json!({"Event": "SparkListenerJobEnd", "Job ID": job, "Completion Time": 2000,
        "Job Result": {"Result": "JobSucceeded"}})
}

fn execution_end() -> Value {
    json!({"Event": "org.apache.spark.sql.execution.ui.SparkListenerSQLExecutionEnd",
        "executionId": 0, "time": 2000})
}

fn replay(events: &[Value]) -> AppState {
    let mut state = AppState::default();
    for e in events {
        state.apply(e);
    }
    state
}

/// The rendered value of accumulator 1 in `/sql/0`.
fn scan_time(state: &AppState) -> String {
    let sql = rest::sql(state, 0, true, false).unwrap();
    sql["nodes"][0]["metrics"][0]["value"]
        .as_str()
        .unwrap_or_else(|| panic!("no metric value in {sql}"))
        .to_string()
}

#[test]
fn a_tie_across_stages_goes_to_the_first_stage_of_the_execution_not_the_first_task_to_end() {
    let state = replay(&[
        execution_start(),
        job_start(0, &[0, 1], 1),
        stage_submitted(0, 1),
        stage_submitted(1, 1),
        // stage 1's task ends first, with the same value
        task_end(1, 10, 0, 5, true),
        task_end(0, 20, 0, 5, true),
        job_end(0),
        execution_end(),
    ]);
    assert_eq!(
        scan_time(&state),
        "total (min, med, max (stageId: taskId))\n10 ms (5 ms, 5 ms, 5 ms (stage 0.0: task 20))"
    );
}

#[test]
fn a_retried_task_counts_its_first_success_and_the_max_names_the_first_to_reach_it() {
    let state = replay(&[
        execution_start(),
        job_start(0, &[2], 2),
        stage_submitted(2, 2),
        // index 0 fails at 9 ms, succeeds at 4 ms; a speculative copy's 7 ms comes too late
        task_end(2, 30, 0, 9, false),
        task_end(2, 31, 0, 4, true),
        task_end(2, 32, 0, 7, true),
        job_end(0),
        execution_end(),
    ]);
    // index 1 never reported: 0
    assert_eq!(
        scan_time(&state),
        "total (min, med, max (stageId: taskId))\n4 ms (0 ms, 4 ms, 4 ms (stage 2.0: task 30))"
    );
}

#[test]
fn an_executions_job_ids_come_in_the_order_of_sparks_map_of_them() {
    let mut events = vec![execution_start()];
    for job in 0..=10 {
        events.push(job_start(job, &[job], 1));
        events.push(job_end(job));
    }
    events.push(execution_end());
    let state = replay(&events);
    let sql = rest::sql(&state, 0, false, false).unwrap();
    assert_eq!(
        sql["successJobIds"],
        json!([0, 5, 10, 1, 6, 9, 2, 7, 3, 8, 4])
    );

    // up to four jobs, in the order they started
    let mut events = vec![execution_start()];
    for job in [3, 1, 2] {
        events.push(job_start(job, &[job], 1));
        events.push(job_end(job));
    }
    let sql = rest::sql(&replay(&events), 0, false, false).unwrap();
    assert_eq!(sql["successJobIds"], json!([3, 1, 2]));
}

#[test]
fn a_profile_is_asked_for_before_its_query_ends_or_of_a_log_without_one() {
    let running = replay(&[execution_start(), job_start(0, &[0], 1)]);
    let err = rest::qprof_profile(&running, 0).unwrap_err().to_string();
    assert!(err.contains("has not ended"), "{err}");
    let ended = replay(&[
        execution_start(),
        job_start(0, &[0], 1),
        job_end(0),
        execution_end(),
    ]);
    let err = rest::qprof_profile(&ended, 0).unwrap_err().to_string();
    assert!(err.contains("the log was not written by qprof"), "{err}");
}
