//! The planted-problem suite: data and queries made to have one known problem each. Each
//! problem's finding is a warning ranked first, its cost checked against what was planted
//! (the tolerance is stated beside each check), and the same query without the problem
//! raises no warning at all. (The wrong build side chosen on misleading statistics is
//! planted in `estimates.rs`, beside the table that lies, and slow planning in
//! `planning.rs`, beside the slow rule.) A healthy TPC-H run warns of nothing.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Duration;

use datafusion::arrow::array::{ArrayRef, Int64Array, RecordBatch, StringArray, UInt32Array};
use datafusion::arrow::compute::take;
use datafusion::arrow::datatypes::{DataType, Field, Schema};
use datafusion::datasource::MemTable;
use datafusion::execution::runtime_env::{RuntimeEnv, RuntimeEnvBuilder};
use datafusion::logical_expr::{ColumnarValue, Volatility, create_udf};
use datafusion::parquet::arrow::ArrowWriter;
use datafusion::parquet::file::properties::WriterProperties;
use datafusion::prelude::{ParquetReadOptions, SessionConfig};
use qprof_core::advice::{CostKind, Finding, Severity, advise, render_findings};
use qprof_core::alloc::CountingAllocator;
use qprof_core::profile::{ProfileNode, QueryProfile, names};
use qprof_datafusion::ProfilingSession;

mod stores;
use stores::CountingStore;

// as in the binary: the heap is counted, so memory no operator reserved would be found
#[global_allocator]
static ALLOCATOR: CountingAllocator = CountingAllocator::system();

/// Rows per batch of the tables made here.
const BATCH_ROWS: usize = 8_192;

/// The advisor's findings on `profile`, checked to start with a warning of `rule`; that
/// finding.
fn top_finding(profile: &QueryProfile, rule: &str) -> Finding {
    let findings = advise(profile);
    let text = profile.render_text(0);
    let top = findings
        .first()
        .unwrap_or_else(|| panic!("no finding, {rule} expected:\n{text}"));
    let costs: Vec<(&str, _)> = findings.iter().map(|f| (f.rule, f.cost)).collect();
    assert_eq!(
        (top.rule, top.severity),
        (rule, Severity::Warning),
        "{}{costs:?}\n{text}",
        render_findings(&findings)
    );
    assert!(
        top.cost.amount <= top.cost.whole || top.cost.whole == 0,
        "{:?}",
        top.cost
    );
    top.clone()
}

/// Checks that the advisor warns of nothing in `profile`.
fn assert_no_warning(profile: &QueryProfile) {
    let findings = advise(profile);
    assert!(
        findings.iter().all(|f| f.severity == Severity::Info),
        "{}\n{}",
        render_findings(&findings),
        profile.render_text(0)
    );
}

/// A number the finding states.
fn number(finding: &Finding, name: &str) -> i64 {
    finding
        .numbers
        .iter()
        .find(|(n, _)| *n == name)
        .unwrap_or_else(|| panic!("{} states no {name}: {:?}", finding.rule, finding.numbers))
        .1
}

fn node(profile: &QueryProfile, id: Option<usize>) -> &ProfileNode {
    profile
        .plan
        .iter()
        .find(|n| Some(n.id) == id)
        .unwrap_or_else(|| panic!("no operator {id:?}"))
}

/// A table of Int64 columns, its rows in `partitions` partitions of whole batches.
fn int_table(columns: &[(&str, Vec<i64>)], partitions: usize) -> Arc<MemTable> {
    let arrays: Vec<ArrayRef> = columns
        .iter()
        .map(|(_, values)| Arc::new(Int64Array::from(values.clone())) as ArrayRef)
        .collect();
    let fields: Vec<Field> = columns
        .iter()
        .map(|(name, _)| Field::new(*name, DataType::Int64, false))
        .collect();
    memory_table(Arc::new(Schema::new(fields)), arrays, partitions)
}

/// The indices of `len` rows from `offset`.
fn rows_of(offset: usize, len: usize) -> UInt32Array {
    UInt32Array::from_iter_values((offset as u32)..(offset + len) as u32)
}

