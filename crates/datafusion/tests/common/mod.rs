//! Helpers shared by the integration tests.

use std::fmt;
use std::sync::atomic::AtomicUsize;
use std::sync::atomic::Ordering::Relaxed;

use datafusion::common::Result;
use datafusion::execution::memory_pool::{
    GreedyMemoryPool, MemoryConsumer, MemoryLimit, MemoryPool, MemoryReservation,
};

/// A memory pool with a limit that keeps its own record of what it was asked: how many
/// times memory grew, and the most it ever had reserved (the ground truth for peaks).
#[derive(Debug)]
pub(crate) struct AuditedPool {
    inner: GreedyMemoryPool,
    /// Successful grows.
    pub(crate) grows: AtomicUsize,
    /// The most ever reserved at once.
    pub(crate) peak: AtomicUsize,
}

impl AuditedPool {
    /// A pool of `limit` bytes.
    pub(crate) fn new(limit: usize) -> AuditedPool {
        AuditedPool {
            inner: GreedyMemoryPool::new(limit),
            grows: AtomicUsize::new(0),
            peak: AtomicUsize::new(0),
        }
    }

    fn note(&self) {
        self.grows.fetch_add(1, Relaxed);
        self.peak.fetch_max(self.inner.reserved(), Relaxed);
    }
}

impl fmt::Display for AuditedPool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "audited {}", self.inner)
    }
}

impl MemoryPool for AuditedPool {
    fn name(&self) -> &str {
        "audited"
    }
    fn register(&self, consumer: &MemoryConsumer) {
        self.inner.register(consumer);
    }
    fn unregister(&self, consumer: &MemoryConsumer) {
        self.inner.unregister(consumer);
    }
    fn grow(&self, reservation: &MemoryReservation, additional: usize) {
        self.inner.grow(reservation, additional);
        self.note();
    }
    fn shrink(&self, reservation: &MemoryReservation, shrink: usize) {
        self.inner.shrink(reservation, shrink);
    }
    fn try_grow(&self, reservation: &MemoryReservation, additional: usize) -> Result<()> {
        self.inner.try_grow(reservation, additional)?;
        self.note();
        Ok(())
    }
    fn reserved(&self) -> usize {
        self.inner.reserved()
    }
    fn memory_limit(&self) -> MemoryLimit {
        self.inner.memory_limit()
    }
}
