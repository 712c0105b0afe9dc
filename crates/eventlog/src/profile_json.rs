//! qprof's JSON profile: the document `--profile-out` writes and the profile the
//! `org.qprof.eventlog.QueryProfile` event carries, as versioned serde types.
//!
//! The types mirror [`QueryProfile`] and add what a reader wants without recomputing it:
//! each metric's task count, min/median/max, the task holding the max, and Spark's
//! rendering. Objects keep their keys in the profile's order. Readers accept unknown keys,
//! so a newer writer's additions do not break an older reader; a document of a newer
//! format version than [`FORMAT_VERSION`] is refused.

use std::fmt;
use std::marker::PhantomData;

use qprof_core::advice::{Finding, Severity, advise};
use qprof_core::executor_memory::MemorySample;
use qprof_core::metric::{TaskRef, spark_string_aggregated};
use qprof_core::planning::PlanningProfile;
use qprof_core::profile::{
    CriticalStep, Estimate, FunctionProfile, NodeMetric, ProfileNode, QueryProfile, StageProfile,
    TaskProfile,
};
use qprof_core::stable_id::stable_ids;
use qprof_core::stacks::{SampledStack, StackSamples};
use serde::de::{MapAccess, Visitor};
use serde::ser::SerializeMap;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// The version of the profile format this crate writes and the newest it reads.
pub const FORMAT_VERSION: u32 = 1;

/// Why a profile document could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ProfileJsonError {
    /// Not JSON, or not shaped like a profile.
    #[error("not a qprof profile: {0}")]
    Malformed(#[from] serde_json::Error),
    /// Written by a newer qprof.
    #[error("profile format version {found} is newer than the {FORMAT_VERSION} this qprof reads")]
    TooNew {
        /// The document's version.
        found: u32,
    },
}

/// An object whose keys keep their order: a list of (key, value) pairs on the Rust side.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct OrderedMap<V>(pub Vec<(String, V)>);

impl<V> OrderedMap<V> {
    /// Whether there are no entries.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The value under `key`.
    pub fn get(&self, key: &str) -> Option<&V> {
        self.0.iter().find(|(k, _)| k == key).map(|(_, v)| v)
    }
}

impl<V: Serialize> Serialize for OrderedMap<V> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(self.0.len()))?;
        for (k, v) in &self.0 {
            map.serialize_entry(k, v)?;
        }
        map.end()
    }
}

impl<'de, V: Deserialize<'de>> Deserialize<'de> for OrderedMap<V> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Entries<V>(PhantomData<V>);
        impl<'de, V: Deserialize<'de>> Visitor<'de> for Entries<V> {
            type Value = OrderedMap<V>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut access: A) -> Result<Self::Value, A::Error> {
                let mut entries = Vec::with_capacity(access.size_hint().unwrap_or(0));
                while let Some(entry) = access.next_entry()? {
                    entries.push(entry);
                }
                Ok(OrderedMap(entries))
            }
        }
        deserializer.deserialize_map(Entries(PhantomData))
    }
}

/// The file `--profile-out` writes: `{"formatVersion":1,"queries":[..]}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ProfilesDocument {
    /// The format version, [`FORMAT_VERSION`] when written by this crate.
    pub format_version: u32,
    /// One profile per query, in run order.
    pub queries: Vec<QueryJson>,
}

impl ProfilesDocument {
    /// The document of `profiles`.
    pub fn new<'a>(profiles: impl IntoIterator<Item = &'a QueryProfile>) -> ProfilesDocument {
        ProfilesDocument {
            format_version: FORMAT_VERSION,
            queries: profiles.into_iter().map(QueryJson::from).collect(),
        }
    }

    /// Reads a document.
    ///
    /// # Errors
    /// Malformed JSON or shape, or a format newer than this crate reads.
    pub fn parse(text: &str) -> Result<ProfilesDocument, ProfileJsonError> {
        let doc: ProfilesDocument = serde_json::from_str(text)?;
        check_version(doc.format_version)?;
        Ok(doc)
    }
}

