//! The partitioned hash join a fragment ends in, seen from its probe side: the one
//! stage whose rows it probes with, and what may change about it once the stages
//! feeding it have run. The fault-tolerant scheduler's adaptive planning asks it
//! two things: may a task take only some producers of the probe stage (a skewed
//! partition split, `probe_stage`), and, when the build side turned out small, what
//! the fragment becomes with the probe stage's work pulled into it and the build
//! side read whole by every task (`broadcast_build_side`).
//!
//! Both hold only for a join that never emits a build row on its own (inner, right,
//! right semi, right anti: a task with all the build rows of its keys and some of
//! the probe rows answers for exactly those), below nothing that needs all of a
//! partition in one task (a final aggregation, a sort, another join).

use std::collections::BTreeSet;
use std::sync::Arc;

use datafusion::common::JoinType;
use datafusion::error::Result;
use datafusion::physical_plan::aggregates::{AggregateExec, AggregateMode};
use datafusion::physical_plan::coalesce_partitions::CoalescePartitionsExec;
use datafusion::physical_plan::joins::{HashJoinExec, PartitionMode};
use datafusion::physical_plan::repartition::RepartitionExec;
use datafusion::physical_plan::{ExecutionPlan, ExecutionPlanProperties, Partitioning};

use super::fragmenter::{as_, gathers, remote_sources, replace_children, streams_only};
use crate::exchange::remote_source::RemoteSourceExec;

/// The stage a fragment's partitions may be split by: the probe side of the
/// partitioned join it ends in (see the module doc).
pub fn probe_stage(plan: &Arc<dyn ExecutionPlan>) -> Option<usize> {
    probe_join(plan).map(|(_, probe)| probe)
}

/// The join and its probe stage, through nodes that pass rows on one at a time or
/// aggregate them partially.
fn probe_join(plan: &Arc<dyn ExecutionPlan>) -> Option<(&HashJoinExec, usize)> {
    if let Some(join) = as_::<HashJoinExec>(plan) {
        let probe_preserving =
            matches!(join.join_type(), JoinType::Inner | JoinType::Right | JoinType::RightSemi | JoinType::RightAnti);
        let partitioned = *join.partition_mode() == PartitionMode::Partitioned;
        if !probe_preserving || !partitioned || !streams_only(join.left()) || !streams_only(join.right()) {
            return None;
        }
        let (mut build, mut probe) = (BTreeSet::new(), BTreeSet::new());
        remote_sources(join.left(), &mut build);
        remote_sources(join.right(), &mut probe);
        let only = probe.first().copied().filter(|_| probe.len() == 1)?;
        return (!build.contains(&only)).then_some((join, only));
    }
    let partial = as_::<AggregateExec>(plan).is_some_and(|a| *a.mode() == AggregateMode::Partial);
    match plan.children().as_slice() {
        [child] if partial || !gathers(plan) => probe_join(child),
        _ => None,
    }
}

/// The stages a fragment's join reads its build side from, when it ends in a join
/// `probe_stage` names.
pub fn build_stages(plan: &Arc<dyn ExecutionPlan>) -> BTreeSet<usize> {
    let mut build = BTreeSet::new();
    if let Some((join, _)) = probe_join(plan) {
        remote_sources(join.left(), &mut build);
    }
    build
}

/// `join_plan` (a fragment ending in a partitioned join whose probe side is stage
/// `probe`) with that stage's work done in place: the remote source of `probe` is
/// replaced by what `probe_plan` (a fragment ending in the `RepartitionExec` cut
/// for this join) repartitions, and the join collects its whole build side in each
/// task. Its tasks then run the probe stage's partitions, and the probe side's
/// rows never cross an exchange. None when the plans are not of that shape, or the
/// result would not run the probe stage's partitions.
pub fn broadcast_build_side(
    join_plan: &Arc<dyn ExecutionPlan>,
    probe: usize,
    probe_plan: &Arc<dyn ExecutionPlan>,
) -> Result<Option<Arc<dyn ExecutionPlan>>> {
    if probe_stage(join_plan) != Some(probe) {
        return Ok(None);
    }
    let Some(rep) = as_::<RepartitionExec>(probe_plan) else { return Ok(None) };
    if !matches!(rep.partitioning(), Partitioning::Hash(..)) {
        return Ok(None);
    }
    let probe_rows = rep.input().clone();
    let plan = rewrite_join(join_plan, &|join| {
        let right = replace_remote_source(join.right(), probe, &probe_rows)?;
        let left = match join.left().output_partitioning().partition_count() {
            1 => join.left().clone(),
            _ => Arc::new(CoalescePartitionsExec::new(join.left().clone())),
        };
        join.builder()
            .with_partition_mode(PartitionMode::CollectLeft)
            .with_new_children(vec![left, right])?
            .build_exec()
    })?;
    // A task runs the fragment's partitions below the repartition cut for its
    // consumer, as the probe stage's tasks ran theirs.
    let task_plan = |p: &Arc<dyn ExecutionPlan>| match as_::<RepartitionExec>(p) {
        Some(r) => r.input().output_partitioning().partition_count(),
        None => p.output_partitioning().partition_count(),
    };
    Ok((task_plan(&plan) == probe_rows.output_partitioning().partition_count()).then_some(plan))
}

/// `plan` with its probe join replaced by `new`, the nodes above rebuilt.
fn rewrite_join(
    plan: &Arc<dyn ExecutionPlan>,
    new: &dyn Fn(&HashJoinExec) -> Result<Arc<dyn ExecutionPlan>>,
) -> Result<Arc<dyn ExecutionPlan>> {
    if let Some(join) = as_::<HashJoinExec>(plan) {
        return new(join);
    }
    let children = plan.children().into_iter().map(|c| rewrite_join(c, new)).collect::<Result<Vec<_>>>()?;
    replace_children(plan, children)
}

/// `plan` with the remote source of stage `stage` replaced by `with`.
fn replace_remote_source(
    plan: &Arc<dyn ExecutionPlan>,
    stage: usize,
    with: &Arc<dyn ExecutionPlan>,
) -> Result<Arc<dyn ExecutionPlan>> {
    if as_::<RemoteSourceExec>(plan).is_some_and(|r| r.stage() == stage) {
        return Ok(with.clone());
    }
    if plan.children().is_empty() {
        return Ok(plan.clone());
    }
    let children =
        plan.children().into_iter().map(|c| replace_remote_source(c, stage, with)).collect::<Result<Vec<_>>>()?;
    replace_children(plan, children)
}

#[cfg(test)]
#[path = "probe_join_tests.rs"]
mod tests;
