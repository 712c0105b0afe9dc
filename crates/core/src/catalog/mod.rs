//! The metric catalog: each metric qprof measures itself, declared once, with its name,
//! Spark display name, kind, unit, the operators that have it, how its tasks' values
//! make the operator's value, and what it measures.
//!
//! Whatever names, labels, ships or documents one of these metrics reads it here: the
//! profile's collection in one process and on a cluster, the text profile, the advisor,
//! the event log's SQL metrics and the metrics reference ([`reference::markdown`]).
//! DataFusion's own metrics keep DataFusion's meaning; qprof's names for them, operator by
//! operator, are in [`datafusion`].

pub mod datafusion;
mod entries;
mod joins;
pub mod reference;

pub use entries::*;
pub use joins::{
    JOIN_PHASE_METRICS, JOIN_PHASE_PREFIXES, JOIN_PROJECTION_METRICS, JOIN_PROJECTIONS,
    PhaseCondition, PhaseMetricDef,
};

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::{LazyLock, PoisonError, RwLock};

use crate::metric::{MetricKind, TaskValue};
use crate::profile::{NodeMetric, TaskMetric};

/// The unit of a metric's values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    /// Nanoseconds.
    Nanoseconds,
    /// Bytes.
    Bytes,
    /// Bytes per second.
    BytesPerSecond,
    /// Rows.
    Rows,
    /// Arrow record batches.
    Batches,
    /// A number of things: polls, requests, files, blocks, filters.
    Count,
    /// Tenths, as Spark stores an average (a percentage, a mean concurrency).
    Tenths,
}

impl Unit {
    /// The Spark kind of a metric in this unit.
    pub const fn kind(self) -> MetricKind {
        match self {
            Unit::Nanoseconds => MetricKind::NsTiming,
            Unit::Bytes | Unit::BytesPerSecond => MetricKind::Size,
            Unit::Tenths => MetricKind::Average,
            Unit::Rows | Unit::Batches | Unit::Count => MetricKind::Sum,
        }
    }

    /// The unit as the reference names it.
    pub fn as_str(self) -> &'static str {
        match self {
            Unit::Nanoseconds => "ns",
            Unit::Bytes => "bytes",
            Unit::BytesPerSecond => "bytes/s",
            Unit::Rows => "rows",
            Unit::Batches => "batches",
            Unit::Count => "count",
            Unit::Tenths => "tenths",
        }
    }
}

/// How an operator's value of a metric is made from its tasks' values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Aggregation {
    /// The sum over its tasks.
    Sum,
    /// The peak of the sum: the most its tasks held at once, measured as such (never the
    /// sum of their peaks); where that is not known, the largest task's.
    PeakOfSum,
    /// The average over its tasks, each weighted by the time it was measured over.
    TimeAverage,
}

impl Aggregation {
    /// The aggregation as the reference names it.
    pub fn as_str(self) -> &'static str {
        match self {
            Aggregation::Sum => "sum",
            Aggregation::PeakOfSum => "peak of sum",
            Aggregation::TimeAverage => "time average",
        }
    }
}

/// The operators a group of metrics applies to: a section of the reference.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Family {
    /// Every operator qprof wraps.
    Every,
    /// File scans: their reads of storage.
    Scan,
    /// File sinks: their writes to storage.
    Sink,
    /// Operators that spill (sorts, aggregates, joins, repartitions).
    Spilling,
    /// Operators that produce or accept dynamic filters.
    DynamicFilters,
    /// Ballista's shuffle readers, on a cluster.
    ShuffleReader,
    /// Ballista's shuffle writers, on a cluster.
    ShuffleWriter,
    /// The function calls an operator evaluates, as the event log shows them.
    FunctionCalls,
}

impl Family {
    /// Every family, in the reference's order.
    pub const ALL: [Family; 8] = [
        Family::Every,
        Family::Scan,
        Family::Sink,
        Family::Spilling,
        Family::DynamicFilters,
        Family::ShuffleReader,
        Family::ShuffleWriter,
        Family::FunctionCalls,
    ];

