//! A query's planning in its profile: each phase, and each analyzer, optimizer and
//! physical-optimizer rule under its own name, with whether it changed the plan.

use std::sync::Arc;
use std::time::Duration;

use datafusion::common::Result;
use datafusion::common::tree_node::Transformed;
use datafusion::execution::SessionStateBuilder;
use datafusion::logical_expr::LogicalPlan;
use datafusion::optimizer::optimizer::{OptimizerConfig, OptimizerRule};
use datafusion::prelude::SessionContext;
use qprof_core::planning::PlanningPhase;
use qprof_datafusion::Profiler;

/// How long the crafted rule takes.
const PAUSE: Duration = Duration::from_millis(30);

/// An optimizer rule that changes nothing and takes [`PAUSE`] each time it runs.
#[derive(Debug)]
struct SlowRule;

impl OptimizerRule for SlowRule {
    fn name(&self) -> &str {
        "slow_rule"
    }

    fn rewrite(
        &self,
        plan: LogicalPlan,
        _config: &dyn OptimizerConfig,
    ) -> Result<Transformed<LogicalPlan>> {
        // the rule's cost, made on purpose: its time must show under its name
        std::thread::sleep(PAUSE);
        Ok(Transformed::no(plan))
    }
}

#[tokio::test]
async fn a_slow_rule_shows_its_time_under_its_name() {
    let profiler = Profiler::new();
    let builder = SessionStateBuilder::new()
        .with_default_features()
        .with_optimizer_rule(Arc::new(SlowRule));
    let ctx = SessionContext::new_with_state(profiler.instrument(builder).build());
    let run = profiler
        .run_sql(
            &ctx,
            "SELECT a + 1 AS b FROM (VALUES (1), (2), (3)) AS t(a) WHERE a > 1 + 0 ORDER BY b",
        )
        .await
        .unwrap();
    assert_eq!(run.profile.rows, 2);
    let planning = run
        .profile
        .planning
        .clone()
        .expect("a query of SQL text is timed");
    let slow = planning
        .rules
        .iter()
        .find(|r| r.name == "slow_rule")
        .expect("the crafted rule is timed");
    assert_eq!(slow.phase, PlanningPhase::Optimizer);
    assert!(!slow.changed);
    // the optimizer runs its rules in passes until the plan stops changing
    assert!(slow.calls >= 1);
    assert!(slow.wall_nanos >= slow.calls * PAUSE.as_nanos() as u64);
    // the phases: each rule phase is the sum of its rules, and planning the sum of all
    let of = |phase| -> u64 {
        planning
            .rules
            .iter()
            .filter(|r| r.phase == phase)
            .map(|r| r.wall_nanos)
            .sum()
    };
    for phase in PlanningPhase::ALL.into_iter().filter(|p| p.has_rules()) {
        assert_eq!(planning.phase_nanos(phase), of(phase), "{phase:?}");
        assert!(
            planning.rules.iter().any(|r| r.phase == phase),
            "no rule of {phase:?}"
        );
    }
    let phases: Vec<PlanningPhase> = planning.phases.iter().map(|(p, _)| *p).collect();
    assert_eq!(phases, PlanningPhase::ALL);
    assert_eq!(
        planning.wall_nanos(),
        planning.phases.iter().map(|(_, n)| n).sum::<u64>()
    );
    // `a > 1 + 0` is simplified and the filter pushed down: some optimizer rule changed
    // the plan
    assert!(
        planning
            .rules
            .iter()
            .any(|r| r.phase == PlanningPhase::Optimizer && r.changed)
    );
    // qprof's own physical rule is timed too, and changed the plan (it wraps operators)
    let ours = planning
        .rules
        .iter()
        .find(|r| r.name == "qprof_profiling")
        .expect("qprof's rule is timed");
    assert!(ours.changed);
    // the text profile says it in one line
    let text = run.profile.render_text(0);
    assert!(
        text.lines()
            .nth(1)
            .is_some_and(|l| l.starts_with("planning ")
                && l.contains(" rules, ")
                && l.ends_with("changed the plan)")),
        "{text}"
    );
}
