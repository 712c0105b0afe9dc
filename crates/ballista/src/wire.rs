//! qprof's measurements on Ballista's wire.
//!
//! An executor reports each task's metrics to the scheduler as one `MetricsSet` per
//! operator of the stage plan (those whose `metrics()` is `Some`, in pre-order). Ballista
//! carries only some metric kinds: a `MetricValue::Custom` anywhere drops every metric of
//! the task, and a task whose list of sets is longer or shorter than its stage's hangs the
//! job. So qprof rides in the sets that are there, as named metrics of the kinds Ballista
//! keeps (`Count`, `Gauge`, `Time`), one per value and partition, with the metric's kind,
//! name and display name in the metric's name:
//!
//! - an operator's metric: `qprof:<kind>:<name>:<display name>`;
//! - a task's own figures (its time, memory and span): `qprof-task:<field>`, on the first
//!   set (the stage's shuffle writer), partition 0 of the task;
//! - what a function call of an operator measured in a task:
//!   `qprof-fn:<field>:<function>:<call>`, on the operator's set, partition 0 of the task.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use datafusion::physical_plan::metrics::{Count, Gauge, Metric, MetricValue, MetricsSet, Time};
use qprof_core::executor_memory::MemorySample;
use qprof_core::metric::MetricKind;
use qprof_core::profile::{FunctionProfile, NodeMetric};
use qprof_core::sampling::FunctionStats;

/// The prefix of an operator metric of qprof.
pub const OPERATOR_PREFIX: &str = "qprof:";
/// The prefix of a task figure of qprof.
pub const TASK_PREFIX: &str = "qprof-task:";
/// The prefix of a function call's figure of qprof.
pub const FUNCTION_PREFIX: &str = "qprof-fn:";

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

fn clamp(value: i64) -> usize {
    usize::try_from(value.max(0)).unwrap_or(usize::MAX)
}

/// A named metric of the kind that suits `kind` (times as `Time`, sizes as `Gauge`).
fn named(name: String, kind: MetricKind, value: usize) -> MetricValue {
    let name = Cow::Owned(name);
    match kind {
        MetricKind::NsTiming => {
            let time = Time::new();
            time.add_duration(Duration::from_nanos(value as u64));
            MetricValue::Time { name, time }
        }
        MetricKind::Size => {
            let gauge = Gauge::new();
            gauge.set(value);
            MetricValue::Gauge { name, gauge }
        }
        _ => {
            let count = Count::new();
            count.add(value);
            MetricValue::Count { name, count }
        }
    }
}

/// `metrics` of one operator as named metrics, one per task value, tagged with the
/// partition the value's task computed; a value of no task (work the operator spawned)
/// has no partition.
pub fn encode_operator(metrics: &[NodeMetric]) -> Vec<Metric> {
    let mut out = Vec::new();
    for m in metrics {
        let name = format!(
            "{OPERATOR_PREFIX}{}:{}:{}",
            m.kind.as_str(),
            m.name,
            m.display_name
        );
        for v in &m.tasks {
            out.push(Metric::new(
                named(name.clone(), m.kind, clamp(v.value)),
                v.task.map(|t| t.partition as usize),
            ));
        }
    }
    out
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

const TASK_FIELDS: [&str; 10] = [
    "start",
    "finish",
    "wallNanos",
    "cpuNanos",
    "executionBytes",
    "heapBytes",
    "storageBytes",
    "fileMappedBytes",
    "rssBytes",
    "virtualBytes",
];

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

    fn set_field(&mut self, field: &str, value: u64) {
        let m = &mut self.memory;
        match field {
            "start" => self.start_epoch_millis = value,
            "finish" => self.finish_epoch_millis = value,
            "wallNanos" => self.wall_nanos = value,
            "cpuNanos" => self.cpu_nanos = value,
            "executionBytes" => m.execution_bytes = value,
            "heapBytes" => m.heap_bytes = value,
            "storageBytes" => m.storage_bytes = value,
            "fileMappedBytes" => m.file_mapped_bytes = value,
            "rssBytes" => m.rss_bytes = value,
            "virtualBytes" => m.virtual_bytes = value,
            _ => {}
        }
    }

    /// The figures as gauges of local partition 0 (the first of the task's partitions).
    pub fn encode(&self) -> Vec<Metric> {
        TASK_FIELDS
            .iter()
            .zip(self.fields())
            .map(|(field, value)| {
                Metric::new(
                    named(
                        format!("{TASK_PREFIX}{field}"),
                        MetricKind::Size,
                        usize::try_from(value).unwrap_or(usize::MAX),
                    ),
                    Some(0),
                )
            })
            .collect()
    }
}

const FUNCTION_FIELDS: [&str; 8] = [
    "vectors",
    "rows",
    "cpuTimedVectors",
    "cpuNanos",
    "wallNanos",
    "cpuExtrapolated",
    "wallExtrapolated",
    "recalibrations",
];

