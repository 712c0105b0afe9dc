//! Cached, in-process TPC-H data generation into Parquet files.

use std::fs::{self, File};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc;

use datafusion::arrow::record_batch::RecordBatchReader;
use datafusion::parquet::arrow::ArrowWriter;
use datafusion::parquet::basic::Compression;
use datafusion::parquet::file::properties::WriterProperties;
use tpchgen::generators::{
    CustomerGenerator, LineItemGenerator, NationGenerator, OrderGenerator, PartGenerator,
    PartSuppGenerator, RegionGenerator, SupplierGenerator,
};
use tpchgen_arrow::{
    CustomerArrow, LineItemArrow, NationArrow, OrderArrow, PartArrow, PartSuppArrow, RegionArrow,
    SupplierArrow,
};

use crate::{ScaleFactor, TABLES, TpchError};

/// Rows per generated Arrow batch (and per progress report).
const BATCH_SIZE: usize = 8192;

/// Name of the marker file written once every table has been generated.
pub const COMPLETE_MARKER: &str = "_complete";

/// A progress report from [`generate`].
///
/// Before any work starts, one report with `rows_written == 0` is sent for
/// every table (in [`TABLES`] order) so a UI can set up all progress bars up
/// front. After that, reports for different tables may interleave (tables are
/// generated concurrently); for each table `rows_written` only grows, and the
/// last report for a table has `rows_written == total_rows`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Progress {
    /// Table being written, one of [`TABLES`].
    pub table: &'static str,
    /// Rows of this table written so far.
    pub rows_written: u64,
    /// Rows this table will have once complete (exact, not an estimate).
    pub total_rows: u64,
}

impl Progress {
    /// Whether this table is fully written.
    pub fn is_done(&self) -> bool {
        self.rows_written >= self.total_rows
    }
}

/// Where the Parquet file of each TPC-H table lives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DatasetPaths {
    dir: PathBuf,
    tables: Vec<(&'static str, PathBuf)>,
    cache_hit: bool,
}

impl DatasetPaths {
    /// Paths of the dataset in `dir` (`<dir>/<table>.parquet`), without
    /// checking that the files exist.
    pub fn in_dir(dir: &Path) -> Self {
        Self {
            dir: dir.to_path_buf(),
            tables: TABLES
                .iter()
                .map(|&table| (table, table_path(dir, table)))
                .collect(),
            cache_hit: false,
        }
    }

    /// The dataset directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// `(table, path)` pairs in [`TABLES`] order.
    pub fn tables(&self) -> &[(&'static str, PathBuf)] {
        &self.tables
    }

    /// Path of one table's Parquet file, if `table` is a TPC-H table.
    pub fn get(&self, table: &str) -> Option<&Path> {
        self.tables
            .iter()
            .find(|(name, _)| *name == table)
            .map(|(_, path)| path.as_path())
    }

    /// `true` if [`generate`] found a complete dataset and generated nothing.
    pub fn cache_hit(&self) -> bool {
        self.cache_hit
    }
}

/// The eight TPC-H tables, with their generators.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Table {
    Customer,
    LineItem,
    Nation,
    Orders,
    Part,
    PartSupp,
    Region,
    Supplier,
}

impl Table {
    /// In [`TABLES`] order.
    const ALL: [Table; 8] = [
        Table::Customer,
        Table::LineItem,
        Table::Nation,
        Table::Orders,
        Table::Part,
        Table::PartSupp,
        Table::Region,
        Table::Supplier,
    ];

