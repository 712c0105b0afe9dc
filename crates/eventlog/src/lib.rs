//! Spark's event-log format for qprof: the one crate that owns every wire format.
//!
//! - [`EventLogListener`] is the event log as a listener of qprof's event bus; an
//!   [`AppLog`] turns qprof's query profiles into Spark 4 event logs (rolling layout,
//!   optional zstd, crash-safe line by line);
//! - [`QueryJson`] is qprof's own JSON profile (`--profile-out` and the extension event),
//!   as versioned serde types; [`LiveState`] what a running application serves at
//!   `/qprof/v1/live`;
//! - [`discover`] and [`Replay`] find and read logs written by qprof or by Spark
//!   (uncompressed, zstd, lz4; single-file or rolling; in progress or complete), through
//!   a [`Storage`] seam: the local file system, or an object store supplied by the caller;
//! - [`AppState`] rebuilds an application from its events, as Spark's status listeners
//!   do;
//! - [`rest`] renders Spark's `/api/v1` JSON answers from that state;
//! - [`diff_queries`], the flame graph and [`chrome_trace`] turn profiles into answers:
//!   two runs compared, self CPU as a flame graph, the run on a timeline.
//!
//! It depends on no engine and no async runtime.
#![deny(missing_docs)]

use std::path::{Path, PathBuf};

mod codec;
#[cfg(feature = "test-util")]
pub mod compare;
#[cfg(feature = "test-util")]
pub mod fixtures;
mod flame_graph;
mod layout;
mod listener;
mod live;
mod pprof;
mod profile_diff;
mod profile_events;
mod profile_json;
mod replay;
pub mod rest;
mod scala_order;
mod snapshot;
mod spark;
mod state;
mod storage;
mod trace_events;
mod writer;

pub use codec::{Codec, encode_lz4_blocks};
pub use layout::{APPSTATUS_PREFIX, LogSource, discover, discover_in};
pub use listener::EventLogListener;
pub use live::{LiveState, RunningQuery, ScanProgress, StageProgressJson, TraceExportJson};
pub use pprof::pprof_profile;
pub use profile_diff::{DEFAULT_REGRESSION_THRESHOLD_PERCENT, QueryDiff, diff_queries};
pub use profile_events::{IdCounters, QueryRecord, running_query_events};
pub use profile_json::{
    CostJson, FORMAT_VERSION, FindingJson, FunctionJson, MemoryJson, MetricJson, NodeJson,
    OrderedMap, PlanningJson, PlanningPhaseJson, PlanningRuleJson, ProfileJsonError,
    ProfilesDocument, QueryJson, SampledStackJson, ServedProfile, StackSamplesJson,
};
pub use replay::{Replay, scan_info};
pub use snapshot::{LogStamp, SNAPSHOT_VERSION, SnapshotError};
pub use spark::{EXECUTOR_METRIC_NAMES, format_date, parse_date};
pub use state::{
    AppAcls, AppInfo, AppState, Execution, Executor, Job, PlanMetric, PlanNode, ProfileSummary,
    Stage, StageStatus, Task, TaskMetrics, TaskStatus,
};
pub use storage::{
    DEFAULT_MAX_DECODED_BYTES, EntryKind, Listed, LogStorage, ROLLING_DIR_PREFIX, SkippedEntry,
    Storage, StorageStats, StoredEntry,
};
pub use trace_events::chrome_trace;
pub use writer::{AppLog, DEFAULT_ROLL_BYTES, LogConfig};

/// Errors reading or writing event logs.
#[derive(Debug, thiserror::Error)]
pub enum EventLogError {
    /// A file or directory could not be read or written.
    #[error("{path}: {cause}")]
    Io {
        /// The path involved.
        path: PathBuf,
        /// The underlying error (shown in the message, so not chained a second time).
        cause: std::io::Error,
    },
    /// The log uses a codec qprof cannot decode.
    #[error("event log compressed with {0}, which qprof does not read (zstd, lz4 or none)")]
    UnsupportedCodec(String),
    /// A compressed file decodes to more bytes than the reader's limit
    /// ([`Storage::with_max_decoded_bytes`]).
    #[error("the log decompresses to more than {limit} bytes, the limit (--max-log-bytes)")]
    DecodedTooLarge {
        /// The limit, in decoded bytes.
        limit: u64,
    },
    /// A compressed file expands more than any event log does.
    #[error("the log expands more than {ratio} times when decompressed: a decompression bomb")]
    DecompressionBomb {
        /// The most a log may expand.
        ratio: u64,
    },
    /// A value could not be encoded.
    #[error("cannot encode event: {0}")]
    Encode(#[from] serde_json::Error),
}

impl EventLogError {
    /// An I/O error at `path`.
    pub fn io(path: &Path, source: std::io::Error) -> EventLogError {
        EventLogError::Io {
            path: path.to_path_buf(),
            cause: source,
        }
    }
}
