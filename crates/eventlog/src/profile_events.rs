//! One query's profile as Spark events: a SQL execution with its plan and metric
//! declarations, one job, a stage per profile stage, a task per profile task with the SQL
//! metric values of that task, driver-side values, and qprof's full profile in an
//! extension event Spark skips.

use std::collections::{BTreeSet, HashMap};
use std::hash::{BuildHasher, Hasher};

use qprof_core::executor_memory::MemorySample;
use qprof_core::metric::{MetricKind, TaskValue};
use qprof_core::profile::{
    NodeMetric, ProfileNode, QueryProfile, StageProfile, TaskProfile, names,
};
use serde::Serialize;
use serde_json::{Map, Value, json};

use crate::profile_json::{FORMAT_VERSION, OrderedMap, QueryJson};
use crate::spark::{EXECUTOR_METRIC_NAMES, events};

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

/// A random version-4 UUID (Spark parses `queryId` as a `java.util.UUID`).
fn uuid_v4() -> String {
    let mut bytes = [0u8; 16];
    for chunk in bytes.chunks_mut(8) {
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u128(
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos()),
        );
        chunk.copy_from_slice(&h.finish().to_le_bytes());
    }
    bytes[6] = (bytes[6] & 0x0f) | 0x40;
    bytes[8] = (bytes[8] & 0x3f) | 0x80;
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &hex[0..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..32]
    )
}

/// The profile with each operator's function call sites added as SQL metrics: the CPU time
/// of each, as a driver-side value (sites are measured per thread, not per task), so that
/// Spark's UI lists them under the operator.
fn with_function_metrics(profile: &QueryProfile) -> QueryProfile {
    fn add(node: &mut ProfileNode) {
        for (i, f) in node.functions.iter().enumerate() {
            node.metrics.push(NodeMetric::summed(
                format!("functionCpuNanos{i}"),
                format!("cpu time of {}", f.expression),
                MetricKind::NsTiming,
                vec![TaskValue {
                    task: None,
                    value: i64::try_from(f.cpu_nanos).unwrap_or(i64::MAX),
                }],
            ));
        }
        node.children.iter_mut().for_each(add);
    }
    let mut out = profile.clone();
    add(&mut out.plan);
    out
}

/// Accumulator ids of every (node, metric) of a plan, assigned in pre-order.
struct Accumulators(HashMap<usize, HashMap<String, i64>>);

impl Accumulators {
    fn assign(plan: &ProfileNode, ids: &mut IdCounters) -> Accumulators {
        let mut map: HashMap<usize, HashMap<String, i64>> = HashMap::new();
        for node in plan.iter() {
            let of_node = map.entry(node.id).or_default();
            for m in &node.metrics {
                ids.accumulator += 1;
                of_node.insert(m.name.clone(), ids.accumulator);
            }
        }
        Accumulators(map)
    }

    fn get(&self, node: usize, metric: &str) -> i64 {
        self.0
            .get(&node)
            .and_then(|of_node| of_node.get(metric))
            .copied()
            .unwrap_or(-1)
    }
}

fn plan_info(node: &ProfileNode, accs: &Accumulators) -> Value {
    let metadata: Map<String, Value> = node
        .info
        .iter()
        .map(|(k, v)| (k.clone(), json!(v)))
        .collect();
    let children = node.children.iter().map(|c| plan_info(c, accs)).collect();
    let metrics = node
        .metrics
        .iter()
        .map(|m| {
            json!({
                "name": m.display_name,
                "accumulatorId": accs.get(node.id, &m.name),
                "metricType": m.kind.as_str(),
            })
        })
        .collect();
    let info = json!({
        "nodeName": node.name,
        "simpleString": node.display,
        "children": null,
        "metadata": null,
        "metrics": null,
    });
    put(
        info,
        [
            ("children", Value::Array(children)),
            ("metadata", Value::Object(metadata)),
            ("metrics", Value::Array(metrics)),
        ],
    )
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

/// The nodes of a plan by id.
type NodeIndex<'a> = HashMap<usize, &'a ProfileNode>;

fn index(plan: &ProfileNode) -> NodeIndex<'_> {
    plan.iter().map(|n| (n.id, n)).collect()
}

