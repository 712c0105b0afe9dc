//! Replay throughput (MB/s of uncompressed log) and listing speed (applications/s).
//!
//! The log is Spark's own (the oracle fixture) with its task events repeated under fresh
//! task ids until it is large, so the mix of events is a real one dominated by task ends.

use std::hint::black_box;
use std::path::{Path, PathBuf};

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use qprof_eventlog::layout::discover;
use qprof_eventlog::replay::{Replay, scan_info};
use serde_json::Value;

const APP: &str = "local-1795333320377";

fn oracle_lines() -> Vec<String> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(format!(
        "../../testdata/spark-4.3/events/eventlog_v2_{APP}/events_1_{APP}"
    ));
    std::fs::read_to_string(path)
        .expect("the oracle log")
        .lines()
        .map(str::to_string)
        .collect()
}

/// Writes a rolling log of about `target` bytes: the oracle's lines, with its task starts
/// and ends repeated (fresh task ids) before the application end.
fn synthesize(dir: &Path, target: usize) -> u64 {
    let lines = oracle_lines();
    let tasks: Vec<Value> = lines
        .iter()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|e| {
            let n = e["Event"].as_str().unwrap();
            n == "SparkListenerTaskStart" || n == "SparkListenerTaskEnd"
        })
        .collect();
    let (body, end) = lines.split_at(lines.len() - 1);
    let mut out = body.join("\n");
    out.push('\n');
    let mut next_id = 1_000_i64;
    while out.len() < target {
        for pair in tasks.chunks(2) {
            for e in pair {
                let mut e = e.clone();
                e["Task Info"]["Task ID"] = next_id.into();
                out.push_str(&e.to_string());
                out.push('\n');
            }
            next_id += 1;
        }
    }
    out.push_str(&end.join("\n"));
    out.push('\n');
    let app_dir = dir.join(format!("eventlog_v2_{APP}"));
    std::fs::create_dir_all(&app_dir).unwrap();
    std::fs::write(app_dir.join(format!("events_1_{APP}")), &out).unwrap();
    std::fs::write(app_dir.join(format!("appstatus_{APP}")), b"").unwrap();
    out.len() as u64
}

fn replay(c: &mut Criterion) {
    let dir = std::env::temp_dir().join(format!("qprof-bench-replay-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let bytes = synthesize(&dir, 64 << 20);
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
    std::fs::remove_dir_all(&dir).unwrap();
}

fn listing(c: &mut Criterion) {
    let dir = std::env::temp_dir().join(format!("qprof-bench-listing-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let lines = oracle_lines().join("\n") + "\n";
    let apps = 200;
    for i in 0..apps {
        let id = format!("local-{}", 1_795_333_320_377_u64 + i);
        let app_dir = dir.join(format!("eventlog_v2_{id}"));
        std::fs::create_dir_all(&app_dir).unwrap();
        std::fs::write(
            app_dir.join(format!("events_1_{id}")),
            lines.replace(APP, &id),
        )
        .unwrap();
        std::fs::write(app_dir.join(format!("appstatus_{id}")), b"").unwrap();
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
