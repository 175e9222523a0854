//! `flotilla bench tpch` and `bench tpcds`: the 22 TPC-H queries (or the 99 TPC-DS
//! queries of `--queries-dir`) on a cluster (through the statement protocol, as a
//! client sees it) and on single-node DataFusion over the same data in this process:
//! generated on the fly (`--scale`), or the Parquet files `flotilla tpch-gen` wrote
//! (`--data`), which `--duckdb` also has DuckDB read (`bench::duckdb`). The cluster is in-process (`LocalCluster`), or with
//! `--processes` a coordinator and workers of their own, whose peak resident memory
//! is then measured per query. `--worker-memory` bounds each worker's pool and gives
//! DataFusion one pool of the workers' total. Prints per-query medians, the ratio
//! distributed / single-node, the totals and peaks, and draws an SVG chart on request.

use std::sync::Arc;
use std::time::{Duration, Instant};

use datafusion::execution::memory_pool::FairSpillPool;
use datafusion::execution::runtime_env::{RuntimeEnv, RuntimeEnvBuilder};
use datafusion::prelude::{SessionConfig, SessionContext};

use super::processes::{peak_rss, reset_peak_rss, ProcessCluster};
use super::{median, schema_for_scale};
use crate::client::StatementClient;
use crate::coordinator::planner::single_node_context_in;
use crate::local::{LocalCluster, LocalOptions, TPCH_QUERIES};

/// What `flotilla bench tpch` runs: its command-line arguments.
#[derive(clap::Args, Debug)]
pub struct TpchBench {
    /// Scale factor, e.g. 0.1 or 1.
    #[arg(long, default_value = "1")]
    pub scale: String,
    #[arg(long, default_value_t = 2)]
    pub workers: usize,
    #[arg(long, default_value_t = 3)]
    pub iterations: usize,
    /// Only these queries (1-22), comma separated.
    #[arg(long, value_delimiter = ',')]
    pub queries: Vec<usize>,
    /// Session property for the distributed runs, repeatable: --session retry_policy=task
    #[arg(long = "session", value_parser = crate::config::parse_name_value)]
    pub session: Vec<(String, String)>,
    /// Parquet files written by `flotilla tpch-gen` (one folder per table): both
    /// sides read them instead of generating data (--scale is then ignored).
    #[arg(long)]
    pub data: Option<std::path::PathBuf>,
    /// Also draw the per-query times as an SVG bar chart into this file.
    #[arg(long)]
    pub svg: Option<std::path::PathBuf>,
    /// Run the coordinator and each worker as processes of their own (this
    /// binary) and report each worker's peak resident memory per query.
    #[arg(long)]
    pub processes: bool,
    /// Each worker's memory pool, e.g. 2GB (`unlimited`: none); DataFusion then
    /// runs in one pool of the workers' total.
    #[arg(long)]
    pub worker_memory: Option<String>,
    /// How flotilla's client takes the rows: as Arrow batches (what DataFusion's
    /// side hands back) or as Trino's JSON values.
    #[arg(long, value_enum, default_value = "arrow")]
    pub rows_as: ResultRows,
    /// TPC-DS: the directory of the 99 query texts, `q1.sql` to `q99.sql` (for
    /// instance as `tests/python/tpcds_queries.py` writes DuckDB's).
    #[arg(long)]
    pub queries_dir: Option<std::path::PathBuf>,
    /// The DuckDB command-line binary (PyPI `duckdb-cli`): a DuckDB column over the
    /// same Parquet files (`--data`).
    #[arg(long)]
    pub duckdb: Option<std::path::PathBuf>,
}

/// Which benchmark a run takes its tables and queries from.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Suite {
    Tpch,
    Tpcds,
}

impl Suite {
    fn name(self) -> &'static str {
        match self {
            Suite::Tpch => "TPC-H",
            Suite::Tpcds => "TPC-DS",
        }
    }

    fn catalog(self) -> &'static str {
        match self {
            Suite::Tpch => "tpch",
            Suite::Tpcds => "tpcds",
        }
    }

    fn tables(self) -> Vec<&'static str> {
        match self {
            Suite::Tpch => TABLES.to_vec(),
            Suite::Tpcds => crate::connector::tpcds::TpcdsTableKind::ALL.iter().map(|t| t.name()).collect(),
        }
    }

    /// `(number, text)` of every query of the benchmark.
    fn queries(self, b: &TpchBench) -> Result<Vec<(usize, String)>, String> {
        match self {
            Suite::Tpch => Ok(tpch_queries()),
            Suite::Tpcds => {
                let dir = b.queries_dir.as_ref().ok_or("bench tpcds needs --queries-dir DIR (q1.sql to q99.sql)")?;
                tpcds_queries(dir)
            }
        }
    }
}

