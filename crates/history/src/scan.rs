//! A history table as DataFusion reads it: the applications its filters keep, split over
//! the session's partitions, each replayed (through the store's cache and saved replays)
//! only when the scan gets to it.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

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
use qprof_server::store::ListedApp;
use qprof_server::{Audience, LogStore};

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
        let selection = Selection::of(filters);
        // a statement sees the applications its audience may view (all, without one)
        let audience = state.config().get_extension::<Audience>();
        let apps: Vec<ListedApp> = self
            .store
            .list()
            .map_err(|e| DataFusionError::External(Box::new(e)))?
            .into_iter()
            .filter(|a| {
                // a log without an end (running, or died) keeps every later time
                let end = a.info.end_time.filter(|_| !a.source.in_progress);
                selection.keeps_app(a.id())
                    && selection.keeps_run(a.info.start_time, end)
                    && audience.as_ref().is_none_or(|v| v.may_view(&a.info))
            })
            .collect();
        let projection: Vec<usize> = match projection {
            Some(p) => p.clone(),
            None => (0..self.schema.fields().len()).collect(),
        };
        let schema = Arc::new(self.schema.project(&projection)?);
        let scan = Arc::new(ScanShare {
            store: Arc::clone(&self.store),
            table: self.table,
            selection,
            projection,
            schema: Arc::clone(&schema),
        });
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
                    scan: Arc::clone(&scan),
                    apps: apps.into(),
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

/// What every partition of one scan shares: where and what it reads, and what it keeps.
#[derive(Debug)]
struct ScanShare {
    store: Arc<LogStore>,
    table: &'static dyn Table,
    selection: Selection,
    projection: Vec<usize>,
    /// The projected schema.
    schema: SchemaRef,
}

impl ScanShare {
    /// `app`'s rows of the table, replaying its log (from the store's cache or saved
    /// replays when they have it) if the table needs more than the listing.
    fn read(&self, app: &ListedApp) -> Result<RecordBatch> {
        let replay = if self.table.needs_replay() {
            Some(self.store.replay_passing(app).map_err(|e| {
                DataFusionError::Execution(format!("cannot read log '{}': {e}", app.source.name))
            })?)
        } else {
            None
        };
        let source = AppSource {
            listed: app,
            replay: replay.as_deref(),
        };
        self.table
            .batch(source, &self.selection, &self.projection, &self.schema)
    }
}

/// Sets its flag when dropped.
struct StopOnDrop(Arc<AtomicBool>);

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

/// One partition of a scan: a share of the applications, read one after the other as
/// the scan pulls (a scan stopped early, by a limit, reads no more of them).
#[derive(Debug)]
struct AppsPartition {
    scan: Arc<ScanShare>,
    apps: Arc<[ListedApp]>,
}

impl PartitionStream for AppsPartition {
    fn schema(&self) -> &SchemaRef {
        &self.scan.schema
    }

    fn execute(&self, _: Arc<TaskContext>) -> SendableRecordBatchStream {
        let (scan, apps) = (Arc::clone(&self.scan), Arc::clone(&self.apps));
        // set when the stream is dropped (the statement ended or was stopped): a read
        // already handed to a blocking thread, which cannot be taken back, then reads
        // nothing if it has not started
        let stopped = StopOnDrop(Arc::new(AtomicBool::new(false)));
        let batches = futures::stream::iter(0..apps.len()).then(move |i| {
            let (scan, apps) = (Arc::clone(&scan), Arc::clone(&apps));
            let stopped = Arc::clone(&stopped.0);
            async move {
                tokio::task::spawn_blocking(move || {
                    if stopped.load(Ordering::SeqCst) {
                        return Err(DataFusionError::Execution("the scan was stopped".into()));
                    }
                    scan.read(&apps[i])
                })
                .await
                .map_err(|e| DataFusionError::External(Box::new(e)))?
            }
        });
        Box::pin(RecordBatchStreamAdapter::new(
            Arc::clone(&self.scan.schema),
            batches,
        ))
    }
}
