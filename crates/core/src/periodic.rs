//! Periodic counters, as Impala's periodic counter updater drives them: one clock ticks
//! every registered counter, which samples its source at that moment.
//!
//! - a [`RateCounter`] is the per-second rate of a growing counter since it was registered;
//! - a [`SamplingCounter`] is the time average of a gauge (e.g. reads in flight), readable
//!   at any moment while its source is live;
//! - a [`BucketingCounter`] counts the ticks at which the gauge sat at each value (the last
//!   bucket takes everything above it) and is finalised into percentages, rendered as
//!   Impala's info string `0:12.5% 1:50% …`;
//! - a [`TimeSeriesCounter`] keeps the gauge's values over time in bounded memory, halving
//!   its resolution when full.
//!
//! A [`PeriodicUpdater`] holds the registrations; [`PeriodicUpdater::tick`] samples them
//! all. [`PeriodicUpdater::spawn`] starts the thread that ticks every period with the
//! system clock; tests tick by hand with a manual clock. Unlike Impala, a counter stopped
//! before its first tick still takes one sample when it stops, so an operator shorter than
//! a period is not reported as idle.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError, Weak};
use std::time::Duration;

use crate::clock::{ClockSource, SystemClock};

/// The default period of the updater, as Impala's: 500 ms.
pub const DEFAULT_PERIOD: Duration = Duration::from_millis(500);

/// Something sampled at each tick: a gauge (a current value) or a growing total.
pub trait Source: Send + Sync {
    /// The value now.
    fn read(&self) -> i64;
}

impl Source for AtomicI64 {
    fn read(&self) -> i64 {
        self.load(Relaxed)
    }
}

impl<F: Fn() -> i64 + Send + Sync> Source for F {
    fn read(&self) -> i64 {
        self()
    }
}

fn duration_nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// What a registered counter does at a tick; `now_nanos` is the clock's time.
trait Periodic: Send + Sync {
    fn sample(&self, now_nanos: u64);
    fn stopped(&self) -> bool;
}

/// The per-second rate of a growing counter since registration.
pub struct RateCounter {
    source: Arc<dyn Source>,
    start_nanos: u64,
    first_value: i64,
    /// The rate, in units per second, times 1000 (kept exact in an integer).
    rate_milli: AtomicI64,
    samples: AtomicU64,
    stopped: AtomicBool,
}

impl RateCounter {
    /// Units per second between registration and the last sample.
    pub fn per_second(&self) -> f64 {
        self.rate_milli.load(Relaxed) as f64 / 1000.0
    }
}

impl Periodic for RateCounter {
    fn sample(&self, now_nanos: u64) {
        let elapsed = now_nanos.saturating_sub(self.start_nanos);
        let grown = self.source.read().saturating_sub(self.first_value);
        if elapsed > 0 {
            let rate = grown as f64 * 1e12 / elapsed as f64;
            self.rate_milli.store(rate.round() as i64, Relaxed);
        }
        self.samples.fetch_add(1, Relaxed);
    }
    fn stopped(&self) -> bool {
        self.stopped.load(Relaxed)
    }
}

/// The average of a gauge over the ticks since registration.
pub struct SamplingCounter {
    source: Arc<dyn Source>,
    total: AtomicI64,
    samples: AtomicU64,
    stopped: AtomicBool,
}

impl SamplingCounter {
    /// The average of the samples so far (0 before the first).
    pub fn average(&self) -> f64 {
        match self.samples.load(Relaxed) {
            0 => 0.0,
            n => self.total.load(Relaxed) as f64 / n as f64,
        }
    }
}

impl Periodic for SamplingCounter {
    fn sample(&self, _now_nanos: u64) {
        self.total.fetch_add(self.source.read(), Relaxed);
        self.samples.fetch_add(1, Relaxed);
    }
    fn stopped(&self) -> bool {
        self.stopped.load(Relaxed)
    }
}

/// How often a gauge sat at each value: bucket `i` counts the ticks where it was `i`
/// (negative values count as 0, values past the last bucket in the last).
pub struct BucketingCounter {
    source: Arc<dyn Source>,
    buckets: Vec<AtomicU64>,
    samples: AtomicU64,
    stopped: AtomicBool,
}

impl BucketingCounter {
    /// Ticks per bucket so far.
    pub fn counts(&self) -> Vec<u64> {
        self.buckets.iter().map(|b| b.load(Relaxed)).collect()
    }

