//! Dynamic filters: the operators that produce them (a hash join's build side, a TopK
//! sort, a min/max aggregate), how often each was updated while the query ran, and the
//! operators (scans) that took them in.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use datafusion::common::tree_node::{TreeNode, TreeNodeRecursion};
use datafusion::execution::runtime_env::RuntimeEnv;
use datafusion::physical_expr::expressions::DynamicFilterPhysicalExpr;
use datafusion::physical_plan::metrics::MetricsSet;
use datafusion::physical_plan::{ExecutionPlan, PhysicalExpr};
use qprof_core::catalog::{self, MetricDef};
use qprof_core::metric::TaskValue;
use qprof_core::profile::{NodeMetric, names};

use super::replaced_rows;
use crate::exec::ProfiledExec;
use qprof_core::metric::saturating_i64;

/// Info key naming the operators whose dynamic filters an operator took in.
pub(super) const PRODUCERS_INFO: &str = names::DYNAMIC_FILTER_PRODUCERS;

/// The producer of each dynamic filter of a plan, by the filter's id: node id and name.
pub(super) struct Producers(HashMap<u64, (usize, String)>);

impl Producers {
    /// Finds every producer in `plan`.
    pub(super) fn of(plan: &Arc<dyn ExecutionPlan>) -> Producers {
        fn visit(plan: &Arc<dyn ExecutionPlan>, out: &mut HashMap<u64, (usize, String)>) {
            if let Some(exec) = ProfiledExec::of(plan.as_ref()) {
                for (id, _) in produced(plan.as_ref()) {
                    out.insert(id, (exec.node_id(), plan.name().to_string()));
                }
            }
            for child in plan.children() {
                visit(child, out);
            }
        }
        let mut out = HashMap::new();
        visit(plan, &mut out);
        Producers(out)
    }
}

/// The filters `plan` produced: id and updates after creation.
fn produced(plan: &dyn ExecutionPlan) -> Vec<(u64, u64)> {
    plan.dynamic_expressions_produced()
        .iter()
        .filter_map(|e| {
            let filter = e.downcast_ref::<DynamicFilterPhysicalExpr>()?;
            // a filter is created at generation 1; each update adds one
            Some((
                filter.expression_id()?,
                filter.snapshot_generation().saturating_sub(1),
            ))
        })
        .collect()
}

/// The ids of the dynamic filters anywhere in the expressions `plan` holds.
fn held(plan: &dyn ExecutionPlan) -> BTreeSet<u64> {
    let mut ids = BTreeSet::new();
    let _ = plan.apply_expressions(&mut |expr: &Arc<dyn PhysicalExpr>| {
        expr.apply(|e| {
            if let Some(id) = e
                .downcast_ref::<DynamicFilterPhysicalExpr>()
                .and_then(|f| f.expression_id())
            {
                ids.insert(id);
            }
            Ok(TreeNodeRecursion::Continue)
        })
    });
    ids
}

/// The dynamic-filter metrics of `plan` (whose own DataFusion metrics are `native`),
/// values of no task, and the info naming the producers of the filters it accepted.
pub(super) fn metrics(
    plan: &dyn ExecutionPlan,
    native: Option<&MetricsSet>,
    producers: &Producers,
    runtime: Option<&RuntimeEnv>,
) -> (Vec<NodeMetric>, Option<(String, String)>) {
    let driver = |def: &MetricDef, value: u64| {
        def.summed(
            "",
            vec![TaskValue {
                task: None,
                value: saturating_i64(value),
            }],
        )
    };
    let mut out = Vec::new();
    let own = produced(plan);
    if !own.is_empty() {
        out.push(driver(&catalog::DYNAMIC_FILTERS_PRODUCED, own.len() as u64));
        out.push(driver(
            &catalog::DYNAMIC_FILTER_UPDATES,
            own.iter().map(|(_, updates)| updates).sum(),
        ));
    }
    let accepted: Vec<u64> = held(plan)
        .into_iter()
        .filter(|id| !own.iter().any(|(o, _)| o == id))
        .collect();
    let mut info = None;
    if !accepted.is_empty() {
        out.push(driver(
            &catalog::DYNAMIC_FILTERS_ACCEPTED,
            accepted.len() as u64,
        ));
        if let Some(rows) = runtime.and_then(|r| replaced_rows::rows_replaced(plan, native, r)) {
            out.push(driver(&catalog::REPLACED_WITH_DYNAMIC_FILTER_ROWS, rows));
        }
        let names: Vec<String> = accepted
            .iter()
            .filter_map(|id| producers.0.get(id))
            .map(|(node, name)| format!("{name} #{node}"))
            .collect();
        if !names.is_empty() {
            info = Some((PRODUCERS_INFO.to_string(), names.join(", ")));
        }
    }
    (out, info)
}
