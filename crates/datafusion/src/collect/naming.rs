//! Naming an operator's reading: the metrics a profile shows for it, each with its
//! values task by task.

use datafusion::physical_plan::ExecutionPlan;
use qprof_core::counters::OperatorTaskSnapshot;
use qprof_core::io::{CONCURRENCY_BUCKETS, IoSnapshot};
use qprof_core::metric::{MetricKind, TaskRef, TaskValue};
use qprof_core::periodic::{bucket_info_string, bucket_percentages};
use qprof_core::profile::{NodeMetric, names};
use qprof_core::spill::SpillSnapshot;

use super::joins;
use super::reading::OperatorReading;
use crate::definitions;
use crate::exec::ProfiledExec;
use crate::joins::join_shape;
use crate::native_metrics::add_stride_totals;

/// The task that computed a partition of the operator's stage.
pub(super) type TaskOf<'a> = &'a dyn Fn(usize) -> Option<TaskRef>;

/// An operator's metrics and the facts shown beside them.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct OperatorMetrics {
    /// Its metrics, in the order a profile shows them.
    pub metrics: Vec<NodeMetric>,
    /// Facts about its run as key and text (the read concurrency histogram).
    pub info: Vec<(String, String)>,
}

/// The metrics of `operator` from its `reading`, as a profile shows them: the base
/// metrics, I/O, spilling and a join's phases, then `native` (DataFusion's own, named),
/// the files planning pruned and a Parquet scan's row-group totals. `task_of` names the
/// task of each partition. A local query's profile names its operators with this, and so
/// does an engine's scheduler with the readings its executors shipped.
pub fn operator_metrics(
    operator: &dyn ExecutionPlan,
    reading: &OperatorReading,
    native: Vec<NodeMetric>,
    task_of: &dyn Fn(usize) -> Option<TaskRef>,
) -> OperatorMetrics {
    let inner = ProfiledExec::of(operator).map_or(operator, |e| e.inner().as_ref());
    let name = inner.name();
    let label = definitions::operator_label(name);
    let mut info = Vec::new();
    let mut metrics = base_metrics(reading, &label, task_of);
    metrics.extend(io_metrics(
        reading,
        task_of,
        name == "DataSinkExec",
        &mut info,
    ));
    metrics.extend(spill_metrics(reading, task_of));
    if let Some(shape) = join_shape(inner) {
        metrics.extend(joins::phase_metrics(&shape, &reading.phases, task_of));
    }
    metrics.extend(native);
    add_listing_pruning(&mut metrics, reading.files_pruned_at_listing);
    add_stride_totals(&mut metrics);
    OperatorMetrics { metrics, info }
}

/// Adds the files planning pruned by partition values to the scan's skipped splits, as a
/// value of no task (Spark's driver-side value).
fn add_listing_pruning(metrics: &mut Vec<NodeMetric>, pruned: u64) {
    if pruned == 0 {
        return;
    }
    let value = TaskValue {
        task: None,
        value: clamp(pruned),
    };
    match metrics.iter_mut().find(|m| m.name == names::SKIPPED_SPLITS) {
        Some(skipped) => {
            skipped.value = skipped.value.saturating_add(value.value);
            skipped.tasks.push(value);
        }
        None => metrics.push(NodeMetric::summed(
            names::SKIPPED_SPLITS,
            "number of skipped splits",
            MetricKind::Sum,
            vec![value],
        )),
    }
}

/// A metric summed over the tasks' snapshots of some counters: name, display name, kind,
/// reading.
type SnapshotMetric<S> = (&'static str, &'static str, MetricKind, fn(&S) -> u64);

/// The metrics of `table`, each summed over the tasks' `snapshots` (by partition; `None`:
/// spawned work).
fn summed_over_tasks<S>(
    table: &[SnapshotMetric<S>],
    snapshots: &[(Option<usize>, S)],
    task_of: TaskOf<'_>,
) -> Vec<NodeMetric> {
    table
        .iter()
        .map(|(name, display, kind, read)| {
            let values = snapshots
                .iter()
                .map(|(p, s)| TaskValue {
                    task: p.and_then(task_of),
                    value: clamp(read(s)),
                })
                .collect();
            NodeMetric::summed(*name, *display, *kind, values)
        })
        .collect()
}

