//! A logged SQL plan (`sparkPlanInfo`) as the REST API reads it: each node's name,
//! one-line description, declared metrics and children. Metric names and types repeat in
//! every query of an application, so a state keeps one copy of each.

use std::collections::HashSet;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Strings shared by a state's plans.
#[derive(Debug, Clone, Default)]
pub(crate) struct Interner(HashSet<Arc<str>>);

impl Interner {
    /// The shared copy of `s`.
    pub(crate) fn intern(&mut self, s: &str) -> Arc<str> {
        if let Some(shared) = self.0.get(s) {
            return Arc::clone(shared);
        }
        let shared: Arc<str> = Arc::from(s);
        self.0.insert(Arc::clone(&shared));
        shared
    }

    /// The shared strings.
    pub(crate) fn strings(&self) -> &HashSet<Arc<str>> {
        &self.0
    }

    /// An interner holding `strings` (shared already).
    pub(crate) fn from_shared(strings: Vec<Arc<str>>) -> Interner {
        Interner(strings.into_iter().collect())
    }
}

/// A metric declared by a SQL plan node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlanMetric {
    /// Display name.
    #[serde(with = "crate::snapshot::shared_str")]
    pub name: Arc<str>,
    /// Accumulator id.
    pub accumulator_id: i64,
    /// Spark metric type (`sum`, `size`, `timing`, `nsTiming`, `average`, or others;
    /// empty if the log gives none).
    #[serde(with = "crate::snapshot::shared_str")]
    pub metric_type: Arc<str>,
}

/// A node of a logged SQL plan.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlanNode {
    /// Operator name (`nodeName`).
    pub name: Box<str>,
    /// One-line description (`simpleString`).
    pub description: Box<str>,
    /// Declared metrics.
    pub metrics: Vec<PlanMetric>,
    /// Child nodes.
    pub children: Vec<PlanNode>,
}

impl PlanNode {
    /// The plan a `sparkPlanInfo` object describes; missing parts are empty, and metrics
    /// without an accumulator id are left out.
    pub(crate) fn from_json(v: &Value, names: &mut Interner) -> PlanNode {
        let text = |k: &str| v.get(k).and_then(Value::as_str).unwrap_or_default();
        let list = |k: &str| {
            v.get(k)
                .and_then(Value::as_array)
                .map_or(&[][..], Vec::as_slice)
        };
        PlanNode {
            name: text("nodeName").into(),
            description: text("simpleString").into(),
            metrics: list("metrics")
                .iter()
                .filter_map(|m| {
                    Some(PlanMetric {
                        name: names.intern(m.get("name")?.as_str().unwrap_or_default()),
                        accumulator_id: m.get("accumulatorId")?.as_i64()?,
                        metric_type: names
                            .intern(m.get("metricType").and_then(Value::as_str).unwrap_or("")),
                    })
                })
                .collect(),
            children: list("children")
                .iter()
                .map(|c| PlanNode::from_json(c, names))
                .collect(),
        }
    }

    /// This node and its descendants, in pre-order.
    pub fn iter(&self) -> impl Iterator<Item = &PlanNode> {
        let mut stack = vec![self];
        std::iter::from_fn(move || {
            let node = stack.pop()?;
            stack.extend(node.children.iter().rev());
            Some(node)
        })
    }
}
