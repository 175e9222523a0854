//! Subqueries correlated on any predicate, decorrelated through the domain of their
//! outer values: the analyzer rule `CorrelatedDomains` (the coordinator's planner
//! registers it before `subquery_marks`).
//!
//! DataFusion 55 decorrelates a subquery by pulling its correlated predicates up into
//! the join with the outer rows, which it cannot do past an aggregation unless each is
//! `inner column = outer expression`: `(SELECT count(*) FROM t WHERE t.x > o.y)` is
//! refused. As in Neumann and Kemper's unnesting, such a subquery is first computed
//! for every distinct outer value at once. Its domain `D`, the distinct values of the
//! outer columns it reads, is cross-joined in under its correlated filter, which then
//! reads `D`'s columns in place of the outer ones; what is left correlated is one
//! equality per outer column, `D.v = o.v`, which DataFusion pulls up past any
//! aggregation, grouping by `D.v` (and mending the empty groups of `count`). An outer
//! column that may be NULL is matched by two keys, `v IS NULL` and `coalesce(v, a
//! default)`, so that a NULL outer value finds its own domain row.
//!
//! The rewrite takes subqueries whose outer references all sit in one filter, with no
//! subquery inside, and otherwise pushes the domain down the whole subquery
//! (`dependent_join`), nested subqueries included; a shape neither takes is left as
//! it was (and fails as it did). A subquery DataFusion decorrelates already is not touched, so the
//! plans of TPC-H and TPC-DS do not change.

use std::collections::HashMap;
use std::sync::Arc;

use datafusion::common::alias::AliasGenerator;
use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::{Transformed, TreeNode, TreeNodeRecursion};
use datafusion::common::{Column, Result, ScalarValue};
use datafusion::functions::core::expr_fn::coalesce;
use datafusion::logical_expr::expr::{Exists, InSubquery};
use datafusion::logical_expr::utils::conjunction;
use datafusion::logical_expr::{lit, Expr, LogicalPlan, LogicalPlanBuilder, Subquery};
use datafusion::optimizer::AnalyzerRule;

use super::dependent_join::{has_subquery, outer_columns, reads_outer, stuck, subquery_in_mut, Domain};

/// The analyzer rule; see the module's comment.
#[derive(Debug, Default)]
pub struct CorrelatedDomains;

impl AnalyzerRule for CorrelatedDomains {
    fn name(&self) -> &str {
        "correlated_domains"
    }

    fn analyze(&self, plan: LogicalPlan, _config: &ConfigOptions) -> Result<LogicalPlan> {
        use datafusion::optimizer::rewrite_set_comparison::RewriteSetComparison;
        use datafusion::optimizer::{OptimizerContext, OptimizerRule};
        // `x > ALL (q)`, `x = ANY (q)`: DataFusion's optimizer writes them as `EXISTS`
        // (one each for a true, a false and a NULL comparison) under a `CASE`, which
        // only a filter decorrelates. Written so here, before this rule and
        // `subquery_marks`, each is a subquery like any other.
        let plan = RewriteSetComparison::new().rewrite(plan, &OptimizerContext::new())?.data;
        decorrelate(plan, &AliasGenerator::new())
    }
}

/// `plan` with each correlated subquery in it that DataFusion cannot pull up
/// decorrelated by its domain where this rule takes its shape; also what
/// `lateral_joins` leaves inside a lateral join's right side.
pub fn decorrelate(plan: LogicalPlan, aliases: &AliasGenerator) -> Result<LogicalPlan> {
    plan.transform_up_with_subqueries(|node| rewrite(node, aliases)).map(|t| t.data)
}

/// Whether `e` holds a correlated subquery, also one correlated only through a
/// subquery inside it (whether DataFusion pulls it up is asked once, where it is
/// rewritten).
fn correlated_subquery(e: &Expr) -> bool {
    e.exists(|e| {
        Ok(matches!(
            e,
            Expr::ScalarSubquery(s) | Expr::Exists(Exists { subquery: s, .. }) | Expr::InSubquery(InSubquery { subquery: s, .. })
                if reads_outer(&s.subquery)
        ))
    })
    .unwrap_or(false)
}

