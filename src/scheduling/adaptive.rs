//! Adaptive re-planning from stage statistics, under `retry_policy=task`: every
//! input of a stage is spooled before the stage starts, so what its producers wrote
//! to each of its partitions is known by then. A stage whose partitions turned out
//! small runs as fewer tasks, each over neighbouring partitions (Spark's coalescing
//! of shuffle partitions; Trino's fault-tolerant mode sizes its tasks the same way).
//!
//! The fault-tolerant scheduler asks `plan_tasks` once per stage, when the stage first
//! resolves, and records the outcome for query info and EXPLAIN ANALYZE
//! (`AdaptiveChange`). The rules here are pure: bytes in, groups out.

use std::fmt;
use std::ops::Range;

/// Below this a task is not worth its start-up (tens of milliseconds for a task
/// against a millisecond of work): partitions are coalesced up to at least this.
pub const MIN_TASK_INPUT_BYTES: u64 = 1 << 20;

/// When and how far partitions are coalesced.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AdaptivePolicy {
    /// What one task should read at most once coalesced
    /// (`adaptive_partition_target_size`).
    pub target_bytes: u64,
    /// Largest build side, by what its producers wrote, that a partitioned join
    /// broadcasts once it is known (`adaptive_join_max_broadcast_size`; 0 never).
    pub broadcast_bytes: u64,
}

/// What adaptive planning changed in one stage, for EXPLAIN ANALYZE.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AdaptiveChange {
    pub partitions: usize,
    pub tasks: usize,
    pub input_bytes: u64,
    pub largest_task_bytes: u64,
    /// Skewed partitions split over several tasks: (partition, its bytes, tasks).
    pub splits: Vec<(usize, u64, usize)>,
}

impl fmt::Display for AdaptiveChange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "adaptive: {} partitions run as {} tasks ({} B of input, at most {} B a task)",
            self.partitions, self.tasks, self.input_bytes, self.largest_task_bytes
        )?;
        for (partition, bytes, tasks) in &self.splits {
            write!(f, "; skewed partition {partition} ({bytes} B) split into {tasks} tasks")?;
        }
        Ok(())
    }
}

/// A partition is skewed when it holds this many times the median partition's bytes
/// (and more than a task's target): Spark's default factor.
pub const SKEW_FACTOR: u64 = 5;

/// What one task of an adapted stage reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskSlice {
    /// The fragment partitions it runs.
    pub partitions: Vec<usize>,
    /// Of a skewed partition split over several tasks: the producer tasks of the
    /// split input whose rows this task reads (its siblings read the others'); every
    /// other input is read whole.
    pub producers: Option<Range<usize>>,
}

/// What a stage's producers wrote for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StageInput {
    /// Bytes of each of the stage's partitions, over all its partitioned inputs.
    pub partition_bytes: Vec<u64>,
    /// The input a skewed partition may be split by (the probe side of its join):
    /// the bytes each of its producer tasks wrote to each partition. None when no
    /// input may be split.
    pub splittable: Option<Vec<Vec<u64>>>,
}

/// What one task should read: the policy's target, but no more than an even share
/// over the cluster's slots (so a stage still uses the cluster), and no less than
/// `MIN_TASK_INPUT_BYTES`. Spark picks its advisory size the same way.
pub fn task_target_bytes(policy: &AdaptivePolicy, total_bytes: u64, slots: usize) -> u64 {
    let even_share = total_bytes.div_ceil(slots.max(1) as u64);
    policy.target_bytes.min(even_share.max(MIN_TASK_INPUT_BYTES))
}

