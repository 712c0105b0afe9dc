//! The catalog's entries, family by family, each family in display order.

use super::{Aggregation, Family, MetricDef, Unit};

use Aggregation::{PeakOfSum, Sum, TimeAverage};
use Family::{
    DynamicFilters, Every, FunctionCalls, Scan, ShuffleReader, ShuffleWriter, Sink, Spilling,
};
use Unit::{Batches, Bytes, BytesPerSecond, Count, Nanoseconds, Rows, Tenths};

/// A metric whose kind follows from its unit.
const fn def(
    name: &'static str,
    display: &'static str,
    unit: Unit,
    family: Family,
    aggregation: Aggregation,
    description: &'static str,
) -> MetricDef {
    MetricDef {
        name,
        display,
        kind: unit.kind(),
        unit,
        family,
        aggregation,
        description,
    }
}

// ---- every operator ----

/// Wall time inside the operator's polls.
pub const WALL_NANOS: MetricDef = def(
    "wallNanos",
    "time of {op}",
    Nanoseconds,
    Every,
    Sum,
    "Wall time inside the operator's polls, its children's polls made inline included.",
);
/// Wall time of the operator's own code.
pub const SELF_WALL_NANOS: MetricDef = def(
    "selfWallNanos",
    "self time of {op}",
    Nanoseconds,
    Every,
    Sum,
    "Wall time of the operator's own code: its polls less the polls of its children made inside them.",
);
/// CPU time inside the operator's polls.
pub const CPU_NANOS: MetricDef = def(
    "cpuNanos",
    "cpu time of {op}",
    Nanoseconds,
    Every,
    Sum,
    "CPU time inside the operator's polls, its children's polls made inline included.",
);
/// CPU time of the operator's own code.
pub const SELF_CPU_NANOS: MetricDef = def(
    "selfCpuNanos",
    "self cpu time of {op}",
    Nanoseconds,
    Every,
    Sum,
    "CPU time of the operator's own code, its children's excluded wherever they ran, work it spawned on other tasks included.",
);
/// Readings behind the time metrics.
pub const CPU_COUNT: MetricDef = def(
    "cpuCount",
    "cpu wall time count",
    Count,
    Every,
    Sum,
    "Polls that produced a batch, the readings behind the time metrics: always equal to outputVectors, kept under Gluten's name for tools that read it.",
);
/// Rows produced.
pub const OUTPUT_ROWS: MetricDef = def(
    "outputRows",
    "number of output rows",
    Rows,
    Every,
    Sum,
    "Rows the operator produced.",
);
/// Batches produced.
pub const OUTPUT_VECTORS: MetricDef = def(
    "outputVectors",
    "number of output vectors",
    Batches,
    Every,
    Sum,
    "Record batches the operator produced.",
);
/// Bytes produced.
pub const OUTPUT_BYTES: MetricDef = def(
    "outputBytes",
    "number of output bytes",
    Bytes,
    Every,
    Sum,
    "Arrow buffer memory of the batches the operator produced (a shuffle writer: the bytes it wrote).",
);
/// Peak memory reserved.
pub const PEAK_MEMORY_BYTES: MetricDef = def(
    "peakMemoryBytes",
    "peak memory bytes",
    Bytes,
    Every,
    PeakOfSum,
    "The most memory the operator held reserved from the memory pool at once.",
);
/// Heap allocations.
pub const NUM_MEMORY_ALLOCATIONS: MetricDef = def(
    "numMemoryAllocations",
    "number of memory allocations",
    Count,
    Every,
    Sum,
    "Heap allocations made while the operator's own code ran (with qprof's counting allocator installed).",
);
/// Polls of the output.
pub const NUM_POLLS: MetricDef = def(
    "numPolls",
    "numPolls",
    Count,
    Every,
    Sum,
    "Polls of the operator's output stream, those that returned pending included.",
);

/// Polls that found no batch ready.
pub const PENDING_POLLS: MetricDef = def(
    "pendingPolls",
    "number of pending polls of {op}",
    Count,
    Every,
    Sum,
    "Polls of the operator's output stream that returned pending (no batch ready yet, its consumer woken later): numPolls less the batches and the task's last poll.",
);

