//! Sampled native stacks, attributed to the operator task that was running.
//!
//! While a [`SamplingSession`] is open, a `SIGPROF` timer interrupts whichever thread is
//! on the CPU, `hz` times per second of CPU time, and records its stack together with the
//! [`SampleKey`] of the operator task whose attribution frame is innermost on that thread
//! (the same frame that gets the time in [`crate::attribution`], so sampled time and
//! measured self time describe the same work), and the function call site evaluating, if
//! any ([`CallSiteFrame`]). When a query ends its tasks' samples are taken, their
//! addresses resolved to function names (inlined calls included), and kept as the query's
//! [`StackSamples`].

mod sampler;
mod symbols;
#[cfg(test)]
mod tests;

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::metric::TaskRef;

pub(crate) use sampler::set_current_key;
use sampler::swap_current_site;
pub use sampler::{
    AddressStack, MAX_HZ, SamplingCost, SamplingSession, StackSamplerError, register_operator_entry,
};

/// Names one operator task in the samples; each task's counters get a fresh key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SampleKey(u64);

impl Default for SampleKey {
    fn default() -> Self {
        static NEXT: AtomicU64 = AtomicU64::new(1);
        SampleKey(NEXT.fetch_add(1, Ordering::Relaxed))
    }
}

impl SampleKey {
    /// The key's value; never 0 (0 stands for "outside every operator").
    pub fn get(self) -> u64 {
        self.0
    }
}

/// While it lives, names a function call site as evaluating on this thread: samples taken
/// meanwhile carry the site, so a flame graph puts them under the call
/// (`fn upper(c_name)`) that the function's measured time is under.
#[derive(Debug)]
#[must_use = "the site is named only while the frame lives"]
pub struct CallSiteFrame {
    previous: u64,
}

impl CallSiteFrame {
    /// Names site `site` (a [`crate::call_site::FunctionSite::id`]) until the frame drops.
    #[inline]
    pub fn enter(site: u64) -> CallSiteFrame {
        CallSiteFrame {
            previous: swap_current_site(site),
        }
    }
}

impl Drop for CallSiteFrame {
    #[inline]
    fn drop(&mut self) {
        swap_current_site(self.previous);
    }
}

/// The sampled stacks of one query, by operator task.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct StackSamples {
    /// CPU time one sample stands for, in nanoseconds.
    pub period_nanos: u64,
    /// Function names, each once; stacks refer to them by position.
    pub functions: Vec<String>,
    /// The function calls of the plan that samples were taken in, as written
    /// (`upper(customer.c_name)`), each once; stacks refer to them by position.
    pub call_sites: Vec<String>,
    /// Each distinct stack of each operator task, with its count.
    pub stacks: Vec<SampledStack>,
}

/// One distinct stack sampled in one operator task.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SampledStack {
    /// The operator's id in the plan.
    pub node_id: usize,
    /// The task; `None` for work the operator spawned outside its partitions' tasks.
    pub task: Option<TaskRef>,
    /// The plan's function call that was evaluating, as a position in
    /// [`StackSamples::call_sites`]; `None` outside every call.
    pub call_site: Option<u32>,
    /// Positions in [`StackSamples::functions`], outermost call first.
    pub frames: Vec<u32>,
    /// Samples that had this stack.
    pub count: u64,
}

/// What one operator's samples say, for rendering and advice.
#[derive(Debug, Clone, PartialEq)]
pub struct OperatorSamples {
    /// Samples taken while the operator's own code ran.
    pub samples: u64,
    /// The CPU time they stand for, in nanoseconds.
    pub sampled_nanos: u64,
    /// The functions most samples were in, most first, with their counts: each sample
    /// counts for its innermost function outside Rust's standard library
    /// (`arrow_select::take::take_native`): the standard library's helpers (`core::ptr::
    /// copy_nonoverlapping`) and C library calls (`memcpy`) count for their caller.
    pub top_functions: Vec<(String, u64)>,
}

