//! Looking DataFusion's metrics up in the catalog's tables (`qprof_core::catalog::datafusion`):
//! an operator's label in display names, the definitions of one of its metrics, and the
//! name a metric no table knows gets.

use std::borrow::Cow;

use qprof_core::metric::MetricKind;

pub(crate) use qprof_core::catalog::datafusion::{
    OperatorDef, ReadAs, SUPERSEDED, native_defs_in, operator_def,
};

/// The label of an operator in display names: from its table, or derived from its type
/// name (`StreamingTableExec` → `streaming table`).
pub fn operator_label(operator: &str) -> Cow<'static, str> {
    if let Some(d) = operator_def(operator) {
        return Cow::Borrowed(d.label);
    }
    let base = operator.strip_suffix("Exec").unwrap_or(operator);
    let mut label = String::new();
    for (i, ch) in base.chars().enumerate() {
        if ch.is_uppercase() && i > 0 {
            label.push(' ');
        }
        label.extend(ch.to_lowercase());
    }
    Cow::Owned(label)
}

/// qprof's name for a DataFusion metric no table knows: camelCase, with a unit suffix
/// (`expr_0_eval_time` → `expr0EvalTimeNanos`).
pub(crate) fn fallback_name(native: &str, kind: MetricKind) -> String {
    let mut name = String::new();
    let mut upper = false;
    for ch in native.chars() {
        if ch == '_' || ch == '-' || ch == ' ' {
            upper = true;
        } else if upper {
            name.extend(ch.to_uppercase());
            upper = false;
        } else {
            name.push(ch);
        }
    }
    let suffix = match kind {
        MetricKind::NsTiming if !name.ends_with("Nanos") => "Nanos",
        MetricKind::Size if !name.ends_with("Bytes") => "Bytes",
        MetricKind::Average => "Percent",
        _ => "",
    };
    name + suffix
}

#[cfg(test)]
mod tests {
    use super::*;
    use qprof_core::catalog::datafusion::{COMMON, OPERATORS, native_defs};
    use std::collections::HashSet;

    #[test]
    fn names_are_unique_within_each_operator() {
        for op in OPERATORS {
            let mut seen = HashSet::new();
            for m in op.native.iter().chain(COMMON) {
                if op.native.iter().any(|s| s.native == m.native) && COMMON.contains(m) {
                    continue; // a specific definition overrides the common one
                }
                assert!(
                    seen.insert(m.name),
                    "{}: duplicate name {}",
                    op.operator,
                    m.name
                );
                assert!(
                    !qprof_core::profile::names::BASE.contains(&m.name),
                    "{}: {} collides with a base metric",
                    op.operator,
                    m.name
                );
            }
        }
    }

    #[test]
    fn labels_and_fallbacks() {
        assert_eq!(operator_label("HashJoinExec"), "hash join");
        assert_eq!(operator_label("StreamingTableExec"), "streaming table");
        assert_eq!(
            fallback_name("expr_0_eval_time", MetricKind::NsTiming),
            "expr0EvalTimeNanos"
        );
        assert_eq!(
            fallback_name("predicate_cache_records", MetricKind::Sum),
            "predicateCacheRecords"
        );
        let build = native_defs("HashJoinExec", "build_time");
        assert_eq!(build[0].name, "buildTimeNanos");
        assert_eq!(
            native_defs("SortExec", "spill_count")[0].name,
            "spilledFiles"
        );
        assert!(native_defs("SortExec", "no_such_metric").is_empty());
    }
}
