//! A log directory in an object store: the same answers as the same logs on disk, one
//! listing per scan (no request per object), listing facts from ranged reads, and a log in
//! progress refreshed by reading only the bytes appended to it.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use object_store::memory::InMemory;
use object_store::path::Path as ObjectPath;
use object_store::{ObjectStore, ObjectStoreExt, PutPayload};
use qprof_eventlog::Storage;
use qprof_eventlog::fixtures::{ORACLE_APP, copy_oracle_app, every_answer, oracle_log_dir};
use qprof_server::store::StoreOptions;
use qprof_server::{LogStore, ObjectStorage, router};
use serde_json::Value;
use tower::ServiceExt;

fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("qprof-objects-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn options() -> StoreOptions {
    StoreOptions {
        update_interval: Duration::from_secs(3600),
        replay_threads: 2,
        ..StoreOptions::default()
    }
}

async fn put(store: &InMemory, key: &str, bytes: Vec<u8>) {
    store
        .put(&ObjectPath::from(key), PutPayload::from(bytes))
        .await
        .unwrap();
}

/// Uploads every file under `dir` (two levels) to `store` under `prefix`.
async fn upload(dir: &Path, store: &InMemory, prefix: &str) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let entry = entry.unwrap();
        let name = entry.file_name().to_string_lossy().into_owned();
        if entry.path().is_dir() {
            for file in std::fs::read_dir(entry.path()).unwrap() {
                let file = file.unwrap();
                let key = format!("{prefix}/{name}/{}", file.file_name().to_string_lossy());
                put(store, &key, std::fs::read(file.path()).unwrap()).await;
            }
        } else {
            put(
                store,
                &format!("{prefix}/{name}"),
                std::fs::read(entry.path()).unwrap(),
            )
            .await;
        }
    }
}

/// A store over `s3://bucket/<prefix>` backed by `objects`.
fn object_log_store(objects: &Arc<InMemory>, prefix: &str) -> Arc<LogStore> {
    let storage =
        ObjectStorage::new(Arc::clone(objects) as Arc<dyn ObjectStore>, "s3://bucket").unwrap();
    let dir = PathBuf::from(format!("s3://bucket/{prefix}"));
    Arc::new(LogStore::open_in(Storage::new(Arc::new(storage)), &dir, options()).unwrap())
}

async fn get_bytes(store: &Arc<LogStore>, uri: &str) -> (StatusCode, Vec<u8>) {
    let response = router(Arc::clone(store))
        .oneshot(Request::get(uri).body(Body::empty()).unwrap())
        .await
        .unwrap();
    let status = response.status();
    let body = axum::body::to_bytes(response.into_body(), usize::MAX)
        .await
        .unwrap();
    (status, body.to_vec())
}

async fn get(store: &Arc<LogStore>, uri: &str) -> Value {
    let (code, body) = get_bytes(store, uri).await;
    assert_eq!(
        code,
        StatusCode::OK,
        "{uri}: {}",
        String::from_utf8_lossy(&body)
    );
    serde_json::from_slice(&body).unwrap()
}

/// The files of a logs zip, by name.
fn unzip(bytes: Vec<u8>) -> Vec<(String, Vec<u8>)> {
    let mut zip = zip::ZipArchive::new(std::io::Cursor::new(bytes)).unwrap();
    let mut out = Vec::new();
    for i in 0..zip.len() {
        let mut file = zip.by_index(i).unwrap();
        let mut data = Vec::new();
        std::io::Read::read_to_end(&mut file, &mut data).unwrap();
        out.push((file.name().to_string(), data));
    }
    out.sort();
    out
}

/// `answer` without the fields that depend on where and when its logs were written.
fn without_location(mut answer: Value) -> Value {
    qprof_eventlog::compare::strip_host_fields(&mut answer);
    answer
}

/// The storage counters at `/qprof/v1/status`: lists, reads, bytes read.
async fn storage_counters(store: &Arc<LogStore>) -> (u64, u64, u64) {
    let status = get(store, "/qprof/v1/status").await;
    let s = &status["storage"];
    let n = |k: &str| s[k].as_u64().unwrap_or_else(|| panic!("{k}: {status}"));
    (n("lists"), n("reads"), n("bytesRead"))
}

