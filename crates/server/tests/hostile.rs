//! Logs and requests written to hurt the server, each through the router (no socket): a
//! stage stating trillions of tasks, decompression bombs of each codec, links out of the
//! log directory, an application id made to break the Prometheus text and the download's
//! header, a request for a host the server does not serve, without its token or user.
//! Each is refused or skipped with its reason, and the server answers afterwards.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use qprof_eventlog::fixtures::{ORACLE_APP, copy_oracle_app, copy_oracle_app_edited, zstd_bomb};
use qprof_eventlog::{Storage, encode_lz4_blocks};
use qprof_server::store::StoreOptions;
use qprof_server::{AccessOptions, LogStore, guarded, router};
use serde_json::Value;
use tower::ServiceExt;

struct TestDir(PathBuf);

impl TestDir {
    fn new(name: &str) -> TestDir {
        let dir = std::env::temp_dir().join(format!("qprof-hostile-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        TestDir(dir)
    }
}

impl std::ops::Deref for TestDir {
    type Target = Path;
    fn deref(&self) -> &Path {
        &self.0
    }
}

impl Drop for TestDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn options() -> StoreOptions {
    StoreOptions {
        update_interval: Duration::from_secs(3600),
        replay_threads: 2,
        ..StoreOptions::default()
    }
}

struct Reply {
    status: StatusCode,
    headers: axum::http::HeaderMap,
    body: Vec<u8>,
}

impl Reply {
    fn json(&self) -> Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&self.body)))
    }

    fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

async fn send(app: axum::Router, request: Request<Body>) -> Reply {
    let response = app.oneshot(request).await.unwrap();
    let status = response.status();
    let headers = response.headers().clone();
    let body = axum::body::to_bytes(response.into_body(), usize::MAX)
        .await
        .unwrap()
        .to_vec();
    Reply {
        status,
        headers,
        body,
    }
}

async fn get(store: &Arc<LogStore>, uri: &str) -> Reply {
    send(
        router(Arc::clone(store)),
        Request::get(uri).body(Body::empty()).unwrap(),
    )
    .await
}

