//! A local Ballista cluster of `qprof cluster` processes for tests: one scheduler and
//! executors on 127.0.0.1, each killed when dropped.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// A port nothing listens on now.
pub(crate) fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// The first line `child` prints; the rest of its output is read and dropped.
fn first_line(child: &mut Child) -> String {
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    std::thread::spawn(move || std::io::copy(&mut out, &mut std::io::sink()));
    line
}

/// Every line `child` prints, as it prints them.
fn lines(child: &mut Child) -> mpsc::Receiver<String> {
    let out = BufReader::new(child.stdout.take().unwrap());
    let (sender, receiver) = mpsc::channel();
    std::thread::spawn(move || {
        for line in out.lines().map_while(Result::ok) {
            if sender.send(line).is_err() {
                break;
            }
        }
    });
    receiver
}

/// A child process killed (SIGKILL) when dropped.
pub(crate) struct Process(pub(crate) Child);

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A scheduler and its executors.
pub(crate) struct LocalCluster {
    /// `df://127.0.0.1:PORT`.
    pub(crate) url: String,
    /// Where the scheduler writes its event logs.
    pub(crate) events: PathBuf,
    /// The executors by id.
    pub(crate) executors: Vec<(String, Process)>,
    /// Dropped last: the executors go first.
    pub(crate) scheduler: Process,
    /// What the scheduler prints (executors joining and leaving).
    said: mpsc::Receiver<String>,
    /// What it printed so far.
    heard: Vec<String>,
}

impl LocalCluster {
    /// Starts a scheduler logging to `dir/events` and an executor of 2 task slots per id
    /// in `executors`, and waits until each has started.
    pub(crate) fn start(dir: &Path, executors: &[&str]) -> LocalCluster {
        LocalCluster::start_with(dir, executors, &[])
    }

    /// As [`LocalCluster::start`], the scheduler also given `scheduler_args`.
    pub(crate) fn start_with(
        dir: &Path,
        executors: &[&str],
        scheduler_args: &[&str],
    ) -> LocalCluster {
        let port = free_port();
        let events = dir.join("events");
        let mut scheduler = Command::new(env!("CARGO_BIN_EXE_qprof"))
            .args(["cluster", "scheduler", "--executor-timeout", "5s", "--bind"])
            .arg(format!("127.0.0.1:{port}"))
            .arg("--event-log-dir")
            .arg(&events)
            .args(scheduler_args)
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(dir.join("scheduler.log")).unwrap())
            .spawn()
            .unwrap();
        let said = lines(&mut scheduler);
        let line = said.recv_timeout(Duration::from_secs(60)).unwrap();
        assert!(line.contains("listening"), "the scheduler says {line:?}");
        let scheduler = Process(scheduler);
        let mut started = Vec::new();
        for id in executors {
            let work = dir.join(format!("work-{id}"));
            std::fs::create_dir_all(&work).unwrap();
            let mut child = Command::new(env!("CARGO_BIN_EXE_qprof"))
                .args(["cluster", "executor", "--vcores", "2", "--id", id])
                .arg("--scheduler")
                .arg(format!("127.0.0.1:{port}"))
                .arg("--flight-port")
                .arg(free_port().to_string())
                .arg("--grpc-port")
                .arg(free_port().to_string())
                .arg("--work-dir")
                .arg(&work)
                .stdout(Stdio::piped())
                .stderr(std::fs::File::create(dir.join(format!("executor-{id}.log"))).unwrap())
                .spawn()
                .unwrap();
            let line = first_line(&mut child);
            assert!(line.contains("task slots"), "executor {id} says {line:?}");
            started.push((id.to_string(), Process(child)));
        }
        let mut cluster = LocalCluster {
            url: format!("df://127.0.0.1:{port}"),
            events,
            executors: started,
            scheduler,
            said,
            heard: Vec::new(),
        };
        for id in executors {
            cluster.wait_for(&format!("executor {id} joined"));
        }
        cluster
    }

    /// Waits (a minute at most) until the scheduler says `line`.
    pub(crate) fn wait_for(&mut self, line: &str) {
        let deadline = Instant::now() + Duration::from_secs(60);
        while !self.heard.iter().any(|l| l == line) {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.said.recv_timeout(left) {
                Ok(said) => self.heard.push(said),
                Err(e) => panic!("the scheduler did not say {line:?} ({e}): {:?}", self.heard),
            }
        }
    }

    /// Kills the scheduler at once (SIGKILL).
    pub(crate) fn kill_scheduler(&mut self) {
        self.scheduler.0.kill().unwrap();
        self.scheduler.0.wait().unwrap();
    }

    /// Kills executor `id` at once (SIGKILL).
    pub(crate) fn kill(&mut self, id: &str) {
        let (_, process) = self
            .executors
            .iter_mut()
            .find(|(e, _)| e == id)
            .unwrap_or_else(|| panic!("no executor {id}"));
        process.0.kill().unwrap();
        process.0.wait().unwrap();
    }
}