/// A cluster job's profile as its scheduler serves it to the client that ran the job: what
/// one process prints for a query (its tree, top operators and findings, rendered with
/// the client's `top`), why the job failed if it did, and the profile itself.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ServedProfile {
    /// The format version, [`FORMAT_VERSION`] when written by this crate.
    pub format_version: u32,
    /// The profile as text, then the advisor's findings.
    pub text: String,
    /// Why the job failed, if it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The profile.
    pub query: QueryJson,
}

impl ServedProfile {
    /// What is served of `profile` for a client that lists `top` operators.
    pub fn new(profile: &QueryProfile, top: usize, error: Option<String>) -> ServedProfile {
        ServedProfile {
            format_version: FORMAT_VERSION,
            text: profile.render_report(top),
            error,
            query: QueryJson::from(profile),
        }
    }

    /// Reads what a scheduler served.
    ///
    /// # Errors
    /// Malformed JSON or shape, or a format newer than this crate reads.
    pub fn parse(text: &str) -> Result<ServedProfile, ProfileJsonError> {
        let served: ServedProfile = serde_json::from_str(text)?;
        check_version(served.format_version)?;
        Ok(served)
    }
}

/// Refuses versions newer than [`FORMAT_VERSION`].
///
/// # Errors
/// [`ProfileJsonError::TooNew`].
pub(crate) fn check_version(found: u32) -> Result<(), ProfileJsonError> {
    if found > FORMAT_VERSION {
        Err(ProfileJsonError::TooNew { found })
    } else {
        Ok(())
    }
}

/// One query's profile.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct QueryJson {
    /// Query id within the run.
    pub id: usize,
    /// The query text.
    pub sql: String,
    /// Rows returned.
    pub rows: u64,
    /// Wall time from planning to the last batch (ns).
    pub duration_nanos: u64,
    /// Start, epoch ms.
    pub start_epoch_millis: u64,
    /// The operator tree.
    pub plan: NodeJson,
    /// Stages and their tasks.
    pub stages: Vec<StageJson>,
    /// The executor's memory samples while the query ran, oldest first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub memory: Vec<MemoryJson>,
    /// In an event log: the accumulator id of each metric, by node id and metric name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub accumulator_ids: Option<OrderedMap<OrderedMap<i64>>>,
    /// What the advisor noticed, warnings first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub findings: Vec<FindingJson>,
    /// The memory pool's limit and high-water mark while the query ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_pool: Option<MemoryPoolJson>,
    /// How planning went, phase by phase and rule by rule.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub planning: Option<PlanningJson>,
    /// The chain of stages and tasks that bounded its wall time, from the output back.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub critical_path: Vec<CriticalStepJson>,
    /// The native stacks sampled while its operators ran, when sampling was on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stack_samples: Option<StackSamplesJson>,
    /// Other queries of the same process that ran while it did (absent when none).
    #[serde(default, skip_serializing_if = "is_zero_u32")]
    pub overlapping_queries: u32,
}

/// A step of a query's critical path: a stage's task that finished last.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CriticalStepJson {
    /// The stage.
    pub stage_id: u32,
    /// Its task that finished last.
    pub task_id: u64,
    /// The partition it computed.
    pub partition: u32,
    /// Start, epoch ms.
    pub start_epoch_millis: u64,
    /// Finish, epoch ms.
    pub finish_epoch_millis: u64,
    /// Its wall time less the time its input's step ran beside it (ms).
    pub own_millis: u64,
    /// The operator with the most self CPU in the task.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_id: Option<usize>,
    /// That operator's share of the task's self CPU, in percent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_percent: Option<u8>,
    /// For a join, the phase that took most of its CPU in the task (`hash probe`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<String>,
    /// That phase's share of the join's CPU in the task, in percent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase_cpu_percent: Option<u8>,
}

impl From<&CriticalStep> for CriticalStepJson {
    fn from(s: &CriticalStep) -> CriticalStepJson {
        CriticalStepJson {
            stage_id: s.stage_id,
            task_id: s.task_id,
            partition: s.partition,
            start_epoch_millis: s.start_epoch_millis,
            finish_epoch_millis: s.finish_epoch_millis,
            own_millis: s.own_millis,
            node_id: s.hottest.as_ref().map(|h| h.node_id),
            cpu_percent: s.hottest.as_ref().map(|h| h.cpu_percent),
            phase: s
                .hottest
                .as_ref()
                .and_then(|h| h.phase.as_ref())
                .map(|(phase, _)| phase.clone()),
            phase_cpu_percent: s
                .hottest
                .as_ref()
                .and_then(|h| h.phase.as_ref())
                .map(|(_, share)| *share),
        }
    }
}

