//! A query's end as one trace: the query's span, its planning (phases and rules), its
//! stages, their tasks, and each operator within each task that ran it, an operator's span
//! the child of its parent operator's span in the same task.

use std::borrow::Cow;
use std::collections::HashMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use opentelemetry::trace::{
    Event, SpanContext, SpanId, SpanKind, Status, TraceFlags, TraceId, TraceState,
};
use opentelemetry::{InstrumentationScope, KeyValue};
use opentelemetry_sdk::trace::{IdGenerator, SpanData, SpanEvents, SpanLinks};
use qprof_core::advice::advise;
use qprof_core::events::QueryEnd;
use qprof_core::planning::{PlanningPhase, PlanningProfile};
use qprof_core::profile::{ProfileNode, QueryProfile, StageProfile, TaskProfile, TaskSpan};

/// The prefix of every qprof attribute; a metric's attribute is the prefix and its
/// catalog name (`qprof.outputRows`).
pub const ATTRIBUTE_PREFIX: &str = "qprof.";

/// The application a query belongs to, as its start told.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct AppFacts {
    /// The engine (`db.system.name`).
    pub(crate) engine: String,
    /// The application's name.
    pub(crate) name: String,
}

fn at_micros(micros: u64) -> SystemTime {
    UNIX_EPOCH + Duration::from_micros(micros)
}

fn attr(key: &str, value: impl Into<opentelemetry::Value>) -> KeyValue {
    KeyValue::new(format!("{ATTRIBUTE_PREFIX}{key}"), value)
}

fn int(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

/// Builds the spans of one trace.
struct TraceBuilder<'a> {
    trace_id: TraceId,
    flags: TraceFlags,
    ids: &'a dyn IdGenerator,
    scope: &'a InstrumentationScope,
    spans: Vec<SpanData>,
}

/// A span about to be added.
struct NewSpan {
    name: Cow<'static, str>,
    parent: SpanId,
    start_micros: u64,
    end_micros: u64,
    attributes: Vec<KeyValue>,
    status: Status,
    events: Vec<Event>,
}

impl NewSpan {
    fn new(name: impl Into<Cow<'static, str>>, parent: SpanId, start: u64, end: u64) -> NewSpan {
        NewSpan {
            name: name.into(),
            parent,
            start_micros: start,
            end_micros: end.max(start),
            attributes: Vec::new(),
            status: Status::Unset,
            events: Vec::new(),
        }
    }
}

impl TraceBuilder<'_> {
    /// Adds `span`; returns its id.
    fn add(&mut self, span: NewSpan, remote_parent: bool) -> SpanId {
        let span_id = self.ids.new_span_id();
        let mut events = SpanEvents::default();
        events.events = span.events;
        self.spans.push(SpanData {
            span_context: SpanContext::new(
                self.trace_id,
                span_id,
                self.flags,
                false,
                TraceState::default(),
            ),
            parent_span_id: span.parent,
            parent_span_is_remote: remote_parent,
            span_kind: SpanKind::Internal,
            name: span.name,
            start_time: at_micros(span.start_micros),
            end_time: at_micros(span.end_micros),
            attributes: span.attributes,
            dropped_attributes_count: 0,
            events,
            links: SpanLinks::default(),
            status: span.status,
            instrumentation_scope: self.scope.clone(),
        });
        span_id
    }
}

