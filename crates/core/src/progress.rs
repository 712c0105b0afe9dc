//! How far a running query got and how long it has left.
//!
//! The work of a query is the rows its operators produce. Each operator's share is the
//! rows the optimizer expected it to produce (its [`Estimate`](crate::profile::Estimate),
//! exact for a file scan whose footers give its row count), or, without an estimate, the
//! rows its inputs bring (a join over a stream of unknown size weighs what its inputs do).
//! An operator whose every task has ended is done. A source still running (a scan) is as
//! far as its rows against what it holds; any other operator still running is as far as
//! its inputs, by their shares: a join whose build side was read waits on its probe
//! side, and reads as far as that. Neither is ever done before it ends. So a query
//! reaches its end only when its last operator does, and each stage is the same sum over
//! its own operators. Work an operator does after its inputs ended (a join's output
//! larger than its inputs) shows only as its end: the fraction then waits below 100 %.
//!
//! [`ProgressTracker`] turns those readings, taken over time, into what a user sees: a
//! fraction that never reads 100 % before the end and never moves back by more than
//! [`MAX_BACKWARD`], and the time left at the rate of the last [`RATE_WINDOW`].

use std::collections::{BTreeMap, VecDeque};
use std::time::Duration;

use crate::profile::{ProfileNode, QueryProfile, names};

/// The most a running query's fraction reads: only its end makes it 100 %.
pub const RUNNING_CAP: f64 = 0.99;

/// The most a running operator counts as done, however many rows it produced: an
/// estimate can be short, and only its end shows it done.
pub const OPERATOR_CAP: f64 = 0.95;

/// How far a shown fraction may move back between two readings (a scan whose estimate
/// was short, an operator found larger than expected).
pub const MAX_BACKWARD: f64 = 0.02;

/// The span of readings the rate (and so the time left) is taken over.
pub const RATE_WINDOW: Duration = Duration::from_secs(10);

/// The work a query's profile shows done, by stage and in all.
#[derive(Debug, Clone, PartialEq)]
pub struct WorkDone {
    /// The query's fraction done, 0 to 1.
    pub fraction: f64,
    /// Each stage's fraction done, by stage id.
    pub stages: Vec<StageDone>,
}

/// How far one stage got.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StageDone {
    /// The stage's id in the profile.
    pub stage_id: u32,
    /// Its fraction done, 0 to 1.
    pub fraction: f64,
}

/// One operator's share of the work and how much of it is done.
#[derive(Debug, Clone, Copy)]
struct OperatorWork {
    stage_id: Option<u32>,
    weight: f64,
    done: f64,
}

impl WorkDone {
    /// The work `profile` (a running query's snapshot, or an ended one) shows done.
    pub fn of(profile: &QueryProfile) -> WorkDone {
        let mut work = Vec::new();
        let leaf_weight = mean_leaf_estimate(&profile.plan);
        let _ = operator_work(&profile.plan, leaf_weight, &mut work);
        let fraction = weighted(work.iter());
        let mut by_stage: BTreeMap<u32, Vec<OperatorWork>> = BTreeMap::new();
        for w in &work {
            if let Some(stage) = w.stage_id {
                by_stage.entry(stage).or_default().push(*w);
            }
        }
        WorkDone {
            fraction,
            stages: by_stage
                .into_iter()
                .map(|(stage_id, work)| StageDone {
                    stage_id,
                    fraction: weighted(work.iter()),
                })
                .collect(),
        }
    }
}

/// The weighted mean of the operators' fractions done (0 without work).
fn weighted<'a>(work: impl Iterator<Item = &'a OperatorWork>) -> f64 {
    let (total, done) = work.fold((0.0, 0.0), |(total, done), w| {
        (total + w.weight, done + w.weight * w.done)
    });
    if total > 0.0 {
        (done / total).clamp(0.0, 1.0)
    } else {
        0.0
    }
}

/// The rows the optimizer expected of `node`, if it said.
fn estimated_rows(node: &ProfileNode) -> Option<f64> {
    node.estimate
        .and_then(|e| e.rows.value())
        .map(|rows| rows as f64)
}

/// The mean estimate of the plan's leaves that have one (1 if none has): the share of a
/// leaf without one.
fn mean_leaf_estimate(plan: &ProfileNode) -> f64 {
    let estimates: Vec<f64> = plan
        .iter()
        .filter(|n| n.children.is_empty())
        .filter_map(estimated_rows)
        .collect();
    if estimates.is_empty() {
        1.0
    } else {
        (estimates.iter().sum::<f64>() / estimates.len() as f64).max(1.0)
    }
}

