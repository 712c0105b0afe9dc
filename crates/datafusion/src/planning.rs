//! Timing a query's planning rule by rule: the session's analyzer, optimizer and
//! physical-optimizer rules are wrapped, each wrapper as its rule (same name, same order
//! of application, same results), and each call of a rule made while a query plans is
//! counted in that query's [`PlanningRecorder`], which the profiler scopes around the
//! query's planning (a task-local: planning may change threads at its awaits).

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

use datafusion::common::Result;
use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::Transformed;
use datafusion::execution::SessionStateBuilder;
use datafusion::logical_expr::LogicalPlan;
use datafusion::optimizer::analyzer::{Analyzer, AnalyzerRule};
use datafusion::optimizer::optimizer::{ApplyOrder, Optimizer, OptimizerConfig, OptimizerRule};
use datafusion::physical_optimizer::PhysicalOptimizerRule;
use datafusion::physical_optimizer::optimizer::PhysicalOptimizer;
use datafusion::physical_plan::ExecutionPlan;
use qprof_core::planning::{PlanningPhase, PlanningProfile, RuleTiming};

tokio::task_local! {
    /// The recorder of the query planning on this task, if one is.
    static RECORDER: Arc<PlanningRecorder>;
}

/// What one query's planning measured so far.
#[derive(Debug, Default)]
pub(crate) struct PlanningRecorder {
    rules: Mutex<Vec<RuleTiming>>,
    phases: Mutex<Vec<(PlanningPhase, u64)>>,
}

impl PlanningRecorder {
    /// Runs `planning` with this recorder counting the rules it calls.
    pub(crate) async fn scope<T>(self: &Arc<Self>, planning: impl Future<Output = T>) -> T {
        RECORDER.scope(Arc::clone(self), planning).await
    }

    /// Counts `nanos` of a phase that is not made of rules.
    pub(crate) fn phase(&self, phase: PlanningPhase, nanos: u64) {
        let mut phases = self.phases.lock().unwrap_or_else(PoisonError::into_inner);
        phases.push((phase, nanos));
    }

    fn rule(&self, phase: PlanningPhase, name: &str, nanos: u64, changed: bool) {
        let mut rules = self.rules.lock().unwrap_or_else(PoisonError::into_inner);
        match rules
            .iter_mut()
            .find(|r| r.phase == phase && r.name == name)
        {
            Some(rule) => {
                rule.wall_nanos += nanos;
                rule.calls += 1;
                rule.changed |= changed;
            }
            None => rules.push(RuleTiming {
                phase,
                name: name.to_string(),
                wall_nanos: nanos,
                calls: 1,
                changed,
            }),
        }
    }

    /// The planning measured: the phases in order, each rule phase the sum of its rules;
    /// `planned_nanos` is the wall time of physical planning with the rules it ran, of
    /// which what the rules did not take is the physical planner's own.
    pub(crate) fn profile(&self, planned_nanos: u64) -> PlanningProfile {
        let rules = self
            .rules
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        let mut phases = self
            .phases
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        let of = |phase| -> u64 {
            rules
                .iter()
                .filter(|r| r.phase == phase)
                .map(|r| r.wall_nanos)
                .sum()
        };
        let in_rules: u64 = [
            PlanningPhase::Analyzer,
            PlanningPhase::Optimizer,
            PlanningPhase::PhysicalOptimizer,
        ]
        .into_iter()
        .map(of)
        .sum();
        phases.push((PlanningPhase::Analyzer, of(PlanningPhase::Analyzer)));
        phases.push((PlanningPhase::Optimizer, of(PlanningPhase::Optimizer)));
        phases.push((
            PlanningPhase::PhysicalPlan,
            planned_nanos.saturating_sub(in_rules),
        ));
        phases.push((
            PlanningPhase::PhysicalOptimizer,
            of(PlanningPhase::PhysicalOptimizer),
        ));
        PlanningProfile { phases, rules }
    }
}

/// Times `call` as a call of the rule `name` of `phase`, in the planning recorder of the
/// current task if there is one; `changed` says whether its result changed the plan.
fn timed<T>(
    phase: PlanningPhase,
    name: &str,
    call: impl FnOnce() -> Result<T>,
    changed: impl FnOnce(&T) -> bool,
) -> Result<T> {
    let Ok(recorder) = RECORDER.try_with(Arc::clone) else {
        return call();
    };
    let start = Instant::now();
    let out = call();
    let nanos = u64::try_from(start.elapsed().as_nanos()).unwrap_or(u64::MAX);
    recorder.rule(phase, name, nanos, out.as_ref().is_ok_and(changed));
    out
}

