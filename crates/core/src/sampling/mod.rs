//! Adaptive per-function CPU sampling: decides, vector by vector, whether to time a function
//! call with the expensive CPU clock, the cheap wall clock, or not at all, so that tracking
//! costs at most a configured share of the function's own time; and estimates the function's
//! total CPU and wall time from the samples, weighted by rows.
//!
//! The sampler only decides and accumulates; the caller reads the clocks. One sampler serves
//! one call site in one thread, so nothing here is shared or locked.
//!
//! Life of a sampler in adaptive mode: one warm-up vector (wall clock only, not used to
//! decide); a few calibration
//! vectors timed with the wall clock only; then a decision: *always track* when the CPU
//! timer costs at most the budget (`max_overhead_pct` of the function's cost per vector),
//! otherwise *sample* CPU at a mean rate 1/N_c and wall time at a denser 1/N_w, with gaps
//! drawn at random (so periodic input cannot alias with the sampling) and the first vector
//! after a decision always timed. If the per-row cost measured by the wall samples drifts
//! by more than 2× from the calibration, the sampler calibrates again.
//!
//! A CPU-timed vector's CPU time is its wall time unless the CPU clock shows the thread
//! waited (see [`AdaptiveSampler::record`]): the CPU clock's own read cost varies by more
//! than a cheap function costs, the wall clock's does not.

#[cfg(test)]
mod tests;
mod timer_costs;

pub use timer_costs::{TimerCosts, median};

/// What to measure around the next call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Measure {
    /// Count the vector, read no clock.
    Nothing,
    /// Read the wall clock (TSC) around the call.
    Wall,
    /// Read the thread CPU clock and the wall clock around the call.
    CpuAndWall,
}

/// What was measured around one call.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Measurement {
    /// Wall nanoseconds, when the wall clock was read.
    pub wall_nanos: Option<u64>,
    /// Thread CPU nanoseconds, when the CPU clock was read.
    pub cpu_nanos: Option<u64>,
}

/// How a call site is tracked.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum TrackingMode {
    /// Time every vector with the CPU and wall clocks.
    Full,
    /// Sample so that timing costs at most this share (in percent) of the function's time.
    Adaptive {
        /// Overhead budget in percent of the function's own cost, in (0, 100].
        max_overhead_pct: f64,
    },
}

/// The decision an adaptive sampler is working under.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// Every vector is timed with both clocks.
    Always,
    /// CPU timing at a mean rate of 1/`cpu_every`, wall timing at 1/`wall_every`.
    Sample {
        /// Mean gap between CPU-timed vectors.
        cpu_every: u32,
        /// Mean gap between wall-timed vectors.
        wall_every: u32,
    },
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum State {
    Forced,
    Warmup,
    Calibrating { done: u32, wall: f64, rows: u64 },
    Decided(Decision),
}

/// Vectors timed with the wall clock only before deciding.
pub const CALIBRATION_VECTORS: u32 = 5;
/// Wall samples and vectors an epoch needs before drift is judged.
const DRIFT_MIN_SAMPLES: u64 = 16;
const DRIFT_MIN_VECTORS: u64 = 64;

/// Samples of one epoch: a stretch of vectors under one decision.
#[derive(Debug, Clone, Copy, Default)]
struct Epoch {
    vectors: u64,
    rows: u64,
    wall_samples: u64,
    wall_sample_rows: u64,
    wall_sum: f64,
    cpu_samples: u64,
    cpu_sum: f64,
    cpu_wall_sum: f64,
}

/// The estimates of a call site so far (none yet: the default).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct FunctionStats {
    /// Vectors (batches) the function was called on; exact.
    pub vectors: u64,
    /// Rows it was called on; exact.
    pub rows: u64,
    /// Vectors timed with the CPU clock.
    pub cpu_timed_vectors: u64,
    /// CPU nanoseconds, extrapolated when not every vector was CPU-timed.
    pub cpu_nanos: f64,
    /// Wall nanoseconds, extrapolated when not every vector was wall-timed.
    pub wall_nanos: f64,
    /// Whether `cpu_nanos` is an estimate.
    pub cpu_extrapolated: bool,
    /// Whether `wall_nanos` is an estimate.
    pub wall_extrapolated: bool,
    /// The decision in force (`None` before the first decision, or when forced to track all).
    pub decision: Option<Decision>,
    /// How many times the sampler calibrated again because the function's cost drifted.
    pub recalibrations: u32,
}

