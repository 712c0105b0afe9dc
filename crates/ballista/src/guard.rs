//! The scheduler's guard over its running jobs: a job that can no longer progress is
//! failed, with the reason, instead of leaving its client waiting for ever.
//!
//! Ballista's scheduler moves a job on when a task's status arrives or an executor is
//! lost. A job left with no task out and none to hand out hears of neither again, and
//! Ballista 55 has paths that leave a job so after an executor's loss (its adaptive
//! planner does not recover lost shuffle output: a stage rolled back is never resolved
//! again). A task the scheduler believes runs on an executor that is gone is as stuck:
//! no status will come from there. The guard looks at every running job once per
//! period and cancels, through the scheduler's own API, a job seen stuck for a grace
//! period, and at once a job an executor's loss hit (Ballista's recovery of lost shuffle
//! output can give wrong answers); the observer then records the job as failed with the
//! guard's reason (and its client hears that reason, not Ballista's "Cancelled"). It
//! also gives back task slots Ballista lost count of, and offers free slots it failed to
//! offer.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ballista_core::JobId;
use ballista_scheduler::scheduler_server::SchedulerServer;
use ballista_scheduler::state::execution_graph::{ExecutionGraph, ExecutionGraphBox};
use ballista_scheduler::state::execution_stage::ExecutionStage;
use datafusion_proto::protobuf::{LogicalPlanNode, PhysicalPlanNode};

use crate::observer::ClusterObserver;

/// How often the guard looks, and how long a job must stay stuck before it is failed.
#[derive(Debug, Clone, Copy)]
pub(crate) struct GuardTimes {
    /// Between two looks.
    pub(crate) period: Duration,
    /// How long a job may stay stuck.
    pub(crate) grace: Duration,
}

/// Why a job cannot progress, as one look at it found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Stuck {
    /// No task is out and none can be handed out.
    NothingToRun { stages: String },
    /// Its only tasks out are on executors the scheduler no longer has.
    OnLostExecutors { executors: Vec<String> },
    /// It has tasks to hand out and the cluster has no executor.
    NoExecutors,
}

impl Stuck {
    /// The reason the job is failed with.
    pub(crate) fn reason(&self) -> String {
        match self {
            Stuck::NothingToRun { stages } => format!(
                "the job could not progress after an executor was lost: no task is running \
                 and none can be scheduled (stages: {stages}); Ballista's adaptive planner, \
                 if the client enabled it (ballista.planner.adaptive.enabled), does not \
                 recompute lost shuffle output"
            ),
            Stuck::NoExecutors => {
                "no executor to run the job's tasks: the cluster has none".to_string()
            }
            Stuck::OnLostExecutors { executors } => format!(
                "the job could not progress: its running tasks are on executors that were \
                 lost ({})",
                executors.join(", ")
            ),
        }
    }
}

pub use qprof_core::profile::{EXECUTOR_LOST_FAILURE, FETCH_FAILED};

/// Why a job fails that was running when `executor`, which had some of its tasks, was
/// lost.
pub(crate) fn executor_lost_reason(executor: &str) -> String {
    format!(
        "{EXECUTOR_LOST_FAILURE} (executor {executor} was lost while the job ran, with tasks \
         and shuffle output of the job): Ballista 55 can recompute lost shuffle output \
         wrongly, so the job fails rather than risk wrong results; run it again"
    )
}

