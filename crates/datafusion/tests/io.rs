//! The I/O layer checked against the store: the bytes and requests the scan reports are
//! the ones the object store served, pruning matches the files' own statistics, read
//! concurrency and I/O wait follow a store whose reads take known time, and a COPY reports
//! the files and bytes found on disk.

use std::path::{Path as FsPath, PathBuf};
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Duration;

use datafusion::arrow::array::{Int64Array, RecordBatch};
use datafusion::arrow::datatypes::{DataType, Field, Schema};
use datafusion::execution::SessionStateBuilder;
use datafusion::execution::runtime_env::RuntimeEnv;
use datafusion::parquet::arrow::ArrowWriter;
use datafusion::parquet::file::properties::WriterProperties;
use datafusion::parquet::file::reader::{FileReader, SerializedFileReader};
use datafusion::parquet::file::statistics::Statistics;
use datafusion::prelude::{ParquetReadOptions, SessionConfig, SessionContext};
use qprof_core::metric::TaskValue;
use qprof_core::profile::{ProfileNode, QueryProfile, names};
use qprof_datafusion::read_cache::CHUNK_BYTES;
use qprof_datafusion::{ProfiledQuery, Profiler, ReadCache, ReadCacheConfig};

mod stores;
use stores::CountingStore;

/// Waits (a minute at most) until `condition` holds, checking every millisecond.
async fn until(what: &str, mut condition: impl FnMut() -> bool) {
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while !condition() {
        assert!(std::time::Instant::now() < deadline, "never: {what}");
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("qprof-io-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Writes `x` = 0..rows into a Parquet file, `per_group` rows per row group.
fn write_numbers(path: &FsPath, rows: i64, per_group: usize) {
    let schema = Arc::new(Schema::new(vec![Field::new("x", DataType::Int64, false)]));
    let batch = RecordBatch::try_new(
        Arc::clone(&schema),
        vec![Arc::new(Int64Array::from_iter_values(0..rows))],
    )
    .unwrap();
    let props = WriterProperties::builder()
        .set_max_row_group_row_count(Some(per_group))
        .build();
    let file = std::fs::File::create(path).unwrap();
    let mut writer = ArrowWriter::try_new(file, schema, Some(props)).unwrap();
    writer.write(&batch).unwrap();
    writer.close().unwrap();
}

/// Row groups of the file whose statistics exclude `x < bound`: their minimum is at least it.
fn row_groups_excluding(path: &FsPath, bound: i64) -> (usize, usize) {
    let reader = SerializedFileReader::new(std::fs::File::open(path).unwrap()).unwrap();
    let groups = reader.metadata().row_groups();
    let excluded = groups
        .iter()
        .filter(|g| match g.column(0).statistics() {
            Some(Statistics::Int64(s)) => s.min_opt().is_some_and(|min| *min >= bound),
            _ => false,
        })
        .count();
    (excluded, groups.len())
}

async fn session(store: Arc<CountingStore>, partitions: usize) -> (Profiler, SessionContext) {
    session_of(Profiler::new(), store, partitions).await
}

async fn session_of(
    profiler: Profiler,
    store: Arc<CountingStore>,
    partitions: usize,
) -> (Profiler, SessionContext) {
    let runtime = RuntimeEnv::default();
    runtime.register_object_store(&url::Url::parse("file://").unwrap(), store);
    let config = SessionConfig::new()
        .with_target_partitions(partitions)
        // no footer reads while planning: every read of a query is the scan's
        .set_bool("datafusion.execution.collect_statistics", false);
    let state = profiler
        .instrument(
            SessionStateBuilder::new()
                .with_config(config)
                .with_runtime_env(Arc::new(runtime))
                .with_default_features(),
        )
        .build();
    (profiler, SessionContext::new_with_state(state))
}

fn node<'a>(profile: &'a QueryProfile, name: &str) -> &'a ProfileNode {
    profile
        .plan
        .iter()
        .find(|n| n.name == name)
        .unwrap_or_else(|| panic!("no {name} in\n{}", profile.render_text(2)))
}

fn value(node: &ProfileNode, metric: &str) -> i64 {
    node.value(metric)
        .unwrap_or_else(|| panic!("{} has no {metric}", node.name))
}

fn task_values(node: &ProfileNode, metric: &str) -> Vec<TaskValue> {
    node.metrics
        .iter()
        .find(|m| m.name == metric)
        .unwrap_or_else(|| panic!("{} has no {metric}", node.name))
        .tasks
        .clone()
}

fn info<'a>(node: &'a ProfileNode, key: &str) -> &'a str {
    node.info
        .iter()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.as_str())
        .unwrap_or_else(|| panic!("{} has no info {key}", node.name))
}

