//! The progress of hand-built profiles: how far operators and stages got, and what a
//! tracker shows of readings taken at known times.

use proptest::prelude::*;

use super::*;
use crate::metric::{MetricKind, TaskRef, TaskValue};
use crate::profile::{Estimate, Estimated, NodeMetric, OperatorText, TaskSpan, fixtures};

/// An operator of stage `stage` that produced `rows` so far, expected `estimate`, and
/// whose one task `ended` or not.
fn operator(
    id: usize,
    stage: u32,
    estimate: Estimated,
    rows: i64,
    ended: bool,
    children: Vec<ProfileNode>,
) -> ProfileNode {
    let task = TaskRef {
        stage_id: stage,
        stage_attempt: 0,
        task_id: id as u64,
        partition: 0,
    };
    ProfileNode {
        id,
        name: format!("op{id}"),
        display: OperatorText::default(),
        stage_id: Some(stage),
        metrics: vec![NodeMetric::summed(
            names::OUTPUT_ROWS,
            names::OUTPUT_ROWS,
            MetricKind::Sum,
            vec![TaskValue {
                task: Some(task),
                value: rows,
            }],
        )],
        info: Vec::new(),
        functions: Vec::new(),
        task_spans: vec![TaskSpan {
            task,
            start_epoch_micros: 1,
            finish_epoch_micros: u64::from(ended),
        }],
        estimate: Some(Estimate {
            rows: estimate,
            bytes: Estimated::Absent,
        }),
        children,
    }
}

fn query(plan: ProfileNode) -> QueryProfile {
    QueryProfile {
        plan,
        ..fixtures::sample()
    }
}

/// A projection over a scan of 1,000 rows (its footers say so), `read` of them read.
fn scan_of_known_size(read: i64) -> QueryProfile {
    let scan = operator(1, 0, Estimated::Exact(1_000), read, false, vec![]);
    query(operator(
        0,
        0,
        Estimated::Exact(1_000),
        read,
        false,
        vec![scan],
    ))
}

#[test]
fn fraction_and_time_left_follow_the_reads_of_a_scan_of_known_size() {
    let mut tracker = ProgressTracker::new();
    let at = Duration::from_secs;
    let first = tracker.update(at(1), WorkDone::of(&scan_of_known_size(250)));
    assert_eq!(first.fraction, 0.25);
    // one reading: the rate since the start, a quarter a second
    assert_eq!(first.eta, Some(at(3)));
    let second = tracker.update(at(2), WorkDone::of(&scan_of_known_size(500)));
    assert_eq!(second.fraction, 0.5);
    assert_eq!(second.eta, Some(at(2)));
    // the reads slow down to a tenth a second: the time left grows
    let third = tracker.update(at(12), WorkDone::of(&scan_of_known_size(600)));
    assert!((third.fraction - 0.6).abs() < 1e-9, "{third:?}");
    // the window starts at the second reading: 0.1 in 10 s, 0.4 left
    assert_eq!(third.eta.map(|d| d.as_millis()), Some(40_000));
    let ended = tracker.ended(WorkDone::of(&scan_of_known_size(1_000)));
    assert_eq!((ended.fraction, ended.eta), (1.0, Some(Duration::ZERO)));
}

