//! `qprof.operators`: one row per operator per query, with every catalog metric as a
//! column: from qprof's profile where the log carries one, else from Spark's plan and its
//! metrics' totals.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, LazyLock};

use qprof_core::catalog::{self, MetricDef, Unit};
use qprof_eventlog::{AppState, Execution, NodeJson, rest};

use super::{AppKey, RowSource, RowTable, app_columns};
use crate::columns::{Column, int, int_map, snake_case, text, time};

/// An operator's row.
#[derive(Debug)]
pub(crate) struct OperatorRow {
    app: Arc<AppKey>,
    query_id: i64,
    submission_time: i64,
    node_id: i64,
    parent_id: Option<i64>,
    stable_id: Option<String>,
    name: String,
    display: String,
    stage_id: Option<i64>,
    source: &'static str,
    /// Its metrics by catalog name (Spark's by their display name when the catalog has
    /// none of that display).
    metrics: Vec<(String, i64)>,
}

impl OperatorMetrics for OperatorRow {
    fn metrics(&self) -> &[(String, i64)] {
        &self.metrics
    }
}

/// A row holding an operator's metrics: by catalog name, or by Spark's display name when
/// the catalog has none of that display.
pub(super) trait OperatorMetrics {
    /// Its metrics and their values.
    fn metrics(&self) -> &[(String, i64)];

    /// The value of metric `name`, if it has one.
    fn metric(&self, name: &str) -> Option<i64> {
        self.metrics()
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| *v)
    }
}

/// A column per catalog metric (but the per-function CPU), then `other_metrics` for the
/// metrics without a column.
pub(super) fn metric_value_columns<R: OperatorMetrics + 'static>() -> Vec<Column<R>> {
    let mut columns = Vec::new();
    for def in metric_columns() {
        let name = def.name;
        columns.push(
            int(&snake_case(name), move |o: &R| o.metric(name))
                .about(def.description, Some(def.unit.as_str()))
                .of_catalog_metric(name),
        );
    }
    let named: HashSet<&'static str> = metric_columns().map(|d| d.name).collect();
    columns.push(
        int_map("other_metrics", move |o: &R, add| {
            for (name, value) in o.metrics() {
                if !named.contains(name.as_str()) {
                    add(name, *value);
                }
            }
        })
        .about(
            "Its metrics without a column of their own (DataFusion's native ones, join phases, Spark's own), by name.",
            None,
        ),
    );
    columns
}

of_app!(OperatorRow);

/// The catalog's metrics that are columns: every one but the numbered per-function CPU
/// (a function's, not an operator's).
fn metric_columns() -> impl Iterator<Item = &'static MetricDef> {
    catalog::ALL
        .iter()
        .copied()
        .filter(|d| d.name != catalog::FUNCTION_CPU_NANOS.name)
}

/// The catalog metric Spark names by its display text (templates without `{op}`).
static BY_SPARK_NAME: LazyLock<HashMap<&'static str, &'static MetricDef>> = LazyLock::new(|| {
    metric_columns()
        .filter(|d| !d.display.contains("{op}"))
        .map(|d| (d.display, d))
        .collect()
});

/// A Spark metric's name and total as an operator row holds them: under the catalog's
/// name in the catalog's unit when it is the catalog's metric (Spark's `timing` metrics
/// count milliseconds, the catalog's nanoseconds), else under Spark's own name; an
/// `average` metric's sum is no total, so it keeps Spark's name.
pub(super) fn spark_metric(display: &str, metric_type: Option<&str>, total: i64) -> (String, i64) {
    match (BY_SPARK_NAME.get(display), metric_type) {
        (Some(_), Some("average")) | (None, _) => (display.to_string(), total),
        (Some(def), Some("timing")) if def.unit == Unit::Nanoseconds => {
            (def.name.to_string(), total.saturating_mul(1_000_000))
        }
        (Some(def), _) => (def.name.to_string(), total),
    }
}

static COLUMNS: LazyLock<Vec<Column<OperatorRow>>> = LazyLock::new(|| {
    let mut columns = app_columns();
    columns.extend([
        int("query_id", |o: &OperatorRow| Some(o.query_id))
            .about("The query's SQL execution id in its application.", None),
        time("submission_time", |o: &OperatorRow| Some(o.submission_time)).about(
            "When its query was submitted (a filter on it prunes applications).",
            None,
        ),
        int("node_id", |o: &OperatorRow| Some(o.node_id)).about(
            "The operator's id in its plan (qprof: pre-order; Spark: its SQL page's node id).",
            None,
        ),
        int("parent_id", |o: &OperatorRow| o.parent_id)
            .about("Its parent's node id; null for the root (and for a Spark plan's whole-stage-codegen clusters, which hold their operators rather than sit above them).", None),
        text("stable_id", |o: &OperatorRow| o.stable_id.as_deref()).about(
            "An id that names the same operator in every run of the same plan (qprof's profile).",
            None,
        ),
        text("name", |o: &OperatorRow| Some(o.name.as_str()))
            .about("The operator's type, e.g. HashJoinExec.", None),
        text("display", |o: &OperatorRow| Some(o.display.as_str()))
            .about("Its one-line description.", None),
        int("stage_id", |o: &OperatorRow| o.stage_id)
            .about("The stage that ran it, when known.", None),
        text("source", |o: &OperatorRow| Some(o.source)).about(
            "Where the row comes from: 'qprof' (a profile) or 'spark' (a plan and its metrics).",
            None,
        ),
    ]);
    columns.extend(metric_value_columns());
    columns
});

