//! The `qprof` binary end to end: happy paths and every documented error path.

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

#[test]
fn sql_runs_and_writes_a_profile() {
    let dir = scratch("sql");
    let table = csv_table(&dir);
    let json_path = dir.join("p.json");
    let out = qprof(&[
        "sql",
        "SELECT a, count(*) AS n FROM t GROUP BY a ORDER BY a",
        "--table",
        &format!("t={}", table.display()),
        "--profile-out",
        json_path.to_str().unwrap(),
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("query 1: 7 rows"), "{stdout}");
    assert!(stdout.contains("top operators by self cpu"), "{stdout}");
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json_path).unwrap()).unwrap();
    let q = &json["queries"][0];
    assert_eq!(q["rows"], 7);
    assert_eq!(q["plan"]["metrics"]["outputRows"]["value"], 7);
    assert_eq!(q["plan"]["metrics"]["outputRows"]["kind"], "sum");
    assert!(q["stages"].as_array().unwrap().len() >= 2);
}

#[test]
fn unknown_table_is_one_line() {
    let out = qprof(&["sql", "SELECT * FROM nowhere"]);
    assert_one_line_error(&out, "nowhere");
}

#[test]
fn sql_error_is_one_line() {
    let dir = scratch("sqlerr");
    let table = csv_table(&dir);
    let out = qprof(&[
        "sql",
        "SELEC a FROM t",
        "--table",
        &format!("t={}", table.display()),
    ]);
    assert_one_line_error(&out, "error:");
    // the parser's message once, not DataFusion's layers repeating it
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(stderr.matches("Expected").count(), 1, "{stderr}");
}

#[test]
fn missing_file_is_one_line() {
    let out = qprof(&[
        "sql",
        "SELECT 1",
        "--table",
        "t=/definitely/not/here.parquet",
    ]);
    assert_one_line_error(&out, "does not exist");
}

