//! `flotilla bench tpch`: the 22 TPC-H queries on a local cluster (through the
//! statement protocol, as a client sees it) and on single-node DataFusion over the
//! same data in the same process: generated on the fly (`--scale`), or the Parquet
//! files `flotilla tpch-gen` wrote (`--data`). Prints per-query medians, the ratio
//! distributed / single-node, the totals and peak RSS, and draws an SVG chart on
//! request. Speed is measured here, never asserted in tests.

use std::time::{Duration, Instant};

use crate::client::StatementClient;
use crate::coordinator::planner::single_node_context;
use crate::local::{LocalCluster, LocalOptions, TPCH_QUERIES};

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

/// `1` -> `sf1`, `0.1` -> `sf0_1`.
pub fn schema_for_scale(scale: &str) -> Result<String, String> {
    let s = scale.trim();
    let value: f64 = s.parse().map_err(|_| format!("'{scale}' is not a scale factor"))?;
    if value <= 0.0 {
        return Err(format!("scale factor must be positive, got {scale}"));
    }
    Ok(format!("sf{}", s.replace('.', "_")))
}

/// Peak resident memory of this process, from the kernel.
pub fn peak_rss_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

/// What `flotilla bench tpch` runs.
pub struct TpchBench {
    pub scale: String,
    pub workers: usize,
    pub iterations: usize,
    pub queries: Vec<usize>,
    pub session: Vec<(String, String)>,
    /// Parquet written by `flotilla tpch-gen`; without it both sides generate data.
    pub data: Option<std::path::PathBuf>,
    pub svg: Option<std::path::PathBuf>,
}

const TABLES: [&str; 8] = ["nation", "region", "part", "supplier", "partsupp", "customer", "orders", "lineitem"];