/// Time the operator waited on its input.
pub const INPUT_WAIT_NANOS: MetricDef = def(
    "inputWaitNanos",
    "input wait time of {op}",
    Nanoseconds,
    Every,
    Sum,
    "Time the operator's output stream waited on its input: from a poll of an operator with inputs that returned pending (its input had no batch ready: a child polled inline, or the channel its own producers fill) to its next poll. A leaf's pending polls wait on I/O (ioWaitNanos), not on an input.",
);
/// Time the operator's producers were blocked on a full output channel.
pub const OUTPUT_WAIT_NANOS: MetricDef = def(
    "outputWaitNanos",
    "output wait time of {op}",
    Nanoseconds,
    Every,
    Sum,
    "Time the tasks an operator spawned to produce its output (a repartition's or a merge's input side) were suspended with a batch in hand: from a poll of such a task that returned pending after its input gave it a batch (its output channel was full, its consumer slower) to the poll that follows. A value of no task.",
);

// ---- file scans ----

/// Read requests.
pub const READ_REQUESTS: MetricDef = def(
    "numReadRequests",
    "number of read requests",
    Count,
    Scan,
    Sum,
    "Read requests to storage (a request for several ranges is one).",
);
/// Bytes read, from every tier.
pub const READ_BYTES: MetricDef = def(
    "readBytes",
    "bytes read",
    Bytes,
    Scan,
    Sum,
    "Bytes the reads delivered, from every tier.",
);
/// Bytes read from the store.
pub const STORAGE_READ_BYTES: MetricDef = def(
    "storageReadBytes",
    "bytes read from storage",
    Bytes,
    Scan,
    Sum,
    "Bytes read from the store itself (a file system, an object store).",
);
/// Bytes read from a disk cache.
pub const LOCAL_READ_BYTES: MetricDef = def(
    "localReadBytes",
    "bytes read from local disk cache",
    Bytes,
    Scan,
    Sum,
    "Bytes read from a cache on local disk in front of the store.",
);
/// Bytes read from a memory cache.
pub const RAM_READ_BYTES: MetricDef = def(
    "ramReadBytes",
    "bytes read from memory cache",
    Bytes,
    Scan,
    Sum,
    "Bytes read from a cache in memory in front of the store.",
);
/// Time reads were in flight.
pub const DATA_SOURCE_READ_NANOS: MetricDef = def(
    "dataSourceReadNanos",
    "time of reading from data source",
    Nanoseconds,
    Scan,
    Sum,
    "Time reads were in flight, summed over reads (reads in flight together each count).",
);
/// Time blocked on reads.
pub const IO_WAIT_NANOS: MetricDef = def(
    "ioWaitNanos",
    "time of I/O wait",
    Nanoseconds,
    Scan,
    Sum,
    "Time from a poll of the scan that returned pending with reads in flight to its next poll.",
);
/// Requests without data.
pub const METADATA_REQUESTS: MetricDef = def(
    "numMetadataRequests",
    "number of metadata requests",
    Count,
    Scan,
    Sum,
    "Requests that move no data: head, list, delete, copy, rename.",
);
/// Read throughput.
pub const READ_BYTES_PER_SECOND: MetricDef = def(
    "readBytesPerSecond",
    "read throughput per second",
    BytesPerSecond,
    Scan,
    Sum,
    "Bytes read per second of the task, between its first read and its last sample.",
);
/// Mean reads in flight.
pub const AVERAGE_READ_CONCURRENCY: MetricDef = def(
    "averageReadConcurrency",
    "average read concurrency",
    Tenths,
    Scan,
    TimeAverage,
    "Reads in flight on average over the task's time, sampled periodically (Impala's bucketing counter).",
);
/// Share of time at each read concurrency, bucket by bucket (the last is that many or more).
pub const READ_CONCURRENCY_BUCKETS: [MetricDef; crate::io::CONCURRENCY_BUCKETS] = [
    def(
        "readConcurrencyBucket0Percent",
        "time at read concurrency 0 (%)",
        Tenths,
        Scan,
        TimeAverage,
        "Share of the task's samples with no read in flight.",
    ),
    def(
        "readConcurrencyBucket1Percent",
        "time at read concurrency 1 (%)",
        Tenths,
        Scan,
        TimeAverage,
        "Share of the task's samples with one read in flight.",
    ),
    def(
        "readConcurrencyBucket2Percent",
        "time at read concurrency 2 (%)",
        Tenths,
        Scan,
        TimeAverage,
        "Share of the task's samples with two reads in flight.",
    ),
    def(
        "readConcurrencyBucket3Percent",
        "time at read concurrency 3+ (%)",
        Tenths,
        Scan,
        TimeAverage,
        "Share of the task's samples with three or more reads in flight.",
    ),
];
/// Files and ranges left out.
pub const SKIPPED_SPLITS: MetricDef = def(
    "skippedSplits",
    "number of skipped splits",
    Count,
    Scan,
    Sum,
    "Files and file ranges the scan left out: by partition values while planning (a value of no task), by statistics when opening them.",
);
/// Row groups skipped.
pub const SKIPPED_STRIDES: MetricDef = def(
    "skippedStrides",
    "number of row groups skipped",
    Count,
    Scan,
    Sum,
    "Parquet row groups skipped by statistics, bloom filters, a limit or dynamic filters.",
);
/// Row groups read.
pub const PROCESSED_STRIDES: MetricDef = def(
    "processedStrides",
    "number of row groups read",
    Count,
    Scan,
    Sum,
    "Parquet row groups the statistics kept and nothing skipped later.",
);

