//! The history's tables: what a row is in each, and its columns.

use std::collections::HashMap;
use std::fmt::Debug;
use std::sync::{Arc, LazyLock};

use datafusion::arrow::datatypes::SchemaRef;
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::error::Result;
use qprof_eventlog::{AppState, Execution, QueryJson, Replay, Stage};
use qprof_server::store::ListedApp;

use crate::columns::{Column, batch, projection_needs_profile, schema_of, text};
use crate::prune::Selection;

/// Says that a row type's `app` field is the application attempt it belongs to.
macro_rules! of_app {
    ($($row:ty),+) => {
        $(impl $crate::tables::OfApp for $row {
            fn app(&self) -> &$crate::tables::AppKey {
                &self.app
            }
        })+
    };
}

mod applications;
mod executors;
mod findings;
mod functions;
mod operator_tasks;
mod operators;
mod planning;
mod queries;
mod stages;
mod task_metrics;
mod tasks;

/// Every table of the schema, in [`crate::TABLE_NAMES`]' order.
pub(crate) static TABLES: &[&dyn Table] = &[
    &applications::TABLE,
    &queries::TABLE,
    &operators::TABLE,
    &operator_tasks::TABLE,
    &functions::TABLE,
    &stages::TABLE,
    &tasks::TABLE,
    &executors::TABLE,
    &findings::TABLE,
    &planning::TABLE,
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
    /// The application's replayed state, for tables that need it.
    pub(crate) fn state(&self) -> Option<&'a AppState> {
        self.replay.map(Replay::state)
    }

    /// The application's stage attempts that `selection` keeps, each with its query:
    /// the SQL execution of the first job that declared it (none outside SQL).
    pub(crate) fn stages(
        &self,
        selection: &'a Selection,
    ) -> impl Iterator<Item = (Option<i64>, &'a Stage)> + 'a {
        let state = self.state();
        // a stage reused by a later job (skipped there) belongs to the first job's query
        let mut queries: HashMap<i64, i64> = HashMap::new();
        for job in state.map(|state| state.jobs.values()).into_iter().flatten() {
            if let Some(query) = job.execution_id {
                for &stage in &job.stage_ids {
                    queries.entry(stage).or_insert(query);
                }
            }
        }
        state
            .map(|state| state.stages.values())
            .into_iter()
            .flatten()
            .map(move |stage| (queries.get(&stage.id).copied(), stage))
            .filter(|(query, _)| selection.keeps_optional_query(*query))
    }

    /// The queries `selection` keeps that carry a profile this qprof reads, with it.
    pub(crate) fn profiles(
        &self,
        selection: &'a Selection,
    ) -> impl Iterator<Item = (&'a Execution, QueryJson)> + 'a {
        self.executions(selection)
            .filter_map(|e| Some((e, e.qprof_profile_without_stacks()?.ok()?)))
    }

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

    /// What one of its rows is and where it comes from, in a sentence (the reference's).
    fn about(&self) -> &'static str;

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

/// A table whose rows are `R`s: its columns, and how one application gives its rows.
pub(crate) struct RowTable<R: 'static> {
    /// Its name in the schema.
    pub(crate) name: &'static str,
    /// What a row is, in a sentence.
    pub(crate) about: &'static str,
    /// Whether its rows need the log replayed.
    pub(crate) needs_replay: bool,
    /// Its columns.
    pub(crate) columns: &'static LazyLock<Vec<Column<R>>>,
    /// One application's rows.
    pub(crate) rows: fn(&RowSource<'_>) -> Vec<R>,
}

/// What one application's rows are made from.
pub(crate) struct RowSource<'a> {
    /// The application.
    pub(crate) app: AppSource<'a>,
    /// The rows the statement's filters may keep.
    pub(crate) selection: &'a Selection,
    /// The application's key, shared by its rows.
    pub(crate) key: Arc<AppKey>,
    /// Whether a column asked for needs the queries' profiles parsed.
    pub(crate) with_profile: bool,
}

impl<R> Debug for RowTable<R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RowTable")
            .field("name", &self.name)
            .finish()
    }
}

impl<R: 'static> Table for RowTable<R> {
    fn name(&self) -> &'static str {
        self.name
    }

    fn about(&self) -> &'static str {
        self.about
    }

    fn schema(&self) -> SchemaRef {
        schema_of(self.columns)
    }

    fn needs_replay(&self) -> bool {
        self.needs_replay
    }

    fn batch(
        &self,
        app: AppSource<'_>,
        selection: &Selection,
        projection: &[usize],
        schema: &SchemaRef,
    ) -> Result<RecordBatch> {
        let source = RowSource {
            key: AppKey::of(app.listed),
            with_profile: projection_needs_profile(self.columns, projection),
            app,
            selection,
        };
        batch(self.columns, &(self.rows)(&source), projection, schema)
    }
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
