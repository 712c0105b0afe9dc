//! Function call sites: what each call of a function in a plan measured, with one adaptive
//! sampler per writer (thread, or operator task).
//!
//! Each thread that calls a site gets a shard with its own sampler, so the hot path takes
//! no lock and executes no atomic read-modify-write: a vector the sampler does not want
//! measured costs a thread-local lookup and three relaxed stores. A shard remembers the
//! operator task whose frame was open at its thread's first call ([`crate::attribution`]),
//! which places the site's time under that operator. An aggregate's accumulators, which
//! one operator task drives from whichever thread runs it, share a shard of that task
//! instead ([`FunctionSite::calls_of_current_task`]).

use std::cell::RefCell;
use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError};
use std::thread::ThreadId;

use crate::attribution;
use crate::clock::{ClockSource, SystemClock};
use crate::counters::OperatorTaskCounters;
use crate::profile::FunctionProfile;
use crate::sampling::{
    AdaptiveSampler, CALIBRATION_VECTORS, FunctionStats, Measure, Measurement, TimerCosts,
    TrackingMode, median,
};
use crate::stacks::CallSiteFrame;

/// The costs of this machine's timers, measured once per process, each including the
/// bookkeeping of a measured vector (finding the shard, recording the sample), measured on
/// the real call path.
pub fn timer_costs() -> TimerCosts {
    static COSTS: OnceLock<TimerCosts> = OnceLock::new();
    *COSTS.get_or_init(|| {
        let clocks = TimerCosts::measure(&SystemClock, 31, 16);
        clocks.with_bookkeeping(measure_bookkeeping(clocks))
    })
}

/// What a wall-timed vector costs a call site beyond its clock reads (finding the thread's
/// shard, taking its sampler, recording the sample), in nanoseconds: measured on the real
/// path, with fresh sites that are calibrating (every vector wall-timed), as the median of
/// repeated batches. The sampler budgets it along with the clocks.
fn measure_bookkeeping(clocks: TimerCosts) -> f64 {
    const SITES: usize = 16;
    const CALLS: u32 = CALIBRATION_VECTORS - 1;
    let mode = TrackingMode::Adaptive {
        max_overhead_pct: 1.0,
    };
    let clock = SystemClock;
    let mut samples = Vec::with_capacity(21);
    for round in 0..25 {
        let sites: Vec<FunctionSite> = (0..SITES)
            .map(|_| FunctionSite::with_costs("bookkeeping", String::new(), mode, clocks))
            .collect();
        for site in &sites {
            site.call(1, || ()); // the warm-up vector, which creates the shard
        }
        let start = clock.now_ticks();
        for _ in 0..CALLS {
            for site in &sites {
                std::hint::black_box(site.call(1, || std::hint::black_box(0u8)));
            }
        }
        let elapsed = clock.ticks_to_nanos(clock.now_ticks().saturating_sub(start));
        if round >= 4 {
            let per_call = elapsed as f64 / f64::from(CALLS) / SITES as f64;
            samples.push(per_call - clocks.wall_timer_nanos);
        }
    }
    median(&mut samples).max(0.0)
}

/// One call site of a scalar function: what it is and what its callers measured.
pub struct FunctionSite {
    id: u64,
    name: String,
    /// The call's text; unset for a site made before its call was whole (see
    /// [`FunctionSite::describe`]).
    expression: OnceLock<String>,
    mode: TrackingMode,
    costs: TimerCosts,
    /// The clock that times measured vectors.
    clock: &'static (dyn ClockSource + Sync),
    shards: Mutex<Vec<Arc<SiteShard>>>,
    /// Whether a plan's profile took the site (see [`FunctionSite::claim`]).
    claimed: AtomicBool,
}

impl fmt::Debug for FunctionSite {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FunctionSite")
            .field("id", &self.id)
            .field("expression", &self.expression)
            .field("mode", &self.mode)
            .finish()
    }
}

