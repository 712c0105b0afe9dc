//! The `qprof` binary end to end: happy paths and every documented error path.

mod bad_input;
mod insights;
mod sql;
mod tpch;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The `qprof` binary, run in a working directory of its own.
fn command() -> Command {
    // runs write their event logs under the working directory: keep them out of the tree
    let cwd = std::env::temp_dir().join(format!("qprof-cli-cwd-{}", std::process::id()));
    std::fs::create_dir_all(&cwd).unwrap();
    let mut command = Command::new(env!("CARGO_BIN_EXE_qprof"));
    command.current_dir(cwd);
    command
}

fn qprof(args: &[&str]) -> Output {
    command().args(args).output().expect("qprof starts")
}

/// `qprof ARGS` with `tmp` as its temporary directory.
fn qprof_in_tmp(tmp: &Path, args: &[&str]) -> Output {
    command()
        .env("TMPDIR", tmp)
        .args(args)
        .output()
        .expect("qprof starts")
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("qprof-cli-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn csv_table(dir: &Path) -> PathBuf {
    let path = dir.join("t.csv");
    let mut text = String::from("a,b\n");
    for i in 0..1000 {
        text.push_str(&format!("{},{}\n", i % 7, i));
    }
    std::fs::write(&path, text).unwrap();
    path
}

/// Runs `qprof sql ARGS --event-log-dir EVENTS`, which must succeed; returns the
/// application's log directory.
fn logged_sql(args: &[&str], events: &Path) -> PathBuf {
    let mut all = vec!["sql"];
    all.extend_from_slice(args);
    all.extend(["--event-log-dir", events.to_str().unwrap()]);
    let out = qprof(&all);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    std::fs::read_dir(events)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path()
}

/// Asserts a failed run with exactly one line on stderr containing `needle`.
fn assert_one_line_error(out: &Output, needle: &str) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "expected failure, stderr: {stderr}");
    assert_eq!(
        stderr.trim_end().lines().count(),
        1,
        "not one line: {stderr:?}"
    );
    assert!(
        stderr.contains(needle),
        "stderr {stderr:?} does not mention {needle:?}"
    );
    assert!(!stderr.contains("panicked") && !stderr.contains("backtrace"));
}