    /// The share of ticks in each bucket, in percent (all 0 before the first tick).
    pub fn percentages(&self) -> Vec<f64> {
        bucket_percentages(&self.counts())
    }

    /// Impala's info string: `i:P%` per bucket, percentages with 4 significant digits.
    pub fn info_string(&self) -> String {
        bucket_info_string(&self.counts())
    }
}

/// The share of each bucket in `counts`, in percent (all 0 if every count is 0).
pub fn bucket_percentages(counts: &[u64]) -> Vec<f64> {
    bucket_shares(counts).collect()
}

/// The share of each bucket in `counts`, in percent (all 0 if every count is 0), one by one.
pub fn bucket_shares(counts: &[u64]) -> impl ExactSizeIterator<Item = f64> + '_ {
    // added as floats: counts shipped from elsewhere may add up past u64
    let total: f64 = counts.iter().map(|&c| c as f64).sum();
    counts.iter().map(move |&c| {
        if total == 0.0 {
            0.0
        } else {
            c as f64 * 100.0 / total
        }
    })
}

/// Bucket counts as Impala's info string: `i:P%` per bucket, percentages with 4
/// significant digits (`0:12.5% 1:50% 2:37.5%`). Counts of several counters add up before
/// rendering, so the string of an operator is that of its tasks together.
pub fn bucket_info_string(counts: &[u64]) -> String {
    let mut out = String::with_capacity(8 * counts.len());
    for (i, p) in bucket_shares(counts).enumerate() {
        if i > 0 {
            out.push(' ');
        }
        let _ = write!(out, "{i}:");
        write_significant(&mut out, p, 4);
        out.push('%');
    }
    out
}

/// Writes `value` to `out` with at most `digits` significant digits and no trailing zeros,
/// as C++'s `setprecision` prints it (`12.5`, `33.33`, `100`, `0`).
fn write_significant(out: &mut String, value: f64, digits: i32) {
    if value == 0.0 || !value.is_finite() {
        out.push('0');
        return;
    }
    let magnitude = value.abs().log10().floor() as i32 + 1;
    let decimals = (digits - magnitude).max(0) as usize;
    let start = out.len();
    let _ = write!(out, "{value:.decimals$}");
    if out[start..].contains('.') {
        let kept = out.trim_end_matches('0').trim_end_matches('.').len();
        out.truncate(kept);
    }
}

impl Periodic for BucketingCounter {
    fn sample(&self, _now_nanos: u64) {
        let last = self.buckets.len() - 1;
        let v = usize::try_from(self.source.read().max(0)).unwrap_or(usize::MAX);
        self.buckets[v.min(last)].fetch_add(1, Relaxed);
        self.samples.fetch_add(1, Relaxed);
    }
    fn stopped(&self) -> bool {
        self.stopped.load(Relaxed)
    }
}

/// A gauge's values over time, at most `capacity` of them: when full, every other value
/// is dropped and only every second tick is kept from then on.
pub struct TimeSeriesCounter {
    source: Arc<dyn Source>,
    capacity: usize,
    state: Mutex<Series>,
    samples: AtomicU64,
    stopped: AtomicBool,
}

struct Series {
    values: Vec<i64>,
    /// Ticks per kept value.
    stride: u64,
    /// Ticks since the last kept value.
    skipped: u64,
}

impl TimeSeriesCounter {
    /// The kept values, oldest first, and how many ticks apart they are.
    pub fn values(&self) -> (Vec<i64>, u64) {
        let s = lock(&self.state);
        (s.values.clone(), s.stride)
    }
}

impl Periodic for TimeSeriesCounter {
    fn sample(&self, _now_nanos: u64) {
        let value = self.source.read();
        self.samples.fetch_add(1, Relaxed);
        let mut s = lock(&self.state);
        s.skipped += 1;
        if s.skipped < s.stride {
            return;
        }
        s.skipped = 0;
        if s.values.len() == self.capacity {
            let kept: Vec<i64> = s.values.iter().copied().step_by(2).collect();
            s.values = kept;
            s.stride *= 2;
        }
        s.values.push(value);
    }
    fn stopped(&self) -> bool {
        self.stopped.load(Relaxed)
    }
}

/// A beat run at most once per interval on the updater's ticks: the first tick beats, then
/// each tick at least an interval after the last beat (so the interval is rounded up to
/// whole periods of the updater).
pub struct Heartbeat {
    interval_nanos: AtomicU64,
    /// The clock's time at the last beat; `u64::MAX` before the first.
    last_nanos: AtomicU64,
    beat: Box<dyn Fn() + Send + Sync>,
    samples: AtomicU64,
    stopped: AtomicBool,
}

