//! DataFusion's own SQL tests through a real cluster: the sqllogictest files of the
//! `datafusion-sqllogictest` 55.2 crate package (`.ci/run` takes them from it with
//! `cargo fetch`, into the directory `FLOTILLA_SLT_DIR` names; they are never
//! committed here), parsed by the `sqllogictest` crate and run record by record over
//! flotilla's own client with Arrow rows, each file in a schema of its own in the
//! `memory` catalog, on two workers with every query cut into stages.
//!
//! Values are printed as DataFusion's harness prints them (`NULL`, `(empty)`,
//! floats to 12 decimals, decimals without trailing zeros). A query without ORDER BY
//! compares as a multiset. Skipped, each with its reason:
//! - `EXPLAIN` records: plans are the cluster's, not single-node DataFusion's;
//! - `SET datafusion.*` statements: settings of DataFusion's harness (partitions,
//!   batch sizes, optimizer switches); the cluster plans with its own;
//! - records over tables of files in DataFusion's repository (`LOCATION`, `COPY`):
//!   the crate package does not carry `testing/data`;
//! - records hashing their results (`N values hashing to ...`);
//! - records whose SQL Trino reads otherwise, where flotilla keeps Trino's meaning
//!   (`trino_reading`, the README's list): they are counted apart.
//!
//! The suite prints the counts of passed, failed and skipped records, and fails
//! below 95% of the executed query records (`PASS_FLOOR`); docs/testing.md lists
//! the failures by cause.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use bigdecimal::BigDecimal;
use datafusion::arrow::array::{Array, ArrayRef, AsArray, RecordBatch};
use datafusion::arrow::datatypes::DataType;
use datafusion::arrow::util::display::{ArrayFormatter, FormatOptions};
use flotilla::client::StatementClient;
use sqllogictest::{DefaultColumnType, ExpectedError, QueryExpect, Record, SortMode, StatementExpect};

use super::common::{missing_service, Cluster};

/// The files taken: query semantics over tables they create themselves.
const FILES: &[&str] = &[
    "aggregate.slt",
    "case.slt",
    "coalesce.slt",
    "cte.slt",
    "datetime/dates.slt",
    "datetime/date_part.slt",
    "datetime/timestamps.slt",
    "decimal.slt",
    "distinct_on.slt",
    "group.slt",
    "group_by.slt",
    "grouping.slt",
    "in_list.slt",
    "intersection.slt",
    "joins.slt",
    "limit.slt",
    "nullif.slt",
    "order.slt",
    "predicates.slt",
    "qualify.slt",
    "select.slt",
    "string/string.slt",
    "strings.slt",
    "subquery.slt",
    "union.slt",
    "window.slt",
];

/// The share of executed query records that must pass.
const PASS_FLOOR: f64 = 0.95;

#[derive(Default, Debug)]
struct Tally {
    queries_passed: usize,
    queries_failed: usize,
    statements_passed: usize,
    statements_failed: usize,
    skipped: usize,
    trino: usize,
    failures: Vec<String>,
}

enum Outcome {
    Pass,
    Fail(String),
    Skip,
    /// The record's SQL means something else in Trino, whose meaning flotilla keeps
    /// (`trino_reading`); DataFusion's expected result does not apply.
    Trino,
}

