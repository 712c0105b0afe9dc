//! Stable operator ids: names for a plan's operators that stay the same across runs of
//! the same query on the same data, so two runs can be compared operator by operator.
//!
//! An operator's id hashes what places and describes it: the names of its ancestors, its
//! position among its siblings at each level, its own name and its one-line description.
//! Its children do not count, so a change deep in a plan changes the ids of the operators
//! that changed, not of those above them. Ids are unique within a plan (no two operators
//! share a path). The hash is 64-bit FNV-1a, fixed here so that ids do not depend on the
//! Rust release that built qprof.

use crate::profile::ProfileNode;

/// FNV-1a, 64 bits.
#[derive(Clone, Copy)]
struct Fnv(u64);

impl Fnv {
    const START: Fnv = Fnv(0xcbf2_9ce4_8422_2325);

    fn bytes(mut self, data: &[u8]) -> Fnv {
        for &b in data {
            self.0 ^= u64::from(b);
            self.0 = self.0.wrapping_mul(0x0000_0100_0000_01b3);
        }
        self
    }

    /// `text` and a separator, so that ("ab", "c") and ("a", "bc") differ.
    fn field(self, text: &str) -> Fnv {
        self.bytes(text.as_bytes()).bytes(&[0xff])
    }
}

/// The stable id of every operator of `plan`, in pre-order (index = the operator's `id`).
pub fn stable_ids(plan: &ProfileNode) -> Vec<String> {
    let mut out = Vec::new();
    walk(plan, Fnv::START, 0, &mut out);
    out
}

/// `node`'s id from `above` (its ancestors' names and positions) and its position.
fn walk(node: &ProfileNode, above: Fnv, position: usize, out: &mut Vec<String>) {
    let place = above.field(&position.to_string()).field(&node.name);
    let id = place.field(node.display.trim());
    out.push(format!("{:016x}", id.0));
    for (i, child) in node.children.iter().enumerate() {
        walk(child, place, i, out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::fixtures::sample;

    #[test]
    fn ids_are_unique_repeatable_and_follow_the_operators_text() {
        let p = sample();
        let ids = stable_ids(&p.plan);
        assert_eq!(ids.len(), 3);
        assert_eq!(
            ids,
            stable_ids(&sample().plan),
            "the same plan, the same ids"
        );
        let mut unique = ids.clone();
        unique.sort();
        unique.dedup();
        assert_eq!(unique.len(), 3);
        assert!(ids.iter().all(|id| id.len() == 16));

        // the filter's predicate changes: its id changes; its parent's does not, nor its
        // child's (ancestors count by name and position, not by text)
        let mut changed = sample();
        changed.plan.children[0].display = "FilterExec: other predicate".into();
        let after = stable_ids(&changed.plan);
        assert_eq!(after[0], ids[0]);
        assert_ne!(after[1], ids[1]);
        assert_eq!(after[2], ids[2]);

        // twins (same name and text) under one parent still differ by position
        let mut twins = sample();
        let scan = twins.plan.children[0].children[0].clone();
        twins.plan.children[0].children.push(scan);
        let ids = stable_ids(&twins.plan);
        assert_eq!(ids.len(), 4);
        assert_ne!(ids[2], ids[3]);
    }
}
