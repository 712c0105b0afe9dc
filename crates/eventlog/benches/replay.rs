//! Replay throughput (MB/s of uncompressed log) and listing speed (applications/s).
//!
//! The log is Spark's own (the oracle fixture) with its task events repeated under fresh
//! task ids until it is large, so the mix of events is a real one dominated by task ends.

use std::hint::black_box;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use qprof_eventlog::LogStamp;
use qprof_eventlog::discover;
use qprof_eventlog::fixtures::{copy_oracle_app, synthetic_spark_log};
use qprof_eventlog::{Replay, scan_info};

fn replay(c: &mut Criterion) {
    let dir = std::env::temp_dir().join(format!("qprof-bench-replay-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let bytes = synthetic_spark_log(&dir, 64 << 20);
    let source = discover(&dir).unwrap().remove(0);
    let mut group = c.benchmark_group("replay");
    group.sample_size(10);
    group.throughput(Throughput::Bytes(bytes));
    group.bench_function("spark_log_64MiB", |b| {
        b.iter(|| {
            let r = Replay::load(source.clone()).unwrap();
            assert_eq!(r.state().skipped.corrupt_lines, 0);
            black_box(r.state().stages.len())
        })
    });
    group.finish();
    // the same application read back from its saved form
    let replay = Replay::load(source.clone()).unwrap();
    let stamp = LogStamp {
        size: bytes,
        modified_millis: 0,
    };
    let saved = replay.snapshot(stamp).unwrap();
    let mut group = c.benchmark_group("saved_replay");
    group.sample_size(10);
    group.throughput(Throughput::Bytes(bytes));
    group.bench_function("read_back_spark_log_64MiB", |b| {
        b.iter(|| {
            let r = Replay::from_snapshot(source.clone(), &saved, stamp).unwrap();
            black_box(r.state().stages.len())
        })
    });
    group.finish();
    println!("saved form: {} bytes for a {bytes}-byte log", saved.len());
    std::fs::remove_dir_all(&dir).unwrap();
}

fn listing(c: &mut Criterion) {
    let dir = std::env::temp_dir().join(format!("qprof-bench-listing-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let apps = 200;
    for i in 0..apps {
        copy_oracle_app(&dir, &format!("local-{}", 1_795_333_320_377_u64 + i));
    }
    let mut group = c.benchmark_group("listing");
    group.sample_size(10);
    group.throughput(Throughput::Elements(apps));
    group.bench_function("200_apps", |b| {
        b.iter(|| {
            let found = discover(&dir).unwrap();
            let infos: Vec<_> = found.iter().map(|s| scan_info(s).unwrap()).collect();
            assert_eq!(infos.len(), apps as usize);
            black_box(infos)
        })
    });
    group.finish();
    std::fs::remove_dir_all(&dir).unwrap();
}

criterion_group!(benches, replay, listing);
criterion_main!(benches);
