//! `/qprof/v1/live`: what a running application tells beyond its log, its queries running
//! now and the executor's memory now. Its producer fills these types, its server serves
//! them and reads them for Prometheus, and its page reads their JSON.

use qprof_core::profile::{QueryProfile, names};
use qprof_core::progress::Progress;
use serde::{Deserialize, Serialize};

use crate::profile_json::MemoryJson;

/// A running application's state now.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LiveState {
    /// Its queries running now, as far as each got.
    pub running: Vec<RunningQuery>,
    /// The executor's memory now.
    pub memory: MemoryJson,
    /// Its traces' export to OpenTelemetry, if it exports them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace_export: Option<TraceExportJson>,
}

/// What a run's OpenTelemetry exporter has done so far.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TraceExportJson {
    /// The collector's address as configured (`None`: from the environment or default).
    pub endpoint: Option<String>,
    /// `grpc` or `http/protobuf`.
    pub protocol: String,
    /// Spans the collector accepted.
    pub exported_spans: u64,
    /// Spans waiting to be sent.
    pub queued_spans: u64,
    /// Spans dropped (a full queue, or a failed batch).
    pub dropped_spans: u64,
    /// Batches the collector did not accept or could not be reached for.
    pub failed_exports: u64,
    /// The last failure, on one line.
    pub last_error: Option<String>,
}

/// A query running now.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RunningQuery {
    /// Its id in the application.
    pub id: usize,
    /// Its SQL.
    pub sql: String,
    /// How long it has run.
    pub elapsed_millis: u64,
    /// Rows its scans produced so far.
    pub rows_scanned: i64,
    /// Bytes it read from storage so far.
    pub bytes_read: i64,
    /// Its stages so far.
    pub stages: usize,
    /// Its tasks so far, started or finished.
    pub tasks: usize,
    /// Its finished tasks.
    pub tasks_finished: usize,
    /// The fraction of its work done, 0 to 1 (below 1 while it runs).
    #[serde(default)]
    pub progress: f64,
    /// The time it has left at its recent rate, if there is one yet.
    #[serde(default)]
    pub eta_millis: Option<u64>,
    /// Each stage's fraction done.
    #[serde(default)]
    pub stage_progress: Vec<StageProgressJson>,
}

/// How far one stage of a running query got.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StageProgressJson {
    /// The stage's id in the query's live profile (provisional: see the profiler's snapshots).
    pub stage_id: u32,
    /// Its fraction done, 0 to 1.
    pub progress: f64,
}

impl RunningQuery {
    /// The query as its live profile (a snapshot) and its `progress` show it.
    pub fn of(profile: &QueryProfile, progress: &Progress) -> RunningQuery {
        let scanned = ScanProgress::of(profile);
        let tasks = || profile.stages.iter().flat_map(|s| &s.tasks);
        RunningQuery {
            id: profile.id,
            sql: profile.sql.clone(),
            elapsed_millis: profile.duration_nanos / 1_000_000,
            rows_scanned: scanned.rows,
            bytes_read: scanned.bytes,
            stages: profile.stages.len(),
            tasks: tasks().count(),
            tasks_finished: tasks().filter(|t| t.finish_epoch_millis > 0).count(),
            progress: progress.fraction,
            eta_millis: progress
                .eta
                .map(|eta| u64::try_from(eta.as_millis()).unwrap_or(u64::MAX)),
            stage_progress: progress
                .stages
                .iter()
                .map(|s| StageProgressJson {
                    stage_id: s.stage_id,
                    progress: s.fraction,
                })
                .collect(),
        }
    }
}

/// How far a (running) query's reading got.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ScanProgress {
    /// Rows its scans produced.
    pub rows: i64,
    /// Bytes it read from storage.
    pub bytes: i64,
}

impl ScanProgress {
    /// The progress `profile` shows.
    pub fn of(profile: &QueryProfile) -> ScanProgress {
        let scans = profile.plan.iter().filter(|n| n.name == "DataSourceExec");
        ScanProgress {
            rows: scans.filter_map(|n| n.value(names::OUTPUT_ROWS)).sum(),
            bytes: profile
                .plan
                .iter()
                .filter_map(|n| n.value(names::READ_BYTES))
                .sum(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_json_is_the_pages_contract() {
        let state = LiveState {
            running: vec![RunningQuery {
                id: 3,
                sql: "select 1".into(),
                elapsed_millis: 1_500,
                rows_scanned: 10,
                bytes_read: 20,
                stages: 2,
                tasks: 4,
                tasks_finished: 1,
                progress: 0.25,
                eta_millis: Some(4_500),
                stage_progress: vec![StageProgressJson {
                    stage_id: 1,
                    progress: 0.5,
                }],
            }],
            memory: MemoryJson {
                heap_bytes: 5,
                ..MemoryJson::default()
            },
            trace_export: Some(TraceExportJson {
                protocol: "grpc".into(),
                exported_spans: 7,
                ..TraceExportJson::default()
            }),
        };
        let json = serde_json::to_value(&state).unwrap();
        let query = &json["running"][0];
        for key in [
            "id",
            "sql",
            "elapsedMillis",
            "rowsScanned",
            "bytesRead",
            "stages",
            "tasks",
            "tasksFinished",
            "progress",
            "etaMillis",
            "stageProgress",
        ] {
            assert!(query.get(key).is_some(), "{key} missing: {query}");
        }
        assert_eq!(query["stageProgress"][0]["stageId"], 1);
        assert_eq!(json["memory"]["heapBytes"], 5);
        assert_eq!(json["traceExport"]["exportedSpans"], 7);
        assert_eq!(serde_json::from_value::<LiveState>(json).unwrap(), state);
    }
}
