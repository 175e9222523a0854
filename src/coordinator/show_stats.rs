//! Trino's `SHOW STATS FOR table` and `SHOW STATS FOR (query)`: one row per column
//! (`column_name`, `data_size`, `distinct_values_count`, `nulls_fraction`, `row_count`,
//! `low_value`, `high_value`) and a last row, without a column name, with the row
//! count. The figures are the statistics the planner has: for files, their footers'
//! (row counts, null counts, minimum and maximum); a figure not known is NULL, as in
//! Trino. Called by `planning::plan_here` with the plan of `SELECT * FROM t` or of
//! the query, planned as any query is: checked, bounded, on a planning thread.

use std::sync::Arc;

use datafusion::arrow::array::{Float64Array, RecordBatch, StringArray};
use datafusion::arrow::datatypes::{DataType, Field, Schema};
use datafusion::common::stats::Precision;
use datafusion::common::{ScalarValue, TableReference};
use datafusion::physical_plan::ExecutionPlan;

use super::planner::{planning_error, QueryError};
use crate::error_code::ErrorCode;

/// What `SHOW STATS FOR` describes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StatsTarget {
    Table(TableReference),
    /// A query's text.
    Query(String),
}

impl StatsTarget {
    /// The query whose plan's statistics answer.
    pub fn query(self) -> String {
        match self {
            StatsTarget::Table(t) => format!("SELECT * FROM {}", t.to_quoted_string()),
            StatsTarget::Query(q) => q,
        }
    }
}

/// The answer from `plan`'s statistics (the plan of the table's `SELECT *`, or of
/// the query).
pub fn answer(plan: &Arc<dyn ExecutionPlan>) -> Result<RecordBatch, QueryError> {
    use datafusion::physical_plan::{StatisticsArgs, StatisticsContext};
    let stats =
        StatisticsContext::new().compute(plan.as_ref(), &StatisticsArgs::new()).map_err(|e| planning_error(&e))?;
    let rows = value(&stats.num_rows);
    let schema = plan.schema();
    let (mut names, mut sizes, mut distinct, mut nulls, mut low, mut high) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for (field, column) in schema.fields().iter().zip(&stats.column_statistics) {
        names.push(Some(field.name().clone()));
        let text = matches!(field.data_type(), DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View);
        sizes.push(if text { value(&column.byte_size) } else { None });
        distinct.push(value(&column.distinct_count));
        nulls.push(match (value(&column.null_count), rows) {
            (Some(n), Some(r)) if r > 0.0 => Some(n / r),
            (Some(_), Some(_)) => Some(0.0),
            _ => None,
        });
        // Trino gives bounds for ordered types other than text.
        let bound = |p: &Precision<ScalarValue>| match p.get_value() {
            Some(v) if !text && !v.is_null() => Some(v.to_string()),
            _ => None,
        };
        low.push(bound(&column.min_value));
        high.push(bound(&column.max_value));
    }
    let columns = names.len();
    names.push(None);
    for v in [&mut sizes, &mut distinct, &mut nulls] {
        v.push(None);
    }
    low.push(None);
    high.push(None);
    let mut row_count = vec![None; columns];
    row_count.push(rows);
    let schema = Schema::new(vec![
        Field::new("column_name", DataType::Utf8, true),
        Field::new("data_size", DataType::Float64, true),
        Field::new("distinct_values_count", DataType::Float64, true),
        Field::new("nulls_fraction", DataType::Float64, true),
        Field::new("row_count", DataType::Float64, true),
        Field::new("low_value", DataType::Utf8, true),
        Field::new("high_value", DataType::Utf8, true),
    ]);
    RecordBatch::try_new(
        Arc::new(schema),
        vec![
            Arc::new(StringArray::from(names)),
            Arc::new(Float64Array::from(sizes)),
            Arc::new(Float64Array::from(distinct)),
            Arc::new(Float64Array::from(nulls)),
            Arc::new(Float64Array::from(row_count)),
            Arc::new(StringArray::from(low)),
            Arc::new(StringArray::from(high)),
        ],
    )
    .map_err(|e| QueryError::new(ErrorCode::GenericInternalError, e.to_string()))
}

fn value(p: &Precision<usize>) -> Option<f64> {
    p.get_value().map(|v| *v as f64)
}
