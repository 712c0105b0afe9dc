//! `qprof.findings`: one row per advisor finding, from qprof's profiles.

use std::collections::HashMap;
use std::sync::{Arc, LazyLock};

use qprof_eventlog::{FindingJson, NodeJson};

use super::{AppKey, RowSource, RowTable, app_columns};
use crate::columns::{Column, int, int_map, text, time};

/// A finding's row.
#[derive(Debug)]
pub(crate) struct FindingRow {
    app: Arc<AppKey>,
    query_id: i64,
    submission_time: i64,
    stable_id: Option<String>,
    finding: FindingJson,
}

of_app!(FindingRow);

static COLUMNS: LazyLock<Vec<Column<FindingRow>>> = LazyLock::new(|| {
    let mut columns = app_columns();
    columns.extend([
        int("query_id", |f: &FindingRow| Some(f.query_id)).about("The query it is about.", None),
        time("submission_time", |f: &FindingRow| Some(f.submission_time))
            .about("When its query was submitted.", None),
        int("rank", |f: &FindingRow| f.finding.rank.map(|r| r as i64)).about(
            "A warning's place in the query's ranking, from 1, by share of cost; null for a minor finding.",
            None,
        ),
        text("rule", |f: &FindingRow| Some(f.finding.rule.as_str()))
            .about("The advisor's rule, e.g. skewed-tasks.", None),
        text("severity", |f: &FindingRow| {
            Some(f.finding.severity.as_str())
        })
        .about("warn for a material cost, info otherwise.", None),
        text("cost_kind", |f: &FindingRow| {
            f.finding.cost.as_ref().map(|c| c.kind.as_str())
        })
        .about(
            "What the cost is counted in: wall, cpu, taskTime (ns) or memory (bytes).",
            None,
        ),
        int("cost", |f: &FindingRow| {
            f.finding.cost.as_ref().map(|c| i64::try_from(c.amount).unwrap_or(i64::MAX))
        })
        .about("What it cost the query, in ns or bytes (cost_kind).", None),
        int("cost_share_permille", |f: &FindingRow| {
            f.finding.cost.as_ref().map(|c| i64::try_from(c.share_permille).unwrap_or(i64::MAX))
        })
        .about(
            "The cost as thousandths of the query's whole of its kind (duration, operator CPU, tasks' time, memory limit).",
            None,
        ),
        int("node_id", |f: &FindingRow| {
            f.finding.node_id.map(|n| n as i64)
        })
        .about("The operator it is about, if one.", None),
        text("stable_id", |f: &FindingRow| f.stable_id.as_deref())
            .about("That operator's stable id.", None),
        int("stage_id", |f: &FindingRow| {
            f.finding.stage_id.map(i64::from)
        })
        .about("The stage it is about, if one.", None),
        text("message", |f: &FindingRow| Some(f.finding.message.as_str()))
            .about("What happened, with its evidence, in one sentence.", None),
        text("action", |f: &FindingRow| {
            Some(f.finding.action.as_str()).filter(|a| !a.is_empty())
        })
        .about("What would fix it.", None),
        int_map("numbers", |f: &FindingRow, add| {
            for (name, value) in &f.finding.numbers.0 {
                add(name, *value);
            }
        })
        .about("The numbers behind it, by name.", None),
    ]);
    columns
});

/// `qprof.findings`.
pub(crate) static TABLE: RowTable<FindingRow> = RowTable {
    name: "findings",
    about: "One row per finding of the advisor (qprof's profiles).",
    needs_replay: true,
    columns: &COLUMNS,
    rows,
};

/// An application's rows.
fn rows(source: &RowSource<'_>) -> Vec<FindingRow> {
    let app = &source.app;
    let selection = source.selection;
    let key = Arc::clone(&source.key);
    let mut rows = Vec::new();
    for (execution, profile) in app.profiles(selection) {
        let stable_ids = stable_ids(&profile.plan);
        for finding in profile.findings {
            rows.push(FindingRow {
                app: Arc::clone(&key),
                query_id: execution.id,
                submission_time: execution.submission_time,
                stable_id: finding
                    .node_id
                    .and_then(|n| stable_ids.get(&n).cloned().flatten()),
                finding,
            });
        }
    }
    rows
}

/// Each operator's stable id, by node id.
pub(crate) fn stable_ids(plan: &NodeJson) -> HashMap<usize, Option<String>> {
    let mut out = HashMap::new();
    let mut stack = vec![plan];
    while let Some(node) = stack.pop() {
        out.insert(node.id, node.stable_id.clone());
        stack.extend(&node.children);
    }
    out
}