/// The shares of an Impala bucket string, in percent.
fn shares(buckets: &str) -> Vec<f64> {
    buckets
        .split(' ')
        .map(|b| {
            let (_, share) = b.split_once(':').unwrap();
            share.trim_end_matches('%').parse().unwrap()
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scan_reports_the_bytes_and_requests_the_store_served_and_prunes_by_statistics() {
    let dir = temp_dir("scan");
    let file = dir.join("numbers.parquet");
    write_numbers(&file, 1000, 100);
    let store = CountingStore::new(Duration::ZERO);
    let (profiler, ctx) = session(Arc::clone(&store), 2).await;
    ctx.register_parquet("t", file.to_str().unwrap(), ParquetReadOptions::default())
        .await
        .unwrap();
    store.reset();
    let run = profiler
        .run_sql(
            &ctx,
            "SELECT count(*) AS n, sum(x) AS s FROM t WHERE x < 250",
        )
        .await
        .unwrap();
    let n = run.batches[0]
        .column(0)
        .as_any()
        .downcast_ref::<Int64Array>();
    assert_eq!(n.unwrap().value(0), 250);

    let scan = node(&run.profile, "DataSourceExec");
    let served = store.bytes.load(Relaxed) as i64;
    assert!(served > 0);
    assert_eq!(value(scan, names::READ_BYTES), served);
    assert_eq!(value(scan, names::STORAGE_READ_BYTES), served);
    assert_eq!(value(scan, names::LOCAL_READ_BYTES), 0);
    assert_eq!(value(scan, names::RAM_READ_BYTES), 0);
    assert_eq!(
        value(scan, names::READ_REQUESTS),
        store.reads.load(Relaxed) as i64
    );
    assert!(value(scan, names::DATA_SOURCE_READ_NANOS) > 0);

    let (excluded, groups) = row_groups_excluding(&file, 250);
    assert_eq!((excluded, groups), (7, 10), "the file's own statistics");
    assert_eq!(value(scan, "skippedStrides"), excluded as i64);
    assert_eq!(value(scan, "rowGroupsSkippedByStatistics"), excluded as i64);
    assert_eq!(value(scan, "processedStrides"), (groups - excluded) as i64);

    // every task that read has a concurrency sample: its buckets add up to 100 %
    let buckets = info(scan, names::READ_CONCURRENCY_BUCKET);
    let total: f64 = shares(buckets).iter().sum();
    assert!((total - 100.0).abs() < 0.05, "{buckets}");
    let average = value(scan, names::AVERAGE_READ_CONCURRENCY);
    assert!(
        (0..=20).contains(&average),
        "{average} tenths for 2 partitions"
    );
    // operators that touch no storage carry no I/O metrics
    let aggregate = node(&run.profile, "AggregateExec");
    assert!(aggregate.value(names::READ_BYTES).is_none());
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_reads_show_as_io_wait_and_read_time() {
    let dir = temp_dir("slow");
    let file = dir.join("numbers.parquet");
    write_numbers(&file, 2000, 200);
    let delay = Duration::from_millis(40);
    let store = CountingStore::new(delay);
    let (profiler, ctx) = session(Arc::clone(&store), 1).await;
    // ticks during the scan, not only the final sample
    ctx.sql("SET qprof.runtime.counter_update_period_ms = 20")
        .await
        .unwrap();
    ctx.register_parquet("t", file.to_str().unwrap(), ParquetReadOptions::default())
        .await
        .unwrap();
    store.reset();
    let run = profiler
        .run_sql(&ctx, "SELECT sum(x) FROM t")
        .await
        .unwrap();
    let scan = node(&run.profile, "DataSourceExec");
    let reads = store.reads.load(Relaxed);
    assert!(reads >= 2, "{reads} reads");
    let floor = (reads * delay.as_nanos() as u64) as i64;
    // the scan did nothing but wait for its reads, one at a time
    let wait = value(scan, names::IO_WAIT_NANOS);
    let read = value(scan, names::DATA_SOURCE_READ_NANOS);
    assert!(read >= floor, "read {read} < {floor}");
    assert!(wait >= floor * 9 / 10, "wait {wait} vs {floor}");
    // waiting happens between polls: bounded by the query's time, not the polls'
    assert!(
        wait as u64 <= run.profile.duration_nanos,
        "wait {wait} vs {}",
        run.profile.duration_nanos
    );
    // one task, one average of its reads in flight; the share of time at each count
    // adds up to the whole
    let concurrency = task_values(scan, names::AVERAGE_READ_CONCURRENCY);
    assert_eq!(concurrency.len(), 1);
    let buckets = shares(info(scan, names::READ_CONCURRENCY_BUCKET));
    assert!(
        (buckets.iter().sum::<f64>() - 100.0).abs() < 1.0,
        "{buckets:?}"
    );
    assert!(value(scan, names::READ_BYTES_PER_SECOND) > 0);
    let _ = std::fs::remove_dir_all(&dir);
}

/// The run of a query in the background.
type Running = tokio::task::JoinHandle<Result<ProfiledQuery, qprof_datafusion::QueryFailure>>;

/// `SELECT sum(x)` over a file of a gated store, started in the background with the gate
/// closed (the file registered before), its periodic counters updated every `period_ms`.
async fn gated_sum(name: &str, period_ms: u64) -> (PathBuf, Arc<CountingStore>, Profiler, Running) {
    let dir = temp_dir(name);
    let file = dir.join("numbers.parquet");
    write_numbers(&file, 2000, 200);
    let store = CountingStore::gated();
    let (profiler, ctx) = session(Arc::clone(&store), 1).await;
    ctx.sql(&format!(
        "SET qprof.runtime.counter_update_period_ms = {period_ms}"
    ))
    .await
    .unwrap();
    store.let_through(usize::MAX >> 4);
    ctx.register_parquet("t", file.to_str().unwrap(), ParquetReadOptions::default())
        .await
        .unwrap();
    // the gate closed again: the query's reads wait for the test
    let gate = store.gate.as_ref().unwrap();
    gate.forget_permits(gate.available_permits());
    store.reset();
    let running = {
        let (profiler, ctx) = (profiler.clone(), ctx.clone());
        tokio::spawn(async move { profiler.run_sql(&ctx, "SELECT sum(x) FROM t").await })
    };
    (dir, store, profiler, running)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_held_in_flight_is_sampled_as_one_read_in_flight() {
    let (dir, store, profiler, running) = gated_sum("held", 5).await;
    // a read held in flight: the live profile's samples see it, and only it
    until("a read in flight sampled", || {
        store.held.load(Relaxed) == 1
            && profiler.running_queries().iter().any(|&id| {
                profiler.snapshot(id).is_some_and(|s| {
                    value(node(&s, "DataSourceExec"), names::AVERAGE_READ_CONCURRENCY) > 0
                })
            })
    })
    .await;
    store.let_through(usize::MAX >> 4);
    let run = running.await.unwrap().unwrap();
    let scan = node(&run.profile, "DataSourceExec");
    // never more than the one read the scan had in flight at a time
    let average = value(scan, names::AVERAGE_READ_CONCURRENCY);
    assert!(average <= 10, "{average} tenths");
    let buckets = shares(info(scan, names::READ_CONCURRENCY_BUCKET));
    assert!(buckets.iter().skip(2).all(|&b| b == 0.0), "{buckets:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

fn files_under(dir: &FsPath) -> Vec<PathBuf> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            files.extend(files_under(&path));
        } else {
            files.push(path);
        }
    }
    files
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn copy_reports_the_files_and_bytes_on_disk_in_every_format() {
    let dir = temp_dir("copy");
    let file = dir.join("numbers.parquet");
    write_numbers(&file, 5000, 1000);
    let store = CountingStore::new(Duration::ZERO);
    let (profiler, ctx) = session(store, 2).await;
    ctx.register_parquet("t", file.to_str().unwrap(), ParquetReadOptions::default())
        .await
        .unwrap();
    for format in ["parquet", "csv", "json"] {
        let out = dir.join(format!("out-{format}"));
        std::fs::create_dir_all(&out).unwrap();
        let sql = format!(
            "COPY (SELECT x, x % 3 AS k FROM t) TO '{}/' STORED AS {format} PARTITIONED BY (k)",
            out.display()
        );
        let run = profiler.run_sql(&ctx, &sql).await.unwrap();
        let files = files_under(&out);
        let on_disk: u64 = files
            .iter()
            .map(|f| std::fs::metadata(f).unwrap().len())
            .sum();
        assert_eq!(files.len(), 3, "{format}: one file per partition value");
        let sink = node(&run.profile, "DataSinkExec");
        assert_eq!(
            value(sink, names::WRITTEN_FILES),
            files.len() as i64,
            "{format}"
        );
        assert_eq!(
            value(sink, names::PHYSICAL_WRITTEN_BYTES),
            on_disk as i64,
            "{format}"
        );
        assert!(value(sink, names::WRITE_REQUESTS) >= 3, "{format}");
        assert!(value(sink, names::WRITE_IO_NANOS) > 0, "{format}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_running_query_can_be_read_while_it_reads() {
    let (dir, store, profiler, running) = gated_sum("live", 500).await;
    // the reads let through one at a time: while the next one waits at the gate, the
    // snapshot has counted every byte served so far, and never more
    let mut seen = Vec::new();
    while seen.len() < 3 {
        until("a read waiting at the gate", || {
            store.held.load(Relaxed) >= 1
        })
        .await;
        let served = store.bytes.load(Relaxed) as i64;
        let mut read = 0;
        until("the snapshot counting what was served", || {
            read = profiler
                .running_queries()
                .iter()
                .find_map(|&id| profiler.snapshot(id))
                .map_or(-1, |s| value(node(&s, "DataSourceExec"), names::READ_BYTES));
            read == served
        })
        .await;
        seen.push(read);
        store.let_through(1);
        until("the read let through served", || {
            store.bytes.load(Relaxed) as i64 > served
        })
        .await;
    }
    store.let_through(usize::MAX >> 4);
    let run = running.await.unwrap().unwrap();
    let last = value(node(&run.profile, "DataSourceExec"), names::READ_BYTES);
    assert!(
        seen.iter().any(|&b| b > 0 && b < last),
        "no snapshot caught the scan mid-way: {seen:?} of {last}"
    );
    assert!(seen.windows(2).all(|w| w[0] <= w[1]), "{seen:?}");
    assert!(profiler.running_queries().is_empty());
    assert!(profiler.snapshot(run.profile.id).is_none());
    let _ = std::fs::remove_dir_all(&dir);
}

/// The scan's bytes by tier: storage, local disk, RAM.
fn tiers(scan: &ProfileNode) -> [i64; 3] {
    [
        value(scan, names::STORAGE_READ_BYTES),
        value(scan, names::LOCAL_READ_BYTES),
        value(scan, names::RAM_READ_BYTES),
    ]
}

/// Runs the cache tests' query, checks its answer, and returns its scan.
async fn cached_scan(profiler: &Profiler, ctx: &SessionContext, file: &FsPath) -> ProfileNode {
    if ctx.table_exist("t").unwrap() {
        ctx.deregister_table("t").unwrap();
    }
    ctx.register_parquet("t", file.to_str().unwrap(), ParquetReadOptions::default())
        .await
        .unwrap();
    let run = profiler
        .run_sql(ctx, "SELECT count(*), sum(x) FROM t WHERE x < 120000")
        .await
        .unwrap();
    let column = |i| first_row(&run, i);
    // bytes put together from chunks decode to the right answer
    assert_eq!((column(0), column(1)), (120_000, 120_000 * 119_999 / 2));
    node(&run.profile, "DataSourceExec").clone()
}

/// Column `i` of a run's first row, an Int64.
fn first_row(run: &ProfiledQuery, i: usize) -> i64 {
    run.batches[0]
        .column(i)
        .as_any()
        .downcast_ref::<Int64Array>()
        .unwrap()
        .value(0)
}

/// A one-partition session that queries files by location, through a RAM-only cache.
async fn ram_cached_session(memory_bytes: u64) -> (Profiler, SessionContext) {
    let cache = ReadCache::open(ReadCacheConfig {
        memory_bytes,
        disk: None,
    })
    .await
    .unwrap();
    let store = CountingStore::new(Duration::ZERO);
    let (profiler, ctx) = session_of(Profiler::with_read_cache(cache), store, 1).await;
    (profiler, ctx.enable_url_table())
}

/// A file of several cache chunks: 400 000 numbers, uncompressed, in 8 row groups.
fn chunked_file(dir: &FsPath) -> PathBuf {
    let file = dir.join("numbers.parquet");
    write_numbers(&file, 400_000, 50_000);
    let size = std::fs::metadata(&file).unwrap().len();
    assert!(size > 2 * CHUNK_BYTES, "{size} bytes is not several chunks");
    file
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_memory_cache_serves_a_repeated_scan_from_ram_and_the_tiers_add_up() {
    let dir = temp_dir("ram-cache");
    let file = chunked_file(&dir);
    let store = CountingStore::new(Duration::ZERO);

    // what the scan asks for, as the store serves it without a cache
    let (plain, ctx) = session(Arc::clone(&store), 2).await;
    let asked = value(&cached_scan(&plain, &ctx, &file).await, names::READ_BYTES);
    assert!(asked > 0);

    let cache = ReadCache::open(ReadCacheConfig {
        memory_bytes: 64 << 20,
        disk: None,
    })
    .await
    .unwrap();
    let (profiler, ctx) = session_of(Profiler::with_read_cache(cache), Arc::clone(&store), 2).await;
    store.reset();
    let first = cached_scan(&profiler, &ctx, &file).await;
    assert_eq!(value(&first, names::READ_BYTES), asked);
    assert_eq!(
        tiers(&first).iter().sum::<i64>(),
        asked,
        "{:?}",
        tiers(&first)
    );
    assert!(tiers(&first)[0] > 0);
    assert_eq!(tiers(&first)[1], 0, "no disk tier");
    // the store served whole chunks of the parts the scan read
    let served = store.bytes.load(Relaxed) as i64;
    assert!(served >= tiers(&first)[0], "{served}");

    store.reset();
    let second = cached_scan(&profiler, &ctx, &file).await;
    assert_eq!(value(&second, names::READ_BYTES), asked);
    assert_eq!(tiers(&second), [0, 0, asked]);
    assert_eq!(store.bytes.load(Relaxed), 0, "nothing read from the store");
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_disk_cache_serves_a_later_process_from_local_disk() {
    let dir = temp_dir("disk-cache");
    let file = chunked_file(&dir);
    let cache_dir = dir.join("cache");
    let config = ReadCacheConfig {
        memory_bytes: 64 << 20,
        disk: Some((cache_dir.clone(), 64 << 20)),
    };
    let store = CountingStore::new(Duration::ZERO);

    let cache = ReadCache::open(config.clone()).await.unwrap();
    let (profiler, ctx) = session_of(
        Profiler::with_read_cache(Arc::clone(&cache)),
        Arc::clone(&store),
        2,
    )
    .await;
    let first = cached_scan(&profiler, &ctx, &file).await;
    let asked = value(&first, names::READ_BYTES);
    assert!(tiers(&first)[0] > 0);
    cache.close().await.unwrap();
    drop((profiler, ctx, cache));
    assert!(
        !files_under(&cache_dir).is_empty(),
        "chunks written to disk"
    );

    // a new cache on the same directory: its memory tier starts empty
    let cache = ReadCache::open(config).await.unwrap();
    let (profiler, ctx) = session_of(
        Profiler::with_read_cache(Arc::clone(&cache)),
        Arc::clone(&store),
        2,
    )
    .await;
    store.reset();
    let later = cached_scan(&profiler, &ctx, &file).await;
    let [storage, local, ram] = tiers(&later);
    assert_eq!(storage, 0);
    assert!(local > 0, "{:?}", tiers(&later));
    assert_eq!(storage + local + ram, asked);
    assert_eq!(store.bytes.load(Relaxed), 0, "nothing read from the store");
    cache.close().await.unwrap();
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cached_object_rewritten_through_the_session_is_read_again() {
    let dir = temp_dir("cache-rewrite");
    let (profiler, ctx) = ram_cached_session(8 << 20).await;
    let out = dir.join("v.csv");
    let out = out.to_str().unwrap();
    let count = |sql: String| {
        let (profiler, ctx) = (&profiler, &ctx);
        async move {
            let run = profiler.run_sql(ctx, &sql).await.unwrap();
            run.batches[0]
                .column(0)
                .as_any()
                .downcast_ref::<Int64Array>()
                .unwrap()
                .value(0)
        }
    };
    let copy = |n: i64| {
        format!("COPY (SELECT * FROM generate_series(1, {n}) AS s(v)) TO '{out}' STORED AS CSV")
    };
    ctx.sql(&copy(10)).await.unwrap().collect().await.unwrap();
    let read = format!("SELECT count(*) FROM '{out}'");
    assert_eq!(count(read.clone()).await, 10);
    ctx.sql(&copy(20)).await.unwrap().collect().await.unwrap();
    assert_eq!(count(read).await, 20, "the old version was served");
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_streamed_read_through_the_cache_is_whole_and_counted_by_tier() {
    let dir = temp_dir("cache-stream");
    let file = dir.join("v.csv");
    let rows = 400_000_i64;
    let mut text = String::from("v\n");
    for v in 0..rows {
        text.push_str(&format!("{v}\n"));
    }
    std::fs::write(&file, &text).unwrap();
    assert!(text.len() as u64 > 2 * CHUNK_BYTES);
    // one partition: the file is read as one stream, not in ranges
    let (profiler, ctx) = ram_cached_session(32 << 20).await;
    let sql = format!("SELECT count(*), sum(v) FROM '{}'", file.display());
    let mut tiers_of_runs = Vec::new();
    for _ in 0..2 {
        let run = profiler.run_sql(&ctx, &sql).await.unwrap();
        let column = |i| first_row(&run, i);
        assert_eq!((column(0), column(1)), (rows, rows * (rows - 1) / 2));
        let scan = node(&run.profile, "DataSourceExec");
        assert_eq!(value(scan, names::READ_BYTES), text.len() as i64);
        tiers_of_runs.push(tiers(scan));
    }
    assert_eq!(tiers_of_runs[1], [0, 0, text.len() as i64]);
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_join_whose_build_side_was_read_shows_the_progress_of_its_probe_side() {
    let dir = temp_dir("progress");
    let file = dir.join("probe.parquet");
    write_numbers(&file, 20_000, 1_000);
    let store = CountingStore::gated();
    let (profiler, ctx) = session(Arc::clone(&store), 1).await;
    // the probe side's row count known exactly, from its footer, as users have it
    ctx.sql("SET datafusion.execution.collect_statistics = true")
        .await
        .unwrap();
    let schema = Arc::new(Schema::new(vec![Field::new("x", DataType::Int64, false)]));
    let build = RecordBatch::try_new(
        Arc::clone(&schema),
        // every 20th value: across every row group, so the join's dynamic filter prunes none
        vec![Arc::new(Int64Array::from_iter_values(
            (0..20_000).step_by(20),
        ))],
    )
    .unwrap();
    let build = datafusion::datasource::MemTable::try_new(schema, vec![vec![build]]).unwrap();
    ctx.register_table("build", Arc::new(build)).unwrap();
    store.let_through(usize::MAX >> 4);
    ctx.register_parquet(
        "probe",
        file.to_str().unwrap(),
        ParquetReadOptions::default(),
    )
    .await
    .unwrap();
    let sql = "SELECT count(*) FROM build JOIN probe ON build.x = probe.x";
    // planned once with the gate open: the footer's statistics are the table's now
    ctx.sql(sql)
        .await
        .unwrap()
        .create_physical_plan()
        .await
        .unwrap();
    let gate = store.gate.as_ref().unwrap();
    gate.forget_permits(gate.available_permits());
    let running: Running = {
        let (profiler, ctx) = (profiler.clone(), ctx.clone());
        tokio::spawn(async move { profiler.run_sql(&ctx, sql).await })
    };
    // the reads of the probe side let through one at a time; each time one waits at the
    // gate, the query's progress is read
    let mut readings = Vec::new();
    loop {
        until("a read waiting at the gate, or the query's end", || {
            store.held.load(Relaxed) > 0 || running.is_finished()
        })
        .await;
        if running.is_finished() {
            break;
        }
        let read = profiler
            .running_queries()
            .iter()
            .find_map(|&id| profiler.snapshot_progress(id));
        if let Some((profile, progress)) = read {
            let build_read = profile.plan.iter().any(|n| {
                n.name == "DataSourceExec"
                    && !n.display.contains("parquet")
                    && !n.task_spans.is_empty()
                    && n.task_spans.iter().all(|s| s.finish_epoch_micros > 0)
            });
            readings.push((build_read, progress.fraction));
        }
        let served = store.reads.load(Relaxed);
        store.let_through(1);
        until("the read let through served", || {
            store.reads.load(Relaxed) > served || running.is_finished()
        })
        .await;
    }
    let run = running.await.unwrap().unwrap();
    assert_eq!(run.profile.rows, 1);
    let probe = run
        .profile
        .plan
        .iter()
        .find(|n| n.name == "DataSourceExec" && n.display.contains("parquet"))
        .unwrap();
    assert_eq!(
        value(probe, names::OUTPUT_ROWS),
        20_000,
        "every row group read"
    );
    assert!(profiler.snapshot_progress(run.profile.id).is_none());
    // while the probe side was read, the build side had been read to its end, and the
    // query read as far as its probe side: far from done at first, further on as its
    // reads came in, never done before its end
    let while_probed: Vec<f64> = readings
        .iter()
        .filter(|(build_read, _)| *build_read)
        .map(|(_, f)| *f)
        .collect();
    assert!(while_probed.len() >= 5, "{readings:?}");
    assert!(while_probed[0] < 0.5, "{readings:?}");
    assert!(
        while_probed.last().unwrap() > &(while_probed[0] + 0.3),
        "{readings:?}"
    );
    assert!(readings.iter().all(|(_, f)| *f < 1.0), "{readings:?}");
    assert!(
        readings
            .windows(2)
            .all(|w| w[1].1 >= w[0].1 - qprof_core::progress::MAX_BACKWARD),
        "{readings:?}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