/// A cell as DataFusion's sqllogictest harness prints it.
fn cell(col: &ArrayRef, row: usize) -> String {
    if col.is_null(row) {
        return "NULL".into();
    }
    let plain = |text: String, digits: i64| match BigDecimal::from_str(&text) {
        Ok(d) => d.round(digits).normalized().to_plain_string(),
        Err(_) => text,
    };
    let float = |v: f64, text: String| match v {
        v if v.is_nan() => "NaN".to_string(),
        v if v == f64::INFINITY => "Infinity".to_string(),
        v if v == f64::NEG_INFINITY => "-Infinity".to_string(),
        _ => plain(text, 12),
    };
    let text = |s: &str| match s {
        "" => "(empty)".to_string(),
        s => s.trim_end_matches('\n').replace('\u{0000}', "\\0"),
    };
    match col.data_type() {
        DataType::Boolean => col.as_boolean().value(row).to_string(),
        DataType::Float32 => {
            let v = col.as_primitive::<datafusion::arrow::datatypes::Float32Type>().value(row);
            float(v as f64, v.to_string())
        }
        DataType::Float64 => {
            let v = col.as_primitive::<datafusion::arrow::datatypes::Float64Type>().value(row);
            float(v, v.to_string())
        }
        DataType::Decimal128(_, scale) | DataType::Decimal256(_, scale) => plain(formatted(col, row), *scale as i64),
        DataType::Utf8 => text(col.as_string::<i32>().value(row)),
        DataType::LargeUtf8 => text(col.as_string::<i64>().value(row)),
        DataType::Utf8View => text(col.as_string_view().value(row)),
        DataType::Dictionary(_, _) => {
            let dict = col.as_any_dictionary();
            cell(dict.values(), dict.normalized_keys()[row])
        }
        _ => formatted(col, row),
    }
}

/// DataFusion's display options (durations as `0 days 0 hours ...`), nulls `NULL`.
fn formatted(col: &ArrayRef, row: usize) -> String {
    use datafusion::config::ConfigField;
    let mut datafusion_options = datafusion::config::FormatOptions::default();
    let _ = datafusion_options.set("null", "NULL");
    let options: FormatOptions = match (&datafusion_options).try_into() {
        Ok(o) => o,
        Err(e) => return format!("<{e}>"),
    };
    let text = match ArrayFormatter::try_new(col.as_ref(), &options) {
        Ok(f) => f.value(row).to_string(),
        Err(e) => format!("<{e}>"),
    };
    text
}

fn lines(batches: &[RecordBatch]) -> Vec<String> {
    let mut out = Vec::new();
    for b in batches {
        for row in 0..b.num_rows() {
            let cells: Vec<String> = b.columns().iter().map(|c| cell(c, row)).collect();
            out.push(cells.join(" ").trim().to_string());
        }
    }
    out
}

/// Whether the statement's own result is ordered (an ORDER BY at its top).
fn is_ordered(sql: &str) -> bool {
    use datafusion::sql::sqlparser::{ast::Statement, dialect::GenericDialect, parser::Parser};
    match Parser::parse_sql(&GenericDialect {}, sql).ok().as_deref() {
        Some([Statement::Query(q)]) => q.order_by.is_some(),
        _ => sql.to_lowercase().contains("order by"),
    }
}

fn compare(sql: &str, sort: Option<SortMode>, mut got: Vec<String>, expected: &[String]) -> Outcome {
    let mut want: Vec<String> = expected.iter().map(|l| l.split_whitespace().collect::<Vec<_>>().join(" ")).collect();
    got = got.iter().map(|l| l.split_whitespace().collect::<Vec<_>>().join(" ")).collect();
    if want.iter().any(|l| l.contains("values hashing to")) {
        return Outcome::Skip;
    }
    match sort {
        Some(SortMode::ValueSort) => {
            let split = |v: &[String]| -> Vec<String> {
                let mut all: Vec<String> = v.iter().flat_map(|l| l.split(' ').map(str::to_string)).collect();
                all.sort();
                all
            };
            (got, want) = (split(&got), split(&want));
        }
        Some(SortMode::RowSort) => {
            got.sort();
            want.sort();
        }
        _ if !is_ordered(sql) => {
            got.sort();
            want.sort();
        }
        _ => {}
    }
    match got == want {
        true => Outcome::Pass,
        false => Outcome::Fail(format!("expected {want:?}\n  got {got:?}")),
    }
}

