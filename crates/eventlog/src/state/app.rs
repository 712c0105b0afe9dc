//! The application, its executors and their memory peaks.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{
    AppState, Applied, ExecutorPeaks, Missing, i64_field, merge_peaks, peaks_of, req_i64, str_field,
};
use crate::spark::events;

/// The application-level facts of a log.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct AppInfo {
    /// Spark version that wrote the log (`SparkListenerLogStart`).
    pub spark_version: Option<String>,
    /// Application id.
    pub id: Option<String>,
    /// Application name.
    pub name: Option<String>,
    /// Attempt id, when the application has attempts.
    pub attempt_id: Option<String>,
    /// Start time, epoch ms.
    pub start_time: Option<i64>,
    /// User who ran the application.
    pub user: Option<String>,
    /// End time, epoch ms, once the application ended.
    pub end_time: Option<i64>,
    /// Exit code given at the end.
    pub exit_code: Option<i64>,
    /// Who may view it, from its first environment update.
    pub acls: AppAcls,
}

/// Who may view an application, from the Spark properties of its first environment update
/// (as Spark's history server takes them): users and groups, `*` for everyone.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AppAcls {
    /// `spark.ui.view.acls`.
    pub view: Vec<String>,
    /// `spark.ui.view.acls.groups`.
    pub view_groups: Vec<String>,
    /// `spark.admin.acls`.
    pub admin: Vec<String>,
    /// `spark.admin.acls.groups`.
    pub admin_groups: Vec<String>,
    /// Whether an environment update was read (later ones change nothing, as in Spark).
    pub read: bool,
}

/// The most names one ACL property is read as: a longer list is cut there.
const MAX_ACL_NAMES: usize = 1024;

impl AppAcls {
    /// The ACLs of an environment update's Spark properties (an object, or the list of
    /// pairs older logs wrote).
    fn of(event: &Value) -> AppAcls {
        let properties = &event["Spark Properties"];
        let property = |key: &str| -> Vec<String> {
            let value = match properties {
                Value::Object(o) => o.get(key).and_then(Value::as_str),
                Value::Array(pairs) => pairs.iter().find_map(|p| {
                    (p.get(0).and_then(Value::as_str) == Some(key))
                        .then(|| p.get(1).and_then(Value::as_str))
                        .flatten()
                }),
                _ => None,
            };
            value
                .unwrap_or("")
                .split(',')
                .map(str::trim)
                .filter(|n| !n.is_empty())
                .take(MAX_ACL_NAMES)
                .map(str::to_string)
                .collect()
        };
        AppAcls {
            view: property("spark.ui.view.acls"),
            view_groups: property("spark.ui.view.acls.groups"),
            admin: property("spark.admin.acls"),
            admin_groups: property("spark.admin.acls.groups"),
            read: true,
        }
    }
}

impl AppInfo {
    /// Applies one of the events the listing needs; returns false for other events.
    pub fn apply(&mut self, event: &Value) -> bool {
        match event.get("Event").and_then(Value::as_str) {
            Some(events::LOG_START) => {
                self.spark_version = str_field(event, "Spark Version");
            }
            Some(events::APPLICATION_START) => {
                self.name = str_field(event, "App Name");
                self.id = str_field(event, "App ID");
                self.attempt_id = str_field(event, "App Attempt ID");
                self.start_time = i64_field(event, "Timestamp");
                self.user = str_field(event, "User");
            }
            Some(events::APPLICATION_END) => {
                self.end_time = i64_field(event, "Timestamp");
                self.exit_code = i64_field(event, "ExitCode");
            }
            Some(events::ENVIRONMENT_UPDATE) => {
                if !self.acls.read {
                    self.acls = AppAcls::of(event);
                }
            }
            _ => return false,
        }
        true
    }
}

/// An executor and its block manager.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Executor {
    /// Executor id (`driver` for the local process).
    pub id: String,
    /// Host name.
    pub host: String,
    /// Block manager port, when one registered.
    pub port: Option<i64>,
    /// Cores offered.
    pub total_cores: i64,
    /// When it was added, epoch ms.
    pub add_time: i64,
    /// When it was removed, epoch ms.
    pub remove_time: Option<i64>,
    /// Why it was removed.
    pub remove_reason: Option<String>,
    /// Log URLs, attributes and resources, as logged.
    #[serde(with = "crate::snapshot::as_json_text")]
    pub log_urls: Value,
    /// Executor attributes as logged.
    #[serde(with = "crate::snapshot::as_json_text")]
    pub attributes: Value,
    /// Executor resources as logged.
    #[serde(with = "crate::snapshot::as_json_text")]
    pub resources: Value,
    /// Resource profile id.
    pub resource_profile_id: i64,
    /// Block manager memory: total, on-heap, off-heap.
    pub max_memory: Option<(i64, i64, i64)>,
    /// Peak executor metrics over heartbeats, stage peaks and task ends.
    pub peaks: Option<ExecutorPeaks>,
}

