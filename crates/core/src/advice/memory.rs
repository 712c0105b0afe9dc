//! Rules about memory: `memory-near-limit`, and `untracked-memory` (the heap the query grew
//! against what its operators reserved).

use super::{Cost, CostKind, Finding, Severity, num, pct, thresholds, value};
use crate::format;
use crate::profile::{ProfileNode, QueryProfile, names};

/// `memory-near-limit`: the memory pool came within a tenth of its limit while the query
/// ran; an operator that cannot spill fails there, the others spill. It cost the memory
/// held.
pub(super) fn memory_near_limit(profile: &QueryProfile) -> Option<Finding> {
    let pool = profile.memory_pool?;
    let limit = pool.limit_bytes.filter(|l| *l > 0)?;
    let peak = pool.peak_bytes;
    let share = pct(peak, limit);
    if share < thresholds::MEMORY_NEAR_LIMIT_PERCENT {
        return None;
    }
    let holder = profile
        .plan
        .iter()
        .max_by_key(|n| value(n, names::PEAK_MEMORY_BYTES))
        .filter(|n| value(n, names::PEAK_MEMORY_BYTES) > 0);
    let mut message = format!(
        "the query's memory pool held up to {} of its {} limit ({share}%)",
        format::bytes(num(peak)),
        format::bytes(num(limit)),
    );
    if let Some(n) = holder {
        message.push_str(&format!(
            ", most of it #{} {} ({})",
            n.id,
            n.name,
            format::bytes(num(value(n, names::PEAK_MEMORY_BYTES)))
        ));
    }
    message.push_str(": operators that can spill did or will, those that cannot fail at the limit");
    Some(Finding {
        rule: "memory-near-limit",
        severity: Severity::Warning,
        node_id: holder.map(|n| n.id),
        stage_id: holder.and_then(|n| n.stage_id),
        node_ids: holder.iter().map(|n| n.id).collect(),
        stage_ids: Vec::new(),
        message,
        cost: Cost::new(CostKind::Memory, peak, limit),
        action: "raise the pool's limit or run fewer queries at once; a query that aggregates or joins on fewer columns, or filters first, holds less".to_string(),
        numbers: vec![
            ("memoryPoolPeakBytes", num(peak)),
            ("memoryLimitBytes", num(limit)),
        ],
    })
}

/// `untracked-memory`: the heap grew, while the query ran, well beyond what its memory
/// pool and caches reserved: memory the engine allocates without reserving it (a
/// function's or an operator's buffers), which a memory limit does not bound. Growth is
/// counted from the query's first memory sample, so what earlier queries, caches or kept
/// profiles hold never counts, and only for a query that ran alone in its process (beside
/// others, the heap's growth is theirs too). It cost the untracked bytes.
pub(super) fn untracked_memory(profile: &QueryProfile) -> Option<Finding> {
    // the heap is the process's: beside other queries its growth is not this one's
    if profile.overlapping_queries > 0 {
        return None;
    }
    let start = profile.memory.first()?;
    // no counting allocator, no heap figure
    if start.heap_bytes == 0 {
        return None;
    }
    let samples = profile
        .memory
        .iter()
        .chain(profile.stages.iter().filter_map(|s| s.memory.as_ref()));
    let (mut heap, mut held) = (start.heap_bytes, start.unified_bytes());
    for sample in samples {
        heap = heap.max(sample.heap_bytes);
        held = held.max(sample.unified_bytes());
    }
    let grown = heap - start.heap_bytes;
    let reserved =
        (held - start.unified_bytes()).max(profile.memory_pool.map_or(0, |p| p.peak_bytes));
    let untracked = grown.saturating_sub(reserved);
    if untracked < thresholds::UNTRACKED_MEMORY_MIN_BYTES
        || untracked < reserved.saturating_mul(thresholds::UNTRACKED_MEMORY_RATIO)
    {
        return None;
    }
    let allocator = profile
        .plan
        .iter()
        .max_by_key(|n| value(n, names::NUM_MEMORY_ALLOCATIONS))
        .filter(|n| value(n, names::NUM_MEMORY_ALLOCATIONS) > 0);
    let mut message = format!(
        "while the query ran the heap grew by {} (to {}) but its memory pool and caches reserved at most {}: {} allocated without being reserved, which no memory limit bounds",
        format::bytes(num(grown)),
        format::bytes(num(heap)),
        format::bytes(num(reserved)),
        format::bytes(num(untracked)),
    );
    if let Some(n) = allocator {
        message.push_str(&allocations(n));
    }
    if profile.stack_samples.is_some() {
        // the symbolizer keeps what it parsed of the binary's debug information
        message.push_str(
            " (stacks were sampled: naming their addresses keeps parts of the binary's debug information on the heap too)",
        );
    }
    let limit = profile
        .memory_pool
        .and_then(|p| p.limit_bytes)
        .filter(|l| *l > 0);
    Some(Finding {
        rule: "untracked-memory",
        severity: Severity::Warning,
        node_id: allocator.map(|n| n.id),
        stage_id: allocator.and_then(|n| n.stage_id),
        node_ids: allocator.iter().map(|n| n.id).collect(),
        stage_ids: Vec::new(),
        message,
        cost: Cost::new(CostKind::Memory, untracked, limit.unwrap_or(heap)),
        action: "find what holds it (the operator's allocations, a function's buffers): an operator that reserves what it holds is bounded by the limit and can spill; until then, leave headroom beyond the limit".to_string(),
        numbers: vec![
            ("heapGrowthBytes", num(grown)),
            ("reservedBytes", num(reserved)),
            ("untrackedBytes", num(untracked)),
        ],
    })
}

