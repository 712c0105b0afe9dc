//! Comparing two runs of a query, operator by operator: operators are matched by their
//! stable ids, and where the plans differ by their text (an operator that moved) or by
//! their place in the plan (pre-order position and name); each pair gets the change in
//! self CPU, rows, peak memory and spill.

use qprof_core::format;
use qprof_core::profile::names;

use crate::profile_json::{NodeJson, QueryJson};

/// How an operator of the second run was matched to the first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Matched {
    /// Same stable id: the same operator.
    Same,
    /// Same name and operator text at another place (the plan around it changed).
    Moved,
    /// Same place and name, different text (the plan changed).
    ByShape,
    /// Not in the first run.
    New,
}

impl Matched {
    /// The kind's name in JSON: `same`, `moved`, `shape` or `new`.
    pub fn as_str(self) -> &'static str {
        match self {
            Matched::Same => "same",
            Matched::Moved => "moved",
            Matched::ByShape => "shape",
            Matched::New => "new",
        }
    }
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
    /// Its twin's pre-order id in the first run, if matched.
    pub before_id: Option<usize>,
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

/// The regression threshold when none is given: self CPU grown by more than 10 %.
pub const DEFAULT_REGRESSION_THRESHOLD_PERCENT: f64 = 10.0;

/// Self CPU growth below this (ns) is noise, whatever its ratio.
const MIN_REGRESSION_NANOS: i64 = 1_000_000;

/// Change of `to` over `from`, percent (`None` from zero).
pub(crate) fn change_percent(from: i64, to: i64) -> Option<f64> {
    (from > 0).then(|| (to - from) as f64 * 100.0 / from as f64)
}

fn metric(node: &NodeJson, name: &str) -> i64 {
    node.metrics.get(name).map_or(0, |m| m.value)
}

/// Whether an operator of the first run (left) is the twin of one of the second (right).
type Twins = dyn Fn(&NodeJson, &NodeJson) -> bool;

