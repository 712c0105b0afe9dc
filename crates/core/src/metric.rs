//! Metric kinds with Spark's `SQLMetric` semantics, per-task values and their aggregation.

use std::fmt;
use std::str::FromStr;

use crate::format;

/// The kind of a metric, named and aggregated as Spark's `SQLMetric` types.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MetricKind {
    /// A count; aggregated as the sum over tasks and rendered as a grouped integer.
    Sum,
    /// A number of bytes; rendered with binary units and min/median/max across tasks.
    Size,
    /// A duration in milliseconds.
    Timing,
    /// A duration in nanoseconds (rendered in milliseconds, like Spark).
    NsTiming,
    /// An average stored times ten; rendered as min/median/max, never as a total.
    Average,
}

impl MetricKind {
    /// All kinds, in Spark's order.
    pub const ALL: [MetricKind; 5] = [
        MetricKind::Sum,
        MetricKind::Size,
        MetricKind::Timing,
        MetricKind::NsTiming,
        MetricKind::Average,
    ];

    /// Spark's `metricType` string: `sum`, `size`, `timing`, `nsTiming` or `average`.
    pub fn as_str(self) -> &'static str {
        match self {
            MetricKind::Sum => "sum",
            MetricKind::Size => "size",
            MetricKind::Timing => "timing",
            MetricKind::NsTiming => "nsTiming",
            MetricKind::Average => "average",
        }
    }

    /// Formats one value of this kind as Spark does.
    pub fn format_value(self, value: i64) -> String {
        match self {
            MetricKind::Sum => format::integer(value),
            MetricKind::Size => format::bytes(value),
            MetricKind::Timing => format::millis(value),
            MetricKind::NsTiming => format::nanos(value),
            MetricKind::Average => format::average(value),
        }
    }
}

impl fmt::Display for MetricKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Error returned when a string names no metric kind.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownMetricKind(pub String);

impl fmt::Display for UnknownMetricKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "unknown metric kind '{}' (expected sum, size, timing, nsTiming or average)",
            self.0
        )
    }
}

impl std::error::Error for UnknownMetricKind {}

impl FromStr for MetricKind {
    type Err = UnknownMetricKind;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        MetricKind::ALL
            .into_iter()
            .find(|k| k.as_str() == s)
            .ok_or_else(|| UnknownMetricKind(s.to_string()))
    }
}

/// Identifies the task a value came from, as Spark's `(stage S.A: task T)` annotation does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TaskRef {
    /// Stage id within the application.
    pub stage_id: u32,
    /// Attempt number of the stage (always 0 on one machine).
    pub stage_attempt: u32,
    /// Task id, unique within the application.
    pub task_id: u64,
    /// Partition of the stage this task computed.
    pub partition: u32,
}

/// One task's value of a metric.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TaskValue {
    /// The task that produced the value; `None` for values recorded outside any task
    /// (Spark's "driver" values).
    pub task: Option<TaskRef>,
    /// The raw value in the kind's unit.
    pub value: i64,
}

/// Summary of a metric's task values: Spark's total, min, median and max with the task of the max.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Aggregate {
    /// Number of values that took part (for `average`, only positive values do).
    pub count: usize,
    /// Sum of the values.
    pub total: i64,
    /// Smallest value.
    pub min: i64,
    /// Spark's median: the element at index `count / 2` of the sorted values.
    pub median: i64,
    /// Largest value.
    pub max: i64,
    /// Task that produced the largest value (the first one in task order on ties).
    pub max_task: Option<TaskRef>,
}

impl Aggregate {
    /// Aggregates the values Spark would consider valid for `kind`: non-negative values,
    /// or strictly positive ones for `average`.
    pub fn of(kind: MetricKind, values: &[TaskValue]) -> Aggregate {
        Aggregate::of_padded(kind, values, 0)
    }

