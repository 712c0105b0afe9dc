//! A query's planning in its profile: each phase, and each analyzer, optimizer and
//! physical-optimizer rule under its own name, with whether it changed the plan; a slow
//! rule is the query's `slow-planning` finding, ranked first (the planted problem).

use std::sync::Arc;
use std::time::Duration;

use datafusion::common::Result;
use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::Transformed;
use datafusion::execution::SessionStateBuilder;
use datafusion::logical_expr::{Filter, LogicalPlan, lit};
use datafusion::optimizer::analyzer::AnalyzerRule;
use datafusion::optimizer::optimizer::{OptimizerConfig, OptimizerRule};
use datafusion::prelude::{SessionConfig, SessionContext};
use qprof_core::advice::{CostKind, Severity, advise, render_findings};
use qprof_core::planning::PlanningPhase;
use qprof_datafusion::Profiler;

/// How long the crafted rule takes.
const PAUSE: Duration = Duration::from_millis(30);

/// An optimizer rule that changes nothing and takes its pause each time it runs.
#[derive(Debug)]
struct SlowRule(Duration);

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
        std::thread::sleep(self.0);
        Ok(Transformed::no(plan))
    }
}

#[tokio::test]
async fn a_slow_rule_shows_its_time_under_its_name() {
    let profiler = Profiler::new();
    let builder = SessionStateBuilder::new()
        .with_default_features()
        .with_optimizer_rule(Arc::new(SlowRule(PAUSE)));
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
    let phases: Vec<PlanningPhase> = planning.phases.iter().map(|p| p.phase).collect();
    assert_eq!(phases, PlanningPhase::ALL);
    // the phases follow each other, each rule within its phase, and the wall time of a
    // phase's rules fits in the phase
    let end = planning.phases.iter().map(|p| p.end_nanos).max().unwrap();
    assert!(planning.wall_nanos() <= end);
    for pair in planning.phases.windows(2) {
        let (a, b) = (&pair[0], &pair[1]);
        assert!(a.start_nanos <= a.end_nanos, "{a:?}");
        if b.phase == PlanningPhase::PhysicalOptimizer {
            // the physical optimizer runs inside physical planning
            assert!(a.start_nanos <= b.start_nanos && b.end_nanos <= a.end_nanos);
        } else {
            assert!(a.end_nanos <= b.start_nanos, "{a:?} then {b:?}");
        }
    }
    for rule in &planning.rules {
        let phase = planning
            .phases
            .iter()
            .find(|p| p.phase == rule.phase)
            .unwrap();
        assert!(
            phase.start_nanos <= rule.first_start_nanos
                && rule.first_start_nanos <= rule.last_end_nanos
                && rule.last_end_nanos <= phase.end_nanos
                && rule.wall_nanos <= rule.last_end_nanos - rule.first_start_nanos,
            "{rule:?} in {phase:?}"
        );
    }
    // the slow rule's own span holds its sleep
    assert!(slow.last_end_nanos - slow.first_start_nanos >= PAUSE.as_nanos() as u64);
    // CPU was spent planning, and the phases share it
    assert!(planning.cpu_nanos() > 0);
    assert!(planning.phases.iter().filter(|p| p.cpu_nanos > 0).count() >= 2);
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

#[tokio::test]
async fn the_plans_around_each_change_are_kept_only_when_asked() {
    let profiler = Profiler::new();
    let ctx = SessionContext::new_with_state(
        profiler
            .instrument(SessionStateBuilder::new().with_default_features())
            .build(),
    );
    let sql = "SELECT a + 1 AS b FROM (VALUES (1), (2), (3)) AS t(a) WHERE a > 1 + 0";
    let plain = profiler.run_sql(&ctx, sql).await.unwrap();
    let planning = plain.profile.planning.unwrap();
    assert!(planning.rules.iter().all(|r| r.plans.is_empty()));

    ctx.sql("SET qprof.planning.record_plans = true")
        .await
        .unwrap()
        .collect()
        .await
        .unwrap();
    let recorded = profiler.run_sql(&ctx, sql).await.unwrap();
    assert_eq!(recorded.profile.rows, 2);
    let planning = recorded.profile.planning.unwrap();
    for rule in &planning.rules {
        // a rule that changed nothing has no plans; one that did, its changes (at most 8;
        // a rule may say it changed a plan whose text stays the same)
        assert_eq!(rule.changed, !rule.plans.is_empty(), "{}", rule.name);
        assert!(rule.plans.len() <= qprof_core::planning::MAX_RECORDED_CHANGES);
    }
    // `1 + 0` is simplified to `1` by the expression simplifier, before and after
    let simplified = planning.rules.iter().flat_map(|r| &r.plans).any(|c| {
        c.before.contains("Int64(1) + Int64(0)") && !c.after.contains("Int64(1) + Int64(0)")
    });
    assert!(simplified, "{:#?}", planning.rules);
    // qprof's own rule wraps the operators: its change is in the physical plan's text
    let ours = planning
        .rules
        .iter()
        .find(|r| r.name == "qprof_profiling")
        .unwrap();
    assert_eq!(ours.plans.len(), 1);
}

/// An analyzer rule that puts a filter of `true` over the whole plan: a change that keeps
/// the plan's schema.
#[derive(Debug)]
struct TrueFilterRule;

impl AnalyzerRule for TrueFilterRule {
    fn analyze(&self, plan: LogicalPlan, _config: &ConfigOptions) -> Result<LogicalPlan> {
        Ok(LogicalPlan::Filter(Filter::try_new(
            lit(true),
            Arc::new(plan),
        )?))
    }

    fn name(&self) -> &str {
        "true_filter"
    }
}

/// An analyzer rule that returns the plan it is given.
#[derive(Debug)]
struct KeepRule;

impl AnalyzerRule for KeepRule {
    fn analyze(&self, plan: LogicalPlan, _config: &ConfigOptions) -> Result<LogicalPlan> {
        Ok(plan)
    }

    fn name(&self) -> &str {
        "keep"
    }
}

#[tokio::test]
async fn each_analyzer_rule_changed_the_plan_or_not_on_its_own() {
    let profiler = Profiler::new();
    // DataFusion's analyzer rules, then one that changes the plan, one that keeps it, one
    // that changes it again and one that keeps it
    let builder = SessionStateBuilder::new()
        .with_default_features()
        .with_analyzer_rule(Arc::new(KeepRule))
        .with_analyzer_rule(Arc::new(TrueFilterRule))
        .with_analyzer_rule(Arc::new(KeepRule))
        .with_analyzer_rule(Arc::new(TrueFilterRule))
        .with_analyzer_rule(Arc::new(KeepRule));
    let ctx = SessionContext::new_with_state(profiler.instrument(builder).build());
    // `a + 1.5` makes the type coercion cast `a`
    let sql = "SELECT a + 1.5 AS b FROM (VALUES (1), (2)) AS t(a)";
    let run = profiler.run_sql(&ctx, sql).await.unwrap();
    assert_eq!(run.profile.rows, 2);
    let planning = run.profile.planning.unwrap();
    let rule = |name: &str| {
        let rule = planning.rules.iter().find(|r| r.name == name);
        rule.unwrap_or_else(|| panic!("{name} timed: {:#?}", planning.rules))
    };
    assert!(rule("type_coercion").changed);
    assert!(rule("true_filter").changed);
    // the rule that keeps the plan, counted as one under its name: right after DataFusion's
    // rules (whose last one changed the plan) and after each filter, it changed nothing
    let keep = rule("keep");
    assert_eq!((keep.calls, keep.changed), (3, false));
    assert_eq!(rule("true_filter").calls, 2);
}

/// The slow rule's pause where it is the query's problem.
const LONG_PAUSE: Duration = Duration::from_millis(300);

fn planned_by(profiler: &Profiler, slow: bool) -> SessionContext {
    let mut builder = SessionStateBuilder::new()
        .with_config(SessionConfig::new().with_target_partitions(2))
        .with_default_features();
    if slow {
        builder = builder.with_optimizer_rule(Arc::new(SlowRule(LONG_PAUSE)));
    }
    SessionContext::new_with_state(profiler.instrument(builder).build())
}

const SERIES: &str = "SELECT sum(v % 7) FROM generate_series(1, 5000000) AS s(v)";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_rule_is_slow_planning_ranked_first_costing_its_time() {
    let profiler = Profiler::new();
    let run = profiler
        .run_sql(&planned_by(&profiler, true), SERIES)
        .await
        .unwrap();
    let findings = advise(&run.profile);
    let top = &findings[0];
    assert_eq!(
        (top.rule, top.severity),
        ("slow-planning", Severity::Warning),
        "{}",
        render_findings(&findings)
    );
    // the cost is the planning's wall time: at least every pause the rule took
    let calls = run
        .profile
        .planning
        .as_ref()
        .and_then(|p| p.rules.iter().find(|r| r.name == "slow_rule"))
        .map_or(0, |r| r.calls);
    assert!(calls >= 1);
    assert_eq!(top.cost.kind, CostKind::Wall);
    let paused = calls * LONG_PAUSE.as_nanos() as u64;
    assert!(top.cost.amount >= paused, "{:?} vs {paused}", top.cost);
    assert!(top.cost.amount <= top.cost.whole, "{:?}", top.cost);
    assert!(top.action.contains("slow_rule"), "{}", top.action);
    // the same query planned by DataFusion's own rules: nothing to warn of
    let run = profiler
        .run_sql(&planned_by(&profiler, false), SERIES)
        .await
        .unwrap();
    let findings = advise(&run.profile);
    assert!(
        findings.iter().all(|f| f.severity == Severity::Info),
        "{}",
        render_findings(&findings)
    );
}
