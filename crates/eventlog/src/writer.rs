//! Writing an application's event log in Spark 4's rolling layout.
//!
//! Each event is one JSON line written with one `write_all`; buffers are flushed at the end
//! of every query (and zstd blocks closed), so a process killed at any moment leaves a log
//! whose complete lines all replay. The `appstatus_<app>.inprogress` marker loses its
//! suffix only when the application ends.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use qprof_core::events::{AppInfo, ExecutorAdded, ExecutorRemoved};
use qprof_core::profile::QueryProfile;
use serde_json::{Map, Value, json};

use crate::EventLogError;
use crate::codec::Codec;
use crate::layout::{APPSTATUS_PREFIX, EVENTS_FILE_PREFIX, IN_PROGRESS_SUFFIX, ROLLING_DIR_PREFIX};
use crate::profile_events::{self, QueryRecord};
use crate::spark::{EXECUTOR_METRIC_NAMES, SPARK_VERSION, events};
use qprof_core::metric::saturating_i64;

/// Default size after which a new event file is started (Spark's default: 128 MiB).
pub const DEFAULT_ROLL_BYTES: u64 = 128 * 1024 * 1024;

/// The attempt id qprof gives its applications. Spark's clients address an application's
/// data through its first attempt when it has one, and some only work when it does.
pub(crate) const ATTEMPT_ID: &str = "1";

/// Where and how to write logs.
#[derive(Debug, Clone)]
pub struct LogConfig {
    /// Directory holding one sub-directory per application.
    pub dir: PathBuf,
    /// Compress event files with zstd.
    pub zstd: bool,
    /// Start a new event file once the current one holds this many (uncompressed) bytes.
    pub roll_bytes: u64,
}

impl LogConfig {
    /// Uncompressed logs in `dir`, rolled at Spark's default size.
    pub fn new(dir: impl Into<PathBuf>) -> LogConfig {
        LogConfig {
            dir: dir.into(),
            zstd: false,
            roll_bytes: DEFAULT_ROLL_BYTES,
        }
    }
}

enum Sink {
    Plain(BufWriter<File>),
    Zstd(zstd::stream::write::Encoder<'static, BufWriter<File>>),
}

impl Sink {
    fn writer(&mut self) -> &mut dyn Write {
        match self {
            Sink::Plain(w) => w,
            Sink::Zstd(w) => w,
        }
    }

    fn finish(self) -> std::io::Result<()> {
        match self {
            Sink::Plain(mut w) => w.flush(),
            Sink::Zstd(w) => w.finish()?.flush(),
        }
    }
}

/// One application's rolling event log.
pub struct AppLog {
    app_id: String,
    dir: PathBuf,
    zstd: bool,
    roll_bytes: u64,
    file_index: u32,
    file_bytes: u64,
    sink: Option<Sink>,
    ids: profile_events::IdCounters,
    start_epoch_millis: i64,
    peak_execution_memory: i64,
    host: String,
}

impl std::fmt::Debug for AppLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AppLog")
            .field("app_id", &self.app_id)
            .field("dir", &self.dir)
            .finish_non_exhaustive()
    }
}

fn io(path: &Path) -> impl Fn(std::io::Error) -> EventLogError + '_ {
    move |e| EventLogError::io(path, e)
}

impl AppLog {
    /// Creates the application's log directory (`local-<start ms>`, bumped on a clash) and
    /// writes the application-start events.
    pub fn create(config: &LogConfig, app: &AppInfo) -> Result<AppLog, EventLogError> {
        let start_epoch_millis = saturating_i64(app.start_epoch_millis);
        std::fs::create_dir_all(&config.dir).map_err(io(&config.dir))?;
        let mut stamp = start_epoch_millis;
        let (app_id, dir) = loop {
            let app_id = format!("local-{stamp}");
            let dir = config
                .dir
                .join(format!("{ROLLING_DIR_PREFIX}{app_id}_{ATTEMPT_ID}"));
            match std::fs::create_dir(&dir) {
                Ok(()) => break (app_id, dir),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => stamp += 1,
                Err(e) => return Err(EventLogError::io(&dir, e)),
            }
        };
        let marker = dir.join(format!(
            "{APPSTATUS_PREFIX}{app_id}_{ATTEMPT_ID}{IN_PROGRESS_SUFFIX}"
        ));
        File::create(&marker).map_err(io(&marker))?;
        let mut log = AppLog {
            app_id,
            dir,
            zstd: config.zstd,
            roll_bytes: config.roll_bytes.max(1),
            file_index: 0,
            file_bytes: 0,
            sink: None,
            ids: profile_events::IdCounters::default(),
            start_epoch_millis,
            peak_execution_memory: 0,
            host: app.host.clone(),
        };
        for event in log.start_events(app) {
            log.write(&event)?;
        }
        log.flush()?;
        Ok(log)
    }

