//! What an executor ships, a run's readings packed unnamed, names on the scheduler the same
//! metrics and function calls the profile of the same run names where it ran.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use datafusion::arrow::array::{Int64Array, RecordBatch};
use datafusion::arrow::datatypes::{DataType, Field, Schema};
use datafusion::execution::runtime_env::RuntimeEnv;
use datafusion::execution::{SessionStateBuilder, TaskContext};
use datafusion::physical_plan::metrics::{Metric, MetricsSet};
use datafusion::physical_plan::{ExecutionPlan, collect};
use datafusion::prelude::{ParquetReadOptions, SessionConfig, SessionContext};
use qprof_ballista::wire::{Packer, decode};
use qprof_core::metric::TaskRef;
use qprof_core::profile::{NodeMetric, OperatorText, ProfileNode, names};
use qprof_datafusion::{
    PlanReadings, PlanSites, ProfiledExec, Profiler, add_join_projection_metrics, attach_sites,
    claim_sites, join_shape, operator_metrics, plan_timed_calls,
};

/// `rows` rows in 2 Parquet files: `k` cycles through 0..`keys`, `v` is the row number.
async fn write_table(dir: &std::path::Path, name: &str, rows: i64, keys: i64) -> String {
    let schema = Arc::new(Schema::new(vec![
        Field::new("k", DataType::Int64, false),
        Field::new("v", DataType::Int64, false),
    ]));
    let ctx = SessionContext::new();
    let table = dir.join(name);
    std::fs::create_dir_all(&table).unwrap();
    for file in 0..2_i64 {
        let v: Vec<i64> = (file * rows / 2..(file + 1) * rows / 2).collect();
        let k: Vec<i64> = v.iter().map(|v| v % keys).collect();
        let batch = RecordBatch::try_new(
            Arc::clone(&schema),
            vec![Arc::new(Int64Array::from(k)), Arc::new(Int64Array::from(v))],
        )
        .unwrap();
        ctx.read_batch(batch)
            .unwrap()
            .write_parquet(
                table.join(format!("part-{file}.parquet")).to_str().unwrap(),
                datafusion::dataframe::DataFrameWriteOptions::new(),
                None,
            )
            .await
            .unwrap();
    }
    table.to_str().unwrap().to_string()
}

/// A metric as compared: name, display name, kind, value and its values by partition (in
/// order: metrics keep their order, the values of each are sorted).
type Seen = (String, String, String, i64, Vec<(Option<u32>, i64)>);

fn seen(metrics: &[NodeMetric]) -> Vec<Seen> {
    metrics
        .iter()
        .map(|m| {
            let mut values: Vec<_> = m
                .tasks
                .iter()
                .map(|v| (v.task.map(|t| t.partition), v.value))
                .collect();
            values.sort_unstable();
            (
                m.name.to_string(),
                m.display_name.to_string(),
                m.kind.as_str().to_string(),
                m.value,
                values,
            )
        })
        .collect()
}

/// The tree the scheduler's side names from what `readings` packs, node for node with
/// `plan`: each wrapped operator's reading packed, tagged with its partitions as Ballista
/// tags them (here the same), decoded and named.
fn named_from_the_wire(plan: &Arc<dyn ExecutionPlan>, readings: &PlanReadings) -> ProfileNode {
    let exec = ProfiledExec::of(plan.as_ref()).expect("every operator is wrapped");
    let node = &readings.operators[&exec.node_id()];
    let mut packer = Packer::new();
    packer.reading(&node.reading);
    packer.operator(&node.filter_metrics);
    packer.functions(&node.functions);
    let mut set = MetricsSet::new();
    for metric in packer.finish() {
        set.push(Arc::new(Metric::new(
            metric.value().clone(),
            metric.partition(),
        )));
    }
    let decoded = decode(&set);
    let task_of = |p: usize| {
        Some(TaskRef {
            stage_id: 0,
            stage_attempt: 0,
            task_id: p as u64,
            partition: p as u32,
        })
    };
    let mut metrics =
        operator_metrics(plan.as_ref(), &decoded.reading, Vec::new(), &task_of).metrics;
    metrics.extend(decoded.operator.iter().map(|values| {
        NodeMetric::summed(
            values.name.clone(),
            values.display_name.clone(),
            values.kind,
            values
                .values
                .iter()
                .map(|&(p, v)| qprof_core::metric::TaskValue {
                    task: p.and_then(task_of),
                    value: v as i64,
                })
                .collect(),
        )
    }));
    ProfileNode {
        id: exec.node_id(),
        name: plan.name().to_string(),
        display: OperatorText::default(),
        stage_id: None,
        metrics,
        info: Vec::new(),
        functions: decoded.functions.iter().map(|f| f.profile()).collect(),
        task_spans: Vec::new(),
        estimate: None,
        children: plan
            .children()
            .into_iter()
            .map(|c| named_from_the_wire(c, readings))
            .collect(),
    }
}

