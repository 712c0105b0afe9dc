//! DataFusion's own metrics of each operator, as qprof names them: for each operator type
//! its label in display names, and for each of its DataFusion metrics the number read,
//! qprof's name, the display name, the Spark kind and what it measures. The profile's
//! collection (`qprof-datafusion`) looks DataFusion's metrics up here; the metrics
//! reference lists them by operator.

use crate::metric::MetricKind;

/// Which number of a DataFusion metric a definition reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReadAs {
    /// The metric's value (counts, gauges, bytes, nanoseconds).
    Value,
    /// A ratio as a percentage with one decimal, stored as Spark `average` values (× 10).
    RatioPercent,
    /// The denominator of a ratio (e.g. the input rows of a filter's selectivity).
    RatioTotal,
    /// The pruned count of a pruning metric.
    Pruned,
    /// The matched (kept) count of a pruning metric.
    Matched,
}

impl ReadAs {
    /// What is read, as the reference says it.
    pub fn as_str(self) -> &'static str {
        match self {
            ReadAs::Value => "value",
            ReadAs::RatioPercent => "ratio (%)",
            ReadAs::RatioTotal => "ratio's total",
            ReadAs::Pruned => "pruned",
            ReadAs::Matched => "matched",
        }
    }
}

/// How one DataFusion metric appears in qprof.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NativeMetricDef {
    /// DataFusion's metric name, e.g. `build_time`.
    pub native: &'static str,
    /// Which number of the metric to read.
    pub read_as: ReadAs,
    /// qprof's camelCase name, e.g. `buildTimeNanos`.
    pub name: &'static str,
    /// Spark-style display name; `{op}` stands for the operator's label.
    pub display: &'static str,
    /// Spark metric kind.
    pub kind: MetricKind,
    /// What it measures, in one sentence.
    pub description: &'static str,
}

/// The metric definitions of one operator type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OperatorDef {
    /// DataFusion operator name as `ExecutionPlan::name` returns it.
    pub operator: &'static str,
    /// Short label used in display names: "time of {label}".
    pub label: &'static str,
    /// Native metrics specific to this operator (common ones come from [`COMMON`]).
    pub native: &'static [NativeMetricDef],
}

const fn def(
    native: &'static str,
    read_as: ReadAs,
    name: &'static str,
    display: &'static str,
    kind: MetricKind,
    description: &'static str,
) -> NativeMetricDef {
    NativeMetricDef {
        native,
        read_as,
        name,
        display,
        kind,
        description,
    }
}

use MetricKind::{Average, NsTiming, Size, Sum};
use ReadAs::{Matched, Pruned, RatioPercent, RatioTotal, Value};

/// DataFusion metrics shared by many operators.
#[rustfmt::skip]
pub const COMMON: &[NativeMetricDef] = &[
    def("elapsed_compute", Value, ELAPSED_COMPUTE_NANOS, "elapsed compute of {op}", NsTiming, "The operator's CPU-bound time as DataFusion times it (its own timer, which may include work of its inputs)."),
    def("spill_count", Value, "spilledFiles", "total spilled files", Sum, "Spill files DataFusion counted for the operator."),
    def("spilled_bytes", Value, "spilledBytes", "bytes written for spilling", Size, "Bytes DataFusion counted as written for spilling."),
    def("spilled_rows", Value, "spilledRows", "total rows written for spilling", Sum, "Rows DataFusion counted as written for spilling."),
    def("mem_used", Value, "memoryUsedBytes", "memory used", Size, "Memory the operator reported in use, at its last value."),
    def("batches_split", Value, "batchesSplit", "number of batches split", Sum, "Batches DataFusion split into smaller ones before processing them further."),
];

/// DataFusion metrics that duplicate qprof's base metrics and are therefore not repeated.
pub const SUPERSEDED: &[&str] = &[
    "output_rows",
    "output_batches",
    "output_bytes",
    "start_timestamp",
    "end_timestamp",
];

