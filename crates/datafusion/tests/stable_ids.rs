//! Stable operator ids on real plans: the same query twice gives the same ids; a changed
//! predicate changes the id of the operator that holds it, and no other.

use datafusion::execution::SessionStateBuilder;
use datafusion::prelude::{SessionConfig, SessionContext};
use qprof_core::stable_id::stable_ids;
use qprof_datafusion::Profiler;

/// The plan's operator names and stable ids, in pre-order, for `sql` in a fresh session.
async fn ids(sql: &str) -> Vec<(String, String)> {
    let profiler = Profiler::new();
    let state = profiler
        .instrument(
            SessionStateBuilder::new()
                .with_config(SessionConfig::new().with_target_partitions(2))
                .with_default_features(),
        )
        .build();
    let ctx = SessionContext::new_with_state(state);
    let run = profiler.run_sql(&ctx, sql).await.unwrap();
    let names = run.profile.plan.iter().map(|n| n.name.clone());
    names.zip(stable_ids(&run.profile.plan)).collect()
}

const QUERY: &str = "SELECT v % 7 AS g, count(*) AS n FROM generate_series(1, 100000) AS s(v) \
                     WHERE v > {LIMIT} GROUP BY v % 7 ORDER BY g";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_same_query_keeps_its_ids_and_a_changed_predicate_changes_only_its_filter() {
    let first = ids(&QUERY.replace("{LIMIT}", "10")).await;
    let again = ids(&QUERY.replace("{LIMIT}", "10")).await;
    assert_eq!(first, again);
    assert!(first.len() >= 4, "{first:?}");
    let mut unique: Vec<&String> = first.iter().map(|(_, id)| id).collect();
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), first.len(), "ids are unique within the plan");

    let changed = ids(&QUERY.replace("{LIMIT}", "20")).await;
    assert_eq!(
        changed.iter().map(|(n, _)| n).collect::<Vec<_>>(),
        first.iter().map(|(n, _)| n).collect::<Vec<_>>(),
        "the same shape"
    );
    let differing: Vec<&str> = first
        .iter()
        .zip(&changed)
        .filter(|(a, b)| a.1 != b.1)
        .map(|(a, _)| a.0.as_str())
        .collect();
    assert_eq!(differing, ["FilterExec"], "{first:?}\n{changed:?}");
}
