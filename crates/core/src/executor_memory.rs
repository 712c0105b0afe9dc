//! The memory of an executor (in one process, the process itself), by region, sampled on
//! heartbeats and at stage starts, with its peaks.
//!
//! A Rust engine has no JVM heap: its regions are the allocator's heap in use, the
//! engine's execution memory (reserved from its memory pool by operators), its storage
//! memory (caches), file-backed resident memory, and the process's resident and virtual
//! size. The Spark executor-metric slot each one fills is the event log's business.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};

/// Profiled queries running in this process now, and started since it began: they share
/// its heap, so one query's heap growth is its own only when it ran alone.
static QUERIES_RUNNING: AtomicU64 = AtomicU64::new(0);
static QUERIES_STARTED: AtomicU64 = AtomicU64::new(0);

/// A query's turn on the process's heap, from its start until it is dropped: it tells how
/// many other queries ran beside it.
#[derive(Debug)]
pub struct QueryTurn {
    started_before: u64,
    running_at_start: u64,
}

impl QueryTurn {
    /// A query starts.
    pub fn begin() -> QueryTurn {
        let started_before = QUERIES_STARTED.fetch_add(1, Ordering::SeqCst);
        let running_at_start = QUERIES_RUNNING.fetch_add(1, Ordering::SeqCst);
        QueryTurn {
            started_before,
            running_at_start,
        }
    }

    /// The other queries that ran at some time while this one did so far: those running
    /// when it started and those started since.
    pub fn others(&self) -> u32 {
        let started_since = QUERIES_STARTED
            .load(Ordering::SeqCst)
            .saturating_sub(self.started_before + 1);
        u32::try_from(self.running_at_start.saturating_add(started_since)).unwrap_or(u32::MAX)
    }
}

impl Drop for QueryTurn {
    fn drop(&mut self) {
        QUERIES_RUNNING.fetch_sub(1, Ordering::SeqCst);
    }
}

/// One reading of an executor's memory. Sizes in bytes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MemorySample {
    /// When it was read, in milliseconds since the Unix epoch (0 in a peak).
    pub epoch_millis: u64,
    /// Heap in use: bytes the allocator handed out and not yet got back.
    pub heap_bytes: u64,
    /// Execution memory: reserved from the engine's memory pools by operators.
    pub execution_bytes: u64,
    /// Storage memory: held by caches (read cache, file metadata).
    pub storage_bytes: u64,
    /// Resident memory backed by files (the binary's pages, memory-mapped files).
    pub file_mapped_bytes: u64,
    /// Resident set size of the process.
    pub rss_bytes: u64,
    /// Virtual size of the process.
    pub virtual_bytes: u64,
}

impl MemorySample {
    /// Execution and storage memory together (Spark's "unified" memory).
    pub fn unified_bytes(&self) -> u64 {
        self.execution_bytes.saturating_add(self.storage_bytes)
    }

    /// The larger of each region of `self` and `other` (time: the later).
    pub fn max(self, other: MemorySample) -> MemorySample {
        MemorySample {
            epoch_millis: self.epoch_millis.max(other.epoch_millis),
            heap_bytes: self.heap_bytes.max(other.heap_bytes),
            execution_bytes: self.execution_bytes.max(other.execution_bytes),
            storage_bytes: self.storage_bytes.max(other.storage_bytes),
            file_mapped_bytes: self.file_mapped_bytes.max(other.file_mapped_bytes),
            rss_bytes: self.rss_bytes.max(other.rss_bytes),
            virtual_bytes: self.virtual_bytes.max(other.virtual_bytes),
        }
    }

    /// The peaks of `samples`, each region's largest value (all 0 if there are none).
    pub fn peaks<'a>(samples: impl IntoIterator<Item = &'a MemorySample>) -> MemorySample {
        samples
            .into_iter()
            .fold(MemorySample::default(), |peak, s| peak.max(*s))
    }
}

/// The process's own regions: heap in use, file-backed resident, resident and virtual size
/// (0 where the platform does not say).
pub fn process_memory() -> MemorySample {
    MemorySample {
        heap_bytes: heap_in_use(),
        file_mapped_bytes: file_backed_resident(),
        ..process_size()
    }
}

/// The process's resident and virtual size, from one read of `/proc/self/statm`, the other
/// regions left at 0. This is the reading to take often (as each task ends, say): the heap
/// (glibc's `mallinfo2` walks every arena's free lists and consolidates its fast bins)
/// and the file-backed pages (`/proc/self/status`, formatted whole) cost ten times more
/// and change slowly.
pub fn process_size() -> MemorySample {
    let (rss_bytes, virtual_bytes) = resident_and_virtual();
    MemorySample {
        rss_bytes,
        virtual_bytes,
        ..MemorySample::default()
    }
}