/// DataFusion's harness prints an error as `DataFusion error: ` and the error's kind
/// before its message; the cluster answers with the message, after the task that
/// failed. Both are taken off the expected pattern before it is matched.
const ERROR_PREFIXES: &[&str] = &[
    "DataFusion error: ",
    "Error during planning: ",
    "Execution error: ",
    "This feature is not implemented: ",
    "Arrow error: ",
    "Schema error: ",
    "SQL error: ",
    "Invalid argument error: ",
    "Internal error: ",
    r"Optimizer rule 'simplify_expressions' failed\ncaused by\n",
    r"Invalid \(non-executable\) plan after Analyzer\ncaused by\n",
];

fn error_matches(expected: &ExpectedError, message: &str) -> Outcome {
    if expected.is_match(message, None) {
        return Outcome::Pass;
    }
    if let ExpectedError::Inline(regex) = expected {
        let mut pattern = regex.as_str();
        while let Some(rest) = ERROR_PREFIXES.iter().find_map(|p| pattern.strip_prefix(p)) {
            pattern = rest;
        }
        if regex::Regex::new(pattern).is_ok_and(|r| r.is_match(message)) {
            return Outcome::Pass;
        }
    }
    Outcome::Fail(format!("error '{message}' does not match '{expected}'"))
}

/// DataFusion settings that change what SQL means or how values print (its time
/// zone, its parser's options), with their defaults where one is known: the records
/// run while one is away from its default ran under it in DataFusion's harness, and
/// are skipped here.
const SEMANTIC_SETTINGS: &[(&str, Option<&str>)] = &[
    ("datafusion.execution.time_zone", None),
    ("time zone", None),
    ("datafusion.sql_parser.enable_ident_normalization", Some("true")),
    ("datafusion.sql_parser.default_null_ordering", Some("nulls_max")),
    ("datafusion.sql_parser.parse_float_as_decimal", Some("false")),
    ("datafusion.sql_parser.dialect", Some("generic")),
    ("datafusion.sql_parser.", None),
];

/// The mark, among the names of unreadable tables, that a semantic setting is away
/// from its default.
const SEMANTIC_SETTING: &str = " setting ";

/// Tracks `SET` and `RESET` of the semantic settings.
fn track_setting(sql: &str, external: &mut HashSet<String>) {
    let lower = sql.trim().trim_end_matches(';').to_lowercase();
    let (reset, rest) = match (lower.strip_prefix("set "), lower.strip_prefix("reset ")) {
        (Some(rest), _) => (false, rest.trim()),
        (_, Some(rest)) => (true, rest.trim()),
        _ => return,
    };
    let Some((name, default)) = SEMANTIC_SETTINGS.iter().find(|(n, _)| rest.starts_with(n)) else { return };
    let value = rest[name.len()..].trim_start_matches(|c: char| c != '=' && c != ' ' && c != '\'');
    let value = value.trim().trim_start_matches('=').trim().trim_start_matches("to ").trim().trim_matches('\'');
    // `SET TIME ZONE` sets `datafusion.execution.time_zone`; UTC is where the cluster is.
    let time_zone = name.contains("time") && name.contains("zone");
    let setting = rest.split([' ', '=']).next().unwrap_or(name);
    let mark = format!("{SEMANTIC_SETTING}{}", if time_zone { "time_zone" } else { setting });
    let utc = time_zone && ["+00", "+00:00", "utc", "z"].contains(&value);
    match reset || utc || default.is_some_and(|d| d == value) {
        true => external.remove(&mark),
        false => external.insert(mark),
    };
}

/// Why a record is not run, if it is not.
fn skipped(sql: &str, external: &HashSet<String>) -> bool {
    let lower = sql.trim_start().to_lowercase();
    if external.iter().any(|e| e.starts_with(SEMANTIC_SETTING)) {
        return true;
    }
    let setting = ["set datafusion.", "set time zone", "reset "].iter().any(|p| lower.starts_with(p));
    if lower.starts_with("explain") || setting {
        return true;
    }
    lower.split(|c: char| !(c.is_alphanumeric() || c == '_')).any(|w| external.contains(w))
}

