//! Joins and their two inputs: which child is the build side and which the probe side, and
//! the names their phase metrics go by.

use datafusion::common::JoinSide;
use datafusion::physical_plan::ExecutionPlan;
use datafusion::physical_plan::joins::{
    CrossJoinExec, HashJoinExec, NestedLoopJoinExec, PiecewiseMergeJoinExec, SortMergeJoinExec,
    SymmetricHashJoinExec,
};
use qprof_core::phases::JoinPhase;
use qprof_core::profile::names::JOIN_PHASE_PREFIXES;

/// How a join reads its inputs; [`join_shape`] tells it of a plan node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JoinShape {
    /// The child collected first and held (or, for a join reading both inputs together,
    /// the one named first).
    pub(crate) build_child: usize,
    /// The child streamed past the build side.
    pub(crate) probe_child: usize,
    /// Whether the build side is complete before the probe side is read.
    pub(crate) sequential: bool,
    /// Whether the join's memory and spill files hold the build side alone (a symmetric
    /// hash join holds both).
    pub(crate) holds_build_side: bool,
    /// Metric-name prefix of the build phase (`hashBuild`).
    pub(crate) build_prefix: &'static str,
    /// Metric-name prefix of the probe phase (`hashProbe`).
    pub(crate) probe_prefix: &'static str,
}

impl JoinShape {
    const fn sequential(prefixes: (&'static str, &'static str)) -> Self {
        let (build_prefix, probe_prefix) = prefixes;
        JoinShape {
            build_child: 0,
            probe_child: 1,
            sequential: true,
            holds_build_side: true,
            build_prefix,
            probe_prefix,
        }
    }

    /// The metric-name prefix of `phase`.
    pub(crate) fn prefix(&self, phase: JoinPhase) -> &'static str {
        match phase {
            JoinPhase::Build => self.build_prefix,
            JoinPhase::Probe => self.probe_prefix,
        }
    }

    /// The side the child at `index` feeds, if it is one of the join's inputs.
    pub(crate) fn side_of(&self, index: usize) -> Option<JoinPhase> {
        if index == self.build_child {
            Some(JoinPhase::Build)
        } else if index == self.probe_child {
            Some(JoinPhase::Probe)
        } else {
            None
        }
    }
}

/// The shape of `plan` if it is a join.
///
/// DataFusion's joins that hold one side build it from their first child (a hash join's
/// left input is its build side), except a sort-merge join, which streams one side past
/// buffered runs of the other, reading both together; so does a symmetric hash join.
pub fn join_shape(plan: &dyn ExecutionPlan) -> Option<JoinShape> {
    if plan.is::<HashJoinExec>() {
        return Some(JoinShape::sequential(JOIN_PHASE_PREFIXES[0]));
    }
    if plan.is::<CrossJoinExec>() {
        return Some(JoinShape::sequential(JOIN_PHASE_PREFIXES[1]));
    }
    if plan.is::<NestedLoopJoinExec>() {
        return Some(JoinShape::sequential(JOIN_PHASE_PREFIXES[2]));
    }
    if plan.is::<PiecewiseMergeJoinExec>() {
        return Some(JoinShape::sequential(JOIN_PHASE_PREFIXES[3]));
    }
    if let Some(smj) = plan.downcast_ref::<SortMergeJoinExec>() {
        let streamed = match SortMergeJoinExec::probe_side(&smj.join_type()) {
            JoinSide::Right => 1,
            _ => 0,
        };
        return Some(JoinShape {
            build_child: 1 - streamed,
            probe_child: streamed,
            sequential: false,
            holds_build_side: true,
            build_prefix: JOIN_PHASE_PREFIXES[4].0,
            probe_prefix: JOIN_PHASE_PREFIXES[4].1,
        });
    }
    if plan.is::<SymmetricHashJoinExec>() {
        return Some(JoinShape {
            build_child: 0,
            probe_child: 1,
            sequential: false,
            holds_build_side: false,
            build_prefix: JOIN_PHASE_PREFIXES[5].0,
            probe_prefix: JOIN_PHASE_PREFIXES[5].1,
        });
    }
    None
}