    /// The family's section title.
    pub fn title(self) -> &'static str {
        match self {
            Family::Every => "Every operator",
            Family::Scan => "File scans: reads",
            Family::Sink => "File sinks: writes",
            Family::Spilling => "Operators that spill",
            Family::DynamicFilters => "Dynamic filters",
            Family::ShuffleReader => "Shuffle readers (Ballista)",
            Family::ShuffleWriter => "Shuffle writers (Ballista)",
            Family::FunctionCalls => "Function calls (event log)",
        }
    }

    /// What the family's operators are, and when they have these metrics.
    pub fn about(self) -> &'static str {
        match self {
            Family::Every => {
                "Every operator of a profiled plan has these, per task (one per output \
                 partition, plus one without a task for work the operator spawned)."
            }
            Family::Scan => {
                "A file scan reading through qprof's instrumented object store has these, \
                 counted at the store: each request, the bytes it delivered and from which \
                 tier, and the time the scan's polls waited on reads in flight."
            }
            Family::Sink => "A file sink writing through qprof's instrumented object store.",
            Family::Spilling => {
                "An operator whose tasks wrote spill files has these, counted at the \
                 files (DataFusion's own spill metrics stay beside them)."
            }
            Family::DynamicFilters => {
                "An operator that produced dynamic filters (a hash join, a TopK sort, an \
                 aggregate) or a scan that accepted some; counted once, without a task."
            }
            Family::ShuffleReader => {
                "A Ballista shuffle reader, per reader task, counted as Spark counts a \
                 shuffle read: local blocks are files in the reading executor's own work \
                 directory. A broadcast reader reads no shuffle."
            }
            Family::ShuffleWriter => {
                "A Ballista shuffle writer, besides the metrics every operator has (which \
                 the executor measures for it: Ballista drives it outside qprof's wrappers)."
            }
            Family::FunctionCalls => {
                "In the event log, each function call an operator evaluates is one SQL \
                 metric of the operator, named with the call's place among the operator's \
                 calls (`functionCpuNanos0`, `functionCpuNanos1`, ...) and shown under the \
                 call as written; the profile holds the same figures, and more, in the \
                 operator's `functions`."
            }
        }
    }
}

/// `template` with `{op}` replaced by `op`, made once for the process and shared.
pub fn display_text(template: &'static str, op: &str) -> &'static str {
    if !template.contains("{op}") {
        return template;
    }
    shared_text(SharedText::OperatorDisplay, template, op, || {
        template.replace("{op}", op)
    })
}

/// What a [`shared_text`] is made for: texts of one kind share a table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SharedText {
    /// A display name with its operator's label.
    OperatorDisplay,
    /// A join phase's metric name: the phase's prefix and the metric's suffix.
    PhaseName,
    /// A join phase's display name: the template with the phase's words.
    PhaseDisplay,
}

/// The text `make` makes of `template` (one of the tables' constants) and `arg`, made once
/// for the process and shared. For names and display names only: texts made of a template
/// and an argument from a bounded set (operator labels, join phases), kept for the life
/// of the process.
pub fn shared_text(
    kind: SharedText,
    template: &'static str,
    arg: &str,
    make: impl FnOnce() -> String,
) -> &'static str {
    /// The texts made so far, by kind and template (its address and length) and argument
    /// (hashed with a fast hasher: a profile looks up a display name per metric).
    type Fast = foldhash::fast::FixedState;
    type Texts = HashMap<(SharedText, usize, usize), HashMap<Box<str>, &'static str, Fast>, Fast>;
    static TEXTS: LazyLock<RwLock<Texts>> = LazyLock::new(RwLock::default);
    let key = (kind, template.as_ptr() as usize, template.len());
    let made = TEXTS
        .read()
        .unwrap_or_else(PoisonError::into_inner)
        .get(&key)
        .and_then(|by_arg| by_arg.get(arg).copied());
    if let Some(text) = made {
        return text;
    }
    let mut texts = TEXTS.write().unwrap_or_else(PoisonError::into_inner);
    texts
        .entry(key)
        .or_default()
        .entry(arg.into())
        .or_insert_with(|| Box::leak(make().into_boxed_str()))
}

/// One metric qprof measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MetricDef {
    /// Its name in profiles and logs, camel case: `selfCpuNanos`.
    pub name: &'static str,
    /// Its display name as Spark shows it; `{op}` stands for the operator's label
    /// (`self cpu time of hash join`).
    pub display: &'static str,
    /// Its Spark kind.
    pub kind: MetricKind,
    /// The unit of its values.
    pub unit: Unit,
    /// The operators that have it.
    pub family: Family,
    /// How the operator's value is made from its tasks'.
    pub aggregation: Aggregation,
    /// What it measures, in one sentence.
    pub description: &'static str,
}

