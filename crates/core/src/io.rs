//! The I/O of one operator task: requests to storage with their bytes and time, the time
//! the task's polls sat blocked on I/O, and the reads it had in flight over time.
//!
//! Reads in flight are the gauge Impala samples as a scan's read-thread concurrency. Here
//! the gauge keeps its exact integral over time, and each periodic tick reads the gauge's
//! *average since the previous tick* (see [`InFlight`]): the [`SamplingCounter`] of those
//! readings is the task's average read concurrency, and the [`BucketingCounter`] of them,
//! rounded, is how much of the time the task had 0, 1, 2, … reads in flight. The final
//! sample at stop covers the time since the last tick, so a scan shorter than a period
//! still has its concurrency.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use crate::metric::saturating_i64;
use crate::periodic::{BucketingCounter, PeriodicUpdater, RateCounter, SamplingCounter, Source};

/// Buckets of the read-concurrency histogram: 0, 1, 2, and 3 or more reads in flight.
pub const CONCURRENCY_BUCKETS: usize = 4;

/// Where the bytes of a read came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StorageTier {
    /// The store itself (a file system, an object store).
    Storage,
    /// A cache on local disk in front of the store.
    LocalDisk,
    /// A cache in memory in front of the store.
    Ram,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A gauge of reads in flight with its exact time integral.
#[derive(Debug)]
pub struct InFlight {
    updater: Arc<PeriodicUpdater>,
    state: Mutex<InFlightState>,
}

#[derive(Debug, Default)]
struct InFlightState {
    current: i64,
    /// Σ value × nanoseconds since creation.
    integral: u128,
    last_change: u64,
}

impl InFlight {
    fn new(updater: &Arc<PeriodicUpdater>) -> InFlight {
        InFlight {
            state: Mutex::new(InFlightState {
                last_change: updater.now_nanos(),
                ..InFlightState::default()
            }),
            updater: Arc::clone(updater),
        }
    }

    fn add(&self, delta: i64) {
        let now = self.updater.now_nanos();
        let mut s = lock(&self.state);
        s.integral = integral_at(&s, now);
        s.current += delta;
        s.last_change = now;
    }

    /// Reads in flight now.
    pub fn current(&self) -> i64 {
        lock(&self.state).current
    }

    /// The integral up to `now` and the time it was read at.
    fn integral(&self) -> (u128, u64) {
        let now = self.updater.now_nanos();
        (integral_at(&lock(&self.state), now), now)
    }
}

fn integral_at(s: &InFlightState, now: u64) -> u128 {
    s.integral + u128::from(now.saturating_sub(s.last_change)) * s.current.max(0) as u128
}

/// A reading of an [`InFlight`] gauge: its average since the previous reading, times
/// `scale`, rounded to the nearest integer (the value now when no time passed).
struct IntervalAverage {
    gauge: Arc<InFlight>,
    scale: u128,
    previous: Mutex<(u128, u64)>,
}

impl IntervalAverage {
    fn new(gauge: &Arc<InFlight>, scale: u128) -> IntervalAverage {
        IntervalAverage {
            previous: Mutex::new(gauge.integral()),
            gauge: Arc::clone(gauge),
            scale,
        }
    }
}

impl Source for IntervalAverage {
    fn read(&self) -> i64 {
        let (integral, now) = self.gauge.integral();
        let mut previous = lock(&self.previous);
        let (before, then) = *previous;
        *previous = (integral, now);
        let elapsed = u128::from(now.saturating_sub(then));
        if elapsed == 0 {
            return self
                .gauge
                .current()
                .max(0)
                .saturating_mul(self.scale as i64);
        }
        let scaled = (integral - before) * self.scale;
        saturating_i64((scaled + elapsed / 2) / elapsed)
    }
}

/// The I/O counters of one operator task. Created by the I/O layer the first time the
/// task touches storage (or when a scan or sink task starts); its periodic counters run
/// on `updater` until [`IoCounters::stop`].
pub struct IoCounters {
    updater: Arc<PeriodicUpdater>,
    read_requests: AtomicU64,
    read_bytes: Arc<AtomicU64>,
    read_nanos: AtomicU64,
    tier_bytes: [AtomicU64; 3],
    write_requests: AtomicU64,
    written_bytes: AtomicU64,
    write_nanos: AtomicU64,
    written_files: AtomicU64,
    metadata_requests: AtomicU64,
    io_wait_nanos: AtomicU64,
    /// When the task's last poll returned pending with reads in flight (updater clock, +1
    /// so that 0 means "not waiting").
    waiting_since: AtomicU64,
    in_flight: Arc<InFlight>,
    concurrency: Arc<SamplingCounter>,
    concurrency_buckets: Arc<BucketingCounter>,
    throughput: Arc<RateCounter>,
}

