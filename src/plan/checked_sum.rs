//! `sum` as Trino has it: DataFusion's own for every type but integers and decimals,
//! whose sums fail with `NUMERIC_VALUE_OUT_OF_RANGE` when they leave `BIGINT` or the
//! result's precision (DataFusion's add wrapping round: two `9223372036854775807`
//! summed to -2, two `DECIMAL(38,0)` nines to a negative number). Registered under the name
//! `sum` (`checked_arithmetic::register`), it replaces DataFusion's in the coordinator's
//! planning and in every worker's plans, which name it; a window over a sliding frame
//! gets a checked sliding sum, and `sum(DISTINCT ...)` keeps DataFusion's accumulator
//! (which fails on overflow itself).

use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, AsArray, BooleanArray, PrimitiveArray};
use datafusion::arrow::buffer::NullBuffer;
use datafusion::arrow::datatypes::{
    ArrowNativeTypeOp, ArrowPrimitiveType, DataType, Decimal128Type, DecimalType, FieldRef, Int64Type, UInt64Type,
};
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

fn overflow(data_type: &DataType) -> datafusion::error::DataFusionError {
    match data_type {
        DataType::Decimal128(..) => NumericValueOutOfRange::error(format!("decimal overflow in sum: past {data_type}")),
        _ => NumericValueOutOfRange::error("bigint addition overflow in sum"),
    }
}

/// A type whose sums are checked: integers by Arrow's checked add, decimals also
/// against the digits of the result's precision (an `i128` holds more).
trait Summed: ArrowPrimitiveType + Send + Sync + std::fmt::Debug {
    fn fits(_sum: Self::Native, _data_type: &DataType) -> bool {
        true
    }
}

impl Summed for Int64Type {}
impl Summed for UInt64Type {}
impl Summed for Decimal128Type {
    fn fits(sum: i128, data_type: &DataType) -> bool {
        match data_type {
            DataType::Decimal128(precision, _) => Decimal128Type::is_valid_decimal_precision(sum, *precision),
            _ => true,
        }
    }
}

