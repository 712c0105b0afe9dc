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
//! `qprof-pack:2:` then records, each a letter and its fields, text as `<bytes>:<text>`
//! and numbers as `<decimal>,`:
//!
//! - `m` an operator's metric of qprof's own: kind, name, display name, value (DataFusion's
//!   own metrics are not packed: Ballista ships them in the same sets, by partition, and
//!   the scheduler names them; version 1 packed them too);
//! - `t` the task's own figures (its span, time and memory), on the first set (the
//!   stage's shuffle writer), partition 0 of the task: ten numbers;
//! - `f` what a function call of the operator measured in the task, partition 0 of the
//!   task: function, call text, eight numbers.
//!
//! One metric per operator and partition, where one per value would be hundreds per task:
//! each costs an allocation on the executor and an entry in every message and stage set.

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use datafusion::physical_plan::metrics::{Count, Metric, MetricValue, MetricsSet};
use qprof_core::executor_memory::MemorySample;
use qprof_core::metric::MetricKind;
use qprof_core::profile::{FunctionProfile, NodeMetric};
use qprof_core::sampling::FunctionStats;

/// The prefix of every metric name qprof puts on the wire.
pub const PREFIX: &str = "qprof";
/// The prefix of a metric that packs qprof's values of one operator and partition,
/// with the format's version.
pub const PACK_PREFIX: &str = "qprof-pack:2:";

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

impl TaskFigures {
    fn fields(&self) -> [u64; 10] {
        let m = &self.memory;
        [
            self.start_epoch_millis,
            self.finish_epoch_millis,
            self.wall_nanos,
            self.cpu_nanos,
            m.execution_bytes,
            m.heap_bytes,
            m.storage_bytes,
            m.file_mapped_bytes,
            m.rss_bytes,
            m.virtual_bytes,
        ]
    }

