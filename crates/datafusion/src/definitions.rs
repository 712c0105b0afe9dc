//! Per-operator-type metric definitions: how each operator is named in display strings and
//! how DataFusion's own metrics of that operator map into qprof's namespace, with Spark
//! metric kinds and display names. One table per operator type.

use qprof_core::metric::MetricKind;

/// Which number of a DataFusion metric a definition reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ReadAs {
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

/// How one DataFusion metric appears in qprof.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct NativeMetricDef {
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
}

/// The metric definitions of one operator type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct OperatorDef {
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
) -> NativeMetricDef {
    NativeMetricDef {
        native,
        read_as,
        name,
        display,
        kind,
    }
}

use MetricKind::{Average, NsTiming, Size, Sum};
use ReadAs::{Matched, Pruned, RatioPercent, RatioTotal, Value};

/// DataFusion metrics shared by many operators.
#[rustfmt::skip]
pub(crate) const COMMON: &[NativeMetricDef] = &[
    def("elapsed_compute", Value, "elapsedComputeNanos", "elapsed compute of {op}", NsTiming),
    def("spill_count", Value, "spilledFiles", "total spilled files", Sum),
    def("spilled_bytes", Value, "spilledBytes", "bytes written for spilling", Size),
    def("spilled_rows", Value, "spilledRows", "total rows written for spilling", Sum),
    def("mem_used", Value, "memoryUsedBytes", "memory used", Size),
    def("batches_split", Value, "batchesSplit", "number of batches split", Sum),
];

/// DataFusion metrics that duplicate qprof's base metrics and are therefore not repeated.
pub(crate) const SUPERSEDED: &[&str] = &[
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
    def("build_time", Value, "buildTimeNanos", "build time, with the build input's", NsTiming),
    def("build_input_batches", Value, "buildInputVectors", "number of build input vectors", Sum),
    def("build_input_rows", Value, "buildInputRows", "number of build input rows", Sum),
    def("build_mem_used", Value, "buildMemoryBytes", "build memory bytes", Size),
    def("join_time", Value, "joinTimeNanos", "time of joining", NsTiming),
    def("input_batches", Value, "probeInputVectors", "number of probe input vectors", Sum),
    def("input_rows", Value, "probeInputRows", "number of probe input rows", Sum),
    def("probe_hit_rate", RatioPercent, "hashProbeHitRatePercent", "hash probe hit rate (%)", Average),
    def("avg_fanout", RatioPercent, "hashProbeFanoutPercent", "hash probe fanout (%)", Average),
    def("array_map_created_count", Value, "hashBuildArrayMaps", "number of array maps built", Sum),
    def("selectivity", RatioPercent, "joinSelectivityPercent", "join selectivity (%)", Average),
];

