//! A replay saved in its binary form and read back answers exactly as the replay did; a
//! file of another version, for a changed log, truncated or altered is refused.

use qprof_eventlog::Replay;
use qprof_eventlog::discover;
use qprof_eventlog::fixtures::{copy_oracle_app, every_answer, synthetic_spark_log};
use qprof_eventlog::{LogStamp, SNAPSHOT_VERSION, SnapshotError};

fn temp_dir(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("qprof-saved-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

const STAMP: LogStamp = LogStamp {
    size: 1234,
    modified_millis: 1_700_000_000_000,
};

#[test]
fn a_saved_replay_answers_as_the_replay_did() {
    let dir = temp_dir("round-trip");
    copy_oracle_app(&dir.join("oracle"), "local-1");
    synthetic_spark_log(&dir.join("large"), 4 << 20);
    for sub in ["oracle", "large"] {
        let source = discover(&dir.join(sub)).unwrap().remove(0);
        let replay = Replay::load(source.clone()).unwrap();
        let bytes = replay.snapshot(STAMP).unwrap();
        let restored = Replay::from_snapshot(source, &bytes, STAMP).unwrap();
        assert_eq!(
            every_answer(restored.state()),
            every_answer(replay.state()),
            "{sub}"
        );
        assert_eq!(restored.bytes_applied(), replay.bytes_applied());
        // the names of metrics are shared again, and vectors are read back at their
        // length: no larger than the replay
        assert!(
            restored.resident_bytes() <= replay.resident_bytes(),
            "{sub}: {} > {}",
            restored.resident_bytes(),
            replay.resident_bytes()
        );
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_saved_replay_of_another_version_stamp_or_content_is_refused() {
    let dir = temp_dir("refused");
    copy_oracle_app(&dir, "local-1");
    let source = discover(&dir).unwrap().remove(0);
    let bytes = Replay::load(source.clone())
        .unwrap()
        .snapshot(STAMP)
        .unwrap();
    let refused =
        |b: &[u8], stamp: LogStamp| Replay::from_snapshot(source.clone(), b, stamp).unwrap_err();
    assert_eq!(
        refused(b"{\"Event\":\"x\"}", STAMP),
        SnapshotError::NotASnapshot
    );
    let changed = LogStamp {
        size: STAMP.size + 1,
        ..STAMP
    };
    assert_eq!(refused(&bytes, changed), SnapshotError::Stale);
    let mut older = bytes.clone();
    older[12..16].copy_from_slice(&(SNAPSHOT_VERSION - 1).to_le_bytes());
    assert_eq!(
        refused(&older, STAMP),
        SnapshotError::Version(SNAPSHOT_VERSION - 1)
    );
    for cut in [20, 44, bytes.len() / 2, bytes.len() - 1] {
        assert_eq!(
            refused(&bytes[..cut], STAMP),
            SnapshotError::Truncated,
            "cut at {cut}"
        );
    }
    for at in [44, bytes.len() / 2, bytes.len() - 1] {
        let mut flipped = bytes.clone();
        flipped[at] ^= 0x5a;
        assert_eq!(
            refused(&flipped, STAMP),
            SnapshotError::Damaged,
            "flipped at {at}"
        );
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
