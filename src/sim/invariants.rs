//! What every simulated run must keep, checked around one query:
//!
//! - it ends: within `HANG_LIMIT` of simulated time;
//! - it never stalls: between its start and its end, no stretch of `QUIET_LIMIT`
//!   passes without an event (a task created, moving on, deleted; a fault). The
//!   schedulers look at their tasks every `SIM_TICK` regardless, which is longer, so
//!   a change that fails to wake a scheduler shows as a quiet stretch;
//! - a pipelined query answers within `ANSWER_LIMIT` of its root having every row;
//! - under the phased schedule, a stage is created promptly once the stages it waits
//!   for are seen done producing (`PROMPT_LIMIT` on a calm network): a change the
//!   scheduler slept through shows here even when later changes wake it;
//! - it ends as its policy promises: `none` succeeds unless a fault hit it, and then
//!   fails with an error a fault explains, never with the echo of one
//!   (`REMOTE_TASK_FAILED`); `task` succeeds (the seeds leave attempts to spare);
//! - every reader reads each input partition exactly once, from a finished attempt
//!   (checked as it reads, in `world`);
//! - nothing is sent to a worker, nor any status followed, after the query's end
//!   (checked by `SimRemoteTask`);
//! - no task is left on any worker once the coordinator's cleanup had its time, and
//!   none was left to the timeout of a worker the coordinator could reach all along
//!   (deletes to a worker cut off or down may give up: its timeout is then the net).

use std::time::Duration;

use super::query::{self, Outcome};
use super::world::World;
use super::{digest, draw, Policy, SimConfig, SimReport};
use crate::error_code::ErrorCode;

const HANG_LIMIT: Duration = Duration::from_secs(600);
const QUIET_LIMIT: Duration = Duration::from_secs(20);
const ANSWER_LIMIT: Duration = Duration::from_secs(1);
/// From a stage's last dependency seen done producing to its first create request:
/// on a calm network a round of creates takes a few message delays; a lossy one may
/// hold the scheduler in a round's retries for a request timeout or more.
const PROMPT_LIMIT: Duration = Duration::from_millis(250);
const PROMPT_LIMIT_LOSSY: Duration = Duration::from_secs(10);
/// After the query: time for background deletes, partitions to heal, and workers'
/// timeouts to run out.
const SETTLE: Duration = Duration::from_secs(40);

pub async fn run_checked(config: &SimConfig, codec: crate::codec::FlotillaCodec) -> SimReport {
    let (rng, shape, schedule, params) = draw(config);
    let lossy = params.drop_rate > 0.0 || params.faults.iter().any(|f| !matches!(f, super::Fault::LoseOutput { .. }));
    let stages = shape.stages();
    let world = World::new(params, rng, shape.plan.clone());
    let started = tokio::time::Instant::now();
    let run = query::run(&world, config.policy, schedule, &shape.dependencies, codec);
    let outcome = match tokio::time::timeout(HANG_LIMIT, run).await {
        Ok(outcome) => Some(outcome),
        Err(_) => {
            world.violation(format!("the query did not end within {HANG_LIMIT:?}"));
            None
        }
    };
    let simulated = started.elapsed();
    world.end();
    // Tasks on these workers had every chance to be deleted by the coordinator.
    let steady = world.reachable_since(world.answered_at().unwrap_or(0));
    tokio::time::sleep(SETTLE).await;
    for task in world.tasks_left() {
        world.violation(format!("task {task} was left behind"));
    }
    let mut record = world.finish();
    let mut violations = std::mem::take(&mut record.violations);
    // During the query a worker may give up on tasks of a coordinator it could not
    // reach; after it, the coordinator's deletes must have got there first.
    let answered = record.answered_at.unwrap_or(0);
    for (_, r) in record.reaped.iter().filter(|(at, _)| *at >= answered) {
        if steady.iter().any(|w| r.ends_with(&format!(" on {w}"))) {
            violations.push(format!("{r} was left to its worker's timeout"));
        }
    }
    violations.extend(quiet_stretch(&record.events, record.ended_at.unwrap_or(0)));
    if let (Some(root), Some(answered)) = (record.root_done_at, record.answered_at) {
        if config.policy == Policy::None && answered.saturating_sub(root) > ANSWER_LIMIT.as_millis() as u64 {
            violations.push(format!(
                "the root had every row at {:.3} s, the scheduler returned at {:.3} s",
                root as f64 / 1e3,
                answered as f64 / 1e3
            ));
        }
    }
    if schedule == super::Schedule::Phased && config.policy == Policy::None {
        let limit = if lossy { PROMPT_LIMIT_LOSSY } else { PROMPT_LIMIT };
        violations.extend(late_stages(&shape.dependencies, &record, limit));
    }
    let outcome = outcome.unwrap_or_else(|| Err((ErrorCode::GenericInternalError, "hung".into())));
    violations.extend(policy_kept(config.policy, &outcome, &record.fault_codes));
    let digest = digest(&record.events);
    SimReport {
        config: config.clone(),
        schedule,
        stages,
        tasks_created: record.tasks_created,
        outcome,
        simulated,
        violations,
        events: record.events,
        digest,
    }
}

