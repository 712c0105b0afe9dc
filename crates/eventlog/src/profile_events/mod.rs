//! One query's profile as Spark events: a SQL execution with its plan and metric
//! declarations, one job, a stage per profile stage, a task per profile task with the SQL
//! metric values of that task, driver-side values, and qprof's full profile in an
//! extension event Spark skips.

mod sql;
mod stages;
mod tasks;
#[cfg(test)]
mod tests;

use qprof_core::executor_memory::MemorySample;
use qprof_core::metric::saturating_i64;
use qprof_core::profile::{QueryProfile, StageProfile, TaskProfile, names};
use serde::Serialize;
use serde_json::{Value, json};

use crate::profile_json::{FORMAT_VERSION, OrderedMap, QueryJson, StackSamplesJson};
use crate::spark::events;
use sql::{Accumulators, plan_info, sql_end, sql_start, uuid_v4, with_function_metrics};
use stages::{NodeIndex, executor_metrics, index, parent_stages, stage_info};
pub(crate) use tasks::TaskEnd;
use tasks::{
    StageAccumulables, end_reason, no_accumulables, task_figures, task_info, task_metrics,
};

/// Counters that keep ids unique within an application.
#[derive(Debug, Default)]
pub struct IdCounters {
    execution: i64,
    job: i64,
    accumulator: i64,
}

/// What one query contributes to the log.
#[derive(Debug, Clone)]
pub struct QueryRecord<'a> {
    /// Short description (e.g. `q5`).
    pub description: String,
    /// SQL text.
    pub sql: &'a str,
    /// Physical plan text.
    pub plan_text: String,
    /// Start, epoch ms.
    pub start_epoch_millis: i64,
    /// End, epoch ms.
    pub end_epoch_millis: i64,
    /// The profile, when the query was planned (also for a query that failed while running).
    pub profile: Option<&'a QueryProfile>,
    /// Why the query failed.
    pub error: Option<String>,
}

impl<'a> QueryRecord<'a> {
    /// A query's record, its times in epoch ms (Spark's longs, saturated).
    pub fn new(
        description: String,
        sql: &'a str,
        plan_text: String,
        (start_epoch_millis, end_epoch_millis): (u64, u64),
        profile: Option<&'a QueryProfile>,
        error: Option<String>,
    ) -> QueryRecord<'a> {
        QueryRecord {
            description,
            sql,
            plan_text,
            start_epoch_millis: saturating_i64(start_epoch_millis),
            end_epoch_millis: saturating_i64(end_epoch_millis),
            profile,
            error,
        }
    }

    /// A query still running at `now_epoch_millis`, as far as its live `profile` got.
    pub fn running(
        description: String,
        plan_text: String,
        profile: &'a QueryProfile,
        now_epoch_millis: u64,
    ) -> QueryRecord<'a> {
        let span = (profile.start_epoch_millis, now_epoch_millis);
        QueryRecord::new(
            description,
            &profile.sql,
            plan_text,
            span,
            Some(profile),
            None,
        )
    }
}

/// `object` with each value moved to its key, in the place the key's `null` holds.
///
/// A `Value` written into `json!` is serialized into a new `Value`, a deep copy of it
/// (and of everything below it, at every level of a tree): the events are built around
/// `null`s and their parts moved in.
fn put<const N: usize>(mut object: Value, values: [(&str, Value); N]) -> Value {
    for (key, value) in values {
        object[key] = value;
    }
    object
}

/// One event of a query's log, as Spark's JSON.
#[derive(Debug)]
pub(crate) enum QueryEvent {
    /// An event built as a JSON value.
    Json(Value),
    /// A task's end.
    TaskEnd(Box<TaskEnd>),
    /// qprof's profile of the query.
    Profile(Box<ProfileEvent>),
    /// The query's sampled native stacks.
    StackSamples(Box<StackSamplesEvent>),
}

