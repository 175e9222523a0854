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
//! Then a collect-left join whose probe side arrives hash-partitioned on its keys
//! becomes a partitioned join (see `partition_by_probe`).

use std::sync::Arc;

use datafusion::common::config::ConfigOptions;
use datafusion::common::JoinType;
use datafusion::error::Result;
use datafusion::physical_optimizer::ensure_requirements::EnsureRequirements;
use datafusion::physical_optimizer::output_requirements::OutputRequirements;
use datafusion::physical_optimizer::PhysicalOptimizerRule;
use datafusion::physical_plan::coalesce_partitions::CoalescePartitionsExec;
use datafusion::physical_plan::joins::{HashJoinExec, NestedLoopJoinExec, PartitionMode};
use datafusion::physical_plan::repartition::RepartitionExec;
use datafusion::physical_plan::{ExecutionPlan, ExecutionPlanProperties, Partitioning};

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

/// One node's replacement, or None to keep it.
type NodeRewrite = dyn Fn(&Arc<dyn ExecutionPlan>) -> Result<Option<Arc<dyn ExecutionPlan>>>;

/// Applies `node` bottom-up, to each node once its children are done; returns whether
/// anything changed.
fn rewrite(plan: Arc<dyn ExecutionPlan>, node: &NodeRewrite) -> Result<(Arc<dyn ExecutionPlan>, bool)> {
    let mut changed = false;
    let mut children = Vec::new();
    for c in plan.children() {
        let (c, ch) = rewrite(c.clone(), node)?;
        changed |= ch;
        children.push(c);
    }
    #[allow(deprecated)]
    let plan = if changed { plan.with_new_children(children)? } else { plan };
    match node(&plan)? {
        Some(new) => Ok((new, true)),
        None => Ok((plan, changed)),
    }
}

/// The joins described at the top of this module.
fn keep_build_state_whole(plan: &Arc<dyn ExecutionPlan>) -> Result<Option<Arc<dyn ExecutionPlan>>> {
    if let Some(j) = as_::<HashJoinExec>(plan) {
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
            return Ok(Some(new));
        }
    }
    if let Some(j) = as_::<NestedLoopJoinExec>(plan) {
        if keeps_build_side_state(j.join_type()) && j.right().output_partitioning().partition_count() > 1 {
            let children = vec![j.left().clone(), single_partition(j.right().clone())];
            #[allow(deprecated)]
            return Ok(Some(plan.clone().with_new_children(children)?));
        }
    }
    Ok(None)
}

/// A collect-left join whose probe side already arrives hash-partitioned on its join
/// keys becomes a partitioned join: its build side is repartitioned once on its keys,
/// instead of broadcast to, and built by, every task. DataFusion chooses collect-left
/// from the build side's estimated size alone (under `join_max_broadcast_table_size`),
/// which is right in one process; across processes a broadcast costs a copy and a
/// hash table per task, and a repartitioned probe side costs nothing more here.
/// TPC-H q21's filtered `lineitem`, estimated at a fifth of its 3.8M rows at sf1, was
/// sent whole to every task. Build sides that only scan a small table stay as they
/// are: every task scans those itself (see the fragmenter).
fn partition_by_probe(plan: &Arc<dyn ExecutionPlan>) -> Result<Option<Arc<dyn ExecutionPlan>>> {
    let Some(j) = as_::<HashJoinExec>(plan) else { return Ok(None) };
    if *j.partition_mode() != PartitionMode::CollectLeft || j.null_aware || j.on().is_empty() {
        return Ok(None);
    }
    let Partitioning::Hash(exprs, partitions) = j.right().output_partitioning() else { return Ok(None) };
    let probe_keys: Vec<_> = j.on().iter().map(|(_, r)| r.clone()).collect();
    let same = exprs.len() == probe_keys.len() && exprs.iter().zip(&probe_keys).all(|(a, b)| a.eq(b));
    if !same || *partitions <= 1 || is_small_build(j.left()) {
        return Ok(None);
    }
    let build_keys = j.on().iter().map(|(l, _)| l.clone()).collect();
    let build = RepartitionExec::try_new(strip_coalesce(j.left()), Partitioning::Hash(build_keys, *partitions))?;
    let join = j
        .builder()
        .with_partition_mode(PartitionMode::Partitioned)
        .with_new_children(vec![Arc::new(build), j.right().clone()])?
        .build_exec()?;
    Ok(Some(join))
}

/// A build side estimated small enough to send to every task: at most the rows of a
/// table every task may scan itself (the fragmenter's limit).
fn is_small_build(plan: &Arc<dyn ExecutionPlan>) -> bool {
    super::fragmenter::estimated_rows(plan).is_some_and(|rows| rows <= super::fragmenter::INLINE_BUILD_MAX_ROWS)
}

