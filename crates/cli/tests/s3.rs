//! Tables on S3: `qprof sql` writes to and reads from a real S3-compatible server (moto's,
//! started on 127.0.0.1), and the same query over s3:// and over the local file gives the
//! same rows and the same profile shape, with the bytes the scan read from storage.
//!
//! Needs the moto server that `scripts/install-test-deps.sh` installs in `target/test-venv`.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

fn workspace() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// A child process killed on drop.
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// One HTTP/1.0 request to the server; the status code of its answer.
fn http(port: u16, method: &str, path: &str) -> std::io::Result<u16> {
    let mut stream = TcpStream::connect(("127.0.0.1", port))?;
    stream.set_read_timeout(Some(Duration::from_secs(10)))?;
    write!(
        stream,
        "{method} {path} HTTP/1.0\r\nHost: 127.0.0.1:{port}\r\nContent-Length: 0\r\n\r\n"
    )?;
    let mut answer = String::new();
    stream.read_to_string(&mut answer)?;
    let status = answer.split_whitespace().nth(1).unwrap_or("0");
    Ok(status.parse().unwrap_or(0))
}

/// moto's S3 server on a free port, answering.
fn start_s3() -> (Running, u16) {
    let server = workspace().join("target/test-venv/bin/moto_server");
    assert!(
        server.exists(),
        "moto is missing: run scripts/install-test-deps.sh first"
    );
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let child = Command::new(server)
        .args(["-H", "127.0.0.1", "-p", &port.to_string()])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("moto starts");
    let running = Running(child);
    let deadline = Instant::now() + Duration::from_secs(60);
    while http(port, "GET", "/").is_err() {
        assert!(Instant::now() < deadline, "moto did not answer in 60 s");
        std::thread::sleep(Duration::from_millis(200));
    }
    (running, port)
}

