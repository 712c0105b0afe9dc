//! Names of the base metrics every operator has, and of the I/O metrics of operators that
//! touch storage.

/// Wall time inside the operator's polls, children polled inline included (ns).
pub const WALL_NANOS: &str = "wallNanos";
/// Wall time of the operator's own code (ns).
pub const SELF_WALL_NANOS: &str = "selfWallNanos";
/// CPU time inside the operator's polls, children polled inline included (ns).
pub const CPU_NANOS: &str = "cpuNanos";
/// CPU time of the operator's own code, children excluded wherever they ran (ns).
pub const SELF_CPU_NANOS: &str = "selfCpuNanos";
/// Polls that produced a batch.
pub const CPU_COUNT: &str = "cpuCount";
/// Rows produced.
pub const OUTPUT_ROWS: &str = "outputRows";
/// Batches produced.
pub const OUTPUT_VECTORS: &str = "outputVectors";
/// Bytes produced.
pub const OUTPUT_BYTES: &str = "outputBytes";
/// Peak memory reserved by the operator.
pub const PEAK_MEMORY_BYTES: &str = "peakMemoryBytes";
/// Heap allocations made while the operator's code ran.
pub const NUM_MEMORY_ALLOCATIONS: &str = "numMemoryAllocations";
/// Read requests to storage.
pub const READ_REQUESTS: &str = "numReadRequests";
/// Bytes the reads delivered, from every tier.
pub const READ_BYTES: &str = "readBytes";
/// Bytes read from the store itself.
pub const STORAGE_READ_BYTES: &str = "storageReadBytes";
/// Bytes read from a local disk cache.
pub const LOCAL_READ_BYTES: &str = "localReadBytes";
/// Bytes read from a memory cache.
pub const RAM_READ_BYTES: &str = "ramReadBytes";
/// Time reads were in flight, summed over reads (ns).
pub const DATA_SOURCE_READ_NANOS: &str = "dataSourceReadNanos";
/// Time the operator's polls were blocked on its reads (ns).
pub const IO_WAIT_NANOS: &str = "ioWaitNanos";
/// Requests that move no data (head, list, delete, copy).
pub const METADATA_REQUESTS: &str = "numMetadataRequests";
/// Bytes read per second.
pub const READ_BYTES_PER_SECOND: &str = "readBytesPerSecond";
/// Time average of reads in flight (Spark `average`: tenths).
pub const AVERAGE_READ_CONCURRENCY: &str = "averageReadConcurrency";
/// Share of time at each read concurrency; as metrics `readConcurrencyBucket{i}Percent`,
/// and as Impala's info string under this key.
pub const READ_CONCURRENCY_BUCKET: &str = "readConcurrencyBucket";
/// Write requests (whole objects or parts).
pub const WRITE_REQUESTS: &str = "numWriteRequests";
/// Bytes sent to storage by writes.
pub const PHYSICAL_WRITTEN_BYTES: &str = "physicalWrittenBytes";
/// Files (objects) completely written.
pub const WRITTEN_FILES: &str = "numWrittenFiles";
/// Time of the write requests (ns).
pub const WRITE_IO_NANOS: &str = "writeIONanos";
/// Spill files an operator created (counted where they are created).
pub const SPILL_FILES_CREATED: &str = "spillFilesCreated";
/// Bytes written to spill files.
pub const SPILL_WRITTEN_BYTES: &str = "spillWrittenBytes";
/// Rows written to spill files (read from the Arrow IPC stream as it is written).
pub const SPILL_WRITTEN_ROWS: &str = "spillWrittenRows";
/// Partitions (tasks) of an operator that spilled.
pub const SPILLED_PARTITIONS: &str = "spilledPartitions";
/// Time of writing spill files (ns).
pub const SPILL_WRITE_NANOS: &str = "spillWriteNanos";
/// Bytes read back from spill files.
pub const SPILL_READ_BYTES: &str = "spillReadBytes";
/// Time of reading spill files back (ns).
pub const SPILL_READ_NANOS: &str = "spillReadNanos";
/// Files and file ranges a scan left out: by partition values while planning, by
/// statistics when opening them.
pub const SKIPPED_SPLITS: &str = "skippedSplits";
/// Dynamic filters an operator produced (hash join, TopK sort, aggregate).
pub const DYNAMIC_FILTERS_PRODUCED: &str = "numDynamicFiltersProduced";
/// Dynamic filters an operator (a scan) took in from others.
pub const DYNAMIC_FILTERS_ACCEPTED: &str = "numDynamicFiltersAccepted";
/// Updates of the dynamic filters an operator produced, after their creation.
pub const DYNAMIC_FILTER_UPDATES: &str = "numDynamicFilterUpdates";
/// Rows a scan did not read because of the dynamic filters it accepted.
pub const REPLACED_WITH_DYNAMIC_FILTER_ROWS: &str = "numReplacedWithDynamicFilterRows";
/// Info key naming the operators whose dynamic filters an operator took in.
pub const DYNAMIC_FILTER_PRODUCERS: &str = "dynamicFilterProducers";
/// Bytes of shuffle files a shuffle reader read from its own executor's disk.
pub const SHUFFLE_LOCAL_BYTES_READ: &str = "shuffleLocalBytesRead";
/// Bytes of shuffle files a shuffle reader fetched from other executors.
pub const SHUFFLE_REMOTE_BYTES_READ: &str = "shuffleRemoteBytesRead";
/// Shuffle files (blocks) a shuffle reader read from its own executor's disk.
pub const SHUFFLE_LOCAL_BLOCKS_READ: &str = "shuffleLocalBlocksRead";
/// Shuffle files (blocks) a shuffle reader fetched from other executors.
pub const SHUFFLE_REMOTE_BLOCKS_READ: &str = "shuffleRemoteBlocksRead";
/// Time a shuffle writer spent writing its files (ns).
pub const SHUFFLE_WRITE_NANOS: &str = "shuffleWriteNanos";
/// Time a shuffle reader's consumer waited on its fetches: from a poll of the reader that
/// returned pending to the next poll (ns).
pub const SHUFFLE_FETCH_WAIT_NANOS: &str = "shuffleFetchWaitNanos";
/// The metric-name prefixes of the two phases of each kind of join, build (or held)
/// side first: `hashBuildInputRows`, `hashProbeWallNanos`, ...
pub const JOIN_PHASE_PREFIXES: [(&str, &str); 6] = [
    ("hashBuild", "hashProbe"),
    ("crossBuild", "crossProbe"),
    ("nestedLoopBuild", "nestedLoopProbe"),
    ("piecewiseMergeBuffered", "piecewiseMergeStream"),
    ("sortMergeBuffered", "sortMergeStream"),
    ("symmetricHashLeft", "symmetricHashRight"),
];
/// All base metric names, in display order.
pub const BASE: [&str; 10] = [
    WALL_NANOS,
    SELF_WALL_NANOS,
    CPU_NANOS,
    SELF_CPU_NANOS,
    CPU_COUNT,
    OUTPUT_ROWS,
    OUTPUT_VECTORS,
    OUTPUT_BYTES,
    PEAK_MEMORY_BYTES,
    NUM_MEMORY_ALLOCATIONS,
];