/// Adds the work of `node` and its descendants to `work`; returns `node`'s share and
/// how far it got.
fn operator_work(node: &ProfileNode, leaf_weight: f64, work: &mut Vec<OperatorWork>) -> (f64, f64) {
    let inputs: Vec<(f64, f64)> = node
        .children
        .iter()
        .map(|child| operator_work(child, leaf_weight, work))
        .collect();
    let rows = node.value(names::OUTPUT_ROWS).unwrap_or(0).max(0) as f64;
    let expected = estimated_rows(node).unwrap_or_else(|| {
        if inputs.is_empty() {
            leaf_weight
        } else {
            inputs.iter().map(|(w, _)| *w).fold(0.0, f64::max)
        }
    });
    let weight = expected.max(rows).max(1.0);
    let ended =
        !node.task_spans.is_empty() && node.task_spans.iter().all(|s| s.finish_epoch_micros > 0);
    let done = if ended {
        1.0
    } else if inputs.is_empty() {
        // a source: its rows against what it holds
        (rows / weight).min(OPERATOR_CAP)
    } else {
        // an operator over inputs: as far as they got (a join as far as its build and
        // probe sides, an aggregate as its input)
        let (total, done) = inputs
            .iter()
            .fold((0.0, 0.0), |(t, d), (w, f)| (t + w, d + w * f));
        (done / total).min(OPERATOR_CAP)
    };
    work.push(OperatorWork {
        stage_id: node.stage_id,
        weight,
        done,
    });
    (weight, done)
}

/// What a user sees of a running query's progress.
#[derive(Debug, Clone, PartialEq)]
pub struct Progress {
    /// Fraction done, 0 to 1 (1 only once the query ended).
    pub fraction: f64,
    /// Time left at the recent rate; `None` until there is a rate.
    pub eta: Option<Duration>,
    /// Each stage's fraction done, as the last reading showed it.
    pub stages: Vec<StageDone>,
}

impl Progress {
    /// The terminal's rendering, `width` cells of bar, its percentage (rounded down, so
    /// a running query never shows 100 %) and the time left:
    /// `[#########-----------]  45 %  12.5 s left`.
    pub fn bar(&self, width: usize) -> String {
        let fraction = self.fraction.clamp(0.0, 1.0);
        let filled = ((fraction * width as f64) as usize).min(width);
        let percent = (fraction * 100.0).floor() as u32;
        let left = match self.eta {
            Some(eta) => {
                let millis = i64::try_from(eta.as_millis()).unwrap_or(i64::MAX);
                format!("{} left", crate::format::millis(millis))
            }
            None => "time left unknown".to_string(),
        };
        format!(
            "[{}{}] {percent:>3} %  {left}",
            "#".repeat(filled),
            "-".repeat(width - filled)
        )
    }
}

/// Turns readings of a query's work over time into its shown progress: capped below 1
/// until the end, moving back by at most [`MAX_BACKWARD`] a reading, and the time left
/// at the rate of the last [`RATE_WINDOW`] of readings.
#[derive(Debug, Clone, Default)]
pub struct ProgressTracker {
    shown: f64,
    /// (time since the query started, fraction shown), oldest first, within the window.
    readings: VecDeque<(Duration, f64)>,
}

impl ProgressTracker {
    /// A tracker for a query that has just started.
    pub fn new() -> ProgressTracker {
        ProgressTracker::default()
    }

    /// Takes the reading `work` of a running query, `elapsed` after it started (readings
    /// come in time order); returns what to show.
    pub fn update(&mut self, elapsed: Duration, work: WorkDone) -> Progress {
        let fraction = work
            .fraction
            .min(RUNNING_CAP)
            .max(self.shown - MAX_BACKWARD)
            .clamp(0.0, RUNNING_CAP);
        self.shown = fraction;
        // a reading out of order (two readers racing) is shown but not kept: the window
        // stays in time order
        if self.readings.back().is_none_or(|(t, _)| *t <= elapsed) {
            self.readings.push_back((elapsed, fraction));
            while self
                .readings
                .get(1)
                .is_some_and(|(t, _)| elapsed.saturating_sub(*t) >= RATE_WINDOW)
            {
                self.readings.pop_front();
            }
        }
        Progress {
            fraction,
            eta: self.eta(),
            stages: work.stages,
        }
    }

    /// What to show of a query that ended.
    pub fn ended(&mut self, work: WorkDone) -> Progress {
        self.shown = 1.0;
        Progress {
            fraction: 1.0,
            eta: Some(Duration::ZERO),
            stages: work.stages,
        }
    }

    /// The time left at the rate between the window's first reading (or the query's
    /// start, while there is one reading) and its last.
    fn eta(&self) -> Option<Duration> {
        let &(now, fraction) = self.readings.back()?;
        let (then, before) = match self.readings.front() {
            Some(&first) if self.readings.len() > 1 => first,
            _ => (Duration::ZERO, 0.0),
        };
        let seconds = now.saturating_sub(then).as_secs_f64();
        let rate = (fraction - before) / seconds;
        if seconds <= 0.0 || !rate.is_finite() || rate <= 0.0 {
            return None;
        }
        Duration::try_from_secs_f64((1.0 - fraction) / rate).ok()
    }
}

#[cfg(test)]
mod tests;