/// Compares `before` and `after`, flagging operators whose self CPU grew by more than
/// `threshold_percent`.
///
/// Operators are paired in three passes, each over what the previous left: by stable id;
/// by name and operator text (an operator that moved, e.g. under an added repartition);
/// by pre-order place and name (an operator whose text changed).
pub fn diff_queries(before: &QueryJson, after: &QueryJson, threshold_percent: f64) -> QueryDiff {
    let old: Vec<&NodeJson> = before.plan.iter().collect();
    let new: Vec<&NodeJson> = after.plan.iter().collect();
    let mut twins: Vec<Option<(Matched, usize)>> = vec![None; new.len()];
    let mut used = vec![false; old.len()];
    let passes: [(Matched, &Twins); 3] = [
        (Matched::Same, &|o, n| {
            o.stable_id.is_some() && o.stable_id == n.stable_id
        }),
        (Matched::Moved, &|o, n| {
            o.name == n.name && o.display == n.display
        }),
        (Matched::ByShape, &|o, n| o.name == n.name && o.id == n.id),
    ];
    for (matched, same) in passes {
        for (slot, node) in twins.iter_mut().zip(&new) {
            if slot.is_some() {
                continue;
            }
            if let Some(i) = (0..old.len()).find(|&i| !used[i] && same(old[i], node)) {
                used[i] = true;
                *slot = Some((matched, i));
            }
        }
    }
    let operators = new
        .iter()
        .zip(&twins)
        .map(|(node, twin)| {
            let (matched, twin) = match twin {
                Some((matched, i)) => (*matched, Some(old[*i])),
                None => (Matched::New, None),
            };
            let pair = |name: &str| (twin.map_or(0, |t| metric(t, name)), metric(node, name));
            let self_cpu = pair(names::SELF_CPU_NANOS);
            let regressed = twin.is_some()
                && self_cpu.1 - self_cpu.0 >= MIN_REGRESSION_NANOS
                && change_percent(self_cpu.0, self_cpu.1).is_none_or(|p| p > threshold_percent);
            OperatorChange {
                id: node.id,
                name: node.name.clone(),
                matched,
                before_id: twin.map(|t| t.id),
                self_cpu,
                rows: pair(names::OUTPUT_ROWS),
                peak_memory: pair(names::PEAK_MEMORY_BYTES),
                spilled: pair(names::SPILL_WRITTEN_BYTES),
                regressed,
            }
        })
        .collect();
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

    /// The comparison as JSON (the web UI's compare page): per operator its ids in both
    /// runs, how it was matched, and each measure as `[before, after]`.
    pub fn to_json(&self) -> serde_json::Value {
        let operators: Vec<serde_json::Value> = self
            .operators
            .iter()
            .map(|o| {
                serde_json::json!({
                    "id": o.id,
                    "beforeId": o.before_id,
                    "name": o.name,
                    "matched": o.matched.as_str(),
                    "regressed": o.regressed,
                    (names::SELF_CPU_NANOS): [o.self_cpu.0, o.self_cpu.1],
                    "selfCpuChangePercent": change_percent(o.self_cpu.0, o.self_cpu.1),
                    (names::OUTPUT_ROWS): [o.rows.0, o.rows.1],
                    (names::PEAK_MEMORY_BYTES): [o.peak_memory.0, o.peak_memory.1],
                    (names::SPILL_WRITTEN_BYTES): [o.spilled.0, o.spilled.1],
                })
            })
            .collect();
        let gone: Vec<serde_json::Value> = self
            .gone
            .iter()
            .map(|(id, name)| serde_json::json!({ "id": id, "name": name }))
            .collect();
        serde_json::json!({
            "id": self.id,
            "durationNanos": [self.duration.0, self.duration.1],
            "regressed": self.regressed(),
            "operators": operators,
            "gone": gone,
        })
    }

    /// The comparison as text: a header with both wall times, then a line per operator
    /// (`!` marks a regression, `>` an operator found at another place, `~` one matched
    /// by its place, `+` a new one).
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
                (false, Matched::Moved) => '>',
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
        let d = diff_queries(&q, &q, 10.0);
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
        let d = diff_queries(&before, &after, 10.0);
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
        assert!(!diff_queries(&before, &after, 250.0).regressed());
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
        let d = diff_queries(&before, &after, 10.0);
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

    #[test]
    fn an_operator_below_an_inserted_one_is_found_at_its_new_place() {
        let before = QueryJson::from(&sample());
        // a repartition put between the filter and the scan: the scan's place and stable
        // id change, its text does not
        let mut after = before.clone();
        let mut scan = after.plan.children[0].children.remove(0);
        scan.id = 3;
        scan.stable_id = Some("ffffffffffffffff".into());
        let mut repartition = scan.clone();
        repartition.id = 2;
        repartition.name = "RepartitionExec".into();
        repartition.display = "RepartitionExec: partitioning=RoundRobinBatch(2)".into();
        repartition.stable_id = Some("eeeeeeeeeeeeeeee".into());
        repartition.children = vec![scan];
        after.plan.children[0].children.push(repartition);
        let d = diff_queries(&before, &after, 10.0);
        let matched: Vec<(usize, Option<usize>, Matched)> = d
            .operators
            .iter()
            .map(|o| (o.id, o.before_id, o.matched))
            .collect();
        assert_eq!(
            matched,
            [
                (0, Some(0), Matched::Same),
                (1, Some(1), Matched::Same),
                (2, None, Matched::New),
                (3, Some(2), Matched::Moved),
            ]
        );
        assert!(d.gone.is_empty());
        assert!(d.render_text().contains("> #3 DataSourceExec"));
        let json = d.to_json();
        assert_eq!(json["operators"][3]["matched"], "moved");
        assert_eq!(json["operators"][3]["beforeId"], 2);
        assert_eq!(json["operators"][2]["beforeId"], serde_json::Value::Null);
    }
}
