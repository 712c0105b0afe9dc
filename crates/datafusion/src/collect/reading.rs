//! What a wrapped operator's counters read at one moment: the values its metrics are named
//! from, by the profile of a local query or, after a trip over the wire, by an engine's
//! scheduler.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use datafusion::physical_plan::ExecutionPlan;
use qprof_core::counters::{OperatorTaskCounters, OperatorTaskSnapshot};
use qprof_core::io::IoSnapshot;
use qprof_core::metric::TaskRef;
use qprof_core::phases::{JoinPhase, PhaseSnapshot};
use qprof_core::profile::{FunctionProfile, NodeMetric};
use qprof_core::spill::SpillSnapshot;

use super::{dynamic_filters, place_functions, sort_functions};
use crate::exec::ProfiledExec;

/// The task that computed a partition of the operator's stage.
pub(super) type TaskOf<'a> = &'a dyn Fn(usize) -> Option<TaskRef>;

/// One wrapped operator's counters, read once so that every figure named from them comes
/// from the same moment (spawned work can still finish after the last batch).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct OperatorReading {
    /// qprof's stage of the operator in the plan it ran in (`None`: none was assigned;
    /// the reading of an engine that ships it has none either).
    pub stage: Option<u32>,
    /// Each task's counters, by the partition it computed.
    pub tasks: Vec<(usize, OperatorTaskSnapshot)>,
    /// Work on tasks the operator spawned, which belongs to no partition's task.
    pub spawned: Vec<OperatorTaskSnapshot>,
    /// The operator's peak of reserved memory, its tasks together (`None`: unknown, the
    /// largest task's peak stands for it).
    pub peak: Option<u64>,
    /// I/O of the tasks that touched storage, by partition (`None`: spawned work).
    pub io: Vec<(Option<usize>, IoSnapshot)>,
    /// Spilling of the tasks that spilled, by partition (`None`: spawned work).
    pub spill: Vec<(Option<usize>, SpillSnapshot)>,
    /// For a join: each task's phases (build, probe), by partition.
    pub phases: Vec<(Option<usize>, [PhaseSnapshot; 2])>,
    /// The tasks that failed, with why, by partition.
    pub errors: Vec<(usize, String)>,
    /// For a file scan: the files of its table that planning left out by their partition
    /// values, before any task ran.
    pub files_pruned_at_listing: u64,
}

impl OperatorReading {
    /// Reads `exec`'s counters now.
    pub(crate) fn of(exec: &ProfiledExec) -> Self {
        let stats = exec.counters();
        let executed = stats.executed_tasks();
        let io_of =
            |p: Option<usize>, c: &OperatorTaskCounters| c.io().map(|io| (p, io.snapshot()));
        let spill_of = |p: Option<usize>, c: &OperatorTaskCounters| {
            c.spill().map(|spill| (p, spill.snapshot()))
        };
        Self {
            stage: stats.stage(),
            tasks: executed.iter().map(|(p, c)| (*p, c.snapshot())).collect(),
            spawned: Some(stats.spawned.snapshot())
                .filter(|s| *s != OperatorTaskSnapshot::default())
                .into_iter()
                .collect(),
            peak: Some(stats.memory.peak()),
            io: executed
                .iter()
                .filter_map(|(p, c)| io_of(Some(*p), c))
                .chain(io_of(None, &stats.spawned))
                .collect(),
            spill: executed
                .iter()
                .filter_map(|(p, c)| spill_of(Some(*p), c))
                .chain(spill_of(None, &stats.spawned))
                .collect(),
            phases: executed
                .iter()
                .filter_map(|(p, c)| {
                    let phases = c.phases()?;
                    Some((Some(*p), JoinPhase::ALL.map(|phase| phases.snapshot(phase))))
                })
                .collect(),
            errors: executed
                .iter()
                .filter_map(|(p, c)| Some((*p, c.error()?.to_string())))
                .collect(),
            files_pruned_at_listing: stats.files_pruned_at_listing.load(Ordering::Relaxed),
        }
    }

    /// Whether nothing was read: the operator never ran and planning pruned nothing (a
    /// peak alone does not count).
    pub fn is_empty(&self) -> bool {
        self.tasks.is_empty()
            && self.spawned.is_empty()
            && self.io.is_empty()
            && self.spill.is_empty()
            && self.phases.is_empty()
            && self.errors.is_empty()
            && self.files_pruned_at_listing == 0
    }

