//! The metrics reference, generated from the catalog: a Markdown page with a section per
//! family of operators and a row per metric.

use std::fmt::Write as _;

use super::{ALL, Family};

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
         DataFusion's own metrics of each operator (`elapsed_compute`, \
         `build_input_rows`, ...) are reported beside these under qprof's names for \
         them; join phases have their own metrics, named after the join and the phase \
         (`hashBuildWallNanos`, `hashProbeInputRows`, ...).\n",
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
    out
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
