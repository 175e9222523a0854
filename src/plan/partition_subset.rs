//! A task's plan narrowed to the partitions the task runs, so that DataFusion's join
//! dynamic filters work inside a fragment that several tasks share.
//!
//! A hash join that pushes a dynamic filter into a scan below it waits, before it
//! probes, until every partition of its probe side has reported its build side: one
//! barrier per join, sized by the plan's partition count. A task runs only its slice
//! of the fragment's partitions, so the barrier would wait for partitions that other
//! processes run, forever. `narrow` rewrites the task's plan so that its partitions
//! are exactly the task's: operators that carry partitions one to one (projections,
//! filters, joins' probe sides, partial aggregations, unions) are rebuilt over
//! narrowed inputs, and a `PartitionSubsetExec` over anything else runs just the
//! task's partitions of it. Local partition `i` of the result is partition
//! `partitions[i]` of the original.
//!
//! The worker (`worker::task`) narrows a task's plan and turns the joins' dynamic
//! filters on only where `narrow` says every such join ends up running all of its
//! partitions; otherwise the plan runs as cut, without them.

use datafusion::common::internal_err;
use std::any::Any;
use std::fmt;
use std::sync::Arc;

use datafusion::common::tree_node::{TreeNode, TreeNodeRecursion};
use datafusion::error::Result;
use datafusion::execution::TaskContext;
use datafusion::physical_plan::aggregates::{AggregateExec, AggregateMode};
use datafusion::physical_plan::filter::FilterExec;
use datafusion::physical_plan::joins::{HashJoinExec, PartitionMode};
use datafusion::physical_plan::limit::LocalLimitExec;
use datafusion::physical_plan::projection::ProjectionExec;
use datafusion::physical_plan::sorts::sort::SortExec;
use datafusion::physical_plan::union::{InterleaveExec, UnionExec};
use datafusion::physical_plan::windows::{BoundedWindowAggExec, WindowAggExec};
use datafusion::physical_plan::{
    DisplayAs, DisplayFormatType, ExecutionPlan, ExecutionPlanProperties, Partitioning, PlanProperties,
    SendableRecordBatchStream,
};

use crate::plan::dynamic_filter_exec::{DynamicFilterExec, DynamicFilterSourceExec};
use crate::plan_node::plan_node;

/// Runs some partitions of its input as its own: its partition `i` is the input's
/// `partitions[i]`.
#[derive(Debug)]
pub struct PartitionSubsetExec {
    input: Arc<dyn ExecutionPlan>,
    partitions: Vec<usize>,
    properties: Arc<PlanProperties>,
}

impl PartitionSubsetExec {
    pub fn new(input: Arc<dyn ExecutionPlan>, partitions: Vec<usize>) -> Self {
        // The rows of a partition keep their order and equivalences; how rows were
        // spread over partitions no longer matches any partitioning DataFusion knows.
        let properties = Arc::new(PlanProperties::new(
            input.equivalence_properties().clone(),
            Partitioning::UnknownPartitioning(partitions.len()),
            input.pipeline_behavior(),
            input.boundedness(),
        ));
        PartitionSubsetExec { input, partitions, properties }
    }
}

impl DisplayAs for PartitionSubsetExec {
    fn fmt_as(&self, _t: DisplayFormatType, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "PartitionSubsetExec: partitions={:?}", self.partitions)
    }
}

impl ExecutionPlan for PartitionSubsetExec {
    plan_node!(
        unary "PartitionSubsetExec",
        input: input,
        properties: own,
        rebuild: |this, child| PartitionSubsetExec::new(child, this.partitions.clone())
    );

    fn maintains_input_order(&self) -> Vec<bool> {
        vec![true]
    }

    fn execute(&self, partition: usize, context: Arc<TaskContext>) -> Result<SendableRecordBatchStream> {
        let Some(&p) = self.partitions.get(partition) else {
            return internal_err!("partition {partition} of a subset of {} partitions", self.partitions.len());
        };
        self.input.execute(p, context)
    }
}