/// What the function calls of one operator measured in one task, as named metrics of
/// local partition 0 (the first of the task's partitions): times as `Time`, the rest as
/// `Count` (a flag as 0 or 1).
pub fn encode_functions(functions: &[FunctionProfile]) -> Vec<Metric> {
    let mut out = Vec::new();
    for f in functions {
        let values = [
            f.vectors,
            f.rows,
            f.cpu_timed_vectors,
            f.cpu_nanos,
            f.wall_nanos,
            u64::from(f.cpu_extrapolated),
            u64::from(f.wall_extrapolated),
            u64::from(f.recalibrations),
        ];
        for (field, value) in FUNCTION_FIELDS.iter().zip(values) {
            let kind = if field.ends_with("Nanos") {
                MetricKind::NsTiming
            } else {
                MetricKind::Sum
            };
            out.push(Metric::new(
                named(
                    format!("{FUNCTION_PREFIX}{field}:{}:{}", f.name, f.expression),
                    kind,
                    usize::try_from(value).unwrap_or(usize::MAX),
                ),
                Some(0),
            ));
        }
    }
    out
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

fn set_function_field(stats: &mut FunctionStats, field: &str, value: u64) {
    match field {
        "vectors" => stats.vectors = value,
        "rows" => stats.rows = value,
        "cpuTimedVectors" => stats.cpu_timed_vectors = value,
        "cpuNanos" => stats.cpu_nanos = value as f64,
        "wallNanos" => stats.wall_nanos = value as f64,
        "cpuExtrapolated" => stats.cpu_extrapolated = value != 0,
        "wallExtrapolated" => stats.wall_extrapolated = value != 0,
        "recalibrations" => stats.recalibrations = u32::try_from(value).unwrap_or(u32::MAX),
        _ => {}
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

fn value_of(value: &MetricValue) -> u64 {
    match value {
        MetricValue::Time { time, .. } => time.value() as u64,
        other => other.as_usize() as u64,
    }
}

/// qprof's metrics of `set`; every other metric is left alone.
pub fn decode(set: &MetricsSet) -> Decoded {
    let mut decoded = Decoded::default();
    let mut index: BTreeMap<String, usize> = BTreeMap::new();
    for metric in set.iter() {
        let value = metric.value();
        let name = value.name();
        if let Some(field) = name.strip_prefix(TASK_PREFIX) {
            if let Some(p) = metric.partition() {
                decoded
                    .tasks
                    .entry(p)
                    .or_default()
                    .set_field(field, value_of(value));
            }
            continue;
        }
        if let Some(rest) = name.strip_prefix(FUNCTION_PREFIX) {
            let mut parts = rest.splitn(3, ':');
            let (Some(field), Some(function), Some(expression), Some(p)) =
                (parts.next(), parts.next(), parts.next(), metric.partition())
            else {
                continue;
            };
            let at = decoded
                .functions
                .iter()
                .position(|f| f.name == function && f.expression == expression)
                .unwrap_or_else(|| {
                    decoded.functions.push(FunctionValues {
                        name: function.to_string(),
                        expression: expression.to_string(),
                        by_task: BTreeMap::new(),
                    });
                    decoded.functions.len() - 1
                });
            let stats = decoded.functions[at].by_task.entry(p).or_default();
            set_function_field(stats, field, value_of(value));
            continue;
        }
        let Some(rest) = name.strip_prefix(OPERATOR_PREFIX) else {
            continue;
        };
        let mut parts = rest.splitn(3, ':');
        let (Some(kind), Some(metric_name), Some(display)) =
            (parts.next(), parts.next(), parts.next())
        else {
            continue;
        };
        let Ok(kind) = kind.parse::<MetricKind>() else {
            continue;
        };
        let at = *index.entry(name.to_string()).or_insert_with(|| {
            decoded.operator.push(OperatorValues {
                name: metric_name.to_string(),
                display_name: display.to_string(),
                kind,
                values: Vec::new(),
            });
            decoded.operator.len() - 1
        });
        decoded.operator[at]
            .values
            .push((metric.partition(), value_of(value)));
    }
    decoded
}

#[cfg(test)]
mod tests {
    use super::*;
    use qprof_core::metric::{TaskRef, TaskValue};

    fn task(partition: u32) -> Option<TaskRef> {
        Some(TaskRef {
            stage_id: 0,
            stage_attempt: 0,
            task_id: u64::from(partition),
            partition,
        })
    }

    #[test]
    fn function_calls_come_back_by_call_and_task() {
        let call = |expression: &str, vectors: u64, cpu_timed: u64| FunctionProfile {
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
        };
        // two tasks (the scheduler tags each with its own partition), two calls, one
        // of them with a colon in its text
        let mut set = MetricsSet::new();
        for (task, vectors) in [(3, 8), (5, 2)] {
            for metric in encode_functions(&[
                call("upper(a@0)", vectors, vectors / 2),
                call("upper(b@1):x", 4, 4),
            ]) {
                let value = metric.value().clone();
                set.push(Arc::new(Metric::new(value, Some(task))));
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
        assert_eq!(b.expression, "upper(b@1):x");
        assert_eq!(
            (b.vectors, b.cpu_timed_vectors, b.mode.as_str()),
            (8, 8, "full")
        );
        assert_eq!(
            decoded.functions[1].by_task.keys().collect::<Vec<_>>(),
            [&3, &5]
        );
    }

    #[test]
    fn operator_metrics_come_back_with_kind_names_and_partitions() {
        let metrics = vec![
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
                "peak memory",
                MetricKind::Size,
                vec![TaskValue {
                    task: task(1),
                    value: 4096,
                }],
            ),
        ];
        let mut set = MetricsSet::new();
        for m in encode_operator(&metrics) {
            set.push(Arc::new(m));
        }
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
            vec![(Some(0), 1_500), (Some(1), 2_500), (None, 7)]
        );
        assert_eq!(decoded.operator[1].values, vec![(Some(1), 4096)]);
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
                virtual_bytes: 6,
            },
        };
        let mut set = MetricsSet::new();
        for m in figures.encode() {
            set.push(Arc::new(m));
        }
        let decoded = decode(&set);
        assert_eq!(decoded.tasks.len(), 1);
        assert_eq!(decoded.tasks[&0], figures);
    }

    #[test]
    fn a_custom_metric_is_dropped_and_the_set_count_kept() {
        use datafusion::physical_plan::metrics::CustomMetricValue;
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