impl MetricDef {
    /// The display name for an operator labelled `op`.
    pub fn display_for(&self, op: &str) -> String {
        self.display.replace("{op}", op)
    }

    /// The display name for an operator labelled `op`, shared: made once per display
    /// template and label for the process (there are as many as the catalog's templates
    /// times the operators' labels), so that a profile's metrics allocate no names.
    pub fn display_text(&self, op: &str) -> &'static str {
        display_text(self.display, op)
    }

    /// The metric of an operator labelled `op` with these task values, their sum as its
    /// value (a peak's or an average's value is set by the caller, which knows it). `op`
    /// is an operator type's label, one of a bounded set: its display name is shared (see
    /// [`MetricDef::display_text`]); for any other text, build the metric with
    /// [`MetricDef::display_for`].
    pub fn summed(&self, op: &str, tasks: Vec<TaskValue>) -> NodeMetric {
        NodeMetric::summed(self.name, self.display_text(op), self.kind, tasks)
    }

    /// A task's own value of the metric (the task's, not one operator's).
    pub fn of_task(&self, value: i64) -> TaskMetric {
        TaskMetric {
            name: Cow::Borrowed(self.name),
            kind: self.kind,
            value,
        }
    }
}

/// A metric an operator task counts by its entry: its place among [`TALLIED`]. Made at
/// compile time where it is counted (`const FOO: Tally = Tally::of(&catalog::FOO);`), which
/// fails to build for a metric that is not tallied.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tally(usize);

/// How many metrics are tallied: the slots of an operator task's tallies.
pub const TALLY_SLOTS: usize = TALLIED.len();

const _: () = assert!(TALLY_SLOTS <= 64, "a task's tallies are marked in one u64");

impl Tally {
    /// The tally of `def`; does not build (or panics) if `def` is not in [`TALLIED`].
    pub const fn of(def: &MetricDef) -> Tally {
        let mut slot = 0;
        while slot < TALLIED.len() {
            if same_name(TALLIED[slot].name, def.name) {
                return Tally(slot);
            }
            slot += 1;
        }
        panic!("the metric is not in catalog::TALLIED")
    }

    /// The tally of the metric named `name`, if it is tallied.
    pub fn named(name: &str) -> Option<Tally> {
        TALLIED.iter().position(|d| d.name == name).map(Tally)
    }

    /// Every tally, in [`TALLIED`]'s order.
    pub fn all() -> impl Iterator<Item = Tally> {
        (0..TALLY_SLOTS).map(Tally)
    }

    /// Its place among [`TALLIED`].
    pub const fn slot(self) -> usize {
        self.0
    }

    /// Its catalog entry.
    pub fn def(self) -> &'static MetricDef {
        TALLIED[self.0]
    }
}

/// `a == b`, at compile time.
const fn same_name(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if a[i] != b[i] {
            return false;
        }
        i += 1;
    }
    true
}

/// The metric named `name`, if the catalog has it.
pub fn find(name: &str) -> Option<&'static MetricDef> {
    ALL.iter().copied().find(|d| d.name == name)
}

/// The numbered metric (one per function call of an operator) named `name`: its
/// catalog name followed by a number.
fn find_numbered(name: &str) -> Option<&'static MetricDef> {
    let number = name.trim_start_matches(|c: char| !c.is_ascii_digit());
    let base = name.strip_suffix(number)?;
    let numbered = !number.is_empty() && number.chars().all(|c| c.is_ascii_digit());
    (numbered && base == FUNCTION_CPU_NANOS.name).then_some(&FUNCTION_CPU_NANOS)
}

