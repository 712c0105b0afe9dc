//! Replaying a log into an [`AppState`], incrementally: each refresh reads only the bytes
//! appended since the last one (for uncompressed files; compressed files are re-decoded
//! but only new lines are applied). A last line without its newline is left for the next
//! refresh while the log is in progress, and counted as corrupt once the log is complete.

use crate::EventLogError;
use crate::codec::Codec;
use crate::layout::{LogFile, LogSource, rolling_source};
use crate::state::{AppInfo, AppState, ParsedLine};
use crate::storage::Storage;

#[derive(Debug, Clone, Default)]
struct FileProgress {
    /// Bytes of the decoded stream already applied (complete lines only).
    consumed: u64,
}

/// An application's log and the state replayed from it so far.
#[derive(Debug, Clone)]
pub struct Replay {
    source: LogSource,
    progress: Vec<FileProgress>,
    state: AppState,
    bytes_applied: u64,
}

/// Bytes of a file read, or decoded, at a time: what a replay holds of a log besides its
/// state and one unfinished line.
const PIECE_BYTES: u64 = 64 << 20;

/// The most a compressed log file may expand, decoded bytes per byte (event logs compress
/// 10 to 50 times; a file of zeros, a hundred thousand).
const MAX_EXPANSION: u64 = 2000;

/// The longest line a reader holds: a longer one is counted as corrupt and passed over as
/// it streams, never held whole.
pub(crate) const MAX_LINE_BYTES: usize = 128 << 20;

/// Streams the bytes of `file` from `offset` of its decoded stream to `each`, in pieces of
/// at most [`PIECE_BYTES`]: an uncompressed file by ranged reads, a compressed one decoded
/// as a stream, at most the storage's [`Storage::max_decoded_bytes`] of it.
fn stream_file(
    storage: &Storage,
    file: &LogFile,
    offset: u64,
    each: &mut dyn FnMut(&[u8]),
) -> Result<(), EventLogError> {
    let io = |e| EventLogError::io(&file.path, e);
    if file.codec == Codec::None {
        let mut at = offset;
        loop {
            let (data, len) = storage
                .read_range(&file.path, at, PIECE_BYTES)
                .map_err(io)?;
            if data.is_empty() {
                return Ok(());
            }
            each(&data);
            at += data.len() as u64;
            if (data.len() as u64) < PIECE_BYTES || at >= len {
                return Ok(());
            }
        }
    }
    let raw = storage.read(&file.path).map_err(io)?;
    let mut decoded = file.codec.decoder(&raw)?;
    let limit = storage.max_decoded_bytes();
    // no event log compresses this well: past it, the file is a decompression bomb
    let expanded = (raw.len() as u64)
        .saturating_mul(MAX_EXPANSION)
        .max(1 << 20);
    let mut buf = vec![0u8; 1 << 20];
    let (mut total, mut piece) = (0u64, Vec::new());
    loop {
        let n = decoded.read(&mut buf);
        total += n as u64;
        if total > limit {
            return Err(EventLogError::DecodedTooLarge { limit });
        }
        if total > expanded {
            return Err(EventLogError::DecompressionBomb {
                ratio: MAX_EXPANSION,
            });
        }
        // the part past `offset` of what was decoded
        let skip = usize::try_from(offset.saturating_sub(total - n as u64))
            .unwrap_or(usize::MAX)
            .min(n);
        piece.extend_from_slice(&buf[skip..n]);
        if n == 0 || piece.len() as u64 >= PIECE_BYTES {
            if !piece.is_empty() {
                each(&piece);
                piece.clear();
            }
            if n == 0 {
                return Ok(());
            }
        }
    }
}

/// Cuts streamed pieces into runs of whole lines, holding the unfinished line between
/// pieces; a line past `max_line` bytes is dropped as it streams.
#[derive(Debug)]
struct LineSplitter {
    max_line: usize,
    pending: Vec<u8>,
    dropping: bool,
    /// Lines dropped for their length.
    overlong: u64,
    /// Bytes of whole lines handed on, and of dropped lines.
    used: u64,
}