// ---- file sinks ----

/// Write requests.
pub const WRITE_REQUESTS: MetricDef = def(
    "numWriteRequests",
    "number of write requests",
    Count,
    Sink,
    Sum,
    "Write requests to storage (a whole object, or one part of a multipart upload).",
);
/// Bytes written.
pub const PHYSICAL_WRITTEN_BYTES: MetricDef = def(
    "physicalWrittenBytes",
    "number of written bytes",
    Bytes,
    Sink,
    Sum,
    "Bytes the writes sent to storage.",
);
/// Files written.
pub const WRITTEN_FILES: MetricDef = def(
    "numWrittenFiles",
    "number of written files",
    Count,
    Sink,
    Sum,
    "Files (objects) completely written.",
);
/// Time of the writes.
pub const WRITE_IO_NANOS: MetricDef = def(
    "writeIONanos",
    "time of write I/O",
    Nanoseconds,
    Sink,
    Sum,
    "Time of the write requests, summed.",
);

// ---- spilling operators ----

/// Spill files created.
pub const SPILL_FILES_CREATED: MetricDef = def(
    "spillFilesCreated",
    "number of spill files created",
    Count,
    Spilling,
    Sum,
    "Spill files the operator created, counted where they are created.",
);
/// Bytes spilled.
pub const SPILL_WRITTEN_BYTES: MetricDef = def(
    "spillWrittenBytes",
    "bytes written to spill files",
    Bytes,
    Spilling,
    Sum,
    "Bytes written to spill files, as the files grew on disk.",
);
/// Rows spilled.
pub const SPILL_WRITTEN_ROWS: MetricDef = def(
    "spillWrittenRows",
    "rows written to spill files",
    Rows,
    Spilling,
    Sum,
    "Rows written to spill files, read from the Arrow IPC stream as it is written.",
);
/// Tasks that spilled.
pub const SPILLED_PARTITIONS: MetricDef = def(
    "spilledPartitions",
    "total spilled partitions",
    Count,
    Spilling,
    Sum,
    "Partitions (tasks) of the operator that spilled.",
);
/// Time writing spill files.
pub const SPILL_WRITE_NANOS: MetricDef = def(
    "spillWriteNanos",
    "time of writing spill files",
    Nanoseconds,
    Spilling,
    Sum,
    "Time of writing spill files.",
);
/// Bytes read back.
pub const SPILL_READ_BYTES: MetricDef = def(
    "spillReadBytes",
    "bytes read back from spill files",
    Bytes,
    Spilling,
    Sum,
    "Bytes read back from spill files.",
);
/// Time reading spill files back.
pub const SPILL_READ_NANOS: MetricDef = def(
    "spillReadNanos",
    "time of reading spill files",
    Nanoseconds,
    Spilling,
    Sum,
    "Time of reading spill files back.",
);

