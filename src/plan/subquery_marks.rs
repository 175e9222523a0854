//! `EXISTS` and `IN (subquery)` wherever an expression may stand outside `WHERE` (the
//! select list, `CASE`, an aggregate's `FILTER` or arguments, `ORDER BY`, a window's
//! arguments), and an `IN` inside an expression of `WHERE`, decorrelated into mark
//! joins by an analyzer rule of the coordinator's session.
//!
//! DataFusion 55 decorrelates these only in a filter; anywhere else the physical
//! planner refuses them ("Physical plan does not support logical expression Exists").
//! In a filter, its mark join for an `IN` inside an expression is true or false,
//! never NULL: `WHERE (x IN (...)) IS NULL` drops the rows it should keep (found by
//! the differential tester). `[NOT] IN` and `[NOT] EXISTS` standing alone as a
//! filter's conjunct stay DataFusion's semi and (null-aware) anti joins.
//! Here each becomes a `LeftMark` join of the node's input with the subquery, its
//! correlated predicates pulled up into the join's condition by DataFusion's own
//! `PullUpCorrelatedExpr`, and the expression reads the join's mark column:
//!
//! - `EXISTS (q)` is the mark of a join on the correlation.
//! - `x IN (q)` takes SQL's three values from two marks: true where some row of `q`
//!   equals `x`; otherwise NULL where `x` is NULL (and `q` has rows) or `q` has a
//!   NULL, both found by a second join on `x IS NULL OR y IS NULL`; otherwise false.
//!   `NOT IN` is its negation. (DataFusion's own mark join is true or false only.)
//!
//! - `x op ALL (q)` / `ANY` / `SOME` arrive written (by `correlated_domains`, as
//!   DataFusion's optimizer would) as `CASE` over `EXISTS` of the comparison true,
//!   false or NULL, which follows SQL's NULL rules; those `EXISTS` become marks here.
//!
//! A subquery whose correlation cannot be pulled up is left as it was, and fails as
//! it did. The node keeps its output columns: a node that passes its input's
//! columns through (a sort, a window) is projected back to them.

use std::collections::BTreeSet;
use std::sync::Arc;

use datafusion::common::alias::AliasGenerator;
use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::common::{Column, Result};
use datafusion::logical_expr::expr::{Exists, InSubquery};
use datafusion::logical_expr::expr_rewriter::create_col_from_scalar_expr;
use datafusion::logical_expr::expr_rewriter::NamePreserver;
use datafusion::logical_expr::utils::{conjunction, split_conjunction_owned};
use datafusion::logical_expr::{lit, when, Expr, JoinType, LogicalPlan, LogicalPlanBuilder, Subquery};
use datafusion::optimizer::decorrelate::PullUpCorrelatedExpr;
use datafusion::optimizer::AnalyzerRule;

/// The analyzer rule; see the module's comment. It runs before DataFusion's
/// optimizer decorrelates filters, so that a filter's embedded `IN` is ours.
#[derive(Debug, Default)]
pub struct SubqueryMarks;

impl AnalyzerRule for SubqueryMarks {
    fn name(&self) -> &str {
        "subquery_marks"
    }

    fn analyze(&self, plan: LogicalPlan, _config: &ConfigOptions) -> Result<LogicalPlan> {
        let aliases = Arc::new(AliasGenerator::new());
        plan.transform_up_with_subqueries(|node| rewrite(node, &aliases)).map(|t| t.data)
    }
}

/// Whether `e` is a subquery predicate DataFusion decorrelates right where it stands
/// as a conjunct of a filter: `[NOT] EXISTS`, `IN` at the top, and `NOT IN` of an
/// uncorrelated subquery (its null-aware anti join takes one key only, so a
/// correlated `NOT IN` fails there and is ours).
fn top_level_predicate(e: &Expr) -> bool {
    let correlated = |s: &Subquery| super::dependent_join::reads_outer(&s.subquery);
    match e {
        Expr::Exists(_) => true,
        Expr::InSubquery(InSubquery { subquery, negated, .. }) => !negated || !correlated(subquery),
        Expr::Not(inner) => match inner.as_ref() {
            Expr::Exists(_) => true,
            Expr::InSubquery(InSubquery { subquery, negated, .. }) => *negated || !correlated(subquery),
            _ => false,
        },
        _ => false,
    }
}