/// A query's sampled native stacks: each function name once, each stack as positions in
/// that table.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StackSamplesJson {
    /// CPU time one sample stands for (ns).
    pub period_nanos: u64,
    /// Function names; stacks refer to them by position.
    pub functions: Vec<String>,
    /// The plan's function calls samples were taken in, as written; stacks refer to them
    /// by position.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub call_sites: Vec<String>,
    /// Each distinct stack of each operator task.
    pub stacks: Vec<SampledStackJson>,
}

/// An operator's estimated output: each figure with its precision (`exact`, `inexact`
/// or `absent`, when the figure is left out).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EstimateJson {
    /// Rows out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rows: Option<u64>,
    /// How sure the rows are.
    pub rows_precision: String,
    /// Bytes out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bytes: Option<u64>,
    /// How sure the bytes are.
    pub bytes_precision: String,
}

impl From<&Estimate> for EstimateJson {
    fn from(e: &Estimate) -> EstimateJson {
        EstimateJson {
            rows: e.rows.value(),
            rows_precision: e.rows.precision().to_string(),
            bytes: e.bytes.value(),
            bytes_precision: e.bytes.precision().to_string(),
        }
    }
}

/// One distinct stack of one operator task and how many samples had it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SampledStackJson {
    /// The operator's node id.
    pub node_id: usize,
    /// The task's stage, id and partition; absent for work the operator spawned outside
    /// its partitions' tasks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task: Option<[u64; 3]>,
    /// Samples with this stack.
    pub count: u64,
    /// The plan's function call evaluating, as a position in `callSites`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub call_site: Option<u32>,
    /// Positions in `functions`, outermost call first.
    pub frames: Vec<u32>,
}

impl From<&StackSamples> for StackSamplesJson {
    fn from(s: &StackSamples) -> StackSamplesJson {
        StackSamplesJson {
            period_nanos: s.period_nanos,
            functions: s.functions.clone(),
            call_sites: s.call_sites.clone(),
            stacks: s
                .stacks
                .iter()
                .map(|stack| SampledStackJson {
                    node_id: stack.node_id,
                    task: stack
                        .task
                        .map(|t| [u64::from(t.stage_id), t.task_id, u64::from(t.partition)]),
                    count: stack.count,
                    call_site: stack.call_site,
                    frames: stack.frames.clone(),
                })
                .collect(),
        }
    }
}

impl From<&StackSamplesJson> for StackSamples {
    fn from(s: &StackSamplesJson) -> StackSamples {
        StackSamples {
            period_nanos: s.period_nanos,
            functions: s.functions.clone(),
            call_sites: s.call_sites.clone(),
            stacks: s
                .stacks
                .iter()
                .map(|stack| SampledStack {
                    node_id: stack.node_id,
                    task: stack.task.map(|[stage, task, partition]| TaskRef {
                        stage_id: stage as u32,
                        stage_attempt: 0,
                        task_id: task,
                        partition: partition as u32,
                    }),
                    count: stack.count,
                    call_site: stack
                        .call_site
                        .filter(|&c| (c as usize) < s.call_sites.len()),
                    frames: stack
                        .frames
                        .iter()
                        .copied()
                        .filter(|&f| (f as usize) < s.functions.len())
                        .collect(),
                })
                .collect(),
        }
    }
}

/// A query's planning.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PlanningJson {
    /// When planning began (µs since the Unix epoch).
    pub start_epoch_micros: u64,
    /// Wall time of all planning (ns).
    pub wall_nanos: u64,
    /// CPU time of all planning (ns).
    pub cpu_nanos: u64,
    /// The text profile's line: `planning 4.2 ms (optimizer 3.1 ms: 28 rules, ...)`.
    pub summary: String,
    /// The phases, in order.
    pub phases: Vec<PlanningPhaseJson>,
    /// The rules, in the order they first ran.
    pub rules: Vec<PlanningRuleJson>,
}