/// Where Trino and DataFusion read the same SQL differently and flotilla reads it
/// as Trino does (the README's list), the difference in `sql`, if any: a
/// `TIMESTAMP '2022-08-03 14:38:50Z'` literal with a zone after its time is a
/// `timestamp with time zone` in Trino, a UTC timestamp without one in DataFusion.
fn trino_reading(sql: &str) -> Option<&'static str> {
    let lower = sql.to_lowercase();
    let zoned = lower.match_indices("timestamp '").any(|(at, m)| {
        let literal = lower[at + m.len()..].split('\'').next().unwrap_or_default();
        let Some((date, rest)) = literal.trim().split_once(' ') else { return false };
        let time_end = rest.find(|c: char| !(c.is_ascii_digit() || c == ':' || c == '.')).unwrap_or(rest.len());
        date.chars().all(|c| c.is_ascii_digit() || c == '-') && time_end > 0 && !rest[time_end..].trim().is_empty()
    });
    zoned.then_some("a zoned TIMESTAMP literal is a timestamp with time zone")
}

/// The table or view a `CREATE` statement makes.
fn created(sql: &str) -> Option<String> {
    let lower = sql.to_lowercase();
    let words: Vec<&str> = lower.split_whitespace().collect();
    if words.first() != Some(&"create") {
        return None;
    }
    let at = words.iter().position(|w| *w == "table" || *w == "view")?;
    let name = words.get(at + 1..)?.iter().find(|w| !matches!(**w, "if" | "not" | "exists"))?;
    let name = name.trim_matches('"').split('(').next().unwrap_or_default();
    (!name.is_empty()).then(|| name.to_string())
}

/// Whether a statement reads or writes files of DataFusion's repository (a table
/// over them, `COPY`).
fn touches_files(sql: &str) -> bool {
    let lower = sql.to_lowercase();
    let words: Vec<&str> = lower.split_whitespace().collect();
    words.contains(&"location") || words.first() == Some(&"copy")
}

async fn run_record(
    client: &StatementClient,
    record: &Record<DefaultColumnType>,
    external: &mut HashSet<String>,
) -> (bool, Outcome) {
    match record {
        Record::Statement { sql, expected, conditions, .. } => {
            track_setting(sql, external);
            // What a skipped statement makes, the records after it cannot read either.
            if !conditions.is_empty() || touches_files(sql) || skipped(sql, external) {
                external.extend(created(sql));
                return (false, Outcome::Skip);
            }
            let result = client.execute(sql.trim().trim_end_matches(';')).await;
            let outcome = match (result, expected) {
                (Ok(_), StatementExpect::Ok) => Outcome::Pass,
                (Ok(got), StatementExpect::Count(n)) => {
                    // A statement that changes no table counts none, as DataFusion's
                    // harness counts it.
                    let count = got.update_count.map(|c| c as u64).or(got.rows.is_empty().then_some(0));
                    match count == Some(*n) {
                        true => Outcome::Pass,
                        false => Outcome::Fail(format!("expected {n} rows changed, got {count:?}")),
                    }
                }
                (Ok(_), StatementExpect::Error(e)) => Outcome::Fail(format!("expected an error matching '{e}'")),
                (Err(e), StatementExpect::Error(expected)) => error_matches(expected, &e.to_string()),
                (Err(e), _) => Outcome::Fail(e.to_string()),
            };
            (false, outcome)
        }
        Record::Query { sql, expected, conditions, .. } => {
            if !conditions.is_empty() || skipped(sql, external) {
                return (true, Outcome::Skip);
            }
            if trino_reading(sql).is_some() {
                return (true, Outcome::Trino);
            }
            let result = client.execute(sql.trim().trim_end_matches(';')).await;
            let outcome = match (result, expected) {
                (Ok(got), QueryExpect::Results { sort_mode, results, .. }) => {
                    compare(sql, *sort_mode, lines(&got.batches), results)
                }
                (Ok(_), QueryExpect::Error(e)) => Outcome::Fail(format!("expected an error matching '{e}'")),
                (Err(e), QueryExpect::Error(expected)) => error_matches(expected, &e.to_string()),
                (Err(e), _) => Outcome::Fail(e.to_string()),
            };
            (true, outcome)
        }
        _ => (false, Outcome::Skip),
    }
}

