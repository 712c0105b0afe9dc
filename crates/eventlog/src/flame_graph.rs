//! A query's self CPU as a flame graph: query → stage → operator → function, as folded
//! stacks (one line per frame path and its microseconds, the input of every flame-graph
//! tool) and as an interactive SVG drawn by inferno.
//!
//! An operator's own frame holds its self CPU less the time of the functions it
//! evaluated, which sit above it as their own frames; so each frame's width is time spent
//! in it and in nothing below it in the plan. Where the query's native stacks were
//! sampled, an operator's self CPU is spread instead over the stacks its samples had, in
//! proportion to their counts: the operator's frame expands into the functions that ran.
//!
//! An operator's own flame graph draws its sampled stacks alone, in samples. Two runs of
//! a query make a differential flame graph: the second run's frames, colored by how much
//! each grew or shrank since the first.

use std::collections::HashMap;

use qprof_core::profile::names;

use qprof_core::stacks::StackSamples;

use crate::profile_diff::{DEFAULT_REGRESSION_THRESHOLD_PERCENT, diff_queries};
use crate::profile_json::{NodeJson, QueryJson};

/// Errors drawing a flame graph.
#[derive(Debug, thiserror::Error)]
pub(crate) enum FlameGraphError {
    /// The query has no CPU time to draw (e.g. it failed before any operator ran).
    #[error("query {0} has no operator CPU time to draw")]
    Empty(usize),
    /// The operator has no sampled stacks (sampling was off, or it never ran on a CPU
    /// when a sample was taken).
    #[error("operator #{node} of query {query} has no sampled stacks")]
    NoSamples {
        /// The query.
        query: usize,
        /// The operator.
        node: usize,
    },
    /// inferno could not draw the stacks.
    #[error("cannot draw the flame graph: {0}")]
    Draw(#[from] std::io::Error),
}

/// Longest frame label; longer expressions are cut with an ellipsis.
const MAX_LABEL_CHARS: usize = 90;

/// The folded stacks of `query`'s self CPU, in microseconds, one line per frame with time
/// of its own, in plan order: `query 3;stage 4;HashJoinExec #6;fn sum(x) 1234`.
pub(crate) fn folded_stacks(query: &QueryJson) -> Vec<String> {
    let root = format!("query {}", query.id);
    folded_under(query, |node| {
        let stage = node
            .stage_id
            .map_or_else(|| "no stage".to_string(), |s| format!("stage {s}"));
        format!("{root};{stage};{}", operator_label(node))
    })
}

/// The folded stacks of `query`'s self CPU with each operator's frames under the path
/// `operator_path` gives it.
fn folded_under(query: &QueryJson, operator_path: impl Fn(&NodeJson) -> String) -> Vec<String> {
    let mut lines = Vec::new();
    let samples = query.stack_samples.as_ref().map(StackSamples::from);
    for node in query.plan.iter() {
        let operator = operator_path(node);
        let mut functions_nanos = 0u64;
        let mut function_lines = Vec::new();
        for f in &node.functions {
            functions_nanos += f.cpu_nanos;
            if let Some(micros) = micros(f.cpu_nanos) {
                function_lines.push(format!("{operator};fn {} {micros}", label(&f.expression)));
            }
        }
        let self_cpu = node
            .metrics
            .get(names::SELF_CPU_NANOS)
            .map_or(0, |m| m.value.max(0) as u64);
        let stacks = samples
            .as_ref()
            .map(|s| s.folded(Some(node.id), |_| String::new()))
            .unwrap_or_default();
        let sampled: u64 = stacks
            .iter()
            .map(|(_, count)| *count)
            .fold(0, u64::saturating_add);
        if sampled > 0 {
            // the functions the operator evaluated are in its stacks
            for (stack, count) in &stacks {
                let share = u128::from(self_cpu) * u128::from(*count) / u128::from(sampled);
                if let Some(micros) = micros(share as u64) {
                    let frames: Vec<String> = stack.split(';').map(label).collect();
                    lines.push(format!("{operator};{} {micros}", frames.join(";")));
                }
            }
            continue;
        }
        if let Some(micros) = micros(self_cpu.saturating_sub(functions_nanos)) {
            lines.push(format!("{operator} {micros}"));
        }
        lines.extend(function_lines);
    }
    lines
}

/// `query`'s flame graph as a standalone SVG (with inferno's script: click to zoom,
/// Ctrl-F to search).
pub(crate) fn flame_graph_svg(query: &QueryJson) -> Result<String, FlameGraphError> {
    let lines = folded_stacks(query);
    if lines.is_empty() {
        return Err(FlameGraphError::Empty(query.id));
    }
    let mut options = inferno::flamegraph::Options::default();
    options.title = format!(
        "Query {}: self CPU by stage, operator and function",
        query.id
    );
    options.subtitle = Some(format!(
        "{} operators, {} in all",
        query.plan.iter().count(),
        qprof_core::format::human_nanos(total_self_cpu(query))
    ));
    options.count_name = "µs".to_string();
    options.name_type = "Frame:".to_string();
    // colors follow the frame's name, so two runs of a query look alike
    options.hash = true;
    options.deterministic = true;
    // a narrow frame keeps the start of its name: the operator, not its id
    options.text_truncate_direction = inferno::flamegraph::TextTruncateDirection::Right;
    let mut svg = Vec::new();
    inferno::flamegraph::from_lines(&mut options, lines.iter().map(String::as_str), &mut svg)?;
    Ok(String::from_utf8_lossy(&svg).into_owned())
}

/// Two runs of a query as a differential flame graph (SVG): each frame as wide as its self
/// CPU in the second run (`after`), red where it grew since the first (`before`), blue
/// where it shrank, the deeper the color the larger the change. Operators are paired as
/// [`diff_queries`] pairs them and named by their ids in the second run; stages are left
/// out, as a changed plan numbers them differently.
pub(crate) fn differential_flame_graph_svg(
    before: &QueryJson,
    after: &QueryJson,
) -> Result<String, FlameGraphError> {
    let diff = diff_queries(before, after, DEFAULT_REGRESSION_THRESHOLD_PERCENT);
    let twin_of: HashMap<usize, usize> = diff
        .operators
        .iter()
        .filter_map(|o| Some((o.before_id?, o.id)))
        .collect();
    let before_lines = folded_under(before, |node| match twin_of.get(&node.id) {
        Some(&id) => format!("{} #{id}", label(&node.name)),
        None => format!("{} (first run only)", operator_label(node)),
    });
    let after_lines = folded_under(after, operator_label);
    if after_lines.is_empty() {
        return Err(FlameGraphError::Empty(after.id));
    }
    let mut paired = Vec::new();
    inferno::differential::from_readers(
        inferno::differential::Options::default(),
        before_lines.join("\n").as_bytes(),
        after_lines.join("\n").as_bytes(),
        &mut paired,
    )?;
    let paired = String::from_utf8_lossy(&paired);
    let mut options = inferno::flamegraph::Options::default();
    options.title = format!(
        "Query {} against query {}: self CPU by operator and function",
        after.id, before.id
    );
    options.subtitle = Some(format!(
        "widths: the second run ({}); red grew, blue shrank since the first ({})",
        qprof_core::format::human_nanos(total_self_cpu(after)),
        qprof_core::format::human_nanos(total_self_cpu(before)),
    ));
    options.count_name = "µs".to_string();
    options.name_type = "Frame:".to_string();
    options.deterministic = true;
    options.text_truncate_direction = inferno::flamegraph::TextTruncateDirection::Right;
    let mut svg = Vec::new();
    inferno::flamegraph::from_lines(&mut options, paired.lines(), &mut svg)?;
    Ok(String::from_utf8_lossy(&svg).into_owned())
}

/// Operator `node_id`'s sampled stacks as a standalone SVG flame graph, in samples.
pub(crate) fn operator_flame_graph_svg(
    query: &QueryJson,
    node_id: usize,
) -> Result<String, FlameGraphError> {
    let no_samples = || FlameGraphError::NoSamples {
        query: query.id,
        node: node_id,
    };
    let samples = StackSamples::from(query.stack_samples.as_ref().ok_or_else(no_samples)?);
    let lines: Vec<String> = samples
        .folded(Some(node_id), |_| String::new())
        .into_iter()
        .map(|(stack, count)| {
            let frames: Vec<String> = stack.split(';').map(label).collect();
            format!("{} {count}", frames.join(";"))
        })
        .collect();
    if lines.is_empty() {
        return Err(no_samples());
    }
    let operator = query
        .plan
        .iter()
        .find(|n| n.id == node_id)
        .map_or_else(|| format!("#{node_id}"), operator_label);
    let total: u64 = samples
        .stacks
        .iter()
        .filter(|s| s.node_id == node_id)
        .map(|s| s.count)
        .fold(0, u64::saturating_add);
    let mut options = inferno::flamegraph::Options::default();
    options.title = format!("Query {}, {operator}: sampled stacks", query.id);
    options.subtitle = Some(format!(
        "{total} samples, ~{} of CPU",
        qprof_core::format::human_nanos(total.saturating_mul(samples.period_nanos))
    ));
    options.count_name = "samples".to_string();
    options.name_type = "Function:".to_string();
    options.hash = true;
    options.deterministic = true;
    options.text_truncate_direction = inferno::flamegraph::TextTruncateDirection::Left;
    let mut svg = Vec::new();
    inferno::flamegraph::from_lines(&mut options, lines.iter().map(String::as_str), &mut svg)?;
    Ok(String::from_utf8_lossy(&svg).into_owned())
}

fn total_self_cpu(query: &QueryJson) -> u64 {
    query
        .plan
        .iter()
        .filter_map(|n| n.metrics.get(names::SELF_CPU_NANOS))
        .map(|m| m.value.max(0) as u64)
        .fold(0, u64::saturating_add)
}

/// Whole microseconds of `nanos`, if at least one.
fn micros(nanos: u64) -> Option<u64> {
    Some(nanos / 1_000).filter(|m| *m > 0)
}

fn operator_label(node: &NodeJson) -> String {
    format!("{} #{}", label(&node.name), node.id)
}

/// A frame label: no `;` (the folded format's separator), no line breaks, bounded length.
fn label(text: &str) -> String {
    let clean: String = text
        .chars()
        .map(|c| match c {
            ';' => ',',
            '\n' | '\r' | '\t' => ' ',
            c => c,
        })
        .collect();
    if clean.chars().count() <= MAX_LABEL_CHARS {
        clean
    } else {
        let mut cut: String = clean.chars().take(MAX_LABEL_CHARS - 1).collect();
        cut.push('…');
        cut
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile_json::ProfilesDocument;
    use qprof_core::profile::fixtures::sample;

    fn query() -> QueryJson {
        ProfilesDocument::new(&[sample()]).queries.remove(0)
    }

    #[test]
    fn frames_hold_their_own_time_and_add_up_to_the_query() {
        let q = query();
        let lines = folded_stacks(&q);
        insta::assert_snapshot!(lines.join("\n"));
        let total: u64 = lines
            .iter()
            .map(|l| l.rsplit_once(' ').unwrap().1.parse::<u64>().unwrap())
            .sum();
        // every microsecond of self CPU is in exactly one frame (each frame rounds down)
        let whole = total_self_cpu(&q) / 1_000;
        assert!(
            total <= whole && whole - total < lines.len() as u64,
            "{total} vs {whole}"
        );
    }

    #[test]
    fn labels_cannot_break_the_folded_format() {
        assert_eq!(label("a;b\nc"), "a,b c");
        let long = "x".repeat(200);
        assert_eq!(label(&long).chars().count(), MAX_LABEL_CHARS);
    }

    #[test]
    fn the_svg_names_every_operator_and_function() {
        let q = query();
        let svg = flame_graph_svg(&q).unwrap();
        assert!(svg.starts_with("<?xml"), "{}", &svg[..100]);
        for node in q.plan.iter() {
            assert!(svg.contains(&operator_label(node)), "{}", node.name);
        }
        assert!(svg.contains("fn regexp_like"));
    }

    /// The `<title>` of the frame whose text starts with `frame`.
    fn frame_title<'a>(svg: &'a str, frame: &str) -> &'a str {
        let at = svg
            .find(&format!("<title>{frame} ("))
            .unwrap_or_else(|| panic!("no frame {frame}"));
        let title = &svg[at + "<title>".len()..];
        &title[..title.find("</title>").unwrap()]
    }