fn rewrite(node: LogicalPlan, aliases: &AliasGenerator) -> Result<Transformed<LogicalPlan>> {
    if node.inputs().len() != 1 || !node.expressions().iter().any(correlated_subquery) {
        return Ok(Transformed::no(node));
    }
    let outer = node.inputs()[0].clone();
    super::rewrite_keeping_names(node, |mut e| {
        // A quantified comparison is left to `subquery_marks`, which takes it whole.
        if matches!(e, Expr::SetComparison(_)) {
            return Ok(Transformed::no(e));
        }
        let scalar = matches!(e, Expr::ScalarSubquery(_));
        let Some(subquery) = subquery_in_mut(&mut e) else { return Ok(Transformed::no(e)) };
        if !stuck(subquery, scalar) {
            return Ok(Transformed::no(e));
        }
        let new = match with_domain(subquery, &outer, aliases, scalar)? {
            Some(new) => Some(new),
            None => pushed_down(subquery, &outer, aliases, scalar)?,
        };
        match new {
            Some(new) => {
                *subquery = new;
                Ok(Transformed::yes(e))
            }
            None => Ok(Transformed::no(e)),
        }
    })
}

/// The one filter of `plan` that holds outer references, if every outer reference is
/// in it and `plan` has no subquery of its own.
fn correlated_filter(plan: &LogicalPlan) -> Option<LogicalPlan> {
    let mut found: Vec<LogicalPlan> = Vec::new();
    let mut nested = false;
    plan.apply(|node| {
        let exprs = node.expressions();
        nested |= exprs.iter().any(has_subquery);
        if exprs.iter().any(Expr::contains_outer) {
            found.push(node.clone());
        }
        Ok(TreeNodeRecursion::Continue)
    })
    .ok()?;
    match (nested, &found[..]) {
        (false, [filter @ LogicalPlan::Filter(_)]) => Some(filter.clone()),
        _ => None,
    }
}

