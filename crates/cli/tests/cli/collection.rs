//! The profile a run collects, as `--profile-out` writes it, against a snapshot: TPC-H SF
//! 0.01 on one partition, every value that depends on timing or scheduling blanked (and
//! the process's memory samples, whose number does, cut to the first) and everything else
//! kept (the plan and its text, each metric's name, kind and display name,
//! rows and batches with Spark's rendering of them, stage and task ids, functions).
//! Collecting the profile differently must not change a byte of what is kept.

use serde_json::{Map, Value};

use super::{qprof, scratch};

/// Numbers kept outside metrics: ids and counts that do not depend on timing.
const KEPT_NUMBERS: &[&str] = &[
    "id",
    "stageId",
    "taskId",
    "partition",
    "rows",
    "tasks",
    "formatVersion",
    "stageAttempt",
    "attempt",
    "nodeId",
];

/// Parts of a profile that are the advisor's reading of the timings, or a sentence of them.
const LEFT_OUT: &[&str] = &["findings", "criticalPath", "summary"];

/// Whether a metric's values are kept: counts of rows and batches, and output bytes.
fn is_kept_metric(key: &str, metric: &Map<String, Value>) -> bool {
    let counted = ["Rows", "Vectors", "Batches"]
        .iter()
        .any(|end| key.ends_with(end));
    (metric.get("kind") == Some(&Value::from("sum")) && counted) || key == "outputBytes"
}

/// `value` with what timing and scheduling decide blanked (as `"*"`) or left out, and the
/// test's data directory `data` (as file paths show it) named `DATA`.
fn redacted(value: Value, key: &str, data: &str) -> Value {
    match value {
        Value::Object(map) if map.contains_key("kind") && map.contains_key("value") => {
            if is_kept_metric(key, &map) {
                return Value::Object(map);
            }
            Value::Object(
                map.into_iter()
                    // which task holds the max, and whether one is named, follow the values
                    .filter(|(k, _)| k != "maxTaskId")
                    .map(|(k, v)| match k.as_str() {
                        "value" | "min" | "median" | "max" | "spark" => (k, Value::from("*")),
                        _ => (k, v),
                    })
                    .collect(),
            )
        }
        Value::Object(map) => {
            // a scan's stable id hashes the paths of its files
            let reads_data = map
                .get("display")
                .and_then(Value::as_str)
                .is_some_and(|d| d.contains(data));
            Value::Object(
                map.into_iter()
                    .filter(|(k, _)| !LEFT_OUT.contains(&k.as_str()))
                    .map(|(k, v)| {
                        let v = match k.as_str() {
                            "stableId" if reads_data => Value::from("*"),
                            _ => redacted(v, &k, data),
                        };
                        (k, v)
                    })
                    .collect(),
            )
        }
        // the process's memory is sampled on a timer: how many samples a query gets
        // follows how long it ran, so the first stands for them all (its fields kept)
        Value::Array(items) if key == "memory" => Value::Array(
            items
                .into_iter()
                .take(1)
                .map(|v| redacted(v, key, data))
                .collect(),
        ),
        Value::Array(items) => {
            let mut items: Vec<Value> = items.into_iter().map(|v| redacted(v, key, data)).collect();
            // functions are listed by their cost
            if key == "functions" {
                items.sort_by_key(|f| f.to_string());
            }
            Value::Array(items)
        }
        Value::Number(_) if !KEPT_NUMBERS.contains(&key) => Value::from("*"),
        // concurrency buckets are sampled on a timer; adaptive tracking's rate is
        // calibrated on the clock
        Value::String(text) if key.ends_with("Bucket") => Value::from(blank_numbers(&text)),
        Value::String(text) if key == "mode" => Value::from(blank_numbers(&text)),
        Value::String(text) => Value::from(text.replace(data, "DATA")),
        other => other,
    }
}

/// `text` with each run of digits made one `*`.
fn blank_numbers(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if !c.is_ascii_digit() {
            out.push(c);
        } else if !out.ends_with('*') {
            out.push('*');
        }
    }
    out
}

/// `value` as indented JSON, each metric on one line.
fn digest(value: &Value, indent: usize, out: &mut String) {
    let pad = |n: usize| " ".repeat(n);
    match value {
        Value::Object(map) if map.contains_key("kind") && map.contains_key("value") => {
            out.push_str(&value.to_string());
        }
        Value::Object(map) if !map.is_empty() => {
            out.push_str("{\n");
            for (i, (k, v)) in map.iter().enumerate() {
                out.push_str(&format!("{}{}: ", pad(indent + 1), Value::from(k.as_str())));
                digest(v, indent + 1, out);
                out.push_str(if i + 1 < map.len() { ",\n" } else { "\n" });
            }
            out.push_str(&format!("{}}}", pad(indent)));
        }
        Value::Array(items) if !items.is_empty() => {
            out.push_str("[\n");
            for (i, v) in items.iter().enumerate() {
                out.push_str(&pad(indent + 1));
                digest(v, indent + 1, out);
                out.push_str(if i + 1 < items.len() { ",\n" } else { "\n" });
            }
            out.push_str(&format!("{}]", pad(indent)));
        }
        other => out.push_str(&other.to_string()),
    }
}

#[test]
fn the_collected_profile_is_unchanged_but_for_its_timings() {
    let dir = scratch("collection");
    let data = dir.join("data");
    let json = dir.join("profiles.json");
    let out = qprof(&[
        "run",
        "--tpch",
        "0.01",
        "--queries",
        "3,9",
        "--partitions",
        "1",
        "--data-dir",
        data.to_str().unwrap(),
        "--profile-out",
        json.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let document: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let mut text = String::new();
    // file paths show the directory without its leading `/`
    let shown = data.to_str().unwrap().trim_start_matches('/');
    digest(&redacted(document, "", shown), 0, &mut text);
    // the redaction keeps what collection decides
    assert!(text.contains("\"HashJoinExec\"") && text.contains("\"outputRows\""));
    insta::assert_snapshot!(text);
}