#[test]
fn a_join_whose_build_side_was_read_is_as_far_as_its_probe_side() {
    // a join's build side, a scan of 1,000 rows, ended; its probe side, a scan of 100,000
    // rows, has read 1,000 of them; an aggregate of unknown size over the join
    let build = operator(3, 0, Estimated::Exact(1_000), 1_000, true, vec![]);
    let probe = operator(4, 1, Estimated::Exact(100_000), 1_000, false, vec![]);
    let join = operator(
        2,
        1,
        Estimated::Inexact(100_000),
        1_000,
        false,
        vec![build, probe],
    );
    let top = operator(1, 1, Estimated::Absent, 0, false, vec![join]);
    let work = WorkDone::of(&query(top));
    assert!(work.fraction < 0.05, "{work:?}");
    let stages: Vec<(u32, f64)> = work
        .stages
        .iter()
        .map(|s| (s.stage_id, s.fraction))
        .collect();
    assert_eq!(
        stages[0],
        (0, 1.0),
        "the build side's stage is done: {work:?}"
    );
    assert_eq!(stages[1].0, 1);
    assert!(stages[1].1 < 0.05, "{work:?}");
    // the probe side read to its end, its stream not yet: the join is not done either
    let build = operator(3, 0, Estimated::Exact(1_000), 1_000, true, vec![]);
    let probe = operator(4, 1, Estimated::Exact(100_000), 100_000, false, vec![]);
    let join = operator(
        2,
        1,
        Estimated::Inexact(100_000),
        9_000_000,
        false,
        vec![build, probe],
    );
    let work = WorkDone::of(&query(join));
    assert!(work.fraction < 1.0, "{work:?}");
    assert_eq!(work.stages[1].fraction, OPERATOR_CAP, "{work:?}");
}

#[test]
fn an_operator_without_an_estimate_weighs_as_its_largest_input() {
    let scan = operator(2, 0, Estimated::Exact(1_000), 500, false, vec![]);
    let stream = operator(3, 0, Estimated::Absent, 0, false, vec![]);
    let union = operator(1, 0, Estimated::Absent, 500, false, vec![scan, stream]);
    // the stream weighs as the mean known source (1,000), the union as 1,000: scan 0.5,
    // stream 0, union as its inputs (0.25)
    let work = WorkDone::of(&query(union));
    assert!((work.fraction - 0.25).abs() < 1e-9, "{work:?}");
}

#[test]
fn a_running_operator_past_its_estimate_is_not_done() {
    let scan = operator(1, 0, Estimated::Inexact(100), 5_000, false, vec![]);
    let work = WorkDone::of(&query(scan));
    assert_eq!(work.fraction, OPERATOR_CAP);
    let mut tracker = ProgressTracker::new();
    let shown = tracker.update(Duration::from_secs(1), work);
    assert!(shown.fraction < 1.0);
}

#[test]
fn a_query_without_any_reading_has_done_nothing_and_no_eta() {
    let scan = operator(1, 0, Estimated::Absent, 0, false, vec![]);
    let mut tracker = ProgressTracker::new();
    let shown = tracker.update(Duration::from_secs(3), WorkDone::of(&query(scan)));
    assert_eq!((shown.fraction, shown.eta), (0.0, None));
}

proptest! {
    #[test]
    fn the_shown_fraction_stays_below_the_cap_and_moves_back_by_at_most_the_bound(
        raw in proptest::collection::vec((0.0f64..=1.5, 1u64..5_000), 1..60),
    ) {
        let mut tracker = ProgressTracker::new();
        let mut elapsed = Duration::ZERO;
        let mut last = 0.0f64;
        for (fraction, step) in raw {
            elapsed += Duration::from_millis(step);
            let shown = tracker.update(elapsed, WorkDone { fraction, stages: Vec::new() });
            prop_assert!(shown.fraction <= RUNNING_CAP);
            prop_assert!(shown.fraction >= 0.0);
            prop_assert!(shown.fraction >= last - MAX_BACKWARD - 1e-12);
            if let Some(eta) = shown.eta {
                prop_assert!(eta.as_secs_f64().is_finite());
            }
            last = shown.fraction;
        }
    }
}

#[test]
fn the_terminal_bar_shows_the_fraction_and_the_time_left() {
    let bars: Vec<String> = [
        (0.0, None),
        (0.456, Some(Duration::from_millis(12_500))),
        (0.999, Some(Duration::from_millis(80))),
        (1.0, Some(Duration::ZERO)),
    ]
    .into_iter()
    .map(|(fraction, eta)| {
        Progress {
            fraction,
            eta,
            stages: Vec::new(),
        }
        .bar(20)
    })
    .collect();
    insta::assert_snapshot!(bars.join("\n"), @r"
    [--------------------]   0 %  time left unknown
    [#########-----------]  45 %  12.5 s left
    [###################-]  99 %  80 ms left
    [####################] 100 %  0 ms left
    ");
}
