//! A real Prometheus (Debian's, which `scripts/install-test-deps.sh` installs) scraping
//! `qprof serve` and a running application's `/metrics`, asked through its HTTP API with
//! PromQL; the answers checked against Spark's REST API of the same server.

use std::io::{BufRead, BufReader};
use std::net::TcpListener;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::served::{Server, first_address, qprof, temp_dir};
use common::{http_get, percent_encoded};
use serde_json::Value;

mod common;

/// A Prometheus scraping one target every half second; stopped on drop.
struct Prometheus {
    child: Child,
    port: u16,
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

impl Prometheus {
    /// Starts Prometheus scraping `target` (`host:port`), keeping its data under `dir`, and
    /// waits (with a deadline) until it is ready.
    fn start(dir: &Path, target: &str) -> Prometheus {
        let config = dir.join("prometheus.yml");
        std::fs::write(
            &config,
            format!(
                "global:\n  scrape_interval: 500ms\n  scrape_timeout: 500ms\n\
                 scrape_configs:\n  - job_name: qprof\n    static_configs:\n      - targets: ['{target}']\n"
            ),
        )
        .unwrap();
        let port = free_port();
        let child = Command::new("prometheus")
            .arg(format!("--config.file={}", config.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.join("tsdb").display()
            ))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("prometheus runs (scripts/install-test-deps.sh installs it)");
        let mut prometheus = Prometheus { child, port };
        let deadline = Instant::now() + Duration::from_secs(60);
        while http_get(port, "/-/ready").is_none_or(|(status, _)| status != 200) {
            if let Some(status) = prometheus.child.try_wait().unwrap() {
                panic!("prometheus exited: {status}");
            }
            assert!(Instant::now() < deadline, "prometheus never got ready");
            std::thread::park_timeout(Duration::from_millis(50));
        }
        prometheus
    }

    /// The result of an instant PromQL query (Prometheus' `data.result`).
    fn query(&self, promql: &str) -> Vec<Value> {
        let path = format!("/api/v1/query?query={}", percent_encoded(promql));
        let (status, body) = http_get(self.port, &path).expect("prometheus answers");
        let answer: Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(status, 200, "{promql}: {answer}");
        assert_eq!(answer["status"], "success", "{promql}: {answer}");
        answer["data"]["result"].as_array().unwrap().clone()
    }

