//! An operator's metrics from its reading: the metrics a profile shows for it, each with
//! its values task by task.

use datafusion::physical_plan::ExecutionPlan;
use qprof_core::catalog::{self, Family, MetricDef, Tally};
use qprof_core::counters::OperatorTaskSnapshot;
use qprof_core::io::{CONCURRENCY_BUCKETS, IoSnapshot};
use qprof_core::metric::{TaskRef, TaskValue};
use qprof_core::periodic::{bucket_info_string, bucket_shares};
use qprof_core::profile::{NodeMetric, TaskSpan, names};
use qprof_core::spill::SpillSnapshot;

use super::joins;
use super::reading::{OperatorReading, TaskOf};
use crate::definitions;
use crate::exec::ProfiledExec;
use crate::joins::join_shape;
use crate::native_metrics::add_stride_totals;
use qprof_core::metric::saturating_i64;

/// Room for the metrics qprof itself gives an operator: base, I/O, spilling and a join's
/// phases.
const OWN_METRICS: usize = 64;

/// An operator's metrics and the facts shown beside them.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct OperatorMetrics {
    /// Its metrics, in the order a profile shows them.
    pub metrics: Vec<NodeMetric>,
    /// Facts about its run as key and text (the read concurrency histogram).
    pub info: Vec<(String, String)>,
    /// When each task ran it (the partitions of one task together).
    pub task_spans: Vec<TaskSpan>,
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
    // room for all of them at once: an operator's metrics are put together from six parts
    let mut metrics = Vec::with_capacity(OWN_METRICS + native.len());
    add_base_metrics(&mut metrics, reading, &label, task_of);
    add_io_metrics(
        (&mut metrics, &mut info),
        reading,
        &label,
        task_of,
        name == "DataSinkExec",
    );
    add_spill_metrics(&mut metrics, reading, &label, task_of);
    if let Some(shape) = join_shape(inner) {
        metrics.extend(joins::phase_metrics(&shape, &reading.phases, task_of));
    }
    metrics.extend(native);
    add_listing_pruning(&mut metrics, &label, reading.files_pruned_at_listing);
    add_stride_totals(&mut metrics);
    OperatorMetrics {
        metrics,
        info,
        task_spans: task_spans(reading, task_of),
    }
}

/// When each task ran the operator: from its first partition's start to its last one's
/// finish (0 if one had not finished).
fn task_spans(
    reading: &OperatorReading,
    task_of: &dyn Fn(usize) -> Option<TaskRef>,
) -> Vec<TaskSpan> {
    let mut spans: Vec<TaskSpan> = Vec::new();
    for (partition, s) in &reading.tasks {
        let Some(task) = task_of(*partition).filter(|_| s.started_epoch_micros > 0) else {
            continue;
        };
        match spans.iter_mut().find(|t| t.task == task) {
            Some(span) => {
                span.start_epoch_micros = span.start_epoch_micros.min(s.started_epoch_micros);
                span.finish_epoch_micros = match (span.finish_epoch_micros, s.finished_epoch_micros)
                {
                    (0, _) | (_, 0) => 0,
                    (a, b) => a.max(b),
                };
            }
            None => spans.push(TaskSpan {
                task,
                start_epoch_micros: s.started_epoch_micros,
                finish_epoch_micros: s.finished_epoch_micros,
            }),
        }
    }
    spans.sort_by_key(|t| t.task);
    spans
}

/// Adds the files planning pruned by partition values to the scan's skipped splits, as a
/// value of no task (Spark's driver-side value).
fn add_listing_pruning(metrics: &mut Vec<NodeMetric>, label: &str, pruned: u64) {
    if pruned == 0 {
        return;
    }
    let value = TaskValue {
        task: None,
        value: saturating_i64(pruned),
    };
    match metrics.iter_mut().find(|m| m.name == names::SKIPPED_SPLITS) {
        Some(skipped) => {
            skipped.value = skipped.value.saturating_add(value.value);
            skipped.tasks.push(value);
        }
        None => metrics.push(catalog::SKIPPED_SPLITS.summed(label, vec![value])),
    }
}