fn qprof(dir: &Path, endpoint: &str, args: &[&str]) -> Output {
    let out = Command::new(env!("CARGO_BIN_EXE_qprof"))
        .current_dir(dir)
        .env("AWS_ACCESS_KEY_ID", "qprof-test")
        .env("AWS_SECRET_ACCESS_KEY", "qprof-test")
        .env("AWS_REGION", "us-east-1")
        .args(["sql", "--no-event-log", "--s3-endpoint", endpoint])
        .args(args)
        .output()
        .expect("qprof starts");
    assert!(
        out.status.success(),
        "qprof {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// The operators of every query in a `--profile-out` document, in plan order.
fn shapes(doc: &Value) -> Vec<Vec<String>> {
    fn walk(node: &Value, out: &mut Vec<String>) {
        out.push(node["name"].as_str().unwrap().to_string());
        for child in node["children"].as_array().unwrap() {
            walk(child, out);
        }
    }
    doc["queries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|q| {
            let mut names = Vec::new();
            walk(&q["plan"], &mut names);
            names
        })
        .collect()
}

fn scan_metric(doc: &Value, name: &str) -> i64 {
    fn find(node: &Value, name: &str) -> Option<i64> {
        if node["name"] == "DataSourceExec" {
            return node["metrics"][name]["value"].as_i64();
        }
        node["children"]
            .as_array()
            .unwrap()
            .iter()
            .find_map(|c| find(c, name))
    }
    find(&doc["queries"][0]["plan"], name).unwrap_or_else(|| panic!("no scan {name}"))
}

#[test]
fn the_same_query_over_s3_and_over_a_local_file() {
    let (_server, port) = start_s3();
    let endpoint = format!("http://127.0.0.1:{port}");
    assert_eq!(http(port, "PUT", "/qprof-bucket").unwrap(), 200);
    let dir = std::env::temp_dir().join(format!("qprof-s3-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let mut csv = String::from("k,v\n");
    for i in 0..5000 {
        csv.push_str(&format!("{},{}\n", i % 11, i));
    }
    std::fs::write(dir.join("numbers.csv"), csv).unwrap();

    // to S3 with COPY, and the same data to a local file
    let out = qprof(
        &dir,
        &endpoint,
        &[
            "COPY (SELECT * FROM 'numbers.csv') TO 's3://qprof-bucket/numbers/part.parquet'; \
             COPY (SELECT * FROM 'numbers.csv') TO 'numbers.parquet'",
        ],
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let local_size = std::fs::metadata(dir.join("numbers.parquet"))
        .unwrap()
        .len();
    assert!(stdout.contains("wrote "), "{stdout}");

    let sql = "SELECT k, count(*) AS n, sum(v) AS s FROM t WHERE v >= 1000 GROUP BY k ORDER BY k";
    let run = |location: &str, profile: &str| {
        let out = qprof(
            &dir,
            &endpoint,
            &[
                sql,
                "--partitions",
                "2",
                "--table",
                &format!("t={location}"),
                "--profile-out",
                profile,
            ],
        );
        let text = String::from_utf8_lossy(&out.stdout).to_string();
        let doc: Value =
            serde_json::from_str(&std::fs::read_to_string(dir.join(profile)).unwrap()).unwrap();
        (text, doc)
    };
    let (s3_text, s3) = run("s3://qprof-bucket/numbers/", "s3.json");
    let (local_text, local) = run("numbers.parquet", "local.json");
    let table = |text: &str| -> String {
        text.lines()
            .take_while(|l| !l.starts_with("query "))
            .collect::<Vec<_>>()
            .join("\n")
    };
    assert_eq!(table(&s3_text), table(&local_text));
    assert!(s3_text.contains("| 10 "), "{s3_text}");
    assert_eq!(shapes(&s3), shapes(&local));
    // the object on the server is the local file's twin: the scan read from storage at
    // most its size, and as much as the local scan did
    let s3_bytes = scan_metric(&s3, "storageReadBytes");
    assert!(s3_bytes > 0 && s3_bytes as u64 <= local_size, "{s3_bytes}");
    assert_eq!(s3_bytes, scan_metric(&s3, "readBytes"));
    assert_eq!(s3_bytes, scan_metric(&local, "storageReadBytes"));
    assert!(scan_metric(&s3, "numReadRequests") > 0);
    assert!(scan_metric(&s3, "dataSourceReadNanos") > 0);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A running `qprof serve`, stopped on drop, and its port.
fn serve(args: &[&str], endpoint: Option<&str>) -> (Running, u16) {
    use std::io::BufRead;
    let mut command = Command::new(env!("CARGO_BIN_EXE_qprof"));
    command
        .env("AWS_ACCESS_KEY_ID", "qprof-test")
        .env("AWS_SECRET_ACCESS_KEY", "qprof-test")
        .env("AWS_REGION", "us-east-1")
        .args(["serve", "--port", "0", "--update-interval", "1s"])
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    if let Some(endpoint) = endpoint {
        command.args(["--s3-endpoint", endpoint]);
    }
    let mut child = command.spawn().expect("qprof serve starts");
    let mut line = String::new();
    let mut out = std::io::BufReader::new(child.stdout.take().unwrap());
    out.read_line(&mut line).unwrap();
    // its listing is whole once it says its first scan ended
    let mut scanned = String::new();
    out.read_line(&mut scanned).unwrap();
    assert!(scanned.starts_with("first scan: "), "{scanned:?}");
    let running = Running(child);
    let port = line
        .split_whitespace()
        .find_map(|w| w.strip_prefix("http://"))
        .and_then(|a| a.trim_end_matches('/').rsplit(':').next())
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("no address in {line:?}"));
    (running, port)
}

/// The JSON answer to `GET path`.
fn get_json(port: u16, path: &str) -> Value {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(60)))
        .unwrap();
    write!(
        stream,
        "GET {path} HTTP/1.0\r\nHost: 127.0.0.1:{port}\r\n\r\n"
    )
    .unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    let (head, body) = answer.split_once("\r\n\r\n").unwrap();
    assert!(
        head.starts_with("HTTP/1.0 200") || head.starts_with("HTTP/1.1 200"),
        "{path}: {answer}"
    );
    serde_json::from_str(body).unwrap_or_else(|e| panic!("{path}: {e}: {body}"))
}

/// `answer` without the fields that depend on where and when its logs were written.
fn without_location(mut answer: Value) -> Value {
    qprof_eventlog::compare::strip_host_fields(&mut answer);
    answer
}

#[test]
fn qprof_serve_reads_a_log_directory_from_an_s3_prefix() {
    use object_store::aws::AmazonS3Builder;
    use object_store::path::Path as ObjectPath;
    use object_store::{ObjectStoreExt, PutPayload};

    let (_s3, port) = start_s3();
    let endpoint = format!("http://127.0.0.1:{port}");
    assert_eq!(http(port, "PUT", "/qprof-logs").unwrap(), 200);
    let dir = std::env::temp_dir().join(format!("qprof-s3-serve-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let events = dir.join("events");
    std::fs::create_dir_all(&events).unwrap();
    // a qprof application and a Spark one
    std::fs::write(dir.join("t.csv"), "k,v\n1,2\n1,3\n2,4\n").unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_qprof"))
        .current_dir(&dir)
        .args([
            "sql",
            "SELECT k, sum(v) FROM t GROUP BY k",
            "--table",
            "t=t.csv",
        ])
        .args(["--event-log-dir", "events"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    qprof_eventlog::fixtures::copy_oracle_app(&events, "local-1");

    let runtime = tokio::runtime::Runtime::new().unwrap();
    let bucket = AmazonS3Builder::new()
        .with_bucket_name("qprof-logs")
        .with_endpoint(&endpoint)
        .with_allow_http(true)
        .with_access_key_id("qprof-test")
        .with_secret_access_key("qprof-test")
        .with_region("us-east-1")
        .build()
        .unwrap();
    let put = |key: String, bytes: Vec<u8>| {
        runtime
            .block_on(bucket.put(&ObjectPath::from(key), PutPayload::from(bytes)))
            .unwrap();
    };
    for app in std::fs::read_dir(&events).unwrap() {
        let app = app.unwrap();
        for file in std::fs::read_dir(app.path()).unwrap() {
            let file = file.unwrap();
            let key = format!(
                "spark-logs/{}/{}",
                app.file_name().to_string_lossy(),
                file.file_name().to_string_lossy()
            );
            put(key, std::fs::read(file.path()).unwrap());
        }
    }
    // a single-file log in progress, in the bucket only: up to its first job's end
    let oracle = std::fs::read_to_string(
        qprof_eventlog::fixtures::oracle_log_dir()
            .join(format!("events_1_{}", qprof_eventlog::fixtures::ORACLE_APP)),
    )
    .unwrap()
    .replace(qprof_eventlog::fixtures::ORACLE_APP, "local-2");
    let cut = oracle.find("SparkListenerJobEnd").unwrap();
    let first = oracle[cut..].find('\n').unwrap() + cut + 1;
    let second = oracle[..oracle.len() - 1].rfind('\n').unwrap() + 1;
    let running_key = "spark-logs/local-2.inprogress".to_string();
    put(running_key.clone(), oracle.as_bytes()[..first].to_vec());

    let (_local, local_port) = serve(&["--log-dir", events.to_str().unwrap()], None);
    let (_remote, remote_port) = serve(
        &["--log-dir", "s3://qprof-logs/spark-logs/"],
        Some(&endpoint),
    );
    let listing = get_json(remote_port, "/api/v1/applications");
    assert_eq!(listing.as_array().unwrap().len(), 3, "{listing}");
    let completed: Vec<Value> = listing
        .as_array()
        .unwrap()
        .iter()
        .filter(|a| a["id"] != "local-2")
        .cloned()
        .collect();
    assert_eq!(
        without_location(Value::Array(completed)),
        without_location(get_json(local_port, "/api/v1/applications"))
    );
    for app in get_json(local_port, "/api/v1/applications")
        .as_array()
        .unwrap()
    {
        let id = app["id"].as_str().unwrap();
        for path in [
            "",
            "/jobs",
            "/stages?details=true",
            "/executors",
            "/allexecutors",
            "/sql?details=true",
            "/environment",
        ] {
            let uri = format!("/api/v1/applications/{id}{path}");
            assert_eq!(
                without_location(get_json(remote_port, &uri)),
                without_location(get_json(local_port, &uri)),
                "{uri}"
            );
        }
    }

    // the log in progress grows in the bucket: once the scanner saw it, its replay reads
    // only the appended bytes
    let jobs = |v: Value| v.as_array().unwrap().len();
    let app = "/api/v1/applications/local-2";
    let before = jobs(get_json(remote_port, &format!("{app}/jobs")));
    let scans = || {
        get_json(remote_port, "/qprof/v1/status")["scans"]
            .as_u64()
            .unwrap()
    };
    put(running_key, oracle.as_bytes()[..second].to_vec());
    // a scan that began after the put has ended once the count is two past what it was
    // after the put (the log grew: its size alone tells the scanner, whatever its time)
    let scans_before = scans();
    let deadline = Instant::now() + Duration::from_secs(30);
    while scans() < scans_before + 2 {
        assert!(Instant::now() < deadline, "the scanner did not scan again");
        std::thread::sleep(Duration::from_millis(50));
    }
    let bytes_read = || {
        get_json(remote_port, "/qprof/v1/status")["storage"]["bytesRead"]
            .as_u64()
            .unwrap()
    };
    let read_before = bytes_read();
    let after = jobs(get_json(remote_port, &format!("{app}/jobs")));
    assert_eq!(bytes_read() - read_before, (second - first) as u64);
    assert!(after > before, "{before} jobs, then {after}");
    let _ = std::fs::remove_dir_all(&dir);
}
