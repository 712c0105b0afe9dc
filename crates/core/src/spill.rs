//! The spilling of one operator task: the files it spilled to, the bytes it wrote and read
//! back, and the time both took, counted where the files are written and read.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// The spill counters of one operator task; created the first time the task spills.
#[derive(Debug, Default)]
pub struct SpillCounters {
    files: AtomicU64,
    written_bytes: AtomicU64,
    written_rows: AtomicU64,
    write_nanos: AtomicU64,
    read_bytes: AtomicU64,
    read_nanos: AtomicU64,
}

impl SpillCounters {
    /// Counts a spill file created.
    pub fn record_file(&self) {
        self.files.fetch_add(1, Relaxed);
    }

    /// Counts `bytes` written to a spill file in `nanos`.
    pub fn record_write(&self, bytes: u64, nanos: u64) {
        self.written_bytes.fetch_add(bytes, Relaxed);
        self.write_nanos.fetch_add(nanos, Relaxed);
    }

    /// Counts `rows` written to a spill file.
    pub fn record_rows(&self, rows: u64) {
        if rows > 0 {
            self.written_rows.fetch_add(rows, Relaxed);
        }
    }

    /// Counts `bytes` read back from a spill file in `nanos`.
    pub fn record_read(&self, bytes: u64, nanos: u64) {
        self.read_bytes.fetch_add(bytes, Relaxed);
        self.read_nanos.fetch_add(nanos, Relaxed);
    }

    /// Reads every counter.
    pub fn snapshot(&self) -> SpillSnapshot {
        SpillSnapshot {
            files: self.files.load(Relaxed),
            written_bytes: self.written_bytes.load(Relaxed),
            written_rows: self.written_rows.load(Relaxed),
            write_nanos: self.write_nanos.load(Relaxed),
            read_bytes: self.read_bytes.load(Relaxed),
            read_nanos: self.read_nanos.load(Relaxed),
        }
    }
}

/// A point-in-time copy of [`SpillCounters`]. Durations are in nanoseconds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SpillSnapshot {
    /// Spill files created.
    pub files: u64,
    /// Bytes written to them.
    pub written_bytes: u64,
    /// Rows written to them.
    pub written_rows: u64,
    /// Time of the writes.
    pub write_nanos: u64,
    /// Bytes read back.
    pub read_bytes: u64,
    /// Time of the reads.
    pub read_nanos: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_add_up() {
        let spill = SpillCounters::default();
        spill.record_file();
        spill.record_file();
        spill.record_write(100, 7);
        spill.record_write(20, 3);
        spill.record_rows(9);
        spill.record_read(120, 5);
        assert_eq!(
            spill.snapshot(),
            SpillSnapshot {
                files: 2,
                written_bytes: 120,
                written_rows: 9,
                write_nanos: 10,
                read_bytes: 120,
                read_nanos: 5,
            }
        );
    }
}
