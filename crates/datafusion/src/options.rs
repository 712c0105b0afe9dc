//! qprof's session configuration: the `qprof.*` keys, settable with `SET` in SQL or through
//! [`datafusion::prelude::SessionConfig::with_option_extension`].
//!
//! | key | default | meaning |
//! |---|---|---|
//! | `qprof.expression.track_cpu_usage` | `false` | time every function call on every vector |
//! | `qprof.expression.track_cpu_usage_for_functions` | empty | comma list of functions timed on every vector |
//! | `qprof.expression.adaptive_cpu_sampling` | `true` | sample the other functions adaptively |
//! | `qprof.expression.adaptive_cpu_sampling_max_overhead_pct` | `1.0` | overhead budget of sampling, % of a function's time |
//! | `qprof.runtime.counter_update_period_ms` | `500` | period of the updater that samples periodic counters (read concurrency, throughput), 1 to 60000 |
//! | `qprof.runtime.heartbeat_interval_ms` | `1000` | time between samples of the executor's memory, 1 to 600000 (rounded up to whole updater periods) |
//! | `qprof.runtime.stack_sample_hz` | `0` | sample each query's native stacks this many times per second of CPU time, by operator (0: off; 99 is a sensible rate; at most 250, the kernel's usual tick) |
//! | `qprof.planning.record_plans` | `false` | keep the plan before and after each rule call that changed it (the first 8 per rule), in the profile's planning |
//! | `qprof.query.text` | empty | the SQL text of the session's next queries, for their profiles: a client that sends plans (to a cluster) sets it before each query, else a profile shows the logical plan |
//! | `qprof.query.traceparent` | empty | the W3C `traceparent` of the span the session's next queries run under, for a client that sends plans (to a cluster) |
//! | `qprof.query.id` | empty | the client's id of its next query, by which a cluster's scheduler serves the query's profile to it |
//!
//! The first key beats the second, which beats the third: see [`QprofOptions::tracking_for`].

use std::any::Any;

use datafusion::common::{DataFusionError, Result};
use datafusion::config::{ConfigEntry, ConfigExtension, ConfigOptions, ExtensionOptions};
use qprof_core::sampling::TrackingMode;

/// Key (without the `qprof.` prefix) that times every function on every vector.
pub const TRACK_CPU_USAGE: &str = "expression.track_cpu_usage";
/// Key (without the `qprof.` prefix) listing functions timed on every vector.
pub const TRACK_CPU_USAGE_FOR_FUNCTIONS: &str = "expression.track_cpu_usage_for_functions";
/// Key (without the `qprof.` prefix) that turns adaptive sampling of functions on or off.
pub const ADAPTIVE_CPU_SAMPLING: &str = "expression.adaptive_cpu_sampling";
/// Key (without the `qprof.` prefix) of the overhead budget of adaptive sampling, in percent.
pub const ADAPTIVE_MAX_OVERHEAD_PCT: &str = "expression.adaptive_cpu_sampling_max_overhead_pct";
/// Key (without the `qprof.` prefix) of the periodic counters' update period, in ms.
pub const COUNTER_UPDATE_PERIOD_MS: &str = "runtime.counter_update_period_ms";

/// Key (without the `qprof.` prefix) of the time between the executor's memory samples, in ms.
pub const HEARTBEAT_INTERVAL_MS: &str = "runtime.heartbeat_interval_ms";

/// Key (without the `qprof.` prefix) of the rate of stack sampling, per second of CPU time.
pub const STACK_SAMPLE_HZ: &str = "runtime.stack_sample_hz";

/// Key (without the `qprof.` prefix) that keeps the plans before and after the rule calls
/// that changed them.
pub const RECORD_PLANS: &str = "planning.record_plans";

/// Key (without the `qprof.` prefix) of the SQL text the session's next queries are
/// profiled under.
pub const QUERY_TEXT: &str = "query.text";

/// Key (without the `qprof.` prefix) of the client's id of its next query.
pub const QUERY_ID: &str = "query.id";