#[rustfmt::skip]
const BUILD_PROBE_JOIN: &[NativeMetricDef] = &[
    // DataFusion's own timers: the build time includes the build input's work; qprof's
    // phase metrics (hashBuild*, hashProbe*) measure the join's own time by phase
    def("build_time", Value, "buildTimeNanos", "build time, with the build input's", NsTiming, "DataFusion's time of building, the build input's work included (the join's own build time is hashBuildWallNanos)."),
    def("build_input_batches", Value, "buildInputVectors", "number of build input vectors", Sum, "Batches the build side received."),
    def("build_input_rows", Value, "buildInputRows", "number of build input rows", Sum, "Rows the build side received."),
    def("build_mem_used", Value, "buildMemoryBytes", "build memory bytes", Size, "Memory the build side's table and batches took."),
    def("join_time", Value, "joinTimeNanos", "time of joining", NsTiming, "DataFusion's time of probing and producing output."),
    def("input_batches", Value, "probeInputVectors", "number of probe input vectors", Sum, "Batches the probe side received."),
    def("input_rows", Value, "probeInputRows", "number of probe input rows", Sum, "Rows the probe side received."),
    def("probe_hit_rate", RatioPercent, "hashProbeHitRatePercent", "hash probe hit rate (%)", Average, "Share of probe rows that found a match in the hash table."),
    def("avg_fanout", RatioPercent, "hashProbeFanoutPercent", "hash probe fanout (%)", Average, "Matches per matched probe row, as a percentage."),
    def("array_map_created_count", Value, "hashBuildArrayMaps", "number of array maps built", Sum, "Build sides kept as an array map (dense integer keys) instead of a hash map."),
    def("selectivity", RatioPercent, "joinSelectivityPercent", "join selectivity (%)", Average, "Output rows as a share of the rows the join could have produced."),
];

/// qprof's name of DataFusion's own compute timer, which the plan graph leaves to the
/// operator's panel (qprof's self time says it better).
pub const ELAPSED_COMPUTE_NANOS: &str = "elapsedComputeNanos";
/// qprof's name of a DataFusion metric code reads by name: bytes a file scan read, as the file reader counts them.
pub const BYTES_SCANNED: &str = "bytesScanned";
/// qprof's name of a DataFusion metric code reads by name: file ranges a scan's statistics kept.
pub const PROCESSED_SPLITS: &str = "processedSplits";
/// qprof's name of a DataFusion metric code reads by name: parquet row groups their statistics left out.
pub const ROW_GROUPS_SKIPPED_BY_STATISTICS: &str = "rowGroupsSkippedByStatistics";
/// qprof's name of a DataFusion metric code reads by name: parquet row groups their statistics kept.
pub const ROW_GROUPS_KEPT_BY_STATISTICS: &str = "rowGroupsKeptByStatistics";
/// qprof's name of a DataFusion metric code reads by name: parquet row groups their bloom filters left out.
pub const ROW_GROUPS_SKIPPED_BY_BLOOM_FILTER: &str = "rowGroupsSkippedByBloomFilter";
/// qprof's name of a DataFusion metric code reads by name: parquet row groups a limit made unnecessary.
pub const ROW_GROUPS_SKIPPED_BY_LIMIT: &str = "rowGroupsSkippedByLimit";
/// qprof's name of a DataFusion metric code reads by name: parquet row groups a dynamic filter left out.
pub const ROW_GROUPS_SKIPPED_BY_DYNAMIC_FILTER: &str = "rowGroupsSkippedByDynamicFilter";

