//! Exclusive (self) and inclusive time attribution with few reads of the CPU clock.
//!
//! Every operator poll runs inside a *frame*. Frames nest on a per-thread stack when a
//! parent polls its child inline. Wall time is read from the cheap TSC clock at every
//! frame boundary, so each frame knows exactly how much of the thread's time was its own
//! (the gaps between its children) and how much it spent in total.
//!
//! The thread CPU clock costs ~0.7 µs per read on virtual machines, which is too much to
//! pay at every operator boundary. It is read once per *outermost* frame (one task poll),
//! as the stack goes back to empty; the reading before it, the end of the thread's last
//! outermost frame, stands for its start. The CPU time of the outermost interval is then
//! what the thread used since that reading, capped at the interval's wall time: never
//! below the interval's own CPU time, and above it only if the thread ran other code since
//! its last outermost frame (a parked thread uses none) and was descheduled during this
//! one, by at most the time it was descheduled. It is split among the frames in
//! proportion to their wall time inside it, where wall and CPU advance together unless the
//! thread is descheduled. The split conserves the total: the self CPU of all frames of one
//! outermost interval adds up to its CPU time (up to integer rounding), so nothing is
//! counted twice, whichever thread a child runs on.

use std::cell::RefCell;
use std::marker::PhantomData;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use crate::clock::ClockSource;
use crate::counters::OperatorTaskCounters;
use crate::phases::JoinPhase;
use crate::stacks;

struct Frame {
    target: Arc<OperatorTaskCounters>,
    enter_ticks: u64,
    segment_start: u64,
    self_ticks: u64,
    /// The part of `self_ticks` the target spent in a join's probe phase.
    probe_ticks: u64,
    allocation_mark: u64,
    self_allocations: u64,
}

impl Frame {
    /// Closes the frame's current segment of own time at `now`.
    #[inline]
    fn close_segment(&mut self, now: u64) {
        let ticks = now.saturating_sub(self.segment_start);
        self.self_ticks += ticks;
        if self
            .target
            .phases()
            .is_some_and(|p| p.current() == JoinPhase::Probe)
        {
            self.probe_ticks += ticks;
        }
    }
}

/// Work of one target inside the current outermost interval, not yet published.
struct Pending {
    target: Arc<OperatorTaskCounters>,
    self_ticks: u64,
    probe_ticks: u64,
    inclusive_ticks: u64,
    allocations: u64,
}

/// The thread's CPU time at the end of its last outermost frame, and the clock it was
/// read from.
#[derive(Clone, Copy)]
struct CpuMark {
    clock: u64,
    cpu: u64,
}

struct ThreadFrames {
    frames: Vec<Frame>,
    pending: Vec<Pending>,
    outer_start_ticks: u64,
    /// Stands for the CPU clock's reading at the start of the current outermost frame.
    cpu_mark: Option<CpuMark>,
}

thread_local! {
    static FRAMES: RefCell<ThreadFrames> = const {
        RefCell::new(ThreadFrames {
            frames: Vec::new(),
            pending: Vec::new(),
            outer_start_ticks: 0,
            cpu_mark: None,
        })
    };
}

/// An open frame; closing it (on drop) attributes the time since it opened.
///
/// Frames must close in the reverse order they opened on the same thread, which scoping a
/// guard around a poll guarantees. The guard is neither `Send` nor `Sync`.
#[must_use = "the frame closes when the guard is dropped"]
pub struct FrameGuard<'c, C: ClockSource> {
    clock: &'c C,
    /// Position of this guard's frame on the stack; `usize::MAX` if none was pushed.
    depth: usize,
    _not_send: PhantomData<*const ()>,
}

impl<C: ClockSource> std::fmt::Debug for FrameGuard<'_, C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("FrameGuard")
    }
}

