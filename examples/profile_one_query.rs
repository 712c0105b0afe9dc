//! Profile one query of an existing application.
//!
//! The application builds its DataFusion session as it always does; qprof goes on top with
//! one call (`Profiler::instrument`), and the query runs through the profiler to get its
//! profile next to its result. Writes nothing.
//!
//! ```sh
//! cargo run -p qprof-examples --example profile_one_query
//! ```

use std::error::Error;

use datafusion::arrow::util::pretty::pretty_format_batches;
use datafusion::execution::SessionStateBuilder;
use datafusion::prelude::{SessionConfig, SessionContext};
use qprof_datafusion::Profiler;

#[tokio::main]
async fn main() -> Result<(), Box<dyn Error>> {
    // the application's own session
    let builder = SessionStateBuilder::new()
        .with_config(SessionConfig::new().with_target_partitions(4))
        .with_default_features();

    // qprof on top of it
    let profiler = Profiler::new();
    let ctx = SessionContext::new_with_state(profiler.instrument(builder).build());

    qprof_examples::register_tables(&ctx)?;
    let frame = ctx.sql(qprof_examples::REVENUE_BY_REGION).await?;
    let run = profiler.run(frame, "revenue by region").await?;

    println!("{}", pretty_format_batches(&run.batches)?);
    println!("{}", run.profile.render_text(5));
    Ok(())
}
