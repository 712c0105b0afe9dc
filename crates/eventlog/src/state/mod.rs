//! The state of one application rebuilt from its events: what Spark's
//! `AppStatusListener` and `SQLAppStatusListener` keep, enough to answer the REST API.
//!
//! Events are applied one line at a time; unknown events and corrupt lines are counted,
//! never fatal, so a log can be replayed incrementally as it grows.

use std::collections::{BTreeMap, HashMap};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::spark::{EXECUTOR_METRIC_NAMES, events};
use task_event::TaskEvent;

mod app;
mod heap_size;
mod jobs;
pub(crate) mod plan;
mod sql;
mod stages;
pub(crate) mod task_event;

pub use app::Executor;
pub use app::{AppAcls, AppInfo};
pub use jobs::Job;
pub use plan::{PlanMetric, PlanNode};
pub use sql::{Execution, ProfileSummary};
pub use stages::{Stage, StageStatus, Task, TaskMetrics, TaskStatus};

/// Peak values of Spark's 23 executor metrics, in [`EXECUTOR_METRIC_NAMES`] order.
pub(crate) type ExecutorPeaks = [i64; 23];

/// How many lines a replay could not use.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SkipCounts {
    /// Well-formed events of a kind this reader does not know (kept out of the state).
    pub unknown_events: u64,
    /// Lines that are not a JSON object with an `"Event"` name, or miss required fields.
    pub corrupt_lines: u64,
}

/// Everything known about one application.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct AppState {
    /// Application facts.
    pub info: AppInfo,
    /// The `SparkListenerEnvironmentUpdate` event as logged.
    #[serde(with = "crate::snapshot::as_json_text")]
    pub environment: Option<Value>,
    /// `SparkListenerResourceProfileAdded` events as logged.
    #[serde(with = "crate::snapshot::as_json_text")]
    pub resource_profiles: Vec<Value>,
    /// Executors in the order they were added.
    pub executors: Vec<Executor>,
    /// Jobs by id.
    pub jobs: BTreeMap<i64, Job>,
    /// Stage attempts by (stage id, attempt).
    pub stages: BTreeMap<(i64, i64), Stage>,
    /// SQL executions by id.
    pub executions: BTreeMap<i64, Execution>,
    /// Lines skipped while replaying.
    pub skipped: SkipCounts,
    stage_jobs: HashMap<i64, Vec<i64>>,
    task_ends: u64,
    /// Metric names and types, one copy each.
    #[serde(skip)]
    names: plan::Interner,
}

/// One log line, parsed but not applied. Parsing reads no state, so a log's lines can be
/// parsed on several threads while one thread applies them in order.
#[derive(Debug)]
pub(crate) enum ParsedLine<'a> {
    /// An empty line.
    Blank,
    /// A task start, decoded typed (it borrows the line's strings).
    TaskStart(TaskEvent<'a>),
    /// A task end, decoded typed.
    TaskEnd(TaskEvent<'a>),
    /// qprof's profile of an execution, its profile kept as the line's text.
    Profile(ProfileEvent<'a>),
    /// Any other event.
    Event(Value),
    /// Not JSON, or a task event without a field the state needs.
    Corrupt,
}

impl ParsedLine<'_> {
    /// Parses one log line (surrounding whitespace ignored).
    pub(crate) fn parse(line: &[u8]) -> ParsedLine<'_> {
        let line = line.trim_ascii();
        if line.is_empty() {
            return ParsedLine::Blank;
        }
        // the event's name, where the line starts with it as Spark and qprof write it
        let named = |name: &[u8]| {
            line.strip_prefix(b"{\"Event\":\"")
                .and_then(|rest| rest.strip_prefix(name))
                .is_some_and(|rest| rest.starts_with(b"\""))
        };
        // task events are most of a log: decode them typed, skipping unused fields
        let task_event = if named(b"SparkListenerTaskEnd") {
            Some(true)
        } else if named(b"SparkListenerTaskStart") {
            Some(false)
        } else {
            None
        };
        if let Some(end) = task_event {
            return match serde_json::from_slice::<TaskEvent<'_>>(line) {
                Ok(event) if end => ParsedLine::TaskEnd(event),
                Ok(event) => ParsedLine::TaskStart(event),
                Err(_) => ParsedLine::Corrupt,
            };
        }
        // a profile is kept as text: borrow it rather than build it and print it again
        if named(events::QPROF_QUERY_PROFILE.as_bytes()) {
            return match serde_json::from_slice::<ProfileEvent<'_>>(line) {
                Ok(event) => ParsedLine::Profile(event),
                Err(_) => ParsedLine::Corrupt,
            };
        }
        match serde_json::from_slice::<Value>(line) {
            Ok(event) => ParsedLine::Event(event),
            Err(_) => ParsedLine::Corrupt,
        }
    }
}

/// qprof's profile event, its profile's JSON text borrowed from the line.
#[derive(Debug, Deserialize)]
pub(crate) struct ProfileEvent<'a> {
    #[serde(rename = "executionId")]
    execution_id: i64,
    /// As logged (`null` included); `None` when the line has none.
    #[serde(rename = "formatVersion", default, deserialize_with = "present")]
    format_version: Option<Value>,
    #[serde(borrow)]
    profile: &'a serde_json::value::RawValue,
}

/// A field that is there, whatever its value (`null` too).
fn present<'de, D: serde::Deserializer<'de>>(field: D) -> Result<Option<Value>, D::Error> {
    Value::deserialize(field).map(Some)
}