#[rustfmt::skip]
const SPILL_METRICS: &[SnapshotMetric<SpillSnapshot>] = &[
    (names::SPILL_FILES_CREATED, "number of spill files created", MetricKind::Sum, |s| s.files),
    (names::SPILL_WRITTEN_BYTES, "bytes written to spill files", MetricKind::Size, |s| s.written_bytes),
    (names::SPILL_WRITTEN_ROWS, "rows written to spill files", MetricKind::Sum, |s| s.written_rows),
    (names::SPILLED_PARTITIONS, "total spilled partitions", MetricKind::Sum, |s| u64::from(s.files > 0)),
    (names::SPILL_WRITE_NANOS, "time of writing spill files", MetricKind::NsTiming, |s| s.write_nanos),
    (names::SPILL_READ_BYTES, "bytes read back from spill files", MetricKind::Size, |s| s.read_bytes),
    (names::SPILL_READ_NANOS, "time of reading spill files", MetricKind::NsTiming, |s| s.read_nanos),
];

/// The spill metrics of an operator whose tasks spilled, counted at the files.
fn spill_metrics(reading: &OperatorReading, task_of: TaskOf<'_>) -> Vec<NodeMetric> {
    if reading.spill.is_empty() {
        return Vec::new();
    }
    summed_over_tasks(SPILL_METRICS, &reading.spill, task_of)
}

/// The base metrics every wrapped operator has, one value per task.
fn base_metrics(reading: &OperatorReading, label: &str, task_of: TaskOf<'_>) -> Vec<NodeMetric> {
    // spawned work belongs to no output task: it is reported without one, as Spark
    // reports driver-side values
    let snapshots: Vec<(Option<TaskRef>, &OperatorTaskSnapshot)> = reading
        .tasks
        .iter()
        .map(|(p, s)| (task_of(*p), s))
        .chain(reading.spawned.iter().map(|s| (None, s)))
        .collect();
    let series = |name: &str, kind: MetricKind, read: fn(&OperatorTaskSnapshot) -> u64| {
        let values = snapshots
            .iter()
            .map(|(task, s)| TaskValue {
                task: *task,
                value: clamp(read(s)),
            })
            .collect();
        NodeMetric::summed(
            name,
            definitions::base_display_name(name, label),
            kind,
            values,
        )
    };
    let mut peak = series(names::PEAK_MEMORY_BYTES, MetricKind::Size, |s| {
        s.peak_memory_bytes
    });
    // the operator's true peak, not the sum of its tasks' peaks (nor, where it is not
    // known, more than the largest task's)
    peak.value = match reading.peak {
        Some(peak) => clamp(peak),
        None => peak.tasks.iter().map(|v| v.value).max().unwrap_or(0),
    };
    vec![
        series(names::WALL_NANOS, MetricKind::NsTiming, |s| s.wall_nanos),
        series(names::SELF_WALL_NANOS, MetricKind::NsTiming, |s| {
            s.self_wall_nanos
        }),
        series(names::CPU_NANOS, MetricKind::NsTiming, |s| s.cpu_nanos),
        series(names::SELF_CPU_NANOS, MetricKind::NsTiming, |s| {
            s.self_cpu_nanos
        }),
        series(names::CPU_COUNT, MetricKind::Sum, |s| s.output_vectors),
        series(names::OUTPUT_ROWS, MetricKind::Sum, |s| s.output_rows),
        series(names::OUTPUT_VECTORS, MetricKind::Sum, |s| s.output_vectors),
        series(names::OUTPUT_BYTES, MetricKind::Size, |s| s.output_bytes),
        peak,
        series(names::NUM_MEMORY_ALLOCATIONS, MetricKind::Sum, |s| {
            s.memory_allocations
        }),
        series("numPolls", MetricKind::Sum, |s| s.polls),
    ]
}

/// An I/O metric summed over tasks.
type IoMetric = SnapshotMetric<IoSnapshot>;

#[rustfmt::skip]
const READ_METRICS: &[IoMetric] = &[
    (names::READ_REQUESTS, "number of read requests", MetricKind::Sum, |s| s.read_requests),
    (names::READ_BYTES, "bytes read", MetricKind::Size, |s| s.read_bytes),
    (names::STORAGE_READ_BYTES, "bytes read from storage", MetricKind::Size, |s| s.storage_read_bytes),
    (names::LOCAL_READ_BYTES, "bytes read from local disk cache", MetricKind::Size, |s| s.local_read_bytes),
    (names::RAM_READ_BYTES, "bytes read from memory cache", MetricKind::Size, |s| s.ram_read_bytes),
    (names::DATA_SOURCE_READ_NANOS, "time of reading from data source", MetricKind::NsTiming, |s| s.read_nanos),
    (names::IO_WAIT_NANOS, "time of I/O wait", MetricKind::NsTiming, |s| s.io_wait_nanos),
    (names::METADATA_REQUESTS, "number of metadata requests", MetricKind::Sum, |s| s.metadata_requests),
    (names::READ_BYTES_PER_SECOND, "read throughput per second", MetricKind::Size, |s| s.read_bytes_per_second.round() as u64),
];

