//! TPC-H for qprof: in-process data generation into Parquet, and the 22
//! standard TPC-H queries in DataFusion's SQL dialect.
//!
//! * [`generate`] writes `<dir>/<table>.parquet` for the eight tables using
//!   the [`tpchgen`]/[`tpchgen_arrow`] generators (no `dbgen`, no CSV step)
//!   and caches the result: a second call with the same scale factor and
//!   directory is a no-op.
//! * [`register_all`] registers those files with a DataFusion
//!   [`SessionContext`].
//! * [`query`] returns the SQL of query 1 to 22 (validation substitution
//!   parameters from the TPC-H spec; Q15's view is written as a CTE so every
//!   query is a single statement).
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use datafusion::prelude::SessionContext;
//! use qprof_tpch::{ScaleFactor, generate, query, register_all};
//!
//! let sf: ScaleFactor = "0.1".parse()?;
//! let dir = std::path::Path::new("data").join(sf.dir_name());
//! let paths = generate(sf, &dir, &mut |p| {
//!     eprintln!("{}: {}/{}", p.table, p.rows_written, p.total_rows)
//! })?;
//! let ctx = SessionContext::new();
//! register_all(&ctx, &paths).await?;
//! let batches = ctx.sql(query(1).unwrap()).await?.collect().await?;
//! # Ok(()) }
//! ```

#![deny(missing_docs)]

use std::path::PathBuf;

use datafusion::error::DataFusionError;
use datafusion::prelude::{ParquetReadOptions, SessionContext};

mod generate;
mod scale;

pub use generate::{
    COMPLETE_MARKER, DatasetPaths, Progress, expected_row_count, generate, is_complete,
};
pub use scale::{ScaleFactor, ScaleFactorError};

/// The eight TPC-H table names, alphabetically.
pub const TABLES: [&str; 8] = [
    "customer", "lineitem", "nation", "orders", "part", "partsupp", "region", "supplier",
];

/// Number of TPC-H queries; [`query`] accepts `1..=QUERY_COUNT`.
pub const QUERY_COUNT: usize = 22;

static QUERIES: [&str; QUERY_COUNT] = [
    include_str!("../queries/q1.sql"),
    include_str!("../queries/q2.sql"),
    include_str!("../queries/q3.sql"),
    include_str!("../queries/q4.sql"),
    include_str!("../queries/q5.sql"),
    include_str!("../queries/q6.sql"),
    include_str!("../queries/q7.sql"),
    include_str!("../queries/q8.sql"),
    include_str!("../queries/q9.sql"),
    include_str!("../queries/q10.sql"),
    include_str!("../queries/q11.sql"),
    include_str!("../queries/q12.sql"),
    include_str!("../queries/q13.sql"),
    include_str!("../queries/q14.sql"),
    include_str!("../queries/q15.sql"),
    include_str!("../queries/q16.sql"),
    include_str!("../queries/q17.sql"),
    include_str!("../queries/q18.sql"),
    include_str!("../queries/q19.sql"),
    include_str!("../queries/q20.sql"),
    include_str!("../queries/q21.sql"),
    include_str!("../queries/q22.sql"),
];

/// SQL text of TPC-H query `n` (1-based), or `None` outside `1..=22`.
///
/// Each query is exactly one statement with no trailing `;`, ready for
/// `SessionContext::sql`. It may start with `--` comment lines.
pub fn query(n: usize) -> Option<&'static str> {
    n.checked_sub(1).and_then(|i| QUERIES.get(i)).copied()
}

/// Errors from generating or registering a TPC-H dataset.
///
/// Messages name the file involved; the underlying error is available via
/// [`std::error::Error::source`] (print with `{:#}` in anyhow to see both).
#[derive(Debug, thiserror::Error)]
pub enum TpchError {
    /// Creating, writing, syncing or renaming a file or directory failed.
    #[error("i/o error on {}", path.display())]
    Io {
        /// The file or directory involved.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// The Parquet writer failed.
    #[error("failed to write parquet file {}", path.display())]
    Parquet {
        /// The (temporary) file being written.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: datafusion::parquet::errors::ParquetError,
    },
    /// The Arrow data generator failed.
    #[error("failed to generate arrow data for {}", path.display())]
    Arrow {
        /// The (temporary) file the data was destined for.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: datafusion::arrow::error::ArrowError,
    },
    /// DataFusion could not register a table's Parquet file.
    #[error("failed to register table '{table}' from {}", path.display())]
    Register {
        /// The table name.
        table: &'static str,
        /// The Parquet file.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: DataFusionError,
    },
    /// A dataset path is not valid UTF-8, which DataFusion requires.
    #[error("path is not valid utf-8: {}", path.display())]
    NonUtf8Path {
        /// The offending path.
        path: PathBuf,
    },
}

/// Register every table in `paths` with `ctx` under its TPC-H name, using
/// [`SessionContext::register_parquet`] with default read options.
pub async fn register_all(ctx: &SessionContext, paths: &DatasetPaths) -> Result<(), TpchError> {
    for &(table, ref path) in paths.tables() {
        let url = path
            .to_str()
            .ok_or_else(|| TpchError::NonUtf8Path { path: path.clone() })?;
        ctx.register_parquet(table, url, ParquetReadOptions::default())
            .await
            .map_err(|source| TpchError::Register {
                table,
                path: path.clone(),
                source,
            })?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_range() {
        assert_eq!(query(0), None);
        assert_eq!(query(QUERY_COUNT + 1), None);
        for n in 1..=QUERY_COUNT {
            let sql = query(n).unwrap();
            assert!(
                sql.starts_with(&format!("-- TPC-H Q{n}:")),
                "q{n} header: {sql}"
            );
            assert!(!sql.contains(';'), "q{n} must be a single statement");
            assert!(sql.to_lowercase().contains("select"), "q{n}");
        }
    }

    #[test]
    fn q15_is_a_single_select() {
        let sql: String = query(15)
            .unwrap()
            .lines()
            .filter(|line| !line.trim_start().starts_with("--"))
            .collect::<Vec<_>>()
            .join("\n")
            .to_lowercase();
        assert!(sql.contains("with revenue0 as"));
        assert!(!sql.contains("create view") && !sql.contains("drop view"));
    }
}
