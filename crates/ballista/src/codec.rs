//! The physical codec of a cluster with qprof on both sides.
//!
//! qprof's scheduler plans each function call timed, as the session's options ask (see
//! [`plan_timed_calls`](qprof_datafusion::plan_timed_calls)). Encoding a stage plan, this
//! codec writes a timed call's tracking mode where the function's own encoding goes;
//! decoding it on an executor, it makes the function timed at a call site of its own. So
//! the plan an executor decodes for its tasks already times every call, and no task
//! decodes its plan a second time for that (see [`crate::functions`]). Everything else is
//! encoded and decoded as Ballista's own codec does.
//!
//! An executor decodes such a call only with this codec: a scheduler with qprof inside
//! runs executors with qprof inside.

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

use ballista_core::registry::BallistaFunctionRegistry;
use ballista_core::serde::BallistaPhysicalExtensionCodec;
use datafusion::error::{DataFusionError, Result};
use datafusion::execution::TaskContext;
use datafusion::logical_expr::{AggregateUDF, HigherOrderUDF, ScalarUDF, WindowUDF};
use datafusion::physical_plan::ExecutionPlan;
use datafusion_proto::physical_plan::{PhysicalExtensionCodec, PhysicalProtoConverterExtension};
use qprof_core::sampling::TrackingMode;
use qprof_datafusion::{
    timed_aggregate, timed_aggregate_mode, timed_mode, timed_scalar, untimed_aggregate,
    untimed_scalar,
};

/// What a timed call's encoding starts with: then its tracking mode, then the function's
/// own encoding (empty for a function the executor's registry has).
const TIMED: &[u8] = b"\0qprof-timed:1\0";

/// Ballista's physical codec, with timed function calls carried from the scheduler to
/// the executors.
pub struct QprofPhysicalCodec {
    inner: BallistaPhysicalExtensionCodec,
    scalars: HashMap<String, Arc<ScalarUDF>>,
    aggregates: HashMap<String, Arc<AggregateUDF>>,
}

impl fmt::Debug for QprofPhysicalCodec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("QprofPhysicalCodec")
            .field("scalars", &self.scalars.len())
            .field("aggregates", &self.aggregates.len())
            .finish_non_exhaustive()
    }
}

impl QprofPhysicalCodec {
    /// A codec that decodes a timed call of a function by name from `registry` (the
    /// executor's: the functions its tasks look up).
    pub fn new(registry: &BallistaFunctionRegistry) -> Self {
        Self {
            inner: BallistaPhysicalExtensionCodec::default(),
            scalars: registry.scalar_functions.clone(),
            aggregates: registry.aggregate_functions.clone(),
        }
    }
}

/// Writes the start of a timed call's encoding: the marker, then `mode`.
fn encode_timed_call(mode: TrackingMode, buf: &mut Vec<u8>) {
    buf.extend_from_slice(TIMED);
    match mode {
        TrackingMode::Full => buf.push(0),
        TrackingMode::Adaptive { max_overhead_pct } => {
            buf.push(1);
            buf.extend_from_slice(&max_overhead_pct.to_le_bytes());
        }
    }
}

/// The tracking mode of a timed call's encoding and the function's own encoding after
/// it; `None` if `buf` is not a timed call's.
fn decode_mode<'b>(name: &str, buf: &'b [u8]) -> Option<Result<(TrackingMode, &'b [u8])>> {
    let rest = buf.strip_prefix(TIMED)?;
    let malformed = || {
        DataFusionError::Internal(format!(
            "a malformed timed call of {name}: {} bytes",
            buf.len()
        ))
    };
    Some(match rest.split_first() {
        Some((0, rest)) => Ok((TrackingMode::Full, rest)),
        Some((1, rest)) => match rest.split_first_chunk::<8>() {
            Some((pct, rest)) => Ok((
                TrackingMode::Adaptive {
                    max_overhead_pct: f64::from_le_bytes(*pct),
                },
                rest,
            )),
            None => Err(malformed()),
        },
        _ => Err(malformed()),
    })
}

fn not_registered(kind: &str, name: &str) -> DataFusionError {
    DataFusionError::Plan(format!(
        "the plan calls the {kind} function {name}, which this executor does not have"
    ))
}

impl PhysicalExtensionCodec for QprofPhysicalCodec {
    fn try_decode(
        &self,
        buf: &[u8],
        inputs: &[Arc<dyn ExecutionPlan>],
        ctx: &TaskContext,
        proto_converter: &dyn PhysicalProtoConverterExtension,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        self.inner.try_decode(buf, inputs, ctx, proto_converter)
    }