/// qprof's own event with a query's sampled native stacks.
#[derive(Debug, Serialize)]
pub(crate) struct StackSamplesEvent {
    #[serde(rename = "Event")]
    event: &'static str,
    #[serde(rename = "executionId")]
    execution_id: i64,
    #[serde(rename = "formatVersion")]
    format_version: u32,
    #[serde(rename = "stackSamples")]
    stack_samples: StackSamplesJson,
}

/// qprof's own event with a query's profile, written from its parts: serialized straight
/// to the log, not first copied into a JSON value (the largest event of a query).
#[derive(Debug, Serialize)]
pub(crate) struct ProfileEvent {
    #[serde(rename = "Event")]
    event: &'static str,
    #[serde(rename = "executionId")]
    execution_id: i64,
    #[serde(rename = "formatVersion")]
    format_version: u32,
    profile: QueryJson,
}

impl QueryEvent {
    /// Writes the event as one line of JSON text, without its newline.
    ///
    /// # Errors
    /// Fails only if a value cannot be serialized, which none of qprof's can.
    pub(crate) fn write_json(&self, out: &mut Vec<u8>) -> serde_json::Result<()> {
        match self {
            QueryEvent::Json(v) => serde_json::to_writer(out, v),
            QueryEvent::TaskEnd(end) => end.write_json(out),
            QueryEvent::Profile(profile) => serde_json::to_writer(out, profile),
            QueryEvent::StackSamples(samples) => serde_json::to_writer(out, samples),
        }
    }

    /// The event as a JSON value.
    pub(crate) fn into_value(self) -> Value {
        match self {
            QueryEvent::Json(v) => v,
            QueryEvent::TaskEnd(end) => {
                let mut json = Vec::new();
                end.write_json(&mut json)
                    .and_then(|()| serde_json::from_slice(&json))
                    .unwrap_or(Value::Null)
            }
            QueryEvent::Profile(profile) => serde_json::to_value(profile).unwrap_or(Value::Null),
            QueryEvent::StackSamples(samples) => {
                serde_json::to_value(samples).unwrap_or(Value::Null)
            }
        }
    }
}

/// Spark's id of the local process's executor.
pub(crate) const DRIVER: &str = "driver";

/// The events of one query run on `host`, in the order Spark's listeners need them.
pub(crate) fn query_events(
    q: &QueryRecord<'_>,
    host: &str,
    ids: &mut IdCounters,
) -> Vec<QueryEvent> {
    let Some(profile) = q.profile else {
        return not_planned_events(q, ids)
            .into_iter()
            .map(QueryEvent::Json)
            .collect();
    };
    let with_functions = with_function_metrics(profile);
    let query = QueryEvents::new(q, &with_functions, host, ids);
    let mut out: Vec<QueryEvent> = query.start().into_iter().map(QueryEvent::Json).collect();
    for stage in &query.stages {
        out.extend(query.stage(stage, true));
    }
    out.extend(query.end(profile));
    out
}

/// The events of a query still running, as far as it got: its execution and job, its
/// stages that started (with the tasks that started and those that ended) and those that
/// ended. Its metric values are those of its ended tasks; nothing ends the job or the
/// execution. Stages count the tasks that started. These are what Spark's live listeners
/// would have heard by now; they are not logged (the log gets the query when it ends).
pub fn running_query_events(q: &QueryRecord<'_>, host: &str, ids: &mut IdCounters) -> Vec<Value> {
    let Some(profile) = q.profile else {
        return Vec::new();
    };
    let with_functions = with_function_metrics(profile);
    let query = QueryEvents::new(q, &with_functions, host, ids);
    let mut out = query.start();
    for stage in &query.stages {
        out.extend(
            query
                .stage(stage, false)
                .into_iter()
                .map(QueryEvent::into_value),
        );
    }
    out
}

