//! Trino's `TRY(e)`: `e`'s value, or NULL where evaluating it fails with one of the
//! errors Trino's `TRY` catches (division by zero, an invalid cast or function
//! argument, a value out of range). The dialect writes `TRY(e)` as
//! `try_eval(0, _ -> e)` so that `e` comes as a lambda, evaluated here: once over the
//! batch, and only if that fails, row by row to find the rows that fail.

use std::sync::Arc;

use datafusion::arrow::array::{new_null_array, Array, ArrayRef, UInt32Array};
use datafusion::arrow::compute::{cast, concat};
use datafusion::arrow::datatypes::{DataType, Field, FieldRef};
use datafusion::common::{DataFusionError, Result};
use datafusion::logical_expr::{HigherOrderUDF, ValueOrLambda};

use super::higher_order::{apply, lambda_field, lazy_lambda, value_fields, ArgFields, Call};
use super::FunctionError;
use crate::error_code::ErrorCode;

pub fn functions() -> Vec<Arc<HigherOrderUDF>> {
    vec![lazy_lambda("try_eval", parameters, returns, try_eval)]
}

/// The name of `deferred(x)`: `x`, but volatile, so the planner cannot fold it. A cast
/// of a constant that fails is written over it (`plan::casts`): DataFusion would fail
/// the whole statement while planning, where Trino fails only a row that reaches the
/// cast, and never one inside `TRY`, a `CASE` branch not taken or a filtered-out row.
pub const DEFERRED: &str = "__deferred";

pub fn scalar_functions() -> Vec<datafusion::logical_expr::ScalarUDF> {
    use datafusion::logical_expr::{Signature, Volatility};
    let deferred = super::simple::function(
        DEFERRED,
        Signature::any(1, Volatility::Volatile),
        |types| Ok(types[0].clone()),
        |args| Ok(args[0].clone()),
    );
    let nan_as_null = super::simple::function(
        NAN_AS_NULL,
        Signature::any(1, Volatility::Immutable),
        |types| Ok(types[0].clone()),
        nan_as_null,
    );
    vec![deferred, nan_as_null]
}

/// The name of `nan_as_null(x)`: `x`, but NULL where it is NaN. Trino's `min_by`,
/// `max_by` and their forms with a count skip a key that is NaN as they skip one that is
/// NULL (`dialect::calls` writes them over it); for a key of any other type it is `x`.
pub const NAN_AS_NULL: &str = "__nan_as_null";

fn nan_as_null(args: &[ArrayRef]) -> Result<ArrayRef> {
    use datafusion::arrow::array::{AsArray, BooleanArray};
    use datafusion::arrow::datatypes::{Float32Type, Float64Type};
    let values = &args[0];
    let nans: BooleanArray = match values.data_type() {
        DataType::Float64 => {
            values.as_primitive::<Float64Type>().iter().map(|v| Some(v.is_some_and(f64::is_nan))).collect()
        }
        DataType::Float32 => {
            values.as_primitive::<Float32Type>().iter().map(|v| Some(v.is_some_and(f32::is_nan))).collect()
        }
        _ => return Ok(values.clone()),
    };
    Ok(datafusion::arrow::compute::nullif(values, &nans)?)
}

fn parameters(fields: ArgFields) -> Result<Vec<Vec<FieldRef>>> {
    Ok(vec![value_fields(fields)])
}

fn returns(fields: &[ValueOrLambda<FieldRef, FieldRef>]) -> Result<FieldRef> {
    Ok(Arc::new(Field::new("try", lambda_field(fields, 0)?.data_type().clone(), true)))
}

/// Whether `e` is one of the failures `TRY` turns into NULL: a function's invalid
/// argument or cast, a division by zero, a value out of range, a failed cast.
fn caught(e: &DataFusionError) -> bool {
    use datafusion::arrow::error::ArrowError;
    let function_error = |inner: &(dyn std::error::Error + Send + Sync + 'static)| {
        inner.downcast_ref::<FunctionError>().is_some_and(|f| {
            matches!(
                f.code,
                ErrorCode::InvalidFunctionArgument
                    | ErrorCode::InvalidCastArgument
                    | ErrorCode::DivisionByZero
                    | ErrorCode::NumericValueOutOfRange
            )
        })
    };
    match e.find_root() {
        DataFusionError::External(inner) => function_error(inner.as_ref()),
        DataFusionError::ArrowError(a, _) => match a.as_ref() {
            ArrowError::ExternalError(inner) => function_error(inner.as_ref()),
            ArrowError::DivideByZero
            | ArrowError::ArithmeticOverflow(_)
            | ArrowError::CastError(_)
            | ArrowError::ParseError(_)
            | ArrowError::ComputeError(_) => true,
            _ => false,
        },
        DataFusionError::Execution(m) => m.contains("overflow") || m.contains("Overflow"),
        _ => false,
    }
}

fn try_eval(call: &Call) -> Result<ArrayRef> {
    let rows = call.values[0].len();
    let data_type: &DataType = call.return_field.data_type();
    let all = UInt32Array::from((0..rows as u32).collect::<Vec<_>>());
    match apply(call.lambdas[0], &[call.values[0].clone()], &all) {
        Ok(out) => Ok(cast(&out, data_type)?),
        Err(e) if caught(&e) => {
            let mut pieces = Vec::with_capacity(rows);
            for row in 0..rows as u32 {
                let one = UInt32Array::from(vec![row]);
                let param = call.values[0].slice(row as usize, 1);
                pieces.push(match apply(call.lambdas[0], &[param], &one) {
                    Ok(v) => cast(&v, data_type)?,
                    Err(e) if caught(&e) => new_null_array(data_type, 1),
                    Err(e) => return Err(e),
                });
            }
            let refs: Vec<&dyn Array> = pieces.iter().map(|p| p.as_ref()).collect();
            Ok(concat(&refs)?)
        }
        Err(e) => Err(e),
    }
}