/// One phase of planning; times in ns after planning began.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PlanningPhaseJson {
    /// `parse`, `logicalPlan`, `analyzer`, `optimizer`, `physicalPlan` or
    /// `physicalOptimizer`.
    pub phase: String,
    /// When it began.
    pub start_nanos: u64,
    /// When it ended.
    pub end_nanos: u64,
    /// Its own wall time.
    pub wall_nanos: u64,
    /// Its own CPU time.
    pub cpu_nanos: u64,
}

/// One rule's calls while a query planned; times in ns after planning began.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PlanningRuleJson {
    /// The phase it belongs to.
    pub phase: String,
    /// Its name.
    pub name: String,
    /// When its first call began.
    pub first_start_nanos: u64,
    /// When its last call ended.
    pub last_end_nanos: u64,
    /// Wall time inside its calls.
    pub wall_nanos: u64,
    /// How many times it was called.
    pub calls: u64,
    /// Whether any call changed the plan.
    pub changed: bool,
    /// The plans around its first changes, when the session recorded them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub plans: Vec<PlanChangeJson>,
}

/// A rule call's plan before and after it changed it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PlanChangeJson {
    /// The plan given to the rule.
    pub before: String,
    /// The plan it returned.
    pub after: String,
}

impl From<&PlanningProfile> for PlanningJson {
    fn from(p: &PlanningProfile) -> PlanningJson {
        PlanningJson {
            start_epoch_micros: p.start_epoch_micros,
            wall_nanos: p.wall_nanos(),
            cpu_nanos: p.cpu_nanos(),
            summary: p.summary_line(),
            phases: p
                .phases
                .iter()
                .map(|ph| PlanningPhaseJson {
                    phase: ph.phase.as_str().to_string(),
                    start_nanos: ph.start_nanos,
                    end_nanos: ph.end_nanos,
                    wall_nanos: ph.wall_nanos,
                    cpu_nanos: ph.cpu_nanos,
                })
                .collect(),
            rules: p
                .rules
                .iter()
                .map(|r| PlanningRuleJson {
                    phase: r.phase.as_str().to_string(),
                    name: r.name.clone(),
                    first_start_nanos: r.first_start_nanos,
                    last_end_nanos: r.last_end_nanos,
                    wall_nanos: r.wall_nanos,
                    calls: r.calls,
                    changed: r.changed,
                    plans: r
                        .plans
                        .iter()
                        .map(|c| PlanChangeJson {
                            before: c.before.clone(),
                            after: c.after.clone(),
                        })
                        .collect(),
                })
                .collect(),
        }
    }
}

/// A memory pool's limit and the most it held while a query ran.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MemoryPoolJson {
    /// The limit in bytes; absent for an unbounded pool.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit_bytes: Option<u64>,
    /// The most bytes reserved at once.
    pub peak_bytes: u64,
}

/// One finding of the advisor: one cause, with its cost and its fix.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FindingJson {
    /// A warning's place in the query's ranking, from 1, by share of the query's cost
    /// (absent for a minor finding, and in logs written before findings were ranked).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rank: Option<usize>,
    /// The rule, e.g. `skewed-tasks`.
    pub rule: String,
    /// `warn` for a material cost, `info` otherwise.
    pub severity: String,
    /// The operator it is most about.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_id: Option<usize>,
    /// The stage it is most about.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stage_id: Option<u32>,
    /// Every operator it covers, the costliest first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub node_ids: Vec<usize>,
    /// Every stage it covers, the costliest first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stage_ids: Vec<u32>,
    /// What happened, with its evidence, in one sentence.
    pub message: String,
    /// What it cost the query.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost: Option<CostJson>,
    /// What would fix it.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub action: String,
    /// The numbers behind it, by name.
    pub numbers: OrderedMap<i64>,
}

/// What a finding cost the query ([`qprof_core::advice::Cost`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CostJson {
    /// `wall`, `cpu`, `taskTime` (ns) or `memory` (bytes).
    pub kind: String,
    /// The cost, in ns or bytes.
    pub amount: u64,
    /// The query's whole of the same kind (its duration, operator CPU, tasks' time, or the
    /// memory limit); 0 when unknown.
    pub whole: u64,
    /// `amount` as thousandths of `whole`.
    pub share_permille: u64,
}

