//! `numReplacedWithDynamicFilterRows`: rows a Parquet scan did not read because of the
//! dynamic filters it accepted.
//!
//! A scan prunes its files' row groups with one predicate, its static filter and the
//! dynamic filters together, so DataFusion cannot tell which part skipped a row group. The
//! scan's files' footers (in the session's metadata cache, where the scan left them) can:
//! a row group the static predicate alone keeps but the predicate with the dynamic filters'
//! final values prunes was replaced by the dynamic filters; its rows are counted. A hash
//! join's filter is final before its probe scan opens a file, so there the count is what
//! the filter saved; a filter that tightens while the scan runs (TopK) pruned at most this.
//! Pages pruned inside kept row groups are not counted, nor files the scan never opened.

use std::collections::HashSet;
use std::sync::Arc;

use datafusion::arrow::array::{ArrayRef, BooleanArray, UInt64Array};
use datafusion::arrow::datatypes::{Schema, SchemaRef};
use datafusion::common::pruning::PruningStatistics;
use datafusion::common::tree_node::{Transformed, TransformedResult, TreeNode};
use datafusion::common::{Column, ScalarValue};
use datafusion::datasource::physical_plan::parquet::metadata::CachedParquetMetaData;
use datafusion::datasource::physical_plan::{FileScanConfig, FileSource, ParquetSource};
use datafusion::datasource::source::DataSourceExec;
use datafusion::execution::runtime_env::RuntimeEnv;
use datafusion::parquet::arrow::arrow_reader::statistics::StatisticsConverter;
use datafusion::parquet::arrow::parquet_to_arrow_schema;
use datafusion::parquet::file::metadata::{ParquetMetaData, RowGroupMetaData};
use datafusion::parquet::schema::types::SchemaDescriptor;
use datafusion::physical_expr::expressions::{self, DynamicFilterPhysicalExpr, lit};
use datafusion::physical_expr_common::physical_expr::snapshot_physical_expr;
use datafusion::physical_optimizer::pruning::PruningPredicateBuilder;
use datafusion::physical_plan::metrics::{MetricValue, MetricsSet};
use datafusion::physical_plan::{ExecutionPlan, PhysicalExpr};

/// Rows of the row groups `plan` (a Parquet scan with dynamic filters in its predicate)
/// skipped only because of those filters; `None` for any other operator. `metrics` are
/// the scan's own (DataFusion's), if the caller read them already (else they are read
/// here): a scan that skipped no row group replaced nothing, and its files' footers are
/// not read again.
pub(super) fn rows_replaced(
    plan: &dyn ExecutionPlan,
    metrics: Option<&MetricsSet>,
    runtime: &RuntimeEnv,
) -> Option<u64> {
    let scan = plan.downcast_ref::<DataSourceExec>()?;
    let config = scan.data_source().downcast_ref::<FileScanConfig>()?;
    let parquet = config.file_source().downcast_ref::<ParquetSource>()?;
    let predicate = parquet.filter()?;
    let (static_only, dynamic) = without_dynamic_filters(&predicate)?;
    if !dynamic {
        return None;
    }
    let skipped = match metrics {
        Some(metrics) => skipped_row_groups(metrics),
        None => plan.metrics().is_none_or(|m| skipped_row_groups(&m)),
    };
    if !skipped {
        return Some(0);
    }
    let with_final_filters = snapshot_physical_expr(predicate).ok()?;
    let cache = runtime.cache_manager.get_file_metadata_cache();
    let mut replaced = 0;
    for file in config.file_groups.iter().flat_map(|group| group.files()) {
        let Some(entry) = cache.get(&file.object_meta.location) else {
            continue;
        };
        let Some(cached) = entry
            .file_metadata
            .as_any()
            .downcast_ref::<CachedParquetMetaData>()
        else {
            continue;
        };
        let range = file.range.as_ref().map(|r| (r.start, r.end));
        replaced += file_rows_replaced(
            cached.parquet_metadata(),
            range,
            &static_only,
            &with_final_filters,
        )
        .unwrap_or(0);
    }
    Some(replaced)
}

/// Whether a scan with these metrics skipped any row group by a predicate that held its
/// dynamic filters: by statistics as it opened a file, or by a dynamic filter as it read.
/// A row group the dynamic filters replaced is among those.
fn skipped_row_groups(metrics: &MetricsSet) -> bool {
    metrics.iter().any(|m| {
        let value = m.value();
        match (value.name(), value) {
            (
                ROW_GROUPS_PRUNED_BY_STATISTICS,
                MetricValue::PruningMetrics {
                    pruning_metrics, ..
                },
            ) => pruning_metrics.pruned() > 0,
            (ROW_GROUPS_PRUNED_BY_DYNAMIC_FILTER, value) => value.as_usize() > 0,
            _ => false,
        }
    })
}

/// DataFusion's name of a Parquet scan's row groups skipped by statistics.
const ROW_GROUPS_PRUNED_BY_STATISTICS: &str = "row_groups_pruned_statistics";
/// DataFusion's name of a Parquet scan's row groups a dynamic filter skipped as it read.
const ROW_GROUPS_PRUNED_BY_DYNAMIC_FILTER: &str = "row_groups_pruned_dynamic_filter";