/// An analyzer rule, timed.
#[derive(Debug)]
struct TimedAnalyzerRule(Arc<dyn AnalyzerRule + Send + Sync>);

impl AnalyzerRule for TimedAnalyzerRule {
    fn analyze(&self, plan: LogicalPlan, config: &ConfigOptions) -> Result<LogicalPlan> {
        let recording = RECORDER.try_with(|_| ()).is_ok();
        // an analyzer rule returns a plan, not whether it changed it: compare hashes
        let before = recording.then(|| plan_hash(&plan));
        timed(
            PlanningPhase::Analyzer,
            self.0.name(),
            || self.0.analyze(plan, config),
            |after| before.is_some_and(|b| b != plan_hash(after)),
        )
    }

    fn name(&self) -> &str {
        self.0.name()
    }
}

fn plan_hash(plan: &LogicalPlan) -> u64 {
    use std::hash::{BuildHasher, BuildHasherDefault, DefaultHasher};
    BuildHasherDefault::<DefaultHasher>::default().hash_one(plan)
}

/// A logical optimizer rule, timed.
#[derive(Debug)]
struct TimedOptimizerRule(Arc<dyn OptimizerRule + Send + Sync>);

impl OptimizerRule for TimedOptimizerRule {
    fn name(&self) -> &str {
        self.0.name()
    }

    fn apply_order(&self) -> Option<ApplyOrder> {
        self.0.apply_order()
    }

    fn rewrite(
        &self,
        plan: LogicalPlan,
        config: &dyn OptimizerConfig,
    ) -> Result<Transformed<LogicalPlan>> {
        timed(
            PlanningPhase::Optimizer,
            self.0.name(),
            || self.0.rewrite(plan, config),
            |t| t.transformed,
        )
    }
}

/// A physical optimizer rule, timed.
#[derive(Debug)]
struct TimedPhysicalRule(Arc<dyn PhysicalOptimizerRule + Send + Sync>);

impl TimedPhysicalRule {
    /// `optimize` of `plan`, timed; a rule that returns another plan changed it.
    fn timed(
        &self,
        plan: Arc<dyn ExecutionPlan>,
        optimize: impl FnOnce(Arc<dyn ExecutionPlan>) -> Result<Arc<dyn ExecutionPlan>>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        let before = Arc::clone(&plan);
        timed(
            PlanningPhase::PhysicalOptimizer,
            self.0.name(),
            || optimize(plan),
            |after| !Arc::ptr_eq(&before, after),
        )
    }
}

impl PhysicalOptimizerRule for TimedPhysicalRule {
    fn optimize(
        &self,
        plan: Arc<dyn ExecutionPlan>,
        config: &ConfigOptions,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        self.timed(plan, |plan| self.0.optimize(plan, config))
    }

    fn optimize_with_context(
        &self,
        plan: Arc<dyn ExecutionPlan>,
        context: &dyn datafusion::physical_optimizer::PhysicalOptimizerContext,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        self.timed(plan, |plan| self.0.optimize_with_context(plan, context))
    }

    fn name(&self) -> &str {
        self.0.name()
    }

    fn schema_check(&self) -> bool {
        self.0.schema_check()
    }
}

/// `builder` with each of its analyzer, optimizer and physical-optimizer rules timed, in
/// their order: those of its analyzer, optimizer and physical optimizer (DataFusion's
/// defaults where it sets none), then the rules added one by one.
pub(crate) fn time_rules(mut builder: SessionStateBuilder) -> SessionStateBuilder {
    let mut analyzer = builder
        .analyzer()
        .take()
        .map_or_else(|| Analyzer::new().rules, |a| a.rules);
    analyzer.extend(builder.analyzer_rules().take().unwrap_or_default());
    let mut optimizer = builder
        .optimizer()
        .take()
        .map_or_else(|| Optimizer::new().rules, |o| o.rules);
    optimizer.extend(builder.optimizer_rules().take().unwrap_or_default());
    let mut physical = builder
        .physical_optimizers()
        .take()
        .map_or_else(|| PhysicalOptimizer::new().rules, |p| p.rules);
    physical.extend(
        builder
            .physical_optimizer_rules()
            .take()
            .unwrap_or_default(),
    );
    builder
        .with_analyzer_rules(
            analyzer
                .into_iter()
                .map(|r| Arc::new(TimedAnalyzerRule(r)) as _)
                .collect(),
        )
        .with_optimizer_rules(
            optimizer
                .into_iter()
                .map(|r| Arc::new(TimedOptimizerRule(r)) as _)
                .collect(),
        )
        .with_physical_optimizer_rules(
            physical
                .into_iter()
                .map(|r| Arc::new(TimedPhysicalRule(r)) as _)
                .collect(),
        )
}
