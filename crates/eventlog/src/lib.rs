//! Spark's event-log format for qprof: the one crate that owns every wire format.
//!
//! - [`listener`] is the event log as a listener of qprof's event bus; [`writer`] turns
//!   qprof's query profiles into Spark 4 event logs (rolling layout, optional zstd,
//!   crash-safe line by line);
//! - [`profile_json`] is qprof's own JSON profile (`--profile-out` and the extension
//!   event), as versioned serde types; [`live`] what a running application serves at
//!   `/qprof/v1/live`;
//! - [`layout`], [`codec`] and [`replay`] find and read logs written by qprof or by Spark
//!   (uncompressed, zstd, lz4; single-file or rolling; in progress or complete), through
//!   a [`storage`] seam: the local file system, or an object store supplied by the caller;
//! - [`state`] rebuilds an application from its events, as Spark's status listeners do;
//! - [`rest`] renders Spark's `/api/v1` JSON answers from that state.
//! - [`profile_diff`], [`flame_graph`] and [`trace_events`] turn profiles into answers:
//!   two runs compared, self CPU as a flame graph, the run on a timeline.
//!
//! It depends on no engine and no async runtime.
#![deny(missing_docs)]

use std::path::{Path, PathBuf};

pub mod codec;
#[cfg(feature = "test-util")]
pub mod compare;
#[cfg(feature = "test-util")]
pub mod fixtures;
pub mod flame_graph;
pub mod layout;
pub mod listener;
pub mod live;
pub mod profile_diff;
pub mod profile_events;
pub mod profile_json;
pub mod replay;
pub mod rest;
mod scala_order;
pub mod snapshot;
pub mod spark;
pub mod state;
pub mod storage;
pub mod trace_events;
pub mod writer;

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
