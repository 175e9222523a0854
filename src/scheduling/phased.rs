//! `PhasedExecutionSchedule` and `AllAtOnceExecutionSchedule`: which stages of a query
//! may be scheduled now. Pure state, driven by stage-state events from the
//! `PipelinedQueryScheduler`.
//!
//! The phased schedule keeps Trino's dependency DAG (petgraph): an edge `a -> b` means
//! `b` may not start until `a` is done producing (FLUSHING or FINISHED), or until `a`'s
//! output buffer is full, because then `a` can only go on once its consumers run.
//! Edges come from joins: a partitioned join's build-side stages must be done before
//! its probe-side source stages start; a broadcast join's stage waits for its build
//! stage (the stages feeding its probe side do not: see `plan::fragmenter`). Aggregations and unions add no edges. A stage leaves the graph when it is
//! done producing (`remove_completed_stages`), which may make its dependents ready.

use std::collections::{BTreeMap, BTreeSet};

use petgraph::algo::is_cyclic_directed;
use petgraph::stable_graph::{NodeIndex, StableDiGraph};
use petgraph::Direction;

use super::state_machine::StageState;

pub use crate::plan::DependencyKind;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ScheduleError {
    #[error("stage dependency graph has a cycle")]
    Cycle,
    #[error("unknown stage {0} in a dependency")]
    UnknownStage(usize),
}

/// Which stages to schedule: the contract both policies share.
pub trait ExecutionSchedule: Send + Sync {
    /// Applies stage states; returns the stages ready now and not yet returned.
    fn get_stages_to_schedule(
        &mut self,
        states: &BTreeMap<usize, StageState>,
        full_buffers: &BTreeSet<usize>,
    ) -> Vec<usize>;
    /// Every stage has been returned.
    fn is_finished(&self) -> bool;
}

#[derive(Debug)]
pub struct PhasedExecutionSchedule {
    graph: StableDiGraph<usize, DependencyKind>,
    nodes: BTreeMap<usize, NodeIndex>,
    /// Stages already handed out for scheduling.
    returned: BTreeSet<usize>,
    all: BTreeSet<usize>,
}

impl PhasedExecutionSchedule {
    pub fn new(stages: &[usize], dependencies: &[(usize, usize, DependencyKind)]) -> Result<Self, ScheduleError> {
        let mut graph = StableDiGraph::new();
        let mut nodes = BTreeMap::new();
        for &s in stages {
            nodes.entry(s).or_insert_with(|| graph.add_node(s));
        }
        for &(from, to, kind) in dependencies {
            let a = *nodes.get(&from).ok_or(ScheduleError::UnknownStage(from))?;
            let b = *nodes.get(&to).ok_or(ScheduleError::UnknownStage(to))?;
            if a != b && graph.find_edge(a, b).is_none() {
                graph.add_edge(a, b, kind);
            }
        }
        if is_cyclic_directed(&graph) {
            return Err(ScheduleError::Cycle);
        }
        Ok(PhasedExecutionSchedule { graph, nodes, returned: BTreeSet::new(), all: stages.iter().copied().collect() })
    }

    /// Removes stages that are done producing (or ended); returns the stages that
    /// became unblocked by it.
    pub fn remove_completed_stages(&mut self, states: &BTreeMap<usize, StageState>) -> Vec<usize> {
        let completed: Vec<usize> = self
            .nodes
            .keys()
            .copied()
            .filter(|s| states.get(s).map(|st| st.is_done_producing() || is_ended(*st)).unwrap_or(false))
            .collect();
        let mut unblocked = BTreeSet::new();
        for s in completed {
            let idx = self.nodes.remove(&s).expect("known stage");
            let dependents: Vec<NodeIndex> = self.graph.neighbors_directed(idx, Direction::Outgoing).collect();
            self.graph.remove_node(idx);
            for d in dependents {
                if self.graph.neighbors_directed(d, Direction::Incoming).next().is_none() {
                    unblocked.insert(self.graph[d]);
                }
            }
        }
        unblocked.into_iter().collect()
    }

