//! qprof's measurements on Ballista's wire.
//!
//! An executor reports each task's metrics to the scheduler as one `MetricsSet` per
//! operator of the stage plan (those whose `metrics()` is `Some`, in pre-order). Ballista
//! carries only some metric kinds: a `MetricValue::Custom` anywhere drops every metric of
//! the task, and a task whose list of sets is longer or shorter than its stage's hangs the
//! job. So qprof rides in the sets that are there, as named `Count`s, a kind Ballista
//! keeps.
//!
//! Each operator's set gets one such metric per partition its values belong to (Ballista
//! maps a task's local partition to the stage's, so the scheduler reads them by the
//! stage's partition), whose name packs every value of that partition:
//! `qprof-pack:5:` then records, each a letter and its fields, text as `<bytes>:<text>`
//! and numbers as `<decimal>,`:
//!
//! - the operator's reading, unnamed: the scheduler names it as a local profile does
//!   ([`qprof_datafusion::operator_metrics`]), so an executor formats no name at all:
//!   - `o` a task's counters (in the group of no partition, spawned work), then the
//!     number of metrics it tallied and each one's name and count,
//!   - `i` its I/O (its counters, the read concurrency's average as the bits of an `f64`,
//!     its sample count, the number of buckets and each bucket, the read rate's bits),
//!   - `s` its spilling, `j` a join's two phases,
//!   - `l` the files planning pruned and `k` the operator's memory peak over all the
//!     task's partitions at once (both of no partition); a failed task's reasons are not
//!     packed: Ballista keeps a failed task's metrics from the scheduler, and its status
//!     carries the reason;
//! - `m` a named metric: kind, name, display name, value (the shuffle writer's, and a
//!   dynamic filter's, which only the executor can name);
//! - `t` the task's own figures (its span, time and memory), on the first set (the
//!   stage's shuffle writer), partition 0 of the task;
//! - `f` what a function call of the operator measured in the task, partition 0 of the
//!   task: function, call text, eight numbers.
//!
//! The numbers of `o`, `i`, `s`, `j` and `t` records are those of their layouts in
//! `fields.rs`, in order: one table each, which packing and unpacking both read.
//!
//! DataFusion's own metrics are not packed: Ballista ships them in the same sets, by
//! partition, and the scheduler names them. Version 3 had no tallies; version 2 shipped qprof's metrics named, as
//! `m` records; version 1 packed DataFusion's too.
//!
//! One metric per operator and partition, where one per value would be hundreds per task:
//! each costs an allocation on the executor and an entry in every message and stage set.

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use datafusion::physical_plan::metrics::{Count, Metric, MetricValue, MetricsSet};
use qprof_core::catalog::Tally;
use qprof_core::counters::OperatorTaskSnapshot;
use qprof_core::executor_memory::MemorySample;
use qprof_core::io::IoSnapshot;
use qprof_core::metric::MetricKind;
use qprof_core::periodic::bucket_info_string;
use qprof_core::phases::PhaseSnapshot;
use qprof_core::profile::{FunctionProfile, NodeMetric};
use qprof_core::sampling::FunctionStats;
use qprof_core::spill::SpillSnapshot;
use qprof_datafusion::OperatorReading;

mod fields;

use fields::{
    COUNTERS, IO, Layout, MAX_BUCKETS, MAX_TALLIES, PHASE, SPILL, TASK, from_values, values,
};

/// The prefix of every metric name qprof puts on the wire.
pub const PREFIX: &str = "qprof";
/// The prefix of a metric that packs qprof's values of one operator and partition,
/// with the format's version.
pub const PACK_PREFIX: &str = "qprof-pack:5:";

/// Whether a metric named `name` is one of qprof's (not the operator's own).
pub fn is_qprof_metric(name: &str) -> bool {
    name.starts_with(PREFIX)
}

/// Whether Ballista carries `value` to the scheduler. A value it cannot carry (today only
/// `Custom`) would drop every metric of its task.
pub fn crosses_the_wire(value: &MetricValue) -> bool {
    !matches!(value, MetricValue::Custom { .. })
}

/// `sets` with every metric Ballista cannot carry left out, and as many sets as before.
pub fn ship_safely(sets: Vec<MetricsSet>) -> Vec<MetricsSet> {
    sets.into_iter()
        .map(|set| {
            if set.iter().all(|m| crosses_the_wire(m.value())) {
                return set;
            }
            let mut kept = MetricsSet::new();
            for metric in set.iter().filter(|m| crosses_the_wire(m.value())) {
                kept.push(Arc::clone(metric));
            }
            kept
        })
        .collect()
}

