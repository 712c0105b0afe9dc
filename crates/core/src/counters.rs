//! Live counters: cheap atomic handles written while a query runs, read as snapshots.

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use crate::catalog::{TALLY_SLOTS, Tally};
use crate::io::IoCounters;
use crate::metric::saturating_i64;
use crate::phases::PhaseCounters;
use crate::spill::SpillCounters;
use crate::stacks::SampleKey;

/// Tracks bytes currently reserved and their high-water mark.
///
/// `Relaxed` ordering suffices: each value is an independent counter, read for
/// reporting only, and `fetch_max` keeps the peak monotonic on its own.
#[derive(Debug, Default)]
pub struct MemoryTracker {
    current: AtomicI64,
    peak: AtomicI64,
}

impl MemoryTracker {
    /// Records `bytes` more reserved and raises the peak if needed.
    #[inline]
    pub fn grow(&self, bytes: usize) {
        let bytes = saturating_i64(bytes);
        let now = self
            .current
            .fetch_add(bytes, Ordering::Relaxed)
            .saturating_add(bytes);
        self.peak.fetch_max(now, Ordering::Relaxed);
    }

    /// Records `bytes` released.
    #[inline]
    pub fn shrink(&self, bytes: usize) {
        let bytes = saturating_i64(bytes);
        self.current.fetch_sub(bytes, Ordering::Relaxed);
    }

    /// Bytes reserved now.
    pub fn current(&self) -> u64 {
        self.current.load(Ordering::Relaxed).max(0) as u64
    }

    /// Largest number of bytes reserved at any one time.
    pub fn peak(&self) -> u64 {
        self.peak.load(Ordering::Relaxed).max(0) as u64
    }
}

/// The live counters of one operator in one task (one partition of one plan node).
///
/// Written by the operator's stream and by [`crate::attribution`] from whichever thread
/// runs the task; each task has its own instance, so the atomics are rarely contended.
/// `Relaxed` ordering suffices: counters are independent and read only for reporting.
///
/// Memory reserved through [`OperatorTaskCounters::reserve`] is also counted in *roll-up*
/// trackers (e.g. the whole operator, the whole task of a stage), so their peaks are exact
/// peaks of the sums, not sums of peaks. Work the task spawns onto other tasks can be
/// attributed to a separate *spawn target*.
#[derive(Debug, Default)]
pub struct OperatorTaskCounters {
    memory_rollups: Vec<Arc<MemoryTracker>>,
    spawn_target: Option<Arc<OperatorTaskCounters>>,
    pub(crate) wall_nanos: AtomicU64,
    pub(crate) self_wall_nanos: AtomicU64,
    pub(crate) cpu_nanos: AtomicU64,
    pub(crate) self_cpu_nanos: AtomicU64,
    pub(crate) allocations: AtomicU64,
    polls: AtomicU64,
    started_epoch_micros: AtomicU64,
    finished_epoch_micros: AtomicU64,
    batches: AtomicU64,
    rows: AtomicU64,
    bytes: AtomicU64,
    consumer_cpu_nanos: AtomicU64,
    tallies: OnceLock<Box<TallyCounters>>,
    memory: MemoryTracker,
    io: OnceLock<Arc<IoCounters>>,
    spill: OnceLock<Arc<SpillCounters>>,
    phases: OnceLock<Arc<PhaseCounters>>,
    error: OnceLock<String>,
    sample_key: SampleKey,
}

impl OperatorTaskCounters {
    /// Fresh counters at zero.
    pub fn new() -> Self {
        Self::default()
    }

    /// What names this task in sampled stacks ([`crate::stacks`]).
    pub fn sample_key(&self) -> SampleKey {
        self.sample_key
    }

    /// Fresh counters whose reservations also count in `memory_rollups`, and whose spawned
    /// work is attributed to `spawn_target` (to themselves if `None`).
    pub fn with_links(
        memory_rollups: Vec<Arc<MemoryTracker>>,
        spawn_target: Option<Arc<OperatorTaskCounters>>,
    ) -> Self {
        Self {
            memory_rollups,
            spawn_target,
            ..Self::default()
        }
    }

    /// Where work spawned by this task is attributed.
    pub fn spawn_target(self: &Arc<Self>) -> Arc<OperatorTaskCounters> {
        Arc::clone(self.spawn_target.as_ref().unwrap_or(self))
    }

