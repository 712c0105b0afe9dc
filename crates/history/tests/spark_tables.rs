//! `qprof.stages`, `qprof.tasks` and `qprof.executors` of the Spark 4.3 oracle log against
//! what Spark's own history server answered for it.

mod common;

use std::collections::BTreeMap;
use std::path::PathBuf;

use common::{counting_store, rows, session, temp_dir};
use datafusion::prelude::SessionContext;
use qprof_eventlog::fixtures::{ORACLE_APP, copy_oracle_app};
use qprof_server::store::StoreOptions;
use serde_json::Value;

/// Spark's answer saved as `name`.
fn answer(name: &str) -> Value {
    let file = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../testdata/spark-4.3/expect")
        .join(format!("applications_{ORACLE_APP}{name}.json"));
    serde_json::from_str(&std::fs::read_to_string(file).unwrap()).unwrap()
}

/// Spark's camelCase field name as the tables' snake_case column name.
fn snake(name: &str) -> String {
    let mut out = String::new();
    for c in name.chars() {
        if c.is_ascii_uppercase() {
            out.push('_');
        }
        out.push(c.to_ascii_lowercase());
    }
    out
}

/// Every row of `sql` as a map from column name to its value as text.
async fn named_rows(ctx: &SessionContext, sql: &str) -> Vec<BTreeMap<String, String>> {
    let df = ctx.sql(sql).await.unwrap();
    let names: Vec<String> = df
        .schema()
        .fields()
        .iter()
        .map(|f| f.name().clone())
        .collect();
    rows(ctx, sql)
        .await
        .into_iter()
        .map(|row| names.iter().cloned().zip(row).collect())
        .collect()
}

fn oracle_session(name: &str) -> SessionContext {
    let dir = temp_dir(name);
    copy_oracle_app(&dir, ORACLE_APP);
    session(counting_store(&dir, StoreOptions::default()).0)
}

/// Compares `field` of Spark's object with `column` of the row, and counts it.
fn same(row: &BTreeMap<String, String>, column: &str, spark: &Value, compared: &mut usize) {
    let want = match spark {
        Value::String(s) => s.clone(),
        Value::Bool(b) => b.to_string(),
        other => other.to_string(),
    };
    assert_eq!(row[column], want, "{column} of {row:?}");
    *compared += 1;
}

#[tokio::test]
async fn stages_sum_their_tasks_as_sparks_stage_list_does() {
    let ctx = oracle_session("spark-stages");
    let got = named_rows(&ctx, "SELECT * FROM qprof.stages").await;
    let stages = answer("_stages");
    let stages = stages.as_array().unwrap();
    assert_eq!(got.len(), stages.len());
    let mut compared = 0;
    for stage in stages {
        let id = stage["stageId"].to_string();
        let attempt = stage["attemptId"].to_string();
        let row = got
            .iter()
            .find(|r| r["stage_id"] == id && r["attempt"] == attempt)
            .unwrap_or_else(|| panic!("stage {id}.{attempt}"));
        for (field, column) in [
            ("status", "status"),
            ("numTasks", "num_tasks"),
            ("numCompleteTasks", "completed_tasks"),
            ("numFailedTasks", "failed_tasks"),
            ("numKilledTasks", "killed_tasks"),
            ("numActiveTasks", "active_tasks"),
            ("name", "name"),
        ] {
            same(row, column, &stage[field], &mut compared);
        }
        // every summed metric Spark lists that has a column
        for (field, value) in stage.as_object().unwrap() {
            let column = snake(field);
            let named_otherwise = field == "attemptId" || column.ends_with("_tasks");
            if value.is_i64() && row.contains_key(&column) && !named_otherwise {
                same(row, &column, value, &mut compared);
            }
        }
        if let Some(reason) = stage.get("failureReason") {
            same(row, "failure_reason", reason, &mut compared);
        }
    }
    assert!(
        compared >= stages.len() * 30,
        "only {compared} values compared"
    );
    // each query's stages are the ones its jobs declared
    let jobs = answer("_jobs");
    let mut with_stages = 0;
    for query in answer("_sql").as_array().unwrap() {
        let job_ids: Vec<&Value> = ["successJobIds", "failedJobIds", "runningJobIds"]
            .iter()
            .flat_map(|k| query[*k].as_array().unwrap())
            .collect();
        let mut want: Vec<i64> = jobs
            .as_array()
            .unwrap()
            .iter()
            .filter(|j| job_ids.contains(&&j["jobId"]))
            .flat_map(|j| j["stageIds"].as_array().unwrap())
            .map(|s| s.as_i64().unwrap())
            .collect();
        want.sort();
        want.dedup();
        let got: Vec<i64> = rows(
            &ctx,
            &format!(
                "SELECT DISTINCT stage_id FROM qprof.stages WHERE query_id = {} ORDER BY 1",
                query["id"]
            ),
        )
        .await
        .iter()
        .map(|r| r[0].parse().unwrap())
        .collect();
        assert_eq!(got, want, "query {}'s stages", query["id"]);
        with_stages += usize::from(!want.is_empty());
    }
    assert!(with_stages >= 3, "only {with_stages} queries ran stages");
}

