//! The rows of a table after a row-level change, as the plan a connector's
//! `begin_row_change` takes (`connector::writes`, the merge paradigm): every row of
//! the table, as it is after the change, with its `RowOperation` in a last column.
//! The plan is an ordinary query, cut into stages and run on workers like any
//! other; the writers write the rows it keeps and count the changed ones (Trino's
//! update count). Called by `planning::writes` for `DELETE` and `UPDATE`, which
//! DataFusion planned as a `Dml` over the table's scan (`base`): `DELETE` a filter,
//! `UPDATE` a projection of the new values over the filter.
//!
//! A predicate without a subquery decides each row in one pass: the operation is
//! `CASE WHEN predicate THEN changed ELSE keep END`, and an updated column `CASE WHEN
//! predicate THEN new value ELSE column END` (a row whose predicate is NULL is kept,
//! as SQL's `WHERE` keeps it out). A subquery (dbt's `delete+insert`: `WHERE key IN
//! (SELECT ...)`, or `EXISTS`) is decorrelated by DataFusion only where it filters,
//! so then the changed rows are the filter's, and the kept ones the table's rows
//! without an equal row among them (an anti join on every column, nulls equal):
//! rows equal in every column are all changed or all kept, as a predicate over a
//! row's values decides.

use datafusion::common::tree_node::{TreeNode, TreeNodeRecursion};
use datafusion::common::{Column, NullEquality, ScalarValue};
use datafusion::logical_expr::{lit, when, Expr, JoinType, LogicalPlan, LogicalPlanBuilder};

use super::planner::{planning_error, QueryError};
use crate::connector::writes::{RowOperation, OPERATION_COLUMN};
use crate::error_code::ErrorCode;

const MATCHED: &str = "__flotilla_matched";

/// The table's rows after `statement` (`DELETE` or `UPDATE`), whose DataFusion plan's
/// input is `input`, each with its operation.
pub(super) fn rows_after(statement: &'static str, input: &LogicalPlan) -> Result<LogicalPlan, QueryError> {
    let (values, filtered) = match (statement, input) {
        ("UPDATE", LogicalPlan::Projection(p)) => (Some(p.expr.clone()), p.input.as_ref()),
        ("UPDATE", _) => return Err(QueryError::new(ErrorCode::GenericInternalError, "an UPDATE without new values")),
        _ => (None, input),
    };
    let (predicate, base) = match filtered {
        LogicalPlan::Filter(f) => (Some(&f.predicate), f.input.as_ref()),
        other => (None, other),
    };
    if !is_table(base) {
        let m = match statement {
            "DELETE" => "DELETE with LIMIT is not supported".to_string(),
            _ => format!("{statement} over more than its table (FROM, joins) is not supported"),
        };
        return Err(QueryError::new(ErrorCode::NotSupported, m));
    }
    let changed = if statement == "DELETE" { RowOperation::Deleted } else { RowOperation::Changed };
    let columns: Vec<Expr> = base.schema().columns().into_iter().map(Expr::Column).collect();
    let values = values.unwrap_or_else(|| columns.clone());
    let built = match predicate {
        None => project(base.clone(), values, operation(changed)),
        Some(p) if !has_subquery(p) && !values.iter().any(has_subquery) => {
            let names = base.schema().fields().iter().map(|f| f.name().clone());
            let chosen = values
                .iter()
                .zip(&columns)
                .zip(names)
                .map(|((value, column), name)| {
                    let value = value.clone().unalias();
                    if value == *column {
                        return Ok(value.alias(name));
                    }
                    Ok(when(p.clone(), value).otherwise(column.clone())?.alias(name))
                })
                .collect::<datafusion::error::Result<Vec<_>>>()
                .map_err(|e| planning_error(&e))?;
            let op = when(p.clone(), operation(changed)).otherwise(operation(RowOperation::Keep));
            project(base.clone(), chosen, op.map_err(|e| planning_error(&e))?)
        }
        Some(_) => with_subquery(base, filtered, values, changed),
    };
    built.map_err(|e| planning_error(&e))
}

/// The rows when the predicate (or a new value) holds a subquery: the filter's rows
/// changed, and the table's other rows kept.
fn with_subquery(
    base: &LogicalPlan,
    filtered: &LogicalPlan,
    values: Vec<Expr>,
    changed: RowOperation,
) -> datafusion::error::Result<LogicalPlan> {
    let columns: Vec<Column> = base.schema().columns();
    let matched_columns: Vec<Column> = columns.iter().map(|c| Column::new(Some(MATCHED), c.name.clone())).collect();
    let matched = LogicalPlanBuilder::from(filtered.clone()).alias(MATCHED)?.build()?;
    let kept = LogicalPlanBuilder::from(base.clone())
        .join_detailed(
            matched,
            JoinType::LeftAnti,
            (columns.clone(), matched_columns),
            None,
            NullEquality::NullEqualsNull,
        )?
        .build()?;
    let kept = project(kept, columns.into_iter().map(Expr::Column).collect(), operation(RowOperation::Keep))?;
    let changed = project(filtered.clone(), values, operation(changed))?;
    LogicalPlanBuilder::from(kept).union(changed)?.build()
}

fn project(input: LogicalPlan, values: Vec<Expr>, op: Expr) -> datafusion::error::Result<LogicalPlan> {
    let exprs = values.into_iter().chain(std::iter::once(op.alias(OPERATION_COLUMN)));
    LogicalPlanBuilder::from(input).project(exprs)?.build()
}

fn operation(op: RowOperation) -> Expr {
    lit(ScalarValue::Int8(Some(op as i8)))
}

/// Whether `plan` is a table's scan, under an alias or not.
fn is_table(plan: &LogicalPlan) -> bool {
    match plan {
        LogicalPlan::TableScan(_) => true,
        LogicalPlan::SubqueryAlias(a) => is_table(&a.input),
        _ => false,
    }
}

fn has_subquery(e: &Expr) -> bool {
    let mut found = false;
    let _ = e.apply(|e| {
        found |= matches!(e, Expr::Exists(_) | Expr::InSubquery(_) | Expr::ScalarSubquery(_));
        Ok(if found { TreeNodeRecursion::Stop } else { TreeNodeRecursion::Continue })
    });
    found
}
