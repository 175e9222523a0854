//! The fault-tolerant scheduler's copies of stragglers: launched on another worker's
//! free slot when `Stragglers` finds a partition far slower than its stage, and
//! settled each round: a copy that finishes first is adopted by the graph as the
//! partition's attempt and the first attempt aborted; a copy whose first attempt
//! finished, failed or was superseded is aborted; a failed copy is dropped without
//! counting as a failure of the partition. Consumers read the one attempt the graph
//! names, so never both. A worker that lost a race runs no new tasks of the query
//! while others are live (`launch_tasks`).

use std::sync::Arc;

use tokio::time::Instant;

use super::FaultTolerantQueryScheduler;
use crate::protocol::TaskState;
use crate::scheduling::remote_task::RemoteTask;
use crate::scheduling::stage_execution::CopyWon;

impl FaultTolerantQueryScheduler {
    /// Settles every copy against its first attempt (see the module doc).
    pub(super) fn settle_copies(&mut self) {
        let keys: Vec<_> = self.copies.keys().copied().collect();
        for key in keys {
            let (copy, copied) = self.copies[&key].clone();
            let first = self.running.get(&key).filter(|t| t.task_id().attempt == copied).cloned();
            match (copy.state(), first) {
                (_, None) => self.drop_copy(key),
                (TaskState::Finished, Some(first)) if first.state() != TaskState::Finished => {
                    let (stage, partition) = key;
                    let attempt = copy.task_id().attempt;
                    if !self.graph.adopt(stage, partition, attempt, &copy.worker().node_id) {
                        self.drop_copy(key);
                        continue;
                    }
                    tracing::info!(
                        query = %self.settings.query_id, stage, partition, winner = %copy.task_id(),
                        loser = %first.task_id(), "a straggler's copy finished first"
                    );
                    if let Some(s) = self.stages.get(&stage) {
                        s.copy_won(CopyWon {
                            partition,
                            winner: copy.task_id().clone(),
                            winner_node: copy.worker().node_id.clone(),
                            loser: first.task_id().clone(),
                            loser_node: first.worker().node_id.clone(),
                        });
                    }
                    self.copies.remove(&key);
                    self.slow_workers.insert(first.worker().node_id.clone());
                    self.running.insert(key, copy);
                    self.abort_now(first);
                }
                (TaskState::Failed | TaskState::Aborted | TaskState::Canceled, Some(_)) => self.drop_copy(key),
                _ => {}
            }
        }
    }

    fn drop_copy(&mut self, key: (usize, usize)) {
        if let Some((copy, _)) = self.copies.remove(&key) {
            self.abort_now(copy);
        }
    }

    /// Aborts an attempt nobody will read; its worker removes its output.
    fn abort_now(&mut self, task: Arc<dyn RemoteTask>) {
        self.attempts.spawn(async move {
            task.delete(true).await;
        });
    }

    /// Copies every straggler due now onto a live worker other than its own with a
    /// free slot, and notes when the next one will be due.
    pub(super) fn launch_copies(&mut self) {
        let Some(stragglers) = &self.stragglers else { return };
        let (due, next) = stragglers.due(Instant::now(), |k| self.copies.contains_key(k));
        self.next_copy_due = next;
        if due.is_empty() {
            return;
        }
        let live = self.live_workers();
        let mut free = self.free_slots(&live);
        for key in due {
            let Some(first) = self.running.get(&key).cloned() else { continue };
            let fits = |i: usize| {
                free[i] > 0
                    && live[i].node_id != first.worker().node_id
                    && !self.slow_workers.contains(&live[i].node_id)
            };
            let Some(w) = (0..live.len()).find(|&i| fits(i)) else {
                return;
            };
            let Some(desc) = self.graph.speculate(key.0, key.1) else { continue };
            tracing::info!(
                query = %self.settings.query_id, stage = key.0, partition = key.1, straggler = %first.task_id(),
                worker = %live[w].node_id, "copying a straggler"
            );
            free[w] -= 1;
            let copy = self.start_attempt(desc, live[w].clone());
            self.copies.insert(key, (copy, first.task_id().attempt));
        }
    }
}