/// Neighbouring partitions grouped: a group closes once it reads `target` bytes,
/// and takes no partition that would carry it more than a quarter past. Closing at
/// the target rather than before it keeps the count at about total / target: with
/// the target an even share of the slots, one task a slot, not one more that runs
/// alone after the others (TPC-H q21 at sf1 ran 5 tasks on 4 slots). Every
/// partition is in exactly one group, in order.
pub fn group_partitions(bytes: &[u64], target: u64) -> Vec<Vec<usize>> {
    let mut groups: Vec<Vec<usize>> = Vec::new();
    let mut current = 0u64;
    for (p, &b) in bytes.iter().enumerate() {
        match groups.last_mut() {
            Some(group) if joins(current, b, target) => {
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

/// Whether a partition of `bytes` joins a group of `sum` (`group_partitions`' rule).
fn joins(sum: u64, bytes: u64, target: u64) -> bool {
    sum < target && sum + bytes <= target.saturating_add(target / 4)
}

/// The tasks a stage should run as, or None when every partition keeps a task of
/// its own: neighbouring small partitions share a task, and a skewed partition of a
/// splittable stage is split over tasks that each read some of its producers.
pub fn plan_tasks(
    policy: &AdaptivePolicy,
    input: &StageInput,
    slots: usize,
) -> Option<(Vec<TaskSlice>, AdaptiveChange)> {
    let bytes = &input.partition_bytes;
    let total: u64 = bytes.iter().sum();
    let target = task_target_bytes(policy, total, slots);
    let median = {
        let mut sorted = bytes.clone();
        sorted.sort_unstable();
        sorted.get(sorted.len() / 2).copied().unwrap_or(0)
    };
    let mut slices: Vec<(TaskSlice, u64)> = Vec::new();
    let mut splits = Vec::new();
    let mut group: Option<(Vec<usize>, u64)> = None;
    for (p, &b) in bytes.iter().enumerate() {
        let skewed = b > target && b > SKEW_FACTOR.saturating_mul(median);
        if let Some(chunks) = input.splittable.as_ref().filter(|_| skewed).and_then(|by| split(by, p, target)) {
            slices.extend(group.take().map(|(partitions, b)| (TaskSlice { partitions, producers: None }, b)));
            // The rest of the partition (the other inputs) goes to every chunk.
            let split_bytes: u64 = chunks.iter().map(|(_, c)| c).sum();
            for (range, chunk) in &chunks {
                let slice = TaskSlice { partitions: vec![p], producers: Some(range.clone()) };
                slices.push((slice, chunk + (b - split_bytes.min(b))));
            }
            splits.push((p, b, chunks.len()));
            continue;
        }
        match &mut group {
            Some((partitions, sum)) if joins(*sum, b, target) => {
                partitions.push(p);
                *sum += b;
            }
            _ => {
                let done = group.replace((vec![p], b));
                slices.extend(done.map(|(partitions, b)| (TaskSlice { partitions, producers: None }, b)));
            }
        }
    }
    slices.extend(group.map(|(partitions, b)| (TaskSlice { partitions, producers: None }, b)));
    if slices.len() >= bytes.len() && splits.is_empty() {
        return None;
    }
    let change = AdaptiveChange {
        partitions: bytes.len(),
        tasks: slices.len(),
        input_bytes: total,
        largest_task_bytes: slices.iter().map(|(_, b)| *b).max().unwrap_or(0),
        splits,
    };
    Some((slices.into_iter().map(|(s, _)| s).collect(), change))
}

/// Partition `p` split by its producers' bytes into chunks of about `target`
/// (neighbouring producers together); None when that makes one chunk.
fn split(by_producer: &[Vec<u64>], p: usize, target: u64) -> Option<Vec<(Range<usize>, u64)>> {
    let bytes: Vec<u64> = by_producer.iter().map(|t| t.get(p).copied().unwrap_or(0)).collect();
    let chunks = group_partitions(&bytes, target);
    (chunks.len() >= 2).then(|| {
        let range = |c: &Vec<usize>| c[0]..c[c.len() - 1] + 1;
        chunks.iter().map(|c| (range(c), c.iter().map(|&t| bytes[t]).sum())).collect()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1 << 20;

    fn policy() -> AdaptivePolicy {
        AdaptivePolicy { target_bytes: 64 * MIB, broadcast_bytes: 0 }
    }

    #[test]
    fn neighbours_share_a_task_up_to_the_target() {
        assert_eq!(group_partitions(&[1, 2, 3, 4, 5], 6), vec![vec![0, 1, 2], vec![3], vec![4]]);
        assert_eq!(group_partitions(&[10, 1, 1, 10], 5), vec![vec![0], vec![1, 2], vec![3]], "big ones alone");
        assert_eq!(group_partitions(&[0, 0, 0], 1), vec![vec![0, 1, 2]], "empty partitions cost nothing");
        assert_eq!(group_partitions(&[5; 32], 40).len(), 4, "one task a slot when the target is an even share");
        assert_eq!(group_partitions(&[3, 3, 3], 5), vec![vec![0, 1], vec![2]], "closed once it reaches the target");
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

    fn only(partition_bytes: Vec<u64>) -> StageInput {
        StageInput { partition_bytes, splittable: None }
    }

    fn partitions(slices: &[TaskSlice]) -> Vec<Vec<usize>> {
        slices.iter().map(|s| s.partitions.clone()).collect()
    }

    /// 100 partitions of a few KiB run as one task; partitions that fill the target
    /// keep their own.
    #[test]
    fn tiny_partitions_coalesce_and_large_ones_do_not() {
        let (slices, change) = plan_tasks(&policy(), &only(vec![4096; 100]), 4).unwrap();
        assert_eq!(partitions(&slices), vec![(0..100).collect::<Vec<_>>()]);
        assert_eq!(slices[0].producers, None);
        let expected = AdaptiveChange {
            partitions: 100,
            tasks: 1,
            input_bytes: 409_600,
            largest_task_bytes: 409_600,
            splits: vec![],
        };
        assert_eq!(change, expected);
        assert_eq!(plan_tasks(&policy(), &only(vec![64 * MIB; 8]), 4), None);
        let (slices, _) = plan_tasks(&policy(), &only(vec![8 * MIB; 16]), 4).unwrap();
        assert_eq!(slices.len(), 4, "128 MiB over 4 slots: 32 MiB, four partitions a task");
        assert!(slices.iter().all(|s| s.partitions.len() == 4), "{slices:?}");
    }

    /// Partition 1 holds 200 MiB against a median of 2: split over its producers in
    /// chunks of about the target, each chunk with the whole of the other inputs'
    /// part of it; its neighbours still coalesce. Without a splittable input, or
    /// when it is not skewed, it stays whole.
    #[test]
    fn a_skewed_partition_is_split_by_its_producers() {
        // Four producers of the split input; partition 1 gets 50 MiB from each.
        let by_producer = vec![vec![MIB / 2, 50 * MIB, MIB / 2, MIB / 2]; 4];
        let mut partition_bytes: Vec<u64> = (0..4).map(|p| by_producer.iter().map(|t| t[p]).sum()).collect();
        partition_bytes[1] += MIB; // the build side's part of partition 1
        let input = StageInput { partition_bytes: partition_bytes.clone(), splittable: Some(by_producer) };
        let (slices, change) = plan_tasks(&policy(), &input, 4).unwrap();
        let summary: Vec<(Vec<usize>, Option<Range<usize>>)> =
            slices.iter().map(|s| (s.partitions.clone(), s.producers.clone())).collect();
        assert_eq!(
            summary,
            vec![
                (vec![0], None),
                (vec![1], Some(0..1)),
                (vec![1], Some(1..2)),
                (vec![1], Some(2..3)),
                (vec![1], Some(3..4)),
                (vec![2, 3], None)
            ]
        );
        assert_eq!(change.splits, vec![(1, 201 * MIB, 4)]);
        assert_eq!(change.largest_task_bytes, 51 * MIB, "a chunk and the build side's part");
        assert!(change.to_string().contains("skewed partition 1 (210763776 B) split into 4 tasks"), "{change}");
        let whole = plan_tasks(&policy(), &only(partition_bytes), 4).unwrap().0;
        assert!(whole.iter().all(|s| s.producers.is_none()) && whole.len() == 3, "{whole:?}");
        let even = StageInput { partition_bytes: vec![80 * MIB; 4], splittable: Some(vec![vec![20 * MIB; 4]; 4]) };
        assert_eq!(plan_tasks(&policy(), &even, 4), None, "large but even partitions are not skewed");
    }
}
