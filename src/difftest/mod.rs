//! The differential tester: queries drawn from seeds (`generator`) over small tables
//! made for it (NULLs, NaN, duplicates, skew, an empty table), each run on a cluster
//! under several session configurations and checked against an oracle:
//!
//! - single-node DataFusion over the same rows, for the forms both engines mean
//!   alike;
//! - for `INTERSECT ALL` and `EXCEPT ALL` (where DataFusion is wrong), the multiset
//!   computed here from DataFusion's rows of each side;
//! - for a subquery outside `WHERE` (which DataFusion cannot plan), DataFusion's answer
//!   to the same question as a join;
//! - DuckDB (`duckdb`), where a Python with its module is given, for every query whose
//!   meaning the two engines share, including those DataFusion cannot plan;
//! - ternary logic partitioning (SQLancer's TLP), which needs no second engine: a
//!   query with a filter `p` has the rows of the same query filtered by `p`, by
//!   `NOT p` and by `p IS NULL`, together;
//! - the non-optimizing reference (SQLancer's NoREC), which needs none either: a query
//!   filtered by `p` has as many rows as `count(CASE WHEN p THEN 1 END)` over its
//!   unfiltered input counts, and the second form leaves the optimizer no filter to
//!   push, no subquery in `WHERE` to decorrelate by DataFusion's shapes, and no join
//!   condition to build from `p`.
//!
//! A query that both sides refuse is counted as refused; one refused by one side
//! only, or answered differently, is a mismatch, printed with its seed and the
//! smallest form of it that still differs. `flotilla difftest` runs it on a local
//! cluster; the TPC-H integration test runs it on its own in CI.

pub mod duckdb;
pub mod generator;

use std::collections::BTreeMap;

use datafusion::prelude::SessionContext;
use serde_json::Value;

use crate::client::StatementClient;
use generator::{Query, Select};

/// The tables' rows: `(k, a, b, d, s)`; `k` skewed towards 1, the others with NULLs,
/// duplicates and a NaN.
const ROWS: [&[&str]; 3] = [
    &[
        "(1, 1, 10, 0.5, 'a')",
        "(1, 1, 10, 0.5, 'a')",
        "(1, NULL, 3, 1.5, 'b')",
        "(1, -2, NULL, CAST('NaN' AS DOUBLE), 'ab')",
        "(1, 3, 7, NULL, '')",
        "(2, 0, 0, -2.0, NULL)",
        "(2, 2, 2, 3.25, 'c')",
        "(3, NULL, NULL, NULL, NULL)",
        "(4, 1, 5, 0.5, 'b')",
        "(NULL, 2, 1, 1.5, 'a')",
        "(NULL, NULL, 4, -2.0, 'c')",
        "(1, 2, 9, 3.25, 'b')",
    ],
    &[
        "(1, 1, 1, 0.5, 'a')",
        "(1, 2, NULL, 1.5, 'ab')",
        "(2, 2, 2, NULL, 'b')",
        "(2, NULL, 10, CAST('NaN' AS DOUBLE), NULL)",
        "(3, 3, 3, -2.0, 'c')",
        "(3, 3, 3, -2.0, 'c')",
        "(5, 0, 7, 0.5, '')",
        "(NULL, 1, NULL, 3.25, 'a')",
    ],
    &[],
];

/// The statements making the tables, over `prefix` (`memory.default.` on a cluster,
/// nothing on DataFusion).
pub fn table_statements(prefix: &str) -> Vec<String> {
    let columns = "CAST(k AS INTEGER) k, CAST(a AS INTEGER) a, CAST(b AS BIGINT) b, CAST(d AS DOUBLE) d, \
                   CAST(s AS VARCHAR) s";
    generator::TABLES
        .iter()
        .zip(ROWS)
        .map(|(name, rows)| match rows.is_empty() {
            false => format!(
                "CREATE TABLE {prefix}{name} AS SELECT {columns} FROM (VALUES {}) v(k, a, b, d, s)",
                rows.join(", ")
            ),
            true => format!("CREATE TABLE {prefix}{name} AS SELECT * FROM {prefix}dt0 WHERE k < 0"),
        })
        .collect()
}

/// What a run found.
#[derive(Debug, Default)]
pub struct Report {
    pub queries: usize,
    /// Checks made: a query under each session, its TLP parts, its NoREC count.
    pub checks: usize,
    /// Queries both sides refused.
    pub refused: usize,
    /// The first few of them, with the cluster's error: what to widen next.
    pub refusals: Vec<String>,
    /// Queries the cluster answered and DataFusion refused.
    pub beyond_oracle: usize,
    /// Queries compared with DuckDB's rows (none without DuckDB).
    pub duckdb_checks: usize,
    /// Queries of a shared meaning that DuckDB refused or the cluster did.
    pub duckdb_refused: usize,
    pub mismatches: Vec<Mismatch>,
}