impl LineSplitter {
    fn new(max_line: usize) -> LineSplitter {
        LineSplitter {
            max_line,
            pending: Vec::new(),
            dropping: false,
            overlong: 0,
            used: 0,
        }
    }

    /// Hands `piece`'s whole lines (with the unfinished one before it) to `apply`, each
    /// run ending with a newline.
    fn feed(&mut self, mut piece: &[u8], apply: &mut impl FnMut(&[u8])) {
        if self.dropping {
            let Some(nl) = memchr::memchr(b'\n', piece) else {
                self.used += piece.len() as u64;
                return;
            };
            self.used += nl as u64 + 1;
            piece = &piece[nl + 1..];
            self.dropping = false;
        }
        let Some(last) = memchr::memrchr(b'\n', piece) else {
            self.hold(piece);
            return;
        };
        let (mut lines, rest) = piece.split_at(last + 1);
        if !self.pending.is_empty() {
            let first = memchr::memchr(b'\n', lines).map_or(lines.len(), |nl| nl + 1);
            if self.pending.len() + first - 1 > self.max_line {
                self.used += (self.pending.len() + first) as u64;
                self.pending = Vec::new();
                self.overlong += 1;
            } else {
                self.pending.extend_from_slice(&lines[..first]);
                apply(&self.pending);
                self.used += self.pending.len() as u64;
                self.pending.clear();
            }
            lines = &lines[first..];
        }
        if !lines.is_empty() {
            apply(lines);
            self.used += lines.len() as u64;
        }
        self.hold(rest);
    }

    fn hold(&mut self, rest: &[u8]) {
        if self.pending.len() + rest.len() > self.max_line {
            self.used += (self.pending.len() + rest.len()) as u64;
            self.pending = Vec::new();
            self.dropping = true;
            self.overlong += 1;
        } else {
            self.pending.extend_from_slice(rest);
        }
    }

    /// Hands on the unfinished last line when `final_part` (the file is complete);
    /// returns the bytes used and the lines dropped.
    fn finish(mut self, final_part: bool, apply: &mut impl FnMut(&[u8])) -> (u64, u64) {
        if final_part && !self.pending.is_empty() {
            apply(&self.pending);
            self.used += self.pending.len() as u64;
        }
        (self.used, self.overlong)
    }
}

/// Streams `file`'s lines from `offset` to `apply` in runs of whole lines (the unfinished
/// last one too when `final_part`); returns the bytes used and the lines dropped for
/// their length.
fn stream_lines(
    storage: &Storage,
    file: &LogFile,
    offset: u64,
    final_part: bool,
    mut apply: impl FnMut(&[u8]),
) -> Result<(u64, u64), EventLogError> {
    let mut lines = LineSplitter::new(MAX_LINE_BYTES);
    stream_file(storage, file, offset, &mut |piece| {
        lines.feed(piece, &mut apply);
    })?;
    Ok(lines.finish(final_part, &mut apply))
}

/// Calls `apply` for each complete line of `data`, and for the unterminated rest when
/// `final_part`; returns how many bytes were used.
fn for_each_line<'a>(data: &'a [u8], final_part: bool, mut apply: impl FnMut(&'a [u8])) -> usize {
    let mut start = 0;
    for nl in memchr::memchr_iter(b'\n', data) {
        apply(&data[start..nl]);
        start = nl + 1;
    }
    if final_part && start < data.len() {
        apply(&data[start..]);
        start = data.len();
    }
    start
}

/// Bytes of lines one parsing thread takes at a time.
const CHUNK_BYTES: usize = 256 << 10;

