//! Spilling counted at the files: the sizes of the files the operators made, the counts
//! DataFusion keeps, and what qprof reports must agree.
//!
//! Every spill file is hard-linked into a directory of its own the moment the disk
//! manager makes it (a temp-file factory under qprof's), so it is seen whole after the
//! query, however soon the operator read it back and deleted it.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use datafusion::common::DataFusionError;
use datafusion::execution::SessionStateBuilder;
use datafusion::execution::disk_manager::{DiskManager, DiskManagerBuilder, DiskManagerMode};
use datafusion::execution::runtime_env::RuntimeEnvBuilder;
use datafusion::execution::spill_file::{SpillFile, TempFileFactory};
use datafusion::prelude::{SessionConfig, SessionContext};
use qprof_core::advice::advise;
use qprof_core::profile::{ProfileNode, QueryProfile, names};
use qprof_datafusion::Profiler;

fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("qprof-spill-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Makes the spill files in a directory, as the session's own manager would, and links
/// each one into `links` as it is made.
struct LinkingFactory {
    files: Arc<DiskManager>,
    links: PathBuf,
}

impl TempFileFactory for LinkingFactory {
    fn create_temp_file(
        &self,
        description: &str,
    ) -> datafusion::common::Result<Arc<dyn SpillFile>> {
        let file = self.files.create_tmp_file(description)?;
        let path = file
            .path()
            .ok_or_else(|| DataFusionError::Internal("a spill file without a path".into()))?;
        let name = path.file_name().unwrap_or_default();
        std::fs::hard_link(path, self.links.join(name))?;
        Ok(file)
    }
}

/// The files under `dir`, with their sizes.
fn sizes(dir: &Path) -> HashMap<PathBuf, u64> {
    std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| (e.path(), e.metadata().unwrap().len()))
        .collect()
}

/// A query run under a memory limit with its spill directory watched.
struct SpillRun {
    profile: QueryProfile,
    rows: usize,
    /// Every spill file made, with its size at the end.
    seen: HashMap<PathBuf, u64>,
}

async fn run_spilling(name: &str, config: SessionConfig, memory: usize, sql: &str) -> SpillRun {
    let dir = temp_dir(name);
    let (spills, links) = (dir.join("spills"), dir.join("links"));
    std::fs::create_dir_all(&spills).unwrap();
    std::fs::create_dir_all(&links).unwrap();
    let files = DiskManagerBuilder::default()
        .with_mode(DiskManagerMode::Directories(vec![spills]))
        .build()
        .unwrap();
    let factory = LinkingFactory {
        files: Arc::new(files),
        links: links.clone(),
    };
    let runtime = RuntimeEnvBuilder::new()
        .with_memory_limit(memory, 1.0)
        .with_disk_manager_builder(
            DiskManagerBuilder::default().with_temp_file_factory(Arc::new(factory)),
        )
        .build_arc()
        .unwrap();
    let profiler = Profiler::new();
    let state = profiler
        .instrument(
            SessionStateBuilder::new()
                .with_config(config)
                .with_runtime_env(runtime)
                .with_default_features(),
        )
        .build();
    let ctx = SessionContext::new_with_state(state);
    let run = profiler.run_sql(&ctx, sql).await.unwrap();
    let seen = sizes(&links);
    let _ = std::fs::remove_dir_all(&dir);
    SpillRun {
        rows: run.batches.iter().map(|b| b.num_rows()).sum(),
        profile: run.profile,
        seen,
    }
}

impl SpillRun {
    /// Checks that every operator that spilled counted as many files as DataFusion did,
    /// and that together they wrote the files made, byte for byte; returns the operators
    /// that spilled.
    fn check(&self) -> Vec<&ProfileNode> {
        let text = self.profile.render_text(0);
        let spilled: Vec<&ProfileNode> = self
            .profile
            .plan
            .iter()
            .filter(|n| n.value(names::SPILL_FILES_CREATED).unwrap_or(0) > 0)
            .collect();
        for node in &spilled {
            assert_eq!(
                node.value(names::SPILL_FILES_CREATED),
                node.value("spilledFiles"),
                "#{} {}:\n{text}",
                node.id,
                node.name
            );
            assert!(node.value(names::SPILL_WRITE_NANOS).unwrap_or(0) > 0);
            // rows read from the files' Arrow streams, as DataFusion counted them
            assert_eq!(
                node.value(names::SPILL_WRITTEN_ROWS),
                node.value("spilledRows"),
                "#{} {}",
                node.id,
                node.name
            );
            assert!(node.value(names::SPILLED_PARTITIONS).unwrap_or(0) >= 1);
        }
        let total = |name: &str| -> i64 { spilled.iter().filter_map(|n| n.value(name)).sum() };
        let on_disk = self.seen.values().sum::<u64>() as i64;
        let (files_created, bytes_written) = (
            total(names::SPILL_FILES_CREATED),
            total(names::SPILL_WRITTEN_BYTES),
        );
        assert_eq!(files_created, self.seen.len() as i64, "{:?}", self.seen);
        assert_eq!(bytes_written, on_disk, "{text}");
        // the advisor's one spill finding covers exactly the operators that spilled
        let mut flagged: Vec<usize> = advise(&self.profile)
            .iter()
            .filter(|f| f.rule == "spill")
            .flat_map(|f| f.node_ids.clone())
            .collect();
        flagged.sort_unstable();
        let mut expected: Vec<usize> = spilled.iter().map(|n| n.id).collect();
        expected.sort_unstable();
        assert_eq!(flagged, expected, "{text}");
        spilled
    }
}

/// 400,000 groups out of 2,000,000 rows.
const GROUPS: &str = "SELECT v % 400000 AS g, count(*) AS c FROM generate_series(1, 2000000) AS s(v) \
                      GROUP BY v % 400000";

