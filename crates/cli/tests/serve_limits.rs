//! `qprof serve` against statements written to take it down, end to end: a statement that
//! would allocate a terabyte, one that builds 400 MB while it is planned, one that never
//! ends. Each is stopped in the SQL worker; the server keeps answering, within its own
//! memory, and the next statement gets a new worker.

mod common;

use common::served::{Server, temp_dir};
use common::{http_get, http_post_json};
use qprof_eventlog::fixtures::copy_oracle_app;
use serde_json::Value;

/// The peak resident memory of process `pid` (the kernel's `VmHWM`), bytes.
fn peak_rss(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status.lines().find(|l| l.starts_with("VmHWM:")).unwrap();
    let kib: u64 = line.split_whitespace().nth(1).unwrap().parse().unwrap();
    kib << 10
}

fn sql(server: &Server, statement: &str) -> (u16, Value) {
    let body = serde_json::json!({ "sql": statement }).to_string();
    let (status, reply) = http_post_json(server.port(), "/qprof/v1/sql", &body)
        .unwrap_or_else(|| panic!("no answer to {statement}"));
    let json = serde_json::from_slice(&reply).unwrap_or_else(|e| {
        panic!(
            "{statement}: not JSON ({e}): {}",
            String::from_utf8_lossy(&reply)
        )
    });
    (status, json)
}

#[test]
fn a_statement_past_its_memory_ends_its_worker_and_the_server_answers_on() {
    let dir = temp_dir("serve-limits");
    copy_oracle_app(&dir, "local-1");
    copy_oracle_app(&dir, "local-2");
    let mut server = Server::start_with(&dir, &["--sql-memory", "64M", "--sql-timeout", "20s"]);
    let (status, answer) = sql(&server, "SELECT count(*) AS n FROM qprof.applications");
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["rows"], serde_json::json!([[2]]));

    // a terabyte: the allocation fails in the worker, which ends
    let (status, answer) = sql(
        &server,
        "SELECT length(repeat(arrow_cast('x', 'LargeUtf8'), 1000000000000))",
    );
    assert_eq!(status, 500, "{answer}");
    let message = answer["message"].as_str().unwrap();
    assert!(
        message.contains("memory") && message.contains("limit"),
        "{message}"
    );
    assert!(server.running(), "the server ended");
    let (code, _) = http_get(server.port(), "/api/v1/applications").unwrap();
    assert_eq!(code, 200);

    // 400 MB built while planning: the worker's, not the server's
    let (status, answer) = sql(&server, "SELECT length(repeat('x', 400000000)) AS n");
    // planning copies the value: it may fit in the worker's limit or not, never the server
    match status {
        200 => assert_eq!(answer["rows"], serde_json::json!([[400_000_000]])),
        500 => assert!(
            answer["message"].as_str().unwrap().contains("memory"),
            "{answer}"
        ),
        _ => panic!("{status}: {answer}"),
    }
    assert!(
        peak_rss(server.pid()) < 300 << 20,
        "the server's peak RSS reached {} bytes",
        peak_rss(server.pid())
    );

    // the next statement gets a new worker
    let (status, answer) = sql(&server, "SELECT count(*) AS n FROM qprof.applications");
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["rows"], serde_json::json!([[2]]));
    assert!(server.running());
}
