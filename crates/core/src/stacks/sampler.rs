//! The process's one stack sampler: a `SIGPROF` timer on the process's CPU time, a signal
//! handler that records the interrupted thread's native stack and the operator task its
//! attribution frame names, and a thread that drains what the handler recorded into
//! per-task tallies.
//!
//! The handler allocates nothing and takes no lock: it claims a slot of a ring allocated
//! before the timer was armed, unwinds into it with `backtrace`'s unsynchronized walker
//! (libgcc's DWARF unwinder, which finds a frame's unwind table without a lock through
//! glibc's `_dl_find_object`) and publishes it with one atomic store. A slot still full
//! when the handler comes round to it again counts the sample as lost.

use std::cell::Cell;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Condvar, LazyLock, Mutex, MutexGuard, OnceLock, PoisonError};
use std::thread::JoinHandle;
use std::time::Duration;

use crate::clock::{ClockSource, SystemClock, process_cpu_nanos};

/// Frames kept of one stack, leaf first; deeper stacks lose their outermost frames.
pub(crate) const MAX_DEPTH: usize = 128;
/// Slots of the ring; the drain thread empties it ten times a second, so it holds ten
/// seconds of samples of a 16-core machine at 99 Hz before any is lost.
const SLOTS: usize = 2048;
/// Distinct (task, stack) pairs held between drains and takes; samples beyond are lost
/// (a bound on memory when nobody takes what is sampled).
const MAX_HELD_STACKS: usize = 1 << 20;
/// How often the drain thread empties the ring.
const DRAIN_EVERY: Duration = Duration::from_millis(100);
/// The highest rate the sampler takes. The kernel checks CPU timers at its tick (100 to
/// 1000 Hz, 250 on most distributions' kernels) and sends at most one signal a tick:
/// faster rates take few more samples, each at the cost of an unwinding.
pub const MAX_HZ: u32 = 250;

const EMPTY: u8 = 0;
const WRITING: u8 = 1;
const READY: u8 = 2;

thread_local! {
    /// The sample key of the operator task whose frame is innermost on this thread; 0
    /// outside every frame. Const-initialized and without a destructor, so the signal
    /// handler reads it as a plain thread-local load.
    static CURRENT_KEY: Cell<u64> = const { Cell::new(0) };
}

thread_local! {
    /// The id of the function call site evaluating on this thread; 0 outside every call.
    /// As [`CURRENT_KEY`], read by the signal handler.
    static CURRENT_SITE: Cell<u64> = const { Cell::new(0) };
}

/// Names the operator task running on this thread for the samples taken from now on
/// (0: none).
#[inline]
pub(crate) fn set_current_key(key: u64) {
    let _ = CURRENT_KEY.try_with(|k| k.set(key));
}

/// Names the function call site evaluating on this thread for the samples taken from now
/// on (0: none); returns the one it replaces.
#[inline]
pub(crate) fn swap_current_site(site: u64) -> u64 {
    CURRENT_SITE.try_with(|s| s.replace(site)).unwrap_or(0)
}

struct Slot {
    state: AtomicU8,
    key: AtomicU64,
    site: AtomicU64,
    /// The interrupted instruction, where the platform tells it: the stack is cut there,
    /// dropping the handler's own frames.
    pc: AtomicUsize,
    depth: AtomicUsize,
    ips: [AtomicUsize; MAX_DEPTH],
}

impl Slot {
    fn new() -> Self {
        Slot {
            state: AtomicU8::new(EMPTY),
            key: AtomicU64::new(0),
            site: AtomicU64::new(0),
            pc: AtomicUsize::new(0),
            depth: AtomicUsize::new(0),
            ips: std::array::from_fn(|_| AtomicUsize::new(0)),
        }
    }
}

/// Functions through which the engine enters an operator's code: a walk stops at the
/// first (innermost) frame in one of them, which with everything above it belongs to the
/// runtime, not the operator. Unused entries are 0.
static ENTRY_FUNCTIONS: [AtomicUsize; 8] = [const { AtomicUsize::new(0) }; 8];

/// Registers `address` (a function's first instruction) as a function through which the
/// engine enters an operator's code: samples stop unwinding there, which keeps each walk
/// to the operator's own frames. At most eight are kept; registering one twice is harmless.
pub fn register_operator_entry(address: usize) {
    for slot in &ENTRY_FUNCTIONS {
        match slot.compare_exchange(0, address, Ordering::AcqRel, Ordering::Acquire) {
            Ok(_) => return,
            Err(existing) if existing == address => return,
            Err(_) => {}
        }
    }
}

