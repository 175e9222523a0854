//! Trino's `element_at`: of an array, the element at a place from 1 (from the end when
//! negative, NULL past either end, an error at 0); of a map, the value of a key (NULL
//! without it). DataFusion's `element_at` is `map_extract`, which answers a map's value
//! as a one-element list and refuses arrays. Registered over it by `functions`.

use std::sync::Arc;

use datafusion::arrow::array::AsArray;
use datafusion::arrow::datatypes::{DataType, Field, FieldRef};
use datafusion::common::{exec_err, plan_err, Result, ScalarValue};
use datafusion::logical_expr::{
    ColumnarValue, ReturnFieldArgs, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, Volatility,
};

use super::invalid_argument;

#[derive(Debug, PartialEq, Eq, Hash)]
struct ElementAt {
    signature: Signature,
}

pub fn functions() -> Vec<ScalarUDF> {
    vec![ScalarUDF::new_from_impl(ElementAt { signature: Signature::user_defined(Volatility::Immutable) })]
}

/// The element or value type of `container`.
fn element_type(container: &DataType) -> Result<DataType> {
    match container {
        DataType::List(f) | DataType::LargeList(f) | DataType::FixedSizeList(f, _) => Ok(f.data_type().clone()),
        DataType::Map(entries, _) => match entries.data_type() {
            DataType::Struct(fields) if fields.len() == 2 => Ok(fields[1].data_type().clone()),
            other => plan_err!("element_at: a map's entries of type {other}"),
        },
        DataType::Null => Ok(DataType::Null),
        other => plan_err!("element_at: expected an array or a map, found {other}"),
    }
}

impl ScalarUDFImpl for ElementAt {
    fn name(&self) -> &str {
        "element_at"
    }
    fn signature(&self) -> &Signature {
        &self.signature
    }
    fn coerce_types(&self, types: &[DataType]) -> Result<Vec<DataType>> {
        let [container, _] = types else { return plan_err!("element_at takes an array or a map and one argument") };
        let second = match container {
            DataType::Map(entries, _) => match entries.data_type() {
                DataType::Struct(fields) if fields.len() == 2 => fields[0].data_type().clone(),
                other => return plan_err!("element_at: a map's entries of type {other}"),
            },
            _ => DataType::Int64,
        };
        Ok(vec![container.clone(), second])
    }
    fn return_type(&self, types: &[DataType]) -> Result<DataType> {
        element_type(&types[0])
    }
    fn return_field_from_args(&self, args: ReturnFieldArgs) -> Result<FieldRef> {
        Ok(Arc::new(Field::new(self.name(), element_type(args.arg_fields[0].data_type())?, true)))
    }
    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let delegate = |udf: Arc<ScalarUDF>, args: ScalarFunctionArgs| udf.invoke_with_args(args);
        match args.arg_fields[0].data_type() {
            DataType::Map(..) => {
                // `map_extract` answers `[value]` or `[]`; its first element is the value.
                let extract = datafusion::functions_nested::map_extract::map_extract_udf();
                let list_field = extract.return_field_from_args(ReturnFieldArgs {
                    arg_fields: &args.arg_fields,
                    scalar_arguments: &[None, None],
                })?;
                let number_rows = args.number_rows;
                let (return_field, config_options) = (args.return_field.clone(), args.config_options.clone());
                let lists = delegate(extract, args)?;
                let first = ColumnarValue::Scalar(ScalarValue::Int64(Some(1)));
                let index_field = Arc::new(Field::new("index", DataType::Int64, false));
                delegate(
                    datafusion::functions_nested::extract::array_element_udf(),
                    ScalarFunctionArgs {
                        args: vec![lists, first],
                        arg_fields: vec![list_field, index_field],
                        number_rows,
                        return_field,
                        config_options,
                    },
                )
            }
            DataType::Null => Ok(ColumnarValue::Scalar(ScalarValue::Null)),
            _ => {
                let zero = match &args.args[1] {
                    ColumnarValue::Scalar(s) => matches!(s, ScalarValue::Int64(Some(0))),
                    ColumnarValue::Array(a) => a
                        .as_primitive_opt::<datafusion::arrow::datatypes::Int64Type>()
                        .is_some_and(|i| i.iter().any(|v| v == Some(0))),
                };
                if zero {
                    return Err(invalid_argument("SQL array indices start at 1"));
                }
                if args.args[1].data_type() != DataType::Int64 {
                    return exec_err!("element_at: an array's index must be a bigint");
                }
                delegate(datafusion::functions_nested::extract::array_element_udf(), args)
            }
        }
    }
}
