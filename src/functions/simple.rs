//! A scalar function computed from whole argument arrays: the plumbing most of Trino's
//! functions share. A call over constants answers a constant, so the planner folds it.

use std::fmt;
use std::sync::Arc;

use datafusion::arrow::array::ArrayRef;
use datafusion::arrow::datatypes::{DataType, Field, FieldRef};
use datafusion::common::{Result, ScalarValue};
use datafusion::logical_expr::{
    ColumnarValue, ReturnFieldArgs, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, Volatility,
};

/// How a function computes its result array from its argument arrays (all of the
/// batch's length).
pub type Eval = fn(&[ArrayRef]) -> Result<ArrayRef>;

/// How a function's result type follows from its argument types.
pub type Returns = fn(&[DataType]) -> Result<DataType>;

pub struct Simple {
    name: &'static str,
    signature: Signature,
    returns: Returns,
    eval: Eval,
}

// A function is known by its name: the library registers each name once.
impl PartialEq for Simple {
    fn eq(&self, other: &Self) -> bool {
        self.name == other.name && self.signature == other.signature
    }
}

impl Eq for Simple {}

impl std::hash::Hash for Simple {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.name.hash(state);
    }
}

impl fmt::Debug for Simple {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Simple").field("name", &self.name).finish()
    }
}

/// A function named `name` taking `signature`, its type from `returns`, computed by `eval`.
pub fn function(name: &'static str, signature: Signature, returns: Returns, eval: Eval) -> ScalarUDF {
    ScalarUDF::new_from_impl(Simple { name, signature, returns, eval })
}

/// The same with a result type that does not depend on the arguments.
pub fn fixed(name: &'static str, types: Vec<DataType>, returns: DataType, eval: Eval) -> ScalarUDF {
    let returns: Returns = match returns {
        DataType::Int64 => |_| Ok(DataType::Int64),
        DataType::Utf8 => |_| Ok(DataType::Utf8),
        DataType::Boolean => |_| Ok(DataType::Boolean),
        DataType::Float64 => |_| Ok(DataType::Float64),
        other => unimplemented!("a fixed result type of {other}"),
    };
    function(name, Signature::exact(types, Volatility::Immutable), returns, eval)
}

impl ScalarUDFImpl for Simple {
    fn name(&self) -> &str {
        self.name
    }
    fn signature(&self) -> &Signature {
        &self.signature
    }
    fn return_type(&self, args: &[DataType]) -> Result<DataType> {
        (self.returns)(args)
    }
    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        evaluate(&args.args, self.eval)
    }
}

/// `eval` over the arguments as arrays; over constants only, a constant.
pub fn evaluate(args: &[ColumnarValue], eval: impl FnOnce(&[ArrayRef]) -> Result<ArrayRef>) -> Result<ColumnarValue> {
    let constant = args.iter().all(|a| matches!(a, ColumnarValue::Scalar(_)));
    let out = eval(&ColumnarValue::values_to_arrays(args)?)?;
    match constant && out.len() == 1 {
        true => Ok(ColumnarValue::Scalar(ScalarValue::try_from_array(&out, 0)?)),
        false => Ok(ColumnarValue::Array(out)),
    }
}

/// How a function's result type follows from its call, constant arguments included
/// (`at_timezone(t, 'UTC')` is a timestamp in that zone).
pub type ReturnsFromCall = fn(&ReturnFieldArgs) -> Result<DataType>;

/// Computes the result array of the given type from the argument arrays.
pub type EvalTyped = fn(&[ArrayRef], &DataType) -> Result<ArrayRef>;

/// A function whose result type may depend on its constant arguments.
pub struct Typed {
    name: &'static str,
    signature: Signature,
    returns: ReturnsFromCall,
    eval: EvalTyped,
}

impl PartialEq for Typed {
    fn eq(&self, other: &Self) -> bool {
        self.name == other.name
    }
}

impl Eq for Typed {}

impl std::hash::Hash for Typed {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.name.hash(state);
    }
}

impl fmt::Debug for Typed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Typed").field("name", &self.name).finish()
    }
}

pub fn typed(name: &'static str, signature: Signature, returns: ReturnsFromCall, eval: EvalTyped) -> ScalarUDF {
    ScalarUDF::new_from_impl(Typed { name, signature, returns, eval })
}

/// The constant string argument at `i`, if the call has one there.
pub fn constant_string<'a>(args: &'a ReturnFieldArgs, i: usize) -> Option<&'a str> {
    match args.scalar_arguments.get(i) {
        Some(Some(ScalarValue::Utf8(Some(s)) | ScalarValue::Utf8View(Some(s)) | ScalarValue::LargeUtf8(Some(s)))) => {
            Some(s.as_str())
        }
        _ => None,
    }
}

impl ScalarUDFImpl for Typed {
    fn name(&self) -> &str {
        self.name
    }
    fn signature(&self) -> &Signature {
        &self.signature
    }
    fn return_type(&self, _args: &[DataType]) -> Result<DataType> {
        datafusion::common::internal_err!("{} answers its type from return_field_from_args", self.name)
    }
    fn return_field_from_args(&self, args: ReturnFieldArgs) -> Result<FieldRef> {
        Ok(Arc::new(Field::new(self.name, (self.returns)(&args)?, true)))
    }
    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        evaluate(&args.args, |arrays| (self.eval)(arrays, args.return_field.data_type()))
    }
}

/// A string argument's array as `Utf8`, whatever string type it came as.
pub fn utf8(array: &ArrayRef) -> Result<datafusion::arrow::array::StringArray> {
    use datafusion::arrow::array::AsArray;
    Ok(datafusion::arrow::compute::cast(array, &DataType::Utf8)?.as_string::<i32>().clone())
}

/// An integer argument's array as `Int64`.
pub fn int64(array: &ArrayRef) -> Result<datafusion::arrow::array::Int64Array> {
    use datafusion::arrow::array::AsArray;
    let cast = datafusion::arrow::compute::cast(array, &DataType::Int64)?;
    Ok(cast.as_primitive::<datafusion::arrow::datatypes::Int64Type>().clone())
}