#[test]
fn a_format_that_cannot_be_told_is_one_line() {
    let dir = scratch("format");
    let path = dir.join("data.txt");
    std::fs::write(&path, "a\n1\n").unwrap();
    let out = qprof(&[
        "sql",
        "SELECT 1",
        "--table",
        &format!("t={}", path.display()),
    ]);
    assert_one_line_error(&out, "give --format parquet, csv or json");
    // told, it reads
    let out = qprof(&[
        "sql",
        "SELECT count(*) FROM t",
        "--no-event-log",
        "--format",
        "csv",
        "--table",
        &format!("t={}", path.display()),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn data_access_flags_are_checked() {
    let cases: &[(&[&str], &str)] = &[
        (&["sql", "SELECT 1", "--memory-limit", "lots"], "not a size"),
        (
            &["sql", "SELECT 1", "--memory-limit", "0"],
            "not a positive size",
        ),
        (
            &["sql", "SELECT 1", "--spill-dir", "/definitely/not/here"],
            "is not a directory",
        ),
        (&["sql", "SELECT 1", "--format", "xml"], "xml"),
        (&["sql", "SELECT 1", "--table", "t="], "has no location"),
        (&["sql", "-f", "/definitely/not/here.sql"], "cannot read"),
        (&["sql", "SELECT 1", "-f", "x.sql"], "cannot be used with"),
        (&["sql"], "required"),
        (&["sql", " -- only a comment"], "no SQL statement"),
        (&["sql", "SELECT 'unterminated"], "SQL error"),
        (
            &["run", "--tpch", "0.01", "--memory-limit", "5Q"],
            "not a size",
        ),
        (
            &["sql", "SELECT 1", "--cache-memory", "0"],
            "not a positive size",
        ),
        (
            &["sql", "SELECT 1", "--cache-memory", "100K"],
            "memory tier needs at least",
        ),
        (&["sql", "SELECT 1", "--cache-disk", "2G"], "not DIR:SIZE"),
        (
            &["sql", "SELECT 1", "--cache-disk", ":2G"],
            "names no directory",
        ),
        (
            &["sql", "SELECT 1", "--cache-disk", "/tmp/c:lots"],
            "not a size",
        ),
        (
            &[
                "sql",
                "SELECT 1",
                "--cache-disk",
                "/tmp/qprof-tiny-cache:1M",
            ],
            "disk tier needs at least",
        ),
        (
            &["sql", "SELECT 1", "--cache-disk", "/proc/version/cache:1G"],
            "cannot use /proc/version/cache",
        ),
    ];
    for (args, needle) in cases {
        let out = qprof(args);
        assert_one_line_error(&out, needle);
    }
}

#[test]
fn a_file_of_statements_writes_reads_and_prunes_a_hive_directory() {
    let dir = scratch("script");
    let table = csv_table(&dir);
    let hive = dir.join("hive");
    std::fs::create_dir_all(&hive).unwrap();
    let script = dir.join("script.sql");
    std::fs::write(
        &script,
        format!(
            "-- a table from a CSV file, rewritten as Parquet partitioned by a\n\
             CREATE EXTERNAL TABLE src STORED AS CSV LOCATION '{}' OPTIONS ('format.has_header' 'true');\n\
             COPY (SELECT b, a FROM src) TO '{}/' STORED AS PARQUET PARTITIONED BY (a);\n\
             SELECT count(*) AS n FROM src;\n",
            table.display(),
            hive.display()
        ),
    )
    .unwrap();
    let out = qprof(&[
        "sql",
        "-f",
        script.to_str().unwrap(),
        "--no-event-log",
        "--memory-limit",
        "256M",
        "--spill-dir",
        dir.to_str().unwrap(),
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}\n{stdout}",
        String::from_utf8_lossy(&out.stderr)
    );
    // ground truth: the files the COPY left, one directory per value of a (0..7)
    let mut files = Vec::new();
    for entry in std::fs::read_dir(&hive).unwrap() {
        for file in std::fs::read_dir(entry.unwrap().path()).unwrap() {
            files.push(file.unwrap().path());
        }
    }
    assert_eq!(files.len(), 7, "{files:?}");
    let bytes: u64 = files
        .iter()
        .map(|f| std::fs::metadata(f).unwrap().len())
        .sum();
    let wrote = stdout
        .lines()
        .find(|l| l.trim_start().starts_with("wrote "))
        .unwrap_or_else(|| panic!("no write line in\n{stdout}"));
    assert!(wrote.contains(" in 7 files "), "{wrote}");
    let rendered = if bytes < 1024 {
        format!("wrote {bytes}.0 B")
    } else {
        format!("wrote {:.1} KiB", bytes as f64 / 1024.0)
    };
    assert!(
        wrote.trim_start().starts_with(&rendered),
        "{wrote} vs {bytes} bytes"
    );
    assert!(stdout.contains("| 1000 "), "{stdout}");
    assert!(stdout.contains("3 queries"), "{stdout}");

    // the directory as a table: Hive partitions inferred, the format found in it
    let out = qprof(&[
        "sql",
        "SELECT count(*) AS n, sum(b) AS s FROM h WHERE a = '3'; SELECT count(DISTINCT a) FROM h",
        "--no-event-log",
        "--table",
        &format!("h={}", hive.display()),
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}\n{stdout}",
        String::from_utf8_lossy(&out.stderr)
    );
    // rows with a = 3: i % 7 == 3 for i in 0..1000, and their sum
    let (n, s) = (0..1000_i64)
        .filter(|i| i % 7 == 3)
        .fold((0, 0), |(n, s), i| (n + 1, s + i));
    assert!(stdout.contains(&format!("| {n} ")), "{stdout}");
    assert!(stdout.contains(&format!("| {s} ")), "{stdout}");
    assert!(stdout.contains("| 7 "), "{stdout}");
    // the partition filter left one file of seven to the first scan (the other six pruned
    // while planning), and it read just that file's bytes (its size bounds what a scan of
    // it can read)
    let first = stdout.split("query 2:").next().unwrap();
    let pruned = format!("splits {} skipped, 1 kept", files.len() - 1);
    assert!(first.contains(&pruned), "{first}");
    let partition_file = std::fs::read_dir(hive.join("a=3"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let size = std::fs::metadata(partition_file).unwrap().len();
    let read = first
        .lines()
        .find(|l| l.trim_start().starts_with("read "))
        .unwrap_or_else(|| panic!("no read line in {first}"));
    let read_bytes: f64 = read.split_whitespace().nth(1).unwrap().parse().unwrap();
    let unit = read.split_whitespace().nth(2).unwrap();
    let read_bytes = if unit == "KiB" {
        read_bytes * 1024.0
    } else {
        read_bytes
    };
    assert!(
        read_bytes > 0.0 && read_bytes <= size as f64 + 0.5,
        "{read} vs {size}"
    );
}

#[test]
fn bad_flag_is_one_line() {
    let out = qprof(&["run", "--tpch", "0.01", "--no-such-flag"]);
    assert_one_line_error(&out, "--no-such-flag");
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn bad_scale_factor_is_one_line() {
    for sf in ["-1", "0", "abc", "NaN"] {
        let out = qprof(&["run", "--tpch", sf]);
        assert_one_line_error(&out, "scale factor");
    }
}

#[test]
fn bad_query_list_is_one_line() {
    let out = qprof(&["run", "--tpch", "0.01", "--queries", "1,23"]);
    assert_one_line_error(&out, "no TPC-H query 23");
}

#[test]
fn unwritable_profile_path_is_one_line() {
    let out = qprof(&[
        "sql",
        "SELECT 1 AS x",
        "--profile-out",
        "/definitely/not/here/p.json",
    ]);
    assert_one_line_error(&out, "cannot write profiles");
}

#[test]
fn data_dir_that_is_a_file_is_one_line() {
    let dir = scratch("datafile");
    let file = dir.join("file");
    std::fs::write(&file, "x").unwrap();
    let out = qprof(&[
        "run",
        "--tpch",
        "0.01",
        "--data-dir",
        file.to_str().unwrap(),
    ]);
    assert_one_line_error(&out, "not a directory");
}

#[test]
fn run_tpch_prints_profiles_and_writes_json() {
    let dir = scratch("tpch");
    let json_path = dir.join("p.json");
    let out = qprof(&[
        "run",
        "--tpch",
        "0.01",
        "--queries",
        "1,3",
        "--data-dir",
        dir.join("data").to_str().unwrap(),
        "--profile-out",
        json_path.to_str().unwrap(),
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("query 1: 4 rows"), "{stdout}");
    assert!(stdout.contains("query 3: 10 rows"), "{stdout}");
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json_path).unwrap()).unwrap();
    let queries = json["queries"].as_array().unwrap();
    assert_eq!(queries.len(), 2);
    for q in queries {
        for key in ["id", "sql", "rows", "durationNanos", "plan", "stages"] {
            assert!(q.get(key).is_some(), "missing {key}");
        }
        let stage = &q["stages"][0];
        assert!(stage["nodeIds"].is_array() && stage["tasks"][0]["partition"].is_number());
        assert!(stage["tasks"][0]["metrics"]["cpuNanos"]["value"].is_number());
    }
}

#[test]
fn serve_errors_are_one_line() {
    let dir = scratch("serve");
    let missing = dir.join("missing");
    assert_one_line_error(
        &qprof(&["serve", "--log-dir", missing.to_str().unwrap()]),
        "cannot read log directory",
    );
    let file = dir.join("file");
    std::fs::write(&file, b"x").unwrap();
    assert_one_line_error(
        &qprof(&["serve", "--log-dir", file.to_str().unwrap()]),
        "cannot read log directory",
    );
    assert_one_line_error(
        &qprof(&[
            "serve",
            "--log-dir",
            dir.to_str().unwrap(),
            "--bind",
            "not an address",
        ]),
        "cannot listen on not an address",
    );
    assert_one_line_error(
        &qprof(&["serve", "--port", "99999"]),
        "invalid value '99999'",
    );
    // object stores: S3 only, with a bucket; an endpoint only for an S3 prefix
    assert_one_line_error(
        &qprof(&["serve", "--log-dir", "gs://bucket/logs"]),
        "not gs://",
    );
    assert_one_line_error(
        &qprof(&["serve", "--log-dir", "s3:///logs"]),
        "names no bucket",
    );
    assert_one_line_error(
        &qprof(&[
            "serve",
            "--log-dir",
            dir.to_str().unwrap(),
            "--s3-endpoint",
            "http://127.0.0.1:9",
        ]),
        "--s3-endpoint is for an s3:// --log-dir",
    );
    assert_one_line_error(
        &qprof(&["serve", "--log-dir", "s3://b/", "--s3-endpoint", "ftp://x"]),
        "not an http:// or https:// URL",
    );
    for (flag, value, message) in [
        ("--update-interval", "0s", "not a positive duration"),
        ("--update-interval", "soon", "not a duration"),
        ("--max-memory", "lots", "not a size"),
        ("--replay-threads", "0", "invalid value '0'"),
        ("--store-max-disk", "plenty", "not a size"),
        ("--cleaner-max-age", "never", "not a duration"),
        ("--cleaner-max-num", "0", "invalid value '0'"),
    ] {
        assert_one_line_error(&qprof(&["serve", flag, value]), message);
    }
    assert_one_line_error(
        &qprof(&[
            "serve",
            "--log-dir",
            dir.to_str().unwrap(),
            "--store-dir",
            "/dev/null/store",
        ]),
        "cannot create the store directory",
    );
    // a port already taken
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port().to_string();
    assert_one_line_error(
        &qprof(&["serve", "--log-dir", dir.to_str().unwrap(), "--port", &port]),
        "cannot listen on 127.0.0.1",
    );
}

#[test]
fn event_log_flags_are_checked() {
    let dir = scratch("logflags");
    let table = csv_table(&dir);
    let t = format!("t={}", table.display());
    assert_one_line_error(
        &qprof(&[
            "sql",
            "select 1",
            "--table",
            &t,
            "--no-event-log",
            "--event-log-compress",
        ]),
        "cannot be used with",
    );
    let blocker = dir.join("blocker");
    std::fs::write(&blocker, b"x").unwrap();
    assert_one_line_error(
        &qprof(&[
            "sql",
            "select 1",
            "--table",
            &t,
            "--event-log-dir",
            blocker.to_str().unwrap(),
        ]),
        "cannot write the event log",
    );
    // compressed logs are written as rolled .zstd files and a completed marker
    let events = dir.join("events");
    let app = logged_sql(
        &[
            "select a, count(*) from t group by a",
            "--table",
            &t,
            "--event-log-compress",
        ],
        &events,
    );
    let mut names: Vec<String> = std::fs::read_dir(&app)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    let id = app
        .file_name()
        .unwrap()
        .to_str()
        .unwrap()
        .trim_start_matches("eventlog_v2_")
        .to_string();
    assert_eq!(
        names,
        [format!("appstatus_{id}"), format!("events_1_{id}.zstd")]
    );
}

#[test]
fn bench_overhead_runs_one_side_alone_or_both_with_the_updater_measured() {
    let dir = scratch("bench");
    let data = dir.join("data");
    let common = [
        "bench",
        "overhead",
        "--tpch",
        "0.01",
        "--queries",
        "6",
        "--rounds",
        "1",
        "--data-dir",
        data.to_str().unwrap(),
    ];
    for side in ["plain", "qprof"] {
        let mut args = common.to_vec();
        args.extend(["--side", side]);
        let out = qprof(&args);
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let expected = format!(
            "{}{} alone, 1 queries x 1 rounds",
            side[..1].to_uppercase(),
            &side[1..]
        );
        assert!(stdout.contains(&expected), "{stdout}");
        assert!(!stdout.contains("overhead ratio"), "{stdout}");
    }
    let out = qprof(&common);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("overhead ratio: "), "{stdout}");
    assert!(
        stdout.contains("round ratios (wall, all queries): min "),
        "{stdout}"
    );
    assert!(stdout.contains("periodic updater thread: "), "{stdout}");
    let mut bad = common.to_vec();
    bad.extend(["--side", "both"]);
    assert_one_line_error(&qprof(&bad), "both");
}

#[test]
fn bench_overhead_runs_one_cluster_alone() {
    let dir = scratch("bench-cluster");
    let data = dir.join("data");
    // the bench's event logs and its executors' shuffle files go under the temporary
    // directory, and nothing of them may stay there
    let tmp = dir.join("tmp");
    std::fs::create_dir_all(&tmp).unwrap();
    for side in ["plain", "qprof"] {
        let out = qprof_in_tmp(
            &tmp,
            &[
                "bench",
                "overhead",
                "--cluster",
                "--side",
                side,
                "--tpch",
                "0.01",
                "--queries",
                "6",
                "--rounds",
                "1",
                "--partitions",
                "2",
                "--data-dir",
                data.to_str().unwrap(),
            ],
        );
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let line = stdout
            .lines()
            .find(|l| l.contains("cluster alone, 1 queries x 1 rounds after a warm-up"))
            .unwrap_or_else(|| panic!("{stdout}"));
        let expected = format!("{}{} cluster", side[..1].to_uppercase(), &side[1..]);
        assert!(line.starts_with(&expected), "{line}");
        let wall: f64 = line
            .split(": ")
            .nth(1)
            .and_then(|rest| rest.split(" ms").next())
            .and_then(|ms| ms.parse().ok())
            .unwrap_or_else(|| panic!("{line}"));
        assert!(wall > 0.0, "{line}");
        assert!(!stdout.contains("overhead ratio"), "{stdout}");
        let left: Vec<_> = std::fs::read_dir(&tmp).unwrap().flatten().collect();
        assert!(left.is_empty(), "{side}: left {left:?}");
    }
}

/// The bytes of one tier of the first scan of each query in a profiles document.
fn scan_tier_bytes(profiles: &Path, metric: &str) -> Vec<i64> {
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(profiles).unwrap()).unwrap();
    fn find<'a>(node: &'a serde_json::Value, name: &str) -> Option<&'a serde_json::Value> {
        if node["name"] == name {
            return Some(node);
        }
        node["children"]
            .as_array()?
            .iter()
            .find_map(|c| find(c, name))
    }
    doc["queries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|profile| {
            let scan = find(&profile["plan"], "DataSourceExec").expect("a scan");
            scan["metrics"][metric]["value"].as_i64().unwrap_or(0)
        })
        .collect()
}

