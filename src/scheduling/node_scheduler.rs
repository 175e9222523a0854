//! `NodeScheduler`: places the tasks of a stage on live workers. Stages of one query
//! start at different workers (a rotating offset), so single-task stages and the first
//! tasks of every stage do not all land on the same worker.

use std::sync::atomic::{AtomicUsize, Ordering};

use crate::cluster::node_manager::WorkerNode;

#[derive(Debug, Default)]
pub struct NodeScheduler {
    next: AtomicUsize,
}

impl NodeScheduler {
    pub fn new() -> Self {
        NodeScheduler { next: AtomicUsize::new(0) }
    }

    /// One worker per task, round robin from a rotating start.
    pub fn place(&self, workers: &[WorkerNode], tasks: usize) -> Vec<WorkerNode> {
        if workers.is_empty() {
            return Vec::new();
        }
        let start = self.next.fetch_add(1, Ordering::Relaxed);
        (0..tasks).map(|t| workers[(start + t) % workers.len()].clone()).collect()
    }
}

/// Contiguous slices of `partitions` for `tasks` tasks, sizes differing by at most one.
pub fn partition_slices(partitions: usize, tasks: usize) -> Vec<Vec<usize>> {
    let tasks = tasks.clamp(1, partitions.max(1));
    (0..tasks).map(|t| (t * partitions / tasks..(t + 1) * partitions / tasks).collect()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn workers(n: usize) -> Vec<WorkerNode> {
        (0..n).map(|i| WorkerNode { node_id: format!("w{i}"), url: format!("http://w{i}") }).collect()
    }

    #[test]
    fn tasks_spread_over_workers_and_rotate() {
        let s = NodeScheduler::new();
        let a = s.place(&workers(3), 3);
        let ids: std::collections::HashSet<_> = a.iter().map(|w| w.node_id.clone()).collect();
        assert_eq!(ids.len(), 3);
        let b = s.place(&workers(3), 1);
        let c = s.place(&workers(3), 1);
        assert_ne!(b[0], c[0]);
        assert!(s.place(&[], 2).is_empty());
    }

    #[test]
    fn slices_cover_every_partition_once() {
        assert_eq!(partition_slices(6, 3), vec![vec![0, 1], vec![2, 3], vec![4, 5]]);
        assert_eq!(partition_slices(5, 2), vec![vec![0, 1], vec![2, 3, 4]]);
        assert_eq!(partition_slices(2, 4), vec![vec![0], vec![1]]);
        assert_eq!(partition_slices(1, 1), vec![vec![0]]);
    }
}
