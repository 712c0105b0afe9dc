//! Traces of a run as an OpenTelemetry collector receives them: a receiver built on
//! OpenTelemetry's own protocol definitions (`tests/support/otlp_receiver.py`, with the
//! opentelemetry-proto and grpcio that `scripts/install-test-deps.sh` installs), over gRPC
//! and over HTTP, checked against the run's JSON profiles.

use std::collections::{HashMap, HashSet};
use std::net::TcpListener;
use std::path::Path;
use std::process::{Command, Output};

use common::otlp::Receiver;
use qprof_core::catalog::{self, Aggregation};
use serde_json::Value;

mod common;

fn qprof(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut run = Command::new(env!("CARGO_BIN_EXE_qprof"));
    run.args(["run", "--tpch", "0.01", "--top", "0", "--no-event-log"])
        .arg("--data-dir")
        .arg(dir.join("data"))
        .args(args)
        .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
        .env_remove("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
        .env_remove("OTEL_EXPORTER_OTLP_PROTOCOL")
        .env_remove("TRACEPARENT");
    for (k, v) in env {
        run.env(k, v);
    }
    run.output().unwrap()
}

fn ok(out: &Output) {
    assert!(
        out.status.success(),
        "qprof failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn str_attr<'a>(span: &'a Value, key: &str) -> Option<&'a str> {
    span["attributes"][key].as_str()
}

fn int_attr(span: &Value, key: &str) -> Option<i64> {
    span["attributes"][key].as_i64()
}

fn time(span: &Value) -> (u64, u64) {
    (
        span["start"].as_u64().unwrap(),
        span["end"].as_u64().unwrap(),
    )
}

fn within(inner: &Value, outer: &Value) -> bool {
    let ((a, b), (c, d)) = (time(inner), time(outer));
    c <= a && a <= b && b <= d
}

/// Every node of a JSON profile's plan with its parent's id.
fn nodes(plan: &Value) -> Vec<(&Value, Option<u64>)> {
    fn walk<'a>(n: &'a Value, parent: Option<u64>, out: &mut Vec<(&'a Value, Option<u64>)>) {
        out.push((n, parent));
        for c in n["children"].as_array().into_iter().flatten() {
            walk(c, n["id"].as_u64(), out);
        }
    }
    let mut out = Vec::new();
    walk(plan, None, &mut out);
    out
}

/// Span counts by kind: query, planning (phases and rules), stage, task, operator.
fn kinds(spans: &[&Value]) -> HashMap<&'static str, usize> {
    let mut counts = HashMap::new();
    for span in spans {
        let name = span["name"].as_str().unwrap();
        let kind = if name.starts_with("query ") {
            "query"
        } else if name == "planning" || name.starts_with("planning.") {
            "planning"
        } else if int_attr(span, "qprof.rule.calls").is_some() {
            "rule"
        } else if name.starts_with("stage ") {
            "stage"
        } else if name.starts_with("task ") {
            "task"
        } else if int_attr(span, "qprof.operator.id").is_some() {
            "operator"
        } else {
            panic!("a span of no kind: {span}")
        };
        *counts.entry(kind).or_default() += 1;
    }
    counts
}

/// Checks one query's trace against its JSON profile.
fn check_trace(query: &Value, spans: &[&Value]) {
    let id = query["id"].as_i64().unwrap();
    let by_id: HashMap<&str, &Value> = spans
        .iter()
        .map(|s| (s["spanId"].as_str().unwrap(), *s))
        .collect();
    let roots: Vec<&&Value> = spans
        .iter()
        .filter(|s| !by_id.contains_key(s["parentSpanId"].as_str().unwrap()))
        .collect();
    assert_eq!(roots.len(), 1, "query {id}: one root");
    let root = roots[0];
    assert_eq!(root["name"], format!("query {id}"));
    assert_eq!(str_attr(root, "db.query.text"), query["sql"].as_str());
    assert_eq!(
        int_attr(root, "db.response.returned_rows"),
        query["rows"].as_i64()
    );
    assert_eq!(str_attr(root, "db.system.name"), Some("datafusion"));
    // every span lies within its parent, but an operator's may outlast its parent
    // operator's: an input stream is dropped after the output it fed ended (a join whose
    // build side was empty ends without reading its probe side)
    for span in spans {
        if let Some(parent) = by_id.get(span["parentSpanId"].as_str().unwrap()) {
            let both_operators = int_attr(span, "qprof.operator.id").is_some()
                && int_attr(parent, "qprof.operator.id").is_some();
            if both_operators {
                assert!(
                    time(parent).0 <= time(span).0,
                    "query {id}: {span} before {parent}"
                );
            } else {
                assert!(within(span, parent), "query {id}: {span} outside {parent}");
            }
        }
    }

    // planning: its phases and rules within the query; the optimizer's rules' time fits in
    // the optimizer phase
    let named = |name: &str| spans.iter().find(|s| s["name"] == name).copied();
    let planning = named("planning").expect("a planning span");
    assert_eq!(planning["parentSpanId"], root["spanId"]);
    assert_eq!(
        int_attr(planning, "qprof.planning.wallNanos"),
        query["planning"]["wallNanos"].as_i64()
    );
    let optimizer = named("planning.optimizer").expect("an optimizer span");
    let rules: Vec<&&Value> = spans
        .iter()
        .filter(|s| s["parentSpanId"] == optimizer["spanId"])
        .collect();
    assert!(!rules.is_empty(), "query {id}: optimizer rules");
    let rules_wall: i64 = rules
        .iter()
        .map(|r| int_attr(r, "qprof.rule.wallNanos").unwrap())
        .sum();
    assert!(rules_wall <= int_attr(optimizer, "qprof.planning.wallNanos").unwrap());
    let planning_rules = query["planning"]["rules"].as_array().unwrap();
    assert_eq!(
        spans
            .iter()
            .filter(|s| int_attr(s, "qprof.rule.calls").is_some())
            .count(),
        planning_rules.len()
    );

    // operators: a span per task that ran each, the child of its parent operator's span in
    // the same task, else of its task's span; carrying that task's metric values
    let operator_spans: Vec<&&Value> = spans
        .iter()
        .filter(|s| int_attr(s, "qprof.operator.id").is_some())
        .collect();
    let span_of = |node: u64, task: i64| {
        operator_spans.iter().find(|s| {
            int_attr(s, "qprof.operator.id") == Some(node as i64)
                && int_attr(s, "qprof.task.id") == Some(task)
        })
    };
    let mut checked = 0;
    for (node, parent) in nodes(&query["plan"]) {
        let node_id = node["id"].as_u64().unwrap();
        let mine: Vec<&&&Value> = operator_spans
            .iter()
            .filter(|s| int_attr(s, "qprof.operator.id") == Some(node_id as i64))
            .collect();
        let task_spans = node["taskSpans"].as_array().map_or(0, Vec::len);
        assert_eq!(
            mine.len(),
            task_spans,
            "query {id} #{node_id}: a span per task"
        );
        for span in &mine {
            assert_eq!(span["name"], node["name"]);
            let task = int_attr(span, "qprof.task.id").unwrap();
            let parent_span = by_id[span["parentSpanId"].as_str().unwrap()];
            match parent.and_then(|p| span_of(p, task)) {
                Some(expected) => assert_eq!(
                    span["parentSpanId"], expected["spanId"],
                    "query {id} #{node_id}: parent operator"
                ),
                None => {
                    assert!(parent_span["name"].as_str().unwrap().starts_with("task "));
                    assert_eq!(int_attr(parent_span, "qprof.task.id"), Some(task));
                }
            }
            for metric in ["qprof.outputRows", "qprof.wallNanos", "qprof.cpuNanos"] {
                assert!(
                    int_attr(span, metric).is_some(),
                    "query {id} #{node_id}: no {metric}"
                );
            }
        }
        if mine.is_empty() {
            continue;
        }
        // each summed metric of the catalog whose values are all its tasks': the spans' sum
        // and largest value are the profile's
        for (name, metric) in node["metrics"].as_object().unwrap() {
            let summed = catalog::find(name).is_some_and(|d| d.aggregation == Aggregation::Sum);
            let key = format!("qprof.{name}");
            let values: Vec<i64> = mine.iter().filter_map(|s| int_attr(s, &key)).collect();
            if !summed || values.is_empty() || metric["tasks"].as_u64() != Some(values.len() as u64)
            {
                continue;
            }
            checked += 1;
            assert_eq!(
                values.iter().sum::<i64>(),
                metric["value"].as_i64().unwrap(),
                "query {id} #{node_id} {name}"
            );
            assert_eq!(
                values.iter().max().copied(),
                metric["max"].as_i64(),
                "query {id} #{node_id} {name}: max"
            );
        }
    }
    assert!(checked > 0, "query {id}: no metric checked");
}

#[test]
fn each_query_is_one_trace_from_planning_rules_to_operators_over_grpc() {
    let dir = tempfile::tempdir().unwrap();
    let receiver = Receiver::start("grpc", dir.path());
    let profiles = dir.path().join("profiles.json");
    let out = qprof(
        dir.path(),
        &[
            "--otlp-endpoint",
            &receiver.url(),
            "--otlp-protocol",
            "grpc",
            "--profile-out",
            profiles.to_str().unwrap(),
        ],
        &[],
    );
    ok(&out);
    assert!(
        !String::from_utf8_lossy(&out.stderr).contains("warning"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let document: Value =
        serde_json::from_str(&std::fs::read_to_string(&profiles).unwrap()).unwrap();
    let queries = document["queries"].as_array().unwrap();
    assert_eq!(queries.len(), 22);
    let spans = receiver.spans();
    // the run exported before it ended: everything is there
    let mut traces: HashMap<&str, Vec<&Value>> = HashMap::new();
    for span in &spans {
        traces
            .entry(span["traceId"].as_str().unwrap())
            .or_default()
            .push(span);
    }
    assert_eq!(traces.len(), 22, "one trace per query");
    let resource = &spans[0]["resource"];
    assert_eq!(resource["service.name"], "qprof");
    for query in queries {
        let id = query["id"].as_i64().unwrap();
        let (_, trace) = traces
            .iter()
            .find(|(_, spans)| spans.iter().any(|s| s["name"] == format!("query {id}")))
            .unwrap_or_else(|| panic!("no trace of query {id}"));
        check_trace(query, trace);
    }
    // one trace as the receiver saw it
    let q5 = traces
        .values()
        .find(|t| t.iter().any(|s| s["name"] == "query 5"))
        .unwrap();
    let counts = kinds(q5);
    eprintln!("query 5's trace: {} spans, {counts:?}", q5.len());
    assert_eq!(counts["query"], 1);
    assert!(counts["operator"] > counts["task"] && counts["task"] >= counts["stage"]);
}

#[test]
fn over_http_a_given_traceparent_is_each_querys_parent() {
    let dir = tempfile::tempdir().unwrap();
    let receiver = Receiver::start("http", dir.path());
    let parent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    let out = qprof(
        dir.path(),
        &["--queries", "3,6", "--otlp-endpoint", &receiver.url()],
        &[("TRACEPARENT", parent), ("OTEL_SERVICE_NAME", "checkout")],
    );
    ok(&out);
    let spans = receiver.spans();
    assert!(
        spans
            .iter()
            .all(|s| s["traceId"] == "4bf92f3577b34da6a3ce929d0e0e4736")
    );
    let queries: Vec<&Value> = spans
        .iter()
        .filter(|s| s["name"].as_str().unwrap().starts_with("query "))
        .collect();
    assert_eq!(queries.len(), 2);
    for query in queries {
        assert_eq!(query["parentSpanId"], "00f067aa0ba902b7");
    }
    assert_eq!(spans[0]["resource"]["service.name"], "checkout");
    let ids: HashSet<&str> = spans
        .iter()
        .map(|s| s["spanId"].as_str().unwrap())
        .collect();
    assert_eq!(ids.len(), spans.len(), "span ids are unique");
}

#[test]
fn a_collector_that_is_down_costs_one_warning_and_no_query() {
    let dir = tempfile::tempdir().unwrap();
    // a port nobody listens on
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let out = qprof(
        dir.path(),
        &[
            "--queries",
            "1,6",
            "--otlp-endpoint",
            &format!("http://127.0.0.1:{port}"),
            "--otlp-protocol",
            "grpc",
        ],
        &[],
    );
    ok(&out);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("2 queries"), "{stdout}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    let warnings: Vec<&str> = stderr.lines().filter(|l| l.contains("warning")).collect();
    assert_eq!(warnings.len(), 1, "{stderr}");
    assert!(warnings[0].contains("OpenTelemetry export"), "{stderr}");
}

#[test]
fn a_malformed_traceparent_or_endpoint_is_one_line_and_a_failure() {
    let dir = tempfile::tempdir().unwrap();
    for (args, env, expected) in [
        (
            vec!["--otlp-endpoint", "http://127.0.0.1:4318"],
            vec![("TRACEPARENT", "00-abc-def-01")],
            "TRACEPARENT",
        ),
        (
            vec!["--otlp-endpoint", "localhost:4317"],
            vec![],
            "not an http:// or https:// address",
        ),
        (
            vec![
                "--otlp-endpoint",
                "http://127.0.0.1:4318",
                "--otlp-protocol",
                "http/json",
            ],
            vec![],
            "http/json",
        ),
    ] {
        let out = qprof(dir.path(), &args, &env);
        assert!(!out.status.success(), "{args:?} {env:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
        assert!(stderr.contains(expected), "{stderr}");
    }
}