    /// [`Aggregate::of`] `values` and `zeros` zero values more (Spark's padding for the
    /// tasks of a stage that reported nothing), without holding the zeros: how many a
    /// stage has is a log's word, and no allocation is sized by it. Zeros are not valid
    /// for `average`; for the other kinds they sort before every valid value.
    pub fn of_padded(kind: MetricKind, values: &[TaskValue], zeros: usize) -> Aggregate {
        let valid = |v: &&TaskValue| match kind {
            MetricKind::Average => v.value > 0,
            _ => v.value >= 0,
        };
        let zeros = if kind == MetricKind::Average {
            0
        } else {
            zeros
        };
        let mut sorted: Vec<i64> = values.iter().filter(valid).map(|v| v.value).collect();
        sorted.sort_unstable();
        let count = sorted.len().saturating_add(zeros);
        // the value at rank `i` of the valid values and the zeros, sorted
        let at = |i: usize| if i < zeros { 0 } else { sorted[i - zeros] };
        let max_task = values
            .iter()
            .filter(valid)
            .fold(None::<&TaskValue>, |best, v| match best {
                Some(b) if b.value >= v.value => Some(b),
                _ => Some(v),
            })
            .and_then(|v| v.task);
        if count == 0 {
            return Aggregate {
                count: 0,
                total: 0,
                min: 0,
                median: 0,
                max: 0,
                max_task,
            };
        }
        Aggregate {
            count,
            total: sorted.iter().fold(0_i64, |acc, v| acc.saturating_add(*v)),
            min: at(0),
            median: at(count / 2),
            max: at(count - 1),
            max_task,
        }
    }
}

/// Renders a metric's task values exactly as Spark's `SQLMetrics.stringValue` does.
///
/// ```
/// use qprof_core::metric::{spark_string, MetricKind, TaskRef, TaskValue};
/// let task = |id, value| TaskValue {
///     task: Some(TaskRef { stage_id: 29, stage_attempt: 0, task_id: id, partition: 0 }),
///     value,
/// };
/// assert_eq!(
///     spark_string(MetricKind::Timing, &[task(23, 0), task(24, 44)]),
///     "total (min, med, max (stageId: taskId))\n44 ms (0 ms, 44 ms, 44 ms (stage 29.0: task 24))"
/// );
/// assert_eq!(spark_string(MetricKind::Sum, &[task(1, 7_000), task(2, 3_000)]), "10,000");
/// ```
pub fn spark_string(kind: MetricKind, values: &[TaskValue]) -> String {
    if kind == MetricKind::Sum {
        return sum_string(values);
    }
    let agg = Aggregate::of(kind, values);
    render(kind, &agg, agg.max_task)
}

/// [`spark_string`], for a caller that has the values' aggregate (`Aggregate::of(kind,
/// values)`) already.
pub fn spark_string_aggregated(kind: MetricKind, values: &[TaskValue], agg: &Aggregate) -> String {
    if kind == MetricKind::Sum {
        return sum_string(values);
    }
    render(kind, agg, agg.max_task)
}

/// [`spark_string`], with the maximum named after `max_task` (`None`: the driver), as
/// Spark names it after the task that first reported it, which the values alone do not
/// tell.
pub fn spark_string_naming(
    kind: MetricKind,
    values: &[TaskValue],
    max_task: Option<TaskRef>,
) -> String {
    spark_string_padded(kind, values, 0, max_task)
}

/// [`spark_string_naming`] of `values` and `zeros` zero values more ([`Aggregate::of_padded`]).
pub fn spark_string_padded(
    kind: MetricKind,
    values: &[TaskValue],
    zeros: usize,
    max_task: Option<TaskRef>,
) -> String {
    if kind == MetricKind::Sum {
        return sum_string(values);
    }
    render(kind, &Aggregate::of_padded(kind, values, zeros), max_task)
}

/// A `sum` metric's text: the total of every value, however many tasks reported one.
fn sum_string(values: &[TaskValue]) -> String {
    format::integer(values.iter().map(|v| v.value).fold(0, i64::saturating_add))
}

