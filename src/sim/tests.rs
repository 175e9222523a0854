use super::*;
use crate::error_code::ErrorCode;
use crate::scheduling::planted::{plant, Bug};

/// Runs `seeds` seeds of `policy` on 2 to 6 workers; returns the failing reports.
fn run_many(policy: Policy, seeds: std::ops::Range<u64>, faults: bool) -> (usize, Vec<SimReport>) {
    let codec = codec();
    let mut failed = Vec::new();
    let mut runs = 0;
    for seed in seeds {
        let config = SimConfig { faults, ..SimConfig::new(seed, policy, 2 + seed as usize % 5) };
        let report = run_seed(&config, &codec);
        runs += 1;
        if !report.passed() {
            failed.push(report);
        }
    }
    (runs, failed)
}

/// Each failing run's summary, and the first one's events.
fn summaries(reports: &[SimReport]) -> String {
    let lines = reports.iter().map(|r| r.summary()).collect::<Vec<_>>().join("\n");
    let first = reports.first().map(|r| r.trace()).unwrap_or_default();
    format!("{lines}\nthe events of the first:\n{first}")
}

#[test]
fn three_hundred_seeds_keep_every_invariant_under_retry_policy_none() {
    let (runs, failed) = run_many(Policy::None, 0..300, true);
    assert!(failed.is_empty(), "{} of {runs} seeds failed:\n{}", failed.len(), summaries(&failed));
}

#[test]
fn three_hundred_seeds_keep_every_invariant_under_retry_policy_task() {
    let (runs, failed) = run_many(Policy::Task, 0..300, true);
    assert!(failed.is_empty(), "{} of {runs} seeds failed:\n{}", failed.len(), summaries(&failed));
}

/// Adaptive planning runs in the task seeds: stages coalesced before they start and
/// joins that take their probe stage in, then faults, rollbacks and copies over
/// them, every invariant kept.
#[test]
fn task_seeds_coalesce_stages_and_keep_every_invariant() {
    let codec = codec();
    let reports: Vec<SimReport> =
        (0..100).map(|seed| run_seed(&SimConfig::new(seed, Policy::Task, 2 + seed as usize % 5), &codec)).collect();
    let with = |what: &str| reports.iter().filter(|r| r.events.iter().any(|(_, e)| e.contains(what))).count();
    let (adapted, broadcast) = (with("partitions run as"), with("broadcast; probe stage"));
    let failed: Vec<SimReport> = reports.into_iter().filter(|r| !r.passed()).collect();
    assert!(failed.is_empty(), "{}", summaries(&failed));
    assert!(adapted >= 10, "only {adapted} of 100 seeds coalesced a stage");
    assert!(broadcast >= 5, "only {broadcast} of 100 seeds broadcast a build side");
    println!("{adapted} of 100 task seeds coalesced a stage, {broadcast} broadcast a build side");
}

#[test]
fn calm_runs_succeed_and_faults_do_happen() {
    let codec = codec();
    for policy in [Policy::None, Policy::Task] {
        for seed in 0..40 {
            let config = SimConfig { faults: false, ..SimConfig::new(seed, policy, 3) };
            let report = run_seed(&config, &codec);
            assert!(report.passed() && report.outcome.is_ok(), "{}", report.summary());
            assert!(report.tasks_created >= report.stages, "{}", report.summary());
        }
    }
    // The seeds of the tests above do plant faults, and some fail a pipelined query.
    let failed = (0..100)
        .map(|seed| run_seed(&SimConfig::new(seed, Policy::None, 4), &codec))
        .filter(|r| r.outcome.is_err())
        .count();
    assert!(failed > 5, "only {failed} of 100 seeds failed their query: the faults do not bite");
    let killed = (0..50)
        .map(|seed| run_seed(&SimConfig::new(seed, Policy::Task, 4), &codec))
        .filter(|r| r.events.iter().any(|(_, e)| e.ends_with("died")))
        .count();
    assert!(killed > 5, "only {killed} of 50 seeds killed a worker");
}