#[derive(Debug)]
pub struct Mismatch {
    pub seed: u64,
    pub session: String,
    pub query: String,
    pub reduced: String,
    pub why: String,
}

impl std::fmt::Display for Mismatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "seed {} ({}): {}\n  query:   {}\n  reduced: {}",
            self.seed, self.session, self.why, self.query, self.reduced
        )
    }
}

/// The session configurations each query runs under (beyond the client's own).
pub const SESSIONS: [&[(&str, &str)]; 3] =
    [&[], &[("retry_policy", "task")], &[("execution_policy", "all-at-once"), ("join_max_broadcast_table_size", "0B")]];

/// Rows as a sorted multiset of their JSON texts.
type Rows = Vec<String>;

fn multiset(rows: Vec<Vec<Value>>) -> Rows {
    let mut out: Rows = rows.iter().map(|r| serde_json::to_string(r).unwrap_or_default()).collect();
    out.sort();
    out
}

/// DataFusion over the tester's tables.
pub async fn oracle_context() -> Result<SessionContext, String> {
    let ctx = SessionContext::new_with_config(datafusion::prelude::SessionConfig::new().with_target_partitions(2));
    for sql in table_statements("") {
        ctx.sql(&sql).await.map_err(|e| e.to_string())?.collect().await.map_err(|e| e.to_string())?;
    }
    Ok(ctx)
}

async fn datafusion_rows(ctx: &SessionContext, sql: &str) -> Result<Rows, String> {
    let batches = ctx.sql(sql).await.map_err(|e| e.to_string())?.collect().await.map_err(|e| e.to_string())?;
    let mut rows = Vec::new();
    for b in &batches {
        rows.extend(crate::format::batch_to_json_rows(b).map_err(|e| e.to_string())?);
    }
    Ok(multiset(rows))
}

async fn cluster_rows(client: &StatementClient, sql: &str) -> Result<Rows, String> {
    client.execute(sql).await.map(|o| multiset(o.rows)).map_err(|e| e.to_string())
}

/// `left op right` computed on multisets: `INTERSECT ALL` keeps `min(m, n)` copies of
/// a row, `EXCEPT ALL` `max(0, m - n)`.
fn counted(op: &str, left: Rows, right: Rows) -> Rows {
    let mut right_counts: BTreeMap<String, usize> = BTreeMap::new();
    for r in right {
        *right_counts.entry(r).or_default() += 1;
    }
    let mut out = Vec::new();
    for r in left {
        let n = right_counts.entry(r.clone()).or_default();
        match (op, *n > 0) {
            ("INTERSECT ALL", true) | ("EXCEPT ALL", false) => out.push(r),
            _ => {}
        }
        if *n > 0 {
            *n -= 1;
        }
    }
    out.sort();
    out
}

/// The expected rows of `q`, or the oracle's refusal.
async fn expected(ctx: &SessionContext, q: &Query) -> Result<Rows, String> {
    match q {
        Query::Select(s) => datafusion_rows(ctx, &s.sql()).await,
        Query::SetOperation { op, left, right } if op.ends_with("ALL") && *op != "UNION ALL" => {
            let l = datafusion_rows(ctx, &left.sql()).await?;
            let r = datafusion_rows(ctx, &right.sql()).await?;
            Ok(counted(op, l, r))
        }
        Query::SetOperation { .. } => datafusion_rows(ctx, &q.sql()).await,
        Query::Rewritten { plain, .. } => datafusion_rows(ctx, &plain.sql()).await,
        Query::Blind(_) => Err("DataFusion is known to answer this form wrongly".into()),
    }
}

/// Why `got` is not `want`, if it is not.
fn differs(got: &Result<Rows, String>, want: &Result<Rows, String>) -> Option<String> {
    match (got, want) {
        (Ok(g), Ok(w)) if g == w => None,
        (Ok(g), Ok(w)) => {
            Some(format!("{} rows, expected {}: {:?} against {:?}", g.len(), w.len(), first(g), first(w)))
        }
        (Err(_), Err(_)) => None,
        (Err(e), Ok(_)) => Some(format!("the cluster failed where the oracle answered: {e}")),
        (Ok(_), Err(e)) => Some(format!("the cluster answered where the oracle failed: {e}")),
    }
}

fn first(rows: &Rows) -> Vec<&String> {
    rows.iter().take(4).collect()
}

/// The TLP parts of a select with a filter: the same select filtered by `p`, `NOT p`
/// and `p IS NULL`, as one `UNION ALL`, and the select without its filter.
fn ternary_parts(s: &Select) -> Option<(String, String)> {
    let p = s.filter.as_ref()?;
    // DISTINCT and aggregates do not distribute over the union.
    if s.distinct || s.group_by.is_some() || s.items.iter().any(|i| i.contains(" OVER ")) {
        return None;
    }
    let part = |f: String| Select { filter: Some(f), ..s.clone() }.sql();
    let union =
        [part(format!("({p})")), part(format!("NOT ({p})")), part(format!("({p}) IS NULL"))].join(" UNION ALL ");
    Some((Select { filter: None, ..s.clone() }.sql(), union))
}

