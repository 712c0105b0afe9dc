//! `qprof bench history`: the history server over many applications — a directory of
//! copies of one real qprof log under new ids, then how long until all are listed, how
//! fast the listing and an application's endpoint answer with few and with many
//! applications, the memory after opening every one, reopening from the disk store
//! against replaying, and SQL over the history: one application's operators, and a scan
//! of every application's queries from the saved replays.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use axum::body::Body;
use axum::http::Request;
use datafusion::arrow::array::{Array, Int64Array};
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::prelude::SessionContext;
use qprof_eventlog::{APPSTATUS_PREFIX, discover};
use qprof_server::LogStore;
use qprof_server::store::{ListedApp, StoreOptions};
use tower::ServiceExt;

use crate::cli::HistoryArgs;

/// The newest application log under `from` that is rolling, uncompressed and complete:
/// its application id and its directory.
fn template(from: &Path) -> Result<(String, PathBuf)> {
    let mut found: Vec<_> = discover(from)
        .with_context(|| format!("cannot read '{}'", from.display()))?
        .into_iter()
        .filter(|s| s.rolling && !s.in_progress)
        .filter(|s| {
            s.files
                .iter()
                .all(|f| f.codec == qprof_eventlog::Codec::None)
        })
        .collect();
    found.sort_by_key(|s| s.files.iter().map(|f| f.modified_millis).max());
    let Some(source) = found.pop() else {
        bail!(
            "no complete, uncompressed rolling log in '{}' (write one with `qprof run --tpch 0.01 --event-log-dir {}`)",
            from.display(),
            from.display()
        );
    };
    let info = qprof_eventlog::scan_info(&source)
        .with_context(|| format!("cannot read '{}'", source.path.display()))?;
    let Some(id) = info.id else {
        bail!("'{}' has no application start", source.path.display());
    };
    Ok((id, source.path))
}

/// Writes `count` copies of the log at `template` (application `id`) into `dir`, the
/// copies numbered from `first`, each under its own id; returns the bytes written.
fn copy_apps(template: &Path, id: &str, dir: &Path, first: usize, count: usize) -> Result<u64> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(template)? {
        let entry = entry?;
        let name = entry.file_name().to_string_lossy().into_owned();
        files.push((name, std::fs::read(entry.path())?));
    }
    let finder = memchr::memmem::Finder::new(id.as_bytes());
    let mut written = 0;
    for n in first..first + count {
        let new_id = format!("{id}-{n:05}");
        let app_dir = dir.join(
            template
                .file_name()
                .unwrap_or_default()
                .to_string_lossy()
                .replace(id, &new_id),
        );
        std::fs::create_dir_all(&app_dir)
            .with_context(|| format!("cannot create '{}'", app_dir.display()))?;
        for (name, bytes) in &files {
            let mut out = Vec::with_capacity(bytes.len() + 64);
            let mut at = 0;
            for hit in finder.find_iter(bytes) {
                out.extend_from_slice(&bytes[at..hit]);
                out.extend_from_slice(new_id.as_bytes());
                at = hit + id.len();
            }
            out.extend_from_slice(&bytes[at..]);
            let path = app_dir.join(name.replace(id, &new_id));
            std::fs::write(&path, &out)
                .with_context(|| format!("cannot write '{}'", path.display()))?;
            written += out.len() as u64;
        }
    }
    Ok(written)
}

/// Adds an entry no one can read as a log: a rolling log whose event file is a directory.
fn add_unreadable(dir: &Path) -> Result<()> {
    let broken = dir.join("eventlog_v2_unreadable-1");
    std::fs::create_dir_all(broken.join("events_1_unreadable-1"))?;
    std::fs::write(broken.join(format!("{APPSTATUS_PREFIX}unreadable-1")), b"")?;
    Ok(())
}

/// A store behind the history server's router, answering requests without a socket.
struct Served {
    store: Arc<LogStore>,
    router: axum::Router,
    runtime: tokio::runtime::Runtime,
}

impl Served {
    fn new(store: LogStore) -> Result<Served> {
        let store = Arc::new(store);
        Ok(Served {
            router: qprof_server::router(Arc::clone(&store)),
            store,
            runtime: tokio::runtime::Builder::new_current_thread().build()?,
        })
    }