/// `; the most allocations were made in #4 HashJoinExec (1,234)`.
fn allocations(node: &ProfileNode) -> String {
    format!(
        "; the most allocations were made in #{} {} ({})",
        node.id,
        node.name,
        format::integer(num(value(node, names::NUM_MEMORY_ALLOCATIONS)))
    )
}

#[cfg(test)]
mod tests {
    use super::super::advise;
    use super::*;
    use crate::executor_memory::MemorySample;
    use crate::profile::MemoryPoolUsage;
    use crate::profile::fixtures::sample;

    fn fired(profile: &QueryProfile) -> Vec<Finding> {
        advise(profile)
            .into_iter()
            .filter(|f| f.rule == "untracked-memory")
            .collect()
    }

    fn heap(heap_bytes: u64, execution_bytes: u64) -> MemorySample {
        MemorySample {
            heap_bytes,
            execution_bytes,
            ..MemorySample::default()
        }
    }

    /// The sample whose heap went from `start` to `peak` while its pool reserved `reserved`.
    fn grown(start: u64, peak: u64, reserved: u64) -> QueryProfile {
        let mut p = sample();
        p.memory = vec![heap(start, 0), heap(peak, reserved), heap(start, 0)];
        p.memory_pool = Some(MemoryPoolUsage {
            limit_bytes: None,
            peak_bytes: reserved,
        });
        p
    }

    #[test]
    fn the_heap_the_query_grew_beyond_its_reservations_is_untracked() {
        let min = thresholds::UNTRACKED_MEMORY_MIN_BYTES;
        // a heap of 3 GiB before the query started (earlier queries, caches): not counted
        let before = 3 << 30;
        let found = fired(&grown(before, before + min + (1 << 20), 1 << 20));
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].cost.kind, CostKind::Memory);
        assert_eq!(found[0].cost.amount, min);
        assert!(
            found[0].message.starts_with("while the query ran the heap grew by 257.0 MiB (to 3.3 GiB) but its memory pool and caches reserved at most 1024.0 KiB"),
            "{}",
            found[0].message
        );
        // the sample's operators made no allocation: no operator named
        assert_eq!(found[0].node_id, None);
        assert!(!found[0].message.contains("stacks were sampled"));
        let mut sampled = grown(before, before + min + (1 << 20), 1 << 20);
        sampled.stack_samples = Some(crate::stacks::StackSamples::default());
        assert!(fired(&sampled)[0].message.contains("stacks were sampled"));
    }

    #[test]
    fn a_large_heap_the_query_did_not_grow_is_not_untracked() {
        let min = thresholds::UNTRACKED_MEMORY_MIN_BYTES;
        for quiet in [
            // a large heap, not grown by the query
            grown(4 << 30, 4 << 30, 0),
            // grown, but under the floor
            grown(1 << 30, (1 << 30) + min - 1, 0),
            // grown, but under twice what the pool reserved
            grown(1 << 20, (1 << 20) + min * 3 - 1, min),
            // no heap figure (no counting allocator)
            grown(0, 0, 0),
            // grown, but beside another query of the process
            QueryProfile {
                overlapping_queries: 1,
                ..grown(1 << 20, (1 << 20) + min * 4, 1 << 20)
            },
        ] {
            assert!(fired(&quiet).is_empty(), "{:?}", fired(&quiet));
        }
        assert!(fired(&sample()).is_empty());
    }
}
