//! Per-function CPU time of aggregate functions: each aggregate call site of a plan gets a
//! [`TimedUdaf`] of its own, whose accumulators time their work through the site's
//! sampler, as scalar functions do ([`crate::scalar_functions`]).
//!
//! A vector of an accumulator is one call that does its work: `update_batch`,
//! `merge_batch`, `retract_batch` and `convert_to_state` on an input batch (its rows), and
//! `evaluate` and `state` on what is emitted (one row without groups, the groups emitted
//! with them). Arguments arrive evaluated, so the time is the function's own. `size` is
//! not timed. A function without a groups accumulator of its own runs, as in DataFusion,
//! in an adapter with one accumulator per group; the adapter is timed per batch, and its
//! time, per-group dispatch included, is the function's.
//!
//! A partial and a final aggregation share the logical call site; accumulators are created
//! inside their operator's frame, and each operator task's accumulators share one sampler
//! ([`FunctionSite::calls_of_current_task`]), so the two are reported apart.

use std::any::Any;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

use datafusion::arrow::array::{ArrayRef, BooleanArray};
use datafusion::arrow::datatypes::{DataType, FieldRef, Schema};
use datafusion::common::{Result, ScalarValue};
use datafusion::logical_expr::expr::{
    AggregateFunction, AggregateFunctionParams, WindowFunctionParams,
};
use datafusion::logical_expr::function::{
    AccumulatorArgs, AggregateFunctionSimplification, StateFieldsArgs,
};
use datafusion::logical_expr::utils::AggregateOrderSensitivity;
use datafusion::logical_expr::{
    Accumulator, AggregateUDF, AggregateUDFImpl, Documentation, EmitTo, Expr, GroupsAccumulator,
    Operator, ReversedUDAF, SetMonotonicity, Signature, StatisticsArgs,
};

use datafusion::physical_expr::{GroupsAccumulatorAdapter, PhysicalExpr, PhysicalSortExpr};

use qprof_core::call_site::{FunctionSite, TaskCalls};

/// An aggregate function wrapped to measure one call site. Compares and hashes as the
/// function it wraps; every other method delegates to it, and its accumulators are timed.
pub(crate) struct TimedUdaf {
    inner: Arc<dyn AggregateUDFImpl>,
    site: Arc<FunctionSite>,
}

impl TimedUdaf {
    /// Wraps `inner` for the call site `site`.
    pub(crate) fn new(inner: Arc<dyn AggregateUDFImpl>, site: Arc<FunctionSite>) -> TimedUdaf {
        TimedUdaf { inner, site }
    }

    /// The call site it measures.
    pub(crate) fn site(&self) -> &Arc<FunctionSite> {
        &self.site
    }

    /// The function it wraps.
    pub(crate) fn inner(&self) -> &Arc<dyn AggregateUDFImpl> {
        &self.inner
    }

    /// `call` with its function wrapped for `site`.
    pub(crate) fn wrap_call(call: AggregateFunction, site: Arc<FunctionSite>) -> Expr {
        let wrapped = TimedUdaf::new(Arc::clone(call.func.inner()), site);
        Expr::AggregateFunction(AggregateFunction {
            func: Arc::new(AggregateUDF::new_from_impl(wrapped)),
            params: call.params,
        })
    }

    /// Whether calls of `udaf` can be wrapped (they are not already).
    pub(crate) fn can_wrap(udaf: &AggregateUDF) -> bool {
        !udaf.inner().is::<TimedUdaf>()
    }

    /// `udaf` wrapped for the same site.
    fn rewrap(&self, udaf: Arc<dyn AggregateUDFImpl>) -> Arc<dyn AggregateUDFImpl> {
        Arc::new(TimedUdaf::new(udaf, Arc::clone(&self.site)))
    }
}

impl fmt::Debug for TimedUdaf {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TimedUdaf")
            .field("inner", &self.inner)
            .field("site", &self.site)
            .finish()
    }
}

impl PartialEq for TimedUdaf {
    fn eq(&self, other: &Self) -> bool {
        self.inner.dyn_eq(other.inner.as_ref() as &dyn Any)
    }
}

impl Eq for TimedUdaf {}

impl Hash for TimedUdaf {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.inner.dyn_hash(state);
    }
}

#[warn(clippy::missing_trait_methods)]
impl AggregateUDFImpl for TimedUdaf {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn aliases(&self) -> &[String] {
        self.inner.aliases()
    }

    fn schema_name(&self, params: &AggregateFunctionParams) -> Result<String> {
        self.inner.schema_name(params)
    }

    fn human_display(&self, params: &AggregateFunctionParams) -> Result<String> {
        self.inner.human_display(params)
    }

    fn window_function_schema_name(&self, params: &WindowFunctionParams) -> Result<String> {
        self.inner.window_function_schema_name(params)
    }

    fn display_name(&self, params: &AggregateFunctionParams) -> Result<String> {
        self.inner.display_name(params)
    }