/// A table of `arrays`, in batches that each own their buffers (a slice would hold, and
/// report, the whole array's).
fn memory_table(schema: Arc<Schema>, arrays: Vec<ArrayRef>, partitions: usize) -> Arc<MemTable> {
    let rows = arrays[0].len();
    let batches: Vec<RecordBatch> = (0..rows.div_ceil(BATCH_ROWS))
        .map(|i| {
            let (offset, len) = (i * BATCH_ROWS, BATCH_ROWS.min(rows - i * BATCH_ROWS));
            let columns = arrays
                .iter()
                .map(|a| take(a.as_ref(), &rows_of(offset, len), None).unwrap())
                .collect();
            RecordBatch::try_new(Arc::clone(&schema), columns).unwrap()
        })
        .collect();
    let per = batches.len().div_ceil(partitions);
    let parts: Vec<Vec<RecordBatch>> = batches.chunks(per).map(<[_]>::to_vec).collect();
    Arc::new(MemTable::try_new(schema, parts).unwrap())
}

fn session(partitions: usize) -> ProfilingSession {
    ProfilingSession::new(SessionConfig::new().with_target_partitions(partitions))
}

/// The first column of the first row of a run's result.
fn first_value(batches: &[RecordBatch]) -> i64 {
    batches[0]
        .column(0)
        .as_any()
        .downcast_ref::<Int64Array>()
        .unwrap()
        .value(0)
}

// --- a skewed key ----------------------------------------------------------------------

/// The hot key's rows ...
const HOT_ROWS: usize = 1_000_000;
/// ... and every other row of the skewed table.
const COLD_ROWS: usize = 3_000;

fn keyed_session(keys: Vec<i64>) -> ProfilingSession {
    let session = session(4);
    let values: Vec<i64> = (0..keys.len() as i64).rev().collect();
    session
        .context()
        .register_table("t", int_table(&[("k", keys), ("v", values)], 4))
        .unwrap();
    session
}

/// Numbers each row within its key: a window over the key, so the rows are partitioned
/// by it and each partition sorts the rows of its keys.
const PER_KEY: &str = "SELECT CAST(sum(r) AS BIGINT) FROM \
                       (SELECT row_number() OVER (PARTITION BY k ORDER BY v) AS r FROM t)";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_skewed_key_is_skewed_tasks_costing_the_wait_on_its_partition() {
    // one key holds 1,000,000 rows, thirty others 100 each
    let keys: Vec<i64> = (0..HOT_ROWS)
        .map(|_| 0)
        .chain((0..COLD_ROWS).map(|i| 1 + (i % 30) as i64))
        .collect();
    let run = keyed_session(keys).run(1, PER_KEY).await.unwrap();
    let sum = |hot: i64| hot * (hot + 1) / 2 + 30 * (100 * 101 / 2);
    assert_eq!(first_value(&run.batches), sum(HOT_ROWS as i64));
    let top = top_finding(&run.profile, "skewed-tasks");
    // the cost is what the stage waited on its slowest task beyond the median one
    assert_eq!(top.cost.kind, CostKind::Wall);
    let (max, median) = (
        number(&top, "maxTaskMillis"),
        number(&top, "medianTaskMillis"),
    );
    assert_eq!(top.cost.amount as i64, (max - median) * 1_000_000);
    // the hot partition holds 333 times the rows of all the others together: its task
    // ran at least 5 times the median (the tolerance is for the tasks' fixed costs, tens
    // of milliseconds)
    assert!(max >= 5 * median.max(1), "{max} ms vs {median} ms");
    assert_eq!(number(&top, "tasks"), 4);
    // the same rows spread over 630 keys: every partition sorts a like share
    let keys: Vec<i64> = (0..(HOT_ROWS + COLD_ROWS) as i64)
        .map(|i| i % 630)
        .collect();
    let run = keyed_session(keys).run(1, PER_KEY).await.unwrap();
    assert_no_warning(&run.profile);
}