/// One operator metric read back: its values by partition (`None`: of no task).
#[derive(Debug, Clone, PartialEq)]
pub struct OperatorValues {
    /// qprof's name of the metric.
    pub name: String,
    /// The name to show.
    pub display_name: String,
    /// Its kind.
    pub kind: MetricKind,
    /// Values by partition, in the order they came.
    pub values: Vec<(Option<usize>, u64)>,
}

/// The figures of one task that are not any operator's.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct TaskFigures {
    /// When it started running, epoch ms.
    pub start_epoch_millis: u64,
    /// When it finished, epoch ms.
    pub finish_epoch_millis: u64,
    /// Wall time of running the stage plan, in nanoseconds.
    pub wall_nanos: u64,
    /// CPU time of the threads while they ran the task, in nanoseconds.
    pub cpu_nanos: u64,
    /// The executor's memory peaks while the task ran; execution memory is the task's own
    /// reservation peak.
    pub memory: MemorySample,
}

fn function_fields(f: &FunctionProfile) -> [u64; 8] {
    [
        f.vectors,
        f.rows,
        f.cpu_timed_vectors,
        f.cpu_nanos,
        f.wall_nanos,
        u64::from(f.cpu_extrapolated),
        u64::from(f.wall_extrapolated),
        u64::from(f.recalibrations),
    ]
}

fn function_stats(f: [u64; 8]) -> FunctionStats {
    FunctionStats {
        vectors: f[0],
        rows: f[1],
        cpu_timed_vectors: f[2],
        cpu_nanos: f[3] as f64,
        wall_nanos: f[4] as f64,
        cpu_extrapolated: f[5] != 0,
        wall_extrapolated: f[6] != 0,
        recalibrations: u32::try_from(f[7]).unwrap_or(u32::MAX),
        ..FunctionStats::default()
    }
}

/// Packs qprof's values of one operator in one task into metrics of its set, one per
/// partition the values belong to.
#[derive(Debug, Default)]
pub struct Packer {
    /// The packed text of each partition, in the order first seen.
    groups: Vec<(Option<usize>, String, usize)>,
}

impl Packer {
    /// A packer with nothing in it yet.
    pub fn new() -> Packer {
        Packer::default()
    }

    fn group(&mut self, partition: Option<usize>) -> &mut String {
        let at = match self.groups.iter().position(|(p, _, _)| *p == partition) {
            Some(at) => at,
            None => {
                // room for a task's counters and a few more records without regrowing
                let mut packed = String::with_capacity(256);
                packed.push_str(PACK_PREFIX);
                self.groups.push((partition, packed, 0));
                self.groups.len() - 1
            }
        };
        let group = &mut self.groups[at];
        group.2 += 1;
        &mut group.1
    }

    /// Adds an operator's `metrics`, each value under the partition its task computed
    /// (a value of no task, work the operator spawned, under none).
    pub fn operator(&mut self, metrics: &[NodeMetric]) {
        for m in metrics {
            for v in &m.tasks {
                let out = self.group(v.task.map(|t| t.partition as usize));
                out.push('m');
                text(out, m.kind.as_str());
                text(out, &m.name);
                text(out, &m.display_name);
                number(out, u64::try_from(v.value).unwrap_or(0));
            }
        }
    }

    /// Adds an operator's reading, each value under the partition it belongs to (spawned
    /// work, and what planning pruned, under none).
    pub fn reading(&mut self, reading: &OperatorReading) {
        let tasks = reading.tasks.iter().map(|(p, s)| (Some(*p), s));
        for (partition, s) in tasks.chain(reading.spawned.iter().map(|s| (None, s))) {
            let out = self.group(partition);
            out.push('o');
            record(out, COUNTERS, s);
            number(out, s.tallies.counted().count() as u64);
            for (tally, value) in s.tallies.counted() {
                text(out, tally.def().name);
                number(out, value);
            }
        }
        for (partition, s) in &reading.io {
            let out = self.group(*partition);
            out.push('i');
            record(out, IO, s);
            number(out, s.concurrency_buckets.len() as u64);
            numbers(out, &s.concurrency_buckets);
            number(out, s.read_bytes_per_second.to_bits());
        }
        for (partition, s) in &reading.spill {
            let out = self.group(*partition);
            out.push('s');
            record(out, SPILL, s);
        }
        for (partition, [build, probe]) in &reading.phases {
            let out = self.group(*partition);
            out.push('j');
            record(out, PHASE, build);
            record(out, PHASE, probe);
        }
        if reading.files_pruned_at_listing > 0 {
            let out = self.group(None);
            out.push('l');
            number(out, reading.files_pruned_at_listing);
        }
        if let Some(peak) = reading.peak.filter(|&p| p > 0) {
            let out = self.group(None);
            out.push('k');
            number(out, peak);
        }
    }

