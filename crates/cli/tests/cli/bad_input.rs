//! Bad input of every kind (flags, SQL, files, paths, server and event-log options): one line
//! on stderr and a non-zero exit.

use super::*;

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
    // said before the statement runs, not after
    assert!(
        out.stdout.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let out = qprof(&[
        "sql",
        "SELECT 1 AS x",
        "--trace-out",
        "/definitely/not/here/t.json",
    ]);
    assert_one_line_error(&out, "cannot write the trace");
    assert!(
        out.stdout.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
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
    // access: a token file that is missing or too short, ACLs without users
    let serve_with = |flags: &[&str]| {
        let mut args = vec!["serve", "--log-dir", dir.to_str().unwrap(), "--port", "0"];
        args.extend_from_slice(flags);
        qprof(&args)
    };
    let missing_token = dir.join("no-token");
    assert_one_line_error(
        &serve_with(&["--auth-token-file", missing_token.to_str().unwrap()]),
        "cannot read the token file",
    );
    let short = dir.join("short-token");
    std::fs::write(&short, "abc\n").unwrap();
    assert_one_line_error(
        &serve_with(&["--auth-token-file", short.to_str().unwrap()]),
        "at least 16 printable characters",
    );
    assert_one_line_error(&serve_with(&["--acls"]), "--auth-user-header");
    assert_one_line_error(
        &serve_with(&["--auth-user-header", "bad header"]),
        "is not a header name",
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
fn cluster_runs_refuse_what_they_do_not_take_and_an_unreachable_scheduler() {
    for args in [
        &["run", "--tpch", "0.01", "--spill-dir", "."][..],
        &["run", "--tpch", "0.01", "--memory-limit", "1G"],
        &["sql", "SELECT 1", "--ui"],
        &["sql", "SELECT 1", "--no-event-log"],
        &["sql", "SELECT 1", "--s3-endpoint", "http://127.0.0.1:9000"],
    ] {
        let mut all = args.to_vec();
        all.extend(["--cluster", "df://127.0.0.1:1"]);
        let out = qprof(&all);
        assert_one_line_error(&out, "cannot be used with");
        assert_eq!(out.status.code(), Some(2), "{all:?}");
    }
    // a port nothing listens on: bound, then released
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("df://127.0.0.1:{port}");
    assert_one_line_error(
        &qprof(&["sql", "SELECT 1", "--cluster", &url]),
        &format!("cannot reach the scheduler at {url}"),
    );
    // profiles are written on a cluster too: a directory that is not there is said first
    assert_one_line_error(
        &qprof(&[
            "sql",
            "SELECT 1",
            "--profile-out",
            "no-such-dir/p.json",
            "--cluster",
            &url,
        ]),
        "cannot write profiles to 'no-such-dir/p.json': 'no-such-dir' is not a directory",
    );
}

#[test]
fn errors_name_their_cause_once() {
    let dir = scratch("causes");
    let once = |out: &Output, cause: &str| {
        assert_one_line_error(out, cause);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(stderr.matches(cause).count(), 1, "{stderr}");
    };
    let garbage = dir.join("bad.parquet");
    std::fs::write(&garbage, "not parquet at all").unwrap();
    once(
        &qprof(&[
            "sql",
            "SELECT * FROM t",
            "--no-event-log",
            "--table",
            &format!("t={}", garbage.display()),
        ]),
        "Parquet error",
    );
    let truncated = dir.join("trunc.json");
    std::fs::write(&truncated, "{\"queries\": [").unwrap();
    let truncated = truncated.to_str().unwrap();
    once(&qprof(&["diff", truncated, truncated]), "EOF while parsing");
    once(
        &qprof(&[
            "sql",
            "SELECT 1",
            "--no-event-log",
            "--cache-disk",
            "/proc/no-such-dir:64M",
        ]),
        "No such file or directory",
    );
    assert_one_line_error(
        &qprof(&[
            "sql",
            "SELECT 1",
            "--no-event-log",
            "--table",
            "t=gs://bucket/t.parquet",
        ]),
        "'gs://bucket/t.parquet' is neither a local path nor an s3:// location",
    );
}

#[test]
fn bench_replay_without_one_application_is_one_line() {
    let dir = scratch("replay-empty");
    let out = qprof(&["bench", "replay", "--log-dir", dir.to_str().unwrap()]);
    // a debug build's benchmarks warn first
    let stderr = String::from_utf8_lossy(&out.stderr);
    let lines: Vec<&str> = stderr
        .lines()
        .filter(|l| !l.starts_with("warning: this is a debug build"))
        .collect();
    assert!(!out.status.success(), "{stderr}");
    assert_eq!(lines.len(), 1, "{stderr}");
    assert!(
        lines[0].starts_with("error: ")
            && lines[0].ends_with("must hold one complete application's log; it holds 0"),
        "{stderr}"
    );
}