fn is_operator_entry(function: usize) -> bool {
    function != 0
        && ENTRY_FUNCTIONS
            .iter()
            .any(|f| f.load(Ordering::Relaxed) == function)
}

static RING: OnceLock<Box<[Slot]>> = OnceLock::new();
static NEXT_SLOT: AtomicUsize = AtomicUsize::new(0);
static ACTIVE: AtomicBool = AtomicBool::new(false);
static LOST: AtomicU64 = AtomicU64::new(0);
/// Samples published since the process started, attributed or not.
static RECORDED: AtomicU64 = AtomicU64::new(0);
/// Clock ticks spent in the signal handler since the process started.
static HANDLER_TICKS: AtomicU64 = AtomicU64::new(0);

/// What sampling has cost a process so far.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SamplingCost {
    /// Samples taken.
    pub samples: u64,
    /// Time the signal handler took in all, in nanoseconds of the sampled threads' time.
    pub handler_nanos: u64,
    /// Time spent resolving addresses to function names (once per address), in
    /// nanoseconds.
    pub resolving_nanos: u64,
    /// Of that, the time the drain thread spent resolving while queries ran, rather than
    /// when they ended.
    pub resolving_ahead_nanos: u64,
}

/// A distinct stack of one operator task, as taken from the sampler.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AddressStack {
    /// The function call site that was evaluating ([`crate::call_site::FunctionSite::id`]);
    /// 0 for none.
    pub call_site: u64,
    /// Return addresses, leaf first.
    pub addresses: Box<[usize]>,
    /// Samples that had this stack.
    pub count: u64,
}

/// Why sampling could not start.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum StackSamplerError {
    /// The rate is 0 or above [`MAX_HZ`].
    #[error("stack sampling rate must be between 1 and {MAX_HZ} Hz, not {0}")]
    Rate(u32),
    /// Another profiler owns `SIGPROF` or the profiling timer.
    #[error("SIGPROF or the profiling timer is already used by another profiler in this process")]
    SignalTaken,
    /// The platform has no stack sampler.
    #[error("stack sampling is not supported on this platform")]
    Unsupported,
    /// A system call failed.
    #[error("cannot start stack sampling: {0}")]
    System(String),
}

/// A call site and a stack (leaf first).
type SiteStack = (u64, Box<[usize]>);

/// Samples held for taking: per sample key, each distinct call site and stack, and how
/// many samples had it.
#[derive(Default)]
struct Held {
    by_key: HashMap<u64, HashMap<SiteStack, u64>>,
    distinct: usize,
}

impl Held {
    /// Counts a sample; true if its stack is new to the held ones.
    fn add(&mut self, key: u64, stack: SiteStack) -> bool {
        let stacks = self.by_key.entry(key).or_default();
        if let Some(count) = stacks.get_mut(&stack) {
            *count += 1;
            false
        } else if self.distinct < MAX_HELD_STACKS {
            stacks.insert(stack, 1);
            self.distinct += 1;
            true
        } else {
            LOST.fetch_add(1, Ordering::Relaxed);
            false
        }
    }

    fn remove(&mut self, key: u64) -> Option<HashMap<SiteStack, u64>> {
        let stacks = self.by_key.remove(&key)?;
        self.distinct -= stacks.len();
        Some(stacks)
    }
}

struct State {
    sessions: usize,
    hz: u32,
    handler_installed: bool,
    drainer: Option<JoinHandle<()>>,
    held: Held,
}

static STATE: LazyLock<Mutex<State>> = LazyLock::new(|| {
    Mutex::new(State {
        sessions: 0,
        hz: 0,
        handler_installed: false,
        drainer: None,
        held: Held::default(),
    })
});
/// Wakes the drain thread early: to stop.
static WAKE: Condvar = Condvar::new();

fn state() -> MutexGuard<'static, State> {
    STATE.lock().unwrap_or_else(PoisonError::into_inner)
}

/// One user of the process's stack sampler; the sampler runs while any session is open.
///
/// The sampler is process-wide (there is one `SIGPROF` timer): the first session sets the
/// rate, later ones share it ([`SamplingSession::hz`] tells the rate in force).
#[derive(Debug)]
pub struct SamplingSession {
    hz: u32,
    /// The process's CPU time and samples taken when the session opened: the CPU time a
    /// sample stands for is measured over the session, not assumed from the rate.
    start_cpu_nanos: u64,
    start_samples: u64,
}

