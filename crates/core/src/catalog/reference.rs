//! The metrics reference, generated from the catalog: a Markdown page with a section per
//! family of operators and a row per metric.

use std::fmt::Write as _;

use super::datafusion::{COMMON, NativeMetricDef, OPERATORS, PATTERNS};
use super::{ALL, Family, JOIN_PHASE_METRICS, JOIN_PROJECTION_METRICS, JOIN_PROJECTIONS};
use crate::profile::names::JOIN_PHASE_PREFIXES;

/// Where the generated page lives, relative to the workspace's root.
pub const PAGE: &str = "docs/src/reference/metrics.md";

/// The reference page: each family's metrics with their display name, kind, unit,
/// aggregation and meaning.
pub fn markdown() -> String {
    let mut out = String::from(
        "<!-- Generated from the metric catalog (crates/core/src/catalog); do not edit. \
         Regenerate with `QPROF_BLESS=1 cargo test -p qprof-core catalog`. -->\n\n\
         # Metrics reference\n\n\
         The metrics qprof measures itself, by the operators that have them. Each has a \
         name (in JSON profiles, the REST API and `--profile-out`), a display name (what \
         Spark's pages show; `{op}` is the operator's label, such as `hash join`), a \
         Spark kind (how Spark renders and sums it: `sum`, `size`, `nsTiming`, \
         `average`), a unit, and an aggregation: how the operator's value is made from \
         its tasks' values.\n\n\
         DataFusion's own metrics of each operator are reported beside these under \
         qprof's names for them: see [DataFusion's metrics](#datafusions-metrics-by-operator) \
         below. Join phases have their own metrics, named after the join and the phase \
         (`hashBuildWallNanos`, `hashProbeInputRows`, ...): see [join phases](#join-phases).\n",
    );
    for family in Family::ALL {
        let _ = write!(
            out,
            "\n## {}\n\n{}\n\n| name | display name | kind | unit | aggregation | what it measures |\n|---|---|---|---|---|---|\n",
            family.title(),
            family.about()
        );
        for def in ALL.iter().filter(|d| d.family == family) {
            let _ = writeln!(
                out,
                "| `{}` | {} | {} | {} | {} | {} |",
                def.name,
                def.display,
                def.kind,
                def.unit.as_str(),
                def.aggregation.as_str(),
                def.description
            );
        }
    }
    join_phase_section(&mut out);
    datafusion_sections(&mut out);
    out
}

/// The section of the joins' phase metrics: their suffixes, and the phases' prefixes.
fn join_phase_section(out: &mut String) {
    let prefixes: Vec<String> = JOIN_PHASE_PREFIXES
        .iter()
        .map(|(build, probe)| format!("`{build}`/`{probe}`"))
        .collect();
    let _ = write!(
        out,
        "\n## Join phases\n\nEvery join task has two phases: it starts building (collecting the \
         side it holds) and starts probing the first time it reads its other input. Each \
         metric below is named after the phase's prefix, build (or held side) first: {}; \
         `{{phase}}` in a display name is the prefix's words (`hash build`).\n\n\
         | name | display name | kind | unit | who has it | what it measures |\n|---|---|---|---|---|---|\n",
        prefixes.join(", ")
    );
    for def in &JOIN_PHASE_METRICS {
        let _ = writeln!(
            out,
            "| `{{prefix}}{}` | {} | {} | {} | {} | {} |",
            def.suffix,
            def.display,
            def.unit.kind(),
            def.unit.as_str(),
            def.when.as_str(),
            def.description
        );
    }
    let projections: Vec<String> = JOIN_PROJECTIONS
        .iter()
        .map(|(prefix, _)| format!("`{prefix}`"))
        .collect();
    let _ = write!(
        out,
        "\nA `ProjectionExec` right below a join's side or right above it is also reported on \
         the join, under the prefix of where it sits ({}):\n\n\
         | name | display name | what it measures |\n|---|---|---|\n",
        projections.join(", ")
    );
    for (suffix, display, description) in JOIN_PROJECTION_METRICS {
        let _ = writeln!(out, "| `{{prefix}}{suffix}` | {display} | {description} |");
    }
}