/// A metric summed over the tasks' snapshots of some counters, and how to read it from one.
type SnapshotMetric<S> = (&'static MetricDef, fn(&S) -> u64);

/// Adds to `metrics` those of `table` for an operator labelled `label`, each summed over
/// the tasks' `snapshots` (by partition; `None`: spawned work).
fn add_summed_over_tasks<S>(
    metrics: &mut Vec<NodeMetric>,
    table: &[SnapshotMetric<S>],
    label: &str,
    snapshots: &[(Option<usize>, S)],
    task_of: TaskOf<'_>,
) {
    metrics.extend(table.iter().map(|(def, read)| {
        let values = snapshots
            .iter()
            .map(|(p, s)| TaskValue {
                task: p.and_then(task_of),
                value: saturating_i64(read(s)),
            })
            .collect();
        def.summed(label, values)
    }));
}

#[rustfmt::skip]
const SPILL_METRICS: &[SnapshotMetric<SpillSnapshot>] = &[
    (&catalog::SPILL_FILES_CREATED, |s| s.files),
    (&catalog::SPILL_WRITTEN_BYTES, |s| s.written_bytes),
    (&catalog::SPILL_WRITTEN_ROWS, |s| s.written_rows),
    (&catalog::SPILLED_PARTITIONS, |s| u64::from(s.files > 0)),
    (&catalog::SPILL_WRITE_NANOS, |s| s.write_nanos),
    (&catalog::SPILL_READ_BYTES, |s| s.read_bytes),
    (&catalog::SPILL_READ_NANOS, |s| s.read_nanos),
];

/// Adds the spill metrics of an operator whose tasks spilled, counted at the files.
fn add_spill_metrics(
    metrics: &mut Vec<NodeMetric>,
    reading: &OperatorReading,
    label: &str,
    task_of: TaskOf<'_>,
) {
    if !reading.spill.is_empty() {
        add_summed_over_tasks(metrics, SPILL_METRICS, label, &reading.spill, task_of);
    }
}

/// Adds the base metrics every wrapped operator has, then the tallied metrics its tasks
/// counted (and those every operator has), one value per task.
fn add_base_metrics(
    metrics: &mut Vec<NodeMetric>,
    reading: &OperatorReading,
    label: &str,
    task_of: TaskOf<'_>,
) {
    // spawned work belongs to no output task: it is reported without one, as Spark
    // reports driver-side values
    let snapshots: Vec<(Option<TaskRef>, &OperatorTaskSnapshot)> = reading
        .tasks
        .iter()
        .map(|(p, s)| (task_of(*p), s))
        .chain(reading.spawned.iter().map(|s| (None, s)))
        .collect();
    let series = |def: &MetricDef, read: &dyn Fn(&OperatorTaskSnapshot) -> u64| {
        let values = snapshots
            .iter()
            .map(|(task, s)| TaskValue {
                task: *task,
                value: saturating_i64(read(s)),
            })
            .collect();
        def.summed(label, values)
    };
    let mut peak = series(&catalog::PEAK_MEMORY_BYTES, &|s| s.peak_memory_bytes);
    // the operator's true peak, not the sum of its tasks' peaks (nor, where it is not
    // known, more than the largest task's)
    peak.value = match reading.peak {
        Some(peak) => saturating_i64(peak),
        None => peak.tasks.iter().map(|v| v.value).max().unwrap_or(0),
    };
    metrics.extend([
        series(&catalog::WALL_NANOS, &|s| s.wall_nanos),
        series(&catalog::SELF_WALL_NANOS, &|s| s.self_wall_nanos),
        series(&catalog::CPU_NANOS, &|s| s.cpu_nanos),
        series(&catalog::SELF_CPU_NANOS, &|s| s.self_cpu_nanos),
        series(&catalog::CPU_COUNT, &|s| s.output_vectors),
        series(&catalog::OUTPUT_ROWS, &|s| s.output_rows),
        series(&catalog::OUTPUT_VECTORS, &|s| s.output_vectors),
        series(&catalog::OUTPUT_BYTES, &|s| s.output_bytes),
        peak,
        series(&catalog::NUM_MEMORY_ALLOCATIONS, &|s| s.memory_allocations),
        series(&catalog::NUM_POLLS, &|s| s.polls),
    ]);
    metrics.extend(Tally::all().filter_map(|tally| {
        let counted = snapshots
            .iter()
            .any(|(_, s)| s.tallies.get(tally).is_some());
        (counted || tally.def().family == Family::Every)
            .then(|| series(tally.def(), &|s| s.tallies.get(tally).unwrap_or(0)))
    }));
}

/// An I/O metric summed over tasks.
type IoMetric = SnapshotMetric<IoSnapshot>;

#[rustfmt::skip]
const READ_METRICS: &[IoMetric] = &[
    (&catalog::READ_REQUESTS, |s| s.read_requests),
    (&catalog::READ_BYTES, |s| s.read_bytes),
    (&catalog::STORAGE_READ_BYTES, |s| s.storage_read_bytes),
    (&catalog::LOCAL_READ_BYTES, |s| s.local_read_bytes),
    (&catalog::RAM_READ_BYTES, |s| s.ram_read_bytes),
    (&catalog::DATA_SOURCE_READ_NANOS, |s| s.read_nanos),
    (&catalog::IO_WAIT_NANOS, |s| s.io_wait_nanos),
    (&catalog::METADATA_REQUESTS, |s| s.metadata_requests),
    (&catalog::READ_BYTES_PER_SECOND, |s| s.read_bytes_per_second.round() as u64),
];

#[rustfmt::skip]
const WRITE_METRICS: &[IoMetric] = &[
    (&catalog::WRITE_REQUESTS, |s| s.write_requests),
    (&catalog::PHYSICAL_WRITTEN_BYTES, |s| s.written_bytes),
    (&catalog::WRITTEN_FILES, |s| s.written_files),
    (&catalog::WRITE_IO_NANOS, |s| s.write_nanos),
];

/// Adds the I/O metrics of an operator whose tasks touched storage: the read group unless
/// it only wrote, the write group if it wrote or is a sink. The read-concurrency histogram
/// of all its tasks together goes to `info` as Impala's string.
fn add_io_metrics(
    (metrics, info): (&mut Vec<NodeMetric>, &mut Vec<(String, String)>),
    reading: &OperatorReading,
    label: &str,
    task_of: TaskOf<'_>,
    is_sink: bool,
) {
    if reading.io.is_empty() {
        return;
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
    let summed = |metrics: &mut Vec<NodeMetric>, table| {
        add_summed_over_tasks(metrics, table, label, &reading.io, task_of);
    };
    let total = |read: fn(&IoSnapshot) -> u64| {
        reading
            .io
            .iter()
            .fold(0_u64, |sum, (_, s)| sum.saturating_add(read(s)))
    };
    let reads = total(|s| s.read_requests);
    let writes = total(|s| s.write_requests);
    if reads > 0 || writes == 0 {
        summed(metrics, READ_METRICS);
        // averages as Spark stores them: tenths
        let tenths = |v: f64| (v * 10.0).round() as i64;
        let concurrency = series(&|s| tenths(s.average_read_concurrency));
        let samples = total(|s| s.concurrency_samples);
        let weighted: f64 = reading
            .io
            .iter()
            .map(|(_, s)| s.average_read_concurrency * s.concurrency_samples as f64)
            .sum();
        let average = &catalog::AVERAGE_READ_CONCURRENCY;
        metrics.push(NodeMetric {
            name: average.name.into(),
            display_name: average.display_text(label).into(),
            kind: average.kind,
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
        let overall = bucket_shares(&counts);
        for ((i, share), def) in overall.enumerate().zip(&catalog::READ_CONCURRENCY_BUCKETS) {
            metrics.push(NodeMetric {
                name: def.name.into(),
                display_name: def.display_text(label).into(),
                kind: def.kind,
                value: tenths(share),
                tasks: series(&|s| {
                    tenths(bucket_shares(&s.concurrency_buckets).nth(i).unwrap_or(0.0))
                }),
            });
        }
        info.push((
            names::READ_CONCURRENCY_BUCKET.to_string(),
            bucket_info_string(&counts),
        ));
    }
    if writes > 0 || is_sink {
        summed(metrics, WRITE_METRICS);
    }
}
