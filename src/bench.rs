//! `flotilla bench tpch`: the 22 TPC-H queries on a local cluster (through the
//! statement protocol, as a client sees it) and on single-node DataFusion over the
//! same generated data in the same process. Prints per-query medians, the ratio
//! distributed / single-node and the totals. Speed is measured here, never asserted
//! in tests.

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

pub async fn run_tpch(
    scale: &str,
    workers: usize,
    iterations: usize,
    only: &[usize],
    session: &[(String, String)],
) -> Result<(), String> {
    let schema = schema_for_scale(scale)?;
    let selected: Vec<usize> = if only.is_empty() { (1..=22).collect() } else { only.to_vec() };
    if let Some(bad) = selected.iter().find(|q| !(1..=22).contains(*q)) {
        return Err(format!("there is no TPC-H query {bad}"));
    }
    let cores = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(2);
    let cluster = LocalCluster::start(workers.max(1), LocalOptions::default()).await?;
    let mut client = StatementClient::new(cluster.url()).with_catalog("tpch").with_schema(&schema);
    for (k, v) in session {
        client = client.with_session(k, v);
    }
    let single = single_node_context(&schema, cores);
    let props: Vec<String> = session.iter().map(|(k, v)| format!("{k}={v}")).collect();
    let props = if props.is_empty() { String::new() } else { format!(" [{}]", props.join(", ")) };
    println!("TPC-H {schema}{props}: {workers} workers vs single-node DataFusion ({cores} partitions), median of {iterations}");
    println!("{:>5} {:>12} {:>12} {:>7} {:>9}", "query", "flotilla ms", "datafusion ms", "ratio", "rows");
    let (mut total_d, mut total_s) = (Duration::ZERO, Duration::ZERO);
    let mut failures = Vec::new();
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
    cluster.shutdown().await;
    if failures.is_empty() {
        Ok(())
    } else {
        Err(format!("{} queries failed: {}", failures.len(), failures.join("; ")))
    }
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