#[rustfmt::skip]
const SCAN: &[NativeMetricDef] = &[
    def("time_elapsed_opening", Value, "dataSourceAddSplitNanos", "time of opening files (metadata, pruning)", NsTiming),
    def("time_elapsed_scanning_until_data", Value, "scanFirstBatchWallNanos", "time to first batch", NsTiming),
    def("time_elapsed_scanning_total", Value, "scanTotalWallNanos", "time of scanning (consumer included)", NsTiming),
    def("time_elapsed_processing", Value, "scanProcessingWallNanos", "time of reading and decoding", NsTiming),
    def("files_opened", Value, "numFilesOpened", "number of files opened", Sum),
    def("files_processed", Value, "numFilesRead", "number of files read", Sum),
    def("file_open_errors", Value, "numFileOpenErrors", "number of file open errors", Sum),
    def("file_scan_errors", Value, "numFileScanErrors", "number of file scan errors", Sum),
    def("bytes_scanned", Value, "bytesScanned", "size of files read", Size),
    def("metadata_load_time", Value, "metadataLoadWallNanos", "metadata time", NsTiming),
    def("files_ranges_pruned_statistics", Pruned, "skippedSplits", "number of skipped splits", Sum),
    def("files_ranges_pruned_statistics", Matched, "processedSplits", "number of processed splits", Sum),
    def("row_groups_pruned_statistics", Pruned, "rowGroupsSkippedByStatistics", "number of row groups skipped by statistics", Sum),
    def("row_groups_pruned_statistics", Matched, "rowGroupsKeptByStatistics", "number of row groups kept by statistics", Sum),
    def("row_groups_pruned_bloom_filter", Pruned, "rowGroupsSkippedByBloomFilter", "number of row groups skipped by bloom filters", Sum),
    def("row_groups_pruned_bloom_filter", Matched, "rowGroupsKeptByBloomFilter", "number of row groups kept by bloom filters", Sum),
    def("limit_pruned_row_groups", Pruned, "rowGroupsSkippedByLimit", "number of row groups skipped by limit", Sum),
    def("limit_pruned_row_groups", Matched, "rowGroupsKeptByLimit", "number of row groups kept by limit", Sum),
    def("page_index_pages_pruned", Pruned, "pagesSkippedByPageIndex", "number of pages skipped by page index", Sum),
    def("page_index_pages_pruned", Matched, "pagesKeptByPageIndex", "number of pages kept by page index", Sum),
    def("page_index_rows_pruned", Pruned, "rowsSkippedByPageIndex", "number of rows skipped by page index", Sum),
    def("page_index_rows_pruned", Matched, "rowsKeptByPageIndex", "number of rows kept by page index", Sum),
    def("row_groups_pruned_dynamic_filter", Value, "rowGroupsSkippedByDynamicFilter", "number of row groups skipped by dynamic filters", Sum),
    def("pushdown_rows_pruned", Value, "pushdownRowsPruned", "number of rows filtered during decoding", Sum),
    def("pushdown_rows_matched", Value, "pushdownRowsMatched", "number of rows kept during decoding", Sum),
    def("predicate_evaluation_errors", Value, "predicateEvaluationErrors", "number of predicate evaluation errors", Sum),
    def("row_pushdown_eval_time", Value, "rowFilterWallNanos", "time of row filtering during decoding", NsTiming),
    def("statistics_eval_time", Value, "statisticsPruningWallNanos", "time of statistics pruning", NsTiming),
    def("bloom_filter_eval_time", Value, "bloomFilterPruningWallNanos", "time of bloom filter pruning", NsTiming),
    def("page_index_eval_time", Value, "pageIndexPruningWallNanos", "time of page index pruning", NsTiming),
    def("scan_efficiency_ratio", RatioPercent, "scanEfficiencyPercent", "bytes read of file size (%)", Average),
    def("output_rows_skew", RatioPercent, "outputRowsSkewPercent", "output rows skew (%)", Average),
];

/// The table: one entry per operator type qprof knows by name.
#[rustfmt::skip]
pub(crate) const OPERATORS: &[OperatorDef] = &[
    OperatorDef {
        operator: "FilterExec",
        label: "filter",
        native: &[
            def("selectivity", RatioPercent, "selectivityPercent", "selectivity (%)", Average),
            def("selectivity", RatioTotal, "inputRows", "number of input rows", Sum),
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
            def("join_time", Value, "joinWallNanos", "time of join", NsTiming),
            def("input_batches", Value, "inputVectors", "number of input vectors", Sum),
            def("input_rows", Value, "inputRows", "number of input rows", Sum),
            def("peak_mem_used", Value, "joinPeakMemoryBytes", "join peak memory bytes", Size),
        ],
    },
    OperatorDef {
        operator: "SymmetricHashJoinExec",
        label: "symmetric hash join",
        native: &[
            def("left_input_batches", Value, "leftInputVectors", "number of left input vectors", Sum),
            def("left_input_rows", Value, "leftInputRows", "number of left input rows", Sum),
            def("right_input_batches", Value, "rightInputVectors", "number of right input vectors", Sum),
            def("right_input_rows", Value, "rightInputRows", "number of right input rows", Sum),
            def("stream_memory_usage", Value, "streamMemoryBytes", "stream memory bytes", Size),
        ],
    },
    OperatorDef {
        operator: "AggregateExec",
        label: "aggregate",
        native: &[
            def("time_calculating_group_ids", Value, "groupIdsWallNanos", "time of computing group ids", NsTiming),
            def("aggregate_arguments_time", Value, "aggregateArgumentsWallNanos", "time of evaluating aggregate arguments", NsTiming),
            def("aggregation_time", Value, "aggregationWallNanos", "time of aggregation", NsTiming),
            def("emitting_time", Value, "emitWallNanos", "time of emitting groups", NsTiming),
            def("reduction_factor", RatioPercent, "reductionPercent", "output rows of input rows (%)", Average),
            def("reduction_factor", RatioTotal, "inputRows", "number of input rows", Sum),
            def("skipped_aggregation_rows", Value, "skippedAggregationRows", "number of rows passed through partial aggregation", Sum),
            def("peak_mem_used", Value, "aggregationPeakMemoryBytes", "aggregation peak memory bytes", Size),
        ],
    },
    OperatorDef {
        operator: "SortExec",
        label: "sort",
        native: &[def("row_replacements", Value, "topKRowReplacements", "number of top-k row replacements", Sum)],
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
            def("fetch_time", Value, "fetchWallNanos", "time of fetching input (input included)", NsTiming),
            def("repartition_time", Value, "repartitionWallNanos", "time of repartitioning", NsTiming),
            def("send_time", Value, "sendWallNanos", "time of sending to output partitions", NsTiming),
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
            def("input_rows", Value, "inputRows", "number of input rows", Sum),
            def("input_batches", Value, "inputVectors", "number of input vectors", Sum),
        ],
    },
    OperatorDef {
        operator: "BufferExec",
        label: "buffer",
        native: &[
            def("max_mem_used", Value, "bufferPeakMemoryBytes", "buffer peak memory bytes", Size),
            def("max_queued", Value, "maxQueuedBatches", "maximum queued batches", Sum),
        ],
    },
    OperatorDef {
        operator: "DataSinkExec",
        label: "write",
        native: &[
            def("rows_written", Value, "numWrittenRows", "number of written rows", Sum),
            def("bytes_written", Value, "encodedWrittenBytes", "bytes written as the writer counts", Size),
        ],
    },
    OperatorDef {
        operator: "CooperativeExec",
        label: "cooperative yield",
        native: &[],
    },
];

