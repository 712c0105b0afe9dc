//! Per-function CPU time in real plans: which call sites are found, that their vector and
//! row counts equal what their operators consumed, that the session options select what is
//! tracked and how, and that results do not change.

use std::sync::Arc;

use datafusion::arrow::array::{Float64Array, RecordBatch, StringArray};
use datafusion::arrow::datatypes::{DataType, Field, Schema};
use datafusion::arrow::util::pretty::pretty_format_batches;
use datafusion::datasource::MemTable;
use datafusion::prelude::{SessionConfig, SessionContext};
use qprof_core::profile::{FunctionProfile, ProfileNode, QueryProfile, names};
use qprof_datafusion::ProfilingSession;
use qprof_eventlog::QueryJson;

const ROWS_PER_BATCH: usize = 1_000;
const BATCHES: usize = 24;

fn table() -> MemTable {
    let schema = Arc::new(Schema::new(vec![
        Field::new("s", DataType::Utf8, false),
        Field::new("x", DataType::Float64, false),
    ]));
    let batches: Vec<RecordBatch> = (0..BATCHES)
        .map(|b| {
            let rows = (0..ROWS_PER_BATCH).map(|i| b * ROWS_PER_BATCH + i);
            let s = StringArray::from_iter_values(
                rows.clone()
                    .map(|r| format!("Row{}{}", r, "x".repeat(r % 7))),
            );
            let x = Float64Array::from_iter_values(rows.map(|r| r as f64 - 5_000.5));
            RecordBatch::try_new(Arc::clone(&schema), vec![Arc::new(s), Arc::new(x)]).unwrap()
        })
        .collect();
    // two partitions of twelve batches each
    let (a, b) = batches.split_at(BATCHES / 2);
    MemTable::try_new(schema, vec![a.to_vec(), b.to_vec()]).unwrap()
}

fn config() -> SessionConfig {
    SessionConfig::new().with_target_partitions(2)
}

fn session() -> ProfilingSession {
    let session = ProfilingSession::new(config());
    session
        .context()
        .register_table("t", Arc::new(table()))
        .unwrap();
    session
}

const QUERY: &str = "SELECT upper(lower(s)) AS u, abs(x) AS a FROM t WHERE length(s) > 10";

async fn plain_result(sql: &str) -> String {
    let ctx = SessionContext::new_with_config(config());
    ctx.register_table("t", Arc::new(table())).unwrap();
    let batches = ctx.sql(sql).await.unwrap().collect().await.unwrap();
    sorted_lines(&batches)
}

fn sorted_lines(batches: &[RecordBatch]) -> String {
    let text = pretty_format_batches(batches).unwrap().to_string();
    let mut lines: Vec<&str> = text.lines().collect();
    lines.sort_unstable();
    lines.join("\n")
}

fn functions(p: &QueryProfile) -> Vec<(&ProfileNode, &FunctionProfile)> {
    p.plan
        .iter()
        .flat_map(|n| n.functions.iter().map(move |f| (n, f)))
        .collect()
}

/// Rows and batches the operator consumed: its children's output.
fn input_of(node: &ProfileNode) -> (u64, u64) {
    node.children.iter().fold((0, 0), |(r, v), c| {
        (
            r + c.value(names::OUTPUT_ROWS).unwrap() as u64,
            v + c.value(names::OUTPUT_VECTORS).unwrap() as u64,
        )
    })
}