fn joins_of(plan: &Arc<dyn ExecutionPlan>, out: &mut Vec<(usize, qprof_datafusion::JoinShape)>) {
    if let Some(exec) = ProfiledExec::of(plan.as_ref())
        && let Some(shape) = join_shape(exec.inner().as_ref())
    {
        out.push((exec.node_id(), shape));
    }
    for child in plan.children() {
        joins_of(child, out);
    }
}

fn flatten<'a>(node: &'a ProfileNode, out: &mut BTreeMap<usize, &'a ProfileNode>) {
    out.insert(node.id, node);
    for child in &node.children {
        flatten(child, out);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn packed_readings_name_what_the_local_profile_of_the_run_names() {
    let dir = std::env::temp_dir().join(format!("qprof-readings-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let facts = write_table(&dir, "facts", 20_000, 50).await;
    let keys = write_table(&dir, "keys", 100, 25).await;

    let profiler = Profiler::new();
    let runtime = profiler.instrument_runtime(Arc::new(RuntimeEnv::default()));
    // function calls planned timed, as qprof's scheduler plans them
    let state = SessionStateBuilder::new()
        .with_config(SessionConfig::new().with_target_partitions(2))
        .with_runtime_env(runtime)
        .with_default_features();
    let ctx = SessionContext::new_with_state(plan_timed_calls(state).build());
    ctx.register_parquet("facts", &facts, ParquetReadOptions::default())
        .await
        .unwrap();
    ctx.register_parquet("keys", &keys, ParquetReadOptions::default())
        .await
        .unwrap();
    let sql = "SELECT f.k, sum(abs(f.v - k.v)) AS s \
               FROM (SELECT k, v * 2 AS v FROM facts WHERE v % 3 <> 0) f \
               JOIN keys k ON f.k = k.k GROUP BY f.k ORDER BY f.k";
    let plan = ctx
        .sql(sql)
        .await
        .unwrap()
        .create_physical_plan()
        .await
        .unwrap();
    let PlanSites::Claimed(sites) = claim_sites(&plan) else {
        panic!("the plan's calls are not timed");
    };
    let planned = plan;
    let plan = profiler.instrument_plan(Arc::clone(&planned)).unwrap();
    attach_sites(&planned, &plan, sites);
    let task = Arc::new(TaskContext::from(&ctx.state()));
    let batches = collect(Arc::clone(&plan), task).await.unwrap();
    let rows: usize = batches.iter().map(RecordBatch::num_rows).sum();
    assert_eq!(rows, 25);

    let readings = profiler.plan_readings(&plan);
    let local = profiler.plan_profile(&plan, rows as u64, Duration::ZERO, 0);
    let mut wire = named_from_the_wire(&plan, &readings);
    let mut joins = Vec::new();
    joins_of(&plan, &mut joins);
    assert!(!joins.is_empty(), "the plan has no join");
    add_join_projection_metrics(&mut wire, &joins);

    let (mut local_nodes, mut wire_nodes) = (BTreeMap::new(), BTreeMap::new());
    flatten(&local.plan, &mut local_nodes);
    flatten(&wire, &mut wire_nodes);
    assert_eq!(
        local_nodes.keys().collect::<Vec<_>>(),
        wire_nodes.keys().collect::<Vec<_>>()
    );
    for (id, local) in &local_nodes {
        let wire = wire_nodes[id];
        assert_eq!(
            seen(&local.metrics),
            seen(&wire.metrics),
            "{} (node {id})",
            local.name
        );
        assert_eq!(
            local.functions, wire.functions,
            "{} (node {id})",
            local.name
        );
    }
    // the run exercised what the records carry beyond a task's counters: storage reads,
    // a join's phases, function calls
    let all: Vec<&NodeMetric> = wire_nodes.values().flat_map(|n| &n.metrics).collect();
    let bytes_read: i64 = all
        .iter()
        .filter(|m| m.name == names::READ_BYTES)
        .map(|m| m.value)
        .sum();
    let on_disk: u64 = walk_files(&dir);
    assert!(
        bytes_read > 0 && bytes_read as u64 <= on_disk,
        "{bytes_read} of {on_disk}"
    );
    assert!(
        all.iter()
            .any(|m| m.name == "hashBuildInputRows" && m.value == 100)
    );
    assert!(
        wire_nodes
            .values()
            .any(|n| n.functions.iter().any(|f| f.name == "abs"))
    );
    let _ = std::fs::remove_dir_all(&dir);
}

fn walk_files(dir: &std::path::Path) -> u64 {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            let meta = e.metadata().unwrap();
            if meta.is_dir() {
                walk_files(&e.path())
            } else {
                meta.len()
            }
        })
        .sum()
}
