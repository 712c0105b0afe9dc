//! Where `qprof sql` finds data: tables from files, directories (Hive-style partitions
//! too) and globs in Parquet, CSV or JSON; SQL statements from a file; sizes as users
//! write them.

use std::path::Path;
use std::str::FromStr;

use anyhow::{Context, Result, bail};
use datafusion::prelude::SessionContext;
use datafusion::sql::sqlparser::dialect::GenericDialect;
use datafusion::sql::sqlparser::tokenizer::{Token, Tokenizer};
use object_store::aws::{AmazonS3, AmazonS3Builder};
use url::Url;

/// File formats tables are read in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum TableFormat {
    /// Apache Parquet.
    Parquet,
    /// CSV with a header line.
    Csv,
    /// Newline-delimited JSON.
    Json,
}

impl TableFormat {
    /// The format of a file named `name`, by its extension (compression suffixes aside).
    fn of_name(name: &str) -> Option<TableFormat> {
        let lower = name.to_ascii_lowercase();
        let stem = [".gz", ".bz2", ".xz", ".zst"]
            .iter()
            .find_map(|c| lower.strip_suffix(c))
            .unwrap_or(&lower);
        let ext = stem.rsplit_once('.')?.1;
        match ext {
            "parquet" => Some(TableFormat::Parquet),
            "csv" => Some(TableFormat::Csv),
            "json" | "ndjson" | "jsonl" => Some(TableFormat::Json),
            _ => None,
        }
    }

    fn sql(self) -> &'static str {
        match self {
            TableFormat::Parquet => "PARQUET",
            TableFormat::Csv => "CSV",
            TableFormat::Json => "JSON",
        }
    }
}

/// A table to register: a name and where its data is.
#[derive(Debug, Clone)]
pub(crate) struct TableSpec {
    /// Table name in SQL.
    pub name: String,
    /// A file, a directory, a glob, or a URL (`s3://bucket/prefix/`).
    pub location: String,
}

impl FromStr for TableSpec {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let (name, location) = s
            .split_once('=')
            .ok_or_else(|| format!("'{s}' is not NAME=LOCATION"))?;
        let valid_name = !name.is_empty()
            && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
            && !name.starts_with(|c: char| c.is_ascii_digit());
        if !valid_name {
            return Err(format!(
                "'{name}' is not a valid table name (letters, digits and _, not starting with a digit)"
            ));
        }
        if location.trim().is_empty() {
            return Err(format!("table '{name}' has no location"));
        }
        Ok(TableSpec {
            name: name.to_string(),
            location: location.to_string(),
        })
    }
}

fn is_url(location: &str) -> bool {
    location.contains("://")
}

fn is_glob(location: &str) -> bool {
    location.contains(['*', '?', '['])
}

/// The format of the first data file found under `dir` (depth first, names in order).
fn format_under(dir: &Path) -> Option<TableFormat> {
    let mut entries: Vec<_> = std::fs::read_dir(dir).ok()?.flatten().collect();
    entries.sort_by_key(|e| e.file_name());
    entries.iter().find_map(|e| {
        let path = e.path();
        if path.is_dir() {
            format_under(&path)
        } else {
            TableFormat::of_name(&e.file_name().to_string_lossy())
        }
    })
}

/// The S3 buckets named in `texts` (`s3://bucket/…` anywhere, e.g. in a table location,
/// a COPY target or a query of a file by its URL), each once.
fn s3_buckets<'a>(texts: impl IntoIterator<Item = &'a str>) -> Vec<String> {
    let mut buckets: Vec<String> = Vec::new();
    for text in texts {
        for (at, _) in text.match_indices("s3://") {
            let rest = &text[at + 5..];
            let end = rest
                .find(|c: char| c == '/' || c == '\'' || c == '"' || c.is_whitespace())
                .unwrap_or(rest.len());
            let bucket = &rest[..end];
            if !bucket.is_empty() && !buckets.iter().any(|b| b == bucket) {
                buckets.push(bucket.to_string());
            }
        }
    }
    buckets
}

/// The S3 client for `bucket`, configured from the standard AWS environment variables
/// (`AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_REGION`, …) and `endpoint` if given
/// (an S3-compatible server; plain HTTP is allowed for it).
///
/// # Errors
/// A bucket or endpoint the S3 client refuses.
pub(crate) fn s3_store(bucket: &str, endpoint: Option<&str>) -> Result<AmazonS3> {
    let mut builder = AmazonS3Builder::from_env().with_bucket_name(bucket);
    if let Some(endpoint) = endpoint {
        builder = builder
            .with_endpoint(endpoint)
            .with_allow_http(endpoint.starts_with("http://"));
    }
    builder
        .build()
        .map_err(|e| anyhow::anyhow!("{}", e.to_string().replace('\n', " ")))
        .with_context(|| format!("cannot use S3 bucket '{bucket}'"))
}

