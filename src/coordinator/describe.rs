//! Trino's `DESCRIBE INPUT name` (each `?` parameter of a prepared statement: its
//! position and the type the planner infers for it, `unknown` where it cannot) and
//! `DESCRIBE OUTPUT name` (each column the statement answers: its name, the table it
//! is read from when it is one of that table's columns, its type, its width in bytes
//! for fixed-width types and 0 for the others, and whether it is aliased). Called by
//! `planning::plan_here` with the prepared statement's logical plan; the statement is
//! planned with its `?`s numbered (`$1`, `$2`, ...), so each is its own parameter.

use std::sync::Arc;

use datafusion::arrow::array::{ArrayRef, BooleanArray, Int64Array, RecordBatch, StringArray};
use datafusion::arrow::datatypes::{DataType, Field, Schema};
use datafusion::common::tree_node::TreeNode;
use datafusion::common::TableReference;
use datafusion::logical_expr::{Expr, LogicalPlan};

use super::planner::{planning_error, QueryError};
use crate::error_code::ErrorCode;
use crate::format::trino_type;

/// `DESCRIBE INPUT`: `Position`, `Type`.
pub fn input(logical: &LogicalPlan) -> Result<RecordBatch, QueryError> {
    let types = logical.get_parameter_types().map_err(|e| planning_error(&e))?;
    let mut params: Vec<(i64, String)> = types
        .into_iter()
        .filter_map(|(id, t)| {
            let position = id.strip_prefix('$')?.parse::<i64>().ok()?;
            Some((position - 1, t.map_or_else(|| "unknown".to_string(), |t| trino_type(&t))))
        })
        .collect();
    params.sort();
    let schema =
        Schema::new(vec![Field::new("Position", DataType::Int64, false), Field::new("Type", DataType::Utf8, false)]);
    let columns: Vec<ArrayRef> = vec![
        Arc::new(Int64Array::from_iter_values(params.iter().map(|p| p.0))),
        Arc::new(StringArray::from_iter_values(params.iter().map(|p| p.1.as_str()))),
    ];
    RecordBatch::try_new(Arc::new(schema), columns).map_err(internal)
}

/// `DESCRIBE OUTPUT`: `Column Name`, `Catalog`, `Schema`, `Table`, `Type`, `Type
/// Size`, `Aliased`. A statement that answers no rows of its own (DDL) has none.
pub fn output(logical: &LogicalPlan, defaults: (&str, &str)) -> Result<RecordBatch, QueryError> {
    let answers_rows = !matches!(logical, LogicalPlan::Ddl(_) | LogicalPlan::Statement(_));
    let mut rows = Vec::new();
    if answers_rows {
        let exprs = top_projection(logical);
        for (i, field) in logical.schema().fields().iter().enumerate() {
            let expr = exprs.and_then(|e| e.get(i));
            let aliased = matches!(expr, Some(Expr::Alias(_)));
            let unaliased = match expr {
                Some(Expr::Alias(a)) => Some(a.expr.as_ref()),
                other => other,
            };
            let source = match unaliased {
                Some(Expr::Column(c)) => c.relation.as_ref().and_then(|r| scanned_table(logical, r)),
                _ => None,
            };
            let (catalog, schema, table) = match &source {
                Some(t) => (
                    t.catalog().unwrap_or(defaults.0).to_string(),
                    t.schema().unwrap_or(defaults.1).to_string(),
                    t.table().to_string(),
                ),
                None => Default::default(),
            };
            let size = field.data_type().primitive_width().map_or(0, |w| w as i64);
            let size = if *field.data_type() == DataType::Boolean { 1 } else { size };
            rows.push((field.name().clone(), catalog, schema, table, trino_type(field.data_type()), size, aliased));
        }
    }
    let text = |f: fn(&Row) -> &str| Arc::new(StringArray::from_iter_values(rows.iter().map(f))) as ArrayRef;
    let schema = Schema::new(vec![
        Field::new("Column Name", DataType::Utf8, false),
        Field::new("Catalog", DataType::Utf8, false),
        Field::new("Schema", DataType::Utf8, false),
        Field::new("Table", DataType::Utf8, false),
        Field::new("Type", DataType::Utf8, false),
        Field::new("Type Size", DataType::Int64, false),
        Field::new("Aliased", DataType::Boolean, false),
    ]);
    let columns = vec![
        text(|r| &r.0),
        text(|r| &r.1),
        text(|r| &r.2),
        text(|r| &r.3),
        text(|r| &r.4),
        Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.5))) as ArrayRef,
        Arc::new(BooleanArray::from(rows.iter().map(|r| r.6).collect::<Vec<_>>())) as ArrayRef,
    ];
    RecordBatch::try_new(Arc::new(schema), columns).map_err(internal)
}

type Row = (String, String, String, String, String, i64, bool);

/// The expressions of the projection that makes the statement's columns, under any
/// sort or limit.
fn top_projection(plan: &LogicalPlan) -> Option<&Vec<Expr>> {
    match plan {
        LogicalPlan::Projection(p) => Some(&p.expr),
        LogicalPlan::Sort(s) => top_projection(&s.input),
        LogicalPlan::Limit(l) => top_projection(&l.input),
        _ => None,
    }
}

/// The table scanned under the name `relation`, when a scan (not a subquery's alias)
/// has that name.
fn scanned_table(plan: &LogicalPlan, relation: &TableReference) -> Option<TableReference> {
    let mut found = None;
    let _ = plan.apply(|p| {
        if let LogicalPlan::TableScan(scan) = p {
            if scan.table_name == *relation {
                found = Some(scan.table_name.clone());
                return Ok(datafusion::common::tree_node::TreeNodeRecursion::Stop);
            }
        }
        Ok(datafusion::common::tree_node::TreeNodeRecursion::Continue)
    });
    found
}

fn internal(e: datafusion::arrow::error::ArrowError) -> QueryError {
    QueryError::new(ErrorCode::GenericInternalError, e.to_string())
}