/// Applies the lines of `data` (whole lines, the last one perhaps without its newline) to
/// `state`, in order. Data of several chunks is parsed on as many threads as the machine
/// has cores, a chunk at a time each, while this thread applies the parsed lines in their
/// order; a thread parses at most one chunk ahead of what was applied, so memory stays
/// bounded.
fn apply_lines(state: &mut AppState, data: &[u8]) {
    let threads = std::thread::available_parallelism().map_or(1, std::num::NonZero::get);
    if threads < 2 || data.len() < 2 * CHUNK_BYTES {
        for_each_line(data, true, |line| state.apply_line(line));
        return;
    }
    let chunks = line_chunks(data, CHUNK_BYTES);
    std::thread::scope(|scope| {
        let parsed: Vec<_> = (0..threads)
            .map(|first| {
                let (send, receive) = std::sync::mpsc::sync_channel::<Vec<ParsedLine<'_>>>(1);
                let chunks = &chunks;
                scope.spawn(move || {
                    for chunk in chunks.iter().skip(first).step_by(threads) {
                        let mut lines = Vec::new();
                        for_each_line(chunk, true, |line| lines.push(ParsedLine::parse(line)));
                        if send.send(lines).is_err() {
                            return;
                        }
                    }
                });
                receive
            })
            .collect();
        // chunk i was parsed by thread i % threads, which sends its chunks in order
        for i in 0..chunks.len() {
            let Ok(lines) = parsed[i % threads].recv() else {
                break; // the thread panicked; the scope's end reports it
            };
            for line in lines {
                state.apply_parsed(line);
            }
        }
    });
}

/// `data` cut into pieces of about `size` bytes, each ending at a line's end (the last one
/// at `data`'s end).
fn line_chunks(data: &[u8], size: usize) -> Vec<&[u8]> {
    let mut chunks = Vec::with_capacity(data.len() / size + 1);
    let mut rest = data;
    while rest.len() > size {
        let end = memchr::memchr(b'\n', &rest[size..]).map_or(rest.len(), |nl| size + nl + 1);
        let (chunk, tail) = rest.split_at(end);
        chunks.push(chunk);
        rest = tail;
    }
    if !rest.is_empty() {
        chunks.push(rest);
    }
    chunks
}

impl Replay {
    /// Starts a replay of `source`; nothing is read until [`Replay::refresh`].
    pub fn new(source: LogSource) -> Replay {
        Replay {
            progress: vec![FileProgress::default(); source.files.len()],
            source,
            state: AppState::default(),
            bytes_applied: 0,
        }
    }

    /// A replay of `source` whose `state` was read back from its saved form: it has read
    /// its files to their end.
    pub(crate) fn restored(source: LogSource, state: AppState, bytes_applied: u64) -> Replay {
        Replay {
            progress: vec![FileProgress { consumed: u64::MAX }; source.files.len()],
            source,
            state,
            bytes_applied,
        }
    }

    /// Replays a whole log at once.
    pub fn load(source: LogSource) -> Result<Replay, EventLogError> {
        let mut replay = Replay::new(source);
        replay.refresh()?;
        Ok(replay)
    }

    /// The state replayed so far.
    pub fn state(&self) -> &AppState {
        &self.state
    }

    /// A copy of this replay with `events` applied after the log's: events not logged
    /// (yet), e.g. a running query's so far.
    pub fn with_events(&self, events: &[serde_json::Value]) -> Replay {
        let mut out = self.clone();
        for event in events {
            out.state.apply(event);
        }
        out
    }

    /// Bytes the replay holds in memory: its state's heap and its own size.
    pub fn resident_bytes(&self) -> u64 {
        (std::mem::size_of::<Replay>() + self.state.heap_bytes()) as u64
    }

    /// The log being replayed (as of the last refresh).
    pub fn source(&self) -> &LogSource {
        &self.source
    }

    /// Decoded bytes applied so far.
    pub fn bytes_applied(&self) -> u64 {
        self.bytes_applied
    }