    /// Answers `GET /api/v1/<path>` through the router; the bytes of the answer.
    fn request(&self, path: &str) -> Result<usize> {
        let request = Request::get(format!("/api/v1/{path}")).body(Body::empty())?;
        let (status, body) = self.runtime.block_on(async {
            let response = self.router.clone().oneshot(request).await?;
            let status = response.status();
            let body = axum::body::to_bytes(response.into_body(), usize::MAX).await?;
            anyhow::Ok((status, body))
        })?;
        if !status.is_success() {
            bail!(
                "/api/v1/{path}: {status}: {}",
                String::from_utf8_lossy(&body)
            );
        }
        Ok(body.len())
    }
}

/// Milliseconds of `f`, and its result.
fn timed<T>(f: impl FnOnce() -> Result<T>) -> Result<(f64, T)> {
    let start = Instant::now();
    let out = f()?;
    Ok((start.elapsed().as_secs_f64() * 1e3, out))
}

/// The `q` quantile (0..=1) of `samples`, sorted in place.
fn quantile(samples: &mut [f64], q: f64) -> f64 {
    if samples.is_empty() {
        return 0.0;
    }
    samples.sort_by(f64::total_cmp);
    let at = ((samples.len() - 1) as f64 * q).round() as usize;
    samples[at]
}

/// Median and p99 of `requests` requests for `/jobs` of `apps` in turn (replays cached).
fn endpoint_latency(served: &Served, apps: &[ListedApp], requests: usize) -> Result<(f64, f64)> {
    for app in apps {
        served.request(&format!("applications/{}/jobs", app.id()))?;
    }
    let mut samples = Vec::with_capacity(requests);
    for i in 0..requests {
        let path = format!("applications/{}/jobs", apps[i % apps.len()].id());
        samples.push(timed(|| served.request(&path))?.0);
    }
    Ok((quantile(&mut samples, 0.5), quantile(&mut samples, 0.99)))
}

/// VmRSS and VmHWM of this process, bytes.
fn rss() -> (u64, u64) {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|kb| kb.parse::<u64>().ok())
            .map_or(0, |kb| kb * 1024)
    };
    (field("VmRSS:"), field("VmHWM:"))
}

fn mb(bytes: u64) -> f64 {
    bytes as f64 / 1e6
}

fn options(max_memory: u64, store_dir: Option<PathBuf>) -> StoreOptions {
    StoreOptions {
        // the benchmark scans when it means to
        update_interval: Duration::from_secs(24 * 3600),
        max_memory_bytes: max_memory,
        store_dir,
        ..StoreOptions::default()
    }
}

/// The file that marks a directory as this benchmark's own, to be cleared by the next run.
const WORK_DIR_MARKER: &str = ".qprof-bench-history";

/// Makes `work` an empty directory of the benchmark's own. A directory that exists is
/// cleared only when an earlier run made it (it has the marker) or it is empty: anything
/// else, the log directory copied from or the working directory included, is refused.
fn prepare_work_dir(work: &Path) -> Result<()> {
    if work.exists() {
        let marked = work.join(WORK_DIR_MARKER).is_file();
        let empty = std::fs::read_dir(work)
            .with_context(|| format!("cannot read '{}'", work.display()))?
            .next()
            .is_none();
        if !marked && !empty {
            bail!(
                "'{}' is not empty and not an earlier run's: give --dir a new or empty directory",
                work.display()
            );
        }
        if marked {
            std::fs::remove_dir_all(work)
                .with_context(|| format!("cannot clear '{}'", work.display()))?;
        }
    }
    std::fs::create_dir_all(work).with_context(|| format!("cannot create '{}'", work.display()))?;
    std::fs::write(work.join(WORK_DIR_MARKER), "made by qprof bench history\n")
        .with_context(|| format!("cannot write in '{}'", work.display()))?;
    Ok(())
}