/// `predicate` with every dynamic filter replaced by `true`, and whether it had any.
fn without_dynamic_filters(
    predicate: &Arc<dyn PhysicalExpr>,
) -> Option<(Arc<dyn PhysicalExpr>, bool)> {
    let mut found = false;
    let rewritten = Arc::clone(predicate)
        .transform_down(|e| {
            if e.downcast_ref::<DynamicFilterPhysicalExpr>().is_some() {
                found = true;
                Ok(Transformed::yes(lit(true)))
            } else {
                Ok(Transformed::no(e))
            }
        })
        .data()
        .ok()?;
    Some((rewritten, found))
}

/// Rows of one file's row groups (those whose middle lies in `range`, as DataFusion splits
/// files) that `static_only` keeps and `with_final_filters` prunes.
fn file_rows_replaced(
    metadata: &ParquetMetaData,
    range: Option<(i64, i64)>,
    static_only: &Arc<dyn PhysicalExpr>,
    with_final_filters: &Arc<dyn PhysicalExpr>,
) -> Option<u64> {
    let parquet_schema = metadata.file_metadata().schema_descr();
    let arrow_schema = Arc::new(
        parquet_to_arrow_schema(
            parquet_schema,
            metadata.file_metadata().key_value_metadata(),
        )
        .ok()?,
    );
    let groups: Vec<&RowGroupMetaData> = metadata
        .row_groups()
        .iter()
        .filter(|g| range.is_none_or(|(start, end)| (start..end).contains(&middle(g))))
        .collect();
    let stats = RowGroupStatistics {
        groups: &groups,
        arrow_schema: &arrow_schema,
        parquet_schema,
    };
    let keeps = |predicate: &Arc<dyn PhysicalExpr>| -> Option<Vec<bool>> {
        let predicate = on_file_columns(predicate, &arrow_schema)?;
        PruningPredicateBuilder::new()
            .with_file_schema(Arc::clone(&arrow_schema))
            .try_build(predicate)
            .ok()?
            .prune(&stats)
            .ok()
    };
    let (by_static, by_all) = (keeps(static_only)?, keeps(with_final_filters)?);
    Some(
        groups
            .iter()
            .zip(by_static.iter().zip(&by_all))
            .filter(|(_, (kept_static, kept_all))| **kept_static && !**kept_all)
            .map(|(g, _)| u64::try_from(g.num_rows()).unwrap_or(0))
            .sum(),
    )
}

/// Where DataFusion places a row group when it splits a file into byte ranges.
fn middle(group: &RowGroupMetaData) -> i64 {
    let first = group.column(0);
    let offset = first
        .dictionary_page_offset()
        .unwrap_or_else(|| first.data_page_offset());
    offset + group.compressed_size() / 2
}

/// `predicate` with its columns found by name in the file's schema; `None` if one is not
/// in the file.
fn on_file_columns(
    predicate: &Arc<dyn PhysicalExpr>,
    schema: &SchemaRef,
) -> Option<Arc<dyn PhysicalExpr>> {
    Arc::clone(predicate)
        .transform_down(|e| match e.downcast_ref::<expressions::Column>() {
            Some(column) => Ok(Transformed::yes(
                Arc::new(expressions::Column::new_with_schema(column.name(), schema)?)
                    as Arc<dyn PhysicalExpr>,
            )),
            None => Ok(Transformed::no(e)),
        })
        .data()
        .ok()
}

/// The statistics of some row groups of one file, one container per row group.
struct RowGroupStatistics<'a> {
    groups: &'a [&'a RowGroupMetaData],
    arrow_schema: &'a Schema,
    parquet_schema: &'a SchemaDescriptor,
}

impl RowGroupStatistics<'_> {
    fn converter(&self, column: &Column) -> Option<StatisticsConverter<'_>> {
        StatisticsConverter::try_new(column.name(), self.arrow_schema, self.parquet_schema).ok()
    }
}

impl PruningStatistics for RowGroupStatistics<'_> {
    fn min_values(&self, column: &Column) -> Option<ArrayRef> {
        self.converter(column)?
            .row_group_mins(self.groups.iter().copied())
            .ok()
    }

    fn max_values(&self, column: &Column) -> Option<ArrayRef> {
        self.converter(column)?
            .row_group_maxes(self.groups.iter().copied())
            .ok()
    }

    fn num_containers(&self) -> usize {
        self.groups.len()
    }

    fn null_counts(&self, column: &Column) -> Option<ArrayRef> {
        let counts = self
            .converter(column)?
            .row_group_null_counts(self.groups.iter().copied())
            .ok()?;
        Some(Arc::new(counts))
    }

    fn row_counts(&self) -> Option<ArrayRef> {
        let counts: UInt64Array = self
            .groups
            .iter()
            .map(|g| u64::try_from(g.num_rows()).ok())
            .collect();
        Some(Arc::new(counts))
    }

    #[allow(clippy::mutable_key_type)]
    fn contained(&self, _column: &Column, _values: &HashSet<ScalarValue>) -> Option<BooleanArray> {
        None
    }
}
