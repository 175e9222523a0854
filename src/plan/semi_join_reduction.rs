//! `SemiJoinReduction`, a logical optimizer rule: a grouped subquery joined on one of
//! its group keys aggregates only the keys the other side can match. The
//! coordinator's planning context adds it after DataFusion's own rules (single-node
//! DataFusion, the tests' oracle, runs without it).
//!
//! DataFusion decorrelates TPC-H q17's `avg(l_quantity) ... where l_partkey =
//! p_partkey` into an aggregate of every line item by part, joined with the line items
//! of the 0.1% of parts that pass q17's filter: 99.9% of the groups are computed and
//! thrown away. When a join's right input is such an aggregate (through aliases,
//! projections and `HAVING` filters) and its left input takes the join key from a
//! filtered table scan (through inner and semi joins, following their equal keys), the
//! aggregate's input is first semi-joined with that scan's keys. This is the
//! "semi-join reduction" (or magic set) of the literature. The scan runs twice; it is
//! a filtered scan because an unfiltered one would not remove a single group.
//!
//! Valid because removing input rows by a group key removes whole groups and leaves
//! the others as they were, and a group whose key the left side does not hold matches
//! no left row: the joins taken are inner, left, semi and anti joins that drop the
//! right side's unmatched rows, with NULL equal to nothing. A null-aware anti join
//! (`NOT IN`) is not taken: a group keyed NULL changes its answer.

use std::sync::Arc;

use datafusion::common::tree_node::Transformed;
use datafusion::common::{Column, JoinType, NullEquality, Result};
use datafusion::logical_expr::{Expr, Join, JoinConstraint, LogicalPlan, LogicalPlanBuilder};
use datafusion::optimizer::optimizer::ApplyOrder;
use datafusion::optimizer::{OptimizerConfig, OptimizerRule};

/// The alias of the keys an aggregate was reduced by; also how the rule knows it
/// already reduced one (the optimizer runs its rules more than once).
const KEYS: &str = "__flotilla_reduction_keys";

#[derive(Debug, Default)]
pub struct SemiJoinReduction;

impl OptimizerRule for SemiJoinReduction {
    fn name(&self) -> &str {
        "flotilla_semi_join_reduction"
    }

    fn apply_order(&self) -> Option<ApplyOrder> {
        Some(ApplyOrder::TopDown)
    }

    fn rewrite(&self, plan: LogicalPlan, _config: &dyn OptimizerConfig) -> Result<Transformed<LogicalPlan>> {
        let LogicalPlan::Join(join) = &plan else { return Ok(Transformed::no(plan)) };
        let new = reduce_join(join);
        Ok(super::rewritten_or_unchanged(self.name(), plan, new))
    }
}

/// `join` with its right input's aggregate reduced, if the rule applies.
fn reduce_join(join: &Join) -> Result<Option<LogicalPlan>> {
    let drops_unmatched_right =
        matches!(join.join_type, JoinType::Inner | JoinType::Left | JoinType::LeftSemi | JoinType::LeftAnti);
    if !drops_unmatched_right || join.null_aware || join.null_equality != NullEquality::NullEqualsNothing {
        return Ok(None);
    }
    for (left, right) in &join.on {
        let (Expr::Column(left), Expr::Column(right)) = (left, right) else { continue };
        let Some(keys) = key_source(&join.left, left) else { continue };
        let Ok(index) = join.right.schema().index_of_column(right) else { continue };
        let Some(reduced) = reduce(&join.right, index, &keys)? else { continue };
        return Ok(Some(LogicalPlan::Join(super::join_like(join, join.left.clone(), Arc::new(reduced))?)));
    }
    Ok(None)
}

/// Projections, aliases and filters down to a table scan, with a filter on the way
/// or in the scan. Read twice, such a plan must give the same rows: nothing in it
/// may be volatile (`random()`), nor may the scan stop at a limit.
pub(crate) fn is_filtered_scan(plan: &LogicalPlan) -> bool {
    fn walk(plan: &LogicalPlan, filtered: bool) -> bool {
        match plan {
            LogicalPlan::TableScan(scan) => {
                scan.fetch.is_none()
                    && !scan.filters.iter().any(Expr::is_volatile)
                    && (filtered || !scan.filters.is_empty())
            }
            LogicalPlan::Filter(f) => !f.predicate.is_volatile() && walk(&f.input, true),
            LogicalPlan::Projection(p) => !p.expr.iter().any(Expr::is_volatile) && walk(&p.input, filtered),
            LogicalPlan::SubqueryAlias(a) => walk(&a.input, filtered),
            _ => false,
        }
    }
    walk(plan, false)
}

