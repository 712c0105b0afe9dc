//! Per-function CPU time of scalar functions: [`TimedUdf`] wraps one call site's function
//! so that each vector it is called on is counted, and timed as its [`FunctionSite`]'s
//! sampler decides.
//!
//! The wrapping happens on the optimized logical plan, just before physical planning (see
//! `planner`): each `Expr::ScalarFunction` gets a `TimedUdf` of its own, so each call site
//! has its own `FunctionSite`. The physical plan then holds ordinary `ScalarFunctionExpr`s,
//! and every expression downcast keeps working. A `TimedUdf` compares and hashes as the
//! function it wraps, so plans are the same as without it.
//!
//! `invoke_with_args` receives arguments already evaluated, so the time measured inside it
//! is the function's own (exclusive) time. Functions that DataFusion downcasts
//! (`get_field`, struct constructors, the file-metadata functions) and async functions are
//! left unwrapped.

use std::any::Any;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

use datafusion::arrow::datatypes::{DataType, FieldRef};
use datafusion::common::{ExprSchema, Result, ScalarValue};
use datafusion::config::ConfigOptions;
use datafusion::logical_expr::expr::ScalarFunction;
use datafusion::logical_expr::interval_arithmetic::Interval;
use datafusion::logical_expr::preimage::PreimageResult;
use datafusion::logical_expr::simplify::{ExprSimplifyResult, SimplifyContext};
use datafusion::logical_expr::sort_properties::{ExprProperties, SortProperties};
use datafusion::logical_expr::{
    ColumnarValue, Documentation, Expr, ExpressionPlacement, ReturnFieldArgs, ScalarFunctionArgs,
    ScalarUDF, ScalarUDFImpl, Signature, StructFieldMapping,
};
use qprof_core::call_site::FunctionSite;

/// Functions that are never wrapped: DataFusion recognizes them by their type.
const NEVER_WRAPPED: [&str; 5] = [
    "get_field",
    "named_struct",
    "struct",
    "input_file_name",
    "file_row_index",
];

/// A scalar function wrapped to measure one call site. Compares and hashes as the function
/// it wraps; every other method delegates to it.
pub(crate) struct TimedUdf {
    inner: Arc<dyn ScalarUDFImpl>,
    site: Arc<FunctionSite>,
}

impl TimedUdf {
    /// Wraps `inner` for the call site `site`.
    pub(crate) fn new(inner: Arc<dyn ScalarUDFImpl>, site: Arc<FunctionSite>) -> TimedUdf {
        TimedUdf { inner, site }
    }

    /// The call site it measures.
    pub(crate) fn site(&self) -> &Arc<FunctionSite> {
        &self.site
    }

    /// The function it wraps.
    pub(crate) fn inner(&self) -> &Arc<dyn ScalarUDFImpl> {
        &self.inner
    }

    /// `call` with its function wrapped for `site`.
    pub(crate) fn wrap_call(call: ScalarFunction, site: Arc<FunctionSite>) -> Expr {
        let wrapped = TimedUdf::new(Arc::clone(call.func.inner()), site);
        Expr::ScalarFunction(ScalarFunction {
            func: Arc::new(ScalarUDF::new_from_impl(wrapped)),
            args: call.args,
        })
    }

    /// Whether calls of `udf` can be wrapped without changing how DataFusion plans them.
    pub(crate) fn can_wrap(udf: &ScalarUDF) -> bool {
        !NEVER_WRAPPED.contains(&udf.name())
            && udf.as_async().is_none()
            && !udf.inner().is::<TimedUdf>()
    }
}

impl fmt::Debug for TimedUdf {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TimedUdf")
            .field("inner", &self.inner)
            .field("site", &self.site.id())
            .finish()
    }
}

impl PartialEq for TimedUdf {
    fn eq(&self, other: &Self) -> bool {
        self.inner.dyn_eq(other.inner.as_ref() as &dyn Any)
    }
}

