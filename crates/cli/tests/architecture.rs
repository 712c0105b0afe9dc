//! Enforces the layering in ARCHITECTURE.md: which crate may depend on which, and that
//! every source file says what it is in a `//!` line.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Command;

use serde_json::Value;

/// Crates (by name prefix) that each workspace crate must not reach through its normal
/// dependencies, directly or transitively.
const FORBIDDEN: &[(&str, &[&str])] = &[
    (
        "qprof-core",
        &[
            "datafusion",
            "arrow",
            "parquet",
            "tokio",
            "axum",
            "ballista",
            "qprof-",
        ],
    ),
    (
        "qprof-datafusion",
        &[
            "ballista",
            "qprof-ballista",
            "qprof-cli",
            "qprof-tpch",
            "qprof-eventlog",
            "qprof-server",
            "axum",
        ],
    ),
    ("qprof-tpch", &["qprof-", "ballista"]),
    // the only crate that follows Ballista's API; it posts events and writes no log
    (
        "qprof-ballista",
        &["qprof-cli", "qprof-tpch", "qprof-eventlog", "qprof-server"],
    ),
    (
        "qprof-eventlog",
        &[
            "datafusion",
            "arrow",
            "parquet",
            "tokio",
            "axum",
            "ballista",
            "qprof-datafusion",
            "qprof-ballista",
            "qprof-tpch",
            "qprof-server",
            "qprof-cli",
        ],
    ),
    (
        "qprof-server",
        &[
            "datafusion",
            "arrow",
            "parquet",
            "ballista",
            "qprof-datafusion",
            "qprof-ballista",
            "qprof-tpch",
            "qprof-cli",
        ],
    ),
    // SQL over the logs: DataFusion reading the server's store, never the profiler
    (
        "qprof-history",
        &[
            "ballista",
            "qprof-datafusion",
            "qprof-ballista",
            "qprof-tpch",
            "qprof-cli",
        ],
    ),
    // traces to OpenTelemetry: a listener of the bus, like the event log, engine-free
    (
        "qprof-otel",
        &[
            "datafusion",
            "arrow",
            "parquet",
            "ballista",
            "qprof-datafusion",
            "qprof-ballista",
            "qprof-eventlog",
            "qprof-tpch",
            "qprof-server",
            "qprof-cli",
        ],
    ),
    // the examples use the libraries as an embedding program would
    (
        "qprof-examples",
        &[
            "qprof-cli",
            "qprof-tpch",
            "qprof-server",
            "ballista",
            "qprof-ballista",
        ],
    ),
];

fn host_triple() -> String {
    let out = Command::new("rustc")
        .arg("-vV")
        .output()
        .expect("rustc runs");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .find_map(|l| l.strip_prefix("host: ").map(str::to_string))
        .expect("rustc -vV names the host")
}