/// Stage ids feeding `stage`: stages of children of its nodes outside it.
fn parent_stages(nodes: &NodeIndex<'_>, stage: &StageProfile) -> Vec<i64> {
    let mut parents = BTreeSet::new();
    for id in &stage.node_ids {
        if let Some(node) = nodes.get(id) {
            for child in &node.children {
                if let Some(s) = child.stage_id.filter(|s| *s != stage.id) {
                    parents.insert(i64::from(s));
                }
            }
        }
    }
    parents.into_iter().collect()
}

fn stage_info(
    stage: &StageProfile,
    name: &str,
    parents: &[i64],
    details: &str,
    times: Option<(i64, Option<i64>)>,
    failure: Option<&str>,
) -> Value {
    let mut o = Map::new();
    o.insert("Stage ID".into(), json!(stage.id));
    o.insert("Stage Attempt ID".into(), json!(0));
    o.insert("Stage Name".into(), json!(name));
    o.insert("Number of Tasks".into(), json!(stage.tasks.len()));
    o.insert("RDD Info".into(), json!([]));
    o.insert("Parent IDs".into(), json!(parents));
    o.insert("Details".into(), json!(details));
    if let Some((submitted, completed)) = times {
        o.insert("Submission Time".into(), json!(submitted));
        if let Some(c) = completed {
            o.insert("Completion Time".into(), json!(c));
        }
    }
    if let Some(reason) = failure {
        o.insert("Failure Reason".into(), json!(reason));
    }
    o.insert("Accumulables".into(), json!([]));
    o.insert("Resource Profile Id".into(), json!(0));
    o.insert("Shuffle Push Enabled".into(), json!(false));
    o.insert("Shuffle Push Mergers Count".into(), json!(0));
    Value::Object(o)
}

/// Spark's executor metrics of a Rust executor's memory regions: the allocator's heap in
/// `JVMHeapMemory`'s slot, execution (pool) and storage (cache) memory off-heap, their sum
/// as unified memory, file-backed resident memory as the mapped pool, and the process's
/// resident and virtual size as its process tree's. Slots a Rust process has nothing for
/// (on-heap regions, the JVM's non-heap and direct pools, garbage collection) are 0, and
/// zeros are left out: Spark reads a missing metric as 0, and the log stays small.
fn executor_metrics(memory: &MemorySample) -> Value {
    let clamp = |v: u64| i64::try_from(v).unwrap_or(i64::MAX);
    Value::Object(
        EXECUTOR_METRIC_NAMES
            .iter()
            .filter_map(|n| {
                let v = match *n {
                    "JVMHeapMemory" => memory.heap_bytes,
                    "OffHeapExecutionMemory" => memory.execution_bytes,
                    "OffHeapStorageMemory" => memory.storage_bytes,
                    "OffHeapUnifiedMemory" => memory.unified_bytes(),
                    "MappedPoolMemory" => memory.file_mapped_bytes,
                    "ProcessTreeJVMVMemory" => memory.virtual_bytes,
                    "ProcessTreeJVMRSSMemory" => memory.rss_bytes,
                    _ => 0,
                };
                (v != 0).then(|| (n.to_string(), json!(clamp(v))))
            })
            .collect(),
    )
}

/// Per-task figures Spark's task metrics need, read from the profile's nodes.
struct TaskFigures {
    input_rows: i64,
    input_bytes: i64,
    shuffle_read_rows: i64,
    shuffle_read_bytes: i64,
    output_rows: i64,
    output_bytes: i64,
    /// Bytes the task's operators wrote to spill files.
    spilled_bytes: i64,
}

fn task_value(node: &ProfileNode, metric: &str, task_id: u64) -> i64 {
    node.metric(metric)
        .and_then(|m| {
            m.tasks
                .iter()
                .find(|v| v.task.is_some_and(|t| t.task_id == task_id))
        })
        .map_or(0, |v| v.value)
}

