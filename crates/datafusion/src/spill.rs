//! Spill files counted where they are made: the session's disk manager is put behind one
//! whose file factory hands out the original manager's files wrapped, each counted in the
//! operator task that created it (files, bytes and time written, bytes and time read back).
//! The original manager still places the files and enforces its size limit.

use std::io::Write;
use std::path::Path;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Instant;

use bytes::Bytes;
use datafusion::arrow::ipc::root_as_message;
use datafusion::common::Result;
use datafusion::execution::disk_manager::DiskManager;
use datafusion::execution::spill_file::{SpillFile, SpillWriter, TempFileFactory};
use futures::{Stream, StreamExt};
use qprof_core::attribution;
use qprof_core::spill::SpillCounters;

/// A disk manager whose files are counted, in front of `inner`; `inner` itself when it
/// cannot make files (a disabled manager stays disabled, with its own error).
pub(crate) fn counting_disk_manager(inner: &Arc<DiskManager>) -> Arc<DiskManager> {
    if !inner.tmp_files_enabled() {
        return Arc::clone(inner);
    }
    let factory = Arc::new(CountingTempFileFactory {
        inner: Arc::clone(inner),
    });
    DiskManager::builder()
        .with_temp_file_factory(factory)
        .with_max_spill_merge_fan_in(inner.max_spill_merge_fan_in())
        .build()
        .map_or_else(|_| Arc::clone(inner), Arc::new)
}

struct CountingTempFileFactory {
    inner: Arc<DiskManager>,
}

impl TempFileFactory for CountingTempFileFactory {
    fn create_temp_file(&self, description: &str) -> Result<Arc<dyn SpillFile>> {
        let file = self.inner.create_tmp_file(description)?;
        let Some(task) = attribution::current() else {
            return Ok(file);
        };
        let (task, phase) = task.spill_targets();
        let counters = SpillTargets { task, phase };
        counters.for_each(SpillCounters::record_file);
        Ok(Arc::new(CountedSpillFile {
            inner: file,
            counters,
        }))
    }
}

/// Where a spill file is counted: its task and, for a join, the phase it was created in.
#[derive(Clone)]
struct SpillTargets {
    task: Arc<SpillCounters>,
    phase: Option<Arc<SpillCounters>>,
}

impl SpillTargets {
    fn for_each(&self, record: impl Fn(&SpillCounters)) {
        record(&self.task);
        if let Some(phase) = &self.phase {
            record(phase);
        }
    }
}

/// A spill file whose writes and reads are counted.
struct CountedSpillFile {
    inner: Arc<dyn SpillFile>,
    counters: SpillTargets,
}

impl SpillFile for CountedSpillFile {
    fn path(&self) -> Option<&Path> {
        self.inner.path()
    }

    fn size(&self) -> Option<u64> {
        self.inner.size()
    }

    fn read_stream(&self) -> Result<Pin<Box<dyn Stream<Item = Result<Bytes>> + Send>>> {
        let inner = self.inner.read_stream()?;
        Ok(Box::pin(CountedRead {
            inner,
            counters: self.counters.clone(),
        }))
    }

    fn open_writer(&self) -> Result<Box<dyn SpillWriter>> {
        Ok(Box::new(CountedWriter {
            inner: self.inner.open_writer()?,
            counters: self.counters.clone(),
            rows: IpcRowCounter::default(),
        }))
    }
}

fn nanos_since(start: Instant) -> u64 {
    u64::try_from(start.elapsed().as_nanos()).unwrap_or(u64::MAX)
}

/// Writes to a spill file, counted with their time, and the rows of the Arrow IPC stream
/// they carry.
struct CountedWriter {
    inner: Box<dyn SpillWriter>,
    counters: SpillTargets,
    rows: IpcRowCounter,
}

impl Write for CountedWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let start = Instant::now();
        let written = self.inner.write(buf)?;
        let nanos = nanos_since(start);
        let rows = self.rows.feed(&buf[..written]);
        self.counters.for_each(|c| {
            c.record_write(written as u64, nanos);
            c.record_rows(rows);
        });
        Ok(written)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        let start = Instant::now();
        let flushed = self.inner.flush();
        let nanos = nanos_since(start);
        self.counters.for_each(|c| c.record_write(0, nanos));
        flushed
    }
}

impl SpillWriter for CountedWriter {
    fn finish(&mut self) -> Result<()> {
        let start = Instant::now();
        let finished = self.inner.finish();
        let nanos = nanos_since(start);
        self.counters.for_each(|c| c.record_write(0, nanos));
        finished
    }
}

