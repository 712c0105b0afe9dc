//! Tests of the trace a query's end becomes, on a hand-built profile.

use std::collections::HashMap;

use opentelemetry::trace::{SpanId, Status};
use opentelemetry_sdk::trace::RandomIdGenerator;
use qprof_core::events::QueryEnd;
use qprof_core::metric::TaskRef;
use qprof_core::planning::{PhaseTiming, PlanChange, PlanningPhase, PlanningProfile, RuleTiming};
use qprof_core::profile::fixtures::sample;
use qprof_core::profile::{QueryProfile, TaskProfile, TaskSpan};
use qprof_core::trace_parent::TraceParent;

use super::*;

const START_MICROS: u64 = 1_795_333_320_377_000;

fn task(task_id: u64) -> TaskRef {
    TaskRef {
        stage_id: 0,
        stage_attempt: 0,
        task_id,
        partition: task_id as u32,
    }
}

/// The sample profile with two tasks, each having run every operator, and its planning.
fn profile() -> QueryProfile {
    let mut p = sample();
    let second = TaskProfile {
        task_id: 1,
        partition: 1,
        ..p.stages[0].tasks[0].clone()
    };
    p.stages[0].tasks.push(second);
    fn spans(node: &mut ProfileNode) {
        node.task_spans = (0..2)
            .map(|t| TaskSpan {
                task: task(t),
                // deeper operators start later and end sooner
                start_epoch_micros: START_MICROS + 20_000 + node.id as u64 * 10,
                finish_epoch_micros: START_MICROS + 60_000 - node.id as u64 * 10,
            })
            .collect();
        node.children.iter_mut().for_each(spans);
    }
    spans(&mut p.plan);
    let phase = |phase, start_nanos, end_nanos| PhaseTiming {
        phase,
        start_nanos,
        end_nanos,
        wall_nanos: end_nanos - start_nanos,
        cpu_nanos: (end_nanos - start_nanos) / 2,
    };
    p.planning = Some(PlanningProfile {
        start_epoch_micros: START_MICROS + 100,
        phases: vec![
            phase(PlanningPhase::Parse, 0, 1_000),
            phase(PlanningPhase::LogicalPlan, 1_000, 5_000),
            phase(PlanningPhase::Optimizer, 5_000, 9_000),
            phase(PlanningPhase::PhysicalPlan, 9_000, 19_000),
            phase(PlanningPhase::PhysicalOptimizer, 12_000, 15_000),
        ],
        rules: vec![
            RuleTiming {
                phase: PlanningPhase::Optimizer,
                name: "push_down_filter".into(),
                first_start_nanos: 5_000,
                last_end_nanos: 9_000,
                wall_nanos: 3_000,
                calls: 4,
                changed: true,
                plans: vec![PlanChange {
                    before: "Filter: a > 1\n  Projection: a".into(),
                    after: "Projection: a\n  Filter: a > 1".into(),
                }],
            },
            RuleTiming {
                phase: PlanningPhase::PhysicalOptimizer,
                name: "qprof_profiling".into(),
                first_start_nanos: 12_000,
                last_end_nanos: 15_000,
                wall_nanos: 3_000,
                calls: 1,
                changed: true,
                plans: Vec::new(),
            },
        ],
    });
    p
}

fn end(profile: QueryProfile) -> QueryEnd {
    QueryEnd {
        id: profile.id,
        description: "q6".into(),
        text: profile.sql.clone(),
        plan_text: String::new(),
        start_epoch_millis: profile.start_epoch_millis,
        end_epoch_millis: profile.start_epoch_millis + 43,
        profile: Some(profile),
        error: None,
        trace_parent: None,
    }
}

fn spans_of(end: &QueryEnd) -> Vec<SpanData> {
    let app = AppFacts {
        engine: "DataFusion".into(),
        name: "test".into(),
    };
    let scope = InstrumentationScope::builder("qprof").build();
    query_spans(end, &app, &RandomIdGenerator::default(), &scope)
}

fn value<'a>(span: &'a SpanData, key: &str) -> Option<&'a opentelemetry::Value> {
    span.attributes
        .iter()
        .find(|kv| kv.key.as_str() == key)
        .map(|kv| &kv.value)
}

fn int_of(span: &SpanData, key: &str) -> i64 {
    match value(span, key) {
        Some(opentelemetry::Value::I64(v)) => *v,
        other => panic!("{}: {key} is {other:?}", span.name),
    }
}