/// The text of a metric of any kind but `sum`, from its aggregate, its maximum named
/// after `max_task` (`None`: the driver).
fn render(kind: MetricKind, agg: &Aggregate, max_task: Option<TaskRef>) -> String {
    if agg.count <= 1 {
        return match kind {
            MetricKind::Average => format::average(agg.max),
            _ => kind.format_value(agg.max),
        };
    }
    let task_info = match max_task {
        Some(t) => format!(
            "(stage {}.{}: task {})",
            t.stage_id, t.stage_attempt, t.task_id
        ),
        None => "(driver)".to_string(),
    };
    match kind {
        MetricKind::Average => format!(
            "(min, med, max (stageId: taskId)):\n({}, {}, {} {task_info})",
            format::average(agg.min),
            format::average(agg.median),
            format::average(agg.max)
        ),
        // nsTiming: Spark sums nanoseconds, then converts each figure to milliseconds
        _ => format!(
            "total (min, med, max (stageId: taskId))\n{} ({}, {}, {} {task_info})",
            kind.format_value(agg.total),
            kind.format_value(agg.min),
            kind.format_value(agg.median),
            kind.format_value(agg.max)
        ),
    }
}

/// `v` as a metric value (Spark's `Long`), `i64::MAX` if it does not fit: a count, a size
/// or a duration past 2^63 saturates rather than wraps.
pub fn saturating_i64(v: impl TryInto<i64>) -> i64 {
    v.try_into().unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_past_i64_saturate() {
        assert_eq!(saturating_i64(7_u64), 7);
        assert_eq!(saturating_i64(u64::MAX), i64::MAX);
        assert_eq!(saturating_i64(u128::MAX), i64::MAX);
        assert_eq!(saturating_i64(usize::MAX), i64::MAX);
    }
    use proptest::prelude::*;

    fn task(stage: u32, id: u64, value: i64) -> TaskValue {
        TaskValue {
            task: Some(TaskRef {
                stage_id: stage,
                stage_attempt: 0,
                task_id: id,
                partition: id as u32,
            }),
            value,
        }
    }

    fn driver(value: i64) -> TaskValue {
        TaskValue { task: None, value }
    }

    #[test]
    fn kinds_round_trip_through_their_names() {
        for kind in MetricKind::ALL {
            assert_eq!(kind.as_str().parse::<MetricKind>(), Ok(kind));
        }
        let err = "bytes".parse::<MetricKind>().unwrap_err();
        assert_eq!(
            err.to_string(),
            "unknown metric kind 'bytes' (expected sum, size, timing, nsTiming or average)"
        );
    }

    #[test]
    fn spark_strings_for_every_kind() {
        // strings as Spark's history server renders them (see the reference fixtures)
        let two = |kind, a, b| spark_string(kind, &[task(29, 23, a), task(29, 24, b)]);
        assert_eq!(two(MetricKind::Sum, 1, 2), "3");
        assert_eq!(
            two(MetricKind::Size, 0, 262_144),
            "total (min, med, max (stageId: taskId))\n256.0 KiB (0.0 B, 256.0 KiB, 256.0 KiB (stage 29.0: task 24))"
        );
        assert_eq!(
            two(MetricKind::Size, 0, 80),
            "total (min, med, max (stageId: taskId))\n80.0 B (0.0 B, 80.0 B, 80.0 B (stage 29.0: task 24))"
        );
        assert_eq!(
            two(MetricKind::Timing, 0, 54),
            "total (min, med, max (stageId: taskId))\n54 ms (0 ms, 54 ms, 54 ms (stage 29.0: task 24))"
        );
        assert_eq!(
            two(MetricKind::NsTiming, 0, 3_000_000),
            "total (min, med, max (stageId: taskId))\n3 ms (0 ms, 3 ms, 3 ms (stage 29.0: task 24))"
        );
        assert_eq!(
            spark_string(
                MetricKind::Average,
                &[task(3, 5, 10), task(3, 6, 22), task(3, 7, 30)]
            ),
            "(min, med, max (stageId: taskId)):\n(1, 2.2, 3 (stage 3.0: task 7))"
        );
    }

    #[test]
    fn single_values_print_plain() {
        assert_eq!(
            spark_string(MetricKind::Size, &[task(1, 1, 292)]),
            "292.0 B"
        );
        assert_eq!(spark_string(MetricKind::Timing, &[]), "0 ms");
        assert_eq!(spark_string(MetricKind::Average, &[]), "0");
        assert_eq!(spark_string(MetricKind::Sum, &[]), "0");
        // invalid (-1) values are dropped before deciding between the two forms
        assert_eq!(
            spark_string(MetricKind::Timing, &[task(1, 1, -1), task(1, 2, 7)]),
            "7 ms"
        );
    }

    #[test]
    fn driver_values_say_driver() {
        assert_eq!(
            spark_string(MetricKind::Size, &[driver(97), driver(97)]),
            "total (min, med, max (stageId: taskId))\n194.0 B (97.0 B, 97.0 B, 97.0 B (driver))"
        );
    }

    #[test]
    fn median_is_the_upper_middle() {
        let values: Vec<_> = [4, 1, 3, 2].iter().map(|&v| task(0, v as u64, v)).collect();
        let agg = Aggregate::of(MetricKind::Size, &values);
        assert_eq!((agg.min, agg.median, agg.max, agg.total), (1, 3, 4, 10));
        assert_eq!(agg.max_task.map(|t| t.task_id), Some(4));
    }

    proptest! {
        #[test]
        fn the_aggregated_text_is_the_text(
            kind in proptest::sample::select(MetricKind::ALL.to_vec()),
            raw in proptest::collection::vec((-5_i64..5_000_000, proptest::option::of(0_u64..50)), 0..12),
        ) {
            let values: Vec<TaskValue> = raw
                .iter()
                .map(|&(value, task)| TaskValue {
                    task: task.map(|task_id| TaskRef { stage_id: 1, stage_attempt: 0, task_id, partition: 0 }),
                    value,
                })
                .collect();
            let agg = Aggregate::of(kind, &values);
            prop_assert_eq!(spark_string_aggregated(kind, &values, &agg), spark_string(kind, &values));
            prop_assert_eq!(spark_string_naming(kind, &values, agg.max_task), spark_string(kind, &values));
        }

        #[test]
        fn aggregate_invariants(values in proptest::collection::vec(-1_i64..1_000_000, 0..64)) {
            let tasks: Vec<_> = values.iter().enumerate().map(|(i, &v)| task(1, i as u64, v)).collect();
            let agg = Aggregate::of(MetricKind::Size, &tasks);
            let valid: Vec<i64> = values.iter().copied().filter(|v| *v >= 0).collect();
            prop_assert_eq!(agg.count, valid.len());
            prop_assert_eq!(agg.total, valid.iter().sum::<i64>());
            if !valid.is_empty() {
                prop_assert!(agg.min <= agg.median && agg.median <= agg.max);
                prop_assert_eq!(agg.max, *valid.iter().max().unwrap());
                let max_task = agg.max_task.unwrap();
                prop_assert_eq!(values[max_task.task_id as usize], agg.max);
                // the first task holding the max wins
                prop_assert!(values[..max_task.task_id as usize].iter().all(|v| *v < agg.max));
            }
        }

        #[test]
        fn zeros_counted_aggregate_as_zeros_held(
            kind in proptest::sample::select(MetricKind::ALL.to_vec()),
            values in proptest::collection::vec(-2_i64..1_000, 0..24),
            zeros in 0usize..40,
        ) {
            let tasks: Vec<_> = values.iter().enumerate().map(|(i, &v)| task(1, i as u64, v)).collect();
            let mut padded = tasks.clone();
            let pad = TaskValue { value: 0, ..tasks.first().copied().unwrap_or(task(1, 0, 0)) };
            padded.extend(std::iter::repeat_n(pad, zeros));
            let counted = Aggregate::of_padded(kind, &tasks, zeros);
            let held = Aggregate::of(kind, &padded);
            prop_assert_eq!(
                (counted.count, counted.total, counted.min, counted.median, counted.max),
                (held.count, held.total, held.min, held.median, held.max)
            );
            let max = held.max_task;
            prop_assert_eq!(
                spark_string_padded(kind, &tasks, zeros, max),
                spark_string_naming(kind, &padded, max)
            );
        }

        #[test]
        fn aggregation_does_not_depend_on_task_order(mut values in proptest::collection::vec(0_i64..1_000, 1..32)) {
            let a = Aggregate::of(MetricKind::Timing, &values.iter().map(|&v| task(0, 0, v)).collect::<Vec<_>>());
            values.reverse();
            let b = Aggregate::of(MetricKind::Timing, &values.iter().map(|&v| task(0, 0, v)).collect::<Vec<_>>());
            prop_assert_eq!((a.total, a.min, a.median, a.max), (b.total, b.min, b.median, b.max));
        }
    }
}
