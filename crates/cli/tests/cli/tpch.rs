//! `qprof run --tpch` and `qprof bench overhead`.

use super::*;

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
    // each query's page faults, both sides: "q6 0.0/0.0"
    let faults = stdout
        .lines()
        .find_map(|l| l.strip_prefix("minor page faults per run, thousands (plain/qprof): "))
        .unwrap_or_else(|| panic!("no page faults line: {stdout}"));
    let (plain, profiled) = faults
        .strip_prefix("q6 ")
        .and_then(|f| f.split_once('/'))
        .unwrap_or_else(|| panic!("not q6's faults: {faults}"));
    assert!(
        plain.parse::<f64>().is_ok() && profiled.parse::<f64>().is_ok(),
        "{faults}"
    );
    let mut bad = common.to_vec();
    bad.extend(["--side", "both"]);
    assert_one_line_error(&qprof(&bad), "both");
    // sampling's own cost: qprof sampling stacks against qprof without
    let mut sampled = common.to_vec();
    sampled.extend(["--sample-stacks", "99", "--against-unsampled"]);
    let out = qprof(&sampled);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("ratios are medians over rounds of sampled/unsamp"),
        "{stdout}"
    );
    let header = stdout
        .lines()
        .find(|l| l.trim_start().starts_with("query"))
        .unwrap_or_else(|| panic!("{stdout}"));
    assert!(
        header.contains("unsamp ms") && header.contains("sampled ms"),
        "{header}"
    );
    assert!(stdout.contains("stack sampler: "), "{stdout}");
    let mut unsampled_alone = common.to_vec();
    unsampled_alone.push("--against-unsampled");
    assert_one_line_error(&qprof(&unsampled_alone), "--sample-stacks");
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