#[rustfmt::skip]
const SCAN: &[NativeMetricDef] = &[
    def("time_elapsed_opening", Value, "dataSourceAddSplitNanos", "time of opening files (metadata, pruning)", NsTiming, "Time of opening files: reading their metadata and pruning them."),
    def("time_elapsed_scanning_until_data", Value, "scanFirstBatchWallNanos", "time to first batch", NsTiming, "Time from the scan's start to its first batch."),
    def("time_elapsed_scanning_total", Value, "scanTotalWallNanos", "time of scanning (consumer included)", NsTiming, "Time from the scan's start to its end, its consumer's time between batches included."),
    def("time_elapsed_processing", Value, "scanProcessingWallNanos", "time of reading and decoding", NsTiming, "Time of reading and decoding the files' data."),
    def("files_opened", Value, "numFilesOpened", "number of files opened", Sum, "Files the scan opened."),
    def("files_processed", Value, "numFilesRead", "number of files read", Sum, "Files the scan read to their end."),
    def("file_open_errors", Value, "numFileOpenErrors", "number of file open errors", Sum, "Files the scan failed to open."),
    def("file_scan_errors", Value, "numFileScanErrors", "number of file scan errors", Sum, "Files the scan failed to read."),
    def("bytes_scanned", Value, BYTES_SCANNED, "size of files read", Size, "Bytes of the files the scan read, as the file reader counts them."),
    def("metadata_load_time", Value, "metadataLoadWallNanos", "metadata time", NsTiming, "Time of loading Parquet metadata (footers and page indexes)."),
    def("files_ranges_pruned_statistics", Pruned, "skippedSplits", "number of skipped splits", Sum, "File ranges the statistics left out when the files were opened (the files planning left out by partition values are added by qprof)."),
    def("files_ranges_pruned_statistics", Matched, PROCESSED_SPLITS, "number of processed splits", Sum, "File ranges the statistics kept."),
    def("row_groups_pruned_statistics", Pruned, ROW_GROUPS_SKIPPED_BY_STATISTICS, "number of row groups skipped by statistics", Sum, "Parquet row groups their min/max statistics left out."),
    def("row_groups_pruned_statistics", Matched, ROW_GROUPS_KEPT_BY_STATISTICS, "number of row groups kept by statistics", Sum, "Parquet row groups their min/max statistics kept."),
    def("row_groups_pruned_bloom_filter", Pruned, ROW_GROUPS_SKIPPED_BY_BLOOM_FILTER, "number of row groups skipped by bloom filters", Sum, "Parquet row groups their bloom filters left out."),
    def("row_groups_pruned_bloom_filter", Matched, "rowGroupsKeptByBloomFilter", "number of row groups kept by bloom filters", Sum, "Parquet row groups their bloom filters kept."),
    def("limit_pruned_row_groups", Pruned, ROW_GROUPS_SKIPPED_BY_LIMIT, "number of row groups skipped by limit", Sum, "Parquet row groups a limit made unnecessary."),
    def("limit_pruned_row_groups", Matched, "rowGroupsKeptByLimit", "number of row groups kept by limit", Sum, "Parquet row groups read despite a limit."),
    def("page_index_pages_pruned", Pruned, "pagesSkippedByPageIndex", "number of pages skipped by page index", Sum, "Parquet pages the page index left out."),
    def("page_index_pages_pruned", Matched, "pagesKeptByPageIndex", "number of pages kept by page index", Sum, "Parquet pages the page index kept."),
    def("page_index_rows_pruned", Pruned, "rowsSkippedByPageIndex", "number of rows skipped by page index", Sum, "Rows in the pages the page index left out."),
    def("page_index_rows_pruned", Matched, "rowsKeptByPageIndex", "number of rows kept by page index", Sum, "Rows in the pages the page index kept."),
    def("row_groups_pruned_dynamic_filter", Value, ROW_GROUPS_SKIPPED_BY_DYNAMIC_FILTER, "number of row groups skipped by dynamic filters", Sum, "Parquet row groups a dynamic filter left out while the scan ran."),
    def("pushdown_rows_pruned", Value, "pushdownRowsPruned", "number of rows filtered during decoding", Sum, "Rows the filter pushed into the decoder removed."),
    def("pushdown_rows_matched", Value, "pushdownRowsMatched", "number of rows kept during decoding", Sum, "Rows the filter pushed into the decoder kept."),
    def("predicate_evaluation_errors", Value, "predicateEvaluationErrors", "number of predicate evaluation errors", Sum, "Errors evaluating a pruning predicate (the data was read instead)."),
    def("row_pushdown_eval_time", Value, "rowFilterWallNanos", "time of row filtering during decoding", NsTiming, "Time of evaluating the filter pushed into the decoder."),
    def("statistics_eval_time", Value, "statisticsPruningWallNanos", "time of statistics pruning", NsTiming, "Time of pruning row groups by their statistics."),
    def("bloom_filter_eval_time", Value, "bloomFilterPruningWallNanos", "time of bloom filter pruning", NsTiming, "Time of pruning row groups by their bloom filters."),
    def("page_index_eval_time", Value, "pageIndexPruningWallNanos", "time of page index pruning", NsTiming, "Time of pruning pages by the page index."),
    def("scan_efficiency_ratio", RatioPercent, "scanEfficiencyPercent", "bytes read of file size (%)", Average, "Bytes read as a share of the files' sizes."),
    def("output_rows_skew", RatioPercent, "outputRowsSkewPercent", "output rows skew (%)", Average, "How unevenly the scan's rows spread over its partitions."),
    def("num_predicate_creation_errors", Value, "numPredicateCreationErrors", "number of predicate creation errors", Sum, "Filters the scan could not turn into a pruning predicate (it read the data instead)."),
    def("page_index_load_skipped", Value, "pageIndexLoadSkipped", "number of page index loads skipped", Sum, "Page indexes not loaded because row-group statistics already showed they could prune no more."),
    def("page_index_pages_skipped_by_fully_matched", Value, "pageIndexPagesSkippedByFullyMatched", "number of pages not filtered as fully matched", Sum, "Pages whose filtering was skipped because the page index showed every row matches."),
    def("predicate_cache_inner_records", Value, "predicateCacheInnerRecords", "number of predicate cache inner records", Sum, "Rows the decoder's predicate cache stored after evaluating the filter."),
    def("predicate_cache_records", Value, "predicateCacheRecords", "number of predicate cache records", Sum, "Rows the decoder read from its predicate cache instead of decoding them again."),
];

