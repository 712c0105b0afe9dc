//! Timing a query's planning rule by rule: the session's analyzer, optimizer and
//! physical-optimizer rules are wrapped, each wrapper as its rule (same name, same order
//! of application, same results), and each call of a rule made while a query plans is
//! counted in that query's [`PlanningRecorder`], which the profiler scopes around the
//! query's planning (a task-local: planning may change threads at its awaits).

use std::pin::pin;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
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
use datafusion::physical_plan::displayable;
use qprof_core::clock::{epoch_micros, thread_cpu_nanos};
use qprof_core::planning::{
    MAX_RECORDED_CHANGES, PhaseTiming, PlanChange, PlanningPhase, PlanningProfile, RuleTiming,
};

use crate::options::QprofOptions;

tokio::task_local! {
    /// The recorder of the query planning on this task, if one is.
    static RECORDER: Arc<PlanningRecorder>;
}

/// What one query's planning measured so far.
#[derive(Debug)]
pub(crate) struct PlanningRecorder {
    began: Instant,
    began_epoch_micros: u64,
    state: Mutex<RecorderState>,
}

#[derive(Debug, Default)]
struct RecorderState {
    rules: Vec<RuleTiming>,
    /// Where the rule after the last one timed is in `rules`, if it is there yet.
    next_rule: usize,
    phases: Vec<PhaseTiming>,
    /// CPU time of the planning's polls that ended (ns).
    cpu_nanos: u64,
    /// The thread's CPU clock when the poll running now began.
    poll_began_cpu: Option<u64>,
    /// Where the last phase ended: ns after planning began, and the CPU time by then.
    mark: (u64, u64),
}

impl RecorderState {
    /// CPU time of planning so far, the poll running now included.
    fn cpu_now(&self) -> u64 {
        let running = self
            .poll_began_cpu
            .map_or(0, |began| thread_cpu_nanos().saturating_sub(began));
        self.cpu_nanos + running
    }
}

impl PlanningRecorder {
    /// A recorder for a query whose planning begins now.
    pub(crate) fn new() -> PlanningRecorder {
        PlanningRecorder {
            began: Instant::now(),
            began_epoch_micros: epoch_micros(),
            state: Mutex::default(),
        }
    }

