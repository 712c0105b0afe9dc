//! The stack sampler against a thread that spins in a known function, inside a frame.

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::*;
use crate::attribution;
use crate::clock::SystemClock;
use crate::counters::OperatorTaskCounters;

/// Work whose frame the samples must show; not inlined, so it keeps its own symbol.
#[inline(never)]
fn spin_for_the_stack_sampler(rounds: u64) -> u64 {
    let mut x = 0x9e37_79b9_7f4a_7c15_u64;
    for i in 0..rounds {
        x = std::hint::black_box(x.rotate_left(7) ^ i.wrapping_mul(0x2545_f491_4f6c_dd1d));
    }
    x
}

fn task_ref(task_id: u64) -> TaskRef {
    TaskRef {
        stage_id: 0,
        stage_attempt: 0,
        task_id,
        partition: 0,
    }
}

#[test]
fn a_rate_outside_the_range_is_refused() {
    assert_eq!(
        SamplingSession::start(0).unwrap_err(),
        StackSamplerError::Rate(0)
    );
    assert_eq!(
        SamplingSession::start(MAX_HZ + 1).unwrap_err(),
        StackSamplerError::Rate(MAX_HZ + 1)
    );
}

#[test]
fn samples_name_the_operator_task_and_the_function_running_in_it() {
    let session = SamplingSession::start(MAX_HZ).expect("the sampler starts");
    let busy = Arc::new(OperatorTaskCounters::new());
    let idle = Arc::new(OperatorTaskCounters::new());
    let tasks = [
        (busy.sample_key(), 3, Some(task_ref(1))),
        (idle.sample_key(), 4, Some(task_ref(2))),
    ];
    let call_sites = HashMap::from([(77, "spin(x)".to_string())]);
    let mut taken = StackSamples::default();
    let deadline = Instant::now() + Duration::from_secs(60);
    // burn CPU inside the busy task's frame until 50 samples came from it
    while taken.total() < 50 {
        assert!(Instant::now() < deadline, "fewer than 50 samples in 60 s");
        {
            let _frame = attribution::enter(&SystemClock, &busy);
            let _call = CallSiteFrame::enter(77);
            std::hint::black_box(spin_for_the_stack_sampler(2_000_000));
        }
        taken.merge(StackSamples::take(&session, &tasks, &call_sites, |name| {
            name.ends_with("samples_name_the_operator_task_and_the_function_running_in_it")
        }));
    }
    // the kernel may send fewer signals than asked (never more): a sample stands for at
    // least about the rate's period
    let nominal = session.nominal_period_nanos();
    assert!(
        taken.period_nanos * 5 >= nominal * 4,
        "a sample stands for {} ns, the rate's period is {nominal} ns",
        taken.period_nanos
    );
    assert!(
        taken
            .stacks
            .iter()
            .all(|s| s.node_id == 3 && s.task == Some(task_ref(1))),
        "only the busy task ran: {:?}",
        taken.stacks.iter().map(|s| s.node_id).collect::<Vec<_>>()
    );
    let with_spin: u64 = taken
        .stacks
        .iter()
        .filter(|s| {
            taken
                .names(s)
                .any(|n| n.ends_with("spin_for_the_stack_sampler"))
        })
        .map(|s| s.count)
        .sum();
    let total = taken.total();
    assert!(
        with_spin * 10 >= total * 9,
        "{with_spin} of {total} samples show the spinning function; a stack: {:?}",
        taken
            .stacks
            .first()
            .map(|s| taken.names(s).collect::<Vec<_>>())
    );
    // every stack starts below the entry frame (the test), and ends at the interrupted
    // code, not in the signal handler (but for a sample that caught the test between two
    // calls, in its frame's own code)
    let from_spin: u64 = taken
        .stacks
        .iter()
        .filter(|s| {
            taken
                .names(s)
                .next()
                .is_some_and(|outermost| outermost.ends_with("spin_for_the_stack_sampler"))
        })
        .map(|s| s.count)
        .sum();
    assert!(from_spin * 10 >= total * 9, "{from_spin} of {total}");
    // the samples taken in the call carry its site, the outermost frame of their folded
    // stacks
    let in_call: u64 = taken
        .stacks
        .iter()
        .filter(|s| taken.call_site(s) == Some("spin(x)"))
        .map(|s| s.count)
        .sum();
    assert!(
        in_call * 10 >= total * 9,
        "{in_call} of {total} in the call"
    );
    assert!(
        !taken.stacks.iter().any(|s| taken
            .names(s)
            .any(|n| n.contains("trace_unsynchronized") || n.contains("on_sigprof"))),
        "a stack holds the sampler's own frames"
    );
    let operator = taken.operator(3, 3).expect("the busy operator has samples");
    assert_eq!(operator.samples, total);
    assert_eq!(operator.sampled_nanos, total * taken.period_nanos);
    assert!(taken.operator(4, 3).is_none());
    let folded = taken.folded(Some(3), |n| format!("op {n}"));
    let folded_total: u64 = folded.iter().map(|(_, count)| count).sum();
    assert_eq!(folded_total, total);
    let under_call: u64 = folded
        .iter()
        .filter(|(line, _)| line.starts_with("fn spin(x);"))
        .map(|(_, count)| count)
        .sum();
    assert_eq!(under_call, in_call);
}
