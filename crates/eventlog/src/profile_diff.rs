//! Comparing two runs of a query, operator by operator: operators are matched by their
//! stable ids, and by their place in the plan (pre-order position and name) where the
//! plans differ; each pair gets the change in self CPU, rows, peak memory and spill.

use std::collections::HashMap;

use qprof_core::format;
use qprof_core::profile::names;

use crate::profile_json::{NodeJson, QueryJson};

/// How an operator of the second run was matched to the first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Matched {
    /// Same stable id: the same operator.
    Same,
    /// Same place and name, different text (the plan changed).
    ByShape,
    /// Not in the first run.
    New,
}

/// One operator's change between two runs.
#[derive(Debug, Clone, PartialEq)]
pub struct OperatorChange {
    /// Its pre-order id in the second run.
    pub id: usize,
    /// Its name.
    pub name: String,
    /// How it was matched.
    pub matched: Matched,
    /// (first run, second run) of `selfCpuNanos`, `outputRows`, `peakMemoryBytes` and
    /// `spillWrittenBytes`; the first is 0 for a new operator.
    pub self_cpu: (i64, i64),
    /// Rows produced.
    pub rows: (i64, i64),
    /// Peak memory.
    pub peak_memory: (i64, i64),
    /// Bytes spilled.
    pub spilled: (i64, i64),
    /// Whether its self CPU grew by more than the threshold (and by at least 1 ms).
    pub regressed: bool,
}

/// Two runs of one query compared.
#[derive(Debug, Clone, PartialEq)]
pub struct QueryDiff {
    /// The query's id.
    pub id: usize,
    /// Wall time of each run (ns).
    pub duration: (u64, u64),
    /// Operators of the second run, in its plan order.
    pub operators: Vec<OperatorChange>,
    /// Operators of the first run that the second has no match for: (id, name).
    pub gone: Vec<(usize, String)>,
}

/// Self CPU growth below this (ns) is noise, whatever its ratio.
const MIN_REGRESSION_NANOS: i64 = 1_000_000;

/// Change of `to` over `from`, percent (`None` from zero).
pub fn change_percent(from: i64, to: i64) -> Option<f64> {
    (from > 0).then(|| (to - from) as f64 * 100.0 / from as f64)
}

fn metric(node: &NodeJson, name: &str) -> i64 {
    node.metrics.get(name).map_or(0, |m| m.value)
}

/// Compares `before` and `after`, flagging operators whose self CPU grew by more than
/// `threshold_percent`.
pub fn diff(before: &QueryJson, after: &QueryJson, threshold_percent: f64) -> QueryDiff {
    let old: Vec<&NodeJson> = before.plan.iter().collect();
    let by_stable: HashMap<&str, &NodeJson> = old
        .iter()
        .filter_map(|n| n.stable_id.as_deref().map(|id| (id, *n)))
        .collect();
    let mut used = vec![false; old.len()];
    let mut operators = Vec::new();
    for node in after.plan.iter() {
        let same = node
            .stable_id
            .as_deref()
            .and_then(|id| by_stable.get(id).copied());
        let (matched, twin) = match same {
            Some(twin) => (Matched::Same, Some(twin)),
            None => match old.get(node.id).filter(|o| o.name == node.name) {
                Some(twin) => (Matched::ByShape, Some(*twin)),
                None => (Matched::New, None),
            },
        };
        if let Some(twin) = twin
            && let Some(slot) = used.get_mut(twin.id)
        {
            *slot = true;
        }
        let pair = |name: &str| (twin.map_or(0, |t| metric(t, name)), metric(node, name));
        let self_cpu = pair(names::SELF_CPU_NANOS);
        let regressed = twin.is_some()
            && self_cpu.1 - self_cpu.0 >= MIN_REGRESSION_NANOS
            && change_percent(self_cpu.0, self_cpu.1).is_none_or(|p| p > threshold_percent);
        operators.push(OperatorChange {
            id: node.id,
            name: node.name.clone(),
            matched,
            self_cpu,
            rows: pair(names::OUTPUT_ROWS),
            peak_memory: pair(names::PEAK_MEMORY_BYTES),
            spilled: pair(names::SPILL_WRITTEN_BYTES),
            regressed,
        });
    }
    let gone = old
        .iter()
        .zip(&used)
        .filter(|(_, used)| !**used)
        .map(|(n, _)| (n.id, n.name.clone()))
        .collect();
    QueryDiff {
        id: after.id,
        duration: (before.duration_nanos, after.duration_nanos),
        operators,
        gone,
    }
}

fn change(from: i64, to: i64, render: impl Fn(i64) -> String) -> String {
    match change_percent(from, to) {
        _ if from == to => render(to),
        Some(p) => format!("{} → {} ({p:+.0}%)", render(from), render(to)),
        None => format!("{} → {}", render(from), render(to)),
    }
}

