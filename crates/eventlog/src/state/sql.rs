//! SQL executions: their plans, metrics and values, aggregated as Spark's SQL listener does, and qprof's profile.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use qprof_core::metric::{MetricKind, TaskRef, TaskValue};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::plan::PlanNode;
use super::{
    AppState, Applied, Missing, Stage, TaskStatus, i64_field, loose_i64, req_i64, str_field,
};
use crate::profile_json::QueryJson;
use crate::scala_order::scala_order;

/// A SQL execution (one query).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Execution {
    /// Execution id.
    pub id: i64,
    /// Root execution id.
    pub root_id: Option<i64>,
    /// Short description.
    pub description: String,
    /// Long description.
    pub details: String,
    /// Physical plan text (replaced by adaptive updates).
    pub plan_description: String,
    /// The plan tree as logged (`sparkPlanInfo`), replaced by adaptive updates.
    pub plan: Option<PlanNode>,
    /// Submission time, epoch ms.
    pub submission_time: i64,
    /// End time, epoch ms.
    pub completion_time: Option<i64>,
    /// Error message given at the end (`""` when it succeeded).
    pub error_message: Option<String>,
    /// Query id.
    pub query_id: Option<String>,
    /// Modified configs.
    #[serde(with = "crate::snapshot::as_json_text")]
    pub modified_configs: Value,
    /// Jobs of this execution.
    pub job_ids: Vec<i64>,
    /// Every metric declared by any plan version: its type by accumulator id.
    #[serde(with = "crate::snapshot::shared_str_values")]
    pub metric_types: HashMap<i64, Arc<str>>,
    /// Task values as reported: (accumulator id, the task's end order, the value).
    #[serde(with = "crate::snapshot::task_values")]
    pub task_values: Vec<(i64, u64, TaskValue)>,
    /// Driver values per accumulator (the last one wins).
    pub driver_values: HashMap<i64, i64>,
    /// qprof's profile of the query as logged, when the log carries one: its format
    /// version and its JSON text, read when asked for ([`Execution::qprof_profile`]).
    #[serde(with = "crate::snapshot::profile_text")]
    pub qprof_profile_json: Option<(Option<Value>, Box<str>)>,
    /// The query's sampled native stacks as logged in their own event, as JSON text:
    /// read with the profile.
    pub qprof_stack_samples_json: Option<Box<str>>,
}

impl Execution {
    /// qprof's profile of the query, when the log carries one: the profile, or why it
    /// cannot be read (e.g. written by a newer qprof).
    pub fn qprof_profile(&self) -> Option<Result<QueryJson, String>> {
        let mut profile = match self.qprof_profile_without_stacks()? {
            Ok(profile) => profile,
            Err(why) => return Some(Err(why)),
        };
        if let Some(samples) = &self.qprof_stack_samples_json {
            match serde_json::from_str(samples) {
                Ok(samples) => profile.stack_samples = Some(samples),
                Err(e) => return Some(Err(format!("malformed stack samples: {e}"))),
            }
        }
        Some(Ok(profile))
    }

    /// qprof's profile of the query without its sampled stacks (which the log keeps in an
    /// event of their own, not read here): for what does not show them.
    pub fn qprof_profile_without_stacks(&self) -> Option<Result<QueryJson, String>> {
        let (version, json) = self.qprof_profile_json.as_ref()?;
        Some(read_profile(version.as_ref(), json))
    }

    /// The headline facts of qprof's profile of the query, when the log carries one: read
    /// without building the rest of the profile (its operators' metrics are skipped, its
    /// sampled stacks not read), for what needs only these over many queries.
    pub fn qprof_profile_summary(&self) -> Option<Result<ProfileSummary, String>> {
        let (version, json) = self.qprof_profile_json.as_ref()?;
        Some(read_profile(version.as_ref(), json))
    }

