//! The two phases of a join task: collecting its build side, then probing with the other.
//!
//! A join task starts in [`JoinPhase::Build`] and moves to [`JoinPhase::Probe`] the first
//! time it pulls from its probe input (which a join does only once its build side is
//! ready). Every figure below is split by the phase the task was in when it was counted:
//! the task's own time ([`crate::attribution`] closes a time segment before a child's poll
//! opens, so a segment never spans the switch), the rows its inputs gave it, the rows it
//! produced, its reserved memory's peak and its spill files. A join whose two inputs are
//! read together (sort-merge, symmetric hash) never switches: its sides' rows are counted
//! apart, its time is not split.

use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, OnceLock};

use crate::spill::{SpillCounters, SpillSnapshot};

/// A phase of a join task.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum JoinPhase {
    /// Collecting the build side (the side held in memory).
    Build = 0,
    /// Reading the probe side (the side streamed past the build side).
    Probe = 1,
}

impl JoinPhase {
    /// Both phases, in order.
    pub const ALL: [JoinPhase; 2] = [JoinPhase::Build, JoinPhase::Probe];

    fn index(self) -> usize {
        self as usize
    }
}

/// The per-phase counters of one join task.
#[derive(Debug, Default)]
pub struct PhaseCounters {
    /// Whether reading the probe input ends the build phase (false: inputs read together).
    sequential: bool,
    current: AtomicU8,
    probe_started: AtomicBool,
    self_wall_nanos: [AtomicU64; 2],
    self_cpu_nanos: [AtomicU64; 2],
    input_rows: [AtomicU64; 2],
    input_batches: [AtomicU64; 2],
    output_rows: [AtomicU64; 2],
    output_batches: [AtomicU64; 2],
    peak_memory_bytes: [AtomicU64; 2],
    /// Rows the build side held when probing began.
    build_rows_held: AtomicU64,
    spill: [OnceLock<Arc<SpillCounters>>; 2],
}

impl PhaseCounters {
    /// Counters of a join that builds first and then probes (`sequential`), or of one
    /// that reads both inputs together.
    pub fn new(sequential: bool) -> Self {
        Self {
            sequential,
            ..Self::default()
        }
    }

    /// The phase the task is in now.
    #[inline]
    pub fn current(&self) -> JoinPhase {
        if self.current.load(Relaxed) == 0 {
            JoinPhase::Build
        } else {
            JoinPhase::Probe
        }
    }

    /// The task pulls from its probe input: for a sequential join the build phase ends
    /// here (the first time), with `memory_now` bytes reserved (carried into the probe
    /// phase's peak).
    #[inline]
    pub fn probe_polled(&self, memory_now: u64) {
        if !self.sequential || self.probe_started.load(Relaxed) {
            return;
        }
        if !self.probe_started.swap(true, Relaxed) {
            let held = self.input_rows[JoinPhase::Build.index()].load(Relaxed);
            self.build_rows_held.store(held, Relaxed);
            self.peak_memory_bytes[JoinPhase::Probe.index()].fetch_max(memory_now, Relaxed);
            self.current.store(JoinPhase::Probe as u8, Relaxed);
        }
    }

    /// Counts a batch of `rows` from the input of `side`.
    #[inline]
    pub fn record_input(&self, side: JoinPhase, rows: usize) {
        self.input_rows[side.index()].fetch_add(rows as u64, Relaxed);
        self.input_batches[side.index()].fetch_add(1, Relaxed);
    }

    /// Counts a batch of `rows` the join produced, in the current phase.
    #[inline]
    pub fn record_output(&self, rows: usize) {
        let phase = self.current().index();
        self.output_rows[phase].fetch_add(rows as u64, Relaxed);
        self.output_batches[phase].fetch_add(1, Relaxed);
    }

    /// Notes `bytes` reserved now, for the current phase's peak.
    #[inline]
    pub fn note_memory(&self, bytes: u64) {
        self.peak_memory_bytes[self.current().index()].fetch_max(bytes, Relaxed);
    }

