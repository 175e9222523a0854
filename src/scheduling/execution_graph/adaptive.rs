//! Adaptive re-planning in the graph: a stage whose inputs are all complete, and
//! that has never handed out a task, may be given a new number of tasks (the
//! fault-tolerant scheduler coalesces tiny partitions, `scheduling::adaptive`); and a
//! stage that never ran may be taken into its consumer, which never ran either (a
//! join whose build side turned out small broadcasts it and does its probe stage's
//! work, `plan::probe_join`). Once a task of a stage has run, its count and inputs
//! are fixed: a rollback re-runs the same tasks.

use super::{ExecutionGraph, ExecutionStage, GraphError, Stage};

impl Stage {
    /// Resolved, reads other stages and has never run a task: its task count may
    /// still change.
    fn unstarted_resolved(&self) -> bool {
        matches!(self.state, ExecutionStage::Resolved) && !self.inputs.is_empty() && self.never_ran()
    }

    /// Has never handed out a task (nor been rolled back), so it may still change.
    fn never_ran(&self) -> bool {
        matches!(self.state, ExecutionStage::Unresolved | ExecutionStage::Resolved)
            && self.stage_attempt == 0
            && self.next_attempt.iter().all(|a| *a == 0)
    }
}

impl ExecutionGraph {
    /// The stages whose task count may still change (`Stage::unstarted_resolved`).
    pub fn unstarted_resolved_stages(&self) -> Vec<usize> {
        self.topo.iter().copied().filter(|id| self.stages[id].unstarted_resolved()).collect()
    }

    /// Gives stage `stage_id` `tasks` tasks instead of its partition count; only for a
    /// stage `unstarted_resolved_stages` names.
    pub fn set_task_count(&mut self, stage_id: usize, tasks: usize) -> Result<(), GraphError> {
        if tasks == 0 {
            return Err(GraphError::NoPartitions(stage_id));
        }
        let stage = self.stages.get_mut(&stage_id).ok_or(GraphError::UnknownStage(stage_id))?;
        if !stage.unstarted_resolved() {
            return Err(GraphError::AlreadyStarted(stage_id));
        }
        stage.partitions = tasks;
        stage.task_failures = vec![0; tasks];
        stage.next_attempt = vec![0; tasks];
        Ok(())
    }

