//! Recovery in the `ExecutionGraph`: what a lost worker or an unreadable output does
//! to the stages. Lost outputs are re-run by their producer, and every consumer that
//! still needed them falls back to Unresolved, recursively towards the leaves, which
//! keeps the graph's invariant (a Resolved or Running stage has all inputs complete).

use super::*;

impl ExecutionGraph {
    /// Any non-final stage -> Unresolved, dropping its task slots; returns the attempts
    /// that were running. Only a restart of started work counts as a stage attempt.
    pub(super) fn unresolve(&mut self, id: usize) -> Vec<RunningTaskInfo> {
        let Some(stage) = self.stages.get_mut(&id) else { return Vec::new() };
        let killed = stage.running_tasks();
        if matches!(stage.state, ExecutionStage::Running { .. }) {
            stage.stage_attempt += 1;
        }
        stage.state = ExecutionStage::Unresolved;
        killed
    }

    /// Successful -> Running again for its lost partitions (all of them if none were
    /// lost: an explicit rerun means recompute). Consumers forget those outputs, and
    /// the ones that were about to read them fall back to Unresolved.
    pub(super) fn rerun(&mut self, id: usize, fx: &mut Effects) -> bool {
        let Some(stage) = self.stages.get_mut(&id) else { return false };
        let ExecutionStage::Successful { tasks, lost } = &stage.state else { return false };
        let reset: BTreeSet<usize> = if lost.is_empty() { (0..stage.partitions).collect() } else { lost.clone() };
        let tasks: Vec<Option<TaskInfo>> =
            tasks.iter().enumerate().map(|(p, t)| (!reset.contains(&p)).then(|| t.clone())).collect();
        let ready = stage.inputs_complete();
        stage.stage_attempt += 1;
        // A producer of ours may itself be re-running; then we wait for it like any
        // unresolved stage and recompute everything.
        stage.state = if ready { ExecutionStage::Running { tasks } } else { ExecutionStage::Unresolved };
        fx.touched.insert(id);
        for c in stage.output_links.clone() {
            let Some(consumer) = self.stages.get_mut(&c) else { continue };
            if let Some(input) = consumer.inputs.get_mut(&id) {
                input.locations.retain(|p, _| !reset.contains(p));
                input.complete = false;
            }
            let was_resolved = matches!(consumer.state, ExecutionStage::Resolved);
            let was_running = matches!(consumer.state, ExecutionStage::Running { .. });
            if was_resolved {
                consumer.state = ExecutionStage::Unresolved;
            }
            if was_running {
                fx.killed.extend(self.unresolve(c));
            }
            if was_resolved || was_running {
                fx.touched.insert(c);
            }
        }
        true
    }

    /// Re-runs successful stages whose lost outputs some consumer still needs, then
    /// resolves stages whose inputs are complete after all (e.g. a fetch failure that
    /// blamed an executor holding none of the producer's outputs).
    pub(super) fn repair(&mut self, fx: &mut Effects) {
        // Consumers first: re-running a consumer makes its producers' outputs needed.
        for i in (0..self.topo.len()).rev() {
            let id = self.topo[i];
            let stage = &self.stages[&id];
            let lost_some = matches!(&stage.state, ExecutionStage::Successful { lost, .. } if !lost.is_empty());
            let needed =
                stage.output_links.iter().any(|c| !matches!(self.stages[c].state, ExecutionStage::Successful { .. }));
            if lost_some && needed {
                self.rerun(id, fx);
            }
        }
        for (&id, stage) in self.stages.iter_mut() {
            if matches!(stage.state, ExecutionStage::Unresolved) && stage.inputs_complete() {
                stage.state = ExecutionStage::Resolved;
                fx.touched.insert(id);
                fx.events.push(GraphEvent::StageResolved(id));
            }
        }
    }

    /// Forgets everything on a lost executor: its running attempts are reset (returned
    /// so the caller kills them), successful partitions of running stages run again,
    /// and successful stages whose outputs lived there re-run those partitions if a
    /// consumer still needs them, rolling consumers back recursively. Returns the
    /// stages that changed and the tasks to kill.
    pub fn reset_stages_on_lost_executor(
        &mut self,
        executor_id: &str,
    ) -> Result<(BTreeSet<usize>, Vec<RunningTaskInfo>), GraphError> {
        let mut fx = Effects::default();
        if self.is_complete() {
            return Ok((BTreeSet::new(), Vec::new()));
        }
        for (&id, stage) in self.stages.iter_mut() {
            match &mut stage.state {
                ExecutionStage::Running { tasks } => {
                    for (partition, slot) in tasks.iter_mut().enumerate() {
                        let Some(task) = slot.as_ref() else { continue };
                        if task.executor_id != executor_id || matches!(task.status, TaskAttemptStatus::Failed { .. }) {
                            continue;
                        }
                        if task.status == TaskAttemptStatus::Running {
                            fx.killed.push(RunningTaskInfo {
                                task_id: task.task_id,
                                stage_id: id,
                                partition,
                                executor_id: executor_id.to_string(),
                            });
                        }
                        *slot = None;
                        fx.touched.insert(id);
                    }
                }
                ExecutionStage::Successful { tasks, lost } => {
                    lost.extend(tasks.iter().enumerate().filter(|(_, t)| t.executor_id == executor_id).map(|(p, _)| p));
                }
                _ => {}
            }
        }
        self.repair(&mut fx);
        Ok((fx.touched, fx.killed))
    }

    /// A reader found output `path` of `map_stage_id`'s partition `map_partition`
    /// unreadable, but its report no longer counts as a fetch failure (its attempt
    /// was superseded, typically by the rollback another reader's fetch failure
    /// caused). What it found is still true: if that output is still the one the
    /// graph holds, everything the stage keeps on `executor_id` is marked lost and
    /// recomputed once needed, as with a counted fetch failure, so the next attempt of
    /// the readers does not trip over it again. A report about an output already
    /// replaced changes nothing. Returns the stages that changed and tasks to kill.
    pub fn report_unreadable_output(
        &mut self,
        map_stage_id: usize,
        map_partition: usize,
        path: &str,
        executor_id: &str,
    ) -> Result<(BTreeSet<usize>, Vec<RunningTaskInfo>), GraphError> {
        let running_job = self.status == JobStatus::Running;
        let stage = self.stage_mut(map_stage_id)?;
        if map_partition >= stage.partitions {
            return Err(GraphError::UnknownPartition { stage: map_stage_id, partition: map_partition });
        }
        let mut fx = Effects::default();
        let holds = |t: &TaskInfo| t.executor_id == executor_id && t.locations().iter().any(|l| l.path == path);
        match &mut stage.state {
            ExecutionStage::Successful { tasks, lost } if running_job && holds(&tasks[map_partition]) => {
                lost.extend(tasks.iter().enumerate().filter(|(_, t)| t.executor_id == executor_id).map(|(i, _)| i));
                self.repair(&mut fx);
            }
            // Re-running some partitions already: its consumers wait for it anyway, so
            // the suspect successful ones simply join the re-run.
            ExecutionStage::Running { tasks } if running_job && tasks[map_partition].as_ref().is_some_and(holds) => {
                for slot in tasks.iter_mut() {
                    if slot.as_ref().is_some_and(|t| {
                        t.executor_id == executor_id && matches!(t.status, TaskAttemptStatus::Successful { .. })
                    }) {
                        *slot = None;
                    }
                }
                fx.touched.insert(map_stage_id);
            }
            _ => {}
        }
        Ok((fx.touched, fx.killed))
    }
}