/// `qprof bench history`.
pub(crate) fn history(args: &HistoryArgs) -> Result<()> {
    let apps = args.apps as usize;
    let (id, template) = template(&args.from)?;
    let work = &args.dir;
    prepare_work_dir(work)?;
    let (many, few, store_dir) = (work.join("many"), work.join("few"), work.join("store"));
    println!(
        "qprof bench history: {apps} copies of {} ({} MB each)",
        template.display(),
        mb(std::fs::read_dir(&template)?
            .flatten()
            .filter_map(|e| e.metadata().ok())
            .map(|m| m.len())
            .sum())
    );
    let (ms, written) = timed(|| copy_apps(&template, &id, &many, 0, apps))?;
    add_unreadable(&many)?;
    copy_apps(&template, &id, &few, 0, apps.min(10))?;
    println!(
        "  wrote {:.0} MB in {:.1} s, and one unreadable entry",
        mb(written),
        ms / 1e3
    );

    // cold: until every application is listed
    let (cold_ms, store) = timed(|| {
        LogStore::open_with(&many, options(args.max_memory as u64, None)).map_err(Into::into)
    })?;
    let served = Served::new(store)?;
    let listed = served.store.list()?;
    let status = served.store.status();
    if listed.len() != apps {
        bail!("{} applications listed of {apps}", listed.len());
    }
    println!(
        "  cold start, all {apps} listed: {cold_ms:.0} ms ({} skipped: {})",
        status.skipped.len(),
        status
            .skipped
            .iter()
            .map(|s| format!("{}: {}", s.name, s.reason))
            .collect::<Vec<_>>()
            .join("; ")
    );
    let (first_ms, _) = timed(|| served.request("applications"))?;
    let (ms, _) = timed(|| {
        served.store.scan();
        Ok(())
    })?;
    println!("  first listing (rendered): {first_ms:.1} ms; rescan, nothing changed: {ms:.0} ms");
    let mut samples = Vec::new();
    let mut listing_bytes = 0;
    for _ in 0..21 {
        let (ms, bytes) = timed(|| served.request("applications"))?;
        samples.push(ms);
        listing_bytes = bytes;
    }
    println!(
        "  warm listing (/applications, {:.1} MB of JSON): median {:.2} ms",
        mb(listing_bytes as u64),
        quantile(&mut samples, 0.5)
    );

    // an application's endpoint with few and with many applications
    let small = Served::new(LogStore::open_with(
        &few,
        options(args.max_memory as u64, None),
    )?)?;
    let small_apps = small.store.list()?;
    let requests = args.requests as usize;
    let (few_median, few_p99) = endpoint_latency(&small, &small_apps, requests)?;
    let (many_median, many_p99) = endpoint_latency(&served, &listed[..small_apps.len()], requests)?;
    println!(
        "  /applications/<id>/jobs, {} apps: median {few_median:.3} ms, p99 {few_p99:.3} ms",
        small_apps.len()
    );
    println!(
        "  /applications/<id>/jobs, {apps} apps: median {many_median:.3} ms, p99 {many_p99:.3} ms ({:.2}x the median with {})",
        many_median / few_median.max(1e-9),
        small_apps.len()
    );
    drop(small);

    // memory after opening every application
    let (ms, _) = timed(|| {
        for app in &listed {
            served.request(&format!("applications/{}/jobs", app.id()))?;
        }
        Ok(())
    })?;
    let (rss_now, hwm) = rss();
    let cache = served.store.status().cache;
    println!(
        "  opened all {apps} in {:.1} s: RSS {:.0} MB (high-water {:.0} MB); {} replays resident, {:.0} MB counted of a {:.0} MB budget; {} loads, {} evictions",
        ms / 1e3,
        mb(rss_now),
        mb(hwm),
        cache.resident,
        mb(cache.resident_bytes),
        mb(cache.budget_bytes),
        cache.loads,
        cache.evictions
    );
    drop(served);

    // reopening from the disk store against replaying the log
    let sample = &listed[..(args.reopen as usize).min(listed.len())];
    let budget = args.max_memory as u64;
    let replayed = LogStore::open_with(&many, options(budget, None))?;
    let mut replay_ms = Vec::new();
    for app in sample {
        replay_ms.push(timed(|| replayed.replay(app).map_err(anyhow::Error::from))?.0);
    }
    drop(replayed);
    let saving = LogStore::open_with(&many, options(budget, Some(store_dir.clone())))?;
    for app in sample {
        saving.replay(app)?;
    }
    drop(saving);
    let restarted = LogStore::open_with(&many, options(budget, Some(store_dir)))?;
    let mut saved_ms = Vec::new();
    for app in sample {
        saved_ms.push(timed(|| restarted.replay(app).map_err(anyhow::Error::from))?.0);
    }
    let disk = restarted.status().disk.unwrap_or_default();
    if disk.hits < sample.len() as u64 {
        bail!(
            "{} of {} applications were read back from the store",
            disk.hits,
            sample.len()
        );
    }
    let (replay_median, saved_median) =
        (quantile(&mut replay_ms, 0.5), quantile(&mut saved_ms, 0.5));
    println!(
        "  reopen {} apps after a restart: from the disk store median {saved_median:.2} ms, replaying the log {replay_median:.2} ms ({:.1}x)",
        sample.len(),
        replay_median / saved_median.max(1e-9)
    );
    drop(restarted);

    sql_over_history(
        &many,
        &work.join("sql-store"),
        &listed,
        budget,
        sample.len(),
    )?;
    if !args.keep {
        std::fs::remove_dir_all(work).ok();
    }
    Ok(())
}