/// A sort with a limit (DataFusion names it `SortExec(TopK)`).
#[rustfmt::skip]
const TOP_K: &[NativeMetricDef] = &[
    def("row_replacements", Value, "topKRowReplacements", "number of top-k row replacements", Sum, "Rows a top-k sort replaced in its heap."),
];

/// Ballista's shuffle reader (on a cluster).
#[rustfmt::skip]
const SHUFFLE_READER: &[NativeMetricDef] = &[
    def("fetch_requests", Value, "fetchRequests", "number of fetch requests", Sum, "Requests the reader sent for blocks on other executors."),
    def("fetch_retries", Value, "fetchRetries", "number of fetch retries", Sum, "Fetch requests sent again after a failure."),
    def("fetch_time", Value, "fetchTimeNanos", "time of fetching", NsTiming, "Time of fetching blocks from other executors, as Ballista times it."),
    def("local_read_time", Value, "localReadTimeNanos", "time of reading local blocks", NsTiming, "Time of reading blocks from the executor's own disk."),
    def("permit_wait_time", Value, "permitWaitTimeNanos", "time of waiting for a fetch permit", NsTiming, "Time waiting for a permit to fetch (Ballista bounds the fetches in flight)."),
    def("decoded_bytes", Value, "decodedBytes", "bytes decoded", Size, "Bytes of the batches decoded from the blocks read."),
    def("local_partitions", Value, "localPartitions", "number of local blocks", Sum, "Blocks read from the executor's own disk, as Ballista counts them."),
    def("remote_partitions", Value, "remotePartitions", "number of remote blocks", Sum, "Blocks fetched from other executors, as Ballista counts them."),
];

/// Ballista's shuffle writers (on a cluster); their write time is the catalog's
/// `shuffleWriteNanos`.
#[rustfmt::skip]
const SHUFFLE_WRITER: &[NativeMetricDef] = &[
    def("input_rows", Value, "shuffleInputRows", "number of shuffle input rows", Sum, "Rows the writer took from its input."),
    def("output_rows", Value, "shuffleOutputRows", "number of shuffle output rows", Sum, "Rows the writer wrote to its shuffle files."),
    def("repart_time", Value, "shuffleRepartitionNanos", "time of repartitioning", NsTiming, "Time of computing each row's output partition."),
    def("spill_time", Value, "shuffleSpillNanos", "time of shuffle spills", NsTiming, "Time of spilling the writer's buffers to disk."),
    def("spill_count", Value, "shuffleSpillFiles", "number of shuffle spills", Sum, "Times the writer spilled its buffers to disk."),
    def("spill_bytes", Value, "shuffleSpilledBytes", "shuffle spilled bytes", Size, "Bytes the writer spilled to disk."),
];

