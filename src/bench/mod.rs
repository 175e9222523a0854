//! `flotilla bench`: what speed and memory are measured with, never asserted in
//! tests. `tpch` runs the 22 TPC-H queries (`tpcds` the 99 TPC-DS queries) on a
//! cluster and on single-node DataFusion over the same data, DuckDB beside them on
//! request; `scheduling` times task creation for a synthetic
//! plan; `latency` times `SELECT 1`; `exchange` times one link of the exchange.

mod duckdb;
mod exchange;
mod planning;
mod processes;
mod tpch;

pub use exchange::run_exchange;
pub use planning::{run_planning, PlanningBench};
pub use tpch::{run_tpcds, run_tpch, ResultRows, Suite, TpchBench};

use std::time::{Duration, Instant};

use crate::client::StatementClient;
use crate::local::{LocalCluster, LocalOptions};

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
            codec: crate::codec::FlotillaCodec::new(crate::connector::Connectors::builtin()),
            workers: slots.clone(),
            node_scheduler: Arc::new(NodeScheduler::new()),
            session: Default::default(),
            nodes: None,
            tick: crate::scheduling::pipelined::IDLE_TICK,
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
                    s.tasks().len() == s.task_count()
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

/// `flotilla bench latency`: one statement (`SELECT 1` by default) over and over
/// through the statement protocol against a local cluster, or the coordinator at
/// `server`; prints the median, the 90th and 99th percentiles and the slowest run.
pub async fn run_latency(sql: &str, workers: usize, iterations: usize, server: Option<String>) -> Result<(), String> {
    let (cluster, url) = match &server {
        Some(s) => (None, s.clone()),
        None => {
            let options = LocalOptions { tpch: crate::connector::tpch::TpchSpelling::BENCHMARK, ..Default::default() };
            let cluster = LocalCluster::start(workers.max(1), options).await?;
            let url = cluster.url().to_string();
            (Some(cluster), url)
        }
    };
    let where_ = match &server {
        Some(s) => format!("on {s}"),
        None => format!("{workers} workers in this process"),
    };
    let client = StatementClient::new(url);
    // The first run on a new cluster also waits for what workers build once (the
    // tpch text pool takes about a second): reported apart, not as the tail.
    let t = Instant::now();
    client.execute(sql).await.map_err(|e| e.to_string())?;
    let first = t.elapsed().as_secs_f64() * 1e3;
    let mut times = Vec::new();
    for _ in 0..iterations.max(1) {
        let t = Instant::now();
        client.execute(sql).await.map_err(|e| e.to_string())?;
        times.push(t.elapsed());
    }
    times.sort();
    let p = |q: f64| times[((times.len() - 1) as f64 * q) as usize].as_secs_f64() * 1e3;
    println!(
        "{sql} over the statement protocol, {where_}: median {:.2} ms, p90 {:.2} ms, p99 {:.2} ms, max {:.2} ms ({} runs after a first of {first:.2} ms)",
        p(0.5),
        p(0.9),
        p(0.99),
        p(1.0),
        times.len()
    );
    if let Some(cluster) = cluster {
        cluster.shutdown().await;
    }
    Ok(())
}
