//! `sum` as Trino has it: DataFusion's own for every type but integers, whose sums
//! fail with `NUMERIC_VALUE_OUT_OF_RANGE` when they leave `BIGINT` (DataFusion's add
//! wrapping round: two `9223372036854775807` summed to -2). Registered under the name
//! `sum` (`checked_arithmetic::register`), it replaces DataFusion's in the coordinator's
//! planning and in every worker's plans, which name it; a window over a sliding frame
//! and `sum(DISTINCT ...)` keep DataFusion's accumulators.

use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, AsArray, BooleanArray, PrimitiveArray};
use datafusion::arrow::buffer::NullBuffer;
use datafusion::arrow::datatypes::{ArrowNativeTypeOp, ArrowPrimitiveType, DataType, FieldRef, Int64Type, UInt64Type};
use datafusion::common::ScalarValue;
use datafusion::error::Result;
use datafusion::functions_aggregate::sum::Sum;
use datafusion::logical_expr::function::{AccumulatorArgs, StateFieldsArgs};
use datafusion::logical_expr::utils::AggregateOrderSensitivity;
use datafusion::logical_expr::{
    Accumulator, AggregateUDF, AggregateUDFImpl, EmitTo, GroupsAccumulator, ReversedUDAF, SetMonotonicity, Signature,
};

use super::checked_arithmetic::NumericValueOutOfRange;