    /// Records `bytes` more reserved from the memory pool by this task.
    #[inline]
    pub fn reserve(&self, bytes: usize) {
        self.memory.grow(bytes);
        for r in &self.memory_rollups {
            r.grow(bytes);
        }
        if let Some(phases) = self.phases.get() {
            phases.note_memory(self.memory.current());
        }
    }

    /// Records `bytes` returned to the memory pool by this task.
    #[inline]
    pub fn release(&self, bytes: usize) {
        self.memory.shrink(bytes);
        for r in &self.memory_rollups {
            r.shrink(bytes);
        }
    }

    /// Records when the task started (microseconds since the Unix epoch); the first call
    /// wins, so re-executing a partition keeps its first start.
    pub fn record_start(&self, epoch_micros: u64) {
        let _ = self.started_epoch_micros.compare_exchange(
            0,
            epoch_micros.max(1),
            Ordering::Relaxed,
            Ordering::Relaxed,
        );
    }

    /// Records when the task finished (microseconds since the Unix epoch); the first call
    /// wins, so dropping a stream after its end does not move the finish.
    pub fn record_finish(&self, epoch_micros: u64) {
        let _ = self.finished_epoch_micros.compare_exchange(
            0,
            epoch_micros.max(1),
            Ordering::Relaxed,
            Ordering::Relaxed,
        );
    }

    /// Counts one poll of the operator's output stream.
    #[inline]
    pub fn record_poll(&self) {
        self.polls.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts one batch of `rows` rows and `bytes` bytes produced by the operator.
    #[inline]
    pub fn record_batch(&self, rows: usize, bytes: usize) {
        self.batches.fetch_add(1, Ordering::Relaxed);
        self.rows.fetch_add(rows as u64, Ordering::Relaxed);
        self.bytes.fetch_add(bytes as u64, Ordering::Relaxed);
        if let Some(phases) = self.phases.get() {
            phases.record_output(rows);
        }
    }

    /// Adds `n` to the task's count of the tallied metric `tally` (0 marks it counted:
    /// an operator shows a metric its tasks counted, if only zeros).
    #[inline]
    pub fn tally(&self, tally: Tally, n: u64) {
        let counters = self.tallies.get_or_init(Box::default);
        counters
            .touched
            .fetch_or(1 << tally.slot(), Ordering::Relaxed);
        counters.values[tally.slot()].fetch_add(n, Ordering::Relaxed);
    }

    /// Counts `nanos` of CPU time its consumer spent between two of the operator's
    /// batches, on the thread that received the first.
    pub fn record_consumer_cpu(&self, nanos: u64) {
        self.consumer_cpu_nanos.fetch_add(nanos, Ordering::Relaxed);
    }

    /// CPU time its consumer spent between the operator's batches (ns), where that is
    /// measured.
    pub fn consumer_cpu_nanos(&self) -> u64 {
        self.consumer_cpu_nanos.load(Ordering::Relaxed)
    }

    /// Memory reserved by the operator in this task.
    pub fn memory(&self) -> &MemoryTracker {
        &self.memory
    }

    /// The task's I/O counters, if it touched storage (or was set up to).
    #[inline]
    pub fn io(&self) -> Option<&Arc<IoCounters>> {
        self.io.get()
    }

    /// The task's I/O counters, created with `init` on first use.
    pub fn io_or_init(&self, init: impl FnOnce() -> IoCounters) -> &Arc<IoCounters> {
        self.io.get_or_init(|| Arc::new(init()))
    }

    /// The task's spill counters, if it spilled.
    pub fn spill(&self) -> Option<&Arc<SpillCounters>> {
        self.spill.get()
    }

    /// The task's spill counters, created on first use.
    pub fn spill_or_init(&self) -> &Arc<SpillCounters> {
        self.spill.get_or_init(Arc::default)
    }

    /// The task's join phases, if it is a join's.
    #[inline]
    pub fn phases(&self) -> Option<&Arc<PhaseCounters>> {
        self.phases.get()
    }

    /// Makes the task a join's, whose build phase ends when it first reads its probe input
    /// (`sequential`) or never (inputs read together); the first call decides.
    pub fn phases_or_init(&self, sequential: bool) -> &Arc<PhaseCounters> {
        self.phases
            .get_or_init(|| Arc::new(PhaseCounters::new(sequential)))
    }

    /// The spill counters of the task and, for a join, of its current phase.
    pub fn spill_targets(&self) -> (Arc<SpillCounters>, Option<Arc<SpillCounters>>) {
        let phase = self.phases().map(|p| Arc::clone(p.spill_now()));
        (Arc::clone(self.spill_or_init()), phase)
    }

    /// Records that the task failed with `message`; the first failure is kept.
    pub fn record_error(&self, message: impl FnOnce() -> String) {
        if self.error.get().is_none() {
            let _ = self.error.set(message());
        }
    }

    /// Why the task failed, if it did.
    pub fn error(&self) -> Option<&str> {
        self.error.get().map(String::as_str)
    }

    /// Reads every counter.
    pub fn snapshot(&self) -> OperatorTaskSnapshot {
        let load = |a: &AtomicU64| a.load(Ordering::Relaxed);
        OperatorTaskSnapshot {
            wall_nanos: load(&self.wall_nanos),
            self_wall_nanos: load(&self.self_wall_nanos),
            cpu_nanos: load(&self.cpu_nanos),
            self_cpu_nanos: load(&self.self_cpu_nanos),
            polls: load(&self.polls),
            output_vectors: load(&self.batches),
            output_rows: load(&self.rows),
            output_bytes: load(&self.bytes),
            peak_memory_bytes: self.memory.peak(),
            memory_allocations: load(&self.allocations),
            started_epoch_micros: load(&self.started_epoch_micros),
            finished_epoch_micros: load(&self.finished_epoch_micros),
            tallies: self
                .tallies
                .get()
                .map_or_else(Tallies::default, |t| Tallies {
                    touched: load(&t.touched),
                    values: std::array::from_fn(|slot| load(&t.values[slot])),
                }),
        }
    }
}

/// The live counts of a task's tallied metrics, made on the first count.
#[derive(Debug)]
struct TallyCounters {
    /// A bit per slot counted at least once.
    touched: AtomicU64,
    values: [AtomicU64; TALLY_SLOTS],
}

impl Default for TallyCounters {
    fn default() -> Self {
        Self {
            touched: AtomicU64::new(0),
            values: std::array::from_fn(|_| AtomicU64::new(0)),
        }
    }
}

/// A task's counts of the catalog's tallied metrics ([`crate::catalog::TALLIED`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tallies {
    touched: u64,
    values: [u64; TALLY_SLOTS],
}