/// `qprof.operators`.
pub(crate) static TABLE: RowTable<OperatorRow> = RowTable {
    name: "operators",
    about: "One row per operator of a query's plan: qprof's profile, or Spark's plan and its metrics' totals.",
    needs_replay: true,
    columns: &COLUMNS,
    rows,
};

/// An application's rows.
fn rows(source: &RowSource<'_>) -> Vec<OperatorRow> {
    let app = &source.app;
    let selection = source.selection;
    let key = Arc::clone(&source.key);
    let mut rows = Vec::new();
    if let Some(replay) = app.replay {
        for execution in app.executions(selection) {
            operators_of(replay.state(), execution, &key, &mut rows);
        }
    }
    rows
}

/// The rows of `execution`'s operators: its profile's, or its Spark plan's.
fn operators_of(
    state: &AppState,
    execution: &Execution,
    key: &Arc<AppKey>,
    rows: &mut Vec<OperatorRow>,
) {
    match execution.qprof_profile_without_stacks() {
        Some(Ok(profile)) => {
            profiled(&profile.plan, None, execution, key, rows);
        }
        // a profile this qprof cannot read leaves the plan Spark's part of the log has
        Some(Err(_)) | None => spark_plan(state, execution, key, rows),
    }
}

fn profiled(
    node: &NodeJson,
    parent_id: Option<i64>,
    execution: &Execution,
    key: &Arc<AppKey>,
    rows: &mut Vec<OperatorRow>,
) {
    let node_id = node.id as i64;
    rows.push(OperatorRow {
        app: Arc::clone(key),
        query_id: execution.id,
        submission_time: execution.submission_time,
        node_id,
        parent_id,
        stable_id: node.stable_id.clone(),
        name: node.name.clone(),
        display: node.display.clone(),
        stage_id: node.stage_id.map(i64::from),
        source: "qprof",
        metrics: node
            .metrics
            .0
            .iter()
            .map(|(name, m)| (name.clone(), m.value))
            .collect(),
    });
    for child in &node.children {
        profiled(child, Some(node_id), execution, key, rows);
    }
}

fn spark_plan(
    state: &AppState,
    execution: &Execution,
    key: &Arc<AppKey>,
    rows: &mut Vec<OperatorRow>,
) {
    let Some(plan) = &execution.plan else {
        return;
    };
    let totals = execution.metric_totals(state);
    let (nodes, edges) = rest::plan_graph(plan);
    let parents: HashMap<i64, i64> = edges.iter().rev().copied().collect();
    for node in nodes {
        let metrics = node
            .metrics
            .iter()
            .filter_map(|(display, accumulator)| {
                let total = *totals.get(accumulator)?;
                let metric_type = execution.metric_types.get(accumulator);
                Some(spark_metric(display, metric_type.map(|t| &**t), total))
            })
            .collect();
        rows.push(OperatorRow {
            app: Arc::clone(key),
            query_id: execution.id,
            submission_time: execution.submission_time,
            node_id: node.id,
            parent_id: parents.get(&node.id).copied(),
            stable_id: None,
            name: node.name,
            display: node.desc,
            stage_id: None,
            source: "spark",
            metrics,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spark_metrics_take_the_catalogs_name_and_unit() {
        assert_eq!(
            spark_metric("number of output rows", Some("sum"), 7),
            ("outputRows".to_string(), 7)
        );
        let wait = catalog::SHUFFLE_FETCH_WAIT_NANOS;
        assert!(!wait.display.contains("{op}"), "{}", wait.display);
        assert_eq!(
            spark_metric(wait.display, Some("timing"), 3),
            (wait.name.to_string(), 3_000_000)
        );
        assert_eq!(
            spark_metric(wait.display, Some("nsTiming"), 3),
            (wait.name.to_string(), 3)
        );
        assert_eq!(
            spark_metric("number of output rows", Some("average"), 7),
            ("number of output rows".to_string(), 7)
        );
        assert_eq!(
            spark_metric("time to broadcast", Some("timing"), 10),
            ("time to broadcast".to_string(), 10)
        );
    }
}
