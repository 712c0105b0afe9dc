//! The names of the catalog's metrics as plain strings (see [`crate::catalog`] for what
//! each measures), and the info keys and name prefixes that are not metrics.

use crate::catalog;

/// [`catalog::WALL_NANOS`]'s name.
pub const WALL_NANOS: &str = catalog::WALL_NANOS.name;
/// [`catalog::SELF_WALL_NANOS`]'s name.
pub const SELF_WALL_NANOS: &str = catalog::SELF_WALL_NANOS.name;
/// [`catalog::CPU_NANOS`]'s name.
pub const CPU_NANOS: &str = catalog::CPU_NANOS.name;
/// [`catalog::SELF_CPU_NANOS`]'s name.
pub const SELF_CPU_NANOS: &str = catalog::SELF_CPU_NANOS.name;
/// [`catalog::CPU_COUNT`]'s name.
pub const CPU_COUNT: &str = catalog::CPU_COUNT.name;
/// [`catalog::OUTPUT_ROWS`]'s name.
pub const OUTPUT_ROWS: &str = catalog::OUTPUT_ROWS.name;
/// [`catalog::OUTPUT_VECTORS`]'s name.
pub const OUTPUT_VECTORS: &str = catalog::OUTPUT_VECTORS.name;
/// [`catalog::OUTPUT_BYTES`]'s name.
pub const OUTPUT_BYTES: &str = catalog::OUTPUT_BYTES.name;
/// [`catalog::PEAK_MEMORY_BYTES`]'s name.
pub const PEAK_MEMORY_BYTES: &str = catalog::PEAK_MEMORY_BYTES.name;
/// [`catalog::NUM_MEMORY_ALLOCATIONS`]'s name.
pub const NUM_MEMORY_ALLOCATIONS: &str = catalog::NUM_MEMORY_ALLOCATIONS.name;
/// [`catalog::NUM_POLLS`]'s name.
pub const NUM_POLLS: &str = catalog::NUM_POLLS.name;
/// [`catalog::READ_REQUESTS`]'s name.
pub const READ_REQUESTS: &str = catalog::READ_REQUESTS.name;
/// [`catalog::READ_BYTES`]'s name.
pub const READ_BYTES: &str = catalog::READ_BYTES.name;
/// [`catalog::STORAGE_READ_BYTES`]'s name.
pub const STORAGE_READ_BYTES: &str = catalog::STORAGE_READ_BYTES.name;
/// [`catalog::LOCAL_READ_BYTES`]'s name.
pub const LOCAL_READ_BYTES: &str = catalog::LOCAL_READ_BYTES.name;
/// [`catalog::RAM_READ_BYTES`]'s name.
pub const RAM_READ_BYTES: &str = catalog::RAM_READ_BYTES.name;
/// [`catalog::DATA_SOURCE_READ_NANOS`]'s name.
pub const DATA_SOURCE_READ_NANOS: &str = catalog::DATA_SOURCE_READ_NANOS.name;
/// [`catalog::INPUT_WAIT_NANOS`]'s name.
pub const INPUT_WAIT_NANOS: &str = catalog::INPUT_WAIT_NANOS.name;
/// [`catalog::OUTPUT_WAIT_NANOS`]'s name.
pub const OUTPUT_WAIT_NANOS: &str = catalog::OUTPUT_WAIT_NANOS.name;
/// [`catalog::IO_WAIT_NANOS`]'s name.
pub const IO_WAIT_NANOS: &str = catalog::IO_WAIT_NANOS.name;
/// [`catalog::METADATA_REQUESTS`]'s name.
pub const METADATA_REQUESTS: &str = catalog::METADATA_REQUESTS.name;
/// [`catalog::READ_BYTES_PER_SECOND`]'s name.
pub const READ_BYTES_PER_SECOND: &str = catalog::READ_BYTES_PER_SECOND.name;
/// [`catalog::AVERAGE_READ_CONCURRENCY`]'s name.
pub const AVERAGE_READ_CONCURRENCY: &str = catalog::AVERAGE_READ_CONCURRENCY.name;
/// Share of time at each read concurrency; as metrics `readConcurrencyBucket{i}Percent`,
/// and as Impala's info string under this key.
pub const READ_CONCURRENCY_BUCKET: &str = "readConcurrencyBucket";
/// [`catalog::WRITE_REQUESTS`]'s name.
pub const WRITE_REQUESTS: &str = catalog::WRITE_REQUESTS.name;
/// [`catalog::PHYSICAL_WRITTEN_BYTES`]'s name.
pub const PHYSICAL_WRITTEN_BYTES: &str = catalog::PHYSICAL_WRITTEN_BYTES.name;
/// [`catalog::WRITTEN_FILES`]'s name.
pub const WRITTEN_FILES: &str = catalog::WRITTEN_FILES.name;
/// [`catalog::WRITE_IO_NANOS`]'s name.
pub const WRITE_IO_NANOS: &str = catalog::WRITE_IO_NANOS.name;
/// [`catalog::SPILL_FILES_CREATED`]'s name.
pub const SPILL_FILES_CREATED: &str = catalog::SPILL_FILES_CREATED.name;
/// [`catalog::SPILL_WRITTEN_BYTES`]'s name.
pub const SPILL_WRITTEN_BYTES: &str = catalog::SPILL_WRITTEN_BYTES.name;
/// [`catalog::SPILL_WRITTEN_ROWS`]'s name.
pub const SPILL_WRITTEN_ROWS: &str = catalog::SPILL_WRITTEN_ROWS.name;
/// [`catalog::SPILLED_PARTITIONS`]'s name.
pub const SPILLED_PARTITIONS: &str = catalog::SPILLED_PARTITIONS.name;
/// [`catalog::SPILL_WRITE_NANOS`]'s name.
pub const SPILL_WRITE_NANOS: &str = catalog::SPILL_WRITE_NANOS.name;
/// [`catalog::SPILL_READ_BYTES`]'s name.
pub const SPILL_READ_BYTES: &str = catalog::SPILL_READ_BYTES.name;
/// [`catalog::SPILL_READ_NANOS`]'s name.
pub const SPILL_READ_NANOS: &str = catalog::SPILL_READ_NANOS.name;
/// [`catalog::SKIPPED_SPLITS`]'s name.
pub const SKIPPED_SPLITS: &str = catalog::SKIPPED_SPLITS.name;
/// [`catalog::SKIPPED_STRIDES`]'s name.
pub const SKIPPED_STRIDES: &str = catalog::SKIPPED_STRIDES.name;
/// [`catalog::PROCESSED_STRIDES`]'s name.
pub const PROCESSED_STRIDES: &str = catalog::PROCESSED_STRIDES.name;
/// [`catalog::DYNAMIC_FILTERS_PRODUCED`]'s name.
pub const DYNAMIC_FILTERS_PRODUCED: &str = catalog::DYNAMIC_FILTERS_PRODUCED.name;
/// [`catalog::DYNAMIC_FILTERS_ACCEPTED`]'s name.
pub const DYNAMIC_FILTERS_ACCEPTED: &str = catalog::DYNAMIC_FILTERS_ACCEPTED.name;
/// [`catalog::DYNAMIC_FILTER_UPDATES`]'s name.
pub const DYNAMIC_FILTER_UPDATES: &str = catalog::DYNAMIC_FILTER_UPDATES.name;
/// [`catalog::REPLACED_WITH_DYNAMIC_FILTER_ROWS`]'s name.
pub const REPLACED_WITH_DYNAMIC_FILTER_ROWS: &str = catalog::REPLACED_WITH_DYNAMIC_FILTER_ROWS.name;
/// Info key naming the operators whose dynamic filters an operator took in.
pub const DYNAMIC_FILTER_PRODUCERS: &str = "dynamicFilterProducers";
/// [`catalog::SHUFFLE_LOCAL_BYTES_READ`]'s name.
pub const SHUFFLE_LOCAL_BYTES_READ: &str = catalog::SHUFFLE_LOCAL_BYTES_READ.name;
/// [`catalog::SHUFFLE_REMOTE_BYTES_READ`]'s name.
pub const SHUFFLE_REMOTE_BYTES_READ: &str = catalog::SHUFFLE_REMOTE_BYTES_READ.name;
/// [`catalog::SHUFFLE_LOCAL_BLOCKS_READ`]'s name.
pub const SHUFFLE_LOCAL_BLOCKS_READ: &str = catalog::SHUFFLE_LOCAL_BLOCKS_READ.name;
/// [`catalog::SHUFFLE_REMOTE_BLOCKS_READ`]'s name.
pub const SHUFFLE_REMOTE_BLOCKS_READ: &str = catalog::SHUFFLE_REMOTE_BLOCKS_READ.name;
/// [`catalog::SHUFFLE_WRITE_NANOS`]'s name.
pub const SHUFFLE_WRITE_NANOS: &str = catalog::SHUFFLE_WRITE_NANOS.name;
/// [`catalog::FUNCTION_CPU_NANOS`]'s name (numbered per call in the event log).
pub const FUNCTION_CPU_NANOS: &str = catalog::FUNCTION_CPU_NANOS.name;
/// [`catalog::SHUFFLE_FETCH_WAIT_NANOS`]'s name.
pub const SHUFFLE_FETCH_WAIT_NANOS: &str = catalog::SHUFFLE_FETCH_WAIT_NANOS.name;
pub use crate::catalog::JOIN_PHASE_PREFIXES;
pub use crate::catalog::datafusion::{
    BYTES_SCANNED, PROCESSED_SPLITS, ROW_GROUPS_KEPT_BY_STATISTICS,
    ROW_GROUPS_SKIPPED_BY_BLOOM_FILTER, ROW_GROUPS_SKIPPED_BY_DYNAMIC_FILTER,
    ROW_GROUPS_SKIPPED_BY_LIMIT, ROW_GROUPS_SKIPPED_BY_STATISTICS,
};
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
