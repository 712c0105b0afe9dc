//! Reading logs as they are found: compressed, truncated, corrupted, still growing.

use std::io::Write;
use std::path::{Path, PathBuf};

use proptest::prelude::*;
use qprof_eventlog::AppState;
use qprof_eventlog::discover;
use qprof_eventlog::encode_lz4_blocks;
use qprof_eventlog::rest;
use qprof_eventlog::{Replay, scan_info};
use serde_json::Value;

const APP: &str = "local-1795333320377";

fn oracle_text() -> String {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(format!(
        "../../testdata/spark-4.3/events/eventlog_v2_{APP}/events_1_{APP}"
    ));
    std::fs::read_to_string(path).unwrap()
}

fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("qprof-reader-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Everything the REST API would show, for comparing two states.
fn snapshot(state: &AppState) -> Value {
    let opts = rest::StageOptions {
        details: true,
        ..Default::default()
    };
    serde_json::json!({
        "jobs": rest::jobs(state, &[]).unwrap(),
        "stages": rest::stages(state, &[], &opts).unwrap(),
        "sql": rest::sql_list(state, true, true, 0, 100),
        "executors": rest::executors(state, true),
        "environment": rest::environment(state).unwrap(),
    })
}

fn replay_dir(dir: &Path) -> Replay {
    let sources = discover(dir).unwrap();
    assert_eq!(sources.len(), 1, "{sources:?}");
    Replay::load(sources[0].clone()).unwrap()
}

fn write_single(dir: &Path, name: &str, bytes: &[u8]) {
    std::fs::write(dir.join(name), bytes).unwrap();
}

#[test]
fn compressed_and_single_file_logs_replay_like_the_original() {
    let text = oracle_text();
    let dir = temp_dir("codecs");
    let original = {
        let d = dir.join("plain");
        std::fs::create_dir_all(&d).unwrap();
        write_single(&d, APP, text.as_bytes());
        snapshot(replay_dir(&d).state())
    };
    let zstd = zstd::encode_all(text.as_bytes(), 3).unwrap();
    let lz4 = encode_lz4_blocks(text.as_bytes());
    for (name, bytes) in [(format!("{APP}.zstd"), zstd), (format!("{APP}.lz4"), lz4)] {
        let d = dir.join(&name);
        std::fs::create_dir_all(&d).unwrap();
        write_single(&d, &name, &bytes);
        let replay = replay_dir(&d);
        assert_eq!(replay.state().skipped.corrupt_lines, 0, "{name}");
        assert_eq!(snapshot(replay.state()), original, "{name}");
        assert!(!replay.source().in_progress);
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn unknown_events_and_corrupt_lines_are_skipped_and_counted() {
    let text = oracle_text();
    let lines: Vec<&str> = text.lines().collect();
    let mut mangled = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        mangled.push(line.to_string());
        if i == 20 {
            mangled.push("{\"Event\":\"com.example.SomethingNew\",\"x\":1}".into());
            mangled.push("not json at all".into());
            mangled.push("{\"no event name\":true}".into());
            mangled.push("{\"Event\":\"SparkListenerTaskEnd\",\"Stage ID\":\"zero\"}".into());
            mangled.push(String::new());
        }
    }
    let dir = temp_dir("corrupt");
    write_single(&dir, APP, (mangled.join("\n") + "\n").as_bytes());
    let replay = replay_dir(&dir);
    let skipped = replay.state().skipped;
    assert_eq!(skipped.unknown_events, 1);
    assert_eq!(skipped.corrupt_lines, 3);
    // the rest of the log is intact
    let clean = temp_dir("clean");
    write_single(&clean, APP, text.as_bytes());
    assert_eq!(
        snapshot(replay.state()),
        snapshot(replay_dir(&clean).state())
    );
    std::fs::remove_dir_all(&dir).unwrap();
    std::fs::remove_dir_all(&clean).unwrap();
}

#[test]
fn a_large_log_parsed_on_several_threads_replays_as_applied_line_by_line() {
    // the oracle's task events fourteen more times, with corrupt lines, unknown events and
    // blank lines among them: chunks of lines parsed apart must apply in the log's order
    let text = oracle_text();
    let lines: Vec<&str> = text.lines().collect();
    let end = lines
        .iter()
        .rposition(|l| l.contains("SparkListenerApplicationEnd"))
        .unwrap();
    let tasks: Vec<&str> = lines
        .iter()
        .copied()
        .filter(|l| l.contains("\"SparkListenerTask"))
        .collect();
    let mut large: Vec<String> = lines[..end].iter().map(|l| l.to_string()).collect();
    for round in 0..14 {
        for (i, task) in tasks.iter().enumerate() {
            large.push(task.to_string());
            if i % 97 == round {
                large.push("{\"Event\":\"com.example.SomethingNew\"}".into());
                large.push("{\"Event\":\"SparkListenerTaskEnd\",\"Stage ID\":[]}".into());
                large.push("   ".into());
                large.push("not json".into());
            }
        }
    }
    large.extend(lines[end..].iter().map(|l| l.to_string()));
    // the last line has no newline: a complete log's unterminated line is applied
    let large = large.join("\n");
    assert!(large.len() > 1 << 20, "{} bytes", large.len());

    let dir = temp_dir("parallel");
    write_single(&dir, APP, large.as_bytes());
    let replay = replay_dir(&dir);
    let mut serial = AppState::default();
    for line in large.lines() {
        serial.apply_line(line.as_bytes());
    }
    assert!(serial.skipped.corrupt_lines > 0 && serial.skipped.unknown_events > 0);
    assert_eq!(replay.state().skipped, serial.skipped);
    assert_eq!(replay.bytes_applied(), large.len() as u64);
    assert_eq!(snapshot(replay.state()), snapshot(&serial));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_log_in_progress_is_read_incrementally_to_the_same_state() {
    let text = oracle_text();
    let dir = temp_dir("incremental");
    let app_dir = dir.join(format!("eventlog_v2_{APP}"));
    std::fs::create_dir_all(&app_dir).unwrap();
    let marker = app_dir.join(format!("appstatus_{APP}.inprogress"));
    std::fs::write(&marker, b"").unwrap();
    let log = app_dir.join(format!("events_1_{APP}"));
    // the writer stops in the middle of a line
    let cut = text.len() / 2 + 17;
    std::fs::write(&log, &text.as_bytes()[..cut]).unwrap();
    let source = discover(&dir).unwrap().remove(0);
    assert!(source.in_progress);
    let mut replay = Replay::new(source.clone());
    let first = replay.refresh().unwrap();
    assert!(first < cut as u64, "the partial line must wait");
    assert_eq!(replay.state().skipped.corrupt_lines, 0);
    let listed = scan_info(&source).unwrap();
    assert_eq!(listed.end_time, None);
    // then finishes it and the application, in a second rolled file
    let mut f = std::fs::OpenOptions::new().append(true).open(&log).unwrap();
    let rest_of_text = &text.as_bytes()[cut..];
    let split = rest_of_text.len() / 2;
    let split = split
        + rest_of_text[split..]
            .iter()
            .position(|b| *b == b'\n')
            .unwrap()
        + 1;
    f.write_all(&rest_of_text[..split]).unwrap();
    std::fs::write(
        app_dir.join(format!("events_2_{APP}")),
        &rest_of_text[split..],
    )
    .unwrap();
    std::fs::rename(&marker, app_dir.join(format!("appstatus_{APP}"))).unwrap();
    let second = replay.refresh().unwrap();
    assert_eq!(first + second, text.len() as u64, "each byte applied once");
    assert!(!replay.source().in_progress);
    let full = temp_dir("full");
    write_single(&full, APP, text.as_bytes());
    assert_eq!(
        snapshot(replay.state()),
        snapshot(replay_dir(&full).state())
    );
    std::fs::remove_dir_all(&dir).unwrap();
    std::fs::remove_dir_all(&full).unwrap();
}

#[test]
fn a_truncated_zstd_log_yields_its_complete_lines() {
    let text = oracle_text();
    let mut enc = zstd::stream::write::Encoder::new(Vec::new(), 3).unwrap();
    let half = text.len() / 2;
    enc.write_all(&text.as_bytes()[..half]).unwrap();
    enc.flush().unwrap();
    let flushed = enc.get_ref().len();
    enc.write_all(&text.as_bytes()[half..]).unwrap();
    let full = enc.finish().unwrap();
    let dir = temp_dir("zstd-cut");
    write_single(
        &dir,
        &format!("{APP}.zstd.inprogress"),
        &full[..flushed + 5],
    );
    let replay = replay_dir(&dir);
    assert!(replay.source().in_progress);
    let complete_lines = text[..half].matches('\n').count();
    assert_eq!(replay.state().skipped.corrupt_lines, 0);
    assert!(replay.bytes_applied() as usize >= text[..half].rfind('\n').unwrap());
    assert!(complete_lines > 10);
    std::fs::remove_dir_all(&dir).unwrap();
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    /// Any bytes, including cut and spliced event lines, never panic the reader.
    #[test]
    fn arbitrary_lines_never_panic(
        picks in proptest::collection::vec((0usize..80, 0usize..4000, any::<u8>()), 1..40),
        noise in proptest::collection::vec(any::<u8>(), 0..200),
    ) {
        let text = oracle_text();
        let lines: Vec<&str> = text.lines().collect();
        let mut state = AppState::default();
        for (i, cut, byte) in picks {
            let line = lines[i % lines.len()].as_bytes();
            let mut mangled = line[..cut.min(line.len())].to_vec();
            mangled.push(byte);
            mangled.extend_from_slice(&line[cut.min(line.len())..]);
            state.apply_line(&mangled);
            state.apply_line(&line[..cut.min(line.len())]);
        }
        state.apply_line(&noise);
        // rendering whatever was rebuilt must not panic either
        let _ = snapshot_lenient(&state);
    }
}

fn snapshot_lenient(state: &AppState) -> Vec<Value> {
    let mut out = vec![
        rest::jobs(state, &[]).unwrap(),
        rest::sql_list(state, true, true, 0, 100),
        rest::executors(state, true),
    ];
    for (id, attempt) in state.stages.keys() {
        out.push(
            rest::stage_attempt(
                state,
                *id,
                *attempt,
                &rest::StageOptions {
                    details: true,
                    with_summaries: true,
                    ..Default::default()
                },
            )
            .unwrap(),
        );
        let _ = rest::task_summary(state, *id, *attempt, &[]);
    }
    out
}

/// The listing facts of a log read whole, for comparison with the head-and-tail scan.
fn facts_read_whole(text: &str) -> qprof_eventlog::AppInfo {
    let mut info = qprof_eventlog::AppInfo::default();
    for line in text.lines() {
        if let Ok(event) = serde_json::from_str::<Value>(line) {
            info.apply(&event);
        }
    }
    info
}

#[test]
fn listing_facts_come_from_the_head_and_the_tail_of_large_logs() {
    let text = oracle_text();
    let (head, rest) = text.split_at(
        text.find("{\"Event\":\"SparkListenerApplicationStart\"")
            .unwrap(),
    );
    // megabytes of events between the start and the end, and a large environment
    // before the start in a second log
    let filler: String = (0..40_000)
        .map(|i| {
            format!(
                "{{\"Event\":\"SparkListenerUnknownFiller\",\"n\":{i},\"pad\":\"{}\"}}\n",
                "x".repeat(40)
            )
        })
        .collect();
    let (body, end) = rest.split_at(
        rest.find("{\"Event\":\"SparkListenerApplicationEnd\"")
            .unwrap(),
    );
    let large = format!("{head}{body}{filler}{end}");
    let late_start = format!("{filler}{head}{body}{end}");
    // a start beyond the first small head, within the larger one
    let small_filler: String = filler
        .lines()
        .take(3000)
        .map(|l| format!("{l}\n"))
        .collect();
    assert!((64 << 10..1 << 20).contains(&small_filler.len()));
    let mid_start = format!("{small_filler}{head}{body}{filler}{end}");
    assert!(large.len() > 2 << 20);
    for (name, log) in [
        ("large", &large),
        ("late-start", &late_start),
        ("mid-start", &mid_start),
    ] {
        let dir = temp_dir(name);
        write_single(&dir, APP, log.as_bytes());
        let source = discover(&dir).unwrap().remove(0);
        let scanned = scan_info(&source).unwrap();
        let whole = facts_read_whole(log);
        assert!(whole.end_time.is_some() && whole.id.is_some());
        assert_eq!(
            (
                scanned.id,
                scanned.name,
                scanned.start_time,
                scanned.end_time,
                scanned.spark_version
            ),
            (
                whole.id,
                whole.name,
                whole.start_time,
                whole.end_time,
                whole.spark_version
            ),
            "{name}"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}
