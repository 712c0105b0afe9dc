//! The profile as text: a header line, the indented operator tree with each operator's
//! share of CPU and its phase, spill, dynamic-filter and I/O lines, and the top operators.

use std::fmt::Write as _;

use super::*;
use crate::format;
use crate::stacks::StackSamples;

impl QueryProfile {
    /// Operators sorted by self CPU time, largest first.
    pub fn top_by_self_cpu(&self) -> Vec<&ProfileNode> {
        let mut nodes: Vec<&ProfileNode> = self.plan.iter().collect();
        nodes.sort_by_key(|n| std::cmp::Reverse(n.value(names::SELF_CPU_NANOS).unwrap_or(0)));
        nodes
    }

    /// What `qprof run` prints for a query: [`Self::render_text`], then the advisor's
    /// findings.
    pub fn render_report(&self, top: usize) -> String {
        let findings = crate::advice::render_findings(&crate::advice::advise(self));
        format!("{}{findings}", self.render_text(top))
    }

    /// Renders the profile as text: a header line, the operator tree with each operator's
    /// share of the query's CPU, and the `top` operators by self CPU time.
    pub fn render_text(&self, top: usize) -> String {
        let total_self_cpu: i64 = self
            .plan
            .iter()
            .filter_map(|n| n.value(names::SELF_CPU_NANOS))
            .sum();
        let mut out = String::new();
        let _ = writeln!(
            out,
            "query {}: {} row{} in {}, operator cpu {}, {} stage{}",
            self.id,
            format::integer(self.rows as i64),
            if self.rows == 1 { "" } else { "s" },
            format::human_nanos(self.duration_nanos),
            format::human_nanos(total_self_cpu.max(0) as u64),
            self.stages.len(),
            if self.stages.len() == 1 { "" } else { "s" },
        );
        if let Some(planning) = &self.planning {
            let _ = writeln!(out, "{}", planning.summary_line());
        }
        let path = self.critical_path();
        if path.len() > 1 {
            let steps: Vec<String> = path.iter().map(critical_step).collect();
            let _ = writeln!(out, "critical path: {}", steps.join(" <- "));
        }
        render_node(
            &self.plan,
            0,
            total_self_cpu,
            self.stack_samples.as_ref(),
            &mut out,
        );
        if top > 0 {
            let _ = writeln!(out, "top operators by self cpu:");
            for node in self.top_by_self_cpu().into_iter().take(top) {
                let self_cpu = node.value(names::SELF_CPU_NANOS).unwrap_or(0);
                let _ = writeln!(
                    out,
                    "  {:>5}  {:>10}  #{} {}",
                    percent(self_cpu, total_self_cpu),
                    format::human_nanos(self_cpu.max(0) as u64),
                    node.id,
                    node.name
                );
            }
        }
        out
    }
}

fn percent(part: i64, whole: i64) -> String {
    if whole <= 0 {
        return "-".to_string();
    }
    format!("{:.1}%", part as f64 * 100.0 / whole as f64)
}

