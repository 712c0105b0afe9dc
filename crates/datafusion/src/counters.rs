//! Per-operator state shared by a wrapper, its streams and its memory-pool views.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use datafusion::execution::runtime_env::RuntimeEnv;
use qprof_core::catalog::Tally;
use qprof_core::counters::{MemoryTracker, OperatorTaskCounters};
use qprof_core::phases::JoinPhase;
use qprof_core::profile::Estimate;

use crate::executor_memory::MemoryMonitor;
use crate::joins::JoinShape;

use qprof_core::call_site::FunctionSite;

/// Marks an operator whose stage has not been assigned.
const NO_STAGE: u32 = u32::MAX;

/// State shared by all operators of one planned query.
#[derive(Debug)]
pub(crate) struct PlanCounters {
    /// Memory of each (stage, partition): the exact peak of a task across its operators.
    stage_tasks: Mutex<HashMap<(u32, usize), Arc<MemoryTracker>>>,
    /// Memory of each stage: the exact peak of all its tasks together.
    stages: Mutex<HashMap<u32, Arc<MemoryTracker>>>,
    /// The executor's memory, sampled when a stage starts.
    pub(crate) memory: Arc<MemoryMonitor>,
    /// Every function call site planned for the query, placed in an operator or not.
    sites: Mutex<Vec<Arc<FunctionSite>>>,
}

impl PlanCounters {
    pub(crate) fn new(memory: Arc<MemoryMonitor>) -> Self {
        Self {
            stage_tasks: Mutex::default(),
            stages: Mutex::default(),
            memory,
            sites: Mutex::default(),
        }
    }

    /// The memory tracker of `stage`, created (and the executor's memory sampled: the
    /// stage starts) on first use.
    pub(crate) fn stage_memory(&self, stage: u32) -> Arc<MemoryTracker> {
        let mut stages = self.stages.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(tracker) = stages.get(&stage) {
            return Arc::clone(tracker);
        }
        let tracker = Arc::new(MemoryTracker::default());
        stages.insert(stage, Arc::clone(&tracker));
        drop(stages);
        self.memory.sample_at_boundary();
        tracker
    }

    /// Peak memory of all of `stage`'s tasks together, 0 if it reserved nothing.
    pub(crate) fn stage_peak(&self, stage: u32) -> u64 {
        let stages = self.stages.lock().unwrap_or_else(PoisonError::into_inner);
        stages.get(&stage).map_or(0, |t| t.peak())
    }

    /// The memory tracker of task `partition` of `stage`, created on first use.
    pub(crate) fn stage_task_memory(&self, stage: u32, partition: usize) -> Arc<MemoryTracker> {
        let mut tasks = self
            .stage_tasks
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        Arc::clone(tasks.entry((stage, partition)).or_default())
    }

    /// Adds the function call sites planned for the query.
    pub(crate) fn add_sites(&self, sites: Vec<Arc<FunctionSite>>) {
        self.sites
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .extend(sites);
    }

    /// Every function call site planned for the query.
    pub(crate) fn sites(&self) -> Vec<Arc<FunctionSite>> {
        self.sites
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Peak memory of task `partition` of `stage`, 0 if it reserved nothing.
    pub(crate) fn stage_task_peak(&self, stage: u32, partition: usize) -> u64 {
        let tasks = self
            .stage_tasks
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        tasks.get(&(stage, partition)).map_or(0, |t| t.peak())
    }
}

/// Everything measured about one operator, across its tasks.
#[derive(Debug)]
pub(crate) struct OperatorCounters {
    /// Pre-order id of the operator in its plan.
    pub(crate) node_id: usize,
    stage: AtomicU32,
    /// Per-partition counters, created when a partition is executed.
    tasks: Mutex<Vec<Option<Arc<OperatorTaskCounters>>>>,
    /// Work the operator runs on tasks it spawned (e.g. a repartition's input side),
    /// which belongs to none of its output partitions.
    pub(crate) spawned: Arc<OperatorTaskCounters>,
    /// Memory of the operator as a whole: the exact operator peak.
    pub(crate) memory: Arc<MemoryTracker>,
    pub(crate) plan: Arc<PlanCounters>,
    /// For a file scan: the files of its table that planning left out by their partition
    /// values (Hive-style directories), before any task ran.
    pub(crate) files_pruned_at_listing: AtomicU64,
    /// For a join: how it reads its inputs.
    pub(crate) join: OnceLock<JoinShape>,
    /// For an input of a join: the side it feeds.
    pub(crate) join_input: OnceLock<JoinPhase>,
    /// For a file scan or sink: the runtime it ran in (its caches are read after the run).
    pub(crate) runtime: OnceLock<Arc<RuntimeEnv>>,
    /// Where its tasks count how long their consumers wait on them, if they measure it.
    pub(crate) waits_tally: OnceLock<Tally>,
    /// Whether its tasks measure their consumers' CPU time between batches.
    pub(crate) measures_consumer_cpu: AtomicBool,
    /// What the engine's statistics said it would produce, as the plan left planning.
    pub(crate) estimate: OnceLock<Estimate>,
}

impl OperatorCounters {
    pub(crate) fn new(node_id: usize, plan: Arc<PlanCounters>) -> Self {
        let memory = Arc::new(MemoryTracker::default());
        Self {
            node_id,
            stage: AtomicU32::new(NO_STAGE),
            tasks: Mutex::new(Vec::new()),
            spawned: Arc::new(OperatorTaskCounters::with_links(
                vec![Arc::clone(&memory)],
                None,
            )),
            memory,
            plan,
            files_pruned_at_listing: AtomicU64::new(0),
            join: OnceLock::new(),
            join_input: OnceLock::new(),
            runtime: OnceLock::new(),
            waits_tally: OnceLock::new(),
            measures_consumer_cpu: AtomicBool::new(false),
            estimate: OnceLock::new(),
        }
    }

    pub(crate) fn set_stage(&self, stage: u32) {
        self.stage.store(stage, Ordering::Relaxed);
    }

    /// The stage the operator belongs to, once assigned.
    pub(crate) fn stage(&self) -> Option<u32> {
        match self.stage.load(Ordering::Relaxed) {
            NO_STAGE => None,
            s => Some(s),
        }
    }

    /// The counters of `partition`, created on first use.
    pub(crate) fn task(&self, partition: usize) -> Arc<OperatorTaskCounters> {
        let mut tasks = self.tasks.lock().unwrap_or_else(PoisonError::into_inner);
        if tasks.len() <= partition {
            tasks.resize(partition + 1, None);
        }
        Arc::clone(tasks[partition].get_or_insert_with(|| {
            let mut rollups = vec![Arc::clone(&self.memory)];
            if let Some(stage) = self.stage() {
                rollups.push(self.plan.stage_task_memory(stage, partition));
                rollups.push(self.plan.stage_memory(stage));
            }
            let task = OperatorTaskCounters::with_links(rollups, Some(Arc::clone(&self.spawned)));
            if let Some(join) = self.join.get() {
                task.phases_or_init(join.sequential);
            }
            Arc::new(task)
        }))
    }

    /// Counters of every executed partition, by partition number.
    pub(crate) fn executed_tasks(&self) -> Vec<(usize, Arc<OperatorTaskCounters>)> {
        let tasks = self.tasks.lock().unwrap_or_else(PoisonError::into_inner);
        tasks
            .iter()
            .enumerate()
            .filter_map(|(p, t)| t.as_ref().map(|t| (p, Arc::clone(t))))
            .collect()
    }
}
