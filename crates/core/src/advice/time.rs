//! Rules about where the query's time went: `skewed-tasks`, `slow-planning`, and the
//! descriptive `bottleneck` and `critical-path`.

use super::{Cost, CostKind, Finding, Severity, listed, num, pct, query_cpu, thresholds, value};
use crate::format;
use crate::profile::{QueryProfile, names};

/// `bottleneck` (always `info`): one operator takes most of the query's CPU. Where the
/// time went, not why: a warning about the same operator replaces it.
pub(super) fn bottleneck(profile: &QueryProfile) -> Option<Finding> {
    let total = query_cpu(profile);
    let top = profile.top_by_self_cpu().into_iter().next()?;
    let own = value(top, names::SELF_CPU_NANOS);
    let share = pct(own, total);
    if total < thresholds::MATERIAL_MIN_NANOS || share < thresholds::BOTTLENECK_PERCENT {
        return None;
    }
    Some(Finding {
        rule: "bottleneck",
        severity: Severity::Info,
        node_id: Some(top.id),
        stage_id: top.stage_id,
        node_ids: vec![top.id],
        stage_ids: top.stage_id.into_iter().collect(),
        message: format!(
            "#{} {} is the bottleneck: {share}% of the query's operator CPU ({} of {})",
            top.id,
            top.name,
            format::human_nanos(own),
            format::human_nanos(total)
        ),
        cost: Cost::new(CostKind::Cpu, own, total),
        action: "look at this operator first: its metrics and the functions it calls say what it spent the time on".to_string(),
        numbers: vec![(names::SELF_CPU_NANOS, num(own)), ("queryCpuNanos", num(total))],
    })
}

/// One skewed stage: its id, its tasks, its slowest and median task (ms).
struct Skew {
    stage: u32,
    tasks: usize,
    max: u64,
    median: u64,
}

/// `skewed-tasks`: stages whose slowest task ran far longer than their median task. It
/// cost the wall time the stage waited on its slowest task beyond the median.
pub(super) fn skewed_tasks(profile: &QueryProfile) -> Option<Finding> {
    let mut skews: Vec<Skew> = Vec::new();
    for stage in &profile.stages {
        let mut times: Vec<u64> = stage
            .tasks
            .iter()
            .filter(|t| t.finish_epoch_millis >= t.start_epoch_millis && t.finish_epoch_millis > 0)
            .map(|t| t.finish_epoch_millis - t.start_epoch_millis)
            .collect();
        if times.len() < thresholds::SKEW_MIN_TASKS {
            continue;
        }
        times.sort_unstable();
        let median = times[times.len() / 2];
        let max = times[times.len() - 1];
        if (max as f64) >= thresholds::SKEW_RATIO * (median.max(1) as f64)
            && max - median >= thresholds::SKEW_MIN_EXTRA_MILLIS
        {
            skews.push(Skew {
                stage: stage.id,
                tasks: times.len(),
                max,
                median,
            });
        }
    }
    skews.sort_by_key(|s| std::cmp::Reverse(s.max - s.median));
    let worst = skews.first()?;
    let extra_millis: u64 = skews.iter().map(|s| s.max - s.median).sum();
    let extra = extra_millis
        .saturating_mul(1_000_000)
        .min(profile.duration_nanos.max(1));
    let ms = |v: u64| format::human_nanos(v.saturating_mul(1_000_000));
    let mut message = format!(
        "stage {}: the slowest of its {} tasks ran {:.1}x its median task ({} vs {}): its partitions are skewed",
        worst.stage,
        worst.tasks,
        worst.max as f64 / worst.median.max(1) as f64,
        ms(worst.max),
        ms(worst.median)
    );
    if skews.len() > 1 {
        let others: Vec<String> = skews[1..]
            .iter()
            .map(|s| {
                format!(
                    "{} ({:.1}x)",
                    s.stage,
                    s.max as f64 / s.median.max(1) as f64
                )
            })
            .collect();
        message.push_str(&format!("; so are stages {}", listed(&others)));
    }
    Some(Finding {
        rule: "skewed-tasks",
        severity: Severity::Warning,
        node_id: None,
        stage_id: Some(worst.stage),
        node_ids: Vec::new(),
        stage_ids: skews.iter().map(|s| s.stage).collect(),
        message,
        cost: Cost::new(CostKind::Wall, extra, profile.duration_nanos),
        action: "spread the rows of the heavy keys: a key with more distinct values to partition on, a salted key, or the few hot keys handled apart; more partitions do not split one hot key".to_string(),
        numbers: vec![
            ("maxTaskMillis", num(worst.max)),
            ("medianTaskMillis", num(worst.median)),
            ("tasks", num(worst.tasks as u64)),
            ("stages", num(skews.len() as u64)),
        ],
    })
}