async fn run_file(cluster: &Cluster, dir: &Path, file: &str, n: usize, tally: &mut Tally) {
    let path: PathBuf = dir.join(file);
    let records =
        sqllogictest::parse_file::<DefaultColumnType>(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let schema = format!("slt{n}");
    let admin = StatementClient::new(&cluster.coordinator.url).with_catalog("memory").with_schema("default");
    admin.execute(&format!("CREATE SCHEMA memory.{schema}")).await.expect("a schema per file");
    let client =
        StatementClient::new(&cluster.coordinator.url).with_catalog("memory").with_schema(&schema).with_rows_as_arrow();
    let mut external = HashSet::new();
    for record in &records {
        if matches!(record, Record::Halt { .. }) {
            break;
        }
        let (is_query, outcome) = run_record(&client, record, &mut external).await;
        let at = match record {
            Record::Statement { loc, sql, .. } | Record::Query { loc, sql, .. } => format!("{loc}: {}", sql.trim()),
            _ => String::new(),
        };
        match (is_query, outcome) {
            (_, Outcome::Skip) => tally.skipped += 1,
            (_, Outcome::Trino) => tally.trino += 1,
            (true, Outcome::Pass) => tally.queries_passed += 1,
            (false, Outcome::Pass) => tally.statements_passed += 1,
            (true, Outcome::Fail(why)) => {
                tally.queries_failed += 1;
                tally.failures.push(format!("{at}\n  {why}"));
            }
            (false, Outcome::Fail(why)) => {
                tally.statements_failed += 1;
                tally.failures.push(format!("{at}\n  {why}"));
            }
        }
    }
    // Its tables' rows leave the workers' pools.
    let _ = admin.execute(&format!("DROP SCHEMA memory.{schema} CASCADE")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn datafusion_sqllogictest_files_pass_through_the_cluster() {
    let Ok(dir) = std::env::var("FLOTILLA_SLT_DIR") else {
        return missing_service(
            "datafusion_sqllogictest_files_pass_through_the_cluster",
            "FLOTILLA_SLT_DIR is not set",
        );
    };
    let dir = PathBuf::from(dir);
    let cluster = Cluster::start(2, &[]).await;
    let mut tally = Tally::default();
    // FLOTILLA_SLT_ONLY=limit.slt runs the files whose names contain it.
    let only = std::env::var("FLOTILLA_SLT_ONLY").unwrap_or_default();
    for (n, file) in FILES.iter().enumerate().filter(|(_, f)| f.contains(only.as_str())) {
        let before = (tally.queries_passed, tally.queries_failed);
        run_file(&cluster, &dir, file, n, &mut tally).await;
        println!(
            "sqllogictest {file}: {} of {} queries passed",
            tally.queries_passed - before.0,
            tally.queries_passed + tally.queries_failed - before.0 - before.1
        );
    }
    if let Ok(out) = std::env::var("FLOTILLA_SLT_FAILURES") {
        std::fs::write(out, tally.failures.join("\n\n")).expect("write the failures");
    }
    let executed = tally.queries_passed + tally.queries_failed;
    let share = tally.queries_passed as f64 / executed.max(1) as f64;
    println!(
        "sqllogictest: {} of {executed} query records passed ({:.1}%), statements {} passed {} failed, {} records skipped, {} read with Trino's meaning",
        tally.queries_passed,
        share * 100.0,
        tally.statements_passed,
        tally.statements_failed,
        tally.skipped,
        tally.trino
    );
    assert!(executed > 1000, "too few query records ran: {tally:?}");
    assert!(
        share >= PASS_FLOOR,
        "{:.1}% of query records passed; first failures:\n{}",
        share * 100.0,
        tally.failures.iter().take(20).cloned().collect::<Vec<_>>().join("\n")
    );
    cluster.assert_no_tasks_left().await;
}
