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
        }))
    }
}

fn nanos_since(start: Instant) -> u64 {
    u64::try_from(start.elapsed().as_nanos()).unwrap_or(u64::MAX)
}

/// Writes to a spill file, counted with their time.
struct CountedWriter {
    inner: Box<dyn SpillWriter>,
    counters: SpillTargets,
}

impl Write for CountedWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let start = Instant::now();
        let written = self.inner.write(buf)?;
        let nanos = nanos_since(start);
        self.counters
            .for_each(|c| c.record_write(written as u64, nanos));
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