fn render_node(
    node: &ProfileNode,
    depth: usize,
    total_self_cpu: i64,
    stacks: Option<&StackSamples>,
    out: &mut String,
) {
    let indent = "  ".repeat(depth);
    let v = |name| node.value(name).unwrap_or(0);
    let stage = node
        .stage_id
        .map(|s| format!(" [stage {s}]"))
        .unwrap_or_default();
    let _ = writeln!(
        out,
        "{indent}#{} {}{stage}  self cpu {} ({})  cpu {}  rows {}{}  batches {}  peak mem {}",
        node.id,
        node.name,
        format::human_nanos(v(names::SELF_CPU_NANOS).max(0) as u64),
        percent(v(names::SELF_CPU_NANOS), total_self_cpu),
        format::human_nanos(v(names::CPU_NANOS).max(0) as u64),
        format::integer(v(names::OUTPUT_ROWS)),
        estimated_rows(node),
        format::integer(v(names::OUTPUT_VECTORS)),
        format::bytes(v(names::PEAK_MEMORY_BYTES)),
    );
    let display = node.display.trim();
    if !display.is_empty() && display != node.name {
        let _ = writeln!(out, "{indent}   {}", truncate(display, 110));
    }
    render_io(node, &indent, out);
    render_waits(node, &indent, out);
    render_shuffle(node, &indent, out);
    render_join_phases(node, &indent, out);
    render_spill(node, &indent, out);
    render_dynamic_filters(node, &indent, out);
    for f in &node.functions {
        let estimated = |yes: bool| if yes { "~" } else { "" };
        let _ = writeln!(
            out,
            "{indent}   fn {}  cpu {}{}  wall {}{}  rows {}  vectors {}  {}",
            truncate(&f.expression, 70),
            estimated(f.cpu_extrapolated),
            format::human_nanos(f.cpu_nanos),
            estimated(f.wall_extrapolated),
            format::human_nanos(f.wall_nanos),
            format::integer(f.rows as i64),
            format::integer(f.vectors as i64),
            f.mode,
        );
    }
    if let Some(sampled) = stacks.and_then(|s| s.operator(node.id, 3)) {
        let tops: Vec<String> = sampled
            .top_functions
            .iter()
            .map(|(name, n)| {
                format!(
                    "{} {}",
                    percent(*n as i64, sampled.samples as i64),
                    short_function(name)
                )
            })
            .collect();
        let _ = writeln!(
            out,
            "{indent}   stacks {} sample{} ~{}: {}",
            format::integer(sampled.samples as i64),
            if sampled.samples == 1 { "" } else { "s" },
            format::human_nanos(sampled.sampled_nanos),
            tops.join(", "),
        );
    }
    for child in &node.children {
        render_node(child, depth + 1, total_self_cpu, stacks, out);
    }
}

/// The phase line of a join: per phase, the rows its input gave, its own time, its peak
/// memory and what it spilled, where measured.
fn render_join_phases(node: &ProfileNode, indent: &str, out: &mut String) {
    let Some((build, probe)) = names::JOIN_PHASE_PREFIXES
        .iter()
        .find(|(build, _)| node.value(&format!("{build}InputRows")).is_some())
    else {
        return;
    };
    let phase = |prefix: &str| {
        let v = |suffix: &str| node.value(&format!("{prefix}{suffix}"));
        let mut parts = vec![format!(
            "{} rows in",
            format::integer(v("InputRows").unwrap_or(0))
        )];
        if let Some(wall) = v("WallNanos") {
            parts.push(format!("own {}", format::human_nanos(wall.max(0) as u64)));
        }
        if let Some(peak) = v("PeakMemoryBytes") {
            parts.push(format!("peak {}", format::bytes(peak)));
        }
        if let Some(spilled) = v("SpilledBytes").filter(|b| *b > 0) {
            parts.push(format!("spilled {}", format::bytes(spilled)));
        }
        format!("{}: {}", format::camel_words(prefix), parts.join(", "))
    };
    let _ = writeln!(out, "{indent}   {}  |  {}", phase(build), phase(probe));
}

/// The spill line of an operator that wrote spill files: what it wrote, in how many of
/// its partitions, and what it read back.
fn render_spill(node: &ProfileNode, indent: &str, out: &mut String) {
    let files = node.value(names::SPILL_FILES_CREATED).unwrap_or(0);
    if files <= 0 {
        return;
    }
    let v = |name| node.value(name).unwrap_or(0);
    let nanos = |name| format::human_nanos(v(name).max(0) as u64);
    let _ = writeln!(
        out,
        "{indent}   spill  wrote {} ({} rows) to {} file{} from {} partition{} in {}  read back {} in {}",
        format::bytes(v(names::SPILL_WRITTEN_BYTES)),
        format::integer(v(names::SPILL_WRITTEN_ROWS)),
        format::integer(files),
        plural(files),
        format::integer(v(names::SPILLED_PARTITIONS)),
        plural(v(names::SPILLED_PARTITIONS)),
        nanos(names::SPILL_WRITE_NANOS),
        format::bytes(v(names::SPILL_READ_BYTES)),
        nanos(names::SPILL_READ_NANOS),
    );
}

