//! Timing a query's planning rule by rule: the session's analyzer, optimizer and
//! physical-optimizer rules are wrapped, each wrapper as its rule (same name, same order
//! of application, same results), and each call of a rule made while a query plans is
//! counted in that query's [`PlanningRecorder`], which the profiler scopes around the
//! query's planning (a task-local: planning may change threads at its awaits).

use std::pin::pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

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
use parking_lot::{Mutex, MutexGuard};
use qprof_core::clock::{ClockSource, SystemClock, epoch_micros, thread_cpu_nanos};
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
    /// The wall clock's reading when planning began, in its ticks.
    began: u64,
    began_epoch_micros: u64,
    /// Whether the session asks for the plans around each change, known at the first rule.
    records_plans: OnceLock<bool>,
    state: Mutex<RecorderState>,
}

/// A rule's calls so far; times in the wall clock's ticks after planning began (made
/// nanoseconds once, when the planning's profile is read).
#[derive(Debug)]
struct RuleCalls {
    /// The wrapper whose call was counted here last: the same wrapper is the same rule.
    wrapper: WrapperId,
    phase: PlanningPhase,
    name: String,
    first_start: u64,
    last_end: u64,
    wall: u64,
    calls: u64,
    changed: bool,
    plans: Vec<PlanChange>,
}

/// Room for the rules of DataFusion's analyzer, optimizer and physical optimizer (about
/// 60 in all).
const RULES: usize = 80;

/// The plan an analyzer rule returned, as the next rule sees it.
#[derive(Debug, Clone, Copy)]
struct Analyzed {
    /// The wrapper of the rule that returned it.
    by: WrapperId,
    /// Its hash.
    hash: u64,
    /// Where its schema is: a plan given to the next rule with another schema is another
    /// plan (a rule not wrapped ran between the two). A guard, not a proof: a rule not
    /// wrapped that keeps the top node's schema would pass it, but such a rule can only
    /// sit between two wrapped ones in a rule list rebuilt by hand after instrumenting
    /// (rules added to a session go after all the others).
    schema: usize,
}

impl Analyzed {
    fn of(by: WrapperId, plan: &LogicalPlan) -> Analyzed {
        Analyzed {
            by,
            hash: plan_hash(plan),
            schema: schema_address(plan),
        }
    }
}

fn schema_address(plan: &LogicalPlan) -> usize {
    Arc::as_ptr(plan.schema()).addr()
}

