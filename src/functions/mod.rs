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
mod conditional;
mod conversion;
mod datetime;
mod format;
mod higher_order;
pub mod json;
mod lambda;
mod map_lambda;
mod regexp;
mod simple;
mod string;
mod timestamp;
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
        conversion::functions(),
        datetime::functions(),
        format::functions(),
        json::functions(),
        regexp::functions(),
        string::functions(),
        timestamp::functions(),
        url::functions(),
    ]
    .into_iter()
    .flatten()
    .collect()
}

/// Registers Trino's functions in `registry`, replacing DataFusion's of the same name.
pub fn register(registry: &mut dyn FunctionRegistry) -> Result<()> {
    for f in scalar_functions() {
        registry.register_udf(Arc::new(f))?;
    }
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