/// Opens a frame attributing time to `target` on the calling thread.
#[inline]
pub fn enter<'c, C: ClockSource>(
    clock: &'c C,
    target: &Arc<OperatorTaskCounters>,
) -> FrameGuard<'c, C> {
    let depth = FRAMES
        .try_with(|cell| {
            let Ok(mut state) = cell.try_borrow_mut() else {
                return usize::MAX;
            };
            let now = clock.now_ticks();
            let allocations = clock.thread_allocations();
            match state.frames.last_mut() {
                Some(parent) => {
                    parent.close_segment(now);
                    parent.self_allocations += allocations.saturating_sub(parent.allocation_mark);
                }
                None => {
                    state.outer_start_ticks = now;
                    // the first frame with this clock on this thread: nothing stands for
                    // its start yet
                    let id = clock.cpu_clock_id();
                    if state.cpu_mark.is_none_or(|mark| mark.clock != id) {
                        let cpu = clock.thread_cpu_nanos();
                        state.cpu_mark = Some(CpuMark { clock: id, cpu });
                    }
                }
            }
            state.frames.push(Frame {
                target: Arc::clone(target),
                enter_ticks: now,
                segment_start: now,
                self_ticks: 0,
                probe_ticks: 0,
                allocation_mark: allocations,
                self_allocations: 0,
            });
            stacks::set_current_key(target.sample_key().get());
            state.frames.len() - 1
        })
        .unwrap_or(usize::MAX);
    FrameGuard {
        clock,
        depth,
        _not_send: PhantomData,
    }
}

/// The target of the innermost open frame on this thread, if any.
///
/// Work spawned from inside a frame (a task that drives a child on another thread) can be
/// attributed to the operator that spawned it by opening a frame for this target.
pub fn current() -> Option<Arc<OperatorTaskCounters>> {
    FRAMES
        .try_with(|cell| {
            let state = cell.try_borrow().ok()?;
            state.frames.last().map(|f| Arc::clone(&f.target))
        })
        .ok()
        .flatten()
}

impl<C: ClockSource> Drop for FrameGuard<'_, C> {
    #[inline]
    fn drop(&mut self) {
        let clock = self.clock;
        let depth = self.depth;
        let _ = FRAMES.try_with(|cell| {
            let Ok(mut state) = cell.try_borrow_mut() else {
                return;
            };
            if depth == usize::MAX || state.frames.len() <= depth {
                return;
            }
            // frames above ours belong to guards that were leaked: discard them
            state.frames.truncate(depth + 1);
            let Some(mut frame) = state.frames.pop() else {
                return;
            };
            let now = clock.now_ticks();
            let allocations = clock.thread_allocations();
            frame.close_segment(now);
            let self_ticks = frame.self_ticks;
            let probe_ticks = frame.probe_ticks;
            let self_allocations =
                frame.self_allocations + allocations.saturating_sub(frame.allocation_mark);
            let inclusive_ticks = now.saturating_sub(frame.enter_ticks);
            match state
                .pending
                .iter_mut()
                .find(|p| Arc::ptr_eq(&p.target, &frame.target))
            {
                Some(p) => {
                    p.self_ticks += self_ticks;
                    p.probe_ticks += probe_ticks;
                    p.inclusive_ticks += inclusive_ticks;
                    p.allocations += self_allocations;
                }
                None => state.pending.push(Pending {
                    target: frame.target,
                    self_ticks,
                    probe_ticks,
                    inclusive_ticks,
                    allocations: self_allocations,
                }),
            }
            stacks::set_current_key(
                state
                    .frames
                    .last()
                    .map_or(0, |parent| parent.target.sample_key().get()),
            );
            match state.frames.last_mut() {
                Some(parent) => {
                    parent.segment_start = now;
                    parent.allocation_mark = allocations;
                }
                None => {
                    let (id, cpu_now) = (clock.cpu_clock_id(), clock.thread_cpu_nanos());
                    let since_mark = match state.cpu_mark {
                        Some(mark) if mark.clock == id => cpu_now.saturating_sub(mark.cpu),
                        _ => 0,
                    };
                    state.cpu_mark = Some(CpuMark {
                        clock: id,
                        cpu: cpu_now,
                    });
                    let outer_ticks = now.saturating_sub(state.outer_start_ticks);
                    let cpu = since_mark.min(clock.ticks_to_nanos(outer_ticks));
                    publish(clock, &mut state.pending, cpu, outer_ticks);
                }
            }
        });
    }
}

