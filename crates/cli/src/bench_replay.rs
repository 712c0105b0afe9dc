//! `qprof bench replay`: how long a history server started afresh takes to answer its first
//! `/jobs` of an application, which is how long it takes to replay the application's log:
//! `qprof serve` against Spark's own history server on the same log, in alternating rounds.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use serde_json::Value;

use qprof_core::sampling::median;

use crate::bench_cluster::free_port;
use crate::cli::ReplayArgs;

/// How long a server may take to start and list the application.
const LISTING_DEADLINE: Duration = Duration::from_secs(300);

/// A server process, stopped when dropped.
struct Server {
    name: &'static str,
    child: Child,
    port: u16,
    /// Where its diagnostics go, named in errors.
    log: PathBuf,
    /// Its output, kept open while it runs.
    _stdout: Option<BufReader<ChildStdout>>,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Server {
    /// `qprof serve` on `log_dir`, on a free port, without a store of saved replays.
    fn qprof(log_dir: &Path, work: &Path) -> Result<Server> {
        let log = work.join("qprof-serve.log");
        let mut child = Command::new(std::env::current_exe().context("cannot find qprof")?)
            .args(["serve", "--port", "0", "--log-dir"])
            .arg(log_dir)
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&log)?)
            .spawn()
            .context("cannot start qprof serve")?;
        // its first line is the address it serves on
        let mut line = String::new();
        let mut stdout = BufReader::new(child.stdout.take().context("qprof serve has no output")?);
        let mut server = Server {
            name: "qprof serve",
            child,
            port: 0,
            log,
            _stdout: None,
        };
        stdout.read_line(&mut line)?;
        let port = line
            .trim()
            .trim_end_matches('/')
            .rsplit(':')
            .next()
            .and_then(|p| p.parse().ok());
        server.port = port
            .with_context(|| format!("qprof serve did not say its address: {:?}", line.trim()))?;
        server._stdout = Some(stdout);
        Ok(server)
    }

    /// Spark's history server (of the installation `spark_home`) on `log_dir`.
    fn spark(spark_home: &Path, log_dir: &Path, work: &Path) -> Result<Server> {
        let port = free_port()?;
        let log = work.join("spark-history-server.log");
        let dir = std::path::absolute(log_dir)?;
        let child = Command::new(spark_home.join("bin/spark-class"))
            .arg("org.apache.spark.deploy.history.HistoryServer")
            .env("SPARK_HOME", spark_home)
            .env(
                "SPARK_HISTORY_OPTS",
                format!(
                    "-Dspark.history.fs.logDirectory=file://{} -Dspark.history.ui.port={port} \
                     -Dspark.history.fs.update.interval=1s",
                    dir.display()
                ),
            )
            .env("SPARK_LOG_DIR", work.join("spark-logs"))
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log)?)
            .spawn()
            .with_context(|| {
                format!(
                    "cannot start Spark's history server from {}",
                    spark_home.display()
                )
            })?;
        Ok(Server {
            name: "Spark's history server",
            child,
            port,
            log,
            _stdout: None,
        })
    }

    fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    /// Waits until the server lists application `app`; returns the path of its jobs.
    async fn listed(&mut self, http: &reqwest::Client, app: &str) -> Result<String> {
        let deadline = Instant::now() + LISTING_DEADLINE;
        loop {
            if let Some(status) = self.child.try_wait()? {
                bail!(
                    "{} exited ({status}); see {}",
                    self.name,
                    self.log.display()
                );
            }
            let listing = match http.get(self.url("/api/v1/applications")).send().await {
                Ok(answer) if answer.status().is_success() => {
                    let body = answer.bytes().await.unwrap_or_default();
                    serde_json::from_slice::<Value>(&body).unwrap_or_default()
                }
                _ => Value::Null,
            };
            let listed = listing
                .as_array()
                .and_then(|apps| apps.iter().find(|a| a["id"] == app));
            if let Some(listed) = listed {
                // an application with attempt ids is addressed by its attempt
                return Ok(match listed["attempts"][0]["attemptId"].as_str() {
                    Some(attempt) => format!("/api/v1/applications/{app}/{attempt}/jobs"),
                    None => format!("/api/v1/applications/{app}/jobs"),
                });
            }
            if Instant::now() > deadline {
                bail!(
                    "{} did not list {app} within {} s; see {}",
                    self.name,
                    LISTING_DEADLINE.as_secs(),
                    self.log.display()
                );
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Seconds from asking for `path` to having read the whole answer, and its jobs.
    async fn first_answer(&self, http: &reqwest::Client, path: &str) -> Result<(f64, usize)> {
        let started = Instant::now();
        let answer = http
            .get(self.url(path))
            .send()
            .await
            .with_context(|| format!("{} did not answer {path}", self.name))?;
        let status = answer.status();
        let body = answer.bytes().await?;
        let seconds = started.elapsed().as_secs_f64();
        if !status.is_success() {
            bail!("{} answered {path} with {status}", self.name);
        }
        let jobs = serde_json::from_slice::<Value>(&body)
            .ok()
            .and_then(|v| v.as_array().map(Vec::len))
            .with_context(|| format!("{} answered {path} with no list of jobs", self.name))?;
        Ok((seconds, jobs))
    }
}

/// The id of the one complete application in `dir`, and its log's size in bytes.
fn the_application(dir: &Path) -> Result<(String, u64)> {
    let sources = qprof_eventlog::discover(dir)
        .with_context(|| format!("cannot read the log directory '{}'", dir.display()))?;
    let complete: Vec<_> = sources.iter().filter(|s| !s.in_progress).collect();
    let [source] = complete.as_slice() else {
        bail!(
            "'{}' must hold one complete application's log; it holds {}",
            dir.display(),
            complete.len()
        );
    };
    let info = qprof_eventlog::scan_info(source)?;
    let id = info
        .id
        .with_context(|| format!("the log {} names no application", source.path.display()))?;
    let bytes = source.files.iter().map(|f| f.len).sum();
    Ok((id, bytes))
}

/// Starts `server`, waits until it lists `app`, and times its first `/jobs` of it.
async fn time_first_jobs(
    mut server: Server,
    http: &reqwest::Client,
    app: &str,
) -> Result<(f64, usize)> {
    let path = server.listed(http, app).await?;
    server.first_answer(http, &path).await
}

/// Runs the benchmark and prints each round and the medians.
pub(crate) async fn replay(args: &ReplayArgs) -> Result<()> {
    let (app, bytes) = the_application(&args.log_dir)?;
    let work = tempfile::tempdir().context("cannot make a working directory")?;
    let http = reqwest::Client::builder()
        .no_proxy()
        .timeout(LISTING_DEADLINE)
        .build()
        .context("cannot make an HTTP client")?;
    println!(
        "first /jobs of {app} ({:.1} MB of log) on a server started afresh, {} rounds",
        bytes as f64 / 1e6,
        args.rounds
    );
    let (mut ours, mut theirs) = (Vec::new(), Vec::new());
    for round in 1..=args.rounds {
        let (seconds, jobs) =
            time_first_jobs(Server::qprof(&args.log_dir, work.path())?, &http, &app).await?;
        ours.push(seconds);
        let mut line = format!("round {round}: qprof {seconds:.3} s ({jobs} jobs)");
        if let Some(home) = &args.spark_home {
            let (spark_seconds, spark_jobs) = time_first_jobs(
                Server::spark(home, &args.log_dir, work.path())?,
                &http,
                &app,
            )
            .await?;
            if spark_jobs != jobs {
                bail!("Spark's history server lists {spark_jobs} jobs, qprof {jobs}");
            }
            theirs.push(spark_seconds);
            line.push_str(&format!(
                "  Spark {spark_seconds:.3} s  ratio {:.1}",
                spark_seconds / seconds
            ));
        }
        println!("{line}");
    }
    let qprof = median(&mut ours);
    print!("median: qprof {qprof:.3} s");
    if !theirs.is_empty() {
        let spark = median(&mut theirs);
        print!("  Spark {spark:.3} s  Spark / qprof {:.1}", spark / qprof);
    }
    println!();
    Ok(())
}
