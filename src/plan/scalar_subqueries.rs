//! Scalar subqueries as Trino has them: any query of one column may be one, correlated
//! or not, aggregated or not; it is NULL when it has no row and fails with
//! `SUBQUERY_MULTIPLE_ROWS` when it has more than one for a row that reads it.
//!
//! DataFusion 55 refuses a correlated scalar subquery that is not aggregated ("must
//! be aggregated to return at most one row"), and turns an uncorrelated one into a
//! left join on `true` (we keep it off its shared-memory `ScalarSubqueryExec`, which a
//! cut into stages breaks), where a second row would silently double the outer rows.
//! The analyzer rule `ScalarSubqueries` (the coordinator's planner registers it) puts
//! every scalar subquery that may have more than one row under an aggregation of
//! `single_value`, a row of its one value and whether there were more; DataFusion then
//! decorrelates it like any aggregated subquery, grouped by its correlation, and the
//! outer expression reads it through `checked_single`, which fails on "more". The
//! check is where the outer row reads the answer, not in the aggregation: a group of
//! several rows that no outer row asks for is no error, as in Trino.

use std::sync::Arc;

use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::common::{Column, Result};
use datafusion::logical_expr::expr::{AggregateFunction, ScalarFunction};
use datafusion::logical_expr::{Expr, LogicalPlan, LogicalPlanBuilder, Subquery};
use datafusion::optimizer::AnalyzerRule;

use crate::functions::single_value::{checked_single, single_value};

/// The analyzer rule; see the module's comment.
#[derive(Debug, Default)]
pub struct ScalarSubqueries;

impl AnalyzerRule for ScalarSubqueries {
    fn name(&self) -> &str {
        "scalar_subqueries"
    }

    fn analyze(&self, plan: LogicalPlan, _config: &ConfigOptions) -> Result<LogicalPlan> {
        plan.transform_up_with_subqueries(|node| {
            if !node.expressions().iter().any(has_multirow_subquery) {
                return Ok(Transformed::no(node));
            }
            super::rewrite_keeping_names(node, |e| match e {
                Expr::ScalarSubquery(s) if may_have_rows(&s.subquery) => checked(s).map(Transformed::yes),
                other => Ok(Transformed::no(other)),
            })
        })
        .map(|t| t.data)
    }
}

fn has_multirow_subquery(e: &Expr) -> bool {
    e.exists(|e| Ok(matches!(e, Expr::ScalarSubquery(s) if may_have_rows(&s.subquery)))).unwrap_or(false)
}

/// Whether `plan` may answer more than one row: not an aggregation without grouping
/// (under projections, aliases and a `HAVING`) nor an uncorrelated plan bounded to one
/// row. A correlated `LIMIT 1` is one row per outer row only until it is decorrelated
/// (`dependent_join` numbers the rows of all outer rows at once), and DataFusion takes
/// a correlated scalar subquery only as an aggregation.
fn may_have_rows(plan: &LogicalPlan) -> bool {
    if plan.max_rows().is_some_and(|n| n <= 1) && !super::dependent_join::reads_outer(plan) {
        return false;
    }
    match plan {
        LogicalPlan::Projection(p) => may_have_rows(&p.input),
        LogicalPlan::SubqueryAlias(a) => may_have_rows(&a.input),
        LogicalPlan::Filter(f) => may_have_rows(&f.input),
        LogicalPlan::Aggregate(a) => !a.group_expr.is_empty(),
        _ => true,
    }
}

/// `checked_single` of `subquery` answering `single_value` of its column.
fn checked(subquery: Subquery) -> Result<Expr> {
    let plan = subquery.subquery.as_ref().clone();
    let (qualifier, field) = plan.schema().qualified_field(0);
    let name = field.name().clone();
    let column = Expr::Column(Column::new(qualifier.cloned(), name.clone()));
    let call = AggregateFunction::new_udf(Arc::new(single_value()), vec![column], false, None, vec![], None);
    let answered = LogicalPlanBuilder::from(plan)
        .aggregate(Vec::<Expr>::new(), vec![Expr::AggregateFunction(call).alias(name)])?
        .build()?;
    let subquery = Expr::ScalarSubquery(Subquery { subquery: Arc::new(answered), ..subquery });
    Ok(Expr::ScalarFunction(ScalarFunction::new_udf(Arc::new(checked_single()), vec![subquery])))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::error_code::ErrorCode;
    use crate::plan::checked_arithmetic::arithmetic_error_code;
    use datafusion::prelude::{SessionConfig, SessionContext};

    /// A session as the coordinator's plans it: uncorrelated subqueries as joins.
    pub(crate) fn session() -> SessionContext {
        let mut config = SessionConfig::new().with_target_partitions(2);
        config.options_mut().optimizer.enable_physical_uncorrelated_scalar_subquery = false;
        let ctx = SessionContext::new_with_config(config);
        ctx.register_udaf(single_value());
        ctx.register_udf(checked_single());
        ctx.add_analyzer_rule(Arc::new(ScalarSubqueries));
        ctx
    }

    async fn rows(ctx: &SessionContext, sql: &str) -> Result<Vec<String>> {
        crate::plan::rule_tests::table_rows(ctx, sql).await
    }

    const T: &str = "(VALUES (1, 'a'), (2, 'b'), (3, NULL)) t(k, v)";
    const U: &str = "(VALUES (1, 'x'), (2, 'y'), (2, 'z'), (4, 'w')) u(k, w)";

    /// Expected by hand: key 1 has one row in `u` (x), 3 has none (NULL).
    #[tokio::test]
    async fn an_unaggregated_subquery_answers_its_one_row() {
        let ctx = session();
        let sql = format!("SELECT k, (SELECT w FROM {U} WHERE u.k = t.k) FROM {T} WHERE k <> 2 ORDER BY k");
        assert_eq!(rows(&ctx, &sql).await.unwrap(), ["|1|x|", "|3||"]);
        // Key 2's two rows are no error where no outer row reads them; `u`'s rows
        // under `WHERE false` are none, and an aggregate stays as it was.
        let sql = format!("SELECT (SELECT w FROM {U} WHERE false), (SELECT count(*) FROM {U} WHERE u.k = 2)");
        assert_eq!(rows(&ctx, &sql).await.unwrap(), ["||2|"]);
    }

    #[tokio::test]
    async fn a_second_row_for_a_row_that_reads_it_is_subquery_multiple_rows() {
        let ctx = session();
        for sql in [
            format!("SELECT k, (SELECT w FROM {U} WHERE u.k = t.k) FROM {T}"),
            format!("SELECT (SELECT w FROM {U})"),
            format!("SELECT k FROM {T} WHERE v = (SELECT w FROM {U} WHERE u.k > 1)"),
        ] {
            let e = rows(&ctx, &sql).await.expect_err(&sql);
            assert_eq!(arithmetic_error_code(&e), Some(ErrorCode::SubqueryMultipleRows), "{sql}: {e}");
        }
    }
}