/// What the metric named `name` measures, wherever the catalog declares it: qprof's own,
/// DataFusion's and Ballista's as qprof names them, a join phase's or projection's, or one
/// named by a pattern; `None` for a name the catalog does not know.
pub fn describe(name: &str) -> Option<&'static str> {
    if let Some(def) = find(name).or_else(|| find_numbered(name)) {
        return Some(def.description);
    }
    let natives = datafusion::COMMON
        .iter()
        .chain(datafusion::OPERATORS.iter().flat_map(|o| o.native));
    if let Some(def) = natives.into_iter().find(|d| d.name == name) {
        return Some(def.description);
    }
    let phases = JOIN_PHASE_PREFIXES
        .iter()
        .flat_map(|(build, probe)| [*build, *probe]);
    for prefix in phases {
        if let Some(suffix) = name.strip_prefix(prefix)
            && let Some(def) = JOIN_PHASE_METRICS.iter().find(|d| d.suffix == suffix)
        {
            return Some(def.description);
        }
    }
    for (prefix, _) in JOIN_PROJECTIONS {
        if let Some(suffix) = name.strip_prefix(prefix)
            && let Some((_, _, description)) = JOIN_PROJECTION_METRICS
                .iter()
                .find(|(s, _, _)| *s == suffix)
        {
            return Some(description);
        }
    }
    datafusion::PATTERNS
        .iter()
        .find(|(prefix, suffix, _, _)| {
            name.strip_prefix(prefix)
                .and_then(|rest| rest.strip_suffix(suffix))
                .is_some_and(|n| !n.is_empty() && n.chars().all(|c| c.is_ascii_digit()))
        })
        .map(|(_, _, _, description)| *description)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn names_are_unique_and_camel_case() {
        let mut seen = HashSet::new();
        for def in ALL {
            assert!(seen.insert(def.name), "{} declared twice", def.name);
            assert!(
                def.name
                    .chars()
                    .next()
                    .is_some_and(|c| c.is_ascii_lowercase())
                    && def.name.chars().all(|c| c.is_ascii_alphanumeric()),
                "{} is not camel case",
                def.name
            );
        }
    }

    #[test]
    fn kinds_units_and_names_agree() {
        for def in ALL {
            assert_eq!(def.kind, def.unit.kind(), "{}", def.name);
            if def.unit == Unit::Nanoseconds {
                assert!(def.name.ends_with("Nanos"), "{}", def.name);
            }
            assert!(
                def.description.ends_with('.') && !def.description.contains('\n'),
                "{}: one sentence",
                def.name
            );
            assert!(!def.display.is_empty(), "{}", def.name);
        }
    }

    #[test]
    fn tallies_are_summed_catalog_metrics_found_by_name() {
        for tally in Tally::all() {
            let def = tally.def();
            assert!(find(def.name).is_some(), "{} is not in ALL", def.name);
            assert_eq!(def.aggregation, Aggregation::Sum, "{}", def.name);
            assert_eq!(Tally::named(def.name), Some(tally));
            assert_eq!(Tally::of(def), tally);
        }
        assert_eq!(Tally::named("wallNanos"), None);
    }

    #[test]
    fn every_family_has_metrics() {
        for family in Family::ALL {
            assert!(ALL.iter().any(|d| d.family == family), "{family:?}");
        }
    }

    #[test]
    fn a_display_name_takes_the_operators_label() {
        assert_eq!(
            SELF_CPU_NANOS.display_for("hash join"),
            "self cpu time of hash join"
        );
        assert_eq!(
            OUTPUT_ROWS.display_for("hash join"),
            "number of output rows"
        );
        assert_eq!(find("selfCpuNanos"), Some(&SELF_CPU_NANOS));
        assert_eq!(find("noSuchMetric"), None);
    }

    #[test]
    fn a_display_name_is_made_once_per_label_and_shared() {
        let join = SELF_CPU_NANOS.display_text("hash join");
        assert_eq!(join, SELF_CPU_NANOS.display_for("hash join"));
        // the same text, not a copy
        assert!(std::ptr::eq(join, SELF_CPU_NANOS.display_text("hash join")));
        assert_eq!(SELF_CPU_NANOS.display_text("sort"), "self cpu time of sort");
        // a template without a label is itself
        assert!(std::ptr::eq(
            OUTPUT_ROWS.display_text("hash join"),
            OUTPUT_ROWS.display
        ));
        let metric = SELF_CPU_NANOS.summed("hash join", Vec::new());
        assert!(matches!(metric.name, Cow::Borrowed("selfCpuNanos")));
        assert!(matches!(metric.display_name, Cow::Borrowed(_)));
    }

    #[test]
    fn every_kind_of_name_is_described() {
        for name in [
            "selfCpuNanos",
            "buildTimeNanos",
            "fetchRequests",
            "hashBuildWallNanos",
            "sortMergeStreamInputRows",
            "postProjectionCpuCount",
            "expr12EvalTimeNanos",
        ] {
            assert!(describe(name).is_some(), "{name}");
        }
        for name in [
            "exprEvalTimeNanos",
            "expr1xEvalTimeNanos",
            "hashBuildNoSuch",
            "shuffle.x",
        ] {
            assert_eq!(describe(name), None, "{name}");
        }
    }
}