/// The skipped entries of `/qprof/v1/status`, as (entry, reason).
async fn skipped(store: &Arc<LogStore>) -> Vec<(String, String)> {
    let status = get(store, "/qprof/v1/status").await.json();
    status["skipped"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["entry"].as_str().unwrap().to_string(),
                s["reason"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

#[tokio::test]
async fn a_stage_that_states_trillions_of_tasks_costs_what_its_log_holds() {
    let dir = TestDir::new("tasks");
    copy_oracle_app_edited(&dir, "local-7", |text| {
        text.replace("\"Number of Tasks\":2", "\"Number of Tasks\":4000000000000")
            .replace(
                "\"Number of Tasks\":1",
                "\"Number of Tasks\":9223372036854775807",
            )
    });
    let store = Arc::new(LogStore::open_with(&dir, options()).unwrap());
    let list = get(&store, "/api/v1/applications/local-7/sql").await;
    assert_eq!(list.status, StatusCode::OK, "{}", list.text());
    let executions = list.json();
    assert!(!executions.as_array().unwrap().is_empty());
    for execution in executions.as_array().unwrap() {
        let id = execution["id"].as_i64().unwrap();
        let one = get(&store, &format!("/api/v1/applications/local-7/sql/{id}")).await;
        assert_eq!(one.status, StatusCode::OK, "{}", one.text());
    }
    for uri in [
        "/api/v1/applications/local-7/stages",
        "/api/v1/applications/local-7/jobs",
    ] {
        let reply = get(&store, uri).await;
        assert_eq!(reply.status, StatusCode::OK, "{uri}: {}", reply.text());
    }
    // the stage says what it says; its answer is no larger for it
    let stages = get(&store, "/api/v1/applications/local-7/stages")
        .await
        .json();
    assert!(
        stages
            .as_array()
            .unwrap()
            .iter()
            .any(|s| s["numTasks"] == 4_000_000_000_000_i64)
    );
    assert_eq!(get(&store, "/api/v1/version").await.status, StatusCode::OK);
}

#[tokio::test]
async fn decompression_bombs_are_skipped_with_their_reason_and_the_rest_is_served() {
    let dir = TestDir::new("bombs");
    copy_oracle_app(&dir, "local-1");
    // 256 MiB of zeros in a few KiB, past the limit of 64 MiB
    let bomb = zstd_bomb(b"", 256 << 20);
    assert!(bomb.len() < 64 << 10, "{} bytes", bomb.len());
    std::fs::write(dir.join("local-2.zstd"), &bomb).unwrap();
    // an lz4 header that states a 4 GiB block, 21 bytes in all
    let mut lz4 = b"LZ4Block".to_vec();
    lz4.push(0x20);
    lz4.extend_from_slice(&1u32.to_le_bytes());
    lz4.extend_from_slice(&u32::MAX.to_le_bytes());
    lz4.extend_from_slice(&0u32.to_le_bytes());
    lz4.push(0);
    std::fs::write(dir.join("local-3.lz4"), &lz4).unwrap();
    // a real start, then a line of 32 MiB of zeros (under the limit): listed, the line
    // counted corrupt
    let start = std::fs::read_to_string(
        qprof_eventlog::fixtures::oracle_log_dir().join(format!("events_1_{ORACLE_APP}")),
    )
    .unwrap()
    .lines()
    .take(6)
    .collect::<Vec<_>>()
    .join("\n")
    .replace(ORACLE_APP, "local-4")
        + "\n";
    std::fs::write(
        dir.join("local-4.lz4"),
        encode_lz4_blocks(&[start.as_bytes(), &vec![0u8; 32 << 20]].concat()),
    )
    .unwrap();
    // lz4 blocks as compressible as lz4 makes them: 96 MiB of zeros after the start, past
    // the limit
    std::fs::write(
        dir.join("local-6.lz4"),
        encode_lz4_blocks(&[start.as_bytes(), &vec![0u8; 96 << 20]].concat()),
    )
    .unwrap();
    // a log of varied lines, 80 MiB decoded, compressing as logs do: past the limit
    let mut varied = zstd::stream::write::Encoder::new(Vec::new(), 1).unwrap();
    let mut n = 0u64;
    while n < 80 << 20 {
        let line = format!(
            "{{\"Event\":\"x\",\"n\":{n},\"h\":{}}}\n",
            n.wrapping_mul(0x9E37_79B9_7F4A_7C15)
        );
        varied.write_all(line.as_bytes()).unwrap();
        n += line.len() as u64;
    }
    std::fs::write(dir.join("local-5.zstd"), varied.finish().unwrap()).unwrap();
    let storage = Storage::local().with_max_decoded_bytes(64 << 20);
    let store = Arc::new(LogStore::open_in(storage, &dir, options()).unwrap());
    let skipped = skipped(&store).await;
    let reason = |entry: &str| {
        skipped
            .iter()
            .find(|(e, _)| e == entry)
            .map(|(_, r)| r.clone())
            .unwrap_or_else(|| panic!("{entry} not skipped: {skipped:?}"))
    };
    assert!(
        reason("local-2.zstd").contains("decompression bomb"),
        "{skipped:?}"
    );
    assert!(
        reason("local-5.zstd").contains("decompresses to more than 67108864 bytes"),
        "{skipped:?}"
    );
    assert!(
        reason("local-6.lz4").contains("decompresses to more than 67108864 bytes"),
        "{skipped:?}"
    );
    assert!(
        reason("local-3.lz4").contains("no application start"),
        "{skipped:?}"
    );
    let apps = get(&store, "/api/v1/applications").await.json();
    let mut ids: Vec<&str> = apps
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["id"].as_str().unwrap())
        .collect();
    ids.sort_unstable();
    assert_eq!(ids, ["local-1", "local-4"]);
    let jobs = get(&store, "/api/v1/applications/local-4/jobs").await;
    assert_eq!(jobs.status, StatusCode::OK, "{}", jobs.text());
    let counts = get(&store, "/qprof/v1/applications/local-4/skipped")
        .await
        .json();
    assert_eq!(counts["corruptLines"], 1, "{counts}");
    assert_eq!(
        get(&store, "/api/v1/applications/local-1/jobs")
            .await
            .status,
        StatusCode::OK
    );
}

#[tokio::test]
async fn links_are_not_followed_and_nothing_outside_the_directory_is_served() {
    let dir = TestDir::new("links");
    let outside = TestDir::new("links-outside");
    let secret = outside.join("secret");
    std::fs::write(&secret, "the server's secret\n").unwrap();
    copy_oracle_app(&dir, "local-1");
    // a link beside the logs, and one inside a rolling log's directory
    std::os::unix::fs::symlink(&secret, dir.join("local-2")).unwrap();
    let rolling = dir.join("eventlog_v2_local-1");
    std::os::unix::fs::symlink(&secret, rolling.join("events_2_local-1")).unwrap();
    std::os::unix::fs::symlink(outside.as_os_str(), dir.join("eventlog_v2_local-3")).unwrap();
    let store = Arc::new(LogStore::open_with(&dir, options()).unwrap());
    let skipped = skipped(&store).await;
    for entry in ["local-2", "eventlog_v2_local-3"] {
        assert!(
            skipped
                .iter()
                .any(|(e, r)| e == entry && r.contains("symbolic link")),
            "{entry}: {skipped:?}"
        );
    }
    let zip = get(&store, "/api/v1/applications/local-1/logs").await;
    assert_eq!(zip.status, StatusCode::OK);
    let needle = b"the server's secret";
    assert!(
        !zip.body.windows(needle.len()).any(|w| w == needle),
        "the download holds the linked file"
    );
    let mut archive = zip::ZipArchive::new(std::io::Cursor::new(zip.body)).unwrap();
    let names: Vec<String> = (0..archive.len())
        .map(|i| archive.by_index(i).unwrap().name().to_string())
        .collect();
    assert!(!names.iter().any(|n| n.contains("events_2")), "{names:?}");
    // nothing in the answers names the server's directories
    let status = get(&store, "/qprof/v1/status").await.text();
    assert!(!status.contains(&*dir.to_string_lossy()), "{status}");
    assert!(!status.contains("/tmp"), "{status}");
}

#[tokio::test]
async fn an_application_id_made_to_inject_cannot_reach_the_metrics_text_or_the_download_header() {
    let dir = TestDir::new("inject");
    let evil = "evil\"} 1\nqprof_injected 1\n# x";
    let logged = serde_json::to_string(evil).unwrap();
    let logged = &logged[1..logged.len() - 1];
    copy_oracle_app_edited(&dir, "local-9", |text| text.replace("local-9", logged));
    let store = Arc::new(LogStore::open_with(&dir, options()).unwrap());
    let apps = get(&store, "/api/v1/applications").await.json();
    assert_eq!(apps[0]["id"], evil);
    let metrics = get(&store, "/metrics").await.text();
    assert!(
        metrics.lines().all(|l| !l.starts_with("qprof_injected")),
        "{metrics}"
    );
    assert!(
        metrics.contains(r#"app="evil\"} 1\nqprof_injected 1\n# x""#),
        "{metrics}"
    );
    // every sample line is a name, labels that close, and a number
    for line in metrics
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
    {
        let value = line.rsplit(' ').next().unwrap();
        assert!(value.parse::<f64>().is_ok(), "{line}");
    }
    let id: String = evil
        .bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() {
                char::from(b).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect();
    let zip = get(&store, &format!("/api/v1/applications/{id}/logs")).await;
    assert_eq!(zip.status, StatusCode::OK, "{}", zip.text());
    let disposition = zip.headers[header::CONTENT_DISPOSITION].to_str().unwrap();
    assert_eq!(
        disposition,
        "attachment; filename=\"eventLogs-evil___1_qprof_injected_1___x.zip\"; \
         filename*=UTF-8''eventLogs-evil%22%7D%201%0Aqprof_injected%201%0A#%20x.zip"
    );
}

fn guarded_app(store: &Arc<LogStore>, access: AccessOptions) -> axum::Router {
    guarded(router(Arc::clone(store)), access)
}

#[tokio::test]
async fn a_loopback_server_answers_loopback_names_only() {
    let dir = TestDir::new("hosts");
    copy_oracle_app(&dir, "local-1");
    let store = Arc::new(LogStore::open_with(&dir, options()).unwrap());
    let access = AccessOptions {
        allowed_hosts: AccessOptions::default_hosts("127.0.0.1"),
        ..AccessOptions::default()
    };
    let request = |host: &str| {
        Request::get("/api/v1/applications")
            .header(header::HOST, host)
            .body(Body::empty())
            .unwrap()
    };
    for host in [
        "127.0.0.1:18080",
        "localhost:18080",
        "LOCALHOST",
        "[::1]:18080",
    ] {
        let reply = send(guarded_app(&store, access.clone()), request(host)).await;
        assert_eq!(reply.status, StatusCode::OK, "{host}: {}", reply.text());
    }
    // a DNS-rebinding page: its own name, resolved to the loopback address
    for host in ["evil.example:18080", "127.0.0.1.evil.example", ""] {
        let reply = send(guarded_app(&store, access.clone()), request(host)).await;
        assert_eq!(reply.status, StatusCode::FORBIDDEN, "{host}");
        assert!(reply.json()["message"].as_str().unwrap().contains("host"));
    }
}

#[tokio::test]
async fn a_token_is_asked_of_every_request_and_a_browser_keeps_it_in_a_cookie() {
    let dir = TestDir::new("token");
    copy_oracle_app(&dir, "local-1");
    let store = Arc::new(LogStore::open_with(&dir, options()).unwrap());
    let token = "0123456789abcdef-token";
    let access = AccessOptions {
        token: Some(token.to_string()),
        ..AccessOptions::default()
    };
    let app = || guarded_app(&store, access.clone());
    for uri in [
        "/",
        "/api/v1/applications",
        "/metrics",
        "/qprof/v1/status",
        "/nope",
    ] {
        let reply = send(app(), Request::get(uri).body(Body::empty()).unwrap()).await;
        assert_eq!(reply.status, StatusCode::UNAUTHORIZED, "{uri}");
        assert!(reply.headers.contains_key(header::WWW_AUTHENTICATE));
    }
    let bearer = |value: &str| {
        Request::get("/api/v1/applications")
            .header(header::AUTHORIZATION, format!("Bearer {value}"))
            .body(Body::empty())
            .unwrap()
    };
    assert_eq!(
        send(app(), bearer("wrong")).await.status,
        StatusCode::UNAUTHORIZED
    );
    assert_eq!(
        send(app(), bearer(&token[..token.len() - 1])).await.status,
        StatusCode::UNAUTHORIZED
    );
    assert_eq!(send(app(), bearer(token)).await.status, StatusCode::OK);
    // a browser opens a page with the token once: it keeps it, the address loses it
    let opened = send(
        app(),
        Request::get(format!("/?token={token}&x=1"))
            .body(Body::empty())
            .unwrap(),
    )
    .await;
    assert_eq!(opened.status, StatusCode::SEE_OTHER);
    assert_eq!(opened.headers[header::LOCATION], "/?x=1");
    let cookie = opened.headers[header::SET_COOKIE].to_str().unwrap();
    assert!(
        cookie.contains("HttpOnly") && cookie.contains("SameSite=Strict"),
        "{cookie}"
    );
    let pair = cookie.split(';').next().unwrap();
    let reply = send(
        app(),
        Request::get("/api/v1/applications")
            .header(header::COOKIE, pair)
            .body(Body::empty())
            .unwrap(),
    )
    .await;
    assert_eq!(reply.status, StatusCode::OK);
    let wrong = send(
        app(),
        Request::get("/?token=nope").body(Body::empty()).unwrap(),
    )
    .await;
    assert_eq!(wrong.status, StatusCode::UNAUTHORIZED);
}

#[tokio::test]
async fn behind_a_proxy_a_request_without_its_user_is_refused() {
    let dir = TestDir::new("user");
    let store = Arc::new(LogStore::open_with(&dir, options()).unwrap());
    let access = AccessOptions {
        user_header: Some("X-Forwarded-User".into()),
        ..AccessOptions::default()
    };
    let anonymous = send(
        guarded_app(&store, access.clone()),
        Request::get("/api/v1/applications")
            .body(Body::empty())
            .unwrap(),
    )
    .await;
    assert_eq!(anonymous.status, StatusCode::UNAUTHORIZED);
    let named = send(
        guarded_app(&store, access),
        Request::get("/api/v1/applications")
            .header("x-forwarded-user", "ada")
            .body(Body::empty())
            .unwrap(),
    )
    .await;
    assert_eq!(named.status, StatusCode::OK);
}

#[tokio::test]
async fn every_answer_carries_the_security_headers() {
    let dir = TestDir::new("headers");
    copy_oracle_app(&dir, "local-1");
    let store = Arc::new(LogStore::open_with(&dir, options()).unwrap());
    for uri in [
        "/",
        "/static/app.js",
        "/api/v1/applications",
        "/api/v1/applications/nope",
        "/metrics",
        "/no/such/page",
    ] {
        let reply = get(&store, uri).await;
        let h = |name: header::HeaderName| {
            reply
                .headers
                .get(&name)
                .map(|v| v.to_str().unwrap().to_string())
                .unwrap_or_else(|| panic!("{uri}: no {name}"))
        };
        let policy = h(header::CONTENT_SECURITY_POLICY);
        assert!(policy.contains("script-src 'self'"), "{uri}: {policy}");
        assert!(policy.contains("frame-ancestors 'none'"), "{uri}: {policy}");
        assert_eq!(h(header::X_CONTENT_TYPE_OPTIONS), "nosniff", "{uri}");
        assert_eq!(h(header::X_FRAME_OPTIONS), "DENY", "{uri}");
        assert_eq!(h(header::REFERRER_POLICY), "no-referrer", "{uri}");
    }
}

/// The oracle application as `id`, run by `user`, with the Spark properties `acls` (e.g.
/// `"spark.ui.view.acls":"bob"`) in its environment.
fn app_with_acls(dir: &Path, id: &str, user: &str, acls: &str) {
    copy_oracle_app_edited(dir, id, |text| {
        let with = if acls.is_empty() {
            String::new()
        } else {
            format!(",{acls}")
        };
        text.replace("\"User\":\"root\"", &format!("\"User\":\"{user}\""))
            .replacen(
                "\"spark.app.name\":\"oracle-app-1\"",
                &format!("\"spark.app.name\":\"oracle-app-1\"{with}"),
                1,
            )
    });
}

#[tokio::test]
async fn each_user_sees_exactly_the_applications_whose_acls_admit_them() {
    let dir = TestDir::new("acls");
    app_with_acls(&dir, "local-1", "ada", "");
    app_with_acls(
        &dir,
        "local-2",
        "ada",
        "\"spark.ui.view.acls\":\"bob, carl\"",
    );
    app_with_acls(
        &dir,
        "local-3",
        "eve",
        "\"spark.ui.view.acls.groups\":\"analysts\"",
    );
    app_with_acls(&dir, "local-4", "eve", "\"spark.ui.view.acls\":\"*\"");
    let store = Arc::new(LogStore::open_with(&dir, options()).unwrap());
    let access = AccessOptions {
        user_header: Some("X-Forwarded-User".into()),
        groups_header: Some("X-Forwarded-Groups".into()),
        acls: Some(qprof_server::AclOptions {
            admins: vec!["root".into()],
            admin_groups: vec!["ops".into()],
        }),
        ..AccessOptions::default()
    };
    let as_user = |user: &str, groups: &str, uri: &str| {
        Request::get(uri)
            .header("x-forwarded-user", user)
            .header("x-forwarded-groups", groups)
            .body(Body::empty())
            .unwrap()
    };
    let cases: [(&str, &str, &[&str]); 6] = [
        ("ada", "", &["local-1", "local-2", "local-4"]),
        ("bob", "", &["local-2", "local-4"]),
        ("dan", "analysts", &["local-3", "local-4"]),
        ("zed", "", &["local-4"]),
        ("root", "", &["local-1", "local-2", "local-3", "local-4"]),
        (
            "olga",
            "ops,x",
            &["local-1", "local-2", "local-3", "local-4"],
        ),
    ];
    for (user, groups, sees) in cases {
        let app = || guarded_app(&store, access.clone());
        let listed = send(app(), as_user(user, groups, "/api/v1/applications")).await;
        assert_eq!(listed.status, StatusCode::OK);
        let mut ids: Vec<String> = listed
            .json()
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a["id"].as_str().unwrap().to_string())
            .collect();
        ids.sort();
        assert_eq!(ids, sees, "{user}'s listing");
        let metrics = send(app(), as_user(user, groups, "/metrics")).await.text();
        for n in 1..=4 {
            let id = format!("local-{n}");
            let visible = sees.contains(&id.as_str());
            let want = if visible {
                StatusCode::OK
            } else {
                StatusCode::NOT_FOUND
            };
            for uri in [
                format!("/api/v1/applications/{id}"),
                format!("/api/v1/applications/{id}/jobs"),
                format!("/api/v1/applications/{id}/logs"),
                format!("/qprof/v1/applications/{id}/skipped"),
            ] {
                let reply = send(app(), as_user(user, groups, &uri)).await;
                assert_eq!(reply.status, want, "{user} {uri}");
            }
            assert_eq!(
                metrics.contains(&format!("app=\"{id}\"")),
                visible,
                "{user}'s /metrics and {id}"
            );
        }
        let status = send(app(), as_user(user, groups, "/qprof/v1/status")).await;
        let admin = sees.len() == 4;
        assert_eq!(
            status.status,
            if admin {
                StatusCode::OK
            } else {
                StatusCode::FORBIDDEN
            },
            "{user}'s status"
        );
    }
}

#[tokio::test]
async fn a_large_log_downloads_whole_from_disk_and_downloads_at_once_are_bounded() {
    let dir = TestDir::new("downloads");
    // a log of more than two pieces of the download's reads
    copy_oracle_app_edited(&dir, "local-8", |text| {
        let line =
            "{\"Event\":\"qprof.test.Filler\",\"pad\":\"".to_string() + &"x".repeat(1000) + "\"}\n";
        text.to_string() + &line.repeat(20 << 10)
    });
    let store = Arc::new(LogStore::open_with(&dir, options()).unwrap());
    let events = dir.join("eventlog_v2_local-8/events_1_local-8");
    let original = std::fs::read(&events).unwrap();
    assert!(original.len() > 16 << 20, "{} bytes", original.len());
    let zip = get(&store, "/api/v1/applications/local-8/logs").await;
    assert_eq!(zip.status, StatusCode::OK, "{}", zip.text());
    let mut archive = zip::ZipArchive::new(std::io::Cursor::new(zip.body)).unwrap();
    let mut entry = archive
        .by_name("eventlog_v2_local-8/events_1_local-8")
        .unwrap();
    let mut sent = Vec::new();
    std::io::Read::read_to_end(&mut entry, &mut sent).unwrap();
    assert!(sent == original, "the archive's log differs from the file");
    // downloads not yet read hold their permits; one more is refused until one ends
    let request = || {
        router(Arc::clone(&store)).oneshot(
            Request::get("/api/v1/applications/local-8/logs")
                .body(Body::empty())
                .unwrap(),
        )
    };
    let mut held = Vec::new();
    for _ in 0..qprof_server::store::LOG_DOWNLOADS {
        let response = request().await.unwrap();
        assert_eq!(response.status(), StatusCode::OK);
        held.push(response);
    }
    let refused = request().await.unwrap();
    assert_eq!(refused.status(), StatusCode::SERVICE_UNAVAILABLE);
    let body = axum::body::to_bytes(refused.into_body(), usize::MAX)
        .await
        .unwrap();
    let message: Value = serde_json::from_slice(&body).unwrap();
    assert!(
        message["message"]
            .as_str()
            .unwrap()
            .contains("log downloads are under way"),
        "{message}"
    );
    held.pop();
    assert_eq!(request().await.unwrap().status(), StatusCode::OK);
}