/// Why an event could not be applied: it lacks a field the state needs.
#[derive(Debug)]
struct Missing;

type Applied = Result<(), Missing>;

fn str_field(v: &Value, k: &str) -> Option<String> {
    v.get(k).and_then(Value::as_str).map(str::to_string)
}

fn i64_field(v: &Value, k: &str) -> Option<i64> {
    v.get(k).and_then(Value::as_i64)
}

fn req_i64(v: &Value, k: &str) -> Result<i64, Missing> {
    i64_field(v, k).ok_or(Missing)
}

/// Accumulable `Update`/`Value` fields are numbers or strings of numbers.
fn loose_i64(v: &Value) -> Option<i64> {
    match v {
        Value::Number(n) => n.as_i64(),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }
}

fn peaks_of(v: &Value) -> Option<ExecutorPeaks> {
    let obj = v.as_object()?;
    Some(EXECUTOR_METRIC_NAMES.map(|k| obj.get(k).and_then(Value::as_i64).unwrap_or(0)))
}

fn merge_peaks(into: &mut Option<ExecutorPeaks>, new: ExecutorPeaks) {
    match into {
        Some(p) => p.iter_mut().zip(new).for_each(|(a, b)| *a = (*a).max(b)),
        None => *into = Some(new),
    }
}

impl AppState {
    /// Heap bytes the state holds, counted from what it holds (see `heap_size`).
    pub fn heap_bytes(&self) -> usize {
        use heap_size::HeapSize;
        self.info.heap_bytes()
            + self.environment.heap_bytes()
            + self.resource_profiles.heap_bytes()
            + self.executors.heap_bytes()
            + self.jobs.heap_bytes()
            + self.stages.heap_bytes()
            + self.executions.heap_bytes()
            + self.stage_jobs.heap_bytes()
            + self.names.heap_bytes()
    }

    /// Applies one log line. Blank lines are ignored; corrupt lines and unknown events are
    /// counted in [`AppState::skipped`].
    pub fn apply_line(&mut self, line: &[u8]) {
        self.apply_parsed(ParsedLine::parse(line));
    }

    /// Applies one line [`ParsedLine::parse`] parsed.
    pub(crate) fn apply_parsed(&mut self, line: ParsedLine<'_>) {
        let applied = match line {
            ParsedLine::Blank => Ok(()),
            ParsedLine::TaskStart(event) => self.task_start(event),
            ParsedLine::TaskEnd(event) => self.task_end(event),
            ParsedLine::Profile(event) => self.qprof_profile_text(
                event.execution_id,
                event.format_version,
                event.profile.get().to_string(),
            ),
            ParsedLine::Event(event) => {
                self.apply(&event);
                Ok(())
            }
            ParsedLine::Corrupt => Err(Missing),
        };
        if applied.is_err() {
            self.skipped.corrupt_lines += 1;
        }
    }

    /// Applies one parsed event.
    pub fn apply(&mut self, event: &Value) {
        let Some(name) = event.get("Event").and_then(Value::as_str) else {
            self.skipped.corrupt_lines += 1;
            return;
        };
        let applied = match name {
            events::LOG_START | events::APPLICATION_START | events::APPLICATION_END => {
                self.info.apply(event);
                Ok(())
            }
            events::ENVIRONMENT_UPDATE => {
                self.info.apply(event);
                self.environment = Some(event.clone());
                Ok(())
            }
            events::RESOURCE_PROFILE_ADDED => {
                self.resource_profiles.push(event.clone());
                Ok(())
            }
            events::EXECUTOR_ADDED => self.executor_added(event),
            events::EXECUTOR_REMOVED => self.executor_removed(event),
            events::BLOCK_MANAGER_ADDED => self.block_manager_added(event),
            events::JOB_START => self.job_start(event),
            events::JOB_END => self.job_end(event),
            events::STAGE_SUBMITTED => self.stage_event(event, false),
            events::STAGE_COMPLETED => self.stage_event(event, true),
            events::TASK_START => TaskEvent::deserialize(event)
                .map_err(|_| Missing)
                .and_then(|e| self.task_start(e)),
            events::TASK_END => TaskEvent::deserialize(event)
                .map_err(|_| Missing)
                .and_then(|e| self.task_end(e)),
            events::STAGE_EXECUTOR_METRICS => self.stage_executor_metrics(event),
            events::EXECUTOR_METRICS_UPDATE => self.executor_metrics_update(event),
            events::SQL_EXECUTION_START => self.sql_start(event),
            events::SQL_ADAPTIVE_EXECUTION_UPDATE => self.sql_plan_update(event),
            events::SQL_ADAPTIVE_METRIC_UPDATES => self.sql_metric_updates(event),
            events::SQL_EXECUTION_END => self.sql_end(event),
            events::DRIVER_ACCUM_UPDATES => self.driver_accum_updates(event),
            events::QPROF_QUERY_PROFILE => self.qprof_profile(event),
            events::QPROF_STACK_SAMPLES => self.qprof_stack_samples(event),
            _ => {
                self.skipped.unknown_events += 1;
                Ok(())
            }
        };
        if applied.is_err() {
            self.skipped.corrupt_lines += 1;
        }
    }

    /// Takes `shared` (the strings a saved state's plans share, read back) as the
    /// state's interned names.
    pub(crate) fn adopt_names(&mut self, shared: Vec<std::sync::Arc<str>>) {
        self.names = plan::Interner::from_shared(shared);
    }
}
