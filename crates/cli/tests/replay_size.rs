//! A qprof log's replay: its counted size against the heap it really takes, as the C
//! allocator reports it, and against the log's size. Alone in its test binary: no other
//! test allocates meanwhile (the run itself is another process).

use common::tpch_event_log;
use qprof_core::executor_memory::process_memory;
use qprof_eventlog::Replay;
use qprof_eventlog::discover;

mod common;

#[test]
fn a_qprof_logs_replay_is_counted_within_a_quarter_of_its_heap() {
    let dir = std::env::temp_dir().join(format!("qprof-cli-replay-size-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let events = tpch_event_log(&dir, None);
    let source = discover(&events).unwrap().remove(0);
    let log_bytes: u64 = source
        .files
        .iter()
        .map(|f| std::fs::metadata(&f.path).unwrap().len())
        .sum();
    let before = process_memory().heap_bytes;
    let replay = Replay::load(source).unwrap();
    let after = process_memory().heap_bytes;
    assert_eq!(replay.state().executions.len(), 22);
    let real = after.saturating_sub(before) as f64;
    let counted = replay.resident_bytes() as f64;
    let ratio = counted / real;
    eprintln!(
        "counted {counted} B, allocator {real} B, ratio {ratio:.3}; log {log_bytes} B, heap per log byte {:.2}",
        real / log_bytes as f64
    );
    assert!(
        (0.75..=1.25).contains(&ratio),
        "counted {counted} B, the allocator holds {real} B for it (ratio {ratio:.2})"
    );
    // a replay takes no more memory than its log takes on disk
    assert!(
        real <= log_bytes as f64,
        "the replay takes {real} B for a log of {log_bytes} B"
    );
    drop(replay);
    std::fs::remove_dir_all(&dir).unwrap();
}
