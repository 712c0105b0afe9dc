//! Per-function CPU time on an executor whose stage plans come untimed.
//!
//! qprof's scheduler ships each function call timed (see [`crate::codec`]). A plan from
//! another scheduler, or a plan decoded once for several tasks (the second task's), has
//! no call timed for its task; the engine then decodes the task's plan once more: its
//! functions are looked up through a codec that hands out a timed function (a call site
//! of its own) per lookup, from a [`FunctionTimer`].
//!
//! Only the operators that call functions, and the operators above them, are decoded
//! again: every subtree without a call (scans and shuffle readers, typically: most of a
//! decode's work) is encoded as a stand-in and comes back as the very subtree Ballista
//! decoded. A subtree that reads a dynamic filter produced above it is decoded with its
//! producer, so that the two stay linked.

use std::cell::Cell;
use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

use ballista_core::serde::BallistaPhysicalExtensionCodec;
use datafusion::common::tree_node::{TreeNode, TreeNodeRecursion};
use datafusion::error::{DataFusionError, Result};
use datafusion::execution::SessionStateDefaults;
use datafusion::execution::TaskContext;
use datafusion::execution::runtime_env::RuntimeEnv;
use datafusion::logical_expr::{AggregateUDF, HigherOrderUDF, ScalarUDF, WindowUDF};
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_plan::execution_plan::{ChildrenPropertiesMode, ReplaceChildrenOptions};
use datafusion::physical_plan::{
    DisplayAs, DisplayFormatType, ExecutionPlan, PlanProperties, SendableRecordBatchStream,
};
use datafusion::prelude::SessionConfig;
use datafusion_proto::physical_plan::{
    AsExecutionPlan, PhysicalExtensionCodec, PhysicalProtoConverterExtension,
};
use datafusion_proto::protobuf::PhysicalPlanNode;
use qprof_datafusion::{
    FunctionTimer, for_each_function_call, for_each_own_function_call, untimed_aggregate,
    untimed_scalar,
};

/// Decodes the functions of a plan as timed ones: the plan's own functions, by name, each
/// lookup wrapped by the timer; everything else as Ballista's codec decodes it.
struct TimingCodec {
    inner: Arc<BallistaPhysicalExtensionCodec>,
    scalars: HashMap<String, ScalarUDF>,
    aggregates: HashMap<String, AggregateUDF>,
    timer: Arc<FunctionTimer>,
    /// The subtrees that stand-ins stand for, by index.
    kept: Vec<Arc<dyn ExecutionPlan>>,
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
        match StandIn::index_in(buf) {
            Some(index) => self.kept.get(index).cloned().ok_or_else(|| {
                DataFusionError::Internal(format!("no subtree kept for stand-in {index}"))
            }),
            None => self.inner.try_decode(buf, inputs, ctx, proto_converter),
        }
    }

    fn try_encode(
        &self,
        node: Arc<dyn ExecutionPlan>,
        buf: &mut Vec<u8>,
        proto_converter: &dyn PhysicalProtoConverterExtension,
    ) -> Result<()> {
        match node.downcast_ref::<StandIn>() {
            Some(stand_in) => {
                buf.extend_from_slice(StandIn::TAG);
                buf.extend_from_slice(&(stand_in.index as u64).to_le_bytes());
                Ok(())
            }
            None => self.inner.try_encode(node, buf, proto_converter),
        }
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
        let mut kept = Vec::new();
        let cut = cut_uncalled(plan, &mut kept).ok()?.plan;
        let timer = Arc::new(timer);
        let codec = TimingCodec {
            inner: Arc::clone(&self.codec),
            scalars,
            aggregates,
            timer: Arc::clone(&timer),
            kept,
        };
        let node = PhysicalPlanNode::try_from_physical_plan(cut, &codec).ok()?;
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

/// The scalar and aggregate functions `plan` calls, by name (a timed call's function
/// as it is untimed: the second decode times it at a site of its own).
fn functions_of(
    plan: &Arc<dyn ExecutionPlan>,
) -> (HashMap<String, ScalarUDF>, HashMap<String, AggregateUDF>) {
    let (mut scalars, mut aggregates) = (HashMap::new(), HashMap::new());
    for_each_function_call(
        plan,
        |call, _| {
            scalars
                .entry(call.fun().name().to_string())
                .or_insert_with(|| untimed_scalar(call.fun()));
        },
        |call| {
            aggregates
                .entry(call.fun().name().to_string())
                .or_insert_with(|| untimed_aggregate(call.fun()));
        },
    );
    (scalars, aggregates)
}

/// Stands for a subtree that calls no function while the rest of a plan is encoded and
/// decoded again: it encodes as its index, and decodes as the subtree itself. It has the
/// subtree's properties, so its parent is rebuilt around it without recomputing its own;
/// it never runs.
#[derive(Debug)]
struct StandIn {
    /// Where the subtree is in the codec's `kept`.
    index: usize,
    subtree: Arc<dyn ExecutionPlan>,
}

impl StandIn {
    /// What a stand-in's encoding starts with (no Ballista extension node's does: theirs
    /// are protobuf messages, whose first byte is a field's tag).
    const TAG: &'static [u8] = b"\0qprof-stand-in";

    /// The index a stand-in's encoding `buf` holds; `None` for any other node's.
    fn index_in(buf: &[u8]) -> Option<usize> {
        let index = buf.strip_prefix(Self::TAG)?;
        usize::try_from(u64::from_le_bytes(index.try_into().ok()?)).ok()
    }
}

impl DisplayAs for StandIn {
    fn fmt_as(&self, _: DisplayFormatType, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "StandIn: {}", self.index)
    }
}

