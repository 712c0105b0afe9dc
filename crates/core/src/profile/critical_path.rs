//! The critical path: the chain of stages and tasks that bounded a query's wall time.
//!
//! It starts at the stage that produced the query's output, at the task of that stage
//! that finished last; from a stage it goes to the input stage that finished last (the
//! one the stage waited on longest), at that stage's last task, until a stage with no
//! input stage. Each step names the operator that took most of its task's own CPU.

use std::collections::{BTreeMap, BTreeSet};

use super::{ProfileNode, QueryProfile, StageProfile, TaskProfile, names};

/// One step of the critical path: a stage's task that finished last.
#[derive(Debug, Clone, PartialEq)]
pub struct CriticalStep {
    /// The stage.
    pub stage_id: u32,
    /// Its task that finished last.
    pub task_id: u64,
    /// The partition the task computed.
    pub partition: u32,
    /// When the task started, ms since the Unix epoch.
    pub start_epoch_millis: u64,
    /// When it finished, ms since the Unix epoch.
    pub finish_epoch_millis: u64,
    /// Its own part of the path: its wall time less the time the next step (its input's
    /// last task) ran beside it, in ms.
    pub own_millis: u64,
    /// The operator of the stage with the most self CPU in that task, and its share of
    /// the task's self CPU in percent (`None` when the task measured none).
    pub hottest: Option<(usize, String, u8)>,
}

impl CriticalStep {
    /// The task's wall time, in ms.
    pub fn millis(&self) -> u64 {
        self.finish_epoch_millis
            .saturating_sub(self.start_epoch_millis)
    }
}

impl QueryProfile {
    /// The query's critical path, from the stage that produced its output back to a stage
    /// with no input stage; empty when no stage has a finished task.
    pub fn critical_path(&self) -> Vec<CriticalStep> {
        let stage_of: BTreeMap<usize, u32> = self
            .plan
            .iter()
            .filter_map(|n| Some((n.id, n.stage_id?)))
            .collect();
        // the stages each stage reads: a child operator in another stage
        let mut inputs: BTreeMap<u32, BTreeSet<u32>> = BTreeMap::new();
        for node in self.plan.iter() {
            let Some(stage) = node.stage_id else {
                continue;
            };
            for child in &node.children {
                if let Some(&child_stage) = stage_of.get(&child.id)
                    && child_stage != stage
                {
                    inputs.entry(stage).or_default().insert(child_stage);
                }
            }
        }
        let stages: BTreeMap<u32, &StageProfile> = self.stages.iter().map(|s| (s.id, s)).collect();
        let mut path = Vec::new();
        let mut next = self.plan.stage_id;
        let mut seen = BTreeSet::new();
        while let Some(stage_id) = next {
            if !seen.insert(stage_id) {
                break;
            }
            let Some(stage) = stages.get(&stage_id) else {
                break;
            };
            let Some(last) = last_task(stage) else {
                break;
            };
            path.push(CriticalStep {
                stage_id,
                task_id: last.task_id,
                partition: last.partition,
                start_epoch_millis: last.start_epoch_millis,
                finish_epoch_millis: last.finish_epoch_millis,
                own_millis: 0,
                hottest: self.hottest_operator(stage, last.task_id),
            });
            next = inputs.get(&stage_id).and_then(|ids| {
                ids.iter()
                    .filter_map(|id| Some((*id, last_task(stages.get(id)?)?.finish_epoch_millis)))
                    .max_by_key(|&(id, finish)| (finish, std::cmp::Reverse(id)))
                    .map(|(id, _)| id)
            });
        }
        // each step's own time: what its input's last task did not run beside it
        for i in 0..path.len() {
            let overlap = path.get(i + 1).map_or(0, |input| {
                let start = path[i].start_epoch_millis.max(input.start_epoch_millis);
                let end = path[i].finish_epoch_millis.min(input.finish_epoch_millis);
                end.saturating_sub(start)
            });
            path[i].own_millis = path[i].millis().saturating_sub(overlap);
        }
        path
    }

    /// The operator of `stage` with the most self CPU in task `task_id`, with its share.
    fn hottest_operator(&self, stage: &StageProfile, task_id: u64) -> Option<(usize, String, u8)> {
        let in_task = |node: &ProfileNode| -> i64 {
            node.metric(names::SELF_CPU_NANOS).map_or(0, |m| {
                m.tasks
                    .iter()
                    .filter(|t| t.task.is_some_and(|t| t.task_id == task_id))
                    .map(|t| t.value.max(0))
                    .sum()
            })
        };
        let nodes: Vec<(&ProfileNode, i64)> = self
            .plan
            .iter()
            .filter(|n| stage.node_ids.contains(&n.id))
            .map(|n| (n, in_task(n)))
            .collect();
        let total: i64 = nodes.iter().map(|(_, cpu)| cpu).sum();
        let (node, cpu) = nodes
            .into_iter()
            .max_by_key(|(n, cpu)| (*cpu, std::cmp::Reverse(n.id)))?;
        (total > 0).then(|| (node.id, node.name.clone(), (cpu * 100 / total) as u8))
    }
}

/// The stage's task that finished last (the latest attempt of a partition counts).
fn last_task(stage: &StageProfile) -> Option<&TaskProfile> {
    stage
        .tasks
        .iter()
        .filter(|t| t.finish_epoch_millis > 0)
        .max_by_key(|t| (t.finish_epoch_millis, std::cmp::Reverse(t.task_id)))
}
