//! Cost of the windows a task's end reads from a full executor memory recorder.

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use qprof_core::executor_memory::{MemoryRecorder, MemorySample};

/// The samples an executor keeps at most (as qprof's executors do).
const KEPT: usize = 10_000;

fn task_end_windows(c: &mut Criterion) {
    let recorder = MemoryRecorder::new(KEPT);
    // a sample every 2 ms, as a busy executor's task boundaries take them
    for i in 0..KEPT as u64 - 1 {
        recorder.record(MemorySample {
            epoch_millis: 1_000_000 + 2 * i,
            rss_bytes: i,
            ..MemorySample::default()
        });
    }
    let end = 1_000_000 + 2 * (KEPT as u64 - 2);
    // a 4 ms task that just ended: its window, and the sample before it
    c.bench_function("memory recorder: a task's window of 10,000 samples", |b| {
        b.iter(|| black_box(recorder.peaks_between(black_box(end - 4), black_box(end))))
    });
}

criterion_group!(benches, task_end_windows);
criterion_main!(benches);