impl StackSamples {
    /// Takes `session`'s samples of the given operator tasks (their keys, operators and
    /// task references) and resolves their frames; `call_sites` gives the text of each
    /// function call site by id (a site it does not know is left out). Each stack keeps
    /// only the frames below the innermost one `is_operator_entry` accepts (the engine's
    /// frame that calls into an operator's own code), so an operator's stacks start at its
    /// own code; a stack with no such frame is kept whole.
    pub fn take(
        session: &SamplingSession,
        tasks: &[(SampleKey, usize, Option<TaskRef>)],
        call_sites: &HashMap<u64, String>,
        is_operator_entry: impl Fn(&str) -> bool,
    ) -> StackSamples {
        let by_key: HashMap<u64, (usize, Option<TaskRef>)> = tasks
            .iter()
            .map(|(key, node, task)| (key.get(), (*node, *task)))
            .collect();
        let taken = session.take(tasks.iter().map(|(key, _, _)| key.get()));
        let mut builder = Builder::default();
        for (key, stacks) in taken {
            let Some(&(node_id, task)) = by_key.get(&key) else {
                continue;
            };
            for stack in stacks {
                let mut frames = builder.frames(&stack.addresses);
                if let Some(entry) = frames
                    .iter()
                    .rposition(|&f| is_operator_entry(&builder.functions[f as usize]))
                {
                    frames.drain(..=entry);
                }
                let call_site = call_sites
                    .get(&stack.call_site)
                    .map(|text| builder.call_site(text));
                builder.stacks.push(SampledStack {
                    node_id,
                    task,
                    call_site,
                    frames,
                    count: stack.count,
                });
            }
        }
        let mut stacks = merged(builder.stacks);
        stacks.sort_by(|a, b| {
            (a.node_id, a.task.map(|t| t.task_id), a.call_site, &a.frames).cmp(&(
                b.node_id,
                b.task.map(|t| t.task_id),
                b.call_site,
                &b.frames,
            ))
        });
        StackSamples {
            period_nanos: session.period_nanos(),
            functions: builder.functions,
            call_sites: builder.call_sites,
            stacks,
        }
    }

    /// Adds `other`'s stacks to these (re-numbering its functions and call sites into
    /// these tables).
    pub fn merge(&mut self, other: StackSamples) {
        if self.period_nanos == 0 {
            self.period_nanos = other.period_nanos;
        }
        let renumbered = merge_table(&mut self.functions, other.functions);
        let renumbered_sites = merge_table(&mut self.call_sites, other.call_sites);
        for mut stack in other.stacks {
            for frame in &mut stack.frames {
                *frame = renumbered[*frame as usize];
            }
            stack.call_site = stack.call_site.map(|s| renumbered_sites[s as usize]);
            self.stacks.push(stack);
        }
    }

    /// The text of a stack's function call site, if it had one.
    pub fn call_site<'a>(&'a self, stack: &SampledStack) -> Option<&'a str> {
        stack
            .call_site
            .and_then(|s| self.call_sites.get(s as usize))
            .map(String::as_str)
    }

    /// The names of a stack's frames, outermost first.
    pub fn names<'a>(&'a self, stack: &'a SampledStack) -> impl Iterator<Item = &'a str> + 'a {
        stack
            .frames
            .iter()
            .map(|&f| self.functions.get(f as usize).map_or("?", String::as_str))
    }

    /// Total samples of the query's operators.
    pub fn total(&self) -> u64 {
        self.stacks.iter().map(|s| s.count).sum()
    }

    /// What the samples of operator `node_id` say; `None` if it has none.
    pub fn operator(&self, node_id: usize, top: usize) -> Option<OperatorSamples> {
        let mut samples = 0;
        let mut leaves: HashMap<u32, u64> = HashMap::new();
        for stack in self.stacks.iter().filter(|s| s.node_id == node_id) {
            samples += stack.count;
            let named = stack
                .frames
                .iter()
                .rev()
                .find(|&&f| is_own_function(&self.functions[f as usize]))
                .or(stack.frames.last());
            if let Some(&function) = named {
                *leaves.entry(function).or_default() += stack.count;
            }
        }
        if samples == 0 {
            return None;
        }
        let mut top_functions: Vec<(String, u64)> = leaves
            .into_iter()
            .map(|(f, n)| (self.functions[f as usize].clone(), n))
            .collect();
        top_functions.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        top_functions.truncate(top);
        Some(OperatorSamples {
            samples,
            sampled_nanos: samples.saturating_mul(self.period_nanos),
            top_functions,
        })
    }

    /// The samples as folded stacks (`outer;…;inner`, `;` in names replaced by `:`) with
    /// their counts, one per distinct stack, sorted: of operator `node_id` only, or of all
    /// with each stack under a frame naming its operator (`operator_label` gives the name).
    /// A sample taken in a function call of the plan has the call as its outermost frame
    /// (`fn upper(c_name)`). The input of a flame graph.
    pub fn folded(
        &self,
        node_id: Option<usize>,
        operator_label: impl Fn(usize) -> String,
    ) -> Vec<(String, u64)> {
        let mut merged: HashMap<String, u64> = HashMap::new();
        for stack in &self.stacks {
            if node_id.is_some_and(|n| n != stack.node_id) {
                continue;
            }
            let mut line = String::new();
            if node_id.is_none() {
                line.push_str(&operator_label(stack.node_id).replace(';', ":"));
            }
            if let Some(site) = self.call_site(stack) {
                if !line.is_empty() {
                    line.push(';');
                }
                line.push_str("fn ");
                line.push_str(&site.replace(';', ":"));
            }
            for name in self.names(stack) {
                if !line.is_empty() {
                    line.push(';');
                }
                line.push_str(&name.replace(';', ":"));
            }
            *merged.entry(line).or_default() += stack.count;
        }
        let mut lines: Vec<(String, u64)> = merged.into_iter().collect();
        lines.sort();
        lines
    }
}

