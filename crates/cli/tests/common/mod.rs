//! Helpers shared by the CLI's integration tests (each test binary uses some of them).
#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

pub(crate) mod cluster;
pub(crate) mod otlp;
pub(crate) mod served;

/// Runs TPC-H SF 0.01 (all queries, or `queries`, e.g. `"3,22"`) with its data under
/// `dir/data` and its event log under `dir/events`; returns the log directory.
pub(crate) fn tpch_event_log(dir: &Path, queries: Option<&str>) -> PathBuf {
    let events = dir.join("events");
    let mut run = Command::new(env!("CARGO_BIN_EXE_qprof"));
    run.args(["run", "--tpch", "0.01", "--top", "0"]);
    if let Some(queries) = queries {
        run.args(["--queries", queries]);
    }
    let out = run
        .arg("--data-dir")
        .arg(dir.join("data"))
        .arg("--event-log-dir")
        .arg(&events)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    events
}

/// A plain HTTP/1.0 GET: (status, body).
pub(crate) fn http_get(port: u16, path: &str) -> Option<(u16, Vec<u8>)> {
    http_request(
        port,
        &format!("GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\nAccept: application/json\r\n\r\n"),
        60,
    )
}

/// A plain HTTP/1.0 POST of a JSON body: (status, body).
pub(crate) fn http_post_json(port: u16, path: &str, body: &str) -> Option<(u16, Vec<u8>)> {
    http_request(
        port,
        &format!(
            "POST {path} HTTP/1.0\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nAccept: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        ),
        120,
    )
}

/// Sends `request` (its head and body) to the server on `port`, waiting at most
/// `seconds` for each read: (status, body).
fn http_request(port: u16, request: &str, seconds: u64) -> Option<(u16, Vec<u8>)> {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).ok()?;
    stream
        .set_read_timeout(Some(Duration::from_secs(seconds)))
        .ok()?;
    stream.write_all(request.as_bytes()).ok()?;
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).ok()?;
    let split = raw.windows(4).position(|w| w == b"\r\n\r\n")?;
    let head = String::from_utf8_lossy(&raw[..split]);
    let status = head.split_whitespace().nth(1)?.parse().ok()?;
    Some((status, raw[split + 4..].to_vec()))
}

/// The files under `dir`, at any depth (none if it cannot be read).
pub(crate) fn files_under(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    entries
        .flatten()
        .flat_map(|e| {
            let path = e.path();
            if path.is_dir() {
                files_under(&path)
            } else {
                vec![path]
            }
        })
        .collect()
}

/// `text` percent-encoded for a URL's path or query.
pub(crate) fn percent_encoded(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}
