//! The query planner qprof puts in front of a session's own: it gives each function call of
//! the optimized logical plan a timed wrapper of its own, then lets the session's planner
//! (DataFusion's default, or the application's with its extension planners) plan it.

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use async_trait::async_trait;
use datafusion::catalog::Session;
use datafusion::common::Result;
use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::datasource::physical_plan::FileScanConfig;
use datafusion::datasource::source::DataSourceExec;
use datafusion::execution::SessionStateBuilder;
use datafusion::execution::cache::TableScopedPath;
use datafusion::execution::cache::cache_manager::ListFilesCache;
use datafusion::execution::context::QueryPlanner;
use datafusion::logical_expr::{Expr, LogicalPlan};
use datafusion::object_store::path::Path;
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

/// Records, for each file scan of a table partitioned Hive-style, the files of the table
/// that planning pruned by partition values: the table's listing (as DataFusion's
/// list-files cache keeps it) less the files the scan kept. Without that cache (turned
/// off by the session) nothing is recorded.
fn count_listing_pruning(plan: &Arc<dyn ExecutionPlan>, session: &dyn Session) {
    let Some(listings) = session.runtime_env().cache_manager.get_list_files_cache() else {
        return;
    };
    let mut pending = vec![plan];
    while let Some(node) = pending.pop() {
        pending.extend(node.children());
        let Some(exec) = ProfiledExec::of(node.as_ref()) else {
            continue;
        };
        let Some(config) = exec
            .inner()
            .downcast_ref::<DataSourceExec>()
            .and_then(|scan| scan.data_source().downcast_ref::<FileScanConfig>())
        else {
            continue;
        };
        if let Some(pruned) = pruned_at_listing(config, listings.as_ref()) {
            exec.counters()
                .files_pruned_at_listing
                .store(pruned, Ordering::Relaxed);
        }
    }
}

/// The files of `config`'s table that its scan does not read, if the table is partitioned
/// and its listing is known: files at the depth of the scan's files, under the table's
/// root, with their extension.
fn pruned_at_listing(config: &FileScanConfig, listings: &ListFilesCache) -> Option<u64> {
    let levels = config.table_partition_cols().len();
    if levels == 0 {
        return None;
    }
    let kept: HashSet<&Path> = config
        .file_groups
        .iter()
        .flat_map(|group| group.files())
        .map(|file| &file.object_meta.location)
        .collect();
    let first = config.file_groups.iter().flat_map(|g| g.files()).next()?;
    let parts: Vec<_> = first.object_meta.location.parts().collect();
    let depth = parts.len();
    let root = Path::from_iter(parts.get(..depth.checked_sub(levels + 1)?)?.iter().cloned());
    let extension = first.object_meta.location.extension().unwrap_or_default();
    let listing = listings.get(&TableScopedPath {
        table: first.table_reference.clone(),
        path: root.clone(),
    })?;
    let in_table = listing
        .files
        .iter()
        .filter(|meta| {
            meta.size > 0
                && meta.location.parts().count() == depth
                && meta.location.extension().unwrap_or_default() == extension
                && meta.location.prefix_matches(&root)
        })
        .count();
    Some(in_table.saturating_sub(kept.len()) as u64)
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
        let options = QprofOptions::of(session.config_options());
        if !options.tracks_functions() {
            let physical = self.plan(logical_plan, session).await?;
            count_listing_pruning(&physical, session);
            return Ok(physical);
        }
        let (wrapped, sites) = wrap_functions(logical_plan.clone(), &options)?;
        let physical = self.plan(&wrapped, session).await?;
        if let Some(root) = ProfiledExec::of(physical.as_ref()) {
            root.counters().plan.add_sites(sites);
        }
        count_listing_pruning(&physical, session);
        Ok(physical)
    }
}

/// `builder` with each function call of its sessions' plans timed at a call site of its
/// own, as the sessions' [`QprofOptions`] ask, and nothing else of qprof's: for a planner
/// whose plans run elsewhere, such as a cluster's scheduler, which ships each call's
/// tracking mode with the plan (see [`timed_mode`](crate::timed_mode)).
pub fn plan_timed_calls(mut builder: SessionStateBuilder) -> SessionStateBuilder {
    let planner = builder.query_planner().take();
    builder.with_query_planner(Arc::new(ProfilingQueryPlanner::new(planner)))
}
