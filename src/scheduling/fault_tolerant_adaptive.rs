//! Adaptive planning in the fault-tolerant scheduler: when a stage first resolves,
//! its producers' spooled outputs tell how many bytes each of its partitions reads,
//! and a stage of small partitions is given fewer tasks, each over neighbouring
//! partitions (`scheduling::adaptive` decides; the graph takes the new count). The
//! scheduler then hands each task its group of fragment partitions, and tells the
//! stage's consumers which partitions each of its tasks holds.

use std::collections::HashMap;

use super::super::adaptive;
use super::{ExecutionStage, FaultTolerantQueryScheduler};
use crate::plan::fragmenter::FragmentOutput;
use crate::protocol::TaskId;

impl FaultTolerantQueryScheduler {
    /// The fragment partitions task `task` of stage `stage` runs: its group if the
    /// stage was coalesced, else the partition of the same number.
    pub(super) fn fragment_partitions(&self, stage: usize, task: usize) -> Vec<usize> {
        match self.task_partitions.get(&stage).and_then(|groups| groups.get(task)) {
            Some(group) => group.clone(),
            None => vec![task],
        }
    }

    /// Coalesces the stages that have just resolved, before their first task starts.
    /// Each stage is looked at once: a stage rolled back later keeps its tasks.
    pub(super) fn adapt_resolved_stages(&mut self) {
        let Some(policy) = self.limits.adaptive else { return };
        for id in self.graph.unstarted_resolved_stages() {
            if id == 0 || !self.adapted.insert(id) {
                continue;
            }
            let Some(bytes) = self.input_partition_bytes(id) else { continue };
            let slots = self.live_workers().len() * self.limits.slots_per_worker;
            let Some((groups, change)) = adaptive::coalesce(&policy, &bytes, slots) else { continue };
            if self.graph.set_task_count(id, groups.len()).is_err() {
                continue;
            }
            if let Some(s) = &mut self.stragglers {
                s.set_partitions(id, groups.len());
            }
            tracing::debug!(query = %self.settings.query_id, stage = id, "{change}");
            self.stages[&id].adapt(groups.len(), change.to_string());
            self.task_partitions.insert(id, groups);
        }
    }

    /// Bytes stage `id`'s producers wrote to each of its partitions; None when it may
    /// not be coalesced: a single partition, an input that keeps partitions apart
    /// (passthrough, for a merge), no partitioned input, or a producer task that did
    /// not report its partitions' bytes.
    fn input_partition_bytes(&self, id: usize) -> Option<Vec<u64>> {
        let fragment = &self.stages.get(&id)?.fragment;
        let n = fragment.partitions;
        if n < 2 {
            return None;
        }
        let mut bytes = vec![0u64; n];
        let mut partitioned = false;
        for input in &fragment.inputs {
            let producer = self.stages.get(input)?;
            match producer.fragment.output {
                FragmentOutput::Repartition { partitions } if partitions == n => partitioned = true,
                // Every task reads all of it, however many there are.
                FragmentOutput::Broadcast => continue,
                _ => return None,
            }
            let ExecutionStage::Successful { tasks, .. } = &self.graph.stage(*input)?.state else { return None };
            let reports: HashMap<TaskId, Vec<u64>> = producer
                .tasks()
                .iter()
                .map(|t| (t.task_id().clone(), t.status().stats.output_partition_bytes))
                .collect();
            for (p, attempt) in tasks.iter().enumerate() {
                let task_id = TaskId::new(&self.settings.query_id, *input, p, attempt.task_id);
                let written = reports.get(&task_id).filter(|w| w.len() == n)?;
                for (b, w) in bytes.iter_mut().zip(written) {
                    *b += w;
                }
            }
        }
        partitioned.then_some(bytes)
    }
}