#[tokio::test]
async fn tasks_are_sparks_task_list() {
    let ctx = oracle_session("spark-tasks");
    let mut compared = 0;
    let mut tasks_seen = 0;
    for stage in [0, 1, 3, 4, 6] {
        let detail = answer(&format!("_stages_{stage}_0"));
        let got = named_rows(
            &ctx,
            &format!("SELECT * FROM qprof.tasks WHERE stage_id = {stage} AND stage_attempt = 0"),
        )
        .await;
        let tasks = detail["tasks"].as_object().unwrap();
        assert_eq!(got.len(), tasks.len(), "stage {stage}'s tasks");
        for task in tasks.values() {
            let row = got
                .iter()
                .find(|r| r["task_id"].parse::<i64>().ok() == task["taskId"].as_i64())
                .unwrap();
            for (field, column) in [
                ("index", "index"),
                ("attempt", "attempt"),
                ("partitionId", "partition"),
                ("duration", "duration_ms"),
                ("executorId", "executor_id"),
                ("host", "host"),
                ("status", "status"),
                ("taskLocality", "locality"),
                ("speculative", "speculative"),
                ("schedulerDelay", "scheduler_delay_ms"),
            ] {
                same(row, column, &task[field], &mut compared);
            }
            let metrics = &task["taskMetrics"];
            for (field, value) in metrics.as_object().unwrap() {
                if value.is_i64() {
                    same(row, &snake(field), value, &mut compared);
                }
            }
            same(
                row,
                "input_bytes",
                &metrics["inputMetrics"]["bytesRead"],
                &mut compared,
            );
            same(
                row,
                "shuffle_write_bytes",
                &metrics["shuffleWriteMetrics"]["bytesWritten"],
                &mut compared,
            );
            same(
                row,
                "shuffle_read_records",
                &metrics["shuffleReadMetrics"]["recordsRead"],
                &mut compared,
            );
            tasks_seen += 1;
        }
    }
    assert!(tasks_seen >= 5, "only {tasks_seen} tasks");
    assert!(
        compared >= tasks_seen * 20,
        "only {compared} values compared"
    );
}

#[tokio::test]
async fn executors_carry_sparks_peaks() {
    let ctx = oracle_session("spark-executors");
    let got = named_rows(&ctx, "SELECT * FROM qprof.executors").await;
    let executors = answer("_allexecutors");
    let executors = executors.as_array().unwrap();
    assert_eq!(got.len(), executors.len());
    let mut compared = 0;
    for executor in executors {
        let row = got
            .iter()
            .find(|r| Some(r["executor_id"].as_str()) == executor["id"].as_str())
            .unwrap();
        same(row, "total_cores", &executor["totalCores"], &mut compared);
        same(
            row,
            "max_memory_bytes",
            &executor["maxMemory"],
            &mut compared,
        );
        let peaks = executor["peakMemoryMetrics"].as_object().unwrap();
        for (metric, value) in peaks {
            let column = format!("peak_{}", common::snake_acronyms(metric));
            same(row, &column, value, &mut compared);
        }
    }
    assert!(compared >= 25, "only {compared} values compared");
}

#[tokio::test]
async fn spark_operator_tasks_add_up_to_the_operators() {
    let ctx = oracle_session("spark-operator-tasks");
    let sums = rows(
        &ctx,
        "SELECT t.query_id, t.node_id, sum(t.output_rows), max(o.output_rows) \
         FROM qprof.operator_tasks t JOIN qprof.operators o USING (app_id, query_id, node_id) \
         WHERE o.output_rows IS NOT NULL GROUP BY t.query_id, t.node_id",
    )
    .await;
    assert!(sums.len() >= 10, "only {} operators", sums.len());
    for row in &sums {
        assert_eq!(row[2], row[3], "{row:?}");
    }
}
