//! The analyzer rule `SubqueryArguments` (registered by the coordinator's planner
//! before the subquery rules): an aggregate whose argument or `FILTER` holds a
//! subquery, `count(CASE WHEN x > (SELECT ...) THEN 1 END)`, and a grouping that holds
//! one, `GROUP BY (SELECT ...)`, read that expression from a projection under the
//! aggregation instead. DataFusion decorrelates subqueries in
//! projections and filters only, and so do `scalar_subqueries`, `correlated_domains`
//! and `subquery_marks`; inside an aggregate call a subquery reached execution as it
//! was written and failed.

use std::sync::Arc;

use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::{Transformed, TreeNode, TreeNodeRecursion};
use datafusion::common::{Column, Result};
use datafusion::logical_expr::expr::{AggregateFunction, GroupingSet};
use datafusion::logical_expr::expr_rewriter::NamePreserver;
use datafusion::logical_expr::{Aggregate, Expr, LogicalPlan, LogicalPlanBuilder};
use datafusion::optimizer::AnalyzerRule;

use super::dependent_join::has_subquery;

/// The analyzer rule; see the module's comment.
#[derive(Debug, Default)]
pub struct SubqueryArguments;

impl AnalyzerRule for SubqueryArguments {
    fn name(&self) -> &str {
        "subquery_arguments"
    }

    fn analyze(&self, plan: LogicalPlan, _config: &ConfigOptions) -> Result<LogicalPlan> {
        plan.transform_up_with_subqueries(|node| match node {
            LogicalPlan::Aggregate(a) if a.aggr_expr.iter().chain(&a.group_expr).any(has_subquery) => {
                projected(a).map(Transformed::yes)
            }
            other => Ok(Transformed::no(other)),
        })
        .map(|t| t.data)
    }
}

/// `a` reading each argument, filter and grouping that holds a subquery from a
/// projection of its input, by a name of its own; a grouping keeps the name the nodes
/// above read it by.
fn projected(a: Aggregate) -> Result<LogicalPlan> {
    let mut computed: Vec<Expr> = Vec::new();
    let mut take = |e: &mut Expr| {
        if has_subquery(e) {
            let name = format!("__aggregate_argument_{}", computed.len());
            let read = Expr::Column(Column::new_unqualified(&name));
            computed.push(std::mem::replace(e, read).alias(name));
        }
    };
    let names = NamePreserver::new_for_projection();
    let mut group = Vec::with_capacity(a.group_expr.len());
    for e in a.group_expr {
        let mut grouped = |mut e: Expr| {
            let name = names.save(&e);
            take(&mut e);
            name.restore(e)
        };
        group.push(match e {
            Expr::GroupingSet(GroupingSet::Rollup(v)) => {
                Expr::GroupingSet(GroupingSet::Rollup(v.into_iter().map(&mut grouped).collect()))
            }
            Expr::GroupingSet(GroupingSet::Cube(v)) => {
                Expr::GroupingSet(GroupingSet::Cube(v.into_iter().map(&mut grouped).collect()))
            }
            Expr::GroupingSet(GroupingSet::GroupingSets(sets)) => Expr::GroupingSet(GroupingSet::GroupingSets(
                sets.into_iter().map(|s| s.into_iter().map(&mut grouped).collect()).collect(),
            )),
            other => grouped(other),
        });
    }
    let mut aggregates = Vec::with_capacity(a.aggr_expr.len());
    for e in a.aggr_expr {
        let name = names.save(&e);
        let taken = e.transform_down(|e| match e {
            Expr::AggregateFunction(AggregateFunction { func, mut params }) => {
                params.args.iter_mut().for_each(&mut take);
                if let Some(filter) = params.filter.as_mut() {
                    take(filter.as_mut());
                }
                let call = Expr::AggregateFunction(AggregateFunction { func, params });
                Ok(Transformed::new(call, true, TreeNodeRecursion::Jump))
            }
            other => Ok(Transformed::no(other)),
        })?;
        aggregates.push(name.restore(taken.data));
    }
    let columns = a.input.schema().columns().into_iter().map(Expr::Column);
    let input = LogicalPlanBuilder::from(a.input.as_ref().clone()).project(columns.chain(computed))?.build()?;
    Ok(LogicalPlan::Aggregate(Aggregate::try_new(Arc::new(input), group, aggregates)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn rows(sql: &str) -> Vec<String> {
        let ctx = crate::plan::scalar_subqueries::tests::session();
        ctx.add_analyzer_rule(Arc::new(SubqueryArguments));
        ctx.add_analyzer_rule(Arc::new(crate::plan::correlated_domains::CorrelatedDomains));
        ctx.add_analyzer_rule(Arc::new(crate::plan::subquery_marks::SubqueryMarks));
        crate::plan::rule_tests::table_rows(&ctx, sql).await.unwrap()
    }

    /// x = 1, 2, 3 against u = (1, 2): the rows of u below x are 0, 1 and 2; x
    /// exceeds that count for all three; x is in u for 1 and 2; the filter keeps x >= 2.
    #[tokio::test]
    async fn subqueries_in_aggregate_arguments() {
        let t = "(VALUES (1), (2), (3)) t(x)";
        let u = "(VALUES (1), (2)) u(y)";
        let sql = format!(
            "SELECT count(CASE WHEN x > (SELECT count(*) FROM {u} WHERE y < t.x) THEN 1 END), \
             sum(CASE WHEN x IN (SELECT y FROM {u}) THEN x ELSE 0 END), \
             count(*) FILTER (WHERE EXISTS (SELECT 1 FROM {u} WHERE y < t.x)) FROM {t}"
        );
        assert_eq!(rows(&sql).await, ["|3|3|2|"]);
    }

    /// x = 1, 2, 3, 4 grouped by the count of u's rows below x (0, 1, 2, 2), and by
    /// whether x is in u (true, true, false, false) under a rollup: the groups 0, 1
    /// and 2 (the last of two rows), then true, false and the total.
    #[tokio::test]
    async fn subqueries_in_groupings() {
        let t = "(VALUES (1), (2), (3), (4)) t(x)";
        let u = "(VALUES (1), (2)) u(y)";
        let below = format!(
            "SELECT (SELECT count(*) FROM {u} WHERE y < t.x) AS c, count(*) FROM {t} \
             GROUP BY (SELECT count(*) FROM {u} WHERE y < t.x) ORDER BY c"
        );
        assert_eq!(rows(&below).await, ["|0|1|", "|1|1|", "|2|2|"]);
        let rollup = format!(
            "SELECT x IN (SELECT y FROM {u}) AS i, count(*) FROM {t} \
             GROUP BY ROLLUP (x IN (SELECT y FROM {u})) ORDER BY i NULLS LAST"
        );
        assert_eq!(rows(&rollup).await, ["|false|2|", "|true|2|", "||4|"]);
    }
}