impl ExecutionPlan for StandIn {
    fn name(&self) -> &str {
        "StandIn"
    }

    fn properties(&self) -> &Arc<PlanProperties> {
        self.subtree.properties()
    }

    fn children(&self) -> Vec<&Arc<dyn ExecutionPlan>> {
        Vec::new()
    }

    fn apply_expressions(
        &self,
        _: &mut dyn FnMut(&Arc<dyn PhysicalExpr>) -> Result<TreeNodeRecursion>,
    ) -> Result<TreeNodeRecursion> {
        Ok(TreeNodeRecursion::Continue)
    }

    fn with_new_children(
        self: Arc<Self>,
        children: Vec<Arc<dyn ExecutionPlan>>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        if children.is_empty() {
            Ok(self)
        } else {
            Err(DataFusionError::Internal(
                "a stand-in has no children".to_string(),
            ))
        }
    }

    fn execute(&self, _: usize, _: Arc<TaskContext>) -> Result<SendableRecordBatchStream> {
        Err(DataFusionError::Internal(
            "a stand-in for a subtree is only encoded, never run".to_string(),
        ))
    }
}

/// Whether `plan` itself (not its children) calls a function that a codec decodes: a
/// scalar function in its expressions, an aggregation's functions, a window's.
fn calls_functions(plan: &Arc<dyn ExecutionPlan>) -> bool {
    if plan.name().contains("Window") {
        return true;
    }
    let calls = Cell::new(false);
    for_each_own_function_call(plan, |_, _| calls.set(true), |_| calls.set(true));
    calls.get()
}

/// A plan with the subtrees that need no second decode replaced by stand-ins.
struct Cut {
    plan: Arc<dyn ExecutionPlan>,
    /// Whether the subtree calls a function.
    calls: bool,
    /// The ids of the dynamic filters the subtree's operators produce, and of those its
    /// expressions read.
    produced: Vec<u64>,
    consumed: Vec<u64>,
}

impl Cut {
    /// Whether the subtree can stand aside, as decoded: it calls no function and reads no
    /// dynamic filter produced outside it (a filter decoded again would no longer reach it).
    fn stands_aside(&self) -> bool {
        !self.calls && self.consumed.iter().all(|id| self.produced.contains(id))
    }
}