/// Both sides over the same data: generated `tpch.SCHEMA`, or the Parquet files under
/// `data` (external tables in flotilla's `files` catalog, registered tables in the
/// single-node context).
async fn contexts(
    b: &TpchBench,
    cluster: &LocalCluster,
    cores: usize,
) -> Result<(StatementClient, datafusion::prelude::SessionContext, String), String> {
    let Some(dir) = &b.data else {
        let schema = schema_for_scale(&b.scale)?;
        let client = StatementClient::new(cluster.url()).with_catalog("tpch").with_schema(&schema);
        return Ok((client, single_node_context(&schema, cores), format!("tpch.{schema}")));
    };
    let dir = dir.canonicalize().map_err(|e| format!("--data {}: {e}", dir.display()))?;
    let setup = StatementClient::new(cluster.url());
    let config = datafusion::prelude::SessionConfig::new().with_target_partitions(cores);
    let single = datafusion::prelude::SessionContext::new_with_config(config);
    for t in TABLES {
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
    let client = StatementClient::new(cluster.url()).with_catalog("files").with_schema("default");
    Ok((client, single, format!("Parquet files in {}", dir.display())))
}

pub async fn run_tpch(b: &TpchBench) -> Result<(), String> {
    let selected: Vec<usize> = if b.queries.is_empty() { (1..=22).collect() } else { b.queries.clone() };
    if let Some(bad) = selected.iter().find(|q| !(1..=22).contains(*q)) {
        return Err(format!("there is no TPC-H query {bad}"));
    }
    let (workers, iterations) = (b.workers.max(1), b.iterations.max(1));
    let cores = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(2);
    let cluster = LocalCluster::start(workers, LocalOptions::default()).await?;
    let (mut client, single, source) = contexts(b, &cluster, cores).await?;
    for (k, v) in &b.session {
        client = client.with_session(k, v);
    }
    let props: Vec<String> = b.session.iter().map(|(k, v)| format!("{k}={v}")).collect();
    let props = if props.is_empty() { String::new() } else { format!(" [{}]", props.join(", ")) };
    println!("TPC-H on {source}{props}: {workers} workers vs single-node DataFusion ({cores} partitions), median of {iterations}");
    println!("{:>5} {:>12} {:>12} {:>7} {:>9}", "query", "flotilla ms", "datafusion ms", "ratio", "rows");
    let (mut total_d, mut total_s) = (Duration::ZERO, Duration::ZERO);
    let mut failures = Vec::new();
    let mut chart = Vec::new();
    for q in selected {
        let sql = TPCH_QUERIES[q - 1];
        let (mut dist, mut local) = (Vec::new(), Vec::new());
        let mut rows = 0;
        let mut failed = None;
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
            let t = Instant::now();
            match client.execute(sql).await {
                Ok(out) if out.rows.len() == rows => {}
                Ok(out) => failed = Some(format!("flotilla returned {} rows, datafusion {rows}", out.rows.len())),
                Err(e) => failed = Some(format!("flotilla: {e}")),
            }
            dist.push(t.elapsed());
        }
        let (d, s) = (median(dist), median(local));
        total_d += d;
        total_s += s;
        let ratio = d.as_secs_f64() / s.as_secs_f64().max(1e-9);
        println!(
            "{:>5} {:>12.1} {:>12.1} {:>7.2} {:>9}",
            format!("q{q}"),
            d.as_secs_f64() * 1e3,
            s.as_secs_f64() * 1e3,
            ratio,
            rows
        );
        chart.push((q, d, s));
        if let Some(f) = failed {
            failures.push(format!("q{q}: {f}"));
        }
    }
    let ratio = total_d.as_secs_f64() / total_s.as_secs_f64().max(1e-9);
    println!(
        "{:>5} {:>12.1} {:>12.1} {:>7.2}",
        "total",
        total_d.as_secs_f64() * 1e3,
        total_s.as_secs_f64() * 1e3,
        ratio
    );
    if let Some(rss) = peak_rss_bytes() {
        println!(
            "peak RSS of this process (cluster and single node together): {:.0} MiB",
            rss as f64 / (1 << 20) as f64
        );
    }
    if let Some(path) = &b.svg {
        std::fs::write(path, svg_chart(&format!("TPC-H on {source}"), &chart))
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

/// `flotilla bench scheduling`: a synthetic chain of `stages` stages with `tasks` tasks
/// each, scheduled all at once on a local cluster; reports the time from submission
/// until every task exists on a worker (the median of `iterations`).
pub async fn run_scheduling(stages: usize, tasks: usize, workers: usize, iterations: usize) -> Result<(), String> {
    use crate::cluster::node_manager::WorkerNode;
    use crate::coordinator::remote_task::HttpRemoteTaskFactory;
    use crate::exchange::client::{ExchangeClient, ExchangeConfig, ExchangeStats};
    use crate::exchange::remote_source::SourceLocations;
    use crate::plan::fragmenter::{Fragment, FragmentOutput, FragmentedPlan};
    use crate::scheduling::node_scheduler::NodeScheduler;
    use crate::scheduling::phased::AllAtOnceExecutionSchedule;
    use crate::scheduling::pipelined::{PipelinedQueryScheduler, SchedulerSettings};
    use crate::scheduling::state_machine::StageState;
    use datafusion::arrow::datatypes::{DataType, Field, Schema};
    use datafusion::physical_plan::empty::EmptyExec;
    use std::sync::Arc;

    let cluster = LocalCluster::start(workers.max(1), LocalOptions::default()).await?;
    let live = cluster.coordinator.state.nodes.live_workers();
    // One slot per task, cycling over the real workers, so every stage gets `tasks` tasks.
    let slots: Vec<WorkerNode> = (0..tasks).map(|i| live[i % live.len()].clone()).collect();
    let schema = Arc::new(Schema::new(vec![Field::new("x", DataType::Int64, true)]));
    let mut times = Vec::new();
    for iteration in 0..iterations {
        let mut fragments = Vec::new();
        let mut graph = petgraph::graph::DiGraph::new();
        for id in 0..=stages {
            graph.add_node(id);
            fragments.push(Fragment {
                id,
                plan: Arc::new(EmptyExec::new(schema.clone()).with_partitions(if id == 0 { 1 } else { tasks })),
                output: if id == 0 { FragmentOutput::Root } else { FragmentOutput::Passthrough },
                partitions: if id == 0 { 1 } else { tasks },
                consumer: if id == 0 { None } else { Some(id - 1) },
                inputs: if id < stages { vec![id + 1] } else { vec![] },
                has_scan: false,
            });
        }
        let plan = Arc::new(FragmentedPlan { fragments, graph });
        let settings = SchedulerSettings {
            query_id: format!("bench_{iteration}_{}", crate::util::random_suffix(5)),
            attempt: 0,
            remote_tasks: Arc::new(HttpRemoteTaskFactory {
                http: cluster.coordinator.state.http.clone(),
                max_error_duration: Duration::from_secs(10),
                nodes: None,
            }),
            codec: crate::exchange::codec::FlotillaCodec::new(crate::connector::Connectors::builtin()),
            workers: slots.clone(),
            node_scheduler: Arc::new(NodeScheduler::new()),
            session: Default::default(),
            nodes: None,
        };
        let client = ExchangeClient::new(
            cluster.coordinator.state.http.clone(),
            ExchangeConfig::default(),
            Arc::new(ExchangeStats::default()),
        );
        let sink = Arc::new(SourceLocations::new(0, client));
        let stage_ids = plan.worker_stages();
        let mut scheduler =
            PipelinedQueryScheduler::new(settings, plan, Box::new(AllAtOnceExecutionSchedule::new(&stage_ids)), sink);
        let watched = scheduler.stages();
        let started = Instant::now();
        let elapsed = {
            let run = scheduler.run();
            tokio::pin!(run);
            loop {
                let all = watched.iter().all(|s| {
                    s.tasks().len() == s.task_count
                        && !matches!(s.state(), StageState::Planned | StageState::Scheduling)
                });
                if all {
                    break started.elapsed();
                }
                tokio::select! {
                    r = &mut run => { if let Err(e) = r { return Err(e.to_string()); } }
                    _ = tokio::time::sleep(Duration::from_micros(200)) => {}
                }
                if started.elapsed() > Duration::from_secs(60) {
                    return Err("scheduling did not finish within 60 s".into());
                }
            }
        };
        scheduler.remove_all_tasks(true).await;
        times.push(elapsed);
    }
    let m = median(times);
    println!("{stages} stages x {tasks} tasks on {} workers: submitted to all tasks created in {:.1} ms (median of {iterations})", live.len(), m.as_secs_f64() * 1e3);
    cluster.shutdown().await;
    Ok(())
}

/// `flotilla bench latency`: `SELECT 1` through the statement protocol against a
/// running local coordinator; prints the median and 90th percentile.
pub async fn run_latency(iterations: usize) -> Result<(), String> {
    let cluster = LocalCluster::start(1, LocalOptions::default()).await?;
    let client = StatementClient::new(cluster.url());
    let mut times = Vec::new();
    for _ in 0..iterations.max(1) {
        let t = Instant::now();
        client.execute("SELECT 1").await.map_err(|e| e.to_string())?;
        times.push(t.elapsed());
    }
    times.sort();
    let p = |q: f64| times[((times.len() - 1) as f64 * q) as usize].as_secs_f64() * 1e3;
    println!(
        "SELECT 1 over the statement protocol: median {:.2} ms, p90 {:.2} ms ({} runs)",
        p(0.5),
        p(0.9),
        times.len()
    );
    cluster.shutdown().await;
    Ok(())
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
