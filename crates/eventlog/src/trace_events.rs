//! A run as a Chrome trace (the trace-event JSON that Perfetto and chrome://tracing open):
//! one process per query, with a track for the query's span and one track per task (stage
//! and partition), so that spans on a track never overlap.

use serde_json::{Value, json};

use qprof_core::format;

use crate::profile_json::QueryJson;

/// Track of a query's own span.
const QUERY_TRACK: u64 = 0;

/// The track of stage `stage`'s task for `partition`.
fn task_track(stage: u32, partition: u32) -> u64 {
    1 + u64::from(stage) * 100_000 + u64::from(partition)
}

/// Microseconds since the epoch of `millis`.
fn micros(millis: u64) -> u64 {
    millis.saturating_mul(1000)
}

/// A complete event (`ph: X`).
fn span(name: String, pid: usize, tid: u64, start_us: u64, dur_us: u64, args: Value) -> Value {
    json!({"name": name, "cat": "qprof", "ph": "X", "pid": pid, "tid": tid, "ts": start_us,
           "dur": dur_us, "args": args})
}

/// A metadata event naming a process or thread.
fn name(kind: &str, pid: usize, tid: u64, label: String) -> Value {
    json!({"name": kind, "ph": "M", "pid": pid, "tid": tid, "args": {"name": label}})
}

/// The trace of the profiles `queries` (as `--profile-out` writes them, whether a run was
/// local or on a cluster): `{"traceEvents": [..], "displayTimeUnit": "ms"}`.
pub fn chrome_trace<'a>(queries: impl IntoIterator<Item = &'a QueryJson>) -> Value {
    let mut events = Vec::new();
    for q in queries {
        let pid = q.id;
        let start = micros(q.start_epoch_millis);
        let dur = q.duration_nanos / 1000;
        events.push(name("process_name", pid, 0, format!("query {}", q.id)));
        events.push(name("thread_name", pid, QUERY_TRACK, "query".to_string()));
        events.push(span(
            format!("query {}", q.id),
            pid,
            QUERY_TRACK,
            start,
            dur,
            json!({"rows": q.rows, "sql": q.sql, "duration": format::human_nanos(q.duration_nanos)}),
        ));
        for stage in &q.stages {
            for task in &stage.tasks {
                if task.finish_epoch_millis < task.start_epoch_millis {
                    continue;
                }
                let tid = task_track(stage.id, task.partition);
                events.push(name(
                    "thread_name",
                    pid,
                    tid,
                    format!("stage {} task {}", stage.id, task.partition),
                ));
                let mut args = json!({"taskId": task.task_id, "partition": task.partition});
                for (name, m) in &task.metrics.0 {
                    args[name.as_str()] = json!(m.value);
                }
                if let Some(error) = &task.error {
                    args["error"] = json!(error);
                }
                events.push(span(
                    format!("stage {} task {}", stage.id, task.partition),
                    pid,
                    tid,
                    micros(task.start_epoch_millis),
                    micros(
                        task.finish_epoch_millis
                            .saturating_sub(task.start_epoch_millis),
                    )
                    .max(1),
                    args,
                ));
            }
        }
    }
    json!({"traceEvents": events, "displayTimeUnit": "ms"})
}

#[cfg(test)]
mod tests {
    use super::*;
    use qprof_core::profile::fixtures::sample;

    #[test]
    fn a_query_becomes_a_process_with_its_span_and_one_track_per_task() {
        let trace = chrome_trace([&QueryJson::from(&sample())]);
        let events = trace["traceEvents"].as_array().unwrap();
        let spans: Vec<&Value> = events.iter().filter(|e| e["ph"] == "X").collect();
        assert_eq!(spans.len(), 2, "{trace}");
        assert_eq!(spans[0]["name"], "query 6");
        assert_eq!(spans[0]["ts"], 1_795_333_320_377_000_u64);
        assert_eq!(spans[0]["dur"], 42_500);
        assert_eq!(spans[1]["name"], "stage 0 task 0");
        assert_eq!(spans[1]["tid"], 1);
        assert_eq!(spans[1]["dur"], 40_000);
        assert_eq!(spans[1]["args"]["cpuNanos"], 33_000_000);
        let names: Vec<&Value> = events.iter().filter(|e| e["ph"] == "M").collect();
        assert!(names.iter().any(|e| e["args"]["name"] == "query 6"));
    }
}
