//! What a query's filters say about the rows it can keep, read before any log is: the
//! applications and queries it names, and the time its rows' times must fall in.

use std::collections::BTreeSet;

use datafusion::arrow::datatypes::{DataType, TimeUnit};
use datafusion::common::ScalarValue;
use datafusion::logical_expr::{BinaryExpr, Expr, Operator};

/// The applications and queries a scan's filters keep; `None` keeps every one.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Selection {
    /// The application ids named by `app_id = …` or `app_id IN (…)`.
    pub(crate) app_ids: Option<BTreeSet<String>>,
    /// The query ids named by `query_id = …` or `query_id IN (…)`.
    pub(crate) query_ids: Option<BTreeSet<i64>>,
    /// The earliest and latest time, epoch ms, a row's time column may hold (comparisons
    /// of `start_time`, `end_time`, `submission_time` or `completion_time` with a time).
    pub(crate) time: (Option<i64>, Option<i64>),
}

impl Selection {
    /// The selection every one of `filters` (a conjunction) makes, as far as it is
    /// understood; a filter it does not understand keeps every row.
    pub(crate) fn of(filters: &[Expr]) -> Selection {
        let mut selection = Selection::default();
        for filter in filters {
            match restriction(filter) {
                Some(Restriction::Apps(ids)) => intersect(&mut selection.app_ids, ids),
                Some(Restriction::Queries(ids)) => intersect(&mut selection.query_ids, ids),
                Some(Restriction::From(lo)) => {
                    selection.time.0 = Some(selection.time.0.map_or(lo, |l| l.max(lo)));
                }
                Some(Restriction::Until(hi)) => {
                    selection.time.1 = Some(selection.time.1.map_or(hi, |h| h.min(hi)));
                }
                None => {}
            }
        }
        selection
    }

    /// Whether `filter` prunes anything (DataFusion applies it again to the rows: the
    /// pruning is inexact).
    pub(crate) fn understands(filter: &Expr) -> bool {
        restriction(filter).is_some()
    }

    /// Whether application `id` may have rows.
    pub(crate) fn keeps_app(&self, id: &str) -> bool {
        self.app_ids.as_ref().is_none_or(|ids| ids.contains(id))
    }

    /// Whether an application that ran from `start` to `end` (epoch ms; unknown or still
    /// running: `None`) may have rows: every time a row holds lies in its run.
    pub(crate) fn keeps_run(&self, start: Option<i64>, end: Option<i64>) -> bool {
        let (lo, hi) = self.time;
        let ended_before = matches!((lo, end), (Some(lo), Some(end)) if end < lo);
        let started_after = matches!((hi, start), (Some(hi), Some(start)) if start > hi);
        !ended_before && !started_after
    }

    /// Whether query `id` may have rows.
    pub(crate) fn keeps_query(&self, id: i64) -> bool {
        self.query_ids.as_ref().is_none_or(|ids| ids.contains(&id))
    }

    /// Whether a row of query `id` (none: of no query) may be kept: a row of no query
    /// fails every filter on the query id.
    pub(crate) fn keeps_optional_query(&self, id: Option<i64>) -> bool {
        match id {
            Some(id) => self.keeps_query(id),
            None => self.query_ids.is_none(),
        }
    }
}

fn intersect<T: Ord>(kept: &mut Option<BTreeSet<T>>, with: BTreeSet<T>) {
    *kept = Some(match kept.take() {
        Some(kept) => kept.into_iter().filter(|v| with.contains(v)).collect(),
        None => with,
    });
}

enum Restriction {
    Apps(BTreeSet<String>),
    Queries(BTreeSet<i64>),
    /// A row's time is at this epoch ms or later.
    From(i64),
    /// A row's time is at this epoch ms or earlier.
    Until(i64),
}

/// The columns that hold a row's time, within its application's run.
const TIME_COLUMNS: &[&str] = &[
    "start_time",
    "end_time",
    "submission_time",
    "completion_time",
];

/// What one filter restricts: the values of `app_id` or `query_id` it allows, or the
/// times a row's time column may hold.
fn restriction(filter: &Expr) -> Option<Restriction> {
    if let Some(bound) = time_bound(filter) {
        return Some(bound);
    }
    let (column, values): (&str, Vec<&ScalarValue>) = match filter {
        Expr::BinaryExpr(BinaryExpr {
            left,
            op: Operator::Eq,
            right,
        }) => match (left.as_ref(), right.as_ref()) {
            (Expr::Column(c), Expr::Literal(v, _)) | (Expr::Literal(v, _), Expr::Column(c)) => {
                (c.name.as_str(), vec![v])
            }
            _ => return None,
        },
        Expr::InList(list) if !list.negated => {
            let Expr::Column(c) = list.expr.as_ref() else {
                return None;
            };
            let values = list
                .list
                .iter()
                .map(|e| match e {
                    Expr::Literal(v, _) => Some(v),
                    _ => None,
                })
                .collect::<Option<Vec<_>>>()?;
            (c.name.as_str(), values)
        }
        _ => return None,
    };
    match column {
        "app_id" => values
            .into_iter()
            .map(|v| match v {
                ScalarValue::Utf8(Some(s))
                | ScalarValue::LargeUtf8(Some(s))
                | ScalarValue::Utf8View(Some(s)) => Some(s.clone()),
                _ => None,
            })
            .collect::<Option<BTreeSet<_>>>()
            .map(Restriction::Apps),
        "query_id" => values
            .into_iter()
            .map(|v| match v {
                ScalarValue::Int64(Some(n)) => Some(*n),
                ScalarValue::Int32(Some(n)) => Some(i64::from(*n)),
                _ => None,
            })
            .collect::<Option<BTreeSet<_>>>()
            .map(Restriction::Queries),
        _ => None,
    }
}