/// Why a job fails whose graph shows Ballista recovered from lost shuffle output (a task
/// whose result was lost with its executor, or a failed fetch), if it does.
pub(crate) fn recovery_reason(graph: &dyn ExecutionGraph) -> Option<String> {
    use ballista_core::serde::protobuf::failed_task::FailedReason;
    use ballista_core::serde::protobuf::task_status::Status;
    let mut lost_executor = None;
    for stage in graph.stages().values() {
        let tasks = match stage {
            ExecutionStage::Running(s) => &s.task_infos,
            ExecutionStage::Successful(s) => &s.task_infos,
            ExecutionStage::Failed(s) => &s.task_infos,
            ExecutionStage::UnResolved(_) | ExecutionStage::Resolved(_) => continue,
        };
        for task in tasks {
            let Status::Failed(failed) = &task.task_status else {
                continue;
            };
            match &failed.failed_reason {
                Some(FailedReason::FetchPartitionError(f)) => {
                    return Some(format!(
                        "{FETCH_FAILED} (a task could not fetch shuffle output of stage {} \
                         from executor {}): Ballista 55 can recompute lost shuffle output \
                         wrongly, so the job fails rather than risk wrong results; run it \
                         again",
                        f.map_stage_id, f.executor_id
                    ));
                }
                Some(FailedReason::ResultLost(_) | FailedReason::ExecutorLost(_)) => {
                    lost_executor.get_or_insert_with(|| {
                        failed
                            .error
                            .split_whitespace()
                            .skip_while(|w| *w != "Executor")
                            .nth(1)
                            .unwrap_or("?")
                            .to_string()
                    });
                }
                _ => {}
            }
        }
    }
    lost_executor.map(|executor| executor_lost_reason(&executor))
}

/// A copy of the ended job `graph`, failed with `reason`.
pub(crate) fn failed_with(graph: &ExecutionGraphBox, reason: String) -> ExecutionGraphBox {
    use ballista_core::serde::protobuf::{FailedJob, job_status::Status};
    let (queued_at, started_at, ended_at) = match &graph.status().status {
        Some(Status::Failed(f)) => (f.queued_at, f.started_at, f.ended_at),
        Some(Status::Successful(s)) => (s.queued_at, s.started_at, s.ended_at),
        Some(Status::Running(r)) => (r.queued_at, r.started_at, 0),
        Some(Status::Queued(q)) => (q.queued_at, 0, 0),
        None => (0, 0, 0),
    };
    let mut status = graph.status().clone();
    status.status = Some(Status::Failed(FailedJob {
        error: reason,
        queued_at,
        started_at,
        ended_at,
    }));
    let mut failed = graph.cloned();
    failed.update_status(status);
    failed
}

/// The state name of a stage, as the reason shows it.
fn stage_state(stage: &ExecutionStage) -> &'static str {
    match stage {
        ExecutionStage::UnResolved(_) => "unresolved",
        ExecutionStage::Resolved(_) => "resolved",
        ExecutionStage::Running(_) => "running",
        ExecutionStage::Successful(_) => "successful",
        ExecutionStage::Failed(_) => "failed",
    }
}

