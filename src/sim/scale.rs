//! `flotilla sim --scale`: the control plane at many simulated workers. One calm
//! query (`QueryShape::scale`: a chain of partitioned joins over scans) runs under the
//! real scheduler against the simulated world, and the run reports what the
//! coordinator would pay: the scheduler's own real time per task (the world's time
//! taken out, see `World::timed`), the process's heap at its peak (an upper bound of
//! the coordinator's: it holds the simulated workers too), the status polls, task
//! requests and heartbeats per simulated second, and, with a worker killed part way,
//! how long until the coordinator knows it is gone.
//!
//! Called by `flotilla sim --scale` (the table in docs/benchmarks.md) and by this
//! module's test.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use rand::rngs::StdRng;
use rand::SeedableRng;

use super::params::{Fault, SimParams};
use super::query::{self, Outcome};
use super::shape::QueryShape;
use super::world::World;
use super::{Policy, Schedule};

/// When the lost-worker runs kill their worker, in simulated time.
const KILL_AT: Duration = Duration::from_secs(3);

#[derive(Debug, Clone)]
pub struct ScaleConfig {
    pub policy: Policy,
    pub workers: usize,
    pub stages: usize,
    /// Partitions of the join stages (scan stages have a task per worker).
    pub hash_partitions: usize,
    /// Kill the last worker at `KILL_AT` (retry policy `task` survives it).
    pub lose_worker: bool,
    /// The last worker's tasks run this many times slower (a straggler).
    pub slow_worker: Option<f64>,
    /// Retry policy `task` copies stragglers.
    pub speculation: bool,
    pub seed: u64,
}

#[derive(Debug)]
pub struct ScaleReport {
    pub config: ScaleConfig,
    pub tasks: usize,
    pub outcome: Outcome,
    pub simulated: Duration,
    /// Real time of the whole run.
    pub wall: Duration,
    /// Real time spent in the scheduler's own code.
    pub scheduler: Duration,
    /// Peak heap in use above the start (coordinator and simulated workers).
    pub heap_peak: u64,
    pub status_requests: u64,
    pub update_requests: u64,
    pub heartbeats: u64,
    /// From the kill to the coordinator marking the worker lost.
    pub detected_lost: Option<Duration>,
}

impl ScaleReport {
    fn per_second(&self, n: u64) -> f64 {
        n as f64 / self.simulated.as_secs_f64().max(1e-3)
    }

    pub const HEADER: &'static str = "| policy | workers | stages | tasks | simulated s | scheduler ms | scheduler µs/task \
        | heap MB (peak) | heap KB/task | status polls/s | task requests | heartbeats/s | lost worker seen after | outcome |\n\
        |---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|";

    /// One markdown table row.
    pub fn row(&self) -> String {
        let tasks = self.tasks.max(1) as f64;
        let detected = match self.detected_lost {
            Some(d) => format!("{} ms", d.as_millis()),
            None => "-".into(),
        };
        let outcome = match &self.outcome {
            Ok(()) => "ok".to_string(),
            Err((code, _)) => code.to_string(),
        };
        let mut s = String::new();
        let _ = write!(
            s,
            "| {} | {} | {} | {} | {:.1} | {:.0} | {:.1} | {:.0} | {:.1} | {:.0} | {} | {:.0} | {} | {} |",
            self.config.policy.name(),
            self.config.workers,
            self.config.stages,
            self.tasks,
            self.simulated.as_secs_f64(),
            self.scheduler.as_secs_f64() * 1e3,
            self.scheduler.as_secs_f64() * 1e6 / tasks,
            self.heap_peak as f64 / 1e6,
            self.heap_peak as f64 / 1e3 / tasks,
            self.per_second(self.status_requests),
            self.update_requests,
            self.per_second(self.heartbeats),
            detected,
            outcome,
        );
        s
    }
}

/// Runs one scale query on a fresh single-threaded runtime with a paused clock.
pub fn run_scale(config: &ScaleConfig, codec: &crate::codec::FlotillaCodec) -> ScaleReport {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build()
        .expect("a current-thread runtime");
    runtime.block_on(scale_run(config.clone(), codec.clone()))
}