    /// The single value `promql` answers, once it answers one, waiting for scrapes (with a
    /// deadline) until `accept` takes it.
    fn value_when(&self, promql: &str, accept: impl Fn(f64) -> bool) -> f64 {
        let deadline = Instant::now() + Duration::from_secs(90);
        loop {
            let result = self.query(promql);
            if let [one] = result.as_slice() {
                let v: f64 = one["value"][1].as_str().unwrap().parse().unwrap();
                if accept(v) {
                    return v;
                }
            }
            assert!(
                Instant::now() < deadline,
                "{promql} never answered as expected: {result:?}"
            );
            std::thread::park_timeout(Duration::from_millis(200));
        }
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn json(port: u16, path: &str) -> Value {
    let (status, body) = http_get(port, path).unwrap_or_else(|| panic!("no answer for {path}"));
    assert_eq!(status, 200, "{path}: {}", String::from_utf8_lossy(&body));
    serde_json::from_slice(&body).unwrap()
}

#[test]
fn prometheus_scrapes_the_history_server_and_answers_as_its_rest_api() {
    let dir = temp_dir("prometheus");
    let events = common::tpch_event_log(&dir, Some("1,3,5,6,9,10"));
    let server = Server::start(&events);
    let prometheus = Prometheus::start(&dir, &format!("127.0.0.1:{}", server.port()));
    let apps = json(server.port(), "/api/v1/applications");
    let app = apps[0]["id"].as_str().unwrap().to_string();
    let executions = json(server.port(), &format!("/api/v1/applications/{app}/sql"));
    let executions = executions.as_array().unwrap();
    assert_eq!(executions.len(), 6);

    // queries by status
    let succeeded = prometheus.value_when(r#"sum(qprof_queries{status="succeeded"})"#, |_| true);
    assert_eq!(succeeded, 6.0);
    let completed =
        prometheus.value_when(r#"sum(qprof_applications{status="completed"})"#, |_| true);
    assert_eq!(completed, 1.0);

    // the median query duration, as Prometheus estimates it from the histogram, lies in
    // the bucket of the true median
    let median = prometheus.value_when(
        "histogram_quantile(0.5, sum by (le) (qprof_query_duration_seconds_bucket))",
        f64::is_finite,
    );
    let mut seconds: Vec<f64> = executions
        .iter()
        .map(|e| e["duration"].as_f64().unwrap() / 1000.0)
        .collect();
    seconds.sort_by(f64::total_cmp);
    let true_median = seconds[(seconds.len() - 1) / 2];
    // the server's buckets: 1 ms, then each 4 times the last
    let bounds: Vec<f64> = (0..11).map(|i| 0.001 * 4f64.powi(i)).collect();
    let upper = bounds.iter().copied().find(|b| true_median <= *b).unwrap();
    let lower = bounds
        .iter()
        .copied()
        .rev()
        .find(|b| *b < upper)
        .unwrap_or(0.0);
    assert!(
        lower <= median && median <= upper,
        "median {median} outside the true median's bucket ({lower}, {upper}] ({true_median})"
    );

    // rows read, summed by Prometheus, are the stages' input records
    let stages = json(server.port(), &format!("/api/v1/applications/{app}/stages"));
    let input_records: i64 = stages
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["inputRecords"].as_i64().unwrap())
        .sum();
    assert!(input_records > 0);
    let rows = prometheus.value_when("sum(qprof_scanned_rows_total)", |_| true);
    assert_eq!(rows, input_records as f64);
    drop(prometheus);
    drop(server);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn prometheus_sees_a_runs_live_gauges_move_and_its_failed_trace_exports() {
    let dir = temp_dir("prometheus-live");
    // a collector nobody runs: its failures are counted, not fatal
    let collector = format!("http://127.0.0.1:{}", free_port());
    // a quick statement whose trace fails to go out, then tens of seconds of work
    let mut child = qprof()
        .args([
            "sql",
            "SELECT 1; SELECT count(*) AS n FROM generate_series(1, 100000) AS a(x) \
             CROSS JOIN generate_series(1, 100000) AS b(y) WHERE (x + y) % 7 = 3",
            "--top",
            "0",
            "--ui",
            "127.0.0.1:0",
            "--otlp-endpoint",
            &collector,
            "--otlp-protocol",
            "grpc",
            "--event-log-dir",
        ])
        .arg(dir.join("events"))
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let url = first_address(&mut stderr);
    // keep reading what it says, so that it never blocks on a full pipe
    let said = std::thread::spawn(move || {
        stderr
            .lines()
            .map_while(Result::ok)
            .collect::<Vec<String>>()
    });
    let port: u16 = url.rsplit(':').next().unwrap().parse().unwrap();
    let prometheus = Prometheus::start(&dir, &format!("127.0.0.1:{port}"));

    // the running query's elapsed time grows between scrapes
    let moved = prometheus.value_when(
        "max(max_over_time(qprof_live_query_elapsed_seconds[1m]) - min_over_time(qprof_live_query_elapsed_seconds[1m]))",
        |v| v > 0.0,
    );
    assert!(moved > 0.0);
    let running = prometheus.value_when("qprof_live_running_queries", |v| v >= 1.0);
    assert_eq!(running, 1.0);
    // how far it got, scraped: below 100 % while it runs
    let progress = prometheus.value_when("max(qprof_live_query_progress_ratio)", |v| v >= 0.0);
    assert!(progress < 1.0, "{progress}");
    // the first statement's trace could not be sent: counted, at /metrics and /qprof/v1/status
    let failed = prometheus.value_when("qprof_live_trace_failed_exports", |v| v >= 1.0);
    let status = json(port, "/qprof/v1/status");
    let export = &status["traceExport"];
    assert!(
        export["failedExports"].as_f64().unwrap() >= failed,
        "{status}"
    );
    assert_eq!(export["protocol"], "grpc");
    assert!(export["lastError"].is_string(), "{status}");
    let _ = child.kill();
    let _ = child.wait();
    let said = said.join().unwrap();
    assert_eq!(
        said.iter().filter(|l| l.contains("warning")).count(),
        1,
        "{said:?}"
    );
    drop(prometheus);
    std::fs::remove_dir_all(&dir).unwrap();
}
