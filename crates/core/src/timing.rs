//! CPU and wall timing: Velox's `CpuWallTiming` and guard timers that allocate nothing.

use std::sync::atomic::{AtomicU64, Ordering};

use crate::clock::ClockSource;

/// Accumulated timing of a repeated piece of work.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CpuWallTiming {
    /// Number of timed executions.
    pub count: u64,
    /// Total wall time in nanoseconds.
    pub wall_nanos: u64,
    /// Total thread CPU time in nanoseconds.
    pub cpu_nanos: u64,
}

impl CpuWallTiming {
    /// Adds another timing to this one.
    pub fn add(&mut self, other: CpuWallTiming) {
        self.count = self.count.saturating_add(other.count);
        self.wall_nanos = self.wall_nanos.saturating_add(other.wall_nanos);
        self.cpu_nanos = self.cpu_nanos.saturating_add(other.cpu_nanos);
    }
}

/// A [`CpuWallTiming`] that several threads can add to.
///
/// `Relaxed` ordering suffices: the three fields are independent sums read for reporting.
#[derive(Debug, Default)]
pub struct AtomicCpuWallTiming {
    count: AtomicU64,
    wall_nanos: AtomicU64,
    cpu_nanos: AtomicU64,
}

impl AtomicCpuWallTiming {
    /// Adds one timing.
    #[inline]
    pub fn add(&self, timing: CpuWallTiming) {
        self.count.fetch_add(timing.count, Ordering::Relaxed);
        self.wall_nanos
            .fetch_add(timing.wall_nanos, Ordering::Relaxed);
        self.cpu_nanos
            .fetch_add(timing.cpu_nanos, Ordering::Relaxed);
    }

    /// Reads the accumulated timing.
    pub fn snapshot(&self) -> CpuWallTiming {
        CpuWallTiming {
            count: self.count.load(Ordering::Relaxed),
            wall_nanos: self.wall_nanos.load(Ordering::Relaxed),
            cpu_nanos: self.cpu_nanos.load(Ordering::Relaxed),
        }
    }
}

/// Times CPU and wall time from its creation until it is dropped, then adds one count to
/// its target. Reads the thread CPU clock twice: use it for coarse work only.
#[must_use = "the timer records when dropped"]
#[derive(Debug)]
pub struct CpuWallTimer<'a, C: ClockSource> {
    clock: &'a C,
    target: &'a AtomicCpuWallTiming,
    wall_start: u64,
    cpu_start: u64,
}

impl<'a, C: ClockSource> CpuWallTimer<'a, C> {
    /// Starts timing into `target`.
    pub fn start(clock: &'a C, target: &'a AtomicCpuWallTiming) -> Self {
        Self {
            clock,
            target,
            cpu_start: clock.thread_cpu_nanos(),
            wall_start: clock.now_ticks(),
        }
    }
}

impl<C: ClockSource> Drop for CpuWallTimer<'_, C> {
    fn drop(&mut self) {
        let wall = self
            .clock
            .ticks_to_nanos(self.clock.now_ticks().saturating_sub(self.wall_start));
        let cpu = self.clock.thread_cpu_nanos().saturating_sub(self.cpu_start);
        self.target.add(CpuWallTiming {
            count: 1,
            wall_nanos: wall,
            cpu_nanos: cpu,
        });
    }
}

/// Times wall time only (one cheap clock read at each end) into an atomic nanosecond sum.
#[must_use = "the timer records when dropped"]
#[derive(Debug)]
pub struct WallTimer<'a, C: ClockSource> {
    clock: &'a C,
    target: &'a AtomicU64,
    start: u64,
}

impl<'a, C: ClockSource> WallTimer<'a, C> {
    /// Starts timing into `target` (nanoseconds).
    pub fn start(clock: &'a C, target: &'a AtomicU64) -> Self {
        Self {
            clock,
            target,
            start: clock.now_ticks(),
        }
    }
}

impl<C: ClockSource> Drop for WallTimer<'_, C> {
    fn drop(&mut self) {
        let nanos = self
            .clock
            .ticks_to_nanos(self.clock.now_ticks().saturating_sub(self.start));
        self.target.fetch_add(nanos, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::ManualClock;

    #[test]
    fn guards_record_on_drop() {
        let clock = ManualClock::new();
        let timing = AtomicCpuWallTiming::default();
        let wall = AtomicU64::new(0);
        {
            let _cpu = CpuWallTimer::start(&clock, &timing);
            let _wall = WallTimer::start(&clock, &wall);
            clock.advance(1_000, 600);
        }
        {
            let _cpu = CpuWallTimer::start(&clock, &timing);
            clock.advance(500, 500);
        }
        assert_eq!(
            timing.snapshot(),
            CpuWallTiming {
                count: 2,
                wall_nanos: 1_500,
                cpu_nanos: 1_100
            }
        );
        assert_eq!(wall.load(Ordering::Relaxed), 1_000);
    }

    #[test]
    fn timings_add_up() {
        let mut a = CpuWallTiming {
            count: 1,
            wall_nanos: 10,
            cpu_nanos: 5,
        };
        a.add(a);
        assert_eq!((a.count, a.wall_nanos, a.cpu_nanos), (2, 20, 10));
    }
}
