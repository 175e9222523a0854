//! `PushDownSemiJoin`, a logical optimizer rule that moves a semi or anti join below
//! an inner join on the same key. The coordinator's planning context adds it after
//! DataFusion's own rules (single-node DataFusion, the tests' oracle, runs without it).
//!
//! DataFusion turns `IN` and `EXISTS` subqueries into semi joins where the filter was,
//! above every join of the `FROM` list, and never moves them. TPC-H q18 keeps a few
//! hundred orders out of millions, yet joins every order with all of its line items
//! and groups them by five columns before the semi join throws nearly all of them
//! away. When the join below the semi join is on the semi join's own key, the side
//! that holds the key can be filtered first: the rows of the other side that the semi
//! join would drop then never meet it. Requiring that key keeps the rule from moving
//! a semi join under a join that filters (q21's on nations), where it would probe
//! more rows, not fewer.
//!
//! Valid because a semi (anti) join keeps or drops each row of its left input on
//! that row's own columns: when they all come from one side of an inner join, keeping
//! the joined rows equals keeping that side's rows before the join. Under a left
//! join, only the preserved side qualifies. Null-aware anti joins (`NOT IN`) stay
//! where they are.

use std::collections::HashSet;
use std::sync::Arc;

use datafusion::common::tree_node::Transformed;
use datafusion::common::{Column, JoinType, Result};
use datafusion::logical_expr::{Expr, Join, LogicalPlan, Projection};
use datafusion::optimizer::optimizer::ApplyOrder;
use datafusion::optimizer::{OptimizerConfig, OptimizerRule};

#[derive(Debug, Default)]
pub struct PushDownSemiJoin;

impl OptimizerRule for PushDownSemiJoin {
    fn name(&self) -> &str {
        "flotilla_push_down_semi_join"
    }

    fn apply_order(&self) -> Option<ApplyOrder> {
        Some(ApplyOrder::TopDown)
    }

    fn rewrite(&self, plan: LogicalPlan, _config: &dyn OptimizerConfig) -> Result<Transformed<LogicalPlan>> {
        let LogicalPlan::Join(semi) = &plan else { return Ok(Transformed::no(plan)) };
        if !matches!(semi.join_type, JoinType::LeftSemi | JoinType::LeftAnti) || semi.null_aware {
            return Ok(Transformed::no(plan));
        }
        let new = push_down(semi);
        Ok(super::rewritten_or_unchanged(self.name(), plan, new))
    }
}

/// The columns of the semi join's left input that decide whether a row is kept.
fn deciding_columns(semi: &Join) -> HashSet<Column> {
    let left = semi.left.schema();
    let mut columns: HashSet<Column> = semi.on.iter().flat_map(|(l, _)| l.column_refs()).cloned().collect();
    if let Some(filter) = &semi.filter {
        columns.extend(filter.column_refs().into_iter().filter(|c| left.has_column(c)).cloned());
    }
    columns
}

/// `semi` with its left input replaced, the rest kept.
fn semi_over(semi: &Join, left: Arc<LogicalPlan>) -> Result<Join> {
    super::join_like(semi, left, semi.right.clone())
}

fn push_down(semi: &Join) -> Result<Option<LogicalPlan>> {
    match semi.left.as_ref() {
        LogicalPlan::Join(inner) => push_into(semi, inner),
        // A projection that only passes columns through commutes with the semi join;
        // it moves up only when the semi join then goes further down.
        LogicalPlan::Projection(p) if super::passes_columns_only(p) => {
            let LogicalPlan::Join(inner) = p.input.as_ref() else { return Ok(None) };
            let Some(pushed) = push_into(&semi_over(semi, p.input.clone())?, inner)? else { return Ok(None) };
            Ok(Some(LogicalPlan::Projection(Projection::try_new(p.expr.clone(), Arc::new(pushed))?)))
        }
        _ => Ok(None),
    }
}

/// `semi`, whose left input is `inner`, moved into the side of `inner` that holds its
/// key, when `inner` joins on that key.
fn push_into(semi: &Join, inner: &Join) -> Result<Option<LogicalPlan>> {
    let deciding = deciding_columns(semi);
    let semi_keys: Vec<&Expr> = semi.on.iter().map(|(l, _)| l).collect();
    let left_keys = inner.on.iter().any(|(l, _)| semi_keys.contains(&l));
    let right_keys = inner.on.iter().any(|(_, r)| semi_keys.contains(&r));
    let preserves_left = matches!(inner.join_type, JoinType::Inner | JoinType::Left);
    let preserves_right = matches!(inner.join_type, JoinType::Inner | JoinType::Right);
    let holds = |side: &LogicalPlan| deciding.iter().all(|c| side.schema().has_column(c));
    let (left, right) = if preserves_left && holds(&inner.left) && left_keys {
        (Arc::new(LogicalPlan::Join(semi_over(semi, inner.left.clone())?)), inner.right.clone())
    } else if preserves_right && holds(&inner.right) && right_keys {
        (inner.left.clone(), Arc::new(LogicalPlan::Join(semi_over(semi, inner.right.clone())?)))
    } else {
        return Ok(None);
    };
    Ok(Some(LogicalPlan::Join(super::join_like(inner, left, right)?)))
}

#[cfg(test)]
#[path = "semi_join_tests.rs"]
mod tests;
