//! A query's sampled stacks: the samples of every task of every wrapped operator, taken
//! from the process's sampler when the query ends.

use std::collections::HashMap;
use std::sync::Arc;

use datafusion::physical_plan::ExecutionPlan;
use qprof_core::metric::TaskRef;
use qprof_core::profile::QueryProfile;
use qprof_core::stacks::{SampleKey, SamplingSession, StackSamples};

use crate::exec::ProfiledExec;

/// Tells the stack sampler, once per process, the functions through which qprof's wrappers
/// enter an operator's code, so that each sample's walk stops at its operator's entry.
pub(crate) fn register_operator_entries() {
    static REGISTERED: std::sync::Once = std::sync::Once::new();
    REGISTERED.call_once(|| {
        crate::exec::register_operator_entries();
        crate::spawn::register_operator_entries();
    });
}

/// Takes from `session` the samples of `plan`'s operator tasks, each named by the task the
/// profile gave its partition (work an operator spawned outside its partitions has none).
pub(crate) fn take_stack_samples(
    session: &SamplingSession,
    plan: &Arc<dyn ExecutionPlan>,
    profile: &QueryProfile,
) -> StackSamples {
    let stage_of: HashMap<usize, u32> = profile
        .plan
        .iter()
        .filter_map(|node| Some((node.id, node.stage_id?)))
        .collect();
    let task_of: HashMap<(u32, u32), TaskRef> = profile
        .stages
        .iter()
        .flat_map(|stage| {
            stage.tasks.iter().map(move |task| {
                (
                    (stage.id, task.partition),
                    TaskRef {
                        stage_id: stage.id,
                        stage_attempt: 0,
                        task_id: task.task_id,
                        partition: task.partition,
                    },
                )
            })
        })
        .collect();
    let mut keys: Vec<(SampleKey, usize, Option<TaskRef>)> = Vec::new();
    let mut call_sites: Option<HashMap<u64, String>> = None;
    let mut pending = vec![plan];
    while let Some(plan) = pending.pop() {
        if let Some(exec) = ProfiledExec::of(plan.as_ref()) {
            // every operator of the plan shares the plan's function call sites
            call_sites.get_or_insert_with(|| {
                exec.counters()
                    .plan
                    .sites()
                    .iter()
                    .map(|site| {
                        let text = match site.expression() {
                            "" => site.name().to_string(),
                            expression => expression.to_string(),
                        };
                        (site.id(), text)
                    })
                    .collect()
            });
            let node = exec.node_id();
            let stage = stage_of.get(&node).copied();
            for (partition, task) in exec.task_counters() {
                let task_ref = stage.and_then(|s| task_of.get(&(s, partition as u32)).copied());
                keys.push((task.sample_key(), node, task_ref));
            }
            keys.push((exec.counters().spawned.sample_key(), node, None));
        }
        pending.extend(plan.children());
    }
    StackSamples::take(
        session,
        &keys,
        &call_sites.unwrap_or_default(),
        is_operator_entry,
    )
}

/// Whether `function` is a frame through which qprof calls into an operator's own code
/// (a wrapped stream's poll or drop, an operator's `execute`, a spawned task's poll): what
/// runs below it, up to the next such frame, is that operator's. Each is reached through a
/// trait object, so it is never inlined and keeps its full name.
fn is_operator_entry(function: &str) -> bool {
    function.contains("qprof_datafusion::exec::Profiled")
        || function.contains("qprof_datafusion::spawn::")
}
