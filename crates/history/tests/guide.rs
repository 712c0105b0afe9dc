//! The guide's ready answers (the SQL blocks of its chapter on the history tables) run
//! against a history and answer.

use std::path::PathBuf;
use std::sync::Arc;

use datafusion::prelude::SessionContext;
use qprof_core::profile::fixtures;
use qprof_eventlog::fixtures::{ORACLE_APP, copy_oracle_app, write_profiled_app};
use qprof_server::LogStore;

/// The ```sql blocks of `text`.
fn sql_blocks(text: &str) -> Vec<String> {
    let mut blocks = Vec::new();
    let mut current: Option<String> = None;
    for line in text.lines() {
        match (&mut current, line.trim_start()) {
            (None, "```sql") => current = Some(String::new()),
            (Some(_), "```") => blocks.extend(current.take()),
            (Some(block), _) => {
                block.push_str(line);
                block.push('\n');
            }
            (None, _) => {}
        }
    }
    blocks
}

#[tokio::test]
async fn every_ready_answer_in_the_guide_answers() {
    let dir = std::env::temp_dir().join(format!("qprof-history-guide-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    // the same query in two runs a day apart
    write_profiled_app(&dir, now - 2 * 86_400_000, &[fixtures::sample()]);
    write_profiled_app(&dir, now - 86_400_000, &[fixtures::sample()]);
    // and a Spark application, whose executors say their memory
    copy_oracle_app(&dir, ORACLE_APP);

    let ctx = SessionContext::new();
    qprof_history::register_store(&ctx, Arc::new(LogStore::open(&dir).unwrap())).unwrap();
    let chapter = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../docs/src/history-sql.md");
    let blocks = sql_blocks(&std::fs::read_to_string(chapter).unwrap());
    assert_eq!(blocks.len(), 7, "the chapter's ready answers");
    for sql in &blocks {
        let batches = ctx
            .sql(sql)
            .await
            .unwrap_or_else(|e| panic!("{e}\n{sql}"))
            .collect()
            .await
            .unwrap_or_else(|e| panic!("{e}\n{sql}"));
        let rows: usize = batches.iter().map(|b| b.num_rows()).sum();
        assert!(rows > 0, "no rows from\n{sql}");
    }
}
