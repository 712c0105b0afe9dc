//! Per-function CPU time of plans this process did not plan, such as the stage plans a
//! Ballista executor decodes from bytes.
//!
//! A session's planner wraps each call of the logical plan (see `planner`). A decoded plan
//! has no logical plan: its functions are looked up by name while it is decoded. Two ways
//! give each call a timed function of its own there:
//! - the plan was planned with timed calls and shipped with each call's tracking mode
//!   (see [`timed_mode`]); the decoder makes a timed function per call
//!   ([`timed_scalar`], [`timed_aggregate`]), and [`claim_sites`] hands the calls' sites to
//!   the task that runs the plan;
//! - a decoder asks a [`FunctionTimer`] for each function it looks up and gets a timed
//!   function with a call site of its own per lookup; once the plan is whole, the timer
//!   names each site after its call and hands the sites to the plan's profile.

use std::sync::{Arc, Mutex, PoisonError};

use datafusion::common::tree_node::{TreeNode, TreeNodeRecursion};
use datafusion::logical_expr::{AggregateUDF, ScalarUDF};
use datafusion::physical_expr::aggregate::AggregateFunctionExpr;
use datafusion::physical_expr::{PhysicalExpr, ScalarFunctionExpr};
use datafusion::physical_plan::ExecutionPlan;
use datafusion::physical_plan::aggregates::AggregateExec;
use qprof_core::call_site::FunctionSite;
use qprof_core::sampling::TrackingMode;

use crate::aggregate_functions::TimedUdaf;
use crate::exec::ProfiledExec;
use crate::options::QprofOptions;
use crate::scalar_functions::TimedUdf;

/// Hands out timed functions while one plan is decoded, and their call sites after.
#[derive(Debug, Default)]
pub struct FunctionTimer {
    options: QprofOptions,
    sites: Mutex<Vec<Arc<FunctionSite>>>,
}

impl FunctionTimer {
    /// A timer whose sites are tracked as `options` say.
    pub fn new(options: QprofOptions) -> FunctionTimer {
        FunctionTimer {
            options,
            sites: Mutex::new(Vec::new()),
        }
    }

    fn new_site(&self, name: &str, aliases: &[String]) -> Option<Arc<FunctionSite>> {
        let mode = self.options.tracking_for(name, aliases)?;
        let site = Arc::new(FunctionSite::new(name, String::new(), mode));
        self.sites
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(Arc::clone(&site));
        Some(site)
    }

    /// `udf` timed at a call site of its own, or `None` if qprof does not time it (the
    /// options leave it out, or DataFusion recognizes it by its type).
    pub fn scalar(&self, udf: &ScalarUDF) -> Option<Arc<ScalarUDF>> {
        if !TimedUdf::can_wrap(udf) {
            return None;
        }
        let site = self.new_site(udf.name(), udf.aliases())?;
        let timed = TimedUdf::new(Arc::clone(udf.inner()), site);
        Some(Arc::new(ScalarUDF::new_from_impl(timed)))
    }

    /// `udaf` timed at a call site of its own, or `None` if the options leave it out.
    pub fn aggregate(&self, udaf: &AggregateUDF) -> Option<Arc<AggregateUDF>> {
        if !TimedUdaf::can_wrap(udaf) {
            return None;
        }
        let site = self.new_site(udaf.name(), udaf.aliases())?;
        let timed = TimedUdaf::new(Arc::clone(udaf.inner()), site);
        Some(Arc::new(AggregateUDF::new_from_impl(timed)))
    }

    /// How many call sites were handed out.
    pub fn len(&self) -> usize {
        self.sites
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }

    /// Whether no call site was handed out.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Names each site after its call in `decoded` (the plan as decoded, with the timed
    /// functions in it; a site found in no call is named after its function), and gives
    /// the sites to the profile of `instrumented`, the plan that runs (from
    /// [`Profiler::instrument_plan`](crate::Profiler::instrument_plan)).
    pub fn attach(&self, decoded: &Arc<dyn ExecutionPlan>, instrumented: &Arc<dyn ExecutionPlan>) {
        let sites = std::mem::take(&mut *self.sites.lock().unwrap_or_else(PoisonError::into_inner));
        attach_sites(decoded, instrumented, sites);
    }
}

/// Names each of `sites` after its call in `decoded` (a site found in no call is named
/// after its function), and gives the sites to the profile of `instrumented`, the plan
/// that runs (from [`Profiler::instrument_plan`](crate::Profiler::instrument_plan)).
pub fn attach_sites(
    decoded: &Arc<dyn ExecutionPlan>,
    instrumented: &Arc<dyn ExecutionPlan>,
    sites: Vec<Arc<FunctionSite>>,
) {
    describe_calls(decoded);
    // a site found in no call (described by none) is named after its function
    for site in sites.iter().filter(|s| s.expression().is_empty()) {
        site.describe(format!("{}(…)", site.name()));
    }
    if let Some(root) = ProfiledExec::of(instrumented.as_ref()) {
        root.counters().plan.add_sites(sites);
    }
}

/// How a call of `udf` is tracked, if it is a timed call (planned by a profiled session).
pub fn timed_mode(udf: &ScalarUDF) -> Option<TrackingMode> {
    let timed = udf.inner().downcast_ref::<TimedUdf>()?;
    Some(timed.site().mode())
}

/// As [`timed_mode`], for an aggregate function.
pub fn timed_aggregate_mode(udaf: &AggregateUDF) -> Option<TrackingMode> {
    let timed = udaf.inner().downcast_ref::<TimedUdaf>()?;
    Some(timed.site().mode())
}

