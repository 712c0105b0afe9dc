//! The wire format's round trips, and what a damaged or unsafe metric does.
use super::*;
use datafusion::physical_plan::metrics::CustomMetricValue;
use proptest::prelude::*;
use qprof_core::counters::Tallies;
use qprof_core::metric::{TaskRef, TaskValue};

/// A `T` whose numbers in `layout` are `numbers`.
fn snapshot<T: Default>(layout: Layout<T>, numbers: &[u64]) -> T {
    let mut numbers = numbers.iter().copied();
    fields::from_values(layout, || numbers.next()).unwrap()
}

/// Any numbers for a record of `layout`.
fn any_record<T>(layout: Layout<T>) -> impl Strategy<Value = Vec<u64>> {
    proptest::collection::vec(any::<u64>(), layout.len())
}

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
            name.clone(),
            display.clone(),
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

fn io(seed: u64) -> IoSnapshot {
    let buckets = vec![seed, seed + 1, 0, 7];
    IoSnapshot {
        read_requests: seed,
        read_bytes: seed * 1_000,
        read_nanos: u64::MAX - seed,
        storage_read_bytes: 1,
        local_read_bytes: 2,
        ram_read_bytes: 3,
        write_requests: 4,
        written_bytes: 5,
        write_nanos: 6,
        written_files: 7,
        metadata_requests: 8,
        io_wait_nanos: 9,
        average_read_concurrency: seed as f64 / 3.0,
        concurrency_samples: 11,
        concurrency_info: bucket_info_string(&buckets),
        concurrency_buckets: buckets,
        read_bytes_per_second: 1.5e9 + seed as f64,
    }
}