// --- an exploding join -----------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_repeating_on_both_sides_is_an_exploding_join_costing_its_cpu() {
    let session = session(2);
    // 10,000 rows a side, ten keys: 1,000 x 1,000 pairs per key
    let run = session
        .run(
            1,
            "SELECT count(*) FROM generate_series(1, 10000) AS a(x) \
             JOIN generate_series(1, 10000) AS b(y) ON a.x % 10 = b.y % 10",
        )
        .await
        .unwrap();
    assert_eq!(first_value(&run.batches), 10_000_000);
    let top = top_finding(&run.profile, "exploding-join");
    let join = node(&run.profile, top.node_id);
    assert_eq!(join.name, "HashJoinExec");
    assert_eq!(join.value(names::OUTPUT_ROWS), Some(10_000_000));
    // the cost is the join's CPU and its parents' on the exploded rows: at least the
    // join's own, and most of the query's (the inputs are 20,000 rows in all)
    assert_eq!(top.cost.kind, CostKind::Cpu);
    let own = join.value(names::SELF_CPU_NANOS).unwrap() as u64;
    assert!(top.cost.amount >= own, "{:?} vs {own}", top.cost);
    assert!(top.cost.share_permille() >= 500, "{:?}", top.cost);
    // joined on the whole key: as many rows out as in
    let run = session
        .run(
            2,
            "SELECT count(*) FROM generate_series(1, 10000) AS a(x) \
             JOIN generate_series(1, 10000) AS b(y) ON a.x = b.y",
        )
        .await
        .unwrap();
    assert_eq!(first_value(&run.batches), 10_000);
    assert_no_warning(&run.profile);
}

// --- a sort that spills under its memory limit -----------------------------------------

/// Rows of the wide table, and the bytes of each row's text.
const WIDE_ROWS: usize = 80_000;
const WIDE_TEXT: usize = 500;