impl AppState {
    /// The executor with this id, created on first mention.
    pub(super) fn executor_mut(&mut self, id: &str) -> &mut Executor {
        let pos = match self.executors.iter().position(|e| e.id == id) {
            Some(pos) => pos,
            None => {
                self.executors.push(Executor {
                    id: id.to_string(),
                    log_urls: Value::Object(Default::default()),
                    attributes: Value::Object(Default::default()),
                    resources: Value::Object(Default::default()),
                    ..Executor::default()
                });
                self.executors.len() - 1
            }
        };
        &mut self.executors[pos]
    }

    pub(super) fn executor_added(&mut self, e: &Value) -> Applied {
        let id = str_field(e, "Executor ID").ok_or(Missing)?;
        let time = req_i64(e, "Timestamp")?;
        let info = e.get("Executor Info").ok_or(Missing)?;
        let exec = self.executor_mut(&id);
        exec.add_time = time;
        exec.host = str_field(info, "Host").unwrap_or_default();
        exec.total_cores = i64_field(info, "Total Cores").unwrap_or(0);
        exec.resource_profile_id = i64_field(info, "Resource Profile Id").unwrap_or(0);
        for (key, slot) in [
            ("Log Urls", &mut exec.log_urls),
            ("Attributes", &mut exec.attributes),
            ("Resources", &mut exec.resources),
        ] {
            if let Some(v) = info.get(key).filter(|v| v.is_object()) {
                *slot = v.clone();
            }
        }
        Ok(())
    }

    pub(super) fn executor_removed(&mut self, e: &Value) -> Applied {
        let id = str_field(e, "Executor ID").ok_or(Missing)?;
        let time = req_i64(e, "Timestamp")?;
        let exec = self.executor_mut(&id);
        exec.remove_time = Some(time);
        exec.remove_reason = str_field(e, "Removed Reason");
        Ok(())
    }

    pub(super) fn block_manager_added(&mut self, e: &Value) -> Applied {
        let bm = e.get("Block Manager ID").ok_or(Missing)?;
        let id = str_field(bm, "Executor ID").ok_or(Missing)?;
        let max = req_i64(e, "Maximum Memory")?;
        let on = i64_field(e, "Maximum Onheap Memory").unwrap_or(max);
        let off = i64_field(e, "Maximum Offheap Memory").unwrap_or(0);
        let exec = self.executor_mut(&id);
        if exec.host.is_empty() {
            exec.host = str_field(bm, "Host").unwrap_or_default();
        }
        exec.port = i64_field(bm, "Port");
        exec.max_memory = Some((max, on, off));
        Ok(())
    }

    pub(super) fn stage_executor_metrics(&mut self, e: &Value) -> Applied {
        let exec_id = str_field(e, "Executor ID").ok_or(Missing)?;
        let stage_id = req_i64(e, "Stage ID")?;
        let attempt = i64_field(e, "Stage Attempt ID").unwrap_or(0);
        let peaks = e
            .get("Executor Metrics")
            .and_then(peaks_of)
            .ok_or(Missing)?;
        let stage = self.stage_mut(stage_id, attempt);
        let mut slot = stage.executor_peaks.get(&exec_id).map(|p| **p);
        merge_peaks(&mut slot, peaks);
        if let Some(p) = slot {
            stage.executor_peaks.insert(exec_id.clone(), Box::new(p));
        }
        merge_peaks(&mut self.executor_mut(&exec_id).peaks, peaks);
        Ok(())
    }

    pub(super) fn executor_metrics_update(&mut self, e: &Value) -> Applied {
        let exec_id = str_field(e, "Executor ID").ok_or(Missing)?;
        let updates: Vec<ExecutorPeaks> = e
            .get("Executor Metrics Updated")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|u| u.get("Executor Metrics").and_then(peaks_of))
            .collect();
        for peaks in updates {
            merge_peaks(&mut self.executor_mut(&exec_id).peaks, peaks);
        }
        Ok(())
    }
}
