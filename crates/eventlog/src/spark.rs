//! Names and conventions of Spark's event-log and REST contract: event names, executor
//! metric names, the Spark version qprof speaks, and Spark's date format.

/// The Spark version whose event-log format qprof writes and whose REST answers it gives.
pub(crate) const SPARK_VERSION: &str = "4.3.0";

/// Event names (`"Event"` field) qprof reads or writes.
pub(crate) mod events {
    /// First line of every log.
    pub(crate) const LOG_START: &str = "SparkListenerLogStart";
    /// Executor resource requests of a resource profile.
    pub(crate) const RESOURCE_PROFILE_ADDED: &str = "SparkListenerResourceProfileAdded";
    /// An executor (qprof: the one local process) became available.
    pub(crate) const EXECUTOR_ADDED: &str = "SparkListenerExecutorAdded";
    /// An executor went away.
    pub(crate) const EXECUTOR_REMOVED: &str = "SparkListenerExecutorRemoved";
    /// A block manager (memory and host:port of an executor) registered.
    pub(crate) const BLOCK_MANAGER_ADDED: &str = "SparkListenerBlockManagerAdded";
    /// Runtime, properties and classpath of the application.
    pub(crate) const ENVIRONMENT_UPDATE: &str = "SparkListenerEnvironmentUpdate";
    /// The application started.
    pub(crate) const APPLICATION_START: &str = "SparkListenerApplicationStart";
    /// The application ended.
    pub(crate) const APPLICATION_END: &str = "SparkListenerApplicationEnd";
    /// A job was submitted with all of its stages.
    pub(crate) const JOB_START: &str = "SparkListenerJobStart";
    /// A job ended.
    pub(crate) const JOB_END: &str = "SparkListenerJobEnd";
    /// A stage attempt was submitted.
    pub(crate) const STAGE_SUBMITTED: &str = "SparkListenerStageSubmitted";
    /// A stage attempt completed or failed.
    pub(crate) const STAGE_COMPLETED: &str = "SparkListenerStageCompleted";
    /// A task started.
    pub(crate) const TASK_START: &str = "SparkListenerTaskStart";
    /// A task ended, with its metrics and accumulator values.
    pub(crate) const TASK_END: &str = "SparkListenerTaskEnd";
    /// Peak executor metrics of one executor during one stage.
    pub(crate) const STAGE_EXECUTOR_METRICS: &str = "SparkListenerStageExecutorMetrics";
    /// Executor metrics sampled on a heartbeat.
    pub(crate) const EXECUTOR_METRICS_UPDATE: &str = "SparkListenerExecutorMetricsUpdate";
    /// A SQL execution (one query) started, with its plan and metric declarations.
    pub(crate) const SQL_EXECUTION_START: &str =
        "org.apache.spark.sql.execution.ui.SparkListenerSQLExecutionStart";
    /// A SQL execution's plan was replaced (adaptive execution).
    pub(crate) const SQL_ADAPTIVE_EXECUTION_UPDATE: &str =
        "org.apache.spark.sql.execution.ui.SparkListenerSQLAdaptiveExecutionUpdate";
    /// Metrics were added to a SQL execution's plan (adaptive execution).
    pub(crate) const SQL_ADAPTIVE_METRIC_UPDATES: &str =
        "org.apache.spark.sql.execution.ui.SparkListenerSQLAdaptiveSQLMetricUpdates";
    /// A SQL execution ended (with an error message when it failed).
    pub(crate) const SQL_EXECUTION_END: &str =
        "org.apache.spark.sql.execution.ui.SparkListenerSQLExecutionEnd";
    /// Metric values recorded outside tasks.
    pub(crate) const DRIVER_ACCUM_UPDATES: &str =
        "org.apache.spark.sql.execution.ui.SparkListenerDriverAccumUpdates";
    /// qprof's extension event: a query's full profile, which Spark has no event for.
    /// Spark's history server skips it as an unknown event.
    pub(crate) const QPROF_QUERY_PROFILE: &str = "org.qprof.eventlog.QueryProfile";
    /// qprof's extension event: a query's sampled native stacks, written after its
    /// profile in an event of their own, so that reading a profile does not read them.
    pub(crate) const QPROF_STACK_SAMPLES: &str = "org.qprof.eventlog.StackSamples";
}