    fn try_encode(
        &self,
        node: Arc<dyn ExecutionPlan>,
        buf: &mut Vec<u8>,
        proto_converter: &dyn PhysicalProtoConverterExtension,
    ) -> Result<()> {
        self.inner.try_encode(node, buf, proto_converter)
    }

    fn try_encode_udf(&self, node: &ScalarUDF, buf: &mut Vec<u8>) -> Result<()> {
        match timed_mode(node) {
            Some(mode) => {
                encode_timed_call(mode, buf);
                self.inner.try_encode_udf(&untimed_scalar(node), buf)
            }
            None => self.inner.try_encode_udf(node, buf),
        }
    }

    fn try_decode_udf(&self, name: &str, buf: &[u8]) -> Result<Arc<ScalarUDF>> {
        let Some(timed) = decode_mode(name, buf) else {
            return self.inner.try_decode_udf(name, buf);
        };
        let (mode, own) = timed?;
        let udf = if own.is_empty() {
            self.scalars
                .get(name)
                .cloned()
                .ok_or_else(|| not_registered("scalar", name))?
        } else {
            self.inner.try_decode_udf(name, own)?
        };
        Ok(timed_scalar(udf, mode))
    }

    fn try_encode_udaf(&self, node: &AggregateUDF, buf: &mut Vec<u8>) -> Result<()> {
        match timed_aggregate_mode(node) {
            Some(mode) => {
                encode_timed_call(mode, buf);
                self.inner.try_encode_udaf(&untimed_aggregate(node), buf)
            }
            None => self.inner.try_encode_udaf(node, buf),
        }
    }

    fn try_decode_udaf(&self, name: &str, buf: &[u8]) -> Result<Arc<AggregateUDF>> {
        let Some(timed) = decode_mode(name, buf) else {
            return self.inner.try_decode_udaf(name, buf);
        };
        let (mode, own) = timed?;
        let udaf = if own.is_empty() {
            self.aggregates
                .get(name)
                .cloned()
                .ok_or_else(|| not_registered("aggregate", name))?
        } else {
            self.inner.try_decode_udaf(name, own)?
        };
        Ok(timed_aggregate(udaf, mode))
    }

    fn try_decode_udwf(&self, name: &str, buf: &[u8]) -> Result<Arc<WindowUDF>> {
        self.inner.try_decode_udwf(name, buf)
    }

    fn try_encode_udwf(&self, node: &WindowUDF, buf: &mut Vec<u8>) -> Result<()> {
        self.inner.try_encode_udwf(node, buf)
    }

    fn try_decode_higher_order_function(
        &self,
        name: &str,
        buf: &[u8],
    ) -> Result<Arc<HigherOrderUDF>> {
        self.inner.try_decode_higher_order_function(name, buf)
    }

