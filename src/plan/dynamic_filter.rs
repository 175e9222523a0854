//! Dynamic filters (Trino's name) across stages. In one DataFusion process a hash
//! join hands the keys of its build side to the scan of its probe side, which then
//! skips rows no build row matches. A distributed plan cuts a partitioned join's
//! inputs into stages of their own, and that link with them: the probe side was
//! hashed into the exchange whole (TPC-H q4 sent 3.8M `lineitem` keys at sf1 to meet
//! 57,000 orders). Here the build stage collects its key hashes
//! (`DynamicFilterSourceExec`), the phased schedule starts the probe stage after the
//! build stage is done producing, and the scheduler gives the probe stage the union of
//! the build tasks' hashes (`DynamicFilterExec`), as Trino's coordinator does with
//! the domains its build-side tasks report.
//!
//! This module finds the joins that may be filtered and puts the two nodes into
//! their stages' plans; the pipelined scheduler calls it. A probe row may only be
//! dropped when the join would drop it too: the probe side (right) must not be
//! preserved, and NULL keys must match nothing.

use datafusion::common::internal_datafusion_err;
use std::sync::Arc;

use datafusion::common::{JoinType, NullEquality};
use datafusion::error::Result;
use datafusion::physical_expr::expressions::Column;
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_plan::joins::{HashJoinExec, PartitionMode};
use datafusion::physical_plan::repartition::RepartitionExec;
use datafusion::physical_plan::{ExecutionPlan, Partitioning};

use super::dynamic_filter_exec::{DynamicFilterExec, DynamicFilterSourceExec, KeyHashSet};
use super::fragmenter::{as_, FragmentedPlan};
use super::DependencyKind;
use crate::exchange::remote_source::{ExchangeMode, RemoteSourceExec};

/// One partitioned join's filter: the build stage's key columns and the probe
/// stage's, in the order of the join's keys. Its id is the build stage's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DynamicFilter {
    pub build: usize,
    pub probe: usize,
    pub build_keys: Vec<usize>,
    pub probe_keys: Vec<usize>,
}

/// The dynamic filters of a fragmented plan.
pub fn dynamic_filters(plan: &FragmentedPlan) -> Vec<DynamicFilter> {
    let mut out = Vec::new();
    for f in &plan.fragments {
        collect(&f.plan, plan, &mut out);
    }
    out
}

fn collect(node: &Arc<dyn ExecutionPlan>, plan: &FragmentedPlan, out: &mut Vec<DynamicFilter>) {
    if let Some(j) = as_::<HashJoinExec>(node) {
        if let Some(f) = join_filter(j, plan) {
            out.push(f);
        }
    }
    for c in node.children() {
        collect(c, plan, out);
    }
}

/// Whether the join drops probe (right) rows that match no build row.
fn drops_unmatched_probe_rows(j: &HashJoinExec) -> bool {
    match j.join_type() {
        JoinType::Inner | JoinType::Left | JoinType::LeftSemi | JoinType::RightSemi | JoinType::LeftMark => true,
        // `NOT IN`: one NULL on the probe side empties the answer, so none may go
        // (DataFusion 55 plans such joins collect-left, never partitioned, anyway).
        JoinType::LeftAnti => !j.null_aware,
        _ => false,
    }
}

fn join_filter(j: &HashJoinExec, plan: &FragmentedPlan) -> Option<DynamicFilter> {
    if *j.partition_mode() != PartitionMode::Partitioned
        || j.null_equality() != NullEquality::NullEqualsNothing
        || !drops_unmatched_probe_rows(j)
    {
        return None;
    }
    let build = repartitioned_stage(j.left())?;
    let probe = repartitioned_stage(j.right())?;
    let build_keys = hash_key_columns(plan, build, j.on().iter().map(|(l, _)| l))?;
    let probe_keys = hash_key_columns(plan, probe, j.on().iter().map(|(_, r)| r))?;
    Some(DynamicFilter { build, probe, build_keys, probe_keys })
}