/// Key (without the `qprof.` prefix) of the span the session's next queries run under.
pub const QUERY_TRACEPARENT: &str = "query.traceparent";

/// qprof's options of one session.
#[derive(Debug, Clone, PartialEq)]
pub struct QprofOptions {
    /// Time every function call on every vector.
    pub track_cpu_usage: bool,
    /// Functions (lower-case names) timed on every vector.
    pub track_cpu_usage_for_functions: Vec<String>,
    /// Sample the functions not tracked fully, keeping the overhead under the budget.
    pub adaptive_cpu_sampling: bool,
    /// Overhead budget of adaptive sampling, in percent of a function's own time; in (0, 100].
    pub adaptive_cpu_sampling_max_overhead_pct: f64,
    /// Period of the process's periodic counter updater, in milliseconds; in [1, 60000].
    /// The process has one updater: the period of the latest query's session applies.
    pub counter_update_period_ms: u64,
    /// Time between samples of the executor's memory (its heartbeat), in milliseconds; in
    /// [1, 600000]. Stages also sample when they start, so short ones are never missed.
    pub heartbeat_interval_ms: u64,
    /// Samples of the native stacks per second of CPU time while the session's queries run,
    /// attributed to operators; 0 (the default) samples nothing. The process has one
    /// sampler: queries running at once share the first one's rate.
    pub stack_sample_hz: u32,
    /// Keep the plan before and after each rule call that changed it (costly: each call's
    /// plan is rendered; off by default).
    pub record_plans: bool,
    /// The SQL text of the session's next queries (empty: none was given), for a client
    /// whose queries reach the engine as plans.
    pub query_text: String,
    /// The client's id of its next query (empty: none), unique in its session: a cluster's
    /// scheduler serves the query's profile under it.
    pub query_id: String,
    /// The W3C `traceparent` of the span the session's next queries run under (empty:
    /// none), for a client whose queries reach the engine as plans.
    pub query_traceparent: String,
}

impl Default for QprofOptions {
    fn default() -> Self {
        Self {
            track_cpu_usage: false,
            track_cpu_usage_for_functions: Vec::new(),
            adaptive_cpu_sampling: true,
            adaptive_cpu_sampling_max_overhead_pct: 1.0,
            counter_update_period_ms: 500,
            heartbeat_interval_ms: 1_000,
            stack_sample_hz: 0,
            record_plans: false,
            query_text: String::new(),
            query_id: String::new(),
            query_traceparent: String::new(),
        }
    }
}

impl QprofOptions {
    /// The options `config` carries, or the defaults if it carries none.
    pub fn of(config: &ConfigOptions) -> QprofOptions {
        config
            .extensions
            .get::<QprofOptions>()
            .cloned()
            .unwrap_or_default()
    }

    /// How calls of the function called `name` (or aliased `aliases`) are tracked; `None`
    /// when they are not tracked at all.
    pub fn tracking_for(&self, name: &str, aliases: &[String]) -> Option<TrackingMode> {
        let listed = || {
            std::iter::once(name)
                .chain(aliases.iter().map(String::as_str))
                .any(|n| {
                    self.track_cpu_usage_for_functions
                        .iter()
                        .any(|f| f.eq_ignore_ascii_case(n))
                })
        };
        if self.track_cpu_usage || listed() {
            Some(TrackingMode::Full)
        } else if self.adaptive_cpu_sampling {
            Some(TrackingMode::Adaptive {
                max_overhead_pct: self.adaptive_cpu_sampling_max_overhead_pct,
            })
        } else {
            None
        }
    }

    /// Whether any function is tracked.
    pub fn tracks_functions(&self) -> bool {
        self.track_cpu_usage
            || self.adaptive_cpu_sampling
            || !self.track_cpu_usage_for_functions.is_empty()
    }

