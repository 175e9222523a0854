//! `flotilla bench planning`: how long the coordinator takes to plan each TPC-H and
//! TPC-DS query (parse, Trino's rewrites, the logical rules, decorrelation, the physical
//! plan, the cut into stages), against single-node DataFusion planning the same text
//! to its physical plan, in the same process. Nothing runs; the tables are the
//! built-in generated ones at `tiny`'s names, whose planning does not read data.

use std::time::{Duration, Instant};

use super::median;
use crate::connector::tpch::TpchSpelling;
use crate::connector::Connectors;
use crate::coordinator::planner::{session_context, single_node_context_in, SessionSpec};
use crate::coordinator::planning::{plan, PlanRequest, Purpose};

/// What `bench planning` is asked.
#[derive(clap::Args, Debug, Clone)]
pub struct PlanningBench {
    #[arg(long, default_value_t = 5)]
    pub iterations: usize,
    /// The directory of the 99 TPC-DS query texts (`q1.sql` to `q99.sql`); without
    /// it only TPC-H is planned.
    #[arg(long)]
    pub queries_dir: Option<std::path::PathBuf>,
    /// Workers the plans are cut for.
    #[arg(long, default_value_t = 2)]
    pub workers: usize,
}

/// One query's median planning times.
struct Timed {
    label: String,
    flotilla: Duration,
    datafusion: Duration,
}

pub async fn run_planning(b: &PlanningBench) -> Result<(), String> {
    let mut suites = vec![("tpch", "tiny", super::tpch::tpch_queries())];
    if let Some(dir) = &b.queries_dir {
        suites.push(("tpcds", "tiny", super::tpch::tpcds_queries(dir)?));
    }
    // One set of catalogs for every plan, as a coordinator has.
    let connectors = Connectors::builtin_with(Default::default(), TpchSpelling::BENCHMARK);
    println!(
        "planning, median of {} (ms): flotilla (to stages) | DataFusion (to its physical plan) | ratio",
        b.iterations
    );
    for (catalog, schema, queries) in suites {
        let mut timed = Vec::new();
        for (number, sql) in queries {
            timed.push(time_one(b, &connectors, (catalog, schema), format!("q{number}"), &sql).await?);
        }
        for t in &timed {
            println!("{:>8} {:>9.2} {:>9.2} {:>6.2}", t.label, ms(t.flotilla), ms(t.datafusion), ratio(t));
        }
        let flotilla: Duration = timed.iter().map(|t| t.flotilla).sum();
        let datafusion: Duration = timed.iter().map(|t| t.datafusion).sum();
        println!(
            "{catalog}: {} queries, flotilla {:.1} ms, DataFusion {:.1} ms, ratio {:.2}",
            timed.len(),
            ms(flotilla),
            ms(datafusion),
            flotilla.as_secs_f64() / datafusion.as_secs_f64().max(1e-9)
        );
    }
    Ok(())
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn ratio(t: &Timed) -> f64 {
    t.flotilla.as_secs_f64() / t.datafusion.as_secs_f64().max(1e-9)
}

async fn time_one(
    b: &PlanningBench,
    connectors: &Connectors,
    (catalog, schema): (&str, &str),
    label: String,
    sql: &str,
) -> Result<Timed, String> {
    let spec = SessionSpec { catalog: catalog.into(), schema: schema.into(), ..Default::default() };
    let runtime = std::sync::Arc::new(datafusion::execution::runtime_env::RuntimeEnv::default());
    let single = single_node_context_in(catalog, schema, b.workers, runtime);
    let (mut ours, mut theirs) = (Vec::new(), Vec::new());
    // One more round than measured: the first warms caches on both sides.
    for round in 0..=b.iterations {
        let request = PlanRequest {
            ctx: session_context(&spec, &Default::default(), b.workers, connectors),
            connectors: connectors.clone(),
            access: None,
            query_id: format!("plan_{label}"),
            workers: b.workers,
            single_task_max_rows: 0,
            dynamic_filtering: true,
            in_transaction: false,
            user: "bench".into(),
            purpose: Purpose::Run,
        };
        let started = Instant::now();
        plan(request, sql.to_string(), Duration::from_secs(600)).await.map_err(|e| format!("{label}: {e}"))?;
        let flotilla = started.elapsed();
        let started = Instant::now();
        let frame = single.sql(sql).await.map_err(|e| format!("{label} (DataFusion): {e}"))?;
        frame.create_physical_plan().await.map_err(|e| format!("{label} (DataFusion): {e}"))?;
        let datafusion = started.elapsed();
        if round > 0 {
            ours.push(flotilla);
            theirs.push(datafusion);
        }
    }
    Ok(Timed { label, flotilla: median(ours), datafusion: median(theirs) })
}