impl FunctionStats {
    /// `full`; `sampled 1/N` with N the ratio of vectors to CPU-timed vectors; or `wall
    /// only` when no vector was CPU-timed yet (the CPU time is then estimated from wall).
    pub fn mode_label(&self) -> String {
        if self.cpu_timed_vectors >= self.vectors {
            "full".to_string()
        } else if self.cpu_timed_vectors == 0 {
            "wall only".to_string()
        } else {
            let n = self.vectors as f64 / self.cpu_timed_vectors.max(1) as f64;
            format!("sampled 1/{}", n.round() as u64)
        }
    }
}

/// SplitMix64: a tiny, fast, well-mixed generator for sampling gaps (and test data).
#[derive(Debug, Clone, Copy)]
pub struct SplitMix64(pub u64);

impl SplitMix64 {
    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A gap uniform in [⌈n/2⌉, ⌊3n/2⌋] (mean ≈ n; always 1 for n = 1).
    fn gap(&mut self, n: u32) -> u32 {
        if n <= 1 {
            return 1;
        }
        let lo = n.div_ceil(2);
        let hi = n + n / 2;
        let span = u64::from(hi - lo + 1);
        lo + (((self.next_u64() >> 32) * span) >> 32) as u32
    }
}

/// Adaptive (or full) tracking of one function call site.
#[derive(Debug, Clone)]
pub struct AdaptiveSampler {
    mode: TrackingMode,
    costs: TimerCosts,
    state: State,
    rng: SplitMix64,
    cpu_countdown: u32,
    wall_countdown: u32,
    pending: Measure,
    epoch: Epoch,
    /// Estimates of closed epochs.
    closed_cpu: f64,
    closed_wall: f64,
    closed_cpu_exact: bool,
    closed_wall_exact: bool,
    vectors: u64,
    rows: u64,
    cpu_timed: u64,
    /// Per-row cost (ns) measured at calibration, and its running average since.
    baseline_row_cost: f64,
    baseline_rows_per_vector: f64,
    row_cost_average: f64,
    recalibrations: u32,
}

impl AdaptiveSampler {
    /// A sampler for one call site; `seed` varies the sampling positions between sites.
    pub fn new(mode: TrackingMode, costs: TimerCosts, seed: u64) -> AdaptiveSampler {
        AdaptiveSampler {
            mode,
            costs,
            state: match mode {
                TrackingMode::Full => State::Forced,
                TrackingMode::Adaptive { .. } => State::Warmup,
            },
            rng: SplitMix64(seed),
            cpu_countdown: 1,
            wall_countdown: 1,
            pending: Measure::Nothing,
            epoch: Epoch::default(),
            closed_cpu: 0.0,
            closed_wall: 0.0,
            closed_cpu_exact: true,
            closed_wall_exact: true,
            vectors: 0,
            rows: 0,
            cpu_timed: 0,
            baseline_row_cost: 0.0,
            baseline_rows_per_vector: 0.0,
            row_cost_average: 0.0,
            recalibrations: 0,
        }
    }

    /// What to measure around the next call.
    pub fn next_measure(&mut self) -> Measure {
        self.pending = match self.state {
            State::Forced | State::Decided(Decision::Always) => Measure::CpuAndWall,
            // the warm-up vector's cost is not used to decide (cold caches), but its wall
            // time still counts in the estimate: a site called once is not left blank
            State::Warmup => Measure::Wall,
            State::Calibrating { .. } => Measure::Wall,
            State::Decided(Decision::Sample {
                cpu_every,
                wall_every,
            }) => {
                self.cpu_countdown -= 1;
                self.wall_countdown -= 1;
                if self.cpu_countdown == 0 {
                    self.cpu_countdown = self.rng.gap(cpu_every);
                    self.wall_countdown = self.wall_countdown.max(1);
                    Measure::CpuAndWall
                } else if self.wall_countdown == 0 {
                    self.wall_countdown = self.rng.gap(wall_every);
                    Measure::Wall
                } else {
                    Measure::Nothing
                }
            }
        };
        self.pending
    }

    /// How many of the coming vectors need no measurement at all. A caller may count those
    /// itself, skip [`AdaptiveSampler::next_measure`] for them, and report them in bulk with
    /// [`AdaptiveSampler::record_unmeasured`] before the next measured one: the fast path of
    /// a sampled call then touches no sampler state.
    pub fn unmeasured_run(&self) -> u32 {
        match self.state {
            State::Decided(Decision::Sample { .. }) => self
                .cpu_countdown
                .min(self.wall_countdown)
                .saturating_sub(1),
            _ => 0,
        }
    }