fn has_in_subquery(e: &Expr) -> bool {
    e.exists(|e| Ok(matches!(e, Expr::InSubquery(_)))).unwrap_or(false)
}

fn has_predicate_subquery(e: &Expr) -> bool {
    e.exists(|e| Ok(matches!(e, Expr::Exists(_) | Expr::InSubquery(_)))).unwrap_or(false)
}

fn rewrite(plan: LogicalPlan, aliases: &Arc<AliasGenerator>) -> Result<Transformed<LogicalPlan>> {
    if plan.inputs().len() != 1 {
        // A node of several inputs would need to know which input each subquery reads.
        return Ok(Transformed::no(plan));
    }
    let input = plan.inputs()[0].clone();
    let mut marked = Marked { input, aliases: aliases.clone(), changed: false };
    let exprs = match &plan {
        // DataFusion's mark join is true or false only: an `IN` inside an expression
        // (`(x IN (...)) IS NULL`, `NOT (a OR x IN (...))`) would lose its NULLs. The
        // conjuncts DataFusion decorrelates right stay as they are.
        LogicalPlan::Filter(filter) if has_in_subquery(&filter.predicate) => {
            let mut kept = Vec::new();
            for c in split_conjunction_owned(filter.predicate.clone()) {
                match !top_level_predicate(&c) && has_in_subquery(&c) {
                    true => kept.push(c.transform(|e| marked.replace(e))?.data),
                    false => kept.push(c),
                }
            }
            vec![conjunction(kept).unwrap_or_else(|| lit(true))]
        }
        LogicalPlan::Filter(_) => return Ok(Transformed::no(plan)),
        _ if !plan.expressions().iter().any(has_predicate_subquery) => return Ok(Transformed::no(plan)),
        _ => {
            // Names kept: the nodes above read an aggregate's result by its name.
            let names = NamePreserver::new(&plan);
            plan.expressions()
                .into_iter()
                .map(|e| {
                    let name = names.save(&e);
                    e.transform(|e| marked.replace(e)).map(|t| name.restore(t.data))
                })
                .collect::<Result<Vec<_>>>()?
        }
    };
    if !marked.changed {
        return Ok(Transformed::no(plan));
    }
    // The node keeps its output columns: one passing its input's through (a filter,
    // a sort, a window) would show the marks too.
    let columns = plan.schema().columns();
    let mut new = plan.with_new_exprs(exprs, vec![marked.input])?;
    if new.schema().fields().len() != columns.len() {
        new = LogicalPlanBuilder::from(new).project(columns.into_iter().map(Expr::Column))?.build()?;
    }
    Ok(Transformed::yes(new))
}

/// The node's input, growing a mark join per subquery replaced.
struct Marked {
    input: LogicalPlan,
    aliases: Arc<AliasGenerator>,
    changed: bool,
}