/// Counts the rows of the record batches in an Arrow IPC stream fed to it in pieces of any
/// size: each message is a continuation marker, the length of its metadata, the metadata
/// (a flatbuffer giving a record batch's row count and its body's length) and the body.
#[derive(Debug, Default)]
struct IpcRowCounter {
    /// Bytes of the current message's prefix or metadata, gathered so far.
    pending: Vec<u8>,
    /// Metadata bytes the current message has, once its prefix is read.
    metadata_len: Option<usize>,
    /// Body bytes still to pass over.
    body_left: u64,
    /// The stream ended, or was not one this counter reads.
    done: bool,
}

/// The marker that opens every message of an IPC stream.
const CONTINUATION: [u8; 4] = [0xFF; 4];

impl IpcRowCounter {
    /// Reads `data`, the next bytes of the stream; returns the rows of the record batches
    /// whose metadata ended in it.
    fn feed(&mut self, mut data: &[u8]) -> u64 {
        let mut rows = 0;
        while !data.is_empty() && !self.done {
            if self.body_left > 0 {
                let skip = data
                    .len()
                    .min(usize::try_from(self.body_left).unwrap_or(usize::MAX));
                self.body_left -= skip as u64;
                data = &data[skip..];
                continue;
            }
            let want = self.metadata_len.unwrap_or(8);
            let take = (want - self.pending.len()).min(data.len());
            self.pending.extend_from_slice(&data[..take]);
            data = &data[take..];
            if self.pending.len() < want {
                break;
            }
            match self.metadata_len {
                None => {
                    let len = i32::from_le_bytes([
                        self.pending[4],
                        self.pending[5],
                        self.pending[6],
                        self.pending[7],
                    ]);
                    self.done = self.pending[..4] != CONTINUATION || len <= 0;
                    self.metadata_len = usize::try_from(len).ok();
                }
                Some(_) => {
                    match root_as_message(&self.pending) {
                        Ok(message) => {
                            if let Some(batch) = message.header_as_record_batch() {
                                rows += u64::try_from(batch.length()).unwrap_or(0);
                            }
                            self.body_left = u64::try_from(message.bodyLength()).unwrap_or(0);
                        }
                        Err(_) => self.done = true,
                    }
                    self.metadata_len = None;
                }
            }
            self.pending.clear();
        }
        rows
    }
}

/// A spill file read back, counted by its chunks and the time its polls took.
struct CountedRead {
    inner: Pin<Box<dyn Stream<Item = Result<Bytes>> + Send>>,
    counters: SpillTargets,
}

impl Stream for CountedRead {
    type Item = Result<Bytes>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let start = Instant::now();
        let polled = self.inner.poll_next_unpin(cx);
        let bytes = match &polled {
            Poll::Ready(Some(Ok(chunk))) => chunk.len() as u64,
            _ => 0,
        };
        let nanos = nanos_since(start);
        self.counters.for_each(|c| c.record_read(bytes, nanos));
        polled
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::arrow::array::{Int64Array, RecordBatch, StringArray};
    use datafusion::arrow::datatypes::{DataType, Field, Schema};
    use datafusion::arrow::ipc::writer::StreamWriter;

    /// An IPC stream of batches of `sizes` rows, as DataFusion writes a spill file.
    fn stream(sizes: &[usize]) -> Vec<u8> {
        let schema = Arc::new(Schema::new(vec![
            Field::new("n", DataType::Int64, false),
            Field::new("s", DataType::Utf8, false),
        ]));
        let mut writer = StreamWriter::try_new(Vec::new(), &schema).unwrap();
        for &size in sizes {
            let n = Int64Array::from_iter_values(0..size as i64);
            let s = StringArray::from_iter_values((0..size).map(|i| format!("row {i}")));
            let batch =
                RecordBatch::try_new(Arc::clone(&schema), vec![Arc::new(n), Arc::new(s)]).unwrap();
            writer.write(&batch).unwrap();
        }
        writer.into_inner().unwrap()
    }

    #[test]
    fn rows_are_counted_however_the_stream_is_cut() {
        let sizes = [3, 1000, 0, 17];
        let bytes = stream(&sizes);
        for piece in [1, 7, 64, 4096, bytes.len()] {
            let mut counter = IpcRowCounter::default();
            let rows: u64 = bytes.chunks(piece).map(|c| counter.feed(c)).sum();
            assert_eq!(rows, 1020, "pieces of {piece}");
            assert!(counter.done, "the end of the stream is seen");
        }
    }

    #[test]
    fn bytes_that_are_not_a_stream_count_nothing() {
        let mut counter = IpcRowCounter::default();
        assert_eq!(counter.feed(b"not an arrow stream at all"), 0);
        assert!(counter.done);
    }
}