    fn name(self) -> &'static str {
        match self {
            Table::Customer => "customer",
            Table::LineItem => "lineitem",
            Table::Nation => "nation",
            Table::Orders => "orders",
            Table::Part => "part",
            Table::PartSupp => "partsupp",
            Table::Region => "region",
            Table::Supplier => "supplier",
        }
    }

    fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|t| t.name() == name)
    }

    /// Exact number of rows tpchgen produces for this table.
    fn row_count(self, sf: f64) -> u64 {
        let rows = match self {
            Table::Customer => CustomerGenerator::calculate_row_count(sf, 1, 1),
            Table::Nation => NATION_ROWS,
            Table::Orders => OrderGenerator::calculate_row_count(sf, 1, 1),
            Table::Part => PartGenerator::calculate_row_count(sf, 1, 1),
            // Careful: tpchgen's `PartSuppGenerator::calculate_row_count`
            // returns the number of *parts*; each part has 4 suppliers.
            Table::PartSupp => PartSuppGenerator::calculate_row_count(sf, 1, 1) * 4,
            Table::Region => REGION_ROWS,
            Table::Supplier => SupplierGenerator::calculate_row_count(sf, 1, 1),
            Table::LineItem => return lineitem_row_count(sf),
        };
        u64::try_from(rows).unwrap_or(0)
    }

    /// A batch iterator over the whole table.
    fn reader(self, sf: f64) -> Box<dyn RecordBatchReader> {
        match self {
            Table::Customer => Box::new(
                CustomerArrow::new(CustomerGenerator::new(sf, 1, 1)).with_batch_size(BATCH_SIZE),
            ),
            Table::LineItem => Box::new(
                LineItemArrow::new(LineItemGenerator::new(sf, 1, 1)).with_batch_size(BATCH_SIZE),
            ),
            Table::Nation => Box::new(
                NationArrow::new(NationGenerator::new(sf, 1, 1)).with_batch_size(BATCH_SIZE),
            ),
            Table::Orders => {
                Box::new(OrderArrow::new(OrderGenerator::new(sf, 1, 1)).with_batch_size(BATCH_SIZE))
            }
            Table::Part => {
                Box::new(PartArrow::new(PartGenerator::new(sf, 1, 1)).with_batch_size(BATCH_SIZE))
            }
            Table::PartSupp => Box::new(
                PartSuppArrow::new(PartSuppGenerator::new(sf, 1, 1)).with_batch_size(BATCH_SIZE),
            ),
            Table::Region => Box::new(
                RegionArrow::new(RegionGenerator::new(sf, 1, 1)).with_batch_size(BATCH_SIZE),
            ),
            Table::Supplier => Box::new(
                SupplierArrow::new(SupplierGenerator::new(sf, 1, 1)).with_batch_size(BATCH_SIZE),
            ),
        }
    }
}

/// `nation` and `region` are fixed-size, whatever the scale factor.
const NATION_ROWS: i64 = 25;
const REGION_ROWS: i64 = 5;

/// `lineitem` has 1..=7 rows per order, drawn from a seeded random stream;
/// tpchgen has no closed-form count. Replay just that stream (one LCG step
/// per order, the same way `LineItemGenerator` consumes it) to get the
/// exact total.
fn lineitem_row_count(sf: f64) -> u64 {
    let orders = OrderGenerator::calculate_row_count(sf, 1, 1);
    let mut line_count = OrderGenerator::create_line_count_random();
    let mut total = 0u64;
    for _ in 0..orders {
        total += u64::try_from(line_count.next_value()).unwrap_or(0);
        line_count.row_finished();
    }
    total
}

/// Exact number of rows `table` has at scale factor `sf`, or `None` if
/// `table` is not one of [`TABLES`].
///
/// Cheap for every table except `lineitem`, which costs one random-number
/// step per order (1.5 million per unit of scale factor).
pub fn expected_row_count(sf: ScaleFactor, table: &str) -> Option<u64> {
    Table::from_name(table).map(|t| t.row_count(sf.get()))
}

fn table_path(dir: &Path, table: &str) -> PathBuf {
    dir.join(format!("{table}.parquet"))
}

fn marker_contents(sf: ScaleFactor) -> String {
    format!("qprof-tpch tpchgen-4 sf={sf}\n")
}

/// Whether `dir` holds a complete dataset for `sf`: the marker written at the
/// end of a successful [`generate`] names `sf`, and all eight table files
/// exist.
pub fn is_complete(sf: ScaleFactor, dir: &Path) -> bool {
    let marker_ok = fs::read_to_string(dir.join(COMPLETE_MARKER))
        .map(|contents| contents == marker_contents(sf))
        .unwrap_or(false);
    marker_ok && TABLES.iter().all(|t| table_path(dir, t).is_file())
}

