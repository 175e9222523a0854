//! The plumbing of Trino's lambda functions written here (`array_lambda`,
//! `map_lambda`): a higher-order function whose lambdas' parameters, result field
//! and evaluation are plain functions. A lambda is evaluated over flattened values,
//! one vectorised evaluation per batch (per element position for `reduce`), with the
//! captured columns of the enclosing row repeated for each value.

use std::fmt;
use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, UInt32Array};
use datafusion::arrow::compute::take_arrays;
use datafusion::arrow::datatypes::{DataType, FieldRef};
use datafusion::common::{plan_err, Result};
use datafusion::logical_expr::{
    ColumnarValue, HigherOrderFunctionArgs, HigherOrderReturnFieldArgs, HigherOrderSignature, HigherOrderUDF,
    HigherOrderUDFImpl, LambdaArgument, LambdaParametersProgress, ValueOrLambda, Volatility,
};

/// The fields a call's arguments have while its lambdas' parameters are resolved.
pub type ArgFields<'a> = &'a [ValueOrLambda<FieldRef, Option<FieldRef>>];

/// A planned call: its value arguments as arrays, its lambdas, its result field.
pub struct Call<'a> {
    pub values: Vec<ArrayRef>,
    pub lambdas: Vec<&'a LambdaArgument>,
    pub return_field: FieldRef,
}

pub struct Lambda {
    name: &'static str,
    signature: HigherOrderSignature,
    /// The parameters of each lambda, from the value arguments' fields.
    parameters: fn(ArgFields) -> Result<Vec<Vec<FieldRef>>>,
    /// The result field, from the value arguments' and lambdas' result fields.
    returns: fn(&[ValueOrLambda<FieldRef, FieldRef>]) -> Result<FieldRef>,
    eval: fn(&Call) -> Result<ArrayRef>,
    /// Whether the lambdas' bodies must stay inside the call (not be evaluated ahead of
    /// it by common subexpression elimination): `try_eval`'s body may fail.
    lazy: bool,
}

impl PartialEq for Lambda {
    fn eq(&self, other: &Self) -> bool {
        self.name == other.name
    }
}

impl Eq for Lambda {}

impl std::hash::Hash for Lambda {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.name.hash(state);
    }
}

impl fmt::Debug for Lambda {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Lambda").field("name", &self.name).finish()
    }
}

/// A function taking `values` value arguments followed by `lambdas` lambdas.
pub fn lambda(
    name: &'static str,
    values: usize,
    lambdas: usize,
    parameters: fn(ArgFields) -> Result<Vec<Vec<FieldRef>>>,
    returns: fn(&[ValueOrLambda<FieldRef, FieldRef>]) -> Result<FieldRef>,
    eval: fn(&Call) -> Result<ArrayRef>,
) -> Arc<HigherOrderUDF> {
    let kinds = (0..values).map(|_| ValueOrLambda::Value(())).chain((0..lambdas).map(|_| ValueOrLambda::Lambda(())));
    let signature = HigherOrderSignature::exact(kinds.collect(), Volatility::Immutable);
    Arc::new(HigherOrderUDF::new_from_impl(Lambda { name, signature, parameters, returns, eval, lazy: false }))
}

/// The same for a function whose lambda may fail where the call catches it.
pub fn lazy_lambda(
    name: &'static str,
    parameters: fn(ArgFields) -> Result<Vec<Vec<FieldRef>>>,
    returns: fn(&[ValueOrLambda<FieldRef, FieldRef>]) -> Result<FieldRef>,
    eval: fn(&Call) -> Result<ArrayRef>,
) -> Arc<HigherOrderUDF> {
    let kinds = vec![ValueOrLambda::Value(()), ValueOrLambda::Lambda(())];
    let signature = HigherOrderSignature::exact(kinds, Volatility::Immutable);
    Arc::new(HigherOrderUDF::new_from_impl(Lambda { name, signature, parameters, returns, eval, lazy: true }))
}

