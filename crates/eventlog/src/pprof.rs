//! Sampled stacks as a pprof profile (`perftools.profiles.Profile`, the protobuf that
//! `go tool pprof`, speedscope, Grafana Pyroscope and Polar Signals read): one sample per
//! distinct stack of each operator task, valued in samples and CPU nanoseconds, labelled
//! with its query, operator, task and the plan's function call it was taken in.

use std::collections::HashMap;

use prost::Message;

use crate::profile_json::QueryJson;

/// The pprof profile of the stacks sampled in `queries` (those without samples add
/// nothing), uncompressed. `time_nanos` is when the run began (ns since the Unix epoch).
pub fn pprof_profile(queries: &[QueryJson], time_nanos: i64) -> Vec<u8> {
    let mut builder = ProfileBuilder::default();
    builder.strings.intern("");
    let samples = builder.strings.intern("samples");
    let count = builder.strings.intern("count");
    let cpu = builder.strings.intern("cpu");
    let nanoseconds = builder.strings.intern("nanoseconds");
    let query_key = builder.strings.intern("query");
    let operator_key = builder.strings.intern("operator");
    let task_key = builder.strings.intern("task");
    let function_key = builder.strings.intern("function");
    let mut period = 0;
    let mut duration_nanos = 0i64;
    let mut out_samples = Vec::new();
    for query in queries {
        let Some(stacks) = &query.stack_samples else {
            continue;
        };
        period = stacks.period_nanos as i64;
        duration_nanos = duration_nanos.saturating_add(query.duration_nanos as i64);
        let operators: HashMap<usize, String> = query
            .plan
            .iter()
            .map(|n| (n.id, format!("{} #{}", n.name, n.id)))
            .collect();
        let query_label = builder.strings.intern(&format!("query {}", query.id));
        for stack in &stacks.stacks {
            // pprof lists a sample's locations leaf first
            let locations = stack
                .frames
                .iter()
                .rev()
                .filter_map(|&f| stacks.functions.get(f as usize))
                .map(|name| builder.location(name))
                .collect();
            let operator = operators
                .get(&stack.node_id)
                .map_or_else(|| format!("#{}", stack.node_id), Clone::clone);
            let mut label = vec![
                Label {
                    key: query_key,
                    str: query_label,
                    ..Label::default()
                },
                Label {
                    key: operator_key,
                    str: builder.strings.intern(&operator),
                    ..Label::default()
                },
            ];
            if let Some(site) = stack
                .call_site
                .and_then(|s| stacks.call_sites.get(s as usize))
            {
                label.push(Label {
                    key: function_key,
                    str: builder.strings.intern(site),
                    ..Label::default()
                });
            }
            if let Some([_, task, _]) = stack.task {
                label.push(Label {
                    key: task_key,
                    num: task as i64,
                    ..Label::default()
                });
            }
            out_samples.push(Sample {
                location_id: locations,
                value: vec![
                    stack.count as i64,
                    (stack.count as i64).saturating_mul(stacks.period_nanos as i64),
                ],
                label,
            });
        }
    }
    Profile {
        sample_type: vec![
            ValueType {
                r#type: samples,
                unit: count,
            },
            ValueType {
                r#type: cpu,
                unit: nanoseconds,
            },
        ],
        sample: out_samples,
        location: builder.locations,
        function: builder.functions,
        string_table: builder.strings.table,
        time_nanos,
        duration_nanos,
        period_type: Some(ValueType {
            r#type: cpu,
            unit: nanoseconds,
        }),
        period,
        default_sample_type: cpu,
    }
    .encode_to_vec()
}

#[derive(Default)]
struct Strings {
    table: Vec<String>,
    index: HashMap<String, i64>,
}

impl Strings {
    fn intern(&mut self, s: &str) -> i64 {
        if let Some(&i) = self.index.get(s) {
            return i;
        }
        let i = self.table.len() as i64;
        self.table.push(s.to_string());
        self.index.insert(s.to_string(), i);
        i
    }
}

/// One location and one function per distinct function name: the samples carry names,
/// not addresses.
#[derive(Default)]
struct ProfileBuilder {
    strings: Strings,
    locations: Vec<Location>,
    functions: Vec<Function>,
    by_name: HashMap<String, u64>,
}

impl ProfileBuilder {
    fn location(&mut self, name: &str) -> u64 {
        if let Some(&id) = self.by_name.get(name) {
            return id;
        }
        let id = self.functions.len() as u64 + 1;
        let name_index = self.strings.intern(name);
        self.functions.push(Function {
            id,
            name: name_index,
            system_name: name_index,
        });
        self.locations.push(Location {
            id,
            line: vec![Line {
                function_id: id,
                ..Line::default()
            }],
        });
        self.by_name.insert(name.to_string(), id);
        id
    }
}

// The messages of pprof's `profile.proto` that qprof writes, with its field numbers.

#[derive(Clone, PartialEq, Message)]
struct Profile {
    #[prost(message, repeated, tag = "1")]
    sample_type: Vec<ValueType>,
    #[prost(message, repeated, tag = "2")]
    sample: Vec<Sample>,
    #[prost(message, repeated, tag = "4")]
    location: Vec<Location>,
    #[prost(message, repeated, tag = "5")]
    function: Vec<Function>,
    #[prost(string, repeated, tag = "6")]
    string_table: Vec<String>,
    #[prost(int64, tag = "9")]
    time_nanos: i64,
    #[prost(int64, tag = "10")]
    duration_nanos: i64,
    #[prost(message, optional, tag = "11")]
    period_type: Option<ValueType>,
    #[prost(int64, tag = "12")]
    period: i64,
    #[prost(int64, tag = "14")]
    default_sample_type: i64,
}

#[derive(Clone, Copy, PartialEq, Message)]
struct ValueType {
    #[prost(int64, tag = "1")]
    r#type: i64,
    #[prost(int64, tag = "2")]
    unit: i64,
}

#[derive(Clone, PartialEq, Message)]
struct Sample {
    #[prost(uint64, repeated, tag = "1")]
    location_id: Vec<u64>,
    #[prost(int64, repeated, tag = "2")]
    value: Vec<i64>,
    #[prost(message, repeated, tag = "3")]
    label: Vec<Label>,
}

#[derive(Clone, Copy, PartialEq, Message)]
struct Label {
    #[prost(int64, tag = "1")]
    key: i64,
    #[prost(int64, tag = "2")]
    str: i64,
    #[prost(int64, tag = "3")]
    num: i64,
}

#[derive(Clone, PartialEq, Message)]
struct Location {
    #[prost(uint64, tag = "1")]
    id: u64,
    #[prost(message, repeated, tag = "4")]
    line: Vec<Line>,
}

#[derive(Clone, Copy, PartialEq, Message)]
struct Line {
    #[prost(uint64, tag = "1")]
    function_id: u64,
    #[prost(int64, tag = "2")]
    line: i64,
}

#[derive(Clone, Copy, PartialEq, Message)]
struct Function {
    #[prost(uint64, tag = "1")]
    id: u64,
    #[prost(int64, tag = "2")]
    name: i64,
    #[prost(int64, tag = "3")]
    system_name: i64,
}