#[test]
fn a_seed_replays_exactly() {
    let codec = codec();
    for policy in [Policy::None, Policy::Task] {
        for seed in 0..20 {
            let config = SimConfig::new(seed, policy, 4);
            let (a, b) = (run_seed(&config, &codec), run_seed(&config, &codec));
            assert_eq!(a.events, b.events, "seed {seed} ran differently twice");
            assert_eq!(a.digest, b.digest);
        }
    }
}

/// The order of events of the TPC-DS stall (q27, q32, q36, q75 to q77): the root
/// has every row it wants while a stage is done producing with pages nobody reads.
fn stall_seed() -> SimConfig {
    SimConfig { stages: Some(4), faults: false, ..SimConfig::new(STALL_SEED, Policy::None, 3) }
}

const STALL_SEED: u64 = 4;

/// Found by `flotilla sim --seeds 2000`: a worker cut off from the coordinator
/// runs a task that then fails; the root reads that task's output and is told it
/// failed. The coordinator never sees the task's status, and the query failed with
/// the root's echo (`REMOTE_TASK_FAILED`). A worker now answers a reader of a
/// failed task with that task's own code, and the reader reports it.
#[test]
fn a_failure_behind_a_cut_off_worker_is_reported_by_its_cause() {
    let config = SimConfig::new(1899, Policy::None, 4);
    let report = run_seed(&config, &codec());
    let cut = report.events.iter().any(|(_, e)| e.contains("cut off from the coordinator"));
    assert!(cut, "the seed no longer cuts a worker off:\n{}", report.trace());
    assert!(report.passed(), "{}\n{}", report.summary(), report.trace());
    let (code, _) = report.outcome.as_ref().expect_err("an injected failure fails the query");
    assert_eq!(*code, ErrorCode::InjectedFailure, "{}", report.summary());
}

#[test]
fn the_tpcds_stall_is_a_fixed_seed_and_ends_promptly() {
    let config = stall_seed();
    let (_, shape, _, params) = draw(&config);
    let candidates = || {
        let config = |seed| SimConfig { seed, ..stall_seed() };
        (0..100).filter(|&seed| draw(&config(seed)).3.root_limit).collect::<Vec<_>>()
    };
    assert!(params.root_limit, "the seed no longer draws a root that stops early; these do: {:?}", candidates());
    assert!(shape.plan.fragments[0].inputs.len() >= 2 || shape.stages() >= 2);
    let report = run_seed(&config, &codec());
    assert!(report.passed() && report.outcome.is_ok(), "{}\n{}", report.summary(), report.trace());
    let unread = report.events.iter().any(|(_, e)| e.contains("Flushing on"));
    assert!(unread, "a stage was left done producing and unread:\n{}", report.trace());

    let _bug = plant(Bug::WaitForDrain);
    let report = run_seed(&config, &codec());
    assert!(!report.passed(), "waiting for the unread stage must be caught:\n{}", report.summary());
}

#[test]
fn a_late_wakeup_planted_in_the_pipelined_scheduler_is_found() {
    let _bug = plant(Bug::LateWakeup);
    let (runs, failed) = run_many(Policy::None, 0..300, false);
    let failed: Vec<SimReport> = failed.into_iter().filter(|r| r.outcome.is_ok() || r.violations.len() > 1).collect();
    let missed = failed.iter().filter(|r| r.violations.iter().any(|v| v.contains("wake-up was missed"))).count();
    assert!(missed > 0, "none of {runs} seeds found the late wake-up");
    println!("the late wake-up stalled {missed} of {runs} seeds, e.g.\n{}", failed[0].summary());
}

#[test]
fn a_double_read_planted_in_the_fault_tolerant_scheduler_is_found() {
    let _bug = plant(Bug::DoubleRead);
    let (runs, failed) = run_many(Policy::Task, 0..50, false);
    let doubled = failed.iter().filter(|r| r.violations.iter().any(|v| v.contains("named 2 times"))).count();
    assert!(doubled > 0, "none of {runs} seeds found the double read");
    println!("the double read broke {doubled} of {runs} seeds, e.g.\n{}", failed[0].summary());
}