/// Publishes the pending work of one outermost interval that took `outer_ticks` of wall
/// time and `cpu` ns of CPU time.
fn publish<C: ClockSource>(clock: &C, pending: &mut Vec<Pending>, cpu: u64, outer_ticks: u64) {
    let share = |ticks: u64| -> u64 {
        if outer_ticks == 0 {
            0
        } else {
            (u128::from(cpu) * u128::from(ticks.min(outer_ticks)) / u128::from(outer_ticks)) as u64
        }
    };
    for p in pending.drain(..) {
        let t = &p.target;
        t.self_wall_nanos
            .fetch_add(clock.ticks_to_nanos(p.self_ticks), Ordering::Relaxed);
        t.wall_nanos.fetch_add(
            clock.ticks_to_nanos(p.inclusive_ticks.min(outer_ticks)),
            Ordering::Relaxed,
        );
        t.self_cpu_nanos
            .fetch_add(share(p.self_ticks), Ordering::Relaxed);
        t.cpu_nanos
            .fetch_add(share(p.inclusive_ticks), Ordering::Relaxed);
        t.allocations.fetch_add(p.allocations, Ordering::Relaxed);
        if let Some(phases) = t.phases() {
            let build_ticks = p.self_ticks.saturating_sub(p.probe_ticks);
            for (phase, ticks) in [
                (JoinPhase::Build, build_ticks),
                (JoinPhase::Probe, p.probe_ticks),
            ] {
                phases.add_self_time(phase, clock.ticks_to_nanos(ticks), share(ticks));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::ManualClock;
    use proptest::prelude::*;

    fn counters() -> Arc<OperatorTaskCounters> {
        Arc::new(OperatorTaskCounters::new())
    }

    #[test]
    fn nested_frames_split_self_and_inclusive_time() {
        let clock = ManualClock::new();
        let (parent, child) = (counters(), counters());
        {
            let _p = enter(&clock, &parent);
            clock.advance(100, 100);
            {
                let _c = enter(&clock, &child);
                clock.advance(300, 300);
                clock.allocate(7);
            }
            clock.advance(50, 50);
            clock.allocate(2);
        }
        let (p, c) = (parent.snapshot(), child.snapshot());
        assert_eq!((p.self_wall_nanos, p.wall_nanos), (150, 450));
        assert_eq!((p.self_cpu_nanos, p.cpu_nanos), (150, 450));
        assert_eq!((c.self_wall_nanos, c.wall_nanos), (300, 300));
        assert_eq!((c.self_cpu_nanos, c.cpu_nanos), (300, 300));
        assert_eq!((p.memory_allocations, c.memory_allocations), (2, 7));
    }

    #[test]
    fn cpu_is_split_by_wall_share_and_conserved() {
        let clock = ManualClock::new();
        let (parent, child) = (counters(), counters());
        {
            let _p = enter(&clock, &parent);
            clock.advance(250, 100); // descheduled for part of it
            {
                let _c = enter(&clock, &child);
                clock.advance(750, 500);
            }
        }
        let (p, c) = (parent.snapshot(), child.snapshot());
        // 600 ns of CPU over 1000 ns of wall: 25% / 75%
        assert_eq!(p.self_cpu_nanos, 150);
        assert_eq!(c.self_cpu_nanos, 450);
        assert_eq!(p.cpu_nanos, 600);
        assert_eq!(p.self_cpu_nanos + c.self_cpu_nanos, 600);
    }

    #[test]
    fn a_join_self_time_is_split_at_its_first_probe_read_and_excludes_children() {
        let clock = ManualClock::new();
        let (join, build, probe) = (counters(), counters(), counters());
        let phases = Arc::clone(join.phases_or_init(true));
        {
            let _j = enter(&clock, &join);
            clock.advance(10, 10); // the join's own work while building
            {
                let _b = enter(&clock, &build);
                clock.advance(1_000, 1_000);
            }
            clock.advance(40, 20); // hashing the build side, partly descheduled
            {
                // the probe input's first poll: its frame opens, then the phase switches
                let _p = enter(&clock, &probe);
                phases.probe_polled(0);
                clock.advance(300, 300);
            }
            clock.advance(25, 25); // probing
        }
        let (b, p, j) = (
            phases.snapshot(JoinPhase::Build),
            phases.snapshot(JoinPhase::Probe),
            join.snapshot(),
        );
        assert_eq!((b.self_wall_nanos, p.self_wall_nanos), (50, 25));
        assert_eq!(b.self_wall_nanos + p.self_wall_nanos, j.self_wall_nanos);
        // 1355 ns of CPU over 1375 ns of wall, split by wall share
        assert_eq!(b.self_cpu_nanos, 1355 * 50 / 1375);
        assert_eq!(p.self_cpu_nanos, 1355 * 25 / 1375);
        assert!(j.self_cpu_nanos - (b.self_cpu_nanos + p.self_cpu_nanos) <= 1);
    }

    #[test]
    fn repeated_polls_of_one_child_accumulate() {
        let clock = ManualClock::new();
        let (parent, child) = (counters(), counters());
        {
            let _p = enter(&clock, &parent);
            for _ in 0..3 {
                let _c = enter(&clock, &child);
                clock.advance(10, 10);
            }
            clock.advance(5, 5);
        }
        assert_eq!(child.snapshot().self_cpu_nanos, 30);
        assert_eq!(parent.snapshot().self_cpu_nanos, 5);
        assert_eq!(parent.snapshot().cpu_nanos, 35);
    }

    #[test]
    fn the_cpu_clock_is_read_once_per_outermost_frame_after_the_first() {
        let clock = ManualClock::new();
        let (parent, child) = (counters(), counters());
        for _ in 0..3 {
            let _p = enter(&clock, &parent);
            clock.advance(10, 10);
            let _c = enter(&clock, &child);
            clock.advance(10, 10);
        }
        assert_eq!(clock.cpu_reads(), 4);
        assert_eq!(parent.snapshot().cpu_nanos, 60);
        assert_eq!(child.snapshot().self_cpu_nanos, 30);
    }

    #[test]
    fn a_parked_gap_leaves_a_descheduled_frame_its_exact_cpu() {
        let clock = ManualClock::new();
        let node = counters();
        {
            let _f = enter(&clock, &node);
            clock.advance(10, 10);
        }
        clock.advance(5_000, 0); // parked
        {
            let _f = enter(&clock, &node);
            clock.advance(100, 40); // descheduled for 60 ns
        }
        assert_eq!(node.snapshot().cpu_nanos, 50);
        assert_eq!(node.snapshot().wall_nanos, 110);
    }

    #[test]
    fn cpu_used_between_frames_counts_at_most_the_time_a_frame_was_descheduled() {
        let clock = ManualClock::new();
        let node = counters();
        {
            let _f = enter(&clock, &node);
            clock.advance(10, 10);
        }
        clock.advance(1_000, 1_000); // other work on the thread
        {
            let _f = enter(&clock, &node);
            clock.advance(100, 40);
        }
        // 10 + 40 used, 10 + 100 of wall: the cap lets in the 60 ns descheduled
        assert_eq!(node.snapshot().cpu_nanos, 110);
        {
            let _f = enter(&clock, &node);
            clock.advance(30, 30);
        }
        assert_eq!(node.snapshot().cpu_nanos, 140);
    }

    #[test]
    fn time_outside_frames_is_not_attributed() {
        let clock = ManualClock::new();
        let node = counters();
        {
            let _f = enter(&clock, &node);
            clock.advance(10, 10);
        }
        clock.advance(1_000, 1_000);
        {
            let _f = enter(&clock, &node);
            clock.advance(20, 20);
        }
        assert_eq!(node.snapshot().cpu_nanos, 30);
        assert_eq!(node.snapshot().wall_nanos, 30);
    }

    #[test]
    fn a_leaked_guard_does_not_corrupt_the_stack() {
        let clock = ManualClock::new();
        let (a, b) = (counters(), counters());
        {
            let _fa = enter(&clock, &a);
            std::mem::forget(enter(&clock, &b));
            clock.advance(10, 10);
        }
        assert!(current().is_none(), "the leaked frame stayed on the stack");
        assert_eq!(a.snapshot().cpu_nanos, 10);
    }

    #[test]
    fn current_names_the_innermost_frame() {
        let clock = ManualClock::new();
        let (a, b) = (counters(), counters());
        assert!(current().is_none());
        let _fa = enter(&clock, &a);
        {
            let _fb = enter(&clock, &b);
            assert!(Arc::ptr_eq(&current().unwrap(), &b));
        }
        assert!(Arc::ptr_eq(&current().unwrap(), &a));
    }

    /// A random call tree: each node does some work, then calls children, then works more.
    #[derive(Debug, Clone)]
    struct Call {
        node: usize,
        before: (u64, u64),
        after: (u64, u64),
        children: Vec<Call>,
    }

    fn call_tree() -> impl Strategy<Value = Call> {
        let work = (0_u64..1_000, 0_u64..100).prop_map(|(wall, idle)| (wall + idle, wall));
        let leaf =
            (0_usize..4, work.clone(), work.clone()).prop_map(|(node, before, after)| Call {
                node,
                before,
                after,
                children: vec![],
            });
        leaf.prop_recursive(4, 32, 4, move |inner| {
            (
                0_usize..4,
                work.clone(),
                work.clone(),
                proptest::collection::vec(inner, 0..4),
            )
                .prop_map(|(node, before, after, children)| Call {
                    node,
                    before,
                    after,
                    children,
                })
        })
    }

    fn run(clock: &ManualClock, targets: &[Arc<OperatorTaskCounters>], call: &Call) -> (u64, u64) {
        let _f = enter(clock, &targets[call.node]);
        clock.advance(call.before.0, call.before.1);
        let (mut wall, mut cpu) = (call.before.0 + call.after.0, call.before.1 + call.after.1);
        for child in &call.children {
            let (w, c) = run(clock, targets, child);
            wall += w;
            cpu += c;
        }
        clock.advance(call.after.0, call.after.1);
        (wall, cpu)
    }

    proptest! {
        #[test]
        fn self_times_partition_the_outermost_interval(calls in proptest::collection::vec(call_tree(), 1..4)) {
            let clock = ManualClock::new();
            let targets: Vec<_> = (0..4).map(|_| counters()).collect();
            let (mut wall, mut cpu) = (0, 0);
            for call in &calls {
                let (w, c) = run(&clock, &targets, call);
                wall += w;
                cpu += c;
            }
            let snaps: Vec<_> = targets.iter().map(|t| t.snapshot()).collect();
            let self_wall: u64 = snaps.iter().map(|s| s.self_wall_nanos).sum();
            let self_cpu: u64 = snaps.iter().map(|s| s.self_cpu_nanos).sum();
            prop_assert_eq!(self_wall, wall);
            // proportional split rounds down at most 1 ns per target and interval
            prop_assert!(self_cpu <= cpu && cpu - self_cpu <= 4 * calls.len() as u64);
            for s in &snaps {
                prop_assert!(s.self_cpu_nanos <= s.cpu_nanos);
                prop_assert!(s.self_wall_nanos <= s.wall_nanos);
            }
        }
    }
}