impl std::fmt::Debug for IoCounters {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IoCounters")
            .field("snapshot", &self.snapshot())
            .finish()
    }
}

/// Thousandths of a read in flight per sampling-counter unit.
const MILLI: u128 = 1000;

impl IoCounters {
    /// Counters at zero, their concurrency and throughput counters registered on `updater`.
    pub fn new(updater: &Arc<PeriodicUpdater>) -> IoCounters {
        let in_flight = Arc::new(InFlight::new(updater));
        let read_bytes = Arc::new(AtomicU64::new(0));
        let bytes_source = Arc::clone(&read_bytes);
        IoCounters {
            concurrency: updater.sampling(Arc::new(IntervalAverage::new(&in_flight, MILLI))),
            concurrency_buckets: updater.bucketing(
                Arc::new(IntervalAverage::new(&in_flight, 1)),
                CONCURRENCY_BUCKETS,
            ),
            throughput: updater.rate(Arc::new(move || saturating_i64(bytes_source.load(Relaxed)))),
            updater: Arc::clone(updater),
            read_requests: AtomicU64::new(0),
            read_bytes,
            read_nanos: AtomicU64::new(0),
            tier_bytes: Default::default(),
            write_requests: AtomicU64::new(0),
            written_bytes: AtomicU64::new(0),
            write_nanos: AtomicU64::new(0),
            written_files: AtomicU64::new(0),
            metadata_requests: AtomicU64::new(0),
            io_wait_nanos: AtomicU64::new(0),
            waiting_since: AtomicU64::new(0),
            in_flight,
        }
    }

    /// The updater's clock now, in nanoseconds: the time base of every duration here.
    pub fn now_nanos(&self) -> u64 {
        self.updater.now_nanos()
    }

    /// Starts a read request; it is in flight until the returned guard is finished or
    /// dropped (a failed or abandoned read counts its time, with no bytes).
    pub fn begin_read(self: &Arc<Self>) -> ReadInFlight {
        self.read_requests.fetch_add(1, Relaxed);
        self.in_flight.add(1);
        ReadInFlight {
            io: Arc::clone(self),
            started: self.now_nanos(),
            done: false,
        }
    }

    /// Counts a write request of `bytes` that took `nanos`.
    pub fn record_write(&self, bytes: u64, nanos: u64) {
        self.write_requests.fetch_add(1, Relaxed);
        self.written_bytes.fetch_add(bytes, Relaxed);
        self.write_nanos.fetch_add(nanos, Relaxed);
    }

    /// Counts a file (an object) completely written.
    pub fn record_file_written(&self) {
        self.written_files.fetch_add(1, Relaxed);
    }

    /// Counts a request that moves no data (head, list, delete, copy, rename).
    pub fn record_metadata_request(&self) {
        self.metadata_requests.fetch_add(1, Relaxed);
    }

    /// The task's poll started at `now`: the wait that began when its last poll returned
    /// pending on I/O ends.
    pub fn poll_started(&self, now: u64) {
        let since = self.waiting_since.swap(0, Relaxed);
        if since > 0 {
            self.io_wait_nanos
                .fetch_add(now.saturating_sub(since - 1), Relaxed);
        }
    }

    /// The task's poll returned pending at `now`: if reads of the task are in flight, the
    /// task waits for I/O until its next poll.
    pub fn poll_pending(&self, now: u64) {
        if self.in_flight.current() > 0 {
            self.waiting_since.store(now.saturating_add(1), Relaxed);
        }
    }

    /// Stops the periodic counters (at the task's end); they keep their values.
    pub fn stop(&self) {
        if self.waiting_since.load(Relaxed) > 0 {
            self.poll_started(self.now_nanos());
        }
        self.updater.stop(self.concurrency.as_ref());
        self.updater.stop(self.concurrency_buckets.as_ref());
        self.updater.stop(self.throughput.as_ref());
    }