async fn scale_run(config: ScaleConfig, codec: crate::codec::FlotillaCodec) -> ScaleReport {
    let wall = std::time::Instant::now();
    let shape = QueryShape::scale(config.stages, config.workers, config.hash_partitions);
    let mut params = SimParams::calm(config.workers);
    params.task_ms = (100, 2000);
    params.max_delay_ms = 2;
    let victim = config.workers - 1;
    let lose = config.lose_worker && config.workers > 1;
    params.slow_worker = config.slow_worker.map(|times| (victim, times));
    params.speculation = config.speculation;
    if lose {
        params.faults.push(Fault::Kill { at_ms: KILL_AT.as_millis() as u64, worker: victim, down_ms: 3_600_000 });
    }
    let heap_start = crate::util::heap_used_bytes();
    let peak = Arc::new(AtomicU64::new(heap_start));
    let world = World::new(params, StdRng::seed_from_u64(config.seed), shape.plan.clone());
    let sampler = {
        let peak = peak.clone();
        tokio::spawn(async move {
            loop {
                peak.fetch_max(crate::util::heap_used_bytes(), Ordering::Relaxed);
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        })
    };
    let detector = lose.then(|| {
        let world = world.clone();
        tokio::spawn(async move {
            tokio::time::sleep(KILL_AT).await;
            let killed = tokio::time::Instant::now();
            let id = format!("w{victim}");
            while world.nodes.is_alive(&id) {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            killed.elapsed()
        })
    });
    let started = tokio::time::Instant::now();
    let outcome = query::run(&world, config.policy, Schedule::Phased, &shape.dependencies, codec).await;
    let simulated = started.elapsed();
    peak.fetch_max(crate::util::heap_used_bytes(), Ordering::Relaxed);
    sampler.abort();
    let detected_lost = match detector {
        Some(d) if d.is_finished() => d.await.ok(),
        Some(d) => {
            d.abort();
            None
        }
        None => None,
    };
    world.end();
    let traffic = world.traffic();
    let scheduler = {
        let clock = world.clock.lock();
        clock.polling.saturating_sub(clock.in_world)
    };
    let record = world.finish();
    ScaleReport {
        tasks: record.tasks_created,
        outcome,
        simulated,
        wall: wall.elapsed(),
        scheduler,
        heap_peak: peak.load(Ordering::Relaxed).saturating_sub(heap_start),
        status_requests: traffic.status_requests,
        update_requests: traffic.update_requests,
        heartbeats: traffic.heartbeats,
        detected_lost,
        config,
    }
}

/// `flotilla sim --scale`: every size of the grid under each policy; prints a
/// markdown table as it goes. Err when a query did not end as its policy promises.
pub fn run_grid(
    workers: &[usize],
    stages: &[usize],
    policies: &[Policy],
    hash_partitions: usize,
    lose_worker: bool,
) -> Result<(), String> {
    let codec = super::codec();
    println!("{}", ScaleReport::HEADER);
    let mut failed = Vec::new();
    for &policy in policies {
        for &w in workers {
            for &s in stages {
                let config = ScaleConfig {
                    policy,
                    workers: w.max(1),
                    stages: s.max(1),
                    hash_partitions,
                    lose_worker: lose_worker && policy == Policy::Task,
                    slow_worker: None,
                    speculation: false,
                    seed: 1,
                };
                let report = run_scale(&config, &codec);
                println!("{}", report.row());
                eprintln!("  ({:.1} s real)", report.wall.as_secs_f64());
                if report.outcome.is_err() && !(lose_worker && policy == Policy::None) {
                    failed.push(format!("{w} workers, {s} stages, policy {}", policy.name()));
                }
            }
        }
    }
    match failed.is_empty() {
        true => Ok(()),
        false => Err(format!("calm scale runs failed: {}", failed.join("; "))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn calm() -> ScaleConfig {
        ScaleConfig {
            policy: Policy::Task,
            workers: 20,
            stages: 9,
            hash_partitions: 8,
            lose_worker: false,
            slow_worker: None,
            speculation: false,
            seed: 3,
        }
    }

    /// One worker ten times slower: without speculation the query waits for its
    /// tasks; with it, copies elsewhere finish first and the query ends within 1.3x
    /// of its time without the slow worker (simulated time: deterministic).
    #[test]
    fn speculation_hides_a_slow_worker() {
        let codec = super::super::codec();
        let run = |slow: Option<f64>, speculation: bool| {
            let r = run_scale(&ScaleConfig { slow_worker: slow, speculation, ..calm() }, &codec);
            assert!(r.outcome.is_ok(), "{}", r.row());
            r.simulated.as_secs_f64()
        };
        let (calm, slow, copied) = (run(None, false), run(Some(10.0), false), run(Some(10.0), true));
        println!("calm {calm:.1} s, one worker 10x slower {slow:.1} s, with speculation {copied:.1} s");
        assert!(slow > 1.3 * calm, "the slow worker shows without speculation");
        assert!(copied <= 1.3 * calm, "speculation hides it: {copied:.1} s vs {calm:.1} s");
        let even = run(None, true);
        println!("with speculation and no slow worker {even:.1} s");
    }

    /// A small grid: every run ends as its policy promises, the numbers are there,
    /// and a killed worker is noticed within the node manager's timeout.
    #[test]
    fn scale_runs_report_their_costs() {
        let codec = super::super::codec();
        for policy in [Policy::None, Policy::Task] {
            let config = ScaleConfig { policy, ..calm() };
            let r = run_scale(&config, &codec);
            assert!(r.outcome.is_ok(), "{}", r.row());
            // 5 scans of a task per worker, 4 joins of 8 partitions.
            assert_eq!(r.tasks, 5 * 20 + 4 * 8, "{}", r.row());
            assert!(r.scheduler > Duration::ZERO && r.status_requests > 0 && r.update_requests > 0);
            assert!(r.heartbeats >= 20, "a heartbeat a second per worker: {}", r.row());
        }
        let r = run_scale(&ScaleConfig { lose_worker: true, ..calm() }, &codec);
        assert!(r.outcome.is_ok(), "a lost worker's tasks run again: {}", r.row());
        let seen = r.detected_lost.expect("the kill was noticed");
        assert!(seen <= Duration::from_secs(3), "within the heartbeat timeout: {}", r.row());
    }
}
