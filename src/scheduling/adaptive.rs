//! Adaptive re-planning from stage statistics, under `retry_policy=task`: every
//! input of a stage is spooled before the stage starts, so what its producers wrote
//! to each of its partitions is known by then. A stage whose partitions turned out
//! small runs as fewer tasks, each over neighbouring partitions (Spark's coalescing
//! of shuffle partitions; Trino's fault-tolerant mode sizes its tasks the same way).
//!
//! The fault-tolerant scheduler asks `coalesce` once per stage, when the stage first
//! resolves, and records the outcome for query info and EXPLAIN ANALYZE
//! (`AdaptiveChange`). The rules here are pure: bytes in, groups out.

use std::fmt;

/// Below this a task is not worth its start-up (tens of milliseconds for a task
/// against a millisecond of work): partitions are coalesced up to at least this.
pub const MIN_TASK_INPUT_BYTES: u64 = 1 << 20;

/// When and how far partitions are coalesced.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AdaptivePolicy {
    /// What one task should read at most once coalesced
    /// (`adaptive_partition_target_size`).
    pub target_bytes: u64,
}

/// What adaptive planning changed in one stage, for EXPLAIN ANALYZE.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AdaptiveChange {
    pub partitions: usize,
    pub tasks: usize,
    pub input_bytes: u64,
    pub largest_task_bytes: u64,
}

impl fmt::Display for AdaptiveChange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "adaptive: {} partitions coalesced into {} tasks ({} B of input, at most {} B a task)",
            self.partitions, self.tasks, self.input_bytes, self.largest_task_bytes
        )
    }
}

/// What one task should read: the policy's target, but no more than an even share
/// over the cluster's slots (so a stage still uses the cluster), and no less than
/// `MIN_TASK_INPUT_BYTES`. Spark picks its advisory size the same way.
pub fn task_target_bytes(policy: &AdaptivePolicy, total_bytes: u64, slots: usize) -> u64 {
    let even_share = total_bytes.div_ceil(slots.max(1) as u64);
    policy.target_bytes.min(even_share.max(MIN_TASK_INPUT_BYTES))
}

/// Neighbouring partitions grouped so that each group reads at most `target` bytes
/// (a partition over it alone is a group of its own). Every partition is in exactly
/// one group, in order.
pub fn group_partitions(bytes: &[u64], target: u64) -> Vec<Vec<usize>> {
    let mut groups: Vec<Vec<usize>> = Vec::new();
    let mut current = 0u64;
    for (p, &b) in bytes.iter().enumerate() {
        match groups.last_mut() {
            Some(group) if current + b <= target => {
                group.push(p);
                current += b;
            }
            _ => {
                groups.push(vec![p]);
                current = b;
            }
        }
    }
    groups
}

/// The groups a stage of `bytes.len()` partitions should run as, or None when every
/// partition keeps a task of its own.
pub fn coalesce(policy: &AdaptivePolicy, bytes: &[u64], slots: usize) -> Option<(Vec<Vec<usize>>, AdaptiveChange)> {
    let total: u64 = bytes.iter().sum();
    let groups = group_partitions(bytes, task_target_bytes(policy, total, slots));
    if groups.len() >= bytes.len() {
        return None;
    }
    let largest = groups.iter().map(|g| g.iter().map(|&p| bytes[p]).sum::<u64>()).max().unwrap_or(0);
    let change = AdaptiveChange {
        partitions: bytes.len(),
        tasks: groups.len(),
        input_bytes: total,
        largest_task_bytes: largest,
    };
    Some((groups, change))
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1 << 20;

    fn policy() -> AdaptivePolicy {
        AdaptivePolicy { target_bytes: 64 * MIB }
    }

    #[test]
    fn neighbours_share_a_task_up_to_the_target() {
        assert_eq!(group_partitions(&[1, 2, 3, 4, 5], 6), vec![vec![0, 1, 2], vec![3], vec![4]]);
        assert_eq!(group_partitions(&[10, 1, 1, 10], 5), vec![vec![0], vec![1, 2], vec![3]], "big ones alone");
        assert_eq!(group_partitions(&[0, 0, 0], 1), vec![vec![0, 1, 2]], "empty partitions cost nothing");
        assert_eq!(group_partitions(&[], 1), Vec::<Vec<usize>>::new());
    }

    #[test]
    fn the_target_keeps_the_cluster_busy_but_not_with_tiny_tasks() {
        // 1 GiB over 4 slots: 256 MiB each, but at most the policy's 64 MiB.
        assert_eq!(task_target_bytes(&policy(), 1 << 30, 4), 64 * MIB);
        // 40 MiB over 4 slots: 10 MiB each, so all four slots get work.
        assert_eq!(task_target_bytes(&policy(), 40 * MIB, 4), 10 * MIB);
        // 100 KiB: one task of at least a MiB.
        assert_eq!(task_target_bytes(&policy(), 100 << 10, 4), MIB);
    }

    /// 100 partitions of a few KiB run as one task; partitions that fill the target
    /// keep their own.
    #[test]
    fn tiny_partitions_coalesce_and_large_ones_do_not() {
        let (groups, change) = coalesce(&policy(), &[4096; 100], 4).unwrap();
        assert_eq!(groups, vec![(0..100).collect::<Vec<_>>()]);
        assert_eq!(
            change,
            AdaptiveChange { partitions: 100, tasks: 1, input_bytes: 409_600, largest_task_bytes: 409_600 }
        );
        assert_eq!(coalesce(&policy(), &[64 * MIB; 8], 4), None);
        let (groups, _) = coalesce(&policy(), &[8 * MIB; 16], 4).unwrap();
        assert_eq!(groups.len(), 4, "128 MiB over 4 slots: 32 MiB, four partitions a task");
        assert!(groups.iter().all(|g| g.len() == 4), "{groups:?}");
    }
}