/// Registers an S3 store in `ctx` for every bucket the tables and statements name,
/// configured from the standard AWS environment variables (`AWS_ACCESS_KEY_ID`,
/// `AWS_SECRET_ACCESS_KEY`, `AWS_REGION`, …) and `endpoint` if given (an S3-compatible
/// server; plain HTTP is allowed for it).
///
/// # Errors
/// A bucket or endpoint the S3 client refuses.
pub(crate) fn register_s3(
    ctx: &SessionContext,
    tables: &[TableSpec],
    statements: &[String],
    endpoint: Option<&str>,
) -> Result<()> {
    let texts = tables
        .iter()
        .map(|t| t.location.as_str())
        .chain(statements.iter().map(String::as_str));
    for bucket in s3_buckets(texts) {
        let store = s3_store(&bucket, endpoint)?;
        let url = Url::parse(&format!("s3://{bucket}"))
            .with_context(|| format!("'{bucket}' is not a valid S3 bucket name"))?;
        ctx.runtime_env()
            .register_object_store(&url, std::sync::Arc::new(store));
    }
    Ok(())
}

/// The format of the first data object under the URL `location` (a prefix), as its
/// store lists it; `None` if it cannot be listed or holds no data file.
async fn format_in_store(ctx: &SessionContext, location: &str) -> Option<TableFormat> {
    use futures::StreamExt;
    let url = Url::parse(location).ok()?;
    let store = ctx
        .runtime_env()
        .object_store_registry
        .get_store(&url)
        .ok()?;
    let prefix = object_store::path::Path::from_url_path(url.path()).ok()?;
    let mut objects = store.list(Some(&prefix));
    while let Some(Ok(meta)) = objects.next().await {
        if let Some(format) = TableFormat::of_name(meta.location.as_ref()) {
            return Some(format);
        }
    }
    None
}

/// Registers every table in `ctx` as a listing table (DataFusion infers Hive partitions
/// of directories), in `format` or the one its location shows.
///
/// # Errors
/// A location that does not exist, a format that cannot be told, or DataFusion's refusal,
/// each naming the table.
pub(crate) async fn register_tables(
    ctx: &SessionContext,
    tables: &[TableSpec],
    format: Option<TableFormat>,
) -> Result<()> {
    for table in tables {
        let mut location = table.location.clone();
        let local = !is_url(&location);
        let path = Path::new(&location);
        if local && !is_glob(&location) && !path.exists() {
            bail!(
                "table '{}': '{}' does not exist",
                table.name,
                table.location
            );
        }
        // the object stores a session has: files, and S3 when a table or statement names it
        if !local && !location.starts_with("s3://") && !location.starts_with("file://") {
            bail!(
                "table '{}': '{}' is neither a local path nor an s3:// location",
                table.name,
                table.location
            );
        }
        let is_dir = local && path.is_dir();
        // told, or named, or found: the first data file of a directory or an S3 prefix
        let format = match format.or_else(|| TableFormat::of_name(location.trim_end_matches('/'))) {
            Some(format) => Some(format),
            None if is_dir => format_under(path),
            None if !local && !is_glob(&location) => format_in_store(ctx, &location).await,
            None => None,
        };
        let format = format.with_context(|| {
            format!(
                "table '{}': cannot tell the format of '{}'; give --format parquet, csv or json",
                table.name, table.location
            )
        })?;
        if is_dir && !location.ends_with('/') {
            location.push('/');
        }
        let options = match format {
            TableFormat::Csv => " OPTIONS ('format.has_header' 'true')",
            _ => "",
        };
        let ddl = format!(
            "CREATE EXTERNAL TABLE \"{}\" STORED AS {} LOCATION '{}'{options}",
            table.name,
            format.sql(),
            location.replace('\'', "''"),
        );
        let created = async { ctx.sql(&ddl).await?.collect().await }.await;
        created
            .map_err(|e| anyhow::anyhow!("{}", qprof_datafusion::error_line(&e)))
            .with_context(|| format!("cannot register table '{}'", table.name))?;
    }
    Ok(())
}