    /// Reads what was appended since the last refresh (new files of a rolling log
    /// included) and applies it; returns the number of new bytes applied.
    pub fn refresh(&mut self) -> Result<u64, EventLogError> {
        let storage = self.source.storage.clone();
        let exists = |path: &std::path::Path| storage.exists(path).unwrap_or(false);
        if self.source.rolling {
            self.source = rolling_source(&storage, &self.source.path)?;
        } else if let Some(file) = self.source.files.first() {
            // a single-file log loses its `.inprogress` suffix when it completes
            if !exists(&file.path) {
                let done = file
                    .path
                    .to_str()
                    .and_then(|p| p.strip_suffix(crate::layout::IN_PROGRESS_SUFFIX))
                    .map(std::path::PathBuf::from);
                if let Some(done) = done.filter(|p| exists(p)) {
                    self.source.files[0].path = done.clone();
                    self.source.path = done;
                    self.source.in_progress = false;
                }
            }
        }
        self.progress
            .resize(self.source.files.len(), FileProgress::default());
        let mut applied = 0;
        let count = self.source.files.len();
        for (i, file) in self.source.files.iter().enumerate() {
            let final_part = i + 1 < count || !self.source.in_progress;
            let state = &mut self.state;
            let (used, overlong) = stream_lines(
                &storage,
                file,
                self.progress[i].consumed,
                final_part,
                |lines| {
                    apply_lines(state, lines);
                },
            )?;
            state.skipped.corrupt_lines += overlong;
            self.progress[i].consumed += used;
            applied += used;
        }
        self.bytes_applied += applied;
        Ok(applied)
    }
}

/// Bytes read from a log's head for its start events, a larger head next if they were not
/// there, and the whole file last (its environment can be large).
const HEAD_BYTES: [u64; 2] = [64 << 10, 1 << 20];
/// Bytes read from a log's tail for its end event.
const TAIL_BYTES: u64 = 64 << 10;

/// Applies the listing events among `data`'s complete lines (and its unterminated rest when
/// `final_part`) to `info`, skipping every other line by its prefix without parsing it;
/// returns whether an application start was among them.
fn apply_listing_events(data: &[u8], final_part: bool, info: &mut AppInfo) -> bool {
    let mut started = false;
    for_each_line(data, final_part, |line| {
        let line = line.trim_ascii_start();
        let wanted = match line.strip_prefix(b"{\"Event\":\"") {
            Some(rest) => {
                rest.starts_with(b"SparkListenerLogStart\"")
                    || rest.starts_with(b"SparkListenerEnvironmentUpdate\"")
                    || rest.starts_with(b"SparkListenerApplicationStart\"")
                    || rest.starts_with(b"SparkListenerApplicationEnd\"")
            }
            // not in the compact form Spark writes: parse to be sure
            None => line.starts_with(b"{"),
        };
        if wanted && let Ok(event) = serde_json::from_slice::<serde_json::Value>(line) {
            started |= event.get("Event").and_then(serde_json::Value::as_str)
                == Some(crate::spark::events::APPLICATION_START);
            info.apply(&event);
        }
    });
    started
}

/// Up to `limit` bytes from `offset` of an uncompressed file, and whether they reach its end.
fn read_range(
    storage: &Storage,
    file: &LogFile,
    offset: u64,
    limit: u64,
) -> Result<(Vec<u8>, bool), EventLogError> {
    let (data, len) = storage
        .read_range(&file.path, offset, limit)
        .map_err(|e| EventLogError::io(&file.path, e))?;
    let to_end = offset + data.len() as u64 >= len;
    Ok((data, to_end))
}