/// SQL over the history (`qprof.*`): a statement about one application once the index is
/// built (its log replayed, then again from memory), and a scan of every application's
/// queries: from the logs, and after a restart from the replays the first scan saved.
fn sql_over_history(
    many: &Path,
    store_dir: &Path,
    listed: &[ListedApp],
    budget: u64,
    sample: usize,
) -> Result<()> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let answer = |ctx: &SessionContext, sql: &str| -> Result<(f64, Vec<RecordBatch>)> {
        timed(|| runtime.block_on(async { anyhow::Ok(ctx.sql(sql).await?.collect().await?) }))
    };
    let session = |store: &Arc<LogStore>| -> Result<SessionContext> {
        let ctx = SessionContext::new();
        qprof_history::register_store(&ctx, Arc::clone(store))?;
        Ok(ctx)
    };
    let store = Arc::new(LogStore::open_with(
        many,
        options(budget, Some(store_dir.to_path_buf())),
    )?);
    let ctx = session(&store)?;
    let (mut cold, mut warm) = (Vec::new(), Vec::new());
    for app in &listed[..sample] {
        let sql = format!(
            "SELECT name, sum(self_cpu_nanos) FROM qprof.operators WHERE app_id = '{}' \
             GROUP BY name ORDER BY 2 DESC",
            app.id()
        );
        let (ms, batches) = answer(&ctx, &sql)?;
        if batches.iter().map(RecordBatch::num_rows).sum::<usize>() == 0 {
            bail!("no operators in application {}", app.id());
        }
        cold.push(ms);
        warm.push(answer(&ctx, &sql)?.0);
    }
    println!(
        "  SQL, one application's operators by name ({sample} apps, after the index): median {:.1} ms with its log replayed, {:.2} ms from memory",
        quantile(&mut cold, 0.5),
        quantile(&mut warm, 0.5)
    );

    let full = "SELECT count(*), sum(rows), count(DISTINCT app_id) FROM qprof.queries";
    let (first_ms, first) = answer(&ctx, full)?;
    drop(ctx);
    drop(store);
    let restarted = Arc::new(LogStore::open_with(
        many,
        options(budget, Some(store_dir.to_path_buf())),
    )?);
    let (saved_ms, saved) = answer(&session(&restarted)?, full)?;
    let status = restarted.status();
    // the statement's one row: queries, rows and applications counted
    let counts = |batches: &[RecordBatch]| -> Vec<i64> {
        batches
            .iter()
            .filter(|b| b.num_rows() > 0)
            .flat_map(|b| b.columns().iter())
            .filter_map(|c| c.as_any().downcast_ref::<Int64Array>().map(|a| a.value(0)))
            .collect()
    };
    let (first, saved) = (counts(&first), counts(&saved));
    if first != saved || first.len() != 3 || status.cache.loads > 0 {
        bail!(
            "the scan from saved replays differs ({first:?} against {saved:?}) or replayed {} logs",
            status.cache.loads
        );
    }
    println!(
        "  SQL, a full scan of qprof.queries ({} queries of {} apps): {:.1} s replaying the logs (and saving them); after a restart {:.2} s from the saved replays ({} store hits, 0 logs replayed)",
        first[0],
        first[2],
        first_ms / 1e3,
        saved_ms / 1e3,
        status.disk.unwrap_or_default().hits
    );
    Ok(())
}
