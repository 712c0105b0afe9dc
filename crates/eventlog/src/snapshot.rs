//! A replayed application saved in a compact binary form, so that a history server can
//! reopen it without replaying its log.
//!
//! Layout: the magic `QPROFREPLAY\0`, the format version (`u32`), the stamp of the log it
//! was replayed from (its size `u64` and modification time `i64`, epoch ms), the payload's
//! length (`u64`) and CRC-32 (`u32`), all little-endian, then the payload: the state in
//! postcard (a serde binary format). A file of another version, for another stamp,
//! truncated or altered is refused with the reason, never half-read.

use serde::de::{DeserializeOwned, Error as _};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::layout::LogSource;
use crate::replay::Replay;
use crate::state::AppState;

/// The version of the layout and of the state's encoding; files of another are refused.
pub const SNAPSHOT_VERSION: u32 = 1;

const MAGIC: &[u8; 12] = b"QPROFREPLAY\0";
const HEADER_BYTES: usize = 12 + 4 + 8 + 8 + 8 + 4;

/// What a log was when it was replayed: a saved replay is valid for that log only.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LogStamp {
    /// Total size of its files.
    pub size: u64,
    /// Latest modification of its files, epoch ms.
    pub modified_millis: i64,
}

/// Why a saved replay cannot be used.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum SnapshotError {
    /// Not a saved replay at all.
    #[error("not a saved replay")]
    NotASnapshot,
    /// Written in another format version.
    #[error("saved in format version {0}, this qprof reads {SNAPSHOT_VERSION}")]
    Version(u32),
    /// Saved from another state of the log.
    #[error("saved from the log as it was before it changed")]
    Stale,
    /// Shorter than its header says.
    #[error("truncated")]
    Truncated,
    /// The payload is not what was written.
    #[error("damaged (checksum mismatch)")]
    Damaged,
    /// The payload cannot be decoded (or, when saving, encoded).
    #[error("cannot be decoded: {0}")]
    Malformed(String),
}

/// The payload: the state and how much of the log made it.
#[derive(Serialize, Deserialize)]
struct Payload {
    state: AppState,
    bytes_applied: u64,
}

impl Replay {
    /// This replay saved, for the log as `stamp` describes it.
    ///
    /// # Errors
    /// If the state cannot be encoded (not expected for a state built by replaying).
    pub fn snapshot(&self, stamp: LogStamp) -> Result<Vec<u8>, SnapshotError> {
        let payload = postcard::to_stdvec(&Payload {
            state: self.state().clone(),
            bytes_applied: self.bytes_applied(),
        })
        .map_err(|e| SnapshotError::Malformed(e.to_string()))?;
        let mut out = Vec::with_capacity(HEADER_BYTES + payload.len());
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&SNAPSHOT_VERSION.to_le_bytes());
        out.extend_from_slice(&stamp.size.to_le_bytes());
        out.extend_from_slice(&stamp.modified_millis.to_le_bytes());
        out.extend_from_slice(&(payload.len() as u64).to_le_bytes());
        out.extend_from_slice(&crc32fast::hash(&payload).to_le_bytes());
        out.extend_from_slice(&payload);
        Ok(out)
    }

    /// The replay of `source` that `bytes` saved, if they saved it from the log as `stamp`
    /// describes it. The replay has read its files to their end.
    ///
    /// # Errors
    /// If `bytes` are not a saved replay of this format version and stamp, or are damaged.
    pub fn from_snapshot(
        source: LogSource,
        bytes: &[u8],
        stamp: LogStamp,
    ) -> Result<Replay, SnapshotError> {
        if bytes.len() < MAGIC.len() || &bytes[..MAGIC.len()] != MAGIC {
            return Err(SnapshotError::NotASnapshot);
        }
        if bytes.len() < HEADER_BYTES {
            return Err(SnapshotError::Truncated);
        }
        let word = |at: usize| u64::from_le_bytes(bytes[at..at + 8].try_into().unwrap_or_default());
        let version = u32::from_le_bytes(bytes[12..16].try_into().unwrap_or_default());
        if version != SNAPSHOT_VERSION {
            return Err(SnapshotError::Version(version));
        }
        let saved = LogStamp {
            size: word(16),
            modified_millis: word(24) as i64,
        };
        if saved != stamp {
            return Err(SnapshotError::Stale);
        }
        let length = usize::try_from(word(32)).map_err(|_| SnapshotError::Truncated)?;
        let crc = u32::from_le_bytes(bytes[40..44].try_into().unwrap_or_default());
        let payload = &bytes[HEADER_BYTES..];
        if payload.len() < length {
            return Err(SnapshotError::Truncated);
        }
        let payload = &payload[..length];
        if crc32fast::hash(payload) != crc {
            return Err(SnapshotError::Damaged);
        }
        let Payload {
            mut state,
            bytes_applied,
        } = postcard::from_bytes(payload).map_err(|e| SnapshotError::Malformed(e.to_string()))?;
        state.share_names();
        Ok(Replay::restored(source, state, bytes_applied))
    }
}

/// Serde through JSON text, for JSON values inside the binary form (which cannot carry
/// self-describing data).
pub(crate) mod as_json_text {
    use super::*;

    /// Writes `value` as its JSON text.
    pub(crate) fn serialize<T: Serialize, S: Serializer>(
        value: &T,
        s: S,
    ) -> Result<S::Ok, S::Error> {
        let text = serde_json::to_string(value).map_err(serde::ser::Error::custom)?;
        s.serialize_str(&text)
    }

    /// Reads a value from its JSON text.
    pub(crate) fn deserialize<'de, T: DeserializeOwned, D: Deserializer<'de>>(
        d: D,
    ) -> Result<T, D::Error> {
        let text = String::deserialize(d)?;
        serde_json::from_str(&text).map_err(D::Error::custom)
    }
}

/// Serde for task values (qprof-core's types have no serde).
pub(crate) mod task_values {
    use qprof_core::metric::{TaskRef, TaskValue};

    use super::*;

    type Flat = (i64, u64, Option<(u32, u32, u64, u32)>, i64);

    /// Writes the values as tuples.
    pub(crate) fn serialize<S: Serializer>(
        values: &[(i64, u64, TaskValue)],
        s: S,
    ) -> Result<S::Ok, S::Error> {
        let flat: Vec<Flat> = values
            .iter()
            .map(|(acc, order, v)| {
                let task = v
                    .task
                    .map(|t| (t.stage_id, t.stage_attempt, t.task_id, t.partition));
                (*acc, *order, task, v.value)
            })
            .collect();
        flat.serialize(s)
    }

    /// Reads the values from tuples.
    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<Vec<(i64, u64, TaskValue)>, D::Error> {
        let flat: Vec<Flat> = Vec::deserialize(d)?;
        Ok(flat
            .into_iter()
            .map(|(acc, order, task, value)| {
                let task = task.map(|(stage_id, stage_attempt, task_id, partition)| TaskRef {
                    stage_id,
                    stage_attempt,
                    task_id,
                    partition,
                });
                (acc, order, TaskValue { task, value })
            })
            .collect())
    }
}