#[derive(Debug, Default)]
struct RecorderState {
    rules: Vec<RuleCalls>,
    /// Where the last rule timed is in `rules`: the optimizer calls a rule once per plan
    /// node, then the next one, in the same order pass after pass.
    last_rule: usize,
    /// The analyzer rule that returned a plan last, and that plan's hash: the plan the
    /// analyzer's next rule is given.
    analyzed: Option<Analyzed>,
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
            began: SystemClock.now_ticks(),
            began_epoch_micros: epoch_micros(),
            records_plans: OnceLock::new(),
            state: Mutex::new(RecorderState {
                rules: Vec::with_capacity(RULES),
                ..RecorderState::default()
            }),
        }
    }

    /// Its state, locked: for a short while (a rule's call is counted under the lock), so
    /// a lock without poisoning, whose release is one atomic exchange.
    fn state(&self) -> MutexGuard<'_, RecorderState> {
        self.state.lock()
    }

    /// Nanoseconds from the beginning of planning to now.
    fn now(&self) -> u64 {
        nanos(SystemClock.now_ticks().saturating_sub(self.began))
    }

    /// Whether this planning keeps the plans around each change; `wanted` tells it at the
    /// first rule (the session's options do not change while a query plans).
    fn records_plans(&self, wanted: &dyn Fn() -> bool) -> bool {
        *self.records_plans.get_or_init(wanted)
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
        let now = self.now();
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

    /// Counts a call of the rule `wrapper` wraps, `name` of `phase`, that ran from `began`
    /// to `ended` (wall clock ticks).
    fn rule(
        &self,
        rule: (WrapperId, PlanningPhase, &str),
        (began, ended): (u64, u64),
        changed: bool,
        plans: Option<PlanChange>,
    ) {
        let (start, end) = (
            began.saturating_sub(self.began),
            ended.saturating_sub(self.began),
        );
        let mut state = self.state();
        // the usual call, done first: the last rule again (the optimizer calls a rule once
        // per plan node), no plans kept
        let last = state.last_rule;
        match state.rules.get_mut(last) {
            Some(same) if same.wrapper == rule.0 && plans.is_none() => {
                same.wall += end.saturating_sub(start);
                same.last_end = end;
                same.calls += 1;
                same.changed |= changed;
            }
            _ => Self::other_rule(&mut state, rule, (start, end), changed, plans),
        }
    }

    /// Counts a call that is not the last rule's again, or that kept plans: `rule()`'s
    /// other cases, out of its way.
    #[cold]
    #[inline(never)]
    fn other_rule(
        state: &mut RecorderState,
        (wrapper, phase, name): (WrapperId, PlanningPhase, &str),
        (start, end): (u64, u64),
        changed: bool,
        plans: Option<PlanChange>,
    ) {
        let wall = end.saturating_sub(start);
        // the likely ones: the last rule again or the one after it, known by their
        // wrapper; else by name (two wrappers of one rule count as one)
        let last = state.last_rule;
        let at = [last, last.wrapping_add(1)]
            .into_iter()
            .find(|&i| state.rules.get(i).is_some_and(|r| r.wrapper == wrapper))
            .or_else(|| {
                let i = (state.rules.iter()).position(|r| r.phase == phase && r.name == name)?;
                state.rules[i].wrapper = wrapper;
                Some(i)
            });
        state.last_rule = at.unwrap_or(state.rules.len());
        match at.map(|i| &mut state.rules[i]) {
            Some(rule) => {
                rule.wall += wall;
                rule.last_end = end;
                rule.calls += 1;
                rule.changed |= changed;
                if rule.plans.len() < MAX_RECORDED_CHANGES {
                    rule.plans.extend(plans);
                }
            }
            None => state.rules.push(RuleCalls {
                wrapper,
                phase,
                name: name.to_string(),
                first_start: start,
                last_end: end,
                wall,
                calls: 1,
                changed,
                plans: plans.into_iter().collect(),
            }),
        }
    }

    /// The hash of `plan` if it is the one the analyzer rule `wrapper` returned: that rule
    /// was the last one to return a plan and the plan has its schema.
    fn analyzed_by(&self, wrapper: Option<WrapperId>, plan: &LogicalPlan) -> Option<u64> {
        let analyzed = self.state().analyzed?;
        (Some(analyzed.by) == wrapper && analyzed.schema == schema_address(plan))
            .then_some(analyzed.hash)
    }

    /// Ends planning now: what ran since the last phase ended was the analyzer, the
    /// optimizer and physical planning with its optimizer rules inside it. Each rule phase
    /// spans its rules' calls and takes their wall time; physical planning takes the rest.
    /// The interval's CPU time is shared among the four by wall time (reading the CPU
    /// clock at each rule's call would cost more than most rules).
    pub(crate) fn end_planning(&self) {
        let now = self.now();
        let mut state = self.state();
        let cpu = state.cpu_now();
        let (start, cpu_before) = state.mark;
        let interval_wall = now.saturating_sub(start);
        let interval_cpu = cpu.saturating_sub(cpu_before);
        let span = |phase: PlanningPhase| {
            let mut rules = state.rules.iter().filter(|r| r.phase == phase);
            let first = rules.next()?;
            // the phase's wall time is its rules' as the profile shows them: each made
            // nanoseconds, then added up
            let (mut begin, mut end, mut wall) =
                (first.first_start, first.last_end, nanos(first.wall));
            for r in rules {
                begin = begin.min(r.first_start);
                end = end.max(r.last_end);
                wall += nanos(r.wall);
            }
            Some((nanos(begin), nanos(end), wall))
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

    /// The planning measured, taken out of the recorder once planning has ended (its rules'
    /// names and plans are moved, not copied).
    pub(crate) fn take_profile(&self) -> PlanningProfile {
        let mut state = self.state();
        PlanningProfile {
            start_epoch_micros: self.began_epoch_micros,
            phases: std::mem::take(&mut state.phases),
            rules: std::mem::take(&mut state.rules)
                .into_iter()
                .map(|r| RuleTiming {
                    phase: r.phase,
                    name: r.name,
                    first_start_nanos: nanos(r.first_start),
                    last_end_nanos: nanos(r.last_end),
                    wall_nanos: nanos(r.wall),
                    calls: r.calls,
                    changed: r.changed,
                    plans: r.plans,
                })
                .collect(),
        }
    }
}

/// Nanoseconds in `ticks` of the wall clock.
fn nanos(ticks: u64) -> u64 {
    SystemClock.ticks_to_nanos(ticks)
}

/// Times `call` as a call of `rule` (its wrapper, phase and name) in `recorder`;
/// `changed` says whether its result changed the plan. When the session asks for plans, a
/// call that changed the plan keeps the plan before (made before the call) and after.
///
/// A call costs two readings of the TSC clock and a short lock. The optimizer's rules,
/// called once per plan node (about 700 calls per TPC-H query), come here only when plans
/// are kept; otherwise `TimedOptimizerRule` times them the same way without the generic
/// moves of the plan.
fn timed<I, T>(
    recorder: &PlanningRecorder,
    rule: (WrapperId, PlanningPhase, &str),
    input: I,
    call: impl FnOnce(I) -> Result<T>,
    changed: impl FnOnce(&T) -> bool,
    plans: Plans<'_, I, T>,
) -> Result<T> {
    let before = recorder
        .records_plans(plans.wanted)
        .then(|| (plans.input)(&input));
    let began = SystemClock.now_ticks();
    let out = call(input);
    let ended = SystemClock.now_ticks();
    let changed = out.as_ref().is_ok_and(changed);
    let change = match (before, &out) {
        (Some(before), Ok(after)) if changed => Some(PlanChange {
            before,
            after: (plans.output)(after),
        }),
        _ => None,
    };
    recorder.rule(rule, (began, ended), changed, change);
    out
}

/// Which wrapper of a rule a call came through: a number unique in the process.
type WrapperId = u64;

/// The next wrapper's number.
fn next_wrapper_id() -> WrapperId {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

/// Whether the session asks for the plans around each change, and how a rule's input plan
/// and its output are rendered as text if it does.
struct Plans<'a, I, T> {
    wanted: &'a dyn Fn() -> bool,
    input: &'a dyn Fn(&I) -> String,
    output: &'a dyn Fn(&T) -> String,
}

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
struct TimedAnalyzerRule {
    rule: Arc<dyn AnalyzerRule + Send + Sync>,
    id: WrapperId,
    /// The wrapper of the rule the analyzer runs just before this one, if there is one:
    /// the plan it returns is the one this rule is given.
    previous: Option<WrapperId>,
}

impl AnalyzerRule for TimedAnalyzerRule {
    fn analyze(&self, plan: LogicalPlan, config: &ConfigOptions) -> Result<LogicalPlan> {
        let Ok(recorder) = RECORDER.try_with(Arc::clone) else {
            return self.rule.analyze(plan, config);
        };
        // an analyzer rule returns a plan, not whether it changed it: compare hashes (the
        // one before is the one after the rule before, if that one ran last)
        let before = recorder
            .analyzed_by(self.previous, &plan)
            .unwrap_or_else(|| plan_hash(&plan));
        let mut after = None;
        let plans = Plans {
            wanted: &|| records_plans(config),
            input: &logical_text,
            output: &logical_text,
        };
        let out = timed(
            &recorder,
            (self.id, PlanningPhase::Analyzer, self.rule.name()),
            plan,
            |plan| self.rule.analyze(plan, config),
            |plan| {
                let analyzed = Analyzed::of(self.id, plan);
                after = Some(analyzed);
                analyzed.hash != before
            },
            plans,
        );
        recorder.state().analyzed = after;
        out
    }

    fn name(&self) -> &str {
        self.rule.name()
    }
}

/// A hash of the whole plan, to tell whether a rule changed it: a fast one (the plan's
/// every expression and field is hashed once per analyzer rule), not a keyed one.
fn plan_hash(plan: &LogicalPlan) -> u64 {
    use std::hash::BuildHasher;
    foldhash::fast::FixedState::with_seed(0).hash_one(plan)
}

/// A logical optimizer rule, timed.
#[derive(Debug)]
struct TimedOptimizerRule(Arc<dyn OptimizerRule + Send + Sync>, WrapperId);

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
        // called once per plan node: the usual case, no plans kept, done without `timed`'s
        // generic moves of the plan
        let Ok(recorder) = RECORDER.try_with(Arc::clone) else {
            return self.0.rewrite(plan, config);
        };
        if !recorder.records_plans(&|| records_plans(&config.options())) {
            let began = SystemClock.now_ticks();
            let out = self.0.rewrite(plan, config);
            let ended = SystemClock.now_ticks();
            let changed = out.as_ref().is_ok_and(|t| t.transformed);
            recorder.rule(
                (self.1, PlanningPhase::Optimizer, self.0.name()),
                (began, ended),
                changed,
                None,
            );
            return out;
        }
        let plans = Plans {
            wanted: &|| records_plans(&config.options()),
            input: &logical_text,
            output: &|t: &Transformed<LogicalPlan>| logical_text(&t.data),
        };
        timed(
            &recorder,
            (self.1, PlanningPhase::Optimizer, self.0.name()),
            plan,
            |plan| self.0.rewrite(plan, config),
            |t| t.transformed,
            plans,
        )
    }
}

