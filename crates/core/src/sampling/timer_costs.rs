//! What the timers cost on this machine: the price of timing one call with the CPU and wall
//! clocks or the wall clock alone, and the bias an empty timed region reports.

use crate::clock::ClockSource;

/// Costs of the timers, measured once per process (see [`TimerCosts::from_samples`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TimerCosts {
    /// Cost to the caller of timing one call with the CPU and wall clocks, ns.
    pub cpu_timer_nanos: f64,
    /// Cost to the caller of timing one call with the wall clock only, ns.
    pub wall_timer_nanos: f64,
    /// CPU time an empty timed region reports (subtracted from every CPU sample), ns.
    pub cpu_bias_nanos: f64,
    /// Wall time an empty timed region reports (subtracted from every wall sample), ns.
    pub wall_bias_nanos: f64,
}

/// The median of `samples` (upper median for even counts); 0 for none. A robust statistic:
/// one cold or preempted sample cannot move it.
pub fn median(samples: &mut [f64]) -> f64 {
    if samples.is_empty() {
        return 0.0;
    }
    samples.sort_by(f64::total_cmp);
    samples[samples.len() / 2]
}

impl TimerCosts {
    /// Costs from repeated measurements of each quantity, each reduced by its median.
    pub fn from_samples(
        cpu_timer: &mut [f64],
        wall_timer: &mut [f64],
        cpu_bias: &mut [f64],
        wall_bias: &mut [f64],
    ) -> TimerCosts {
        TimerCosts {
            cpu_timer_nanos: median(cpu_timer),
            wall_timer_nanos: median(wall_timer),
            cpu_bias_nanos: median(cpu_bias),
            wall_bias_nanos: median(wall_bias),
        }
    }
}

impl TimerCosts {
    /// These costs with `nanos` of the caller's own work per measured vector (taking the
    /// sampler, recording the sample) added to both timer costs, so that a decision budgets
    /// everything a measured vector costs, not only its clock reads.
    pub fn with_bookkeeping(self, nanos: f64) -> TimerCosts {
        let nanos = nanos.max(0.0);
        TimerCosts {
            cpu_timer_nanos: self.cpu_timer_nanos + nanos,
            wall_timer_nanos: self.wall_timer_nanos + nanos,
            ..self
        }
    }

    /// Measures the timers on this machine with `clock`: `samples` measurements of each
    /// quantity (after a few discarded warm-up rounds), each over `batch` back-to-back
    /// empty regions, reduced by the median. Takes a few milliseconds.
    pub fn measure(clock: &impl ClockSource, samples: usize, batch: u32) -> TimerCosts {
        let batch = batch.max(1);
        let samples = samples.max(1);
        let per_region = |ticks: u64| clock.ticks_to_nanos(ticks) as f64 / f64::from(batch);
        let mut cpu_timer = Vec::with_capacity(samples);
        let mut wall_timer = Vec::with_capacity(samples);
        let mut cpu_bias = Vec::with_capacity(samples);
        let mut wall_bias = Vec::with_capacity(samples);
        for round in 0..samples + 4 {
            // an empty region timed with both clocks, as a tracked call would be
            let start = clock.now_ticks();
            let (mut cpu_seen, mut wall_seen) = (0u64, 0u64);
            for _ in 0..batch {
                let c0 = clock.thread_cpu_nanos();
                let w0 = clock.now_ticks();
                let w1 = clock.now_ticks();
                let c1 = clock.thread_cpu_nanos();
                cpu_seen += c1.saturating_sub(c0);
                wall_seen += w1.saturating_sub(w0);
            }
            let cpu_cost = per_region(clock.now_ticks().saturating_sub(start));
            // an empty region timed with the wall clock only
            let start = clock.now_ticks();
            let mut wall_only_seen = 0u64;
            for _ in 0..batch {
                let w0 = clock.now_ticks();
                let w1 = clock.now_ticks();
                wall_only_seen += w1.saturating_sub(w0);
            }
            let wall_cost = per_region(clock.now_ticks().saturating_sub(start));
            if round < 4 {
                continue; // cold caches, first clock reads
            }
            cpu_timer.push(cpu_cost);
            wall_timer.push(wall_cost);
            cpu_bias.push(cpu_seen as f64 / f64::from(batch));
            wall_bias.push(per_region(wall_only_seen.max(wall_seen / 2)));
        }
        TimerCosts::from_samples(
            &mut cpu_timer,
            &mut wall_timer,
            &mut cpu_bias,
            &mut wall_bias,
        )
    }
}
