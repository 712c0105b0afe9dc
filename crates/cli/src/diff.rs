//! `qprof diff`: two runs' profiles compared, query by query and operator by operator; a
//! profile is a `--profile-out` file or a query in an event log (`LOGDIR:APP:SQLID`).

use std::path::Path;

use anyhow::{Context, Result, bail};
use qprof_eventlog::diff_queries as diff_query;
use qprof_eventlog::discover;
use qprof_eventlog::{ProfilesDocument, QueryJson};
use qprof_eventlog::{Replay, scan_info};

use crate::cli::DiffArgs;

/// The profiles `spec` names: a `--profile-out` file, or `LOGDIR:APP:SQLID`, one query
/// of an application in an event-log directory.
fn read(spec: &str) -> Result<Vec<QueryJson>> {
    let path = Path::new(spec);
    if !path.exists()
        && let Some((rest, sql)) = spec.rsplit_once(':')
        && let Some((dir, app)) = rest.rsplit_once(':')
    {
        return from_log(Path::new(dir), app, sql).map(|q| vec![q]);
    }
    let text = std::fs::read_to_string(path).with_context(|| format!("cannot read '{spec}'"))?;
    let doc = ProfilesDocument::parse(&text).with_context(|| format!("cannot read '{spec}'"))?;
    Ok(doc.queries)
}

/// The profile of SQL execution `sql` of application `app` in the log directory `dir`.
fn from_log(dir: &Path, app: &str, sql: &str) -> Result<QueryJson> {
    let sql: i64 = sql
        .parse()
        .with_context(|| format!("'{sql}' is not a SQL execution id"))?;
    let sources =
        discover(dir).with_context(|| format!("cannot read log directory '{}'", dir.display()))?;
    let source = sources
        .into_iter()
        .find(|s| scan_info(s).is_ok_and(|info| info.id.as_deref() == Some(app)))
        .with_context(|| format!("no application '{app}' in '{}'", dir.display()))?;
    let replay = Replay::load(source).map_err(|e| anyhow::anyhow!("{e}"))?;
    let execution = replay
        .state()
        .executions
        .get(&sql)
        .with_context(|| format!("application '{app}' has no SQL execution {sql}"))?;
    match execution.qprof_profile() {
        Some(Ok(profile)) => Ok(profile),
        Some(Err(why)) => bail!("the profile of '{app}' SQL {sql} cannot be read: {why}"),
        None => bail!("'{app}' SQL {sql} has no qprof profile (not run by qprof)"),
    }
}

/// `qprof diff A B`: prints each query both runs have, and fails when asked to and an
/// operator regressed beyond the limit.
pub(crate) fn diff(args: &DiffArgs) -> Result<()> {
    let (before, after) = (read(&args.before)?, read(&args.after)?);
    let limit = args.fail_on_regression;
    let mut compared = 0;
    let mut regressed = Vec::new();
    // one query on each side: those two, whatever their ids; else queries by id
    let single = before.len() == 1 && after.len() == 1;
    for query in &after {
        let earlier = if single {
            before.first()
        } else {
            before.iter().find(|q| q.id == query.id)
        };
        let Some(earlier) = earlier else {
            println!("query {}: only in the second run\n", query.id);
            continue;
        };
        compared += 1;
        let shown = diff_query(earlier, query, args.threshold);
        println!("{}", shown.render_text());
        if let Some(limit) = limit {
            let failing = diff_query(earlier, query, limit);
            regressed.extend(
                failing
                    .operators
                    .iter()
                    .filter(|o| o.regressed)
                    .map(|o| format!("query {} #{} {}", query.id, o.id, o.name)),
            );
        }
    }
    if compared == 0 {
        bail!("the two profiles have no query in common");
    }
    if let Some(limit) = limit
        && !regressed.is_empty()
    {
        bail!(
            "{} operator{} regressed by more than {limit}%: {}",
            regressed.len(),
            if regressed.len() == 1 { "" } else { "s" },
            regressed.join(", ")
        );
    }
    Ok(())
}
