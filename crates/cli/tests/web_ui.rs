//! The web UI in a real headless Chromium: every page renders, with its data; the query
//! page's task timeline and flame graph, and the comparison of two runs.
//!
//! Needs what `scripts/install-test-deps.sh` installs (Chromium, and a virtualenv with
//! spark-history-cli in `target/test-venv`).

use common::served::{Server, chromium, first_app, screenshot_stats, shc_ok, temp_dir};
use common::tpch_event_log;
use serde_json::Value;

mod common;

#[test]
fn every_page_renders_in_headless_chromium() {
    let dir = temp_dir("ui");
    let events = tpch_event_log(&dir, Some("3,22"));
    let server = Server::start(&events);
    // query 22 calls substr: the query page lists its call sites with their CPU time
    let dom = chromium(
        &["--dump-dom"],
        &format!("{}/#/app/{}/sql/1", server.url, first_app(&server)),
    );
    let html = String::from_utf8_lossy(&dom.stdout);
    assert!(
        html.contains("data-ready=\"1\""),
        "functions: never rendered"
    );
    assert!(
        html.contains("<tr class=\"function-row")
            && html.contains("substr(customer.c_phone, Int64(1), Int64(2))"),
        "no function call sites on the query page:\n{html}"
    );
    let apps: Value = serde_json::from_str(&shc_ok(&server, &["--json", "apps"])).unwrap();
    let app = apps[0]["id"].as_str().unwrap().to_string();
    let graph: Value =
        serde_json::from_str(&shc_ok(&server, &["--json", "-a", &app, "sql", "0"])).unwrap();
    let node_count = graph["nodes"].as_array().unwrap().len();
    assert!(node_count > 5);
    // the scans' I/O, pruning and read concurrency reach Spark's clients as SQL metrics
    let scan = graph["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["nodeName"] == "DataSourceExec")
        .expect("a scan node");
    let scan_metrics: Vec<&str> = scan["metrics"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["name"].as_str().unwrap())
        .collect();
    for name in [
        "bytes read from storage",
        "time of I/O wait",
        "average read concurrency",
        "time at read concurrency 1 (%)",
        "number of skipped splits",
        "number of row groups skipped by statistics",
        "time of opening files (metadata, pruning)",
    ] {
        assert!(
            scan_metrics.contains(&name),
            "{name} not in {scan_metrics:?}"
        );
    }
    // the page of the query with the scan selected: qprof's metrics of the scan, and the
    // read-concurrency buckets as Impala's string among its facts
    let scan_id = scan["nodeId"].as_i64().unwrap();
    let details_of = |node: i64| -> String {
        let dom = chromium(
            &["--dump-dom"],
            &format!("{}/#/app/{app}/sql/0?node={node}", server.url),
        );
        let html = String::from_utf8_lossy(&dom.stdout).into_owned();
        let details = html
            .split("id=\"node-details\"")
            .nth(1)
            .unwrap_or_else(|| panic!("no operator details:\n{html}"))
            .to_string();
        assert!(
            details.contains(&format!(">#{node}<")),
            "node {node} is not the one shown"
        );
        details
    };
    // any operator can be asked for, not only the one shown first
    let other = graph["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["nodeId"].as_i64().unwrap())
        .find(|&id| id != scan_id)
        .unwrap();
    details_of(other);
    let details = details_of(scan_id);
    for shown in [
        "DataSourceExec",
        "bytes read from storage",
        "time of I/O wait",
        "average read concurrency",
        "number of skipped splits",
        "readConcurrencyBucket",
    ] {
        assert!(details.contains(shown), "{shown} not in the scan's details");
    }
    assert!(
        details.contains("0:") && details.contains("% 1:"),
        "no bucket string in the scan's details"
    );
    // each qprof metric's name says, on hover, what it measures (the metric catalog)
    assert!(
        details.contains("selfCpuNanos: CPU time of the operator"),
        "no description of selfCpuNanos in the scan's details"
    );
    // a join's phases, and a scan taking in its dynamic filter, naming it
    let node_with = |name: &str, metric: &str| -> i64 {
        graph["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|n| {
                n["nodeName"] == name
                    && n["metrics"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .any(|m| m["name"] == metric)
            })
            .unwrap_or_else(|| panic!("no {name} with {metric}"))["nodeId"]
            .as_i64()
            .unwrap()
    };
    let join = details_of(node_with("HashJoinExec", "time of hash build"));
    for shown in [
        "time of hash build",
        "time of hash probe",
        "number of hash build input rows",
        "number of hash probe input rows",
        "hash build peak memory bytes",
        "number of dynamic filters produced",
    ] {
        assert!(join.contains(shown), "{shown} not in the join's details");
    }
    let probe_scan = details_of(node_with(
        "DataSourceExec",
        "number of dynamic filters accepted",
    ));
    for shown in ["dynamicFilterProducers", "HashJoinExec #"] {
        assert!(
            probe_scan.contains(shown),
            "{shown} not in the probe scan's details"
        );
    }
    let stages: Value =
        serde_json::from_str(&shc_ok(&server, &["--json", "-a", &app, "stages"])).unwrap();
    let stage = stages[0]["stageId"].as_i64().unwrap();
    let pages = [
        ("apps", "#/".to_string(), "tr.app-row"),
        ("app", format!("#/app/{app}"), "tr.sql-row"),
        ("query", format!("#/app/{app}/sql/0"), "plan-dag"),
        (
            "stage",
            format!("#/app/{app}/stage/{stage}/0"),
            "id=\"quantiles\"",
        ),
        (
            "executors",
            format!("#/app/{app}/executors"),
            "tr.executor-row",
        ),
    ];
    for (page, hash, marker) in pages {
        let url = format!("{}/{hash}", server.url);
        let dom = chromium(&["--dump-dom"], &url);
        let html = String::from_utf8_lossy(&dom.stdout);
        assert!(
            html.contains("data-ready=\"1\""),
            "{page}: never finished rendering"
        );
        assert!(
            html.contains(&format!("data-page=\"{page}\"")),
            "{page}: wrong page"
        );
        assert!(
            !html.contains("id=\"error\""),
            "{page}: shows an error:\n{html}"
        );
        let marker_found = match marker.split_once('.') {
            Some((tag, class)) => html.contains(&format!("<{tag} class=\"{class}")),
            None => html.contains(marker),
        };
        assert!(marker_found, "{page}: no {marker}");
        if page == "query" {
            // one box per plan node, and the operators dominating self time stand out
            let boxes = html.matches("class=\"node").count();
            assert!(boxes >= node_count, "{boxes} boxes for {node_count} nodes");
            assert!(
                html.contains("class=\"node hot") || html.contains(" hot\""),
                "no hot operator"
            );
        }
        if page == "query" {
            // the executor's memory while the query ran, with its stages' starts
            assert!(
                html.contains("id=\"memory-chart\"")
                    && html.contains("memory-line memory-RSS")
                    && html.contains("class=\"stage-mark\""),
                "query: no memory chart"
            );
        }
        if page == "stage" {
            // the stage's executors with their memory peaks, by the Rust names
            assert!(
                html.contains("id=\"stage-executors\"")
                    && html.contains("stage-executor-row")
                    && html.contains("Peak heap"),
                "stage: no executors with their peaks"
            );
            assert!(
                html.contains("id=\"executor-quantiles\"")
                    && html.contains("heap (allocator in use)"),
                "stage: no executor-metric quantiles"
            );
        }
        if page == "executors" {
            // a Rust executor's regions under their own names, with Spark's slots beside
            for shown in [
                "Peak heap",
                "Peak execution",
                "heap (allocator in use)",
                "RSS",
            ] {
                assert!(html.contains(shown), "executors: no {shown}");
            }
            assert!(!html.contains("Peak JVM heap"), "executors: a JVM label");
        }
        let shot = dir.join(format!("{page}.png"));
        let out = chromium(&[&format!("--screenshot={}", shot.display())], &url);
        assert!(
            shot.exists(),
            "{page}: no screenshot: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let (w, h, drawn, colours) = screenshot_stats(&shot);
        assert_eq!((w, h), (1280, 900), "{page}");
        assert!(
            drawn > 0.02 && colours > 8,
            "{page}: the screenshot is nearly blank ({drawn:.3} drawn, {colours} colours)"
        );
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// GETs `path` from `server` as JSON.
fn json(server: &Server, path: &str) -> Value {
    let (status, body) = common::http_get(server.port(), path).expect("the server answers");
    assert_eq!(status, 200, "{path}: {}", String::from_utf8_lossy(&body));
    serde_json::from_slice(&body).unwrap()
}

#[test]
fn the_query_page_draws_its_tasks_and_flame_graph_and_two_runs_compare() {
    let dir = temp_dir("ui-insights");
    // two runs of TPC-H query 3: two applications in one log directory
    let events = tpch_event_log(&dir, Some("3"));
    tpch_event_log(&dir, Some("3"));
    let server = Server::start(&events);
    let apps = json(&server, "/api/v1/applications");
    let ids: Vec<&str> = apps
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids.len(), 2, "{apps}");
    let (first, second) = (ids[1], ids[0]);
    let profile = json(
        &server,
        &format!("/qprof/v1/applications/{second}/sql/0/profile"),
    );
    let tasks: usize = profile["query"]["stages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["tasks"].as_array().unwrap().len())
        .sum();
    let operators = {
        fn count(n: &Value) -> usize {
            1 + n["children"]
                .as_array()
                .map_or(0, |c| c.iter().map(count).sum())
        }
        count(&profile["query"]["plan"])
    };

    // the query page: one bar per task on the timeline, the flame graph, a compare link
    let dom = chromium(
        &["--dump-dom"],
        &format!("{}/#/app/{second}/sql/0", server.url),
    );
    let html = String::from_utf8_lossy(&dom.stdout);
    assert!(html.contains("data-ready=\"1\""), "never rendered");
    assert!(
        html.contains("id=\"task-timeline\""),
        "no timeline:\n{html}"
    );
    assert_eq!(
        html.matches("class=\"task-bar").count(),
        tasks,
        "one bar per task"
    );
    // the critical path's tasks stand out
    let critical = profile["query"]["criticalPath"]
        .as_array()
        .expect("the profile has its critical path")
        .len();
    assert!(critical >= 1);
    assert_eq!(
        html.matches("class=\"task-bar critical\"").count(),
        critical,
        "one highlighted bar per step of the critical path"
    );
    let timeline = html
        .split("id=\"task-timeline\"")
        .nth(1)
        .unwrap()
        .split("</svg>")
        .next()
        .unwrap();
    assert!(
        !timeline.contains("NaN") && !timeline.contains("over –"),
        "a bar or the span is not a number:\n{timeline}"
    );
    let flame = format!("qprof/v1/applications/{second}/sql/0/flamegraph.svg");
    assert!(
        html.contains("id=\"flame-graph\"") && html.contains(&format!("data=\"{flame}\"")),
        "no flame graph on the query page"
    );
    assert!(html.contains("id=\"compare-link\""));
    // the session's pool: unbounded here, with the most it held
    assert!(
        html.contains("Memory pool") && html.contains("peak (no limit)"),
        "no pool"
    );
    // its planning: the text profile's line, a row per phase, the slowest rules
    let planning = &profile["query"]["planning"];
    let summary = planning["summary"]
        .as_str()
        .expect("the profile has its planning");
    assert!(
        html.contains(&format!("id=\"planning-summary\">{summary}</p>")),
        "no planning line {summary:?}"
    );
    assert_eq!(
        html.matches("class=\"planning-phase\"").count(),
        planning["phases"].as_array().unwrap().len()
    );
    assert!(html.contains("class=\"planning-rule\""), "no rule rows");

    // the flame graph itself, drawn by Chromium: a frame per operator that used CPU
    let svg_url = format!("{}/{flame}", server.url);
    let dom = chromium(&["--dump-dom"], &svg_url);
    let svg = String::from_utf8_lossy(&dom.stdout);
    assert!(svg.contains("<svg"), "not an SVG document:\n{svg}");
    for frame in ["query ", "stage ", "HashJoinExec #", "DataSourceExec #"] {
        assert!(svg.contains(frame), "no {frame} frame in the flame graph");
    }
    let shot = dir.join("flame.png");
    chromium(&[&format!("--screenshot={}", shot.display())], &svg_url);
    let (_, _, drawn, colours) = screenshot_stats(&shot);
    assert!(
        drawn > 0.05 && colours > 8,
        "the flame graph is nearly blank ({drawn:.3} drawn, {colours} colours)"
    );

    // the two runs compared: the same plan, every operator matched to its twin by id
    let dom = chromium(
        &["--dump-dom"],
        &format!("{}/#/compare?before={first}:0&after={second}:0", server.url),
    );
    let html = String::from_utf8_lossy(&dom.stdout);
    assert!(html.contains("data-page=\"compare\""), "{html}");
    assert!(
        !html.contains("id=\"error\""),
        "the compare page failed:\n{html}"
    );
    assert_eq!(
        html.matches("class=\"compare-row").count(),
        operators,
        "one row per operator"
    );
    assert_eq!(
        html.matches("data-matched=\"same\"").count(),
        operators,
        "an operator not matched by its stable id"
    );
    assert!(
        html.contains("id=\"compare-flame-graph\"")
            && html.contains("data=\"qprof/v1/compare/flamegraph.svg?before="),
        "no differential flame graph on the compare page"
    );
    // which Chromium draws: the second run's operators, each with its change
    let svg = String::from_utf8_lossy(
        &chromium(
            &["--dump-dom"],
            &format!(
                "{}/qprof/v1/compare/flamegraph.svg?before={first}:0&after={second}:0",
                server.url
            ),
        )
        .stdout,
    )
    .into_owned();
    assert!(svg.contains("<svg"), "not an SVG document:\n{svg}");
    assert!(
        svg.contains("HashJoinExec #") && svg.contains("%; "),
        "no operator frame with its change in the differential flame graph"
    );
    // the pickers show both runs, and a missing side shows the pickers alone
    assert!(html.contains("id=\"before-app\"") && html.contains("id=\"after-query\""));
    let dom = chromium(
        &["--dump-dom"],
        &format!("{}/#/compare?before={first}:0", server.url),
    );
    let html = String::from_utf8_lossy(&dom.stdout);
    assert!(html.contains("data-ready=\"1\"") && !html.contains("id=\"error\""));
    assert!(
        html.contains("class=\"compare-row"),
        "after defaults to before"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn an_operators_sampled_stacks_draw_as_its_own_flame_graph() {
    let dir = temp_dir("ui-stacks");
    let events = dir.join("events");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_qprof"))
        .args([
            "sql",
            "SELECT sum(value % 7) AS s FROM generate_series(1, 200000000)",
            "--sample-stacks",
            "250",
            "--partitions",
            "1",
            "--top",
            "0",
            "--event-log-dir",
        ])
        .arg(&events)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // the stacks travel in an event of their own, after the profile's
    let mut lines = Vec::new();
    for file in common::files_under(&events) {
        let text = std::fs::read_to_string(file).unwrap();
        lines.extend(text.lines().map(str::to_string));
    }
    let event_of = |line: &String| {
        serde_json::from_str::<serde_json::Value>(line).unwrap()["Event"]
            .as_str()
            .unwrap_or_default()
            .to_string()
    };
    let profile_at = lines
        .iter()
        .position(|l| event_of(l) == "org.qprof.eventlog.QueryProfile")
        .expect("a profile event");
    assert!(!lines[profile_at].contains("\"stackSamples\""));
    assert_eq!(
        event_of(&lines[profile_at + 1]),
        "org.qprof.eventlog.StackSamples"
    );
    let server = Server::start(&events);
    let app = first_app(&server);
    let profile = json(
        &server,
        &format!("/qprof/v1/applications/{app}/sql/0/profile"),
    );
    // the operator with the most samples
    let mut counts = std::collections::BTreeMap::new();
    for stack in profile["query"]["stackSamples"]["stacks"]
        .as_array()
        .expect("the log carries the stacks")
    {
        *counts
            .entry(stack["nodeId"].as_u64().unwrap())
            .or_insert(0u64) += stack["count"].as_u64().unwrap();
    }
    let (&hottest, &samples) = counts.iter().max_by_key(|(_, c)| **c).unwrap();
    assert!(samples >= 20, "{counts:?}");

    // its panel on the query page holds its flame graph
    let dom = chromium(
        &["--dump-dom"],
        &format!("{}/#/app/{app}/sql/0?node={hottest}", server.url),
    );
    let html = String::from_utf8_lossy(&dom.stdout);
    assert!(html.contains("data-ready=\"1\""), "never rendered");
    let svg_path = format!("qprof/v1/applications/{app}/sql/0/operators/{hottest}/flamegraph.svg");
    assert!(
        html.contains("id=\"operator-stacks\"") && html.contains(&format!("data=\"{svg_path}\"")),
        "no sampled stacks in the operator's panel"
    );
    assert!(
        html.contains(&format!("Sampled stacks: {samples} samples")),
        "{html}"
    );

    // drawn by Chromium: real frames of the engine, not blank
    let svg_url = format!("{}/{svg_path}", server.url);
    let dom = chromium(&["--dump-dom"], &svg_url);
    let svg = String::from_utf8_lossy(&dom.stdout);
    assert!(svg.contains("<svg"), "not an SVG document:\n{svg}");
    assert!(
        svg.contains("datafusion") || svg.contains("arrow"),
        "no engine frame in the operator's flame graph"
    );
    let shot = dir.join("stacks.png");
    chromium(&[&format!("--screenshot={}", shot.display())], &svg_url);
    let (_, _, drawn, colours) = screenshot_stats(&shot);
    assert!(
        drawn > 0.05 && colours > 8,
        "the operator's flame graph is nearly blank ({drawn:.3} drawn, {colours} colours)"
    );
    // the query's flame graph expands the operator into the same functions
    let query_svg = String::from_utf8_lossy(
        &chromium(
            &["--dump-dom"],
            &format!(
                "{}/qprof/v1/applications/{app}/sql/0/flamegraph.svg",
                server.url
            ),
        )
        .stdout,
    )
    .into_owned();
    assert!(
        query_svg.contains("generate_series"),
        "no sampled frame in the query's flame graph"
    );
    // an operator without samples has none: 404
    let (status, _) = common::http_get(
        server.port(),
        &format!("/qprof/v1/applications/{app}/sql/0/operators/999/flamegraph.svg"),
    )
    .unwrap();
    assert_eq!(status, 404);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn the_query_page_ranks_the_warnings_and_folds_the_minor_findings() {
    use qprof_core::profile::MemoryPoolUsage;
    // a profile with two problems of known cost and one minor finding: its pool held
    // 95 of its 100 MiB (95% of the limit), most of it in its aggregate; one of its four
    // tasks ran 500 ms, the others 10 ms (490 ms of the query's 600, 81.6%); its scan took
    // most of its CPU (info: where the time went, not a problem)
    let mut profile = qprof_core::profile::fixtures::sample();
    profile.duration_nanos = 600_000_000;
    profile.memory_pool = Some(MemoryPoolUsage {
        limit_bytes: Some(100 << 20),
        peak_bytes: 95 << 20,
    });
    // the aggregate holds most of the pool: the memory finding is about it
    let peak = profile
        .plan
        .metrics
        .iter_mut()
        .find(|m| m.name == qprof_core::profile::names::PEAK_MEMORY_BYTES)
        .unwrap();
    peak.value = 90 << 20;
    let first = profile.stages[0].tasks[0].clone();
    profile.stages[0].tasks = [10, 10, 10, 500]
        .iter()
        .enumerate()
        .map(|(i, millis)| qprof_core::profile::TaskProfile {
            task_id: i as u64,
            partition: i as u32,
            finish_epoch_millis: first.start_epoch_millis + millis,
            ..first.clone()
        })
        .collect();
    let dir = temp_dir("ui-findings");
    let events = dir.join("events");
    std::fs::create_dir_all(&events).unwrap();
    let app = qprof_eventlog::fixtures::write_profiled_app(&events, 1_700_000_000_000, &[profile]);
    let server = Server::start(&events);
    let dom = chromium(
        &["--dump-dom"],
        &format!("{}/#/app/{app}/sql/0", server.url),
    );
    let html = String::from_utf8_lossy(&dom.stdout);
    let card = html
        .split("id=\"findings\"")
        .nth(1)
        .unwrap_or_else(|| panic!("no findings on the query page:\n{html}"));
    // the warnings, ranked by their share of the query, each with its cost and fix
    let (warnings, minor) = card
        .split_once("id=\"minor-findings\"")
        .unwrap_or_else(|| panic!("the minor findings are not folded:\n{card}"));
    let ranked: Vec<(&str, &str)> = warnings
        .split("<li ")
        .skip(1)
        .map(|li| (attribute(li, "data-rank"), attribute(li, "data-rule")))
        .collect();
    assert_eq!(
        ranked,
        [("1", "memory-near-limit"), ("2", "skewed-tasks")],
        "{warnings}"
    );
    assert!(
        warnings.contains("cost 95.0 MiB of memory (95.0% of the limit)"),
        "{warnings}"
    );
    assert!(
        warnings.contains("cost 490.0 ms of wall time (81.6% of the query's)"),
        "{warnings}"
    );
    assert_eq!(warnings.matches("class=\"finding-action\"").count(), 2);
    // the minor one folded (closed) after them, unranked
    let folded = minor.split("</details>").next().unwrap();
    assert!(!folded.starts_with(" open"), "{folded}");
    assert!(folded.contains("1 minor finding (info)"), "{folded}");
    assert!(folded.contains("data-rule=\"bottleneck\""), "{folded}");
    assert!(!folded.contains("data-rank"), "{folded}");
}

/// The value of `name` in the first tag of `html`.
fn attribute<'a>(html: &'a str, name: &str) -> &'a str {
    let tag = html.split('>').next().unwrap();
    tag.split(&format!("{name}=\""))
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .unwrap_or_else(|| panic!("no {name} in <{tag}>"))
}
