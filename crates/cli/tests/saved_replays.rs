//! A qprof log of a TPC-H run, replayed and then read back from its saved form: every REST
//! answer (qprof's profiles included) is the same.

use common::tpch_event_log;
use qprof_eventlog::LogStamp;
use qprof_eventlog::Replay;
use qprof_eventlog::discover;
use qprof_eventlog::fixtures::every_answer;

mod common;

#[test]
fn a_tpch_runs_saved_replay_answers_as_its_replay() {
    let dir = std::env::temp_dir().join(format!("qprof-cli-saved-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let events = tpch_event_log(&dir, None);
    let source = discover(&events).unwrap().remove(0);
    let replay = Replay::load(source.clone()).unwrap();
    assert_eq!(replay.state().executions.len(), 22);
    let stamp = LogStamp {
        size: 1,
        modified_millis: 2,
    };
    let saved = replay.snapshot(stamp).unwrap();
    let restored = Replay::from_snapshot(source, &saved, stamp).unwrap();
    let (want, got) = (every_answer(replay.state()), every_answer(restored.state()));
    // the profiles are there to compare
    assert!(want["sql"][0][1]["query"].is_object(), "no qprof profile");
    assert_eq!(got, want);
    std::fs::remove_dir_all(&dir).unwrap();
}