/// Reads the process's regions over and over, as a heartbeat does: each time afresh but
/// for the heap, which it reads at most so often that reading it takes a thousandth of one
/// core. On a fragmented heap, whose free lists `mallinfo2` walks, one reading can take
/// milliseconds; until the wait it asks for has passed, the last reading stands.
#[derive(Debug)]
pub struct ProcessMemoryReader {
    heap: Mutex<SpacedReading>,
    started: std::time::Instant,
}

impl Default for ProcessMemoryReader {
    fn default() -> Self {
        ProcessMemoryReader {
            heap: Mutex::new(SpacedReading::new()),
            started: std::time::Instant::now(),
        }
    }
}

impl ProcessMemoryReader {
    /// Every region, the heap as read last if a reading is not due yet.
    pub fn read(&self) -> MemorySample {
        let now = u64::try_from(self.started.elapsed().as_nanos()).unwrap_or(u64::MAX);
        let heap_bytes = self
            .heap
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .read(now, || {
                let cpu = crate::clock::thread_cpu_nanos();
                let bytes = heap_in_use();
                (bytes, crate::clock::thread_cpu_nanos().saturating_sub(cpu))
            });
        MemorySample {
            heap_bytes,
            file_mapped_bytes: file_backed_resident(),
            ..process_size()
        }
    }
}

/// A reading that costs enough to be spaced by its cost: one that took `c` of CPU time is
/// reused for `c × SPACING` before it is taken again, so readings take at most one
/// `SPACING`th of a core however costly each is.
#[derive(Debug)]
struct SpacedReading {
    value: u64,
    /// When the next reading is due (the clock's nanoseconds); 0 before the first.
    due: u64,
}

impl SpacedReading {
    /// Wall time waited per unit of CPU time a reading took.
    const SPACING: u64 = 1_000;

    const fn new() -> Self {
        SpacedReading { value: 0, due: 0 }
    }

    /// The value at `now`: `read`'s (which returns it and the CPU nanoseconds it took) if
    /// a reading is due, else the last one.
    fn read(&mut self, now: u64, read: impl FnOnce() -> (u64, u64)) -> u64 {
        if now >= self.due {
            let (value, cost) = read();
            self.value = value;
            self.due = now.saturating_add(cost.saturating_mul(Self::SPACING));
        }
        self.value
    }
}

