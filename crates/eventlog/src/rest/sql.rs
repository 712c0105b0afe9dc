//! SQL executions: Spark's plan graph, `/sql`, `/sql/{id}`, and qprof's profile.

use std::collections::HashMap;

use serde_json::{Map, Value, json};

use super::{RestError, RestResult, put_opt};

use crate::flame_graph::{differential_flame_graph_svg, flame_graph_svg, operator_flame_graph_svg};
use crate::profile_json::QueryJson;
use crate::scala_order::scala_order;
use crate::spark::format_date;
use crate::state::{AppState, Execution, PlanNode};

/// A node of Spark's SQL plan graph.
#[derive(Debug, Clone)]
pub struct GraphNode {
    /// Node id (pre-order, wrappers skipped).
    pub id: i64,
    /// Operator name.
    pub name: String,
    /// One-line description.
    pub desc: String,
    /// Declared metrics: (display name, accumulator id).
    pub metrics: Vec<(String, i64)>,
    /// Whole-stage-codegen cluster id of the cluster holding this node.
    pub codegen_id: Option<i64>,
}

/// Spark's `SparkPlanGraph` of a plan tree: nodes and child→parent edges.
pub fn plan_graph(plan: &PlanNode) -> (Vec<GraphNode>, Vec<(i64, i64)>) {
    struct Builder<'a> {
        next: i64,
        nodes: Vec<GraphNode>,
        edges: Vec<(i64, i64)>,
        exchanges: Vec<(&'a PlanNode, i64)>,
    }
    fn metrics(v: &PlanNode) -> Vec<(String, i64)> {
        v.metrics
            .iter()
            .map(|m| (m.name.trim().to_string(), m.accumulator_id))
            .collect()
    }
    impl<'a> Builder<'a> {
        fn exchange(&self, v: &PlanNode) -> Option<i64> {
            self.exchanges
                .iter()
                .find(|(p, _)| *p == v)
                .map(|(_, id)| *id)
        }
        fn visit(&mut self, v: &'a PlanNode, parent: Option<i64>, cluster: Option<i64>) {
            let name: &str = &v.name;
            let desc: &str = &v.description;
            let first = v.children.first();
            if name.starts_with("WholeStageCodegen") {
                let id = self.next;
                self.next += 1;
                self.nodes.push(GraphNode {
                    id,
                    name: name.trim().to_string(),
                    desc: desc.to_string(),
                    metrics: metrics(v),
                    codegen_id: None,
                });
                let codegen = name
                    .trim()
                    .trim_start_matches("WholeStageCodegen")
                    .trim()
                    .trim_matches(|c| c == '(' || c == ')')
                    .parse()
                    .ok();
                if let Some(child) = first {
                    self.visit(child, parent, codegen);
                }
                return;
            }
            match name {
                "InputAdapter" => {
                    if let Some(child) = first {
                        self.visit(child, parent, None);
                    }
                }
                "BroadcastQueryStage"
                | "ShuffleQueryStage"
                | "ResultQueryStage"
                | "TableCacheQueryStage" => {
                    let Some(child) = first else { return };
                    match (self.exchange(child), parent) {
                        (Some(id), Some(p)) => self.edges.push((id, p)),
                        _ => self.visit(child, parent, None),
                    }
                }
                "ReusedExchange" if first.and_then(|c| self.exchange(c)).is_some() => {
                    if let (Some(id), Some(p)) = (first.and_then(|c| self.exchange(c)), parent) {
                        self.edges.push((id, p));
                    }
                }
                "ReusedSubquery" => {
                    if let Some(child) = first {
                        self.visit(child, parent, cluster);
                    }
                }
                _ => {
                    let is_subquery = name == "Subquery" || name == "SubqueryBroadcast";
                    if is_subquery && let Some(id) = self.exchange(v) {
                        if let Some(p) = parent {
                            self.edges.push((id, p));
                        }
                        return;
                    }
                    let cluster = if is_subquery { None } else { cluster };
                    let id = self.next;
                    self.next += 1;
                    self.nodes.push(GraphNode {
                        id,
                        name: name.trim().to_string(),
                        desc: desc.to_string(),
                        metrics: metrics(v),
                        codegen_id: cluster,
                    });
                    if name.contains("Exchange") || is_subquery {
                        self.exchanges.push((v, id));
                    }
                    if let Some(p) = parent {
                        self.edges.push((id, p));
                    }
                    for child in &v.children {
                        self.visit(child, Some(id), cluster);
                    }
                }
            }
        }
    }
    let mut b = Builder {
        next: 0,
        nodes: Vec::new(),
        edges: Vec::new(),
        exchanges: Vec::new(),
    };
    b.visit(plan, None, None);
    (b.nodes, b.edges)
}