/// Adds the entries of `other` missing from `table` to it; returns where each of `other`'s
/// entries is in `table`.
fn merge_table(table: &mut Vec<String>, other: Vec<String>) -> Vec<u32> {
    let mut positions: HashMap<String, u32> = table
        .iter()
        .enumerate()
        .map(|(i, entry)| (entry.clone(), i as u32))
        .collect();
    other
        .into_iter()
        .map(|entry| {
            let next = table.len() as u32;
            *positions.entry(entry.clone()).or_insert_with(|| {
                table.push(entry);
                next
            })
        })
        .collect()
}

/// Interns function names and call sites while stacks are resolved.
#[derive(Default)]
struct Builder {
    functions: Vec<String>,
    positions: HashMap<std::sync::Arc<str>, u32>,
    call_sites: Vec<String>,
    stacks: Vec<SampledStack>,
}

/// `stacks` with those of one task, call site and frames (two stacks of addresses can
/// resolve to the same functions) made one.
fn merged(stacks: Vec<SampledStack>) -> Vec<SampledStack> {
    /// A stack's operator, task, call site and frames.
    type Identity = (usize, Option<u64>, Option<u32>, Vec<u32>);
    let mut index: HashMap<Identity, usize> = HashMap::new();
    let mut out: Vec<SampledStack> = Vec::with_capacity(stacks.len());
    for stack in stacks {
        let key = (
            stack.node_id,
            stack.task.map(|t| t.task_id),
            stack.call_site,
            stack.frames.clone(),
        );
        match index.get(&key) {
            Some(&at) => out[at].count += stack.count,
            None => {
                index.insert(key, out.len());
                out.push(stack);
            }
        }
    }
    out
}

impl Builder {
    /// The position of call site `text`, added if new.
    fn call_site(&mut self, text: &str) -> u32 {
        match self.call_sites.iter().position(|s| s == text) {
            Some(at) => at as u32,
            None => {
                self.call_sites.push(text.to_string());
                (self.call_sites.len() - 1) as u32
            }
        }
    }

    /// Positions of the functions of a leaf-first address stack, outermost first.
    fn frames(&mut self, addresses: &[usize]) -> Vec<u32> {
        let mut frames = Vec::with_capacity(addresses.len());
        for &address in addresses.iter().rev() {
            for name in symbols::functions_at(address).iter() {
                let next = self.functions.len() as u32;
                let position = *self
                    .positions
                    .entry(std::sync::Arc::clone(name))
                    .or_insert(next);
                if position == next {
                    self.functions.push(name.to_string());
                }
                frames.push(position);
            }
        }
        frames
    }
}

/// Whether a frame is a function of the program or its libraries: it has a path, outside
/// Rust's standard library.
fn is_own_function(name: &str) -> bool {
    let name = name.trim_start_matches('<');
    name.contains("::")
        && !["core::", "std::", "alloc::", "core_arch::"]
            .iter()
            .any(|std| name.starts_with(std))
}