    /// Sets one option by its key, with or without the `qprof.` prefix.
    ///
    /// # Errors
    /// Fails on an unknown key or a value the key does not accept; the message names both.
    pub fn set_option(&mut self, key: &str, value: &str) -> Result<()> {
        let key = key.strip_prefix("qprof.").unwrap_or(key);
        let value = value.trim();
        match key {
            TRACK_CPU_USAGE => self.track_cpu_usage = parse_bool(key, value)?,
            TRACK_CPU_USAGE_FOR_FUNCTIONS => {
                self.track_cpu_usage_for_functions = parse_function_list(value)?;
            }
            ADAPTIVE_CPU_SAMPLING => self.adaptive_cpu_sampling = parse_bool(key, value)?,
            ADAPTIVE_MAX_OVERHEAD_PCT => {
                self.adaptive_cpu_sampling_max_overhead_pct = parse_percent(key, value)?;
            }
            COUNTER_UPDATE_PERIOD_MS => {
                self.counter_update_period_ms = match value.parse::<u64>() {
                    Ok(ms) if (1..=60_000).contains(&ms) => ms,
                    _ => return Err(invalid(key, value, "milliseconds in [1, 60000]")),
                };
            }
            HEARTBEAT_INTERVAL_MS => {
                self.heartbeat_interval_ms = match value.parse::<u64>() {
                    Ok(ms) if (1..=600_000).contains(&ms) => ms,
                    _ => return Err(invalid(key, value, "milliseconds in [1, 600000]")),
                };
            }
            STACK_SAMPLE_HZ => {
                self.stack_sample_hz = match value.parse::<u32>() {
                    Ok(hz) if hz <= qprof_core::stacks::MAX_HZ => hz,
                    _ => return Err(invalid(key, value, "samples per second in [0, 250]")),
                };
            }
            RECORD_PLANS => self.record_plans = parse_bool(key, value)?,
            QUERY_TEXT => self.query_text = value.to_string(),
            QUERY_ID => self.query_id = value.to_string(),
            QUERY_TRACEPARENT => self.query_traceparent = value.to_string(),
            _ => {
                return Err(DataFusionError::Configuration(format!(
                    "unknown option qprof.{key}; known: qprof.{TRACK_CPU_USAGE}, \
                     qprof.{TRACK_CPU_USAGE_FOR_FUNCTIONS}, qprof.{ADAPTIVE_CPU_SAMPLING}, \
                     qprof.{ADAPTIVE_MAX_OVERHEAD_PCT}, qprof.{COUNTER_UPDATE_PERIOD_MS}, \
                     qprof.{HEARTBEAT_INTERVAL_MS}, qprof.{STACK_SAMPLE_HZ}, qprof.{RECORD_PLANS}, qprof.{QUERY_TEXT}, \
                     qprof.{QUERY_ID}, qprof.{QUERY_TRACEPARENT}"
                )));
            }
        }
        Ok(())
    }
}

fn invalid(key: &str, value: &str, expected: &str) -> DataFusionError {
    DataFusionError::Configuration(format!(
        "invalid value {value:?} for qprof.{key}: expected {expected}"
    ))
}

fn parse_bool(key: &str, value: &str) -> Result<bool> {
    match value.to_ascii_lowercase().as_str() {
        "true" => Ok(true),
        "false" => Ok(false),
        _ => Err(invalid(key, value, "true or false")),
    }
}

fn parse_percent(key: &str, value: &str) -> Result<f64> {
    match value.parse::<f64>() {
        Ok(p) if p > 0.0 && p <= 100.0 => Ok(p),
        _ => Err(invalid(key, value, "a percentage in (0, 100]")),
    }
}

fn parse_function_list(value: &str) -> Result<Vec<String>> {
    let mut names = Vec::new();
    for part in value.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let valid = part
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.');
        if !valid {
            return Err(invalid(
                TRACK_CPU_USAGE_FOR_FUNCTIONS,
                value,
                "a comma-separated list of function names",
            ));
        }
        names.push(part.to_ascii_lowercase());
    }
    Ok(names)
}