/// Bytes the C allocator has handed out and not got back: small chunks in use plus chunks
/// it mapped on their own (glibc's `mallinfo2`).
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn heap_in_use() -> u64 {
    // SAFETY: mallinfo2 only reads the allocator's statistics and returns them by value.
    let info = unsafe { libc::mallinfo2() };
    (info.uordblks as u64).saturating_add(info.hblkhd as u64)
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn heap_in_use() -> u64 {
    0
}

/// Gives the C allocator's free memory back to the system (glibc's `malloc_trim`), for a
/// process that just dropped a lot (without it, freed memory stays resident); returns
/// whether any was given back. A no-op elsewhere.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
pub fn release_free_heap() -> bool {
    // SAFETY: malloc_trim only rearranges the allocator's free lists; no pointer the
    // program holds is affected.
    unsafe { libc::malloc_trim(0) == 1 }
}

/// Gives the C allocator's free memory back to the system (glibc only); a no-op here.
#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
pub fn release_free_heap() -> bool {
    false
}

/// Resident and virtual size from `/proc/self/statm` (pages).
fn resident_and_virtual() -> (u64, u64) {
    let mut buffer = [0u8; 128];
    let Some(statm) = read_statm(&mut buffer) else {
        return (0, 0);
    };
    let mut fields = statm
        .split_whitespace()
        .map(|f| f.parse::<u64>().unwrap_or(0));
    let (size, resident) = (fields.next().unwrap_or(0), fields.next().unwrap_or(0));
    let page = page_size();
    (resident * page, size * page)
}

/// `/proc/self/statm` read into `buffer` through one handle opened on the first call and
/// kept: procfs formats the file anew for every read from its start, so each reading is one
/// `pread` instead of the five calls of opening, sizing, reading and closing it (about
/// 1.3 µs against 6–7 µs on a 2-vCPU virtual machine; it is read as every task ends).
#[cfg(unix)]
fn read_statm(buffer: &mut [u8]) -> Option<&str> {
    use std::os::unix::fs::FileExt;
    static STATM: std::sync::OnceLock<Option<std::fs::File>> = std::sync::OnceLock::new();
    let file = STATM
        .get_or_init(|| std::fs::File::open("/proc/self/statm").ok())
        .as_ref()?;
    let len = file.read_at(buffer, 0).ok()?;
    std::str::from_utf8(&buffer[..len]).ok()
}

#[cfg(not(unix))]
fn read_statm(_buffer: &mut [u8]) -> Option<&str> {
    None
}

/// Resident bytes backed by files: `/proc/self/status`'s `RssFile`.
fn file_backed_resident() -> u64 {
    let Ok(status) = std::fs::read_to_string("/proc/self/status") else {
        return 0;
    };
    status
        .lines()
        .find(|l| l.starts_with("RssFile:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|kib| kib.parse::<u64>().ok())
        .map_or(0, |kib| kib * 1024)
}

#[cfg(unix)]
fn page_size() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let size = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    u64::try_from(size).unwrap_or(4096)
}

#[cfg(not(unix))]
fn page_size() -> u64 {
    4096
}

/// The samples of one executor over its life, at most `capacity` of them (older ones
/// thinned to every other when full), and its peaks over all samples ever taken.
#[derive(Debug)]
pub struct MemoryRecorder {
    capacity: usize,
    state: Mutex<Recorded>,
}

#[derive(Debug, Default)]
struct Recorded {
    samples: Vec<MemorySample>,
    peaks: MemorySample,
}

impl MemoryRecorder {
    /// A recorder keeping at most `capacity` samples (at least 2).
    pub fn new(capacity: usize) -> Self {
        Self {
            capacity: capacity.max(2),
            state: Mutex::new(Recorded::default()),
        }
    }

    /// Keeps `sample`.
    pub fn record(&self, sample: MemorySample) {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        state.peaks = state.peaks.max(sample);
        if state.samples.len() == self.capacity {
            let thinned: Vec<MemorySample> = state.samples.iter().copied().step_by(2).collect();
            state.samples = thinned;
        }
        // kept in time order, so that a window is found by binary search: a sample read on
        // one thread can take the lock after a later one read on another, so it goes after
        // the last one not later than it (at the end, nearly always)
        let at = state
            .samples
            .partition_point(|s| s.epoch_millis <= sample.epoch_millis);
        state.samples.insert(at, sample);
    }

    /// The kept samples taken from `from_millis` to `to_millis` (inclusive), oldest first.
    /// Found by binary search: every task's end asks, and an executor keeps thousands.
    pub fn between(&self, from_millis: u64, to_millis: u64) -> Vec<MemorySample> {
        let state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        window(&state.samples, from_millis, to_millis).to_vec()
    }

    /// The last sample taken at or before `millis`, if any is kept.
    pub fn last_before(&self, millis: u64) -> Option<MemorySample> {
        let state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        let after = state.samples.partition_point(|s| s.epoch_millis <= millis);
        after.checked_sub(1).map(|i| state.samples[i])
    }

    /// Each region's peak over the samples taken from `from_millis` to `to_millis` and the
    /// last one before (what was in use when the span began), under one lock and without
    /// copying them; `None` if there is no such sample.
    pub fn peaks_between(&self, from_millis: u64, to_millis: u64) -> Option<MemorySample> {
        let state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        let samples = &state.samples;
        let window = window(samples, from_millis, to_millis);
        let before = samples
            .partition_point(|s| s.epoch_millis <= from_millis)
            .checked_sub(1)
            .map(|i| &samples[i]);
        (!window.is_empty() || before.is_some())
            .then(|| MemorySample::peaks(window.iter().chain(before)))
    }

    /// The latest sample kept, if any.
    pub fn last(&self) -> Option<MemorySample> {
        let state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        state.samples.last().copied()
    }

    /// Each region's largest value over every sample recorded.
    pub fn peaks(&self) -> MemorySample {
        self.state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .peaks
    }
}

/// The samples (in time order) taken from `from_millis` to `to_millis`, inclusive.
fn window(samples: &[MemorySample], from_millis: u64, to_millis: u64) -> &[MemorySample] {
    let start = samples.partition_point(|s| s.epoch_millis < from_millis);
    let end = samples.partition_point(|s| s.epoch_millis <= to_millis);
    &samples[start..end.max(start)]
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn sample(t: u64, heap: u64, execution: u64) -> MemorySample {
        MemorySample {
            epoch_millis: t,
            heap_bytes: heap,
            execution_bytes: execution,
            ..MemorySample::default()
        }
    }

    #[test]
    fn a_window_sees_its_samples_and_peaks_are_per_region() {
        let r = MemoryRecorder::new(100);
        r.record(sample(10, 5, 100));
        r.record(sample(20, 50, 10));
        r.record(sample(30, 7, 7));
        let window = r.between(15, 30);
        assert_eq!(window.len(), 2);
        let peaks = MemorySample::peaks(&window);
        assert_eq!((peaks.heap_bytes, peaks.execution_bytes), (50, 10));
        assert_eq!(r.peaks().execution_bytes, 100);
        assert_eq!(r.last_before(25), Some(sample(20, 50, 10)));
        assert_eq!(r.last_before(5), None);
    }

    #[test]
    fn a_costly_reading_is_spaced_by_its_cost() {
        use super::SpacedReading;
        let mut reading = SpacedReading::new();
        let mut taken = Vec::new();
        // readings a second apart: the first costs 5 ms (due again 5 s later), the
        // next 0.1 ms (due at every later call)
        let mut costs = [5_000_000_u64, 100_000, 100_000].into_iter();
        for second in 0..9_u64 {
            let now = second * 1_000_000_000;
            let value = reading.read(now, || {
                taken.push(second);
                (second, costs.next().unwrap_or(100_000))
            });
            assert_eq!(value, *taken.last().unwrap());
        }
        assert_eq!(taken, [0, 5, 6, 7, 8]);
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn the_process_reads_plausibly() {
        let buffer = vec![1u8; 32 << 20];
        std::hint::black_box(&buffer);
        let m = process_memory();
        assert!(m.rss_bytes >= 32 << 20, "{m:?}");
        assert!(m.virtual_bytes >= m.rss_bytes);
        assert!(m.file_mapped_bytes <= m.rss_bytes);
        #[cfg(target_env = "gnu")]
        assert!(m.heap_bytes >= 32 << 20, "{m:?}");
    }

    #[test]
    fn each_size_reading_is_fresh_through_the_kept_handle() {
        let before = process_size();
        // larger than any other test's buffer, so that one allocated alongside cannot hide it
        let buffer = vec![1u8; 128 << 20];
        std::hint::black_box(&buffer);
        let during = process_size();
        drop(buffer);
        let after = process_size();
        assert!(
            during.rss_bytes >= before.rss_bytes + (64 << 20),
            "{before:?} {during:?}"
        );
        assert!(
            after.rss_bytes + (64 << 20) <= during.rss_bytes,
            "{during:?} {after:?}"
        );
    }

    proptest! {
        #[test]
        fn lifetime_peaks_survive_thinning(values in proptest::collection::vec(0_u64..1_000, 1..200)) {
            let r = MemoryRecorder::new(8);
            for (t, v) in values.iter().enumerate() {
                r.record(sample(t as u64, *v, 0));
            }
            prop_assert_eq!(r.peaks().heap_bytes, *values.iter().max().unwrap());
            prop_assert!(r.between(0, u64::MAX).len() <= 8);
        }

        #[test]
        fn windows_match_a_scan_of_every_sample_in_any_arrival_order(
            times in proptest::collection::vec(0_u64..50, 0..60),
            from in 0_u64..60,
            width in 0_u64..30,
        ) {
            // room for every sample: nothing is thinned
            let r = MemoryRecorder::new(100);
            let recorded: Vec<MemorySample> = times
                .iter()
                .enumerate()
                .map(|(i, &t)| sample(t, i as u64, 0))
                .collect();
            for s in &recorded {
                r.record(*s);
            }
            let to = from + width;
            // the window: every sample in it, by time, equal times in arrival order
            let mut expected: Vec<MemorySample> = recorded
                .iter()
                .filter(|s| (from..=to).contains(&s.epoch_millis))
                .copied()
                .collect();
            expected.sort_by_key(|s| s.epoch_millis);
            prop_assert_eq!(r.between(from, to), expected.clone());
            // the latest sample at or before `from`, the last to arrive among equals
            let before = recorded
                .iter()
                .filter(|s| s.epoch_millis <= from)
                .max_by_key(|s| (s.epoch_millis, s.heap_bytes))
                .copied();
            prop_assert_eq!(r.last_before(from), before);
            let mut spanned = expected.clone();
            spanned.extend(before);
            let peaks = (!spanned.is_empty()).then(|| MemorySample::peaks(&spanned));
            prop_assert_eq!(r.peaks_between(from, to), peaks);
            let latest = recorded.iter().max_by_key(|s| (s.epoch_millis, s.heap_bytes)).copied();
            prop_assert_eq!(r.last(), latest);
        }
    }
}
