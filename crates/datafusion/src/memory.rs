//! A per-operator view of the memory pool, for exact per-operator peak memory.
//!
//! Every DataFusion operator takes its memory pool from the `TaskContext` handed to its own
//! `execute`. The wrapper hands its operator a context whose pool is a view: it forwards
//! every call to the real pool, so limits and spilling behave exactly as without qprof, and
//! on the side counts the bytes this operator reserved in this task, in the operator as a
//! whole and in the task of the stage.

use std::fmt;
use std::sync::Arc;

use datafusion::common::Result;
use datafusion::execution::TaskContext;
use datafusion::execution::memory_pool::{
    MemoryConsumer, MemoryLimit, MemoryPool, MemoryReservation,
};
use datafusion::execution::runtime_env::RuntimeEnv;
use qprof_core::counters::{MemoryTracker, OperatorTaskCounters};

use crate::stats::OperatorStats;

/// A memory pool view that attributes reservations to one operator task.
pub(crate) struct OperatorMemoryPool {
    root: Arc<dyn MemoryPool>,
    task: Arc<OperatorTaskCounters>,
    operator: Arc<OperatorStats>,
    stage_task: Arc<MemoryTracker>,
}

impl fmt::Debug for OperatorMemoryPool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OperatorMemoryPool")
            .field("root", &self.root.name())
            .field("node_id", &self.operator.node_id)
            .finish()
    }
}

impl fmt::Display for OperatorMemoryPool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.root, f)
    }
}

impl OperatorMemoryPool {
    fn add(&self, bytes: usize) {
        self.task.memory().grow(bytes);
        self.operator.memory.grow(bytes);
        self.stage_task.grow(bytes);
    }

    fn sub(&self, bytes: usize) {
        self.task.memory().shrink(bytes);
        self.operator.memory.shrink(bytes);
        self.stage_task.shrink(bytes);
    }
}

impl MemoryPool for OperatorMemoryPool {
    fn name(&self) -> &str {
        self.root.name()
    }

    fn register(&self, consumer: &MemoryConsumer) {
        self.root.register(consumer);
    }

    fn unregister(&self, consumer: &MemoryConsumer) {
        self.root.unregister(consumer);
    }

    fn grow(&self, reservation: &MemoryReservation, additional: usize) {
        self.root.grow(reservation, additional);
        self.add(additional);
    }

    fn shrink(&self, reservation: &MemoryReservation, shrink: usize) {
        self.root.shrink(reservation, shrink);
        self.sub(shrink);
    }

    fn try_grow(&self, reservation: &MemoryReservation, additional: usize) -> Result<()> {
        self.root.try_grow(reservation, additional)?;
        self.add(additional);
        Ok(())
    }

    fn reserved(&self) -> usize {
        self.root.reserved()
    }

    fn memory_limit(&self) -> MemoryLimit {
        self.root.memory_limit()
    }
}

/// A copy of `context` whose memory pool attributes reservations to `task` of `operator`.
pub(crate) fn context_for(
    context: &TaskContext,
    operator: &Arc<OperatorStats>,
    task: &Arc<OperatorTaskCounters>,
    partition: usize,
) -> Arc<TaskContext> {
    // The context arrives carrying the parent operator's view: attribute to the real pool.
    let pool = context.memory_pool();
    let root = match (pool.as_ref() as &dyn std::any::Any).downcast_ref::<OperatorMemoryPool>() {
        Some(parent_view) => Arc::clone(&parent_view.root),
        None => Arc::clone(pool),
    };
    let stage_task = operator
        .plan
        .stage_task_memory(operator.stage().unwrap_or(u32::MAX), partition);
    let view: Arc<dyn MemoryPool> = Arc::new(OperatorMemoryPool {
        root,
        task: Arc::clone(task),
        operator: Arc::clone(operator),
        stage_task,
    });
    let runtime = context.runtime_env();
    let runtime = Arc::new(RuntimeEnv {
        memory_pool: view,
        disk_manager: Arc::clone(&runtime.disk_manager),
        cache_manager: Arc::clone(&runtime.cache_manager),
        object_store_registry: Arc::clone(&runtime.object_store_registry),
    });
    Arc::new(TaskContext::new(
        context.task_id(),
        context.session_id(),
        context.session_config().clone(),
        context.scalar_functions().clone(),
        context.higher_order_functions().clone(),
        context.aggregate_functions().clone(),
        context.window_functions().clone(),
        runtime,
    ))
}
