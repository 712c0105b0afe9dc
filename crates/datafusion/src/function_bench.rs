//! The function-tracking benchmark: a cheap function (`multiply` on two f64 columns) and an
//! expensive one (`array_gte` on two 50-element integer arrays), evaluated as DataFusion
//! evaluates a projection, untracked, fully tracked and sampled adaptively. Shared by
//! `qprof bench functions` and the criterion bench.

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use datafusion::arrow::array::{
    Array, ArrayRef, AsArray, BooleanBuilder, Float64Array, Int64Array, ListArray, RecordBatch,
};
use datafusion::arrow::buffer::OffsetBuffer;
use datafusion::arrow::compute::kernels::numeric::mul;
use datafusion::arrow::datatypes::{DataType, Field, Int64Type, Schema};
use datafusion::common::{Result, exec_err};
use datafusion::config::ConfigOptions;
use datafusion::logical_expr::{
    ColumnarValue, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, Volatility,
};
use datafusion::physical_expr::ScalarFunctionExpr;
use datafusion::physical_expr::expressions::Column;
use datafusion::physical_plan::PhysicalExpr;
use qprof_core::profile::FunctionProfile;
use qprof_core::sampling::{SplitMix64, TrackingMode};

use crate::scalar_functions::TimedUdf;
use qprof_core::call_site::FunctionSite;

/// Elements per array of the `array_gte` case.
pub const ARRAY_LEN: usize = 50;

/// The benchmark's functions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BenchFunction {
    /// `multiply(a, b)` on f64 columns: a few nanoseconds per row.
    Multiply,
    /// `array_gte(a, b)` on 50-element i64 arrays that differ only in the last element.
    ArrayGte,
}

impl BenchFunction {
    /// Both functions, cheap first.
    pub const ALL: [BenchFunction; 2] = [BenchFunction::Multiply, BenchFunction::ArrayGte];

    /// The function's name.
    pub fn name(self) -> &'static str {
        match self {
            BenchFunction::Multiply => "multiply",
            BenchFunction::ArrayGte => "array_gte",
        }
    }
}

/// How the function is tracked in a run.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Variant {
    /// The plain function, not wrapped.
    NoTracking,
    /// Every vector timed.
    Full,
    /// Adaptive sampling with this overhead budget (percent).
    Adaptive(f64),
}

impl Variant {
    /// The benchmark's four columns.
    pub const ALL: [Variant; 4] = [
        Variant::NoTracking,
        Variant::Full,
        Variant::Adaptive(1.0),
        Variant::Adaptive(0.5),
    ];

    fn mode(self) -> Option<TrackingMode> {
        match self {
            Variant::NoTracking => None,
            Variant::Full => Some(TrackingMode::Full),
            Variant::Adaptive(pct) => Some(TrackingMode::Adaptive {
                max_overhead_pct: pct,
            }),
        }
    }
}

impl fmt::Display for Variant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Variant::NoTracking => f.write_str("no tracking"),
            Variant::Full => f.write_str("full tracking"),
            Variant::Adaptive(pct) => write!(f, "adaptive {pct}%"),
        }
    }
}

/// The input of one function at one vector size.
#[derive(Debug, Clone)]
pub struct BenchInput {
    function: BenchFunction,
    batch: RecordBatch,
}