    /// Its status as Spark's SQL API names it: `RUNNING`, `FAILED` (it ended with an
    /// error message) or `COMPLETED`.
    pub fn status(&self) -> &'static str {
        match (&self.completion_time, &self.error_message) {
            (None, _) => "RUNNING",
            (Some(_), Some(e)) if !e.is_empty() => "FAILED",
            _ => "COMPLETED",
        }
    }

    /// Spark's rendered value per accumulator id, for every accumulator with a value,
    /// aggregated as Spark's SQL listener does.
    ///
    /// Each stage counts with its latest attempt. A stage in which any task reported an
    /// accumulator contributes one value per task index: the index's last report up to its
    /// first success (later ones are ignored), zero for indices that never reported.
    /// The maximum is named after the first report that reached it within its stage, and
    /// across stages after the first stage in Spark's order of the execution's stages
    /// (Scala's iteration order of a set of them); a driver value above it names the driver.
    pub fn metric_strings(&self, state: &AppState) -> HashMap<i64, String> {
        let mut out = HashMap::new();
        self.for_each_aggregated(state, |id, kind, values, zeros, max| {
            let text = match kind.parse::<MetricKind>() {
                Ok(kind) => qprof_core::metric::spark_string_padded(kind, values, zeros, max),
                // Spark renders unknown (custom) metric types as their plain sum
                Err(_) => values
                    .iter()
                    .map(|v| v.value)
                    .fold(0, i64::saturating_add)
                    .to_string(),
            };
            out.insert(id, text);
        });
        out
    }

    /// The total per accumulator id (the sum of the values [`Execution::metric_strings`]
    /// renders), for every accumulator with a value.
    pub fn metric_totals(&self, state: &AppState) -> HashMap<i64, i64> {
        let mut out = HashMap::new();
        self.for_each_aggregated(state, |id, _, values, _, _| {
            out.insert(
                id,
                values.iter().map(|v| v.value).fold(0, i64::saturating_add),
            );
        });
        out
    }

    /// Each accumulator's values, task by task, as Spark's SQL listener aggregates them
    /// (the latest attempt of each stage, a partition's reports up to its first success;
    /// a driver's value without a task), for every accumulator with a value: one value
    /// per task that reported.
    pub fn task_metric_values(&self, state: &AppState) -> HashMap<i64, Vec<TaskValue>> {
        let mut out = HashMap::new();
        // the zeros Spark counts for the tasks that never reported are no task's own values
        self.for_each_aggregated(state, |id, _, values, _, _| {
            out.insert(id, values.to_vec());
        });
        out
    }

    /// Calls `f` with each accumulator's id, metric type, values as Spark's SQL listener
    /// aggregates them (see [`Execution::metric_strings`]) and the task that reached the
    /// maximum (none when the driver did), for every accumulator with a value.
    fn for_each_aggregated(
        &self,
        state: &AppState,
        mut f: impl FnMut(i64, &str, &[TaskValue], usize, Option<TaskRef>),
    ) {
        let stage_order = scala_order(
            &self
                .job_ids
                .iter()
                .filter_map(|j| state.jobs.get(j))
                .flat_map(|j| j.stage_ids.iter().copied())
                .collect::<Vec<_>>(),
        );
        // where each stage comes in that order
        let mut position: HashMap<i64, usize> = HashMap::with_capacity(stage_order.len());
        for (i, stage_id) in stage_order.iter().enumerate() {
            position.entry(*stage_id).or_insert(i);
        }
        let mut by_accumulator: HashMap<i64, Vec<(u64, TaskValue)>> = HashMap::new();
        for (id, order, value) in &self.task_values {
            by_accumulator
                .entry(*id)
                .or_default()
                .push((*order, *value));
        }
        for (id, kind) in &self.metric_types {
            let mut reported = by_accumulator.remove(id).unwrap_or_default();
            reported.sort_by_key(|(order, _)| *order);
            // only the stages this accumulator reported in, in the execution's order: a
            // log's count of stages or accumulators sizes no loop over the other
            let mut by_stage: BTreeMap<usize, Vec<(u64, TaskValue)>> = BTreeMap::new();
            for (order, value) in reported {
                let at = value
                    .task
                    .and_then(|t| position.get(&i64::from(t.stage_id)));
                if let Some(&at) = at {
                    by_stage.entry(at).or_default().push((order, value));
                }
            }
            let mut values: Vec<TaskValue> = Vec::new();
            let mut zeros = 0_usize;
            let mut max: Option<(i64, TaskRef)> = None;
            for (at, reported) in &by_stage {
                let stage_id = stage_order[*at];
                let Some((&(_, attempt), stage)) = state
                    .stages
                    .range((stage_id, i64::MIN)..=(stage_id, i64::MAX))
                    .next_back()
                else {
                    continue;
                };
                let Some(of_stage) = stage_values(stage, attempt, reported) else {
                    continue;
                };
                if max.is_none_or(|(m, _)| of_stage.max.0 > m) {
                    max = Some(of_stage.max);
                }
                values.extend(of_stage.values);
                zeros = zeros.saturating_add(of_stage.zeros);
            }
            if let Some(v) = self.driver_values.get(id) {
                values.push(TaskValue {
                    task: None,
                    value: *v,
                });
                if max.is_some_and(|(m, _)| *v > m) {
                    max = None;
                }
            }
            if values.is_empty() {
                continue;
            }
            f(*id, kind, &values, zeros, max.map(|(_, t)| t));
        }
    }
}