    /// The application id.
    pub fn app_id(&self) -> &str {
        &self.app_id
    }

    /// The log's directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn start_events(&self, app: &AppInfo) -> Vec<Value> {
        let t = self.start_epoch_millis;
        let resource = |name: &str, amount: i64| json!({"Resource Name": name, "Amount": amount, "Discovery Script": "", "Vendor": ""});
        let mut props = Map::new();
        for (k, v) in [
            ("spark.app.id", self.app_id.clone()),
            ("spark.app.name", app.name.clone()),
            ("spark.app.startTime", t.to_string()),
            ("spark.master", format!("local[{}]", app.cores)),
            ("spark.driver.host", app.host.clone()),
            ("spark.executor.id", "driver".to_string()),
            ("spark.eventLog.enabled", "true".to_string()),
            ("spark.eventLog.compress", self.zstd.to_string()),
        ] {
            props.insert(k.to_string(), json!(v));
        }
        for (k, v) in &app.properties {
            props.insert(k.clone(), json!(v));
        }
        vec![
            json!({"Event": events::LOG_START, "Spark Version": SPARK_VERSION}),
            json!({
                "Event": events::RESOURCE_PROFILE_ADDED,
                "Resource Profile Id": 0,
                "Executor Resource Requests": {
                    "cores": resource("cores", i64::from(app.cores)),
                    "memory": resource("memory", 0),
                    "offHeap": resource("offHeap", 0),
                },
                "Task Resource Requests": {"cpus": {"Resource Name": "cpus", "Amount": 1.0}},
            }),
            json!({
                "Event": events::EXECUTOR_ADDED,
                "Timestamp": t,
                "Executor ID": "driver",
                "Executor Info": {
                    "Host": app.host,
                    "Total Cores": app.cores,
                    "Log Urls": {},
                    "Attributes": {},
                    "Resources": {},
                    "Resource Profile Id": 0,
                },
            }),
            json!({
                "Event": events::BLOCK_MANAGER_ADDED,
                // there is no block manager; Spark's reader requires a positive port
                "Block Manager ID": {"Executor ID": "driver", "Host": app.host, "Port": 1},
                "Maximum Memory": 0,
                "Timestamp": t,
                "Maximum Onheap Memory": 0,
                "Maximum Offheap Memory": 0,
            }),
            json!({
                "Event": events::ENVIRONMENT_UPDATE,
                "JVM Information": {
                    "Java Home": "",
                    "Java Version": format!("none ({}, qprof {})", app.engine, env!("CARGO_PKG_VERSION")),
                    "Scala Version": "none",
                },
                "Spark Properties": props,
                "Hadoop Properties": {},
                "System Properties": {},
                "Metrics Properties": {},
                "Classpath Entries": {},
            }),
            json!({
                "Event": events::APPLICATION_START,
                "App Name": app.name,
                "App ID": self.app_id,
                "App Attempt ID": ATTEMPT_ID,
                "Timestamp": t,
                "User": app.user,
            }),
        ]
    }

    fn file_path(&self, index: u32) -> PathBuf {
        let codec = if self.zstd { Codec::Zstd } else { Codec::None };
        self.dir.join(format!(
            "{EVENTS_FILE_PREFIX}{index}_{}_{ATTEMPT_ID}{}",
            self.app_id,
            codec.extension()
        ))
    }

    fn open_next(&mut self) -> Result<(), EventLogError> {
        if let Some(sink) = self.sink.take() {
            let path = self.file_path(self.file_index);
            sink.finish().map_err(io(&path))?;
        }
        self.file_index += 1;
        self.file_bytes = 0;
        let path = self.file_path(self.file_index);
        let file = BufWriter::new(File::create(&path).map_err(io(&path))?);
        self.sink = Some(if self.zstd {
            Sink::Zstd(zstd::stream::write::Encoder::new(file, 3).map_err(io(&path))?)
        } else {
            Sink::Plain(file)
        });
        Ok(())
    }

    /// Writes one event as one line.
    fn write(&mut self, event: &impl serde::Serialize) -> Result<(), EventLogError> {
        self.write_line(serde_json::to_vec(event)?)
    }

    /// Writes one event's JSON text, `line`, and its newline.
    fn write_line(&mut self, mut line: Vec<u8>) -> Result<(), EventLogError> {
        line.push(b'\n');
        if self.sink.is_none()
            || self.file_bytes + line.len() as u64 > self.roll_bytes && self.file_bytes > 0
        {
            self.open_next()?;
        }
        let path = self.file_path(self.file_index);
        let sink = self.sink.as_mut().expect("a file is open after open_next");
        sink.writer().write_all(&line).map_err(io(&path))?;
        self.file_bytes += line.len() as u64;
        Ok(())
    }

    /// Pushes everything written so far to the file (closing the current zstd block).
    pub fn flush(&mut self) -> Result<(), EventLogError> {
        let path = self.file_path(self.file_index);
        if let Some(sink) = &mut self.sink {
            sink.writer().flush().map_err(io(&path))?;
            if let Sink::Zstd(enc) = sink {
                enc.get_mut().flush().map_err(io(&path))?;
            }
        }
        Ok(())
    }

    /// Logs an executor joining the cluster the application runs on.
    pub fn log_executor_added(&mut self, executor: &ExecutorAdded) -> Result<(), EventLogError> {
        self.write(&json!({
            "Event": events::EXECUTOR_ADDED,
            "Timestamp": executor.epoch_millis,
            "Executor ID": executor.id,
            "Executor Info": {
                "Host": executor.host,
                "Total Cores": executor.cores,
                "Log Urls": {},
                "Attributes": {},
                "Resources": {},
                "Resource Profile Id": 0,
            },
        }))?;
        // as every Spark executor, it has a block manager (holding nothing)
        self.write(&json!({
            "Event": events::BLOCK_MANAGER_ADDED,
            // Spark's reader requires a positive port
            "Block Manager ID": {"Executor ID": executor.id, "Host": executor.host, "Port": executor.port.max(1)},
            "Maximum Memory": 0,
            "Timestamp": executor.epoch_millis,
            "Maximum Onheap Memory": 0,
            "Maximum Offheap Memory": 0,
        }))?;
        self.flush()
    }

    /// Logs an executor leaving the cluster, with why.
    pub fn log_executor_removed(
        &mut self,
        executor: &ExecutorRemoved,
    ) -> Result<(), EventLogError> {
        self.write(&json!({
            "Event": events::EXECUTOR_REMOVED,
            "Timestamp": executor.epoch_millis,
            "Executor ID": executor.id,
            "Removed Reason": executor.reason,
        }))?;
        self.flush()
    }

    /// Logs one query: its SQL execution, job, stages, tasks and metric values, and qprof's
    /// profile in an extension event. Flushes at the end.
    pub fn log_query(&mut self, query: &QueryRecord<'_>) -> Result<(), EventLogError> {
        let events = profile_events::query_events(query, &self.host, &mut self.ids);
        for event in &events {
            let mut line = Vec::new();
            event.write_json(&mut line)?;
            self.write_line(line)?;
        }
        if let Some(profile) = query.profile {
            self.peak_execution_memory = self.peak_execution_memory.max(peak_memory(profile));
        }
        self.flush()
    }

    /// Ends the application: the driver's peak executor metrics, the end event, and the
    /// status marker renamed to show the log complete. Returns the log directory.
    pub fn finish(
        mut self,
        end_epoch_millis: i64,
        exit_code: i32,
        peak_rss_bytes: Option<u64>,
    ) -> Result<PathBuf, EventLogError> {
        let mut peaks = Map::new();
        for name in EXECUTOR_METRIC_NAMES {
            let v = match name {
                "OffHeapExecutionMemory" | "OffHeapUnifiedMemory" => self.peak_execution_memory,
                "ProcessTreeJVMRSSMemory" => peak_rss_bytes.map_or(0, saturating_i64),
                _ => 0,
            };
            peaks.insert(name.to_string(), json!(v));
        }
        self.write(&json!({
            "Event": events::EXECUTOR_METRICS_UPDATE,
            "Executor ID": "driver",
            "Metrics Updated": [],
            "Executor Metrics Updated": [
                {"Stage ID": -1, "Stage Attempt ID": -1, "Executor Metrics": peaks}
            ],
        }))?;
        self.write(&json!({
            "Event": events::APPLICATION_END,
            "Timestamp": end_epoch_millis.max(self.start_epoch_millis),
            "ExitCode": exit_code,
        }))?;
        if let Some(sink) = self.sink.take() {
            let path = self.file_path(self.file_index);
            sink.finish().map_err(io(&path))?;
        }
        let marker = self.dir.join(format!(
            "{APPSTATUS_PREFIX}{}_{ATTEMPT_ID}{IN_PROGRESS_SUFFIX}",
            self.app_id
        ));
        let done = self
            .dir
            .join(format!("{APPSTATUS_PREFIX}{}_{ATTEMPT_ID}", self.app_id));
        std::fs::rename(&marker, &done).map_err(io(&marker))?;
        Ok(self.dir)
    }
}

fn peak_memory(profile: &QueryProfile) -> i64 {
    profile
        .stages
        .iter()
        .flat_map(|s| &s.tasks)
        .filter_map(|t| t.value(qprof_core::profile::names::PEAK_MEMORY_BYTES))
        .max()
        .unwrap_or(0)
}