/// The table: one entry per operator type qprof knows by name.
#[rustfmt::skip]
pub const OPERATORS: &[OperatorDef] = &[
    OperatorDef {
        operator: "FilterExec",
        label: "filter",
        native: &[
            def("selectivity", RatioPercent, "selectivityPercent", "selectivity (%)", Average, "Rows the filter kept as a share of its input rows."),
            def("selectivity", RatioTotal, "inputRows", "number of input rows", Sum, "Rows the operator received."),
        ],
    },
    OperatorDef {
        operator: "ProjectionExec",
        label: "project",
        native: &[],
    },
    OperatorDef {
        operator: "HashJoinExec",
        label: "hash join",
        native: BUILD_PROBE_JOIN,
    },
    OperatorDef {
        operator: "CrossJoinExec",
        label: "cross join",
        native: BUILD_PROBE_JOIN,
    },
    OperatorDef {
        operator: "NestedLoopJoinExec",
        label: "nested loop join",
        native: BUILD_PROBE_JOIN,
    },
    OperatorDef {
        operator: "PiecewiseMergeJoinExec",
        label: "piecewise merge join",
        native: BUILD_PROBE_JOIN,
    },
    OperatorDef {
        operator: "SortMergeJoinExec",
        label: "sort merge join",
        native: &[
            def("join_time", Value, "joinWallNanos", "time of join", NsTiming, "DataFusion's time of the join's own work."),
            def("input_batches", Value, "inputVectors", "number of input vectors", Sum, "Batches the operator received."),
            def("input_rows", Value, "inputRows", "number of input rows", Sum, "Rows the operator received."),
            def("peak_mem_used", Value, "joinPeakMemoryBytes", "join peak memory bytes", Size, "The most memory the join held at once."),
        ],
    },
    OperatorDef {
        operator: "SymmetricHashJoinExec",
        label: "symmetric hash join",
        native: &[
            def("left_input_batches", Value, "leftInputVectors", "number of left input vectors", Sum, "Batches the left side received."),
            def("left_input_rows", Value, "leftInputRows", "number of left input rows", Sum, "Rows the left side received."),
            def("right_input_batches", Value, "rightInputVectors", "number of right input vectors", Sum, "Batches the right side received."),
            def("right_input_rows", Value, "rightInputRows", "number of right input rows", Sum, "Rows the right side received."),
            def("stream_memory_usage", Value, "streamMemoryBytes", "stream memory bytes", Size, "Memory the join's buffered streams took."),
        ],
    },
    OperatorDef {
        operator: "AggregateExec",
        label: "aggregate",
        native: &[
            def("time_calculating_group_ids", Value, "groupIdsWallNanos", "time of computing group ids", NsTiming, "Time of computing each row's group."),
            def("aggregate_arguments_time", Value, "aggregateArgumentsWallNanos", "time of evaluating aggregate arguments", NsTiming, "Time of evaluating the aggregates' arguments."),
            def("aggregation_time", Value, "aggregationWallNanos", "time of aggregation", NsTiming, "Time of updating the accumulators."),
            def("emitting_time", Value, "emitWallNanos", "time of emitting groups", NsTiming, "Time of emitting the groups."),
            def("reduction_factor", RatioPercent, "reductionPercent", "output rows of input rows (%)", Average, "Output rows as a share of input rows."),
            def("reduction_factor", RatioTotal, "inputRows", "number of input rows", Sum, "Rows the operator received."),
            def("skipped_aggregation_rows", Value, "skippedAggregationRows", "number of rows passed through partial aggregation", Sum, "Rows a partial aggregation passed on without grouping them (it stopped grouping when it reduced too little)."),
            def("peak_mem_used", Value, "aggregationPeakMemoryBytes", "aggregation peak memory bytes", Size, "The most memory the aggregation held at once."),
        ],
    },
    OperatorDef {
        operator: "SortExec",
        label: "sort",
        native: TOP_K,
    },
    OperatorDef {
        operator: "SortExec(TopK)",
        label: "top-k sort",
        native: TOP_K,
    },
    OperatorDef {
        operator: "SortPreservingMergeExec",
        label: "sort merge",
        native: &[],
    },
    OperatorDef {
        operator: "RepartitionExec",
        label: "repartition",
        native: &[
            def("fetch_time", Value, "fetchWallNanos", "time of fetching input (input included)", NsTiming, "Time of fetching input batches, the input's work included."),
            def("repartition_time", Value, "repartitionWallNanos", "time of repartitioning", NsTiming, "Time of computing each row's output partition."),
            def("send_time", Value, "sendWallNanos", "time of sending to output partitions", NsTiming, "Time of sending batches to the output partitions."),
        ],
    },
    OperatorDef {
        operator: "CoalescePartitionsExec",
        label: "coalesce partitions",
        native: &[],
    },
    OperatorDef {
        operator: "CoalesceBatchesExec",
        label: "coalesce batches",
        native: &[],
    },
    OperatorDef {
        operator: "DataSourceExec",
        label: "scan",
        native: SCAN,
    },
    OperatorDef {
        operator: "GlobalLimitExec",
        label: "limit",
        native: &[],
    },
    OperatorDef {
        operator: "LocalLimitExec",
        label: "local limit",
        native: &[],
    },
    OperatorDef {
        operator: "UnionExec",
        label: "union",
        native: &[],
    },
    OperatorDef {
        operator: "WindowAggExec",
        label: "window",
        native: &[],
    },
    OperatorDef {
        operator: "BoundedWindowAggExec",
        label: "window",
        native: &[],
    },
    OperatorDef {
        operator: "UnnestExec",
        label: "unnest",
        native: &[
            def("input_rows", Value, "inputRows", "number of input rows", Sum, "Rows the operator received."),
            def("input_batches", Value, "inputVectors", "number of input vectors", Sum, "Batches the operator received."),
        ],
    },
    OperatorDef {
        operator: "BufferExec",
        label: "buffer",
        native: &[
            def("max_mem_used", Value, "bufferPeakMemoryBytes", "buffer peak memory bytes", Size, "The most memory the buffer held at once."),
            def("max_queued", Value, "maxQueuedBatches", "maximum queued batches", Sum, "The most batches the buffer held at once."),
        ],
    },
    OperatorDef {
        operator: "DataSinkExec",
        label: "write",
        native: &[
            def("rows_written", Value, "numWrittenRows", "number of written rows", Sum, "Rows the sink wrote."),
            def("bytes_written", Value, "encodedWrittenBytes", "bytes written as the writer counts", Size, "Bytes the sink's writer produced, as it counts them."),
        ],
    },
    OperatorDef {
        operator: "ShuffleReaderExec",
        label: "shuffle reader",
        native: SHUFFLE_READER,
    },
    OperatorDef {
        operator: "ShuffleWriterExec",
        label: "shuffle writer",
        native: SHUFFLE_WRITER,
    },
    OperatorDef {
        operator: "SortShuffleWriterExec",
        label: "sort shuffle writer",
        native: SHUFFLE_WRITER,
    },
    OperatorDef {
        operator: "CooperativeExec",
        label: "cooperative yield",
        native: &[],
    },
];