impl Heartbeat {
    /// Sets the time between beats.
    pub fn set_interval(&self, interval: Duration) {
        self.interval_nanos.store(duration_nanos(interval), Relaxed);
    }

    /// The time between beats.
    pub fn interval(&self) -> Duration {
        Duration::from_nanos(self.interval_nanos.load(Relaxed))
    }
}

impl Periodic for Heartbeat {
    fn sample(&self, now_nanos: u64) {
        let last = self.last_nanos.load(Relaxed);
        let due =
            last == u64::MAX || now_nanos.saturating_sub(last) >= self.interval_nanos.load(Relaxed);
        if due {
            self.last_nanos.store(now_nanos, Relaxed);
            self.samples.fetch_add(1, Relaxed);
            (self.beat)();
        }
    }
    fn stopped(&self) -> bool {
        self.stopped.load(Relaxed)
    }
}

/// The registry a clock ticks. Counters are held weakly: one dropped by its owner stops
/// being sampled.
pub struct PeriodicUpdater {
    clock: Arc<dyn ClockSource + Send + Sync>,
    counters: Mutex<Vec<Weak<dyn Periodic>>>,
    period_nanos: AtomicU64,
    /// CPU time the updater's own thread spent ticking, if it has one.
    thread_cpu_nanos: AtomicU64,
}

impl std::fmt::Debug for PeriodicUpdater {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PeriodicUpdater")
            .field("counters", &lock(&self.counters).len())
            .finish()
    }
}

macro_rules! debug_counter {
    ($($t:ty),*) => {$(
        impl std::fmt::Debug for $t {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.debug_struct(stringify!($t))
                    .field("samples", &self.samples.load(Relaxed))
                    .finish_non_exhaustive()
            }
        }
    )*};
}
debug_counter!(
    RateCounter,
    SamplingCounter,
    BucketingCounter,
    TimeSeriesCounter,
    Heartbeat
);

impl PeriodicUpdater {
    /// An updater whose ticks read `clock` (a manual clock in tests).
    pub fn new(clock: Arc<dyn ClockSource + Send + Sync>) -> Arc<PeriodicUpdater> {
        Arc::new(PeriodicUpdater {
            clock,
            counters: Mutex::new(Vec::new()),
            period_nanos: AtomicU64::new(duration_nanos(DEFAULT_PERIOD)),
            thread_cpu_nanos: AtomicU64::new(0),
        })
    }

    /// An updater on the system clock, ticked every `period` (changed with
    /// [`PeriodicUpdater::set_period`]) by a thread of its own until the updater is dropped.
    ///
    /// # Errors
    /// If the thread cannot be started.
    pub fn spawn(period: Duration) -> std::io::Result<Arc<PeriodicUpdater>> {
        let updater = PeriodicUpdater::new(Arc::new(SystemClock));
        updater.set_period(period);
        let weak = Arc::downgrade(&updater);
        std::thread::Builder::new()
            .name("qprof-periodic".to_string())
            .spawn(move || {
                loop {
                    let Some(period) = weak.upgrade().map(|u| u.period()) else {
                        return;
                    };
                    std::thread::sleep(period);
                    match weak.upgrade() {
                        Some(updater) => {
                            updater.tick();
                            updater
                                .thread_cpu_nanos
                                .store(crate::clock::thread_cpu_nanos(), Relaxed);
                        }
                        None => return,
                    }
                }
            })?;
        Ok(updater)
    }