impl QueryDiff {
    /// Whether any operator regressed.
    pub fn regressed(&self) -> bool {
        self.operators.iter().any(|o| o.regressed)
    }

    /// The comparison as text: a header with both wall times, then a line per operator
    /// (`!` marks a regression, `~` an operator matched by its place, `+` a new one).
    pub fn render_text(&self) -> String {
        let nanos = |v: i64| format::human_nanos(v.max(0) as u64);
        let mut out = format!(
            "query {}: {}\n",
            self.id,
            change(self.duration.0 as i64, self.duration.1 as i64, nanos)
        );
        for o in &self.operators {
            let mark = match (o.regressed, o.matched) {
                (true, _) => '!',
                (false, Matched::ByShape) => '~',
                (false, Matched::New) => '+',
                (false, Matched::Same) => ' ',
            };
            let mut line = format!(
                "{mark} #{} {}  self cpu {}  rows {}  peak mem {}",
                o.id,
                o.name,
                change(o.self_cpu.0, o.self_cpu.1, nanos),
                change(o.rows.0, o.rows.1, format::integer),
                change(o.peak_memory.0, o.peak_memory.1, format::bytes),
            );
            if o.spilled != (0, 0) {
                line.push_str(&format!(
                    "  spilled {}",
                    change(o.spilled.0, o.spilled.1, format::bytes)
                ));
            }
            out.push_str(&line);
            out.push('\n');
        }
        for (id, name) in &self.gone {
            out.push_str(&format!("- #{id} {name}  (only in the first run)\n"));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile_json::MetricJson;
    use qprof_core::profile::fixtures::sample;

    fn set(q: &mut QueryJson, id: usize, name: &str, value: i64) {
        fn find(n: &mut NodeJson, id: usize) -> Option<&mut NodeJson> {
            if n.id == id {
                return Some(n);
            }
            n.children.iter_mut().find_map(|c| find(c, id))
        }
        let node = find(&mut q.plan, id).unwrap();
        let metric = node.metrics.0.iter_mut().find(|(k, _)| k == name);
        match metric {
            Some((_, m)) => m.value = value,
            None => node.metrics.0.push((
                name.to_string(),
                MetricJson {
                    value,
                    kind: "sum".into(),
                    display_name: name.into(),
                    tasks: None,
                    min: None,
                    median: None,
                    max: None,
                    max_task_id: None,
                    spark: String::new(),
                },
            )),
        }
    }

    #[test]
    fn a_run_against_itself_has_no_regression() {
        let q = QueryJson::from(&sample());
        let d = diff(&q, &q, 10.0);
        assert!(!d.regressed());
        assert_eq!(d.operators.len(), 3);
        assert!(d.operators.iter().all(|o| o.matched == Matched::Same));
        assert!(d.gone.is_empty());
        assert!(d.render_text().lines().skip(1).all(|l| l.starts_with(' ')));
    }

    #[test]
    fn a_slower_operator_is_flagged_and_noise_is_not() {
        let before = QueryJson::from(&sample());
        let mut after = before.clone();
        // the filter: 4 ms to 12 ms; the aggregate: 1.5 ms to 1.9 ms (+27 %, under 1 ms)
        set(&mut after, 1, names::SELF_CPU_NANOS, 12_000_000);
        set(&mut after, 0, names::SELF_CPU_NANOS, 1_900_000);
        let d = diff(&before, &after, 10.0);
        let flagged: Vec<usize> = d
            .operators
            .iter()
            .filter(|o| o.regressed)
            .map(|o| o.id)
            .collect();
        assert_eq!(flagged, [1]);
        let text = d.render_text();
        assert!(
            text.contains("! #1 FilterExec  self cpu 4.00 ms → 12.00 ms (+200%)"),
            "{text}"
        );
        // a higher threshold lets it pass
        assert!(!diff(&before, &after, 250.0).regressed());
    }

    #[test]
    fn a_changed_plan_matches_by_place_and_reports_new_and_gone_operators() {
        let before = QueryJson::from(&sample());
        let mut changed = sample();
        changed.plan.children[0].display = "FilterExec: another predicate".into();
        let mut after = QueryJson::from(&changed);
        // an operator the first run did not have
        after.plan.children[0].children[0].name = "MemoryExec".into();
        after.plan.children[0].children[0].stable_id = Some("0000000000000000".into());
        let d = diff(&before, &after, 10.0);
        let matched: Vec<Matched> = d.operators.iter().map(|o| o.matched).collect();
        assert_eq!(matched, [Matched::Same, Matched::ByShape, Matched::New]);
        assert_eq!(d.gone, [(2, "DataSourceExec".to_string())]);
        let text = d.render_text();
        assert!(text.contains("~ #1 FilterExec"), "{text}");
        assert!(text.contains("+ #2 MemoryExec"), "{text}");
        assert!(
            text.contains("- #2 DataSourceExec  (only in the first run)"),
            "{text}"
        );
    }
}