/// A physical optimizer rule, timed.
#[derive(Debug)]
struct TimedPhysicalRule(Arc<dyn PhysicalOptimizerRule + Send + Sync>, WrapperId);

impl TimedPhysicalRule {
    /// `optimize` of `plan`, timed; a rule that returns another plan changed it.
    fn timed(
        &self,
        plan: Arc<dyn ExecutionPlan>,
        config: &ConfigOptions,
        optimize: impl FnOnce(Arc<dyn ExecutionPlan>) -> Result<Arc<dyn ExecutionPlan>>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        let Ok(recorder) = RECORDER.try_with(Arc::clone) else {
            return optimize(plan);
        };
        let before = Arc::clone(&plan);
        let plans = Plans {
            wanted: &|| records_plans(config),
            input: &physical_text,
            output: &physical_text,
        };
        timed(
            &recorder,
            (self.1, PlanningPhase::PhysicalOptimizer, self.0.name()),
            plan,
            optimize,
            |after| !Arc::ptr_eq(&before, after),
            plans,
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
        .with_analyzer_rules(timed_analyzer_rules(analyzer))
        .with_optimizer_rules(
            optimizer
                .into_iter()
                .map(|r| Arc::new(TimedOptimizerRule(r, next_wrapper_id())) as _)
                .collect(),
        )
        .with_physical_optimizer_rules(
            physical
                .into_iter()
                .map(|r| Arc::new(TimedPhysicalRule(r, next_wrapper_id())) as _)
                .collect(),
        )
}

/// The analyzer's `rules` timed, each knowing the one run before it.
fn timed_analyzer_rules(
    rules: Vec<Arc<dyn AnalyzerRule + Send + Sync>>,
) -> Vec<Arc<dyn AnalyzerRule + Send + Sync>> {
    let mut previous = None;
    rules
        .into_iter()
        .map(|rule| {
            let id = next_wrapper_id();
            let timed = TimedAnalyzerRule {
                rule,
                id,
                previous: previous.replace(id),
            };
            Arc::new(timed) as _
        })
        .collect()
}
