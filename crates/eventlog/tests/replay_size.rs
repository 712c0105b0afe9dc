//! A replay's counted size against the heap it really takes, as the C allocator reports
//! it. Alone in its test binary: no other test allocates meanwhile.

use qprof_core::executor_memory::process_memory;
use qprof_eventlog::Replay;
use qprof_eventlog::discover;
use qprof_eventlog::fixtures::synthetic_spark_log;

#[test]
fn a_replays_counted_size_is_within_a_quarter_of_the_heap_it_takes() {
    let dir = std::env::temp_dir().join(format!("qprof-replay-size-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let log_bytes = synthetic_spark_log(&dir, 16 << 20);
    let source = discover(&dir).unwrap().remove(0);
    let before = process_memory().heap_bytes;
    let replay = Replay::load(source).unwrap();
    let after = process_memory().heap_bytes;
    assert!(replay.state().stages.len() > 1);
    let real = after.saturating_sub(before) as f64;
    let counted = replay.resident_bytes() as f64;
    assert!(real > 0.0, "the allocator reports no heap (not glibc?)");
    let ratio = counted / real;
    eprintln!("counted {counted} B, allocator {real} B, ratio {ratio:.3}, log {log_bytes} B");
    assert!(
        (0.75..=1.25).contains(&ratio),
        "counted {counted} B, the allocator holds {real} B for it (ratio {ratio:.2}; log {log_bytes} B)"
    );
    // a replay takes no more memory than its log takes on disk
    assert!(
        real <= log_bytes as f64,
        "the replay takes {real} B for a log of {log_bytes} B"
    );
    drop(replay);
    std::fs::remove_dir_all(&dir).unwrap();
}
