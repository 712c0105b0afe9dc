//! `qprof.operator_tasks`: one row per operator per task that reported its metrics (and
//! one without a task for values recorded outside any), with the same metric columns as
//! `qprof.operators`: an operator's spread across its tasks.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, LazyLock};

use qprof_core::metric::TaskValue;
use qprof_eventlog::{Execution, NodeJson, QueryJson, rest};

use super::operators::{OperatorMetrics, metric_value_columns, spark_metric};
use super::{AppKey, RowSource, RowTable, app_columns};
use crate::columns::{Column, int, text, time};

/// One operator's metrics in one task.
#[derive(Debug)]
pub(crate) struct OperatorTaskRow {
    app: Arc<AppKey>,
    query_id: i64,
    submission_time: i64,
    node_id: i64,
    operator: Arc<Operator>,
    task: Option<TaskKey>,
    metrics: Vec<(String, i64)>,
}

/// A task's stage, stage attempt, id and partition.
type TaskKey = [i64; 4];

/// An operator's node id and the task that reported its values (none: no task).
type OperatorInTask = (i64, Option<TaskKey>);

/// What every task's row of one operator shares.
#[derive(Debug)]
struct Operator {
    stable_id: Option<String>,
    name: String,
}

of_app!(OperatorTaskRow);

impl OperatorMetrics for OperatorTaskRow {
    fn metrics(&self) -> &[(String, i64)] {
        &self.metrics
    }
}

static COLUMNS: LazyLock<Vec<Column<OperatorTaskRow>>> = LazyLock::new(|| {
    let mut columns = app_columns();
    columns.extend([
        int("query_id", |o: &OperatorTaskRow| Some(o.query_id)).about("Its query.", None),
        time("submission_time", |o: &OperatorTaskRow| {
            Some(o.submission_time)
        })
        .about("When its query was submitted.", None),
        int("node_id", |o: &OperatorTaskRow| Some(o.node_id)).about(
            "The operator's id in its plan, as in qprof.operators.",
            None,
        ),
        text("stable_id", |o: &OperatorTaskRow| {
            o.operator.stable_id.as_deref()
        })
        .about("Its stable id (qprof's profile).", None),
        text("name", |o: &OperatorTaskRow| Some(o.operator.name.as_str()))
            .about("The operator's type.", None),
        int("stage_id", |o: &OperatorTaskRow| o.task.map(|t| t[0])).about(
            "The task's stage; null for values recorded outside any task.",
            None,
        ),
        int("stage_attempt", |o: &OperatorTaskRow| o.task.map(|t| t[1]))
            .about("The task's stage attempt.", None),
        int("task_id", |o: &OperatorTaskRow| o.task.map(|t| t[2]))
            .about("The task, unique in its application.", None),
        int("partition", |o: &OperatorTaskRow| o.task.map(|t| t[3]))
            .about("The partition the task computed.", None),
    ]);
    columns.extend(metric_value_columns());
    columns
});

/// `qprof.operator_tasks`.
pub(crate) static TABLE: RowTable<OperatorTaskRow> = RowTable {
    name: "operator_tasks",
    about: "One row per operator per task that reported its metrics (and one without a task for values recorded outside any): an operator's spread across its tasks.",
    needs_replay: true,
    columns: &COLUMNS,
    rows,
};

/// An application's rows.
fn rows(source: &RowSource<'_>) -> Vec<OperatorTaskRow> {
    let app = &source.app;
    let selection = source.selection;
    let key = Arc::clone(&source.key);
    let mut rows = Vec::new();
    if let Some(state) = app.state() {
        for execution in app.executions(selection) {
            let found = match execution.qprof_profile_without_stacks() {
                Some(Ok(profile)) => profiled(&profile),
                Some(Err(_)) | None => spark_plan(execution),
            };
            let values = execution.task_metric_values(state);
            rows.extend(by_task(found, &values, execution, &key));
        }
    }
    rows
}

/// Where an operator's metrics are: each metric's accumulator and how a value of it
/// becomes a row's (name, value).
struct Accumulators {
    operators: BTreeMap<i64, Arc<Operator>>,
    /// By accumulator id: the operator's node id and how to name a value.
    metrics: HashMap<i64, (i64, Naming)>,
}

enum Naming {
    /// qprof's catalog name, values in its unit.
    Named(String),
    /// Spark's display name and metric type.
    Spark(Box<str>, Option<Arc<str>>),
}

fn profiled(profile: &QueryJson) -> Accumulators {
    let mut operators = BTreeMap::new();
    let mut stack: Vec<&NodeJson> = vec![&profile.plan];
    while let Some(node) = stack.pop() {
        operators.insert(
            node.id as i64,
            Arc::new(Operator {
                stable_id: node.stable_id.clone(),
                name: node.name.clone(),
            }),
        );
        stack.extend(&node.children);
    }
    let mut metrics = HashMap::new();
    for (node, per_metric) in profile.accumulator_ids.iter().flat_map(|a| &a.0) {
        let Ok(node) = node.parse::<i64>() else {
            continue;
        };
        for (name, accumulator) in &per_metric.0 {
            metrics.insert(*accumulator, (node, Naming::Named(name.clone())));
        }
    }
    Accumulators { operators, metrics }
}

fn spark_plan(execution: &Execution) -> Accumulators {
    let mut operators = BTreeMap::new();
    let mut metrics = HashMap::new();
    if let Some(plan) = &execution.plan {
        let (nodes, _) = rest::plan_graph(plan);
        for node in nodes {
            for (display, accumulator) in &node.metrics {
                let kind = execution.metric_types.get(accumulator).cloned();
                metrics.insert(
                    *accumulator,
                    (node.id, Naming::Spark(display.as_str().into(), kind)),
                );
            }
            operators.insert(
                node.id,
                Arc::new(Operator {
                    stable_id: None,
                    name: node.name,
                }),
            );
        }
    }
    Accumulators { operators, metrics }
}

/// The rows of one query: its operators' values grouped by task.
fn by_task(
    found: Accumulators,
    values: &HashMap<i64, Vec<TaskValue>>,
    execution: &Execution,
    key: &Arc<AppKey>,
) -> Vec<OperatorTaskRow> {
    let mut grouped: BTreeMap<OperatorInTask, Vec<(String, i64)>> = BTreeMap::new();
    for (accumulator, (node, naming)) in &found.metrics {
        for value in values.get(accumulator).into_iter().flatten() {
            let task = value.task.map(|t| {
                [
                    i64::from(t.stage_id),
                    i64::from(t.stage_attempt),
                    i64::try_from(t.task_id).unwrap_or(i64::MAX),
                    i64::from(t.partition),
                ]
            });
            let metric = match naming {
                Naming::Named(name) => (name.clone(), value.value),
                Naming::Spark(display, kind) => spark_metric(display, kind.as_deref(), value.value),
            };
            grouped.entry((*node, task)).or_default().push(metric);
        }
    }
    grouped
        .into_iter()
        .filter_map(|((node_id, task), mut metrics)| {
            metrics.sort();
            Some(OperatorTaskRow {
                app: Arc::clone(key),
                query_id: execution.id,
                submission_time: execution.submission_time,
                node_id,
                operator: Arc::clone(found.operators.get(&node_id)?),
                task,
                metrics,
            })
        })
        .collect()
}