impl FindingJson {
    /// The findings of `profile`, the warnings ranked from 1 by cost and the minor ones
    /// (`info`) after them, unranked.
    pub fn ranked(profile: &qprof_core::profile::QueryProfile) -> Vec<FindingJson> {
        advise(profile)
            .iter()
            .enumerate()
            .map(|(i, f)| FindingJson {
                rank: (f.severity == Severity::Warning).then_some(i + 1),
                ..FindingJson::from(f)
            })
            .collect()
    }
}

impl From<&Finding> for FindingJson {
    fn from(f: &Finding) -> FindingJson {
        FindingJson {
            rank: None,
            rule: f.rule.to_string(),
            severity: f.severity.to_string(),
            node_id: f.node_id,
            stage_id: f.stage_id,
            node_ids: f.node_ids.clone(),
            stage_ids: f.stage_ids.clone(),
            message: f.message.clone(),
            cost: Some(CostJson {
                kind: f.cost.kind.as_str().to_string(),
                amount: f.cost.amount,
                whole: f.cost.whole,
                share_permille: f.cost.share_permille(),
            }),
            action: f.action.clone(),
            numbers: OrderedMap(f.numbers.iter().map(|(k, v)| (k.to_string(), *v)).collect()),
        }
    }
}

/// One operator.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeJson {
    /// Pre-order id.
    pub id: usize,
    /// The same operator's id in every run of the same query on the same data
    /// ([`qprof_core::stable_id`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stable_id: Option<String>,
    /// Operator type.
    pub name: String,
    /// One-line description as EXPLAIN prints it.
    pub display: String,
    /// The stage it ran in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stage_id: Option<u32>,
    /// Metrics by name.
    pub metrics: OrderedMap<MetricJson>,
    /// Free-form facts.
    #[serde(default, skip_serializing_if = "OrderedMap::is_empty")]
    pub info: OrderedMap<String>,
    /// Function call sites, by CPU time.
    #[serde(default)]
    pub functions: Vec<FunctionJson>,
    /// When each task ran it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub task_spans: Vec<TaskSpanJson>,
    /// What the optimizer's statistics said it would produce, when the engine gave any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub estimate: Option<EstimateJson>,
    /// Inputs.
    #[serde(default)]
    pub children: Vec<NodeJson>,
}

/// When one task ran one operator.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskSpanJson {
    /// The task's stage.
    pub stage_id: u32,
    /// The task, unique within the application.
    pub task_id: u64,
    /// The partition it computed.
    pub partition: u32,
    /// When it executed the operator (µs since the Unix epoch).
    pub start_epoch_micros: u64,
    /// When the operator's output ended (µs since the Unix epoch; 0: it had not).
    pub finish_epoch_micros: u64,
}

/// One metric of one operator, with its spread across tasks.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MetricJson {
    /// Operator-level value.
    pub value: i64,
    /// `sum`, `size`, `timing`, `nsTiming` or `average`.
    pub kind: String,
    /// Spark-style display name.
    pub display_name: String,
    /// Values reported (tasks, and one without a task for spawned work).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tasks: Option<usize>,
    /// Smallest task value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min: Option<i64>,
    /// Median task value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub median: Option<i64>,
    /// Largest task value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max: Option<i64>,
    /// The task with the largest value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_task_id: Option<u64>,
    /// The value as Spark renders it.
    pub spark: String,
}

/// One function call site.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FunctionJson {
    /// The function.
    pub name: String,
    /// The call as written in the plan.
    pub expression: String,
    /// Vectors it was called on.
    pub vectors: u64,
    /// Rows it was called on.
    pub rows: u64,
    /// Vectors timed with the CPU clock.
    pub cpu_timed_vectors: u64,
    /// CPU ns (estimated when `cpu_extrapolated`).
    pub cpu_nanos: u64,
    /// Wall ns (estimated when `wall_extrapolated`).
    pub wall_nanos: u64,
    /// Whether `cpu_nanos` is extrapolated.
    pub cpu_extrapolated: bool,
    /// Whether `wall_nanos` is extrapolated.
    pub wall_extrapolated: bool,
    /// `full`, `sampled 1/N` or `wall only`.
    pub mode: String,
    /// Re-calibrations after cost drifts.
    pub recalibrations: u32,
}