/// The sections of DataFusion's own metrics: those many operators share, then each
/// operator's (operators sharing one table in one section).
fn datafusion_sections(out: &mut String) {
    out.push_str(
        "\n## DataFusion's metrics, by operator\n\n\
         Ballista's operators are here too (its shuffle readers and writers).\n\n\
         DataFusion's metrics as qprof names them: the number read from DataFusion's \
         metric (its value, or the pruned or matched count of a pruning metric, or a \
         ratio), summed over tasks (a ratio as the ratio of the sums). A metric no table \
         knows keeps DataFusion's name in camel case with a unit suffix \
         (`expr_0_eval_time` → `expr0EvalTimeNanos`).\n",
    );
    native_table(out, "Many operators", COMMON);
    let _ = write!(
        out,
        "\nSome are one per expression, numbered from 0:\n\n\
         | name | operator | what it measures |\n|---|---|---|\n"
    );
    for (prefix, suffix, operator, description) in PATTERNS {
        let _ = writeln!(
            out,
            "| `{prefix}{{n}}{suffix}` | `{operator}` | {description} |"
        );
    }
    let mut done: Vec<*const NativeMetricDef> = Vec::new();
    for op in OPERATORS.iter().filter(|o| !o.native.is_empty()) {
        if done.contains(&op.native.as_ptr()) {
            continue;
        }
        done.push(op.native.as_ptr());
        let sharing: Vec<String> = OPERATORS
            .iter()
            .filter(|o| std::ptr::eq(o.native.as_ptr(), op.native.as_ptr()))
            .map(|o| format!("{} (`{}`)", o.label, o.operator))
            .collect();
        native_table(out, &sharing.join(", "), op.native);
    }
}

fn native_table(out: &mut String, title: &str, defs: &[NativeMetricDef]) {
    let _ = write!(
        out,
        "\n### {title}\n\n| name | display name | kind | DataFusion's metric | what it measures |\n|---|---|---|---|---|\n"
    );
    for def in defs {
        let _ = writeln!(
            out,
            "| `{}` | {} | {} | `{}` ({}) | {} |",
            def.name,
            def.display,
            def.kind,
            def.native,
            def.read_as.as_str(),
            def.description
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    /// The checked-in page is what the catalog generates: a change to the catalog without
    /// its page fails here (`QPROF_BLESS=1` writes the page instead).
    #[test]
    fn the_checked_in_reference_is_the_catalogs() {
        let page = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../..")
            .join(PAGE);
        let generated = markdown();
        if std::env::var_os("QPROF_BLESS").is_some() {
            std::fs::create_dir_all(page.parent().unwrap()).unwrap();
            std::fs::write(&page, &generated).unwrap();
        }
        let checked_in = std::fs::read_to_string(&page).unwrap_or_default();
        assert!(
            checked_in == generated,
            "{PAGE} is not the catalog's: regenerate it with \
             `QPROF_BLESS=1 cargo test -p qprof-core catalog`"
        );
    }

    #[test]
    fn every_datafusion_metric_has_a_row() {
        let page = markdown();
        for op in OPERATORS {
            for def in op.native {
                assert!(
                    page.contains(&format!("| `{}` |", def.name)),
                    "{}",
                    def.name
                );
            }
            if !op.native.is_empty() {
                assert!(
                    page.contains(&format!("(`{}`)", op.operator)),
                    "{}",
                    op.operator
                );
            }
        }
        for def in COMMON {
            assert!(
                page.contains(&format!("| `{}` |", def.name)),
                "{}",
                def.name
            );
        }
    }

    #[test]
    fn every_metric_has_a_row_in_its_familys_section() {
        let page = markdown();
        for def in ALL {
            let section = page
                .split("\n## ")
                .find(|s| s.starts_with(def.family.title()))
                .unwrap();
            assert!(
                section.contains(&format!("| `{}` |", def.name)),
                "{}",
                def.name
            );
        }
    }
}
