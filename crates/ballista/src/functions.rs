//! Per-function CPU time on an executor.
//!
//! An executor decodes each stage plan with the functions of its registry, shared by every
//! call of every task. qprof times each call site apart, so the engine decodes the task's
//! plan once more: its functions are looked up through a codec that hands out a timed
//! function (a call site of its own) per lookup, from a [`FunctionTimer`].

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

use ballista_core::serde::BallistaPhysicalExtensionCodec;
use datafusion::error::Result;
use datafusion::execution::SessionStateDefaults;
use datafusion::execution::TaskContext;
use datafusion::execution::runtime_env::RuntimeEnv;
use datafusion::logical_expr::{AggregateUDF, HigherOrderUDF, ScalarUDF, WindowUDF};
use datafusion::physical_plan::ExecutionPlan;
use datafusion::prelude::SessionConfig;
use datafusion_proto::physical_plan::{
    AsExecutionPlan, PhysicalExtensionCodec, PhysicalProtoConverterExtension,
};
use datafusion_proto::protobuf::PhysicalPlanNode;
use qprof_datafusion::{FunctionTimer, for_each_function_call};

/// Decodes the functions of a plan as timed ones: the plan's own functions, by name, each
/// lookup wrapped by the timer; everything else as Ballista's codec decodes it.
struct TimingCodec {
    inner: Arc<BallistaPhysicalExtensionCodec>,
    scalars: HashMap<String, ScalarUDF>,
    aggregates: HashMap<String, AggregateUDF>,
    timer: Arc<FunctionTimer>,
}

impl fmt::Debug for TimingCodec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TimingCodec")
            .field("scalars", &self.scalars.len())
            .field("aggregates", &self.aggregates.len())
            .finish_non_exhaustive()
    }
}

impl PhysicalExtensionCodec for TimingCodec {
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

    fn try_decode_udf(&self, name: &str, buf: &[u8]) -> Result<Arc<ScalarUDF>> {
        let udf = match self.scalars.get(name) {
            Some(udf) if buf.is_empty() => Arc::new(udf.clone()),
            _ => self.inner.try_decode_udf(name, buf)?,
        };
        Ok(self.timer.scalar(&udf).unwrap_or(udf))
    }

    fn try_decode_udaf(&self, name: &str, buf: &[u8]) -> Result<Arc<AggregateUDF>> {
        let udaf = match self.aggregates.get(name) {
            Some(udaf) if buf.is_empty() => Arc::new(udaf.clone()),
            _ => self.inner.try_decode_udaf(name, buf)?,
        };
        Ok(self.timer.aggregate(&udaf).unwrap_or(udaf))
    }

    fn try_decode_udwf(&self, name: &str, buf: &[u8]) -> Result<Arc<WindowUDF>> {
        self.inner.try_decode_udwf(name, buf)
    }

    fn try_decode_higher_order_function(
        &self,
        name: &str,
        buf: &[u8],
    ) -> Result<Arc<HigherOrderUDF>> {
        self.inner.try_decode_higher_order_function(name, buf)
    }
}

/// What decoding a task's plan again needs, made once per executor: Ballista's codec and
/// the built-in window and higher-order functions (a plan's scalar and aggregate functions
/// come from the plan itself).
pub(crate) struct Redecoder {
    codec: Arc<BallistaPhysicalExtensionCodec>,
    windows: HashMap<String, Arc<WindowUDF>>,
    higher_order: HashMap<String, Arc<HigherOrderUDF>>,
    runtime: Arc<RuntimeEnv>,
}

impl fmt::Debug for Redecoder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Redecoder").finish_non_exhaustive()
    }
}

impl Default for Redecoder {
    fn default() -> Self {
        let windows = by_name(
            SessionStateDefaults::default_window_functions(),
            |f| f.name(),
            |f| f.aliases(),
        );
        let higher_order = by_name(
            SessionStateDefaults::default_higher_order_functions(),
            |f| f.name(),
            |f| f.aliases(),
        );
        Redecoder {
            codec: Arc::new(BallistaPhysicalExtensionCodec::default()),
            windows,
            higher_order,
            runtime: Arc::new(RuntimeEnv::default()),
        }
    }
}

/// `functions` by name and by each alias, as a task's registry holds them.
fn by_name<F: ?Sized>(
    functions: Vec<Arc<F>>,
    name: impl Fn(&F) -> &str,
    aliases: impl Fn(&F) -> &[String],
) -> HashMap<String, Arc<F>> {
    let mut out = HashMap::new();
    for f in functions {
        for alias in aliases(&f) {
            out.insert(alias.clone(), Arc::clone(&f));
        }
        out.insert(name(&f).to_string(), f);
    }
    out
}

impl Redecoder {
    /// `plan` decoded once more, with each call of a scalar or aggregate function timed
    /// at a call site of its own (the timer holds the sites). `None` if the plan calls no
    /// function the options time, or does not decode again (a window function outside
    /// DataFusion's own, say): the task then runs as Ballista decoded it, its functions
    /// untimed.
    pub(crate) fn with_timed_functions(
        &self,
        plan: &Arc<dyn ExecutionPlan>,
        config: &SessionConfig,
        timer: FunctionTimer,
    ) -> Option<(Arc<dyn ExecutionPlan>, Arc<FunctionTimer>)> {
        let (scalars, aggregates) = functions_of(plan);
        if scalars.is_empty() && aggregates.is_empty() {
            return None;
        }
        let node =
            PhysicalPlanNode::try_from_physical_plan(Arc::clone(plan), self.codec.as_ref()).ok()?;
        let timer = Arc::new(timer);
        let codec = TimingCodec {
            inner: Arc::clone(&self.codec),
            scalars,
            aggregates,
            timer: Arc::clone(&timer),
        };
        let ctx = TaskContext::new(
            None,
            String::new(),
            config.clone(),
            HashMap::new(),
            self.higher_order.clone(),
            HashMap::new(),
            self.windows.clone(),
            Arc::clone(&self.runtime),
        );
        let decoded = node.try_into_physical_plan(&ctx, &codec).ok()?;
        (!timer.is_empty()).then_some((decoded, timer))
    }
}

/// The scalar and aggregate functions `plan` calls, by name.
fn functions_of(
    plan: &Arc<dyn ExecutionPlan>,
) -> (HashMap<String, ScalarUDF>, HashMap<String, AggregateUDF>) {
    let (mut scalars, mut aggregates) = (HashMap::new(), HashMap::new());
    for_each_function_call(
        plan,
        |call, _| {
            scalars
                .entry(call.fun().name().to_string())
                .or_insert_with(|| call.fun().clone());
        },
        |call| {
            aggregates
                .entry(call.fun().name().to_string())
                .or_insert_with(|| call.fun().clone());
        },
    );
    (scalars, aggregates)
}