/// One stage.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StageJson {
    /// Stage id.
    pub id: u32,
    /// The operators in it.
    pub node_ids: Vec<usize>,
    /// Its tasks.
    pub tasks: Vec<TaskJson>,
    /// The executor's memory peaks while it ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory: Option<MemoryJson>,
    /// On a cluster: each executor's memory peaks while it ran the stage, by executor id.
    #[serde(default, skip_serializing_if = "OrderedMap::is_empty")]
    pub executor_memory: OrderedMap<MemoryJson>,
}

/// The executor's memory by region (a sample, or peaks without a time). Bytes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MemoryJson {
    /// When it was sampled, epoch ms (absent from peaks).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub epoch_millis: u64,
    /// Heap in use (the allocator's).
    pub heap_bytes: u64,
    /// Reserved from the memory pools by operators.
    pub execution_bytes: u64,
    /// Held by caches.
    pub storage_bytes: u64,
    /// Resident memory backed by files.
    pub file_mapped_bytes: u64,
    /// Resident set size.
    pub rss_bytes: u64,
    /// Virtual size.
    pub virtual_bytes: u64,
}

fn is_zero(v: &u64) -> bool {
    *v == 0
}

impl From<&MemorySample> for MemoryJson {
    fn from(m: &MemorySample) -> MemoryJson {
        MemoryJson {
            epoch_millis: m.epoch_millis,
            heap_bytes: m.heap_bytes,
            execution_bytes: m.execution_bytes,
            storage_bytes: m.storage_bytes,
            file_mapped_bytes: m.file_mapped_bytes,
            rss_bytes: m.rss_bytes,
            virtual_bytes: m.virtual_bytes,
        }
    }
}

/// One task.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskJson {
    /// Task id.
    pub task_id: u64,
    /// Partition of its stage.
    pub partition: u32,
    /// Start, epoch ms.
    pub start_epoch_millis: u64,
    /// Finish, epoch ms.
    pub finish_epoch_millis: u64,
    /// Task metrics by name.
    pub metrics: OrderedMap<TaskMetricJson>,
    /// Why the task failed, if it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The attempt (0: the task's first run).
    #[serde(default, skip_serializing_if = "is_zero_u32")]
    pub attempt: u32,
    /// The executor that ran it, on a cluster.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub executor_id: Option<String>,
    /// The executor's host, on a cluster.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
}

fn is_zero_u32(v: &u32) -> bool {
    *v == 0
}

/// One metric of one task.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TaskMetricJson {
    /// The value.
    pub value: i64,
    /// The kind.
    pub kind: String,
}

impl From<&NodeMetric> for MetricJson {
    fn from(m: &NodeMetric) -> MetricJson {
        let spread = (!m.tasks.is_empty()).then(|| m.aggregate());
        MetricJson {
            value: m.value,
            kind: m.kind.as_str().to_string(),
            display_name: m.display_name.to_string(),
            tasks: spread.as_ref().map(|_| m.tasks.len()),
            min: spread.as_ref().map(|a| a.min),
            median: spread.as_ref().map(|a| a.median),
            max: spread.as_ref().map(|a| a.max),
            max_task_id: spread.and_then(|a| a.max_task).map(|t| t.task_id),
            spark: match &spread {
                Some(a) => spark_string_aggregated(m.kind, &m.tasks, a),
                None => m.spark_string(),
            },
        }
    }
}

impl From<&FunctionProfile> for FunctionJson {
    fn from(f: &FunctionProfile) -> FunctionJson {
        FunctionJson {
            name: f.name.clone(),
            expression: f.expression.clone(),
            vectors: f.vectors,
            rows: f.rows,
            cpu_timed_vectors: f.cpu_timed_vectors,
            cpu_nanos: f.cpu_nanos,
            wall_nanos: f.wall_nanos,
            cpu_extrapolated: f.cpu_extrapolated,
            wall_extrapolated: f.wall_extrapolated,
            mode: f.mode.clone(),
            recalibrations: f.recalibrations,
        }
    }
}