#[test]
fn a_read_cache_serves_repeated_scans_from_ram_then_later_runs_from_disk() {
    let dir = scratch("cache");
    // several cache chunks: the columns queried first, incompressible doubles after them,
    // the footer (which registering the table reads) last
    let parquet = dir.join("t.parquet");
    let out = qprof(&[
        "sql",
        &format!(
            "COPY (SELECT v AS b, v % 7 AS a, random() AS r FROM generate_series(1, 600000) AS s(v)) \
             TO '{}' STORED AS PARQUET",
            parquet.display()
        ),
        "--no-event-log",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(std::fs::metadata(&parquet).unwrap().len() > 3 << 20);
    let query = "SELECT sum(b) FROM t WHERE a = 3";
    let table = format!("t={}", parquet.display());
    let cache_disk = format!("{}:32M", dir.join("cache").display());
    let profiles = dir.join("profiles.json");
    let run = |sql: &str, extra: &[&str]| {
        let mut args = vec![
            "sql",
            sql,
            "--table",
            &table,
            "--no-event-log",
            "--profile-out",
            profiles.to_str().unwrap(),
        ];
        args.extend_from_slice(extra);
        let out = qprof(&args);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let tiers = |m| scan_tier_bytes(&profiles, m);
        (
            tiers("storageReadBytes"),
            tiers("localReadBytes"),
            tiers("ramReadBytes"),
            tiers("readBytes"),
        )
    };

    // the same query twice in one process: the second reads RAM
    let (storage, local, ram, read) = run(&format!("{query}; {query}"), &["--cache-memory", "16M"]);
    assert!(read[0] > 0 && read[0] == read[1], "{read:?}");
    assert!(storage[0] > 0 && storage[1] < storage[0], "{storage:?}");
    assert!(ram[1] > 0, "{ram:?}");
    assert_eq!(local, [0, 0]);
    for q in 0..2 {
        assert_eq!(storage[q] + local[q] + ram[q], read[q], "query {}", q + 1);
    }

    // a disk tier outlives its process: the next run reads local disk, not storage
    let (storage, ..) = run(query, &["--cache-disk", &cache_disk]);
    assert!(storage[0] > 0, "a cold cache reads storage");
    let (storage, local, ram, read) = run(query, &["--cache-disk", &cache_disk]);
    assert_eq!(storage, [0]);
    assert!(local[0] > 0, "{local:?}");
    assert_eq!(local[0] + ram[0], read[0]);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn diff_compares_two_runs_and_fails_on_a_regression_when_asked() {
    let dir = scratch("diff");
    let table = format!("t={}", csv_table(&dir).display());
    let sql = "SELECT a, count(*) AS n, sum(b) AS s FROM t GROUP BY a ORDER BY a";
    let profile = |name: &str| {
        let path = dir.join(name);
        let out = qprof(&[
            "sql",
            sql,
            "--table",
            &table,
            "--no-event-log",
            "--profile-out",
            path.to_str().unwrap(),
        ]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        path
    };
    let (first, second) = (profile("first.json"), profile("second.json"));
    let path = |p: &Path| p.to_str().unwrap().to_string();
    // two runs of the same query: every operator matched by its stable id, nothing failing
    let out = qprof(&[
        "diff",
        &path(&first),
        &path(&second),
        "--fail-on-regression",
        "1000",
    ]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.starts_with("query 1: "), "{text}");
    let operators = text.lines().filter(|l| l.contains(" #")).count();
    assert!(operators >= 3, "{text}");
    assert!(
        text.lines()
            .skip(1)
            .filter(|l| !l.is_empty())
            .all(|l| l.starts_with(' ') || l.starts_with('!')),
        "{text}"
    );

    // the second run's aggregate made 50 ms slower
    let mut doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&second).unwrap()).unwrap();
    let mut stack = vec![&mut doc["queries"][0]["plan"]];
    let mut slowed = None;
    while let Some(node) = stack.pop() {
        if slowed.is_none() && node["name"] == "AggregateExec" {
            let cpu = &mut node["metrics"]["selfCpuNanos"]["value"];
            *cpu = serde_json::json!(cpu.as_i64().unwrap() + 50_000_000);
            slowed = Some(node["id"].as_u64().unwrap());
        }
        if let Some(children) = node["children"].as_array_mut() {
            stack.extend(children.iter_mut());
        }
    }
    let slowed = slowed.expect("an aggregate");
    let slower = dir.join("slower.json");
    std::fs::write(&slower, doc.to_string()).unwrap();
    let out = qprof(&[
        "diff",
        &path(&first),
        &path(&slower),
        "--fail-on-regression",
        "50",
    ]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains(&format!("! #{slowed} AggregateExec")),
        "{text}"
    );
    assert_one_line_error(
        &out,
        &format!("1 operator regressed by more than 50%: query 1 #{slowed} AggregateExec"),
    );

    // a query in an event log, named LOGDIR:APP:SQLID, against a profile file
    let events = dir.join("events");
    let log_dir = logged_sql(&[sql, "--table", &table], &events);
    let log = std::fs::read_dir(&log_dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("events_")
        })
        .unwrap();
    let event = |name: &str| -> serde_json::Value {
        let text = std::fs::read_to_string(&log).unwrap();
        let line = text.lines().find(|l| l.contains(name)).unwrap();
        serde_json::from_str(line).unwrap()
    };
    let app = event("SparkListenerApplicationStart")["App ID"]
        .as_str()
        .unwrap()
        .to_string();
    let execution = event("SparkListenerSQLExecutionStart")["executionId"]
        .as_i64()
        .unwrap();
    let reference = format!("{}:{app}:{execution}", events.display());
    let out = qprof(&["diff", &reference, &path(&first)]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        text.lines().filter(|l| l.contains(" #")).count(),
        operators,
        "{text}"
    );
    // the logged run's operators keep their stable ids: none matched by place or new
    assert!(
        text.lines()
            .filter(|l| l.contains(" #"))
            .all(|l| l.starts_with(' ') || l.starts_with('!')),
        "{text}"
    );
    assert_one_line_error(
        &qprof(&[
            "diff",
            &format!("{}:{app}:999", events.display()),
            &path(&first),
        ]),
        "has no SQL execution 999",
    );
    assert_one_line_error(
        &qprof(&[
            "diff",
            &format!("{}:nobody:0", events.display()),
            &path(&first),
        ]),
        "no application 'nobody'",
    );

    // bad input: one line each
    assert_one_line_error(
        &qprof(&["diff", &path(&first), "/nonexistent.json"]),
        "cannot read '/nonexistent.json'",
    );
    let csv = dir.join("t.csv");
    assert_one_line_error(
        &qprof(&["diff", &path(&first), &path(&csv)]),
        "is not a qprof profile",
    );
    assert_one_line_error(
        &qprof(&["diff", &path(&first), &path(&second), "--threshold", "lots"]),
        "not a percentage",
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn trace_out_writes_a_chrome_trace_whose_spans_nest_per_track() {
    let dir = scratch("trace");
    let table = format!("t={}", csv_table(&dir).display());
    let (trace, profile) = (dir.join("trace.json"), dir.join("profile.json"));
    let out = qprof(&[
        "sql",
        "SELECT a, count(*) AS n FROM t GROUP BY a ORDER BY a",
        "--table",
        &table,
        "--partitions",
        "2",
        "--no-event-log",
        "--trace-out",
        trace.to_str().unwrap(),
        "--profile-out",
        profile.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&trace).unwrap()).unwrap();
    let events = doc["traceEvents"].as_array().expect("traceEvents");
    // the trace-event format's required fields
    let mut spans: std::collections::BTreeMap<(u64, u64), Vec<(u64, u64)>> = Default::default();
    for e in events {
        assert!(
            e["name"].is_string() && e["pid"].is_u64() && e["tid"].is_u64(),
            "{e}"
        );
        match e["ph"].as_str() {
            Some("M") => assert!(e["args"]["name"].is_string(), "{e}"),
            Some("X") => {
                let (ts, dur) = (e["ts"].as_u64().unwrap(), e["dur"].as_u64().unwrap());
                let track = (e["pid"].as_u64().unwrap(), e["tid"].as_u64().unwrap());
                spans.entry(track).or_default().push((ts, ts + dur));
            }
            other => panic!("unexpected phase {other:?}: {e}"),
        }
    }
    // on each track, spans nest or follow each other
    for (track, list) in &mut spans {
        list.sort();
        for pair in list.windows(2) {
            let ((_, e1), (s2, e2)) = (pair[0], pair[1]);
            assert!(e1 <= s2 || e2 <= e1, "{track:?}: {pair:?} overlap");
        }
    }
    // one span per task of the profile, and the query's
    let profile: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&profile).unwrap()).unwrap();
    let tasks: usize = profile["queries"][0]["stages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["tasks"].as_array().unwrap().len())
        .sum();
    let total: usize = spans.values().map(Vec::len).sum();
    assert_eq!(total, tasks + 1);
    assert!(tasks >= 2);
    let _ = std::fs::remove_dir_all(&dir);
}