/// Generate the TPC-H dataset for `sf` into `dir` as one Parquet file per
/// table (`<dir>/<table>.parquet`), unless `dir` already holds a complete
/// dataset for `sf` (see [`is_complete`]), in which case nothing is written
/// and no progress is reported.
///
/// Each table is written to a hidden temporary file in `dir` and renamed into
/// place once complete; the `_complete` marker is written last. A killed
/// generation therefore never leaves a dataset that looks complete, and the
/// next call regenerates it. Tables are generated concurrently (one thread
/// per table, up to the number of available cores); each file is written by
/// a single sequential generator, so the output does not depend on the
/// thread count.
///
/// `progress` is called on the calling thread; see [`Progress`] for the
/// order of reports.
pub fn generate(
    sf: ScaleFactor,
    dir: &Path,
    progress: &mut dyn FnMut(Progress),
) -> Result<DatasetPaths, TpchError> {
    let mut paths = DatasetPaths::in_dir(dir);
    if is_complete(sf, dir) {
        paths.cache_hit = true;
        return Ok(paths);
    }

    fs::create_dir_all(dir).map_err(|source| TpchError::Io {
        path: dir.to_path_buf(),
        source,
    })?;
    // Invalidate first, so that a partially regenerated directory (e.g. one
    // that used to hold another scale factor) can never look complete.
    let marker = dir.join(COMPLETE_MARKER);
    match fs::remove_file(&marker) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(source) => {
            return Err(TpchError::Io {
                path: marker,
                source,
            });
        }
    }

    let totals: Vec<u64> = Table::ALL.iter().map(|t| t.row_count(sf.get())).collect();
    for (table, &total_rows) in Table::ALL.iter().zip(&totals) {
        progress(Progress {
            table: table.name(),
            rows_written: 0,
            total_rows,
        });
    }

    // Largest tables first so the long poles start early.
    let mut order: Vec<usize> = (0..Table::ALL.len()).collect();
    order.sort_by_key(|&i| std::cmp::Reverse(totals[i]));

    let threads = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
        .clamp(1, Table::ALL.len());
    let next = AtomicUsize::new(0);
    let cancel = AtomicBool::new(false);
    let (tx, rx) = mpsc::channel::<Progress>();

    let result = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads)
            .map(|_| {
                let tx = tx.clone();
                let (next, cancel, order, totals) = (&next, &cancel, &order, &totals);
                scope.spawn(move || -> Result<(), TpchError> {
                    loop {
                        if cancel.load(Ordering::Relaxed) {
                            return Ok(());
                        }
                        let Some(&i) = order.get(next.fetch_add(1, Ordering::Relaxed)) else {
                            return Ok(());
                        };
                        let table = Table::ALL[i];
                        let res = write_table(table, sf, dir, totals[i], &tx, cancel);
                        if res.is_err() {
                            cancel.store(true, Ordering::Relaxed);
                            return res;
                        }
                    }
                })
            })
            .collect();
        drop(tx);

        // Forward progress on this thread until every worker has hung up.
        for report in rx {
            progress(report);
        }

        let mut first_err = None;
        for worker in workers {
            match worker.join() {
                Ok(Ok(())) => {}
                Ok(Err(e)) => {
                    first_err.get_or_insert(e);
                }
                Err(panic) => std::panic::resume_unwind(panic),
            }
        }
        first_err.map_or(Ok(()), Err)
    });
    result?;

    write_marker(&marker, sf)?;
    Ok(paths)
}

/// Write one table to `<dir>/.<table>.parquet.tmp`, then rename it to
/// `<dir>/<table>.parquet`.
fn write_table(
    table: Table,
    sf: ScaleFactor,
    dir: &Path,
    total_rows: u64,
    tx: &mpsc::Sender<Progress>,
    cancel: &AtomicBool,
) -> Result<(), TpchError> {
    let name = table.name();
    let final_path = table_path(dir, name);
    let tmp_path = dir.join(format!(".{name}.parquet.tmp"));
    let io_err = |path: &Path| {
        let path = path.to_path_buf();
        move |source| TpchError::Io { path, source }
    };
    let parquet_err = |source| TpchError::Parquet {
        path: tmp_path.clone(),
        source,
    };

    let reader = table.reader(sf.get());
    let file = File::create(&tmp_path).map_err(io_err(&tmp_path))?;
    let props = WriterProperties::builder()
        .set_compression(Compression::SNAPPY)
        .set_created_by(format!("qprof-tpch {}", env!("CARGO_PKG_VERSION")))
        .build();
    let mut writer =
        ArrowWriter::try_new(file, reader.schema(), Some(props)).map_err(parquet_err)?;

    let mut rows_written = 0u64;
    for batch in reader {
        if cancel.load(Ordering::Relaxed) {
            drop(writer);
            let _ = fs::remove_file(&tmp_path);
            return Ok(());
        }
        let batch = batch.map_err(|source| TpchError::Arrow {
            path: tmp_path.clone(),
            source,
        })?;
        writer.write(&batch).map_err(parquet_err)?;
        rows_written += batch.num_rows() as u64;
        // The receiver only goes away if the caller's thread is unwinding.
        let _ = tx.send(Progress {
            table: name,
            rows_written,
            total_rows,
        });
    }
    let file = writer.into_inner().map_err(parquet_err)?;
    file.sync_all().map_err(io_err(&tmp_path))?;
    drop(file);
    fs::rename(&tmp_path, &final_path).map_err(io_err(&final_path))?;

    if rows_written != total_rows {
        // Keep the UI honest even if the row-count formula ever drifts from
        // the generator; this never happens with tpchgen 4.
        let _ = tx.send(Progress {
            table: name,
            rows_written,
            total_rows: rows_written,
        });
    }
    Ok(())
}