/// Whether the job whose graph is `graph` is stuck, given the executors the scheduler
/// has now.
pub(crate) fn stuck(graph: &ExecutionGraphBox, executors: &HashSet<String>) -> Option<Stuck> {
    let running = graph.running_tasks();
    if running.is_empty() {
        if graph.available_tasks() > 0 {
            return executors.is_empty().then_some(Stuck::NoExecutors);
        }
        let mut stages: Vec<(usize, &'static str)> = graph
            .stages()
            .iter()
            .map(|(id, s)| (*id, stage_state(s)))
            .collect();
        stages.sort_unstable();
        let stages = stages
            .iter()
            .map(|(id, s)| format!("{id} {s}"))
            .collect::<Vec<_>>()
            .join(", ");
        return Some(Stuck::NothingToRun { stages });
    }
    if running.iter().all(|t| !executors.contains(&t.executor_id)) {
        let mut lost: Vec<String> = running.into_iter().map(|t| t.executor_id).collect();
        lost.sort();
        lost.dedup();
        return Some(Stuck::OnLostExecutors { executors: lost });
    }
    None
}

/// Watches `scheduler`'s running jobs until the scheduler stops (see the module's
/// documentation): gives back task slots no task holds, fails at once each job an
/// executor's loss hit, and fails each job stuck for longer than `times.grace`.
pub(crate) async fn guard_jobs(
    scheduler: SchedulerServer<LogicalPlanNode, PhysicalPlanNode>,
    observer: Arc<ClusterObserver>,
    times: GuardTimes,
) {
    // since when each job has been seen stuck
    let mut since: HashMap<JobId, Instant> = HashMap::new();
    // the slots held (by executor) when the previous look found tasks waiting and none
    // running anywhere
    let mut idle_before: Option<Vec<(String, u32)>> = None;
    let mut ticks = tokio::time::interval(times.period);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticks.tick().await;
        let state = &scheduler.state;
        // (a failed read is no reason to think the executors gone: look again later)
        let Ok(executors) = state.executor_manager.get_executors_state().await else {
            continue;
        };
        let executors: HashSet<String> = executors.into_iter().map(|(m, _, _)| m.id).collect();
        let jobs = state.task_manager.get_running_job_cache();
        since.retain(|job, _| jobs.contains_key(job));
        let mut any_running = false;
        let mut any_waiting = false;
        let mut stuck_jobs = Vec::new();
        for (job_id, info) in jobs.iter() {
            let graph = info.execution_graph.read().await;
            any_running |= !graph.running_tasks().is_empty();
            any_waiting |= graph.available_tasks() > 0;
            match stuck(&graph, &executors) {
                Some(found) => stuck_jobs.push((job_id.clone(), found)),
                None => {
                    since.remove(job_id);
                }
            }
        }
        // with no task running anywhere, a slot still bound is held by no task: Ballista
        // lost count of it (its refund is skipped for a task whose stage was rolled back
        // when an executor was lost); and tasks waiting with slots free wait for ever
        // when the scheduler missed its cue to offer them (a status update it failed to
        // apply offers nothing)
        let idle = if any_running || !any_waiting {
            None
        } else {
            let mut held: Vec<(String, u32)> = observer
                .slots()
                .into_iter()
                .filter(|(id, _)| executors.contains(id))
                .map(|(id, s)| {
                    let held = (i64::from(s.total) - s.free).max(0);
                    (id, u32::try_from(held).unwrap_or(s.total))
                })
                .collect();
            held.sort();
            Some(held)
        };
        if idle.is_some() && idle == idle_before {
            if let Some(held) = &idle {
                offer_slots(&scheduler, held).await;
            }
            idle_before = None;
        } else {
            idle_before = idle;
        }
        // a job an executor's loss hit fails now, before Ballista's recovery can hang it
        // or give wrong results (its reason is the loss: see `saved_outcome`)
        for (job_id, executor) in observer.jobs_hit_by_loss() {
            let job_id = JobId::new(job_id);
            if !jobs.contains_key(&job_id) {
                continue;
            }
            // recorded first: the job is cancelled once
            observer.job_failed_by_guard(&job_id, executor_lost_reason(&executor));
            if let Err(e) = scheduler.cancel_job(job_id.clone()).await {
                eprintln!("error: cannot fail job {job_id}: {e}");
            }
        }
        for (job_id, found) in stuck_jobs {
            let first_seen = *since.entry(job_id.clone()).or_insert_with(Instant::now);
            if first_seen.elapsed() < times.grace {
                continue;
            }
            since.remove(&job_id);
            observer.job_failed_by_guard(&job_id, found.reason());
            if let Err(e) = scheduler.cancel_job(job_id.clone()).await {
                eprintln!("error: cannot fail the stuck job {job_id}: {e}");
            }
        }
    }
}

/// Gives the `held` slots (by executor) back to their executors and has the scheduler
/// offer every executor's free slots to the tasks waiting (an empty status update from
/// an executor makes it do so).
async fn offer_slots(
    scheduler: &SchedulerServer<LogicalPlanNode, PhysicalPlanNode>,
    held: &[(String, u32)],
) {
    use ballista_core::serde::protobuf::UpdateTaskStatusParams;
    use ballista_core::serde::protobuf::scheduler_grpc_server::SchedulerGrpc;
    let lost_count: Vec<(String, u32)> = held.iter().filter(|(_, n)| *n > 0).cloned().collect();
    if !lost_count.is_empty()
        && let Err(e) = scheduler
            .state
            .executor_manager
            .unbind_tasks(lost_count)
            .await
    {
        eprintln!("error: cannot give back task slots no task holds: {e}");
        return;
    }
    for (executor_id, _) in held.iter().take(1) {
        let poke = tonic::Request::new(UpdateTaskStatusParams {
            executor_id: executor_id.clone(),
            task_status: Vec::new(),
        });
        if let Err(e) = SchedulerGrpc::update_task_status(scheduler, poke).await {
            eprintln!("error: cannot offer executor {executor_id}'s slots: {e}");
        }
    }
}
