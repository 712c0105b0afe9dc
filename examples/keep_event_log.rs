//! Keep an event log of an application's queries, for `qprof serve` or Spark's own history
//! server.
//!
//! One listener on the profiler writes the log: `./qprof-events/eventlog_v2_local-…`, in
//! Spark's format. Each query is in the log (flushed) as soon as it ends; the application
//! is complete when the profiler finishes.
//!
//! ```sh
//! cargo run -p qprof-examples --example keep_event_log
//! cargo run --release -- serve --log-dir qprof-events
//! ```

use std::error::Error;
use std::sync::Arc;

use datafusion::execution::SessionStateBuilder;
use datafusion::prelude::SessionContext;
use qprof_datafusion::Profiler;
use qprof_eventlog::EventLogListener;

#[tokio::main]
async fn main() -> Result<(), Box<dyn Error>> {
    let profiler = Profiler::new();
    let ctx = SessionContext::new_with_state(
        profiler
            .instrument(SessionStateBuilder::new().with_default_features())
            .build(),
    );
    let log = Arc::new(EventLogListener::in_dir("qprof-events"));
    profiler.add_listener(log.clone())?;

    qprof_examples::register_tables(&ctx)?;
    for sql in [
        qprof_examples::REVENUE_BY_REGION,
        "SELECT customer, sum(amount) AS spent FROM sales GROUP BY customer ORDER BY spent DESC LIMIT 10",
        "SELECT upper(name) AS region, length(name) AS letters FROM regions",
    ] {
        let run = profiler.run_sql(&ctx, sql).await?;
        println!("query {}: {} rows", run.profile.id, run.profile.rows);
    }
    profiler.finish(0)?;

    if let Some(dir) = log.log_dir() {
        println!("event log written to {}", dir.display());
    }
    println!("see it with: qprof serve --log-dir qprof-events");
    Ok(())
}