/// The spans of `end`'s trace: a child of its trace parent if it has one, else a new
/// trace.
pub(crate) fn query_spans(
    end: &QueryEnd,
    app: &AppFacts,
    ids: &dyn IdGenerator,
    scope: &InstrumentationScope,
) -> Vec<SpanData> {
    let (trace_id, parent, flags) = match end.trace_parent {
        Some(p) => (
            TraceId::from_bytes(p.trace_id),
            SpanId::from_bytes(p.span_id),
            TraceFlags::new(p.flags),
        ),
        None => (ids.new_trace_id(), SpanId::INVALID, TraceFlags::SAMPLED),
    };
    let mut trace = TraceBuilder {
        trace_id,
        flags,
        ids,
        scope,
        spans: Vec::new(),
    };
    let profile = end.profile.as_ref();
    let planning = profile.and_then(|p| p.planning.as_ref());
    // the query's span holds everything in it, whatever the clocks' precision
    let mut start = end.start_epoch_millis.saturating_mul(1000);
    let mut finish = end.end_epoch_millis.saturating_mul(1000);
    if let Some(planning) = planning {
        start = start.min(planning.start_epoch_micros);
        finish = finish.max(planning_end(planning));
    }
    if let Some(profile) = profile {
        for node in profile.plan.iter() {
            for t in &node.task_spans {
                start = start.min(t.start_epoch_micros);
                finish = finish.max(t.finish_epoch_micros);
            }
        }
    }
    let mut query = NewSpan::new(format!("query {}", end.id), parent, start, finish);
    query.attributes = vec![
        // `DataFusion 55.2.0`: the system's name is its first word
        KeyValue::new(
            "db.system.name",
            app.engine
                .split_whitespace()
                .next()
                .unwrap_or_default()
                .to_ascii_lowercase(),
        ),
        attr("engine", app.engine.clone()),
        KeyValue::new("db.query.text", end.text.clone()),
        attr("query.id", int(end.id as u64)),
        attr("query.description", end.description.clone()),
        attr("application.name", app.name.clone()),
    ];
    if let Some(profile) = profile {
        query.attributes.push(KeyValue::new(
            "db.response.returned_rows",
            int(profile.rows),
        ));
        query
            .attributes
            .push(attr("durationNanos", int(profile.duration_nanos)));
        query.events = advise(profile)
            .into_iter()
            .enumerate()
            .map(|(i, f)| {
                let mut attributes = vec![
                    attr("finding.rank", int(i as u64 + 1)),
                    attr("finding.rule", f.rule),
                    attr("finding.severity", f.severity.to_string()),
                    attr("finding.message", f.message),
                    attr("finding.cost.kind", f.cost.kind.as_str()),
                    attr("finding.cost", int(f.cost.amount)),
                    attr("finding.cost.share_permille", int(f.cost.share_permille())),
                    attr("finding.action", f.action),
                ];
                if let Some(node) = f.node_id {
                    attributes.push(attr("operator.id", int(node as u64)));
                }
                Event::new("qprof.finding", at_micros(finish), attributes, 0)
            })
            .collect();
    }
    if let Some(error) = &end.error {
        query.status = Status::error(error.clone());
        query
            .attributes
            .push(KeyValue::new("error.type", "QueryFailed"));
    }
    let query_id = trace.add(query, end.trace_parent.is_some());
    if let Some(planning) = planning {
        planning_spans(&mut trace, query_id, planning);
    }
    if let Some(profile) = profile {
        execution_spans(&mut trace, query_id, profile);
    }
    trace.spans
}

fn planning_end(planning: &PlanningProfile) -> u64 {
    let end = planning
        .phases
        .iter()
        .map(|p| p.end_nanos)
        .max()
        .unwrap_or(0);
    planning.start_epoch_micros + end.div_ceil(1000)
}

/// The planning's span, a span per phase under it (the physical optimizer's under physical
/// planning, which runs it) and a span per rule under its phase.
fn planning_spans(trace: &mut TraceBuilder<'_>, query: SpanId, planning: &PlanningProfile) {
    let base = planning.start_epoch_micros;
    let at = |nanos: u64| base + nanos / 1000;
    let at_end = |nanos: u64| base + nanos.div_ceil(1000);
    let mut span = NewSpan::new("planning", query, base, planning_end(planning));
    span.attributes = vec![
        attr("planning.wallNanos", int(planning.wall_nanos())),
        attr("planning.cpuNanos", int(planning.cpu_nanos())),
    ];
    let planning_id = trace.add(span, false);
    let mut phase_ids: HashMap<PlanningPhase, SpanId> = HashMap::new();
    for phase in &planning.phases {
        let parent = match phase.phase {
            PlanningPhase::PhysicalOptimizer => phase_ids
                .get(&PlanningPhase::PhysicalPlan)
                .copied()
                .unwrap_or(planning_id),
            _ => planning_id,
        };
        let mut span = NewSpan::new(
            format!("planning.{}", phase.phase.as_str()),
            parent,
            at(phase.start_nanos),
            at_end(phase.end_nanos),
        );
        span.attributes = vec![
            attr("planning.phase", phase.phase.as_str()),
            attr("planning.wallNanos", int(phase.wall_nanos)),
            attr("planning.cpuNanos", int(phase.cpu_nanos)),
        ];
        phase_ids.insert(phase.phase, trace.add(span, false));
    }
    for rule in &planning.rules {
        let parent = phase_ids.get(&rule.phase).copied().unwrap_or(planning_id);
        let mut span = NewSpan::new(
            rule.name.clone(),
            parent,
            at(rule.first_start_nanos),
            at_end(rule.last_end_nanos),
        );
        span.attributes = vec![
            attr("planning.phase", rule.phase.as_str()),
            attr("rule.name", rule.name.clone()),
            attr("rule.wallNanos", int(rule.wall_nanos)),
            attr("rule.calls", int(rule.calls)),
            attr("rule.changed", rule.changed),
        ];
        // the plans around its changes, when the session recorded them
        span.events = rule
            .plans
            .iter()
            .map(|change| {
                let attributes = vec![
                    attr("plan.before", change.before.clone()),
                    attr("plan.after", change.after.clone()),
                ];
                Event::new(
                    "qprof.plan_change",
                    at_micros(at_end(rule.last_end_nanos)),
                    attributes,
                    0,
                )
            })
            .collect();
        trace.add(span, false);
    }
}