impl SamplingSession {
    /// Starts sampling every thread's native stack `hz` times per second of the process's
    /// CPU time (per second of one core's time: two busy threads are each sampled at
    /// about `hz`), or joins the sampling already running.
    ///
    /// # Errors
    /// A rate outside 1..=[`MAX_HZ`], a platform without the sampler, or a `SIGPROF`
    /// handler or profiling timer some other code installed.
    pub fn start(hz: u32) -> Result<SamplingSession, StackSamplerError> {
        if hz == 0 || hz > MAX_HZ {
            return Err(StackSamplerError::Rate(hz));
        }
        let mut state = state();
        if state.sessions == 0 {
            if !state.handler_installed {
                platform::install_handler()?;
                state.handler_installed = true;
            }
            RING.get_or_init(|| (0..SLOTS).map(|_| Slot::new()).collect());
            // the handler reads the clock: its first read, which initializes it, is here
            let _ = SystemClock.now_ticks();
            ACTIVE.store(true, Ordering::Release);
            if let Err(e) = platform::arm_timer(hz) {
                ACTIVE.store(false, Ordering::Release);
                return Err(e);
            }
            state.hz = hz;
            state.drainer = Some(
                std::thread::Builder::new()
                    .name("qprof-stack-sampler".into())
                    .spawn(drain_loop)
                    .map_err(|e| StackSamplerError::System(e.to_string()))?,
            );
        }
        state.sessions += 1;
        Ok(SamplingSession {
            hz: state.hz,
            start_cpu_nanos: process_cpu_nanos(),
            start_samples: RECORDED.load(Ordering::Relaxed),
        })
    }

    /// Samples per second of CPU time.
    pub fn hz(&self) -> u32 {
        self.hz
    }

    /// CPU time one sample stands for, in nanoseconds: the process's CPU time since the
    /// session opened over the samples taken since (of every thread), once there are any,
    /// else the rate's period. The kernel checks CPU timers at its tick and sends at most
    /// one signal a tick, so at rates near the tick a sample stands for more than the
    /// rate's period, and for how much more varies with the machine: measuring it keeps
    /// sampled times exact on average at any rate.
    pub fn period_nanos(&self) -> u64 {
        let samples = RECORDED
            .load(Ordering::Relaxed)
            .saturating_sub(self.start_samples);
        let cpu = process_cpu_nanos().saturating_sub(self.start_cpu_nanos);
        if samples == 0 || cpu == 0 {
            self.nominal_period_nanos()
        } else {
            cpu / samples
        }
    }

    /// The rate's period: the CPU time between two samples the timer asks for.
    pub fn nominal_period_nanos(&self) -> u64 {
        1_000_000_000 / u64::from(self.hz)
    }

    /// Takes the samples recorded so far under each of `keys`: per key, each distinct call
    /// site and stack, and its count. Samples taken are forgotten.
    pub fn take(&self, keys: impl IntoIterator<Item = u64>) -> Vec<(u64, Vec<AddressStack>)> {
        let mut state = state();
        drain_ring(&mut state.held);
        keys.into_iter()
            .filter_map(|key| {
                let stacks = state.held.remove(key)?;
                let stacks = stacks
                    .into_iter()
                    .map(|((call_site, addresses), count)| AddressStack {
                        call_site,
                        addresses,
                        count,
                    })
                    .collect();
                Some((key, stacks))
            })
            .collect()
    }

    /// Samples lost since the process started: the ring was full, or the held stacks were.
    pub fn lost() -> u64 {
        LOST.load(Ordering::Relaxed)
    }

    /// What sampling has cost since the process started.
    pub fn cost() -> SamplingCost {
        SamplingCost {
            samples: RECORDED.load(Ordering::Relaxed),
            handler_nanos: SystemClock.ticks_to_nanos(HANDLER_TICKS.load(Ordering::Relaxed)),
            resolving_nanos: super::symbols::resolving_nanos(),
            resolving_ahead_nanos: super::symbols::resolving_ahead_nanos(),
        }
    }
}

impl Drop for SamplingSession {
    fn drop(&mut self) {
        let drainer = {
            let mut state = state();
            state.sessions -= 1;
            if state.sessions > 0 {
                return;
            }
            platform::disarm_timer();
            ACTIVE.store(false, Ordering::Release);
            state.held = Held::default();
            state.drainer.take()
        };
        WAKE.notify_all();
        if let Some(drainer) = drainer {
            let _ = drainer.join();
        }
        // a sample that raced the timer's end is dropped with the ring's next use
        if let Some(ring) = RING.get() {
            for slot in ring.iter() {
                slot.state.store(EMPTY, Ordering::Release);
            }
        }
    }
}

