//! Tests of the adaptive sampler: its decisions, its estimates against a fake clock's truth,
//! and its invariants under random inputs.

use super::*;
use proptest::prelude::*;

/// This machine's costs: a CPU-timed call costs 1.3 µs, a wall-timed one 30 ns.
fn costs() -> TimerCosts {
    TimerCosts {
        cpu_timer_nanos: 1300.0,
        wall_timer_nanos: 30.0,
        cpu_bias_nanos: 0.0,
        wall_bias_nanos: 0.0,
    }
}

/// Drives a sampler over vectors whose true cost is `cost(i, rows)` ns (CPU = wall), as
/// a fake clock would report it; returns (stats, true total, timer cost spent).
fn drive(
    s: &mut AdaptiveSampler,
    batches: impl Iterator<Item = (u64, f64)>,
) -> (FunctionStats, f64, f64) {
    let (mut truth, mut spent) = (0.0, 0.0);
    for (rows, cost) in batches {
        truth += cost;
        let m = match s.next_measure() {
            Measure::Nothing => Measurement::default(),
            Measure::Wall => {
                spent += costs().wall_timer_nanos;
                Measurement {
                    wall_nanos: Some(cost as u64),
                    cpu_nanos: None,
                }
            }
            Measure::CpuAndWall => {
                spent += costs().cpu_timer_nanos;
                Measurement {
                    wall_nanos: Some(cost as u64),
                    cpu_nanos: Some(cost as u64),
                }
            }
        };
        s.record(rows, m);
    }
    (s.stats(), truth, spent)
}

fn adaptive(pct: f64, seed: u64) -> AdaptiveSampler {
    AdaptiveSampler::new(
        TrackingMode::Adaptive {
            max_overhead_pct: pct,
        },
        costs(),
        seed,
    )
}

#[test]
fn timer_costs_are_measured_without_timing_assertions() {
    // real clocks: only sanity (their speed is a benchmark's business)
    let costs = TimerCosts::measure(&crate::clock::SystemClock, 21, 8);
    for v in [
        costs.cpu_timer_nanos,
        costs.wall_timer_nanos,
        costs.cpu_bias_nanos,
        costs.wall_bias_nanos,
    ] {
        assert!(v.is_finite() && v >= 0.0, "{costs:?}");
    }
    // a frozen fake clock costs nothing and reports no bias
    let frozen = TimerCosts::measure(&crate::clock::ManualClock::new(), 5, 2);
    assert_eq!(
        frozen,
        TimerCosts {
            cpu_timer_nanos: 0.0,
            wall_timer_nanos: 0.0,
            cpu_bias_nanos: 0.0,
            wall_bias_nanos: 0.0
        }
    );
}

#[test]
fn the_median_ignores_one_cold_sample() {
    let mut samples = vec![700.0, 710.0, 50_000.0, 705.0, 690.0];
    assert_eq!(median(&mut samples), 705.0);
    assert_eq!(median(&mut []), 0.0);
}

#[test]
fn a_cheap_function_is_sampled_at_the_rate_the_budget_allows() {
    let mut s = adaptive(1.0, 1);
    // warm-up, then 5 calibration vectors of 150 ns
    for _ in 0..6 {
        assert_ne!(
            s.next_measure(),
            Measure::CpuAndWall,
            "calibration must not read the CPU clock"
        );
        s.record(
            100,
            Measurement {
                wall_nanos: Some(150),
                cpu_nanos: None,
            },
        );
    }
    // budget 1.5 ns per vector: CPU every ceil(2·1300/1.5) = 1734, wall every 40
    assert_eq!(
        s.stats().decision,
        Some(Decision::Sample {
            cpu_every: 1734,
            wall_every: 40
        })
    );
    // the first vector after the decision is always CPU-timed
    assert_eq!(s.next_measure(), Measure::CpuAndWall);
}

#[test]
fn a_site_called_once_still_has_an_estimate() {
    let mut s = adaptive(1.0, 1);
    assert_eq!(s.next_measure(), Measure::Wall);
    s.record(
        100,
        Measurement {
            wall_nanos: Some(5_000),
            cpu_nanos: None,
        },
    );
    let stats = s.stats();
    assert_eq!((stats.vectors, stats.cpu_timed_vectors), (1, 0));
    assert_eq!(stats.wall_nanos, 5_000.0);
    assert!(stats.cpu_nanos > 0.0 && stats.cpu_nanos <= 5_000.0);
    assert!(stats.cpu_extrapolated && !stats.wall_extrapolated);
    assert_eq!(stats.mode_label(), "wall only");
}

