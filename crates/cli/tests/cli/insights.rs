//! `qprof diff` and `qprof run --trace-out`.

use super::*;

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
    // (a tiny operator's self CPU can read twenty times longer in one of two runs on a
    // busy machine: the threshold is beyond any such noise)
    let out = qprof(&[
        "diff",
        &path(&first),
        &path(&second),
        "--fail-on-regression",
        "100000",
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

    // the first run with its aggregate made 50 ms slower: nothing else differs, so no
    // operator a second run happened to slow joins it
    let mut doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&first).unwrap()).unwrap();
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
        "not a qprof profile",
    );
    assert_one_line_error(
        &qprof(&["diff", &path(&first), &path(&second), "--threshold", "lots"]),
        "not a percentage",
    );
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
}