impl Eq for TimedUdf {}

impl Hash for TimedUdf {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.inner.dyn_hash(state);
    }
}

#[warn(clippy::missing_trait_methods)]
impl ScalarUDFImpl for TimedUdf {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn aliases(&self) -> &[String] {
        self.inner.aliases()
    }

    fn display_name(&self, args: &[Expr]) -> Result<String> {
        #[expect(deprecated)]
        self.inner.display_name(args)
    }

    fn schema_name(&self, args: &[Expr]) -> Result<String> {
        self.inner.schema_name(args)
    }

    fn signature(&self) -> &Signature {
        self.inner.signature()
    }

    fn return_type(&self, arg_types: &[DataType]) -> Result<DataType> {
        self.inner.return_type(arg_types)
    }

    fn with_updated_config(&self, config: &ConfigOptions) -> Option<ScalarUDF> {
        self.inner.with_updated_config(config).map(|updated| {
            ScalarUDF::new_from_impl(TimedUdf::new(
                Arc::clone(updated.inner()),
                Arc::clone(&self.site),
            ))
        })
    }

    fn return_field_from_args(&self, args: ReturnFieldArgs) -> Result<FieldRef> {
        self.inner.return_field_from_args(args)
    }

    fn is_nullable(&self, args: &[Expr], schema: &dyn ExprSchema) -> bool {
        #[expect(deprecated)]
        self.inner.is_nullable(args, schema)
    }

    fn is_strict(&self) -> bool {
        self.inner.is_strict()
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let rows = args.number_rows as u64;
        let _frame = self.site.frame();
        if self.site.count_if_unmeasured(rows) {
            self.inner.invoke_with_args(args)
        } else {
            self.site
                .call_sampled(rows, || self.inner.invoke_with_args(args))
        }
    }

    fn simplify(&self, args: Vec<Expr>, info: &SimplifyContext) -> Result<ExprSimplifyResult> {
        self.inner.simplify(args, info)
    }

    fn preimage(
        &self,
        args: &[Expr],
        lit_expr: &Expr,
        info: &SimplifyContext,
    ) -> Result<PreimageResult> {
        self.inner.preimage(args, lit_expr, info)
    }

    fn conditional_arguments<'a>(
        &self,
        args: &'a [Expr],
    ) -> Option<(Vec<&'a Expr>, Vec<&'a Expr>)> {
        self.inner.conditional_arguments(args)
    }

    fn short_circuits(&self) -> bool {
        self.inner.short_circuits()
    }

    fn evaluate_bounds(&self, input: &[&Interval]) -> Result<Interval> {
        self.inner.evaluate_bounds(input)
    }

    fn propagate_constraints(
        &self,
        interval: &Interval,
        inputs: &[&Interval],
    ) -> Result<Option<Vec<Interval>>> {
        self.inner.propagate_constraints(interval, inputs)
    }

    fn output_ordering(&self, inputs: &[ExprProperties]) -> Result<SortProperties> {
        self.inner.output_ordering(inputs)
    }

    fn preserves_lex_ordering(&self, inputs: &[ExprProperties]) -> Result<bool> {
        self.inner.preserves_lex_ordering(inputs)
    }

    fn strictly_order_preserving(&self, inputs: &[ExprProperties]) -> Result<bool> {
        self.inner.strictly_order_preserving(inputs)
    }

    fn coerce_types(&self, arg_types: &[DataType]) -> Result<Vec<DataType>> {
        self.inner.coerce_types(arg_types)
    }

    fn struct_field_mapping(
        &self,
        literal_args: &[Option<ScalarValue>],
    ) -> Option<StructFieldMapping> {
        self.inner.struct_field_mapping(literal_args)
    }

    fn documentation(&self) -> Option<&Documentation> {
        self.inner.documentation()
    }

    fn placement(&self, args: &[ExpressionPlacement]) -> ExpressionPlacement {
        self.inner.placement(args)
    }
}