fn task_figures(nodes: &NodeIndex<'_>, stage: &StageProfile, task: &TaskProfile) -> TaskFigures {
    let mut f = TaskFigures {
        input_rows: 0,
        input_bytes: 0,
        shuffle_read_rows: 0,
        shuffle_read_bytes: 0,
        output_rows: task.value(names::OUTPUT_ROWS).unwrap_or(0),
        output_bytes: task.value(names::OUTPUT_BYTES).unwrap_or(0),
        spilled_bytes: 0,
    };
    for id in &stage.node_ids {
        let Some(node) = nodes.get(id) else {
            continue;
        };
        f.spilled_bytes += task_value(node, names::SPILL_WRITTEN_BYTES, task.task_id);
        let leaf = node.children.is_empty();
        let boundary = !leaf && node.children.iter().all(|c| c.stage_id != Some(stage.id));
        if leaf {
            f.input_rows += task_value(node, names::OUTPUT_ROWS, task.task_id);
            f.input_bytes += task_value(node, "bytesScanned", task.task_id);
        } else if boundary {
            f.shuffle_read_rows += task_value(node, names::OUTPUT_ROWS, task.task_id);
            f.shuffle_read_bytes += task_value(node, names::OUTPUT_BYTES, task.task_id);
        }
    }
    f
}

fn task_metrics(task: &TaskProfile, f: &TaskFigures, result_task: bool) -> Value {
    let v = |name: &str| task.value(name).unwrap_or(0);
    let (shuffle_bytes, shuffle_rows) = if result_task {
        (0, 0)
    } else {
        (f.output_bytes, f.output_rows)
    };
    json!({
        "Executor Deserialize Time": 0,
        "Executor Deserialize CPU Time": 0,
        "Executor Run Time": v(names::WALL_NANOS) / 1_000_000,
        "Executor CPU Time": v(names::CPU_NANOS),
        "Peak Execution Memory": v(names::PEAK_MEMORY_BYTES),
        "Peak On Heap Execution Memory": 0,
        "Peak Off Heap Execution Memory": v(names::PEAK_MEMORY_BYTES),
        "Result Size": if result_task { f.output_bytes } else { 0 },
        "JVM GC Time": 0,
        "Result Serialization Time": 0,
        "Memory Bytes Spilled": 0,
        "Disk Bytes Spilled": f.spilled_bytes,
        "Shuffle Read Metrics": {
            "Remote Blocks Fetched": 0,
            "Local Blocks Fetched": 0,
            "Fetch Wait Time": 0,
            "Remote Bytes Read": 0,
            "Remote Bytes Read To Disk": 0,
            "Local Bytes Read": f.shuffle_read_bytes,
            "Total Records Read": f.shuffle_read_rows,
            "Remote Requests Duration": 0,
            "Push Based Shuffle": {
                "Corrupt Merged Block Chunks": 0,
                "Merged Fetch Fallback Count": 0,
                "Merged Remote Blocks Fetched": 0,
                "Merged Local Blocks Fetched": 0,
                "Merged Remote Chunks Fetched": 0,
                "Merged Local Chunks Fetched": 0,
                "Merged Remote Bytes Read": 0,
                "Merged Local Bytes Read": 0,
                "Merged Remote Requests Duration": 0,
            },
        },
        "Shuffle Write Metrics": {
            "Shuffle Bytes Written": shuffle_bytes,
            "Shuffle Write Time": 0,
            "Shuffle Records Written": shuffle_rows,
        },
        "Input Metrics": {"Bytes Read": f.input_bytes, "Records Read": f.input_rows},
        "Output Metrics": {"Bytes Written": 0, "Records Written": 0},
        "Updated Blocks": [],
    })
}

/// Spark's `Task End Reason`: success, or an `ExceptionFailure` carrying the error (its
/// class is DataFusion's error kind, the text before the first colon).
fn end_reason(error: Option<&str>) -> Value {
    let Some(error) = error else {
        return json!({"Reason": "Success"});
    };
    let kind: String = error
        .split(':')
        .next()
        .unwrap_or_default()
        .split_whitespace()
        .map(|word| {
            let mut chars = word.chars();
            chars.next().map_or_else(String::new, |first| {
                first.to_uppercase().chain(chars).collect()
            })
        })
        .collect();
    json!({
        "Reason": "ExceptionFailure",
        "Class Name": format!("org.apache.datafusion.{kind}"),
        "Description": error,
        "Stack Trace": [],
        "Full Stack Trace": error,
        "Accumulator Updates": [],
    })
}