impl From<&ProfileNode> for NodeJson {
    fn from(n: &ProfileNode) -> NodeJson {
        NodeJson {
            id: n.id,
            stable_id: None,
            name: n.name.clone(),
            display: n.display.to_string(),
            stage_id: n.stage_id,
            metrics: OrderedMap(
                n.metrics
                    .iter()
                    .map(|m| (m.name.to_string(), MetricJson::from(m)))
                    .collect(),
            ),
            info: OrderedMap(n.info.clone()),
            functions: n.functions.iter().map(FunctionJson::from).collect(),
            task_spans: n
                .task_spans
                .iter()
                .map(|t| TaskSpanJson {
                    stage_id: t.task.stage_id,
                    task_id: t.task.task_id,
                    partition: t.task.partition,
                    start_epoch_micros: t.start_epoch_micros,
                    finish_epoch_micros: t.finish_epoch_micros,
                })
                .collect(),
            estimate: n.estimate.as_ref().map(EstimateJson::from),
            children: n.children.iter().map(NodeJson::from).collect(),
        }
    }
}

impl From<&TaskProfile> for TaskJson {
    fn from(t: &TaskProfile) -> TaskJson {
        TaskJson {
            task_id: t.task_id,
            partition: t.partition,
            start_epoch_millis: t.start_epoch_millis,
            finish_epoch_millis: t.finish_epoch_millis,
            error: t.error.clone(),
            attempt: t.attempt,
            executor_id: t.executor.as_ref().map(|e| e.id.clone()),
            host: t.executor.as_ref().map(|e| e.host.clone()),
            metrics: OrderedMap(
                t.metrics
                    .iter()
                    .map(|m| {
                        (
                            m.name.to_string(),
                            TaskMetricJson {
                                value: m.value,
                                kind: m.kind.as_str().to_string(),
                            },
                        )
                    })
                    .collect(),
            ),
        }
    }
}

impl From<&StageProfile> for StageJson {
    fn from(s: &StageProfile) -> StageJson {
        StageJson {
            id: s.id,
            node_ids: s.node_ids.clone(),
            tasks: s.tasks.iter().map(TaskJson::from).collect(),
            memory: s.memory.as_ref().map(MemoryJson::from),
            executor_memory: OrderedMap(
                s.executor_memory
                    .iter()
                    .map(|(id, m)| (id.clone(), MemoryJson::from(m)))
                    .collect(),
            ),
        }
    }
}

impl From<&QueryProfile> for QueryJson {
    fn from(p: &QueryProfile) -> QueryJson {
        QueryJson {
            id: p.id,
            sql: p.sql.clone(),
            rows: p.rows,
            duration_nanos: p.duration_nanos,
            start_epoch_millis: p.start_epoch_millis,
            plan: {
                let mut plan = NodeJson::from(&p.plan);
                let ids = stable_ids(&p.plan);
                plan.for_each_mut(&mut |node| node.stable_id = ids.get(node.id).cloned());
                plan
            },
            stages: p.stages.iter().map(StageJson::from).collect(),
            memory: p.memory.iter().map(MemoryJson::from).collect(),
            accumulator_ids: None,
            findings: FindingJson::ranked(p),
            memory_pool: p.memory_pool.map(|pool| MemoryPoolJson {
                limit_bytes: pool.limit_bytes,
                peak_bytes: pool.peak_bytes,
            }),
            planning: p.planning.as_ref().map(PlanningJson::from),
            stack_samples: p.stack_samples.as_ref().map(StackSamplesJson::from),
            overlapping_queries: p.overlapping_queries,
            critical_path: p
                .critical_path()
                .iter()
                .map(CriticalStepJson::from)
                .collect(),
        }
    }
}

impl NodeJson {
    /// Calls `f` on this node and its descendants.
    fn for_each_mut(&mut self, f: &mut impl FnMut(&mut NodeJson)) {
        f(self);
        for child in &mut self.children {
            child.for_each_mut(f);
        }
    }

    /// This node and its descendants, in pre-order.
    pub fn iter(&self) -> impl Iterator<Item = &NodeJson> {
        let mut stack = vec![self];
        std::iter::from_fn(move || {
            let node = stack.pop()?;
            stack.extend(node.children.iter().rev());
            Some(node)
        })
    }
}
