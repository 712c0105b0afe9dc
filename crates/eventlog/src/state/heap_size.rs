//! How many bytes of heap a replayed state holds, counted from what it holds: each
//! string's and vector's capacity, each map's nodes or table with the layout of the
//! standard library's maps, JSON values recursively, and for every allocation the
//! allocator's own rounding and header (glibc's: 8 bytes, in 16-byte steps, 32 at least).
//! A cache budgets replays with it.

use std::collections::{BTreeMap, HashMap};
use std::mem::size_of;

use qprof_core::metric::TaskValue;
use serde_json::Value;

/// Heap bytes a value owns (not its own inline size).
pub(crate) trait HeapSize {
    /// Heap bytes owned, allocator overhead included.
    fn heap_bytes(&self) -> usize;
}

/// What an allocation of `n` bytes takes from the allocator.
fn chunk(n: usize) -> usize {
    if n == 0 {
        0
    } else {
        (n + 8).div_ceil(16).max(2) * 16
    }
}

macro_rules! no_heap {
    ($($t:ty),*) => { $(impl HeapSize for $t { fn heap_bytes(&self) -> usize { 0 } })* };
}
no_heap!(bool, i64, u64, u32, TaskValue);

impl HeapSize for String {
    fn heap_bytes(&self) -> usize {
        chunk(self.capacity())
    }
}

impl<T: HeapSize> HeapSize for Option<T> {
    fn heap_bytes(&self) -> usize {
        self.as_ref().map_or(0, HeapSize::heap_bytes)
    }
}

impl<T: HeapSize> HeapSize for Box<T> {
    fn heap_bytes(&self) -> usize {
        chunk(size_of::<T>()) + (**self).heap_bytes()
    }
}

impl<T: HeapSize> HeapSize for Vec<T> {
    fn heap_bytes(&self) -> usize {
        chunk(self.capacity() * size_of::<T>())
            + self.iter().map(HeapSize::heap_bytes).sum::<usize>()
    }
}

impl<T: HeapSize, const N: usize> HeapSize for [T; N] {
    fn heap_bytes(&self) -> usize {
        self.iter().map(HeapSize::heap_bytes).sum()
    }
}

impl<A: HeapSize, B: HeapSize> HeapSize for (A, B) {
    fn heap_bytes(&self) -> usize {
        self.0.heap_bytes() + self.1.heap_bytes()
    }
}

impl<A: HeapSize, B: HeapSize, C: HeapSize> HeapSize for (A, B, C) {
    fn heap_bytes(&self) -> usize {
        self.0.heap_bytes() + self.1.heap_bytes() + self.2.heap_bytes()
    }
}

impl<T: HeapSize, E: HeapSize> HeapSize for Result<T, E> {
    fn heap_bytes(&self) -> usize {
        match self {
            Ok(v) => v.heap_bytes(),
            Err(e) => e.heap_bytes(),
        }
    }
}

/// A B-tree of `len` entries of `entry` bytes: nodes of 11 slots (a header of 16 bytes,
/// inner nodes 12 child pointers more), filled to 6 when entries come in key order, as a
/// log's do.
fn btree_bytes(len: usize, entry: usize) -> usize {
    if len == 0 {
        return 0;
    }
    let leaf = chunk(16 + 11 * entry);
    let leaves = len.div_ceil(6);
    let inner = if leaves > 1 { leaves.div_ceil(6) } else { 0 };
    leaves * leaf + inner * chunk(16 + 11 * entry + 12 * 8)
}

impl<K: HeapSize, V: HeapSize> HeapSize for BTreeMap<K, V> {
    fn heap_bytes(&self) -> usize {
        btree_bytes(self.len(), size_of::<K>() + size_of::<V>())
            + self
                .iter()
                .map(|(k, v)| k.heap_bytes() + v.heap_bytes())
                .sum::<usize>()
    }
}

/// A hash table holding `capacity` entries of `entry` bytes: buckets at 7/8 load, each an
/// entry and a control byte, plus a group of control bytes, in one allocation.
fn hash_table_bytes(capacity: usize, entry: usize) -> usize {
    if capacity == 0 {
        return 0;
    }
    let buckets = if capacity < 8 {
        (capacity + 1).next_power_of_two()
    } else {
        (capacity * 8 / 7).next_power_of_two()
    };
    chunk(buckets * (entry + 1) + 16)
}

impl<K: HeapSize, V: HeapSize, S> HeapSize for HashMap<K, V, S> {
    fn heap_bytes(&self) -> usize {
        hash_table_bytes(self.capacity(), size_of::<K>() + size_of::<V>())
            + self
                .iter()
                .map(|(k, v)| k.heap_bytes() + v.heap_bytes())
                .sum::<usize>()
    }
}