/// Prepares `plan` for the fragmenter.
pub fn prepare_for_distribution(
    plan: Arc<dyn ExecutionPlan>,
    config: &ConfigOptions,
) -> Result<Arc<dyn ExecutionPlan>> {
    let (plan, changed) = rewrite(plan, &keep_build_state_whole)?;
    let plan = if changed { restore_distributions(plan, config)? } else { plan };
    // Only now do the joins made partitioned above show their probe sides' partitioning.
    let (plan, changed) = rewrite(plan, &partition_by_probe)?;
    let plan = if changed { restore_distributions(plan, config)? } else { plan };
    // Restoring distributions takes away every gathering it did not ask for, the
    // probe sides gathered above with them: a null-aware anti join (`NOT IN`) then
    // ran in several tasks, each over part of the probe side, and answered no rows.
    Ok(rewrite(plan, &probe_side_whole)?.0)
}

/// A collect-left join that keeps build-side state and cannot be partitioned
/// (`keep_build_state_whole`) with its probe side in one partition, so that one task
/// sees every probe row.
fn probe_side_whole(plan: &Arc<dyn ExecutionPlan>) -> Result<Option<Arc<dyn ExecutionPlan>>> {
    let whole = |right: &Arc<dyn ExecutionPlan>| right.output_partitioning().partition_count() > 1;
    if let Some(j) = as_::<HashJoinExec>(plan) {
        let unpartitionable = j.null_aware || j.on().is_empty();
        if *j.partition_mode() == PartitionMode::CollectLeft
            && keeps_build_side_state(j.join_type())
            && unpartitionable
            && whole(j.right())
        {
            let children = vec![j.left().clone(), single_partition(j.right().clone())];
            return Ok(Some(j.builder().with_new_children(children)?.build_exec()?));
        }
    }
    if let Some(j) = as_::<NestedLoopJoinExec>(plan) {
        if keeps_build_side_state(j.join_type()) && whole(j.right()) {
            let children = vec![j.left().clone(), single_partition(j.right().clone())];
            #[allow(deprecated)]
            return Ok(Some(plan.clone().with_new_children(children)?));
        }
    }
    Ok(None)
}

fn restore_distributions(plan: Arc<dyn ExecutionPlan>, config: &ConfigOptions) -> Result<Arc<dyn ExecutionPlan>> {
    // The top-level ordering lives only in the root operators; pin it as the optimizer
    // itself does, or restoring distributions may drop a final merge.
    let plan = OutputRequirements::new_add_mode().optimize(plan, config)?;
    let plan = EnsureRequirements::new().optimize(plan, config)?;
    OutputRequirements::new_remove_mode().optimize(plan, config)
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::arrow::array::Int64Array;
    use datafusion::arrow::datatypes::{DataType, Field, Schema};
    use datafusion::arrow::record_batch::RecordBatch;
    use datafusion::datasource::MemTable;
    use datafusion::prelude::{SessionConfig, SessionContext};

    /// Each join that keeps its build side whole, in a plan made ready: the probe
    /// sides' partition counts.
    fn probe_partitions(plan: &Arc<dyn ExecutionPlan>, out: &mut Vec<usize>) {
        if let Some(j) = as_::<NestedLoopJoinExec>(plan) {
            out.push(j.right().output_partitioning().partition_count());
        }
        if let Some(j) = as_::<HashJoinExec>(plan) {
            if j.null_aware {
                out.push(j.right().output_partitioning().partition_count());
            }
        }
        plan.children().into_iter().for_each(|c| probe_partitions(c, out));
    }

    #[tokio::test]
    async fn joins_keeping_their_build_side_whole_read_their_probe_side_in_one_partition() {
        let ctx = SessionContext::new_with_config(SessionConfig::new().with_target_partitions(4));
        for (name, column) in [("a", "x"), ("b", "y")] {
            let schema = Arc::new(Schema::new(vec![Field::new(column, DataType::Int64, true)]));
            let part =
                |v: i64| vec![RecordBatch::try_new(schema.clone(), vec![Arc::new(Int64Array::from(vec![v]))]).unwrap()];
            let table = MemTable::try_new(schema.clone(), (0..4).map(part).collect()).unwrap();
            ctx.register_table(name, Arc::new(table)).unwrap();
        }
        for sql in ["SELECT * FROM a LEFT JOIN b ON x < y", "SELECT * FROM a WHERE x NOT IN (SELECT y FROM b)"] {
            let plan = ctx.sql(sql).await.unwrap().create_physical_plan().await.unwrap();
            let ready = prepare_for_distribution(plan, ctx.copied_config().options()).unwrap();
            let mut partitions = Vec::new();
            probe_partitions(&ready, &mut partitions);
            assert!(!partitions.is_empty(), "{sql}: the join is there");
            assert!(partitions.iter().all(|&p| p == 1), "{sql}: probe sides in {partitions:?} partitions");
        }
    }
}