#[rustfmt::skip]
const WRITE_METRICS: &[IoMetric] = &[
    (names::WRITE_REQUESTS, "number of write requests", MetricKind::Sum, |s| s.write_requests),
    (names::PHYSICAL_WRITTEN_BYTES, "number of written bytes", MetricKind::Size, |s| s.written_bytes),
    (names::WRITTEN_FILES, "number of written files", MetricKind::Sum, |s| s.written_files),
    (names::WRITE_IO_NANOS, "time of write I/O", MetricKind::NsTiming, |s| s.write_nanos),
];

/// The I/O metrics of an operator whose tasks touched storage: the read group unless it
/// only wrote, the write group if it wrote or is a sink. The read-concurrency histogram of
/// all its tasks together goes to `info` as Impala's string.
fn io_metrics(
    reading: &OperatorReading,
    task_of: TaskOf<'_>,
    is_sink: bool,
    info: &mut Vec<(String, String)>,
) -> Vec<NodeMetric> {
    if reading.io.is_empty() {
        return Vec::new();
    }
    let series = |read: &dyn Fn(&IoSnapshot) -> i64| -> Vec<TaskValue> {
        reading
            .io
            .iter()
            .map(|(p, s)| TaskValue {
                task: p.and_then(task_of),
                value: read(s),
            })
            .collect()
    };
    let summed = |table| summed_over_tasks(table, &reading.io, task_of);
    let total = |read: fn(&IoSnapshot) -> u64| {
        reading
            .io
            .iter()
            .fold(0_u64, |sum, (_, s)| sum.saturating_add(read(s)))
    };
    let reads = total(|s| s.read_requests);
    let writes = total(|s| s.write_requests);
    let mut metrics = Vec::new();
    if reads > 0 || writes == 0 {
        metrics.extend(summed(READ_METRICS));
        // averages as Spark stores them: tenths
        let tenths = |v: f64| (v * 10.0).round() as i64;
        let concurrency = series(&|s| tenths(s.average_read_concurrency));
        let samples = total(|s| s.concurrency_samples);
        let weighted: f64 = reading
            .io
            .iter()
            .map(|(_, s)| s.average_read_concurrency * s.concurrency_samples as f64)
            .sum();
        metrics.push(NodeMetric {
            name: names::AVERAGE_READ_CONCURRENCY.to_string(),
            display_name: "average read concurrency".to_string(),
            kind: MetricKind::Average,
            value: if samples == 0 {
                0
            } else {
                tenths(weighted / samples as f64)
            },
            tasks: concurrency,
        });
        let mut counts = vec![0_u64; CONCURRENCY_BUCKETS];
        for (_, s) in &reading.io {
            for (sum, c) in counts.iter_mut().zip(&s.concurrency_buckets) {
                *sum = sum.saturating_add(*c);
            }
        }
        let overall = bucket_percentages(&counts);
        for (i, share) in overall.iter().enumerate() {
            let plus = if i + 1 == CONCURRENCY_BUCKETS {
                "+"
            } else {
                ""
            };
            metrics.push(NodeMetric {
                name: format!("{}{i}Percent", names::READ_CONCURRENCY_BUCKET),
                display_name: format!("time at read concurrency {i}{plus} (%)"),
                kind: MetricKind::Average,
                value: tenths(*share),
                tasks: series(&|s| {
                    tenths(
                        bucket_percentages(&s.concurrency_buckets)
                            .get(i)
                            .copied()
                            .unwrap_or(0.0),
                    )
                }),
            });
        }
        info.push((
            names::READ_CONCURRENCY_BUCKET.to_string(),
            bucket_info_string(&counts),
        ));
    }
    if writes > 0 || is_sink {
        metrics.extend(summed(WRITE_METRICS));
    }
    metrics
}

pub(super) fn clamp(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}
