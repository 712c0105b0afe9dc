//! The executor's memory, sampled: on the process updater's heartbeat (every region), and
//! when a stage of a query starts and when a query ends (every region but the heap, which
//! keeps its last heartbeat's reading). In one process the driver is the executor.

use std::sync::{Arc, Mutex, OnceLock, PoisonError, Weak};
use std::time::Duration;

use datafusion::execution::memory_pool::MemoryPool;
use qprof_core::clock::epoch_millis;
use qprof_core::executor_memory::{
    MemoryRecorder, MemorySample, ProcessMemoryReader, process_size,
};
use qprof_core::periodic::Heartbeat;

use crate::io::process_updater;
use crate::read_cache::ReadCache;

/// Samples kept per executor: at a heartbeat a second, about 2.8 hours before thinning.
const KEPT_SAMPLES: usize = 10_000;

/// The default time between heartbeats (`qprof.runtime.heartbeat_interval_ms`).
pub(crate) const DEFAULT_HEARTBEAT: Duration = Duration::from_millis(1_000);

/// Samples the memory of the executor a profiler's sessions run in.
pub(crate) struct MemoryMonitor {
    recorder: MemoryRecorder,
    /// The memory pools of the instrumented sessions (their own, under qprof's view).
    pools: Mutex<Vec<Weak<dyn MemoryPool>>>,
    read_cache: Option<Arc<ReadCache>>,
    heartbeat: OnceLock<Arc<Heartbeat>>,
    /// Reads the process's regions on the heartbeat.
    reader: ProcessMemoryReader,
}

impl std::fmt::Debug for MemoryMonitor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemoryMonitor")
            .field("peaks", &self.recorder.peaks())
            .finish_non_exhaustive()
    }
}

impl MemoryMonitor {
    pub(crate) fn new(read_cache: Option<Arc<ReadCache>>) -> Arc<MemoryMonitor> {
        Arc::new(MemoryMonitor {
            recorder: MemoryRecorder::new(KEPT_SAMPLES),
            pools: Mutex::new(Vec::new()),
            read_cache,
            heartbeat: OnceLock::new(),
            reader: ProcessMemoryReader::default(),
        })
    }

    /// Counts `pool`'s reservations as execution memory, while it lives.
    pub(crate) fn add_pool(&self, pool: &Arc<dyn MemoryPool>) {
        let mut pools = self.pools.lock().unwrap_or_else(PoisonError::into_inner);
        pools.retain(|p| p.strong_count() > 0);
        if !pools.iter().any(|p| p.ptr_eq(&Arc::downgrade(pool))) {
            pools.push(Arc::downgrade(pool));
        }
    }

    /// Starts the heartbeat on the process's updater (once), or sets its interval.
    pub(crate) fn beat_every(self: &Arc<Self>, interval: Duration) {
        if let Some(heartbeat) = self.heartbeat.get() {
            heartbeat.set_interval(interval);
            return;
        }
        let monitor = Arc::downgrade(self);
        let heartbeat = process_updater().heartbeat(interval, move || {
            if let Some(monitor) = monitor.upgrade() {
                monitor.sample();
            }
        });
        if let Err(extra) = self.heartbeat.set(heartbeat) {
            process_updater().stop(extra.as_ref());
        }
    }

    /// Reads every region now (the heap as often as its cost allows) and keeps the reading
    /// (the heartbeat's sample).
    pub(crate) fn sample(&self) -> MemorySample {
        self.record(self.reader.read())
    }

    /// Reads the process's size now (resident and virtual), and keeps the reading with the
    /// heap and file-backed pages of the last full one: the sample taken as a stage starts
    /// or a query (or a cluster's task) ends, where reading those two would cost more than
    /// the rest of qprof's bookkeeping for it. They are read on the heartbeat (and here, if
    /// nothing was read before).
    pub(crate) fn sample_at_boundary(&self) -> MemorySample {
        let Some(last) = self.recorder.last() else {
            return self.sample();
        };
        self.record(MemorySample {
            heap_bytes: last.heap_bytes,
            file_mapped_bytes: last.file_mapped_bytes,
            ..process_size()
        })
    }

    /// Keeps `process` with the pools' and the cache's memory now.
    fn record(&self, process: MemorySample) -> MemorySample {
        let execution_bytes = {
            let pools = self.pools.lock().unwrap_or_else(PoisonError::into_inner);
            pools
                .iter()
                .filter_map(Weak::upgrade)
                .map(|p| p.reserved() as u64)
                .sum()
        };
        let sample = MemorySample {
            epoch_millis: epoch_millis(),
            execution_bytes,
            storage_bytes: self.read_cache.as_ref().map_or(0, |c| c.memory_bytes()),
            ..process
        };
        self.recorder.record(sample);
        sample
    }

    /// The samples and their peaks.
    pub(crate) fn recorder(&self) -> &MemoryRecorder {
        &self.recorder
    }
}

impl Drop for MemoryMonitor {
    fn drop(&mut self) {
        if let Some(heartbeat) = self.heartbeat.get() {
            process_updater().stop(heartbeat.as_ref());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_boundary_sample_reads_the_size_and_carries_the_heap_of_the_last_full_reading() {
        let monitor = MemoryMonitor::new(None);
        // nothing read yet: the first boundary sample reads the heap itself
        let first = monitor.sample_at_boundary();
        if cfg!(all(target_os = "linux", target_env = "gnu")) {
            assert!(first.heap_bytes > 0, "{first:?}");
        }
        // the heap grows by far more than any carried reading could hide, and than another
        // test running alongside could give back
        let held: Vec<u8> = vec![1; 128 << 20];
        let boundary = monitor.sample_at_boundary();
        assert_eq!(boundary.heap_bytes, first.heap_bytes);
        assert_eq!(boundary.file_mapped_bytes, first.file_mapped_bytes);
        if cfg!(target_os = "linux") {
            // the 128 MiB were written, so they are resident
            assert!(
                boundary.rss_bytes >= first.rss_bytes + (64 << 20),
                "{first:?} {boundary:?}"
            );
        }
        let full = monitor.sample();
        if cfg!(all(target_os = "linux", target_env = "gnu")) {
            assert!(full.heap_bytes >= first.heap_bytes + (64 << 20), "{full:?}");
        }
        assert_eq!(monitor.sample_at_boundary().heap_bytes, full.heap_bytes);
        assert_eq!(monitor.recorder().peaks().heap_bytes, full.heap_bytes);
        drop(std::hint::black_box(held));
    }
}
