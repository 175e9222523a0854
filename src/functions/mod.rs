//! Trino's function library on DataFusion: the functions Trino documents that
//! DataFusion lacks or spells differently, registered on every node (the coordinator's
//! session template, each worker's task context) so that a plan naming them decodes
//! anywhere. Each document of Trino's has its module; `simple` holds the plumbing of
//! functions computed array in, array out.
//!
//! Where DataFusion has a function of the same name with other semantics, Trino's
//! replaces it (the README lists them): `regexp_replace` replaces every match.

mod array;
mod array_lambda;
mod bitwise;
pub mod bounded;
pub mod conditional;
mod conversion;
mod datetime;
mod element_at;
pub mod extremes;
pub mod fetch_ties;
mod fields;
mod format;
mod higher_order;
pub mod json;
mod lambda;
mod map_lambda;
mod math;
pub mod merge_rows;
mod regexp;
pub mod row_names;
pub mod row_subscript;
pub(crate) mod simple;
pub mod single_value;
mod string;
mod text;
mod timestamp;
pub mod types;
pub mod unnest;
mod url;

use std::sync::Arc;

use datafusion::common::{DataFusionError, Result};
use datafusion::execution::FunctionRegistry;
use datafusion::logical_expr::ScalarUDF;

use crate::error_code::ErrorCode;

/// A function's failure with Trino's error code (`INVALID_FUNCTION_ARGUMENT`, ...).
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct FunctionError {
    pub code: ErrorCode,
    pub message: String,
}

/// `INVALID_FUNCTION_ARGUMENT` with `message`, as a DataFusion error.
pub fn invalid_argument(message: impl Into<String>) -> DataFusionError {
    DataFusionError::External(Box::new(FunctionError {
        code: ErrorCode::InvalidFunctionArgument,
        message: message.into(),
    }))
}

/// `INVALID_CAST_ARGUMENT` with `message`: a value that cannot be cast (`CAST(JSON '42' AS DATE)`).
pub fn invalid_cast(message: impl Into<String>) -> DataFusionError {
    DataFusionError::External(Box::new(FunctionError { code: ErrorCode::InvalidCastArgument, message: message.into() }))
}

/// The same inside an Arrow kernel's closure.
pub fn invalid_argument_arrow(message: impl Into<String>) -> datafusion::arrow::error::ArrowError {
    let error = FunctionError { code: ErrorCode::InvalidFunctionArgument, message: message.into() };
    datafusion::arrow::error::ArrowError::ExternalError(Box::new(error))
}

fn scalar_functions() -> Vec<ScalarUDF> {
    [
        array::functions(),
        bitwise::functions(),
        conditional::scalar_functions(),
        conversion::functions(),
        datetime::functions(),
        element_at::functions(),
        fetch_ties::functions(),
        fields::functions(),
        math::functions(),
        text::functions(),
        format::functions(),
        json::functions(),
        regexp::functions(),
        row_names::functions(),
        string::functions(),
        timestamp::functions(),
        unnest::functions(),
        url::functions(),
    ]
    .into_iter()
    .flatten()
    .collect()
}

/// Trino's names of DataFusion's scalar functions: (Trino's, DataFusion's). `sequence`,
/// DataFusion's `generate_series` under Trino's limit, is registered by `register`.
const SCALAR_ALIASES: [(&str, &str); 5] = [
    ("ceiling", "ceil"),
    ("sign", "signum"),
    ("truncate", "trunc"),
    ("is_nan", "isnan"),
    ("levenshtein_distance", "levenshtein"),
];

/// Trino's names of DataFusion's aggregate functions.
const AGGREGATE_ALIASES: [(&str, &str); 7] = [
    ("arbitrary", "any_value"),
    ("every", "bool_and"),
    ("variance", "var"),
    ("bitwise_and_agg", "bit_and"),
    ("bitwise_or_agg", "bit_or"),
    ("bitwise_xor_agg", "bit_xor"),
    ("approx_percentile", "approx_percentile_cont"),
];

/// Registers Trino's functions in `registry`, replacing DataFusion's of the same name.
pub fn register(registry: &mut dyn FunctionRegistry) -> Result<()> {
    for (alias, name) in SCALAR_ALIASES {
        let f = registry.udf(name)?;
        registry.register_udf(Arc::new(f.as_ref().clone().with_aliases([alias])))?;
    }
    for (alias, name) in AGGREGATE_ALIASES {
        let f = registry.udaf(name)?;
        registry.register_udaf(Arc::new(f.as_ref().clone().with_aliases([alias])))?;
    }
    for f in scalar_functions() {
        registry.register_udf(Arc::new(f))?;
    }
    // Trino's `min` / `max` of floats, which skip NaN (`plan::nan_extremes`).
    for f in extremes::functions() {
        registry.register_udaf(Arc::new(f))?;
    }
    // Scalar subqueries' one row, checked where it is read (`plan::scalar_subqueries`).
    registry.register_udaf(Arc::new(single_value::single_value()))?;
    registry.register_udf(Arc::new(single_value::checked_single()))?;
    // A MERGE's row ids and its check of rows matched twice (`coordinator::merge`).
    for f in merge_rows::functions() {
        registry.register_udf(Arc::new(f))?;
    }
    // Last, so that a function of the library replacing DataFusion's is bounded too;
    // `sequence` wraps DataFusion's own `generate_series`, not its bounded one.
    let series = registry.udf("generate_series")?;
    registry.register_udf(Arc::new(bounded::Bounded::sequence(series.as_ref())))?;
    for (name, growth) in bounded::BOUNDED {
        let f = registry.udf(name)?;
        registry.register_udf(Arc::new(bounded::Bounded::wrap(&f, growth)))?;
    }
    // Trino's `repeat(x, n)` is an array of `n` copies of `x` (DataFusion's repeats a
    // string, which Trino has no function for): the bounded `array_repeat`.
    let array_repeat = registry.udf("array_repeat")?;
    registry.register_udf(Arc::new(array_repeat.as_ref().clone().with_aliases(["repeat"])))?;
    let lambdas = [
        lambda::functions(),
        array_lambda::functions(),
        map_lambda::functions(),
        conditional::functions(),
        regexp::lambda_functions(),
    ];
    for f in lambdas.into_iter().flatten() {
        registry.register_higher_order_function(f)?;
    }
    Ok(())
}

#[cfg(test)]
#[path = "functions_tests.rs"]
mod tests;
