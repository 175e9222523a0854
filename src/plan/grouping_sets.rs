//! Grouping sets that are all empty, `GROUP BY GROUPING SETS (())` or `((), ())`,
//! carried across a cut. The codec (`codec::FlotillaCodec`) calls it on both ends.
//!
//! datafusion-proto writes an aggregate's grouping sets as one flat list of flags,
//! one per grouping expression per set, and reads them back in runs of the number of
//! expressions. With no expression every set is zero flags long, so any number of
//! empty sets reads back as none: the worker's partial aggregate then lacks the
//! grouping id its final aggregate groups by, and the query answers no row where
//! SQL wants one grand total per set. Before encoding, such an aggregate is wrapped
//! in `EmptyGroupingSets`, a marker that travels as our own node with the number of
//! sets; decoding rebuilds the aggregate with that many empty sets. The marker is
//! never run.

use std::fmt;
use std::sync::Arc;

use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::common::{internal_err, Result};
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::physical_plan::aggregates::{AggregateExec, PhysicalGroupBy};
use datafusion::physical_plan::{DisplayAs, DisplayFormatType, ExecutionPlan};

/// An aggregate whose grouping sets are `sets` empty sets; see the module's comment.
#[derive(Debug)]
pub struct EmptyGroupingSets {
    input: Arc<dyn ExecutionPlan>,
    sets: usize,
}

impl EmptyGroupingSets {
    pub fn sets(&self) -> usize {
        self.sets
    }
}

impl DisplayAs for EmptyGroupingSets {
    fn fmt_as(&self, _t: DisplayFormatType, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "EmptyGroupingSets: sets={}", self.sets)
    }
}

impl ExecutionPlan for EmptyGroupingSets {
    crate::plan_node::plan_node!(
        unary "EmptyGroupingSets",
        input: input,
        properties: input,
        rebuild: |this, child| EmptyGroupingSets { input: child, sets: this.sets }
    );

    fn execute(&self, _partition: usize, _context: Arc<TaskContext>) -> Result<SendableRecordBatchStream> {
        internal_err!("EmptyGroupingSets only marks an aggregate for the codec")
    }
}

fn empty_sets(aggregate: &AggregateExec) -> Option<usize> {
    let group_by = aggregate.group_expr();
    let all_empty = group_by.expr().is_empty() && group_by.has_grouping_set();
    (all_empty && !group_by.groups().is_empty()).then_some(group_by.groups().len())
}

/// `plan` with every aggregate of only empty grouping sets wrapped in the marker.
pub fn mark(plan: Arc<dyn ExecutionPlan>) -> Result<Arc<dyn ExecutionPlan>> {
    plan.transform_up(|node| {
        let any = node.as_ref() as &dyn std::any::Any;
        match any.downcast_ref::<AggregateExec>().and_then(empty_sets) {
            Some(sets) => Ok(Transformed::yes(Arc::new(EmptyGroupingSets { input: node, sets }) as _)),
            None => Ok(Transformed::no(node)),
        }
    })
    .map(|t| t.data)
}

/// The aggregate `decoded` (read back without its sets) with its `sets` empty sets.
pub fn restore(decoded: Arc<dyn ExecutionPlan>, sets: usize) -> Result<Arc<dyn ExecutionPlan>> {
    let Some(aggregate) = (decoded.as_ref() as &dyn std::any::Any).downcast_ref::<AggregateExec>() else {
        return internal_err!("EmptyGroupingSets wraps an aggregate, not {}", decoded.name());
    };
    let group_by = aggregate.group_expr();
    if !group_by.expr().is_empty() || sets == 0 {
        return internal_err!("EmptyGroupingSets wraps an aggregate of empty grouping sets");
    }
    let group_by = PhysicalGroupBy::new(vec![], vec![], vec![vec![]; sets], true);
    let rebuilt = AggregateExec::try_new(
        *aggregate.mode(),
        group_by,
        aggregate.aggr_expr().to_vec(),
        aggregate.filter_expr().to_vec(),
        aggregate.input().clone(),
        aggregate.input_schema(),
    )?
    .with_limit_options(aggregate.limit_options());
    Ok(Arc::new(rebuilt))
}
