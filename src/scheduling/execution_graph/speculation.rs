//! Speculative attempts in the graph: a second attempt of a partition whose first
//! still runs (the fault-tolerant scheduler's copy of a straggler,
//! `scheduling::speculation`), and its adoption as the partition's attempt when it
//! finishes first. Until adopted the graph knows only the first attempt, so a copy
//! that loses or fails changes nothing here.

use std::collections::BTreeMap;

use super::{ExecutionGraph, ExecutionStage, PartitionLocation, Stage, TaskAttemptStatus, TaskDescription};

impl Stage {
    /// Input stage -> all its partitions' locations, in partition order.
    pub(super) fn input_locations(&self) -> BTreeMap<usize, Vec<PartitionLocation>> {
        self.inputs.iter().map(|(&i, o)| (i, o.locations.values().flatten().cloned().collect())).collect()
    }
}

impl ExecutionGraph {
    /// A new attempt of `partition` of stage `stage_id` beside the one running there;
    /// None unless an attempt of it runs (with its inputs complete).
    pub fn speculate(&mut self, stage_id: usize, partition: usize) -> Option<TaskDescription> {
        let stage = self.stages.get_mut(&stage_id)?;
        let ExecutionStage::Running { tasks } = &stage.state else { return None };
        let running = tasks.get(partition)?.as_ref().is_some_and(|t| t.status == TaskAttemptStatus::Running);
        if !running || !stage.inputs_complete() {
            return None;
        }
        let attempt = stage.next_attempt[partition];
        stage.next_attempt[partition] += 1;
        Some(TaskDescription {
            job_id: self.job_id.clone(),
            stage_id,
            partition,
            task_attempt: attempt,
            input_locations: stage.input_locations(),
        })
    }

    /// Makes `attempt`, on `executor_id`, the running attempt of the partition in
    /// place of the one there (which the caller then aborts). False when the
    /// partition no longer runs: the copy is too late.
    pub fn adopt(&mut self, stage_id: usize, partition: usize, attempt: usize, executor_id: &str) -> bool {
        let Some(stage) = self.stages.get_mut(&stage_id) else { return false };
        let ExecutionStage::Running { tasks } = &mut stage.state else { return false };
        match tasks.get_mut(partition) {
            Some(Some(t)) if t.status == TaskAttemptStatus::Running => {
                t.task_id = attempt;
                t.executor_id = executor_id.to_string();
                true
            }
            _ => false,
        }
    }
}