    /// The process's updater: one thread on the system clock, started on first use with
    /// the [`DEFAULT_PERIOD`]. Every counter of a running query registers here, so one
    /// clock drives them all. `None` if its thread could not be started.
    pub fn process() -> Option<&'static Arc<PeriodicUpdater>> {
        static PROCESS: OnceLock<Option<Arc<PeriodicUpdater>>> = OnceLock::new();
        PROCESS
            .get_or_init(|| PeriodicUpdater::spawn(DEFAULT_PERIOD).ok())
            .as_ref()
    }

    /// The time between ticks of the updater's thread.
    pub fn period(&self) -> Duration {
        Duration::from_nanos(self.period_nanos.load(Relaxed))
    }

    /// Sets the time between ticks of the updater's thread (at least 1 ms); it applies from
    /// the tick after the next.
    pub fn set_period(&self, period: Duration) {
        let nanos = duration_nanos(period).max(1_000_000);
        self.period_nanos.store(nanos, Relaxed);
    }

    /// CPU time the updater's own thread has spent so far (0 for an updater ticked by
    /// hand), as of its last tick.
    pub fn thread_cpu_nanos(&self) -> u64 {
        self.thread_cpu_nanos.load(Relaxed)
    }

    /// The updater's clock now, in nanoseconds: the time base of its counters.
    pub fn now_nanos(&self) -> u64 {
        self.clock.ticks_to_nanos(self.clock.now_ticks())
    }

    fn add<C: Periodic + 'static>(&self, counter: Arc<C>) -> Arc<C> {
        let weak: Weak<dyn Periodic> = Arc::downgrade(&counter) as Weak<dyn Periodic>;
        lock(&self.counters).push(weak);
        counter
    }

    /// A rate counter of `source`, starting now.
    pub fn rate(&self, source: Arc<dyn Source>) -> Arc<RateCounter> {
        let first_value = source.read();
        self.add(Arc::new(RateCounter {
            source,
            start_nanos: self.now_nanos(),
            first_value,
            rate_milli: AtomicI64::new(0),
            samples: AtomicU64::new(0),
            stopped: AtomicBool::new(false),
        }))
    }

    /// A sampling counter (time average) of the gauge `source`.
    pub fn sampling(&self, source: Arc<dyn Source>) -> Arc<SamplingCounter> {
        self.add(Arc::new(SamplingCounter {
            source,
            total: AtomicI64::new(0),
            samples: AtomicU64::new(0),
            stopped: AtomicBool::new(false),
        }))
    }

    /// A bucketing counter of the gauge `source` with `buckets` buckets (at least 1).
    pub fn bucketing(&self, source: Arc<dyn Source>, buckets: usize) -> Arc<BucketingCounter> {
        self.add(Arc::new(BucketingCounter {
            source,
            buckets: (0..buckets.max(1)).map(|_| AtomicU64::new(0)).collect(),
            samples: AtomicU64::new(0),
            stopped: AtomicBool::new(false),
        }))
    }

    /// A time series of the gauge `source`, keeping at most `capacity` values (at least 2).
    pub fn time_series(&self, source: Arc<dyn Source>, capacity: usize) -> Arc<TimeSeriesCounter> {
        self.add(Arc::new(TimeSeriesCounter {
            source,
            capacity: capacity.max(2),
            state: Mutex::new(Series {
                values: Vec::new(),
                stride: 1,
                skipped: 0,
            }),
            samples: AtomicU64::new(0),
            stopped: AtomicBool::new(false),
        }))
    }

    /// A heartbeat running `beat` on this updater's ticks, at most once per `interval`.
    pub fn heartbeat(
        &self,
        interval: Duration,
        beat: impl Fn() + Send + Sync + 'static,
    ) -> Arc<Heartbeat> {
        self.add(Arc::new(Heartbeat {
            interval_nanos: AtomicU64::new(duration_nanos(interval)),
            last_nanos: AtomicU64::new(u64::MAX),
            beat: Box::new(beat),
            samples: AtomicU64::new(0),
            stopped: AtomicBool::new(false),
        }))
    }

    /// Samples every live, running counter now.
    pub fn tick(&self) {
        let now = self.now_nanos();
        let live: Vec<Arc<dyn Periodic>> = {
            let mut counters = lock(&self.counters);
            counters.retain(|w| w.upgrade().is_some_and(|c| !c.stopped()));
            counters.iter().filter_map(Weak::upgrade).collect()
        };
        for counter in live {
            counter.sample(now);
        }
    }

    /// Stops `counter`: no later tick samples it, and if no tick sampled it yet it takes
    /// one sample now, so short-lived sources are not reported as idle (a rate takes its
    /// last sample now in any case).
    pub fn stop<C: Stoppable + ?Sized>(&self, counter: &C) {
        counter.stop_at(self.now_nanos());
    }

    /// Counters currently registered and running.
    pub fn len(&self) -> usize {
        let counters = lock(&self.counters);
        counters
            .iter()
            .filter(|w| w.upgrade().is_some_and(|c| !c.stopped()))
            .count()
    }

    /// Whether no counter is registered and running.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A counter an updater can stop.
pub trait Stoppable {
    /// Stops the counter at `now_nanos`, sampling it once if it never was (a rate, which
    /// covers the counter's whole life, is sampled then in any case).
    fn stop_at(&self, now_nanos: u64);
}