    /// Adds the task's own time spent in `phase`.
    pub fn add_self_time(&self, phase: JoinPhase, wall_nanos: u64, cpu_nanos: u64) {
        self.self_wall_nanos[phase.index()].fetch_add(wall_nanos, Relaxed);
        self.self_cpu_nanos[phase.index()].fetch_add(cpu_nanos, Relaxed);
    }

    /// The spill counters of the current phase, created on first use.
    pub fn spill_now(&self) -> &Arc<SpillCounters> {
        self.spill[self.current().index()].get_or_init(Arc::default)
    }

    /// Reads the counters of `phase`.
    pub fn snapshot(&self, phase: JoinPhase) -> PhaseSnapshot {
        let i = phase.index();
        let output_rows = match phase {
            // the build phase's output is the table it holds
            JoinPhase::Build => self.build_rows_held.load(Relaxed),
            JoinPhase::Probe => self.output_rows[i].load(Relaxed),
        };
        PhaseSnapshot {
            self_wall_nanos: self.self_wall_nanos[i].load(Relaxed),
            self_cpu_nanos: self.self_cpu_nanos[i].load(Relaxed),
            input_rows: self.input_rows[i].load(Relaxed),
            input_batches: self.input_batches[i].load(Relaxed),
            output_rows,
            peak_memory_bytes: self.peak_memory_bytes[i].load(Relaxed),
            spill: self.spill[i]
                .get()
                .map(|s| s.snapshot())
                .unwrap_or_default(),
        }
    }
}

/// A point-in-time copy of one phase of [`PhaseCounters`]. Durations are in nanoseconds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PhaseSnapshot {
    /// The join's own wall time in the phase, its inputs' work excluded.
    pub self_wall_nanos: u64,
    /// The join's own CPU time in the phase, its inputs' work excluded.
    pub self_cpu_nanos: u64,
    /// Rows the phase's input gave the join.
    pub input_rows: u64,
    /// Batches the phase's input gave the join.
    pub input_batches: u64,
    /// Build: rows held when probing began (0 if it never began); probe: rows produced.
    pub output_rows: u64,
    /// Peak bytes the join task had reserved during the phase.
    pub peak_memory_bytes: u64,
    /// Spill files created during the phase.
    pub spill: SpillSnapshot,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn probing_ends_the_build_phase_once() {
        let p = PhaseCounters::new(true);
        p.record_input(JoinPhase::Build, 10);
        p.note_memory(500);
        p.record_input(JoinPhase::Build, 5);
        assert_eq!(p.current(), JoinPhase::Build);
        p.probe_polled(400);
        p.record_input(JoinPhase::Probe, 7);
        p.record_output(3);
        p.note_memory(450);
        p.probe_polled(0);
        assert_eq!(p.current(), JoinPhase::Probe);
        let (b, pr) = (p.snapshot(JoinPhase::Build), p.snapshot(JoinPhase::Probe));
        assert_eq!(
            (b.input_rows, b.output_rows, b.peak_memory_bytes),
            (15, 15, 500)
        );
        assert_eq!(
            (pr.input_rows, pr.output_rows, pr.peak_memory_bytes),
            (7, 3, 450)
        );
        assert_eq!((b.input_batches, pr.input_batches), (2, 1));
    }

    #[test]
    fn a_join_reading_both_inputs_together_stays_in_one_phase() {
        let p = PhaseCounters::new(false);
        p.record_input(JoinPhase::Probe, 4);
        p.probe_polled(0);
        assert_eq!(p.current(), JoinPhase::Build);
        assert_eq!(p.snapshot(JoinPhase::Probe).input_rows, 4);
        assert_eq!(p.snapshot(JoinPhase::Build).output_rows, 0);
    }

    #[test]
    fn spill_is_counted_in_the_phase_it_happens() {
        let p = PhaseCounters::new(true);
        p.spill_now().record_file();
        p.probe_polled(0);
        p.spill_now().record_file();
        p.spill_now().record_write(10, 1);
        assert_eq!(p.snapshot(JoinPhase::Build).spill.files, 1);
        let probe = p.snapshot(JoinPhase::Probe).spill;
        assert_eq!((probe.files, probe.written_bytes), (1, 10));
    }
}
