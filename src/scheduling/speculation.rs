//! Speculative execution of stragglers under retry policy `task` (Spark's
//! speculation): `Stragglers` keeps when each partition's attempt started and how long
//! the finished ones of its stage took, and says which running attempts are far
//! slower than their stage's median, once enough of the stage is done. The
//! fault-tolerant scheduler launches a copy of each on another worker; the first to
//! finish is the partition's attempt, the other is aborted. A plain struct driven by
//! the scheduler's events and clock, tested without one.

use std::collections::BTreeMap;
use std::time::Duration;

use tokio::time::Instant;

/// When an attempt counts as a straggler (session properties
/// `task_speculation_multiplier` and `task_speculation_quantile`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SpeculationPolicy {
    /// Slower than this many times its stage's median duration.
    pub multiplier: f64,
    /// Share of the stage's partitions finished before any copy.
    pub quantile: f64,
    /// Attempts younger than this are never copied: starting one costs about so much.
    pub min_runtime: Duration,
}

impl SpeculationPolicy {
    pub fn new(multiplier: f64, quantile: f64) -> Self {
        SpeculationPolicy { multiplier, quantile, min_runtime: Duration::from_millis(200) }
    }
}

/// (stage, partition).
pub type PartitionKey = (usize, usize);

#[derive(Debug)]
pub struct Stragglers {
    policy: SpeculationPolicy,
    /// Partitions per stage.
    partitions: BTreeMap<usize, usize>,
    /// When the running attempt of each partition started.
    started: BTreeMap<PartitionKey, Instant>,
    /// How long each finished partition of a stage took.
    durations: BTreeMap<usize, BTreeMap<usize, Duration>>,
}

impl Stragglers {
    pub fn new(policy: SpeculationPolicy, partitions: BTreeMap<usize, usize>) -> Self {
        Stragglers { policy, partitions, started: BTreeMap::new(), durations: BTreeMap::new() }
    }

    /// Stage `stage` now runs `partitions` tasks (adaptive planning coalesced it).
    pub fn set_partitions(&mut self, stage: usize, partitions: usize) {
        self.partitions.insert(stage, partitions);
    }

    /// An attempt of the partition started (a first one, or a retry).
    pub fn started(&mut self, key: PartitionKey, at: Instant) {
        self.started.insert(key, at);
        if let Some(d) = self.durations.get_mut(&key.0) {
            // Recomputed after a rollback: its old time no longer counts as done.
            d.remove(&key.1);
        }
    }

    /// The partition's attempt (first or copy) finished.
    pub fn finished(&mut self, key: PartitionKey, at: Instant) {
        if let Some(start) = self.started.remove(&key) {
            self.durations.entry(key.0).or_default().insert(key.1, at.saturating_duration_since(start));
        }
    }

    /// The partition's attempt failed or was dropped: it is not running.
    pub fn stopped(&mut self, key: PartitionKey) {
        self.started.remove(&key);
    }

    /// The stage's threshold: `multiplier` times the median of its finished
    /// partitions, once `quantile` of them finished (rounded down).
    fn threshold(&self, stage: usize) -> Option<Duration> {
        let done = self.durations.get(&stage)?;
        let partitions = *self.partitions.get(&stage)?;
        // Spark's rule: at least floor(quantile x partitions) finished, and one. With
        // 3 partitions and 0.75, two: a stage of three must not wait for its third.
        let needed = ((self.policy.quantile * partitions as f64).floor() as usize).max(1);
        if done.len() < needed {
            return None;
        }
        let mut times: Vec<Duration> = done.values().copied().collect();
        times.sort_unstable();
        let median = times[times.len() / 2];
        Some(median.mul_f64(self.policy.multiplier).max(self.policy.min_runtime))
    }

    /// Running partitions that should get a copy now (`has_copy` says which have
    /// one), and the earliest moment another will be due.
    pub fn due(&self, now: Instant, has_copy: impl Fn(&PartitionKey) -> bool) -> (Vec<PartitionKey>, Option<Instant>) {
        let mut due = Vec::new();
        let mut next: Option<Instant> = None;
        let mut thresholds: BTreeMap<usize, Option<Duration>> = BTreeMap::new();
        for (key, &start) in &self.started {
            if has_copy(key) {
                continue;
            }
            let Some(limit) = *thresholds.entry(key.0).or_insert_with(|| self.threshold(key.0)) else { continue };
            let at = start + limit;
            if at <= now {
                due.push(*key);
            } else {
                next = Some(next.map_or(at, |n| n.min(at)));
            }
        }
        (due, next)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stragglers(partitions: usize) -> Stragglers {
        Stragglers::new(SpeculationPolicy::new(1.5, 0.75), BTreeMap::from([(1, partitions)]))
    }

    #[tokio::test(start_paused = true)]
    async fn a_partition_far_slower_than_its_stage_is_due_once_enough_is_done() {
        let t0 = Instant::now();
        let mut s = stragglers(4);
        for p in 0..4 {
            s.started((1, p), t0);
        }
        // Two of four done (under 75 %): nothing is judged yet.
        s.finished((1, 0), t0 + Duration::from_secs(2));
        s.finished((1, 1), t0 + Duration::from_secs(2));
        assert_eq!(s.due(t0 + Duration::from_secs(60), |_| false), (vec![], None));
        // Three of four, median 2 s: the last is due at 3 s (1.5 x 2 s).
        s.finished((1, 2), t0 + Duration::from_secs(2));
        let (due, next) = s.due(t0 + Duration::from_secs(2), |_| false);
        assert!(due.is_empty());
        assert_eq!(next, Some(t0 + Duration::from_secs(3)));
        let (due, _) = s.due(t0 + Duration::from_secs(3), |_| false);
        assert_eq!(due, vec![(1, 3)]);
        // One copy at a time.
        assert_eq!(s.due(t0 + Duration::from_secs(3), |k| *k == (1, 3)).0, vec![]);
        // Once it finished, nothing is running.
        s.finished((1, 3), t0 + Duration::from_secs(4));
        assert_eq!(s.due(t0 + Duration::from_secs(90), |_| false), (vec![], None));
    }

    #[tokio::test(start_paused = true)]
    async fn short_stages_and_stopped_attempts_get_no_copy() {
        let t0 = Instant::now();
        let mut s = Stragglers::new(SpeculationPolicy::new(1.5, 0.5), BTreeMap::from([(1, 2)]));
        s.started((1, 0), t0);
        s.started((1, 1), t0);
        s.finished((1, 0), t0 + Duration::from_millis(10));
        // The median is 10 ms, but a copy is never made before `min_runtime`.
        assert_eq!(s.due(t0 + Duration::from_millis(100), |_| false).1, Some(t0 + Duration::from_millis(200)));
        s.stopped((1, 1));
        assert_eq!(s.due(t0 + Duration::from_secs(5), |_| false), (vec![], None));
        // A rerun after a rollback is timed afresh, and its stage's old time dropped.
        s.started((1, 0), t0 + Duration::from_secs(5));
        assert_eq!(s.due(t0 + Duration::from_secs(50), |_| false), (vec![], None), "no finished partition now");
    }
}