/// Spark's `Task Info` of a task.
#[derive(Debug, Serialize)]
struct TaskInfo {
    #[serde(rename = "Task ID")]
    task_id: u64,
    #[serde(rename = "Index")]
    index: u32,
    #[serde(rename = "Attempt")]
    attempt: u32,
    #[serde(rename = "Partition ID")]
    partition: u32,
    #[serde(rename = "Launch Time")]
    launch_time: u64,
    #[serde(rename = "Executor ID")]
    executor: String,
    #[serde(rename = "Host")]
    host: String,
    #[serde(rename = "Locality")]
    locality: &'static str,
    #[serde(rename = "Speculative")]
    speculative: bool,
    #[serde(rename = "Getting Result Time")]
    getting_result_time: u64,
    #[serde(rename = "Finish Time")]
    finish_time: i64,
    #[serde(rename = "Failed")]
    failed: bool,
    #[serde(rename = "Killed")]
    killed: bool,
    #[serde(rename = "Accumulables")]
    accumulables: Vec<Accumulable>,
}

/// One SQL metric's update in a task's `Accumulables`.
#[derive(Debug, Serialize)]
struct Accumulable {
    #[serde(rename = "ID")]
    id: i64,
    #[serde(rename = "Name")]
    name: String,
    #[serde(rename = "Update")]
    update: Decimal,
    #[serde(rename = "Value")]
    value: Decimal,
    #[serde(rename = "Internal")]
    internal: bool,
    #[serde(rename = "Count Failed Values")]
    count_failed_values: bool,
    #[serde(rename = "Metadata")]
    metadata: &'static str,
}

/// A number Spark writes as a JSON string.
#[derive(Debug, Clone, Copy)]
struct Decimal(i64);

impl Serialize for Decimal {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(itoa::Buffer::new().format(self.0))
    }
}

fn task_info(
    task: &TaskProfile,
    host: &str,
    finish: i64,
    failed: bool,
    accumulables: Vec<Accumulable>,
) -> TaskInfo {
    // a task of the local process ran on the driver; a cluster's, on its executor
    let (executor, host) = match &task.executor {
        Some(e) => (e.id.as_str(), e.host.as_str()),
        None => (DRIVER, host),
    };
    TaskInfo {
        task_id: task.task_id,
        index: task.partition,
        attempt: task.attempt,
        partition: task.partition,
        launch_time: task.start_epoch_millis,
        executor: executor.to_string(),
        host: host.to_string(),
        locality: if task.executor.is_some() {
            "NODE_LOCAL"
        } else {
            "PROCESS_LOCAL"
        },
        speculative: false,
        getting_result_time: 0,
        finish_time: finish,
        failed,
        killed: false,
        accumulables,
    }
}

/// Spark's task end event, written from its parts: a query's most numerous event, and
/// with a value per metric of the stage its largest.
#[derive(Debug, Serialize)]
pub struct TaskEnd {
    #[serde(rename = "Event")]
    event: &'static str,
    #[serde(rename = "Stage ID")]
    stage_id: u32,
    #[serde(rename = "Stage Attempt ID")]
    stage_attempt_id: u32,
    #[serde(rename = "Task Type")]
    task_type: &'static str,
    #[serde(rename = "Task End Reason")]
    reason: Value,
    #[serde(rename = "Task Info")]
    info: TaskInfo,
    #[serde(rename = "Task Executor Metrics")]
    executor_metrics: Value,
    #[serde(rename = "Task Metrics")]
    metrics: Value,
}

/// One event of a query's log, as Spark's JSON.
#[derive(Debug, Serialize)]
#[serde(untagged)]
pub enum QueryEvent {
    /// An event built as a JSON value.
    Json(Value),
    /// A task's end.
    TaskEnd(Box<TaskEnd>),
    /// qprof's profile of the query.
    Profile(Box<ProfileEvent>),
}

/// qprof's own event with a query's profile, written from its parts: serialized straight
/// to the log, not first copied into a JSON value (the largest event of a query).
#[derive(Debug, Serialize)]
pub struct ProfileEvent {
    #[serde(rename = "Event")]
    event: &'static str,
    #[serde(rename = "executionId")]
    execution_id: i64,
    #[serde(rename = "formatVersion")]
    format_version: u32,
    profile: QueryJson,
}

impl QueryEvent {
    /// The event as a JSON value.
    pub fn into_value(self) -> Value {
        match self {
            QueryEvent::Json(v) => v,
            QueryEvent::TaskEnd(end) => serde_json::to_value(end).unwrap_or(Value::Null),
            QueryEvent::Profile(profile) => serde_json::to_value(profile).unwrap_or(Value::Null),
        }
    }
}

/// Spark's id of the local process's executor.
pub(crate) const DRIVER: &str = "driver";

