//! The iteration order of Scala's immutable sets and maps of `Int`, in which Spark's SQL
//! listener keeps an execution's jobs and stages, and so in which its REST API lists job
//! ids and its metric aggregation visits stages.
//!
//! Up to four entries Scala keeps insertion order (`Set1`…`Set4`, `Map1`…`Map4`); from the
//! fifth on the collection is a hash trie (CHAMP), whose order depends on the keys only:
//! at each level of five hash bits, the keys alone in their slot in slot order, then the
//! shared slots' sub-tries in slot order.

use std::collections::BTreeMap;

/// Scala's `Hashing.improve` of an `Int` key's hash code (the `Int` itself).
fn improve(key: i32) -> u32 {
    let mut h = key.wrapping_add(!key.wrapping_shl(9));
    h ^= ((h as u32) >> 14) as i32;
    h = h.wrapping_add(h.wrapping_shl(4));
    (h ^ ((h as u32) >> 10) as i32) as u32
}

fn trie_order(keys: Vec<(u32, i64)>, shift: u32, out: &mut Vec<i64>) {
    let mut slots: BTreeMap<u32, Vec<(u32, i64)>> = BTreeMap::new();
    for key in keys {
        slots
            .entry(key.0.checked_shr(shift).unwrap_or(0) & 31)
            .or_default()
            .push(key);
    }
    out.extend(slots.values().filter(|k| k.len() == 1).map(|k| k[0].1));
    for shared in slots.into_values().filter(|k| k.len() > 1) {
        if shift >= 32 {
            // equal hashes: impossible for distinct `Int`s, kept in insertion order
            out.extend(shared.iter().map(|k| k.1));
        } else {
            trie_order(shared, shift + 5, out);
        }
    }
}

/// `ids`, given in insertion order (repeats ignored), in the order a Scala immutable
/// `Set[Int]` (or the keys of a `Map[Int, _]`) holding them iterates.
pub(crate) fn scala_order(ids: &[i64]) -> Vec<i64> {
    let mut seen = std::collections::HashSet::with_capacity(ids.len());
    let distinct: Vec<i64> = ids.iter().copied().filter(|id| seen.insert(*id)).collect();
    if distinct.len() <= 4 {
        return distinct;
    }
    // Spark's ids are `Int`s
    let keys = distinct
        .iter()
        .map(|&id| (improve(id as i32), id))
        .collect();
    let mut out = Vec::with_capacity(distinct.len());
    trie_order(keys, 0, &mut out);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    // orders read from Scala 2.13's own immutable.HashMap
    #[test]
    fn small_collections_keep_insertion_order() {
        assert_eq!(scala_order(&[3, 1, 2, 1]), [3, 1, 2]);
        assert_eq!(scala_order(&[0, 1, 2, 3]), [0, 1, 2, 3]);
    }

    #[test]
    fn larger_ones_iterate_as_scalas_hash_trie() {
        let upto = |n: i64| (0..=n).collect::<Vec<_>>();
        assert_eq!(scala_order(&upto(4)), [0, 1, 2, 3, 4]);
        assert_eq!(scala_order(&upto(10)), [0, 5, 10, 1, 6, 9, 2, 7, 3, 8, 4]);
        assert_eq!(
            scala_order(&upto(20)),
            [
                0, 5, 10, 14, 20, 1, 6, 9, 13, 2, 17, 12, 7, 3, 18, 16, 11, 8, 19, 4, 15
            ]
        );
        let mut reversed = upto(10);
        reversed.reverse();
        assert_eq!(scala_order(&reversed), scala_order(&upto(10)));
    }

    proptest! {
        #[test]
        fn the_order_is_a_permutation_of_the_distinct_ids(ids in proptest::collection::vec(0i64..100_000, 0..64)) {
            let mut ordered = scala_order(&ids);
            prop_assert_eq!(ordered.len(), ids.iter().collect::<std::collections::BTreeSet<_>>().len());
            ordered.sort_unstable();
            let mut distinct = ids.clone();
            distinct.sort_unstable();
            distinct.dedup();
            prop_assert_eq!(ordered, distinct);
        }
    }
}
