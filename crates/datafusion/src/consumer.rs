//! What an operator's stream can measure of its consumer, beside its own work: how long
//! the consumer waited on it (a shuffle reader's fetch wait), and the CPU the consumer
//! spent between two of its batches (a shuffle writer's own work, which no wrapper
//! frames).

use std::task::Poll;

use qprof_core::catalog::Tally;
use qprof_core::clock::ClockSource;
use qprof_core::counters::OperatorTaskCounters;

/// A key of the calling thread, unique among the threads alive (the address of a
/// thread-local).
fn thread_key() -> usize {
    thread_local! {
        static KEY: u8 = const { 0 };
    }
    KEY.with(|k| std::ptr::from_ref(k) as usize)
}

/// The consumer meters of one stream. Each is measured only where it was asked for: see
/// [`crate::ProfiledExec::measure_waits`] and [`crate::ProfiledExec::measure_consumer_cpu`].
#[derive(Debug, Default)]
pub(crate) struct ConsumerMeters {
    /// Where waits are counted, if they are measured.
    waits: Option<Tally>,
    consumer_cpu: bool,
    /// When the last poll returned pending (clock ticks).
    pending_since: Option<u64>,
    /// The thread the last batch was handed to, and its CPU time then.
    handed_over: Option<(usize, u64)>,
}

impl ConsumerMeters {
    /// Meters for a stream that measures its consumer's waits, its CPU, both, or neither
    /// (`None`: nothing to do on any poll).
    pub(crate) fn new(waits: Option<Tally>, consumer_cpu: bool) -> Option<Self> {
        (waits.is_some() || consumer_cpu).then_some(Self {
            waits,
            consumer_cpu,
            ..Self::default()
        })
    }

    /// A poll starts: a wait that began when the last poll returned pending ends, and so
    /// does the consumer's work since the last batch, if it ran on this thread without a
    /// break (the thread's CPU clock counts only the thread's own time, whatever else the
    /// system ran meanwhile).
    pub(crate) fn poll_started(&mut self, clock: &impl ClockSource, task: &OperatorTaskCounters) {
        if let (Some(since), Some(tally)) = (self.pending_since.take(), self.waits) {
            let waited = clock.now_ticks().saturating_sub(since);
            task.tally(tally, clock.ticks_to_nanos(waited));
        }
        if let Some((thread, cpu)) = self.handed_over.take()
            && thread == thread_key()
        {
            task.record_consumer_cpu(clock.thread_cpu_nanos().saturating_sub(cpu));
        }
    }

    /// A poll returned `polled`: a pending poll starts a wait, a batch hands the thread
    /// over to the consumer.
    pub(crate) fn polled<T>(&mut self, clock: &impl ClockSource, polled: &Poll<Option<T>>) {
        match polled {
            Poll::Pending if self.waits.is_some() => self.pending_since = Some(clock.now_ticks()),
            Poll::Ready(Some(_)) if self.consumer_cpu => {
                self.handed_over = Some((thread_key(), clock.thread_cpu_nanos()));
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use qprof_core::catalog::{self, Tally};
    use qprof_core::clock::ManualClock;

    const WAIT: Tally = Tally::of(&catalog::SHUFFLE_FETCH_WAIT_NANOS);

    fn waited(task: &OperatorTaskCounters) -> u64 {
        task.snapshot().tallies.get(WAIT).unwrap_or(0)
    }

    #[test]
    fn a_wait_runs_from_a_pending_poll_to_the_next_poll() {
        let clock = ManualClock::new();
        let task = OperatorTaskCounters::new();
        let mut meters = ConsumerMeters::new(Some(WAIT), false).unwrap();
        meters.poll_started(&clock, &task);
        meters.polled(&clock, &Poll::<Option<()>>::Pending);
        clock.advance(700, 5);
        meters.poll_started(&clock, &task);
        assert_eq!(waited(&task), 700);
        // a ready poll starts no wait
        meters.polled(&clock, &Poll::Ready(Some(())));
        clock.advance(1_000, 5);
        meters.poll_started(&clock, &task);
        assert_eq!(waited(&task), 700);
        meters.polled(&clock, &Poll::<Option<()>>::Pending);
        clock.advance(50, 0);
        meters.poll_started(&clock, &task);
        assert_eq!(waited(&task), 750);
        assert_eq!(task.consumer_cpu_nanos(), 0, "not asked for");
    }

    #[test]
    fn the_consumers_cpu_runs_from_a_batch_to_the_next_poll_on_its_thread() {
        let clock = ManualClock::new();
        let task = OperatorTaskCounters::new();
        let mut meters = ConsumerMeters::new(None, true).unwrap();
        meters.polled(&clock, &Poll::Ready(Some(())));
        clock.advance(900, 300);
        meters.poll_started(&clock, &task);
        assert_eq!(task.consumer_cpu_nanos(), 300);
        // after a pending poll or the end, the consumer's time is not its work on a batch
        meters.polled(&clock, &Poll::<Option<()>>::Pending);
        clock.advance(900, 300);
        meters.poll_started(&clock, &task);
        meters.polled(&clock, &Poll::<Option<()>>::Ready(None));
        clock.advance(900, 300);
        meters.poll_started(&clock, &task);
        assert_eq!(task.consumer_cpu_nanos(), 300);
        assert_eq!(waited(&task), 0, "not asked for");
    }

    #[test]
    fn a_batch_taken_up_on_another_thread_counts_no_cpu() {
        let clock = ManualClock::new();
        let task = OperatorTaskCounters::new();
        let mut meters = ConsumerMeters::new(None, true).unwrap();
        meters.polled(&clock, &Poll::Ready(Some(())));
        clock.advance(900, 300);
        std::thread::scope(|s| {
            s.spawn(|| meters.poll_started(&clock, &task));
        });
        assert_eq!(task.consumer_cpu_nanos(), 0);
    }

    #[test]
    fn nothing_asked_for_needs_no_meters() {
        assert!(ConsumerMeters::new(None, false).is_none());
    }
}
