//! DataFusion's own metrics of an operator, read and renamed through the per-operator
//! tables of [`crate::definitions`] (or named by a fallback rule for metrics no table
//! knows), one value per task.

use std::borrow::Cow;
use std::collections::HashMap;
use std::hash::BuildHasher;
use std::mem::Discriminant;
use std::ops::Range;
use std::sync::{Arc, LazyLock, PoisonError, RwLock};

use datafusion::physical_plan::metrics::{Metric, MetricValue};
use qprof_core::catalog;
use qprof_core::metric::{MetricKind, TaskRef, TaskValue};
use qprof_core::profile::{NodeMetric, names};

use crate::definitions::{self, OperatorDef, ReadAs, SUPERSEDED};
use qprof_core::metric::saturating_i64;

/// A native metric's definition, from a table or derived for metrics no table knows.
#[derive(Debug, Clone)]
struct Def {
    name: Cow<'static, str>,
    display: Cow<'static, str>,
    kind: MetricKind,
    read_as: ReadAs,
}

/// The definitions of the metrics one native metric of one operator type becomes, worked
/// out once for the process.
#[derive(Debug)]
struct KnownDefs {
    operator: Box<str>,
    native: Box<str>,
    variant: Discriminant<MetricValue>,
    defs: Arc<[Def]>,
}

/// How many native metrics of operator types [`known_defs`] keeps: operator types and
/// their metrics' names come from code, a few hundred in all; past this it works them out
/// each time.
const KNOWN_DEFS_KEPT: usize = 4096;

/// [`defs_for`] the native metric `value` of operator type `operator`, worked out once
/// for the process (a profile looks up some 15 native names per operator, each through
/// the operator's table and the common one).
fn known_defs(
    operator: &str,
    table: Option<&'static OperatorDef>,
    label: &str,
    value: &MetricValue,
) -> Arc<[Def]> {
    /// By a hash of operator type, native name and variant.
    type Known = HashMap<u64, Vec<KnownDefs>, foldhash::fast::FixedState>;
    static KNOWN: LazyLock<RwLock<(Known, usize)>> = LazyLock::new(RwLock::default);
    let (native, variant) = (value.name(), std::mem::discriminant(value));
    let key = foldhash::fast::FixedState::default().hash_one((operator, native, variant));
    let is =
        |k: &&KnownDefs| &*k.operator == operator && &*k.native == native && k.variant == variant;
    let found = KNOWN
        .read()
        .unwrap_or_else(PoisonError::into_inner)
        .0
        .get(&key)
        .and_then(|ks| ks.iter().find(is).map(|k| Arc::clone(&k.defs)));
    if let Some(defs) = found {
        return defs;
    }
    let defs: Arc<[Def]> = defs_for(table, label, value).into();
    let mut known = KNOWN.write().unwrap_or_else(PoisonError::into_inner);
    let (by_key, kept) = &mut *known;
    if *kept < KNOWN_DEFS_KEPT {
        let same = by_key.entry(key).or_default();
        if !same.iter().any(|k| is(&k)) {
            same.push(KnownDefs {
                operator: operator.into(),
                native: native.into(),
                variant,
                defs: Arc::clone(&defs),
            });
            *kept += 1;
        }
    }
    defs
}

fn defs_for(table: Option<&'static OperatorDef>, label: &str, value: &MetricValue) -> Vec<Def> {
    let native = value.name();
    let known: Vec<Def> = definitions::native_defs_in(table, native)
        .map(|d| Def {
            name: Cow::Borrowed(d.name),
            display: Cow::Borrowed(catalog::display_text(d.display, label)),
            kind: d.kind,
            read_as: d.read_as,
        })
        .collect();
    if !known.is_empty() {
        return known;
    }
    let display = native.replace('_', " ");
    let simple = |kind| {
        vec![Def {
            name: definitions::fallback_name(native, kind).into(),
            display: display.clone().into(),
            kind,
            read_as: ReadAs::Value,
        }]
    };
    match value {
        MetricValue::ElapsedCompute(_) | MetricValue::Time { .. } => simple(MetricKind::NsTiming),
        MetricValue::SpilledBytes(_)
        | MetricValue::OutputBytes(_)
        | MetricValue::CurrentMemoryUsage(_)
        | MetricValue::PeakMemoryUsage { .. } => simple(MetricKind::Size),
        MetricValue::Count { .. } | MetricValue::Gauge { .. }
            if native.contains("bytes") || native.contains("mem") =>
        {
            simple(MetricKind::Size)
        }
        MetricValue::Ratio { .. } => vec![Def {
            name: definitions::fallback_name(native, MetricKind::Average).into(),
            display: format!("{display} (%)").into(),
            kind: MetricKind::Average,
            read_as: ReadAs::RatioPercent,
        }],
        MetricValue::PruningMetrics { .. } => {
            let base = definitions::fallback_name(native, MetricKind::Sum);
            vec![
                Def {
                    name: format!("{base}Pruned").into(),
                    display: format!("{display}: pruned").into(),
                    kind: MetricKind::Sum,
                    read_as: ReadAs::Pruned,
                },
                Def {
                    name: format!("{base}Matched").into(),
                    display: format!("{display}: matched").into(),
                    kind: MetricKind::Sum,
                    read_as: ReadAs::Matched,
                },
            ]
        }
        MetricValue::StartTimestamp(_)
        | MetricValue::EndTimestamp(_)
        | MetricValue::Custom { .. } => Vec::new(),
        _ => simple(MetricKind::Sum),
    }
}