fn drain_loop() {
    let mut state = state();
    while state.sessions > 0 {
        let fresh = drain_ring(&mut state.held);
        drop(state);
        // the names of new stacks' addresses, resolved beside the running queries rather
        // than when they end (stopping as soon as sampling does)
        super::symbols::resolve_ahead(&fresh, || !ACTIVE.load(Ordering::Acquire));
        state = self::state();
        if state.sessions == 0 {
            break;
        }
        state = WAKE
            .wait_timeout(state, DRAIN_EVERY)
            .unwrap_or_else(PoisonError::into_inner)
            .0;
    }
}

/// Moves every published sample of the ring into `held`; returns the addresses of the
/// stacks new to it.
fn drain_ring(held: &mut Held) -> Vec<usize> {
    let mut fresh = Vec::new();
    let Some(ring) = RING.get() else {
        return fresh;
    };
    for slot in ring.iter() {
        if slot.state.load(Ordering::Acquire) != READY {
            continue;
        }
        let key = slot.key.load(Ordering::Relaxed);
        let site = slot.site.load(Ordering::Relaxed);
        let pc = slot.pc.load(Ordering::Relaxed);
        let depth = slot.depth.load(Ordering::Relaxed).min(MAX_DEPTH);
        let ips: Vec<usize> = slot.ips[..depth]
            .iter()
            .map(|ip| ip.load(Ordering::Relaxed))
            .collect();
        slot.state.store(EMPTY, Ordering::Release);
        // the frames above the interrupted instruction are the handler's own
        let from = ips.iter().position(|&ip| ip == pc).unwrap_or(0);
        // a walk can end on a null return address (the thread's first frame)
        let to = ips
            .iter()
            .rposition(|&ip| ip != 0)
            .map_or(from, |last| last + 1);
        let stack: Box<[usize]> = ips[from..to.max(from)].into();
        if held.add(key, (site, stack.clone())) {
            fresh.extend_from_slice(&stack);
        }
    }
    fresh.sort_unstable();
    fresh.dedup();
    fresh
}

/// Records one sample of the calling thread: what the signal handler runs.
fn record(pc: usize) {
    if !ACTIVE.load(Ordering::Acquire) {
        return;
    }
    let start = SystemClock.now_ticks();
    record_from(pc);
    HANDLER_TICKS.fetch_add(
        SystemClock.now_ticks().saturating_sub(start),
        Ordering::Relaxed,
    );
}

fn record_from(pc: usize) {
    let Some(ring) = RING.get() else {
        return;
    };
    let key = CURRENT_KEY.try_with(Cell::get).unwrap_or(0);
    let slot = &ring[NEXT_SLOT.fetch_add(1, Ordering::Relaxed) % SLOTS];
    if slot
        .state
        .compare_exchange(EMPTY, WRITING, Ordering::Acquire, Ordering::Relaxed)
        .is_err()
    {
        LOST.fetch_add(1, Ordering::Relaxed);
        return;
    }
    let mut depth = 0;
    // a sample outside every operator is counted, not walked: no profile shows its stack
    if key == 0 {
        slot.key.store(key, Ordering::Relaxed);
        slot.site.store(0, Ordering::Relaxed);
        slot.pc.store(pc, Ordering::Relaxed);
        slot.depth.store(0, Ordering::Relaxed);
        slot.state.store(READY, Ordering::Release);
        RECORDED.fetch_add(1, Ordering::Relaxed);
        return;
    }
    // SAFETY: the walker takes no lock and allocates nothing; it runs on the interrupted
    // thread's own stack, which the signal does not change.
    unsafe {
        backtrace::trace_unsynchronized(|frame| {
            // an operator's sample ends where the engine entered its code
            if is_operator_entry(frame.symbol_address() as usize) {
                return false;
            }
            slot.ips[depth].store(frame.ip() as usize, Ordering::Relaxed);
            depth += 1;
            depth < MAX_DEPTH
        });
    }
    slot.key.store(key, Ordering::Relaxed);
    slot.site.store(
        CURRENT_SITE.try_with(Cell::get).unwrap_or(0),
        Ordering::Relaxed,
    );
    slot.pc.store(pc, Ordering::Relaxed);
    slot.depth.store(depth, Ordering::Relaxed);
    slot.state.store(READY, Ordering::Release);
    RECORDED.fetch_add(1, Ordering::Relaxed);
}