/// Spark's executor metric names, in the order Spark writes them.
pub const EXECUTOR_METRIC_NAMES: [&str; 23] = [
    "JVMHeapMemory",
    "JVMOffHeapMemory",
    "OnHeapExecutionMemory",
    "OffHeapExecutionMemory",
    "OnHeapStorageMemory",
    "OffHeapStorageMemory",
    "OnHeapUnifiedMemory",
    "OffHeapUnifiedMemory",
    "DirectPoolMemory",
    "MappedPoolMemory",
    "ProcessTreeJVMVMemory",
    "ProcessTreeJVMRSSMemory",
    "ProcessTreePythonVMemory",
    "ProcessTreePythonRSSMemory",
    "ProcessTreeOtherVMemory",
    "ProcessTreeOtherRSSMemory",
    "MinorGCCount",
    "MinorGCTime",
    "MajorGCCount",
    "MajorGCTime",
    "TotalGCTime",
    "ConcurrentGCCount",
    "ConcurrentGCTime",
];

/// Formats epoch milliseconds as Spark's REST API does: `2026-11-22T07:41:58.986GMT`.
///
/// ```
/// use qprof_eventlog::format_date;
/// assert_eq!(format_date(1795333318986), "2026-11-22T07:41:58.986GMT");
/// assert_eq!(format_date(-1), "1969-12-31T23:59:59.999GMT");
/// ```
pub fn format_date(epoch_millis: i64) -> String {
    let days = epoch_millis.div_euclid(86_400_000);
    let ms_of_day = epoch_millis.rem_euclid(86_400_000);
    let (y, m, d) = civil_from_days(days);
    let (h, rest) = (ms_of_day / 3_600_000, ms_of_day % 3_600_000);
    let (min, rest) = (rest / 60_000, rest % 60_000);
    let (s, ms) = (rest / 1000, rest % 1000);
    format!("{y:04}-{m:02}-{d:02}T{h:02}:{min:02}:{s:02}.{ms:03}GMT")
}

/// Parses the date forms Spark's REST filters accept (`yyyy-MM-dd`,
/// `yyyy-MM-dd'T'HH:mm:ss.SSS'GMT'`, or epoch milliseconds) into epoch milliseconds.
pub fn parse_date(text: &str) -> Option<i64> {
    if let Ok(ms) = text.parse::<i64>() {
        return Some(ms);
    }
    let (date, time) = match text.split_once('T') {
        Some((d, t)) => (d, Some(t)),
        None => (text, None),
    };
    let mut parts = date.split('-');
    let y: i64 = parts.next()?.parse().ok()?;
    let m: u32 = parts.next()?.parse().ok()?;
    let d: u32 = parts.next()?.parse().ok()?;
    if parts.next().is_some() || !(1..=12).contains(&m) || !(1..=31).contains(&d) {
        return None;
    }
    let mut millis = days_from_civil(y, m, d) * 86_400_000;
    if let Some(time) = time {
        let time = time
            .strip_suffix("GMT")
            .or_else(|| time.strip_suffix('Z'))
            .unwrap_or(time);
        let (hms, frac) = time.split_once('.').unwrap_or((time, "0"));
        let mut hms = hms.split(':');
        let h: i64 = hms.next()?.parse().ok()?;
        let min: i64 = hms.next()?.parse().ok()?;
        let s: i64 = hms.next().unwrap_or("0").parse().ok()?;
        let ms: i64 = frac.parse().ok()?;
        if h > 23 || min > 59 || s > 60 || !(0..1000).contains(&ms) {
            return None;
        }
        millis += ((h * 60 + min) * 60 + s) * 1000 + ms;
    }
    Some(millis)
}

// Howard Hinnant's civil calendar algorithms.
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let m = i64::from(m);
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + i64::from(d) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn dates_parse_in_every_accepted_form() {
        assert_eq!(parse_date("2026-11-22"), Some(1795305600000));
        assert_eq!(
            parse_date("2026-11-22T07:41:58.986GMT"),
            Some(1795333318986)
        );
        assert_eq!(parse_date("1795333318986"), Some(1795333318986));
        for bad in [
            "",
            "2026-13-01",
            "2026-11",
            "yesterday",
            "2026-11-22T25:00:00",
        ] {
            assert_eq!(parse_date(bad), None, "{bad}");
        }
    }

    proptest! {
        #[test]
        fn formatting_and_parsing_round_trip(ms in -10_000_000_000_000_i64..10_000_000_000_000) {
            prop_assert_eq!(parse_date(&format_date(ms)), Some(ms));
        }
    }
}