/// `subquery` with its domain joined in under its correlated filter, or None where
/// the shape is not one this rule takes or DataFusion still could not pull it up.
fn with_domain(
    subquery: &Subquery,
    outer: &LogicalPlan,
    aliases: &AliasGenerator,
    scalar: bool,
) -> Result<Option<Subquery>> {
    let plan = subquery.subquery.as_ref();
    let Some(LogicalPlan::Filter(filter)) = correlated_filter(plan) else { return Ok(None) };
    // The outer columns read, each once; all must be the outer node's input's own
    // (a reference to a query further out is not this domain's).
    let mut refs: Vec<(datafusion::arrow::datatypes::FieldRef, Column)> = Vec::new();
    filter.predicate.apply(|e| {
        if let Expr::OuterReferenceColumn(field, column) = e {
            if !refs.iter().any(|(_, c)| c == column) {
                refs.push((field.clone(), column.clone()));
            }
        }
        Ok(TreeNodeRecursion::Continue)
    })?;
    if refs.iter().any(|(_, c)| !outer.schema().has_column(c)) {
        return Ok(None);
    }
    let alias = aliases.next("__domain");
    let values: Vec<Expr> =
        refs.iter().enumerate().map(|(i, (_, c))| Expr::Column(c.clone()).alias(format!("v{i}"))).collect();
    let mut keys = Vec::new();
    let mut equalities = Vec::new();
    let domain_column = |name: String| Expr::Column(Column::new(Some(alias.clone()), name));
    for (i, (field, column)) in refs.iter().enumerate() {
        let value = Expr::Column(Column::new_unqualified(format!("v{i}")));
        let outer_value = Expr::OuterReferenceColumn(field.clone(), column.clone());
        keys.push(value.clone());
        if !field.is_nullable() {
            equalities.push(domain_column(format!("v{i}")).eq(outer_value));
            continue;
        }
        let Ok(default) = ScalarValue::new_default(field.data_type()) else { return Ok(None) };
        keys.push(value.clone().is_null().alias(format!("n{i}")));
        keys.push(coalesce(vec![value, lit(default.clone())]).alias(format!("c{i}")));
        equalities.push(domain_column(format!("n{i}")).eq(outer_value.clone().is_null()));
        equalities.push(domain_column(format!("c{i}")).eq(coalesce(vec![outer_value, lit(default)])));
    }
    let domain = LogicalPlanBuilder::from(outer.clone())
        .project(values)?
        .distinct()?
        .project(keys)?
        .alias(alias.clone())?
        .build()?;
    // The filter reads the domain's values where it read the outer columns.
    let index: HashMap<&Column, usize> = refs.iter().enumerate().map(|(i, (_, c))| (c, i)).collect();
    let local = filter.predicate.clone().transform(|e| match e {
        Expr::OuterReferenceColumn(_, c) => Ok(Transformed::yes(domain_column(format!("v{}", index[&c])))),
        other => Ok(Transformed::no(other)),
    })?;
    let predicate = conjunction(std::iter::once(local.data).chain(equalities)).expect("a predicate");
    let replacement =
        LogicalPlanBuilder::from(filter.input.as_ref().clone()).cross_join(domain)?.filter(predicate)?.build()?;
    let target = LogicalPlan::Filter(filter);
    let Some(rewritten) = replaced(plan, &target, &replacement)? else { return Ok(None) };
    // The subquery answers the columns it did (a node passing its input's through
    // would show the domain's too).
    let rewritten = if rewritten.schema().fields().len() == plan.schema().fields().len() {
        rewritten
    } else {
        let columns = plan.schema().columns().into_iter().map(Expr::Column);
        LogicalPlanBuilder::from(rewritten).project(columns)?.build()?
    };
    let new = Subquery {
        outer_ref_columns: rewritten.all_out_ref_exprs(),
        subquery: Arc::new(rewritten),
        spans: subquery.spans.clone(),
    };
    Ok((!stuck(&new, scalar)).then_some(new))
}

/// `subquery` computed for its whole domain by `dependent_join` and correlated by its
/// domain's values alone, or None where the push-down does not take its shape or
/// DataFusion still could not pull it up. Any shape of the push-down's, where
/// `with_domain`'s one filter is not.
fn pushed_down(
    subquery: &Subquery,
    outer: &LogicalPlan,
    aliases: &AliasGenerator,
    scalar: bool,
) -> Result<Option<Subquery>> {
    let plan = subquery.subquery.as_ref();
    let Some(refs) = outer_columns(plan) else { return Ok(None) };
    let Some(domain) = Domain::new(outer, refs, aliases)? else { return Ok(None) };
    let Some(pushed) = domain.push(plan)? else { return Ok(None) };
    // A subquery inside that read the outer columns now reads the domain's, one
    // level of correlation less: decorrelated here, as this rule's pass has gone by.
    let pushed = decorrelate(pushed, aliases)?;
    let rewritten = LogicalPlanBuilder::from(under_projections(pushed, domain.correlation())?)
        .project(plan.schema().columns().into_iter().map(Expr::Column))?
        .build()?;
    let new = Subquery {
        outer_ref_columns: rewritten.all_out_ref_exprs(),
        subquery: Arc::new(rewritten),
        spans: subquery.spans.clone(),
    };
    Ok((!stuck(&new, scalar)).then_some(new))
}