#[cfg(target_os = "linux")]
mod platform {
    use super::{StackSamplerError, record};
    use std::ffi::c_void;

    extern "C" fn on_sigprof(
        _signal: libc::c_int,
        _info: *mut libc::siginfo_t,
        context: *mut c_void,
    ) {
        // SAFETY: errno is the calling thread's; the handler restores what it interrupted.
        let errno = unsafe { *libc::__errno_location() };
        record(interrupted_pc(context));
        // SAFETY: as above.
        unsafe { *libc::__errno_location() = errno };
    }

    #[cfg(target_arch = "x86_64")]
    fn interrupted_pc(context: *mut c_void) -> usize {
        if context.is_null() {
            return 0;
        }
        // SAFETY: the kernel passes a `ucontext_t` to an `SA_SIGINFO` handler.
        let context = unsafe { &*(context as *const libc::ucontext_t) };
        context.uc_mcontext.gregs[libc::REG_RIP as usize] as usize
    }

    #[cfg(target_arch = "aarch64")]
    fn interrupted_pc(context: *mut c_void) -> usize {
        if context.is_null() {
            return 0;
        }
        // SAFETY: the kernel passes a `ucontext_t` to an `SA_SIGINFO` handler.
        let context = unsafe { &*(context as *const libc::ucontext_t) };
        context.uc_mcontext.pc as usize
    }

    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    fn interrupted_pc(_context: *mut c_void) -> usize {
        0
    }

    /// Installs the handler, once per process; it stays (a `SIGPROF` arriving after the
    /// timer stopped must not meet the default action, which ends the process).
    pub(super) fn install_handler() -> Result<(), StackSamplerError> {
        // SAFETY: plain system calls on zeroed, then filled, `sigaction` structures.
        unsafe {
            let mut old: libc::sigaction = std::mem::zeroed();
            if libc::sigaction(libc::SIGPROF, std::ptr::null(), &mut old) != 0 {
                return Err(last_error());
            }
            if old.sa_sigaction != libc::SIG_DFL && old.sa_sigaction != libc::SIG_IGN {
                return Err(StackSamplerError::SignalTaken);
            }
            let mut timer: libc::itimerval = std::mem::zeroed();
            if libc::getitimer(libc::ITIMER_PROF, &mut timer) == 0
                && (timer.it_interval.tv_sec != 0 || timer.it_interval.tv_usec != 0)
            {
                return Err(StackSamplerError::SignalTaken);
            }
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = on_sigprof as *const () as usize;
            action.sa_flags = libc::SA_SIGINFO | libc::SA_RESTART;
            libc::sigemptyset(&mut action.sa_mask);
            if libc::sigaction(libc::SIGPROF, &action, std::ptr::null_mut()) != 0 {
                return Err(last_error());
            }
        }
        Ok(())
    }

    pub(super) fn arm_timer(hz: u32) -> Result<(), StackSamplerError> {
        let micros = (1_000_000 / hz.max(1)) as libc::suseconds_t;
        let period = libc::timeval {
            tv_sec: 0,
            tv_usec: micros,
        };
        let timer = libc::itimerval {
            it_interval: period,
            it_value: period,
        };
        // SAFETY: a plain system call on a filled structure.
        if unsafe { libc::setitimer(libc::ITIMER_PROF, &timer, std::ptr::null_mut()) } != 0 {
            return Err(last_error());
        }
        Ok(())
    }

    pub(super) fn disarm_timer() {
        // SAFETY: a zeroed `itimerval` stops the timer.
        unsafe {
            let timer: libc::itimerval = std::mem::zeroed();
            libc::setitimer(libc::ITIMER_PROF, &timer, std::ptr::null_mut());
        }
    }

    fn last_error() -> StackSamplerError {
        StackSamplerError::System(std::io::Error::last_os_error().to_string())
    }
}

#[cfg(not(target_os = "linux"))]
mod platform {
    use super::StackSamplerError;

    pub(super) fn install_handler() -> Result<(), StackSamplerError> {
        Err(StackSamplerError::Unsupported)
    }

    pub(super) fn arm_timer(_hz: u32) -> Result<(), StackSamplerError> {
        Err(StackSamplerError::Unsupported)
    }

    pub(super) fn disarm_timer() {}

    #[allow(dead_code)]
    fn unused() {
        super::record(0);
    }
}
