//! `qprof.functions`: one row per function call site of an operator, with its measured
//! CPU, from qprof's profiles.

use std::sync::{Arc, LazyLock};

use qprof_eventlog::{FunctionJson, NodeJson};

use super::{AppKey, RowSource, RowTable, app_columns};
use crate::columns::{Column, boolean, int, saturating, text, time};

/// A call site's row.
#[derive(Debug)]
pub(crate) struct FunctionRow {
    app: Arc<AppKey>,
    query_id: i64,
    submission_time: i64,
    node_id: i64,
    stable_id: Option<String>,
    operator: String,
    function: FunctionJson,
}

of_app!(FunctionRow);

static COLUMNS: LazyLock<Vec<Column<FunctionRow>>> = LazyLock::new(|| {
    let mut columns = app_columns();
    columns.extend([
        int("query_id", |f: &FunctionRow| Some(f.query_id)).about("Its query.", None),
        time("submission_time", |f: &FunctionRow| Some(f.submission_time))
            .about("When its query was submitted.", None),
        int("node_id", |f: &FunctionRow| Some(f.node_id))
            .about("The operator that calls it.", None),
        text("stable_id", |f: &FunctionRow| f.stable_id.as_deref())
            .about("That operator's stable id.", None),
        text("operator", |f: &FunctionRow| Some(f.operator.as_str()))
            .about("That operator's type.", None),
        text("function", |f: &FunctionRow| Some(f.function.name.as_str()))
            .about("The function, e.g. upper.", None),
        text("expression", |f: &FunctionRow| {
            Some(f.function.expression.as_str())
        })
        .about("The call as the plan writes it.", None),
        int("vectors", |f: &FunctionRow| {
            Some(saturating(f.function.vectors))
        })
        .about("The batches it was called on.", Some("batches")),
        int("rows", |f: &FunctionRow| Some(saturating(f.function.rows)))
            .about("The rows it was called on.", Some("rows")),
        int("cpu_timed_vectors", |f: &FunctionRow| {
            Some(saturating(f.function.cpu_timed_vectors))
        })
        .about("The batches timed with the CPU clock.", Some("batches")),
        int("cpu_nanos", |f: &FunctionRow| {
            Some(saturating(f.function.cpu_nanos))
        })
        .about(
            "Its CPU time (extrapolated from the timed batches when sampled).",
            Some("ns"),
        ),
        int("wall_nanos", |f: &FunctionRow| {
            Some(saturating(f.function.wall_nanos))
        })
        .about("Its wall time.", Some("ns")),
        boolean("cpu_extrapolated", |f: &FunctionRow| {
            Some(f.function.cpu_extrapolated)
        })
        .about("Whether cpu_nanos is extrapolated from a sample.", None),
        boolean("wall_extrapolated", |f: &FunctionRow| {
            Some(f.function.wall_extrapolated)
        })
        .about("Whether wall_nanos is extrapolated from a sample.", None),
        text("mode", |f: &FunctionRow| Some(f.function.mode.as_str()))
            .about("How it was timed: full, sampled 1/N or wall only.", None),
        int("recalibrations", |f: &FunctionRow| {
            Some(i64::from(f.function.recalibrations))
        })
        .about(
            "Times the sampler re-calibrated after its cost drifted.",
            Some("count"),
        ),
    ]);
    columns
});

/// `qprof.functions`.
pub(crate) static TABLE: RowTable<FunctionRow> = RowTable {
    name: "functions",
    about: "One row per function call site of an operator, with its measured CPU (qprof's profiles).",
    needs_replay: true,
    columns: &COLUMNS,
    rows,
};

/// An application's rows.
fn rows(source: &RowSource<'_>) -> Vec<FunctionRow> {
    let app = &source.app;
    let selection = source.selection;
    let key = Arc::clone(&source.key);
    let mut rows = Vec::new();
    for (execution, profile) in app.profiles(selection) {
        let mut stack: Vec<NodeJson> = vec![profile.plan];
        while let Some(mut node) = stack.pop() {
            for function in std::mem::take(&mut node.functions) {
                rows.push(FunctionRow {
                    app: Arc::clone(&key),
                    query_id: execution.id,
                    submission_time: execution.submission_time,
                    node_id: node.id as i64,
                    stable_id: node.stable_id.clone(),
                    operator: node.name.clone(),
                    function,
                });
            }
            stack.extend(std::mem::take(&mut node.children).into_iter().rev());
        }
    }
    rows
}
