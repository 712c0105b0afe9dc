//! DataFusion's own metrics of an operator, read and renamed through the per-operator
//! tables of [`crate::definitions`] (or named by a fallback rule for metrics no table
//! knows), one value per task.

use std::borrow::Cow;

use datafusion::physical_plan::metrics::{Metric, MetricValue};
use qprof_core::catalog;
use qprof_core::metric::{MetricKind, TaskRef, TaskValue};
use qprof_core::profile::{NodeMetric, names};

use crate::definitions::{self, OperatorDef, ReadAs, SUPERSEDED};
use qprof_core::metric::saturating_i64;

/// A native metric's definition, from a table or derived for metrics no table knows.
struct Def {
    name: Cow<'static, str>,
    display: Cow<'static, str>,
    kind: MetricKind,
    read_as: ReadAs,
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

/// A metric's reads added up by partition (`None`: operator-wide), in first-seen order.
type ByPartition = Vec<(Option<usize>, ReadValue)>;

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

/// DataFusion's own `metrics` of an operator, mapped through its definitions table.
/// Values of the same metric and partition (e.g. one per Parquet file) are added up;
/// values without a partition are operator-wide and carry no task.
pub(crate) fn native_metrics<'a>(
    metrics: impl IntoIterator<Item = &'a Metric>,
    operator: &str,
    label: &str,
    task_of: impl Fn(usize) -> Option<TaskRef>,
) -> Vec<NodeMetric> {
    // name -> (display, kind, reading, per-partition reads), in first-seen order; an
    // operator has a few dozen names and a task one partition or a few, so both are
    // looked up in short vectors
    let mut acc: Vec<(Def, ByPartition)> = Vec::with_capacity(METRICS_PER_OPERATOR);
    // the slots of `acc` each native name feeds, worked out once per name (a scan has a
    // set of metrics per file it opened)
    let mut slots_of: Vec<(&str, Vec<usize>)> = Vec::with_capacity(METRICS_PER_OPERATOR);
    let table = definitions::operator_def(operator);
    for metric in metrics {
        let native = metric.value().name();
        let at = match slots_of.iter().position(|(name, _)| *name == native) {
            Some(at) => at,
            None => {
                let defs = if SUPERSEDED.contains(&native) {
                    Vec::new()
                } else {
                    defs_for(table, label, metric.value())
                };
                let slots = defs
                    .into_iter()
                    .map(
                        |def| match acc.iter().position(|(d, _)| d.name == def.name) {
                            Some(i) => i,
                            None => {
                                acc.push((def, Vec::new()));
                                acc.len() - 1
                            }
                        },
                    )
                    .collect();
                slots_of.push((native, slots));
                slots_of.len() - 1
            }
        };
        for &slot in &slots_of[at].1 {
            let (def, by_partition) = &mut acc[slot];
            let Some(reads) = read(metric.value(), def.read_as) else {
                continue;
            };
            let partition = metric.partition();
            match by_partition.iter_mut().find(|(p, _)| *p == partition) {
                Some((_, sum)) => sum.add(reads),
                None => by_partition.push((partition, reads)),
            }
        }
    }
    acc.into_iter()
        .map(|(def, mut by_partition)| {
            // operator-wide values first, then by partition
            by_partition.sort_unstable_by_key(|(p, _)| *p);
            let percent = def.read_as == ReadAs::RatioPercent;
            let mut overall = ReadValue::default();
            let tasks = by_partition
                .iter()
                .map(|(p, reads)| {
                    overall.add(*reads);
                    TaskValue {
                        task: p.and_then(&task_of),
                        value: if percent {
                            reads.percent_times_ten()
                        } else {
                            reads.value
                        },
                    }
                })
                .collect();
            NodeMetric {
                name: def.name,
                display_name: def.display,
                kind: def.kind,
                value: if percent {
                    overall.percent_times_ten()
                } else {
                    overall.value
                },
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
