//! A `qprof serve` for tests, and the clients the tests read it with: spark-history-cli
//! (from the virtualenv `scripts/install-test-deps.sh` makes) and headless Chromium.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use serde_json::Value;

/// The `qprof` binary of this build.
pub(crate) fn qprof() -> Command {
    Command::new(env!("CARGO_BIN_EXE_qprof"))
}

/// The workspace's root.
pub(crate) fn workspace() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// A fresh directory, unique to this call (tests run on parallel threads, and two
/// Chromiums given one profile directory hand their page to each other and print nothing),
/// removed when dropped, whether the test passed or failed.
pub(crate) fn temp_dir(name: &str) -> TestDir {
    TestDir(
        tempfile::Builder::new()
            .prefix(&format!("qprof-history-{name}-"))
            .tempdir()
            .unwrap(),
    )
}

/// A test's directory, removed when dropped.
pub(crate) struct TestDir(tempfile::TempDir);

impl std::ops::Deref for TestDir {
    type Target = Path;

    fn deref(&self) -> &Path {
        self.0.path()
    }
}

impl AsRef<Path> for TestDir {
    fn as_ref(&self) -> &Path {
        self.0.path()
    }
}

impl AsRef<std::ffi::OsStr> for TestDir {
    fn as_ref(&self) -> &std::ffi::OsStr {
        self.0.path().as_os_str()
    }
}

/// A running `qprof serve`, stopped on drop.
pub(crate) struct Server {
    child: Child,
    /// The server's address, e.g. `http://127.0.0.1:18080`.
    pub(crate) url: String,
}

impl Server {
    pub(crate) fn start(log_dir: &Path) -> Server {
        Server::start_with(log_dir, &[])
    }

    /// A server over `log_dir` with the flags `args` besides.
    pub(crate) fn start_with(log_dir: &Path, args: &[&str]) -> Server {
        let mut child = qprof()
            .args(["serve", "--port", "0", "--log-dir"])
            .arg(log_dir)
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let mut out = BufReader::new(child.stdout.take().unwrap());
        let url = first_address(&mut out);
        // the server answers at once; its listing is whole once it says its first scan ended
        let mut scanned = String::new();
        out.read_line(&mut scanned).unwrap();
        assert!(scanned.starts_with("first scan: "), "{scanned:?}");
        Server { child, url }
    }

    /// The server's process id.
    pub(crate) fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Whether the server's process is still running.
    pub(crate) fn running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    pub(crate) fn port(&self) -> u16 {
        self.url.rsplit(':').next().unwrap().parse().unwrap()
    }
}