/// The `sum` to register.
pub fn checked_sum() -> AggregateUDF {
    AggregateUDF::new_from_impl(CheckedSum { inner: Sum::new() })
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct CheckedSum {
    inner: Sum,
}

fn overflow() -> datafusion::error::DataFusionError {
    NumericValueOutOfRange::error("bigint addition overflow in sum")
}

impl AggregateUDFImpl for CheckedSum {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn signature(&self) -> &Signature {
        self.inner.signature()
    }

    fn return_type(&self, arg_types: &[DataType]) -> Result<DataType> {
        self.inner.return_type(arg_types)
    }

    fn accumulator(&self, args: AccumulatorArgs) -> Result<Box<dyn Accumulator>> {
        match (args.is_distinct, args.return_type()) {
            (false, DataType::Int64) => Ok(Box::new(SumOf::<Int64Type>::default())),
            (false, DataType::UInt64) => Ok(Box::new(SumOf::<UInt64Type>::default())),
            _ => self.inner.accumulator(args),
        }
    }

    fn state_fields(&self, args: StateFieldsArgs) -> Result<Vec<FieldRef>> {
        self.inner.state_fields(args)
    }

    fn groups_accumulator_supported(&self, args: AccumulatorArgs) -> bool {
        self.inner.groups_accumulator_supported(args)
    }

    fn create_groups_accumulator(&self, args: AccumulatorArgs) -> Result<Box<dyn GroupsAccumulator>> {
        match args.return_type() {
            DataType::Int64 => Ok(Box::new(GroupSums::<Int64Type>::default())),
            DataType::UInt64 => Ok(Box::new(GroupSums::<UInt64Type>::default())),
            _ => self.inner.create_groups_accumulator(args),
        }
    }

    fn create_sliding_accumulator(&self, args: AccumulatorArgs) -> Result<Box<dyn Accumulator>> {
        self.inner.create_sliding_accumulator(args)
    }

    fn reverse_expr(&self) -> ReversedUDAF {
        ReversedUDAF::Identical
    }

    fn order_sensitivity(&self) -> AggregateOrderSensitivity {
        self.inner.order_sensitivity()
    }

    fn set_monotonicity(&self, data_type: &DataType) -> SetMonotonicity {
        self.inner.set_monotonicity(data_type)
    }
}

/// Adds `values` (a column of `T`) into `sum`, failing past the type's range.
fn add_all<T: ArrowPrimitiveType>(sum: &mut Option<T::Native>, values: &ArrayRef) -> Result<()> {
    let values = values.as_primitive::<T>();
    for v in values.iter().flatten() {
        let s = sum.unwrap_or(T::Native::ZERO);
        *sum = Some(s.add_checked(v).map_err(|_| overflow())?);
    }
    Ok(())
}

/// The sum of one group (aggregation without GROUP BY).
#[derive(Debug)]
struct SumOf<T: ArrowPrimitiveType> {
    sum: Option<T::Native>,
}

impl<T: ArrowPrimitiveType> Default for SumOf<T> {
    fn default() -> Self {
        SumOf { sum: None }
    }
}

impl<T: ArrowPrimitiveType + Send + Sync + std::fmt::Debug> Accumulator for SumOf<T> {
    fn update_batch(&mut self, values: &[ArrayRef]) -> Result<()> {
        add_all::<T>(&mut self.sum, &values[0])
    }

    fn evaluate(&mut self) -> Result<ScalarValue> {
        ScalarValue::new_primitive::<T>(self.sum, &T::DATA_TYPE)
    }

    fn size(&self) -> usize {
        std::mem::size_of_val(self)
    }

    fn state(&mut self) -> Result<Vec<ScalarValue>> {
        Ok(vec![self.evaluate()?])
    }

    fn merge_batch(&mut self, states: &[ArrayRef]) -> Result<()> {
        add_all::<T>(&mut self.sum, &states[0])
    }
}

/// The sums of many groups.
#[derive(Debug)]
struct GroupSums<T: ArrowPrimitiveType> {
    sums: Vec<T::Native>,
    /// Whether a group has seen a value (a group of only NULLs sums to NULL).
    seen: Vec<bool>,
}

impl<T: ArrowPrimitiveType> Default for GroupSums<T> {
    fn default() -> Self {
        GroupSums { sums: Vec::new(), seen: Vec::new() }
    }
}

impl<T: ArrowPrimitiveType + Send + Sync> GroupSums<T> {
    fn add(&mut self, values: &ArrayRef, groups: &[usize], filter: Option<&BooleanArray>, total: usize) -> Result<()> {
        self.sums.resize(total, T::Native::ZERO);
        self.seen.resize(total, false);
        let values = values.as_primitive::<T>();
        for (row, &g) in groups.iter().enumerate() {
            if values.is_null(row) || filter.is_some_and(|f| !f.is_valid(row) || !f.value(row)) {
                continue;
            }
            self.sums[g] = self.sums[g].add_checked(values.value(row)).map_err(|_| overflow())?;
            self.seen[g] = true;
        }
        Ok(())
    }

    fn emit(&mut self, emit_to: EmitTo) -> ArrayRef {
        let sums = emit_to.take_needed(&mut self.sums);
        let seen = emit_to.take_needed(&mut self.seen);
        let nulls = NullBuffer::from(seen);
        Arc::new(PrimitiveArray::<T>::new(sums.into(), Some(nulls)).with_data_type(T::DATA_TYPE))
    }
}

impl<T: ArrowPrimitiveType + Send + Sync + std::fmt::Debug> GroupsAccumulator for GroupSums<T> {
    fn update_batch(
        &mut self,
        values: &[ArrayRef],
        group_indices: &[usize],
        opt_filter: Option<&BooleanArray>,
        total_num_groups: usize,
    ) -> Result<()> {
        self.add(&values[0], group_indices, opt_filter, total_num_groups)
    }

    fn evaluate(&mut self, emit_to: EmitTo) -> Result<ArrayRef> {
        Ok(self.emit(emit_to))
    }

    fn state(&mut self, emit_to: EmitTo) -> Result<Vec<ArrayRef>> {
        Ok(vec![self.emit(emit_to)])
    }

    fn merge_batch(&mut self, values: &[ArrayRef], group_indices: &[usize], total_num_groups: usize) -> Result<()> {
        self.add(&values[0], group_indices, None, total_num_groups)
    }

    /// Each row its own partial sum: itself, or NULL where filtered out.
    fn convert_to_state(&self, values: &[ArrayRef], opt_filter: Option<&BooleanArray>) -> Result<Vec<ArrayRef>> {
        let v = values[0].as_primitive::<T>();
        let kept = |i: usize| v.is_valid(i) && opt_filter.is_none_or(|f| f.is_valid(i) && f.value(i));
        let state: PrimitiveArray<T> = (0..v.len()).map(|i| kept(i).then(|| v.value(i))).collect();
        Ok(vec![Arc::new(state.with_data_type(T::DATA_TYPE))])
    }

    fn size(&self) -> usize {
        self.sums.capacity() * std::mem::size_of::<T::Native>() + self.seen.capacity()
    }
}

#[cfg(test)]
mod tests {
    use super::super::checked_arithmetic::{is_out_of_range, register};
    use datafusion::prelude::SessionContext;

    async fn rows(sql: &str) -> datafusion::error::Result<String> {
        let ctx = SessionContext::new();
        register(&ctx);
        let batches = ctx.sql(sql).await?.collect().await?;
        Ok(datafusion::arrow::util::pretty::pretty_format_batches(&batches)?.to_string())
    }

    #[tokio::test]
    async fn integer_sums_fail_past_bigint_and_others_are_datafusions() {
        let big = "(VALUES (CAST(9223372036854775807 AS BIGINT), 1), (CAST(9223372036854775807 AS BIGINT), 1)) t(x, g)";
        for sql in [format!("SELECT sum(x) FROM {big}"), format!("SELECT g, sum(x) FROM {big} GROUP BY g")] {
            let e = rows(&sql).await.expect_err(&sql);
            assert!(is_out_of_range(&e), "{sql}: {e}");
        }
        let fine = rows("SELECT g, sum(x), sum(f), sum(d) FROM (VALUES (1, 2, 2.0, CAST(2 AS DECIMAL(10,2))), (1, NULL, NULL, NULL), (2, NULL, NULL, NULL), (1, 40, 40.0, 40)) t(g, x, f, d) GROUP BY g ORDER BY g").await.unwrap();
        let lines: Vec<&str> = fine.lines().collect();
        assert!(lines[3].contains("| 1 | 42 ") && lines[3].contains("42.0") && lines[3].contains("42.00"), "{fine}");
        assert!(
            lines[4].starts_with("| 2 |") && !lines[4].chars().any(|c| c.is_ascii_digit() && c != '2'),
            "a group of NULLs sums to NULL: {fine}"
        );
        let one = rows("SELECT sum(x) FROM (VALUES (CAST(-5 AS INT)), (7)) t(x)").await.unwrap();
        assert!(one.contains("| 2 "), "{one}");
    }
}
