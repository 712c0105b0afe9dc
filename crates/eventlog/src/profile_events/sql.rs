//! The SQL execution's side of a query's events: its plan with the metrics it declares,
//! their accumulator ids, and the execution's start and end.

use std::collections::HashMap;
use std::hash::{BuildHasher, Hasher};

use qprof_core::catalog;
use qprof_core::metric::TaskValue;
use qprof_core::profile::{NodeMetric, ProfileNode, QueryProfile};
use serde_json::{Map, Value, json};

use super::{IdCounters, QueryRecord, put};
use crate::spark::events;
use qprof_core::metric::saturating_i64;

/// A random version-4 UUID (Spark parses `queryId` as a `java.util.UUID`).
pub(super) fn uuid_v4() -> String {
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
pub(super) fn with_function_metrics(profile: &QueryProfile) -> QueryProfile {
    fn add(node: &mut ProfileNode) {
        for (i, f) in node.functions.iter().enumerate() {
            let def = &catalog::FUNCTION_CPU_NANOS;
            let value = TaskValue {
                task: None,
                value: saturating_i64(f.cpu_nanos),
            };
            // a call's text is no operator label: its display name is its own
            node.metrics.push(NodeMetric::summed(
                format!("{}{i}", def.name),
                def.display_for(&f.expression),
                def.kind,
                vec![value],
            ));
        }
        node.children.iter_mut().for_each(add);
    }
    let mut out = profile.clone();
    add(&mut out.plan);
    out
}

/// Accumulator ids of every (node, metric) of a plan, assigned in pre-order.
pub(super) struct Accumulators(HashMap<usize, HashMap<String, i64>>);

impl Accumulators {
    pub(super) fn assign(plan: &ProfileNode, ids: &mut IdCounters) -> Accumulators {
        let mut map: HashMap<usize, HashMap<String, i64>> = HashMap::new();
        for node in plan.iter() {
            let of_node = map.entry(node.id).or_default();
            for m in &node.metrics {
                ids.accumulator += 1;
                of_node.insert(m.name.to_string(), ids.accumulator);
            }
        }
        Accumulators(map)
    }

    pub(super) fn get(&self, node: usize, metric: &str) -> i64 {
        self.0
            .get(&node)
            .and_then(|of_node| of_node.get(metric))
            .copied()
            .unwrap_or(-1)
    }
}

/// Spark's `sparkPlanInfo` of `node` and everything below it, each metric with its
/// accumulator id.
pub(super) fn plan_info(node: &ProfileNode, accs: &Accumulators) -> Value {
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
        "simpleString": node.display.as_str(),
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

/// The SQL execution's start, with its plan.
pub(super) fn sql_start(
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

/// The SQL execution's end.
pub(super) fn sql_end(execution_id: i64, q: &QueryRecord<'_>, query_id: &str) -> Value {
    json!({
        "Event": events::SQL_EXECUTION_END,
        "executionId": execution_id,
        "time": q.end_epoch_millis,
        "errorMessage": q.error.clone().unwrap_or_default(),
        "queryId": query_id,
    })
}