/// The measurements of one site by one writer: a thread, or an operator task whose
/// accumulators call the site from whichever thread runs the task. Only that writer writes
/// it (plain loads and stores, no read-modify-write); anyone may read it.
struct SiteShard {
    /// The writing thread; `None` for a shard of an operator task.
    owner: Option<ThreadId>,
    /// The operator task whose frame was open at the thread's first call (or for which the
    /// shard was made): the operator that evaluates the expression.
    operator: Option<Arc<OperatorTaskCounters>>,
    /// Coming vectors the sampler does not want measured.
    skip: AtomicU32,
    /// Vectors (and their rows) counted on the fast path, not yet given to the sampler.
    pending_vectors: AtomicU32,
    pending_rows: AtomicU64,
    sampler: Mutex<AdaptiveSampler>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Shards of the sites this thread called lately, by site id modulo the size.
const SHARD_CACHE: usize = 64;

type ShardCache = [Option<(u64, Arc<SiteShard>)>; SHARD_CACHE];

thread_local! {
    static SHARDS: RefCell<ShardCache> = const { RefCell::new([const { None }; SHARD_CACHE]) };
}

impl FunctionSite {
    /// A new call site of `name`, written `expression` in the plan, tracked in `mode`.
    pub fn new(name: &str, expression: String, mode: TrackingMode) -> FunctionSite {
        FunctionSite::with_costs(name, expression, mode, timer_costs())
    }

    /// A new call site whose samplers decide with `costs` rather than this machine's.
    pub fn with_costs(
        name: &str,
        expression: String,
        mode: TrackingMode,
        costs: TimerCosts,
    ) -> FunctionSite {
        FunctionSite::with_clock(name, expression, mode, costs, &SystemClock)
    }

    /// A new call site that times vectors with `clock` (a manual clock in tests) and whose
    /// samplers decide with `costs`.
    pub fn with_clock(
        name: &str,
        expression: String,
        mode: TrackingMode,
        costs: TimerCosts,
        clock: &'static (dyn ClockSource + Sync),
    ) -> FunctionSite {
        static NEXT_ID: AtomicU64 = AtomicU64::new(1);
        FunctionSite {
            id: NEXT_ID.fetch_add(1, Relaxed),
            name: name.to_string(),
            expression: if expression.is_empty() {
                OnceLock::new()
            } else {
                OnceLock::from(expression)
            },
            mode,
            costs,
            clock,
            shards: Mutex::new(Vec::new()),
            claimed: AtomicBool::new(false),
        }
    }

    /// Takes the site for one plan's profile: true for the first caller only. A plan
    /// decoded once and run by several tasks shares its sites; the first task's profile
    /// takes them, and the others time their calls at sites of their own.
    pub fn claim(&self) -> bool {
        !self.claimed.swap(true, Relaxed)
    }

    /// The function's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The call as written in the plan (empty until described, for a site made with none).
    pub fn expression(&self) -> &str {
        self.expression.get().map_or("", String::as_str)
    }

    /// Gives a site made with no expression (a function decoded before its arguments) the
    /// text of its call; a site that has one keeps it.
    pub fn describe(&self, expression: String) {
        let _ = self.expression.set(expression);
    }

    /// How the site is tracked.
    pub fn mode(&self) -> TrackingMode {
        self.mode
    }

    /// What the site measured so far, one entry per thread that called it.
    pub fn stats(&self) -> Vec<FunctionStats> {
        lock(&self.shards).iter().map(|s| s.stats()).collect()
    }

    /// The site's profile so far.
    pub fn profile(&self) -> FunctionProfile {
        FunctionProfile::from_stats(&self.name, self.expression(), &self.stats())
    }

    /// What the site measured so far, one entry per thread that called it, with the
    /// operator task whose frame was open at that thread's first call (`None` when no frame
    /// was open): the operator that evaluates the expression.
    pub fn stats_by_operator(&self) -> Vec<(Option<Arc<OperatorTaskCounters>>, FunctionStats)> {
        lock(&self.shards)
            .iter()
            .map(|s| (s.operator.clone(), s.stats()))
            .collect()
    }