/// `(number, text)` of the 22 TPC-H queries.
pub(super) fn tpch_queries() -> Vec<(usize, String)> {
    TPCH_QUERIES.iter().enumerate().map(|(i, q)| (i + 1, q.to_string())).collect()
}

/// `(number, text)` of the 99 TPC-DS queries in `dir` (`q1.sql` to `q99.sql`).
pub(super) fn tpcds_queries(dir: &std::path::Path) -> Result<Vec<(usize, String)>, String> {
    (1..=99)
        .map(|n| {
            let path = dir.join(format!("q{n}.sql"));
            let text = std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
            Ok((n, text.trim().trim_end_matches(';').to_string()))
        })
        .collect()
}

/// How the benchmark's client takes flotilla's rows.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq)]
pub enum ResultRows {
    /// Arrow batches (`StatementClient::with_rows_as_arrow`): like for like with
    /// DataFusion's side, which collects batches.
    Arrow,
    /// Trino's JSON, parsed into values, as Trino's clients take them.
    Json,
}

const TABLES: [&str; 8] = ["nation", "region", "part", "supplier", "partsupp", "customer", "orders", "lineitem"];
const MIB: f64 = (1 << 20) as f64;

enum Cluster {
    Local(LocalCluster),
    Processes(ProcessCluster),
}

impl Cluster {
    async fn start(b: &TpchBench, pool: Option<usize>, data: Option<&std::path::Path>) -> Result<Self, String> {
        let workers = b.workers.max(1);
        if !b.processes {
            let options = LocalOptions {
                worker_memory: pool,
                tpch: crate::connector::tpch::TpchSpelling::BENCHMARK,
                ..Default::default()
            };
            return Ok(Cluster::Local(LocalCluster::start(workers, options).await?));
        }
        let worker_args: Vec<String> = match &b.worker_memory {
            Some(m) => vec!["--memory".into(), m.clone()],
            None => Vec::new(),
        };
        let allowed = data.map(|d| d.display().to_string());
        Ok(Cluster::Processes(ProcessCluster::start(workers, allowed.as_deref(), &worker_args).await?))
    }

    fn url(&self) -> &str {
        match self {
            Cluster::Local(c) => c.url(),
            Cluster::Processes(c) => &c.url,
        }
    }

    /// The workers' process ids, when they have processes of their own.
    fn worker_pids(&self) -> Vec<String> {
        match self {
            Cluster::Local(_) => Vec::new(),
            Cluster::Processes(c) => c.worker_pids().iter().map(|p| p.to_string()).collect(),
        }
    }

    async fn shutdown(self) {
        match self {
            Cluster::Local(c) => c.shutdown().await,
            Cluster::Processes(c) => c.shutdown().await,
        }
    }
}

/// `--worker-memory` in bytes: `usize::MAX` for `unlimited`.
fn worker_pool(b: &TpchBench) -> Result<Option<usize>, String> {
    b.worker_memory
        .as_deref()
        .map(|m| match m {
            "unlimited" => Ok(usize::MAX),
            size => crate::config::parse_bytes(size).map(|n| n as usize).map_err(|e| format!("--worker-memory: {e}")),
        })
        .transpose()
}

/// Single-node DataFusion's runtime: one pool as large as the workers' together
/// when theirs are bounded, DataFusion's default (unbounded) otherwise.
fn single_node_runtime(pool: Option<usize>, workers: usize) -> Result<Arc<RuntimeEnv>, String> {
    let builder = match pool {
        Some(bytes) if bytes != usize::MAX => {
            RuntimeEnvBuilder::new().with_memory_pool(Arc::new(FairSpillPool::new(bytes.saturating_mul(workers))))
        }
        _ => RuntimeEnvBuilder::new(),
    };
    builder.build_arc().map_err(|e| e.to_string())
}