fn one_partition() -> SessionConfig {
    SessionConfig::new()
        .with_target_partitions(1)
        .set_usize("datafusion.execution.sort_spill_reservation_bytes", 1 << 20)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_aggregate_over_its_memory_limit_reports_the_spill_files_it_wrote() {
    let run = run_spilling("aggregate", one_partition(), 4 << 20, GROUPS).await;
    assert_eq!(run.rows, 400_000);
    let spilled = run.check();
    assert!(
        spilled.iter().any(|n| n.name == "AggregateExec"),
        "the aggregate did not spill"
    );
    // the pool: its limit as set, its high-water mark at least any operator's peak, at
    // most their sum and the limit; spilling ran it up to its limit, which the spill's
    // finding tells (one cause, one finding)
    let pool = run.profile.memory_pool.expect("the pool's usage");
    assert_eq!(pool.limit_bytes, Some(4 << 20));
    let peaks: Vec<u64> = run
        .profile
        .plan
        .iter()
        .map(|n| n.value(names::PEAK_MEMORY_BYTES).unwrap_or(0).max(0) as u64)
        .collect();
    assert!(
        pool.peak_bytes >= peaks.iter().copied().max().unwrap(),
        "{pool:?} {peaks:?}"
    );
    assert!(
        pool.peak_bytes <= peaks.iter().sum::<u64>(),
        "{pool:?} {peaks:?}"
    );
    assert!(pool.peak_bytes <= 4 << 20);
    assert!(
        pool.peak_bytes * 10 >= (4 << 20) * 9,
        "{pool:?}: not near its limit"
    );
    let rules: Vec<&str> = advise(&run.profile).iter().map(|f| f.rule).collect();
    assert!(!rules.contains(&"memory-near-limit"), "{rules:?}");
    // the same query with memory to spare: nothing spills, nothing is flagged
    let roomy = run_spilling("aggregate-roomy", one_partition(), 1 << 30, GROUPS).await;
    assert!(roomy.check().is_empty());
    assert!(
        advise(&roomy.profile)
            .iter()
            .all(|f| f.rule != "spill" && f.rule != "memory-near-limit")
    );
    let roomy_pool = roomy.profile.memory_pool.expect("the pool's usage");
    assert_eq!(roomy_pool.limit_bytes, Some(1 << 30));
    assert!(
        roomy_pool.peak_bytes > pool.peak_bytes,
        "unspilled, it held more"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sort_merge_join_over_its_memory_limit_reports_its_buffered_side_spilling() {
    let config = SessionConfig::new()
        .with_target_partitions(2)
        .set_bool("datafusion.optimizer.prefer_hash_join", false)
        .set_usize("datafusion.execution.sort_spill_reservation_bytes", 1 << 20);
    let run = run_spilling(
        "smj",
        config,
        8 << 20,
        "SELECT b.v FROM (SELECT v % 2 AS k FROM generate_series(1, 4) AS s(v)) a \
         JOIN (SELECT 1 AS k, v FROM generate_series(1, 600000) AS s(v)) b ON a.k = b.k",
    )
    .await;
    // two rows of a match each of b's rows
    assert_eq!(run.rows, 1_200_000);
    // the join's buffered batches are read back and their files deleted while it runs
    let spilled = run.check();
    let text = run.profile.render_text(0);
    let join = spilled
        .iter()
        .find(|n| n.name == "SortMergeJoinExec")
        .unwrap_or_else(|| panic!("the join did not spill:\n{text}"));
    // all of a sort-merge join's spilling is of its buffered side
    assert_eq!(
        join.value("sortMergeBufferedSpilledFiles"),
        join.value(names::SPILL_FILES_CREATED)
    );
    for (phase, operator) in [
        ("sortMergeBufferedSpilledBytes", names::SPILL_WRITTEN_BYTES),
        ("sortMergeBufferedSpilledRows", names::SPILL_WRITTEN_ROWS),
        (
            "sortMergeBufferedSpilledPartitions",
            names::SPILLED_PARTITIONS,
        ),
    ] {
        assert_eq!(join.value(phase), join.value(operator), "{phase}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sort_over_its_memory_limit_reports_the_spill_files_it_wrote() {
    let run = run_spilling(
        "sort",
        one_partition(),
        8 << 20,
        "SELECT v, r FROM (SELECT v, random() AS r FROM generate_series(1, 1000000) AS s(v)) \
         ORDER BY r",
    )
    .await;
    assert_eq!(run.rows, 1_000_000);
    let spilled = run.check();
    let sort = spilled
        .iter()
        .find(|n| n.name == "SortExec")
        .expect("the sort did not spill");
    // every spilled byte is read back once by the merge
    assert_eq!(
        sort.value(names::SPILL_READ_BYTES),
        sort.value(names::SPILL_WRITTEN_BYTES)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_repartition_over_its_memory_limit_reports_the_spill_files_it_wrote() {
    // one input partition spread over two: every batch the pool cannot hold goes to disk
    let config = SessionConfig::new().with_target_partitions(2);
    let run = run_spilling(
        "repartition",
        config,
        16 << 10,
        "SELECT v FROM generate_series(1, 1000000) AS s(v) WHERE v % 3 = 0",
    )
    .await;
    assert_eq!(run.rows, 333_333);
    let spilled = run.check();
    let text = run.profile.render_text(0);
    let repartition = spilled
        .iter()
        .find(|n| n.name == "RepartitionExec")
        .unwrap_or_else(|| panic!("the repartition did not spill:\n{text}"));
    assert!(repartition.value(names::SPILL_READ_BYTES).unwrap_or(0) > 0);
}