/// `time_column <op> time` (either way round, through casts of the column), as a bound.
fn time_bound(filter: &Expr) -> Option<Restriction> {
    let Expr::BinaryExpr(BinaryExpr { left, op, right }) = filter else {
        return None;
    };
    let (column, op, value) = match (uncast(left), uncast(right)) {
        (Expr::Column(c), Expr::Literal(v, _)) => (c, *op, v),
        (Expr::Literal(v, _), Expr::Column(c)) => (c, op.swap()?, v),
        _ => return None,
    };
    if !TIME_COLUMNS.contains(&column.name.as_str()) {
        return None;
    }
    let millis = epoch_millis(value)?;
    match op {
        Operator::GtEq | Operator::Gt => Some(Restriction::From(millis)),
        Operator::LtEq | Operator::Lt => Some(Restriction::Until(millis)),
        _ => None,
    }
}

/// `expr` without the casts around it that keep a millisecond time exact (to a timestamp
/// of milliseconds or finer); a cast that may round (to a date, to seconds) is kept, so
/// the comparison through it prunes nothing.
fn uncast(mut expr: &Expr) -> &Expr {
    loop {
        let (inner, to) = match expr {
            Expr::Cast(c) => (&c.expr, c.field.data_type()),
            Expr::TryCast(c) => (&c.expr, c.field.data_type()),
            other => return other,
        };
        let exact = matches!(
            to,
            DataType::Timestamp(
                TimeUnit::Millisecond | TimeUnit::Microsecond | TimeUnit::Nanosecond,
                _
            )
        );
        if !exact {
            return expr;
        }
        expr = inner;
    }
}

/// A time literal as epoch milliseconds (rounded down).
fn epoch_millis(value: &ScalarValue) -> Option<i64> {
    match value {
        ScalarValue::TimestampSecond(Some(v), _) => v.checked_mul(1000),
        ScalarValue::TimestampMillisecond(Some(v), _) => Some(*v),
        ScalarValue::TimestampMicrosecond(Some(v), _) => Some(v.div_euclid(1000)),
        ScalarValue::TimestampNanosecond(Some(v), _) => Some(v.div_euclid(1_000_000)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use datafusion::prelude::{cast, col, lit};

    use super::*;

    #[test]
    fn equalities_and_lists_name_applications_and_queries() {
        let s = Selection::of(&[
            col("app_id").eq(lit("a")),
            col("query_id").in_list(vec![lit(3i64), lit(5i64)], false),
        ]);
        assert!(s.keeps_app("a") && !s.keeps_app("b"));
        assert!(s.keeps_query(3) && s.keeps_query(5) && !s.keeps_query(4));
    }

    #[test]
    fn filters_together_keep_what_all_allow() {
        let s = Selection::of(&[
            col("app_id").in_list(vec![lit("a"), lit("b")], false),
            lit("b").eq(col("app_id")),
        ]);
        assert_eq!(s.app_ids, Some(BTreeSet::from(["b".to_string()])));
    }

    #[test]
    fn time_comparisons_keep_the_runs_that_overlap() {
        let at = |ms: i64| {
            lit(ScalarValue::TimestampMillisecond(
                Some(ms),
                Some("UTC".into()),
            ))
        };
        let s = Selection::of(&[
            col("submission_time").gt_eq(at(1_000)),
            at(2_000).gt_eq(col("start_time")),
        ]);
        assert_eq!(s.time, (Some(1_000), Some(2_000)));
        assert!(s.keeps_run(Some(500), Some(1_000)));
        assert!(!s.keeps_run(Some(500), Some(999)));
        assert!(!s.keeps_run(Some(2_001), None));
        assert!(s.keeps_run(Some(1_500), None));
        assert!(s.keeps_run(None, None));
        // through a cast of the column, a nanosecond literal
        let ns = lit(ScalarValue::TimestampNanosecond(Some(3_000_000_000), None));
        let cast = cast(
            col("end_time"),
            DataType::Timestamp(TimeUnit::Nanosecond, None),
        );
        assert_eq!(Selection::of(&[cast.lt(ns)]).time, (None, Some(3_000)));
    }

    #[test]
    fn comparisons_through_a_rounding_cast_prune_nothing() {
        let at = lit(ScalarValue::TimestampNanosecond(Some(3_000_000_000), None));
        let ns = DataType::Timestamp(TimeUnit::Nanosecond, None);
        let seconds = DataType::Timestamp(TimeUnit::Second, None);
        for rounded in [
            cast(cast(col("submission_time"), DataType::Date32), ns.clone()),
            cast(col("submission_time"), seconds),
        ] {
            let filter = rounded.lt_eq(at.clone());
            assert!(!Selection::understands(&filter), "{filter}");
        }
    }

    #[test]
    fn other_filters_keep_everything() {
        for filter in [
            col("app_id").not_eq(lit("a")),
            col("app_id").in_list(vec![lit("a")], true),
            col("name").eq(lit("x")),
            col("app_id").eq(lit("a")).or(col("app_id").eq(lit("b"))),
            col("last_updated").gt(lit(ScalarValue::TimestampMillisecond(Some(1), None))),
            col("start_time").not_eq(lit(ScalarValue::TimestampMillisecond(Some(1), None))),
        ] {
            assert!(!Selection::understands(&filter), "{filter}");
            assert_eq!(Selection::of(&[filter]), Selection::default());
        }
    }
}