/// The events of one query run on `host`, in the order Spark's listeners need them.
pub fn query_events(q: &QueryRecord<'_>, host: &str, ids: &mut IdCounters) -> Vec<QueryEvent> {
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
            let info = task_info(task, self.host, 0, false, Vec::new());
            out.push(QueryEvent::Json(put(
                started,
                [(
                    "Task Info",
                    serde_json::to_value(info).unwrap_or(Value::Null),
                )],
            )));
        }
        let mut stage_peak = 0;
        let mut all_ended = true;
        for task in &stage.tasks {
            if !ended && task.finish_epoch_millis == 0 {
                all_ended = false;
                continue;
            }
            let peak = task.value(names::PEAK_MEMORY_BYTES).unwrap_or(0);
            stage_peak = stage_peak.max(peak);
            out.push(self.task_end(stage, task, result_task, peak));
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
        result_task: bool,
        peak: i64,
    ) -> QueryEvent {
        let mut accumulables = Vec::new();
        for id in &stage.node_ids {
            let Some(node) = self.nodes.get(id) else {
                continue;
            };
            for m in &node.metrics {
                if let Some(v) = m
                    .tasks
                    .iter()
                    .find(|v| v.task.is_some_and(|t| t.task_id == task.task_id))
                {
                    accumulables.push(Accumulable {
                        id: self.accs.get(node.id, &m.name),
                        name: m.display_name.clone(),
                        update: Decimal(v.value),
                        value: Decimal(v.value),
                        internal: true,
                        count_failed_values: true,
                        metadata: "sql",
                    });
                }
            }
        }
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
            reason: end_reason(task.error.as_deref()),
            info: task_info(task, self.host, finish, task.error.is_some(), accumulables),
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
        extension.accumulator_ids = Some(OrderedMap(
            self.profile
                .plan
                .iter()
                .map(|n| {
                    let per_metric = n
                        .metrics
                        .iter()
                        .map(|m| (m.name.clone(), self.accs.get(n.id, &m.name)))
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
        out.push(QueryEvent::Json(sql_end(
            self.execution_id,
            q,
            &self.query_id,
        )));
        out
    }
}

fn sql_start(
    execution_id: i64,
    q: &QueryRecord<'_>,
    query_id: &str,
    plan_description: &str,
    plan: Value,
) -> Value {
    let start = json!({
        "Event": events::SQL_EXECUTION_START,
        "executionId": execution_id,
        "rootExecutionId": execution_id,
        "description": q.description,
        "details": q.sql,
        "physicalPlanDescription": plan_description,
        "sparkPlanInfo": null,
        "time": q.start_epoch_millis,
        "modifiedConfigs": {},
        "jobTags": [],
        "jobGroupId": null,
        "queryId": query_id,
    });
    put(start, [("sparkPlanInfo", plan)])
}

fn sql_end(execution_id: i64, q: &QueryRecord<'_>, query_id: &str) -> Value {
    json!({
        "Event": events::SQL_EXECUTION_END,
        "executionId": execution_id,
        "time": q.end_epoch_millis,
        "errorMessage": q.error.clone().unwrap_or_default(),
        "queryId": query_id,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use qprof_core::metric::TaskRef;

    fn node(id: usize, name: &str, children: Vec<ProfileNode>) -> ProfileNode {
        ProfileNode {
            id,
            name: name.to_string(),
            display: format!("{name}: {id}"),
            stage_id: None,
            metrics: vec![NodeMetric::summed(
                names::OUTPUT_ROWS,
                "number of output rows",
                MetricKind::Sum,
                Vec::new(),
            )],
            info: vec![("outputPartitions".to_string(), "2".to_string())],
            functions: Vec::new(),
            children,
        }
    }

    fn keys(v: &Value) -> Vec<&str> {
        v.as_object().unwrap().keys().map(String::as_str).collect()
    }

    #[test]
    fn a_task_end_is_written_as_spark_writes_it() {
        let task = TaskRef {
            stage_id: 0,
            stage_attempt: 0,
            task_id: 7,
            partition: 3,
        };
        let mut plan = node(0, "ProjectionExec", vec![]);
        plan.stage_id = Some(0);
        plan.metrics = vec![NodeMetric::summed(
            names::OUTPUT_ROWS,
            "number of output rows",
            MetricKind::Sum,
            vec![TaskValue {
                task: Some(task),
                value: 42,
            }],
        )];
        let profile = QueryProfile {
            id: 0,
            sql: "SELECT 1".to_string(),
            rows: 42,
            duration_nanos: 1_000_000,
            start_epoch_millis: 1_000,
            plan,
            stages: vec![StageProfile {
                id: 0,
                node_ids: vec![0],
                tasks: vec![TaskProfile {
                    task_id: 7,
                    partition: 3,
                    start_epoch_millis: 1_000,
                    finish_epoch_millis: 1_010,
                    metrics: Vec::new(),
                    error: None,
                    attempt: 0,
                    executor: None,
                }],
                memory: None,
                executor_memory: Vec::new(),
            }],
            memory: Vec::new(),
            memory_pool: None,
        };
        let record = QueryRecord {
            description: "q".to_string(),
            sql: "SELECT 1",
            plan_text: String::new(),
            start_epoch_millis: 1_000,
            end_epoch_millis: 1_020,
            profile: Some(&profile),
            error: None,
        };
        let events = query_events(&record, "host", &mut IdCounters::default());
        let ends: Vec<Value> = events
            .iter()
            .filter(|e| matches!(e, QueryEvent::TaskEnd(_)))
            .map(|e| serde_json::from_slice(&serde_json::to_vec(e).unwrap()).unwrap())
            .collect();
        assert_eq!(ends.len(), 1);
        let end = &ends[0];
        assert_eq!(
            keys(end),
            [
                "Event",
                "Stage ID",
                "Stage Attempt ID",
                "Task Type",
                "Task End Reason",
                "Task Info",
                "Task Executor Metrics",
                "Task Metrics"
            ]
        );
        assert_eq!(end["Event"], "SparkListenerTaskEnd");
        assert_eq!(end["Task Type"], "ResultTask");
        let info = &end["Task Info"];
        assert_eq!(
            keys(info),
            [
                "Task ID",
                "Index",
                "Attempt",
                "Partition ID",
                "Launch Time",
                "Executor ID",
                "Host",
                "Locality",
                "Speculative",
                "Getting Result Time",
                "Finish Time",
                "Failed",
                "Killed",
                "Accumulables"
            ]
        );
        assert_eq!(
            (&info["Task ID"], &info["Index"], &info["Finish Time"]),
            (&json!(7), &json!(3), &json!(1_010))
        );
        assert_eq!(
            (&info["Executor ID"], &info["Host"], &info["Locality"]),
            (&json!("driver"), &json!("host"), &json!("PROCESS_LOCAL"))
        );
        let update = &info["Accumulables"][0];
        assert_eq!(
            keys(update),
            [
                "ID",
                "Name",
                "Update",
                "Value",
                "Internal",
                "Count Failed Values",
                "Metadata"
            ]
        );
        // Spark writes a SQL metric's update as a string
        assert_eq!(update["Update"], "42");
        assert_eq!(update["Value"], "42");
        assert_eq!(update["Name"], "number of output rows");
        // the live path turns the same event into a value with the same content
        let live = events
            .into_iter()
            .find(|e| matches!(e, QueryEvent::TaskEnd(_)))
            .unwrap()
            .into_value();
        assert_eq!(&live, end);
    }

    #[test]
    fn plan_info_keeps_spark_key_order_and_every_level_of_the_tree() {
        let plan = node(
            0,
            "ProjectionExec",
            vec![node(
                1,
                "FilterExec",
                vec![node(2, "DataSourceExec", vec![])],
            )],
        );
        let mut ids = IdCounters::default();
        let accs = Accumulators::assign(&plan, &mut ids);
        let info = plan_info(&plan, &accs);
        let keys: Vec<&str> = info
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        assert_eq!(
            keys,
            [
                "nodeName",
                "simpleString",
                "children",
                "metadata",
                "metrics"
            ]
        );
        let leaf = &info["children"][0]["children"][0];
        assert_eq!(leaf["nodeName"], "DataSourceExec");
        assert_eq!(leaf["simpleString"], "DataSourceExec: 2");
        assert_eq!(leaf["metadata"]["outputPartitions"], "2");
        assert_eq!(leaf["metrics"][0]["name"], "number of output rows");
        assert_eq!(leaf["metrics"][0]["accumulatorId"], 3);
        assert_eq!(leaf["children"], json!([]));
    }
}
