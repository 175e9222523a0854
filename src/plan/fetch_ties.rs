//! The analyzer rule `FetchWithTies` (registered by the coordinator's planner): Trino's
//! `OFFSET m FETCH FIRST n ROWS WITH TIES`, which DataFusion 55 does not plan.
//! `dialect::query_clauses` leaves the query's `ORDER BY` with the mark
//! `functions::fetch_ties` at its end; the sort DataFusion plans for it becomes:
//!
//! - each row numbered and ranked by that order (`row_number()`, `rank()`);
//! - kept where its number is past `m` and its rank at most `m + n`: a row ranks at
//!   most `m + n` exactly when no more than `m + n - 1` rows sort strictly before it,
//!   that is when it sorts no later than the `(m + n)`-th row or ties with it;
//! - sorted again by the order, without the mark.

use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::Transformed;
use datafusion::common::{plan_err, Result, ScalarValue};
use datafusion::functions_window::expr_fn::{rank, row_number};
use datafusion::logical_expr::{lit, Expr, ExprFunctionExt, LogicalPlan, LogicalPlanBuilder, Sort, SortExpr};
use datafusion::optimizer::AnalyzerRule;

use crate::functions::fetch_ties::NAME;

/// The analyzer rule; see the module's comment.
#[derive(Debug, Default)]
pub struct FetchWithTies;

impl AnalyzerRule for FetchWithTies {
    fn analyze(&self, plan: LogicalPlan, _config: &ConfigOptions) -> Result<LogicalPlan> {
        plan.transform_up_with_subqueries(|node| match &node {
            LogicalPlan::Sort(sort) => match mark(sort)? {
                Some((offset, count)) => Ok(Transformed::yes(with_ties(sort, offset, count)?)),
                None => Ok(Transformed::no(node)),
            },
            _ => Ok(Transformed::no(node)),
        })
        .map(|t| t.data)
    }

    fn name(&self) -> &str {
        "fetch_with_ties"
    }
}

/// The offset and count of the mark that ends `sort`'s order, if it has one.
fn mark(sort: &Sort) -> Result<Option<(u64, u64)>> {
    let Some(SortExpr { expr: Expr::ScalarFunction(f), .. }) = sort.expr.last() else { return Ok(None) };
    if f.func.name() != NAME {
        return Ok(None);
    }
    let number = |e: &Expr| match e {
        Expr::Literal(ScalarValue::Int64(Some(v)), _) if *v >= 0 => Some(*v as u64),
        _ => None,
    };
    match (f.args.first().and_then(number), f.args.get(1).and_then(number)) {
        (Some(offset), Some(count)) => Ok(Some((offset, count))),
        _ => plan_err!("OFFSET and FETCH FIRST ... WITH TIES take a constant count of rows, not below 0"),
    }
}

fn with_ties(sort: &Sort, offset: u64, count: u64) -> Result<LogicalPlan> {
    let order: Vec<SortExpr> = sort.expr[..sort.expr.len() - 1].to_vec();
    let columns: Vec<Expr> = sort.input.schema().columns().into_iter().map(Expr::Column).collect();
    let (number, ranked) = ("__fetch_row_number", "__fetch_rank");
    let numbered = row_number().order_by(order.clone()).build()?.alias(number);
    let rank = rank().order_by(order.clone()).build()?.alias(ranked);
    let column = |name: &str| Expr::Column(datafusion::common::Column::new_unqualified(name));
    let mut kept = column(ranked).lt_eq(lit(offset + count));
    if offset > 0 {
        kept = column(number).gt(lit(offset)).and(kept);
    }
    LogicalPlanBuilder::from(sort.input.as_ref().clone())
        .window(vec![numbered, rank])?
        .filter(kept)?
        .project(columns)?
        .sort(order)?
        .build()
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::prelude::SessionContext;
    use std::sync::Arc;

    /// The rows of `sql`, whose `ORDER BY` ends with the mark as the dialect writes it.
    async fn rows(sql: &str) -> Vec<String> {
        let ctx = SessionContext::new();
        for f in crate::functions::fetch_ties::functions() {
            ctx.register_udf(f);
        }
        ctx.add_analyzer_rule(Arc::new(FetchWithTies));
        crate::plan::rule_tests::table_rows(&ctx, sql).await.unwrap()
    }

    /// Sorted by x: 1, 2, 2, 2, 3, NULL (NULLs last). The first two rows end on a 2, so
    /// all three 2s come; past the first three rows, the next one is the last 2's
    /// neighbour 3, which ties with nothing.
    #[tokio::test]
    async fn ties_of_the_last_row_kept() {
        let data = "(VALUES (2, 'a'), (1, 'b'), (3, 'c'), (NULL, 'd'), (2, 'e'), (2, 'f')) t(x, y)";
        let first_two = rows(&format!("SELECT x FROM {data} ORDER BY x, __fetch_with_ties(0, 2)")).await;
        assert_eq!(first_two, ["|1|", "|2|", "|2|", "|2|"]);
        let past_three = rows(&format!("SELECT x FROM {data} ORDER BY x, __fetch_with_ties(3, 1)")).await;
        assert_eq!(past_three, ["|2|"]);
        let past_four = rows(&format!("SELECT x, y FROM {data} ORDER BY x, __fetch_with_ties(4, 1)")).await;
        assert_eq!(past_four, ["|3|c|"]);
        // Descending, NULLs first: NULL, then 3; two rows and nothing tied.
        let descending =
            rows(&format!("SELECT x FROM {data} ORDER BY x DESC NULLS FIRST, __fetch_with_ties(0, 2)")).await;
        assert_eq!(descending, ["||", "|3|"]);
        // Ordered by a column not selected: y's order, the first row only.
        let hidden = rows(&format!("SELECT x FROM {data} ORDER BY y DESC, __fetch_with_ties(0, 1)")).await;
        assert_eq!(hidden, ["|2|"]);
    }
}
