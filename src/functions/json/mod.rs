//! Trino's JSON: the `JSON` type (`value`), its path language (`path`), the older
//! `json_*` functions (`legacy`) and the SQL/JSON ones with their clauses (`sql`),
//! and the two casts the planner rewrites `CAST` into (`cast_to_json`,
//! `cast_from_json`). Every function here reads JSON given as `json` or `varchar`.

mod legacy;
pub mod path;
mod sql;
pub mod value;

use std::fmt;
use std::sync::Arc;

use datafusion::arrow::array::{ArrayRef, StringArray};
use datafusion::arrow::datatypes::{DataType, Field, FieldRef};
use datafusion::common::{Result, ScalarValue};
use datafusion::logical_expr::{
    ColumnarValue, ReturnFieldArgs, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, Volatility,
};

pub use value::{is_json, json_field};

/// How a JSON function's result field follows from its call.
#[derive(Clone, Copy)]
enum Returns {
    /// A `json` value.
    Json,
    /// A value of a fixed type.
    Fixed(fn() -> DataType),
    /// The field of the argument at this position (`cast_from_json`'s typed NULL).
    Argument(usize),
    /// Decided by the options string (`RETURNING`), the argument at this position.
    Options(usize),
}

/// Computes a result array from the argument arrays and their fields.
type Eval = fn(&[ArrayRef], &[FieldRef]) -> Result<ArrayRef>;

pub struct JsonFunction {
    name: &'static str,
    signature: Signature,
    returns: Returns,
    eval: Eval,
}

impl PartialEq for JsonFunction {
    fn eq(&self, other: &Self) -> bool {
        self.name == other.name
    }
}

impl Eq for JsonFunction {}

impl std::hash::Hash for JsonFunction {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.name.hash(state);
    }
}

impl fmt::Debug for JsonFunction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("JsonFunction").field("name", &self.name).finish()
    }
}

fn function(name: &'static str, signature: Signature, returns: Returns, eval: Eval) -> ScalarUDF {
    ScalarUDF::new_from_impl(JsonFunction { name, signature, returns, eval })
}

/// A function of `arity` arguments of any type (each is cast where it is read).
fn any(name: &'static str, arity: usize, returns: Returns, eval: Eval) -> ScalarUDF {
    function(name, Signature::any(arity, Volatility::Immutable), returns, eval)
}

impl ScalarUDFImpl for JsonFunction {
    fn name(&self) -> &str {
        self.name
    }
    fn signature(&self) -> &Signature {
        &self.signature
    }
    fn return_type(&self, _args: &[DataType]) -> Result<DataType> {
        datafusion::common::internal_err!("{} answers its field from return_field_from_args", self.name)
    }
    fn return_field_from_args(&self, args: ReturnFieldArgs) -> Result<FieldRef> {
        Ok(match self.returns {
            Returns::Json => Arc::new(json_field(self.name)),
            Returns::Fixed(t) => Arc::new(Field::new(self.name, t(), true)),
            Returns::Argument(i) => {
                Arc::new(args.arg_fields[i].as_ref().clone().with_name(self.name).with_nullable(true))
            }
            Returns::Options(i) => {
                let options = match args.scalar_arguments.get(i) {
                    Some(Some(ScalarValue::Utf8(Some(s)))) => s.clone(),
                    _ => String::new(),
                };
                match sql::Returning::from_options(&options) {
                    sql::Returning::Json => Arc::new(json_field(self.name)),
                    sql::Returning::Varbinary(_) => Arc::new(Field::new(self.name, DataType::Binary, true)),
                }
            }
        })
    }
    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        super::simple::evaluate(&args.args, |arrays| (self.eval)(arrays, &args.arg_fields))
    }
}

// JSON given as `json` or `varchar`, read as text.
use super::simple::utf8 as text;

/// The value of a constant-per-batch string argument at `row` (paths, options).
fn string_at(array: &StringArray, row: usize) -> Option<&str> {
    use datafusion::arrow::array::Array;
    (!array.is_null(row)).then(|| array.value(row))
}

pub fn functions() -> Vec<ScalarUDF> {
    let mut all = legacy::functions();
    all.extend(sql::functions());
    all
}

#[cfg(test)]
#[path = "json_tests.rs"]
mod tests;