/// How many refusals a report keeps.
const REFUSALS_KEPT: usize = 10;

/// Queries checked at once: a query's time is mostly round trips between the client,
/// the coordinator and the workers, which several in flight overlap.
const IN_FLIGHT: usize = 4;

/// Runs `count` queries from `seed` on the cluster `client` talks to (with its session
/// properties), whose `memory` catalog gets the tester's tables (replaced if there);
/// with DuckDB too where `duckdb_python` names a Python that imports it. The report
/// is the same whatever order the queries finish in.
pub async fn run(
    client: StatementClient,
    seed: u64,
    count: usize,
    duckdb_python: Option<&std::path::Path>,
) -> Result<Report, String> {
    use futures::StreamExt;
    let mut duckdb = duckdb_python.map(duckdb::DuckDb::start).transpose()?;
    let base = client.with_catalog("memory").with_schema("default");
    for name in generator::TABLES {
        let _ = base.execute(&format!("DROP TABLE IF EXISTS memory.default.{name}")).await;
    }
    for sql in table_statements("memory.default.") {
        base.execute(&sql).await.map_err(|e| format!("{sql}: {e}"))?;
    }
    let ctx = oracle_context().await?;
    let clients: Vec<(String, StatementClient)> = SESSIONS
        .iter()
        .map(|s| {
            let name = s.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(" ");
            let client = s.iter().fold(base.clone(), |c, (k, v)| c.with_session(*k, *v));
            (if name.is_empty() { "stages".into() } else { name }, client)
        })
        .collect();
    let (ctx, clients) = (&ctx, &clients);
    // One session per query, in turn, keeps the run short; over a run each
    // configuration sees a third of the queries.
    let mut checked = futures::stream::iter(0..count)
        .map(|i| {
            let (session, client) = &clients[i % clients.len()];
            check(ctx, client, session, seed.wrapping_add(i as u64))
        })
        .buffered(IN_FLIGHT);
    let mut report = Report::default();
    while let Some(c) = checked.next().await {
        // DuckDB is one process answering in turn: it is asked here, in query order.
        if let Some(duckdb) = duckdb.as_mut() {
            if let Some(m) = against_duckdb(duckdb, &c.query, &c.got, &mut report) {
                report.mismatches.push(Mismatch { seed: c.seed, session: c.session.clone(), ..m });
            }
        }
        report.add(c.report);
    }
    Ok(report)
}

/// One query checked against the oracles that do not need DuckDB.
struct Checked {
    seed: u64,
    session: String,
    query: Query,
    got: Result<Rows, String>,
    report: Report,
}

/// The query of `query_seed` run on `client` (under `session`) and checked against
/// DataFusion (`ctx`) and the oracle-free partitions.
async fn check(ctx: &SessionContext, client: &StatementClient, session: &str, query_seed: u64) -> Checked {
    let q = generator::query(query_seed);
    let want = expected(ctx, &q).await;
    let got = cluster_rows(client, &q.sql()).await;
    let mut report = Report { queries: 1, ..Report::default() };
    let mismatch = |m: Mismatch| Mismatch { seed: query_seed, session: session.to_string(), ..m };
    match (&want, &got) {
        (Err(_), Err(e)) => {
            report.refused += 1;
            report.refusals.push(format!("seed {query_seed}: {e}\n  query: {}", q.sql()));
        }
        // What DataFusion refuses (a correlated `NOT IN`, a subquery outside
        // `WHERE`) or is known to answer wrongly (`Query::Blind`) only the
        // partitions below can check.
        (Err(_), Ok(_)) => report.beyond_oracle += 1,
        _ => report.checks += 1,
    }
    let both_refused = want.is_err() && got.is_err();
    if let (false, Some(why)) = (want.is_err(), differs(&got, &want)) {
        let reduced = reduce(ctx, client, &q).await;
        report.mismatches.push(mismatch(Mismatch { seed: 0, session: String::new(), query: q.sql(), reduced, why }));
    } else if let (false, Some(s)) = (both_refused, q.select()) {
        let found = oracle_free(client, s, &got, &mut report).await;
        report.mismatches.extend(found.into_iter().map(mismatch));
    }
    Checked { seed: query_seed, session: session.to_string(), query: q, got, report }
}