/// The function a timed call wraps; any other function as it is.
pub fn untimed_scalar(udf: &ScalarUDF) -> ScalarUDF {
    match udf.inner().downcast_ref::<TimedUdf>() {
        Some(timed) => ScalarUDF::new_from_shared_impl(Arc::clone(timed.inner())),
        None => udf.clone(),
    }
}

/// As [`untimed_scalar`], for an aggregate function.
pub fn untimed_aggregate(udaf: &AggregateUDF) -> AggregateUDF {
    match udaf.inner().downcast_ref::<TimedUdaf>() {
        Some(timed) => AggregateUDF::new_from_shared_impl(Arc::clone(timed.inner())),
        None => udaf.clone(),
    }
}

/// `udf` timed at a call site of its own, tracked in `mode`; `udf` itself if qprof does
/// not time it (DataFusion recognizes it by its type).
pub fn timed_scalar(udf: Arc<ScalarUDF>, mode: TrackingMode) -> Arc<ScalarUDF> {
    if !TimedUdf::can_wrap(&udf) {
        return udf;
    }
    let site = Arc::new(FunctionSite::new(udf.name(), String::new(), mode));
    Arc::new(ScalarUDF::new_from_impl(TimedUdf::new(
        Arc::clone(udf.inner()),
        site,
    )))
}

/// As [`timed_scalar`], for an aggregate function.
pub fn timed_aggregate(udaf: Arc<AggregateUDF>, mode: TrackingMode) -> Arc<AggregateUDF> {
    if !TimedUdaf::can_wrap(&udaf) {
        return udaf;
    }
    let site = Arc::new(FunctionSite::new(udaf.name(), String::new(), mode));
    Arc::new(AggregateUDF::new_from_impl(TimedUdaf::new(
        Arc::clone(udaf.inner()),
        site,
    )))
}

/// The timed calls a decoded plan holds, as one task finds them.
#[derive(Debug)]
pub enum PlanSites {
    /// The plan has no timed call.
    Untimed,
    /// The calls' sites, now this task's (see [`FunctionSite::claim`]).
    Claimed(Vec<Arc<FunctionSite>>),
    /// Another task that runs the same decoded plan took them.
    Taken,
}

/// Claims the sites of the timed calls in `plan` (its scalar functions' and its
/// aggregations') for the task about to run it: all of them, or none if another task took
/// them first.
pub fn claim_sites(plan: &Arc<dyn ExecutionPlan>) -> PlanSites {
    let sites = std::cell::RefCell::new(Vec::<Arc<FunctionSite>>::new());
    for_each_function_call(
        plan,
        |call, _| {
            if let Some(timed) = call.fun().inner().downcast_ref::<TimedUdf>() {
                sites.borrow_mut().push(Arc::clone(timed.site()));
            }
        },
        |call| {
            if let Some(timed) = call.fun().inner().downcast_ref::<TimedUdaf>() {
                sites.borrow_mut().push(Arc::clone(timed.site()));
            }
        },
    );
    let mut sites = sites.into_inner();
    if sites.is_empty() {
        return PlanSites::Untimed;
    }
    // an expression shared by two operators holds one site
    sites.sort_by_key(|s| s.id());
    sites.dedup_by_key(|s| s.id());
    // every task that shares the plan sees the same sites: the one that claims the first
    // has them all
    if sites[0].claim() {
        PlanSites::Claimed(sites)
    } else {
        PlanSites::Taken
    }
}

/// Calls `scalar` with every scalar function call in `plan`'s expressions (the call, and
/// the expression it is) and `aggregate` with every call of an aggregation's functions.
pub fn for_each_function_call(
    plan: &Arc<dyn ExecutionPlan>,
    mut scalar: impl FnMut(&ScalarFunctionExpr, &Arc<dyn PhysicalExpr>),
    mut aggregate: impl FnMut(&AggregateFunctionExpr),
) {
    let mut pending = vec![Arc::clone(plan)];
    while let Some(node) = pending.pop() {
        pending.extend(node.children().into_iter().cloned());
        for_each_own_function_call(&node, &mut scalar, &mut aggregate);
    }
}

/// As [`for_each_function_call`], for the calls of `node` itself (not its children's).
pub fn for_each_own_function_call(
    node: &Arc<dyn ExecutionPlan>,
    mut scalar: impl FnMut(&ScalarFunctionExpr, &Arc<dyn PhysicalExpr>),
    mut aggregate: impl FnMut(&AggregateFunctionExpr),
) {
    let _ = node.apply_expressions(&mut |root| {
        root.apply(|expr| {
            if let Some(call) = expr.downcast_ref::<ScalarFunctionExpr>() {
                scalar(call, expr);
            }
            Ok(TreeNodeRecursion::Continue)
        })
    });
    if let Some(aggregation) = node.downcast_ref::<AggregateExec>() {
        for call in aggregation.aggr_expr() {
            aggregate(call);
        }
    }
}

/// Gives each timed call of `plan` its text: a scalar call as DataFusion displays its
/// expression, an aggregate as its name in the aggregation.
fn describe_calls(plan: &Arc<dyn ExecutionPlan>) {
    for_each_function_call(
        plan,
        |call, expr| {
            if let Some(timed) = call.fun().inner().downcast_ref::<TimedUdf>() {
                timed.site().describe(expr.to_string());
            }
        },
        |call| {
            if let Some(timed) = call.fun().inner().downcast_ref::<TimedUdaf>() {
                timed.site().describe(call.name().to_string());
            }
        },
    );
}