impl ExtensionOptions for QprofOptions {
    fn as_any(&self) -> &dyn Any {
        self
    }

    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }

    fn cloned(&self) -> Box<dyn ExtensionOptions> {
        Box::new(self.clone())
    }

    fn set(&mut self, key: &str, value: &str) -> Result<()> {
        self.set_option(key, value)
    }

    fn entries(&self) -> Vec<ConfigEntry> {
        let entry = |key: &str, value: String, description: &'static str| ConfigEntry {
            key: format!("{}.{key}", Self::PREFIX),
            value: Some(value),
            description,
        };
        vec![
            entry(
                TRACK_CPU_USAGE,
                self.track_cpu_usage.to_string(),
                "Time every function call on every vector with the thread CPU clock.",
            ),
            entry(
                TRACK_CPU_USAGE_FOR_FUNCTIONS,
                self.track_cpu_usage_for_functions.join(","),
                "Comma-separated functions timed on every vector.",
            ),
            entry(
                ADAPTIVE_CPU_SAMPLING,
                self.adaptive_cpu_sampling.to_string(),
                "Sample the CPU time of the other functions, keeping the cost under a budget.",
            ),
            entry(
                ADAPTIVE_MAX_OVERHEAD_PCT,
                self.adaptive_cpu_sampling_max_overhead_pct.to_string(),
                "Budget of adaptive sampling, in percent of each function's own time.",
            ),
            entry(
                COUNTER_UPDATE_PERIOD_MS,
                self.counter_update_period_ms.to_string(),
                "Period of the updater sampling periodic counters (read concurrency, throughput), in ms.",
            ),
            entry(
                HEARTBEAT_INTERVAL_MS,
                self.heartbeat_interval_ms.to_string(),
                "Time between samples of the executor's memory, in ms.",
            ),
            entry(
                STACK_SAMPLE_HZ,
                self.stack_sample_hz.to_string(),
                "Native stack samples per second of CPU time, by operator (0: off).",
            ),
            entry(
                RECORD_PLANS,
                self.record_plans.to_string(),
                "Keep the plan before and after each rule call that changed it.",
            ),
            entry(
                QUERY_TEXT,
                self.query_text.clone(),
                "The SQL text of the session's next queries, for their profiles.",
            ),
            entry(
                QUERY_ID,
                self.query_id.clone(),
                "The client's id of its next query, by which a cluster serves its profile.",
            ),
            entry(
                QUERY_TRACEPARENT,
                self.query_traceparent.clone(),
                "The W3C traceparent of the span the session's next queries run under.",
            ),
        ]
    }
}

impl ConfigExtension for QprofOptions {
    const PREFIX: &'static str = "qprof";
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(pairs: &[(&str, &str)]) -> QprofOptions {
        let mut o = QprofOptions::default();
        for (k, v) in pairs {
            o.set_option(k, v).unwrap();
        }
        o
    }

    const FULL: Option<TrackingMode> = Some(TrackingMode::Full);

