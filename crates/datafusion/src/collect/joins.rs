//! A join's metrics by phase (`hashBuild*`, `hashProbe*`, ...) and the projections around
//! it (`buildPreProjection*`, `streamPreProjection*`, `postProjection*`).

use qprof_core::catalog::{self, PhaseCondition, SharedText};
use qprof_core::format;
use qprof_core::metric::TaskValue;
use qprof_core::phases::{JoinPhase, PhaseSnapshot};
use qprof_core::profile::{NodeMetric, ProfileNode, names};

use super::reading::TaskOf;
use crate::joins::JoinShape;
use qprof_core::metric::saturating_i64;

/// The phases of one join task, by partition (`None`: spawned work).
pub(super) type PhaseReading = (Option<usize>, [PhaseSnapshot; 2]);

/// The metrics of both phases of a join, task by task, as the catalog lists them
/// ([`catalog::JOIN_PHASE_METRICS`]).
///
/// A join that reads both inputs together gets its inputs' rows only (and, if it holds
/// one side, that side's peak memory and spilling); its time is not split. Spill figures
/// appear when the join spilled.
pub(super) fn phase_metrics(
    shape: &JoinShape,
    readings: &[PhaseReading],
    task_of: TaskOf<'_>,
) -> Vec<NodeMetric> {
    let spilled = readings
        .iter()
        .any(|(_, phases)| phases.iter().any(|p| p.spill.files > 0));
    let mut out = Vec::new();
    for phase in JoinPhase::ALL {
        let prefix = shape.prefix(phase);
        let holds = shape.holds_build_side && (shape.sequential || phase == JoinPhase::Build);
        for def in &catalog::JOIN_PHASE_METRICS {
            let has = match def.when {
                PhaseCondition::Always => true,
                PhaseCondition::Sequential => shape.sequential,
                PhaseCondition::HoldsSide => holds,
                PhaseCondition::HoldsSideAndSpilled => holds && spilled,
            };
            if !has {
                continue;
            }
            let values = readings
                .iter()
                .map(|(p, phases)| TaskValue {
                    task: p.and_then(task_of),
                    value: saturating_i64((def.read)(&phases[phase as usize])),
                })
                .collect();
            let name = catalog::shared_text(SharedText::PhaseName, def.suffix, prefix, || {
                format!("{prefix}{}", def.suffix)
            });
            let display =
                catalog::shared_text(SharedText::PhaseDisplay, def.display, prefix, || {
                    def.display.replace("{phase}", &format::camel_words(prefix))
                });
            out.push(NodeMetric::summed(name, display, def.unit.kind(), values));
        }
    }
    out
}

/// The projection metrics of a join, from the `ProjectionExec` directly below each of its
/// sides (pre-projections) and directly above it (post-projection): its own wall time and
/// the batches it evaluated, task by task. Visits the whole tree.
pub fn add_projection_metrics(node: &mut ProfileNode, joins: &[(usize, JoinShape)]) {
    let [build, stream, post] = catalog::JOIN_PROJECTIONS;
    let shape_of = |id: usize| joins.iter().find(|(j, _)| *j == id).map(|(_, s)| *s);
    if let Some(shape) = shape_of(node.id) {
        for (side, projection) in [(shape.build_child, build), (shape.probe_child, stream)] {
            if let Some(child) = node.children.get(side).filter(|c| is_projection(c)) {
                let metrics = projection_metrics(child, projection);
                node.metrics.extend(metrics);
            }
        }
    }
    if is_projection(node)
        && let [child] = node.children.as_slice()
        && shape_of(child.id).is_some()
    {
        let metrics = projection_metrics(node, post);
        node.children[0].metrics.extend(metrics);
    }
    for child in &mut node.children {
        add_projection_metrics(child, joins);
    }
}

fn is_projection(node: &ProfileNode) -> bool {
    node.name == "ProjectionExec"
}

/// The catalog's metrics of a join's `(prefix, words)` projection, copied from its node.
fn projection_metrics(projection: &ProfileNode, (prefix, words): (&str, &str)) -> Vec<NodeMetric> {
    let [wall, count] = catalog::JOIN_PROJECTION_METRICS;
    [
        (names::SELF_WALL_NANOS, wall),
        (names::OUTPUT_VECTORS, count),
    ]
    .into_iter()
    .filter_map(|(from, (suffix, display, _))| {
        let metric = projection.metrics.iter().find(|m| m.name == from)?;
        Some(NodeMetric::summed(
            format!("{prefix}{suffix}"),
            display.replace("{projection}", words),
            metric.kind,
            metric.tasks.clone(),
        ))
    })
    .collect()
}