/// `plan` filtered by `predicate` (which reads only the domain's columns, which every
/// projection of a pushed plan passes on) below its top projections: right above an
/// aggregation, where DataFusion looks for a scalar subquery's.
fn under_projections(plan: LogicalPlan, predicate: Expr) -> Result<LogicalPlan> {
    match plan {
        LogicalPlan::Projection(p) => {
            let input = under_projections(p.input.as_ref().clone(), predicate)?;
            Ok(LogicalPlan::Projection(datafusion::logical_expr::Projection::try_new(p.expr, Arc::new(input))?))
        }
        other => LogicalPlanBuilder::from(other).filter(predicate)?.build(),
    }
}

/// `plan` with `target` replaced, each node above it rebuilt (and its schema with it),
/// or None where `target` is not in `plan`.
fn replaced(plan: &LogicalPlan, target: &LogicalPlan, replacement: &LogicalPlan) -> Result<Option<LogicalPlan>> {
    if plan == target {
        return Ok(Some(replacement.clone()));
    }
    let mut changed = false;
    let mut inputs = Vec::new();
    for input in plan.inputs() {
        match replaced(input, target, replacement)? {
            Some(new) => {
                changed = true;
                inputs.push(new);
            }
            None => inputs.push(input.clone()),
        }
    }
    match changed {
        true => Ok(Some(plan.with_new_exprs(plan.expressions(), inputs)?)),
        false => Ok(None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::prelude::SessionContext;

    fn session(with_rule: bool) -> SessionContext {
        let ctx = SessionContext::new();
        if with_rule {
            ctx.add_analyzer_rule(Arc::new(CorrelatedDomains));
        }
        ctx
    }

    async fn rows(ctx: &SessionContext, sql: &str) -> Vec<String> {
        crate::plan::rule_tests::table_rows(ctx, sql).await.unwrap()
    }

    const T: &str = "(VALUES (1), (2), (NULL), (2)) t(x)";
    const U: &str = "(VALUES (1, 10), (2, 20), (3, 30), (3, 31)) u(y, z)";

    /// Expected by hand, per outer x: the rows of `u` with y > x, and with y < x.
    #[tokio::test]
    async fn scalar_subqueries_correlated_on_inequalities() {
        let ctx = session(true);
        let sql = format!(
            "SELECT x, (SELECT count(*) FROM {U} WHERE u.y > t.x), (SELECT sum(z) FROM {U} WHERE u.y < t.x) \
             FROM {T} ORDER BY x NULLS LAST"
        );
        // x = 1: y in {2, 3, 3}, 3 rows; none below. x = 2 (twice): {3, 3}; y = 1, 10.
        // x = NULL: no comparison holds: 0 and NULL.
        assert_eq!(rows(&ctx, &sql).await, ["|1|3||", "|2|2|10|", "|2|2|10|", "||0||"]);
        // A NULL outer value finds its own row of the domain.
        let sql = format!(
            "SELECT x, (SELECT count(*) FROM {U} WHERE u.y > t.x OR t.x IS NULL) FROM {T} ORDER BY x NULLS LAST"
        );
        assert_eq!(rows(&ctx, &sql).await, ["|1|3|", "|2|2|", "|2|2|", "||4|"]);
        // In a filter, and an EXISTS over an aggregation: x = 1 sees two rows above it
        // with z < 31 (20, 30), x = 2 one (30).
        let sql = format!(
            "SELECT x FROM {T} WHERE EXISTS (SELECT count(*) FROM {U} WHERE u.y > t.x AND z < 31 HAVING count(*) > 1)"
        );
        assert_eq!(rows(&ctx, &sql).await, ["|1|"]);
    }

    /// A subquery DataFusion decorrelates itself is left to it: the plans are equal.
    #[tokio::test]
    async fn equality_correlation_is_left_to_datafusion() {
        let sql = format!("SELECT x FROM {T} WHERE x < (SELECT avg(z) FROM {U} WHERE u.y = t.x)");
        let mut plans = Vec::new();
        for with_rule in [true, false] {
            let df = session(with_rule).sql(&sql).await.unwrap();
            plans.push(df.into_optimized_plan().unwrap().display_indent().to_string());
        }
        assert_eq!(plans[0], plans[1]);
    }
}
