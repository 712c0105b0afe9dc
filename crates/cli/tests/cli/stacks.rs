//! `--sample-stacks` and `--pprof-out`: sampled stacks against the measured self CPU, and
//! the pprof file as Go's own `pprof` reads it.

use std::collections::BTreeMap;

use super::*;

/// Each node's selfCpuNanos, by node id.
fn self_cpu_by_node(plan: &serde_json::Value, out: &mut BTreeMap<u64, f64>) {
    let id = plan["id"].as_u64().unwrap();
    let self_cpu = plan["metrics"]["selfCpuNanos"]["value"]
        .as_f64()
        .unwrap_or(0.0);
    out.insert(id, self_cpu);
    for child in plan["children"].as_array().into_iter().flatten() {
        self_cpu_by_node(child, out);
    }
}

#[test]
fn sampled_stacks_agree_with_self_cpu_and_the_pprof_file_reads_in_go_pprof() {
    let dir = scratch("stacks");
    let json_path = dir.join("p.json");
    let pprof_path = dir.join("stacks.pb");
    let out = qprof(&[
        "run",
        "--tpch",
        "0.1",
        "--data-dir",
        dir.join("data").to_str().unwrap(),
        "--sample-stacks",
        "250",
        "--profile-out",
        json_path.to_str().unwrap(),
        "--pprof-out",
        pprof_path.to_str().unwrap(),
        "--no-event-log",
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains(" samples ~"),
        "no operator shows its stacks: {stdout}"
    );
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json_path).unwrap()).unwrap();
    let mut total_samples = 0u64;
    let mut periods = Vec::new();
    // samples, their time and the operators' self CPU, over all queries
    let mut totals = (0u64, 0.0, 0.0);
    for query in json["queries"].as_array().unwrap() {
        let stacks = &query["stackSamples"];
        let period = stacks["periodNanos"].as_f64().unwrap();
        periods.push(period as u64);
        let functions = stacks["functions"].as_array().unwrap();
        let mut samples: BTreeMap<u64, u64> = BTreeMap::new();
        for stack in stacks["stacks"].as_array().unwrap() {
            let count = stack["count"].as_u64().unwrap();
            *samples
                .entry(stack["nodeId"].as_u64().unwrap())
                .or_default() += count;
            total_samples += count;
            for frame in stack["frames"].as_array().unwrap() {
                assert!((frame.as_u64().unwrap() as usize) < functions.len());
            }
        }
        let mut self_cpu = BTreeMap::new();
        self_cpu_by_node(&query["plan"], &mut self_cpu);
        totals.0 += samples.values().sum::<u64>();
        totals.1 += samples.values().sum::<u64>() as f64 * period;
        totals.2 += self_cpu.values().sum::<f64>();
    }
    // the run's sampled operator time against its operators' self CPU, within 20 %: at SF
    // 0.1 no operator has enough samples alone (the next test holds operators with
    // hundreds of samples to 20 % each)
    let (count, sampled, measured) = totals;
    assert!(count >= 100, "{count} samples in all");
    assert!(
        (sampled - measured).abs() <= 0.20 * measured,
        "{count} samples, {sampled} ns against {measured} ns of self CPU"
    );

    // Go's pprof reads the file: the same samples, labelled with query, operator and task
    let home = dir.join("home");
    std::fs::create_dir_all(&home).unwrap();
    let raw = Command::new("go")
        .args(["tool", "pprof", "-raw"])
        .arg(&pprof_path)
        .env("HOME", &home)
        .output()
        .expect("go (Debian's golang-go, installed by scripts/install-test-deps.sh) runs");
    let text = String::from_utf8_lossy(&raw.stdout);
    assert!(
        raw.status.success(),
        "go tool pprof: {}",
        String::from_utf8_lossy(&raw.stderr)
    );
    assert!(text.contains("samples/count cpu/nanoseconds"), "{text}");
    // sample lines: "  COUNT   NANOS: LOCATION IDS"
    let go_samples: u64 = text
        .lines()
        .filter_map(|line| {
            let (values, _) = line.split_once(':')?;
            let mut numbers = values.split_whitespace();
            let count = numbers.next()?.parse::<u64>().ok()?;
            let nanos = numbers.next()?.parse::<u64>().ok()?;
            (numbers.next().is_none() && periods.iter().any(|p| nanos == count * p))
                .then_some(count)
        })
        .sum();
    assert_eq!(go_samples, total_samples);
    assert!(text.contains("operator:[HashJoinExec #"), "{text}");
    assert!(text.contains("query:[query 18]") && text.contains("task:["));
}

#[test]
fn stack_sampling_flags_are_checked() {
    let out = qprof(&["run", "--tpch", "0.01", "--sample-stacks", "0"]);
    assert_one_line_error(&out, "--sample-stacks");
    let out = qprof(&["run", "--tpch", "0.01", "--sample-stacks", "1000"]);
    assert_one_line_error(&out, "--sample-stacks");
    let out = qprof(&["run", "--tpch", "0.01", "--pprof-out", "x.pb"]);
    assert_one_line_error(&out, "--sample-stacks");
    let out = qprof(&[
        "run",
        "--tpch",
        "0.01",
        "--sample-stacks",
        "99",
        "--pprof-out",
        "/nonexistent-dir/x.pb",
    ]);
    assert_one_line_error(&out, "cannot write the sampled stacks");
}

#[test]
fn operators_with_many_samples_each_agree_with_their_self_cpu_within_a_fifth() {
    let dir = scratch("stacks-heavy");
    let json_path = dir.join("p.json");
    let out = qprof(&[
        "sql",
        "SELECT sum(value % 7) AS s, count(*) AS n FROM generate_series(1, 1200000000)",
        "--sample-stacks",
        "250",
        // one partition: no task splits its time between a spawned producer and its input,
        // which a machine busy with other tests skews (the split follows wall time)
        "--partitions",
        "1",
        "--profile-out",
        json_path.to_str().unwrap(),
        "--no-event-log",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json_path).unwrap()).unwrap();
    let query = &json["queries"][0];
    let stacks = &query["stackSamples"];
    let period = stacks["periodNanos"].as_f64().unwrap();
    let functions: Vec<&str> = stacks["functions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f.as_str().unwrap())
        .collect();
    let mut samples: BTreeMap<u64, u64> = BTreeMap::new();
    let mut in_generator = 0;
    for stack in stacks["stacks"].as_array().unwrap() {
        let count = stack["count"].as_u64().unwrap();
        *samples
            .entry(stack["nodeId"].as_u64().unwrap())
            .or_default() += count;
        if stack["frames"]
            .as_array()
            .unwrap()
            .iter()
            .any(|f| functions[f.as_u64().unwrap() as usize].contains("generate_series"))
        {
            in_generator += count;
        }
    }
    let mut self_cpu = BTreeMap::new();
    self_cpu_by_node(&query["plan"], &mut self_cpu);
    let many: Vec<_> = samples
        .iter()
        .filter(|(_, count)| **count >= 250)
        .map(|(node, count)| (*node, *count, *count as f64 * period, self_cpu[node]))
        .collect();
    assert!(
        many.len() >= 2,
        "fewer than two operators with 250 samples: {samples:?}"
    );
    for (node, count, sampled, measured) in &many {
        assert!(
            (sampled - measured).abs() <= 0.20 * measured,
            "operator #{node}: {count} samples, {sampled} ns against {measured} ns of self CPU \
             ({many:?})"
        );
    }
    // the generator's own code shows in its operator's stacks
    assert!(
        in_generator >= 100,
        "{in_generator} samples in generate_series"
    );
}
