//! The fixed layouts of the counters a reading packs: which number is which field.

use qprof_core::counters::OperatorTaskSnapshot;
use qprof_core::io::IoSnapshot;
use qprof_core::phases::PhaseSnapshot;
use qprof_core::spill::SpillSnapshot;

pub(super) fn counter_fields(s: &OperatorTaskSnapshot) -> [u64; 12] {
    [
        s.wall_nanos,
        s.self_wall_nanos,
        s.cpu_nanos,
        s.self_cpu_nanos,
        s.polls,
        s.output_vectors,
        s.output_rows,
        s.output_bytes,
        s.peak_memory_bytes,
        s.memory_allocations,
        s.started_epoch_millis,
        s.finished_epoch_millis,
    ]
}

pub(super) fn counters(f: [u64; 12]) -> OperatorTaskSnapshot {
    OperatorTaskSnapshot {
        wall_nanos: f[0],
        self_wall_nanos: f[1],
        cpu_nanos: f[2],
        self_cpu_nanos: f[3],
        polls: f[4],
        output_vectors: f[5],
        output_rows: f[6],
        output_bytes: f[7],
        peak_memory_bytes: f[8],
        memory_allocations: f[9],
        started_epoch_millis: f[10],
        finished_epoch_millis: f[11],
    }
}

pub(super) fn spill_fields(s: &SpillSnapshot) -> [u64; 6] {
    [
        s.files,
        s.written_bytes,
        s.written_rows,
        s.write_nanos,
        s.read_bytes,
        s.read_nanos,
    ]
}

pub(super) fn spill(f: &[u64]) -> SpillSnapshot {
    SpillSnapshot {
        files: f[0],
        written_bytes: f[1],
        written_rows: f[2],
        write_nanos: f[3],
        read_bytes: f[4],
        read_nanos: f[5],
    }
}

pub(super) fn phase_fields(p: &PhaseSnapshot) -> [u64; 12] {
    let s = spill_fields(&p.spill);
    [
        p.self_wall_nanos,
        p.self_cpu_nanos,
        p.input_rows,
        p.input_batches,
        p.output_rows,
        p.peak_memory_bytes,
        s[0],
        s[1],
        s[2],
        s[3],
        s[4],
        s[5],
    ]
}

pub(super) fn phase(f: &[u64]) -> PhaseSnapshot {
    PhaseSnapshot {
        self_wall_nanos: f[0],
        self_cpu_nanos: f[1],
        input_rows: f[2],
        input_batches: f[3],
        output_rows: f[4],
        peak_memory_bytes: f[5],
        spill: spill(&f[6..12]),
    }
}

pub(super) fn io_fields(s: &IoSnapshot) -> [u64; 14] {
    [
        s.read_requests,
        s.read_bytes,
        s.read_nanos,
        s.storage_read_bytes,
        s.local_read_bytes,
        s.ram_read_bytes,
        s.write_requests,
        s.written_bytes,
        s.write_nanos,
        s.written_files,
        s.metadata_requests,
        s.io_wait_nanos,
        s.average_read_concurrency.to_bits(),
        s.concurrency_samples,
    ]
}

/// The most concurrency buckets a packed I/O record may claim (a damaged count must not
/// make the reader allocate without bound).
pub(super) const MAX_BUCKETS: u64 = 64;