proptest! {
    #[test]
    fn a_reading_comes_back_whole_by_partition(
        tasks in proptest::collection::vec((0usize..3, any_record(COUNTERS)), 0..4),
        spawned in proptest::option::of(any_record(COUNTERS)),
        spills in proptest::collection::vec((proptest::option::of(0usize..3), any_record(SPILL)), 0..3),
        phases in proptest::collection::vec((0usize..3, any_record(PHASE), any_record(PHASE)), 0..3),
        ios in proptest::collection::vec((proptest::option::of(0usize..3), 0u64..1_000), 0..3),
        pruned in 0u64..5,
        peak in 0u64..u64::MAX,
    ) {
        let reading = OperatorReading {
            stage: None,
            tasks: tasks.iter().map(|(p, f)| (*p, snapshot(COUNTERS, f))).collect(),
            spawned: spawned.map(|f| snapshot(COUNTERS, &f)).into_iter().collect(),
            peak: Some(peak).filter(|&p| p > 0),
            io: ios.iter().map(|(p, seed)| (*p, io(*seed))).collect(),
            spill: spills.iter().map(|(p, f)| (*p, snapshot(SPILL, f))).collect(),
            phases: phases
                .iter()
                .map(|(p, build, probe)| (Some(*p), [snapshot(PHASE, build), snapshot(PHASE, probe)]))
                .collect(),
            errors: Vec::new(),
            files_pruned_at_listing: pruned,
        };
        let mut packer = Packer::new();
        packer.reading(&reading);
        let back = decode(&on_scheduler(packer.finish(), |p| p)).reading;
        // the records come back grouped by partition: compare each kind in a fixed order
        let sorted = |mut v: Vec<String>| { v.sort(); v };
        let each = |r: &OperatorReading| {
            (
                sorted(r.tasks.iter().map(|t| format!("{t:?}")).collect()),
                sorted(r.io.iter().map(|t| format!("{t:?}")).collect()),
                sorted(r.spill.iter().map(|t| format!("{t:?}")).collect()),
                sorted(r.phases.iter().map(|t| format!("{t:?}")).collect()),
            )
        };
        prop_assert_eq!(each(&back), each(&reading));
        prop_assert_eq!(&back.spawned, &reading.spawned);
        prop_assert_eq!(back.files_pruned_at_listing, pruned);
        prop_assert_eq!(back.peak, reading.peak);
        prop_assert_eq!(back.stage, None);
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

/// A metric carrying `body` packed, as an executor would ship it.
fn packed(body: &str, partition: Option<usize>) -> Arc<Metric> {
    Arc::new(Metric::new(
        MetricValue::Count {
            name: Cow::Owned(format!("{PACK_PREFIX}{body}")),
            count: Count::new(),
        },
        partition,
    ))
}

proptest! {
    #[test]
    fn any_packed_text_decodes_and_names_without_a_panic(
        noise in ".{0,60}",
        io_fields in any_record(IO),
        buckets in proptest::collection::vec(any::<u64>(), 0..6),
        claimed in 0u64..100,
        counters in any_record(COUNTERS),
    ) {
        let numbers = |values: &[u64]| values.iter().map(|v| format!("{v},")).collect::<String>();
        let io = format!(
            "i{}{claimed},{}",
            numbers(&io_fields),
            numbers(&buckets),
        );
        let mut set = MetricsSet::new();
        for (body, partition) in [
            (noise.clone(), Some(0)),
            (format!("{io}{io}o{}", numbers(&counters)), Some(1)),
            (format!("k{},{noise}", u64::MAX), None),
        ] {
            set.push(packed(&body, partition));
        }
        let decoded = decode(&set);
        let schema = Arc::new(datafusion::arrow::datatypes::Schema::empty());
        let scan = datafusion::physical_plan::empty::EmptyExec::new(schema);
        let task_of = |p: usize| Some(TaskRef { stage_id: 0, stage_attempt: 0, task_id: 0, partition: p as u32 });
        let named = qprof_datafusion::operator_metrics(&scan, &decoded.reading, Vec::new(), &task_of);
        prop_assert!(decoded.reading.io.len() <= 2);
        prop_assert!(named.metrics.iter().all(|m| !m.name.is_empty()));
    }
}

/// Each layout carries every member of its snapshot: a snapshot with each member set
/// (listed in full, so a new member must be added here) comes back whole.
#[test]
fn every_member_of_each_snapshot_crosses() {
    fn round_trip<T: Default>(layout: Layout<T>, s: &T) -> T {
        let numbers: Vec<u64> = fields::values(layout, s).collect();
        snapshot(layout, &numbers)
    }
    let counters = OperatorTaskSnapshot {
        wall_nanos: 1,
        self_wall_nanos: 2,
        cpu_nanos: 3,
        self_cpu_nanos: 4,
        polls: 5,
        output_vectors: 6,
        output_rows: 7,
        output_bytes: 8,
        peak_memory_bytes: 9,
        memory_allocations: 10,
        started_epoch_micros: 11,
        finished_epoch_micros: 12,
        // tallies cross by name, after the layout's numbers: see the test below
        tallies: Tallies::default(),
    };
    assert_eq!(round_trip(COUNTERS, &counters), counters);
    let spill = SpillSnapshot {
        files: 1,
        written_bytes: 2,
        written_rows: 3,
        write_nanos: 4,
        read_bytes: 5,
        read_nanos: 6,
    };
    assert_eq!(round_trip(SPILL, &spill), spill);
    let phase = PhaseSnapshot {
        self_wall_nanos: 1,
        self_cpu_nanos: 2,
        input_rows: 3,
        input_batches: 4,
        output_rows: 5,
        peak_memory_bytes: 6,
        spill,
    };
    assert_eq!(round_trip(PHASE, &phase), phase);
    let figures = TaskFigures {
        start_epoch_millis: 1,
        finish_epoch_millis: 2,
        wall_nanos: 3,
        cpu_nanos: 4,
        memory: MemorySample {
            epoch_millis: 0,
            execution_bytes: 5,
            heap_bytes: 6,
            storage_bytes: 7,
            file_mapped_bytes: 8,
            rss_bytes: 9,
            virtual_bytes: 10,
        },
    };
    assert_eq!(round_trip(TASK, &figures), figures);
}

/// Every tallied metric a task counted crosses with its task's counters, zeros included,
/// for an output task and for spawned work alike; one it did not count stays uncounted.
#[test]
fn tallies_cross_by_name() {
    let mut counted = Tallies::default();
    for (n, tally) in qprof_core::catalog::Tally::all().enumerate() {
        counted.set(tally, n as u64 * 1_000);
    }
    let task = OperatorTaskSnapshot {
        polls: 3,
        tallies: counted,
        ..OperatorTaskSnapshot::default()
    };
    let reading = OperatorReading {
        tasks: vec![(2, task), (4, OperatorTaskSnapshot::default())],
        spawned: vec![task],
        ..OperatorReading::default()
    };
    let mut packer = Packer::new();
    packer.reading(&reading);
    let decoded = decode(&on_scheduler(packer.finish(), |p| p));
    assert_eq!(decoded.reading.tasks, reading.tasks);
    assert_eq!(decoded.reading.spawned, reading.spawned);
    assert_eq!(decoded.reading.tasks[1].1.tallies.counted().count(), 0);
}