/// A reading of one metric: a plain number, or a ratio kept as its two parts so that
/// ratios of several partitions or files combine correctly.
#[derive(Debug, Clone, Copy, Default)]
struct ReadValue {
    value: i64,
    part: u64,
    total: u64,
}

impl ReadValue {
    fn add(&mut self, other: ReadValue) {
        self.value = self.value.saturating_add(other.value);
        self.part += other.part;
        self.total += other.total;
    }

    fn percent_times_ten(&self) -> i64 {
        if self.total == 0 {
            0
        } else {
            saturating_i64((u128::from(self.part) * 1000 / u128::from(self.total)) as u64)
        }
    }
}

fn read(value: &MetricValue, reading: ReadAs) -> Option<ReadValue> {
    let plain = |v: usize| {
        Some(ReadValue {
            value: saturating_i64(v as u64),
            ..ReadValue::default()
        })
    };
    match (reading, value) {
        (ReadAs::RatioPercent, MetricValue::Ratio { ratio_metrics, .. }) => Some(ReadValue {
            value: 0,
            part: ratio_metrics.part() as u64,
            total: ratio_metrics.total() as u64,
        }),
        (ReadAs::RatioTotal, MetricValue::Ratio { ratio_metrics, .. }) => {
            plain(ratio_metrics.total())
        }
        (
            ReadAs::Pruned,
            MetricValue::PruningMetrics {
                pruning_metrics, ..
            },
        ) => plain(pruning_metrics.pruned()),
        (
            ReadAs::Matched,
            MetricValue::PruningMetrics {
                pruning_metrics, ..
            },
        ) => plain(pruning_metrics.matched()),
        (
            ReadAs::Value,
            MetricValue::StartTimestamp(_)
            | MetricValue::EndTimestamp(_)
            | MetricValue::Ratio { .. }
            | MetricValue::PruningMetrics { .. }
            | MetricValue::Custom { .. },
        ) => None,
        (ReadAs::Value, v) => plain(v.as_usize()),
        _ => None,
    }
}

/// Room for the native metrics of most operators (a Parquet scan has about 30 names).
const METRICS_PER_OPERATOR: usize = 32;

/// DataFusion's own `metrics` of an operator named `operator` (e.g. `HashJoinExec`), as
/// qprof names them, each value under the task `task_of` gives its partition: the
/// operator's table of definitions (or the fallback names), then the row-group totals of
/// a Parquet scan derived from them. Values of the same metric and partition (e.g. one
/// per Parquet file) are added up; values without a partition are operator-wide and carry
/// no task.
///
/// An engine that ships DataFusion's metrics itself (Ballista does, by partition) maps
/// them with this where they arrive, as the profile of a local query maps them.
pub fn operator_native_metrics<'a>(
    operator: &str,
    metrics: impl IntoIterator<Item = &'a Metric>,
    task_of: impl Fn(usize) -> Option<TaskRef>,
) -> Vec<NodeMetric> {
    let label = definitions::operator_label(operator);
    let mut out = native_metrics(metrics, operator, &label, task_of);
    add_stride_totals(&mut out);
    out
}