    /// Reads every counter.
    pub fn snapshot(&self) -> IoSnapshot {
        let load = |a: &AtomicU64| a.load(Relaxed);
        IoSnapshot {
            read_requests: load(&self.read_requests),
            read_bytes: load(&self.read_bytes),
            read_nanos: load(&self.read_nanos),
            storage_read_bytes: load(&self.tier_bytes[0]),
            local_read_bytes: load(&self.tier_bytes[1]),
            ram_read_bytes: load(&self.tier_bytes[2]),
            write_requests: load(&self.write_requests),
            written_bytes: load(&self.written_bytes),
            write_nanos: load(&self.write_nanos),
            written_files: load(&self.written_files),
            metadata_requests: load(&self.metadata_requests),
            io_wait_nanos: load(&self.io_wait_nanos),
            average_read_concurrency: self.concurrency.average() / MILLI as f64,
            concurrency_samples: self.concurrency.samples(),
            concurrency_buckets: self.concurrency_buckets.counts(),
            concurrency_info: self.concurrency_buckets.info_string(),
            read_bytes_per_second: self.throughput.per_second(),
        }
    }
}

/// A read request in flight; see [`IoCounters::begin_read`].
#[derive(Debug)]
pub struct ReadInFlight {
    io: Arc<IoCounters>,
    started: u64,
    done: bool,
}

impl ReadInFlight {
    /// Counts `bytes` more delivered by the read from `tier` (a streamed read delivers
    /// several times).
    pub fn delivered(&self, bytes: u64, tier: StorageTier) {
        self.io.read_bytes.fetch_add(bytes, Relaxed);
        let slot = match tier {
            StorageTier::Storage => 0,
            StorageTier::LocalDisk => 1,
            StorageTier::Ram => 2,
        };
        self.io.tier_bytes[slot].fetch_add(bytes, Relaxed);
    }

    /// Ends the read: it is no longer in flight, and its time is counted.
    pub fn finish(mut self) {
        self.end();
    }

    fn end(&mut self) {
        if std::mem::replace(&mut self.done, true) {
            return;
        }
        let now = self.io.now_nanos();
        self.io
            .read_nanos
            .fetch_add(now.saturating_sub(self.started), Relaxed);
        self.io.in_flight.add(-1);
    }
}

impl Drop for ReadInFlight {
    fn drop(&mut self) {
        self.end();
    }
}

