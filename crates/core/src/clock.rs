//! Clocks: a TSC-class wall clock, the thread CPU clock and the thread's allocation count,
//! behind one trait so timing logic can be driven by a fake clock in tests.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};

/// A source of the three readings qprof's timing logic needs.
///
/// Wall time is read in raw ticks (cheap, ~15 ns on TSC machines) and converted to
/// nanoseconds only when results are published. The thread CPU clock is expensive
/// (a system call on virtual machines, ~0.7 µs), so callers read it sparingly.
pub trait ClockSource {
    /// Current wall-clock reading in ticks of an unspecified unit.
    fn now_ticks(&self) -> u64;
    /// Converts a tick difference to nanoseconds.
    fn ticks_to_nanos(&self, ticks: u64) -> u64;
    /// CPU time consumed by the calling thread, in nanoseconds.
    fn thread_cpu_nanos(&self) -> u64;
    /// Which CPU clock [`Self::thread_cpu_nanos`] reads: two readings on one thread can be
    /// subtracted only if their clocks have the same id.
    fn cpu_clock_id(&self) -> u64;
    /// Number of heap allocations made by the calling thread so far (0 without
    /// [`crate::alloc::CountingAllocator`]).
    fn thread_allocations(&self) -> u64;
}

/// The real clocks: TSC through `quanta`, `CLOCK_THREAD_CPUTIME_ID`, and the counting allocator.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

fn tsc() -> &'static quanta::Clock {
    static CLOCK: OnceLock<quanta::Clock> = OnceLock::new();
    CLOCK.get_or_init(quanta::Clock::new)
}

/// Reads a POSIX clock in nanoseconds; 0 if the clock cannot be read.
fn clock_nanos(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec and the clock ids used here are supported
    // on Linux and the BSDs. On failure the struct stays zeroed, which reads as 0.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    (ts.tv_sec as u64)
        .saturating_mul(1_000_000_000)
        .saturating_add(ts.tv_nsec as u64)
}

/// CPU time of the calling thread in nanoseconds, from `CLOCK_THREAD_CPUTIME_ID`.
pub fn thread_cpu_nanos() -> u64 {
    clock_nanos(libc::CLOCK_THREAD_CPUTIME_ID)
}

/// Wall-clock time in milliseconds since the Unix epoch (0 if the clock is before it).
pub fn epoch_millis() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// Wall-clock time in microseconds since the Unix epoch (0 if the clock is before it).
pub fn epoch_micros() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_micros()).unwrap_or(u64::MAX))
}

/// CPU time of the whole process (all threads) in nanoseconds, from `CLOCK_PROCESS_CPUTIME_ID`.
pub fn process_cpu_nanos() -> u64 {
    clock_nanos(libc::CLOCK_PROCESS_CPUTIME_ID)
}

/// Minor page faults of the whole process so far (`getrusage`'s `ru_minflt`; 0 if it fails):
/// the pages the kernel had to map on first touch, which memory the allocator kept would not
/// have needed.
pub fn process_minor_faults() -> u64 {
    let mut usage = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: getrusage writes a whole rusage into the pointed-to memory, which is large
    // enough and zeroed; on failure (impossible for RUSAGE_SELF) the zeroes are read.
    let usage = unsafe {
        libc::getrusage(libc::RUSAGE_SELF, usage.as_mut_ptr());
        usage.assume_init()
    };
    u64::try_from(usage.ru_minflt).unwrap_or(0)
}

impl ClockSource for SystemClock {
    #[inline]
    fn now_ticks(&self) -> u64 {
        tsc().raw()
    }

    fn ticks_to_nanos(&self, ticks: u64) -> u64 {
        tsc().delta_as_nanos(0, ticks)
    }

    #[inline]
    fn thread_cpu_nanos(&self) -> u64 {
        thread_cpu_nanos()
    }

    #[inline]
    fn cpu_clock_id(&self) -> u64 {
        0
    }

