//! The query planner qprof puts in front of a session's own: it gives each function call of
//! the optimized logical plan a timed wrapper of its own, then lets the session's planner
//! (DataFusion's default, or the application's with its extension planners) plan it.

use std::sync::Arc;

use async_trait::async_trait;
use datafusion::catalog::Session;
use datafusion::common::Result;
use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::execution::context::QueryPlanner;
use datafusion::logical_expr::{Expr, LogicalPlan};
use datafusion::physical_plan::ExecutionPlan;
use datafusion::physical_planner::{DefaultPhysicalPlanner, PhysicalPlanner};
use qprof_core::call_site::FunctionSite;

use crate::aggregate_functions::TimedUdaf;
use crate::exec::ProfiledExec;
use crate::options::QprofOptions;
use crate::scalar_functions::TimedUdf;

/// Wraps every scalar and aggregate function call of `plan` (subqueries included) in a
/// [`TimedUdf`] or [`TimedUdaf`] of its own, tracked as `options` say; returns the plan and
/// the new call sites.
///
/// # Errors
/// Only if a rewritten plan node fails to rebuild.
fn wrap_functions(
    plan: LogicalPlan,
    options: &QprofOptions,
) -> Result<(LogicalPlan, Vec<Arc<FunctionSite>>)> {
    let mut sites = Vec::new();
    let mut new_site = |name: &str, aliases: &[String], call: &Expr| {
        let mode = options.tracking_for(name, aliases)?;
        let site = Arc::new(FunctionSite::new(name, call.to_string(), mode));
        sites.push(Arc::clone(&site));
        Some(site)
    };
    let plan = plan
        .transform_up_with_subqueries(|node| {
            node.map_expressions(|expr| {
                expr.transform_up(|e| {
                    let site = match &e {
                        Expr::ScalarFunction(c) if TimedUdf::can_wrap(&c.func) => {
                            new_site(c.func.name(), c.func.aliases(), &e)
                        }
                        Expr::AggregateFunction(c) if TimedUdaf::can_wrap(&c.func) => {
                            new_site(c.func.name(), c.func.aliases(), &e)
                        }
                        _ => None,
                    };
                    Ok(match (site, e) {
                        (Some(site), Expr::ScalarFunction(call)) => {
                            Transformed::yes(TimedUdf::wrap_call(call, site))
                        }
                        (Some(site), Expr::AggregateFunction(call)) => {
                            Transformed::yes(TimedUdaf::wrap_call(call, site))
                        }
                        (_, e) => Transformed::no(e),
                    })
                })
            })
        })?
        .data;
    Ok((plan, sites))
}

/// A session's query planner with per-function timing in front of it: the function calls
/// of the optimized logical plan are wrapped as the session's [`QprofOptions`] ask, then
/// the wrapped planner (the session's own, or DataFusion's default) plans the result.
#[derive(Debug, Default)]
pub(crate) struct ProfilingQueryPlanner {
    /// The session's own planner; `None` for DataFusion's default.
    inner: Option<Arc<dyn QueryPlanner + Send + Sync>>,
}

impl ProfilingQueryPlanner {
    /// Timing in front of `inner` (`None`: DataFusion's default planner).
    pub(crate) fn new(inner: Option<Arc<dyn QueryPlanner + Send + Sync>>) -> Self {
        Self { inner }
    }

    async fn plan(
        &self,
        logical_plan: &LogicalPlan,
        session: &dyn Session,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        match &self.inner {
            Some(inner) => inner.create_physical_plan(logical_plan, session).await,
            None => {
                DefaultPhysicalPlanner::default()
                    .create_physical_plan(logical_plan, session)
                    .await
            }
        }
    }
}

#[async_trait]
impl QueryPlanner for ProfilingQueryPlanner {
    async fn create_physical_plan(
        &self,
        logical_plan: &LogicalPlan,
        session: &dyn Session,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        let options = session
            .config_options()
            .extensions
            .get::<QprofOptions>()
            .cloned()
            .unwrap_or_default();
        if !options.tracks_functions() {
            return self.plan(logical_plan, session).await;
        }
        let (wrapped, sites) = wrap_functions(logical_plan.clone(), &options)?;
        let physical = self.plan(&wrapped, session).await?;
        if let Some(root) = ProfiledExec::of(physical.as_ref()) {
            root.stats().plan.add_sites(sites);
        }
        Ok(physical)
    }
}