#[test]
fn an_expensive_function_is_always_tracked() {
    let mut s = adaptive(1.0, 1);
    let (stats, truth, _) = drive(&mut s, (0..1000).map(|_| (10_000, 1_000_000.0)));
    assert_eq!(stats.decision, Some(Decision::Always));
    // warm-up and calibration were not CPU-timed: those 6 vectors are extrapolated
    assert_eq!(stats.cpu_timed_vectors, 994);
    assert!((stats.cpu_nanos - truth).abs() / truth < 1e-9);
}

#[test]
fn forced_tracking_is_exact_from_the_first_vector() {
    let mut s = AdaptiveSampler::new(TrackingMode::Full, costs(), 7);
    let (stats, truth, _) = drive(&mut s, (0..50).map(|i| (10 + i, 100.0 + i as f64)));
    assert_eq!(stats.cpu_nanos, truth);
    assert!(!stats.cpu_extrapolated && !stats.wall_extrapolated);
    assert_eq!(stats.mode_label(), "full");
    assert_eq!(stats.rows, (0..50).map(|i| 10 + i).sum::<u64>());
}

#[test]
fn a_cpu_sample_is_its_wall_time_unless_the_thread_waited() {
    let costs = TimerCosts {
        cpu_bias_nanos: 500.0,
        ..costs()
    };
    let mut s = AdaptiveSampler::new(TrackingMode::Full, costs, 7);
    // the CPU clock's reads add 500 ± 300 ns around a 40 ns call; the wall clock is exact
    for i in 0..999u64 {
        assert_eq!(s.next_measure(), Measure::CpuAndWall);
        let noise = [-300i64, 0, 300][(i % 3) as usize];
        let m = Measurement {
            wall_nanos: Some(40),
            cpu_nanos: Some((540 + noise) as u64),
        };
        s.record(100, m);
    }
    // calls that waited: 1000 ns of wall time, 100 ns of it on the CPU; and 5000 ns of
    // wall time whose CPU reading is below the clock's bias
    for (wall, cpu) in [(1000, 600), (5000, 300)] {
        s.next_measure();
        let m = Measurement {
            wall_nanos: Some(wall),
            cpu_nanos: Some(cpu),
        };
        s.record(100, m);
    }
    let stats = s.stats();
    assert_eq!(stats.cpu_nanos, 999.0 * 40.0 + 100.0);
    assert_eq!(stats.wall_nanos, 999.0 * 40.0 + 1000.0 + 5000.0);
    assert!(!stats.cpu_extrapolated);
}

#[test]
fn bookkeeping_is_budgeted_with_the_clocks() {
    let with = costs().with_bookkeeping(50.0);
    assert_eq!(with.cpu_timer_nanos, 1350.0);
    assert_eq!(with.wall_timer_nanos, 80.0);
    assert_eq!(with.cpu_bias_nanos, costs().cpu_bias_nanos);
    // a 150 ns function at 1 %: a measured vector may cost 1.5 ns per vector on average,
    // half of it planned; dearer measured vectors are sampled more sparsely
    let decide = |costs: TimerCosts| {
        let mode = TrackingMode::Adaptive {
            max_overhead_pct: 1.0,
        };
        let mut s = AdaptiveSampler::new(mode, costs, 5);
        for _ in 0..=CALIBRATION_VECTORS {
            s.next_measure();
            let wall = Some(150);
            s.record(
                100,
                Measurement {
                    wall_nanos: wall,
                    cpu_nanos: None,
                },
            );
        }
        s.stats().decision
    };
    let sample = |cpu_every, wall_every| {
        Some(Decision::Sample {
            cpu_every,
            wall_every,
        })
    };
    assert_eq!(decide(costs()), sample(1734, 40));
    assert_eq!(decide(with), sample(1800, 107));
}

#[test]
fn overhead_stays_within_the_budget() {
    for pct in [1.0, 0.5] {
        let mut s = adaptive(pct, 3);
        let (stats, truth, spent) = drive(&mut s, (0..100_000).map(|_| (100, 150.0)));
        assert!(
            spent / truth <= pct / 100.0 * 1.05,
            "{pct}%: spent {spent} of {truth}"
        );
        assert!(stats.cpu_extrapolated);
        assert!(
            (stats.cpu_nanos - truth).abs() / truth < 0.03,
            "{pct}%: {stats:?} vs {truth}"
        );
    }
}

#[test]
fn extrapolation_weights_rows_not_vectors() {
    // alternating large and tiny batches: cost proportional to rows
    let batches = (0..20_000).map(|i| {
        if i % 2 == 0 {
            (8192, 8192.0 * 2.0)
        } else {
            (10, 20.0)
        }
    });
    let mut s = adaptive(1.0, 11);
    let (stats, truth, _) = drive(&mut s, batches);
    assert!(
        (stats.cpu_nanos - truth).abs() / truth < 0.01,
        "{} vs {truth}",
        stats.cpu_nanos
    );
}

