//! A query's planning: how long parsing, logical planning, each analyzer, optimizer and
//! physical-optimizer rule, and physical planning took, and which rules changed the plan.

use crate::format;

/// A phase of planning, in the order a query goes through them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum PlanningPhase {
    /// SQL text to a statement.
    Parse,
    /// The statement to a logical plan (resolving tables and functions).
    LogicalPlan,
    /// The analyzer's rules (type coercion, subquery checks, ...).
    Analyzer,
    /// The logical optimizer's rules.
    Optimizer,
    /// The logical plan to a physical one, the physical optimizer's rules aside.
    PhysicalPlan,
    /// The physical optimizer's rules.
    PhysicalOptimizer,
}

impl PlanningPhase {
    /// Every phase, in order.
    pub const ALL: [PlanningPhase; 6] = [
        PlanningPhase::Parse,
        PlanningPhase::LogicalPlan,
        PlanningPhase::Analyzer,
        PlanningPhase::Optimizer,
        PlanningPhase::PhysicalPlan,
        PlanningPhase::PhysicalOptimizer,
    ];

    /// The phase's name in profiles: `parse`, `logicalPlan`, ...
    pub fn as_str(self) -> &'static str {
        match self {
            PlanningPhase::Parse => "parse",
            PlanningPhase::LogicalPlan => "logicalPlan",
            PlanningPhase::Analyzer => "analyzer",
            PlanningPhase::Optimizer => "optimizer",
            PlanningPhase::PhysicalPlan => "physicalPlan",
            PlanningPhase::PhysicalOptimizer => "physicalOptimizer",
        }
    }

    /// Whether the phase is made of rules.
    pub fn has_rules(self) -> bool {
        matches!(
            self,
            PlanningPhase::Analyzer | PlanningPhase::Optimizer | PlanningPhase::PhysicalOptimizer
        )
    }
}

/// One phase of a query's planning.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PhaseTiming {
    /// The phase.
    pub phase: PlanningPhase,
    /// When it began, in ns after planning began.
    pub start_nanos: u64,
    /// When it ended, in ns after planning began.
    pub end_nanos: u64,
    /// Its own wall time (ns): a rule phase's is the sum of its rules'; physical
    /// planning's excludes the physical optimizer's rules that run inside it.
    pub wall_nanos: u64,
    /// Its own CPU time (ns), on whichever threads planning ran.
    pub cpu_nanos: u64,
}

/// One rule's part of a query's planning: every call of it, over all passes and plan
/// nodes it was applied to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuleTiming {
    /// The phase the rule belongs to.
    pub phase: PlanningPhase,
    /// The rule's name, as DataFusion names it.
    pub name: String,
    /// When its first call began, in ns after planning began.
    pub first_start_nanos: u64,
    /// When its last call ended, in ns after planning began.
    pub last_end_nanos: u64,
    /// Wall time inside its calls (ns).
    pub wall_nanos: u64,
    /// How many times it was called (an optimizer rule is called once per plan node it
    /// visits, in each pass).
    pub calls: u64,
    /// Whether any of its calls changed the plan.
    pub changed: bool,
    /// The plans before and after its first calls that changed the plan, when the
    /// session asked for them (`qprof.planning.record_plans`); at most
    /// [`MAX_RECORDED_CHANGES`].
    pub plans: Vec<PlanChange>,
}

/// The most plan changes kept per rule.
pub const MAX_RECORDED_CHANGES: usize = 8;

/// What one call of a rule did to the plan (an optimizer rule applied node by node sees the
/// sub-plan at its node).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlanChange {
    /// The plan it was given, as EXPLAIN indents it.
    pub before: String,
    /// The plan it returned.
    pub after: String,
}

/// A query's planning.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PlanningProfile {
    /// When planning began (µs since the Unix epoch).
    pub start_epoch_micros: u64,
    /// The phases planning went through, in order.
    pub phases: Vec<PhaseTiming>,
    /// Each rule that ran, in the order it first ran.
    pub rules: Vec<RuleTiming>,
}

impl PlanningProfile {
    /// Wall time of all planning (ns).
    pub fn wall_nanos(&self) -> u64 {
        self.phases.iter().map(|p| p.wall_nanos).sum()
    }

    /// CPU time of all planning (ns).
    pub fn cpu_nanos(&self) -> u64 {
        self.phases.iter().map(|p| p.cpu_nanos).sum()
    }

    /// Own wall time of `phase` (ns); 0 if planning did not go through it.
    pub fn phase_nanos(&self, phase: PlanningPhase) -> u64 {
        self.phases
            .iter()
            .filter(|p| p.phase == phase)
            .map(|p| p.wall_nanos)
            .sum()
    }

    /// The rules of `phase`, in the order they first ran.
    pub fn rules_of(&self, phase: PlanningPhase) -> impl Iterator<Item = &RuleTiming> {
        self.rules.iter().filter(move |r| r.phase == phase)
    }

    /// `planning 4.2 ms (optimizer 3.1 ms: 28 rules, 6 changed the plan)`.
    pub fn summary_line(&self) -> String {
        let rules: Vec<&RuleTiming> = self.rules_of(PlanningPhase::Optimizer).collect();
        let changed = rules.iter().filter(|r| r.changed).count();
        format!(
            "planning {} (optimizer {}: {} rules, {changed} changed the plan)",
            format::human_nanos(self.wall_nanos()),
            format::human_nanos(self.phase_nanos(PlanningPhase::Optimizer)),
            rules.len(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(phase: PlanningPhase, name: &str, wall_nanos: u64, changed: bool) -> RuleTiming {
        RuleTiming {
            phase,
            name: name.into(),
            first_start_nanos: 0,
            last_end_nanos: wall_nanos,
            wall_nanos,
            calls: 1,
            changed,
            plans: Vec::new(),
        }
    }

    #[test]
    fn the_summary_names_the_optimizers_rules() {
        let phase = |phase, start_nanos, wall_nanos| PhaseTiming {
            phase,
            start_nanos,
            end_nanos: start_nanos + wall_nanos,
            wall_nanos,
            cpu_nanos: wall_nanos / 2,
        };
        let profile = PlanningProfile {
            start_epoch_micros: 1,
            phases: vec![
                phase(PlanningPhase::Parse, 0, 200_000),
                phase(PlanningPhase::Optimizer, 200_000, 3_000_000),
                phase(PlanningPhase::PhysicalPlan, 3_200_000, 1_000_000),
            ],
            rules: vec![
                rule(PlanningPhase::Analyzer, "type_coercion", 10, true),
                rule(
                    PlanningPhase::Optimizer,
                    "push_down_filter",
                    2_000_000,
                    true,
                ),
                rule(
                    PlanningPhase::Optimizer,
                    "eliminate_limit",
                    1_000_000,
                    false,
                ),
            ],
        };
        assert_eq!(profile.wall_nanos(), 4_200_000);
        assert_eq!(profile.cpu_nanos(), 2_100_000);
        assert_eq!(profile.phase_nanos(PlanningPhase::Analyzer), 0);
        assert_eq!(
            profile.summary_line(),
            format!(
                "planning {} (optimizer {}: 2 rules, 1 changed the plan)",
                format::human_nanos(4_200_000),
                format::human_nanos(3_000_000)
            )
        );
    }
}
