//! The metrics of a join's two phases, build (or held side) and probe (or streamed side):
//! each named after the join and the phase (`hashBuildInputRows`, `sortMergeStreamWallNanos`),
//! its display name after the phase's words (`number of hash build input rows`).

use super::Unit;
use crate::phases::PhaseSnapshot;

/// The metric-name prefixes of the two phases of each kind of join, build (or held)
/// side first: `hashBuildInputRows`, `hashProbeWallNanos`, ...
pub const JOIN_PHASE_PREFIXES: [(&str, &str); 6] = [
    ("hashBuild", "hashProbe"),
    ("crossBuild", "crossProbe"),
    ("nestedLoopBuild", "nestedLoopProbe"),
    ("piecewiseMergeBuffered", "piecewiseMergeStream"),
    ("sortMergeBuffered", "sortMergeStream"),
    ("symmetricHashLeft", "symmetricHashRight"),
];

/// Which joins' phases have a metric.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PhaseCondition {
    /// Every join's.
    Always,
    /// A join that reads its inputs one after the other (so its time splits by phase).
    Sequential,
    /// A phase in which the join holds a side in memory.
    HoldsSide,
    /// A phase in which the join holds a side, of a join that spilled.
    HoldsSideAndSpilled,
}

impl PhaseCondition {
    /// The condition as the reference says it.
    pub fn as_str(self) -> &'static str {
        match self {
            PhaseCondition::Always => "every join",
            PhaseCondition::Sequential => "joins reading their inputs in turn",
            PhaseCondition::HoldsSide => "phases holding a side",
            PhaseCondition::HoldsSideAndSpilled => "phases holding a side, when the join spilled",
        }
    }
}

/// One metric of each phase of a join.
#[derive(Debug, Clone, Copy)]
pub struct PhaseMetricDef {
    /// Its name after the phase's prefix: `InputRows` makes `hashBuildInputRows`.
    pub suffix: &'static str,
    /// Its display name; `{phase}` stands for the phase's words (`hash build`).
    pub display: &'static str,
    /// The unit of its values (its Spark kind follows).
    pub unit: Unit,
    /// Which joins' phases have it.
    pub when: PhaseCondition,
    /// What it measures, in one sentence.
    pub description: &'static str,
    /// Its value in a phase's snapshot.
    pub read: fn(&PhaseSnapshot) -> u64,
}

/// The metrics of each phase of a join, in display order.
pub const JOIN_PHASE_METRICS: [PhaseMetricDef; 10] = [
    PhaseMetricDef {
        suffix: "InputRows",
        display: "number of {phase} input rows",
        unit: Unit::Rows,
        when: PhaseCondition::Always,
        description: "Rows the phase's input gave the join.",
        read: |s| s.input_rows,
    },
    PhaseMetricDef {
        suffix: "OutputRows",
        display: "number of {phase} output rows",
        unit: Unit::Rows,
        when: PhaseCondition::Sequential,
        description: "Build: the rows the join held when probing began; probe: the rows it produced.",
        read: |s| s.output_rows,
    },
    PhaseMetricDef {
        suffix: "WallNanos",
        display: "time of {phase}",
        unit: Unit::Nanoseconds,
        when: PhaseCondition::Sequential,
        description: "The join's own wall time in the phase, its inputs' work excluded.",
        read: |s| s.self_wall_nanos,
    },
    PhaseMetricDef {
        suffix: "CpuNanos",
        display: "cpu time of {phase}",
        unit: Unit::Nanoseconds,
        when: PhaseCondition::Sequential,
        description: "The join's own CPU time in the phase, its inputs' work excluded.",
        read: |s| s.self_cpu_nanos,
    },
    PhaseMetricDef {
        suffix: "PeakMemoryBytes",
        display: "{phase} peak memory bytes",
        unit: Unit::Bytes,
        when: PhaseCondition::HoldsSide,
        description: "The most memory the join task held reserved during the phase.",
        read: |s| s.peak_memory_bytes,
    },
    PhaseMetricDef {
        suffix: "SpilledBytes",
        display: "{phase} spilled bytes",
        unit: Unit::Bytes,
        when: PhaseCondition::HoldsSideAndSpilled,
        description: "Bytes of the spill files the join wrote during the phase.",
        read: |s| s.spill.written_bytes,
    },
    PhaseMetricDef {
        suffix: "SpilledFiles",
        display: "{phase} spilled files",
        unit: Unit::Count,
        when: PhaseCondition::HoldsSideAndSpilled,
        description: "Spill files the join created during the phase.",
        read: |s| s.spill.files,
    },
    PhaseMetricDef {
        suffix: "SpilledRows",
        display: "{phase} spilled rows",
        unit: Unit::Rows,
        when: PhaseCondition::HoldsSideAndSpilled,
        description: "Rows the join wrote to spill files during the phase.",
        read: |s| s.spill.written_rows,
    },
    PhaseMetricDef {
        suffix: "SpilledPartitions",
        display: "{phase} spilled partitions",
        unit: Unit::Count,
        when: PhaseCondition::HoldsSideAndSpilled,
        description: "Tasks of the join that spilled during the phase.",
        read: |s| u64::from(s.spill.files > 0),
    },
    PhaseMetricDef {
        suffix: "SpillWriteNanos",
        display: "time of {phase} spill writes",
        unit: Unit::Nanoseconds,
        when: PhaseCondition::HoldsSideAndSpilled,
        description: "Time of writing the phase's spill files.",
        read: |s| s.spill.write_nanos,
    },
];

/// The projections a join's metrics take in, by where they sit: below its build side,
/// below its probe side, above it; each with its name prefix and display words.
pub const JOIN_PROJECTIONS: [(&str, &str); 3] = [
    ("buildPreProjection", "build preProjection"),
    ("streamPreProjection", "stream preProjection"),
    ("postProjection", "postProjection"),
];

/// The metrics of a join's projection: suffix, display (`{projection}` stands for its
/// words), and what it measures.
pub const JOIN_PROJECTION_METRICS: [(&str, &str, &str); 2] = [
    (
        "WallNanos",
        "time of {projection}",
        "The projection's own wall time, its input's work excluded.",
    ),
    (
        "CpuCount",
        "{projection} cpu wall time count",
        "Batches the projection evaluated.",
    ),
];
