//! `sim`: a deterministic simulator of a query's control plane. The real schedulers
//! (`PipelinedQueryScheduler` under the phased or the all-at-once schedule,
//! `FaultTolerantQueryScheduler` with its `ExecutionGraph`) and the real
//! `NodeManager` run against simulated workers, network and faults (`world`), on one
//! thread under tokio's paused clock: whenever every task waits, the clock jumps to
//! the next timer, so a query of minutes runs in milliseconds, and the order of
//! everything follows from the seed alone. Each run is checked (`invariants`); a
//! failing seed prints the `flotilla sim` command that replays it.
//!
//! Why this and not a crate: madsim replaces tokio for the whole build, a second
//! 35-minute build of every dependency under its own cfg; turmoil simulates sockets
//! between hosts, and would need our HTTP client and server on its network and
//! tokio's unstable seeded scheduler to be deterministic. The schedulers' seam is
//! `RemoteTask`, not a socket, so the world is simulated behind it, and tokio's own
//! paused clock (its `test-util` feature) is the simulated time. For the runs to be
//! replayable the schedulers keep to ordered maps and biased selects; a test runs
//! seeds twice and compares their event logs.
//!
//! Called by `flotilla sim` and by this module's tests.

mod invariants;
mod params;
mod query;
mod remote_task;
mod scale;
mod shape;
mod world;

use std::fmt::Write as _;
use std::hash::{Hash, Hasher};
use std::time::Duration;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

pub use params::{Fault, SimParams};
pub use query::Outcome;
pub use scale::{run_grid, run_scale, ScaleConfig, ScaleReport};
pub use shape::QueryShape;

/// The retry policy the simulated query runs under.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Policy {
    /// Pipelined: any task failure fails the query, with its root cause.
    None,
    /// Fault-tolerant: failed tasks and lost outputs are recomputed.
    Task,
}

impl Policy {
    pub fn name(self) -> &'static str {
        match self {
            Policy::None => "none",
            Policy::Task => "task",
        }
    }
}

impl std::str::FromStr for Policy {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.to_ascii_lowercase().as_str() {
            "none" => Ok(Policy::None),
            "task" => Ok(Policy::Task),
            other => Err(format!("unknown retry policy '{other}': none or task")),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Schedule {
    Phased,
    AllAtOnce,
}

/// One simulated run: everything else follows from the seed.
#[derive(Debug, Clone)]
pub struct SimConfig {
    pub seed: u64,
    pub policy: Policy,
    pub workers: usize,
    /// Worker stages of the query; drawn (1 to 8) when not given.
    pub stages: Option<usize>,
    /// Faults on (the default) or a calm run.
    pub faults: bool,
    /// Most partitions a stage may have (6 by default): more for bigger queries.
    pub partitions: usize,
}

impl SimConfig {
    pub fn new(seed: u64, policy: Policy, workers: usize) -> Self {
        SimConfig { seed, policy, workers: workers.max(1), stages: None, faults: true, partitions: 6 }
    }

    /// The command that runs this seed again, with its trace.
    pub fn replay_command(&self) -> String {
        let mut cmd =
            format!("flotilla sim --policy {} --workers {} --seed {}", self.policy.name(), self.workers, self.seed);
        if let Some(s) = self.stages {
            let _ = write!(cmd, " --stages {s}");
        }
        if !self.faults {
            cmd.push_str(" --no-faults");
        }
        if self.partitions != 6 {
            let _ = write!(cmd, " --partitions {}", self.partitions);
        }
        cmd.push_str(" --trace");
        cmd
    }
}

/// What one run did and whether it kept every invariant.
#[derive(Debug)]
pub struct SimReport {
    pub config: SimConfig,
    pub schedule: Schedule,
    pub stages: usize,
    pub tasks_created: usize,
    pub outcome: Outcome,
    /// Simulated time from the start to the query's end.
    pub simulated: Duration,
    pub violations: Vec<String>,
    /// Every event, at its simulated millisecond.
    pub events: Vec<(u64, String)>,
    /// A hash of the events: equal for two runs of one seed.
    pub digest: u64,
}

impl SimReport {
    pub fn passed(&self) -> bool {
        self.violations.is_empty()
    }

    /// One line; a failing run adds its violations and the replay command.
    pub fn summary(&self) -> String {
        let outcome = match &self.outcome {
            Ok(()) => "succeeded".to_string(),
            Err((code, _)) => format!("failed with {code}"),
        };
        let mut s = format!(
            "seed {} policy={} {:?} workers={} stages={} tasks={}: {outcome} at {:.1} s simulated",
            self.config.seed,
            self.config.policy.name(),
            self.schedule,
            self.config.workers,
            self.stages,
            self.tasks_created,
            self.simulated.as_secs_f64()
        );
        for v in &self.violations {
            let _ = write!(s, "\n  violated: {v}");
        }
        if !self.passed() {
            let _ = write!(s, "\n  replay: {}", self.config.replay_command());
        }
        s
    }

    pub fn trace(&self) -> String {
        self.events.iter().map(|(at, e)| format!("{:>9.3}s {e}\n", *at as f64 / 1000.0)).collect()
    }
}

/// Runs one seed on a fresh single-threaded runtime with a paused clock.
pub fn run_seed(config: &SimConfig, codec: &crate::codec::FlotillaCodec) -> SimReport {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build()
        .expect("a current-thread runtime");
    runtime.block_on(invariants::run_checked(config, codec.clone()))
}

/// The seed's query shape, schedule and parameters, in that order from its generator.
pub(crate) fn draw(config: &SimConfig) -> (StdRng, QueryShape, Schedule, SimParams) {
    let mut rng = StdRng::seed_from_u64(config.seed);
    let stages = config.stages.unwrap_or_else(|| rng.random_range(1..=8));
    let shape = QueryShape::random(&mut rng, stages, config.partitions);
    let schedule = if rng.random_bool(0.5) { Schedule::Phased } else { Schedule::AllAtOnce };
    let params = SimParams::draw(&mut rng, config.policy, config.workers, config.faults);
    (rng, shape, schedule, params)
}

/// The codec the simulated schedulers encode their (empty) fragments with.
pub fn codec() -> crate::codec::FlotillaCodec {
    crate::codec::FlotillaCodec::new(crate::connector::Connectors::builtin())
}

fn digest(events: &[(u64, String)]) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    events.hash(&mut h);
    h.finish()
}

/// `flotilla sim`: `seeds` seeds from `first`, each policy asked for; prints a line
/// per failing seed (per seed with `trace`), then a summary. Err when any failed.
pub fn run_seeds(first: u64, seeds: u64, policies: &[Policy], template: &SimConfig, trace: bool) -> Result<(), String> {
    let codec = codec();
    let started = std::time::Instant::now();
    let mut failed = 0;
    let mut runs = 0;
    for &policy in policies {
        for seed in first..first.saturating_add(seeds) {
            let config = SimConfig { seed, policy, ..template.clone() };
            let report = run_seed(&config, &codec);
            runs += 1;
            if trace {
                print!("{}", report.trace());
            }
            if trace || !report.passed() {
                println!("{}", report.summary());
            }
            if !report.passed() {
                failed += 1;
            }
        }
    }
    let elapsed = started.elapsed();
    println!("{runs} runs, {failed} failed, {:.2} ms per run", elapsed.as_secs_f64() * 1e3 / runs.max(1) as f64);
    match failed {
        0 => Ok(()),
        n => Err(format!("{n} of {runs} simulated runs broke an invariant")),
    }
}

#[cfg(test)]
mod tests;
