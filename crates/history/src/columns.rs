//! A table's columns as fields and the functions that build them from rows: a batch builds
//! only the columns a query asked for.

use std::collections::HashMap;
use std::sync::Arc;

use datafusion::arrow::array::{
    Array, ArrayRef, BooleanArray, Int64Array, Int64Builder, MapBuilder, StringArray,
    StringBuilder, TimestampMillisecondArray,
};
use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef, TimeUnit};
use datafusion::arrow::record_batch::{RecordBatch, RecordBatchOptions};
use datafusion::error::Result;

/// The field metadata key naming a column's metric in the catalog.
pub(crate) const CATALOG_METRIC: &str = "metric";

type Build<R> = Box<dyn Fn(&[R]) -> ArrayRef + Send + Sync>;

/// One column of a table whose rows are `R`s.
pub(crate) struct Column<R> {
    field: Field,
    /// Whether building it needs the queries' profiles parsed (a column that does not
    /// spares the parse).
    pub(crate) needs_profile: bool,
    build: Build<R>,
}

impl<R> Column<R> {
    /// This column, built from the queries' profiles.
    pub(crate) fn needing_profile(mut self) -> Column<R> {
        self.needs_profile = true;
        self
    }

    /// This column, one of the metric catalog's metrics (`name` is the catalog's): its
    /// field's `metric` metadata names it.
    pub(crate) fn of_catalog_metric(mut self, name: &str) -> Column<R> {
        let mut metadata = self.field.metadata().clone();
        metadata.insert(CATALOG_METRIC.to_string(), name.to_string());
        self.field = self.field.with_metadata(metadata);
        self
    }

    /// This column with a description and, for a metric, its unit, kept in the field's
    /// metadata (the guide's reference reads them).
    pub(crate) fn about(mut self, description: &str, unit: Option<&str>) -> Column<R> {
        let mut metadata = HashMap::from([("description".to_string(), description.to_string())]);
        if let Some(unit) = unit {
            metadata.insert("unit".to_string(), unit.to_string());
        }
        self.field = self.field.with_metadata(metadata);
        self
    }
}

fn column<R>(field: Field, build: Build<R>) -> Column<R> {
    Column {
        field,
        needs_profile: false,
        build,
    }
}

/// A text column.
pub(crate) fn text<R: 'static>(name: &str, value: fn(&R) -> Option<&str>) -> Column<R> {
    column(
        Field::new(name, DataType::Utf8, true),
        Box::new(move |rows: &[R]| -> ArrayRef {
            Arc::new(rows.iter().map(value).collect::<StringArray>())
        }),
    )
}

/// A 64-bit integer column.
pub(crate) fn int<R: 'static>(
    name: &str,
    value: impl Fn(&R) -> Option<i64> + Send + Sync + 'static,
) -> Column<R> {
    column(
        Field::new(name, DataType::Int64, true),
        Box::new(move |rows: &[R]| -> ArrayRef {
            Arc::new(rows.iter().map(&value).collect::<Int64Array>())
        }),
    )
}

/// A boolean column.
pub(crate) fn boolean<R: 'static>(name: &str, value: fn(&R) -> Option<bool>) -> Column<R> {
    column(
        Field::new(name, DataType::Boolean, true),
        Box::new(move |rows: &[R]| -> ArrayRef {
            Arc::new(rows.iter().map(value).collect::<BooleanArray>())
        }),
    )
}

/// The type of time columns: epoch milliseconds in UTC, so that `date_trunc` and
/// comparisons with `now()` work.
pub(crate) fn time_type() -> DataType {
    DataType::Timestamp(TimeUnit::Millisecond, Some("UTC".into()))
}

/// A time column, from epoch milliseconds.
pub(crate) fn time<R: 'static>(name: &str, value: fn(&R) -> Option<i64>) -> Column<R> {
    column(
        Field::new(name, time_type(), true),
        Box::new(move |rows: &[R]| -> ArrayRef {
            Arc::new(
                rows.iter()
                    .map(value)
                    .collect::<TimestampMillisecondArray>()
                    .with_timezone("UTC"),
            )
        }),
    )
}

