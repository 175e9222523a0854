//! What a seed decides about a simulated run besides the query's shape: task times,
//! the network's delays, losses and duplicates, and the faults with their times.
//! Faults are drawn so that retry policy `task` always has attempts left (at most one
//! injected failure per partition, two worker deaths, one partition of the network,
//! two lost outputs, and worker `w0` never fails), which is what lets the invariants
//! demand that such a query succeed.

use rand::rngs::StdRng;
use rand::Rng;

use super::Policy;

#[derive(Debug, Clone)]
pub enum Fault {
    /// The worker dies, losing its tasks and their outputs, and comes back empty.
    Kill { at_ms: u64, worker: usize, down_ms: u64 },
    /// The worker cannot reach the coordinator nor be reached by it for a while.
    Cut { at_ms: u64, worker: usize, for_ms: u64 },
    /// A finished task's spooled output is lost (the `pick`-th such task).
    LoseOutput { at_ms: u64, pick: usize },
}

impl Fault {
    pub fn at_ms(&self) -> u64 {
        match self {
            Fault::Kill { at_ms, .. } | Fault::Cut { at_ms, .. } | Fault::LoseOutput { at_ms, .. } => *at_ms,
        }
    }
}

#[derive(Debug, Clone)]
pub struct SimParams {
    pub workers: usize,
    /// Bounds of a task's work, in simulated milliseconds.
    pub task_ms: (u64, u64),
    /// Bound of a message's one-way delay.
    pub max_delay_ms: u64,
    pub drop_rate: f64,
    pub duplicate_rate: f64,
    pub task_failure_rate: f64,
    /// Injected failures per stage partition at most.
    pub failures_per_partition: usize,
    /// Share of tasks whose output buffer fills until their consumers run.
    pub full_buffer_rate: f64,
    /// The root stops reading after its first input (a LIMIT).
    pub root_limit: bool,
    pub faults: Vec<Fault>,
    /// A straggler worker and how many times slower its tasks run.
    pub slow_worker: Option<(usize, f64)>,
    /// Retry policy `task` copies stragglers (`scheduling::speculation`).
    pub speculation: bool,
    /// Retry policy `task` coalesces small partitions (`scheduling::adaptive`).
    pub adaptive: bool,
}

impl SimParams {
    /// A calm network and no faults: the run every fault-free check starts from.
    pub fn calm(workers: usize) -> SimParams {
        SimParams {
            workers: workers.max(1),
            task_ms: (1, 400),
            max_delay_ms: 3,
            drop_rate: 0.0,
            duplicate_rate: 0.0,
            task_failure_rate: 0.0,
            failures_per_partition: 0,
            full_buffer_rate: 0.0,
            root_limit: false,
            faults: Vec::new(),
            slow_worker: None,
            speculation: false,
            adaptive: false,
        }
    }

    /// The seed's run: every knob drawn, faults when `faults` is on.
    pub fn draw(rng: &mut StdRng, policy: Policy, workers: usize, faults: bool) -> SimParams {
        let mut p = SimParams::calm(workers);
        // Now and then tasks as short as a message's trip: a stage then finishes
        // while the scheduler is still busy with the round that started it.
        p.task_ms = match rng.random_bool(0.3) {
            true => (0, rng.random_range(5..100)),
            false => (rng.random_range(0..20), rng.random_range(50..2000)),
        };
        p.max_delay_ms = rng.random_range(0..50);
        p.full_buffer_rate = if rng.random_bool(0.3) { 0.3 } else { 0.0 };
        p.root_limit = policy == Policy::None && rng.random_bool(0.15);
        if policy == Policy::Task {
            // Drawn only here, so that policy `none` seeds replay as they always did.
            p.speculation = rng.random_bool(0.5);
            p.adaptive = rng.random_bool(0.5);
            if p.workers > 1 && rng.random_bool(0.3) {
                // At most 5x: a task of 2 s then takes 10 s, within the quiet limit.
                p.slow_worker = Some((rng.random_range(0..p.workers), rng.random_range(2.0..5.0)));
            }
        }
        if !faults {
            return p;
        }
        p.drop_rate = if rng.random_bool(0.3) { 0.05 } else { 0.0 };
        p.duplicate_rate = if rng.random_bool(0.3) { 0.1 } else { 0.0 };
        if rng.random_bool(0.4) {
            p.task_failure_rate = 0.1;
            p.failures_per_partition = 1;
        }
        let horizon = 3000;
        // Faults never hit w0, so a live worker always remains.
        let others = p.workers.saturating_sub(1);
        if others > 0 {
            let kills = match policy {
                Policy::None => usize::from(rng.random_bool(0.2)),
                Policy::Task => rng.random_range(0..=2),
            };
            for _ in 0..kills {
                let worker = 1 + rng.random_range(0..others);
                let down_ms = rng.random_range(200..8000);
                p.faults.push(Fault::Kill { at_ms: rng.random_range(0..horizon), worker, down_ms });
            }
            if rng.random_bool(0.2) {
                let worker = 1 + rng.random_range(0..others);
                let for_ms = rng.random_range(500..9000);
                p.faults.push(Fault::Cut { at_ms: rng.random_range(0..horizon), worker, for_ms });
            }
        }
        if policy == Policy::Task {
            for _ in 0..rng.random_range(0..=2) {
                p.faults
                    .push(Fault::LoseOutput { at_ms: rng.random_range(0..horizon), pick: rng.random_range(0..1000) });
            }
        }
        p
    }
}