#[test]
fn periodic_input_does_not_alias_with_the_sampling() {
    // every 4th vector costs 10×: a fixed every-Nth sampler with N divisible by 4 would
    // see only one phase; jittered gaps see all of them
    let cost = |i: u64| if i.is_multiple_of(4) { 1500.0 } else { 150.0 };
    let mut s = adaptive(1.0, 5);
    let (stats, truth, _) = drive(&mut s, (0..200_000).map(|i| (100, cost(i))));
    assert!(
        (stats.wall_nanos - truth).abs() / truth < 0.05,
        "{} vs {truth}",
        stats.wall_nanos
    );
    // the same input fools a fixed every-40th sampler by a factor of 3
    let fixed: f64 = (0..200_000).step_by(40).map(cost).sum::<f64>() * 40.0;
    assert!(fixed / truth > 2.5, "{fixed} vs {truth}");
}

#[test]
fn a_drifting_cost_triggers_one_recalibration() {
    let batches = (0..20_000).map(|i| (1000, if i < 5000 { 3000.0 } else { 6500.0 }));
    let mut s = adaptive(1.0, 9);
    let (stats, truth, _) = drive(&mut s, batches);
    assert_eq!(stats.recalibrations, 1);
    assert!((stats.wall_nanos - truth).abs() / truth < 0.03);
}

#[test]
fn skipping_unmeasured_runs_equals_stepping() {
    // the same input through both paths yields the same decisions and estimates
    let batches: Vec<(u64, f64)> = (0..5_000u64)
        .map(|i| (100 + (i * 37) % 900, 40.0 + ((i * 13) % 7) as f64))
        .collect();
    let mut stepped = adaptive(1.0, 7);
    let (expected, _, _) = drive(&mut stepped, batches.iter().copied());
    let mut skipping = adaptive(1.0, 7);
    let (mut pending_vectors, mut pending_rows, mut skip) = (0u32, 0u64, 0u32);
    let mut skipped_total = 0u64;
    for &(rows, cost) in &batches {
        if skip > 0 {
            skip -= 1;
            pending_vectors += 1;
            pending_rows += rows;
            skipped_total += 1;
            continue;
        }
        skipping.record_unmeasured(pending_vectors, pending_rows);
        (pending_vectors, pending_rows) = (0, 0);
        let m = match skipping.next_measure() {
            Measure::Nothing => Measurement::default(),
            Measure::Wall => Measurement {
                wall_nanos: Some(cost as u64),
                cpu_nanos: None,
            },
            Measure::CpuAndWall => Measurement {
                wall_nanos: Some(cost as u64),
                cpu_nanos: Some(cost as u64),
            },
        };
        skipping.record(rows, m);
        skip = skipping.unmeasured_run();
    }
    skipping.record_unmeasured(pending_vectors, pending_rows);
    assert!(
        skipped_total > 4_000,
        "the fast path was taken {skipped_total} times"
    );
    assert_eq!(skipping.stats(), expected);
}

#[test]
fn an_empty_function_estimates_about_zero() {
    let mut s = AdaptiveSampler::new(
        TrackingMode::Adaptive {
            max_overhead_pct: 1.0,
        },
        TimerCosts {
            wall_bias_nanos: 20.0,
            cpu_bias_nanos: 300.0,
            ..costs()
        },
        1,
    );
    let (stats, _, _) = drive(&mut s, (0..10_000).map(|_| (100, 20.0)));
    assert!(stats.wall_nanos.abs() < 1.0, "{stats:?}");
}

proptest! {
    #[test]
    fn vectors_and_rows_are_exact_and_estimates_bounded(
        rows in proptest::collection::vec(0u64..5000, 1..3000),
        per_row in 0.1f64..50.0,
        seed in any::<u64>(),
        pct in 0.1f64..100.0,
    ) {
        let mut s = adaptive(pct, seed);
        let (stats, truth, _) = drive(&mut s, rows.iter().map(|r| (*r, *r as f64 * per_row)));
        prop_assert_eq!(stats.vectors, rows.len() as u64);
        prop_assert_eq!(stats.rows, rows.iter().sum::<u64>());
        prop_assert!(stats.cpu_nanos >= 0.0 && stats.wall_nanos >= 0.0);
        if stats.decision == Some(Decision::Always) && !stats.cpu_extrapolated {
            prop_assert!((stats.cpu_nanos - truth).abs() <= 1.0 * rows.len() as f64);
        }
    }
}
