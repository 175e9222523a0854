//! `single_value` and `checked_single`: the one row of a scalar subquery, Trino's.
//! `single_value(x)`, an aggregate, answers a row of the first `x` and whether there
//! were more rows; `checked_single` reads it where an outer row needs the answer and
//! fails with `SUBQUERY_MULTIPLE_ROWS` if there were. `plan::scalar_subqueries` writes
//! them around a subquery; `functions::register` adds them to every registry.

use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, AsArray, BooleanArray, StructArray};
use datafusion::arrow::compute::nullif;
use datafusion::arrow::datatypes::{DataType, Field, FieldRef, Fields, UInt64Type};
use datafusion::common::{plan_err, DataFusionError, Result, ScalarValue};
use datafusion::logical_expr::function::{AccumulatorArgs, StateFieldsArgs};
use datafusion::logical_expr::utils::format_state_name;
use datafusion::logical_expr::{Accumulator, AggregateUDF, AggregateUDFImpl, ScalarUDF, Signature, Volatility};

use crate::error_code::ErrorCode;

/// The name of `single_value(x)`.
pub const SINGLE_VALUE: &str = "single_value";

/// The name of `checked_single(s)`.
pub const CHECKED_SINGLE: &str = "checked_single";

/// `single_value` and `checked_single`, to register wherever plans are run.
pub fn single_value() -> AggregateUDF {
    AggregateUDF::new_from_impl(SingleValue { signature: Signature::any(1, Volatility::Immutable) })
}

pub fn checked_single() -> ScalarUDF {
    super::simple::function(
        CHECKED_SINGLE,
        Signature::any(1, Volatility::Immutable),
        |types| match &types[0] {
            DataType::Struct(fields) if fields.len() == 2 => Ok(fields[0].data_type().clone()),
            other => plan_err!("{CHECKED_SINGLE} takes the row of {SINGLE_VALUE}, not {other}"),
        },
        check,
    )
}

/// The error of a scalar subquery with a second row.
pub fn multiple_rows() -> DataFusionError {
    DataFusionError::External(Box::new(super::FunctionError {
        code: ErrorCode::SubqueryMultipleRows,
        message: "Scalar sub-query has returned multiple rows".to_string(),
    }))
}

/// The value of each `single_value` row, NULL where there is none; an error where
/// one says its subquery had more rows.
fn check(args: &[ArrayRef]) -> Result<ArrayRef> {
    let answers = args[0].as_struct();
    let more = answers.column(1).as_boolean();
    if (0..answers.len()).any(|i| answers.is_valid(i) && more.is_valid(i) && more.value(i)) {
        return Err(multiple_rows());
    }
    let missing: BooleanArray = (0..answers.len()).map(|i| Some(answers.is_null(i))).collect();
    Ok(nullif(answers.column(0), &missing)?)
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct SingleValue {
    signature: Signature,
}

/// The row `single_value` answers: the value, and whether there were more rows.
fn answer_fields(value: &DataType) -> Fields {
    Fields::from(vec![Field::new("value", value.clone(), true), Field::new("more", DataType::Boolean, false)])
}

impl AggregateUDFImpl for SingleValue {
    fn name(&self) -> &str {
        SINGLE_VALUE
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, arg_types: &[DataType]) -> Result<DataType> {
        Ok(DataType::Struct(answer_fields(&arg_types[0])))
    }

    fn accumulator(&self, args: AccumulatorArgs) -> Result<Box<dyn Accumulator>> {
        let DataType::Struct(fields) = args.return_type() else {
            return plan_err!("{SINGLE_VALUE} answers a row");
        };
        Ok(Box::new(Single { value: ScalarValue::try_from(fields[0].data_type())?, fields: fields.clone(), rows: 0 }))
    }

    /// The value (NULL until a row is seen) and how many rows were seen.
    fn state_fields(&self, args: StateFieldsArgs) -> Result<Vec<FieldRef>> {
        let DataType::Struct(fields) = args.return_type() else {
            return plan_err!("{SINGLE_VALUE} answers a row");
        };
        Ok(vec![
            Arc::new(Field::new(format_state_name(args.name, "value"), fields[0].data_type().clone(), true)),
            Arc::new(Field::new(format_state_name(args.name, "rows"), DataType::UInt64, false)),
        ])
    }
}

#[derive(Debug)]
struct Single {
    value: ScalarValue,
    fields: Fields,
    rows: u64,
}

impl Single {
    fn see(&mut self, values: &ArrayRef, row: usize, rows: u64) -> Result<()> {
        if rows > 0 && self.rows == 0 {
            self.value = ScalarValue::try_from_array(values, row)?;
        }
        self.rows = self.rows.saturating_add(rows);
        Ok(())
    }
}

impl Accumulator for Single {
    /// Every row counts, a NULL one too: the subquery's rows are what is checked.
    fn update_batch(&mut self, values: &[ArrayRef]) -> Result<()> {
        self.see(&values[0], 0, values[0].len() as u64)
    }

    fn merge_batch(&mut self, states: &[ArrayRef]) -> Result<()> {
        let rows = states[1].as_primitive::<UInt64Type>();
        for i in 0..rows.len() {
            self.see(&states[0], i, rows.value(i))?;
        }
        Ok(())
    }

    fn state(&mut self) -> Result<Vec<ScalarValue>> {
        Ok(vec![self.value.clone(), ScalarValue::UInt64(Some(self.rows))])
    }

    /// NULL for no row (as the left join's unmatched rows are), else the row.
    fn evaluate(&mut self) -> Result<ScalarValue> {
        if self.rows == 0 {
            return ScalarValue::try_from(DataType::Struct(self.fields.clone()));
        }
        let columns = vec![self.value.to_array()?, Arc::new(BooleanArray::from(vec![self.rows > 1])) as ArrayRef];
        Ok(ScalarValue::Struct(Arc::new(StructArray::try_new(self.fields.clone(), columns, None)?)))
    }

    fn size(&self) -> usize {
        std::mem::size_of_val(self) + self.value.size() - std::mem::size_of_val(&self.value)
    }
}
