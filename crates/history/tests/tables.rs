//! The `qprof.*` tables against what was logged: qprof's profiles as written, Spark's
//! numbers as its own history server gave them, and logs opened only when a filter keeps
//! them.

mod common;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use common::{counting_store, profile, rows, session, temp_dir};
use qprof_eventlog::fixtures::{ORACLE_APP, copy_oracle_app, write_profiled_app};
use qprof_server::store::StoreOptions;

#[tokio::test]
async fn operators_are_the_logged_profiles_nodes() {
    let dir = temp_dir("operators");
    let profiles = [profile(1), profile(2)];
    let app = write_profiled_app(&dir, 1_700_000_000_000, &profiles);
    let ctx = session(counting_store(&dir, StoreOptions::default()).0);
    let got = rows(
        &ctx,
        "SELECT app_id, query_id, node_id, parent_id, name, self_cpu_nanos, output_rows, \
         peak_memory_bytes, source FROM qprof.operators ORDER BY query_id, node_id",
    )
    .await;
    let mut want = Vec::new();
    for (query, p) in profiles.iter().enumerate() {
        let mut parents = BTreeMap::new();
        for node in p.plan.iter() {
            for child in &node.children {
                parents.insert(child.id, node.id);
            }
        }
        for node in p.plan.iter() {
            let value = |name| node.value(name).map_or("null".into(), |v| v.to_string());
            want.push(vec![
                app.clone(),
                query.to_string(),
                node.id.to_string(),
                parents
                    .get(&node.id)
                    .map_or("null".into(), |p| p.to_string()),
                node.name.clone(),
                value("selfCpuNanos"),
                value("outputRows"),
                value("peakMemoryBytes"),
                "qprof".into(),
            ]);
        }
    }
    want.sort_by_key(|r| (r[1].parse::<i64>().unwrap(), r[2].parse::<i64>().unwrap()));
    assert_eq!(got, want);
    assert!(got.len() >= 6, "two queries of three operators each");

    let by_name = rows(
        &ctx,
        "SELECT name, sum(self_cpu_nanos) FROM qprof.operators GROUP BY name ORDER BY 2 DESC",
    )
    .await;
    let mut totals: BTreeMap<String, i64> = BTreeMap::new();
    for p in &profiles {
        for node in p.plan.iter() {
            *totals.entry(node.name.clone()).or_default() += node.value("selfCpuNanos").unwrap();
        }
    }
    assert_eq!(by_name.len(), totals.len());
    for row in &by_name {
        assert_eq!(row[1], totals[&row[0]].to_string(), "{row:?}");
    }
}

#[tokio::test]
async fn queries_carry_the_logged_sql_and_rows() {
    let dir = temp_dir("queries");
    let mut bounded = profile(2);
    bounded.memory_pool = Some(qprof_core::profile::MemoryPoolUsage {
        limit_bytes: Some(1 << 30),
        peak_bytes: 123_456,
    });
    let profiles = [profile(1), bounded];
    let app = write_profiled_app(&dir, 1_700_000_000_000, &profiles);
    let ctx = session(counting_store(&dir, StoreOptions::default()).0);
    let got = rows(
        &ctx,
        "SELECT app_id, query_id, status, sql, rows, duration_nanos, operators, findings, \
         memory_pool_peak_bytes, memory_pool_limit_bytes FROM qprof.queries ORDER BY query_id",
    )
    .await;
    let want: Vec<Vec<String>> = profiles
        .iter()
        .enumerate()
        .map(|(i, p)| {
            vec![
                app.clone(),
                i.to_string(),
                "COMPLETED".into(),
                p.sql.clone(),
                p.rows.to_string(),
                p.duration_nanos.to_string(),
                p.plan.iter().count().to_string(),
                qprof_core::advice::advise(p).len().to_string(),
                p.memory_pool
                    .map_or("null".into(), |m| m.peak_bytes.to_string()),
                p.memory_pool
                    .and_then(|m| m.limit_bytes)
                    .map_or("null".into(), |l| l.to_string()),
            ]
        })
        .collect();
    assert_eq!(got, want);
}

#[tokio::test]
async fn spark_operators_have_the_numbers_sparks_server_shows() {
    let dir = temp_dir("spark");
    copy_oracle_app(&dir, ORACLE_APP);
    let ctx = session(counting_store(&dir, StoreOptions::default()).0);
    let expect = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../testdata/spark-4.3/expect");
    let mut compared = 0;
    for query in 0..5 {
        let file = expect.join(format!(
            "applications_{ORACLE_APP}_sql_{query}_details_true_planDescription_true.json"
        ));
        let answer: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(file).unwrap()).unwrap();
        let got = rows(
            &ctx,
            &format!(
                "SELECT node_id, name, output_rows FROM qprof.operators \
                 WHERE app_id = '{ORACLE_APP}' AND query_id = {query} ORDER BY node_id"
            ),
        )
        .await;
        let got: BTreeMap<i64, (String, String)> = got
            .into_iter()
            .map(|r| (r[0].parse().unwrap(), (r[1].clone(), r[2].clone())))
            .collect();
        let nodes = answer["nodes"].as_array().unwrap();
        assert_eq!(got.len(), nodes.len(), "query {query}'s operators");
        for node in nodes {
            let id = node["nodeId"].as_i64().unwrap();
            let (name, rows) = &got[&id];
            assert_eq!(name, node["nodeName"].as_str().unwrap());
            let shown = node["metrics"]
                .as_array()
                .unwrap()
                .iter()
                .find(|m| m["name"] == "number of output rows")
                .map(|m| m["value"].as_str().unwrap().replace(',', ""));
            if let Some(shown) = shown {
                assert_eq!(rows, &shown, "query {query}, node {id} ({name})");
                compared += 1;
            }
        }
    }
    assert!(compared >= 10, "only {compared} row counts compared");
}