/// `sum + v`, or the overflow error.
fn checked<T: Summed>(sum: T::Native, v: T::Native, data_type: &DataType) -> Result<T::Native> {
    sum.add_checked(v).ok().filter(|s| T::fits(*s, data_type)).ok_or_else(|| overflow(data_type))
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
        let data_type = args.return_type().clone();
        match (args.is_distinct, &data_type) {
            (false, DataType::Int64) => Ok(Box::new(SumOf::<Int64Type>::new(data_type))),
            (false, DataType::UInt64) => Ok(Box::new(SumOf::<UInt64Type>::new(data_type))),
            (false, DataType::Decimal128(..)) => Ok(Box::new(SumOf::<Decimal128Type>::new(data_type))),
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
        let data_type = args.return_type().clone();
        match &data_type {
            DataType::Int64 => Ok(Box::new(GroupSums::<Int64Type>::new(data_type))),
            DataType::UInt64 => Ok(Box::new(GroupSums::<UInt64Type>::new(data_type))),
            DataType::Decimal128(..) => Ok(Box::new(GroupSums::<Decimal128Type>::new(data_type))),
            _ => self.inner.create_groups_accumulator(args),
        }
    }

    fn create_sliding_accumulator(&self, args: AccumulatorArgs) -> Result<Box<dyn Accumulator>> {
        let data_type = args.return_type().clone();
        match (args.is_distinct, &data_type) {
            (false, DataType::Int64) => Ok(Box::new(SlidingSum::<Int64Type>::new(data_type))),
            (false, DataType::UInt64) => Ok(Box::new(SlidingSum::<UInt64Type>::new(data_type))),
            (false, DataType::Decimal128(..)) => Ok(Box::new(SlidingSum::<Decimal128Type>::new(data_type))),
            _ => self.inner.create_sliding_accumulator(args),
        }
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

/// Adds `values` (a column of `T`) into `sum`, failing past the result's range.
fn add_all<T: Summed>(sum: &mut Option<T::Native>, values: &ArrayRef, data_type: &DataType) -> Result<()> {
    let values = values.as_primitive::<T>();
    for v in values.iter().flatten() {
        *sum = Some(checked::<T>(sum.unwrap_or(T::Native::ZERO), v, data_type)?);
    }
    Ok(())
}

/// The sum of one group (aggregation without GROUP BY).
#[derive(Debug)]
struct SumOf<T: ArrowPrimitiveType> {
    sum: Option<T::Native>,
    /// The result's type (a decimal's precision and scale).
    data_type: DataType,
}

impl<T: ArrowPrimitiveType> SumOf<T> {
    fn new(data_type: DataType) -> Self {
        SumOf { sum: None, data_type }
    }
}

impl<T: Summed> Accumulator for SumOf<T> {
    fn update_batch(&mut self, values: &[ArrayRef]) -> Result<()> {
        add_all::<T>(&mut self.sum, &values[0], &self.data_type)
    }

    fn evaluate(&mut self) -> Result<ScalarValue> {
        ScalarValue::new_primitive::<T>(self.sum, &self.data_type)
    }

    fn size(&self) -> usize {
        std::mem::size_of_val(self)
    }

    fn state(&mut self) -> Result<Vec<ScalarValue>> {
        Ok(vec![self.evaluate()?])
    }

    fn merge_batch(&mut self, states: &[ArrayRef]) -> Result<()> {
        add_all::<T>(&mut self.sum, &states[0], &self.data_type)
    }
}

/// The sum over a window's sliding frame: rows enter (`update_batch`) and leave
/// (`retract_batch`); the sum is NULL while the frame holds no value.
#[derive(Debug)]
struct SlidingSum<T: ArrowPrimitiveType> {
    sum: T::Native,
    values: u64,
    data_type: DataType,
}

impl<T: ArrowPrimitiveType> SlidingSum<T> {
    fn new(data_type: DataType) -> Self {
        SlidingSum { sum: T::Native::ZERO, values: 0, data_type }
    }
}

impl<T: Summed> Accumulator for SlidingSum<T> {
    fn update_batch(&mut self, values: &[ArrayRef]) -> Result<()> {
        for v in values[0].as_primitive::<T>().iter().flatten() {
            self.sum = checked::<T>(self.sum, v, &self.data_type)?;
            self.values += 1;
        }
        Ok(())
    }

    fn retract_batch(&mut self, values: &[ArrayRef]) -> Result<()> {
        for v in values[0].as_primitive::<T>().iter().flatten() {
            self.sum = self.sum.sub_checked(v).map_err(|_| overflow(&self.data_type))?;
            self.values = self.values.saturating_sub(1);
        }
        Ok(())
    }

    fn supports_retract_batch(&self) -> bool {
        true
    }

    fn evaluate(&mut self) -> Result<ScalarValue> {
        ScalarValue::new_primitive::<T>((self.values > 0).then_some(self.sum), &self.data_type)
    }

    fn size(&self) -> usize {
        std::mem::size_of_val(self)
    }

    fn state(&mut self) -> Result<Vec<ScalarValue>> {
        Ok(vec![self.evaluate()?])
    }

    fn merge_batch(&mut self, states: &[ArrayRef]) -> Result<()> {
        self.update_batch(states)
    }
}

/// The sums of many groups.
#[derive(Debug)]
struct GroupSums<T: ArrowPrimitiveType> {
    sums: Vec<T::Native>,
    /// Whether a group has seen a value (a group of only NULLs sums to NULL).
    seen: Vec<bool>,
    data_type: DataType,
}

impl<T: Summed> GroupSums<T> {
    fn new(data_type: DataType) -> Self {
        GroupSums { sums: Vec::new(), seen: Vec::new(), data_type }
    }

    fn add(&mut self, values: &ArrayRef, groups: &[usize], filter: Option<&BooleanArray>, total: usize) -> Result<()> {
        self.sums.resize(total, T::Native::ZERO);
        self.seen.resize(total, false);
        let values = values.as_primitive::<T>();
        for (row, &g) in groups.iter().enumerate() {
            if values.is_null(row) || filter.is_some_and(|f| !f.is_valid(row) || !f.value(row)) {
                continue;
            }
            self.sums[g] = checked::<T>(self.sums[g], values.value(row), &self.data_type)?;
            self.seen[g] = true;
        }
        Ok(())
    }

    fn emit(&mut self, emit_to: EmitTo) -> ArrayRef {
        let sums = emit_to.take_needed(&mut self.sums);
        let seen = emit_to.take_needed(&mut self.seen);
        let nulls = NullBuffer::from(seen);
        Arc::new(PrimitiveArray::<T>::new(sums.into(), Some(nulls)).with_data_type(self.data_type.clone()))
    }
}

impl<T: Summed> GroupsAccumulator for GroupSums<T> {
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
        Ok(vec![Arc::new(state.with_data_type(self.data_type.clone()))])
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
        let nines = "CAST('99999999999999999999999999999999999999' AS DECIMAL(38,0))";
        let wide = format!("(VALUES ({nines}, 1), ({nines}, 1)) t(x, g)");
        for sql in [format!("SELECT sum(x) FROM {wide}"), format!("SELECT g, sum(x) FROM {wide} GROUP BY g")] {
            let e = rows(&sql).await.expect_err(&sql);
            assert!(is_out_of_range(&e) && e.to_string().contains("Decimal128(38, 0)"), "{sql}: {e}");
        }
        // DECIMAL(10,2) sums as DECIMAL(20,2): two of its largest values fit.
        let fits = rows("SELECT sum(x) FROM (VALUES (CAST(99999999.99 AS DECIMAL(10,2))), (CAST(99999999.99 AS DECIMAL(10,2)))) t(x)").await;
        assert!(fits.as_ref().is_ok_and(|t| t.contains("199999999.98")), "{fits:?}");
        let slide = "SELECT sum(x) OVER (ORDER BY y ROWS BETWEEN 1 PRECEDING AND CURRENT ROW) FROM \
            (VALUES (CAST(9223372036854775807 AS BIGINT), 1), (CAST(9223372036854775807 AS BIGINT), 2)) t(x, y)";
        let e = rows(slide).await.expect_err(slide);
        assert!(is_out_of_range(&e), "{slide}: {e}");
        let slid = rows(
            "SELECT y, sum(x) OVER (ORDER BY y ROWS BETWEEN 1 PRECEDING AND CURRENT ROW) FROM \
            (VALUES (CAST(5 AS BIGINT), 1), (NULL, 2), (NULL, 3), (CAST(-2 AS BIGINT), 4)) t(x, y) ORDER BY y",
        )
        .await
        .unwrap();
        let cells: Vec<String> = slid
            .lines()
            .skip(3)
            .filter(|l| l.starts_with('|'))
            .map(|l| l.split('|').nth(2).unwrap().trim().to_string())
            .collect();
        assert_eq!(cells, ["5", "5", "", "-2"], "frames of values, NULLs, and a value again: {slid}");
        let one = rows("SELECT sum(x) FROM (VALUES (CAST(-5 AS INT)), (7)) t(x)").await.unwrap();
        assert!(one.contains("| 2 "), "{one}");
    }
}
