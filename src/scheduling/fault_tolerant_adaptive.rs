//! Adaptive planning in the fault-tolerant scheduler: when a stage first resolves,
//! its producers' spooled outputs tell how many bytes each of its partitions reads.
//! `scheduling::adaptive` decides the stage's tasks (small neighbours together, a
//! skewed partition of a join's probe side split by its producers); the graph takes
//! the new count, each task is sent its partitions, a split task only its share of
//! the probe side's producers, and consumers learn which partitions each task holds.

use std::collections::HashMap;
use std::sync::Arc;

use datafusion::common::JoinType;
use datafusion::physical_plan::aggregates::{AggregateExec, AggregateMode};
use datafusion::physical_plan::joins::{HashJoinExec, PartitionMode};
use datafusion::physical_plan::ExecutionPlan;

use super::super::adaptive::{self, StageInput, TaskSlice};
use super::{ExecutionStage, FaultTolerantQueryScheduler, TaskDescription};
use crate::plan::fragmenter::{as_, gathers, remote_sources, streams_only, FragmentOutput};
use crate::protocol::{SourceUpdate, TaskId};

/// A stage adaptive planning changed: its tasks, and the input a split task reads
/// only some producers of.
#[derive(Debug, Clone)]
pub(super) struct AdaptedStage {
    slices: Vec<TaskSlice>,
    split_input: Option<usize>,
}

impl FaultTolerantQueryScheduler {
    /// The fragment partitions task `task` of stage `stage` runs: its slice's if the
    /// stage was adapted, else the partition of the same number.
    pub(super) fn fragment_partitions(&self, stage: usize, task: usize) -> Vec<usize> {
        match self.adapted_stages.get(&stage).and_then(|a| a.slices.get(task)) {
            Some(slice) => slice.partitions.clone(),
            None => vec![task],
        }
    }

    /// A split task reads only its producers of the split input.
    pub(super) fn restrict_to_slice(&self, desc: &TaskDescription, updates: &mut [SourceUpdate]) {
        let Some(adapted) = self.adapted_stages.get(&desc.stage_id) else { return };
        let (Some(input), Some(slice)) = (adapted.split_input, adapted.slices.get(desc.partition)) else { return };
        let Some(producers) = &slice.producers else { return };
        for u in updates.iter_mut().filter(|u| u.stage == input) {
            u.tasks.retain(|t| producers.contains(&t.task_id.task));
        }
    }

    /// Plans the stages that have just resolved, before their first task starts.
    /// Each stage is looked at once: a stage rolled back later keeps its tasks.
    pub(super) fn adapt_resolved_stages(&mut self) {
        let Some(policy) = self.limits.adaptive else { return };
        for id in self.graph.unstarted_resolved_stages() {
            if id == 0 || !self.adapted.insert(id) {
                continue;
            }
            let Some((input, split_input)) = self.stage_input(id) else { continue };
            let slots = self.live_workers().len() * self.limits.slots_per_worker;
            let Some((slices, change)) = adaptive::plan_tasks(&policy, &input, slots) else { continue };
            if self.graph.set_task_count(id, slices.len()).is_err() {
                continue;
            }
            if let Some(s) = &mut self.stragglers {
                s.set_partitions(id, slices.len());
            }
            tracing::debug!(query = %self.settings.query_id, stage = id, "{change}");
            self.stages[&id].adapt(slices.len(), change.to_string());
            self.adapted_stages.insert(id, AdaptedStage { slices, split_input });
        }
    }

    /// What stage `id`'s producers wrote for it, and the input it may be split by;
    /// None when it may not be adapted: a single partition, an input that keeps
    /// partitions apart (passthrough, for a merge), no partitioned input, or a
    /// producer task that did not report its partitions' bytes.
    fn stage_input(&self, id: usize) -> Option<(StageInput, Option<usize>)> {
        let fragment = &self.stages.get(&id)?.fragment;
        let n = fragment.partitions;
        if n < 2 {
            return None;
        }
        let mut partition_bytes = vec![0u64; n];
        let mut partitioned = false;
        let mut broadcast = false;
        let probe = probe_input(&fragment.plan).filter(|_| !fragment.has_scan);
        let mut splittable = None;
        for input in &fragment.inputs {
            let producer = self.stages.get(input)?;
            match producer.fragment.output {
                FragmentOutput::Repartition { partitions } if partitions == n => partitioned = true,
                // Every task reads all of it, however many there are.
                FragmentOutput::Broadcast => {
                    broadcast = true;
                    continue;
                }
                _ => return None,
            }
            let by_producer = self.partition_bytes_by_producer(*input, n)?;
            for written in &by_producer {
                for (b, w) in partition_bytes.iter_mut().zip(written) {
                    *b += w;
                }
            }
            if probe == Some(*input) {
                splittable = Some(by_producer);
            }
        }
        // A task past the count its broadcast producers wrote buffers for would
        // find none: a stage with a broadcast input is only coalesced.
        let splittable = splittable.filter(|_| !broadcast);
        let split_input = splittable.as_ref().and(probe);
        partitioned.then_some((StageInput { partition_bytes, splittable }, split_input))
    }