    #[inline]
    fn thread_allocations(&self) -> u64 {
        crate::alloc::thread_allocations()
    }
}

/// A clock that only moves when told to: one tick is one nanosecond.
///
/// Used by tests of timing logic; every reading is set explicitly.
#[derive(Debug)]
pub struct ManualClock {
    ticks: AtomicU64,
    cpu: AtomicU64,
    allocations: AtomicU64,
    /// How often its CPU clock was read.
    cpu_reads: AtomicU64,
    /// Its own CPU clock's id (the system clock's is 0).
    id: u64,
}

impl Default for ManualClock {
    fn default() -> Self {
        static NEXT_ID: AtomicU64 = AtomicU64::new(1);
        ManualClock {
            ticks: AtomicU64::new(0),
            cpu: AtomicU64::new(0),
            allocations: AtomicU64::new(0),
            cpu_reads: AtomicU64::new(0),
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
        }
    }
}

impl ManualClock {
    /// A clock at zero.
    pub fn new() -> Self {
        Self::default()
    }

    /// Advances wall time by `wall` ns and thread CPU time by `cpu` ns.
    pub fn advance(&self, wall: u64, cpu: u64) {
        self.ticks.fetch_add(wall, Ordering::Relaxed);
        self.cpu.fetch_add(cpu, Ordering::Relaxed);
    }

    /// How many times the thread CPU clock was read.
    pub fn cpu_reads(&self) -> u64 {
        self.cpu_reads.load(Ordering::Relaxed)
    }

    /// Records `n` more allocations on "this thread".
    pub fn allocate(&self, n: u64) {
        self.allocations.fetch_add(n, Ordering::Relaxed);
    }
}

impl ClockSource for ManualClock {
    fn now_ticks(&self) -> u64 {
        self.ticks.load(Ordering::Relaxed)
    }

    fn ticks_to_nanos(&self, ticks: u64) -> u64 {
        ticks
    }

    fn thread_cpu_nanos(&self) -> u64 {
        self.cpu_reads.fetch_add(1, Ordering::Relaxed);
        self.cpu.load(Ordering::Relaxed)
    }

    fn cpu_clock_id(&self) -> u64 {
        self.id
    }

    fn thread_allocations(&self) -> u64 {
        self.allocations.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn system_clocks_move_forward() {
        let clock = SystemClock;
        let (t0, c0) = (clock.now_ticks(), clock.thread_cpu_nanos());
        let mut x = 0_u64;
        for i in 0..2_000_000_u64 {
            x = x.wrapping_mul(31).wrapping_add(i);
        }
        std::hint::black_box(x);
        let (t1, c1) = (clock.now_ticks(), clock.thread_cpu_nanos());
        assert!(t1 > t0, "wall ticks did not advance");
        assert!(c1 > c0, "thread cpu time did not advance");
        let wall = clock.ticks_to_nanos(t1 - t0);
        // busy work on one thread: CPU time cannot exceed wall time by more than clock skew
        assert!(c1 - c0 <= wall + 1_000_000, "cpu {} > wall {wall}", c1 - c0);
        assert!(process_cpu_nanos() >= c1);
    }

    #[test]
    fn touching_fresh_pages_counts_their_faults() {
        const PAGES: usize = 4096;
        let page = 4096;
        // zeroed memory this large comes from the kernel untouched: each page faults once
        // when first written
        let mut memory = vec![0_u8; PAGES * page];
        let before = process_minor_faults();
        for i in (0..memory.len()).step_by(page) {
            memory[i] = 1;
        }
        let after = process_minor_faults();
        std::hint::black_box(&memory);
        // huge pages can map many 4 KiB pages in one fault; without them, one fault each
        assert!(after > before, "no fault counted for {PAGES} fresh pages");
        assert!(
            after - before <= 2 * PAGES as u64 + 1_000,
            "{} faults for {PAGES} pages",
            after - before
        );
    }
}
