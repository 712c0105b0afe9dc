//! A Ballista cluster in this process (a scheduler and two executors on 127.0.0.1) with
//! qprof inside: results equal DataFusion's own, the scheduler's events carry a profile
//! whose every operator has qprof's metrics, and tasks name the executors that ran them.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use datafusion::arrow::array::{Int64Array, RecordBatch};
use datafusion::arrow::datatypes::{DataType, Field, Schema};
use datafusion::arrow::util::pretty::pretty_format_batches;
use datafusion::prelude::{ParquetReadOptions, SessionConfig, SessionContext};
use qprof_ballista::ClusterObserver;
use qprof_ballista::cluster::{
    ExecutorOptions, SchedulerOptions, end_session, remote_session, run_executor, run_scheduler,
};
use qprof_ballista::job_profiles::JobProfile;
use qprof_core::events::{Event, Listener, ListenerError};
use qprof_core::profile::{ProfileNode, QueryProfile, names};
use qprof_datafusion::{Profiler, QprofOptions};

/// Keeps every event it hears.
#[derive(Debug, Default)]
struct Recorder(Mutex<Vec<Event>>);

impl Listener for Recorder {
    fn on_event(&self, event: &Event) -> Result<(), ListenerError> {
        self.0.lock().unwrap().push(event.clone());
        Ok(())
    }
}