/// The statements of a SQL text, each as its own text, in order: the text is cut at the
/// semicolons the SQL tokenizer finds (not those in strings or comments), and pieces with
/// nothing but whitespace and comments are dropped. Each piece is parsed when it runs.
///
/// # Errors
/// The text does not tokenize (an unterminated string, …), or holds no statement.
pub(crate) fn split_statements(sql: &str) -> Result<Vec<String>> {
    let tokens = Tokenizer::new(&GenericDialect {}, sql)
        .tokenize_with_location()
        .map_err(|e| anyhow::anyhow!("SQL error: {e}"))?;
    // byte offset of each line's start, lines counted from 1
    let line_starts: Vec<usize> = std::iter::once(0)
        .chain(sql.match_indices('\n').map(|(i, _)| i + 1))
        .collect();
    let offset = |line: u64, column: u64| -> usize {
        let start = line_starts
            .get((line.max(1) - 1) as usize)
            .copied()
            .unwrap_or(sql.len());
        sql[start..]
            .char_indices()
            .nth((column.max(1) - 1) as usize)
            .map_or(sql.len(), |(i, _)| start + i)
    };
    let mut statements = Vec::new();
    let mut start = 0;
    let mut has_code = false;
    for t in &tokens {
        match t.token {
            Token::SemiColon => {
                let end = offset(t.span.start.line, t.span.start.column);
                if has_code {
                    statements.push(sql[start..end].trim().to_string());
                }
                start = end + 1;
                has_code = false;
            }
            Token::Whitespace(_) | Token::EOF => {}
            _ => has_code = true,
        }
    }
    if has_code {
        statements.push(sql[start..].trim().to_string());
    }
    if statements.is_empty() {
        bail!("no SQL statement to run");
    }
    Ok(statements)
}

/// A size in bytes from `512M`, `2G`, `1.5GiB`, `100k` or `1048576` (units are powers of
/// 1024, as DataFusion's memory settings take them).
pub(crate) fn parse_size(s: &str) -> Result<usize, String> {
    let (number, unit) = number_and_unit(s);
    let factor: f64 = match unit.as_str() {
        "" | "b" => 1.0,
        "k" | "kb" | "kib" => 1024.0,
        "m" | "mb" | "mib" => 1024.0 * 1024.0,
        "g" | "gb" | "gib" => 1024.0 * 1024.0 * 1024.0,
        "t" | "tb" | "tib" => 1024.0_f64.powi(4),
        _ => return Err(format!("'{s}' is not a size (e.g. 512M, 2G, 1048576)")),
    };
    match number.parse::<f64>() {
        Ok(n) if n.is_finite() && n > 0.0 && n * factor >= 1.0 && n * factor < 2f64.powi(62) => {
            Ok((n * factor) as usize)
        }
        _ => Err(format!(
            "'{s}' is not a positive size (e.g. 512M, 2G, 1048576)"
        )),
    }
}

/// A flag value such as `512M` or `10s` split into its number and its unit (trimmed, in
/// lower case).
pub(crate) fn number_and_unit(s: &str) -> (&str, String) {
    let t = s.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (number, unit) = t.split_at(split);
    (number, unit.trim().to_ascii_lowercase())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_by_extension() {
        assert_eq!(
            TableFormat::of_name("a.PARQUET"),
            Some(TableFormat::Parquet)
        );
        assert_eq!(
            TableFormat::of_name("s3://b/x/y.csv.gz"),
            Some(TableFormat::Csv)
        );
        assert_eq!(
            TableFormat::of_name("d/part-0.ndjson"),
            Some(TableFormat::Json)
        );
        assert_eq!(TableFormat::of_name("data/"), None);
        assert_eq!(TableFormat::of_name("data.txt"), None);
    }

    #[test]
    fn sizes() {
        assert_eq!(parse_size("1048576"), Ok(1 << 20));
        assert_eq!(parse_size("512M"), Ok(512 << 20));
        assert_eq!(parse_size("1.5GiB"), Ok(3 << 29));
        assert_eq!(parse_size(" 100 kb "), Ok(100 << 10));
        for bad in ["", "0", "-1G", "lots", "5Q", "1e3", "0.1b"] {
            assert!(parse_size(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn statements_split_where_the_parser_says() {
        let text = "SELECT 'é;' AS a; -- a comment; here\nCOPY t TO 'out/x.csv';\n /* ; */ ;\n";
        assert_eq!(
            split_statements(text).unwrap(),
            vec![
                "SELECT 'é;' AS a",
                "-- a comment; here\nCOPY t TO 'out/x.csv'"
            ]
        );
        assert!(split_statements("  -- nothing\n;").is_err());
        assert!(split_statements("SELECT 'open").is_err());
    }

    #[test]
    fn buckets_named_anywhere() {
        let texts = [
            "s3://one/prefix/",
            "COPY t TO 's3://two/x.parquet'; SELECT * FROM \"s3://one/y\"",
            "s3:// and s3://three",
        ];
        assert_eq!(s3_buckets(texts), vec!["one", "two", "three"]);
    }

    #[test]
    fn table_specs() {
        let t: TableSpec = "t=s3://bucket/prefix/".parse().unwrap();
        assert_eq!(
            (t.name.as_str(), t.location.as_str()),
            ("t", "s3://bucket/prefix/")
        );
        for bad in ["t", "1t=x", "t-x=y", "t="] {
            assert!(bad.parse::<TableSpec>().is_err(), "{bad}");
        }
    }
}
