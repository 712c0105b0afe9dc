//! Applications, their attempts and their environment: `/applications`, `/environment`.

use serde_json::{Map, Value, json};

use super::{RestError, RestResult};

use crate::spark::format_date;
use crate::state::{AppInfo, AppState};

/// What the listing knows about one application attempt besides its events.
#[derive(Debug, Clone)]
pub struct AttemptSource<'a> {
    /// Facts from the log.
    pub info: &'a AppInfo,
    /// Whether the log is complete.
    pub completed: bool,
    /// Last modification of the log, epoch ms.
    pub last_updated: i64,
    /// Where the log was read from (a `file://` URI).
    pub log_source: String,
}

/// One attempt as `ApplicationAttemptInfo`.
pub fn attempt_info(a: &AttemptSource<'_>) -> Value {
    let start = a.info.start_time.unwrap_or(-1);
    let end = if a.completed {
        a.info.end_time.unwrap_or(a.last_updated)
    } else {
        -1
    };
    let mut o = Map::new();
    if let Some(attempt) = &a.info.attempt_id {
        o.insert("attemptId".into(), json!(attempt));
    }
    o.insert("startTime".into(), json!(format_date(start)));
    o.insert("endTime".into(), json!(format_date(end)));
    o.insert("lastUpdated".into(), json!(format_date(a.last_updated)));
    o.insert(
        "duration".into(),
        json!(if a.completed {
            end.saturating_sub(start).max(0)
        } else {
            0
        }),
    );
    o.insert(
        "sparkUser".into(),
        json!(a.info.user.clone().unwrap_or_default()),
    );
    o.insert("completed".into(), json!(a.completed));
    o.insert(
        "appSparkVersion".into(),
        json!(a.info.spark_version.clone().unwrap_or_default()),
    );
    if a.completed
        && let Some(code) = a.info.exit_code
    {
        o.insert("exitCode".into(), json!(code));
    }
    o.insert("logSourceName".into(), json!(a.log_source));
    o.insert("logSourceFullPath".into(), json!(a.log_source));
    o.insert("startTimeEpoch".into(), json!(start));
    o.insert("endTimeEpoch".into(), json!(end));
    o.insert("lastUpdatedEpoch".into(), json!(a.last_updated));
    Value::Object(o)
}

/// One application as `ApplicationInfo`, attempts newest first.
pub fn application_info(id: &str, attempts: &[AttemptSource<'_>]) -> Value {
    let name = attempts
        .iter()
        .find_map(|a| a.info.name.clone())
        .unwrap_or_default();
    json!({
        "id": id,
        "name": name,
        "attempts": attempts.iter().map(attempt_info).collect::<Vec<_>>(),
    })
}

fn sorted_pairs(section: Option<&Value>) -> Value {
    let mut pairs: Vec<(String, Value)> = section
        .and_then(Value::as_object)
        .map(|m| m.iter().map(|(k, v)| (k.clone(), v.clone())).collect())
        .unwrap_or_default();
    pairs.sort_by(|a, b| a.0.cmp(&b.0));
    Value::Array(pairs.into_iter().map(|(k, v)| json!([k, v])).collect())
}

/// `/environment`.
pub fn environment(state: &AppState) -> RestResult {
    let env = state.environment.as_ref().ok_or_else(|| {
        RestError::NotFound("no environment recorded for this application".into())
    })?;
    let jvm = env.get("JVM Information");
    let jvm_field = |k: &str| jvm.and_then(|j| j.get(k)).cloned().unwrap_or(json!(""));
    let profiles: Vec<Value> = state
        .resource_profiles
        .iter()
        .map(|p| {
            let mut exec_res = Map::new();
            // Spark lists executor resources in its hash map's order: memory, offHeap, cores, others
            let requests = p.get("Executor Resource Requests").and_then(Value::as_object);
            let mut names: Vec<&String> = requests.map(|r| r.keys().collect()).unwrap_or_default();
            let rank = |n: &str| match n {
                "memory" => 0,
                "offHeap" => 1,
                "cores" => 2,
                _ => 3,
            };
            names.sort_by_key(|n| rank(n));
            for name in names {
                let r = &requests.expect("names come from requests")[name];
                exec_res.insert(
                    name.clone(),
                    json!({
                        "resourceName": r.get("Resource Name").cloned().unwrap_or(json!(name)),
                        "amount": r.get("Amount").cloned().unwrap_or(json!(0)),
                        "discoveryScript": r.get("Discovery Script").cloned().unwrap_or(json!("")),
                        "vendor": r.get("Vendor").cloned().unwrap_or(json!("")),
                    }),
                );
            }
            let task_res: Map<String, Value> = p
                .get("Task Resource Requests")
                .and_then(Value::as_object)
                .map(|m| {
                    m.iter()
                        .map(|(name, r)| {
                            (
                                name.clone(),
                                json!({
                                    "resourceName": r.get("Resource Name").cloned().unwrap_or(json!(name)),
                                    "amount": r.get("Amount").and_then(Value::as_f64).unwrap_or(0.0),
                                }),
                            )
                        })
                        .collect()
                })
                .unwrap_or_default();
            json!({
                "id": p.get("Resource Profile Id").cloned().unwrap_or(json!(0)),
                "executorResources": exec_res,
                "taskResources": task_res,
            })
        })
        .collect();
    Ok(json!({
        "runtime": {
            "javaVersion": jvm_field("Java Version"),
            "javaHome": jvm_field("Java Home"),
            "scalaVersion": jvm_field("Scala Version"),
        },
        "sparkProperties": sorted_pairs(env.get("Spark Properties")),
        "hadoopProperties": sorted_pairs(env.get("Hadoop Properties")),
        "systemProperties": sorted_pairs(env.get("System Properties")),
        "metricsProperties": sorted_pairs(env.get("Metrics Properties")),
        "classpathEntries": sorted_pairs(env.get("Classpath Entries")),
        "resourceProfiles": profiles,
    }))
}