/// The definitions of operator type `operator` (as `ExecutionPlan::name` returns it).
pub fn operator_def(operator: &str) -> Option<&'static OperatorDef> {
    OPERATORS.iter().find(|d| d.operator == operator)
}

/// The definitions that apply to DataFusion metric `native` of `operator`: the operator's
/// table's if it knows the metric, else the common table's. Empty if neither knows it.
pub fn native_defs(operator: &str, native: &str) -> Vec<&'static NativeMetricDef> {
    native_defs_in(operator_def(operator), native).collect()
}

/// [`native_defs`] with the operator's table found already ([`operator_def`]; `None`: the
/// operator has none), for a caller that looks up many of one operator's metrics.
pub fn native_defs_in<'a>(
    table: Option<&'static OperatorDef>,
    native: &'a str,
) -> impl Iterator<Item = &'static NativeMetricDef> + 'a {
    let specific = table.map_or(&[][..], |d| d.native);
    let from = if specific.iter().any(|m| m.native == native) {
        specific
    } else {
        COMMON
    };
    from.iter().filter(move |m| m.native == native)
}

/// The definition of DataFusion metric `native` of `operator` that reads its value.
pub fn value_def(operator: &str, native: &str) -> Option<&'static NativeMetricDef> {
    native_defs(operator, native)
        .into_iter()
        .find(|d| d.read_as == ReadAs::Value)
}

/// The metrics named by a pattern, one per expression of an operator: the prefix, the
/// suffix (a number between), the operator and what each measures.
pub const PATTERNS: &[(&str, &str, &str, &str)] = &[(
    "expr",
    "EvalTimeNanos",
    "ProjectionExec",
    "Time of evaluating the projection's expression of that number.",
)];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_definition_says_what_it_measures_in_one_sentence() {
        let all = COMMON.iter().chain(OPERATORS.iter().flat_map(|o| o.native));
        for def in all {
            assert!(
                def.description.ends_with('.') && def.description.len() > 10,
                "{}: {:?}",
                def.name,
                def.description
            );
        }
    }

    #[test]
    fn operators_are_listed_once() {
        for (i, op) in OPERATORS.iter().enumerate() {
            assert!(
                OPERATORS[..i].iter().all(|o| o.operator != op.operator),
                "{} twice",
                op.operator
            );
        }
    }
}
