//! `JoinFilteredScanEarly`, a logical optimizer rule that moves the join with a
//! filtered table scan down an inner-join chain, next to the input that holds its
//! keys. The coordinator's planning context adds it after DataFusion's own rules
//! (single-node DataFusion, the tests' oracle, runs without it).
//!
//! DataFusion joins the tables of a `FROM` list in the order they are written. TPC-H
//! q7 writes `supplier, lineitem, orders, customer, nation n1, nation n2`: every
//! supplier's line items of two years meet their orders and customers before
//! `n1.n_name in ('FRANCE', 'GERMANY')` keeps 2 of 25 of them. Joined with the
//! suppliers first, the nation filter reaches line items before the join with
//! `orders`, whose build side is the largest of the query.
//!
//! The rule takes `(A ⋈ B) ⋈ C`, all inner joins, where C is a filtered scan whose
//! join keys come from A alone (or B alone), and makes it `(A ⋈ C) ⋈ B` (or
//! `A ⋈ (B ⋈ C)`), conditions moved to the top join, columns in their order. It
//! does not pass over a filtered scan (B, or A): that join may filter more than C's,
//! and without statistics the rule cannot tell (q3's `customer` before `lineitem`).
//! It sees through projections that only pass columns on, as DataFusion leaves them
//! between joins.

use std::sync::Arc;

use datafusion::common::tree_node::Transformed;
use datafusion::common::{Column, JoinType, NullEquality, Result};
use datafusion::logical_expr::utils::conjunction;
use datafusion::logical_expr::{Expr, Join, LogicalPlan, Projection};
use datafusion::optimizer::optimizer::ApplyOrder;
use datafusion::optimizer::{OptimizerConfig, OptimizerRule};

use super::semi_join_reduction::is_filtered_scan;

#[derive(Debug, Default)]
pub struct JoinFilteredScanEarly;

impl OptimizerRule for JoinFilteredScanEarly {
    fn name(&self) -> &str {
        "flotilla_join_filtered_scan_early"
    }

    fn apply_order(&self) -> Option<ApplyOrder> {
        Some(ApplyOrder::TopDown)
    }

    fn rewrite(&self, plan: LogicalPlan, _config: &dyn OptimizerConfig) -> Result<Transformed<LogicalPlan>> {
        let LogicalPlan::Join(top) = &plan else { return Ok(Transformed::no(plan)) };
        let new = rotate(top);
        Ok(super::rewritten_or_unchanged(self.name(), plan, new))
    }
}

fn plain_inner(j: &Join) -> bool {
    j.join_type == JoinType::Inner && j.null_equality == NullEquality::NullEqualsNothing
}

/// An inner join as `like` over other inputs, with `filter` as its condition.
fn inner_join(
    left: Arc<LogicalPlan>,
    right: Arc<LogicalPlan>,
    like: &Join,
    filter: Option<Expr>,
) -> Result<LogicalPlan> {
    let mut join = super::join_like(like, left, right)?;
    join.filter = filter;
    Ok(LogicalPlan::Join(join))
}

/// `top`, `(A ⋈ B) ⋈ C` with C a filtered scan, as `(A ⋈ C) ⋈ B` or `A ⋈ (B ⋈ C)`.
fn rotate(top: &Join) -> Result<Option<LogicalPlan>> {
    if !plain_inner(top) || !is_filtered_scan(&top.right) {
        return Ok(None);
    }
    let lower = match top.left.as_ref() {
        LogicalPlan::Join(j) => j,
        LogicalPlan::Projection(p) if super::passes_columns_only(p) => match p.input.as_ref() {
            LogicalPlan::Join(j) => j,
            _ => return Ok(None),
        },
        _ => return Ok(None),
    };
    if !plain_inner(lower) {
        return Ok(None);
    }
    let keys: Vec<&Column> = top.on.iter().flat_map(|(l, _)| l.column_refs()).collect();
    let holds_keys = |side: &LogicalPlan| !keys.is_empty() && keys.iter().all(|c| side.schema().has_column(c));
    // Both conditions hold on the columns of A, B and C, which the top join sees.
    let filter = conjunction(lower.filter.iter().chain(top.filter.iter()).cloned());
    let c = top.right.clone();
    let join = if holds_keys(&lower.left) && !is_filtered_scan(&lower.right) {
        let ac = inner_join(lower.left.clone(), c, top, None)?;
        inner_join(Arc::new(ac), lower.right.clone(), lower, filter)?
    } else if holds_keys(&lower.right) && !is_filtered_scan(&lower.left) {
        let bc = inner_join(lower.right.clone(), c, top, None)?;
        inner_join(lower.left.clone(), Arc::new(bc), lower, filter)?
    } else {
        return Ok(None);
    };
    let columns = top.schema.columns().into_iter().map(Expr::Column).collect();
    Ok(Some(LogicalPlan::Projection(Projection::try_new(columns, Arc::new(join))?)))
}

#[cfg(test)]
#[path = "join_order_tests.rs"]
mod tests;