impl HeapSize for Value {
    fn heap_bytes(&self) -> usize {
        match self {
            Value::Null | Value::Bool(_) | Value::Number(_) => 0,
            Value::String(s) => chunk(s.capacity()),
            Value::Array(items) => {
                chunk(items.capacity() * size_of::<Value>())
                    + items.iter().map(HeapSize::heap_bytes).sum::<usize>()
            }
            // an ordered map: a vector of (hash, key, value) grown by doubling, and a
            // table of indices
            Value::Object(map) => {
                if map.is_empty() {
                    return 0;
                }
                let entry = size_of::<u64>() + size_of::<String>() + size_of::<Value>();
                chunk(map.len().max(4).next_power_of_two() * entry)
                    + hash_table_bytes(map.len(), size_of::<usize>())
                    + map
                        .iter()
                        .map(|(k, v)| chunk(k.capacity()) + v.heap_bytes())
                        .sum::<usize>()
            }
        }
    }
}

use std::sync::Arc;

use crate::state::plan::Interner;
use crate::state::{
    AppInfo, Execution, Executor, Job, PlanMetric, PlanNode, Stage, Task, TaskMetrics,
};

no_heap!(TaskMetrics);

impl HeapSize for AppInfo {
    fn heap_bytes(&self) -> usize {
        self.spark_version.heap_bytes()
            + self.id.heap_bytes()
            + self.name.heap_bytes()
            + self.attempt_id.heap_bytes()
            + self.user.heap_bytes()
    }
}

impl HeapSize for Executor {
    fn heap_bytes(&self) -> usize {
        self.id.heap_bytes()
            + self.host.heap_bytes()
            + self.remove_reason.heap_bytes()
            + self.log_urls.heap_bytes()
            + self.attributes.heap_bytes()
            + self.resources.heap_bytes()
    }
}

impl HeapSize for Job {
    fn heap_bytes(&self) -> usize {
        self.name.heap_bytes()
            + self.description.heap_bytes()
            + self.stage_ids.heap_bytes()
            + self.job_group.heap_bytes()
            + self.job_tags.heap_bytes()
    }
}

impl HeapSize for Task {
    fn heap_bytes(&self) -> usize {
        self.executor_id.heap_bytes()
            + self.host.heap_bytes()
            + self.locality.heap_bytes()
            + self.error_message.heap_bytes()
    }
}

impl HeapSize for Stage {
    fn heap_bytes(&self) -> usize {
        self.name.heap_bytes()
            + self.rdd_ids.heap_bytes()
            + self.parent_ids.heap_bytes()
            + self.details.heap_bytes()
            + self.failure_reason.heap_bytes()
            + self.description.heap_bytes()
            + self.pool.heap_bytes()
            + self.accumulables.heap_bytes()
            + self.tasks.heap_bytes()
            + self.executor_peaks.heap_bytes()
    }
}

/// A shared string counts where it is held once, in the interner; its other holders own
/// only a pointer.
impl HeapSize for Arc<str> {
    fn heap_bytes(&self) -> usize {
        0
    }
}

impl HeapSize for Box<str> {
    fn heap_bytes(&self) -> usize {
        chunk(self.len())
    }
}

impl HeapSize for PlanMetric {
    fn heap_bytes(&self) -> usize {
        0
    }
}

impl HeapSize for PlanNode {
    fn heap_bytes(&self) -> usize {
        self.name.heap_bytes()
            + self.description.heap_bytes()
            + self.metrics.heap_bytes()
            + self.children.heap_bytes()
    }
}

/// The interner's table and each shared string (with its two reference counts).
impl HeapSize for Interner {
    fn heap_bytes(&self) -> usize {
        let strings = self.strings();
        hash_table_bytes(strings.capacity(), size_of::<Arc<str>>())
            + strings.iter().map(|s| chunk(16 + s.len())).sum::<usize>()
    }
}

impl HeapSize for Execution {
    fn heap_bytes(&self) -> usize {
        self.description.heap_bytes()
            + self.details.heap_bytes()
            + self.plan_description.heap_bytes()
            + self.plan.heap_bytes()
            + self.error_message.heap_bytes()
            + self.query_id.heap_bytes()
            + self.modified_configs.heap_bytes()
            + self.job_ids.heap_bytes()
            + self.metric_types.heap_bytes()
            + self.task_values.heap_bytes()
            + self.driver_values.heap_bytes()
            + self
                .qprof_profile_json
                .as_ref()
                .map_or(0, |(v, json)| v.heap_bytes() + chunk(json.len()))
            + self
                .qprof_stack_samples_json
                .as_ref()
                .map_or(0, |json| chunk(json.len()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn containers_count_their_capacity_their_items_and_the_allocators_share() {
        assert_eq!(chunk(0), 0);
        assert_eq!(chunk(1), 32);
        assert_eq!(chunk(24), 32);
        assert_eq!(chunk(25), 48);
        let mut v: Vec<String> = Vec::with_capacity(4);
        v.push("abc".to_string());
        assert_eq!(v.heap_bytes(), chunk(4 * size_of::<String>()) + chunk(3));
        let value: Value = serde_json::json!({"a": [1, 2], "b": "xyz"});
        assert!(value.heap_bytes() > 2 * size_of::<Value>() + 3);
        let map: BTreeMap<i64, String> = (0..60).map(|i| (i, "x".repeat(10))).collect();
        let entries = 60 * (8 + size_of::<String>());
        let held = map.heap_bytes() - 60 * chunk(10);
        assert!(held > entries && held < 3 * entries, "{held} for {entries}");
    }
}