    fn state(&self) -> MutexGuard<'_, RecorderState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn offset(&self, at: Instant) -> u64 {
        u64::try_from(at.saturating_duration_since(self.began).as_nanos()).unwrap_or(u64::MAX)
    }

    /// Runs `planning` with this recorder counting the rules it calls and the CPU time of
    /// each of its polls, on whichever thread it runs.
    pub(crate) async fn scope<T>(self: &Arc<Self>, planning: impl Future<Output = T>) -> T {
        let mut planning = pin!(RECORDER.scope(Arc::clone(self), planning));
        std::future::poll_fn(|cx| {
            self.state().poll_began_cpu = Some(thread_cpu_nanos());
            let out = planning.as_mut().poll(cx);
            let mut state = self.state();
            state.cpu_nanos = state.cpu_now();
            state.poll_began_cpu = None;
            out
        })
        .await
    }

    /// Ends `phase`, one not made of rules, now: it began where the last phase ended.
    pub(crate) fn end_phase(&self, phase: PlanningPhase) {
        let now = self.offset(Instant::now());
        let mut state = self.state();
        let cpu = state.cpu_now();
        let (start, cpu_before) = state.mark;
        state.phases.push(PhaseTiming {
            phase,
            start_nanos: start,
            end_nanos: now,
            wall_nanos: now.saturating_sub(start),
            cpu_nanos: cpu.saturating_sub(cpu_before),
        });
        state.mark = (now, cpu);
    }

    fn rule(
        &self,
        phase: PlanningPhase,
        name: &str,
        (began, ended): (Instant, Instant),
        changed: bool,
        plans: Option<PlanChange>,
    ) {
        let (start, end) = (self.offset(began), self.offset(ended));
        let nanos = end.saturating_sub(start);
        let mut state = self.state();
        // the rules run in the same order pass after pass: the one after the last is the
        // likely one
        let next = state.next_rule;
        let is = |r: &RuleTiming| r.phase == phase && r.name == name;
        let at = match state.rules.get(next) {
            Some(r) if is(r) => Some(next),
            _ => state.rules.iter().position(is),
        };
        state.next_rule = at.map_or(state.rules.len() + 1, |i| i + 1);
        match at.map(|i| &mut state.rules[i]) {
            Some(rule) => {
                rule.wall_nanos += nanos;
                rule.last_end_nanos = end;
                rule.calls += 1;
                rule.changed |= changed;
                if rule.plans.len() < MAX_RECORDED_CHANGES {
                    rule.plans.extend(plans);
                }
            }
            None => state.rules.push(RuleTiming {
                phase,
                name: name.to_string(),
                first_start_nanos: start,
                last_end_nanos: end,
                wall_nanos: nanos,
                calls: 1,
                changed,
                plans: plans.into_iter().collect(),
            }),
        }
    }

    /// Ends planning now: what ran since the last phase ended was the analyzer, the
    /// optimizer and physical planning with its optimizer rules inside it. Each rule phase
    /// spans its rules' calls and takes their wall time; physical planning takes the rest.
    /// The interval's CPU time is shared among the four by wall time (reading the CPU
    /// clock at each rule's call would cost more than most rules).
    pub(crate) fn end_planning(&self) {
        let now = self.offset(Instant::now());
        let mut state = self.state();
        let cpu = state.cpu_now();
        let (start, cpu_before) = state.mark;
        let interval_wall = now.saturating_sub(start);
        let interval_cpu = cpu.saturating_sub(cpu_before);
        let span = |phase: PlanningPhase| {
            let mut rules = state.rules.iter().filter(|r| r.phase == phase);
            let first = rules.next()?;
            let (mut begin, mut end, mut wall) = (
                first.first_start_nanos,
                first.last_end_nanos,
                first.wall_nanos,
            );
            for r in rules {
                begin = begin.min(r.first_start_nanos);
                end = end.max(r.last_end_nanos);
                wall += r.wall_nanos;
            }
            Some((begin, end, wall))
        };
        let analyzer = span(PlanningPhase::Analyzer);
        let optimizer = span(PlanningPhase::Optimizer);
        let physical_rules = span(PlanningPhase::PhysicalOptimizer);
        let in_rules: u64 = [analyzer, optimizer, physical_rules]
            .iter()
            .flatten()
            .map(|(_, _, wall)| wall)
            .sum();
        let logical_end = optimizer.or(analyzer).map_or(start, |(_, end, _)| end);
        let share = |wall: u64| -> u64 {
            if interval_wall == 0 {
                return 0;
            }
            u64::try_from(u128::from(interval_cpu) * u128::from(wall) / u128::from(interval_wall))
                .unwrap_or(u64::MAX)
        };
        let timing = |phase, (start_nanos, end_nanos, wall_nanos): (u64, u64, u64)| PhaseTiming {
            phase,
            start_nanos,
            end_nanos,
            wall_nanos,
            cpu_nanos: share(wall_nanos),
        };
        let mut phases = Vec::with_capacity(4);
        if let Some(a) = analyzer {
            phases.push(timing(PlanningPhase::Analyzer, a));
        }
        if let Some(o) = optimizer {
            phases.push(timing(PlanningPhase::Optimizer, o));
        }
        phases.push(timing(
            PlanningPhase::PhysicalPlan,
            (logical_end, now, interval_wall.saturating_sub(in_rules)),
        ));
        if let Some(p) = physical_rules {
            phases.push(timing(PlanningPhase::PhysicalOptimizer, p));
        }
        state.phases.extend(phases);
        state.mark = (now, cpu);
    }

    /// The planning measured so far.
    pub(crate) fn profile(&self) -> PlanningProfile {
        let state = self.state();
        PlanningProfile {
            start_epoch_micros: self.began_epoch_micros,
            phases: state.phases.clone(),
            rules: state.rules.clone(),
        }
    }
}

