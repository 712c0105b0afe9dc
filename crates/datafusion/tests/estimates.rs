//! The optimizer's estimates against what operators produced: a table whose statistics
//! lie shows its estimate beside the rows it gave; it is a `misestimate` finding only where
//! the plan chose on it (a hash join built on the lying, larger side), and the same table
//! telling the truth raises none.

use std::fmt;
use std::sync::Arc;

use async_trait::async_trait;
use datafusion::arrow::array::{ArrayRef, Int64Array, RecordBatch};
use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::catalog::{Session, TableProvider};
use datafusion::common::stats::Precision;
use datafusion::common::tree_node::TreeNodeRecursion;
use datafusion::common::{Result, Statistics};
use datafusion::datasource::{MemTable, TableType};
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::logical_expr::Expr;
use datafusion::physical_plan::{
    DisplayAs, DisplayFormatType, ExecutionPlan, PhysicalExpr, PlanProperties, StatisticsArgs,
};
use datafusion::prelude::SessionConfig;
use qprof_core::advice::{Severity, advise, render_findings};
use qprof_core::profile::{Estimated, QueryProfile};
use qprof_datafusion::ProfilingSession;

const ROWS: usize = 2_000_000;
const GROUPS: i64 = 20_000;
/// What the lying table claims to hold.
const CLAIMED_ROWS: usize = 10;

/// A scan that claims `CLAIMED_ROWS` rows, whatever it produces.
#[derive(Debug)]
struct LyingScan(Arc<dyn ExecutionPlan>);

impl DisplayAs for LyingScan {
    fn fmt_as(&self, _t: DisplayFormatType, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "LyingScan")
    }
}

impl ExecutionPlan for LyingScan {
    fn name(&self) -> &str {
        "LyingScan"
    }

    fn properties(&self) -> &Arc<PlanProperties> {
        self.0.properties()
    }

    fn children(&self) -> Vec<&Arc<dyn ExecutionPlan>> {
        Vec::new()
    }

    fn apply_expressions(
        &self,
        f: &mut dyn FnMut(&Arc<dyn PhysicalExpr>) -> Result<TreeNodeRecursion>,
    ) -> Result<TreeNodeRecursion> {
        self.0.apply_expressions(f)
    }

    fn with_new_children(
        self: Arc<Self>,
        _children: Vec<Arc<dyn ExecutionPlan>>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        Ok(self)
    }

    fn execute(
        &self,
        partition: usize,
        context: Arc<TaskContext>,
    ) -> Result<SendableRecordBatchStream> {
        self.0.execute(partition, context)
    }

    fn statistics_from_inputs(
        &self,
        _input_stats: &[Arc<Statistics>],
        _args: &StatisticsArgs,
    ) -> Result<Arc<Statistics>> {
        let mut statistics = Statistics::new_unknown(self.0.schema().as_ref());
        statistics.num_rows = Precision::Inexact(CLAIMED_ROWS);
        Ok(Arc::new(statistics))
    }

    #[allow(deprecated)]
    fn partition_statistics(&self, _partition: Option<usize>) -> Result<Arc<Statistics>> {
        self.statistics_from_inputs(&[], &StatisticsArgs::new())
    }
}

/// A table whose scans lie about their size.
#[derive(Debug)]
struct LyingTable(MemTable);

#[async_trait]
impl TableProvider for LyingTable {
    fn schema(&self) -> SchemaRef {
        self.0.schema()
    }

    fn table_type(&self) -> TableType {
        TableType::Base
    }

    async fn scan(
        &self,
        state: &dyn Session,
        projection: Option<&Vec<usize>>,
        filters: &[Expr],
        limit: Option<usize>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        let inner = self.0.scan(state, projection, filters, limit).await?;
        Ok(Arc::new(LyingScan(inner)))
    }
}

fn table() -> MemTable {
    let schema = Arc::new(Schema::new(vec![Field::new("v", DataType::Int64, false)]));
    let values = Int64Array::from_iter_values((0..ROWS as i64).map(|i| i % GROUPS));
    let batch =
        RecordBatch::try_new(Arc::clone(&schema), vec![Arc::new(values) as ArrayRef]).unwrap();
    let batches: Vec<RecordBatch> = (0..ROWS / 8_192 + 1)
        .map(|i| batch.slice(i * 8_192, 8_192.min(ROWS - i * 8_192)))
        .collect();
    MemTable::try_new(schema, vec![batches]).unwrap()
}