/// Each stage's span, its tasks' spans under it, and each operator's span in each task.
fn execution_spans(trace: &mut TraceBuilder<'_>, query: SpanId, profile: &QueryProfile) {
    // each node's parent, to find a parent operator's span in the same task
    let mut parents: HashMap<usize, usize> = HashMap::new();
    let nodes: HashMap<usize, &ProfileNode> = profile.plan.iter().map(|n| (n.id, n)).collect();
    for node in profile.plan.iter() {
        for child in &node.children {
            parents.insert(child.id, node.id);
        }
    }
    for stage in &profile.stages {
        // by pre-order id: a parent before its children
        let mut members: Vec<&ProfileNode> = stage
            .node_ids
            .iter()
            .filter_map(|id| nodes.get(id).copied())
            .collect();
        members.sort_by_key(|n| n.id);
        // each task's operator spans, in the members' order: one pass over the stage
        let mut by_task: HashMap<u64, Vec<(&ProfileNode, &TaskSpan)>> = HashMap::new();
        for node in &members {
            for ran in &node.task_spans {
                let ran_in = by_task.entry(ran.task.task_id).or_default();
                if !ran_in.iter().any(|(n, _)| n.id == node.id) {
                    ran_in.push((node, ran));
                }
            }
        }
        let task_range = |task: &TaskProfile| {
            let ran = by_task.get(&task.task_id).map_or(&[][..], Vec::as_slice);
            let start = ran.iter().map(|(_, t)| t.start_epoch_micros).min();
            let end = ran.iter().map(|(_, t)| t.finish_epoch_micros).max();
            let (start, end) = match (start, end) {
                (Some(s), Some(e)) => (s, e),
                _ => (
                    task.start_epoch_millis.saturating_mul(1000),
                    task.finish_epoch_millis.saturating_mul(1000),
                ),
            };
            // a task whose operators had not all finished when the profile was taken
            (start, end.max(start))
        };
        let ranges: Vec<(u64, u64)> = stage.tasks.iter().map(task_range).collect();
        let Some(stage_start) = ranges.iter().map(|r| r.0).min() else {
            continue;
        };
        let stage_end = ranges.iter().map(|r| r.1).max().unwrap_or(stage_start);
        let stage_id = trace.add(stage_span(stage, query, stage_start, stage_end), false);
        for (task, (start, end)) in stage.tasks.iter().zip(ranges) {
            let task_id = trace.add(task_span(stage, task, stage_id, start, end), false);
            // operators from the stage's root down, so a parent's span exists first
            let mut in_task: HashMap<usize, SpanId> = HashMap::new();
            for &(node, ran) in by_task.get(&task.task_id).into_iter().flatten() {
                let parent = parents
                    .get(&node.id)
                    .and_then(|p| in_task.get(p))
                    .copied()
                    .unwrap_or(task_id);
                let end = if ran.finish_epoch_micros == 0 {
                    end
                } else {
                    ran.finish_epoch_micros
                };
                let span = operator_span(node, ran.task, parent, ran.start_epoch_micros, end);
                in_task.insert(node.id, trace.add(span, false));
            }
        }
    }
}

fn stage_span(stage: &StageProfile, parent: SpanId, start: u64, end: u64) -> NewSpan {
    let mut span = NewSpan::new(format!("stage {}", stage.id), parent, start, end);
    span.attributes = vec![
        attr("stage.id", i64::from(stage.id)),
        attr("stage.tasks", int(stage.tasks.len() as u64)),
    ];
    span
}

fn task_span(
    stage: &StageProfile,
    task: &TaskProfile,
    parent: SpanId,
    start: u64,
    end: u64,
) -> NewSpan {
    let mut span = NewSpan::new(format!("task {}", task.task_id), parent, start, end);
    span.attributes = vec![
        attr("stage.id", i64::from(stage.id)),
        attr("task.id", int(task.task_id)),
        attr("task.partition", i64::from(task.partition)),
        attr("task.attempt", i64::from(task.attempt)),
    ];
    if let Some(executor) = &task.executor {
        span.attributes
            .push(attr("executor.id", executor.id.clone()));
        span.attributes
            .push(attr("executor.host", executor.host.clone()));
    }
    span.attributes.extend(
        task.metrics
            .iter()
            .map(|m| attr(&format!("task.{}", m.name), m.value)),
    );
    if let Some(error) = &task.error {
        span.status = Status::error(error.clone());
    }
    span
}

/// An operator's span in one task, with that task's value of each of its metrics.
fn operator_span(
    node: &ProfileNode,
    task: qprof_core::metric::TaskRef,
    parent: SpanId,
    start: u64,
    end: u64,
) -> NewSpan {
    let mut span = NewSpan::new(node.name.clone(), parent, start, end);
    span.attributes = vec![
        attr("operator.id", int(node.id as u64)),
        attr("operator.name", node.name.clone()),
        attr("operator.display", node.display.to_string()),
        attr("stage.id", i64::from(task.stage_id)),
        attr("task.id", int(task.task_id)),
        attr("task.partition", i64::from(task.partition)),
    ];
    for metric in &node.metrics {
        let mut values = metric
            .tasks
            .iter()
            .filter(|v| v.task == Some(task))
            .map(|v| v.value)
            .peekable();
        if values.peek().is_some() {
            span.attributes
                .push(attr(&metric.name, values.sum::<i64>()));
        }
    }
    span
}

#[cfg(test)]
mod tests;