/// One stage attempt's values of an accumulator ([`stage_values`]).
struct StageValues {
    /// One value per task index that reported: its last report up to its first success.
    values: Vec<TaskValue>,
    /// How many more of the stage's tasks count as zeros (Spark's padding).
    zeros: usize,
    /// The maximum and the first report that reached it.
    max: (i64, TaskRef),
}

/// One stage attempt's values of an accumulator from its tasks' `reported` values (in
/// task-end order); none if no task of the attempt reported.
fn stage_values(stage: &Stage, attempt: i64, reported: &[(u64, TaskValue)]) -> Option<StageValues> {
    let mut slots: BTreeMap<u32, TaskValue> = BTreeMap::new();
    let mut succeeded: HashSet<u32> = HashSet::new();
    let mut max: Option<(i64, TaskRef)> = None;
    let of_attempt = reported.iter().filter_map(|(_, v)| {
        v.task
            .filter(|t| i64::from(t.stage_id) == stage.id && i64::from(t.stage_attempt) == attempt)
            .map(|t| (t, v.value))
    });
    for (task, value) in of_attempt {
        if succeeded.contains(&task.partition) {
            continue;
        }
        slots.insert(
            task.partition,
            TaskValue {
                task: Some(task),
                value,
            },
        );
        if max.is_none_or(|(m, _)| value > m) {
            max = Some((value, task));
        }
        let success = stage
            .tasks
            .get(&i64::try_from(task.task_id).unwrap_or(-1))
            .is_some_and(|t| t.status == TaskStatus::Success);
        if success {
            succeeded.insert(task.partition);
        }
    }
    let max = max?;
    let values: Vec<TaskValue> = slots.into_values().collect();
    // Spark pads to the stage's number of tasks; that number is the log's word, so no
    // more zeros than the attempt has tasks logged (as many, in a whole log), and they
    // are counted, not held
    let logged = i64::try_from(stage.tasks.len()).unwrap_or(i64::MAX);
    let pad_to = usize::try_from(stage.num_tasks.min(logged)).unwrap_or(0);
    Some(StageValues {
        zeros: pad_to.saturating_sub(values.len()),
        values,
        max,
    })
}

/// Declares the types of the metrics of `plan`'s nodes.
fn declare_metrics(plan: &PlanNode, into: &mut HashMap<i64, Arc<str>>) {
    for node in plan.iter() {
        for m in node.metrics.iter().filter(|m| !m.metric_type.is_empty()) {
            into.insert(m.accumulator_id, Arc::clone(&m.metric_type));
        }
    }
}

/// The headline facts of a query's profile ([`Execution::qprof_profile_summary`]).
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ProfileSummary {
    /// The query's SQL.
    pub sql: String,
    /// The rows it returned.
    pub rows: u64,
    /// Its execution's wall time, ns.
    pub duration_nanos: u64,
    /// Its plan's shape: how many operators it has.
    plan: PlanShape,
    /// The advisor's findings, counted.
    #[serde(default)]
    findings: Vec<serde::de::IgnoredAny>,
    /// The memory pool's limit and peak, when it had one.
    #[serde(default)]
    pub memory_pool: Option<crate::profile_json::MemoryPoolJson>,
}

impl ProfileSummary {
    /// The operators of its plan.
    pub fn operators(&self) -> usize {
        self.plan.count()
    }

    /// The advisor's findings about it.
    pub fn findings(&self) -> usize {
        self.findings.len()
    }
}

/// An operator and its inputs, nothing else of them read.
#[derive(Debug, Clone, Deserialize)]
struct PlanShape {
    #[serde(default)]
    children: Vec<PlanShape>,
}

impl PlanShape {
    fn count(&self) -> usize {
        1 + self.children.iter().map(PlanShape::count).sum::<usize>()
    }
}

/// The profile of a qprof extension event (or a part of it), or why it cannot be read.
/// Logs written before the format had a version are version 1.
fn read_profile<T: serde::de::DeserializeOwned>(
    version: Option<&Value>,
    json: &str,
) -> Result<T, String> {
    let version = match version {
        None => 1,
        Some(v) => v
            .as_u64()
            .and_then(|v| u32::try_from(v).ok())
            .ok_or_else(|| format!("profile format version {v} is not a version number"))?,
    };
    crate::profile_json::check_version(version).map_err(|e| e.to_string())?;
    serde_json::from_str(json).map_err(|e| format!("malformed profile: {e}"))
}

