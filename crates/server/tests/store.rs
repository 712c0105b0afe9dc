//! The log store at scale: entries that are not readable logs are skipped and reported,
//! requests read the index instead of the directory, replays stay within a byte budget,
//! and one application's load neither repeats nor blocks the others.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use qprof_eventlog::fixtures::{ORACLE_APP, copy_oracle_app, oracle_log_dir};
use qprof_server::store::{CleanerOptions, StoreOptions};
use qprof_server::{LogStore, router};
use serde_json::Value;
use tower::ServiceExt;

fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("qprof-store-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Copies the oracle application into `dir` as application `local-<n>`; returns its id.
fn copy_app(dir: &Path, n: u64) -> String {
    let id = format!("local-{n}");
    copy_oracle_app(dir, &id);
    id
}

fn options(max_memory_bytes: u64) -> StoreOptions {
    StoreOptions {
        update_interval: Duration::from_secs(3600),
        max_memory_bytes,
        replay_threads: 2,
        ..StoreOptions::default()
    }
}

async fn get(store: &Arc<LogStore>, uri: &str) -> (StatusCode, Value) {
    let response = router(Arc::clone(store))
        .oneshot(Request::get(uri).body(Body::empty()).unwrap())
        .await
        .unwrap();
    let status = response.status();
    let body = axum::body::to_bytes(response.into_body(), usize::MAX)
        .await
        .unwrap();
    let json = serde_json::from_slice(&body)
        .unwrap_or_else(|e| panic!("{uri}: not JSON ({e}): {}", String::from_utf8_lossy(&body)));
    (status, json)
}

/// One replay's size, as the cache accounts it: application `id`'s of `dir`.
async fn replay_bytes(dir: &Path, id: &str) -> u64 {
    let probe = Arc::new(LogStore::open_with(dir, options(u64::MAX)).unwrap());
    get(&probe, &format!("/api/v1/applications/{id}/jobs")).await;
    let one = status(&probe).await["cache"]["residentBytes"]
        .as_u64()
        .unwrap();
    assert!(one > 0);
    one
}

async fn status(store: &Arc<LogStore>) -> Value {
    let (code, json) = get(store, "/qprof/v1/status").await;
    assert_eq!(code, StatusCode::OK);
    json
}

#[tokio::test]
async fn entries_that_are_not_readable_logs_are_skipped_counted_and_explained() {
    let dir = temp_dir("skipped");
    let good = copy_app(&dir, 1);
    // a log whose event file cannot be read (it is a directory)
    let unreadable = dir.join("eventlog_v2_local-2");
    std::fs::create_dir_all(unreadable.join("events_1_local-2")).unwrap();
    std::fs::write(unreadable.join("appstatus_local-2"), "").unwrap();
    // a log cut inside its first line, an empty one, a file that is no log, a dangling link
    let first = std::fs::read(oracle_log_dir().join(format!("events_1_{ORACLE_APP}"))).unwrap();
    std::fs::write(dir.join("local-3"), &first[..40]).unwrap();
    std::fs::write(dir.join("local-4"), "").unwrap();
    std::fs::write(dir.join("notes.txt"), "not an event log\n").unwrap();
    std::os::unix::fs::symlink(dir.join("gone"), dir.join("local-5")).unwrap();

    let store = Arc::new(LogStore::open_with(&dir, options(1 << 30)).unwrap());
    let (code, apps) = get(&store, "/api/v1/applications").await;
    assert_eq!(code, StatusCode::OK);
    let ids: Vec<&str> = apps
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, [good.as_str()]);
    let status = status(&store).await;
    let reasons: Vec<(String, String)> = status["skipped"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["entry"].as_str().unwrap().to_string(),
                s["reason"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    let reason = |entry: &str| {
        reasons
            .iter()
            .find(|(e, _)| e == entry)
            .map(|(_, r)| r.as_str())
            .unwrap_or_else(|| panic!("{entry} not skipped: {reasons:?}"))
    };
    assert_eq!(reasons.len(), 5, "{reasons:?}");
    assert!(
        reason("eventlog_v2_local-2").contains("directory"),
        "{reasons:?}"
    );
    assert!(
        reason("local-3").contains("no application start"),
        "{reasons:?}"
    );
    assert_eq!(reason("local-4"), "empty");
    assert!(
        reason("notes.txt").contains("no application start"),
        "{reasons:?}"
    );
    assert!(reason("local-5").contains("symbolic link"), "{reasons:?}");
    assert_eq!(status["applications"], 1);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_missing_log_directory_is_an_error_and_an_empty_one_is_served_empty() {
    let dir = temp_dir("missing");
    let err = LogStore::open(&dir.join("nope")).unwrap_err();
    assert!(err.to_string().contains("nope"), "{err}");
    let store = LogStore::open(&dir).unwrap();
    assert!(store.list().unwrap().is_empty());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[tokio::test]
async fn an_unscanned_store_answers_before_reading_a_log_and_its_scanner_reads_them_first() {
    let dir = temp_dir("unscanned");
    let id = copy_app(&dir, 1);
    let missing = LogStore::open_unscanned_in(
        qprof_eventlog::Storage::local(),
        &dir.join("nope"),
        options(1 << 30),
    );
    assert!(
        missing.is_err(),
        "a directory that cannot be listed is an error"
    );
    let store = Arc::new(
        LogStore::open_unscanned_in(qprof_eventlog::Storage::local(), &dir, options(1 << 30))
            .unwrap(),
    );
    // nothing read: the listing is empty, and the status says no scan ended
    let (code, listing) = get(&store, "/api/v1/applications").await;
    assert_eq!(code, StatusCode::OK);
    assert_eq!(listing, serde_json::json!([]));
    let first = status(&store).await;
    assert_eq!(first["scans"], 0);
    assert_eq!(first["directoryError"], Value::Null);
    // the scanner's first scan does not wait for the update interval (an hour here)
    LogStore::spawn_scanner(&store);
    let deadline = std::time::Instant::now() + Duration::from_secs(120);
    while store.status().scans == 0 {
        assert!(std::time::Instant::now() < deadline, "no first scan");
        std::thread::yield_now();
    }
    let (code, listing) = get(&store, "/api/v1/applications").await;
    assert_eq!(code, StatusCode::OK);
    assert_eq!(listing[0]["id"], id.as_str());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[tokio::test]
async fn requests_read_the_index_and_an_unknown_id_rescans() {
    let dir = temp_dir("index");
    let first = copy_app(&dir, 1);
    let store = Arc::new(LogStore::open_with(&dir, options(1 << 30)).unwrap());
    let scans = |s: &Value| s["scans"].as_u64().unwrap();
    let before = scans(&status(&store).await);
    for path in ["", "/jobs", "/stages", "/sql", "/executors"] {
        let (code, _) = get(&store, &format!("/api/v1/applications/{first}{path}")).await;
        assert_eq!(code, StatusCode::OK, "{path}");
    }
    get(&store, "/api/v1/applications").await;
    assert_eq!(scans(&status(&store).await), before, "a request scanned");
    // a log that appears after the last scan is found when asked for
    let second = copy_app(&dir, 2);
    let (code, _) = get(&store, &format!("/api/v1/applications/{second}/jobs")).await;
    assert_eq!(code, StatusCode::OK);
    assert_eq!(scans(&status(&store).await), before + 1);
    // requests for unknown ids rescan at most once in a while, however many come
    for _ in 0..20 {
        let (code, _) = get(&store, "/api/v1/applications/local-999/jobs").await;
        assert_eq!(code, StatusCode::NOT_FOUND);
    }
    assert_eq!(scans(&status(&store).await), before + 1);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[tokio::test]
async fn replays_stay_within_their_budget_and_answer_as_a_fresh_server() {
    let dir = temp_dir("budget");
    let ids: Vec<String> = (1..=5).map(|n| copy_app(&dir, n)).collect();
    let one = replay_bytes(&dir, &ids[0]).await;
    let store = Arc::new(LogStore::open_with(&dir, options(one * 5 / 2)).unwrap());
    for (round, id) in ids.iter().chain(ids.iter()).enumerate() {
        for path in ["jobs", "stages", "sql", "allexecutors"] {
            let uri = format!("/api/v1/applications/{id}/{path}");
            let (code, got) = get(&store, &uri).await;
            assert_eq!(code, StatusCode::OK, "{uri}");
            let fresh = Arc::new(LogStore::open_with(&dir, options(u64::MAX)).unwrap());
            assert_eq!(got, get(&fresh, &uri).await.1, "{uri}");
        }
        let cache = status(&store).await["cache"].clone();
        assert!(
            cache["resident"].as_u64().unwrap() <= 2,
            "round {round}: {cache}"
        );
        assert!(
            cache["residentBytes"].as_u64() <= cache["budgetBytes"].as_u64(),
            "{cache}"
        );
    }
    let cache = status(&store).await["cache"].clone();
    // every application was loaded twice: evicted in between
    assert_eq!(cache["loads"], 10, "{cache}");
    assert_eq!(cache["evictions"], 8, "{cache}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[tokio::test]
async fn a_pass_over_every_application_pushes_out_no_page_s_replay() {
    let dir = temp_dir("passing");
    let ids: Vec<String> = (1..=5).map(|n| copy_app(&dir, n)).collect();
    let one = replay_bytes(&dir, &ids[0]).await;
    // room for two replays: a page's, and one more
    let store = Arc::new(LogStore::open_with(&dir, options(one * 5 / 2)).unwrap());
    get(&store, &format!("/api/v1/applications/{}/jobs", ids[0])).await;
    let listed = store.list().unwrap();
    for app in &listed {
        let replay = store.replay_passing(app).unwrap();
        assert_eq!(replay.state().info.id.as_deref(), Some(app.id()));
    }
    let cache = status(&store).await["cache"].clone();
    assert_eq!(cache["evictions"], 0, "{cache}");
    assert_eq!(
        cache["resident"], 2,
        "the page's and the one that fit: {cache}"
    );
    assert_eq!(cache["loads"], 5, "{cache}");
    // the page's replay is still in memory: reading it again loads nothing
    get(&store, &format!("/api/v1/applications/{}/jobs", ids[0])).await;
    assert_eq!(status(&store).await["cache"]["loads"], 5);
    // a second pass reads the one kept in memory and loads the other three again
    for app in &listed {
        store.replay_passing(app).unwrap();
    }
    assert_eq!(status(&store).await["cache"]["loads"], 8);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn one_application_loads_once_and_its_load_blocks_no_other() {
    let dir = temp_dir("flight");
    let cached = copy_app(&dir, 1);
    let slow = copy_app(&dir, 2);
    // the slow application's loads wait until the test opens the gate
    let gate = Arc::new((Mutex::new(false), Condvar::new()));
    let held = Arc::new(AtomicUsize::new(0));
    let hook = {
        let (gate, held) = (Arc::clone(&gate), Arc::clone(&held));
        let slow_log = format!("eventlog_v2_{slow}");
        Arc::new(move |name: &str| {
            if name == slow_log {
                held.fetch_add(1, Ordering::SeqCst);
                let (open, opened) = &*gate;
                let mut open = open.lock().unwrap();
                while !*open {
                    open = opened.wait(open).unwrap();
                }
            }
        })
    };
    let store = Arc::new(
        LogStore::open_with(&dir, options(1 << 30))
            .unwrap()
            .with_load_hook(hook),
    );
    let (code, _) = get(&store, &format!("/api/v1/applications/{cached}/jobs")).await;
    assert_eq!(code, StatusCode::OK);
    // two requests for the slow application, at once
    let answers = Arc::new(Mutex::new(Vec::new()));
    let requests: Vec<_> = (0..2)
        .map(|_| {
            let (store, answers, slow) = (Arc::clone(&store), Arc::clone(&answers), slow.clone());
            tokio::spawn(async move {
                let answer = get(&store, &format!("/api/v1/applications/{slow}/stages")).await;
                answers.lock().unwrap().push(answer);
            })
        })
        .collect();
    while held.load(Ordering::SeqCst) == 0 {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    // the slow load is held: the listing and the cached application still answer
    let (code, apps) = get(&store, "/api/v1/applications").await;
    assert_eq!((code, apps.as_array().unwrap().len()), (StatusCode::OK, 2));
    let (code, _) = get(&store, &format!("/api/v1/applications/{cached}/stages")).await;
    assert_eq!(code, StatusCode::OK);
    assert!(
        answers.lock().unwrap().is_empty(),
        "the slow load was not held"
    );
    *gate.0.lock().unwrap() = true;
    gate.1.notify_all();
    for request in requests {
        request.await.unwrap();
    }
    let answers = std::mem::take(&mut *answers.lock().unwrap());
    assert_eq!(answers.len(), 2);
    assert!(answers.iter().all(|(code, _)| *code == StatusCode::OK));
    assert_eq!(answers[0].1, answers[1].1);
    assert_eq!(held.load(Ordering::SeqCst), 1, "the slow log loaded twice");
    assert_eq!(status(&store).await["cache"]["loads"], 2);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Application `local-<n>` copied into `dir`, last updated `days` ago; in progress if
/// `running`. Returns its entry name.
fn aged_app(dir: &Path, n: u64, days: u64, running: bool) -> String {
    let id = copy_app(dir, n);
    let entry = dir.join(format!("eventlog_v2_{id}"));
    if running {
        std::fs::rename(
            entry.join(format!("appstatus_{id}")),
            entry.join(format!("appstatus_{id}.inprogress")),
        )
        .unwrap();
    }
    let when = std::time::SystemTime::now() - Duration::from_secs(days * 86_400);
    for file in std::fs::read_dir(&entry).unwrap() {
        std::fs::File::options()
            .write(true)
            .open(file.unwrap().path())
            .unwrap()
            .set_modified(when)
            .unwrap();
    }
    format!("eventlog_v2_{id}")
}

fn entries(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[test]
fn the_cleaner_deletes_old_and_surplus_completed_logs_and_never_a_running_one() {
    let dir = temp_dir("cleaner");
    let ages = [(1, 10), (2, 8), (3, 3), (4, 2), (5, 1)];
    let completed: Vec<String> = ages
        .iter()
        .map(|&(n, days)| aged_app(&dir, n, days, false))
        .collect();
    let running = aged_app(&dir, 6, 20, true);
    // older than a week: the two oldest completed ones go, the running one stays
    let store = LogStore::open_with(
        &dir,
        StoreOptions {
            cleaner: CleanerOptions {
                max_age: Some(Duration::from_secs(7 * 86_400)),
                max_num: None,
            },
            ..options(1 << 30)
        },
    )
    .unwrap();
    let mut left = vec![
        running.clone(),
        completed[2].clone(),
        completed[3].clone(),
        completed[4].clone(),
    ];
    left.sort();
    assert_eq!(entries(&dir), left);
    assert_eq!(store.list().unwrap().len(), 4);
    assert_eq!(store.status().cleaned, 2);
    // at most two: the least recently updated completed ones go until two are left
    let store = LogStore::open_with(
        &dir,
        StoreOptions {
            cleaner: CleanerOptions {
                max_age: None,
                max_num: Some(2),
            },
            ..options(1 << 30)
        },
    )
    .unwrap();
    let mut left = vec![running.clone(), completed[4].clone()];
    left.sort();
    assert_eq!(entries(&dir), left);
    assert_eq!(store.status().cleaned, 2);
    // however few are kept, the running log stays
    let store = LogStore::open_with(
        &dir,
        StoreOptions {
            cleaner: CleanerOptions {
                max_age: Some(Duration::from_secs(1)),
                max_num: Some(1),
            },
            ..options(1 << 30)
        },
    )
    .unwrap();
    assert_eq!(entries(&dir), [running]);
    assert_eq!(store.list().unwrap().len(), 1);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[tokio::test]
async fn a_directory_that_becomes_unreadable_keeps_its_last_index_and_says_so() {
    let dir = temp_dir("vanishing");
    let id = copy_app(&dir, 1);
    let store = Arc::new(LogStore::open_with(&dir, options(1 << 30)).unwrap());
    let moved = dir.with_extension("moved");
    std::fs::rename(&dir, &moved).unwrap();
    store.scan();
    let broken = status(&store).await;
    assert!(
        broken["directoryError"]
            .as_str()
            .is_some_and(|e| !e.is_empty()),
        "{broken}"
    );
    let (code, apps) = get(&store, "/api/v1/applications").await;
    assert_eq!(code, StatusCode::OK);
    assert_eq!(apps[0]["id"], id.as_str());
    // readable again: the error clears
    std::fs::rename(&moved, &dir).unwrap();
    store.scan();
    assert!(status(&store).await["directoryError"].is_null());
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Every REST answer for application `id` that a store gives.
async fn every_answer(store: &Arc<LogStore>, id: &str) -> Value {
    let base = format!("/api/v1/applications/{id}");
    let mut paths = vec![
        base.clone(),
        format!("{base}/jobs"),
        format!("{base}/stages?withSummaries=true"),
        format!("{base}/executors"),
        format!("{base}/allexecutors"),
        format!("{base}/environment"),
        format!("{base}/sql"),
    ];
    let (_, stages) = get(store, &format!("{base}/stages")).await;
    for stage in stages.as_array().unwrap() {
        let (s, a) = (&stage["stageId"], &stage["attemptId"]);
        paths.push(format!("{base}/stages/{s}/{a}?details=true"));
        paths.push(format!("{base}/stages/{s}/{a}/taskList?length=1000"));
        paths.push(format!("{base}/stages/{s}/{a}/taskSummary"));
    }
    let (_, sqls) = get(store, &format!("{base}/sql")).await;
    for sql in sqls.as_array().unwrap() {
        paths.push(format!(
            "{base}/sql/{}?details=true&planDescription=true",
            sql["id"]
        ));
    }
    let mut out = serde_json::Map::new();
    for path in paths {
        let (code, answer) = get(store, &path).await;
        out.insert(path, serde_json::json!([code.as_u16(), answer]));
    }
    Value::Object(out)
}

fn with_disk_store(store_dir: &Path, budget: u64) -> StoreOptions {
    StoreOptions {
        store_dir: Some(store_dir.to_path_buf()),
        store_max_disk_bytes: budget,
        ..options(1 << 30)
    }
}

#[tokio::test]
async fn a_saved_replay_is_read_back_after_a_restart_and_answers_identically() {
    let dir = temp_dir("disk");
    let saved = temp_dir("disk-store");
    let id = copy_app(&dir, 1);
    let plain = Arc::new(LogStore::open_with(&dir, options(1 << 30)).unwrap());
    let expected = every_answer(&plain, &id).await;
    // the first server replays the log and saves it
    let first = Arc::new(LogStore::open_with(&dir, with_disk_store(&saved, 1 << 30)).unwrap());
    assert_eq!(every_answer(&first, &id).await, expected);
    let disk = status(&first).await["diskStore"].clone();
    assert_eq!(
        (disk["writes"].as_u64(), disk["files"].as_u64()),
        (Some(1), Some(1)),
        "{disk}"
    );
    // a restarted server reads it back instead
    let second = Arc::new(LogStore::open_with(&dir, with_disk_store(&saved, 1 << 30)).unwrap());
    assert_eq!(every_answer(&second, &id).await, expected);
    let after = status(&second).await;
    assert_eq!(after["diskStore"]["hits"], 1, "{after}");
    assert_eq!(after["cache"]["loads"], 0, "{after}");
    std::fs::remove_dir_all(&dir).unwrap();
    std::fs::remove_dir_all(&saved).unwrap();
}

#[tokio::test]
async fn a_damaged_or_stale_saved_replay_is_discarded_and_the_log_replayed() {
    let dir = temp_dir("damaged");
    let saved = temp_dir("damaged-store");
    let id = copy_app(&dir, 1);
    let plain = Arc::new(LogStore::open_with(&dir, options(1 << 30)).unwrap());
    let expected = every_answer(&plain, &id).await;
    let file = saved.join(format!("eventlog_v2_{id}.replay"));
    type Damage<'a> = (&'a str, &'a dyn Fn(&mut Vec<u8>));
    let damages: [Damage<'_>; 3] = [
        ("truncated", &|b: &mut Vec<u8>| b.truncate(b.len() / 2)),
        ("flipped", &|b: &mut Vec<u8>| {
            let at = b.len() - 10;
            b[at] ^= 0xff;
        }),
        ("older version", &|b: &mut Vec<u8>| {
            b[12..16].copy_from_slice(&0u32.to_le_bytes())
        }),
    ];
    for (what, damage) in damages {
        let writer = Arc::new(LogStore::open_with(&dir, with_disk_store(&saved, 1 << 30)).unwrap());
        every_answer(&writer, &id).await;
        let mut bytes = std::fs::read(&file).unwrap();
        damage(&mut bytes);
        std::fs::write(&file, &bytes).unwrap();
        let reader = Arc::new(LogStore::open_with(&dir, with_disk_store(&saved, 1 << 30)).unwrap());
        assert_eq!(every_answer(&reader, &id).await, expected, "{what}");
        let s = status(&reader).await;
        assert_eq!(s["diskStore"]["discards"], 1, "{what}: {s}");
        assert_eq!(s["cache"]["loads"], 1, "{what}: {s}");
        // and the replay was saved again, good this time
        assert_eq!(s["diskStore"]["writes"], 1, "{what}: {s}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
    std::fs::remove_dir_all(&saved).unwrap();
}

#[tokio::test]
async fn saved_replays_stay_within_their_disk_budget() {
    let dir = temp_dir("disk-budget");
    let saved = temp_dir("disk-budget-store");
    let ids: Vec<String> = (1..=4).map(|n| copy_app(&dir, n)).collect();
    let probe = Arc::new(LogStore::open_with(&dir, with_disk_store(&saved, 1 << 30)).unwrap());
    get(&probe, &format!("/api/v1/applications/{}/jobs", ids[0])).await;
    let one = status(&probe).await["diskStore"]["bytes"].as_u64().unwrap();
    std::fs::remove_dir_all(&saved).unwrap();
    let store = Arc::new(LogStore::open_with(&dir, with_disk_store(&saved, one * 5 / 2)).unwrap());
    for id in &ids {
        get(&store, &format!("/api/v1/applications/{id}/jobs")).await;
        let disk = status(&store).await["diskStore"].clone();
        assert!(disk["files"].as_u64().unwrap() <= 2, "{disk}");
        assert!(
            disk["bytes"].as_u64() <= disk["budgetBytes"].as_u64(),
            "{disk}"
        );
    }
    // the last two opened are the ones kept
    let mut kept: Vec<String> = std::fs::read_dir(&saved)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    kept.sort();
    assert_eq!(
        kept,
        [
            format!("eventlog_v2_{}.replay", ids[2]),
            format!("eventlog_v2_{}.replay", ids[3])
        ]
    );
    std::fs::remove_dir_all(&dir).unwrap();
    std::fs::remove_dir_all(&saved).unwrap();
}