fn metadata() -> Value {
    // only this platform's dependencies: the ones the build actually downloaded
    let out = Command::new(env!("CARGO"))
        .args([
            "metadata",
            "--format-version",
            "1",
            "--offline",
            "--filter-platform",
        ])
        .arg(host_triple())
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("cargo metadata runs");
    assert!(
        out.status.success(),
        "cargo metadata failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("cargo metadata prints JSON")
}

/// package id -> (name, normal dependency ids)
fn normal_graph(meta: &Value) -> BTreeMap<String, (String, Vec<String>)> {
    let names: BTreeMap<&str, &str> = meta["packages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| (p["id"].as_str().unwrap(), p["name"].as_str().unwrap()))
        .collect();
    meta["resolve"]["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|node| {
            let id = node["id"].as_str().unwrap().to_string();
            let deps = node["deps"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|d| {
                    d["dep_kinds"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .any(|k| k["kind"].is_null())
                })
                .map(|d| d["pkg"].as_str().unwrap().to_string())
                .collect();
            (id.clone(), (names[id.as_str()].to_string(), deps))
        })
        .collect()
}

#[test]
fn crates_respect_the_layering() {
    let meta = metadata();
    let graph = normal_graph(&meta);
    let members: Vec<String> = meta["workspace_members"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m.as_str().unwrap().to_string())
        .collect();
    let mut checked = 0;
    let mut violations = Vec::new();
    for member in &members {
        let (name, _) = &graph[member];
        let Some((_, forbidden)) = FORBIDDEN.iter().find(|(n, _)| n == name) else {
            continue;
        };
        checked += 1;
        let mut seen = BTreeSet::new();
        let mut stack = graph[member].1.clone();
        while let Some(dep) = stack.pop() {
            if !seen.insert(dep.clone()) {
                continue;
            }
            let (dep_name, deps) = &graph[&dep];
            if forbidden.iter().any(|f| dep_name.starts_with(f)) {
                violations.push(format!("{name} depends on {dep_name}"));
            }
            stack.extend(deps.iter().cloned());
        }
    }
    assert!(
        checked >= 9,
        "the layering rules matched only {checked} crates"
    );
    assert!(violations.is_empty(), "layering violations: {violations:?}");
}

#[test]
fn nothing_depends_on_the_binary_or_the_examples() {
    let meta = metadata();
    let graph = normal_graph(&meta);
    for (name, deps) in graph.values() {
        for dep in deps {
            for leaf in ["qprof-cli", "qprof-examples"] {
                assert_ne!(graph[dep].0, leaf, "{name} depends on {leaf}");
            }
        }
    }
}

#[test]
fn every_source_file_starts_with_a_doc_line() {
    fn walk(dir: &Path, bad: &mut Vec<String>, count: &mut usize) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(&path, bad, count);
            } else if path.extension().is_some_and(|e| e == "rs") {
                *count += 1;
                let text = std::fs::read_to_string(&path).unwrap();
                if !text.starts_with("//!") {
                    bad.push(path.display().to_string());
                }
            }
        }
    }
    let crates = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let (mut bad, mut count) = (Vec::new(), 0);
    for krate in std::fs::read_dir(crates).unwrap() {
        let krate = krate.unwrap().path();
        for sub in ["src", "tests", "benches"] {
            if krate.join(sub).is_dir() {
                walk(&krate.join(sub), &mut bad, &mut count);
            }
        }
    }
    let examples = crates.parent().unwrap().join("examples");
    walk(&examples, &mut bad, &mut count);
    assert!(count > 10, "found only {count} source files");
    assert!(bad.is_empty(), "files without a leading //! line: {bad:?}");
}

/// Spark's own REST fields that share a name with a metric of qprof's: the REST answers
/// spell them as Spark does.
const SPARK_REST_FIELDS: &[&str] = &[
    "outputBytes",
    "readBytes",
    "shuffleLocalBytesRead",
    "shuffleRemoteBytesRead",
];

/// The quoted words of `text` (`"word"`) that name a metric of the catalog.
fn metric_names_quoted(text: &str) -> Vec<String> {
    let mut found = Vec::new();
    for (at, _) in text.match_indices('"') {
        let rest = &text[at + 1..];
        let word: String = rest
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric())
            .collect();
        if !word.is_empty()
            && rest[word.len()..].starts_with('"')
            && qprof_core::catalog::describe(&word).is_some()
            && !SPARK_REST_FIELDS.contains(&word.as_str())
        {
            found.push(word);
        }
    }
    found
}

/// A metric is named in the catalog and read from it everywhere else: no library source
/// or page script spells a metric's name (tests aside, which check the names).
#[test]
fn no_metric_name_is_spelled_outside_the_catalog() {
    fn walk(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(&path, out);
            } else if path.extension().is_some_and(|e| e == "rs" || e == "js") {
                out.push(path);
            }
        }
    }
    let crates = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let mut files = Vec::new();
    for krate in std::fs::read_dir(crates).unwrap() {
        let krate = krate.unwrap().path();
        for sub in ["src", "ui"] {
            if krate.join(sub).is_dir() {
                walk(&krate.join(sub), &mut files);
            }
        }
    }
    let catalog = crates.join("core/src/catalog");
    let mut spelled = Vec::new();
    for path in &files {
        if path.starts_with(&catalog) || path.file_name().is_some_and(|n| n == "tests.rs") {
            continue;
        }
        let text = std::fs::read_to_string(path).unwrap();
        // a file's unit tests follow its code
        let code = text.split("#[cfg(test)]").next().unwrap_or_default();
        for name in metric_names_quoted(code) {
            let file = path.strip_prefix(crates).unwrap().display();
            spelled.push(format!("{file}: {name}"));
        }
    }
    assert!(files.len() > 100, "found only {} files", files.len());
    assert!(
        spelled.is_empty(),
        "metric names spelled outside the catalog (use the catalog's entry or \
         profile::names): {spelled:#?}"
    );
}

#[test]
fn the_name_check_sees_quoted_metric_names() {
    assert_eq!(
        metric_names_quoted(r#"m.name == "selfCpuNanos" || k == "rowGroupsKeptByStatistics""#),
        ["selfCpuNanos", "rowGroupsKeptByStatistics"]
    );
    assert!(metric_names_quoted(r#""outputBytes", "queryCpuNanos", "selfCpu""#).is_empty());
}