/// Reads only what an application listing needs (log start, application start and end):
/// the head of its first file and the tail of its last, for uncompressed logs, with the
/// last file's length as listed (a compressed file is decoded whole). Every other line is
/// skipped by its prefix without parsing it.
pub fn scan_info(source: &LogSource) -> Result<AppInfo, EventLogError> {
    let storage = &source.storage;
    let mut info = AppInfo::default();
    let (Some(first), Some(last)) = (source.files.first(), source.files.last()) else {
        return Ok(info);
    };
    let whole = |file: &LogFile, info: &mut AppInfo| -> Result<(), EventLogError> {
        stream_lines(storage, file, 0, true, |lines| {
            apply_listing_events(lines, true, info);
        })?;
        Ok(())
    };
    let single = source.files.len() == 1;
    // the head of the first file: log and application start
    if first.codec != Codec::None {
        whole(first, &mut info)?;
        if single {
            return Ok(info);
        }
    } else {
        let mut started = false;
        let mut to_end = false;
        // a file that the head and the tail would mostly cover is read in one go
        let steps = if first.len <= 2 * HEAD_BYTES[0] {
            &HEAD_BYTES[1..]
        } else {
            &HEAD_BYTES[..]
        };
        for &limit in steps {
            let mut head_info = AppInfo::default();
            let (head, reached_end) = read_range(storage, first, 0, limit)?;
            started = apply_listing_events(&head, reached_end, &mut head_info);
            to_end = reached_end;
            if started || reached_end {
                info = head_info;
                break;
            }
        }
        if !started && !to_end {
            // start events beyond the head (a large environment): the whole file
            whole(first, &mut info)?;
            if single {
                return Ok(info);
            }
        } else if to_end && single {
            return Ok(info);
        }
    }
    // the tail of the last file: application end
    if last.codec != Codec::None {
        whole(last, &mut info)?;
    } else {
        let offset = last.len.saturating_sub(TAIL_BYTES);
        let (tail, _) = read_range(storage, last, offset, TAIL_BYTES)?;
        // from the first whole line unless at the file's start
        let from = if offset == 0 {
            0
        } else {
            memchr::memchr(b'\n', &tail).map_or(tail.len(), |nl| nl + 1)
        };
        apply_listing_events(&tail[from..], true, &mut info);
    }
    Ok(info)
}

#[cfg(test)]
mod tests {
    use super::{LineSplitter, line_chunks};
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn split_pieces_give_the_lines_of_the_whole_and_drop_only_the_long_ones(
            lines in proptest::collection::vec("[a-z{}\":,]{0,40}", 0..100),
            steps in proptest::collection::vec(1usize..60, 1..50),
            max_line in 1usize..60,
            final_part in any::<bool>(),
        ) {
            // pieces no longer than the longest line held, as a replay's are
            let data = lines.join("\n");
            let mut splitter = LineSplitter::new(max_line);
            let mut got = Vec::new();
            let mut at = 0;
            for step in steps.iter().cycle() {
                if at == data.len() {
                    break;
                }
                let end = (at + (*step).min(max_line)).min(data.len());
                splitter.feed(&data.as_bytes()[at..end], &mut |run: &[u8]| got.extend_from_slice(run));
                at = end;
            }
            let (used, overlong) = splitter.finish(final_part, &mut |run: &[u8]| got.extend_from_slice(run));
            // a line is kept whole or dropped whole; the unfinished last one only when final
            let count = lines.len();
            let mut expected = Vec::new();
            let mut dropped = 0;
            for (i, line) in lines.iter().enumerate() {
                let last = i + 1 == count;
                if line.len() > max_line {
                    dropped += 1;
                    continue;
                }
                if last {
                    if final_part {
                        expected.extend_from_slice(line.as_bytes());
                    }
                } else {
                    expected.extend_from_slice(line.as_bytes());
                    expected.push(b'\n');
                }
            }
            prop_assert_eq!(String::from_utf8_lossy(&got), String::from_utf8_lossy(&expected));
            prop_assert_eq!(overlong, dropped);
            let unfinished = lines.last().filter(|l| !final_part && l.len() <= max_line).map_or(0, String::len);
            prop_assert_eq!(used, (data.len() - unfinished) as u64);
        }

        #[test]
        fn chunks_end_at_line_ends_and_make_up_the_data(
            lines in proptest::collection::vec("[a-z{}\":,]{0,40}", 0..200),
            size in 1usize..300,
            terminated in any::<bool>(),
        ) {
            let mut data = lines.join("\n");
            if terminated {
                data.push('\n');
            }
            let chunks = line_chunks(data.as_bytes(), size);
            prop_assert_eq!(chunks.concat(), data.as_bytes());
            let longest = lines.iter().map(String::len).max().unwrap_or(0);
            for (i, chunk) in chunks.iter().enumerate() {
                prop_assert!(!chunk.is_empty());
                prop_assert!(chunk.len() <= size + longest + 1);
                if i + 1 < chunks.len() {
                    prop_assert_eq!(chunk.last(), Some(&b'\n'));
                }
            }
        }
    }
}