    /// Calls `call` on a vector of `rows` rows, counting it and timing it as the sampler of
    /// the calling thread decides.
    #[inline]
    pub fn call<T>(&self, rows: u64, call: impl FnOnce() -> T) -> T {
        let _frame = self.frame();
        if self.count_if_unmeasured(rows) {
            call()
        } else {
            self.call_sampled(rows, call)
        }
    }

    /// The fast path: counts the vector and returns true if this thread's sampler skips it.
    /// Nothing but a flag leaves this function, so the call's arguments are moved once,
    /// straight into the function.
    #[inline]
    pub fn count_if_unmeasured(&self, rows: u64) -> bool {
        SHARDS
            .try_with(|cache| {
                let Ok(cache) = cache.try_borrow() else {
                    return false;
                };
                match &cache[self.slot()] {
                    Some((id, shard)) if *id == self.id => shard.count_unmeasured(rows),
                    _ => false,
                }
            })
            .unwrap_or(false)
    }

    /// The slow path: a vector the sampler decides about (or this thread's first call).
    #[cold]
    #[inline(never)]
    pub fn call_sampled<T>(&self, rows: u64, call: impl FnOnce() -> T) -> T {
        let cached = SHARDS
            .try_with(|cache| {
                let cache = cache.try_borrow().ok()?;
                match &cache[self.slot()] {
                    Some((id, shard)) if *id == self.id => Some(Arc::clone(shard)),
                    _ => None,
                }
            })
            .ok()
            .flatten();
        let shard = cached.unwrap_or_else(|| self.shard_of_this_thread());
        if shard.count_unmeasured(rows) {
            call()
        } else {
            shard.sampled_call(self.clock, rows, call)
        }
    }

    fn slot(&self) -> usize {
        (self.id % SHARD_CACHE as u64) as usize
    }

    /// The calling thread's shard, created on its first call, and cached.
    fn shard_of_this_thread(&self) -> Arc<SiteShard> {
        let me = std::thread::current().id();
        let shard = {
            let mut shards = lock(&self.shards);
            match shards.iter().find(|s| s.owner == Some(me)) {
                Some(s) => Arc::clone(s),
                None => self.new_shard(&mut shards, Some(me), attribution::current()),
            }
        };
        let _ = SHARDS.try_with(|cache| {
            if let Ok(mut cache) = cache.try_borrow_mut() {
                cache[self.slot()] = Some((self.id, Arc::clone(&shard)));
            }
        });
        shard
    }

    /// A shard for `owner` and `operator`, added to `shards`.
    fn new_shard(
        &self,
        shards: &mut Vec<Arc<SiteShard>>,
        owner: Option<ThreadId>,
        operator: Option<Arc<OperatorTaskCounters>>,
    ) -> Arc<SiteShard> {
        let seed = self
            .id
            .wrapping_mul(0x9E37_79B9_7F4A_7C15)
            .wrapping_add(shards.len() as u64);
        let shard = Arc::new(SiteShard {
            owner,
            operator,
            skip: AtomicU32::new(0),
            pending_vectors: AtomicU32::new(0),
            pending_rows: AtomicU64::new(0),
            sampler: Mutex::new(AdaptiveSampler::new(self.mode, self.costs, seed)),
        });
        shards.push(Arc::clone(&shard));
        shard
    }

    /// The calls of this site made on behalf of the operator task whose frame is open (an
    /// aggregate's accumulators, created and driven by one task): they share one sampler,
    /// whichever thread runs the task. Outside any operator, the calls get a shard of
    /// their own.
    pub fn calls_of_current_task(&self) -> TaskCalls {
        let operator = attribution::current();
        let mut shards = lock(&self.shards);
        let existing = operator.as_ref().and_then(|op| {
            shards.iter().find(|s| {
                s.owner.is_none() && s.operator.as_ref().is_some_and(|o| Arc::ptr_eq(o, op))
            })
        });
        let shard = match existing {
            Some(s) => Arc::clone(s),
            None => self.new_shard(&mut shards, None, operator),
        };
        TaskCalls {
            shard,
            site: self.id,
            clock: self.clock,
        }
    }
}

/// The calls of one site made by one operator task (see
/// [`FunctionSite::calls_of_current_task`]). The task must not call through it from two
/// threads at once.
pub struct TaskCalls {
    shard: Arc<SiteShard>,
    /// The site's id.
    site: u64,
    clock: &'static (dyn ClockSource + Sync),
}

impl TaskCalls {
    /// Calls `call` on a vector of `rows` rows, counting it and timing it as the task's
    /// sampler decides.
    #[inline]
    pub fn call<T>(&self, rows: u64, call: impl FnOnce() -> T) -> T {
        let _frame = CallSiteFrame::enter(self.site);
        if self.shard.count_unmeasured(rows) {
            call()
        } else {
            self.shard.sampled_call(self.clock, rows, call)
        }
    }
}

impl fmt::Debug for TaskCalls {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TaskCalls")
            .field("operator", &self.shard.operator.as_ref().map(Arc::as_ptr))
            .finish_non_exhaustive()
    }
}

