//! A history table as DataFusion reads it: the applications its filters keep, split over
//! the session's partitions, each replayed (through the store's cache and saved replays)
//! only when the scan gets to it.

use std::sync::Arc;

use async_trait::async_trait;
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::catalog::{Session, TableProvider};
use datafusion::error::{DataFusionError, Result};
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::logical_expr::TableType;
use datafusion::logical_expr::{Expr, TableProviderFilterPushDown};
use datafusion::physical_plan::ExecutionPlan;
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::streaming::{PartitionStream, StreamingTableExec};
use futures::StreamExt;
use qprof_server::LogStore;
use qprof_server::store::ListedApp;

use crate::prune::Selection;
use crate::tables::{AppSource, Table};

/// One table of the `qprof` schema over one log store.
#[derive(Debug)]
pub(crate) struct HistoryTable {
    store: Arc<LogStore>,
    table: &'static dyn Table,
    schema: SchemaRef,
}

impl HistoryTable {
    /// `table` over `store`'s applications.
    pub(crate) fn new(store: Arc<LogStore>, table: &'static dyn Table) -> HistoryTable {
        HistoryTable {
            store,
            table,
            schema: table.schema(),
        }
    }
}

#[async_trait]
impl TableProvider for HistoryTable {
    fn schema(&self) -> SchemaRef {
        Arc::clone(&self.schema)
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
        let selection = Arc::new(Selection::of(filters));
        let apps: Vec<ListedApp> = self
            .store
            .list()
            .map_err(|e| DataFusionError::External(Box::new(e)))?
            .into_iter()
            .filter(|a| {
                // a log without an end (running, or died) keeps every later time
                let end = a.info.end_time.filter(|_| !a.source.in_progress);
                selection.keeps_app(a.id()) && selection.keeps_run(a.info.start_time, end)
            })
            .collect();
        let projection: Arc<[usize]> = match projection {
            Some(p) => p.as_slice().into(),
            None => (0..self.schema.fields().len()).collect(),
        };
        let schema = Arc::new(self.schema.project(&projection)?);
        let partitions = state
            .config()
            .target_partitions()
            .clamp(1, apps.len().max(1));
        let mut shares: Vec<Vec<ListedApp>> = vec![Vec::new(); partitions];
        for (i, app) in apps.into_iter().enumerate() {
            shares[i % partitions].push(app);
        }
        let streams = shares
            .into_iter()
            .map(|apps| -> Arc<dyn PartitionStream> {
                Arc::new(AppsPartition {
                    store: Arc::clone(&self.store),
                    table: self.table,
                    apps: apps.into(),
                    selection: Arc::clone(&selection),
                    projection: Arc::clone(&projection),
                    schema: Arc::clone(&schema),
                })
            })
            .collect();
        Ok(Arc::new(StreamingTableExec::try_new(
            schema,
            streams,
            None,
            [],
            false,
            limit,
        )?))
    }

    fn supports_filters_pushdown(
        &self,
        filters: &[&Expr],
    ) -> Result<Vec<TableProviderFilterPushDown>> {
        Ok(filters
            .iter()
            .map(|f| {
                if Selection::understands(f) {
                    TableProviderFilterPushDown::Inexact
                } else {
                    TableProviderFilterPushDown::Unsupported
                }
            })
            .collect())
    }
}

/// One partition of a scan: a share of the applications, read one after the other as
/// the scan pulls (a scan stopped early, by a limit, reads no more of them).
#[derive(Debug)]
struct AppsPartition {
    store: Arc<LogStore>,
    table: &'static dyn Table,
    apps: Arc<[ListedApp]>,
    selection: Arc<Selection>,
    projection: Arc<[usize]>,
    schema: SchemaRef,
}

impl PartitionStream for AppsPartition {
    fn schema(&self) -> &SchemaRef {
        &self.schema
    }

    fn execute(&self, _: Arc<TaskContext>) -> SendableRecordBatchStream {
        let (store, table, apps) = (Arc::clone(&self.store), self.table, Arc::clone(&self.apps));
        let (selection, projection, schema) = (
            Arc::clone(&self.selection),
            Arc::clone(&self.projection),
            Arc::clone(&self.schema),
        );
        let batches = futures::stream::iter(0..apps.len()).then(move |i| {
            let (store, apps) = (Arc::clone(&store), Arc::clone(&apps));
            let (selection, projection, schema) = (
                Arc::clone(&selection),
                Arc::clone(&projection),
                Arc::clone(&schema),
            );
            async move {
                tokio::task::spawn_blocking(move || {
                    read(&store, table, &apps[i], &selection, &projection, &schema)
                })
                .await
                .map_err(|e| DataFusionError::External(Box::new(e)))?
            }
        });
        Box::pin(RecordBatchStreamAdapter::new(
            Arc::clone(&self.schema),
            batches,
        ))
    }
}

/// `app`'s rows of `table`, replaying its log (from the store's cache or saved replays
/// when they have it) if the table needs more than the listing.
fn read(
    store: &LogStore,
    table: &dyn Table,
    app: &ListedApp,
    selection: &Selection,
    projection: &[usize],
    schema: &SchemaRef,
) -> Result<RecordBatch> {
    let replay = if table.needs_replay() {
        Some(store.replay(app).map_err(|e| {
            DataFusionError::Execution(format!("cannot read log '{}': {e}", app.source.name))
        })?)
    } else {
        None
    };
    let source = AppSource {
        listed: app,
        replay: replay.as_deref(),
    };
    table.batch(source, selection, projection, schema)
}