#[tokio::test]
async fn a_filter_on_one_application_opens_one_log_of_a_thousand() {
    let dir = temp_dir("prune");
    let mut ids = Vec::new();
    for i in 0..1000u64 {
        ids.push(write_profiled_app(
            &dir,
            1_700_000_000_000 + i * 60_000,
            &[profile(1)],
        ));
    }
    let (store, loads) = counting_store(&dir, StoreOptions::default());
    let ctx = session(store);
    let one = &ids[417];
    let got = rows(
        &ctx,
        &format!(
            "SELECT app_id, count(*) FROM qprof.operators WHERE app_id = '{one}' GROUP BY app_id"
        ),
    )
    .await;
    assert_eq!(got, vec![vec![one.clone(), "3".to_string()]]);
    assert_eq!(loads.load(Ordering::SeqCst), 1, "logs replayed");

    // a time window opens the logs of the applications that ran in it
    let from = 1_700_000_000_000u64 + 10 * 60_000;
    let until = from + 9 * 60_000 + 30_000;
    let got = rows(
        &ctx,
        &format!(
            "SELECT count(DISTINCT app_id) FROM qprof.operators \
             WHERE submission_time >= to_timestamp_millis({from}) \
             AND submission_time <= to_timestamp_millis({until})"
        ),
    )
    .await;
    assert_eq!(got, vec![vec!["10".to_string()]]);
    assert_eq!(loads.load(Ordering::SeqCst), 1 + 10, "logs replayed");

    // the listing alone opens none
    let listed = rows(&ctx, "SELECT count(*) FROM qprof.applications").await;
    assert_eq!(listed, vec![vec!["1000".to_string()]]);
    assert_eq!(loads.load(Ordering::SeqCst), 1 + 10, "logs replayed");
}

#[tokio::test]
async fn a_second_query_over_saved_replays_reads_no_log() {
    let dir = temp_dir("saved");
    for i in 0..5u64 {
        write_profiled_app(
            &dir,
            1_700_000_000_000 + i * 60_000,
            &[profile(1), profile(2)],
        );
    }
    let store_dir = temp_dir("saved-store");
    let options = || StoreOptions {
        store_dir: Some(store_dir.clone()),
        ..StoreOptions::default()
    };
    let sql = "SELECT count(*), sum(rows) FROM qprof.queries";
    let (first_store, first_loads) = counting_store(&dir, options());
    let first = rows(&session(first_store), sql).await;
    assert_eq!(first_loads.load(Ordering::SeqCst), 5);
    // a new store (as in another process) over the same saved replays
    let (second_store, second_loads) = counting_store(&dir, options());
    let second = rows(&session(Arc::clone(&second_store)), sql).await;
    assert_eq!(second, first);
    assert_eq!(first[0][0], "10");
    assert_eq!(second_loads.load(Ordering::SeqCst), 0, "logs replayed");
    let disk = second_store.status().disk.unwrap();
    assert!(disk.hits >= 5, "{disk:?}");
}

#[tokio::test]
async fn metric_columns_say_their_unit() {
    let dir = temp_dir("units");
    let ctx = session(counting_store(&dir, StoreOptions::default()).0);
    let df = ctx.table("qprof.operators").await.unwrap();
    let schema = df.schema();
    let field = schema
        .field_with_unqualified_name("self_cpu_nanos")
        .unwrap();
    assert_eq!(field.metadata().get("unit").map(String::as_str), Some("ns"));
    let field = schema.field_with_unqualified_name("output_rows").unwrap();
    assert_eq!(
        field.metadata().get("unit").map(String::as_str),
        Some("rows")
    );
    // an empty directory: tables without rows
    let none = rows(&ctx, "SELECT count(*) FROM qprof.operators").await;
    assert_eq!(none, vec![vec!["0".to_string()]]);
}