impl SiteShard {
    /// A vector the sampler decides about: measured as it asks, then recorded.
    fn sampled_call<T>(&self, clock: &dyn ClockSource, rows: u64, call: impl FnOnce() -> T) -> T {
        // only the shard's writer calls this, so the lock is uncontended; held across the
        // call, it is taken once per sampled vector
        let mut sampler = lock(&self.sampler);
        sampler.record_unmeasured(
            self.pending_vectors.load(Relaxed),
            self.pending_rows.load(Relaxed),
        );
        self.pending_vectors.store(0, Relaxed);
        self.pending_rows.store(0, Relaxed);
        let (result, measurement) = match sampler.next_measure() {
            Measure::Nothing => (call(), Measurement::default()),
            Measure::Wall => {
                let w0 = clock.now_ticks();
                let result = call();
                let w1 = clock.now_ticks();
                let wall = clock.ticks_to_nanos(w1.saturating_sub(w0));
                (
                    result,
                    Measurement {
                        wall_nanos: Some(wall),
                        cpu_nanos: None,
                    },
                )
            }
            Measure::CpuAndWall => {
                let c0 = clock.thread_cpu_nanos();
                let w0 = clock.now_ticks();
                let result = call();
                let w1 = clock.now_ticks();
                let c1 = clock.thread_cpu_nanos();
                let wall = clock.ticks_to_nanos(w1.saturating_sub(w0));
                (
                    result,
                    Measurement {
                        wall_nanos: Some(wall),
                        cpu_nanos: Some(c1.saturating_sub(c0)),
                    },
                )
            }
        };
        sampler.record(rows, measurement);
        self.skip.store(sampler.unmeasured_run(), Relaxed);
        result
    }

    fn stats(&self) -> FunctionStats {
        let mut sampler = lock(&self.sampler).clone();
        sampler.record_unmeasured(
            self.pending_vectors.load(Relaxed),
            self.pending_rows.load(Relaxed),
        );
        sampler.stats()
    }

    /// Counts the vector without the sampler if it is one the sampler skips.
    #[inline]
    fn count_unmeasured(&self, rows: u64) -> bool {
        let skip = self.skip.load(Relaxed);
        if skip == 0 {
            return false;
        }
        self.skip.store(skip - 1, Relaxed);
        self.pending_vectors
            .store(self.pending_vectors.load(Relaxed) + 1, Relaxed);
        self.pending_rows
            .store(self.pending_rows.load(Relaxed) + rows, Relaxed);
        true
    }
}

impl FunctionSite {
    /// An id unique in the process: what sampled stacks name the site by.
    pub fn id(&self) -> u64 {
        self.id
    }

