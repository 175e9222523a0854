//! Trino's `SHOW STATS FOR table` and `SHOW STATS FOR (query)`: one row per column
//! (`column_name`, `data_size`, `distinct_values_count`, `nulls_fraction`, `row_count`,
//! `low_value`, `high_value`) and a last row, without a column name, with the row
//! count. The figures are the statistics the planner has: for files, their footers'
//! (row counts, null counts, minimum and maximum); a figure not known is NULL, as in
//! Trino. Called by `metadata::run`.

use std::sync::Arc;

use datafusion::arrow::array::{Float64Array, RecordBatch, StringArray};
use datafusion::arrow::datatypes::{DataType, Field, Schema};
use datafusion::common::stats::Precision;
use datafusion::common::ScalarValue;
use datafusion::physical_plan::ExecutionPlan;

use super::metadata::{Scope, StatsTarget};
use super::planner::{planning_error, QueryError};
use crate::error_code::ErrorCode;

pub async fn show_stats(scope: &Scope<'_>, target: &StatsTarget) -> Result<RecordBatch, QueryError> {
    let plan = match target {
        StatsTarget::Table(table) => {
            let table = scope.qualified(table);
            scope.check_read(&table)?;
            let provider = scope.ctx.table_provider(table).await.map_err(|e| planning_error(&e))?;
            provider.scan(&scope.ctx.state(), None, &[], None).await.map_err(|e| planning_error(&e))?
        }
        StatsTarget::Query(sql) => query_plan(scope, sql).await?,
    };
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

/// The physical plan of `sql`, a query, with its tables checked against the rules.
async fn query_plan(scope: &Scope<'_>, sql: &str) -> Result<Arc<dyn ExecutionPlan>, QueryError> {
    let state = scope.ctx.state();
    let options = state.config().options();
    let session = super::planning::session_values(&state, &scope.spec.user, scope.access);
    let statement = super::dialect::parse_in(sql, options.sql_parser.recursion_limit.get(), &session)
        .map_err(|e| planning_error(&e))?;
    let logical = state.statement_to_plan(statement).await.map_err(|e| planning_error(&e))?;
    // `sql_parser` read it as a query: it writes nothing.
    if let Some(access) = scope.access {
        let defaults = &options.catalog;
        let accesses =
            super::planning::accesses(&logical, scope.connectors, &defaults.default_catalog, &defaults.default_schema);
        access.check(&accesses)?;
    }
    state.create_physical_plan(&logical).await.map_err(|e| planning_error(&e))
}