impl BenchInput {
    /// `rows` rows of input for `function`.
    pub fn new(function: BenchFunction, rows: usize) -> BenchInput {
        let mut rng = SplitMix64(rows as u64 ^ 0x5EED);
        let (a, b): (ArrayRef, ArrayRef) = match function {
            BenchFunction::Multiply => {
                let mut col = || -> ArrayRef {
                    Arc::new(Float64Array::from_iter_values(
                        (0..rows).map(|_| (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64),
                    ))
                };
                (col(), col())
            }
            BenchFunction::ArrayGte => {
                let left: Vec<i64> = (0..rows * ARRAY_LEN)
                    .map(|_| (rng.next_u64() % 1000) as i64)
                    .collect();
                // equal but for the last element: the comparison reads every element
                let mut right = left.clone();
                for row in 0..rows {
                    right[row * ARRAY_LEN + ARRAY_LEN - 1] = (rng.next_u64() % 1000) as i64;
                }
                let list = |values: Vec<i64>| -> ArrayRef {
                    Arc::new(ListArray::new(
                        Arc::new(Field::new_list_field(DataType::Int64, false)),
                        OffsetBuffer::from_lengths(std::iter::repeat_n(ARRAY_LEN, rows)),
                        Arc::new(Int64Array::from(values)),
                        None,
                    ))
                };
                (list(left), list(right))
            }
        };
        let schema = Schema::new(vec![
            Field::new("a", a.data_type().clone(), false),
            Field::new("b", b.data_type().clone(), false),
        ]);
        let batch =
            RecordBatch::try_new(Arc::new(schema), vec![a, b]).expect("columns match the schema");
        BenchInput { function, batch }
    }

    /// Rows per vector.
    pub fn rows(&self) -> usize {
        self.batch.num_rows()
    }

    /// The call `function(a, b)` as a projection would evaluate it, tracked as `variant`
    /// says, and its call site (none when untracked).
    pub fn expression(
        &self,
        variant: Variant,
    ) -> (Arc<dyn PhysicalExpr>, Option<Arc<FunctionSite>>) {
        let plain: Arc<dyn ScalarUDFImpl> = match self.function {
            BenchFunction::Multiply => Arc::new(Multiply::new()),
            BenchFunction::ArrayGte => Arc::new(ArrayGte::new()),
        };
        let name = self.function.name();
        let (udf, site) = match variant.mode() {
            None => (ScalarUDF::new_from_shared_impl(plain), None),
            Some(mode) => {
                let site = Arc::new(FunctionSite::new(name, format!("{name}(a, b)"), mode));
                let timed = TimedUdf::new(plain, Arc::clone(&site));
                (ScalarUDF::new_from_impl(timed), Some(site))
            }
        };
        let args: Vec<Arc<dyn PhysicalExpr>> =
            vec![Arc::new(Column::new("a", 0)), Arc::new(Column::new("b", 1))];
        let expr = ScalarFunctionExpr::try_new(
            Arc::new(udf),
            args,
            self.batch.schema().as_ref(),
            Arc::new(ConfigOptions::default()),
        )
        .expect("the bench functions accept their columns");
        (Arc::new(expr), site)
    }

    /// Evaluates `expr` on the input once.
    ///
    /// # Errors
    /// Only if the function fails, which the bench functions do not.
    #[inline]
    pub fn evaluate(&self, expr: &dyn PhysicalExpr) -> Result<ColumnarValue> {
        expr.evaluate(&self.batch)
    }

    /// Evaluates a fresh expression of `variant` `iterations` times; the time taken and
    /// what the call site measured.
    ///
    /// # Errors
    /// Only if the function fails.
    pub fn run(
        &self,
        variant: Variant,
        iterations: u32,
    ) -> Result<(Duration, Option<FunctionProfile>)> {
        let (expr, site) = self.expression(variant);
        let start = Instant::now();
        for _ in 0..iterations {
            std::hint::black_box(self.evaluate(expr.as_ref())?);
        }
        let elapsed = start.elapsed();
        Ok((elapsed, site.map(|s| s.profile())))
    }
}

/// `multiply(a, b)` for f64 columns.
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct Multiply {
    signature: Signature,
}

impl Multiply {
    /// The function.
    pub fn new() -> Multiply {
        Multiply {
            signature: Signature::exact(
                vec![DataType::Float64, DataType::Float64],
                Volatility::Immutable,
            ),
        }
    }
}

impl Default for Multiply {
    fn default() -> Self {
        Self::new()
    }
}

impl ScalarUDFImpl for Multiply {
    fn name(&self) -> &str {
        "multiply"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _arg_types: &[DataType]) -> Result<DataType> {
        Ok(DataType::Float64)
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let arrays = ColumnarValue::values_to_arrays(&args.args)?;
        let [a, b] = arrays.as_slice() else {
            return exec_err!("multiply takes two arguments");
        };
        Ok(ColumnarValue::Array(mul(a, b)?))
    }
}

/// `array_gte(a, b)`: whether array `a` is lexicographically at least `b`, for lists of i64.
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct ArrayGte {
    signature: Signature,
}

impl ArrayGte {
    /// The function.
    pub fn new() -> ArrayGte {
        ArrayGte {
            signature: Signature::any(2, Volatility::Immutable),
        }
    }
}

impl Default for ArrayGte {
    fn default() -> Self {
        Self::new()
    }
}

impl ScalarUDFImpl for ArrayGte {
    fn name(&self) -> &str {
        "array_gte"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _arg_types: &[DataType]) -> Result<DataType> {
        Ok(DataType::Boolean)
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let arrays = ColumnarValue::values_to_arrays(&args.args)?;
        let [a, b] = arrays.as_slice() else {
            return exec_err!("array_gte takes two arguments");
        };
        let (Some(a), Some(b)) = (a.as_list_opt::<i32>(), b.as_list_opt::<i32>()) else {
            return exec_err!("array_gte takes two lists");
        };
        let (Some(av), Some(bv)) = (
            a.values().as_primitive_opt::<Int64Type>(),
            b.values().as_primitive_opt::<Int64Type>(),
        ) else {
            return exec_err!("array_gte takes lists of bigint");
        };
        let (ao, bo) = (a.value_offsets(), b.value_offsets());
        let (av, bv) = (av.values(), bv.values());
        let mut out = BooleanBuilder::with_capacity(a.len());
        for row in 0..a.len().min(b.len()) {
            if a.is_null(row) || b.is_null(row) {
                out.append_null();
                continue;
            }
            let x = &av[ao[row] as usize..ao[row + 1] as usize];
            let y = &bv[bo[row] as usize..bo[row + 1] as usize];
            out.append_value(x >= y);
        }
        Ok(ColumnarValue::Array(Arc::new(out.finish())))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_functions_compute_what_they_say() {
        let input = BenchInput::new(BenchFunction::Multiply, 100);
        let (expr, _) = input.expression(Variant::NoTracking);
        let out = input
            .evaluate(expr.as_ref())
            .unwrap()
            .into_array(100)
            .unwrap();
        let (a, b) = (
            input
                .batch
                .column(0)
                .as_primitive::<datafusion::arrow::datatypes::Float64Type>(),
            input
                .batch
                .column(1)
                .as_primitive::<datafusion::arrow::datatypes::Float64Type>(),
        );
        let out = out.as_primitive::<datafusion::arrow::datatypes::Float64Type>();
        for i in 0..100 {
            assert_eq!(out.value(i), a.value(i) * b.value(i));
        }
        let input = BenchInput::new(BenchFunction::ArrayGte, 200);
        let (expr, _) = input.expression(Variant::NoTracking);
        let out = input
            .evaluate(expr.as_ref())
            .unwrap()
            .into_array(200)
            .unwrap();
        let out = out.as_boolean();
        let (a, b) = (
            input.batch.column(0).as_list::<i32>(),
            input.batch.column(1).as_list::<i32>(),
        );
        let mut trues = 0;
        for i in 0..200 {
            let last = |l: &ListArray| l.value(i).as_primitive::<Int64Type>().value(ARRAY_LEN - 1);
            assert_eq!(out.value(i), last(a) >= last(b), "row {i}");
            trues += usize::from(out.value(i));
        }
        assert!(
            trues > 50 && trues < 150,
            "{trues} of 200 rows compare greater or equal"
        );
    }

    #[test]
    fn tracked_variants_count_every_vector_and_row() {
        for function in BenchFunction::ALL {
            let input = BenchInput::new(function, 1000);
            for variant in Variant::ALL {
                let (_, profile) = input.run(variant, 300).unwrap();
                match variant {
                    Variant::NoTracking => assert!(profile.is_none()),
                    _ => {
                        let p = profile.unwrap();
                        assert_eq!((p.vectors, p.rows), (300, 300_000), "{variant}");
                        assert!(p.cpu_nanos > 0 && p.wall_nanos > 0, "{variant}: {p:?}");
                        if variant == Variant::Full {
                            assert_eq!(p.cpu_timed_vectors, 300);
                            assert_eq!(p.mode, "full");
                        }
                    }
                }
            }
        }
    }
}