    /// Names this site as evaluating on the calling thread until the frame drops, for the
    /// stack sampler ([`crate::stacks::CallSiteFrame`]).
    #[inline]
    pub fn frame(&self) -> CallSiteFrame {
        CallSiteFrame::enter(self.id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::ManualClock;

    fn clock() -> &'static ManualClock {
        Box::leak(Box::new(ManualClock::new()))
    }

    fn costs() -> TimerCosts {
        TimerCosts {
            cpu_timer_nanos: 1_000.0,
            wall_timer_nanos: 20.0,
            cpu_bias_nanos: 0.0,
            wall_bias_nanos: 0.0,
        }
    }

    #[test]
    fn a_site_is_claimed_once_whoever_races_for_it() {
        let site = Arc::new(FunctionSite::new("f", String::new(), TrackingMode::Full));
        let winners: usize = std::thread::scope(|scope| {
            let racers: Vec<_> = (0..4)
                .map(|_| {
                    let site = Arc::clone(&site);
                    scope.spawn(move || usize::from(site.claim()))
                })
                .collect();
            racers.into_iter().map(|r| r.join().unwrap()).sum()
        });
        assert_eq!(winners, 1);
        assert!(!site.claim());
    }

    #[test]
    fn a_fully_tracked_site_times_every_vector_with_its_clock() {
        let clock = clock();
        let site = FunctionSite::with_clock("f", "f(a)".into(), TrackingMode::Full, costs(), clock);
        for _ in 0..10 {
            let out = site.call(100, || {
                clock.advance(1_000, 1_000);
                7
            });
            assert_eq!(out, 7);
        }
        let p = site.profile();
        assert_eq!((p.vectors, p.rows, p.cpu_timed_vectors), (10, 1_000, 10));
        assert_eq!((p.cpu_nanos, p.wall_nanos), (10_000, 10_000));
        assert!(!p.cpu_extrapolated && !p.wall_extrapolated);
        assert_eq!(p.mode, "full");
    }

    #[test]
    fn a_cheap_function_is_sampled_and_its_time_extrapolated() {
        let clock = clock();
        let mode = TrackingMode::Adaptive {
            max_overhead_pct: 1.0,
        };
        let site = FunctionSite::with_clock("g", "g(a)".into(), mode, costs(), clock);
        const VECTORS: u64 = 20_000;
        for _ in 0..VECTORS {
            site.call(10, || clock.advance(100, 100));
        }
        let p = site.profile();
        assert_eq!((p.vectors, p.rows), (VECTORS, VECTORS * 10));
        // a 100 ns function cannot afford a 1 µs timer on every vector
        assert!(p.cpu_timed_vectors < VECTORS / 100, "{p:?}");
        assert!(p.cpu_extrapolated, "{p:?}");
        let truth = (VECTORS * 100) as f64;
        assert!(
            (p.cpu_nanos as f64 - truth).abs() / truth < 0.05,
            "{} vs {truth}",
            p.cpu_nanos
        );
    }

    #[test]
    fn each_thread_has_a_shard_and_the_totals_add_up() {
        let clock = clock();
        let site = Arc::new(FunctionSite::with_clock(
            "h",
            "h(a)".into(),
            TrackingMode::Full,
            costs(),
            clock,
        ));
        let threads: Vec<_> = (0..3)
            .map(|_| {
                let site = Arc::clone(&site);
                std::thread::spawn(move || {
                    for _ in 0..50 {
                        site.call(4, || ());
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        let by_operator = site.stats_by_operator();
        assert_eq!(by_operator.len(), 3);
        assert!(
            by_operator
                .iter()
                .all(|(op, s)| op.is_none() && s.vectors == 50)
        );
        assert_eq!(site.profile().rows, 600);
    }

    #[test]
    fn calls_of_one_operator_task_share_a_shard_on_any_thread() {
        let clock = clock();
        let site =
            FunctionSite::with_clock("sum", "sum(a)".into(), TrackingMode::Full, costs(), clock);
        let task = Arc::new(OperatorTaskCounters::new());
        {
            let _frame = attribution::enter(clock, &task);
            let first = site.calls_of_current_task();
            let second = site.calls_of_current_task();
            first.call(3, || ());
            second.call(5, || ());
        }
        let outside = site.calls_of_current_task();
        outside.call(1, || ());
        let by_operator = site.stats_by_operator();
        assert_eq!(by_operator.len(), 2);
        let (owner, stats) = &by_operator[0];
        assert!(Arc::ptr_eq(owner.as_ref().unwrap(), &task));
        assert_eq!((stats.vectors, stats.rows), (2, 8));
        assert!(by_operator[1].0.is_none());
    }
}