impl HigherOrderUDFImpl for Lambda {
    fn name(&self) -> &str {
        self.name
    }
    fn signature(&self) -> &HigherOrderSignature {
        &self.signature
    }
    fn short_circuits(&self) -> bool {
        self.lazy
    }
    fn coerce_value_types(&self, arg_types: &[DataType]) -> Result<Vec<DataType>> {
        Ok(arg_types.to_vec())
    }
    fn lambda_parameters(&self, _step: usize, fields: ArgFields) -> Result<LambdaParametersProgress> {
        Ok(LambdaParametersProgress::Complete((self.parameters)(fields)?))
    }
    fn return_field_from_args(&self, args: HigherOrderReturnFieldArgs) -> Result<FieldRef> {
        (self.returns)(args.arg_fields)
    }
    fn invoke_with_args(&self, args: HigherOrderFunctionArgs) -> Result<ColumnarValue> {
        let mut values = Vec::new();
        let mut lambdas = Vec::new();
        for a in &args.args {
            match a {
                ValueOrLambda::Value(v) => values.push(v.to_array(args.number_rows)?),
                ValueOrLambda::Lambda(l) => lambdas.push(l),
            }
        }
        let call = Call { values, lambdas, return_field: args.return_field.clone() };
        Ok(ColumnarValue::Array((self.eval)(&call)?))
    }
}

/// The value arguments' fields (lambdas' unresolved ones left out).
pub fn value_fields(fields: ArgFields) -> Vec<FieldRef> {
    fields
        .iter()
        .filter_map(|f| match f {
            ValueOrLambda::Value(v) => Some(v.clone()),
            ValueOrLambda::Lambda(_) => None,
        })
        .collect()
}

/// The result field of the `i`th lambda.
pub fn lambda_field(fields: &[ValueOrLambda<FieldRef, FieldRef>], i: usize) -> Result<FieldRef> {
    match fields.iter().filter_map(|f| if let ValueOrLambda::Lambda(l) = f { Some(l) } else { None }).nth(i) {
        Some(f) => Ok(f.clone()),
        None => plan_err!("a lambda argument is missing"),
    }
}

/// The `i`th value argument's field.
pub fn value_field(fields: &[ValueOrLambda<FieldRef, FieldRef>], i: usize) -> Result<FieldRef> {
    match fields.iter().filter_map(|f| if let ValueOrLambda::Value(v) = f { Some(v) } else { None }).nth(i) {
        Some(f) => Ok(f.clone()),
        None => plan_err!("a value argument is missing"),
    }
}

/// `lambda` applied to `params` (all of one length), each value belonging to the
/// input row `rows[i]`, whose captured columns it sees.
pub fn apply(lambda: &LambdaArgument, params: &[ArrayRef], rows: &UInt32Array) -> Result<ArrayRef> {
    let getters: Vec<Box<dyn Fn() -> Result<ArrayRef> + '_>> =
        params.iter().map(|p| Box::new(move || Ok(p.clone())) as Box<dyn Fn() -> Result<ArrayRef>>).collect();
    let refs: Vec<&dyn Fn() -> Result<ArrayRef>> = getters.iter().map(|g| g.as_ref()).collect();
    let out = lambda.evaluate(&refs, |captures| Ok(take_arrays(captures, rows, None)?))?;
    out.into_array(rows.len())
}

/// The parameters of an array's element type: `List(f)` gives `f`.
pub fn element(field: &FieldRef, name: &str) -> Result<FieldRef> {
    match field.data_type() {
        DataType::List(f) | DataType::LargeList(f) | DataType::FixedSizeList(f, _) => Ok(f.clone()),
        DataType::Null => Ok(Arc::new(datafusion::arrow::datatypes::Field::new("item", DataType::Null, true))),
        other => plan_err!("{name} expects an array, got {other}"),
    }
}

/// A map's key and value fields.
pub fn entries(field: &FieldRef, name: &str) -> Result<(FieldRef, FieldRef)> {
    match field.data_type() {
        DataType::Map(entries, _) => match entries.data_type() {
            DataType::Struct(kv) if kv.len() == 2 => Ok((kv[0].clone(), kv[1].clone())),
            _ => plan_err!("{name}: a map's entries are a key and a value"),
        },
        other => plan_err!("{name} expects a map, got {other}"),
    }
}

/// Whether a row of `array` is NULL (logically: a NULL literal has no null buffer).
pub fn is_null(array: &dyn Array, row: usize) -> bool {
    array.logical_nulls().is_some_and(|n| n.is_null(row))
}