/// Both sides over the same data: generated `tpch.SCHEMA`, or the Parquet files under
/// `data` (external tables in flotilla's `files` catalog, registered tables in the
/// single-node context).
async fn contexts(
    b: &TpchBench,
    suite: Suite,
    url: &str,
    data: Option<&std::path::Path>,
    runtime: Arc<RuntimeEnv>,
    cores: usize,
) -> Result<(StatementClient, SessionContext, String), String> {
    let Some(dir) = data else {
        let schema = schema_for_scale(&b.scale)?;
        let (catalog, single) = (suite.catalog(), single_node_context_in(suite.catalog(), &schema, cores, runtime));
        let client = StatementClient::new(url).with_catalog(catalog).with_schema(&schema);
        return Ok((client, single, format!("{catalog}.{schema}")));
    };
    let setup = StatementClient::new(url);
    let single = SessionContext::new_with_config_rt(SessionConfig::new().with_target_partitions(cores), runtime);
    for t in suite.tables() {
        let location = dir.join(t);
        if !location.is_dir() {
            return Err(format!("--data: {} is missing (write it with `flotilla tpch-gen`)", location.display()));
        }
        let ddl =
            format!("CREATE EXTERNAL TABLE files.default.{t} STORED AS PARQUET LOCATION '{}/'", location.display());
        setup.execute(&ddl).await.map_err(|e| format!("{ddl}: {e}"))?;
        single
            .register_parquet(t, &format!("{}/", location.display()), Default::default())
            .await
            .map_err(|e| format!("registering {t} for DataFusion: {e}"))?;
    }
    let client = StatementClient::new(url).with_catalog("files").with_schema("default");
    Ok((client, single, format!("Parquet files in {}", dir.display())))
}

/// One query's figures.
struct Measured {
    query: usize,
    distributed: Duration,
    single: Duration,
    /// Peak resident bytes of each worker while the query ran (`--processes`).
    workers_rss: Vec<Option<u64>>,
    /// Peak resident bytes of this process while DataFusion ran it.
    single_rss: Option<u64>,
    /// DuckDB's median (`--duckdb`).
    duckdb: Option<Duration>,
}

pub async fn run_tpch(b: &TpchBench) -> Result<(), String> {
    run_suite(b, Suite::Tpch).await
}

pub async fn run_tpcds(b: &TpchBench) -> Result<(), String> {
    run_suite(b, Suite::Tpcds).await
}

