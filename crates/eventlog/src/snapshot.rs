//! A replayed application saved in a compact binary form, so that a history server can
//! reopen it without replaying its log.
//!
//! Layout: the magic `QPROFREPLAY\0`, the format version (`u32`), the stamp of the log it
//! was replayed from (its size `u64` and modification time `i64`, epoch ms), the payload's
//! length (`u64`) and CRC-32 (`u32`), all little-endian, then the payload: the state in
//! postcard (a serde binary format). A file of another version, for another stamp,
//! truncated or altered is refused with the reason, never half-read.

use std::sync::Arc;

use serde::de::{DeserializeOwned, Error as _};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::layout::LogSource;
use crate::replay::Replay;
use crate::state::AppState;

/// The version of the layout and of the state's encoding; files of another are refused.
pub const SNAPSHOT_VERSION: u32 = 4;

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

/// The payload after the string table: the state and how much of the log made it.
#[derive(Serialize)]
struct PayloadRef<'a> {
    state: &'a AppState,
    bytes_applied: u64,
}

/// [`PayloadRef`], read back.
#[derive(Deserialize)]
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
        let malformed = |e: postcard::Error| SnapshotError::Malformed(e.to_string());
        // the state first, collecting its shared strings; the table goes before it
        let (state, table) = string_table::writing(|| {
            postcard::to_stdvec(&PayloadRef {
                state: self.state(),
                bytes_applied: self.bytes_applied(),
            })
        });
        let mut payload = postcard::to_stdvec(&table).map_err(malformed)?;
        payload.extend_from_slice(&state.map_err(malformed)?);
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
        let malformed = |e: postcard::Error| SnapshotError::Malformed(e.to_string());
        let (table, rest): (Vec<&str>, &[u8]) =
            postcard::take_from_bytes(payload).map_err(malformed)?;
        let table: Vec<Arc<str>> = table.into_iter().map(Arc::from).collect();
        let Payload {
            mut state,
            bytes_applied,
        } = string_table::reading(&table, || postcard::from_bytes(rest)).map_err(malformed)?;
        state.adopt_names(table);
        Ok(Replay::restored(source, state, bytes_applied))
    }
}

/// The strings a saved state shares (metric names and types), written once in a table
/// before the state, which refers to them by their index there: reading them back costs
/// no allocation and no hashing per use.
mod string_table {
    use std::cell::RefCell;
    use std::collections::HashMap;
    use std::sync::Arc;

    thread_local! {
        static WRITING: RefCell<Option<HashMap<Arc<str>, u32>>> = const { RefCell::new(None) };
        static READING: RefCell<Option<Vec<Arc<str>>>> = const { RefCell::new(None) };
    }

    /// Runs `f` collecting the shared strings it writes; returns its result and the table.
    pub(super) fn writing<T>(f: impl FnOnce() -> T) -> (T, Vec<Arc<str>>) {
        WRITING.with(|w| *w.borrow_mut() = Some(HashMap::new()));
        let out = f();
        let collected = WRITING.with(|w| w.borrow_mut().take()).unwrap_or_default();
        let mut table: Vec<(u32, Arc<str>)> = collected.into_iter().map(|(s, i)| (i, s)).collect();
        table.sort_unstable_by_key(|(i, _)| *i);
        (out, table.into_iter().map(|(_, s)| s).collect())
    }

    /// Runs `f` with `table` to resolve the shared strings it reads.
    pub(super) fn reading<T>(table: &[Arc<str>], f: impl FnOnce() -> T) -> T {
        READING.with(|r| *r.borrow_mut() = Some(table.to_vec()));
        let out = f();
        READING.with(|r| r.borrow_mut().take());
        out
    }

    /// The index of `s` in the table being written.
    pub(super) fn index_of(s: &Arc<str>) -> Option<u32> {
        WRITING.with(|w| {
            let mut w = w.borrow_mut();
            let table = w.as_mut()?;
            let next = u32::try_from(table.len()).ok()?;
            Some(*table.entry(Arc::clone(s)).or_insert(next))
        })
    }

    /// The string at `index` of the table being read.
    pub(super) fn at(index: u32) -> Option<Arc<str>> {
        READING.with(|r| r.borrow().as_ref()?.get(index as usize).cloned())
    }
}

/// Serde for a shared string inside a saved state: its index in the state's string table.
pub(crate) mod shared_str {
    use std::sync::Arc;

    use super::*;

    /// Writes the index of `s` in the table being written.
    pub(crate) fn serialize<S: Serializer>(s: &Arc<str>, ser: S) -> Result<S::Ok, S::Error> {
        let index = string_table::index_of(s)
            .ok_or_else(|| serde::ser::Error::custom("a shared string outside a saved state"))?;
        ser.serialize_u32(index)
    }

    /// Reads an index and returns the shared string there.
    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Arc<str>, D::Error> {
        let index = u32::deserialize(d)?;
        string_table::at(index).ok_or_else(|| D::Error::custom(format!("no shared string {index}")))
    }
}

/// Serde for a map whose values are shared strings ([`shared_str`]).
pub(crate) mod shared_str_values {
    use std::collections::HashMap;
    use std::sync::Arc;

    use super::*;

    /// Writes (key, string index) pairs.
    pub(crate) fn serialize<S: Serializer>(
        map: &HashMap<i64, Arc<str>>,
        ser: S,
    ) -> Result<S::Ok, S::Error> {
        let pairs = map
            .iter()
            .map(|(k, v)| {
                string_table::index_of(v).map(|i| (*k, i)).ok_or_else(|| {
                    serde::ser::Error::custom("a shared string outside a saved state")
                })
            })
            .collect::<Result<Vec<(i64, u32)>, S::Error>>()?;
        pairs.serialize(ser)
    }

    /// Reads the pairs back.
    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<HashMap<i64, Arc<str>>, D::Error> {
        let pairs: Vec<(i64, u32)> = Vec::deserialize(d)?;
        pairs
            .into_iter()
            .map(|(k, i)| {
                string_table::at(i)
                    .map(|s| (k, s))
                    .ok_or_else(|| D::Error::custom(format!("no shared string {i}")))
            })
            .collect()
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

/// Serde for a logged qprof profile: its format version as JSON text, its profile text as
/// is (through [`as_json_text`] it would be escaped into a JSON string, and unescaped again
/// on every read back).
pub(crate) mod profile_text {
    use serde_json::Value;

    use super::*;

    type Logged = Option<(Option<Value>, Box<str>)>;

    /// Writes the version's JSON text and the profile's text.
    pub(crate) fn serialize<S: Serializer>(logged: &Logged, s: S) -> Result<S::Ok, S::Error> {
        let flat: Option<(Option<String>, &str)> = logged
            .as_ref()
            .map(|(version, text)| (version.as_ref().map(Value::to_string), &**text));
        flat.serialize(s)
    }

    /// Reads them back.
    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Logged, D::Error> {
        let flat: Option<(Option<String>, String)> = Option::deserialize(d)?;
        flat.map(|(version, text)| {
            let version = version
                .map(|v| serde_json::from_str(&v))
                .transpose()
                .map_err(D::Error::custom)?;
            Ok((version, text.into_boxed_str()))
        })
        .transpose()
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