/// What a mark join finds in the subquery for a row of the input.
enum Probe<'a> {
    /// Any row (`EXISTS`).
    Any,
    /// A row whose output equals `x` (`x IN`).
    Equal(&'a Expr),
    /// A row whose output is NULL, or any row if `x` is NULL (`x IN` yielding NULL).
    Null(&'a Expr),
}

impl Marked {
    fn replace(&mut self, e: Expr) -> Result<Transformed<Expr>> {
        match e {
            Expr::Exists(Exists { subquery, negated }) => match self.mark(&subquery, Probe::Any)? {
                Some(mark) => {
                    self.changed = true;
                    Ok(Transformed::yes(if negated { !mark } else { mark }))
                }
                None => Ok(Transformed::no(Expr::Exists(Exists { subquery, negated }))),
            },
            Expr::InSubquery(InSubquery { expr, subquery, negated }) => {
                let before = self.input.clone();
                let found = match self.mark(&subquery, Probe::Equal(&expr))? {
                    Some(equal) => self.mark(&subquery, Probe::Null(&expr))?.map(|null| (equal, null)),
                    None => None,
                };
                let Some((equal, null)) = found else {
                    self.input = before;
                    return Ok(Transformed::no(Expr::InSubquery(InSubquery { expr, subquery, negated })));
                };
                self.changed = true;
                let unknown = lit(datafusion::common::ScalarValue::Boolean(None));
                let value = when(equal, lit(true)).when(null, unknown).otherwise(lit(false))?;
                Ok(Transformed::yes(if negated { !value } else { value }))
            }
            other => Ok(Transformed::no(other)),
        }
    }

    /// Joins the input with `subquery` by a mark join finding `probe`; the mark
    /// column, or None where the correlation cannot be pulled up.
    fn mark(&mut self, subquery: &Subquery, probe: Probe) -> Result<Option<Expr>> {
        let plan = subquery.subquery.as_ref();
        let output = match probe {
            Probe::Any => None,
            Probe::Equal(_) | Probe::Null(_) => match plan.head_output_expr()? {
                Some(o) => Some(o),
                None => return Ok(None),
            },
        };
        let in_predicate = match (&probe, &output) {
            (Probe::Equal(x) | Probe::Null(x), Some(y)) => Some(Expr::eq((*x).clone(), y.clone())),
            _ => None,
        };
        let mut pull_up = PullUpCorrelatedExpr::new()
            .with_in_predicate_opt(in_predicate.clone())
            .with_exists_sub_query(in_predicate.is_none());
        let pulled = plan.clone().rewrite(&mut pull_up)?.data;
        if !pull_up.can_pull_up {
            return Ok(None);
        }
        let alias = self.aliases.next("__mark_sq");
        let right = LogicalPlanBuilder::from(pulled).alias(alias.clone())?.build()?;
        let correlated: BTreeSet<Column> = pull_up.correlated_subquery_cols_map.values().flatten().cloned().collect();
        let correlation = match conjunction(pull_up.join_filters) {
            Some(f) => Some(qualified(f, &correlated, &alias)?),
            None => None,
        };
        let found = match (&probe, &output) {
            (Probe::Any, _) => None,
            (Probe::Equal(x), Some(y)) => {
                Some(Expr::eq((*x).clone(), Expr::Column(create_col_from_scalar_expr(y, alias.clone())?)))
            }
            (Probe::Null(x), Some(y)) => {
                let y = Expr::Column(create_col_from_scalar_expr(y, alias.clone())?);
                Some((*x).clone().is_null().or(y.is_null()))
            }
            _ => return Ok(None),
        };
        let condition = match (found, correlation) {
            (Some(f), Some(c)) => f.and(c),
            (Some(f), None) => f,
            (None, Some(c)) => c,
            (None, None) => lit(true),
        };
        self.input = LogicalPlanBuilder::from(self.input.clone())
            .join_on(right, JoinType::LeftMark, Some(condition))?
            .build()?;
        Ok(Some(Expr::Column(Column::new(Some(alias), "mark"))))
    }
}

/// `expr` with the subquery's columns among `columns` qualified by its alias.
fn qualified(expr: Expr, columns: &BTreeSet<Column>, alias: &str) -> Result<Expr> {
    expr.transform(|e| match e {
        Expr::Column(c) if columns.contains(&c) => Ok(Transformed::yes(Expr::Column(Column::new(Some(alias), c.name)))),
        other => Ok(Transformed::no(other)),
    })
    .map(|t| t.data)
}