/// The `http://` address on the first line `out` prints, without its trailing slash.
pub(crate) fn first_address(out: &mut impl BufRead) -> String {
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    line.split_whitespace()
        .find(|w| w.starts_with("http://"))
        .unwrap_or_else(|| panic!("no address in {line:?}"))
        .trim_end_matches('/')
        .to_string()
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// spark-history-cli in the test virtualenv.
pub(crate) fn venv_cli() -> PathBuf {
    let cli = workspace().join("target/test-venv/bin/spark-history-cli");
    assert!(
        cli.exists(),
        "spark-history-cli is missing: run scripts/install-test-deps.sh first"
    );
    cli
}

/// Runs spark-history-cli against `server`.
pub(crate) fn shc(server: &Server, args: &[&str]) -> std::process::Output {
    Command::new(venv_cli())
        .args(["--server", &server.url])
        .args(args)
        .output()
        .unwrap()
}

/// Runs spark-history-cli against `server`; its standard output, which must be a success.
pub(crate) fn shc_ok(server: &Server, args: &[&str]) -> String {
    let out = shc(server, args);
    assert!(
        out.status.success(),
        "spark-history-cli {args:?} failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// The id of the first application `server` lists.
pub(crate) fn first_app(server: &Server) -> String {
    let apps: Value = serde_json::from_str(&shc_ok(server, &["--json", "apps"])).unwrap();
    apps[0]["id"].as_str().unwrap().to_string()
}

/// Runs headless Chromium on `url` with `args` (e.g. `--dump-dom`); it must succeed.
pub(crate) fn chromium(args: &[&str], url: &str) -> std::process::Output {
    let profile = temp_dir("chromium-profile");
    let out = Command::new("chromium")
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--hide-scrollbars",
            "--virtual-time-budget=8000",
            "--window-size=1280,900",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .args(args)
        .arg(url)
        .output()
        .expect("chromium is missing: run scripts/install-test-deps.sh first");
    let _ = std::fs::remove_dir_all(&profile);
    assert!(
        out.status.success(),
        "chromium failed on {url} ({}): {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// Decodes a screenshot and returns (width, height, share of pixels that differ from the
/// most common colour, number of distinct colours).
pub(crate) fn screenshot_stats(path: &Path) -> (u32, u32, f64, usize) {
    let decoder = png::Decoder::new(std::io::BufReader::new(std::fs::File::open(path).unwrap()));
    let mut reader = decoder.read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size()];
    let info = reader.next_frame(&mut buf).unwrap();
    let channels = info.color_type.samples();
    let mut counts = std::collections::HashMap::new();
    for px in buf[..info.buffer_size()].chunks(channels) {
        *counts.entry(px.to_vec()).or_insert(0usize) += 1;
    }
    let total: usize = counts.values().sum();
    let background = counts.values().max().copied().unwrap_or(0);
    (
        info.width,
        info.height,
        1.0 - background as f64 / total as f64,
        counts.len(),
    )
}

/// Runs every spark-history-cli command (text and `--json`) on application `app` of
/// `server`; each must succeed. `with_attempt`: the application has attempt ids.
pub(crate) fn every_command(server: &Server, app: &str, with_attempt: bool, out_dir: &Path) {
    let stages: Value =
        serde_json::from_str(&shc_ok(server, &["--json", "-a", app, "stages"])).unwrap();
    // a stage with a successful task, for the summary
    let stage = stages
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["numCompleteTasks"].as_i64().unwrap_or(0) > 0)
        .expect("a completed stage")["stageId"]
        .to_string();
    let jobs: Value =
        serde_json::from_str(&shc_ok(server, &["--json", "-a", app, "jobs"])).unwrap();
    let job = jobs[0]["jobId"].to_string();
    let sqls: Value = serde_json::from_str(&shc_ok(server, &["--json", "-a", app, "sql"])).unwrap();
    let sql = sqls
        .as_array()
        .unwrap()
        .iter()
        .find(|e| !e["successJobIds"].as_array().unwrap().is_empty())
        .expect("a SQL execution with a job")["id"]
        .to_string();
    let logs = out_dir.join(format!("{app}.zip"));
    let logs = logs.to_str().unwrap();
    let mut commands: Vec<Vec<&str>> = vec![
        vec!["version"],
        vec!["apps"],
        vec!["apps", "--status", "completed", "--limit", "5"],
        vec!["app", app],
        vec!["-a", app, "attempts"],
        vec!["-a", app, "jobs"],
        vec!["-a", app, "jobs", "--status", "succeeded"],
        vec!["-a", app, "job", &job],
        vec!["-a", app, "job-stages", &job],
        vec!["-a", app, "stages"],
        vec!["-a", app, "stages", "--status", "complete"],
        vec!["-a", app, "stage", &stage],
        vec!["-a", app, "stage", &stage, "--attempt", "0"],
        vec!["-a", app, "stage-summary", &stage],
        vec!["-a", app, "stage-tasks", &stage],
        vec!["-a", app, "stage-tasks", &stage, "--sort-by", "ID"],
        vec!["-a", app, "executors"],
        vec!["-a", app, "executors", "--all"],
        vec!["-a", app, "sql"],
        vec!["-a", app, "sql", &sql],
        vec!["-a", app, "sql-jobs", &sql],
        vec!["-a", app, "sql-plan", &sql],
        vec!["-a", app, "sql-plan", &sql, "--dot"],
        vec!["-a", app, "env"],
        vec!["-a", app, "summary"],
        vec!["-a", app, "rdds"],
        vec!["-a", app, "processes"],
        vec!["-a", app, "logs", logs],
    ];
    if with_attempt {
        commands.push(vec!["-a", app, "attempt", "1"]);
    }
    for args in &commands {
        shc_ok(server, args);
        let mut json = vec!["--json"];
        json.extend(args.iter().copied());
        if !args.contains(&"logs") {
            shc_ok(server, &json);
        }
    }
    assert!(std::fs::metadata(logs).unwrap().len() > 100);
}
