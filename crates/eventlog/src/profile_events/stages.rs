//! A stage's part of a query's events: its info and its executors' memory.

use std::collections::{BTreeSet, HashMap};

use qprof_core::executor_memory::MemorySample;
use qprof_core::profile::{ProfileNode, StageProfile};
use serde_json::{Map, Value, json};

use crate::spark::EXECUTOR_METRIC_NAMES;
use qprof_core::metric::saturating_i64;

/// The nodes of a plan by id.
pub(super) type NodeIndex<'a> = HashMap<usize, &'a ProfileNode>;

/// Each node of `plan` by its id.
pub(super) fn index(plan: &ProfileNode) -> NodeIndex<'_> {
    plan.iter().map(|n| (n.id, n)).collect()
}

/// Stage ids feeding `stage`: stages of children of its nodes outside it.
pub(super) fn parent_stages(nodes: &NodeIndex<'_>, stage: &StageProfile) -> Vec<i64> {
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

/// Spark's `Stage Info` of `stage`, with its submission and completion times when given.
pub(super) fn stage_info(
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
pub(super) fn executor_metrics(memory: &MemorySample) -> Value {
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
                (v != 0).then(|| (n.to_string(), json!(saturating_i64(v))))
            })
            .collect(),
    )
}
