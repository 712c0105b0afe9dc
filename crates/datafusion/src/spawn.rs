//! Attribution of work that operators spawn onto other tasks.
//!
//! `RepartitionExec`, `CoalescePartitionsExec` and `SortPreservingMergeExec` drive their
//! inputs from spawned tasks. DataFusion passes every spawned future and blocking closure
//! through one process-wide `JoinSetTracer`; qprof's tracer remembers which operator task
//! was running when the spawn happened and opens a frame for it whenever the spawned work
//! runs. The operator's own work there (hashing, routing, merging) is then its self time,
//! while the children it polls are attributed to themselves as usual.

use std::any::Any;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::OnceLock;
use std::task::{Context, Poll};

use datafusion::common::runtime::{JoinSetTracer, set_join_set_tracer};
use futures::future::BoxFuture;
use qprof_core::attribution;
use qprof_core::catalog::{self, Tally};
use qprof_core::clock::{ClockSource, SystemClock};
use qprof_core::counters::OperatorTaskCounters;

use crate::exec::{InputPoll, noting_input_polls};

#[derive(Debug)]
struct SpawnAttribution;

static TRACER: SpawnAttribution = SpawnAttribution;

impl JoinSetTracer for SpawnAttribution {
    fn trace_future(
        &self,
        fut: BoxFuture<'static, Box<dyn Any + Send>>,
    ) -> BoxFuture<'static, Box<dyn Any + Send>> {
        match attribution::current() {
            Some(task) => Box::pin(AttributedFuture {
                inner: fut,
                target: task.spawn_target(),
                blocked_since: None,
                holding_a_batch: false,
            }),
            None => fut,
        }
    }

    fn trace_block(
        &self,
        f: Box<dyn FnOnce() -> Box<dyn Any + Send> + Send>,
    ) -> Box<dyn FnOnce() -> Box<dyn Any + Send> + Send> {
        match attribution::current().map(|task| task.spawn_target()) {
            Some(target) => Box::new(move || {
                let _frame = attribution::enter(&SystemClock, &target);
                f()
            }),
            None => f,
        }
    }
}

struct AttributedFuture {
    inner: BoxFuture<'static, Box<dyn Any + Send>>,
    target: Arc<OperatorTaskCounters>,
    /// When its last poll returned pending holding a batch (clock ticks): it was blocked
    /// on its output.
    blocked_since: Option<u64>,
    /// Whether the last input it polled gave it a batch it has not handed on: it pends
    /// then on its output (a full channel), not on its input, nor on anything else (a task
    /// that only awaits another task polls no input).
    holding_a_batch: bool,
}

const OUTPUT_WAIT: Tally = Tally::of(&catalog::OUTPUT_WAIT_NANOS);

impl Future for AttributedFuture {
    type Output = Box<dyn Any + Send>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = &mut *self;
        if let Some(since) = this.blocked_since.take() {
            let waited = SystemClock.now_ticks().saturating_sub(since);
            this.target
                .tally(OUTPUT_WAIT, SystemClock.ticks_to_nanos(waited));
        }
        let frame = attribution::enter(&SystemClock, &this.target);
        let (polled, input) = noting_input_polls(|| this.inner.as_mut().poll(cx));
        drop(frame);
        match input {
            InputPoll::Batch => this.holding_a_batch = true,
            InputPoll::Pending | InputPoll::Ended => this.holding_a_batch = false,
            InputPoll::None => {}
        }
        if polled.is_pending() && this.holding_a_batch {
            this.blocked_since = Some(SystemClock.now_ticks());
        }
        polled
    }
}

/// Tells the stack sampler where a spawned task enters an operator's code: its walks stop
/// there.
pub(crate) fn register_operator_entries() {
    type Poll_ = fn(Pin<&mut AttributedFuture>, &mut Context<'_>) -> Poll<Box<dyn Any + Send>>;
    let poll: Poll_ = <AttributedFuture as Future>::poll;
    qprof_core::stacks::register_operator_entry(poll as usize);
}

/// Installs qprof's spawn tracer once per process. Returns `false` if another tracer was
/// installed first; spawned work is then attributed to no operator (it still is not
/// counted twice).
pub(crate) fn install_spawn_attribution() -> bool {
    static INSTALLED: OnceLock<bool> = OnceLock::new();
    *INSTALLED.get_or_init(|| set_join_set_tracer(&TRACER).is_ok())
}
