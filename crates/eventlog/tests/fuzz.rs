//! A bounded fuzz of the replay and of every answer rendered from it: real events (Spark
//! 4.3's and qprof's own, profiles and sampled stacks included) mutated the way a crafted
//! log would be (numbers at their extremes, strings long or odd, fields gone, types
//! changed, lines cut or repeated), replayed, then every REST answer, profile, flame graph
//! and table value drawn from the state. The process runs with its data segment limited,
//! so an allocation sized by what a log states (not by what it holds) ends the test; a
//! panic fails it.

use proptest::prelude::*;
use qprof_core::profile::fixtures::sample;
use qprof_eventlog::fixtures::{ORACLE_APP, oracle_log_dir, write_profiled_app};
use qprof_eventlog::rest::{self, StageOptions};
use qprof_eventlog::{AppState, Replay, discover};
use serde_json::Value;

/// The most memory this test may map: far more than a replay of its logs needs, far less
/// than what one hostile count would allocate.
const MEMORY_LIMIT: u64 = 6 << 30;

fn limit_memory() {
    let limit = libc::rlimit {
        rlim_cur: MEMORY_LIMIT,
        rlim_max: libc::RLIM_INFINITY,
    };
    // SAFETY: setrlimit reads the struct it is given and nothing else.
    let rc = unsafe { libc::setrlimit(libc::RLIMIT_DATA, &limit) };
    assert_eq!(rc, 0, "{}", std::io::Error::last_os_error());
}