    #[test]
    fn precedence_all_beats_list_beats_adaptive() {
        let adaptive = |pct| {
            Some(TrackingMode::Adaptive {
                max_overhead_pct: pct,
            })
        };
        assert_eq!(
            QprofOptions::default().tracking_for("upper", &[]),
            adaptive(1.0)
        );
        let listed = set(&[(TRACK_CPU_USAGE_FOR_FUNCTIONS, "Upper, regexp_like")]);
        assert_eq!(listed.tracking_for("upper", &[]), FULL);
        assert_eq!(listed.tracking_for("REGEXP_LIKE", &[]), FULL);
        assert_eq!(listed.tracking_for("lower", &[]), adaptive(1.0));
        // an alias in the list selects the function
        assert_eq!(listed.tracking_for("ucase", &["upper".to_string()]), FULL);
        // the list still applies with sampling off; other functions are not tracked
        let listed_only = set(&[
            (TRACK_CPU_USAGE_FOR_FUNCTIONS, "upper"),
            ("qprof.expression.adaptive_cpu_sampling", "false"),
        ]);
        assert_eq!(listed_only.tracking_for("upper", &[]), FULL);
        assert_eq!(listed_only.tracking_for("lower", &[]), None);
        assert!(listed_only.tracks_functions());
        // track everything beats both
        let all = set(&[
            (TRACK_CPU_USAGE, "true"),
            (ADAPTIVE_CPU_SAMPLING, "true"),
            (ADAPTIVE_MAX_OVERHEAD_PCT, "0.5"),
        ]);
        assert_eq!(all.tracking_for("lower", &[]), FULL);
        assert_eq!(
            set(&[("qprof.runtime.counter_update_period_ms", "100")]).counter_update_period_ms,
            100
        );
        let half = set(&[(ADAPTIVE_MAX_OVERHEAD_PCT, "0.5")]);
        assert_eq!(half.tracking_for("lower", &[]), adaptive(0.5));
        let none = set(&[(ADAPTIVE_CPU_SAMPLING, "FALSE")]);
        assert_eq!(none.tracking_for("lower", &[]), None);
        assert!(!none.tracks_functions());
    }

    #[test]
    fn bad_values_are_rejected_with_the_key_named() {
        let cases = [
            (TRACK_CPU_USAGE, "yes"),
            (ADAPTIVE_CPU_SAMPLING, "1"),
            (ADAPTIVE_MAX_OVERHEAD_PCT, "0"),
            (ADAPTIVE_MAX_OVERHEAD_PCT, "-1"),
            (ADAPTIVE_MAX_OVERHEAD_PCT, "101"),
            (ADAPTIVE_MAX_OVERHEAD_PCT, "NaN"),
            (ADAPTIVE_MAX_OVERHEAD_PCT, "lots"),
            (TRACK_CPU_USAGE_FOR_FUNCTIONS, "upper;drop table"),
            (COUNTER_UPDATE_PERIOD_MS, "0"),
            (COUNTER_UPDATE_PERIOD_MS, "60001"),
            (COUNTER_UPDATE_PERIOD_MS, "-5"),
            (COUNTER_UPDATE_PERIOD_MS, "1.5"),
        ];
        for (key, value) in cases {
            let mut o = QprofOptions::default();
            let err = o.set_option(key, value).unwrap_err().to_string();
            assert!(err.contains(&format!("qprof.{key}")), "{err}");
            assert!(err.contains(value), "{err}");
            assert_eq!(o, QprofOptions::default(), "a rejected value changed {key}");
        }
        let err = QprofOptions::default()
            .set_option("qprof.expression.track_cpu", "true")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("unknown option qprof.expression.track_cpu"),
            "{err}"
        );
    }

    #[test]
    fn keys_work_through_session_config_and_sql_set() {
        use datafusion::prelude::{SessionConfig, SessionContext};
        let mut config = SessionConfig::new().with_option_extension(QprofOptions::default());
        config
            .options_mut()
            .set("qprof.expression.track_cpu_usage_for_functions", "upper")
            .unwrap();
        let err = config
            .options_mut()
            .set(
                "qprof.expression.adaptive_cpu_sampling_max_overhead_pct",
                "200",
            )
            .unwrap_err();
        assert!(err.to_string().contains("(0, 100]"), "{err}");
        let ctx = SessionContext::new_with_config(config);
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        rt.block_on(async {
            ctx.sql("SET qprof.expression.adaptive_cpu_sampling = false")
                .await
                .unwrap();
            let bad = ctx
                .sql("SET qprof.expression.adaptive_cpu_sampling = maybe")
                .await;
            assert!(bad.is_err());
        });
        let state = ctx.state();
        let options = state
            .config_options()
            .extensions
            .get::<QprofOptions>()
            .unwrap();
        assert!(!options.adaptive_cpu_sampling);
        assert_eq!(options.track_cpu_usage_for_functions, vec!["upper"]);
    }
}