fn write_marker(marker: &Path, sf: ScaleFactor) -> Result<(), TpchError> {
    let io_err = |source| TpchError::Io {
        path: marker.to_path_buf(),
        source,
    };
    let mut file = File::create(marker).map_err(io_err)?;
    file.write_all(marker_contents(sf).as_bytes())
        .map_err(io_err)?;
    file.sync_all().map_err(io_err)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sf(s: &str) -> ScaleFactor {
        s.parse().unwrap()
    }

    #[test]
    fn table_enum_matches_tables_const() {
        let names: Vec<_> = Table::ALL.iter().map(|t| t.name()).collect();
        assert_eq!(names, TABLES);
        for name in TABLES {
            assert_eq!(Table::from_name(name).unwrap().name(), name);
        }
        assert_eq!(Table::from_name("lineitems"), None);
    }

    #[test]
    fn row_counts_match_the_tpch_spec() {
        // TPC-H spec 4.2.5: base cardinalities, times SF (nation and region
        // are fixed); lineitem is the well-known dbgen count.
        let expected = [
            ("customer", 1_500),
            ("lineitem", 60_175),
            ("nation", 25),
            ("orders", 15_000),
            ("part", 2_000),
            ("partsupp", 8_000),
            ("region", 5),
            ("supplier", 100),
        ];
        for (table, rows) in expected {
            assert_eq!(expected_row_count(sf("0.01"), table), Some(rows), "{table}");
        }
        assert_eq!(expected_row_count(sf("1"), "orders"), Some(1_500_000));
        assert_eq!(expected_row_count(sf("1"), "partsupp"), Some(800_000));
        assert_eq!(expected_row_count(sf("0.01"), "nope"), None);
    }

    #[test]
    fn lineitem_count_is_close_to_four_per_order() {
        let sf = sf("0.1");
        let orders = expected_row_count(sf, "orders").unwrap() as f64;
        let lines = expected_row_count(sf, "lineitem").unwrap() as f64;
        assert!((lines / orders - 4.0).abs() < 0.05, "{lines} / {orders}");
    }

    #[test]
    fn completeness_needs_marker_for_same_sf_and_all_files() {
        let dir = tempfile::tempdir().unwrap();
        let dir = dir.path();
        for table in TABLES {
            fs::write(table_path(dir, table), b"").unwrap();
        }
        assert!(!is_complete(sf("0.01"), dir), "no marker yet");

        fs::write(dir.join(COMPLETE_MARKER), marker_contents(sf("0.01"))).unwrap();
        assert!(is_complete(sf("0.01"), dir));
        assert!(!is_complete(sf("0.1"), dir), "marker names another sf");

        fs::remove_file(table_path(dir, "region")).unwrap();
        assert!(!is_complete(sf("0.01"), dir), "a table file is missing");
    }

    #[test]
    fn dataset_paths_layout() {
        let paths = DatasetPaths::in_dir(Path::new("/data/sf1"));
        assert_eq!(paths.tables().len(), 8);
        assert_eq!(
            paths.get("lineitem"),
            Some(Path::new("/data/sf1/lineitem.parquet"))
        );
        assert_eq!(paths.get("nope"), None);
        assert_eq!(paths.dir(), Path::new("/data/sf1"));
        assert!(!paths.cache_hit());
    }
}