/// `plan` narrowed to `partitions` (ascending, each below its partition count), and
/// whether every hash join in it whose dynamic filter reaches its probe side runs all
/// of its partitions when the result runs all of its own.
pub fn narrow(plan: &Arc<dyn ExecutionPlan>, partitions: &[usize]) -> Result<(Arc<dyn ExecutionPlan>, bool)> {
    let count = plan.output_partitioning().partition_count();
    if partitions.len() == count && partitions.iter().enumerate().all(|(i, p)| i == *p) {
        return Ok((plan.clone(), true));
    }
    if partitions.is_empty() {
        // Nothing below runs, so no join waits.
        return Ok((Arc::new(PartitionSubsetExec::new(plan.clone(), Vec::new())), true));
    }
    if let Some(carries) = carried_children(plan) {
        let mut all_run = true;
        let mut children = Vec::new();
        for (child, carried) in plan.children().into_iter().zip(carries) {
            if carried {
                let (narrowed, runs) = narrow(child, partitions)?;
                all_run &= runs;
                children.push(narrowed);
            } else {
                children.push(child.clone());
            }
        }
        #[allow(deprecated)]
        return Ok((plan.clone().with_new_children(children)?, all_run));
    }
    if let Some(union) = (plan.as_ref() as &dyn Any).downcast_ref::<UnionExec>() {
        // The union's partitions are its inputs' one after another.
        let mut all_run = true;
        let mut children = Vec::new();
        let mut first = 0;
        for child in union.children() {
            let n = child.output_partitioning().partition_count();
            let mine: Vec<usize> =
                partitions.iter().filter(|p| (first..first + n).contains(*p)).map(|p| p - first).collect();
            let (narrowed, runs) = narrow(child, &mine)?;
            all_run &= runs;
            children.push(narrowed);
            first += n;
        }
        #[allow(deprecated)]
        return Ok((plan.clone().with_new_children(children)?, all_run));
    }
    // Anything else runs only the task's partitions of itself, so whatever waits for
    // all of them below it would wait forever.
    Ok((Arc::new(PartitionSubsetExec::new(plan.clone(), partitions.to_vec())), !has_join_dynamic_filter(plan)?))
}

/// For an operator whose partition `i` reads partition `i` of some of its inputs (and
/// all of the others, once), which inputs those are; `None` for any other operator.
fn carried_children(plan: &Arc<dyn ExecutionPlan>) -> Option<Vec<bool>> {
    let any = plan.as_ref() as &dyn Any;
    let count = plan.output_partitioning().partition_count();
    let same = |c: &Arc<dyn ExecutionPlan>| c.output_partitioning().partition_count() == count;
    let children = plan.children();
    if let Some(j) = any.downcast_ref::<HashJoinExec>() {
        return match j.partition_mode() {
            PartitionMode::CollectLeft if same(j.right()) => Some(vec![false, true]),
            PartitionMode::Partitioned if same(j.left()) && same(j.right()) => Some(vec![true, true]),
            _ => None,
        };
    }
    if let Some(a) = any.downcast_ref::<AggregateExec>() {
        if matches!(a.mode(), AggregateMode::Final | AggregateMode::Single) {
            return None;
        }
    }
    if let Some(s) = any.downcast_ref::<SortExec>() {
        if !s.preserve_partitioning() {
            return None;
        }
    }
    let one_to_one = any.is::<ProjectionExec>()
        || any.is::<FilterExec>()
        || any.is::<AggregateExec>()
        || any.is::<SortExec>()
        || any.is::<LocalLimitExec>()
        || any.is::<BoundedWindowAggExec>()
        || any.is::<WindowAggExec>()
        || any.is::<InterleaveExec>()
        || any.is::<DynamicFilterExec>()
        || any.is::<DynamicFilterSourceExec>();
    (one_to_one && !children.is_empty() && children.iter().all(|c| same(c))).then(|| vec![true; children.len()])
}

/// Whether `plan` holds a hash join whose dynamic filter reaches an operator on its
/// probe side: such a join waits for all its probe partitions before it probes.
pub fn has_join_dynamic_filter(plan: &Arc<dyn ExecutionPlan>) -> Result<bool> {
    let mut found = false;
    plan.apply(|node| {
        if let Some(j) = (node.as_ref() as &dyn Any).downcast_ref::<HashJoinExec>() {
            for filter in j.dynamic_expressions_produced() {
                if let Some(id) = filter.expression_id() {
                    if holds_expression(j.right(), id)? {
                        found = true;
                        return Ok(TreeNodeRecursion::Stop);
                    }
                }
            }
        }
        Ok(TreeNodeRecursion::Continue)
    })?;
    Ok(found)
}

fn holds_expression(plan: &Arc<dyn ExecutionPlan>, id: u64) -> Result<bool> {
    let mut found = false;
    plan.apply(|node| {
        node.apply_expressions(&mut |root| {
            root.apply(|e| {
                found |= e.expression_id() == Some(id);
                Ok(if found { TreeNodeRecursion::Stop } else { TreeNodeRecursion::Continue })
            })
        })?;
        Ok(if found { TreeNodeRecursion::Stop } else { TreeNodeRecursion::Continue })
    })?;
    Ok(found)
}

#[cfg(test)]
#[path = "partition_subset_tests.rs"]
pub(crate) mod tests;