    /// Drops the outgoing edges of stages whose output buffer is full: their consumers
    /// must run or the producer never finishes. Returns the stages that became ready.
    pub fn unblock_stages_with_full_output_buffer(&mut self, full: &BTreeSet<usize>) -> Vec<usize> {
        let mut unblocked = BTreeSet::new();
        for s in full {
            let Some(&idx) = self.nodes.get(s) else { continue };
            let edges: Vec<_> =
                self.graph.edges_directed(idx, Direction::Outgoing).map(|e| petgraph::visit::EdgeRef::id(&e)).collect();
            for e in edges {
                let (_, target) = self.graph.edge_endpoints(e).expect("edge");
                self.graph.remove_edge(e);
                if self.graph.neighbors_directed(target, Direction::Incoming).next().is_none() {
                    unblocked.insert(self.graph[target]);
                }
            }
        }
        unblocked.into_iter().collect()
    }

    /// Stages with nothing to wait for, not yet returned.
    fn ready(&self) -> Vec<usize> {
        let mut ready: Vec<usize> = self
            .nodes
            .iter()
            .filter(|(s, idx)| {
                !self.returned.contains(s) && self.graph.neighbors_directed(**idx, Direction::Incoming).next().is_none()
            })
            .map(|(s, _)| *s)
            .collect();
        ready.sort_unstable();
        ready
    }

    /// The stages that `stage` still waits for.
    #[cfg(test)]
    pub fn blockers(&self, stage: usize) -> Vec<usize> {
        let Some(&idx) = self.nodes.get(&stage) else { return vec![] };
        let mut v: Vec<usize> =
            self.graph.neighbors_directed(idx, Direction::Incoming).map(|n| self.graph[n]).collect();
        v.sort_unstable();
        v
    }
}

fn is_ended(s: StageState) -> bool {
    matches!(s, StageState::Canceled | StageState::Aborted | StageState::Failed)
}

impl ExecutionSchedule for PhasedExecutionSchedule {
    fn get_stages_to_schedule(
        &mut self,
        states: &BTreeMap<usize, StageState>,
        full_buffers: &BTreeSet<usize>,
    ) -> Vec<usize> {
        self.remove_completed_stages(states);
        self.unblock_stages_with_full_output_buffer(full_buffers);
        let mut ready = self.ready();
        // A stage may complete before it is returned only if it was returned; stages
        // removed as completed were returned already.
        ready.retain(|s| self.all.contains(s));
        self.returned.extend(ready.iter().copied());
        ready
    }

    fn is_finished(&self) -> bool {
        self.returned.len() == self.all.len()
    }
}

/// Every stage at once: the alternative policy (`execution_policy=all-at-once`).
#[derive(Debug)]
pub struct AllAtOnceExecutionSchedule {
    pending: Vec<usize>,
}

impl AllAtOnceExecutionSchedule {
    pub fn new(stages: &[usize]) -> Self {
        AllAtOnceExecutionSchedule { pending: stages.to_vec() }
    }
}

impl ExecutionSchedule for AllAtOnceExecutionSchedule {
    fn get_stages_to_schedule(&mut self, _states: &BTreeMap<usize, StageState>, _full: &BTreeSet<usize>) -> Vec<usize> {
        std::mem::take(&mut self.pending)
    }