/// A point-in-time copy of [`IoCounters`]. Durations are in nanoseconds.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct IoSnapshot {
    /// Read requests (a request for several ranges is one).
    pub read_requests: u64,
    /// Bytes the reads delivered.
    pub read_bytes: u64,
    /// Time reads were in flight, summed over reads (overlapping reads add up).
    pub read_nanos: u64,
    /// Bytes read from the store itself.
    pub storage_read_bytes: u64,
    /// Bytes read from a local disk cache.
    pub local_read_bytes: u64,
    /// Bytes read from a memory cache.
    pub ram_read_bytes: u64,
    /// Write requests (a whole object, or one part of a multipart upload).
    pub write_requests: u64,
    /// Bytes the writes sent.
    pub written_bytes: u64,
    /// Time of the write requests, summed.
    pub write_nanos: u64,
    /// Objects (files) completely written.
    pub written_files: u64,
    /// Requests that move no data: head, list, delete, copy, rename.
    pub metadata_requests: u64,
    /// Time between a poll that returned pending with reads in flight and the next poll.
    pub io_wait_nanos: u64,
    /// The time average of reads in flight, over the ticks so far.
    pub average_read_concurrency: f64,
    /// Ticks (and final samples) behind the concurrency figures.
    pub concurrency_samples: u64,
    /// Ticks at 0, 1, 2 and 3+ reads in flight.
    pub concurrency_buckets: Vec<u64>,
    /// The buckets in Impala's form: `0:25% 1:75% 2:0% 3:0%`.
    pub concurrency_info: String,
    /// Bytes read per second, between the counters' start and their last sample.
    pub read_bytes_per_second: f64,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::{ClockSource, ManualClock};
    use proptest::prelude::*;

    fn setup() -> (Arc<ManualClock>, Arc<PeriodicUpdater>, Arc<IoCounters>) {
        let clock = Arc::new(ManualClock::new());
        let updater =
            PeriodicUpdater::new(Arc::clone(&clock) as Arc<dyn ClockSource + Send + Sync>);
        let io = Arc::new(IoCounters::new(&updater));
        (clock, updater, io)
    }

    const MS: u64 = 1_000_000;

    #[test]
    fn concurrency_is_the_time_average_of_reads_in_flight() {
        let (clock, updater, io) = setup();
        // first period: one read for all of it, a second for half of it -> 1.5
        let a = io.begin_read();
        let b = io.begin_read();
        clock.advance(250 * MS, 0);
        b.finish();
        clock.advance(250 * MS, 0);
        updater.tick();
        // second period: the one read only -> 1
        clock.advance(500 * MS, 0);
        updater.tick();
        a.finish();
        // third period: idle -> 0
        clock.advance(500 * MS, 0);
        updater.tick();
        let s = io.snapshot();
        assert!(
            (s.average_read_concurrency - 2.5 / 3.0).abs() < 1e-9,
            "{s:?}"
        );
        // 1.5 rounds to 2
        assert_eq!(s.concurrency_buckets, vec![1, 1, 1, 0]);
        assert_eq!(s.concurrency_info, "0:33.33% 1:33.33% 2:33.33% 3:0%");
        assert_eq!((s.read_requests, s.read_nanos), (2, 1250 * MS));
    }

    #[test]
    fn a_task_shorter_than_a_period_has_its_concurrency_at_stop() {
        let (clock, _updater, io) = setup();
        clock.advance(10 * MS, 0);
        let read = io.begin_read();
        clock.advance(30 * MS, 0);
        read.finish();
        io.stop();
        let s = io.snapshot();
        // in flight for 30 of the 40 ms since the counters started
        assert!((s.average_read_concurrency - 0.75).abs() < 1e-9, "{s:?}");
        assert_eq!(s.concurrency_samples, 1);
        assert_eq!(s.concurrency_info, "0:0% 1:100% 2:0% 3:0%");
    }

    #[test]
    fn io_wait_runs_from_a_pending_poll_with_reads_in_flight_to_the_next_poll() {
        let (clock, _updater, io) = setup();
        // pending without reads in flight is not I/O wait
        io.poll_pending(clock.now_ticks());
        clock.advance(7 * MS, 0);
        io.poll_started(clock.now_ticks());
        let read = io.begin_read();
        io.poll_pending(clock.now_ticks());
        clock.advance(5 * MS, 0);
        read.delivered(100, StorageTier::Storage);
        read.delivered(20, StorageTier::Ram);
        read.finish();
        io.poll_started(clock.now_ticks());
        // a wait still open when the task stops ends there
        let _other = io.begin_read();
        io.poll_pending(clock.now_ticks());
        clock.advance(2 * MS, 0);
        io.stop();
        let s = io.snapshot();
        assert_eq!(s.io_wait_nanos, 7 * MS);
        assert_eq!(
            (s.read_bytes, s.storage_read_bytes, s.ram_read_bytes),
            (120, 100, 20)
        );
    }

    #[test]
    fn a_dropped_read_is_no_longer_in_flight_and_writes_count() {
        let (clock, _updater, io) = setup();
        {
            let _read = io.begin_read();
            clock.advance(MS, 0);
        }
        assert_eq!(io.in_flight.current(), 0);
        io.record_write(10, 3);
        io.record_write(5, 4);
        io.record_file_written();
        io.record_metadata_request();
        let s = io.snapshot();
        assert_eq!(
            (
                s.read_requests,
                s.read_nanos,
                s.write_requests,
                s.written_bytes,
                s.write_nanos,
                s.written_files,
                s.metadata_requests
            ),
            (1, MS, 2, 15, 7, 1, 1)
        );
    }

    proptest! {
        /// Whatever the reads, the average concurrency lies between 0 and the most reads
        /// ever in flight at once, and the bucket shares add up to 100 %.
        #[test]
        fn concurrency_stays_within_the_gauge_and_buckets_sum_to_100(
            steps in proptest::collection::vec((0_u8..3, 1_u64..400), 1..60)
        ) {
            let (clock, updater, io) = setup();
            let mut open = Vec::new();
            let mut most = 0_usize;
            for (action, ms) in steps {
                match action {
                    0 => open.push(io.begin_read()),
                    1 => { open.pop(); }
                    _ => updater.tick(),
                }
                most = most.max(open.len());
                clock.advance(ms * MS, 0);
            }
            io.stop();
            let s = io.snapshot();
            prop_assert!(s.average_read_concurrency >= 0.0);
            prop_assert!(s.average_read_concurrency <= most as f64 + 1e-9);
            let counts: u64 = s.concurrency_buckets.iter().sum();
            prop_assert_eq!(counts, s.concurrency_samples);
            let total: f64 = s
                .concurrency_info
                .split(' ')
                .map(|b| b.split(':').nth(1).unwrap().trim_end_matches('%').parse::<f64>().unwrap())
                .sum();
            prop_assert!((total - 100.0).abs() < 0.05, "{}", s.concurrency_info);
        }
    }
}