macro_rules! stoppable {
    ($($t:ty),*) => {$(
        impl Stoppable for $t {
            fn stop_at(&self, now_nanos: u64) {
                if !self.stopped.swap(true, Relaxed) && self.samples.load(Relaxed) == 0 {
                    Periodic::sample(self, now_nanos);
                }
            }
        }
    )*};
}
stoppable!(SamplingCounter, BucketingCounter, TimeSeriesCounter);

impl Stoppable for RateCounter {
    /// Stops the counter at `now_nanos` with a last sample: its rate is then the counter's
    /// growth over its whole life, however few ticks came while it grew.
    fn stop_at(&self, now_nanos: u64) {
        if !self.stopped.swap(true, Relaxed) {
            Periodic::sample(self, now_nanos);
        }
    }
}

macro_rules! sample_count {
    ($($t:ty),*) => {$(
        impl $t {
            /// Ticks that sampled the counter so far.
            pub fn samples(&self) -> u64 {
                self.samples.load(Relaxed)
            }
        }
    )*};
}
sample_count!(
    RateCounter,
    SamplingCounter,
    BucketingCounter,
    TimeSeriesCounter,
    Heartbeat
);

impl Stoppable for Heartbeat {
    fn stop_at(&self, _now_nanos: u64) {
        self.stopped.store(true, Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::ManualClock;
    use proptest::prelude::*;

    #[test]
    fn a_heartbeat_beats_once_per_interval_of_ticks() {
        let (clock, updater) = updater();
        let beats = Arc::new(AtomicU64::new(0));
        let counted = Arc::clone(&beats);
        let heartbeat = updater.heartbeat(Duration::from_millis(1_000), move || {
            counted.fetch_add(1, Relaxed);
        });
        // ticks every 500 ms for 3 s: beats at 0, 1 s, 2 s and 3 s
        for _ in 0..=6 {
            updater.tick();
            clock.advance(500_000_000, 0);
        }
        assert_eq!(beats.load(Relaxed), 4);
        assert_eq!(heartbeat.samples(), 4);
        updater.stop(heartbeat.as_ref());
        updater.tick();
        assert_eq!(beats.load(Relaxed), 4);
    }

    fn updater() -> (Arc<ManualClock>, Arc<PeriodicUpdater>) {
        let clock = Arc::new(ManualClock::new());
        let updater =
            PeriodicUpdater::new(Arc::clone(&clock) as Arc<dyn ClockSource + Send + Sync>);
        (clock, updater)
    }

    fn gauge(v: i64) -> Arc<AtomicI64> {
        Arc::new(AtomicI64::new(v))
    }

    #[test]
    fn a_sampling_counter_is_the_average_of_its_ticks_and_readable_between_them() {
        let (clock, updater) = updater();
        let g = gauge(0);
        let avg = updater.sampling(g.clone());
        for v in [2, 4, 0, 2] {
            g.store(v, Relaxed);
            clock.advance(500_000_000, 0);
            updater.tick();
        }
        assert_eq!(avg.average(), 2.0);
        g.store(8, Relaxed);
        updater.tick();
        assert_eq!(avg.average(), 16.0 / 5.0);
        updater.stop(avg.as_ref());
        updater.tick();
        assert_eq!(
            avg.average(),
            16.0 / 5.0,
            "a stopped counter takes no more samples"
        );
        assert!(updater.is_empty());
    }

    #[test]
    fn a_counter_stopped_before_its_first_tick_takes_one_sample() {
        let (_clock, updater) = updater();
        let g = gauge(3);
        let avg = updater.sampling(g.clone());
        let buckets = updater.bucketing(g.clone(), 4);
        updater.stop(avg.as_ref());
        updater.stop(buckets.as_ref());
        assert_eq!(avg.average(), 3.0);
        assert_eq!(buckets.info_string(), "0:0% 1:0% 2:0% 3:100%");
        // stopping twice takes nothing more
        g.store(0, Relaxed);
        updater.stop(avg.as_ref());
        assert_eq!(avg.average(), 3.0);
    }

    #[test]
    fn buckets_count_ticks_at_each_value_and_render_as_impala_does() {
        let (_clock, updater) = updater();
        let g = gauge(0);
        let b = updater.bucketing(g.clone(), 3);
        for v in [0, 1, 1, 5, -1, 2, 1, 1] {
            g.store(v, Relaxed);
            updater.tick();
        }
        // 0: {0, -1}, 1: four times, 2: {5 (clamped), 2}
        assert_eq!(b.counts(), [2, 4, 2]);
        assert_eq!(b.info_string(), "0:25% 1:50% 2:25%");
        g.store(0, Relaxed);
        updater.tick();
        assert_eq!(b.info_string(), "0:33.33% 1:44.44% 2:22.22%");
    }

    #[test]
    fn a_rate_is_growth_per_second_since_registration() {
        let (clock, updater) = updater();
        let bytes = gauge(1_000);
        let rate = updater.rate(bytes.clone());
        clock.advance(500_000_000, 0);
        bytes.store(1_000 + 4_096, Relaxed);
        updater.tick();
        assert_eq!(rate.per_second(), 8_192.0);
        clock.advance(1_500_000_000, 0);
        bytes.store(1_000 + 10_000, Relaxed);
        updater.tick();
        assert_eq!(rate.per_second(), 5_000.0);
    }

    #[test]
    fn a_rate_ticked_before_its_counter_grew_is_read_again_when_it_stops() {
        let (clock, updater) = updater();
        let bytes = gauge(0);
        let rate = updater.rate(bytes.clone());
        clock.advance(100_000_000, 0);
        updater.tick();
        assert_eq!(rate.per_second(), 0.0);
        clock.advance(400_000_000, 0);
        bytes.store(1_000, Relaxed);
        updater.stop(rate.as_ref());
        assert_eq!(rate.per_second(), 2_000.0);
        // stopped: no later growth or tick moves it
        clock.advance(500_000_000, 0);
        bytes.store(9_000, Relaxed);
        updater.tick();
        updater.stop(rate.as_ref());
        assert_eq!(rate.per_second(), 2_000.0);
    }

    #[test]
    fn a_time_series_stays_bounded_by_halving_its_resolution() {
        let (_clock, updater) = updater();
        let g = gauge(0);
        let series = updater.time_series(g.clone(), 4);
        for v in 0..10 {
            g.store(v, Relaxed);
            updater.tick();
        }
        let (values, stride) = series.values();
        assert!(values.len() <= 4, "{values:?}");
        assert_eq!(stride, 4);
        // kept values are evenly spaced and in order, starting at the first tick
        assert_eq!(values, [0, 4, 8]);
    }

    #[test]
    fn a_counter_dropped_by_its_owner_is_no_longer_ticked() {
        let (_clock, updater) = updater();
        let avg = updater.sampling(Arc::new(|| 1));
        assert_eq!(updater.len(), 1);
        drop(avg);
        updater.tick();
        assert!(updater.is_empty());
    }

    #[test]
    fn the_spawned_updater_ticks_on_its_own() {
        let updater = PeriodicUpdater::spawn(Duration::from_millis(1)).unwrap();
        let avg = updater.sampling(Arc::new(|| 7));
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while avg.samples() < 3 && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(2));
        }
        assert!(avg.samples() >= 3);
        assert_eq!(avg.average(), 7.0);
    }