fn execution_data(
    state: &AppState,
    exec: &Execution,
    details: bool,
    plan_description: bool,
) -> Value {
    let mut running = Vec::new();
    let mut succeeded = Vec::new();
    let mut failed = Vec::new();
    // in the order of Spark's map of the execution's jobs
    for id in &scala_order(&exec.job_ids) {
        match state.jobs.get(id).map(|j| j.succeeded) {
            Some(Some(true)) => succeeded.push(*id),
            Some(Some(false)) => failed.push(*id),
            Some(None) => running.push(*id),
            None => {}
        }
    }
    let (nodes, edges) = if details {
        let values: HashMap<i64, String> = exec.metric_strings(state);
        let (mut nodes, edges) = exec.plan.as_ref().map(plan_graph).unwrap_or_default();
        nodes.sort_by_key(|n| std::cmp::Reverse(n.id));
        let nodes: Vec<Value> = nodes
            .iter()
            .map(|n| {
                let mut o = Map::new();
                o.insert("nodeId".into(), json!(n.id));
                o.insert("nodeName".into(), json!(n.name));
                put_opt(&mut o, "wholeStageCodegenId", n.codegen_id.map(Value::from));
                let metrics: Vec<Value> = n
                    .metrics
                    .iter()
                    .filter_map(|(name, acc)| {
                        let v = values.get(acc)?;
                        let v = v.strip_prefix('\n').unwrap_or(v);
                        Some(json!({"name": name, "value": v}))
                    })
                    .collect();
                o.insert("metrics".into(), Value::Array(metrics));
                o.insert("desc".into(), json!(n.desc));
                Value::Object(o)
            })
            .collect();
        let edges: Vec<Value> = edges
            .iter()
            .map(|(from, to)| json!({"fromId": from, "toId": to}))
            .collect();
        (nodes, edges)
    } else {
        (Vec::new(), Vec::new())
    };
    let mut o = Map::new();
    o.insert("id".into(), json!(exec.id));
    o.insert("status".into(), json!(exec.status()));
    o.insert("description".into(), json!(exec.description));
    o.insert(
        "planDescription".into(),
        json!(if plan_description {
            exec.plan_description.as_str()
        } else {
            ""
        }),
    );
    o.insert(
        "submissionTime".into(),
        json!(format_date(exec.submission_time)),
    );
    o.insert(
        "duration".into(),
        json!(
            exec.completion_time
                .map(|end| end.saturating_sub(exec.submission_time))
                .unwrap_or(0)
        ),
    );
    o.insert("runningJobIds".into(), json!(running));
    o.insert("successJobIds".into(), json!(succeeded));
    o.insert("failedJobIds".into(), json!(failed));
    o.insert("nodes".into(), Value::Array(nodes));
    o.insert("edges".into(), Value::Array(edges));
    put_opt(&mut o, "queryId", exec.query_id.clone().map(Value::from));
    put_opt(
        &mut o,
        "errorMessage",
        exec.error_message.clone().map(Value::from),
    );
    put_opt(&mut o, "rootExecutionId", exec.root_id.map(Value::from));
    o.insert("modifiedConfigs".into(), exec.modified_configs.clone());
    Value::Object(o)
}

/// `/sql`: executions in id order, a page of them.
pub fn sql_list(
    state: &AppState,
    details: bool,
    plan_description: bool,
    offset: usize,
    length: usize,
) -> Value {
    Value::Array(
        state
            .executions
            .values()
            .skip(offset)
            .take(length)
            .map(|e| execution_data(state, e, details, plan_description))
            .collect(),
    )
}

/// `/sql/{id}`.
pub fn sql(state: &AppState, id: i64, details: bool, plan_description: bool) -> RestResult {
    state
        .executions
        .get(&id)
        .map(|e| execution_data(state, e, details, plan_description))
        .ok_or_else(|| RestError::NotFound(format!("unknown query execution id: {id}")))
}

/// qprof's extension: the full profile a qprof log carries for a query.
pub fn qprof_profile(state: &AppState, id: i64) -> RestResult {
    Ok(json!({ "query": logged_profile(state, id)? }))
}

/// qprof's extension: a query's self CPU as a flame graph (SVG).
pub fn qprof_flame_graph(state: &AppState, id: i64) -> Result<String, RestError> {
    flame_graph_svg(&logged_profile(state, id)?).map_err(|e| RestError::NotFound(e.to_string()))
}

/// qprof's extension: two runs of a query as a differential flame graph (SVG): the second
/// run's self CPU, colored by its change since the first.
pub fn qprof_differential_flame_graph(
    before: &QueryJson,
    after: &QueryJson,
) -> Result<String, RestError> {
    differential_flame_graph_svg(before, after).map_err(|e| RestError::NotFound(e.to_string()))
}

/// qprof's extension: one operator's sampled native stacks as a flame graph (SVG).
pub fn qprof_operator_flame_graph(
    state: &AppState,
    id: i64,
    node_id: usize,
) -> Result<String, RestError> {
    operator_flame_graph_svg(&logged_profile(state, id)?, node_id)
        .map_err(|e| RestError::NotFound(e.to_string()))
}

/// The profile of query execution `id`, as its qprof log carries it.
pub fn logged_profile(state: &AppState, id: i64) -> Result<QueryJson, RestError> {
    let exec = state
        .executions
        .get(&id)
        .ok_or_else(|| RestError::NotFound(format!("unknown query execution id: {id}")))?;
    match exec.qprof_profile() {
        Some(Ok(profile)) => Ok(profile),
        Some(Err(why)) => Err(RestError::NotFound(format!(
            "query execution {id} has a qprof profile this server cannot read: {why}"
        ))),
        // a running query's profile is logged when it ends
        None if exec.completion_time.is_none() => Err(RestError::NotFound(format!(
            "query execution {id} has no profile yet: it has not ended (a profile is logged at its end)"
        ))),
        None => Err(RestError::NotFound(format!(
            "query execution {id} has no qprof profile (the log was not written by qprof)"
        ))),
    }
}