/// A filtered table scan below `plan` whose `Column` holds every value `column` takes
/// in `plan`'s rows.
fn key_source(plan: &Arc<LogicalPlan>, column: &Column) -> Option<(Arc<LogicalPlan>, Column)> {
    if is_filtered_scan(plan) {
        return plan.schema().has_column(column).then(|| (plan.clone(), column.clone()));
    }
    match plan.as_ref() {
        LogicalPlan::Filter(f) => key_source(&f.input, column),
        LogicalPlan::Projection(p) if p.expr.iter().any(|e| matches!(e, Expr::Column(c) if c == column)) => {
            key_source(&p.input, column)
        }
        LogicalPlan::Join(j) if matches!(j.join_type, JoinType::Inner | JoinType::LeftSemi) => {
            let inner = j.join_type == JoinType::Inner;
            let own_side = if j.left.schema().has_column(column) {
                key_source(&j.left, column)
            } else if inner && j.right.schema().has_column(column) {
                key_source(&j.right, column)
            } else {
                None
            };
            // A row that passed the join has the key of the row it met.
            own_side.or_else(|| {
                j.on.iter().find_map(|(l, r)| match (l, r) {
                    (Expr::Column(l), Expr::Column(r)) if l == column => key_source(&j.right, r),
                    (Expr::Column(l), Expr::Column(r)) if r == column && inner => key_source(&j.left, l),
                    _ => None,
                })
            })
        }
        _ => None,
    }
}

/// Whether `plan` already holds a reduction's keys.
fn reduced(plan: &LogicalPlan) -> bool {
    matches!(plan, LogicalPlan::SubqueryAlias(a) if a.alias.table() == KEYS) || plan.inputs().into_iter().any(reduced)
}

/// `plan` with the aggregate that computes its output column `index` as a group key
/// fed only the rows whose key `keys` holds; None when no such aggregate is found.
/// Aliases, filters and projections above it are rebuilt over their new input.
fn reduce(plan: &LogicalPlan, index: usize, keys: &(Arc<LogicalPlan>, Column)) -> Result<Option<LogicalPlan>> {
    let input = match plan {
        LogicalPlan::SubqueryAlias(a) => reduce(&a.input, index, keys)?,
        LogicalPlan::Filter(f) => reduce(&f.input, index, keys)?,
        LogicalPlan::Projection(p) => {
            let source = match &p.expr[index] {
                Expr::Column(c) => c,
                Expr::Alias(alias) => match alias.expr.as_ref() {
                    Expr::Column(c) => c,
                    _ => return Ok(None),
                },
                _ => return Ok(None),
            };
            let Ok(index) = p.input.schema().index_of_column(source) else { return Ok(None) };
            reduce(&p.input, index, keys)?
        }
        LogicalPlan::Aggregate(agg) => {
            let grouping_sets = agg.group_expr.iter().any(|e| matches!(e, Expr::GroupingSet(_)));
            let Some(Expr::Column(group)) = agg.group_expr.get(index) else { return Ok(None) };
            if grouping_sets || reduced(&agg.input) {
                return Ok(None);
            }
            let (source, column) = keys;
            let keys_plan = LogicalPlanBuilder::from(source.as_ref().clone())
                .project(vec![Expr::Column(column.clone())])?
                .alias(KEYS)?
                .build()?;
            let key = Column::new(Some(KEYS), column.name.clone());
            let semi = Join::try_new(
                agg.input.clone(),
                Arc::new(keys_plan),
                vec![(Expr::Column(group.clone()), Expr::Column(key))],
                None,
                JoinType::LeftSemi,
                JoinConstraint::On,
                NullEquality::NullEqualsNothing,
                false,
            )?;
            Some(LogicalPlan::Join(semi))
        }
        _ => None,
    };
    input.map(|input| plan.with_new_exprs(plan.expressions(), vec![input])).transpose()
}

#[cfg(test)]
#[path = "semi_join_reduction_tests.rs"]
mod tests;