    /// Adds what the operator's function calls measured in the task.
    pub fn functions(&mut self, functions: &[FunctionProfile]) {
        for f in functions {
            let out = self.group(Some(0));
            out.push('f');
            text(out, &f.name);
            text(out, &f.expression);
            for value in function_fields(f) {
                number(out, value);
            }
        }
    }

    /// Adds the task's own figures.
    pub fn task(&mut self, figures: &TaskFigures) {
        let out = self.group(Some(0));
        out.push('t');
        record(out, TASK, figures);
    }

    /// The packed metrics, one per partition, each counting its records.
    pub fn finish(self) -> Vec<Metric> {
        self.groups
            .into_iter()
            .map(|(partition, name, records)| {
                let count = Count::new();
                count.add(records);
                Metric::new(
                    MetricValue::Count {
                        name: Cow::Owned(name),
                        count,
                    },
                    partition,
                )
            })
            .collect()
    }
}

fn text(out: &mut String, value: &str) {
    out.push_str(itoa::Buffer::new().format(value.len()));
    out.push(':');
    out.push_str(value);
}

fn number(out: &mut String, value: u64) {
    out.push_str(itoa::Buffer::new().format(value));
    out.push(',');
}

fn numbers(out: &mut String, values: &[u64]) {
    for &value in values {
        number(out, value);
    }
}

/// `s`'s numbers in `layout`'s order.
fn record<T>(out: &mut String, layout: Layout<T>, s: &T) {
    for value in values(layout, s) {
        number(out, value);
    }
}

/// Reads a packed metric's records, in order.
struct Unpacker<'a> {
    rest: &'a str,
}

/// One record of a packed metric.
enum Record<'a> {
    Operator {
        kind: MetricKind,
        name: &'a str,
        display: &'a str,
        value: u64,
    },
    Function {
        name: &'a str,
        expression: &'a str,
        fields: [u64; 8],
    },
    Task(TaskFigures),
    Counters(OperatorTaskSnapshot),
    Io(IoSnapshot),
    Spill(SpillSnapshot),
    Phases([PhaseSnapshot; 2]),
    Listing(u64),
    Peak(u64),
}

impl<'a> Unpacker<'a> {
    fn text(&mut self) -> Option<&'a str> {
        let (len, rest) = self.rest.split_once(':')?;
        let len: usize = len.parse().ok()?;
        let value = rest.get(..len)?;
        self.rest = &rest[len..];
        Some(value)
    }

    fn number(&mut self) -> Option<u64> {
        let (value, rest) = self.rest.split_once(',')?;
        self.rest = rest;
        value.parse().ok()
    }

    fn numbers<const N: usize>(&mut self) -> Option<[u64; N]> {
        let mut out = [0; N];
        for slot in &mut out {
            *slot = self.number()?;
        }
        Some(out)
    }

    /// A record of `layout`'s numbers.
    fn record<T: Default>(&mut self, layout: Layout<T>) -> Option<T> {
        from_values(layout, || self.number())
    }

    fn io(&mut self) -> Option<IoSnapshot> {
        let fixed = self.record(IO)?;
        let buckets = self.number()?;
        if buckets > MAX_BUCKETS {
            return None;
        }
        let concurrency_buckets = (0..buckets)
            .map(|_| self.number())
            .collect::<Option<Vec<u64>>>()?;
        let read_bytes_per_second = f64::from_bits(self.number()?);
        Some(IoSnapshot {
            concurrency_info: bucket_info_string(&concurrency_buckets),
            concurrency_buckets,
            read_bytes_per_second,
            ..fixed
        })
    }

    /// A task's counters: those of the layout, then its tallies by name (one this build
    /// does not tally is skipped).
    fn counters(&mut self) -> Option<OperatorTaskSnapshot> {
        let mut counters = self.record(COUNTERS)?;
        let tallied = self.number()?;
        if tallied > MAX_TALLIES {
            return None;
        }
        for _ in 0..tallied {
            let name = self.text()?;
            let value = self.number()?;
            if let Some(tally) = Tally::named(name) {
                counters.tallies.set(tally, value);
            }
        }
        Some(counters)
    }

    /// The next record; `None` at the end or at anything malformed (the rest is skipped).
    fn next_record(&mut self) -> Option<Record<'a>> {
        let mut chars = self.rest.chars();
        let tag = chars.next()?;
        self.rest = chars.as_str();
        match tag {
            'm' => {
                let kind = self.text()?.parse().ok()?;
                let name = self.text()?;
                let display = self.text()?;
                let value = self.number()?;
                Some(Record::Operator {
                    kind,
                    name,
                    display,
                    value,
                })
            }
            'f' => {
                let name = self.text()?;
                let expression = self.text()?;
                let fields = self.numbers()?;
                Some(Record::Function {
                    name,
                    expression,
                    fields,
                })
            }
            't' => self.record(TASK).map(Record::Task),
            'o' => self.counters().map(Record::Counters),
            'i' => self.io().map(Record::Io),
            's' => self.record(SPILL).map(Record::Spill),
            'j' => {
                let build = self.record(PHASE)?;
                let probe = self.record(PHASE)?;
                Some(Record::Phases([build, probe]))
            }
            'l' => Some(Record::Listing(self.number()?)),
            'k' => Some(Record::Peak(self.number()?)),
            _ => None,
        }
    }
}