/// `critical-path` (always `info`): for a query of a second or more, the chain of stages
/// that bounded its wall time, and the longest of their last tasks with the operator it
/// spent most in.
pub(super) fn critical_path(profile: &QueryProfile) -> Option<Finding> {
    if profile.duration_nanos < thresholds::CRITICAL_PATH_MIN_NANOS {
        return None;
    }
    let path = profile.critical_path();
    let longest = path
        .iter()
        .max_by_key(|s| (s.own_millis, std::cmp::Reverse(s.stage_id)))?;
    let stages: Vec<String> = path.iter().map(|s| s.stage_id.to_string()).collect();
    let own_nanos = longest.own_millis.saturating_mul(1_000_000);
    let share = pct(own_nanos, profile.duration_nanos);
    let mut message = format!(
        "the query's wall time ran through stage{} {}; the longest step, stage {}'s last task {} ({} of its own, {share}% of the query), ",
        if path.len() == 1 { "" } else { "s" },
        stages.join(" <- "),
        longest.stage_id,
        longest.task_id,
        format::human_nanos(own_nanos),
    );
    match &longest.hottest {
        Some(hottest) => {
            message.push_str(&format!(
                "spent {}% of its CPU in #{} {}",
                hottest.cpu_percent, hottest.node_id, hottest.name
            ));
            if let Some((phase, share)) = &hottest.phase {
                message.push_str(&format!(", {share}% of that in its {phase} phase"));
            }
        }
        None => message.push_str("measured no operator CPU"),
    }
    Some(Finding {
        rule: "critical-path",
        severity: Severity::Info,
        node_id: longest.hottest.as_ref().map(|h| h.node_id),
        stage_id: Some(longest.stage_id),
        node_ids: longest.hottest.iter().map(|h| h.node_id).collect(),
        stage_ids: path.iter().map(|s| s.stage_id).collect(),
        message,
        cost: Cost::new(CostKind::Wall, own_nanos, profile.duration_nanos),
        action: "to shorten the query, shorten this step: the other steps ran beside it"
            .to_string(),
        numbers: vec![
            ("ownMillis", num(longest.own_millis)),
            ("durationNanos", num(profile.duration_nanos)),
            ("steps", num(path.len() as u64)),
        ],
    })
}

/// `slow-planning`: planning took as long as running the query, or longer. It cost the
/// planning's wall time.
pub(super) fn slow_planning(profile: &QueryProfile) -> Option<Finding> {
    let planning = profile.planning.as_ref()?;
    let planned = planning.wall_nanos();
    let executed = profile.duration_nanos.saturating_sub(planned);
    if planned < thresholds::SLOW_PLANNING_MIN_NANOS || planned < executed {
        return None;
    }
    let phase = planning.phases.iter().max_by_key(|p| p.wall_nanos);
    let rule = planning.rules.iter().max_by_key(|r| r.wall_nanos);
    let mut message = format!(
        "planning took {} and running the query {}",
        format::human_nanos(planned),
        format::human_nanos(executed)
    );
    if let Some(phase) = phase {
        message.push_str(&format!(
            ": most in {} ({})",
            phase.phase.as_str(),
            format::human_nanos(phase.wall_nanos)
        ));
    }
    let slowest_rule = rule.filter(|r| r.wall_nanos > 0);
    if let Some(rule) = slowest_rule {
        message.push_str(&format!(
            ", the slowest rule {} ({} in {} calls)",
            rule.name,
            format::human_nanos(rule.wall_nanos),
            rule.calls
        ));
    }
    let action = match slowest_rule {
        Some(rule) if rule.wall_nanos.saturating_mul(2) >= planned => format!(
            "look at the rule {}: it took most of the planning; a prepared statement or a cached plan pays planning once",
            rule.name
        ),
        _ => "plan once and run many times (a prepared statement or a cached plan); a query with fewer expressions or unions plans faster".to_string(),
    };
    Some(Finding {
        rule: "slow-planning",
        severity: Severity::Warning,
        node_id: None,
        stage_id: None,
        node_ids: Vec::new(),
        stage_ids: Vec::new(),
        message,
        cost: Cost::new(CostKind::Wall, planned, profile.duration_nanos),
        action,
        numbers: vec![
            ("planningNanos", num(planned)),
            ("executionNanos", num(executed)),
        ],
    })
}