/// A query never planned: an execution without a plan, job or stages.
fn not_planned_events(q: &QueryRecord<'_>, ids: &mut IdCounters) -> Vec<Value> {
    let execution_id = ids.execution;
    ids.execution += 1;
    let query_id = uuid_v4();
    let not_planned = json!({"nodeName": "NotPlanned", "simpleString": "NotPlanned", "children": [], "metadata": {}, "metrics": []});
    vec![
        sql_start(execution_id, q, &query_id, "", not_planned),
        sql_end(execution_id, q, &query_id),
    ]
}

impl IdCounters {
    /// Counters continuing after the ids `state` holds: the next execution, job and
    /// accumulator get ids no logged one has.
    pub fn after(state: &crate::state::AppState) -> IdCounters {
        let next = |last: Option<i64>| last.map_or(0, |id| id + 1);
        IdCounters {
            execution: next(state.executions.keys().next_back().copied()),
            job: next(state.jobs.keys().next_back().copied()),
            accumulator: state
                .executions
                .values()
                .flat_map(|e| e.metric_types.keys())
                .max()
                .copied()
                .unwrap_or(0),
        }
    }
}

/// One planned query's ids and the parts its events share.
struct QueryEvents<'q> {
    q: &'q QueryRecord<'q>,
    profile: &'q QueryProfile,
    host: &'q str,
    execution_id: i64,
    job_id: i64,
    query_id: String,
    accs: Accumulators,
    nodes: NodeIndex<'q>,
    properties: Value,
    stages: Vec<&'q StageProfile>,
}