/// What one function call of an operator measured, by the (global) partition of the task
/// that measured it.
#[derive(Debug, Clone, PartialEq)]
pub struct FunctionValues {
    /// The function.
    pub name: String,
    /// The call as written in the plan.
    pub expression: String,
    /// The figures of each task, by its partition.
    pub by_task: BTreeMap<usize, FunctionStats>,
}

impl FunctionValues {
    /// The call's profile over all its tasks.
    pub fn profile(&self) -> FunctionProfile {
        let stats: Vec<FunctionStats> = self.by_task.values().cloned().collect();
        FunctionProfile::from_stats(&self.name, &self.expression, &stats)
    }
}

/// What qprof put in one operator's set, read back on the scheduler.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Decoded {
    /// The operator's metrics, in the order they came.
    pub operator: Vec<OperatorValues>,
    /// The operator's reading, each value under the (global) partition it was tagged
    /// with; several tasks' together.
    pub reading: OperatorReading,
    /// Task figures by the (global) partition they were tagged with.
    pub tasks: BTreeMap<usize, TaskFigures>,
    /// The operator's function calls, in the order they came.
    pub functions: Vec<FunctionValues>,
}

/// qprof's metrics of `set`; every other metric is left alone, and so is what follows a
/// malformed record.
pub fn decode(set: &MetricsSet) -> Decoded {
    let mut decoded = Decoded::default();
    let mut index: HashMap<(MetricKind, &str, &str), usize> = HashMap::new();
    let mut functions: HashMap<(&str, &str), usize> = HashMap::new();
    for metric in set.iter() {
        let Some(body) = metric.value().name().strip_prefix(PACK_PREFIX) else {
            continue;
        };
        let partition = metric.partition();
        let mut records = Unpacker { rest: body };
        while let Some(record) = records.next_record() {
            match record {
                Record::Operator {
                    kind,
                    name,
                    display,
                    value,
                } => {
                    let at = *index.entry((kind, name, display)).or_insert_with(|| {
                        decoded.operator.push(OperatorValues {
                            name: name.to_string(),
                            display_name: display.to_string(),
                            kind,
                            values: Vec::new(),
                        });
                        decoded.operator.len() - 1
                    });
                    decoded.operator[at].values.push((partition, value));
                }
                Record::Function {
                    name,
                    expression,
                    fields,
                } => {
                    let Some(p) = partition else { continue };
                    let at = *functions.entry((name, expression)).or_insert_with(|| {
                        decoded.functions.push(FunctionValues {
                            name: name.to_string(),
                            expression: expression.to_string(),
                            by_task: BTreeMap::new(),
                        });
                        decoded.functions.len() - 1
                    });
                    decoded.functions[at]
                        .by_task
                        .insert(p, function_stats(fields));
                }
                Record::Task(figures) => {
                    if let Some(p) = partition {
                        decoded.tasks.insert(p, figures);
                    }
                }
                Record::Counters(counters) => match partition {
                    Some(p) => decoded.reading.tasks.push((p, counters)),
                    None => decoded.reading.spawned.push(counters),
                },
                Record::Io(io) => decoded.reading.io.push((partition, io)),
                Record::Spill(spill) => decoded.reading.spill.push((partition, spill)),
                Record::Phases(phases) => decoded.reading.phases.push((partition, phases)),
                Record::Listing(files) => {
                    let pruned = &mut decoded.reading.files_pruned_at_listing;
                    *pruned = pruned.saturating_add(files);
                }
                // several tasks' peaks: the largest (they need not have run together)
                Record::Peak(peak) => {
                    decoded.reading.peak = Some(decoded.reading.peak.unwrap_or(0).max(peak));
                }
            }
        }
    }
    decoded
}

#[cfg(test)]
mod tests;