#[test]
fn one_trace_whose_operator_spans_mirror_the_plan_in_each_task() {
    let end = end(profile());
    let spans = spans_of(&end);
    let trace = spans[0].span_context.trace_id();
    assert!(spans.iter().all(|s| s.span_context.trace_id() == trace));
    let by_id: HashMap<SpanId, &SpanData> = spans
        .iter()
        .map(|s| (s.span_context.span_id(), s))
        .collect();
    assert_eq!(by_id.len(), spans.len(), "span ids are unique");
    // one root, the query; every other span's parent is in the trace and holds it in time
    let roots: Vec<&SpanData> = spans
        .iter()
        .filter(|s| s.parent_span_id == SpanId::INVALID)
        .collect();
    assert_eq!(roots.len(), 1);
    assert_eq!(roots[0].name, "query 6");
    for span in spans.iter().filter(|s| s.parent_span_id != SpanId::INVALID) {
        let parent = by_id[&span.parent_span_id];
        assert!(
            parent.start_time <= span.start_time && span.end_time <= parent.end_time,
            "{} is not within {}",
            span.name,
            parent.name
        );
    }
    // the query's span: the SQL, the rows, the advisor's findings as events
    let query = roots[0];
    assert_eq!(
        value(query, "db.query.text").map(|v| v.as_str().into_owned()),
        Some("select 1".to_string())
    );
    assert_eq!(int_of(query, "db.response.returned_rows"), 1);
    assert!(
        query.events.iter().any(|e| e.name == "qprof.finding"),
        "the sample's bottleneck is an event"
    );
    // a stage, its two tasks, and three operators in each, chained as the plan is
    let named = |name: &str| spans.iter().filter(|s| s.name == name).count();
    assert_eq!(named("stage 0"), 1);
    assert_eq!((named("task 0"), named("task 1")), (1, 1));
    for t in 0..2i64 {
        let in_task = |name: &str| {
            spans
                .iter()
                .find(|s| s.name == name && int_of(s, "qprof.task.id") == t)
                .unwrap_or_else(|| panic!("no {name} in task {t}"))
        };
        let task_span = spans
            .iter()
            .find(|s| s.name == format!("task {t}"))
            .unwrap();
        let (agg, filter, scan) = (
            in_task("AggregateExec"),
            in_task("FilterExec"),
            in_task("DataSourceExec"),
        );
        assert_eq!(agg.parent_span_id, task_span.span_context.span_id());
        assert_eq!(filter.parent_span_id, agg.span_context.span_id());
        assert_eq!(scan.parent_span_id, filter.span_context.span_id());
        // each carries its task's values under the catalog's names
        let profile = end.profile.as_ref().unwrap();
        for (span, node) in [(agg, 0), (filter, 1), (scan, 2)] {
            let node = profile.plan.iter().find(|n| n.id == node).unwrap();
            for metric in &node.metrics {
                let expected: i64 = metric
                    .tasks
                    .iter()
                    .filter(|v| v.task == Some(task(t as u64)))
                    .map(|v| v.value)
                    .sum();
                assert_eq!(
                    int_of(span, &format!("qprof.{}", metric.name)),
                    expected,
                    "{} {}",
                    node.name,
                    metric.name
                );
            }
        }
    }
}

#[test]
fn planning_spans_nest_phases_and_rules() {
    let spans = spans_of(&end(profile()));
    let find = |name: &str| spans.iter().find(|s| s.name == name).unwrap();
    let query = find("query 6");
    let planning = find("planning");
    assert_eq!(planning.parent_span_id, query.span_context.span_id());
    for phase in ["parse", "logicalPlan", "optimizer", "physicalPlan"] {
        let span = find(&format!("planning.{phase}"));
        assert_eq!(
            span.parent_span_id,
            planning.span_context.span_id(),
            "{phase}"
        );
    }
    let physical = find("planning.physicalPlan");
    let physical_rules = find("planning.physicalOptimizer");
    assert_eq!(
        physical_rules.parent_span_id,
        physical.span_context.span_id()
    );
    let rule = find("push_down_filter");
    assert_eq!(
        rule.parent_span_id,
        find("planning.optimizer").span_context.span_id()
    );
    assert_eq!(int_of(rule, "qprof.rule.calls"), 4);
    // the recorded plans around its change, as an event
    let change = rule
        .events
        .iter()
        .find(|e| e.name == "qprof.plan_change")
        .expect("the plan change");
    let before = change
        .attributes
        .iter()
        .find(|kv| kv.key.as_str() == "qprof.plan.before")
        .map(|kv| kv.value.as_str().into_owned());
    assert_eq!(before.as_deref(), Some("Filter: a > 1\n  Projection: a"));
    assert_eq!(int_of(rule, "qprof.rule.wallNanos"), 3_000);
    assert_eq!(
        find("qprof_profiling").parent_span_id,
        physical_rules.span_context.span_id()
    );
}

#[test]
fn a_given_parent_is_the_roots_parent_and_a_failure_its_status() {
    let parent: TraceParent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
        .parse()
        .unwrap();
    let mut end = end(profile());
    end.trace_parent = Some(parent);
    end.error = Some("Resources exhausted: out of memory".into());
    let spans = spans_of(&end);
    assert!(
        spans
            .iter()
            .all(|s| s.span_context.trace_id().to_bytes() == parent.trace_id)
    );
    let query = spans.iter().find(|s| s.name == "query 6").unwrap();
    assert_eq!(query.parent_span_id.to_bytes(), parent.span_id);
    assert!(query.parent_span_is_remote);
    assert_eq!(
        query.status,
        Status::error("Resources exhausted: out of memory")
    );
}

#[test]
fn a_query_that_never_planned_is_one_span() {
    let mut end = end(profile());
    end.profile = None;
    end.error = Some("SQL error: syntax".into());
    let spans = spans_of(&end);
    assert_eq!(spans.len(), 1);
    assert!(matches!(spans[0].status, Status::Error { .. }));
}
