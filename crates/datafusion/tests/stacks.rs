//! Sampled stacks in a real plan: a deliberately costly function's own frame fills its
//! operator's samples, and a session that does not sample keeps none.

use std::sync::Arc;

use datafusion::arrow::array::{ArrayRef, Int64Array, RecordBatch};
use datafusion::arrow::datatypes::{DataType, Field, Schema};
use datafusion::datasource::MemTable;
use datafusion::logical_expr::{ColumnarValue, Volatility, create_udf};
use datafusion::prelude::SessionConfig;
use qprof_core::profile::QueryProfile;
use qprof_datafusion::ProfilingSession;
use qprof_datafusion::options::QprofOptions;

const BATCHES: usize = 16;
const ROWS_PER_BATCH: usize = 2_000;

/// What the costly function does for one value: a loop the optimizer cannot remove, in a
/// function of its own so that its frame shows in the stacks.
#[inline(never)]
fn costly_udf_kernel(v: i64) -> i64 {
    let mut x = v as u64 ^ 0x9e37_79b9_7f4a_7c15;
    for i in 0..20_000u64 {
        x = std::hint::black_box(x.rotate_left(5) ^ i.wrapping_mul(0x2545_f491_4f6c_dd1d));
    }
    (x % 1_000) as i64
}

fn session(stack_sample_hz: u32) -> ProfilingSession {
    let config = SessionConfig::new()
        .with_target_partitions(2)
        .with_option_extension(QprofOptions {
            stack_sample_hz,
            ..QprofOptions::default()
        });
    let session = ProfilingSession::new(config);
    let schema = Arc::new(Schema::new(vec![Field::new("v", DataType::Int64, false)]));
    let batches: Vec<RecordBatch> = (0..BATCHES)
        .map(|b| {
            let values = (0..ROWS_PER_BATCH).map(|i| (b * ROWS_PER_BATCH + i) as i64);
            RecordBatch::try_new(
                Arc::clone(&schema),
                vec![Arc::new(Int64Array::from_iter_values(values)) as ArrayRef],
            )
            .unwrap()
        })
        .collect();
    let (a, b) = batches.split_at(BATCHES / 2);
    let table = MemTable::try_new(schema, vec![a.to_vec(), b.to_vec()]).unwrap();
    session
        .context()
        .register_table("t", Arc::new(table))
        .unwrap();
    session.context().register_udf(create_udf(
        "costly",
        vec![DataType::Int64],
        DataType::Int64,
        Volatility::Immutable,
        Arc::new(|args: &[ColumnarValue]| {
            let arrays = ColumnarValue::values_to_arrays(args)?;
            let input = arrays[0].as_any().downcast_ref::<Int64Array>().unwrap();
            let out: Int64Array = input
                .values()
                .iter()
                .map(|&v| costly_udf_kernel(v))
                .collect();
            Ok(ColumnarValue::Array(Arc::new(out) as ArrayRef))
        }),
    ));
    session
}

async fn run(session: &ProfilingSession) -> QueryProfile {
    let run = session
        .run(1, "SELECT sum(costly(v)) AS s FROM t")
        .await
        .unwrap();
    let expected: i64 = (0..(BATCHES * ROWS_PER_BATCH) as i64)
        .map(costly_udf_kernel)
        .sum();
    let got = run.batches[0]
        .column(0)
        .as_any()
        .downcast_ref::<Int64Array>()
        .unwrap()
        .value(0);
    assert_eq!(got, expected, "the result changed");
    run.profile
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_costly_functions_frame_fills_its_operators_samples() {
    let profile = run(&session(250)).await;
    let text = profile.render_text(0);
    let samples = profile.stack_samples.as_ref().expect("sampled stacks");
    // the operator that called the function
    let caller = profile
        .plan
        .iter()
        .find(|n| n.functions.iter().any(|f| f.name == "costly"))
        .unwrap_or_else(|| panic!("no operator calls costly:\n{text}"));
    let theirs: Vec<_> = samples
        .stacks
        .iter()
        .filter(|s| s.node_id == caller.id)
        .collect();
    let total: u64 = theirs.iter().map(|s| s.count).sum();
    let in_kernel: u64 = theirs
        .iter()
        .filter(|s| samples.names(s).any(|n| n.ends_with("costly_udf_kernel")))
        .map(|s| s.count)
        .sum();
    assert!(
        total >= 50,
        "{total} samples of #{} {}:\n{text}",
        caller.id,
        caller.name
    );
    assert!(
        in_kernel * 5 >= total * 4,
        "{in_kernel} of {total} samples of #{} {} in costly_udf_kernel:\n{text}",
        caller.id,
        caller.name
    );
    // the samples in the kernel were taken in the plan's call of the function, which they
    // name as the call the profile measured
    let call = &caller
        .functions
        .iter()
        .find(|f| f.name == "costly")
        .unwrap()
        .expression;
    let in_call: u64 = theirs
        .iter()
        .filter(|s| {
            samples.call_site(s) == Some(call.as_str())
                && samples.names(s).any(|n| n.ends_with("costly_udf_kernel"))
        })
        .map(|s| s.count)
        .sum();
    assert!(
        in_call * 10 >= in_kernel * 9,
        "{in_call} of the {in_kernel} samples in costly_udf_kernel name the call {call}"
    );
    // the operator is where the samples are, and the text says what it ran
    let most = profile
        .plan
        .iter()
        .max_by_key(|n| samples.operator(n.id, 1).map_or(0, |s| s.samples))
        .unwrap();
    assert_eq!(most.id, caller.id, "{text}");
    let summary = samples.operator(caller.id, 3).unwrap();
    assert!(
        summary.top_functions[0].0.ends_with("costly_udf_kernel"),
        "{:?}",
        summary.top_functions
    );
    assert!(text.contains("costly_udf_kernel"), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_that_does_not_sample_keeps_no_stacks() {
    let profile = run(&session(0)).await;
    assert!(profile.stack_samples.is_none());
    assert!(!profile.render_text(0).contains(" samples ~"));
}