impl Recorder {
    fn events(&self) -> Vec<Event> {
        self.0.lock().unwrap().clone()
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// 20,000 rows in 4 Parquet files: `k` cycles through 0..50, `v` is the row number.
async fn write_table(dir: &std::path::Path) -> String {
    let schema = Arc::new(Schema::new(vec![
        Field::new("k", DataType::Int64, false),
        Field::new("v", DataType::Int64, false),
    ]));
    let ctx = SessionContext::new();
    for file in 0..4_i64 {
        let rows = 5_000_i64;
        let v: Vec<i64> = (file * rows..(file + 1) * rows).collect();
        let k: Vec<i64> = v.iter().map(|v| v % 50).collect();
        let batch = RecordBatch::try_new(
            Arc::clone(&schema),
            vec![Arc::new(Int64Array::from(k)), Arc::new(Int64Array::from(v))],
        )
        .unwrap();
        let df = ctx.read_batch(batch).unwrap();
        df.write_parquet(
            dir.join(format!("part-{file}.parquet")).to_str().unwrap(),
            datafusion::dataframe::DataFrameWriteOptions::new(),
            None,
        )
        .await
        .unwrap();
    }
    format!("{}/", dir.display())
}

fn all_nodes<'a>(node: &'a ProfileNode, out: &mut Vec<&'a ProfileNode>) {
    out.push(node);
    for c in &node.children {
        all_nodes(c, out);
    }
}

const QUERY: &str = "SELECT k, count(*) AS n, sum(v) AS s, sum(abs(v - 10000)) AS d FROM t WHERE v % 3 <> 0 GROUP BY k ORDER BY k";

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_query_on_two_executors_is_profiled_per_task_and_executor() {
    let dir = std::env::temp_dir().join(format!("qprof-ballista-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("data")).unwrap();
    let table = write_table(&dir.join("data")).await;

    let recorder = Arc::new(Recorder::default());
    let heard = Arc::clone(&recorder);
    let observer = ClusterObserver::new(Arc::new(move |_app| {
        vec![Arc::clone(&heard) as Arc<dyn Listener>]
    }));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let scheduler = listener.local_addr().unwrap();
    let options = SchedulerOptions {
        external_host: "127.0.0.1".into(),
        executor_timeout_seconds: 15,
        routes: axum::Router::new().route("/probe", axum::routing::get(|| async { "probed" })),
    };
    let observed = Arc::clone(&observer);
    tokio::spawn(async move { run_scheduler(listener, Some(observed), &options).await });
    for id in ["exec-1", "exec-2"] {
        let options = ExecutorOptions {
            scheduler,
            executor_id: Some(id.into()),
            host: "127.0.0.1".into(),
            flight_port: free_port(),
            grpc_port: free_port(),
            vcores: 2,
            work_dir: None,
            memory_pool_bytes: None,
            heartbeat_seconds: 1,
        };
        tokio::spawn(async move { run_executor(&options, Some(Profiler::new())).await });
    }
    let url = format!("df://{scheduler}");
    let config = SessionConfig::new().with_target_partitions(4);
    // the session connects with its first query
    let ctx = remote_session(&url, config.clone()).await.unwrap();
    // both executors registered before the job, so that both can get its tasks
    let mut members = observer.executors();
    tokio::time::timeout(
        Duration::from_secs(60),
        members.wait_for(|ids| ids.len() == 2),
    )
    .await
    .expect("both executors register within a minute")
    .unwrap();
    ctx.register_parquet("t", &table, ParquetReadOptions::default())
        .await
        .unwrap();
    ctx.sql("SET ballista.job.name = 'the query'")
        .await
        .unwrap()
        .collect()
        .await
        .unwrap();
    let on_cluster = ctx.sql(QUERY).await.unwrap().collect().await.unwrap();
    // the scheduler keeps the job's profile for its client, under the job's name
    match observer
        .profiles()
        .wait_for(&ctx.session_id(), "the query", Duration::from_secs(60))
        .await
    {
        JobProfile::Ended {
            profile,
            error: None,
        } => assert_eq!(
            profile.rows,
            on_cluster.iter().map(|b| b.num_rows() as u64).sum::<u64>()
        ),
        other => panic!("no profile of the job kept: {other:?}"),
    }
    // the scheduler's port answers HTTP beside gRPC: its health probe and the routes given
    let answers = tokio::task::spawn_blocking(move || {
        ["/healthz", "/probe", "/nothing", "/readyz"].map(|path| http_get(scheduler, path))
    })
    .await
    .unwrap();
    assert_eq!(answers[0], (200, "ok".to_string()));
    assert_eq!(answers[1], (200, "probed".to_string()));
    assert_eq!(answers[2].0, 404);
    assert_eq!(
        answers[3],
        (200, "ready: 2 executors registered\n".to_string())
    );
    let local = SessionContext::new_with_config(SessionConfig::new().with_target_partitions(4));
    local
        .register_parquet("t", &table, ParquetReadOptions::default())
        .await
        .unwrap();
    let expected = local.sql(QUERY).await.unwrap().collect().await.unwrap();
    assert_eq!(
        pretty_format_batches(&on_cluster).unwrap().to_string(),
        pretty_format_batches(&expected).unwrap().to_string()
    );
    end_session(&url, &ctx.session_id()).await.unwrap();

    let events = recorder.events();
    let kinds: Vec<&str> = events.iter().map(Event::kind).collect();
    assert_eq!(kinds.first(), Some(&"AppStart"), "{kinds:?}");
    let session = events.iter().find_map(|e| match e {
        Event::AppStart(app) => app
            .properties
            .iter()
            .find(|(k, _)| k == "qprof.cluster.session")
            .map(|(_, v)| v.clone()),
        _ => None,
    });
    assert_eq!(session, Some(ctx.session_id()));
    assert_eq!(kinds.last(), Some(&"AppEnd"), "{kinds:?}");
    let mut executors: Vec<String> = events
        .iter()
        .filter_map(|e| match e {
            Event::ExecutorAdded(a) => Some(a.id.clone()),
            _ => None,
        })
        .collect();
    executors.sort();
    assert_eq!(executors, ["exec-1", "exec-2"]);
    let profile: &QueryProfile = events
        .iter()
        .find_map(|e| match e {
            Event::QueryEnd(end) => {
                assert_eq!(end.error, None);
                end.profile.as_ref()
            }
            _ => None,
        })
        .expect("the job's end carries its profile");

    // every operator of every stage, the shuffle writers and readers too, has qprof's
    // time and rows
    let mut nodes = Vec::new();
    all_nodes(&profile.plan, &mut nodes);
    assert!(nodes.len() >= 6, "{} operators", nodes.len());
    for node in &nodes {
        for metric in [names::WALL_NANOS, names::OUTPUT_ROWS] {
            assert!(
                node.metrics.iter().any(|m| m.name == metric),
                "{} has no {metric}: {:?}",
                node.name,
                node.metrics.iter().map(|m| &m.name).collect::<Vec<_>>()
            );
        }
    }
    // the scan read every row; the filter kept two thirds of them
    let rows_of = |name: &str| -> i64 {
        nodes
            .iter()
            .filter(|n| n.name == name)
            .flat_map(|n| n.metrics.iter().filter(|m| m.name == names::OUTPUT_ROWS))
            .map(|m| m.value)
            .sum()
    };
    assert_eq!(rows_of("DataSourceExec"), 20_000);
    assert_eq!(rows_of("FilterExec"), 20_000 - 6_667);
    // DataFusion's own metrics, shipped by Ballista and named on the scheduler: the scans
    // read some bytes of the files and no more than are on disk, each value under a task
    let on_disk: u64 = std::fs::read_dir(dir.join("data"))
        .unwrap()
        .map(|f| f.unwrap().metadata().unwrap().len())
        .sum();
    let scanned: Vec<_> = nodes
        .iter()
        .filter(|n| n.name == "DataSourceExec")
        .flat_map(|n| n.metrics.iter().filter(|m| m.name == "bytesScanned"))
        .collect();
    assert!(!scanned.is_empty(), "no scan has bytesScanned");
    let scanned_bytes: i64 = scanned.iter().map(|m| m.value).sum();
    assert!(
        scanned_bytes > 0 && scanned_bytes as u64 <= on_disk,
        "{scanned_bytes} bytes scanned of {on_disk}"
    );
    assert!(
        scanned
            .iter()
            .flat_map(|m| &m.tasks)
            .all(|v| v.task.is_some())
    );
    // and no metric twice on an operator
    for node in &nodes {
        let mut seen = std::collections::BTreeSet::new();
        for m in &node.metrics {
            assert!(seen.insert(&m.name), "{} has {} twice", node.name, m.name);
        }
    }
    // the stages are stitched: a reader's child is the stage it reads
    let readers: Vec<_> = nodes
        .iter()
        .filter(|n| n.name == "ShuffleReaderExec")
        .collect();
    assert!(!readers.is_empty());
    for r in &readers {
        assert_eq!(r.children.len(), 1, "{}", r.display);
        assert!(
            r.children[0].name.ends_with("ShuffleWriterExec"),
            "{}",
            r.children[0].name
        );
        assert_ne!(r.children[0].stage_id, r.stage_id);
    }
    // each shuffle writer wrote what its stage produced
    for writer in nodes
        .iter()
        .filter(|n| n.name.ends_with("ShuffleWriterExec"))
    {
        let value = |name: &str| {
            writer
                .metrics
                .iter()
                .find(|m| m.name == name)
                .map_or(0, |m| m.value)
        };
        assert!(value(names::OUTPUT_ROWS) > 0, "{}", writer.display);
        assert!(value(names::OUTPUT_BYTES) > value(names::OUTPUT_ROWS));
    }
    assert_eq!(profile.rows, 50);
    // each function call was timed on the executors, under the operator that calls it,
    // and counted every row it was called on: `abs` once per row the filter kept
    let calls = |function: &str| {
        nodes
            .iter()
            .flat_map(|n| n.functions.iter().map(move |f| (n.name.as_str(), f)))
            .filter(|(_, f)| f.name == function)
            .collect::<Vec<_>>()
    };
    let abs = calls("abs");
    assert!(!abs.is_empty(), "no call of abs was timed");
    assert_eq!(abs.iter().map(|(_, f)| f.rows).sum::<u64>(), 20_000 - 6_667);
    for (operator, f) in &abs {
        assert_eq!(*operator, "AggregateExec", "{f:?}");
        assert!(f.expression.contains("abs("), "{f:?}");
        assert!(f.vectors > 0 && f.cpu_timed_vectors <= f.vectors, "{f:?}");
    }
    assert!(abs.iter().any(|(_, f)| f.wall_nanos > 0), "{abs:?}");
    // the partial sums saw every row the filter kept (the final ones, their states)
    let sums = calls("sum");
    assert!(
        sums.iter().map(|(_, f)| f.rows).sum::<u64>() >= 2 * (20_000 - 6_667),
        "{sums:?}"
    );
    // tasks name their executors; both executors ran some; each executor has the stage's
    // memory peaks
    let mut ran_on = std::collections::BTreeSet::new();
    for stage in &profile.stages {
        assert!(!stage.tasks.is_empty(), "stage {} has no tasks", stage.id);
        for task in &stage.tasks {
            assert_eq!(task.error, None);
            let executor = task.executor.as_ref().expect("a task names its executor");
            assert_eq!(executor.host, "127.0.0.1");
            ran_on.insert(executor.id.clone());
            assert!(
                stage
                    .executor_memory
                    .iter()
                    .any(|(id, _)| *id == executor.id),
                "stage {} has no peaks of {}",
                stage.id,
                executor.id
            );
            assert!(task.finish_epoch_millis >= task.start_epoch_millis);
            assert!(task.value(names::WALL_NANOS).unwrap_or(0) > 0);
        }
        for (id, peak) in &stage.executor_memory {
            assert!(peak.rss_bytes > 0, "stage {} on {id}: {peak:?}", stage.id);
        }
    }
    assert_eq!(ran_on.into_iter().collect::<Vec<_>>(), ["exec-1", "exec-2"]);
    // the aggregation reserved memory, and a stage's peak on an executor says so
    assert!(
        profile
            .stages
            .iter()
            .flat_map(|s| &s.executor_memory)
            .any(|(_, m)| m.execution_bytes > 0)
    );

    // a client's qprof options reach the scheduler's planner and the executors' tasks:
    // with function tracking off, no call is timed, on either side
    let mut untracked = QprofOptions::default();
    untracked
        .set_option("expression.adaptive_cpu_sampling", "false")
        .unwrap();
    let quiet = remote_session(&url, config.with_option_extension(untracked))
        .await
        .unwrap();
    quiet
        .register_parquet("t", &table, ParquetReadOptions::default())
        .await
        .unwrap();
    let untimed = quiet.sql(QUERY).await.unwrap().collect().await.unwrap();
    assert_eq!(
        pretty_format_batches(&untimed).unwrap().to_string(),
        pretty_format_batches(&expected).unwrap().to_string()
    );
    end_session(&url, &quiet.session_id()).await.unwrap();
    let events = recorder.events();
    let quiet_profile = events
        .iter()
        .filter_map(|e| match e {
            Event::QueryEnd(end) => end.profile.as_ref(),
            _ => None,
        })
        .nth(1)
        .expect("the second session's job has its profile");
    let mut quiet_nodes = Vec::new();
    all_nodes(&quiet_profile.plan, &mut quiet_nodes);
    assert_eq!(quiet_nodes.len(), nodes.len());
    for node in &quiet_nodes {
        assert!(
            node.functions.is_empty(),
            "{}: {:?}",
            node.name,
            node.functions
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// A plain HTTP/1.1 GET of `path` from `address`: its status and body.
fn http_get(address: std::net::SocketAddr, path: &str) -> (u16, String) {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(address).unwrap();
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    let status = answer
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no HTTP answer: {answer:?}"));
    let body = answer.split_once("\r\n\r\n").map_or("", |(_, b)| b);
    (status, body.to_string())
}