impl AppState {
    pub(super) fn sql_start(&mut self, e: &Value) -> Applied {
        let id = req_i64(e, "executionId")?;
        let plan = e
            .get("sparkPlanInfo")
            .filter(|p| p.is_object())
            .map(|p| PlanNode::from_json(p, &mut self.names));
        let mut exec = Execution {
            id,
            root_id: i64_field(e, "rootExecutionId"),
            description: str_field(e, "description").unwrap_or_default(),
            details: str_field(e, "details").unwrap_or_default(),
            plan_description: str_field(e, "physicalPlanDescription").unwrap_or_default(),
            submission_time: req_i64(e, "time")?,
            query_id: str_field(e, "queryId"),
            modified_configs: e
                .get("modifiedConfigs")
                .filter(|v| v.is_object())
                .cloned()
                .unwrap_or_else(|| Value::Object(Default::default())),
            ..Execution::default()
        };
        if let Some(plan) = &plan {
            declare_metrics(plan, &mut exec.metric_types);
        }
        exec.plan = plan;
        // jobs may have been logged before the execution in odd logs; link them
        exec.job_ids = self
            .jobs
            .values()
            .filter(|j| j.execution_id == Some(id))
            .map(|j| j.id)
            .collect();
        self.executions.insert(id, exec);
        Ok(())
    }

    pub(super) fn sql_plan_update(&mut self, e: &Value) -> Applied {
        let id = req_i64(e, "executionId")?;
        let exec = self.executions.get_mut(&id).ok_or(Missing)?;
        if let Some(text) = str_field(e, "physicalPlanDescription") {
            exec.plan_description = text;
        }
        if let Some(info) = e.get("sparkPlanInfo").filter(|p| p.is_object()) {
            let plan = PlanNode::from_json(info, &mut self.names);
            declare_metrics(&plan, &mut exec.metric_types);
            exec.plan = Some(plan);
        }
        Ok(())
    }

    pub(super) fn sql_metric_updates(&mut self, e: &Value) -> Applied {
        let id = req_i64(e, "executionId")?;
        let exec = self.executions.get_mut(&id).ok_or(Missing)?;
        for m in e
            .get("sqlPlanMetrics")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            if let (Some(acc), Some(kind)) = (
                i64_field(m, "accumulatorId"),
                m.get("metricType").and_then(Value::as_str),
            ) {
                exec.metric_types.insert(acc, self.names.intern(kind));
            }
        }
        Ok(())
    }

    pub(super) fn sql_end(&mut self, e: &Value) -> Applied {
        let id = req_i64(e, "executionId")?;
        let exec = self.executions.get_mut(&id).ok_or(Missing)?;
        exec.completion_time = i64_field(e, "time");
        exec.error_message = str_field(e, "errorMessage").or_else(|| Some(String::new()));
        Ok(())
    }

    pub(super) fn driver_accum_updates(&mut self, e: &Value) -> Applied {
        let id = req_i64(e, "executionId")?;
        let exec = self.executions.get_mut(&id).ok_or(Missing)?;
        for pair in e
            .get("accumUpdates")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            if let (Some(acc), Some(value)) = (
                pair.get(0).and_then(Value::as_i64),
                pair.get(1).and_then(loose_i64),
            ) {
                exec.driver_values.insert(acc, value);
            }
        }
        Ok(())
    }

    pub(super) fn qprof_profile(&mut self, e: &Value) -> Applied {
        let id = req_i64(e, "executionId")?;
        let profile = e.get("profile").ok_or(Missing)?;
        self.qprof_profile_text(id, e.get("formatVersion").cloned(), profile.to_string())
    }

    /// Keeps the profile of execution `id` as its JSON text, to be read when asked for.
    pub(super) fn qprof_profile_text(
        &mut self,
        id: i64,
        version: Option<Value>,
        json: String,
    ) -> Applied {
        let exec = self.executions.get_mut(&id).ok_or(Missing)?;
        exec.qprof_profile_json = Some((version, json.into()));
        Ok(())
    }

    pub(super) fn qprof_stack_samples(&mut self, e: &Value) -> Applied {
        let id = req_i64(e, "executionId")?;
        let exec = self.executions.get_mut(&id).ok_or(Missing)?;
        let samples = e
            .get("stackSamples")
            .filter(|s| s.is_object())
            .ok_or(Missing)?;
        exec.qprof_stack_samples_json = Some(samples.to_string().into());
        Ok(())
    }
}