#[tokio::test]
async fn a_prefix_in_an_object_store_answers_as_the_same_directory_on_disk() {
    let dir = temp_dir("same");
    for id in ["local-1", "local-2"] {
        copy_oracle_app(&dir, id);
    }
    // a single-file log, an empty entry and a file that is no log beside them
    let events = std::fs::read(oracle_log_dir().join(format!("events_1_{ORACLE_APP}"))).unwrap();
    let single = String::from_utf8(events)
        .unwrap()
        .replace(ORACLE_APP, "local-3");
    std::fs::write(dir.join("local-3"), single).unwrap();
    std::fs::write(dir.join("local-4"), "").unwrap();
    std::fs::write(dir.join("notes.txt"), "not an event log\n").unwrap();
    let objects = Arc::new(InMemory::new());
    upload(&dir, &objects, "logs/spark").await;

    let local = Arc::new(LogStore::open_with(&dir, options()).unwrap());
    let remote = object_log_store(&objects, "logs/spark/");
    let listing = get(&local, "/api/v1/applications").await;
    assert_eq!(listing.as_array().unwrap().len(), 3, "{listing}");
    let remote_listing = get(&remote, "/api/v1/applications").await;
    assert_eq!(
        remote_listing[0]["attempts"][0]["logSourceFullPath"],
        "s3://bucket/logs/spark/eventlog_v2_local-1"
    );
    assert_eq!(without_location(remote_listing), without_location(listing));
    let (local_status, remote_status) = (
        get(&local, "/qprof/v1/status").await,
        get(&remote, "/qprof/v1/status").await,
    );
    assert_eq!(remote_status["skipped"], local_status["skipped"]);
    assert_eq!(remote_status["logDirectory"], "s3://bucket/logs/spark/");

    // each scan listed the prefix once, and read at most a head and a tail per log
    let (lists, reads, _) = storage_counters(&remote).await;
    let scans = remote_status["scans"].as_u64().unwrap();
    assert_eq!(lists, scans, "{remote_status}");
    assert!(reads <= 2 * 5, "{reads} reads for 5 entries");
    remote.scan();
    let (lists_after, reads_after, _) = storage_counters(&remote).await;
    assert_eq!(
        (lists_after, reads_after),
        (lists + 1, reads),
        "an unchanged prefix: one listing, no reads"
    );

    for id in ["local-1", "local-2", "local-3"] {
        let state = |store: &Arc<LogStore>| {
            let app = store.attempts(id).unwrap().remove(0);
            every_answer(store.replay(&app).unwrap().state())
        };
        assert_eq!(state(&remote), state(&local), "{id}");
        for path in ["", "/jobs", "/stages", "/executors", "/sql", "/environment"] {
            let uri = format!("/api/v1/applications/{id}{path}");
            assert_eq!(
                without_location(get(&remote, &uri).await),
                without_location(get(&local, &uri).await),
                "{uri}"
            );
        }
        let uri = format!("/api/v1/applications/{id}/logs");
        let (code, zip) = get_bytes(&remote, &uri).await;
        assert_eq!(code, StatusCode::OK);
        let files = unzip(zip);
        assert!(!files.is_empty());
        assert_eq!(files, unzip(get_bytes(&local, &uri).await.1), "{uri}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[tokio::test]
async fn a_log_in_progress_is_refreshed_by_reading_only_its_new_bytes() {
    let events = std::fs::read(oracle_log_dir().join(format!("events_1_{ORACLE_APP}"))).unwrap();
    // cut after the first job's end, and after the last line but one
    let text = String::from_utf8(events.clone()).unwrap();
    let cut = text.find("SparkListenerJobEnd").unwrap();
    let first = text[cut..].find('\n').unwrap() + cut + 1;
    let second = text[..text.len() - 1].rfind('\n').unwrap() + 1;
    let app_dir = format!("logs/eventlog_v2_{ORACLE_APP}");
    let events_key = format!("{app_dir}/events_1_{ORACLE_APP}");
    let objects = Arc::new(InMemory::new());
    put(&objects, &events_key, events[..first].to_vec()).await;
    put(
        &objects,
        &format!("{app_dir}/appstatus_{ORACLE_APP}.inprogress"),
        Vec::new(),
    )
    .await;

    let store = object_log_store(&objects, "logs");
    let app = format!("/api/v1/applications/{ORACLE_APP}");
    let jobs = |v: &Value| v.as_array().unwrap().len();
    let before = get(&store, &format!("{app}/jobs")).await;
    assert_eq!(get(&store, &app).await["attempts"][0]["completed"], false);

    // the log grows: the next scan sees it, and the replay reads only what was appended
    put(&objects, &events_key, events[..second].to_vec()).await;
    store.scan();
    let (_, _, read_before) = storage_counters(&store).await;
    let grown = get(&store, &format!("{app}/jobs")).await;
    let (_, _, read_after) = storage_counters(&store).await;
    assert!(jobs(&grown) > jobs(&before), "{before} then {grown}");
    assert_eq!(read_after - read_before, (second - first) as u64);

    // it completes: the last line, and the marker loses its suffix
    put(&objects, &events_key, events.clone()).await;
    objects
        .delete(&ObjectPath::from(format!(
            "{app_dir}/appstatus_{ORACLE_APP}.inprogress"
        )))
        .await
        .unwrap();
    put(
        &objects,
        &format!("{app_dir}/appstatus_{ORACLE_APP}"),
        Vec::new(),
    )
    .await;
    store.scan();
    assert_eq!(get(&store, &app).await["attempts"][0]["completed"], true);
    let dir = temp_dir("complete");
    copy_oracle_app(&dir, ORACLE_APP);
    let local = Arc::new(LogStore::open_with(&dir, options()).unwrap());
    for path in ["/jobs", "/stages", "/sql", "/executors"] {
        let uri = format!("{app}{path}");
        assert_eq!(get(&store, &uri).await, get(&local, &uri).await, "{uri}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_prefix_that_cannot_be_listed_is_an_error_and_an_empty_one_is_served_empty() {
    let objects = Arc::new(InMemory::new());
    let store = object_log_store(&objects, "nothing/here");
    assert!(store.list().unwrap().is_empty());
    let storage = ObjectStorage::new(objects as Arc<dyn ObjectStore>, "s3://bucket").unwrap();
    let outside = PathBuf::from("s3://other/logs");
    let err = LogStore::open_in(Storage::new(Arc::new(storage)), &outside, options()).unwrap_err();
    assert!(err.to_string().contains("s3://other/logs"), "{err}");
}
