//! The texts descriptions use: an error, a plan and a query's SQL, each on one line
//! (the plan indented, as DataFusion's EXPLAIN shows it).

use std::fmt;
use std::sync::Arc;

use datafusion::datasource::physical_plan::FileScanConfig;
use datafusion::datasource::source::{DataSource, DataSourceExec};
use datafusion::error::DataFusionError;
use datafusion::physical_plan::{DisplayFormatType, ExecutionPlan, displayable};
use qprof_core::profile::{OperatorText, RenderText};

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

/// `plan`'s one line as EXPLAIN prints it, trimmed. A file scan's is rendered when first
/// read (a Parquet scan's builds its pruning predicate to print it), from its data
/// source only: the text keeps the scan's files and predicate, not its operator.
pub(crate) fn operator_text(plan: &dyn ExecutionPlan) -> OperatorText {
    match plan.downcast_ref::<DataSourceExec>() {
        Some(scan) if scan.data_source().is::<FileScanConfig>() => {
            OperatorText::lazy(ScanText(Arc::clone(scan.data_source())))
        }
        _ => OperatorText::from(displayable(plan).one_line().to_string().trim()),
    }
}

/// A file scan's line, `DataSourceExec: ` and its source's, as DataFusion's
/// `DataSourceExec` prints it.
struct ScanText(Arc<dyn DataSource>);

impl RenderText for ScanText {
    fn render(&self) -> String {
        struct Line<'a>(&'a dyn DataSource);
        impl fmt::Display for Line<'_> {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("DataSourceExec: ")?;
                self.0.fmt_as(DisplayFormatType::Default, f)
            }
        }
        Line(self.0.as_ref()).to_string().trim().to_string()
    }
}