/// Stages created later than `limit` after every stage they wait for was seen done
/// producing.
fn late_stages(
    dependencies: &[(usize, usize, crate::plan::DependencyKind)],
    record: &super::world::Record,
    limit: Duration,
) -> Vec<String> {
    let mut late = Vec::new();
    let probes: std::collections::BTreeSet<usize> = dependencies.iter().map(|d| d.1).collect();
    for probe in probes {
        let Some(created) = record.creates_sent.iter().find(|(_, t)| t.stage == probe).map(|c| c.0) else { continue };
        let mut ready = 0;
        for build in dependencies.iter().filter(|d| d.1 == probe).map(|d| d.0) {
            let tasks: std::collections::BTreeSet<usize> =
                record.creates_sent.iter().filter(|(_, t)| t.stage == build).map(|(_, t)| t.task).collect();
            let seen: Vec<u64> =
                record.seen_producing.values().filter(|(t, _)| t.stage == build).map(|s| s.1).collect();
            if tasks.is_empty() || seen.len() < tasks.len() {
                ready = u64::MAX; // Not all seen: ready earlier only by a full buffer.
                break;
            }
            ready = ready.max(seen.into_iter().max().unwrap_or(0));
        }
        if ready != u64::MAX && created > ready + limit.as_millis() as u64 {
            late.push(format!(
                "stage {probe} could start at {:.3} s, its first task was sent at {:.3} s: a wake-up was missed",
                ready as f64 / 1e3,
                created as f64 / 1e3
            ));
        }
    }
    late
}

/// The longest stretch without an event before `end`, if longer than `QUIET_LIMIT`.
fn quiet_stretch(events: &[(u64, String)], end: u64) -> Option<String> {
    let mut last = (0u64, "the start");
    let mut worst: Option<(u64, u64, String, String)> = None;
    for (at, text) in events.iter().filter(|(at, _)| *at <= end) {
        let gap = at - last.0;
        if gap > QUIET_LIMIT.as_millis() as u64 && worst.as_ref().is_none_or(|w| gap > w.1 - w.0) {
            worst = Some((last.0, *at, last.1.to_string(), text.clone()));
        }
        last = (*at, text.as_str());
    }
    worst.map(|(from, to, a, b)| {
        format!("nothing happened for {:.1} s, from \"{a}\" to \"{b}\": a wake-up was missed", (to - from) as f64 / 1e3)
    })
}

fn policy_kept(policy: Policy, outcome: &Outcome, faults: &std::collections::BTreeSet<ErrorCode>) -> Vec<String> {
    let Err((code, message)) = outcome else { return Vec::new() };
    let said = format!("{code}: {message}");
    match policy {
        Policy::Task => vec![format!("retry_policy=task failed with attempts to spare: {said}")],
        Policy::None if *code == ErrorCode::RemoteTaskFailed => {
            vec![format!("the query failed with the echo of a failure, not its cause: {said}")]
        }
        Policy::None if !faults.contains(code) => {
            vec![format!("the query failed with an error no fault explains (faults: {faults:?}): {said}")]
        }
        Policy::None => Vec::new(),
    }
}
