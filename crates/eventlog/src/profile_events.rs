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
struct Accumulators(HashMap<(usize, String), i64>);

impl Accumulators {
    fn assign(plan: &ProfileNode, ids: &mut IdCounters) -> Accumulators {
        let mut map = HashMap::new();
        for node in plan.iter() {
            for m in &node.metrics {
                ids.accumulator += 1;
                map.insert((node.id, m.name.clone()), ids.accumulator);
            }
        }
        Accumulators(map)
    }

    fn get(&self, node: usize, metric: &str) -> i64 {
        self.0
            .get(&(node, metric.to_string()))
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
    json!({
        "nodeName": node.name,
        "simpleString": node.display,
        "children": node.children.iter().map(|c| plan_info(c, accs)).collect::<Vec<_>>(),
        "metadata": metadata,
        "metrics": node.metrics.iter().map(|m| json!({
            "name": m.display_name,
            "accumulatorId": accs.get(node.id, &m.name),
            "metricType": m.kind.as_str(),
        })).collect::<Vec<_>>(),
    })
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

fn task_info(
    task: &TaskProfile,
    host: &str,
    finish: i64,
    failed: bool,
    accumulables: Vec<Value>,
) -> Value {
    json!({
        "Task ID": task.task_id,
        "Index": task.partition,
        "Attempt": 0,
        "Partition ID": task.partition,
        "Launch Time": task.start_epoch_millis,
        "Executor ID": "driver",
        "Host": host,
        "Locality": "PROCESS_LOCAL",
        "Speculative": false,
        "Getting Result Time": 0,
        "Finish Time": finish,
        "Failed": failed,
        "Killed": false,
        "Accumulables": accumulables,
    })
}

/// The events of one query run on `host`, in the order Spark's listeners need them.
pub fn query_events(q: &QueryRecord<'_>, host: &str, ids: &mut IdCounters) -> Vec<Value> {
    let execution_id = ids.execution;
    ids.execution += 1;
    let query_id = uuid_v4();
    let mut out = Vec::new();
    let Some(profile) = q.profile else {
        // never planned: an execution without a plan, job or stages
        let not_planned = json!({"nodeName": "NotPlanned", "simpleString": "NotPlanned", "children": [], "metadata": {}, "metrics": []});
        out.push(sql_start(execution_id, q, &query_id, "", not_planned));
        out.push(sql_end(execution_id, q, &query_id));
        return out;
    };
    let recorded = profile;
    let with_functions = with_function_metrics(profile);
    let profile = &with_functions;
    let accs = Accumulators::assign(&profile.plan, ids);
    let nodes = index(&profile.plan);
    out.push(sql_start(
        execution_id,
        q,
        &query_id,
        &q.plan_text,
        plan_info(&profile.plan, &accs),
    ));
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
    let root_stage = profile.plan.stage_id;
    let stage_name = |s: &StageProfile| {
        let root = s
            .node_ids
            .first()
            .and_then(|id| nodes.get(id))
            .map_or("stage", |n| n.name.as_str());
        format!("{root} at {}", q.description)
    };
    let details = q.sql.trim();
    out.push(json!({
        "Event": events::JOB_START,
        "Job ID": job_id,
        "Submission Time": q.start_epoch_millis,
        "Stage Infos": stages.iter().map(|s| stage_info(s, &stage_name(s), &parent_stages(&nodes, s), details, None, None)).collect::<Vec<_>>(),
        "Stage IDs": stages.iter().map(|s| s.id).collect::<Vec<_>>(),
        "Properties": properties,
    }));
    let mut driver_updates = Vec::new();
    for node in profile.plan.iter() {
        for m in &node.metrics {
            if let Some(v) = m.tasks.iter().rev().find(|v| v.task.is_none()) {
                driver_updates.push(json!([accs.get(node.id, &m.name), v.value]));
            }
        }
    }
    for stage in &stages {
        let result_task = Some(stage.id) == root_stage;
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
            .or(q.error.as_deref().filter(|_| result_task));
        let name = stage_name(stage);
        let parents = parent_stages(&nodes, stage);
        out.push(json!({
            "Event": events::STAGE_SUBMITTED,
            "Stage Info": stage_info(stage, &name, &parents, details, Some((submitted, None)), None),
            "Properties": properties,
        }));
        for task in &stage.tasks {
            out.push(json!({
                "Event": events::TASK_START,
                "Stage ID": stage.id,
                "Stage Attempt ID": 0,
                "Task Info": task_info(task, host, 0, false, Vec::new()),
            }));
        }
        let mut stage_peak = 0;
        for task in &stage.tasks {
            let mut accumulables = Vec::new();
            for id in &stage.node_ids {
                let Some(node) = nodes.get(id) else {
                    continue;
                };
                for m in &node.metrics {
                    if let Some(v) = m
                        .tasks
                        .iter()
                        .find(|v| v.task.is_some_and(|t| t.task_id == task.task_id))
                    {
                        accumulables.push(json!({
                            "ID": accs.get(node.id, &m.name),
                            "Name": m.display_name,
                            "Update": v.value.to_string(),
                            "Value": v.value.to_string(),
                            "Internal": true,
                            "Count Failed Values": true,
                            "Metadata": "sql",
                        }));
                    }
                }
            }
            let figures = task_figures(&nodes, stage, task);
            let peak = task.value(names::PEAK_MEMORY_BYTES).unwrap_or(0);
            stage_peak = stage_peak.max(peak);
            // the task's own execution peak, the stage's other regions
            let task_memory = MemorySample {
                execution_bytes: u64::try_from(peak).unwrap_or(0),
                ..stage.memory.unwrap_or_default()
            };
            let finish = (task.finish_epoch_millis as i64).max(task.start_epoch_millis as i64);
            out.push(json!({
                "Event": events::TASK_END,
                "Stage ID": stage.id,
                "Stage Attempt ID": 0,
                "Task Type": if result_task { "ResultTask" } else { "ShuffleMapTask" },
                "Task End Reason": end_reason(task.error.as_deref()),
                "Task Info": task_info(task, host, finish, task.error.is_some(), accumulables),
                "Task Executor Metrics": executor_metrics(&task_memory),
                "Task Metrics": task_metrics(task, &figures, result_task),
            }));
        }
        // without samples, the stage's largest task peak stands for its execution memory
        let stage_memory = stage.memory.unwrap_or(MemorySample {
            execution_bytes: u64::try_from(stage_peak).unwrap_or(0),
            ..MemorySample::default()
        });
        out.push(json!({
            "Event": events::STAGE_EXECUTOR_METRICS,
            "Executor ID": "driver",
            "Stage ID": stage.id,
            "Stage Attempt ID": 0,
            "Executor Metrics": executor_metrics(&stage_memory),
        }));
        out.push(json!({
            "Event": events::STAGE_COMPLETED,
            "Stage Info": stage_info(stage, &name, &parents, details, Some((submitted, Some(completed))), failure),
        }));
    }
    let job_result = match &q.error {
        None => json!({"Result": "JobSucceeded"}),
        Some(e) => json!({"Result": "JobFailed", "Exception": {"Message": e, "Stack Trace": []}}),
    };
    out.push(json!({
        "Event": events::JOB_END,
        "Job ID": job_id,
        "Completion Time": q.end_epoch_millis,
        "Job Result": job_result,
    }));
    if !driver_updates.is_empty() {
        out.push(json!({
            "Event": events::DRIVER_ACCUM_UPDATES,
            "executionId": execution_id,
            "accumUpdates": driver_updates,
        }));
    }
    let mut extension = QueryJson::from(recorded);
    extension.accumulator_ids = Some(OrderedMap(
        profile
            .plan
            .iter()
            .map(|n| {
                let per_metric = n
                    .metrics
                    .iter()
                    .map(|m| (m.name.clone(), accs.get(n.id, &m.name)))
                    .collect();
                (n.id.to_string(), OrderedMap(per_metric))
            })
            .collect(),
    ));
    out.push(json!({
        "Event": events::QPROF_QUERY_PROFILE,
        "executionId": execution_id,
        "formatVersion": FORMAT_VERSION,
        "profile": extension,
    }));
    out.push(sql_end(execution_id, q, &query_id));
    out
}

fn sql_start(
    execution_id: i64,
    q: &QueryRecord<'_>,
    query_id: &str,
    plan_description: &str,
    plan: Value,
) -> Value {
    json!({
        "Event": events::SQL_EXECUTION_START,
        "executionId": execution_id,
        "rootExecutionId": execution_id,
        "description": q.description,
        "details": q.sql,
        "physicalPlanDescription": plan_description,
        "sparkPlanInfo": plan,
        "time": q.start_epoch_millis,
        "modifiedConfigs": {},
        "jobTags": [],
        "jobGroupId": null,
        "queryId": query_id,
    })
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