/// DataFusion's own `metrics` of an operator of type `operator` labelled `label` (its
/// [`definitions::operator_label`]), mapped through its definitions table. Values of the
/// same metric and partition (e.g. one per Parquet file) are added up; values without a
/// partition are operator-wide and carry no task.
pub(crate) fn native_metrics<'a>(
    metrics: impl IntoIterator<Item = &'a Metric>,
    operator: &str,
    label: &str,
    task_of: impl Fn(usize) -> Option<TaskRef>,
) -> Vec<NodeMetric> {
    // the definitions kept per operator type carry display names made with its label
    debug_assert_eq!(label, definitions::operator_label(operator));
    let metrics = metrics.into_iter();
    // the metrics as qprof names them, in first-seen order (their slots)
    let mut defs: Vec<Def> = Vec::with_capacity(METRICS_PER_OPERATOR);
    // each native name seen and where its slots are in `slots` (a scan has a set of
    // metrics per file it opened: a name is worked out once)
    let mut natives: Vec<(&str, Range<usize>)> = Vec::with_capacity(METRICS_PER_OPERATOR);
    let mut slots: Vec<usize> = Vec::with_capacity(METRICS_PER_OPERATOR);
    // every reading: its slot, its partition (`None`: operator-wide) and what it read
    let mut reads: Vec<(usize, Option<usize>, ReadValue)> =
        Vec::with_capacity(metrics.size_hint().0.max(METRICS_PER_OPERATOR));
    let table = definitions::operator_def(operator);
    // where the next name likely is in `natives`: a scan's sets come in the same order
    let mut next = 0;
    for metric in metrics {
        let native = metric.value().name();
        let at = match natives.get(next) {
            Some((name, _)) if *name == native => Some(next),
            _ => natives.iter().position(|(name, _)| *name == native),
        };
        next = at.map_or(natives.len() + 1, |i| i + 1);
        let range = match at {
            Some(at) => natives[at].1.clone(),
            None => {
                let start = slots.len();
                if !SUPERSEDED.contains(&native) {
                    for def in known_defs(operator, table, label, metric.value()).iter() {
                        let slot = defs.iter().position(|d| d.name == def.name);
                        slots.push(slot.unwrap_or_else(|| {
                            defs.push(def.clone());
                            defs.len() - 1
                        }));
                    }
                }
                natives.push((native, start..slots.len()));
                start..slots.len()
            }
        };
        for &slot in &slots[range] {
            if let Some(read) = read(metric.value(), defs[slot].read_as) {
                reads.push((slot, metric.partition(), read));
            }
        }
    }
    // by slot, then operator-wide values first and by partition
    reads.sort_unstable_by_key(|(slot, partition, _)| (*slot, *partition));
    let mut rest = &reads[..];
    defs.into_iter()
        .enumerate()
        .map(|(slot, def)| {
            let percent = def.read_as == ReadAs::RatioPercent;
            let shown = |read: &ReadValue| {
                if percent {
                    read.percent_times_ten()
                } else {
                    read.value
                }
            };
            let count = rest.iter().take_while(|(s, _, _)| *s == slot).count();
            let (of_slot, after) = rest.split_at(count);
            rest = after;
            let mut overall = ReadValue::default();
            let by_partition = || of_slot.chunk_by(|a, b| a.1 == b.1);
            let mut tasks: Vec<TaskValue> = Vec::with_capacity(by_partition().count());
            for of_partition in by_partition() {
                let mut sum = ReadValue::default();
                for (_, _, read) in of_partition {
                    sum.add(*read);
                }
                overall.add(sum);
                tasks.push(TaskValue {
                    task: of_partition[0].1.and_then(&task_of),
                    value: shown(&sum),
                });
            }
            NodeMetric {
                name: def.name,
                display_name: def.display,
                kind: def.kind,
                value: shown(&overall),
                tasks,
            }
        })
        .collect()
}

/// Row groups skipped after statistics kept them, by the stage that skipped them.
const ROW_GROUPS_SKIPPED_LATER: [&str; 3] = [
    names::ROW_GROUPS_SKIPPED_BY_BLOOM_FILTER,
    names::ROW_GROUPS_SKIPPED_BY_LIMIT,
    names::ROW_GROUPS_SKIPPED_BY_DYNAMIC_FILTER,
];

/// The seed's row-group totals of a Parquet scan, task by task: `skippedStrides`, row
/// groups skipped by statistics, bloom filters, a limit or dynamic filters, and
/// `processedStrides`, those statistics kept and nothing skipped later (DataFusion prunes
/// in that order, each stage over what the previous kept). Totals already there are kept.
pub(crate) fn add_stride_totals(metrics: &mut Vec<NodeMetric>) {
    if metrics.iter().any(|m| m.name == names::SKIPPED_STRIDES) {
        return;
    }
    let Some(kept_by_statistics) = metrics
        .iter()
        .find(|m| m.name == names::ROW_GROUPS_KEPT_BY_STATISTICS)
        .map(|m| m.tasks.clone())
    else {
        return;
    };
    let by_task = |name: &str| -> Vec<TaskValue> {
        metrics
            .iter()
            .find(|m| m.name == name)
            .map(|m| m.tasks.clone())
            .unwrap_or_default()
    };
    let of_task = |values: &[TaskValue], task: Option<TaskRef>| -> i64 {
        values
            .iter()
            .filter(|v| v.task == task)
            .map(|v| v.value)
            .sum()
    };
    let skipped_by_statistics = by_task(names::ROW_GROUPS_SKIPPED_BY_STATISTICS);
    let skipped_later: Vec<Vec<TaskValue>> = ROW_GROUPS_SKIPPED_LATER
        .iter()
        .map(|n| by_task(n))
        .collect();
    let mut skipped = Vec::with_capacity(kept_by_statistics.len());
    let mut processed = Vec::with_capacity(kept_by_statistics.len());
    for kept in &kept_by_statistics {
        let later: i64 = skipped_later.iter().map(|v| of_task(v, kept.task)).sum();
        let task = kept.task;
        skipped.push(TaskValue {
            task,
            value: of_task(&skipped_by_statistics, task).saturating_add(later),
        });
        processed.push(TaskValue {
            task,
            value: kept.value.saturating_sub(later).max(0),
        });
    }
    metrics.push(catalog::SKIPPED_STRIDES.summed("", skipped));
    metrics.push(catalog::PROCESSED_STRIDES.summed("", processed));
}
