//! `r[2]`: a row's field by its position from 1, as Trino reads a subscript of a row
//! (DataFusion takes any subscript for an array's element and refuses a row). An
//! expression planner, which the session template puts before DataFusion's planner of
//! subscripts so that it sees a row's first; any other subscript it leaves to them.

use datafusion::arrow::datatypes::DataType;
use datafusion::common::{plan_err, DFSchema, Result, ScalarValue};
use datafusion::functions::core::expr_fn::get_field;
use datafusion::logical_expr::planner::{ExprPlanner, PlannerResult, RawFieldAccessExpr};
use datafusion::logical_expr::{Expr, ExprSchemable, GetFieldAccess};

/// The planner; see the module's comment.
#[derive(Debug, Default)]
pub struct RowSubscripts;

impl ExprPlanner for RowSubscripts {
    fn plan_field_access(
        &self,
        access: RawFieldAccessExpr,
        schema: &DFSchema,
    ) -> Result<PlannerResult<RawFieldAccessExpr>> {
        let GetFieldAccess::ListIndex { key } = &access.field_access else {
            return Ok(PlannerResult::Original(access));
        };
        let DataType::Struct(fields) = access.expr.get_type(schema)? else {
            return Ok(PlannerResult::Original(access));
        };
        let position = match key.as_ref() {
            Expr::Literal(v, _) if !v.is_null() => v.cast_to(&DataType::Int64).ok(),
            _ => None,
        };
        let Some(ScalarValue::Int64(Some(position))) = position else {
            return plan_err!("A row's subscript must be a constant integer");
        };
        match usize::try_from(position).ok().filter(|p| (1..=fields.len()).contains(p)) {
            Some(p) => Ok(PlannerResult::Planned(get_field(access.expr, fields[p - 1].name().as_str()))),
            None => plan_err!("Invalid subscript {position} of a row of {} fields", fields.len()),
        }
    }
}
