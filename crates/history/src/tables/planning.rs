//! `qprof.planning`: how each query's planning spent its time, one row per phase and one
//! per optimizer rule, from qprof's profiles.

use std::sync::{Arc, LazyLock};

use super::{AppKey, RowSource, RowTable, app_columns};
use crate::columns::{Column, boolean, int, saturating, text, time};

/// A phase's or a rule's row.
#[derive(Debug)]
pub(crate) struct PlanningRow {
    app: Arc<AppKey>,
    query_id: i64,
    submission_time: i64,
    phase: String,
    rule: Option<String>,
    start_nanos: u64,
    end_nanos: u64,
    wall_nanos: u64,
    cpu_nanos: Option<u64>,
    calls: Option<u64>,
    changed: Option<bool>,
}

of_app!(PlanningRow);

static COLUMNS: LazyLock<Vec<Column<PlanningRow>>> = LazyLock::new(|| {
    let mut columns = app_columns();
    columns.extend([
        int("query_id", |p: &PlanningRow| Some(p.query_id)).about("Its query.", None),
        time("submission_time", |p: &PlanningRow| Some(p.submission_time))
            .about("When its query was submitted.", None),
        text("phase", |p: &PlanningRow| Some(p.phase.as_str())).about(
            "The planning phase (e.g. parse, logical optimization, physical optimization).",
            None,
        ),
        text("rule", |p: &PlanningRow| p.rule.as_deref())
            .about("The optimizer rule; null on a phase's row.", None),
        int("start_nanos", |p: &PlanningRow| {
            Some(saturating(p.start_nanos))
        })
        .about(
            "When it started (a rule: its first call), from the start of planning.",
            Some("ns"),
        ),
        int("end_nanos", |p: &PlanningRow| Some(saturating(p.end_nanos))).about(
            "When it ended (a rule: its last call), from the start of planning.",
            Some("ns"),
        ),
        int("wall_nanos", |p: &PlanningRow| {
            Some(saturating(p.wall_nanos))
        })
        .about("Its wall time (a rule: over all its calls).", Some("ns")),
        int("cpu_nanos", |p: &PlanningRow| p.cpu_nanos.map(saturating))
            .about("A phase's CPU time; null on a rule's row.", Some("ns")),
        int("calls", |p: &PlanningRow| p.calls.map(saturating))
            .about("A rule's calls; null on a phase's row.", Some("count")),
        boolean("changed", |p: &PlanningRow| p.changed).about(
            "Whether a rule changed the plan; null on a phase's row.",
            None,
        ),
    ]);
    columns
});

/// `qprof.planning`.
pub(crate) static TABLE: RowTable<PlanningRow> = RowTable {
    name: "planning",
    about: "One row per planning phase and one per optimizer rule of each query (qprof's profiles of planning).",
    needs_replay: true,
    columns: &COLUMNS,
    rows,
};

/// An application's rows.
fn rows(source: &RowSource<'_>) -> Vec<PlanningRow> {
    let app = &source.app;
    let selection = source.selection;
    let key = Arc::clone(&source.key);
    let mut rows = Vec::new();
    for (execution, profile) in app.profiles(selection) {
        let Some(planning) = profile.planning else {
            continue;
        };
        let row = |phase: String| PlanningRow {
            app: Arc::clone(&key),
            query_id: execution.id,
            submission_time: execution.submission_time,
            phase,
            rule: None,
            start_nanos: 0,
            end_nanos: 0,
            wall_nanos: 0,
            cpu_nanos: None,
            calls: None,
            changed: None,
        };
        for phase in planning.phases {
            rows.push(PlanningRow {
                start_nanos: phase.start_nanos,
                end_nanos: phase.end_nanos,
                wall_nanos: phase.wall_nanos,
                cpu_nanos: Some(phase.cpu_nanos),
                ..row(phase.phase)
            });
        }
        for rule in planning.rules {
            rows.push(PlanningRow {
                rule: Some(rule.name),
                start_nanos: rule.first_start_nanos,
                end_nanos: rule.last_end_nanos,
                wall_nanos: rule.wall_nanos,
                calls: Some(rule.calls),
                changed: Some(rule.changed),
                ..row(rule.phase)
            });
        }
    }
    rows
}
