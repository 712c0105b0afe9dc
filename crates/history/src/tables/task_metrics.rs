//! Spark's task metrics as columns, defined once for `qprof.tasks` (a task's values) and
//! `qprof.stages` (their sums over a stage's ended tasks, as Spark's stage list sums them).

use qprof_eventlog::TaskMetrics;

use crate::columns::{Column, int};

/// One task metric: its column's name (Spark's REST name in snake_case), unit, meaning
/// and where a task's metrics keep it.
pub(crate) struct TaskMetricDef {
    name: &'static str,
    unit: &'static str,
    description: &'static str,
    value: fn(&TaskMetrics) -> i64,
}

macro_rules! task_metric {
    ($name:literal, $unit:literal, $description:literal, $value:expr) => {
        TaskMetricDef {
            name: $name,
            unit: $unit,
            description: $description,
            value: $value,
        }
    };
}

/// Every task metric with a column, in column order.
pub(crate) static TASK_METRICS: &[TaskMetricDef] = &[
    task_metric!(
        "executor_deserialize_time",
        "ms",
        "Deserializing the task.",
        |m| m.executor_deserialize_time
    ),
    task_metric!(
        "executor_deserialize_cpu_time",
        "ns",
        "CPU deserializing the task.",
        |m| m.executor_deserialize_cpu_time
    ),
    task_metric!("executor_run_time", "ms", "Running the task (wall).", |m| m
        .executor_run_time),
    task_metric!("executor_cpu_time", "ns", "CPU running the task.", |m| m
        .executor_cpu_time),
    task_metric!(
        "result_size",
        "bytes",
        "The result sent back to the driver.",
        |m| m.result_size
    ),
    task_metric!(
        "jvm_gc_time",
        "ms",
        "Garbage collection while it ran (Spark's JVM).",
        |m| m.jvm_gc_time
    ),
    task_metric!(
        "result_serialization_time",
        "ms",
        "Serializing the result.",
        |m| m.result_serialization_time
    ),
    task_metric!(
        "memory_bytes_spilled",
        "bytes",
        "Spilled data's size in memory.",
        |m| m.memory_bytes_spilled
    ),
    task_metric!(
        "disk_bytes_spilled",
        "bytes",
        "Spilled data's size on disk.",
        |m| m.disk_bytes_spilled
    ),
    task_metric!(
        "peak_execution_memory",
        "bytes",
        "The most execution memory held at once (a stage's is the sum of its tasks').",
        |m| m.peak_execution_memory
    ),
    task_metric!("input_bytes", "bytes", "Bytes read from storage.", |m| m
        .input_bytes),
    task_metric!("input_records", "rows", "Records read from storage.", |m| m
        .input_records),
    task_metric!("output_bytes", "bytes", "Bytes written to storage.", |m| m
        .output_bytes),
    task_metric!(
        "output_records",
        "rows",
        "Records written to storage.",
        |m| m.output_records
    ),
    task_metric!(
        "shuffle_read_bytes",
        "bytes",
        "Shuffle bytes read, local and remote.",
        TaskMetrics::shuffle_read_bytes
    ),
    task_metric!(
        "shuffle_remote_bytes_read",
        "bytes",
        "Shuffle bytes read from other executors.",
        |m| m.remote_bytes_read
    ),
    task_metric!(
        "shuffle_local_bytes_read",
        "bytes",
        "Shuffle bytes read from this executor.",
        |m| m.local_bytes_read
    ),
    task_metric!(
        "shuffle_read_records",
        "rows",
        "Shuffle records read.",
        |m| m.records_read
    ),
    task_metric!(
        "shuffle_remote_blocks_fetched",
        "count",
        "Shuffle blocks fetched from other executors.",
        |m| m.remote_blocks_fetched
    ),
    task_metric!(
        "shuffle_local_blocks_fetched",
        "count",
        "Shuffle blocks read from this executor.",
        |m| m.local_blocks_fetched
    ),
    task_metric!(
        "shuffle_fetch_wait_time",
        "ms",
        "Waiting for shuffle data.",
        |m| m.fetch_wait_time
    ),
    task_metric!(
        "shuffle_write_bytes",
        "bytes",
        "Shuffle bytes written.",
        |m| m.bytes_written
    ),
    task_metric!("shuffle_write_time", "ns", "Writing shuffle data.", |m| m
        .write_time),
    task_metric!(
        "shuffle_write_records",
        "rows",
        "Shuffle records written.",
        |m| m.records_written
    ),
];

/// A task's metric values in [`TASK_METRICS`]' order.
pub(crate) fn values_of(metrics: &TaskMetrics) -> Vec<i64> {
    TASK_METRICS.iter().map(|d| (d.value)(metrics)).collect()
}

/// Adds a task's metric values to `sums`, in [`TASK_METRICS`]' order.
pub(crate) fn add_values(sums: &mut [i64], metrics: &TaskMetrics) {
    for (sum, d) in sums.iter_mut().zip(TASK_METRICS) {
        *sum = sum.saturating_add((d.value)(metrics));
    }
}

/// A row with task metric values in [`TASK_METRICS`]' order (none for a task that has
/// not ended).
pub(crate) trait TaskMetricValues {
    /// Its values, if it has them.
    fn task_metrics(&self) -> Option<&[i64]>;
}

/// A column per task metric, for rows that carry their values.
pub(crate) fn task_metric_columns<R: TaskMetricValues + 'static>(
    sums: bool,
) -> impl Iterator<Item = Column<R>> {
    TASK_METRICS.iter().enumerate().map(move |(i, d)| {
        let description = if sums {
            format!("{} Summed over its ended tasks.", d.description)
        } else {
            d.description.to_string()
        };
        int(d.name, move |r: &R| r.task_metrics().map(|v| v[i])).about(&description, Some(d.unit))
    })
}