impl Default for Tallies {
    fn default() -> Self {
        Self {
            touched: 0,
            values: [0; TALLY_SLOTS],
        }
    }
}

impl Tallies {
    /// The task's count of `tally`; `None` if it never counted it.
    pub fn get(&self, tally: Tally) -> Option<u64> {
        (self.touched & (1 << tally.slot()) != 0).then(|| self.values[tally.slot()])
    }

    /// Sets the task's count of `tally` (as read back from elsewhere).
    pub fn set(&mut self, tally: Tally, value: u64) {
        self.touched |= 1 << tally.slot();
        self.values[tally.slot()] = value;
    }

    /// Each metric the task counted, with its count.
    pub fn counted(&self) -> impl Iterator<Item = (Tally, u64)> + '_ {
        Tally::all().filter_map(|t| self.get(t).map(|v| (t, v)))
    }
}

/// A point-in-time copy of [`OperatorTaskCounters`]. Durations are in nanoseconds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct OperatorTaskSnapshot {
    /// Wall time inside the operator's polls, including children polled inline (ns).
    pub wall_nanos: u64,
    /// Wall time of the operator's own code, children excluded (ns).
    pub self_wall_nanos: u64,
    /// CPU time inside the operator's polls, including children polled inline (ns).
    pub cpu_nanos: u64,
    /// CPU time of the operator's own code, children excluded wherever they ran (ns).
    pub self_cpu_nanos: u64,
    /// Polls of the output stream, including those that returned `Pending`.
    pub polls: u64,
    /// Batches produced; each is one poll that produced a batch.
    pub output_vectors: u64,
    /// Rows produced.
    pub output_rows: u64,
    /// Bytes of the batches produced (Arrow buffer memory).
    pub output_bytes: u64,
    /// Peak bytes reserved from the memory pool.
    pub peak_memory_bytes: u64,
    /// Heap allocations made while the operator's own code ran.
    pub memory_allocations: u64,
    /// When the task executed the operator, in microseconds since the Unix epoch; 0 if it
    /// did not.
    pub started_epoch_micros: u64,
    /// When the task's output ended or was dropped, in microseconds since the Unix epoch;
    /// 0 if neither happened yet.
    pub finished_epoch_micros: u64,
    /// Its counts of the catalog's tallied metrics.
    pub tallies: Tallies,
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn reservations_roll_up() {
        let operator = Arc::new(MemoryTracker::default());
        let a = OperatorTaskCounters::with_links(vec![Arc::clone(&operator)], None);
        let b = OperatorTaskCounters::with_links(vec![Arc::clone(&operator)], None);
        a.reserve(100);
        b.reserve(50);
        a.release(100);
        b.reserve(20);
        assert_eq!(a.snapshot().peak_memory_bytes, 100);
        assert_eq!(b.snapshot().peak_memory_bytes, 70);
        // the operator's peak is the peak of the sum (150), not the sum of peaks (170)
        assert_eq!(operator.peak(), 150);
        assert_eq!(operator.current(), 70);
    }

    #[test]
    fn spawn_target_defaults_to_self() {
        let spawned = Arc::new(OperatorTaskCounters::new());
        let plain = Arc::new(OperatorTaskCounters::new());
        let linked = Arc::new(OperatorTaskCounters::with_links(
            vec![],
            Some(Arc::clone(&spawned)),
        ));
        assert!(Arc::ptr_eq(&plain.spawn_target(), &plain));
        assert!(Arc::ptr_eq(&linked.spawn_target(), &spawned));
    }

    #[test]
    fn first_start_and_first_finish_win() {
        let c = OperatorTaskCounters::new();
        assert_eq!(c.snapshot().started_epoch_micros, 0);
        c.record_start(100);
        c.record_start(200);
        c.record_finish(300);
        c.record_finish(400);
        let s = c.snapshot();
        assert_eq!(
            (s.started_epoch_micros, s.finished_epoch_micros),
            (100, 300)
        );
    }

    #[test]
    fn batches_accumulate() {
        let c = OperatorTaskCounters::new();
        c.record_poll();
        c.record_batch(10, 100);
        c.record_poll();
        c.record_batch(5, 50);
        c.record_poll();
        let s = c.snapshot();
        assert_eq!(
            (s.polls, s.output_vectors, s.output_rows, s.output_bytes),
            (3, 2, 15, 150)
        );
    }

    #[test]
    fn tallies_count_what_was_counted_and_mark_zeros() {
        let fetch_wait = Tally::of(&crate::catalog::SHUFFLE_FETCH_WAIT_NANOS);
        let c = OperatorTaskCounters::new();
        assert_eq!(c.snapshot().tallies.get(fetch_wait), None);
        c.tally(fetch_wait, 0);
        assert_eq!(c.snapshot().tallies.get(fetch_wait), Some(0));
        c.tally(fetch_wait, 7);
        c.tally(fetch_wait, 5);
        let tallies = c.snapshot().tallies;
        assert_eq!(tallies.get(fetch_wait), Some(12));
        assert_eq!(tallies.counted().collect::<Vec<_>>(), [(fetch_wait, 12)]);
        let mut copy = Tallies::default();
        copy.set(fetch_wait, 12);
        assert_eq!(copy, tallies);
    }

    proptest! {
        #[test]
        fn memory_peak_is_the_high_water_mark(ops in proptest::collection::vec((any::<bool>(), 0_usize..1_000), 0..100)) {
            let tracker = MemoryTracker::default();
            let (mut current, mut peak) = (0_i64, 0_i64);
            for (grow, n) in ops {
                if grow || (n as i64) > current {
                    tracker.grow(n);
                    current += n as i64;
                } else {
                    tracker.shrink(n);
                    current -= n as i64;
                }
                peak = peak.max(current);
                prop_assert_eq!(tracker.current(), current as u64);
            }
            prop_assert_eq!(tracker.peak(), peak as u64);
        }
    }
}