/// The stage a join input reads, when it reads one repartition exchange directly.
fn repartitioned_stage(input: &Arc<dyn ExecutionPlan>) -> Option<usize> {
    let rs = as_::<RemoteSourceExec>(input)?;
    (rs.mode() == ExchangeMode::Repartition).then(|| rs.stage())
}

/// The column indices of a stage's hash partitioning, when they are the join's keys
/// on that side (plain columns only, in the same order).
fn hash_key_columns<'a>(
    plan: &FragmentedPlan,
    stage: usize,
    join_keys: impl Iterator<Item = &'a Arc<dyn PhysicalExpr>>,
) -> Option<Vec<usize>> {
    let rep = as_::<RepartitionExec>(&plan.fragments.get(stage)?.plan)?;
    let Partitioning::Hash(exprs, _) = rep.partitioning() else { return None };
    let columns: Vec<&Column> =
        exprs.iter().map(|e| (e.as_ref() as &dyn std::any::Any).downcast_ref::<Column>()).collect::<Option<_>>()?;
    let join_keys: Vec<&Column> =
        join_keys.map(|e| (e.as_ref() as &dyn std::any::Any).downcast_ref::<Column>()).collect::<Option<_>>()?;
    (columns == join_keys && !columns.is_empty()).then(|| columns.iter().map(|c| c.index()).collect())
}

/// The build stage's plan collecting the filter's key hashes under its repartition.
pub fn with_collector(plan: &Arc<dyn ExecutionPlan>, f: &DynamicFilter) -> Result<Arc<dyn ExecutionPlan>> {
    below_repartition(plan, |input| Arc::new(DynamicFilterSourceExec::new(input, f.build, f.build_keys.clone())))
}

/// The probe stage's plan keeping only rows whose keys hash into `hashes`.
pub fn with_filter(
    plan: &Arc<dyn ExecutionPlan>,
    f: &DynamicFilter,
    hashes: Arc<[u64]>,
) -> Result<Arc<dyn ExecutionPlan>> {
    below_repartition(plan, |input| Arc::new(DynamicFilterExec::new(input, f.probe_keys.clone(), hashes)))
}

fn below_repartition(
    plan: &Arc<dyn ExecutionPlan>,
    wrap: impl FnOnce(Arc<dyn ExecutionPlan>) -> Arc<dyn ExecutionPlan>,
) -> Result<Arc<dyn ExecutionPlan>> {
    let rep = as_::<RepartitionExec>(plan)
        .ok_or_else(|| internal_datafusion_err!("a dynamic filter's stage must end in a repartition"))?;
    #[allow(deprecated)]
    plan.clone().with_new_children(vec![wrap(rep.input().clone())])
}

/// The phased schedule's dependencies (`FragmentedPlan::dependencies`), with each
/// filter's probe stage waiting for its build stage even when it only streams (such
/// a stage otherwise runs at once): its filter exists once the build stage is done.
/// Like the plan's own, these edges lead from a join's build subtree to its probe
/// subtree, so they close no cycle.
pub fn dependencies(plan: &FragmentedPlan, filters: &[DynamicFilter]) -> Vec<(usize, usize, DependencyKind)> {
    let mut deps = plan.dependencies();
    for f in filters {
        let edge = (f.build, f.probe, DependencyKind::PartitionedJoinBuild);
        if !deps.contains(&edge) {
            deps.push(edge);
        }
    }
    deps
}

/// A filter's distinct hashes from the build tasks' lists: None when a task has none.
pub fn union_of(lists: Vec<Option<Vec<u64>>>) -> Option<Arc<[u64]>> {
    let mut set = KeyHashSet::default();
    for list in lists {
        set.extend(list?);
    }
    Some(set.into_iter().collect())
}

#[cfg(test)]
#[path = "dynamic_filter_tests.rs"]
mod tests;