// ---- dynamic filters ----

/// Dynamic filters produced.
pub const DYNAMIC_FILTERS_PRODUCED: MetricDef = def(
    "numDynamicFiltersProduced",
    "number of dynamic filters produced",
    Count,
    DynamicFilters,
    Sum,
    "Dynamic filters the operator produced (a hash join, a TopK sort, an aggregate).",
);
/// Updates of the filters produced.
pub const DYNAMIC_FILTER_UPDATES: MetricDef = def(
    "numDynamicFilterUpdates",
    "number of dynamic filter updates",
    Count,
    DynamicFilters,
    Sum,
    "Updates of the dynamic filters the operator produced, after their creation.",
);
/// Dynamic filters accepted.
pub const DYNAMIC_FILTERS_ACCEPTED: MetricDef = def(
    "numDynamicFiltersAccepted",
    "number of dynamic filters accepted",
    Count,
    DynamicFilters,
    Sum,
    "Dynamic filters the operator (a scan) took in from others.",
);
/// Rows the accepted filters saved.
pub const REPLACED_WITH_DYNAMIC_FILTER_ROWS: MetricDef = def(
    "numReplacedWithDynamicFilterRows",
    "number of replaced with dynamic filter rows",
    Rows,
    DynamicFilters,
    Sum,
    "Rows the scan did not read because of the dynamic filters it accepted.",
);

// ---- shuffle readers ----

/// Local shuffle bytes.
pub const SHUFFLE_LOCAL_BYTES_READ: MetricDef = def(
    "shuffleLocalBytesRead",
    "local bytes read",
    Bytes,
    ShuffleReader,
    Sum,
    "Bytes of shuffle files the reader read from its own executor's disk, as their writers reported them.",
);
/// Remote shuffle bytes.
pub const SHUFFLE_REMOTE_BYTES_READ: MetricDef = def(
    "shuffleRemoteBytesRead",
    "remote bytes read",
    Bytes,
    ShuffleReader,
    Sum,
    "Bytes of shuffle files the reader fetched from other executors, as their writers reported them.",
);
/// Local shuffle blocks.
pub const SHUFFLE_LOCAL_BLOCKS_READ: MetricDef = def(
    "shuffleLocalBlocksRead",
    "local blocks read",
    Count,
    ShuffleReader,
    Sum,
    "Shuffle blocks (a writer task's part of a partition) the reader read from its own executor's disk.",
);
/// Remote shuffle blocks.
pub const SHUFFLE_REMOTE_BLOCKS_READ: MetricDef = def(
    "shuffleRemoteBlocksRead",
    "remote blocks read",
    Count,
    ShuffleReader,
    Sum,
    "Shuffle blocks the reader fetched from other executors.",
);
/// Fetch wait.
pub const SHUFFLE_FETCH_WAIT_NANOS: MetricDef = def(
    "shuffleFetchWaitNanos",
    "fetch wait time",
    Nanoseconds,
    ShuffleReader,
    Sum,
    "Time the reader's tasks waited on its fetches: from a poll of the reader that returned pending to the next poll (Spark's fetch wait time).",
);

// ---- shuffle writers ----

/// Time writing shuffle files.
pub const SHUFFLE_WRITE_NANOS: MetricDef = def(
    "shuffleWriteNanos",
    "shuffle write time",
    Nanoseconds,
    ShuffleWriter,
    Sum,
    "Time the writer spent encoding and writing its shuffle files, as Ballista times it (Spark's shuffle write time).",
);

// ---- function calls ----