impl<'q> QueryEvents<'q> {
    fn new(
        q: &'q QueryRecord<'q>,
        profile: &'q QueryProfile,
        host: &'q str,
        ids: &mut IdCounters,
    ) -> QueryEvents<'q> {
        let execution_id = ids.execution;
        ids.execution += 1;
        let accs = Accumulators::assign(&profile.plan, ids);
        let job_id = ids.job;
        ids.job += 1;
        let properties = json!({
            "spark.sql.execution.id": execution_id.to_string(),
            "spark.sql.execution.root.id": execution_id.to_string(),
            "spark.job.description": q.description,
            "callSite.short": q.description,
            "spark.rdd.scope.noOverride": "true",
        });
        let mut stages: Vec<&StageProfile> = profile.stages.iter().collect();
        stages.sort_by_key(|s| s.id);
        QueryEvents {
            q,
            profile,
            host,
            execution_id,
            job_id,
            query_id: uuid_v4(),
            accs,
            nodes: index(&profile.plan),
            properties,
            stages,
        }
    }

    fn stage_name(&self, s: &StageProfile) -> String {
        let root = s
            .node_ids
            .first()
            .and_then(|id| self.nodes.get(id))
            .map_or("stage", |n| n.name.as_str());
        format!("{root} at {}", self.q.description)
    }

    fn details(&self) -> &str {
        self.q.sql.trim()
    }

    /// The execution's start and its job's.
    fn start(&self) -> Vec<Value> {
        let q = self.q;
        let sql = sql_start(
            self.execution_id,
            q,
            &self.query_id,
            &q.plan_text,
            plan_info(&self.profile.plan, &self.accs),
        );
        let infos: Vec<Value> = self
            .stages
            .iter()
            .map(|s| {
                let parents = parent_stages(&self.nodes, s);
                stage_info(s, &self.stage_name(s), &parents, self.details(), None, None)
            })
            .collect();
        let job = json!({
            "Event": events::JOB_START,
            "Job ID": self.job_id,
            "Submission Time": q.start_epoch_millis,
            "Stage Infos": null,
            "Stage IDs": self.stages.iter().map(|s| s.id).collect::<Vec<_>>(),
            "Properties": null,
        });
        let job = put(
            job,
            [
                ("Stage Infos", Value::Array(infos)),
                ("Properties", self.properties.clone()),
            ],
        );
        vec![sql, job]
    }

    /// A stage's events: all of them if `ended` (the query ended), else those of a
    /// running query's stage so far (none if no task started; its end once every task
    /// that started ended).
    fn stage(&self, stage: &StageProfile, ended: bool) -> Vec<QueryEvent> {
        let mut out = Vec::new();
        if !ended && stage.tasks.is_empty() {
            return out;
        }
        let q = self.q;
        let result_task = Some(stage.id) == self.profile.plan.stage_id;
        let submitted = stage
            .tasks
            .iter()
            .map(|t| t.start_epoch_millis as i64)
            .filter(|t| *t > 0)
            .min()
            .unwrap_or(q.start_epoch_millis);
        let completed = stage
            .tasks
            .iter()
            .map(|t| t.finish_epoch_millis as i64)
            .max()
            .unwrap_or(submitted)
            .max(submitted);
        // a stage fails with its first failed task, or with the query if it is the last
        let failure = stage
            .tasks
            .iter()
            .find_map(|t| t.error.as_deref())
            .or(q.error.as_deref().filter(|_| result_task && ended));
        let name = self.stage_name(stage);
        let parents = parent_stages(&self.nodes, stage);
        let details = self.details();
        let submitted_event = json!({
            "Event": events::STAGE_SUBMITTED,
            "Stage Info": null,
            "Properties": null,
        });
        out.push(QueryEvent::Json(put(
            submitted_event,
            [
                (
                    "Stage Info",
                    stage_info(
                        stage,
                        &name,
                        &parents,
                        details,
                        Some((submitted, None)),
                        None,
                    ),
                ),
                ("Properties", self.properties.clone()),
            ],
        )));
        for task in &stage.tasks {
            let started = json!({
                "Event": events::TASK_START,
                "Stage ID": stage.id,
                "Stage Attempt ID": 0,
                "Task Info": null,
            });
            let info = task_info(task, self.host, 0, false, no_accumulables());
            out.push(QueryEvent::Json(put(
                started,
                [("Task Info", info.to_value().unwrap_or(Value::Null))],
            )));
        }
        let accumulables = StageAccumulables::new(&self.nodes, stage, |node, metric| {
            self.accs.get(node, metric)
        });
        let mut stage_peak = 0;
        let mut all_ended = true;
        for task in &stage.tasks {
            if !ended && task.finish_epoch_millis == 0 {
                all_ended = false;
                continue;
            }
            let peak = task.value(names::PEAK_MEMORY_BYTES).unwrap_or(0);
            stage_peak = stage_peak.max(peak);
            out.push(self.task_end(stage, task, &accumulables, result_task, peak));
        }
        if !all_ended {
            return out;
        }
        // without samples, the stage's largest task peak stands for its execution memory
        let stage_memory = stage.memory.unwrap_or(MemorySample {
            execution_bytes: u64::try_from(stage_peak).unwrap_or(0),
            ..MemorySample::default()
        });
        // on a cluster, each executor's own peaks while it ran the stage
        let per_executor: Vec<(&str, MemorySample)> = if stage.executor_memory.is_empty() {
            vec![(DRIVER, stage_memory)]
        } else {
            stage
                .executor_memory
                .iter()
                .map(|(id, m)| (id.as_str(), *m))
                .collect()
        };
        for (executor, memory) in per_executor {
            let metrics = json!({
                "Event": events::STAGE_EXECUTOR_METRICS,
                "Executor ID": executor,
                "Stage ID": stage.id,
                "Stage Attempt ID": 0,
                "Executor Metrics": null,
            });
            out.push(QueryEvent::Json(put(
                metrics,
                [("Executor Metrics", executor_metrics(&memory))],
            )));
        }
        let info = stage_info(
            stage,
            &name,
            &parents,
            details,
            Some((submitted, Some(completed))),
            failure,
        );
        let completed_event = json!({"Event": events::STAGE_COMPLETED, "Stage Info": null});
        out.push(QueryEvent::Json(put(
            completed_event,
            [("Stage Info", info)],
        )));
        out
    }

    fn task_end(
        &self,
        stage: &StageProfile,
        task: &TaskProfile,
        accumulables: &StageAccumulables,
        result_task: bool,
        peak: i64,
    ) -> QueryEvent {
        let figures = task_figures(&self.nodes, stage, task);
        // the task's own execution peak, the other regions of its executor in the stage
        let executor_memory = task.executor.as_ref().and_then(|e| {
            stage
                .executor_memory
                .iter()
                .find(|(id, _)| *id == e.id)
                .map(|(_, m)| *m)
        });
        let task_memory = MemorySample {
            execution_bytes: u64::try_from(peak).unwrap_or(0),
            ..executor_memory.or(stage.memory).unwrap_or_default()
        };
        let finish = (task.finish_epoch_millis as i64).max(task.start_epoch_millis as i64);
        QueryEvent::TaskEnd(Box::new(TaskEnd {
            event: events::TASK_END,
            stage_id: stage.id,
            stage_attempt_id: 0,
            task_type: if result_task {
                "ResultTask"
            } else {
                "ShuffleMapTask"
            },
            reason: end_reason(
                task.error.as_deref(),
                task.executor.as_ref().map_or(DRIVER, |e| e.id.as_str()),
            ),
            info: task_info(
                task,
                self.host,
                finish,
                task.error.is_some(),
                accumulables.of_task(task.task_id),
            ),
            executor_metrics: executor_metrics(&task_memory),
            metrics: task_metrics(task, &figures, result_task),
        }))
    }

    /// The job's end, the driver-side values, qprof's profile (`recorded`, as measured)
    /// and the execution's end.
    fn end(&self, recorded: &QueryProfile) -> Vec<QueryEvent> {
        let q = self.q;
        let mut out = Vec::new();
        let job_result = match &q.error {
            None => json!({"Result": "JobSucceeded"}),
            Some(e) => {
                json!({"Result": "JobFailed", "Exception": {"Message": e, "Stack Trace": []}})
            }
        };
        let job_end = json!({
            "Event": events::JOB_END,
            "Job ID": self.job_id,
            "Completion Time": q.end_epoch_millis,
            "Job Result": null,
        });
        out.push(QueryEvent::Json(put(job_end, [("Job Result", job_result)])));
        let mut driver_updates = Vec::new();
        for node in self.profile.plan.iter() {
            for m in &node.metrics {
                if let Some(v) = m.tasks.iter().rev().find(|v| v.task.is_none()) {
                    driver_updates.push(json!([self.accs.get(node.id, &m.name), v.value]));
                }
            }
        }
        if !driver_updates.is_empty() {
            let updates = json!({
                "Event": events::DRIVER_ACCUM_UPDATES,
                "executionId": self.execution_id,
                "accumUpdates": null,
            });
            out.push(QueryEvent::Json(put(
                updates,
                [("accumUpdates", Value::Array(driver_updates))],
            )));
        }
        let mut extension = QueryJson::from(recorded);
        let stack_samples = extension.stack_samples.take();
        extension.accumulator_ids = Some(OrderedMap(
            self.profile
                .plan
                .iter()
                .map(|n| {
                    let per_metric = n
                        .metrics
                        .iter()
                        .map(|m| (m.name.to_string(), self.accs.get(n.id, &m.name)))
                        .collect();
                    (n.id.to_string(), OrderedMap(per_metric))
                })
                .collect(),
        ));
        out.push(QueryEvent::Profile(Box::new(ProfileEvent {
            event: events::QPROF_QUERY_PROFILE,
            execution_id: self.execution_id,
            format_version: FORMAT_VERSION,
            profile: extension,
        })));
        if let Some(stack_samples) = stack_samples {
            out.push(QueryEvent::StackSamples(Box::new(StackSamplesEvent {
                event: events::QPROF_STACK_SAMPLES,
                execution_id: self.execution_id,
                format_version: FORMAT_VERSION,
                stack_samples,
            })));
        }
        out.push(QueryEvent::Json(sql_end(
            self.execution_id,
            q,
            &self.query_id,
        )));
        out
    }
}