    /// What each successful task of stage `input` wrote to each of `n` partitions.
    fn partition_bytes_by_producer(&self, input: usize, n: usize) -> Option<Vec<Vec<u64>>> {
        let producer = self.stages.get(&input)?;
        let ExecutionStage::Successful { tasks, .. } = &self.graph.stage(input)?.state else { return None };
        let reports: HashMap<TaskId, Vec<u64>> =
            producer.tasks().iter().map(|t| (t.task_id().clone(), t.status().stats.output_partition_bytes)).collect();
        let written = tasks.iter().enumerate().map(|(p, attempt)| {
            let task_id = TaskId::new(&self.settings.query_id, input, p, attempt.task_id);
            reports.get(&task_id).filter(|w| w.len() == n).cloned()
        });
        written.collect()
    }
}

/// The stage a fragment's partitions may be split by: the probe side of its one
/// partitioned hash join, when the join never emits a build row on its own (so a
/// task with all of a partition's build rows and some of its probe rows answers for
/// those) and everything above it handles rows one at a time or aggregates them
/// partially. A final aggregation or a sort needs all of a partition in one task.
fn probe_input(plan: &Arc<dyn ExecutionPlan>) -> Option<usize> {
    if let Some(join) = as_::<HashJoinExec>(plan) {
        let probe_preserving =
            matches!(join.join_type(), JoinType::Inner | JoinType::Right | JoinType::RightSemi | JoinType::RightAnti);
        let partitioned = *join.partition_mode() == PartitionMode::Partitioned;
        if !probe_preserving || !partitioned || !streams_only(join.left()) || !streams_only(join.right()) {
            return None;
        }
        let (mut build, mut probe) = (Default::default(), std::collections::BTreeSet::new());
        remote_sources(join.left(), &mut build);
        remote_sources(join.right(), &mut probe);
        let only = probe.first().copied().filter(|_| probe.len() == 1)?;
        return (!build.contains(&only)).then_some(only);
    }
    let partial = as_::<AggregateExec>(plan).is_some_and(|a| *a.mode() == AggregateMode::Partial);
    let children = plan.children();
    let passes_rows = partial || !gathers(plan);
    match children.as_slice() {
        [child] if passes_rows => probe_input(child),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exchange::remote_source::{ExchangeMode, RemoteSourceExec};
    use datafusion::arrow::datatypes::{DataType, Field, Schema};
    use datafusion::common::NullEquality;
    use datafusion::physical_expr::expressions::Column;
    use datafusion::physical_plan::aggregates::PhysicalGroupBy;
    use datafusion::physical_plan::sorts::sort::SortExec;

    fn join(join_type: JoinType, mode: PartitionMode) -> Arc<dyn ExecutionPlan> {
        let schema = Arc::new(Schema::new(vec![Field::new("k", DataType::Int64, true)]));
        let side = |stage| Arc::new(RemoteSourceExec::new(stage, ExchangeMode::Repartition, 4, schema.clone()));
        let on = vec![(Arc::new(Column::new("k", 0)) as _, Arc::new(Column::new("k", 0)) as _)];
        let join = HashJoinExec::try_new(
            side(1),
            side(2),
            on,
            None,
            &join_type,
            None,
            mode,
            NullEquality::NullEqualsNothing,
            false,
        );
        Arc::new(join.unwrap())
    }

    fn aggregate(mode: AggregateMode, input: Arc<dyn ExecutionPlan>) -> Arc<dyn ExecutionPlan> {
        let group = PhysicalGroupBy::new_single(vec![(Arc::new(Column::new("k", 0)) as _, "k".to_string())]);
        let schema = input.schema();
        Arc::new(AggregateExec::try_new(mode, group, vec![], vec![], input, schema).unwrap())
    }

    /// The probe side (stage 2) may be split under joins that never emit a build
    /// row alone, with a partial aggregation above; not under a left join, a final
    /// aggregation or a sort, nor for a join that collects its build side.
    #[test]
    fn only_a_partitioned_probe_preserving_join_is_split_by_its_probe_side() {
        let inner = join(JoinType::Inner, PartitionMode::Partitioned);
        assert_eq!(probe_input(&inner), Some(2));
        assert_eq!(probe_input(&join(JoinType::RightAnti, PartitionMode::Partitioned)), Some(2));
        assert_eq!(probe_input(&aggregate(AggregateMode::Partial, inner.clone())), Some(2));
        assert_eq!(probe_input(&join(JoinType::Left, PartitionMode::Partitioned)), None);
        assert_eq!(probe_input(&join(JoinType::LeftSemi, PartitionMode::Partitioned)), None);
        assert_eq!(probe_input(&join(JoinType::Inner, PartitionMode::CollectLeft)), None);
        assert_eq!(probe_input(&aggregate(AggregateMode::FinalPartitioned, inner.clone())), None);
        let key = datafusion::physical_expr::PhysicalSortExpr::new_default(Arc::new(Column::new("k", 0)));
        let ordering = datafusion::physical_expr::LexOrdering::new([key]).expect("one key");
        let sort = SortExec::new(ordering, inner).with_preserve_partitioning(true);
        assert_eq!(probe_input(&(Arc::new(sort) as Arc<dyn ExecutionPlan>)), None);
    }
}