    /// Records `vectors` calls over `rows` rows that measured nothing, as announced by
    /// [`AdaptiveSampler::unmeasured_run`]; the same as stepping through them one by one.
    pub fn record_unmeasured(&mut self, vectors: u32, rows: u64) {
        if vectors == 0 {
            return;
        }
        debug_assert!(
            vectors <= self.unmeasured_run(),
            "more vectors than the run"
        );
        let n = vectors.min(self.unmeasured_run());
        self.cpu_countdown -= n;
        self.wall_countdown -= n;
        self.vectors += u64::from(vectors);
        self.rows += rows;
        self.epoch.vectors += u64::from(vectors);
        self.epoch.rows += rows;
    }

    /// Records the call announced by the last [`AdaptiveSampler::next_measure`]: its rows and what
    /// was measured.
    pub fn record(&mut self, rows: u64, m: Measurement) {
        self.vectors += 1;
        self.rows += rows;
        self.epoch.vectors += 1;
        self.epoch.rows += rows;
        let wall = m.wall_nanos.map(|w| w as f64 - self.costs.wall_bias_nanos);
        if let Some(w) = wall {
            self.epoch.wall_samples += 1;
            self.epoch.wall_sample_rows += rows;
            self.epoch.wall_sum += w;
        }
        if let (Some(c), Some(raw), Some(w)) = (m.cpu_nanos, m.wall_nanos, wall) {
            let cpu = Self::cpu_in_wall_region(c, raw, w, &self.costs);
            self.epoch.cpu_samples += 1;
            self.epoch.cpu_sum += cpu;
            self.epoch.cpu_wall_sum += w;
            self.cpu_timed += 1;
        }
        match self.state {
            State::Forced | State::Decided(Decision::Always) => {}
            State::Warmup => {
                self.state = State::Calibrating {
                    done: 0,
                    wall: 0.0,
                    rows: 0,
                };
            }
            State::Calibrating {
                done,
                wall: sum,
                rows: sum_rows,
            } => {
                let (done, sum, sum_rows) = match (wall, rows) {
                    // empty vectors say nothing about the cost
                    (Some(w), r) if r > 0 => (done + 1, sum + w, sum_rows + r),
                    _ => (done, sum, sum_rows),
                };
                self.state = if done >= CALIBRATION_VECTORS {
                    self.decide(sum, done, sum_rows)
                } else {
                    State::Calibrating {
                        done,
                        wall: sum,
                        rows: sum_rows,
                    }
                };
            }
            State::Decided(Decision::Sample { .. }) => {
                if let (Some(w), true) = (wall, rows > 0) {
                    let x = w.max(0.0) / rows as f64;
                    self.row_cost_average += (x - self.row_cost_average) / 16.0;
                }
                // drift is judged when a sample arrives, so counting unmeasured vectors in
                // bulk (`record_unmeasured`) decides exactly as stepping through them would
                if wall.is_some() && self.drifted() {
                    self.recalibrations += 1;
                    self.close_epoch();
                    self.state = State::Calibrating {
                        done: 0,
                        wall: 0.0,
                        rows: 0,
                    };
                }
            }
        }
    }

    /// The CPU time spent inside a wall-timed region, from a CPU clock reading `cpu` that
    /// brackets it (raw wall reading `wall_raw`, `wall` without the wall clock's bias).
    ///
    /// The CPU clock's reads cost hundreds of nanoseconds, and how much of that lands inside
    /// its reading varies from call to call by more than a cheap function costs; the wall
    /// clock's reads cost nanoseconds. So while the CPU clock advanced at least as much as
    /// the wall clock, the thread ran through the whole region and its wall time is its CPU
    /// time. Only when the CPU clock advanced less did the thread wait (a wait costs a
    /// context switch, microseconds): then the CPU reading less its bias is the estimate.
    fn cpu_in_wall_region(cpu: u64, wall_raw: u64, wall: f64, costs: &TimerCosts) -> f64 {
        let wall = wall.max(0.0);
        if cpu >= wall_raw {
            wall
        } else {
            (cpu as f64 - costs.cpu_bias_nanos).clamp(0.0, wall)
        }
    }

