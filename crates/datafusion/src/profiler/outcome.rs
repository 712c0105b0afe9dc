//! What a profiled query leaves: its batches and profile, or its failure with the profile
//! so far; and the one-line texts of errors, plans and SQL that descriptions use.

use std::sync::Arc;

use datafusion::arrow::array::RecordBatch;
use datafusion::error::DataFusionError;
use datafusion::physical_plan::ExecutionPlan;
use qprof_core::profile::QueryProfile;

/// Errors of running a profiled query.
#[derive(Debug, thiserror::Error)]
pub enum ProfileError {
    /// Planning or execution failed in DataFusion. Shown as the root cause on one line;
    /// DataFusion's wrapping layers (which repeat it) are not a `source`.
    #[error("{}", error_line(.0))]
    DataFusion(DataFusionError),
    /// A stream's batch failed; the error itself went to the stream's reader.
    #[error("{0}")]
    Stream(String),
}

impl From<DataFusionError> for ProfileError {
    fn from(err: DataFusionError) -> Self {
        ProfileError::DataFusion(err)
    }
}

/// A DataFusion error as one line: its root cause (DataFusion nests the same cause in
/// layers that each repeat it), a parser error by its own message, no backtrace.
pub fn error_line(err: &DataFusionError) -> String {
    use datafusion::sql::sqlparser::parser::ParserError;
    let root = err.find_root();
    let text = match root {
        DataFusionError::SQL(parse, _) => match parse.as_ref() {
            ParserError::ParserError(m) | ParserError::TokenizerError(m) => {
                format!("SQL error: {m}")
            }
            other => format!("SQL error: {other}"),
        },
        other => other.strip_backtrace(),
    };
    let line = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join(" ");
    // DataFusion's wrapper and the error it wraps may both name the kind: say it once
    match line.split_once(": ") {
        Some((kind, rest)) if rest.starts_with(kind) && rest[kind.len()..].starts_with(": ") => {
            rest.to_string()
        }
        _ => line,
    }
}

/// A query's result and its profile.
#[derive(Debug)]
pub struct ProfiledQuery {
    /// The result batches.
    pub batches: Vec<RecordBatch>,
    /// The executed (wrapped) physical plan.
    pub plan: Arc<dyn ExecutionPlan>,
    /// The profile.
    pub profile: QueryProfile,
}

/// A query that failed, with what is known about it. Shown as its error.
#[derive(Debug, thiserror::Error)]
#[error("{error}")]
pub struct QueryFailure {
    /// Why it failed.
    pub error: ProfileError,
    /// The profile up to the failure, if the query was planned.
    pub profile: Option<Box<QueryProfile>>,
    /// When the query started, epoch ms.
    pub start_epoch_millis: u64,
}

/// The executed plan as indented text (the same text as DataFusion's EXPLAIN shows).
pub fn plan_text(plan: &Arc<dyn ExecutionPlan>) -> String {
    datafusion::physical_plan::displayable(plan.as_ref())
        .indent(true)
        .to_string()
}

/// One line of a query's text for descriptions: its first line that is not a comment,
/// shortened to 80 characters.
pub fn describe_sql(sql: &str) -> String {
    let line = sql
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty() && !l.starts_with("--"))
        .unwrap_or("");
    let mut text: String = line.chars().take(80).collect();
    if line.chars().count() > 80 {
        text.push('…');
    }
    text
}
