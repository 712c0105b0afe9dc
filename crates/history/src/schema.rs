//! The `qprof` schema: one table provider per history table, over one log store.

use std::sync::Arc;

use async_trait::async_trait;
use datafusion::catalog::{SchemaProvider, TableProvider};
use datafusion::error::Result;
use qprof_server::LogStore;

use crate::scan::HistoryTable;
use crate::tables::TABLES;

/// The schema's name in the catalog: tables are read as `qprof.operators`.
pub const SCHEMA_NAME: &str = "qprof";

/// The names of the schema's tables, in the order the guide describes them.
pub const TABLE_NAMES: &[&str] = &[
    "applications",
    "queries",
    "operators",
    "operator_tasks",
    "functions",
    "stages",
    "tasks",
    "executors",
    "findings",
    "planning",
];

/// The `qprof` schema over one log store.
#[derive(Debug)]
pub struct HistorySchema {
    store: Arc<LogStore>,
}

impl HistorySchema {
    /// The schema of `store`'s applications.
    pub fn new(store: Arc<LogStore>) -> HistorySchema {
        HistorySchema { store }
    }
}

#[async_trait]
impl SchemaProvider for HistorySchema {
    fn table_names(&self) -> Vec<String> {
        TABLE_NAMES.iter().map(|t| t.to_string()).collect()
    }

    async fn table(&self, name: &str) -> Result<Option<Arc<dyn TableProvider>>> {
        Ok(TABLES
            .iter()
            .find(|t| t.name() == name)
            .map(|&table| -> Arc<dyn TableProvider> {
                Arc::new(HistoryTable::new(Arc::clone(&self.store), table))
            }))
    }

    fn table_exist(&self, name: &str) -> bool {
        TABLE_NAMES.contains(&name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_named_table_has_a_provider_and_no_other() {
        let provided: Vec<&str> = TABLES.iter().map(|t| t.name()).collect();
        assert_eq!(provided, TABLE_NAMES);
    }
}
