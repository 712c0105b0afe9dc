//! Cost of qprof's timing primitives: clock reads and frames.

use std::hint::black_box;
use std::sync::Arc;

use criterion::{Criterion, criterion_group, criterion_main};
use qprof_core::attribution;
use qprof_core::clock::{ClockSource, SystemClock};
use qprof_core::counters::OperatorTaskCounters;

fn clocks(c: &mut Criterion) {
    let clock = SystemClock;
    c.bench_function("tsc read", |b| b.iter(|| black_box(clock.now_ticks())));
    c.bench_function("thread cpu clock read", |b| {
        b.iter(|| black_box(clock.thread_cpu_nanos()))
    });
    c.bench_function("thread allocation count read", |b| {
        b.iter(|| black_box(clock.thread_allocations()))
    });
}

fn frames(c: &mut Criterion) {
    let clock = SystemClock;
    let outer = Arc::new(OperatorTaskCounters::new());
    let inner = Arc::new(OperatorTaskCounters::new());
    // an operator poll nested in its parent's: what most polls cost
    c.bench_function("nested frame enter+exit", |b| {
        let _outer = attribution::enter(&clock, &outer);
        b.iter(|| {
            let _frame = attribution::enter(&clock, black_box(&inner));
        });
    });
    // the outermost frame of a task poll: reads the thread CPU clock twice
    c.bench_function("outermost frame enter+exit", |b| {
        b.iter(|| {
            let _frame = attribution::enter(&clock, black_box(&outer));
        });
    });
}

criterion_group!(benches, clocks, frames);
criterion_main!(benches);
