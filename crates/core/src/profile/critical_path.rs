//! The critical path: the chain of stages and tasks that bounded a query's wall time.
//!
//! It starts at the stage that produced the query's output, at the task of that stage
//! that finished last; from a stage it goes to the input stage that finished last (the
//! one the stage waited on longest), at that stage's last task, until a stage with no
//! input stage. Each step names the operator that took most of its task's own CPU (and,
//! for a join, the phase that took most of the join's).

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
    /// The operator of the stage with the most self CPU in that task (`None` when the
    /// task measured none).
    pub hottest: Option<HottestOperator>,
}

/// The operator that took most of a task's own CPU.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HottestOperator {
    /// Its node id.
    pub node_id: usize,
    /// Its name.
    pub name: String,
    /// Its share of the task's self CPU, in percent.
    pub cpu_percent: u8,
    /// For a join, the phase that took most of its CPU in the task, in words
    /// (`hash probe`), with that phase's share of the join's CPU in percent.
    pub phase: Option<(String, u8)>,
}

impl std::fmt::Display for HottestOperator {
    /// `61% #13 HashJoinExec (hash probe 90%)`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}% #{} {}", self.cpu_percent, self.node_id, self.name)?;
        if let Some((phase, share)) = &self.phase {
            write!(f, " ({phase} {share}%)")?;
        }
        Ok(())
    }
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
    fn hottest_operator(&self, stage: &StageProfile, task_id: u64) -> Option<HottestOperator> {
        let in_task = |node: &ProfileNode, metric: &str| -> i64 {
            node.metric(metric).map_or(0, |m| {
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
            .map(|n| (n, in_task(n, names::SELF_CPU_NANOS)))
            .collect();
        let total: i64 = nodes.iter().map(|(_, cpu)| cpu).sum();
        let (node, cpu) = nodes
            .into_iter()
            .max_by_key(|(n, cpu)| (*cpu, std::cmp::Reverse(n.id)))?;
        if total <= 0 {
            return None;
        }
        // a join's phases split its own CPU: the larger names where it went
        let phase = names::JOIN_PHASE_PREFIXES
            .iter()
            .flat_map(|(build, probe)| [*build, *probe])
            .map(|prefix| (prefix, in_task(node, &format!("{prefix}CpuNanos"))))
            .filter(|(_, phase_cpu)| *phase_cpu > 0)
            .max_by_key(|(_, phase_cpu)| *phase_cpu)
            .map(|(prefix, phase_cpu)| {
                let phases: i64 = names::JOIN_PHASE_PREFIXES
                    .iter()
                    .flat_map(|(build, probe)| [*build, *probe])
                    .map(|p| in_task(node, &format!("{p}CpuNanos")))
                    .sum();
                (
                    crate::format::camel_words(prefix),
                    (phase_cpu * 100 / phases.max(1)) as u8,
                )
            });
        Some(HottestOperator {
            node_id: node.id,
            name: node.name.clone(),
            cpu_percent: (cpu * 100 / total) as u8,
            phase,
        })
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
