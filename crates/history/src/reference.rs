//! The history tables' reference, generated from their schemas: a Markdown page with a
//! section per table and a row per column (the catalog's metrics as one row that points
//! to the metrics reference).

use std::fmt::Write as _;

use datafusion::arrow::datatypes::{DataType, Field};

use crate::columns::CATALOG_METRIC;
use crate::tables::TABLES;

/// Where the generated page lives, relative to the workspace's root.
pub const PAGE: &str = "docs/src/reference/history-tables.md";

/// A column's type as the page names it.
fn type_name(data_type: &DataType) -> &'static str {
    match data_type {
        DataType::Utf8 => "text",
        DataType::Int64 => "bigint",
        DataType::Boolean => "boolean",
        DataType::Timestamp(..) => "timestamp (UTC)",
        DataType::Map(..) => "map(text, bigint)",
        _ => "other",
    }
}

fn metadata<'a>(field: &'a Field, key: &str) -> &'a str {
    field.metadata().get(key).map_or("", String::as_str)
}

/// The reference page of the `qprof` schema's tables.
pub fn markdown() -> String {
    let mut out = String::from(
        "<!-- Generated from the qprof.* tables' schemas (crates/history); do not edit. \
         Regenerate with `QPROF_BLESS=1 cargo test -p qprof-history reference`. -->\n\n\
         # History tables reference\n\n\
         The tables of the `qprof` schema that `qprof sql --history`, `register_history` \
         and `qprof serve`'s `/qprof/v1/sql` offer (see [SQL over every logged \
         run](../history-sql.md)). A column's unit is also in its field's `unit` metadata; \
         times are timestamps in UTC.\n",
    );
    for table in TABLES {
        let schema = table.schema();
        let _ = write!(
            out,
            "\n## `qprof.{}`\n\n{}\n\n| column | type | unit | meaning |\n|---|---|---|---|\n",
            table.name(),
            table.about()
        );
        let mut metrics = 0;
        for field in schema.fields() {
            if field.metadata().contains_key(CATALOG_METRIC) {
                if metrics == 0 {
                    out.push_str(
                        "| *one per catalog metric* | bigint | the metric's | every metric of \
                         the [metrics reference](metrics.md) (but the per-function CPU, which \
                         is `qprof.functions`'), in snake case: `selfCpuNanos` is \
                         `self_cpu_nanos`; null where the operator has no such metric |\n",
                    );
                }
                metrics += 1;
                continue;
            }
            let _ = writeln!(
                out,
                "| `{}` | {} | {} | {} |",
                field.name(),
                type_name(field.data_type()),
                metadata(field, "unit"),
                metadata(field, "description").replace('|', "\\|"),
            );
        }
        if metrics > 0 {
            let _ = writeln!(out, "\nIts catalog metrics are {metrics} columns.");
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    /// The checked-in page is what the schemas generate (`QPROF_BLESS=1` writes it).
    #[test]
    fn the_checked_in_reference_is_the_tables() {
        let page = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../..")
            .join(PAGE);
        let generated = markdown();
        if std::env::var_os("QPROF_BLESS").is_some() {
            std::fs::write(&page, &generated).unwrap();
        }
        let checked_in = std::fs::read_to_string(&page).unwrap_or_default();
        assert!(
            checked_in == generated,
            "{PAGE} is not the tables': regenerate it with \
             `QPROF_BLESS=1 cargo test -p qprof-history reference`"
        );
    }

    #[test]
    fn every_column_says_what_it_is_and_every_name_is_unique() {
        for table in TABLES {
            let schema = table.schema();
            let mut seen = std::collections::HashSet::new();
            for field in schema.fields() {
                assert!(
                    seen.insert(field.name().clone()),
                    "{}.{} twice",
                    table.name(),
                    field.name()
                );
                assert!(
                    !metadata(field, "description").is_empty(),
                    "{}.{} has no description",
                    table.name(),
                    field.name()
                );
                assert_ne!(type_name(field.data_type()), "other", "{}", field.name());
            }
        }
    }
}
