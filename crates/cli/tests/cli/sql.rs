//! `qprof sql`: profiles written, files of statements over hive directories, the read cache.

use super::*;

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
}

#[test]
fn a_reader_that_stops_reading_ends_the_run_without_an_error() {
    use std::io::{BufRead, BufReader};
    let mut child = command()
        .args([
            "sql",
            "SELECT value, value * 2 FROM generate_series(1, 1000000)",
            "--no-event-log",
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    assert!(!first.is_empty());
    // the pipe's reading end is closed here, as `head -1` closes it
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(141), "{stderr}");
    assert!(!stderr.contains("error"), "{stderr}");
}
