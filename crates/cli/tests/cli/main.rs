//! The `qprof` binary end to end: happy paths and every documented error path.

mod bad_input;
mod collection;
mod insights;
mod sql;
mod stacks;
mod tpch;

use std::ops::Deref;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

/// The working directory the binary runs in: one per test process, kept out of the tree
/// because runs write their event logs under it. Made once, after removing the ones of
/// earlier test processes that are gone.
fn working_dir() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let tmp = std::env::temp_dir();
        if let Ok(entries) = std::fs::read_dir(&tmp) {
            for entry in entries.flatten() {
                let name = entry.file_name();
                let pid = name.to_str().and_then(|n| n.strip_prefix("qprof-cli-cwd-"));
                if let Some(pid) = pid.filter(|p| p.parse::<u32>().is_ok())
                    && !Path::new("/proc").join(pid).exists()
                {
                    let _ = std::fs::remove_dir_all(entry.path());
                }
            }
        }
        let dir = tmp.join(format!("qprof-cli-cwd-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        dir
    })
}

/// The `qprof` binary, run in [`working_dir`].
fn command() -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_qprof"));
    command.current_dir(working_dir());
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

/// A test's scratch directory, removed when the test ends, whether it passed or failed.
struct Scratch(tempfile::TempDir);

impl Deref for Scratch {
    type Target = Path;

    fn deref(&self) -> &Path {
        self.0.path()
    }
}

fn scratch(name: &str) -> Scratch {
    Scratch(
        tempfile::Builder::new()
            .prefix(&format!("qprof-cli-{name}-"))
            .tempdir()
            .unwrap(),
    )
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