/// A map column from text keys to 64-bit integers.
pub(crate) fn int_map<R: 'static>(
    name: &str,
    entries: impl Fn(&R, &mut dyn FnMut(&str, i64)) + Send + Sync + 'static,
) -> Column<R> {
    let builder = || MapBuilder::new(None, StringBuilder::new(), Int64Builder::new());
    let data_type = builder().finish().data_type().clone();
    column(
        Field::new(name, data_type, true),
        Box::new(move |rows: &[R]| -> ArrayRef {
            let mut map = builder();
            for row in rows {
                entries(row, &mut |key, value| {
                    map.keys().append_value(key);
                    map.values().append_value(value);
                });
                // appending an entry's end cannot fail: keys and values came in pairs
                map.append(true)
                    .expect("keys and values are appended in pairs");
            }
            Arc::new(map.finish())
        }),
    )
}

/// The schema of `columns`.
pub(crate) fn schema_of<R>(columns: &[Column<R>]) -> SchemaRef {
    Arc::new(Schema::new(
        columns.iter().map(|c| c.field.clone()).collect::<Vec<_>>(),
    ))
}

/// Whether any of the `projection`'s columns needs the queries' profiles.
pub(crate) fn projection_needs_profile<R>(columns: &[Column<R>], projection: &[usize]) -> bool {
    projection
        .iter()
        .any(|&i| columns.get(i).is_some_and(|c| c.needs_profile))
}

/// The batch of `rows` with the columns at `projection`, whose schema is `schema`.
pub(crate) fn batch<R>(
    columns: &[Column<R>],
    rows: &[R],
    projection: &[usize],
    schema: &SchemaRef,
) -> Result<RecordBatch> {
    let arrays = projection
        .iter()
        .map(|&i| (columns[i].build)(rows))
        .collect();
    // the row count is stated for projections without columns (`count(*)`)
    let options = RecordBatchOptions::new().with_row_count(Some(rows.len()));
    Ok(RecordBatch::try_new_with_options(
        Arc::clone(schema),
        arrays,
        &options,
    )?)
}

/// A count or a size as a column holds it: an `i64`, the largest where it does not fit.
pub(crate) fn saturating(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// `camelCase` (or `PascalCase`) as `snake_case`, an acronym as one word: a metric's
/// name as a column name.
pub(crate) fn snake_case(name: &str) -> String {
    let chars: Vec<char> = name.chars().collect();
    let mut out = String::with_capacity(name.len() + 4);
    for (i, &c) in chars.iter().enumerate() {
        if c.is_ascii_uppercase() && i > 0 {
            let after_lower = !chars[i - 1].is_ascii_uppercase();
            let ends_acronym = chars.get(i + 1).is_some_and(char::is_ascii_lowercase);
            if after_lower || ends_acronym {
                out.push('_');
            }
        }
        out.push(c.to_ascii_lowercase());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn catalog_names_become_snake_case() {
        assert_eq!(snake_case("selfCpuNanos"), "self_cpu_nanos");
        assert_eq!(snake_case("outputRows"), "output_rows");
        assert_eq!(snake_case("readConcurrency0"), "read_concurrency0");
        assert_eq!(snake_case("JVMHeapMemory"), "jvm_heap_memory");
        assert_eq!(snake_case("MinorGCCount"), "minor_gc_count");
        assert_eq!(
            snake_case("OnHeapExecutionMemory"),
            "on_heap_execution_memory"
        );
    }

    #[test]
    fn a_batch_holds_the_projected_columns_and_counts_rows_without_any() {
        let columns: Vec<Column<(i64, &str)>> = vec![
            int("n", |r: &(i64, &str)| Some(r.0)),
            text("s", |r| Some(r.1)),
        ];
        let rows = [(1, "a"), (2, "b"), (3, "c")];
        let full = schema_of(&columns);
        let only_s = Arc::new(full.project(&[1]).unwrap());
        let b = batch(&columns, &rows, &[1], &only_s).unwrap();
        assert_eq!(b.num_columns(), 1);
        assert_eq!(b.schema().field(0).name(), "s");
        let empty = Arc::new(full.project(&[]).unwrap());
        assert_eq!(batch(&columns, &rows, &[], &empty).unwrap().num_rows(), 3);
    }
}
