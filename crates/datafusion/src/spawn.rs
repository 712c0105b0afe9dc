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
use qprof_core::clock::SystemClock;
use qprof_core::counters::OperatorTaskCounters;

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
}

impl Future for AttributedFuture {
    type Output = Box<dyn Any + Send>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = &mut *self;
        let _frame = attribution::enter(&SystemClock, &this.target);
        this.inner.as_mut().poll(cx)
    }
}

/// Installs qprof's spawn tracer once per process. Returns `false` if another tracer was
/// installed first; spawned work is then attributed to no operator (it still is not
/// counted twice).
pub(crate) fn install_spawn_attribution() -> bool {
    static INSTALLED: OnceLock<bool> = OnceLock::new();
    *INSTALLED.get_or_init(|| set_join_set_tracer(&TRACER).is_ok())
}