fn keys() -> MemTable {
    let schema = Arc::new(Schema::new(vec![Field::new("k", DataType::Int64, false)]));
    let values = Int64Array::from_iter_values(0..GROUPS);
    let batch =
        RecordBatch::try_new(Arc::clone(&schema), vec![Arc::new(values) as ArrayRef]).unwrap();
    MemTable::try_new(schema, vec![vec![batch]]).unwrap()
}

async fn profile_of(lying: bool, sql: &str) -> QueryProfile {
    let session = ProfilingSession::new(SessionConfig::new().with_target_partitions(2));
    let provider: Arc<dyn TableProvider> = if lying {
        Arc::new(LyingTable(table()))
    } else {
        Arc::new(table())
    };
    session.context().register_table("t", provider).unwrap();
    session
        .context()
        .register_table("keys", Arc::new(keys()))
        .unwrap();
    let run = session.run(1, sql).await.unwrap();
    run.profile
}

const AGGREGATE: &str = "SELECT v, count(*) AS n FROM t GROUP BY v";
const JOIN: &str = "SELECT count(*) FROM t JOIN keys ON t.v = keys.k";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn statistics_that_lie_show_beside_the_rows_and_choose_nothing_in_an_aggregate() {
    let profile = profile_of(true, AGGREGATE).await;
    let text = profile.render_text(0);
    let scan = profile
        .plan
        .iter()
        .find(|n| n.name == "LyingScan")
        .unwrap_or_else(|| panic!("no scan:\n{text}"));
    assert_eq!(
        scan.estimate.map(|e| e.rows),
        Some(Estimated::Inexact(CLAIMED_ROWS as u64)),
        "{text}"
    );
    assert!(text.contains(&format!("(est ~{CLAIMED_ROWS})")), "{text}");
    let found: Vec<_> = advise(&profile)
        .into_iter()
        .filter(|f| f.rule == "misestimate")
        .collect();
    assert!(found.is_empty(), "{found:?}\n{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn statistics_that_lie_put_the_larger_side_on_the_build_side() {
    let profile = profile_of(true, JOIN).await;
    let text = profile.render_text(0);
    let found: Vec<_> = advise(&profile)
        .into_iter()
        .filter(|f| f.rule == "misestimate")
        .collect();
    assert_eq!(found.len(), 1, "{found:?}\n{text}");
    let join = profile
        .plan
        .iter()
        .find(|n| Some(n.id) == found[0].node_id)
        .unwrap();
    assert_eq!(join.name, "HashJoinExec", "{text}");
    // the build side holds the lying table's rows, the probe side the keys
    let build_rows = join.children[0].value("outputRows").unwrap();
    assert_eq!(build_rows, ROWS as i64, "{text}");
    assert!(
        found[0].message.contains(&format!(
            "produced 2,000,000 rows where the optimizer expected {CLAIMED_ROWS}"
        )),
        "{}",
        found[0].message
    );
    assert!(
        found[0].message.contains("on the larger side"),
        "{}",
        found[0].message
    );
    // the plan's one problem: its finding is the first, a warning; it cost the build the
    // share of its CPU that the larger side's rows took (99% of them)
    let findings = advise(&profile);
    assert_eq!(
        (findings[0].rule, findings[0].severity),
        ("misestimate", Severity::Warning),
        "{}{:?}\n{text}",
        render_findings(&findings),
        found[0].cost
    );
    let build_cpu = join.value("hashBuildCpuNanos").unwrap() as u64;
    let cost = found[0].cost.amount;
    assert!(
        cost <= build_cpu && cost * 10 >= build_cpu * 9,
        "{cost} of {build_cpu}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn statistics_that_tell_the_truth_raise_no_misestimate() {
    for sql in [AGGREGATE, JOIN] {
        let profile = profile_of(false, sql).await;
        let text = profile.render_text(0);
        let scan = profile.plan.iter().find(|n| n.children.is_empty()).unwrap();
        assert!(
            matches!(scan.estimate.map(|e| e.rows), Some(Estimated::Exact(_))),
            "{text}"
        );
        // no misestimate (other rules are not this test's: on a loaded machine the
        // sampled count(*) can show its wall time as CPU)
        let findings = advise(&profile);
        assert!(
            findings.iter().all(|f| f.rule != "misestimate"),
            "{}\n{text}",
            render_findings(&findings)
        );
    }
}