    fn significant(value: f64, digits: i32) -> String {
        let mut out = String::from("x");
        write_significant(&mut out, value, digits);
        out.split_off(1)
    }

    #[test]
    fn significant_digits_match_setprecision_4() {
        for (v, s) in [
            (12.5, "12.5"),
            (100.0, "100"),
            (33.333_333, "33.33"),
            (0.0, "0"),
            (6.25, "6.25"),
            (0.123_456, "0.1235"),
        ] {
            assert_eq!(significant(v, 4), s, "{v}");
        }
    }

    proptest! {
        #[test]
        fn bucket_percentages_sum_to_100(values in proptest::collection::vec(-3i64..20, 1..200), n in 1usize..10) {
            let (_clock, updater) = updater();
            let g = gauge(0);
            let b = updater.bucketing(g.clone(), n);
            for v in &values {
                g.store(*v, Relaxed);
                updater.tick();
            }
            let sum: f64 = b.percentages().iter().sum();
            prop_assert!((sum - 100.0).abs() < 1e-9, "{sum}");
            prop_assert_eq!(b.counts().iter().sum::<u64>(), values.len() as u64);
        }

        #[test]
        fn an_average_lies_within_the_gauges_range(values in proptest::collection::vec(0i64..64, 1..100)) {
            let (_clock, updater) = updater();
            let g = gauge(0);
            let avg = updater.sampling(g.clone());
            for v in &values {
                g.store(*v, Relaxed);
                updater.tick();
            }
            let (lo, hi) = (*values.iter().min().unwrap(), *values.iter().max().unwrap());
            prop_assert!(avg.average() >= lo as f64 && avg.average() <= hi as f64);
        }
    }
}
