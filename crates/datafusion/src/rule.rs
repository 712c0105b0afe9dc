//! The physical optimizer rule that wraps every operator, and the cut of a plan into stages.

use std::sync::Arc;

use datafusion::common::Result;
use datafusion::common::stats::Precision;
use datafusion::common::tree_node::{Transformed, TransformedResult, TreeNode};
use datafusion::config::ConfigOptions;
use datafusion::physical_optimizer::PhysicalOptimizerRule;
use datafusion::physical_plan::coalesce_partitions::CoalescePartitionsExec;
use datafusion::physical_plan::repartition::RepartitionExec;
use datafusion::physical_plan::sorts::sort_preserving_merge::SortPreservingMergeExec;
use datafusion::physical_plan::{ExecutionPlan, StatisticsArgs, StatisticsContext};
use qprof_core::profile::{Estimate, Estimated};

use crate::counters::{OperatorCounters, PlanCounters};
use crate::exec::ProfiledExec;
use crate::executor_memory::MemoryMonitor;
use crate::joins::join_shape;

/// Wraps every operator of a physical plan in a [`ProfiledExec`].
///
/// Append it last (`SessionStateBuilder::with_physical_optimizer_rule`), so it sees the
/// final plan, after dynamic filters are wired. It is idempotent: a plan that is already
/// wrapped is returned as it is.
#[derive(Debug)]
pub(crate) struct ProfilingRule {
    /// The executor's memory, sampled when a stage of a wrapped plan starts.
    memory: Arc<MemoryMonitor>,
}

impl ProfilingRule {
    /// The rule's name, by which an instrumented builder is recognized.
    pub(crate) const NAME: &'static str = "qprof_profiling";

    pub(crate) fn new(memory: Arc<MemoryMonitor>) -> Self {
        Self { memory }
    }
}

impl PhysicalOptimizerRule for ProfilingRule {
    fn optimize(
        &self,
        plan: Arc<dyn ExecutionPlan>,
        _config: &ConfigOptions,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        if ProfiledExec::of(plan.as_ref()).is_some() {
            return Ok(plan);
        }
        let state = Arc::new(PlanCounters::new(Arc::clone(&self.memory)));
        let mut next_id = 0_usize;
        let wrapped = plan
            .transform_down(|node| {
                if ProfiledExec::of(node.as_ref()).is_some() {
                    return Ok(Transformed::no(node));
                }
                let stats = Arc::new(OperatorCounters::new(next_id, Arc::clone(&state)));
                next_id += 1;
                Ok(Transformed::yes(
                    Arc::new(ProfiledExec::new(node, stats)) as Arc<dyn ExecutionPlan>
                ))
            })
            .data()?;
        assign_stages(&wrapped);
        mark_joins(&wrapped);
        record_estimates(&wrapped);
        Ok(wrapped)
    }

    fn name(&self) -> &str {
        Self::NAME
    }

    fn schema_check(&self) -> bool {
        true
    }
}

/// True for operators whose output partitions are fed by other tasks: the inputs of an
/// exchange run in other stages.
pub(crate) fn is_exchange(plan: &dyn ExecutionPlan) -> bool {
    plan.is::<RepartitionExec>()
        || plan.is::<CoalescePartitionsExec>()
        || plan.is::<SortPreservingMergeExec>()
}

fn partition_count(plan: &dyn ExecutionPlan) -> usize {
    plan.properties().partitioning.partition_count()
}

/// Cuts the plan into stages at exchanges over several partitions and wherever the number
/// of partitions changes,
/// and records each operator's stage. Stages are numbered so that every stage's inputs
/// have smaller ids than the stage itself; the root's stage has the largest id.
fn assign_stages(root: &Arc<dyn ExecutionPlan>) {
    fn visit(
        node: &Arc<dyn ExecutionPlan>,
        current: &mut Vec<Arc<dyn ExecutionPlan>>,
        finished: &mut Vec<Vec<Arc<dyn ExecutionPlan>>>,
    ) {
        current.push(Arc::clone(node));
        for child in node.children() {
            // an exchange over a single input partition runs its input inline: no cut
            let child_partitions = partition_count(child.as_ref());
            let boundary = child_partitions != partition_count(node.as_ref())
                || (is_exchange(node.as_ref()) && child_partitions > 1);
            if boundary {
                let mut stage = Vec::new();
                visit(child, &mut stage, finished);
                finished.push(stage);
            } else {
                visit(child, current, finished);
            }
        }
    }
    let mut root_stage = Vec::new();
    let mut stages = Vec::new();
    visit(root, &mut root_stage, &mut stages);
    stages.push(root_stage);
    for (id, stage) in stages.iter().enumerate() {
        for node in stage {
            if let Some(p) = ProfiledExec::of(node.as_ref()) {
                p.counters().set_stage(id as u32);
            }
        }
    }
}

/// Records the shape of every join and, on each of its inputs, the side it feeds.
/// Keeps what the engine's statistics say each operator will produce, as the plan leaves
/// planning: one walk of the plan, each node's statistics computed once from its inputs'.
fn record_estimates(root: &Arc<dyn ExecutionPlan>) {
    let context = StatisticsContext::new();
    let mut pending = vec![root];
    while let Some(plan) = pending.pop() {
        if let Some(exec) = ProfiledExec::of(plan.as_ref())
            && let Ok(statistics) = context.compute(plan.as_ref(), &StatisticsArgs::new())
        {
            let _ = exec.counters().estimate.set(Estimate {
                rows: estimated(&statistics.num_rows),
                bytes: estimated(&statistics.total_byte_size),
            });
        }
        pending.extend(plan.children());
    }
}

fn estimated(value: &Precision<usize>) -> Estimated {
    match value {
        Precision::Exact(v) => Estimated::Exact(*v as u64),
        Precision::Inexact(v) => Estimated::Inexact(*v as u64),
        Precision::Absent => Estimated::Absent,
    }
}

fn mark_joins(plan: &Arc<dyn ExecutionPlan>) {
    if let Some(join) = ProfiledExec::of(plan.as_ref())
        .and_then(|exec| Some((exec, join_shape(exec.inner().as_ref())?)))
    {
        let (exec, shape) = join;
        let _ = exec.counters().join.set(shape);
        for (index, child) in plan.children().into_iter().enumerate() {
            if let (Some(input), Some(side)) =
                (ProfiledExec::of(child.as_ref()), shape.side_of(index))
            {
                let _ = input.counters().join_input.set(side);
            }
        }
    }
    for child in plan.children() {
        mark_joins(child);
    }
}
