//! The history's tables: what a row is in each, and its columns.

use std::fmt::Debug;
use std::sync::Arc;

use datafusion::arrow::datatypes::SchemaRef;
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::error::Result;
use qprof_eventlog::{Execution, Replay};
use qprof_server::store::ListedApp;

use crate::columns::{Column, text};
use crate::prune::Selection;

mod applications;
mod operators;
mod queries;

/// Every table of the schema, in [`crate::TABLE_NAMES`]' order.
pub(crate) static TABLES: &[&dyn Table] = &[
    &applications::Applications,
    &queries::Queries,
    &operators::Operators,
];

/// One application attempt, as a table reads it: its listing and, for tables that need
/// more than the listing, its replayed log.
pub(crate) struct AppSource<'a> {
    /// The attempt as the index lists it.
    pub(crate) listed: &'a ListedApp,
    /// Its replayed log, for tables that need it.
    pub(crate) replay: Option<&'a Replay>,
}

impl<'a> AppSource<'a> {
    /// The application's queries that `selection` keeps (none without a replay).
    pub(crate) fn executions(
        &self,
        selection: &'a Selection,
    ) -> impl Iterator<Item = &'a Execution> + 'a {
        self.replay
            .map(|r| r.state().executions.values())
            .into_iter()
            .flatten()
            .filter(move |e| selection.keeps_query(e.id))
    }
}

/// A history table: its schema and the rows one application gives it.
pub(crate) trait Table: Send + Sync + Debug {
    /// Its name in the schema.
    fn name(&self) -> &'static str;

    /// Every column.
    fn schema(&self) -> SchemaRef;

    /// Whether its rows need the log replayed (not only the index's listing).
    fn needs_replay(&self) -> bool {
        true
    }

    /// The rows of `app` that `selection` may keep, with the columns at `projection`
    /// only; `schema` is the projected schema.
    fn batch(
        &self,
        app: AppSource<'_>,
        selection: &Selection,
        projection: &[usize],
        schema: &SchemaRef,
    ) -> Result<RecordBatch>;
}

/// The attempt's id, as every table's `attempt_id` column gives it.
fn attempt_id(app: &ListedApp) -> Option<&str> {
    app.info.attempt_id.as_deref()
}

/// The application attempt a row belongs to, shared by its rows.
#[derive(Debug)]
pub(crate) struct AppKey {
    app_id: String,
    attempt_id: Option<String>,
}

impl AppKey {
    /// The key of `app`'s rows.
    pub(crate) fn of(app: &ListedApp) -> Arc<AppKey> {
        Arc::new(AppKey {
            app_id: app.id().to_string(),
            attempt_id: app.info.attempt_id.clone(),
        })
    }
}

/// A row of one application attempt.
pub(crate) trait OfApp {
    /// The attempt it belongs to.
    fn app(&self) -> &AppKey;
}

/// The two columns that name a row's application attempt, first in every table.
fn app_columns<R: OfApp + 'static>() -> Vec<Column<R>> {
    vec![
        text("app_id", |r: &R| Some(r.app().app_id.as_str())).about("The application id.", None),
        text("attempt_id", |r: &R| r.app().attempt_id.as_deref())
            .about("The attempt id, for applications with attempts.", None),
    ]
}
