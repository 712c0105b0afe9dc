//! What operators waited on: a consumer slower than its repartition keeps the
//! repartition's producers blocked on full channels (output wait), while the consumer's
//! own input is seldom empty.

use std::sync::Arc;
use std::time::Duration;

use datafusion::arrow::array::{ArrayRef, Int64Array, RecordBatch};
use datafusion::arrow::datatypes::{DataType, Field, Schema};
use datafusion::datasource::MemTable;
use datafusion::logical_expr::{ColumnarValue, Volatility, create_udf};
use datafusion::prelude::SessionConfig;
use qprof_core::profile::{ProfileNode, QueryProfile, names};
use qprof_datafusion::ProfilingSession;

const BATCHES: usize = 40;
/// Rows a batch: DataFusion's batch size, so that no operator merges batches.
const ROWS: usize = 8_192;
const PAUSE: Duration = Duration::from_millis(10);

fn value(node: &ProfileNode, name: &str) -> i64 {
    node.value(name)
        .unwrap_or_else(|| panic!("#{} {} has no {name}", node.id, node.name))
}

/// Runs `SELECT slow(v) FROM t`, `slow` sleeping `pause` a batch, over one partition
/// that a round-robin repartition spreads over two.
async fn run_with_consumer_pause(pause: Duration) -> QueryProfile {
    // the scan keeps its one partition, so the planner adds a repartition to spread it
    let config = SessionConfig::new()
        .with_target_partitions(2)
        .set_bool("datafusion.optimizer.repartition_file_scans", false);
    let session = ProfilingSession::new(config);
    let schema = Arc::new(Schema::new(vec![Field::new("v", DataType::Int64, false)]));
    let batches: Vec<RecordBatch> = (0..BATCHES)
        .map(|b| {
            let values = (0..ROWS).map(|i| (b * ROWS + i) as i64);
            RecordBatch::try_new(
                Arc::clone(&schema),
                vec![Arc::new(Int64Array::from_iter_values(values)) as ArrayRef],
            )
            .unwrap()
        })
        .collect();
    // one input partition: the planner spreads it over two with a round-robin repartition
    let table = MemTable::try_new(schema, vec![batches]).unwrap();
    session
        .context()
        .register_table("t", Arc::new(table))
        .unwrap();
    session.context().register_udf(create_udf(
        "slow",
        vec![DataType::Int64],
        DataType::Int64,
        Volatility::Volatile,
        Arc::new(move |args: &[ColumnarValue]| {
            // the worker hands its queue to another thread while this one sleeps: a producer
            // this poll woke would otherwise wait in the sleeping worker's own slot (one no
            // other worker takes from), and the other consumer would find its channel empty
            if !pause.is_zero() {
                tokio::task::block_in_place(|| std::thread::sleep(pause));
            }
            let arrays = ColumnarValue::values_to_arrays(args)?;
            Ok(ColumnarValue::Array(Arc::clone(&arrays[0])))
        }),
    ));
    let run = session.run(1, "SELECT slow(v) AS v FROM t").await.unwrap();
    let rows: usize = run.batches.iter().map(|b| b.num_rows()).sum();
    assert_eq!(rows, BATCHES * ROWS);
    run.profile
}

fn repartition(profile: &QueryProfile) -> &ProfileNode {
    profile
        .plan
        .iter()
        .find(|n| n.name == "RepartitionExec")
        .unwrap_or_else(|| panic!("no repartition:\n{}", profile.render_text(0)))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_consumer_keeps_its_repartition_waiting_on_output() {
    let profile = run_with_consumer_pause(PAUSE).await;
    let text = profile.render_text(0);
    let repartition = repartition(&profile);
    let consumer = profile
        .plan
        .iter()
        .find(|n| n.children.iter().any(|c| c.id == repartition.id))
        .unwrap();
    let output_wait = value(repartition, names::OUTPUT_WAIT_NANOS);
    let input_wait = value(repartition, names::INPUT_WAIT_NANOS);
    // the consumer slept PAUSE a batch, over two partitions; its producer was blocked for
    // most of that, waiting for room in the channels
    let calls = consumer.functions.iter().map(|f| f.vectors).sum::<u64>() as i64;
    assert_eq!(calls, BATCHES as i64, "{text}");
    let slept_per_partition = (PAUSE.as_nanos() as i64) * calls / 2;
    assert!(
        output_wait >= slept_per_partition / 2,
        "output wait {output_wait} ns, the consumer slept {slept_per_partition} ns a partition:\n{text}"
    );
    assert!(
        output_wait > 3 * input_wait,
        "the repartition waited {input_wait} ns on input, {output_wait} ns on output:\n{text}"
    );
    // its consumer seldom found it empty, and the leaf waits on no input
    assert!(
        value(consumer, names::INPUT_WAIT_NANOS) < output_wait,
        "#{} waited longer on input than its producer on output:\n{text}",
        consumer.id
    );
    let leaf = profile.plan.iter().find(|n| n.children.is_empty()).unwrap();
    assert_eq!(value(leaf, names::INPUT_WAIT_NANOS), 0);
    assert!(text.contains("waited on input"), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fast_consumer_leaves_its_repartition_little_output_wait() {
    // the task that only awaits the producer's end polls no input: it never counts
    let slow = run_with_consumer_pause(PAUSE).await;
    let fast = run_with_consumer_pause(Duration::ZERO).await;
    let (slow_wait, fast_wait) = (
        value(repartition(&slow), names::OUTPUT_WAIT_NANOS),
        value(repartition(&fast), names::OUTPUT_WAIT_NANOS),
    );
    assert!(
        fast_wait * 4 < slow_wait,
        "output wait {fast_wait} ns with a fast consumer, {slow_wait} ns with a slow one:\n{}",
        fast.render_text(0)
    );
}
