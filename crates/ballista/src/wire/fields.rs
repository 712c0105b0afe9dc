//! The layouts of the records a reading packs: for each kind of snapshot, one table of its
//! numbers in wire order, each with how to read it and how to write it back. Packing and
//! unpacking both walk the same table, so they cannot disagree; a new member of a snapshot
//! is one line here (and a new pack version, `PACK_PREFIX`, as the record grows). A
//! tallied metric needs neither: it crosses by name.

use qprof_core::counters::OperatorTaskSnapshot;
use qprof_core::io::IoSnapshot;
use qprof_core::phases::PhaseSnapshot;
use qprof_core::spill::SpillSnapshot;

use super::TaskFigures;

/// One number of a record: how to read it from its snapshot and how to set it.
pub(super) struct Field<T> {
    pub(super) get: fn(&T) -> u64,
    pub(super) set: fn(&mut T, u64),
}

/// The numbers of a `T` in wire order.
pub(super) type Layout<T> = &'static [Field<T>];

/// A field per `u64` member (dotted paths reach into nested members), then any fields
/// written out (after a `;`).
macro_rules! layout {
    ($t:ty: $($($member:ident).+),+ $(; $($extra:expr),+)? $(,)?) => {
        &[$(Field::<$t> {
            get: |s| s.$($member).+,
            set: |s, v| s.$($member).+ = v,
        }),+ $(, $($extra),+)?]
    };
}

/// The values of `s` in `layout`'s order.
pub(super) fn values<T>(layout: Layout<T>, s: &T) -> impl Iterator<Item = u64> + '_ {
    layout.iter().map(move |f| (f.get)(s))
}

/// A `T` from `numbers` in `layout`'s order, each member the layout does not name at its
/// default; `None` if a number is missing.
pub(super) fn from_values<T: Default>(
    layout: Layout<T>,
    mut numbers: impl FnMut() -> Option<u64>,
) -> Option<T> {
    let mut s = T::default();
    for f in layout {
        (f.set)(&mut s, numbers()?);
    }
    Some(s)
}

/// An operator task's counters.
pub(super) const COUNTERS: Layout<OperatorTaskSnapshot> = layout!(OperatorTaskSnapshot:
    wall_nanos,
    self_wall_nanos,
    cpu_nanos,
    self_cpu_nanos,
    polls,
    output_vectors,
    output_rows,
    output_bytes,
    peak_memory_bytes,
    memory_allocations,
    started_epoch_micros,
    finished_epoch_micros,
);

/// An operator task's spill files.
pub(super) const SPILL: Layout<SpillSnapshot> = layout!(SpillSnapshot:
    files,
    written_bytes,
    written_rows,
    write_nanos,
    read_bytes,
    read_nanos,
);

/// One phase of a join task.
pub(super) const PHASE: Layout<PhaseSnapshot> = layout!(PhaseSnapshot:
    self_wall_nanos,
    self_cpu_nanos,
    input_rows,
    input_batches,
    output_rows,
    peak_memory_bytes,
    spill.files,
    spill.written_bytes,
    spill.written_rows,
    spill.write_nanos,
    spill.read_bytes,
    spill.read_nanos,
);

/// The fixed part of an operator task's I/O: its counters, and the read concurrency's
/// average (as the bits of an `f64`) and sample count. Its buckets and read rate follow
/// on the wire.
pub(super) const IO: Layout<IoSnapshot> = layout!(IoSnapshot:
    read_requests,
    read_bytes,
    read_nanos,
    storage_read_bytes,
    local_read_bytes,
    ram_read_bytes,
    write_requests,
    written_bytes,
    write_nanos,
    written_files,
    metadata_requests,
    io_wait_nanos;
    Field {
        get: |s| s.average_read_concurrency.to_bits(),
        set: |s, v| s.average_read_concurrency = f64::from_bits(v),
    },
    Field {
        get: |s| s.concurrency_samples,
        set: |s, v| s.concurrency_samples = v,
    },
);

/// A task's own figures: its span, time and memory.
pub(super) const TASK: Layout<TaskFigures> = layout!(TaskFigures:
    start_epoch_millis,
    finish_epoch_millis,
    wall_nanos,
    cpu_nanos,
    memory.execution_bytes,
    memory.heap_bytes,
    memory.storage_bytes,
    memory.file_mapped_bytes,
    memory.rss_bytes,
    memory.virtual_bytes,
);

/// The most tallies a packed counters record may claim (as many as a task can count).
pub(super) const MAX_TALLIES: u64 = qprof_core::catalog::TALLY_SLOTS as u64;

/// The most concurrency buckets a packed I/O record may claim (a damaged count must not
/// make the reader allocate without bound).
pub(super) const MAX_BUCKETS: u64 = 64;