    fn decide(&mut self, wall_sum: f64, vectors: u32, rows: u64) -> State {
        let TrackingMode::Adaptive { max_overhead_pct } = self.mode else {
            return State::Forced;
        };
        let per_vector = (wall_sum / f64::from(vectors)).max(1.0);
        self.baseline_row_cost = wall_sum.max(0.0) / rows.max(1) as f64;
        self.row_cost_average = self.baseline_row_cost;
        self.baseline_rows_per_vector = rows as f64 / f64::from(vectors);
        let budget = max_overhead_pct / 100.0 * per_vector;
        // the calibration vectors belong to an epoch of their own
        self.close_epoch();
        self.cpu_countdown = 1;
        self.wall_countdown = 1;
        if self.costs.cpu_timer_nanos <= budget {
            State::Decided(Decision::Always)
        } else {
            let every = |cost: f64| {
                (2.0 * cost / budget)
                    .ceil()
                    .clamp(1.0, f64::from(1u32 << 20)) as u32
            };
            let cpu_every = every(self.costs.cpu_timer_nanos).max(2);
            let wall_every = every(self.costs.wall_timer_nanos).min(cpu_every);
            State::Decided(Decision::Sample {
                cpu_every,
                wall_every,
            })
        }
    }

    fn drifted(&self) -> bool {
        let e = &self.epoch;
        if e.wall_samples < DRIFT_MIN_SAMPLES || e.vectors < DRIFT_MIN_VECTORS {
            return false;
        }
        let base = self.baseline_row_cost;
        let cost_moved = base > 0.0
            && (self.row_cost_average > 2.0 * base || self.row_cost_average < 0.5 * base);
        let rows_per_vector = e.rows as f64 / e.vectors as f64;
        let size_moved = self.baseline_rows_per_vector > 0.0
            && (rows_per_vector > 2.0 * self.baseline_rows_per_vector
                || rows_per_vector < 0.5 * self.baseline_rows_per_vector);
        cost_moved || size_moved
    }

    /// The estimate of an epoch: (cpu, wall, cpu exact, wall exact).
    fn estimate(e: &Epoch, cpu_bias: f64) -> (f64, f64, bool, bool) {
        if e.vectors == 0 {
            return (0.0, 0.0, true, true);
        }
        let wall_exact = e.wall_samples == e.vectors;
        let cpu_exact = e.cpu_samples == e.vectors;
        let wall_total = e.wall_sum.max(0.0);
        let wall = if wall_exact {
            wall_total
        } else if e.wall_sample_rows > 0 {
            // weighted by rows: small tail batches do not skew the estimate
            wall_total * e.rows as f64 / e.wall_sample_rows as f64
        } else if e.wall_samples > 0 {
            wall_total * e.vectors as f64 / e.wall_samples as f64
        } else {
            0.0
        };
        let cpu = if cpu_exact {
            e.cpu_sum.max(0.0)
        } else {
            // CPU share of wall time from the CPU-timed vectors, pulled towards 1 while
            // there are few of them
            let prior = 20.0 * cpu_bias.max(1.0);
            let ratio =
                ((e.cpu_sum.max(0.0) + prior) / (e.cpu_wall_sum.max(0.0) + prior)).clamp(0.0, 1.0);
            wall * ratio
        };
        (cpu, wall, cpu_exact, wall_exact)
    }

    fn close_epoch(&mut self) {
        let (cpu, wall, cpu_exact, wall_exact) =
            Self::estimate(&self.epoch, self.costs.cpu_bias_nanos);
        self.closed_cpu += cpu;
        self.closed_wall += wall;
        self.closed_cpu_exact &= cpu_exact;
        self.closed_wall_exact &= wall_exact;
        self.epoch = Epoch::default();
    }

    /// The estimates so far.
    pub fn stats(&self) -> FunctionStats {
        let (cpu, wall, cpu_exact, wall_exact) =
            Self::estimate(&self.epoch, self.costs.cpu_bias_nanos);
        FunctionStats {
            vectors: self.vectors,
            rows: self.rows,
            cpu_timed_vectors: self.cpu_timed,
            cpu_nanos: self.closed_cpu + cpu,
            wall_nanos: self.closed_wall + wall,
            cpu_extrapolated: !(self.closed_cpu_exact && cpu_exact),
            wall_extrapolated: !(self.closed_wall_exact && wall_exact),
            decision: match self.state {
                State::Decided(d) => Some(d),
                _ => None,
            },
            recalibrations: self.recalibrations,
        }
    }
}