/// A function call's CPU time, as the event log shows it.
pub const FUNCTION_CPU_NANOS: MetricDef = def(
    "functionCpuNanos",
    "cpu time of {op}",
    Nanoseconds,
    FunctionCalls,
    Sum,
    "CPU time inside the calls of one function call site of the operator, its arguments excluded (timed on every vector, or extrapolated from the vectors sampled), as a value of no task: `{op}` is the call as written, and the name ends with the call's number.",
);

/// The metrics an operator task counts by their entry ([`super::Tally`]): whatever counts
/// one calls `OperatorTaskCounters::tally`, and the profile, the wire and the event log
/// carry it with no code of their own. One of family `Every` is shown on every operator,
/// at 0 where nothing counted it; any other only on operators whose tasks counted it.
pub const TALLIED: &[&MetricDef] = &[
    &PENDING_POLLS,
    &INPUT_WAIT_NANOS,
    &OUTPUT_WAIT_NANOS,
    &SHUFFLE_FETCH_WAIT_NANOS,
];

/// The metrics the UI's plan graph leaves to the operator's panel: qprof's timers (the
/// graph shows the operator's self time instead) and the counts behind them.
pub const PANEL_ONLY: &[&MetricDef] = &[
    &WALL_NANOS,
    &SELF_WALL_NANOS,
    &CPU_NANOS,
    &SELF_CPU_NANOS,
    &CPU_COUNT,
    &OUTPUT_VECTORS,
    &NUM_MEMORY_ALLOCATIONS,
    &NUM_POLLS,
    &PENDING_POLLS,
    &INPUT_WAIT_NANOS,
    &OUTPUT_WAIT_NANOS,
];

/// Every metric of the catalog, family by family, each in display order.
pub static ALL: &[&MetricDef] = &[
    &WALL_NANOS,
    &SELF_WALL_NANOS,
    &CPU_NANOS,
    &SELF_CPU_NANOS,
    &CPU_COUNT,
    &OUTPUT_ROWS,
    &OUTPUT_VECTORS,
    &OUTPUT_BYTES,
    &PEAK_MEMORY_BYTES,
    &NUM_MEMORY_ALLOCATIONS,
    &NUM_POLLS,
    &PENDING_POLLS,
    &INPUT_WAIT_NANOS,
    &OUTPUT_WAIT_NANOS,
    &READ_REQUESTS,
    &READ_BYTES,
    &STORAGE_READ_BYTES,
    &LOCAL_READ_BYTES,
    &RAM_READ_BYTES,
    &DATA_SOURCE_READ_NANOS,
    &IO_WAIT_NANOS,
    &METADATA_REQUESTS,
    &READ_BYTES_PER_SECOND,
    &AVERAGE_READ_CONCURRENCY,
    &READ_CONCURRENCY_BUCKETS[0],
    &READ_CONCURRENCY_BUCKETS[1],
    &READ_CONCURRENCY_BUCKETS[2],
    &READ_CONCURRENCY_BUCKETS[3],
    &SKIPPED_SPLITS,
    &SKIPPED_STRIDES,
    &PROCESSED_STRIDES,
    &WRITE_REQUESTS,
    &PHYSICAL_WRITTEN_BYTES,
    &WRITTEN_FILES,
    &WRITE_IO_NANOS,
    &SPILL_FILES_CREATED,
    &SPILL_WRITTEN_BYTES,
    &SPILL_WRITTEN_ROWS,
    &SPILLED_PARTITIONS,
    &SPILL_WRITE_NANOS,
    &SPILL_READ_BYTES,
    &SPILL_READ_NANOS,
    &DYNAMIC_FILTERS_PRODUCED,
    &DYNAMIC_FILTER_UPDATES,
    &DYNAMIC_FILTERS_ACCEPTED,
    &REPLACED_WITH_DYNAMIC_FILTER_ROWS,
    &SHUFFLE_LOCAL_BYTES_READ,
    &SHUFFLE_REMOTE_BYTES_READ,
    &SHUFFLE_LOCAL_BLOCKS_READ,
    &SHUFFLE_REMOTE_BLOCKS_READ,
    &SHUFFLE_FETCH_WAIT_NANOS,
    &SHUFFLE_WRITE_NANOS,
    &FUNCTION_CPU_NANOS,
];