async fn run(session: &ProfilingSession, sql: &str) -> QueryProfile {
    let run = session.run(1, sql).await.unwrap();
    assert_eq!(
        sorted_lines(&run.batches),
        plain_result(sql).await,
        "results differ"
    );
    run.profile
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn call_sites_count_exactly_what_their_operators_consumed() {
    let session = session();
    let p = run(&session, QUERY).await;
    let found = functions(&p);
    let mut names: Vec<&str> = found.iter().map(|(_, f)| f.name.as_str()).collect();
    names.sort_unstable();
    assert_eq!(names, ["abs", "character_length", "lower", "upper"]);
    for (node, f) in &found {
        let (rows, vectors) = input_of(node);
        assert_eq!(
            (f.rows, f.vectors),
            (rows, vectors),
            "{} in #{} {}",
            f.expression,
            node.id,
            node.name
        );
        assert!(f.cpu_nanos > 0 && f.wall_nanos > 0, "{f:?}");
        assert!(f.cpu_timed_vectors <= f.vectors);
        // defaults: adaptive sampling; a sampled estimate says so
        if f.cpu_timed_vectors < f.vectors {
            assert!(f.cpu_extrapolated && f.mode != "full", "{f:?}");
        }
    }
    let filter = found
        .iter()
        .find(|(_, f)| f.name == "character_length")
        .unwrap();
    assert_eq!(filter.0.name, "FilterExec");
    assert_eq!(filter.1.rows, (BATCHES * ROWS_PER_BATCH) as u64);
    assert_eq!(filter.1.expression, "character_length(t.s)");
    // the nested call is a call site of its own: upper is timed on lower's result only
    let upper = found.iter().find(|(_, f)| f.name == "upper").unwrap();
    let lower = found.iter().find(|(_, f)| f.name == "lower").unwrap();
    assert_eq!(upper.0.id, lower.0.id);
    assert_eq!(upper.1.expression, "upper(lower(t.s))");
    assert_eq!(lower.1.expression, "lower(t.s)");
    assert!(upper.1.rows < filter.1.rows && upper.1.rows > 0);
    // in the JSON and the text
    let json = serde_json::to_value(QueryJson::from(&p)).unwrap();
    let text = p.render_text(0);
    assert!(text.contains("fn upper(lower(t.s))"), "{text}");
    let mut listed = 0;
    let mut stack = vec![&json["plan"]];
    while let Some(n) = stack.pop() {
        listed += n["functions"].as_array().unwrap().len();
        stack.extend(n["children"].as_array().unwrap());
    }
    assert_eq!(listed, 4);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn session_options_select_what_is_tracked_and_how() {
    let session = session();
    let ctx = session.context();
    ctx.sql("SET qprof.expression.track_cpu_usage = true")
        .await
        .unwrap();
    let p = run(&session, QUERY).await;
    assert_eq!(functions(&p).len(), 4);
    for (_, f) in functions(&p) {
        assert_eq!(f.mode, "full");
        assert_eq!(f.cpu_timed_vectors, f.vectors);
        assert!(!f.cpu_extrapolated && !f.wall_extrapolated, "{f:?}");
    }

    // nothing tracked: no call site is even wrapped
    ctx.sql("SET qprof.expression.track_cpu_usage = false")
        .await
        .unwrap();
    ctx.sql("SET qprof.expression.adaptive_cpu_sampling = false")
        .await
        .unwrap();
    let p = run(&session, QUERY).await;
    assert!(functions(&p).is_empty(), "{:#?}", functions(&p));

    // only the listed functions, every vector (an alias's name selects it too)
    ctx.sql("SET qprof.expression.track_cpu_usage_for_functions = 'UPPER,char_length'")
        .await
        .unwrap();
    let p = run(&session, QUERY).await;
    let mut tracked: Vec<(&str, &str)> = functions(&p)
        .iter()
        .map(|(_, f)| (f.name.as_str(), f.mode.as_str()))
        .collect();
    tracked.sort_unstable();
    assert_eq!(tracked, [("character_length", "full"), ("upper", "full")]);

    // a bad value is refused with the key named, and the session keeps its options
    let err = ctx
        .sql("SET qprof.expression.adaptive_cpu_sampling_max_overhead_pct = 0")
        .await
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("qprof.expression.adaptive_cpu_sampling_max_overhead_pct"),
        "{err}"
    );
    let p = run(&session, QUERY).await;
    assert_eq!(functions(&p).len(), 2);
}

/// Aggregate functions of the queries below.
const AGGREGATES: [&str; 6] = ["avg", "count", "covar_samp", "median", "min", "sum"];

/// Checks a call site against what its operator consumed and produced. A scalar function
/// is called once per input vector. An accumulator is given every input row, in at least
/// one call per input vector, and emits every output row (partial state or final value).
fn check_counts(node: &ProfileNode, f: &FunctionProfile) {
    let (rows, vectors) = input_of(node);
    if !AGGREGATES.contains(&f.name.as_str()) {
        assert_eq!(
            (f.rows, f.vectors),
            (rows, vectors),
            "{} in {}",
            f.expression,
            node.name
        );
        return;
    }
    assert_eq!(node.name, "AggregateExec", "{f:?}");
    let out_rows = node.value(names::OUTPUT_ROWS).unwrap() as u64;
    assert_eq!(f.rows, rows + out_rows, "{} in #{}", f.expression, node.id);
    assert!(f.vectors > vectors, "{f:?}");
    assert!(f.cpu_nanos > 0 && f.wall_nanos > 0, "{f:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sites_in_subqueries_and_aggregates_are_found() {
    let session = session();
    let sql = "SELECT substr(s, 1, 4) AS p, count(*) AS n, sum(abs(x)) AS a FROM t \
               WHERE x > (SELECT avg(abs(x)) FROM t) GROUP BY substr(s, 1, 4)";
    let p = run(&session, sql).await;
    let found = functions(&p);
    let abs_sites = found.iter().filter(|(_, f)| f.name == "abs").count();
    assert_eq!(abs_sites, 2, "{found:#?}");
    assert!(found.iter().any(|(_, f)| f.name == "substr"), "{found:#?}");
    for (node, f) in &found {
        check_counts(node, f);
    }
    // each aggregate is reported under its partial and its final aggregation apart
    for name in ["avg", "count", "sum"] {
        let nodes: Vec<&str> = found
            .iter()
            .filter(|(_, f)| f.name == name)
            .map(|(n, _)| n.name.as_str())
            .collect();
        assert_eq!(nodes, ["AggregateExec", "AggregateExec"], "{name}");
    }
    // nothing ran outside an operator
    assert!(
        !p.plan
            .info
            .iter()
            .any(|(k, _)| k == "functionsOfUnknownOperators"),
        "{:?}",
        p.plan.info
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn accumulators_of_every_kind_are_timed_and_results_do_not_change() {
    let session = session();
    // covar_samp has no groups accumulator (DataFusion adapts one accumulator per group),
    // the others have; the second query aggregates without groups. covar_samp's last bits
    // depend on the order partial states arrive in, so it is compared rounded.
    for sql in [
        "SELECT length(s) AS l, median(x) AS m, min(s) AS f, count(DISTINCT s) AS d, \
         round(covar_samp(x, x * 2), 2) AS c FROM t GROUP BY length(s)",
        "SELECT median(x) AS m, sum(x) AS s, count(DISTINCT s) AS d, \
         round(covar_samp(x, x), 2) AS c FROM t",
    ] {
        let p = run(&session, sql).await;
        let found = functions(&p);
        for name in ["median", "count", "covar_samp"] {
            assert!(found.iter().any(|(_, f)| f.name == name), "{name} in {sql}");
        }
        for (node, f) in &found {
            check_counts(node, f);
        }
    }

    // the options select aggregate functions by name, like scalar ones: the listed one is
    // timed on every vector, the others still adaptively
    session
        .context()
        .sql("SET qprof.expression.track_cpu_usage_for_functions = 'median'")
        .await
        .unwrap();
    let p = run(&session, "SELECT median(x) AS m, sum(x) AS s FROM t").await;
    let found = functions(&p);
    assert_eq!(found.len(), 4, "{found:#?}");
    for (_, f) in &found {
        assert_eq!(f.mode == "full", f.name == "median", "{f:?}");
        assert_eq!(
            f.cpu_timed_vectors == f.vectors,
            f.name == "median",
            "{f:?}"
        );
    }
}