/// The lines of the seed logs: the Spark fixture's and a qprof log of a sample profile.
fn seed_logs() -> Vec<Vec<String>> {
    let spark =
        std::fs::read_to_string(oracle_log_dir().join(format!("events_1_{ORACLE_APP}"))).unwrap();
    let dir = std::env::temp_dir().join(format!("qprof-fuzz-seed-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    write_profiled_app(&dir, 1_700_000_000_000, &[sample()]);
    let source = discover(&dir).unwrap().pop().unwrap();
    let mut qprof = String::new();
    for file in &source.files {
        qprof.push_str(&std::fs::read_to_string(&file.path).unwrap());
    }
    let _ = std::fs::remove_dir_all(&dir);
    [spark, qprof]
        .iter()
        .map(|text| text.lines().map(str::to_string).collect())
        .collect()
}

/// What a mutation puts in place of a value.
#[derive(Debug, Clone)]
enum Replacement {
    Value(Value),
    /// A string of this many repeats of a character.
    Long(usize),
    /// The field removed.
    Removed,
}

fn replacement() -> impl Strategy<Value = Replacement> {
    let numbers = prop_oneof![
        Just(Value::from(i64::MAX)),
        Just(Value::from(i64::MIN)),
        Just(Value::from(u64::MAX)),
        Just(Value::from(-1)),
        Just(Value::from(0)),
        Just(Value::from(4_000_000_000_000_i64)),
        Just(Value::from((1_i64 << 53) + 1)),
        Just(Value::from(1e308)),
        Just(Value::from(-1e308)),
        Just(Value::from(0.5)),
        any::<i64>().prop_map(Value::from),
        any::<i32>().prop_map(Value::from),
    ];
    let strings = prop_oneof![
        Just(Value::from("")),
        Just(Value::from("\"}\n{\"Event\":")),
        Just(Value::from("NaN")),
        Just(Value::from("-1")),
        Just(Value::from("9223372036854775808")),
        Just(Value::from("\u{0}\u{7f}\u{feff}é漢")),
        "[ -~]{0,12}".prop_map(Value::from),
    ];
    let shapes = prop_oneof![
        Just(Value::Null),
        Just(Value::Bool(true)),
        Just(serde_json::json!([])),
        Just(serde_json::json!({})),
        Just(serde_json::json!([[[[1]]]])),
    ];
    prop_oneof![
        4 => numbers.prop_map(Replacement::Value),
        2 => strings.prop_map(Replacement::Value),
        1 => shapes.prop_map(Replacement::Value),
        1 => (1usize..200_000).prop_map(Replacement::Long),
        2 => Just(Replacement::Removed),
    ]
}

/// One change to a log.
#[derive(Debug, Clone)]
enum Mutation {
    /// The `at`-th value (pre-order) of line `line` replaced.
    Replace {
        line: usize,
        at: usize,
        with: Replacement,
    },
    /// Line `line` repeated `times` times.
    Repeat { line: usize, times: usize },
    /// Line `line` cut after `at` bytes.
    Cut { line: usize, at: usize },
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        8 => (any::<usize>(), any::<usize>(), replacement())
            .prop_map(|(line, at, with)| Mutation::Replace { line, at, with }),
        1 => (any::<usize>(), 1usize..50).prop_map(|(line, times)| Mutation::Repeat { line, times }),
        1 => (any::<usize>(), any::<usize>()).prop_map(|(line, at)| Mutation::Cut { line, at }),
    ]
}

/// The `at`-th value of `value` in pre-order (modulo their number), as a mutable slot
/// with its parent's key, replaced by `with`.
fn replace_nth(value: &mut Value, at: usize, with: &Replacement) {
    fn count(v: &Value) -> usize {
        1 + match v {
            Value::Array(a) => a.iter().map(count).sum(),
            Value::Object(o) => o.values().map(count).sum(),
            _ => 0,
        }
    }
    fn visit(v: &mut Value, target: &mut usize, with: &Replacement) -> bool {
        let children: Vec<String> = match v {
            Value::Object(o) => o.keys().cloned().collect(),
            _ => Vec::new(),
        };
        if let Value::Object(o) = v {
            for key in children {
                if *target == 0 {
                    match with {
                        Replacement::Removed => {
                            o.remove(&key);
                        }
                        Replacement::Long(n) => {
                            o.insert(key, Value::from("x".repeat(*n)));
                        }
                        Replacement::Value(x) => {
                            o.insert(key, x.clone());
                        }
                    }
                    return true;
                }
                *target -= 1;
                if visit(o.get_mut(&key).unwrap(), target, with) {
                    return true;
                }
            }
        } else if let Value::Array(a) = v {
            for i in 0..a.len() {
                if *target == 0 {
                    match with {
                        Replacement::Removed => {
                            a.remove(i);
                        }
                        Replacement::Long(n) => a[i] = Value::from("x".repeat(*n)),
                        Replacement::Value(x) => a[i] = x.clone(),
                    }
                    return true;
                }
                *target -= 1;
                if visit(&mut a[i], target, with) {
                    return true;
                }
            }
        }
        false
    }
    let n = count(value) - 1;
    if n == 0 {
        return;
    }
    let mut target = at % n;
    visit(value, &mut target, with);
}

fn apply(lines: &mut Vec<String>, m: &Mutation) {
    if lines.is_empty() {
        return;
    }
    match m {
        Mutation::Replace { line, at, with } => {
            let i = line % lines.len();
            if let Ok(mut event) = serde_json::from_str::<Value>(&lines[i]) {
                replace_nth(&mut event, *at, with);
                lines[i] = event.to_string();
            }
        }
        Mutation::Repeat { line, times } => {
            let i = line % lines.len();
            let copy = lines[i].clone();
            for _ in 0..*times {
                lines.insert(i, copy.clone());
            }
        }
        Mutation::Cut { line, at } => {
            let i = line % lines.len();
            let at = at % (lines[i].len() + 1);
            let cut = String::from_utf8_lossy(&lines[i].as_bytes()[..at]).into_owned();
            lines[i] = cut;
        }
    }
}

/// Every answer drawn from `state`; none may panic (an error is an answer).
fn answer_everything(state: &AppState) {
    let opts = StageOptions {
        details: true,
        with_summaries: true,
        quantiles: vec![0.0, 0.25, 0.5, 0.75, 1.0],
        task_statuses: Vec::new(),
    };
    let _ = rest::jobs(state, &[]);
    for id in state.jobs.keys() {
        let _ = rest::job(state, *id);
    }
    let _ = rest::stages(state, &[], &opts);
    for (id, attempt) in state.stages.keys() {
        let _ = rest::stage(state, *id, &opts);
        let _ = rest::stage_attempt(state, *id, *attempt, &opts);
        let _ = rest::task_summary(state, *id, *attempt, &[0.05, 0.5, 0.95]);
        for sort in [None, Some("ID"), Some("-runtime"), Some("runtime")] {
            let _ = rest::task_list(state, *id, *attempt, 0, 100, sort, &[]);
        }
        let _ = rest::task_list(state, *id, *attempt, usize::MAX, usize::MAX, None, &[]);
    }
    let _ = rest::executors(state, true);
    let _ = rest::executors(state, false);
    let _ = rest::environment(state);
    let _ = rest::sql_list(state, true, true, 0, 1000);
    for (id, execution) in &state.executions {
        let _ = rest::sql(state, *id, true, true);
        let _ = rest::qprof_profile(state, *id);
        let _ = rest::qprof_flame_graph(state, *id);
        for node in 0..8 {
            let _ = rest::qprof_operator_flame_graph(state, *id, node);
        }
        if let Ok(profile) = rest::logged_profile(state, *id) {
            let _ = rest::qprof_differential_flame_graph(&profile, &profile);
            let _ = qprof_eventlog::diff_queries(&profile, &profile, 10.0).to_json();
        }
        let _ = execution.metric_totals(state);
        let _ = execution.task_metric_values(state);
        let _ = execution.metric_strings(state);
    }
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 500,
        failure_persistence: None,
        .. ProptestConfig::default()
    })]

    #[test]
    fn a_mutated_log_replays_and_answers_without_a_panic_within_bounded_memory(
        seed in 0usize..2,
        mutations in proptest::collection::vec(mutation(), 1..12),
    ) {
        static LIMITED: std::sync::Once = std::sync::Once::new();
        LIMITED.call_once(limit_memory);
        static SEEDS: std::sync::OnceLock<Vec<Vec<String>>> = std::sync::OnceLock::new();
        let mut lines = SEEDS.get_or_init(seed_logs)[seed].clone();
        for m in &mutations {
            apply(&mut lines, m);
        }
        let mut state = AppState::default();
        for line in &lines {
            state.apply_line(line.as_bytes());
        }
        answer_everything(&state);
        // the same log as a file, replayed and listed as the server does
        let dir = std::env::temp_dir().join(format!(
            "qprof-fuzz-{}-{:?}",
            std::process::id(),
            std::thread::current().id()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("app-fuzz"), lines.join("\n")).unwrap();
        let source = discover(&dir).unwrap().pop().unwrap();
        let _ = qprof_eventlog::scan_info(&source);
        let replay = Replay::load(source);
        let _ = std::fs::remove_dir_all(&dir);
        if let Ok(replay) = replay {
            answer_everything(replay.state());
        }
    }
}