    fn is_finished(&self) -> bool {
        self.pending.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::DependencyKind::*;
    use super::*;
    use StageState::*;

    fn states(pairs: &[(usize, StageState)]) -> BTreeMap<usize, StageState> {
        pairs.iter().copied().collect()
    }

    fn none() -> BTreeSet<usize> {
        BTreeSet::new()
    }

    #[test]
    fn partitioned_join_probe_waits_for_build_flushing() {
        // 1 = join stage, 2 = build source, 3 = probe source.
        let mut s = PhasedExecutionSchedule::new(&[1, 2, 3], &[(2, 3, PartitionedJoinBuild)]).unwrap();
        assert_eq!(s.get_stages_to_schedule(&states(&[]), &none()), vec![1, 2]);
        assert!(s.get_stages_to_schedule(&states(&[(2, Running)]), &none()).is_empty());
        assert_eq!(s.blockers(3), vec![2]);
        assert_eq!(s.get_stages_to_schedule(&states(&[(2, Flushing)]), &none()), vec![3]);
        assert!(s.is_finished());
    }

    #[test]
    fn broadcast_join_waits_for_build_done_or_full_buffer() {
        let mut s = PhasedExecutionSchedule::new(&[1, 2], &[(2, 1, BroadcastJoinBuild)]).unwrap();
        assert_eq!(s.get_stages_to_schedule(&states(&[]), &none()), vec![2]);
        assert!(s.get_stages_to_schedule(&states(&[(2, Running)]), &none()).is_empty());
        let full: BTreeSet<usize> = [2].into_iter().collect();
        assert_eq!(s.get_stages_to_schedule(&states(&[(2, Running)]), &full), vec![1]);
        // Or, in another run, the build finishing unblocks it.
        let mut s = PhasedExecutionSchedule::new(&[1, 2], &[(2, 1, BroadcastJoinBuild)]).unwrap();
        s.get_stages_to_schedule(&states(&[]), &none());
        assert_eq!(s.get_stages_to_schedule(&states(&[(2, Finished)]), &none()), vec![1]);
    }

    #[test]
    fn aggregation_and_union_need_no_ordering() {
        let mut s = PhasedExecutionSchedule::new(&[0, 1, 2, 3], &[]).unwrap();
        assert_eq!(s.get_stages_to_schedule(&states(&[]), &none()), vec![0, 1, 2, 3]);
        assert!(s.is_finished());
    }

    #[test]
    fn a_build_stage_aborted_before_it_started_releases_its_dependents() {
        let mut s = PhasedExecutionSchedule::new(&[1, 2, 3], &[(2, 3, PartitionedJoinBuild)]).unwrap();
        s.get_stages_to_schedule(&states(&[]), &none());
        assert_eq!(s.get_stages_to_schedule(&states(&[(2, Aborted)]), &none()), vec![3]);
    }

    #[test]
    fn stage_with_broadcast_and_partitioned_join_waits_for_both_builds() {
        // Stage 1 holds a broadcast join (build 4) and a partitioned join whose build
        // source is 2 and probe source 3. Probe 3 waits for 2; stage 1 waits for 4.
        let deps = [(2, 3, PartitionedJoinBuild), (4, 1, BroadcastJoinBuild)];
        let mut s = PhasedExecutionSchedule::new(&[1, 2, 3, 4], &deps).unwrap();
        assert_eq!(s.get_stages_to_schedule(&states(&[]), &none()), vec![2, 4]);
        assert_eq!(s.get_stages_to_schedule(&states(&[(2, Flushing), (4, Running)]), &none()), vec![3]);
        assert_eq!(s.get_stages_to_schedule(&states(&[(2, Flushing), (4, Finished)]), &none()), vec![1]);
    }

    #[test]
    fn broadcast_build_that_is_a_partitioned_join() {
        // Source stage 1 broadcasts-joins with build stage 2, which is itself a
        // partitioned join of build 3 and probe 4.
        let deps = [(2, 1, BroadcastJoinBuild), (3, 4, PartitionedJoinBuild)];
        let mut s = PhasedExecutionSchedule::new(&[1, 2, 3, 4], &deps).unwrap();
        assert_eq!(s.get_stages_to_schedule(&states(&[]), &none()), vec![2, 3]);
        assert_eq!(s.get_stages_to_schedule(&states(&[(3, Finished)]), &none()), vec![4]);
        assert!(s.get_stages_to_schedule(&states(&[(3, Finished), (4, Flushing)]), &none()).is_empty());
        assert_eq!(s.get_stages_to_schedule(&states(&[(3, Finished), (2, Flushing)]), &none()), vec![1]);
    }

    #[test]
    fn deep_chain_of_twenty_stages_runs_in_order() {
        let stages: Vec<usize> = (0..20).collect();
        let deps: Vec<_> = (0..19).map(|i| (i, i + 1, PartitionedJoinBuild)).collect();
        let mut s = PhasedExecutionSchedule::new(&stages, &deps).unwrap();
        let mut st = BTreeMap::new();
        for i in 0..20 {
            assert_eq!(s.get_stages_to_schedule(&st, &none()), vec![i]);
            st.insert(i, Flushing);
        }
        assert!(s.is_finished());
    }

    #[test]
    fn cycles_are_rejected() {
        let deps = [(1, 2, PartitionedJoinBuild), (2, 1, PartitionedJoinBuild)];
        assert_eq!(PhasedExecutionSchedule::new(&[1, 2], &deps).unwrap_err(), ScheduleError::Cycle);
        assert_eq!(
            PhasedExecutionSchedule::new(&[1], &[(1, 9, BroadcastJoinBuild)]).unwrap_err(),
            ScheduleError::UnknownStage(9)
        );
    }

    #[test]
    fn all_at_once_returns_everything_immediately() {
        let mut s = AllAtOnceExecutionSchedule::new(&[3, 1, 2]);
        assert_eq!(s.get_stages_to_schedule(&BTreeMap::new(), &none()), vec![3, 1, 2]);
        assert!(s.is_finished());
        assert!(s.get_stages_to_schedule(&BTreeMap::new(), &none()).is_empty());
    }
}