async fn run_suite(b: &TpchBench, suite: Suite) -> Result<(), String> {
    let texts = suite.queries(b)?;
    let selected: Vec<usize> = if b.queries.is_empty() { (1..=texts.len()).collect() } else { b.queries.clone() };
    if let Some(bad) = selected.iter().find(|q| !(1..=texts.len()).contains(*q)) {
        return Err(format!("there is no {} query {bad}", suite.name()));
    }
    let (workers, iterations) = (b.workers.max(1), b.iterations.max(1));
    let cores = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(2);
    let data = match &b.data {
        Some(d) => Some(d.canonicalize().map_err(|e| format!("--data {}: {e}", d.display()))?),
        None => None,
    };
    if b.duckdb.is_some() && data.is_none() {
        return Err("--duckdb needs --data: DuckDB reads the Parquet files".into());
    }
    if data.is_none() && suite == Suite::Tpch {
        // Built once per process, on first use, by whichever side runs first.
        tpchgen::text::TextPool::get_or_init_default();
    }
    let pool = worker_pool(b)?;
    let cluster = Cluster::start(b, pool, data.as_deref()).await?;
    let runtime = single_node_runtime(pool, workers)?;
    let (mut client, single, source) = contexts(b, suite, cluster.url(), data.as_deref(), runtime, cores).await?;
    for (k, v) in &b.session {
        client = client.with_session(k, v);
    }
    if b.rows_as == ResultRows::Arrow {
        client = client.with_rows_as_arrow();
    }
    let mut notes: Vec<String> = b.session.iter().map(|(k, v)| format!("{k}={v}")).collect();
    if let Some(m) = &b.worker_memory {
        let single = if pool == Some(usize::MAX) { "none".to_string() } else { format!("{workers} x {m}") };
        notes.push(format!("worker pools {m}, DataFusion's pool {single}"));
    }
    if b.processes {
        notes.push("workers as processes".into());
    }
    if b.rows_as == ResultRows::Json {
        notes.push("rows as JSON values".into());
    }
    let notes = if notes.is_empty() { String::new() } else { format!(" [{}]", notes.join("; ")) };
    println!("{} on {source}{notes}: {workers} workers vs single-node DataFusion ({cores} partitions), median of {iterations}", suite.name());
    let pids = cluster.worker_pids();
    let per_query_rss = !pids.is_empty() && reset_peak_rss("self") && pids.iter().all(|p| reset_peak_rss(p));
    let mut header =
        format!("{:>5} {:>12} {:>12} {:>7} {:>9}", "query", "flotilla ms", "datafusion ms", "ratio", "rows");
    if b.duckdb.is_some() {
        header += &format!(" {:>10} {:>7}", "duckdb ms", "vs duck");
    }
    if per_query_rss {
        for i in 0..pids.len() {
            header += &format!(" {:>9}", format!("w{i} MiB"));
        }
        header += &format!(" {:>9}", "df MiB");
    }
    println!("{header}");
    let mut failures = Vec::new();
    let mut measured = Vec::new();
    for q in selected {
        let sql = texts[q - 1].1.as_str();
        let (mut dist, mut local) = (Vec::new(), Vec::new());
        let mut rows = 0;
        let mut failed = None;
        if per_query_rss {
            reset_peak_rss("self");
        }
        for _ in 0..iterations {
            let t = Instant::now();
            match single.sql(sql).await {
                Ok(df) => match df.collect().await {
                    Ok(b) => rows = b.iter().map(|b| b.num_rows()).sum::<usize>(),
                    Err(e) => failed = Some(format!("datafusion: {e}")),
                },
                Err(e) => failed = Some(format!("datafusion: {e}")),
            }
            local.push(t.elapsed());
        }
        let single_rss = if per_query_rss { peak_rss("self") } else { None };
        if per_query_rss {
            pids.iter().for_each(|p| {
                reset_peak_rss(p);
            });
        }
        for _ in 0..iterations {
            let t = Instant::now();
            match client.execute(sql).await {
                Ok(out) if result_rows(&out) == rows || failed.is_some() => {}
                Ok(out) => failed = Some(format!("flotilla returned {} rows, datafusion {rows}", result_rows(&out))),
                Err(e) => failed = Some(format!("flotilla: {e}")),
            }
            dist.push(t.elapsed());
        }
        let workers_rss: Vec<Option<u64>> =
            if per_query_rss { pids.iter().map(|p| peak_rss(p)).collect() } else { Vec::new() };
        let duckdb = match (&b.duckdb, &data) {
            (Some(path), Some(dir)) => match super::duckdb::time_query(path, dir, &suite.tables(), sql, iterations) {
                Ok(times) => Some(median(times)),
                Err(e) => {
                    failed = failed.or(Some(e));
                    None
                }
            },
            _ => None,
        };
        let (distributed, single) = (median(dist), median(local));
        let m = Measured { query: q, distributed, single, workers_rss, single_rss, duckdb };
        println!("{}", row(&m, rows));
        measured.push(m);
        if let Some(f) = failed {
            failures.push(format!("q{q}: {f}"));
        }
    }
    let total_d: Duration = measured.iter().map(|m| m.distributed).sum();
    let total_s: Duration = measured.iter().map(|m| m.single).sum();
    let ratio = total_d.as_secs_f64() / total_s.as_secs_f64().max(1e-9);
    let mut total = format!(
        "{:>5} {:>12.1} {:>12.1} {:>7.2}",
        "total",
        total_d.as_secs_f64() * 1e3,
        total_s.as_secs_f64() * 1e3,
        ratio
    );
    if b.duckdb.is_some() {
        let total_k: Duration = measured.iter().filter_map(|m| m.duckdb).sum();
        let vs = total_d.as_secs_f64() / total_k.as_secs_f64().max(1e-9);
        total += &format!(" {:>9} {:>10.1} {:>7.2}", "", total_k.as_secs_f64() * 1e3, vs);
    }
    println!("{total}");
    let over = measured.iter().filter(|m| m.distributed.as_secs_f64() > 1.5 * m.single.as_secs_f64()).count();
    println!("queries over 1.5x DataFusion: {over} of {}", measured.len());
    if per_query_rss {
        let most = |f: &dyn Fn(&Measured) -> Option<u64>| measured.iter().filter_map(f).max().unwrap_or(0) as f64 / MIB;
        let workers: Vec<String> =
            (0..pids.len()).map(|i| format!("{:.0}", most(&|m| m.workers_rss.get(i).copied().flatten()))).collect();
        println!(
            "peak RSS over the run: workers {} MiB; single-node DataFusion (this process) {:.0} MiB",
            workers.join(" / "),
            most(&|m| m.single_rss)
        );
    } else if let Some(rss) = peak_rss("self") {
        let whose = if b.processes { "this process (DataFusion)" } else { "this process (cluster and DataFusion)" };
        println!("peak RSS of {whose}: {:.0} MiB", rss as f64 / MIB);
    }
    if let Some(path) = &b.svg {
        let bars: Vec<(usize, Duration, Duration)> =
            measured.iter().map(|m| (m.query, m.distributed, m.single)).collect();
        std::fs::write(path, svg_chart(&format!("{} on {source}", suite.name()), &bars))
            .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
        println!("chart: {}", path.display());
    }
    cluster.shutdown().await;
    if failures.is_empty() {
        Ok(())
    } else {
        Err(format!("{} queries failed: {}", failures.len(), failures.join("; ")))
    }
}