    fn window_function_display_name(&self, params: &WindowFunctionParams) -> Result<String> {
        self.inner.window_function_display_name(params)
    }

    fn signature(&self) -> &Signature {
        self.inner.signature()
    }

    fn return_type(&self, arg_types: &[DataType]) -> Result<DataType> {
        self.inner.return_type(arg_types)
    }

    fn return_field(&self, arg_fields: &[FieldRef]) -> Result<FieldRef> {
        self.inner.return_field(arg_fields)
    }

    fn is_nullable(&self) -> bool {
        self.inner.is_nullable()
    }

    fn accumulator(&self, acc_args: AccumulatorArgs) -> Result<Box<dyn Accumulator>> {
        let inner = self.inner.accumulator(acc_args)?;
        Ok(Box::new(TimedAccumulator {
            inner,
            calls: self.site.calls_of_current_task(),
        }))
    }

    fn state_fields(&self, args: StateFieldsArgs) -> Result<Vec<FieldRef>> {
        self.inner.state_fields(args)
    }

    /// Always: a function without a groups accumulator of its own gets DataFusion's
    /// adapter (one accumulator per group), built here as DataFusion would build it, so
    /// that it is timed per batch rather than per group.
    fn groups_accumulator_supported(&self, _args: AccumulatorArgs) -> bool {
        true
    }

    fn create_groups_accumulator(
        &self,
        args: AccumulatorArgs,
    ) -> Result<Box<dyn GroupsAccumulator>> {
        let inner: Box<dyn GroupsAccumulator> =
            if self.inner.groups_accumulator_supported(args.clone()) {
                self.inner.create_groups_accumulator(args)?
            } else {
                let function = Arc::clone(&self.inner);
                let args = OwnedAccumulatorArgs::from(&args);
                Box::new(GroupsAccumulatorAdapter::new(move || {
                    function.accumulator(args.borrow())
                }))
            };
        Ok(Box::new(TimedGroupsAccumulator {
            inner,
            calls: self.site.calls_of_current_task(),
            groups: 0,
        }))
    }

    fn create_sliding_accumulator(&self, args: AccumulatorArgs) -> Result<Box<dyn Accumulator>> {
        let inner = self.inner.create_sliding_accumulator(args)?;
        Ok(Box::new(TimedAccumulator {
            inner,
            calls: self.site.calls_of_current_task(),
        }))
    }

    fn with_beneficial_ordering(
        self: Arc<Self>,
        beneficial_ordering: bool,
    ) -> Result<Option<Arc<dyn AggregateUDFImpl>>> {
        Ok(Arc::clone(&self.inner)
            .with_beneficial_ordering(beneficial_ordering)?
            .map(|udaf| self.rewrap(udaf)))
    }

    fn order_sensitivity(&self) -> AggregateOrderSensitivity {
        self.inner.order_sensitivity()
    }

    fn simplify(&self) -> Option<AggregateFunctionSimplification> {
        self.inner.simplify()
    }

    fn simplify_expr_op_literal(
        &self,
        agg_function: &AggregateFunction,
        arg: &Expr,
        op: Operator,
        lit: &Expr,
        arg_is_left: bool,
    ) -> Result<Option<Expr>> {
        self.inner
            .simplify_expr_op_literal(agg_function, arg, op, lit, arg_is_left)
    }

    fn reverse_expr(&self) -> ReversedUDAF {
        match self.inner.reverse_expr() {
            ReversedUDAF::Reversed(udaf) => ReversedUDAF::Reversed(Arc::new(
                AggregateUDF::new_from_shared_impl(self.rewrap(Arc::clone(udaf.inner()))),
            )),
            other => other,
        }
    }

    fn coerce_types(&self, arg_types: &[DataType]) -> Result<Vec<DataType>> {
        self.inner.coerce_types(arg_types)
    }

    fn is_descending(&self) -> Option<bool> {
        self.inner.is_descending()
    }

    fn value_from_stats(&self, statistics_args: &StatisticsArgs) -> Option<ScalarValue> {
        self.inner.value_from_stats(statistics_args)
    }

    fn default_value(&self, data_type: &DataType) -> Result<ScalarValue> {
        self.inner.default_value(data_type)
    }

    fn supports_null_handling_clause(&self) -> bool {
        self.inner.supports_null_handling_clause()
    }

    fn supports_within_group_clause(&self) -> bool {
        self.inner.supports_within_group_clause()
    }

    fn documentation(&self) -> Option<&Documentation> {
        self.inner.documentation()
    }

    fn set_monotonicity(&self, data_type: &DataType) -> SetMonotonicity {
        self.inner.set_monotonicity(data_type)
    }
}

/// [`AccumulatorArgs`] kept for the life of an adapter, which creates an accumulator per
/// group.
struct OwnedAccumulatorArgs {
    return_field: FieldRef,
    schema: Schema,
    ignore_nulls: bool,
    order_bys: Vec<PhysicalSortExpr>,
    is_reversed: bool,
    name: String,
    is_distinct: bool,
    exprs: Vec<Arc<dyn PhysicalExpr>>,
    expr_fields: Vec<FieldRef>,
}