/// The shuffle line of a cluster's shuffle reader (what it read, local and remote, and
/// how long its tasks waited on the fetches) or writer (its write time).
fn render_shuffle(node: &ProfileNode, indent: &str, out: &mut String) {
    let v = |name| node.value(name).unwrap_or(0);
    if node.value(names::SHUFFLE_LOCAL_BYTES_READ).is_some() {
        let blocks = |name| {
            let n = v(name);
            format!("{} block{}", format::integer(n), plural(n))
        };
        let _ = writeln!(
            out,
            "{indent}   shuffle read  local {} in {}, remote {} in {}  fetch wait {}",
            format::bytes(v(names::SHUFFLE_LOCAL_BYTES_READ)),
            blocks(names::SHUFFLE_LOCAL_BLOCKS_READ),
            format::bytes(v(names::SHUFFLE_REMOTE_BYTES_READ)),
            blocks(names::SHUFFLE_REMOTE_BLOCKS_READ),
            format::human_nanos(v(names::SHUFFLE_FETCH_WAIT_NANOS).max(0) as u64),
        );
    }
    if node.value(names::SHUFFLE_WRITE_NANOS).is_some() {
        let _ = writeln!(
            out,
            "{indent}   shuffle write  {} in {} batch{}  write time {}",
            format::bytes(v(names::OUTPUT_BYTES)),
            format::integer(v(names::OUTPUT_VECTORS)),
            if v(names::OUTPUT_VECTORS) == 1 {
                ""
            } else {
                "es"
            },
            format::human_nanos(v(names::SHUFFLE_WRITE_NANOS).max(0) as u64),
        );
    }
}

/// The dynamic-filter line of an operator that produced or accepted dynamic filters.
fn render_dynamic_filters(node: &ProfileNode, indent: &str, out: &mut String) {
    let mut parts = Vec::new();
    if let Some(produced) = node
        .value(names::DYNAMIC_FILTERS_PRODUCED)
        .filter(|n| *n > 0)
    {
        parts.push(format!(
            "produced {}, updated {} time{}",
            format::integer(produced),
            format::integer(node.value(names::DYNAMIC_FILTER_UPDATES).unwrap_or(0)),
            plural(node.value(names::DYNAMIC_FILTER_UPDATES).unwrap_or(0)),
        ));
    }
    if let Some(accepted) = node
        .value(names::DYNAMIC_FILTERS_ACCEPTED)
        .filter(|n| *n > 0)
    {
        let from = node
            .info
            .iter()
            .find(|(k, _)| k == names::DYNAMIC_FILTER_PRODUCERS)
            .map(|(_, producers)| format!(" from {producers}"))
            .unwrap_or_default();
        parts.push(format!("accepted {}{from}", format::integer(accepted)));
        if let Some(rows) = node.value(names::REPLACED_WITH_DYNAMIC_FILTER_ROWS) {
            parts.push(format!("{} rows not read", format::integer(rows)));
        }
    }
    if !parts.is_empty() {
        let _ = writeln!(out, "{indent}   dynamic filters  {}", parts.join(", "));
    }
}

fn plural(n: i64) -> &'static str {
    if n == 1 { "" } else { "s" }
}

/// The I/O lines of an operator that touched storage: reads with their tiers, time and
/// concurrency; pruning; writes.
/// `stage S task T (N ms, P% #I Name)`: a step of the critical path, with its own time.
fn critical_step(step: &CriticalStep) -> String {
    let hottest = step
        .hottest
        .as_ref()
        .map(|hottest| format!(", {hottest}"))
        .unwrap_or_default();
    format!(
        "stage {} task {} ({}{hottest})",
        step.stage_id,
        step.task_id,
        format::human_nanos(step.own_millis.saturating_mul(1_000_000)),
    )
}

/// ` (est ~N)` after an operator's rows, when the optimizer estimated them (`~` for an
/// inexact estimate).
fn estimated_rows(node: &ProfileNode) -> String {
    match node.estimate.map(|e| e.rows) {
        Some(Estimated::Exact(rows)) => format!(" (est {})", format::integer(rows as i64)),
        Some(Estimated::Inexact(rows)) => format!(" (est ~{})", format::integer(rows as i64)),
        Some(Estimated::Absent) | None => String::new(),
    }
}

/// What the operator waited on, where it waited at all: its input (pending polls of an
/// operator with inputs) and its output (its producers blocked on a full channel).
fn render_waits(node: &ProfileNode, indent: &str, out: &mut String) {
    let v = |name| node.value(name).unwrap_or(0).max(0) as u64;
    let (input, output) = (v(names::INPUT_WAIT_NANOS), v(names::OUTPUT_WAIT_NANOS));
    if input == 0 && output == 0 {
        return;
    }
    let _ = writeln!(
        out,
        "{indent}   waited on input {}  on output {}",
        format::human_nanos(input),
        format::human_nanos(output),
    );
}