/// Rows of a result, however they came.
fn result_rows(out: &crate::client::QueryOutcome) -> usize {
    out.rows.len() + out.batches.iter().map(|b| b.num_rows()).sum::<usize>()
}

fn row(m: &Measured, rows: usize) -> String {
    let ratio = m.distributed.as_secs_f64() / m.single.as_secs_f64().max(1e-9);
    let mut line = format!(
        "{:>5} {:>12.1} {:>12.1} {:>7.2} {:>9}",
        format!("q{}", m.query),
        m.distributed.as_secs_f64() * 1e3,
        m.single.as_secs_f64() * 1e3,
        ratio,
        rows
    );
    if let Some(duck) = m.duckdb {
        let vs = m.distributed.as_secs_f64() / duck.as_secs_f64().max(1e-9);
        line += &format!(" {:>10.1} {:>7.2}", duck.as_secs_f64() * 1e3, vs);
    }
    let mib = |b: Option<u64>| b.map(|b| format!("{:.0}", b as f64 / MIB)).unwrap_or_else(|| "?".into());
    if m.single_rss.is_some() || !m.workers_rss.is_empty() {
        for w in &m.workers_rss {
            line += &format!(" {:>9}", mib(*w));
        }
        line += &format!(" {:>9}", mib(m.single_rss));
    }
    line
}

/// A bar chart of per-query times: flotilla and DataFusion side by side.
fn svg_chart(title: &str, rows: &[(usize, Duration, Duration)]) -> String {
    let max = rows.iter().map(|(_, d, s)| d.max(s).as_secs_f64()).fold(1e-9, f64::max);
    let (bar, gap, height, left, top) = (9.0, 8.0, 300.0, 50.0, 40.0);
    let width = left + rows.len() as f64 * (2.0 * bar + gap) + 20.0;
    let mut out = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{width:.0}\" height=\"{:.0}\" font-family=\"sans-serif\" font-size=\"10\">\n",
        height + top + 50.0
    );
    let escaped = title.replace('&', "&amp;").replace('<', "&lt;");
    out += &format!(
        "<text x=\"{left}\" y=\"20\" font-size=\"13\">{escaped} (ms; blue flotilla, grey DataFusion)</text>\n"
    );
    out += &format!("<text x=\"4\" y=\"{:.0}\">{:.0}</text>\n", top + 4.0, max * 1e3);
    for (i, (q, d, s)) in rows.iter().enumerate() {
        let x = left + i as f64 * (2.0 * bar + gap);
        for (j, (t, color)) in [(d, "#3b6fb6"), (s, "#a0a0a0")].into_iter().enumerate() {
            let h = t.as_secs_f64() / max * height;
            out += &format!(
                "<rect x=\"{:.1}\" y=\"{:.1}\" width=\"{bar}\" height=\"{h:.1}\" fill=\"{color}\"><title>q{q}: {:.1} ms</title></rect>\n",
                x + j as f64 * bar,
                top + height - h,
                t.as_secs_f64() * 1e3
            );
        }
        out +=
            &format!("<text x=\"{:.1}\" y=\"{:.0}\" text-anchor=\"middle\">{q}</text>\n", x + bar, top + height + 14.0);
    }
    out += "</svg>\n";
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_chart_has_a_bar_pair_per_query() {
        let rows = [
            (1, Duration::from_millis(120), Duration::from_millis(100)),
            (6, Duration::from_millis(5), Duration::from_millis(8)),
        ];
        let svg = svg_chart("TPC-H on <files>", &rows);
        assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
        assert_eq!(svg.matches("<rect").count(), 4);
        assert!(svg.contains("q1: 120.0 ms") && svg.contains("q6: 8.0 ms") && svg.contains("&lt;files>"));
    }
}