fn wide_session(memory_limit: Option<usize>) -> ProfilingSession {
    let config = SessionConfig::new()
        .with_target_partitions(1)
        .set_usize("datafusion.execution.sort_spill_reservation_bytes", 1 << 20);
    let mut runtime = RuntimeEnvBuilder::new();
    if let Some(limit) = memory_limit {
        runtime = runtime.with_memory_limit(limit, 1.0);
    }
    let session = ProfilingSession::with_runtime(config, runtime.build_arc().unwrap());
    let keys = Int64Array::from_iter_values((0..WIDE_ROWS as i64).map(|i| (i * 7_919) % 80_000));
    let text = StringArray::from_iter_values((0..WIDE_ROWS).map(|i| format!("{i:0>WIDE_TEXT$}")));
    let schema = Arc::new(Schema::new(vec![
        Field::new("k", DataType::Int64, false),
        Field::new("p", DataType::Utf8, false),
    ]));
    let table = memory_table(schema, vec![Arc::new(keys) as ArrayRef, Arc::new(text)], 1);
    session.context().register_table("wide", table).unwrap();
    session
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sort_over_its_memory_limit_is_a_spill_costing_its_writes_and_reads() {
    let limit = 16 << 20;
    let sql = "SELECT k, p FROM wide ORDER BY k";
    let run = wide_session(Some(limit)).run(1, sql).await.unwrap();
    assert_eq!(run.profile.rows, WIDE_ROWS as u64);
    assert_eq!(first_value(&run.batches), 0);
    let top = top_finding(&run.profile, "spill");
    assert_eq!(node(&run.profile, top.node_id).name, "SortExec");
    // what did not fit under the limit went to disk (the text alone is 40 MB)
    let text_bytes = (WIDE_ROWS * WIDE_TEXT) as i64;
    assert!(
        number(&top, names::SPILL_WRITTEN_BYTES) >= text_bytes - limit as i64,
        "{:?}",
        top.numbers
    );
    // the cost is the time spent writing and reading the files, of the tasks' time
    assert_eq!(top.cost.kind, CostKind::TaskTime);
    assert_eq!(top.cost.amount as i64, number(&top, "spillNanos"));
    // the pool ran near its limit because of the sort: that is the spill, not another cause
    assert!(
        advise(&run.profile)
            .iter()
            .all(|f| f.rule != "memory-near-limit")
    );
    // with memory to spare the sort keeps its rows
    let run = wide_session(None).run(2, sql).await.unwrap();
    assert_eq!(run.profile.rows, WIDE_ROWS as u64);
    assert_no_warning(&run.profile);
}

// --- memory near the limit -------------------------------------------------------------

/// A join whose build side (2,000,000 keys) a hash table holds whole: it cannot spill.
fn join_session(memory_limit: usize) -> ProfilingSession {
    let config = SessionConfig::new().with_target_partitions(1);
    let runtime = RuntimeEnvBuilder::new()
        .with_memory_limit(memory_limit, 1.0)
        .build_arc()
        .unwrap();
    let session = ProfilingSession::with_runtime(config, runtime);
    // sparse keys: a hash table, not an array indexed by key
    let build: Vec<i64> = (0..2_000_000).map(|i| i * 97).collect();
    let probe: Vec<i64> = (0..3_000_000).map(|i| i * 97).collect();
    let ctx = session.context();
    ctx.register_table("b", int_table(&[("k", build)], 1))
        .unwrap();
    ctx.register_table("p", int_table(&[("k", probe)], 1))
        .unwrap();
    session
}

const JOIN: &str = "SELECT count(*) FROM p JOIN b ON p.k = b.k";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_join_holding_its_pool_near_the_limit_is_memory_near_limit() {
    // the join's need, measured under a limit far above it
    let roomy = join_session(4 << 30).run(1, JOIN).await.unwrap();
    assert_eq!(first_value(&roomy.batches), 2_000_000);
    let need = roomy.profile.memory_pool.unwrap().peak_bytes;
    assert!(need >= 64 << 20, "the join held only {need} bytes");
    assert_no_warning(&roomy.profile);
    // a limit it fills to 93%
    let limit = need * 100 / 93;
    let tight = join_session(limit as usize).run(2, JOIN).await.unwrap();
    assert_eq!(first_value(&tight.batches), 2_000_000);
    let top = top_finding(&tight.profile, "memory-near-limit");
    let holder = node(&tight.profile, top.node_id);
    assert_eq!(holder.name, "HashJoinExec");
    // the cost is the pool's peak out of its limit: the join's need within 2% (the same
    // plan on the same rows)
    let peak = tight.profile.memory_pool.unwrap().peak_bytes;
    assert_eq!(
        (top.cost.kind, top.cost.amount, top.cost.whole),
        (CostKind::Memory, peak, limit)
    );
    assert!(peak.abs_diff(need) * 50 <= need, "{peak} vs {need}");
    assert!(top.message.contains("HashJoinExec"), "{}", top.message);
}

// --- a filter that removes almost nothing ----------------------------------------------

const FILTERED_ROWS: i64 = 4_000_000;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_filter_keeping_every_row_it_reads_is_an_unselective_filter_costing_its_cpu() {
    let session = session(2);
    let values: Vec<i64> = (0..FILTERED_ROWS).collect();
    session
        .context()
        .register_table("t", int_table(&[("v", values)], 2))
        .unwrap();
    let run = session
        .run(1, "SELECT count(*) FROM t WHERE v % 1000 <> 3")
        .await
        .unwrap();
    let kept = (0..FILTERED_ROWS).filter(|v| v % 1000 != 3).count() as i64;
    assert_eq!(first_value(&run.batches), kept);
    let top = top_finding(&run.profile, "unselective-filter");
    let filter = node(&run.profile, top.node_id);
    assert_eq!(filter.name, "FilterExec");
    assert_eq!(number(&top, "scanOutputRows"), FILTERED_ROWS);
    assert_eq!(number(&top, "filterOutputRows"), kept);
    // the cost is the filter's own CPU: most of a query that only counts what it keeps
    assert_eq!(top.cost.kind, CostKind::Cpu);
    assert_eq!(
        top.cost.amount as i64,
        filter.value(names::SELF_CPU_NANOS).unwrap()
    );
    assert!(top.cost.share_permille() >= 300, "{:?}", top.cost);
    // a predicate that removes a tenth of the rows is the query's own
    let run = session
        .run(2, "SELECT count(*) FROM t WHERE v % 10 <> 3")
        .await
        .unwrap();
    assert_eq!(first_value(&run.batches), FILTERED_ROWS / 10 * 9);
    assert_no_warning(&run.profile);
}

// --- a costly function -----------------------------------------------------------------

/// What the costly function does for one value: a loop the optimizer cannot remove.
#[inline(never)]
fn costly_kernel(v: i64) -> i64 {
    let mut x = v as u64 ^ 0x9e37_79b9_7f4a_7c15;
    for i in 0..2_000u64 {
        x = std::hint::black_box(x.rotate_left(5) ^ i.wrapping_mul(0x2545_f491_4f6c_dd1d));
    }
    (x % 1_000) as i64
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_costly_function_is_a_dominating_function_costing_its_cpu() {
    let session = session(2);
    let values: Vec<i64> = (0..32_000).collect();
    session
        .context()
        .register_table("t", int_table(&[("v", values)], 2))
        .unwrap();
    // the function's own CPU, measured inside it: the ground truth
    let spent = Arc::new(AtomicU64::new(0));
    let counter = Arc::clone(&spent);
    session.context().register_udf(create_udf(
        "costly",
        vec![DataType::Int64],
        DataType::Int64,
        Volatility::Immutable,
        Arc::new(move |args: &[ColumnarValue]| {
            let start = qprof_core::clock::thread_cpu_nanos();
            let arrays = ColumnarValue::values_to_arrays(args)?;
            let input = arrays[0].as_any().downcast_ref::<Int64Array>().unwrap();
            let out: Int64Array = input.values().iter().map(|&v| costly_kernel(v)).collect();
            counter.fetch_add(qprof_core::clock::thread_cpu_nanos() - start, Relaxed);
            Ok(ColumnarValue::Array(Arc::new(out) as ArrayRef))
        }),
    ));
    let run = session
        .run(1, "SELECT sum(costly(v)) FROM t")
        .await
        .unwrap();
    let expected: i64 = (0..32_000).map(costly_kernel).sum();
    assert_eq!(first_value(&run.batches), expected);
    let top = top_finding(&run.profile, "dominating-function");
    assert!(top.message.starts_with("costly("), "{}", top.message);
    // the cost is the function's CPU as qprof timed (or sampled) it: within a factor of
    // 1.5 of what the function measured of itself
    let truth = spent.load(Relaxed);
    assert_eq!(top.cost.kind, CostKind::Cpu);
    assert!(
        top.cost.amount * 3 >= truth * 2 && top.cost.amount * 2 <= truth * 3,
        "{:?} vs {truth}",
        top.cost
    );
    // the same sum of a built-in: nothing to warn of
    let run = session.run(2, "SELECT sum(v % 1000) FROM t").await.unwrap();
    assert_no_warning(&run.profile);
}

// --- a slow object store ---------------------------------------------------------------

fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("qprof-planted-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Writes `x` = 0..2,000 into a Parquet file of ten row groups.
fn write_numbers(path: &Path) {
    let schema = Arc::new(Schema::new(vec![Field::new("x", DataType::Int64, false)]));
    let batch = RecordBatch::try_new(
        Arc::clone(&schema),
        vec![Arc::new(Int64Array::from_iter_values(0..2_000))],
    )
    .unwrap();
    let props = WriterProperties::builder()
        .set_max_row_group_row_count(Some(200))
        .build();
    let file = std::fs::File::create(path).unwrap();
    let mut writer = ArrowWriter::try_new(file, schema, Some(props)).unwrap();
    writer.write(&batch).unwrap();
    writer.close().unwrap();
}

/// `SELECT sum(x)` over the file through a store whose every read takes `delay`.
async fn sum_through(file: &Path, delay: Duration) -> (QueryProfile, u64) {
    let store = CountingStore::new(delay);
    let runtime = RuntimeEnv::default();
    runtime.register_object_store(
        &url::Url::parse("file://").unwrap(),
        Arc::clone(&store) as _,
    );
    let config = SessionConfig::new()
        .with_target_partitions(1)
        // no footer reads while planning: every read is the scan's
        .set_bool("datafusion.execution.collect_statistics", false);
    let session = ProfilingSession::with_runtime(config, Arc::new(runtime));
    session
        .context()
        .register_parquet("t", file.to_str().unwrap(), ParquetReadOptions::default())
        .await
        .unwrap();
    store.reset();
    let run = session.run(1, "SELECT sum(x) FROM t").await.unwrap();
    assert_eq!(first_value(&run.batches), (0..2_000).sum::<i64>());
    (run.profile, store.reads.load(Relaxed))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_store_is_io_bound_costing_the_wait_on_its_reads() {
    let dir = temp_dir("store");
    let file = dir.join("numbers.parquet");
    write_numbers(&file);
    let delay = Duration::from_millis(40);
    let (profile, reads) = sum_through(&file, delay).await;
    let top = top_finding(&profile, "io-bound");
    assert_eq!(node(&profile, top.node_id).name, "DataSourceExec");
    // one task read one request at a time: it waited on every read the store served,
    // each at least the store's delay (the tolerance is a tenth, as for any wait)
    assert!(reads >= 2, "{reads} reads");
    let floor = reads * delay.as_nanos() as u64;
    assert_eq!(top.cost.kind, CostKind::TaskTime);
    assert!(
        top.cost.amount >= floor * 9 / 10,
        "{:?} vs {floor}",
        top.cost
    );
    assert_eq!(number(&top, names::READ_REQUESTS), reads as i64);
    // the same file through a store that answers at once
    let (profile, _) = sum_through(&file, Duration::ZERO).await;
    assert_no_warning(&profile);
    let _ = std::fs::remove_dir_all(&dir);
}

// --- a healthy run ---------------------------------------------------------------------

/// Runs the 22 TPC-H queries at `scale` with memory to spare and checks their findings:
/// no warning (minor ones may be), and a bottleneck only where it is true.
async fn tpch_warns_of_nothing(scale: &str) {
    let root = temp_dir(&format!("tpch-{scale}"));
    let dir = root.join(format!("sf{scale}"));
    let sf: qprof_tpch::ScaleFactor = scale.parse().unwrap();
    let paths = tokio::task::spawn_blocking(move || qprof_tpch::generate(sf, &dir, &mut |_| {}))
        .await
        .unwrap()
        .expect("TPC-H generates");
    let session = session(2);
    qprof_tpch::register_all(session.context(), &paths)
        .await
        .unwrap();
    let mut warned = Vec::new();
    for n in 1..=22 {
        let run = session.run(n, qprof_tpch::query(n).unwrap()).await.unwrap();
        let findings = advise(&run.profile);
        if findings.iter().any(|f| f.severity == Severity::Warning) {
            warned.push(format!("q{n}: {}", render_findings(&findings)));
        }
        for finding in &findings {
            if finding.rule == "bottleneck" {
                // the operator with the most CPU, and half the query's
                let top = run.profile.top_by_self_cpu()[0];
                assert_eq!(finding.node_id, Some(top.id), "q{n}");
                let own = number(finding, names::SELF_CPU_NANOS);
                assert!(own * 2 >= number(finding, "queryCpuNanos"), "q{n}");
            }
        }
    }
    assert!(warned.is_empty(), "{}", warned.join(""));
    let _ = std::fs::remove_dir_all(&root);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_22_tpch_queries_at_sf_0_1_warn_of_nothing() {
    tpch_warns_of_nothing("0.1").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_22_tpch_queries_at_sf_1_warn_of_nothing() {
    tpch_warns_of_nothing("1").await;
}