    fn try_encode_higher_order_function(
        &self,
        node: &HigherOrderUDF,
        buf: &mut Vec<u8>,
    ) -> Result<()> {
        self.inner.try_encode_higher_order_function(node, buf)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::arrow::array::Int64Array;
    use datafusion::arrow::datatypes::{DataType, Field, Schema};
    use datafusion::arrow::record_batch::RecordBatch;
    use datafusion::datasource::MemTable;
    use datafusion::execution::SessionStateBuilder;
    use datafusion::prelude::{SessionConfig, SessionContext};
    use datafusion_proto::physical_plan::AsExecutionPlan;
    use datafusion_proto::protobuf::PhysicalPlanNode;
    use qprof_datafusion::{
        PlanSites, QprofOptions, claim_sites, for_each_function_call, plan_timed_calls,
    };

    /// `sql`'s physical plan, planned as qprof's scheduler plans it, with `options`.
    async fn scheduler_plan(sql: &str, options: QprofOptions) -> Arc<dyn ExecutionPlan> {
        let schema = Arc::new(Schema::new(vec![Field::new("v", DataType::Int64, false)]));
        let column = Arc::new(Int64Array::from(vec![1, -2, 3, -4]));
        let batch = RecordBatch::try_new(Arc::clone(&schema), vec![column]).unwrap();
        let config = SessionConfig::new()
            .with_target_partitions(1)
            .with_option_extension(options);
        let state = SessionStateBuilder::new()
            .with_config(config)
            .with_default_features();
        let ctx = SessionContext::new_with_state(plan_timed_calls(state).build());
        let table = MemTable::try_new(schema, vec![vec![batch]]).unwrap();
        ctx.register_table("t", Arc::new(table)).unwrap();
        ctx.sql(sql)
            .await
            .unwrap()
            .create_physical_plan()
            .await
            .unwrap()
    }

    /// The tracking mode of every scalar and aggregate call in `plan`, by function.
    fn modes(plan: &Arc<dyn ExecutionPlan>) -> Vec<(String, Option<TrackingMode>)> {
        let calls = std::cell::RefCell::new(Vec::new());
        for_each_function_call(
            plan,
            |call, _| {
                calls
                    .borrow_mut()
                    .push((call.fun().name().to_string(), timed_mode(call.fun())))
            },
            |call| {
                calls.borrow_mut().push((
                    call.fun().name().to_string(),
                    timed_aggregate_mode(call.fun()),
                ))
            },
        );
        let mut calls = calls.into_inner();
        calls.sort_by(|a, b| a.0.cmp(&b.0));
        calls
    }

    fn round_trip(plan: &Arc<dyn ExecutionPlan>) -> Arc<dyn ExecutionPlan> {
        let codec = QprofPhysicalCodec::new(&BallistaFunctionRegistry::default());
        let node = PhysicalPlanNode::try_from_physical_plan(Arc::clone(plan), &codec).unwrap();
        let ctx = SessionContext::new();
        node.try_into_physical_plan(&ctx.task_ctx(), &codec)
            .unwrap()
    }

    #[tokio::test]
    async fn timed_calls_arrive_timed_as_the_scheduler_planned_them_with_sites_of_their_own() {
        let mut options = QprofOptions::default();
        options
            .set_option("expression.track_cpu_usage_for_functions", "abs")
            .unwrap();
        let plan = scheduler_plan("SELECT sum(abs(v)) AS s, count(*) AS n FROM t", options).await;
        let sent = modes(&plan);
        assert!(
            sent.iter()
                .any(|(f, m)| f == "abs" && *m == Some(TrackingMode::Full)),
            "{sent:?}"
        );
        assert!(
            sent.iter()
                .any(|(f, m)| f == "sum" && matches!(m, Some(TrackingMode::Adaptive { .. }))),
            "{sent:?}"
        );

        let decoded = round_trip(&plan);
        assert_eq!(modes(&decoded), sent);
        // the decoded calls' sites are new, and the first task to run the plan takes them
        let PlanSites::Claimed(sites) = claim_sites(&decoded) else {
            panic!("the decoded plan's calls are not timed");
        };
        assert!(sites.len() >= 2, "{sites:?}");
        assert!(matches!(claim_sites(&decoded), PlanSites::Taken));
        assert!(matches!(claim_sites(&plan), PlanSites::Claimed(_)));
        // the results are the plan's
        let ctx = SessionContext::new();
        let run = |p: &Arc<dyn ExecutionPlan>| {
            datafusion::physical_plan::collect(Arc::clone(p), ctx.task_ctx())
        };
        let (expected, got) = (run(&plan).await.unwrap(), run(&decoded).await.unwrap());
        assert_eq!(
            datafusion::arrow::util::pretty::pretty_format_batches(&got)
                .unwrap()
                .to_string(),
            datafusion::arrow::util::pretty::pretty_format_batches(&expected)
                .unwrap()
                .to_string()
        );
    }

    #[tokio::test]
    async fn untimed_calls_travel_as_ballista_sends_them() {
        let mut options = QprofOptions::default();
        options
            .set_option("expression.adaptive_cpu_sampling", "false")
            .unwrap();
        let plan = scheduler_plan("SELECT sum(abs(v)) AS s FROM t", options).await;
        assert!(modes(&plan).iter().all(|(_, m)| m.is_none()));
        assert!(matches!(
            claim_sites(&round_trip(&plan)),
            PlanSites::Untimed
        ));
    }

    #[test]
    fn a_malformed_or_unknown_timed_call_is_an_error_not_a_panic() {
        let codec = QprofPhysicalCodec::new(&BallistaFunctionRegistry::default());
        for buf in [
            TIMED.to_vec(),
            [TIMED, &[1, 0, 0]].concat(),
            [TIMED, &[7]].concat(),
        ] {
            let error = codec.try_decode_udf("abs", &buf).unwrap_err();
            assert!(error.to_string().contains("malformed"), "{error}");
            assert!(codec.try_decode_udaf("sum", &buf).is_err());
        }
        let error = codec
            .try_decode_udf("no_such_function", &[TIMED, &[0]].concat())
            .unwrap_err();
        assert!(error.to_string().contains("no_such_function"), "{error}");
        // a timed call round-trips through its bytes
        let mut buf = Vec::new();
        let abs = codec.scalars["abs"].clone();
        let timed = timed_scalar(
            abs,
            TrackingMode::Adaptive {
                max_overhead_pct: 2.5,
            },
        );
        codec.try_encode_udf(&timed, &mut buf).unwrap();
        let back = codec.try_decode_udf("abs", &buf).unwrap();
        assert_eq!(
            timed_mode(&back),
            Some(TrackingMode::Adaptive {
                max_overhead_pct: 2.5
            })
        );
    }
}