/// The definitions of operator type `operator` (as `ExecutionPlan::name` returns it), if
/// qprof has a table for it.
pub(crate) fn operator_def(operator: &str) -> Option<&'static OperatorDef> {
    OPERATORS.iter().find(|d| d.operator == operator)
}

/// The label of an operator in display names: from its table, or derived from its type
/// name (`StreamingTableExec` → `streaming table`).
pub fn operator_label(operator: &str) -> String {
    if let Some(d) = operator_def(operator) {
        return d.label.to_string();
    }
    let base = operator.strip_suffix("Exec").unwrap_or(operator);
    let mut label = String::new();
    for (i, ch) in base.chars().enumerate() {
        if ch.is_uppercase() && i > 0 {
            label.push(' ');
        }
        label.extend(ch.to_lowercase());
    }
    label
}

/// The definitions that apply to DataFusion metric `native` of `operator`: the operator's
/// table first, then the common table. Empty if neither knows the metric.
pub(crate) fn native_defs(operator: &str, native: &str) -> Vec<&'static NativeMetricDef> {
    let specific: Vec<_> = operator_def(operator)
        .map(|d| d.native.iter().filter(|m| m.native == native).collect())
        .unwrap_or_default();
    if !specific.is_empty() {
        return specific;
    }
    COMMON.iter().filter(|m| m.native == native).collect()
}

/// qprof's name for a DataFusion metric no table knows: camelCase, with a unit suffix
/// (`expr_0_eval_time` → `expr0EvalTimeNanos`).
pub(crate) fn fallback_name(native: &str, kind: MetricKind) -> String {
    let mut name = String::new();
    let mut upper = false;
    for ch in native.chars() {
        if ch == '_' || ch == '-' || ch == ' ' {
            upper = true;
        } else if upper {
            name.extend(ch.to_uppercase());
            upper = false;
        } else {
            name.push(ch);
        }
    }
    let suffix = match kind {
        MetricKind::NsTiming if !name.ends_with("Nanos") => "Nanos",
        MetricKind::Size if !name.ends_with("Bytes") => "Bytes",
        MetricKind::Average => "Percent",
        _ => "",
    };
    name + suffix
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn names_are_unique_within_each_operator() {
        for op in OPERATORS {
            let mut seen = HashSet::new();
            for m in op.native.iter().chain(COMMON) {
                if op.native.iter().any(|s| s.native == m.native) && COMMON.contains(m) {
                    continue; // a specific definition overrides the common one
                }
                assert!(
                    seen.insert(m.name),
                    "{}: duplicate name {}",
                    op.operator,
                    m.name
                );
                assert!(
                    !qprof_core::profile::names::BASE.contains(&m.name),
                    "{}: {} collides with a base metric",
                    op.operator,
                    m.name
                );
            }
        }
    }

    #[test]
    fn labels_and_fallbacks() {
        assert_eq!(operator_label("HashJoinExec"), "hash join");
        assert_eq!(operator_label("StreamingTableExec"), "streaming table");
        assert_eq!(
            fallback_name("expr_0_eval_time", MetricKind::NsTiming),
            "expr0EvalTimeNanos"
        );
        assert_eq!(
            fallback_name("predicate_cache_records", MetricKind::Sum),
            "predicateCacheRecords"
        );
        let build = native_defs("HashJoinExec", "build_time");
        assert_eq!(build[0].name, "buildTimeNanos");
        assert_eq!(
            native_defs("SortExec", "spill_count")[0].name,
            "spilledFiles"
        );
        assert!(native_defs("SortExec", "no_such_metric").is_empty());
    }
}