    /// Takes stage `probe` into `consumer`, its only consumer: `consumer` reads what
    /// `probe` read, runs `tasks` tasks, and `probe` leaves the graph. Neither may
    /// have run a task.
    pub fn merge_into_consumer(&mut self, probe: usize, consumer: usize, tasks: usize) -> Result<(), GraphError> {
        if tasks == 0 {
            return Err(GraphError::NoPartitions(consumer));
        }
        let merged = self.stages.get(&probe).ok_or(GraphError::UnknownStage(probe))?;
        let into = self.stages.get(&consumer).ok_or(GraphError::UnknownStage(consumer))?;
        if merged.output_links != [consumer] {
            return Err(GraphError::NotAnInput { stage: consumer, input: probe });
        }
        if let Some(started) = [merged, into].into_iter().find(|s| !s.never_ran()) {
            return Err(GraphError::AlreadyStarted(started.stage_id));
        }
        let merged = self.stages.remove(&probe).expect("looked up above");
        for input in merged.inputs.keys() {
            let producer = self.stages.get_mut(input).expect("links were validated");
            for link in producer.output_links.iter_mut().filter(|l| **l == probe) {
                *link = consumer;
            }
        }
        let into = self.stages.get_mut(&consumer).expect("looked up above");
        into.inputs.remove(&probe);
        into.inputs.extend(merged.inputs);
        into.partitions = tasks;
        into.task_failures = vec![0; tasks];
        into.next_attempt = vec![0; tasks];
        into.state = match into.inputs_complete() {
            true => ExecutionStage::Resolved,
            false => ExecutionStage::Unresolved,
        };
        self.topo.retain(|id| *id != probe);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::super::{StageSpec, TaskStatusUpdate, TaskUpdateState};
    use super::*;

    fn spec(stage_id: usize, partitions: usize, inputs: Vec<usize>, output_links: Vec<usize>) -> StageSpec {
        StageSpec { stage_id, partitions, inputs, output_links }
    }

    fn succeed(g: &mut ExecutionGraph, stage: usize, partition: usize, attempt: usize) {
        let state = TaskUpdateState::Successful { path: format!("s{stage}p{partition}") };
        let update = TaskStatusUpdate { stage_id: stage, partition, task_attempt: attempt, state };
        g.update_task_status("w1", vec![update], 4, 4).unwrap();
    }

    /// A consumer of 8 partitions, once its producer is done, runs as 2 tasks; the
    /// job then finishes with those 2, and the count is fixed once a task ran.
    #[test]
    fn a_resolved_stage_that_never_ran_takes_a_new_task_count() {
        let specs = vec![spec(1, 2, vec![], vec![2]), spec(2, 8, vec![1], vec![0]), spec(0, 1, vec![2], vec![])];
        let mut g = ExecutionGraph::new("q", specs).unwrap();
        assert_eq!(g.unstarted_resolved_stages(), Vec::<usize>::new(), "leaves read nothing to size by");
        assert_eq!(g.set_task_count(2, 2), Err(GraphError::AlreadyStarted(2)), "stage 2 is not resolved yet");
        for p in 0..2 {
            let t = g.pop_next_task("w1").unwrap().unwrap();
            assert_eq!((t.stage_id, t.partition), (1, p));
        }
        succeed(&mut g, 1, 0, 0);
        succeed(&mut g, 1, 1, 0);
        assert_eq!(g.unstarted_resolved_stages(), vec![2]);
        g.set_task_count(2, 2).unwrap();
        let tasks: Vec<_> = std::iter::from_fn(|| g.pop_next_task("w1").unwrap()).collect();
        assert_eq!(tasks.iter().map(|t| (t.stage_id, t.partition)).collect::<Vec<_>>(), vec![(2, 0), (2, 1)]);
        assert_eq!(tasks[0].input_locations[&1].len(), 2, "each task reads every producer partition");
        assert_eq!(g.set_task_count(2, 4), Err(GraphError::AlreadyStarted(2)));
        succeed(&mut g, 2, 0, 0);
        succeed(&mut g, 2, 1, 0);
        let root = g.pop_next_task("coordinator").unwrap().unwrap();
        assert_eq!(root.input_locations[&2].len(), 2);
    }

    /// Build stage 1 and stage 2 ran; stage 4 (2's consumer, 3 partitions) is taken
    /// into join stage 3 before either ran: 3 then reads 1 and 2, runs 3 tasks, and
    /// the job finishes without stage 4.
    #[test]
    fn a_stage_that_never_ran_is_taken_into_its_consumer() {
        let specs = vec![
            spec(1, 1, vec![], vec![3]),
            spec(2, 2, vec![], vec![4]),
            spec(4, 3, vec![2], vec![3]),
            spec(3, 4, vec![1, 4], vec![0]),
            spec(0, 1, vec![3], vec![]),
        ];
        let mut g = ExecutionGraph::new("q", specs).unwrap();
        assert_eq!(g.merge_into_consumer(4, 0, 3), Err(GraphError::NotAnInput { stage: 0, input: 4 }));
        for _ in 0..3 {
            g.pop_next_task("w1").unwrap().unwrap();
        }
        succeed(&mut g, 1, 0, 0);
        assert_eq!(g.merge_into_consumer(2, 4, 3), Err(GraphError::AlreadyStarted(2)), "stage 2 ran");
        succeed(&mut g, 2, 0, 0);
        succeed(&mut g, 2, 1, 0);
        g.merge_into_consumer(4, 3, 3).unwrap();
        assert!(g.stage(4).is_none());
        assert_eq!(g.stage(2).unwrap().output_links, vec![3]);
        let tasks: Vec<_> = std::iter::from_fn(|| g.pop_next_task("w1").unwrap()).collect();
        assert_eq!(tasks.iter().map(|t| (t.stage_id, t.partition)).collect::<Vec<_>>(), vec![(3, 0), (3, 1), (3, 2)]);
        assert_eq!(tasks[0].input_locations.keys().copied().collect::<Vec<_>>(), vec![1, 2]);
        assert_eq!(tasks[0].input_locations[&2].len(), 2, "each task reads every partition of stage 2");
        for p in 0..3 {
            succeed(&mut g, 3, p, 0);
        }
        let root = g.pop_next_task("coordinator").unwrap().unwrap();
        assert_eq!(root.input_locations[&3].len(), 3);
    }
}