#[tokio::test]
async fn findings_functions_and_planning_are_the_profiles() {
    use qprof_core::planning::{PhaseTiming, PlanningPhase, PlanningProfile, RuleTiming};
    let dir = temp_dir("profile-tables");
    let mut planned = profile(1);
    planned.planning = Some(PlanningProfile {
        start_epoch_micros: 1_700_000_000_000_000,
        phases: vec![PhaseTiming {
            phase: PlanningPhase::Optimizer,
            start_nanos: 100,
            end_nanos: 900,
            wall_nanos: 800,
            cpu_nanos: 700,
        }],
        rules: vec![RuleTiming {
            phase: PlanningPhase::Optimizer,
            name: "push_down_filter".into(),
            first_start_nanos: 120,
            last_end_nanos: 880,
            wall_nanos: 500,
            calls: 6,
            changed: true,
            plans: Vec::new(),
        }],
    });
    let profiles = [planned, profile(2)];
    let app = write_profiled_app(&dir, 1_700_000_000_000, &profiles);
    let ctx = session(counting_store(&dir, StoreOptions::default()).0);

    let findings = rows(
        &ctx,
        "SELECT query_id, rule, severity, node_id, message FROM qprof.findings \
         ORDER BY query_id, rule, node_id",
    )
    .await;
    let mut want = Vec::new();
    for (query, p) in profiles.iter().enumerate() {
        for f in qprof_core::advice::advise(p) {
            want.push(vec![
                query.to_string(),
                f.rule.to_string(),
                f.severity.to_string(),
                f.node_id.map_or("null".into(), |n| n.to_string()),
                f.message.clone(),
            ]);
        }
    }
    want.sort_by(|a, b| (&a[0], &a[1], &a[3]).cmp(&(&b[0], &b[1], &b[3])));
    assert!(
        !want.is_empty(),
        "the fixture gives the advisor something to say"
    );
    assert_eq!(findings, want);

    let functions = rows(
        &ctx,
        "SELECT app_id, query_id, node_id, operator, function, expression, rows, cpu_nanos, mode \
         FROM qprof.functions ORDER BY query_id, node_id",
    )
    .await;
    let mut want = Vec::new();
    for (query, p) in profiles.iter().enumerate() {
        for node in p.plan.iter() {
            for f in &node.functions {
                want.push(vec![
                    app.clone(),
                    query.to_string(),
                    node.id.to_string(),
                    node.name.clone(),
                    f.name.clone(),
                    f.expression.clone(),
                    f.rows.to_string(),
                    f.cpu_nanos.to_string(),
                    f.mode.clone(),
                ]);
            }
        }
    }
    assert_eq!(functions.len(), 2, "one call site per query");
    assert_eq!(functions, want);

    let planning = rows(
        &ctx,
        "SELECT query_id, phase, rule, wall_nanos, cpu_nanos, calls, changed \
         FROM qprof.planning ORDER BY query_id, rule NULLS FIRST",
    )
    .await;
    let phase = profiles[0].planning.as_ref().unwrap().phases[0]
        .phase
        .as_str();
    assert_eq!(
        planning,
        vec![
            vec!["0", phase, "null", "800", "700", "null", "null"],
            vec!["0", phase, "push_down_filter", "500", "null", "6", "true"],
        ]
    );
}

#[tokio::test]
async fn operator_tasks_add_up_to_their_operators() {
    let dir = temp_dir("operator-tasks");
    // the fixture's operators report values of two tasks: its stage lists both
    let mut two_tasks = profile(1);
    let stage = &mut two_tasks.stages[0];
    let mut second = stage.tasks[0].clone();
    second.task_id = 1;
    second.partition = 1;
    // and a third task that reported none of their metrics: Spark's aggregation counts it
    // as zeros, which are no task's own values
    let mut third = second.clone();
    third.task_id = 2;
    third.partition = 2;
    stage.tasks.extend([second, third]);
    let profiles = [two_tasks];
    write_profiled_app(&dir, 1_700_000_000_000, &profiles);
    let ctx = session(counting_store(&dir, StoreOptions::default()).0);
    let got = rows(
        &ctx,
        "SELECT node_id, task_id, self_cpu_nanos, output_rows FROM qprof.operator_tasks \
         WHERE task_id IS NOT NULL ORDER BY node_id, task_id",
    )
    .await;
    let mut want = Vec::new();
    for node in profiles[0].plan.iter() {
        let task_values = |name: &str| -> BTreeMap<u64, i64> {
            node.metrics
                .iter()
                .find(|m| m.name == name)
                .unwrap()
                .tasks
                .iter()
                .map(|v| (v.task.unwrap().task_id, v.value))
                .collect()
        };
        let cpu = task_values("selfCpuNanos");
        let rows = task_values("outputRows");
        for (task, value) in &cpu {
            want.push(vec![
                node.id.to_string(),
                task.to_string(),
                value.to_string(),
                rows[task].to_string(),
            ]);
        }
    }
    want.sort_by_key(|r| (r[0].parse::<i64>().unwrap(), r[1].parse::<i64>().unwrap()));
    assert_eq!(got, want);
    // and their sums are the operators' values
    let sums = rows(
        &ctx,
        "SELECT t.node_id, sum(t.output_rows), max(o.output_rows) \
         FROM qprof.operator_tasks t JOIN qprof.operators o USING (app_id, query_id, node_id) \
         GROUP BY t.node_id ORDER BY 1",
    )
    .await;
    assert_eq!(sums.len(), 3);
    for row in &sums {
        assert_eq!(row[1], row[2], "{row:?}");
    }
}