    fn from_fields(f: [u64; 10]) -> TaskFigures {
        TaskFigures {
            start_epoch_millis: f[0],
            finish_epoch_millis: f[1],
            wall_nanos: f[2],
            cpu_nanos: f[3],
            memory: MemorySample {
                epoch_millis: 0,
                execution_bytes: f[4],
                heap_bytes: f[5],
                storage_bytes: f[6],
                file_mapped_bytes: f[7],
                rss_bytes: f[8],
                virtual_bytes: f[9],
            },
        }
    }
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
                self.groups.push((partition, String::from(PACK_PREFIX), 0));
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
        for value in figures.fields() {
            number(out, value);
        }
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
    Task([u64; 10]),
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
            't' => Some(Record::Task(self.numbers()?)),
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
                Record::Task(fields) => {
                    if let Some(p) = partition {
                        decoded.tasks.insert(p, TaskFigures::from_fields(fields));
                    }
                }
            }
        }
    }
    decoded
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::physical_plan::metrics::CustomMetricValue;
    use proptest::prelude::*;
    use qprof_core::metric::{TaskRef, TaskValue};

    fn task(partition: u32) -> Option<TaskRef> {
        Some(TaskRef {
            stage_id: 0,
            stage_attempt: 0,
            task_id: u64::from(partition),
            partition,
        })
    }

    /// `metrics` in a set, each tagged as the scheduler tags it: its local partition
    /// mapped through `to_stage`.
    fn on_scheduler(metrics: Vec<Metric>, to_stage: impl Fn(usize) -> usize) -> MetricsSet {
        let mut set = MetricsSet::new();
        for m in metrics {
            let partition = m.partition().map(&to_stage);
            set.push(Arc::new(Metric::new(m.value().clone(), partition)));
        }
        set
    }

    fn call(expression: &str, vectors: u64, cpu_timed: u64) -> FunctionProfile {
        FunctionProfile {
            name: "upper".into(),
            expression: expression.into(),
            vectors,
            rows: vectors * 100,
            cpu_timed_vectors: cpu_timed,
            cpu_nanos: 9_000,
            wall_nanos: 11_000,
            cpu_extrapolated: cpu_timed < vectors,
            wall_extrapolated: false,
            mode: String::new(),
            recalibrations: 1,
        }
    }

    #[test]
    fn function_calls_come_back_by_call_and_task() {
        // two tasks (the scheduler tags each with its own partition), two calls, one
        // of them with the format's separators and a digit in its text
        let mut set = MetricsSet::new();
        for (task, vectors) in [(3, 8), (5, 2)] {
            let mut packer = Packer::new();
            packer.functions(&[
                call("upper(a@0)", vectors, vectors / 2),
                call("upper(b@1):x,7:", 4, 4),
            ]);
            for m in on_scheduler(packer.finish(), |_| task).iter() {
                set.push(Arc::clone(m));
            }
        }
        let decoded = decode(&set);
        assert!(decoded.operator.is_empty());
        assert_eq!(decoded.functions.len(), 2);
        let a = decoded.functions[0].profile();
        assert_eq!(
            (a.name.as_str(), a.expression.as_str()),
            ("upper", "upper(a@0)")
        );
        assert_eq!((a.vectors, a.rows, a.cpu_timed_vectors), (10, 1_000, 5));
        assert_eq!(
            (a.cpu_nanos, a.wall_nanos, a.recalibrations),
            (18_000, 22_000, 2)
        );
        assert!(a.cpu_extrapolated && !a.wall_extrapolated);
        assert_eq!(a.mode, "sampled 1/2");
        let b = decoded.functions[1].profile();
        assert_eq!(b.expression, "upper(b@1):x,7:");
        assert_eq!(
            (b.vectors, b.cpu_timed_vectors, b.mode.as_str()),
            (8, 8, "full")
        );
        assert_eq!(
            decoded.functions[1].by_task.keys().collect::<Vec<_>>(),
            [&3, &5]
        );
    }

    fn two_metrics() -> Vec<NodeMetric> {
        vec![
            NodeMetric::summed(
                "selfCpuNanos",
                "self CPU time: a, b",
                MetricKind::NsTiming,
                vec![
                    TaskValue {
                        task: task(0),
                        value: 1_500,
                    },
                    TaskValue {
                        task: task(1),
                        value: 2_500,
                    },
                    TaskValue {
                        task: None,
                        value: 7,
                    },
                ],
            ),
            NodeMetric::summed(
                "peakMemoryBytes",
                "peak memory — größte",
                MetricKind::Size,
                vec![TaskValue {
                    task: task(1),
                    value: 4096,
                }],
            ),
        ]
    }

    #[test]
    fn operator_metrics_come_back_with_kind_names_and_partitions() {
        let mut packer = Packer::new();
        packer.operator(&two_metrics());
        let packed = packer.finish();
        // one metric per partition (0, 1 and none), not one per value
        assert_eq!(packed.len(), 3);
        let mut set = on_scheduler(packed, |p| p + 10);
        // a metric of DataFusion's own stays out of it
        set.push(Arc::new(Metric::new(
            MetricValue::OutputRows(Count::new()),
            Some(0),
        )));
        let decoded = decode(&set);
        assert_eq!(decoded.operator.len(), 2);
        let cpu = &decoded.operator[0];
        assert_eq!(cpu.name, "selfCpuNanos");
        assert_eq!(cpu.display_name, "self CPU time: a, b");
        assert_eq!(cpu.kind, MetricKind::NsTiming);
        assert_eq!(
            cpu.values,
            vec![(Some(10), 1_500), (Some(11), 2_500), (None, 7)]
        );
        assert_eq!(decoded.operator[1].display_name, "peak memory — größte");
        assert_eq!(decoded.operator[1].values, vec![(Some(11), 4096)]);
        assert!(decoded.tasks.is_empty());
    }

    #[test]
    fn task_figures_come_back_whole() {
        let figures = TaskFigures {
            start_epoch_millis: 1_700_000_000_000,
            finish_epoch_millis: 1_700_000_000_250,
            wall_nanos: 250_000_000,
            cpu_nanos: 180_000_000,
            memory: MemorySample {
                epoch_millis: 0,
                heap_bytes: 1,
                execution_bytes: 2,
                storage_bytes: 3,
                file_mapped_bytes: 4,
                rss_bytes: 5,
                virtual_bytes: u64::MAX,
            },
        };
        let mut packer = Packer::new();
        packer.task(&figures);
        let decoded = decode(&on_scheduler(packer.finish(), |_| 4));
        assert_eq!(decoded.tasks.len(), 1);
        assert_eq!(decoded.tasks[&4], figures);
    }

    #[test]
    fn a_damaged_pack_keeps_the_records_before_the_damage() {
        let mut packer = Packer::new();
        packer.operator(&[NodeMetric::summed(
            "outputRows",
            "output rows",
            MetricKind::Sum,
            vec![TaskValue {
                task: task(0),
                value: 12,
            }],
        )]);
        packer.functions(&[call("upper(a@0)", 2, 2)]);
        let name = packer.finish()[0].value().name().to_string();
        let records_end = name.find("f5:upper").unwrap();
        for cut in [
            name.len() - 1,
            records_end + 1,
            records_end + 3,
            PACK_PREFIX.len() + 1,
        ] {
            let damaged = [&name[..cut], "9999:x"].concat();
            let count = Count::new();
            let mut set = MetricsSet::new();
            set.push(Arc::new(Metric::new(
                MetricValue::Count {
                    name: Cow::Owned(damaged),
                    count,
                },
                Some(0),
            )));
            let decoded = decode(&set);
            assert!(decoded.functions.is_empty(), "cut at {cut}");
            let expected = usize::from(cut > records_end);
            assert_eq!(decoded.operator.len(), expected, "cut at {cut}");
        }
    }

    proptest! {
        #[test]
        fn any_text_and_value_come_back(
            name in ".{0,12}",
            display in ".{0,24}",
            expression in ".{0,24}",
            values in proptest::collection::vec((0u32..4, 0i64..i64::MAX), 1..6),
        ) {
            let metric = NodeMetric::summed(
                name.as_str(),
                display.as_str(),
                MetricKind::Sum,
                values
                    .iter()
                    .map(|(p, v)| TaskValue { task: task(*p), value: *v })
                    .collect(),
            );
            let mut f = call(&expression, 3, 1);
            f.name = name.clone();
            let mut packer = Packer::new();
            packer.operator(std::slice::from_ref(&metric));
            packer.functions(std::slice::from_ref(&f));
            let decoded = decode(&on_scheduler(packer.finish(), |p| p));
            prop_assert_eq!(decoded.operator.len(), 1);
            let back = &decoded.operator[0];
            prop_assert_eq!(&back.name, &name);
            prop_assert_eq!(&back.display_name, &display);
            let mut sent: Vec<(Option<usize>, u64)> = values
                .iter()
                .map(|(p, v)| (Some(*p as usize), *v as u64))
                .collect();
            let mut got = back.values.clone();
            sent.sort_unstable();
            got.sort_unstable();
            prop_assert_eq!(got, sent);
            prop_assert_eq!(decoded.functions.len(), 1);
            prop_assert_eq!(&decoded.functions[0].name, &name);
            prop_assert_eq!(&decoded.functions[0].expression, &expression);
            prop_assert_eq!(decoded.functions[0].by_task[&0].vectors, 3);
        }
    }

    #[test]
    fn a_custom_metric_is_dropped_and_the_set_count_kept() {
        #[derive(Debug)]
        struct Opaque;
        impl std::fmt::Display for Opaque {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                write!(f, "opaque")
            }
        }
        impl CustomMetricValue for Opaque {
            fn new_empty(&self) -> Arc<dyn CustomMetricValue> {
                Arc::new(Opaque)
            }
            fn aggregate(&self, _other: Arc<dyn CustomMetricValue + 'static>) {}
            fn as_any(&self) -> &dyn std::any::Any {
                self
            }
            fn is_eq(&self, _other: &Arc<dyn CustomMetricValue>) -> bool {
                true
            }
        }
        let mut with_custom = MetricsSet::new();
        with_custom.push(Arc::new(Metric::new(
            MetricValue::Custom {
                name: Cow::Borrowed("opaque"),
                value: Arc::new(Opaque),
            },
            Some(0),
        )));
        with_custom.push(Arc::new(Metric::new(
            MetricValue::OutputRows(Count::new()),
            Some(0),
        )));
        let shipped = ship_safely(vec![MetricsSet::new(), with_custom]);
        assert_eq!(shipped.len(), 2);
        assert!(shipped[1].iter().all(|m| crosses_the_wire(m.value())));
        assert_eq!(shipped[1].iter().count(), 1);
    }
}
