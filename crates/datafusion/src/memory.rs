//! A memory pool that attributes every reservation to the operator task that made it.
//!
//! DataFusion operators register a `MemoryConsumer` with the pool before reserving memory.
//! They do so in `execute`, in a poll, or in a task they spawned: in each case qprof has a
//! frame open for the operator task doing it ([`qprof_core::attribution`]). The pool
//! remembers that task for the consumer, and counts the consumer's later grows and shrinks
//! there. Every call is forwarded to the real pool, so limits and spilling behave exactly
//! as without qprof.

use std::collections::HashMap;
use std::fmt;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, PoisonError, RwLock};

use datafusion::common::Result;
use datafusion::execution::memory_pool::{
    MemoryConsumer, MemoryLimit, MemoryPool, MemoryReservation,
};
use qprof_core::attribution;
use qprof_core::counters::OperatorTaskCounters;

/// Wraps the session's memory pool and attributes reservations to operator tasks.
pub(crate) struct AttributingPool {
    inner: Arc<dyn MemoryPool>,
    /// consumer id -> the operator task that registered it
    consumers: RwLock<HashMap<usize, Arc<OperatorTaskCounters>>>,
    /// What the pool holds now, counted here as grows and shrinks pass through: the inner
    /// pool's own count can cost a lock to read (a `FairSpillPool`'s does).
    held: AtomicUsize,
    /// The most the pool held at once since [`AttributingPool::restart_high_water`].
    high_water: AtomicUsize,
    /// Where consumers registered outside every operator's frame are counted, if
    /// anywhere (an engine's own work beside the plan, e.g. a cluster's shuffle writer).
    unframed: Option<Arc<OperatorTaskCounters>>,
}

impl AttributingPool {
    pub(crate) fn new(inner: Arc<dyn MemoryPool>) -> Self {
        Self {
            inner,
            consumers: RwLock::new(HashMap::new()),
            held: AtomicUsize::new(0),
            high_water: AtomicUsize::new(0),
            unframed: None,
        }
    }

    /// The pool with the consumers registered outside every frame counted in `owner`.
    pub(crate) fn with_unframed_owner(mut self, owner: Arc<OperatorTaskCounters>) -> Self {
        self.unframed = Some(owner);
        self
    }

    /// Starts the high-water mark afresh from what the pool holds now.
    pub(crate) fn restart_high_water(&self) {
        self.high_water
            .store(self.held.load(Ordering::Relaxed), Ordering::Relaxed);
    }

    /// The most the pool held at once since the mark was last restarted.
    pub(crate) fn high_water(&self) -> usize {
        self.high_water
            .load(Ordering::Relaxed)
            .max(self.held.load(Ordering::Relaxed))
    }

    fn held_more(&self, additional: usize) {
        let held = self.held.fetch_add(additional, Ordering::Relaxed) + additional;
        self.high_water.fetch_max(held, Ordering::Relaxed);
    }

    fn owner(&self, reservation: &MemoryReservation) -> Option<Arc<OperatorTaskCounters>> {
        let consumers = self
            .consumers
            .read()
            .unwrap_or_else(PoisonError::into_inner);
        consumers.get(&reservation.consumer().id()).cloned()
    }
}

impl fmt::Debug for AttributingPool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AttributingPool")
            .field("inner", &self.inner.name())
            .finish()
    }
}

impl fmt::Display for AttributingPool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.inner, f)
    }
}

impl MemoryPool for AttributingPool {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn register(&self, consumer: &MemoryConsumer) {
        self.inner.register(consumer);
        if let Some(task) = attribution::current().or_else(|| self.unframed.clone()) {
            self.consumers
                .write()
                .unwrap_or_else(PoisonError::into_inner)
                .insert(consumer.id(), task);
        }
    }

    fn unregister(&self, consumer: &MemoryConsumer) {
        self.inner.unregister(consumer);
        self.consumers
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&consumer.id());
    }

    fn grow(&self, reservation: &MemoryReservation, additional: usize) {
        self.inner.grow(reservation, additional);
        self.held_more(additional);
        if let Some(task) = self.owner(reservation) {
            task.reserve(additional);
        }
    }

    fn shrink(&self, reservation: &MemoryReservation, shrink: usize) {
        self.inner.shrink(reservation, shrink);
        self.held.fetch_sub(shrink, Ordering::Relaxed);
        if let Some(task) = self.owner(reservation) {
            task.release(shrink);
        }
    }

    fn try_grow(&self, reservation: &MemoryReservation, additional: usize) -> Result<()> {
        self.inner.try_grow(reservation, additional)?;
        self.held_more(additional);
        if let Some(task) = self.owner(reservation) {
            task.reserve(additional);
        }
        Ok(())
    }

    fn reserved(&self) -> usize {
        self.inner.reserved()
    }

    fn memory_limit(&self) -> MemoryLimit {
        self.inner.memory_limit()
    }
}