/// `plan` with each child subtree that can stand aside (see [`Cut::stands_aside`])
/// replaced by a [`StandIn`], the subtree pushed on `kept`.
fn cut_uncalled(
    plan: &Arc<dyn ExecutionPlan>,
    kept: &mut Vec<Arc<dyn ExecutionPlan>>,
) -> Result<Cut> {
    let mut produced: Vec<u64> = plan
        .dynamic_expressions_produced()
        .iter()
        .filter_map(|e| e.expression_id())
        .collect();
    let mut consumed = Vec::new();
    plan.apply_expressions(&mut |root| {
        root.apply(|expr| {
            consumed.extend(expr.expression_id());
            Ok(TreeNodeRecursion::Continue)
        })
    })?;
    let mut calls = calls_functions(plan);
    let children = plan.children();
    let mut cuts = Vec::with_capacity(children.len());
    for child in &children {
        let cut = cut_uncalled(child, kept)?;
        calls |= cut.calls;
        produced.extend_from_slice(&cut.produced);
        consumed.extend_from_slice(&cut.consumed);
        cuts.push(cut);
    }
    let mut cut = Cut {
        plan: Arc::clone(plan),
        calls,
        produced,
        consumed,
    };
    if cut.stands_aside() {
        // its parent decides
        return Ok(cut);
    }
    let mut replaced = false;
    let new_children = cuts
        .into_iter()
        .zip(&children)
        .map(|(child_cut, child)| {
            if child_cut.stands_aside() {
                replaced = true;
                kept.push(Arc::clone(child));
                Arc::new(StandIn {
                    index: kept.len() - 1,
                    subtree: Arc::clone(child),
                }) as Arc<dyn ExecutionPlan>
            } else {
                replaced |= !Arc::ptr_eq(&child_cut.plan, child);
                child_cut.plan
            }
        })
        .collect::<Vec<_>>();
    if replaced {
        let same_properties = ReplaceChildrenOptions::new(ChildrenPropertiesMode::Keep);
        cut.plan = Arc::clone(plan).replace_children(new_children, same_properties)?;
    }
    Ok(cut)
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::arrow::array::Int64Array;
    use datafusion::arrow::datatypes::{DataType, Field, Schema};
    use datafusion::arrow::record_batch::RecordBatch;
    use datafusion::datasource::MemTable;
    use datafusion::prelude::SessionContext;
    use qprof_datafusion::QprofOptions;

    async fn physical_plan(sql: &str) -> Arc<dyn ExecutionPlan> {
        let schema = Arc::new(Schema::new(vec![Field::new("v", DataType::Int64, false)]));
        let column = Arc::new(Int64Array::from(vec![1, -2, 3, -4]));
        let batch = RecordBatch::try_new(Arc::clone(&schema), vec![column]).unwrap();
        let config = SessionConfig::new().with_target_partitions(1);
        let ctx = SessionContext::new_with_config(config);
        let table = MemTable::try_new(schema, vec![vec![batch]]).unwrap();
        ctx.register_table("t", Arc::new(table)).unwrap();
        ctx.sql(sql)
            .await
            .unwrap()
            .create_physical_plan()
            .await
            .unwrap()
    }

    /// The operators of `plan` in pre-order.
    fn pre_order(plan: &Arc<dyn ExecutionPlan>, out: &mut Vec<Arc<dyn ExecutionPlan>>) {
        out.push(Arc::clone(plan));
        for child in plan.children() {
            pre_order(child, out);
        }
    }

    #[tokio::test]
    async fn only_operators_calling_functions_and_those_above_them_are_decoded_again() {
        let plan = physical_plan("SELECT abs(v) AS a FROM t WHERE v % 2 = 0").await;
        let mut original = Vec::new();
        pre_order(&plan, &mut original);
        let filter = original
            .iter()
            .find(|p| p.name() == "FilterExec")
            .expect("a filter");

        let mut kept = Vec::new();
        let cut = cut_uncalled(&plan, &mut kept).unwrap();
        assert!(cut.calls);
        // the filter (no function call) and the scan under it stand aside, as they are
        assert_eq!(kept.len(), 1, "{kept:?}");
        assert!(Arc::ptr_eq(&kept[0], filter));
        let mut cut_nodes = Vec::new();
        pre_order(&cut.plan, &mut cut_nodes);
        assert_eq!(cut_nodes[0].name(), "ProjectionExec");
        assert_eq!(cut_nodes.last().unwrap().name(), "StandIn");

        // decoded again: a new projection with its call timed, over the very filter
        let timer = FunctionTimer::new(QprofOptions::default());
        let (decoded, timer) = Redecoder::default()
            .with_timed_functions(&plan, &SessionConfig::new(), timer)
            .expect("the projection calls abs");
        assert!(!timer.is_empty());
        assert!(!Arc::ptr_eq(&decoded, &plan));
        let mut decoded_nodes = Vec::new();
        pre_order(&decoded, &mut decoded_nodes);
        let names = |nodes: &[Arc<dyn ExecutionPlan>]| -> Vec<String> {
            nodes.iter().map(|p| p.name().to_string()).collect()
        };
        assert_eq!(names(&decoded_nodes), names(&original));
        let decoded_filter = decoded_nodes
            .iter()
            .find(|p| p.name() == "FilterExec")
            .unwrap();
        assert!(Arc::ptr_eq(decoded_filter, filter));
    }

    #[tokio::test]
    async fn a_plan_without_function_calls_is_not_decoded_again() {
        let plan = physical_plan("SELECT v FROM t WHERE v % 2 = 0").await;
        let mut kept = Vec::new();
        let cut = cut_uncalled(&plan, &mut kept).unwrap();
        assert!(!cut.calls);
        assert!(cut.stands_aside());
        let timer = FunctionTimer::new(QprofOptions::default());
        assert!(
            Redecoder::default()
                .with_timed_functions(&plan, &SessionConfig::new(), timer)
                .is_none()
        );
    }

    #[tokio::test]
    async fn calls_timed_for_another_task_are_timed_again_once_for_this_one() {
        use datafusion::execution::SessionStateBuilder;
        use qprof_datafusion::{plan_timed_calls, timed_mode};
        let schema = Arc::new(Schema::new(vec![Field::new("v", DataType::Int64, false)]));
        let column = Arc::new(Int64Array::from(vec![1, -2, 3, -4]));
        let batch = RecordBatch::try_new(Arc::clone(&schema), vec![column]).unwrap();
        let state = SessionStateBuilder::new()
            .with_config(SessionConfig::new().with_target_partitions(1))
            .with_default_features();
        let ctx = SessionContext::new_with_state(plan_timed_calls(state).build());
        let table = MemTable::try_new(schema, vec![vec![batch]]).unwrap();
        ctx.register_table("t", Arc::new(table)).unwrap();
        let plan = ctx
            .sql("SELECT abs(v) AS a FROM t")
            .await
            .unwrap()
            .create_physical_plan()
            .await
            .unwrap();
        let shipped = std::cell::RefCell::new(Vec::new());
        for_each_function_call(
            &plan,
            |call, _| shipped.borrow_mut().push(call.fun().clone()),
            |_| {},
        );
        let shipped = shipped.into_inner();
        assert!(
            shipped.iter().all(|f| timed_mode(f).is_some()),
            "{shipped:?}"
        );

        let timer = FunctionTimer::new(QprofOptions::default());
        let (decoded, timer) = Redecoder::default()
            .with_timed_functions(&plan, &SessionConfig::new(), timer)
            .expect("the projection calls abs");
        assert_eq!(timer.len(), shipped.len());
        for_each_function_call(
            &decoded,
            |call, _| {
                // timed, and its function the plain one: not a timed call timed again
                assert!(timed_mode(call.fun()).is_some());
                assert!(timed_mode(&untimed_scalar(call.fun())).is_none());
                assert!(
                    shipped
                        .iter()
                        .all(|f| !Arc::ptr_eq(f.inner(), call.fun().inner()))
                );
            },
            |_| {},
        );
    }
}
