//! Makes a single-node physical plan safe to cut, before the fragmenter runs. Called
//! by the query execution on every plan that reads tables.
//!
//! A collect-left join (hash join in `CollectLeft` mode, nested loop join) whose type
//! must remember which build rows matched (LEFT, FULL, LEFT SEMI, LEFT ANTI, LEFT
//! MARK) keeps that bitmap in memory shared by the partitions of one process, and
//! the partition that finishes last emits the rows. Split over tasks, no task is ever
//! last and the rows are lost. Such hash joins become partitioned joins (both sides
//! hash-partitioned, each task owns its keys); null-aware anti joins (`NOT IN`), which
//! need the whole probe side, and such nested loop joins run their probe side in one
//! partition. `EnsureRequirements` then restores the distributions parents expect.

use std::sync::Arc;

use datafusion::common::config::ConfigOptions;
use datafusion::common::JoinType;
use datafusion::error::Result;
use datafusion::physical_optimizer::ensure_requirements::EnsureRequirements;
use datafusion::physical_optimizer::output_requirements::OutputRequirements;
use datafusion::physical_optimizer::PhysicalOptimizerRule;
use datafusion::physical_plan::coalesce_partitions::CoalescePartitionsExec;
use datafusion::physical_plan::joins::{HashJoinExec, NestedLoopJoinExec, PartitionMode};
use datafusion::physical_plan::{ExecutionPlan, ExecutionPlanProperties};

/// Join types whose build-side state must be global.
fn keeps_build_side_state(t: &JoinType) -> bool {
    matches!(t, JoinType::Left | JoinType::Full | JoinType::LeftSemi | JoinType::LeftAnti | JoinType::LeftMark)
}

fn as_<T: 'static>(plan: &Arc<dyn ExecutionPlan>) -> Option<&T> {
    (plan.as_ref() as &dyn std::any::Any).downcast_ref::<T>()
}

fn single_partition(plan: Arc<dyn ExecutionPlan>) -> Arc<dyn ExecutionPlan> {
    if plan.output_partitioning().partition_count() > 1 {
        Arc::new(CoalescePartitionsExec::new(plan))
    } else {
        plan
    }
}

fn strip_coalesce(plan: &Arc<dyn ExecutionPlan>) -> Arc<dyn ExecutionPlan> {
    match as_::<CoalescePartitionsExec>(plan) {
        Some(c) if c.fetch().is_none() => c.input().clone(),
        _ => plan.clone(),
    }
}

/// Rewrites the joins described above; returns whether anything changed.
fn rewrite(plan: Arc<dyn ExecutionPlan>) -> Result<(Arc<dyn ExecutionPlan>, bool)> {
    let mut changed = false;
    let mut children = Vec::new();
    for c in plan.children() {
        let (c, ch) = rewrite(c.clone())?;
        changed |= ch;
        children.push(c);
    }
    #[allow(deprecated)]
    let plan = if changed { plan.with_new_children(children.clone())? } else { plan };
    if let Some(j) = as_::<HashJoinExec>(&plan) {
        if *j.partition_mode() == PartitionMode::CollectLeft && keeps_build_side_state(j.join_type()) {
            let (left, right) = (j.left().clone(), j.right().clone());
            let new = if j.null_aware || j.on().is_empty() {
                j.builder().with_new_children(vec![left, single_partition(right)])?.build_exec()?
            } else {
                j.builder()
                    .with_partition_mode(PartitionMode::Partitioned)
                    .with_new_children(vec![strip_coalesce(&left), right])?
                    .build_exec()?
            };
            return Ok((new, true));
        }
    }
    if let Some(j) = as_::<NestedLoopJoinExec>(&plan) {
        if keeps_build_side_state(j.join_type()) && j.right().output_partitioning().partition_count() > 1 {
            let children = vec![j.left().clone(), single_partition(j.right().clone())];
            #[allow(deprecated)]
            return Ok((plan.clone().with_new_children(children)?, true));
        }
    }
    Ok((plan, changed))
}

/// Prepares `plan` for the fragmenter.
pub fn prepare_for_distribution(
    plan: Arc<dyn ExecutionPlan>,
    config: &ConfigOptions,
) -> Result<Arc<dyn ExecutionPlan>> {
    let (plan, changed) = rewrite(plan)?;
    if changed {
        // The top-level ordering lives only in the root operators; pin it as the
        // optimizer itself does, or restoring distributions may drop a final merge.
        let plan = OutputRequirements::new_add_mode().optimize(plan, config)?;
        let plan = EnsureRequirements::new().optimize(plan, config)?;
        OutputRequirements::new_remove_mode().optimize(plan, config)
    } else {
        Ok(plan)
    }
}
