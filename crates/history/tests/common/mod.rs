//! What the history's tests share: a directory of their own, a session over a store
//! that counts the logs it replays, and a statement's rows as text.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use datafusion::arrow::array::{Array, RecordBatch};
use datafusion::prelude::SessionContext;
use qprof_core::profile::{QueryProfile, fixtures};
use qprof_server::LogStore;
use qprof_server::store::StoreOptions;

pub(crate) fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("qprof-history-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// `sql`'s rows, every column as text (nulls as "null").
pub(crate) async fn rows(ctx: &SessionContext, sql: &str) -> Vec<Vec<String>> {
    let batches: Vec<RecordBatch> = ctx.sql(sql).await.unwrap().collect().await.unwrap();
    let mut out = Vec::new();
    for batch in &batches {
        for row in 0..batch.num_rows() {
            out.push(
                batch
                    .columns()
                    .iter()
                    .map(|c| {
                        if c.is_null(row) {
                            "null".to_string()
                        } else {
                            datafusion::arrow::util::display::array_value_to_string(c, row).unwrap()
                        }
                    })
                    .collect(),
            );
        }
    }
    out
}

/// A store over `dir` counting the logs it replays from their start.
pub(crate) fn counting_store(
    dir: &Path,
    options: StoreOptions,
) -> (Arc<LogStore>, Arc<AtomicUsize>) {
    let loads = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&loads);
    let store = LogStore::open_with(dir, options)
        .unwrap()
        .with_load_hook(Arc::new(move |_| {
            counter.fetch_add(1, Ordering::SeqCst);
        }));
    (Arc::new(store), loads)
}

pub(crate) fn session(store: Arc<LogStore>) -> SessionContext {
    let ctx = SessionContext::new();
    qprof_history::register_store(&ctx, store).unwrap();
    ctx
}

pub(crate) fn profile(id: usize) -> QueryProfile {
    let mut p = fixtures::sample();
    p.id = id;
    p.sql = format!("SELECT {id}");
    p
}

/// Spark's PascalCase executor metric name as a column's end, an acronym as one word:
/// `JVMHeapMemory` as `jvm_heap_memory`.
pub(crate) fn snake_acronyms(name: &str) -> String {
    let chars: Vec<char> = name.chars().collect();
    let mut out = String::new();
    for (i, c) in chars.iter().enumerate() {
        let upper = c.is_ascii_uppercase();
        let starts_word = i > 0
            && upper
            && (!chars[i - 1].is_ascii_uppercase()
                || chars.get(i + 1).is_some_and(|n| n.is_ascii_lowercase()));
        if starts_word {
            out.push('_');
        }
        out.push(c.to_ascii_lowercase());
    }
    out
}