    /// Why the task of `partition` failed, if it did.
    pub(crate) fn error(&self, partition: usize) -> Option<&str> {
        self.errors
            .iter()
            .find(|(p, _)| *p == partition)
            .map(|(_, e)| e.as_str())
    }

    /// The counters of the task of `partition`.
    pub(crate) fn task(&self, partition: usize) -> Option<&OperatorTaskSnapshot> {
        self.tasks
            .iter()
            .find(|(p, _)| *p == partition)
            .map(|(_, s)| s)
    }
}

/// One wrapped operator of a run: its reading and what only the engine that ran it can
/// tell.
#[derive(Debug, Clone, Default)]
pub struct NodeReading {
    /// The operator's counters.
    pub reading: OperatorReading,
    /// What its function calls measured, largest CPU first.
    pub functions: Vec<FunctionProfile>,
    /// Its dynamic filters' metrics (produced, updated, accepted), as named metrics.
    pub filter_metrics: Vec<NodeMetric>,
}

/// What a run of a plan from [`crate::Profiler::instrument_plan`] left, read at its end:
/// the values only, for an engine that ships them and names them where the plan was made
/// (with [`crate::operator_metrics`]).
#[derive(Debug, Clone, Default)]
pub struct PlanReadings {
    /// Each wrapped operator, by node id ([`ProfiledExec::node_id`]). Function calls made
    /// outside any operator are on the plan's root.
    pub operators: HashMap<usize, NodeReading>,
    /// CPU time of the operators' own code in the run's tasks, in nanoseconds.
    pub cpu_nanos: u64,
    /// The largest exact peak of memory any of the plan's stages reserved.
    pub execution_peak_bytes: u64,
    /// When the executor's memory was sampled at the end of the run (epoch ms), so that a
    /// run shorter than the sampling period has a sample of its own.
    pub sampled_at_epoch_millis: u64,
}

/// Reads every wrapped operator of `plan`.
pub(crate) fn read_plan(plan: &Arc<dyn ExecutionPlan>) -> PlanReadings {
    let mut wrapped = Vec::new();
    gather(plan, &mut wrapped);
    let Some((root_id, state)) = wrapped
        .first()
        .map(|(_, e)| (e.node_id(), Arc::clone(&e.counters().plan)))
    else {
        return PlanReadings::default();
    };
    let execs: Vec<&ProfiledExec> = wrapped.iter().map(|(_, e)| *e).collect();
    let (mut functions, unplaced) = place_functions(&execs, &state.sites());
    let producers = dynamic_filters::Producers::of(plan);
    let mut readings = PlanReadings {
        operators: HashMap::with_capacity(wrapped.len()),
        ..PlanReadings::default()
    };
    let mut stages = Vec::new();
    for (node, exec) in &wrapped {
        let reading = OperatorReading::of(exec);
        if let Some(stage) = reading.stage {
            readings.cpu_nanos += reading
                .tasks
                .iter()
                .map(|(_, s)| s.self_cpu_nanos)
                .sum::<u64>();
            if !stages.contains(&stage) {
                stages.push(stage);
            }
        }
        let runtime = exec.counters().runtime.get();
        let (filter_metrics, _) =
            dynamic_filters::metrics(node.as_ref(), None, &producers, runtime.map(Arc::as_ref));
        let mut functions = functions.remove(&exec.node_id()).unwrap_or_default();
        if exec.node_id() == root_id {
            functions.extend(unplaced.iter().cloned());
        }
        sort_functions(&mut functions);
        readings.operators.insert(
            exec.node_id(),
            NodeReading {
                reading,
                functions,
                filter_metrics,
            },
        );
    }
    readings.execution_peak_bytes = stages
        .iter()
        .map(|&s| state.stage_peak(s))
        .max()
        .unwrap_or(0);
    readings.sampled_at_epoch_millis = state.memory.sample_at_boundary().epoch_millis;
    readings
}

/// The wrapped operators of `plan`, in pre-order.
fn gather<'a>(
    plan: &'a Arc<dyn ExecutionPlan>,
    out: &mut Vec<(&'a Arc<dyn ExecutionPlan>, &'a ProfiledExec)>,
) {
    if let Some(exec) = ProfiledExec::of(plan.as_ref()) {
        out.push((plan, exec));
    }
    for child in plan.children() {
        gather(child, out);
    }
}
