//! `__fetch_with_ties(offset, count)`, the mark `dialect::query_clauses` writes at the
//! end of the `ORDER BY` of a query with `OFFSET m FETCH FIRST n ROWS WITH TIES`:
//! DataFusion's planner keeps it in the sort it plans for that `ORDER BY`, where the
//! analyzer rule `plan::fetch_ties` finds it and keeps the rows by their rank instead.
//! It is never evaluated in a plan that rule has seen.

use datafusion::arrow::array::ArrayRef;
use datafusion::arrow::datatypes::DataType;
use datafusion::common::{internal_err, Result};
use datafusion::logical_expr::ScalarUDF;

use super::simple::fixed;

/// The mark's name.
pub const NAME: &str = "__fetch_with_ties";

pub fn functions() -> Vec<ScalarUDF> {
    vec![fixed(NAME, vec![DataType::Int64, DataType::Int64], DataType::Int64, unplanned)]
}

fn unplanned(_: &[ArrayRef]) -> Result<ArrayRef> {
    internal_err!("FETCH FIRST ... WITH TIES reached execution unplanned")
}
