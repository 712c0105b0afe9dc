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

/// One rule's part of a query's planning: every call of it, over all passes and plan
/// nodes it was applied to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuleTiming {
    /// The phase the rule belongs to.
    pub phase: PlanningPhase,
    /// The rule's name, as DataFusion names it.
    pub name: String,
    /// Wall time inside its calls (ns).
    pub wall_nanos: u64,
    /// How many times it was called (an optimizer rule is called once per plan node it
    /// visits, in each pass).
    pub calls: u64,
    /// Whether any of its calls changed the plan.
    pub changed: bool,
}

/// A query's planning.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PlanningProfile {
    /// Wall time of each phase planning went through (ns), in order: a rule phase's is
    /// the sum of its rules'.
    pub phases: Vec<(PlanningPhase, u64)>,
    /// Each rule that ran, in the order it first ran.
    pub rules: Vec<RuleTiming>,
}

impl PlanningProfile {
    /// Wall time of all planning (ns).
    pub fn wall_nanos(&self) -> u64 {
        self.phases.iter().map(|(_, n)| n).sum()
    }

    /// Wall time of `phase` (ns); 0 if planning did not go through it.
    pub fn phase_nanos(&self, phase: PlanningPhase) -> u64 {
        self.phases
            .iter()
            .filter(|(p, _)| *p == phase)
            .map(|(_, n)| n)
            .sum()
    }

    /// `planning 4.2 ms (optimizer 3.1 ms: 28 rules, 6 changed the plan)`.
    pub fn summary_line(&self) -> String {
        let rules: Vec<&RuleTiming> = self
            .rules
            .iter()
            .filter(|r| r.phase == PlanningPhase::Optimizer)
            .collect();
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
            wall_nanos,
            calls: 1,
            changed,
        }
    }

    #[test]
    fn the_summary_names_the_optimizers_rules() {
        let profile = PlanningProfile {
            phases: vec![
                (PlanningPhase::Parse, 200_000),
                (PlanningPhase::Optimizer, 3_000_000),
                (PlanningPhase::PhysicalPlan, 1_000_000),
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