fn render_io(node: &ProfileNode, indent: &str, out: &mut String) {
    let v = |name| node.value(name).unwrap_or(0);
    let nanos = |name| format::human_nanos(v(name).max(0) as u64);
    if node.value(names::READ_REQUESTS).is_some() {
        let buckets = node
            .info
            .iter()
            .find(|(k, _)| k == names::READ_CONCURRENCY_BUCKET)
            .map(|(_, b)| format!(" [{b}]"))
            .unwrap_or_default();
        let _ = writeln!(
            out,
            "{indent}   read {} in {} request{} (storage {}, local {}, ram {})  read time {}  io wait {}  concurrency {}{buckets}",
            format::bytes(v(names::READ_BYTES)),
            format::integer(v(names::READ_REQUESTS)),
            plural(v(names::READ_REQUESTS)),
            format::bytes(v(names::STORAGE_READ_BYTES)),
            format::bytes(v(names::LOCAL_READ_BYTES)),
            format::bytes(v(names::RAM_READ_BYTES)),
            nanos(names::DATA_SOURCE_READ_NANOS),
            nanos(names::IO_WAIT_NANOS),
            format::average(v(names::AVERAGE_READ_CONCURRENCY)),
        );
    }
    let pruning: Vec<String> = [
        ("splits", names::SKIPPED_SPLITS, names::PROCESSED_SPLITS),
        (
            "row groups",
            names::SKIPPED_STRIDES,
            names::PROCESSED_STRIDES,
        ),
    ]
    .iter()
    .filter_map(|(what, skipped, processed)| {
        let (s, p) = (node.value(skipped)?, node.value(processed)?);
        Some(format!(
            "{what} {} skipped, {} kept",
            format::integer(s),
            format::integer(p)
        ))
    })
    .collect();
    if !pruning.is_empty() {
        let _ = writeln!(out, "{indent}   pruning  {}", pruning.join("  "));
    }
    if node.value(names::WRITE_REQUESTS).is_some() {
        let _ = writeln!(
            out,
            "{indent}   wrote {} in {} file{} ({} requests)  write io {}",
            format::bytes(v(names::PHYSICAL_WRITTEN_BYTES)),
            format::integer(v(names::WRITTEN_FILES)),
            plural(v(names::WRITTEN_FILES)),
            format::integer(v(names::WRITE_REQUESTS)),
            nanos(names::WRITE_IO_NANOS),
        );
    }
}

fn truncate(s: &str, max_chars: usize) -> String {
    if s.chars().count() <= max_chars {
        s.to_string()
    } else {
        let mut t: String = s.chars().take(max_chars.saturating_sub(1)).collect();
        t.push('…');
        t
    }
}

/// A function's name short enough for a line: generic arguments dropped, the last two
/// path segments kept (`take::take_impl` for `arrow_select::take::take_impl::<T>`).
pub(crate) fn short_function(name: &str) -> String {
    // `<Type as Trait>::method`: the type's method
    if name.starts_with('<') {
        let mut depth = 0usize;
        let close = name.char_indices().find_map(|(i, c)| {
            match c {
                '<' => depth += 1,
                '>' => {
                    depth -= 1;
                    if depth == 0 {
                        return Some(i);
                    }
                }
                _ => {}
            }
            None
        });
        if let Some(close) = close {
            let inner = &name[1..close];
            let self_type = inner.split(" as ").next().unwrap_or(inner);
            return short_function(&format!("{self_type}{}", &name[close + 1..]));
        }
    }
    let mut plain = String::with_capacity(name.len());
    let mut depth = 0usize;
    for c in name.chars() {
        match c {
            '<' => depth += 1,
            '>' => depth = depth.saturating_sub(1),
            _ if depth == 0 => plain.push(c),
            _ => {}
        }
    }
    let plain = plain.replace("::::", "::");
    let plain = plain.trim_matches(':');
    let segments: Vec<&str> = plain.split("::").filter(|s| !s.is_empty()).collect();
    match segments.len() {
        0 => truncate(name, 60),
        1 => segments[0].to_string(),
        n => format!("{}::{}", segments[n - 2], segments[n - 1]),
    }
}