/// Times `call` as a call of the rule `name` of `phase`, in the planning recorder of the
/// current task if there is one; `changed` says whether its result changed the plan. When
/// the session asks for plans (`render` is given), a call that changed the plan keeps the
/// plan before (`render` of the input, made before the call) and after.
fn timed<I, T>(
    phase: PlanningPhase,
    name: &str,
    input: I,
    call: impl FnOnce(I) -> Result<T>,
    changed: impl FnOnce(&T) -> bool,
    render: Option<Render<'_, I, T>>,
) -> Result<T> {
    let Ok(recorder) = RECORDER.try_with(Arc::clone) else {
        return call(input);
    };
    let before = render.map(|(of_input, _)| of_input(&input));
    let began = Instant::now();
    let out = call(input);
    let ended = Instant::now();
    let changed = out.as_ref().is_ok_and(changed);
    let plans = match (before, render, &out) {
        (Some(before), Some((_, of_output)), Ok(after)) if changed => Some(PlanChange {
            before,
            after: of_output(after),
        }),
        _ => None,
    };
    recorder.rule(phase, name, (began, ended), changed, plans);
    out
}

/// How a rule's input plan and its output are rendered as text.
type Render<'a, I, T> = (&'a dyn Fn(&I) -> String, &'a dyn Fn(&T) -> String);

/// Whether the session asks for the plans around each change.
fn records_plans(config: &ConfigOptions) -> bool {
    config
        .extensions
        .get::<QprofOptions>()
        .is_some_and(|o| o.record_plans)
}

fn logical_text(plan: &LogicalPlan) -> String {
    plan.display_indent().to_string()
}

fn physical_text(plan: &Arc<dyn ExecutionPlan>) -> String {
    displayable(plan.as_ref()).indent(false).to_string()
}

/// An analyzer rule, timed.
#[derive(Debug)]
struct TimedAnalyzerRule(Arc<dyn AnalyzerRule + Send + Sync>);

impl AnalyzerRule for TimedAnalyzerRule {
    fn analyze(&self, plan: LogicalPlan, config: &ConfigOptions) -> Result<LogicalPlan> {
        let recording = RECORDER.try_with(|_| ()).is_ok();
        // an analyzer rule returns a plan, not whether it changed it: compare hashes
        let before = recording.then(|| plan_hash(&plan));
        let render: Render<'_, LogicalPlan, LogicalPlan> = (&logical_text, &logical_text);
        timed(
            PlanningPhase::Analyzer,
            self.0.name(),
            plan,
            |plan| self.0.analyze(plan, config),
            |after| before.is_some_and(|b| b != plan_hash(after)),
            records_plans(config).then_some(render),
        )
    }

    fn name(&self) -> &str {
        self.0.name()
    }
}

/// A hash of the whole plan, to tell whether a rule changed it: a fast one (the plan's
/// every expression and field is hashed twice per analyzer rule), not a keyed one.
fn plan_hash(plan: &LogicalPlan) -> u64 {
    use std::hash::BuildHasher;
    foldhash::fast::FixedState::with_seed(0).hash_one(plan)
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
        let after = |t: &Transformed<LogicalPlan>| logical_text(&t.data);
        let render: Render<'_, LogicalPlan, Transformed<LogicalPlan>> = (&logical_text, &after);
        timed(
            PlanningPhase::Optimizer,
            self.0.name(),
            plan,
            |plan| self.0.rewrite(plan, config),
            |t| t.transformed,
            records_plans(&config.options()).then_some(render),
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
        config: &ConfigOptions,
        optimize: impl FnOnce(Arc<dyn ExecutionPlan>) -> Result<Arc<dyn ExecutionPlan>>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        let before = Arc::clone(&plan);
        let render: Render<'_, Arc<dyn ExecutionPlan>, Arc<dyn ExecutionPlan>> =
            (&physical_text, &physical_text);
        timed(
            PlanningPhase::PhysicalOptimizer,
            self.0.name(),
            plan,
            optimize,
            |after| !Arc::ptr_eq(&before, after),
            records_plans(config).then_some(render),
        )
    }
}

impl PhysicalOptimizerRule for TimedPhysicalRule {
    fn optimize(
        &self,
        plan: Arc<dyn ExecutionPlan>,
        config: &ConfigOptions,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        self.timed(plan, config, |plan| self.0.optimize(plan, config))
    }

    fn optimize_with_context(
        &self,
        plan: Arc<dyn ExecutionPlan>,
        context: &dyn datafusion::physical_optimizer::PhysicalOptimizerContext,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        self.timed(plan, context.config_options(), |plan| {
            self.0.optimize_with_context(plan, context)
        })
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