    #[test]
    fn the_differential_graph_colors_what_grew_since_the_first_run() {
        let before = query();
        let mut after = query();
        // the second run: the root operator's self CPU tripled, every other unchanged
        let root = after.plan.id;
        let grown = after
            .plan
            .metrics
            .0
            .iter_mut()
            .find(|(name, _)| name == names::SELF_CPU_NANOS)
            .expect("the root has self CPU");
        let was = grown.1.value;
        grown.1.value = was * 3;
        let svg = differential_flame_graph_svg(&before, &after).unwrap();
        let root_label = operator_label(&after.plan);
        let title = frame_title(&svg, &root_label);
        assert!(title.contains("; +"), "{root} grew: {title}");
        for node in after.plan.iter().filter(|n| n.id != root) {
            let own = node
                .metrics
                .get(names::SELF_CPU_NANOS)
                .map_or(0, |m| m.value);
            let functions: i64 = node.functions.iter().map(|f| f.cpu_nanos as i64).sum();
            if (own - functions) / 1_000 > 0 {
                let title = frame_title(&svg, &operator_label(node));
                assert!(
                    title.ends_with("; 0.00%)"),
                    "{} did not change: {title}",
                    node.id
                );
            }
        }
    }

    #[test]
    fn a_query_without_cpu_time_is_an_error() {
        let mut q = query();
        q.plan.metrics.0.clear();
        q.plan.children.clear();
        assert!(matches!(
            flame_graph_svg(&q),
            Err(FlameGraphError::Empty(6))
        ));
    }
}