impl OwnedAccumulatorArgs {
    fn from(args: &AccumulatorArgs) -> OwnedAccumulatorArgs {
        OwnedAccumulatorArgs {
            return_field: Arc::clone(&args.return_field),
            schema: args.schema.clone(),
            ignore_nulls: args.ignore_nulls,
            order_bys: args.order_bys.to_vec(),
            is_reversed: args.is_reversed,
            name: args.name.to_string(),
            is_distinct: args.is_distinct,
            exprs: args.exprs.to_vec(),
            expr_fields: args.expr_fields.to_vec(),
        }
    }

    fn borrow(&self) -> AccumulatorArgs<'_> {
        AccumulatorArgs {
            return_field: Arc::clone(&self.return_field),
            schema: &self.schema,
            ignore_nulls: self.ignore_nulls,
            order_bys: &self.order_bys,
            is_reversed: self.is_reversed,
            name: &self.name,
            is_distinct: self.is_distinct,
            exprs: &self.exprs,
            expr_fields: &self.expr_fields,
        }
    }
}

/// Rows of an input batch given to an accumulator.
fn rows_of(values: &[ArrayRef]) -> u64 {
    values.first().map_or(0, |a| a.len() as u64)
}

/// An accumulator of a whole partition (aggregation without groups) timed through its
/// task's sampler.
#[derive(Debug)]
struct TimedAccumulator {
    inner: Box<dyn Accumulator>,
    calls: TaskCalls,
}

impl Accumulator for TimedAccumulator {
    fn update_batch(&mut self, values: &[ArrayRef]) -> Result<()> {
        self.calls
            .call(rows_of(values), || self.inner.update_batch(values))
    }

    fn evaluate(&mut self) -> Result<ScalarValue> {
        self.calls.call(1, || self.inner.evaluate())
    }

    fn size(&self) -> usize {
        // the wrapper's own footprint is not the function's
        self.inner.size()
    }

    fn state(&mut self) -> Result<Vec<ScalarValue>> {
        self.calls.call(1, || self.inner.state())
    }

    fn merge_batch(&mut self, states: &[ArrayRef]) -> Result<()> {
        self.calls
            .call(rows_of(states), || self.inner.merge_batch(states))
    }

    fn retract_batch(&mut self, values: &[ArrayRef]) -> Result<()> {
        self.calls
            .call(rows_of(values), || self.inner.retract_batch(values))
    }

    fn supports_retract_batch(&self) -> bool {
        self.inner.supports_retract_batch()
    }
}

/// A groups accumulator timed through its task's sampler.
struct TimedGroupsAccumulator {
    inner: Box<dyn GroupsAccumulator>,
    calls: TaskCalls,
    /// Groups held and not yet emitted: the rows of an emission of all groups.
    groups: usize,
}

impl TimedGroupsAccumulator {
    /// The groups `emit_to` emits, which are then no longer held.
    fn take_emitted(&mut self, emit_to: EmitTo) -> u64 {
        let emitted = match emit_to {
            EmitTo::All => self.groups,
            EmitTo::First(n) => n.min(self.groups),
        };
        self.groups -= emitted;
        emitted as u64
    }
}

impl GroupsAccumulator for TimedGroupsAccumulator {
    fn update_batch(
        &mut self,
        values: &[ArrayRef],
        group_indices: &[usize],
        opt_filter: Option<&BooleanArray>,
        total_num_groups: usize,
    ) -> Result<()> {
        self.groups = self.groups.max(total_num_groups);
        self.calls.call(group_indices.len() as u64, || {
            self.inner
                .update_batch(values, group_indices, opt_filter, total_num_groups)
        })
    }

    fn evaluate(&mut self, emit_to: EmitTo) -> Result<ArrayRef> {
        let rows = self.take_emitted(emit_to);
        self.calls.call(rows, || self.inner.evaluate(emit_to))
    }

    fn state(&mut self, emit_to: EmitTo) -> Result<Vec<ArrayRef>> {
        let rows = self.take_emitted(emit_to);
        self.calls.call(rows, || self.inner.state(emit_to))
    }

    fn merge_batch(
        &mut self,
        values: &[ArrayRef],
        group_indices: &[usize],
        total_num_groups: usize,
    ) -> Result<()> {
        self.groups = self.groups.max(total_num_groups);
        self.calls.call(group_indices.len() as u64, || {
            self.inner
                .merge_batch(values, group_indices, total_num_groups)
        })
    }

    fn convert_to_state(
        &self,
        values: &[ArrayRef],
        opt_filter: Option<&BooleanArray>,
    ) -> Result<Vec<ArrayRef>> {
        self.calls.call(rows_of(values), || {
            self.inner.convert_to_state(values, opt_filter)
        })
    }

    fn size(&self) -> usize {
        self.inner.size()
    }
}