impl Report {
    fn add(&mut self, other: Report) {
        self.queries += other.queries;
        self.checks += other.checks;
        self.refused += other.refused;
        let room = REFUSALS_KEPT.saturating_sub(self.refusals.len());
        self.refusals.extend(other.refusals.into_iter().take(room));
        self.beyond_oracle += other.beyond_oracle;
        self.duckdb_checks += other.duckdb_checks;
        self.duckdb_refused += other.duckdb_refused;
        self.mismatches.extend(other.mismatches);
    }
}

/// The checks of `s` that need no second engine: its TLP partitions against the whole,
/// and its row count (`got`) against its NoREC count; mismatches without their seed and
/// session.
async fn oracle_free(
    client: &StatementClient,
    s: &Select,
    got: &Result<Rows, String>,
    report: &mut Report,
) -> Vec<Mismatch> {
    let mut out = Vec::new();
    let found =
        |query: String, reduced: String, why: String| Mismatch { seed: 0, session: String::new(), query, reduced, why };
    if let Some((whole, parts)) = ternary_parts(s) {
        report.checks += 1;
        let (a, b) = (cluster_rows(client, &whole).await, cluster_rows(client, &parts).await);
        if let Some(why) = differs(&b, &a) {
            out.push(found(parts, whole, format!("TLP: the partitions differ from the whole: {why}")));
        }
    }
    if let (Some(counting), Ok(rows)) = (unoptimized_count(s), got) {
        report.checks += 1;
        let counted = cluster_rows(client, &counting).await;
        let want = Ok(vec![serde_json::to_string(&[rows.len()]).unwrap_or_default()]);
        if let Some(why) = differs(&counted, &want) {
            out.push(found(s.sql(), counting, format!("NoREC: the filtered rows differ from the count: {why}")));
        }
    }
    out
}

/// NoREC's form of a select with a filter `p` whose rows are not merged (no
/// `DISTINCT`, no grouping): its input counted by `count(CASE WHEN p THEN 1 END)`.
/// Only for a `p` with a subquery, where the two forms take the most different paths
/// (a subquery in a filter against one in an aggregate's argument), which keeps the
/// run short.
fn unoptimized_count(s: &Select) -> Option<String> {
    let p = s.filter.as_ref()?;
    if s.distinct || s.group_by.is_some() || !s.filter_subquery {
        return None;
    }
    let counting = Select {
        distinct: false,
        items: vec![format!("count(CASE WHEN {p} THEN 1 END)")],
        filter: None,
        filter_subquery: false,
        group_by: None,
        having: None,
        ..s.clone()
    };
    Some(counting.sql())
}

/// `q`'s rows on the cluster (`got`) against DuckDB's, where both engines mean it
/// alike and both answer; a mismatch without its seed and session.
fn against_duckdb(
    duckdb: &mut duckdb::DuckDb,
    q: &Query,
    got: &Result<Rows, String>,
    report: &mut Report,
) -> Option<Mismatch> {
    let sql = q.sql();
    if !duckdb::same_meaning(&sql) {
        return None;
    }
    let (Ok(got), Ok(want)) = (got, duckdb.rows(&sql)) else {
        report.duckdb_refused += 1;
        return None;
    };
    report.duckdb_checks += 1;
    let got: Vec<Vec<Value>> = got.iter().map(|r| serde_json::from_str(r).unwrap_or_default()).collect();
    let (got, want) = (duckdb::canonical(&got), duckdb::canonical(&want));
    if got == want {
        return None;
    }
    let why =
        format!("DuckDB: {} rows, expected {}: {:?} against {:?}", got.len(), want.len(), first(&got), first(&want));
    Some(Mismatch { seed: 0, session: String::new(), query: sql.clone(), reduced: sql, why })
}

/// The smallest form of `q` (one part dropped at a time) that still differs.
async fn reduce(ctx: &SessionContext, client: &StatementClient, q: &Query) -> String {
    let mut current = q.clone();
    'shrink: loop {
        let candidates: Vec<Query> = match &current {
            Query::Select(s) => generator::smaller(s).into_iter().map(Query::Select).collect(),
            Query::SetOperation { op, left, right } => {
                let mut c: Vec<Query> = generator::smaller(left)
                    .into_iter()
                    .filter(|l| l.items.len() == left.items.len())
                    .map(|l| Query::SetOperation { op, left: l, right: right.clone() })
                    .collect();
                c.extend(
                    generator::smaller(right)
                        .into_iter()
                        .filter(|r| r.items.len() == right.items.len())
                        .map(|r| Query::SetOperation { op, left: left.clone(), right: r }),
                );
                c
            }
            Query::Rewritten { .. } | Query::Blind(_) => Vec::new(),
        };
        for candidate in candidates {
            let want = expected(ctx, &candidate).await;
            let got = cluster_rows(client, &candidate.sql()).await;
            if differs(&got, &want).is_some() {
                current = candidate;
                continue 'shrink;
            }
        }
        return current.sql();
    }
}
