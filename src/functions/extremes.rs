//! `min_skipping_nan` and `max_skipping_nan`: `min` and `max` of `real` and `double`
//! as Trino has them. NaN is skipped, and is the answer only where a group holds NaN
//! and no other value. DataFusion orders NaN above every number, so its `max` answers
//! NaN wherever one NaN is, and its partial states, merged in whatever order the tasks
//! finish, made our answers change from run to run.
//!
//! `plan::nan_extremes` puts them in the place of DataFusion's `min` / `max` over a
//! float; `functions::register` adds them to every registry (workers name them in the
//! plans they receive). They print as `min(...)` / `max(...)`, so a plan's column names
//! do not change. Their own names keep DataFusion from treating them as its
//! `min`/`max`: its aggregate dynamic filter (`x > max so far`, pushed into scans)
//! would drop every number once one task had seen only NaN, and its top-K aggregation
//! orders by DataFusion's NaN.

use std::collections::BTreeMap;
use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, AsArray, BooleanArray, Float64Array};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{DataType, FieldRef, Float64Type};
use datafusion::common::{Result, ScalarValue};
use datafusion::functions_aggregate::min_max::{max_udaf, min_udaf};
use datafusion::logical_expr::expr::AggregateFunctionParams;
use datafusion::logical_expr::function::{AccumulatorArgs, StateFieldsArgs};
use datafusion::logical_expr::utils::AggregateOrderSensitivity;
use datafusion::logical_expr::{
    Accumulator, AggregateUDF, AggregateUDFImpl, EmitTo, GroupsAccumulator, ReversedUDAF, Signature, TypeSignature,
    Volatility,
};

/// The two functions, `min_skipping_nan` and `max_skipping_nan`, to register.
pub fn functions() -> Vec<AggregateUDF> {
    vec![udaf(false), udaf(true)]
}

pub fn udaf(max: bool) -> AggregateUDF {
    AggregateUDF::new_from_impl(SkippingNan::new(max))
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct SkippingNan {
    max: bool,
    signature: Signature,
}

impl SkippingNan {
    fn new(max: bool) -> Self {
        let types = [DataType::Float32, DataType::Float64].map(|t| TypeSignature::Exact(vec![t]));
        SkippingNan { max, signature: Signature::one_of(types.to_vec(), Volatility::Immutable) }
    }

    /// DataFusion's function of the same meaning, which names the calls.
    fn datafusion(&self) -> Arc<AggregateUDF> {
        if self.max {
            max_udaf()
        } else {
            min_udaf()
        }
    }
}

impl AggregateUDFImpl for SkippingNan {
    fn name(&self) -> &str {
        if self.max {
            "max_skipping_nan"
        } else {
            "min_skipping_nan"
        }
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, arg_types: &[DataType]) -> Result<DataType> {
        Ok(arg_types[0].clone())
    }

    fn schema_name(&self, params: &AggregateFunctionParams) -> Result<String> {
        self.datafusion().schema_name(params)
    }

    fn display_name(&self, params: &AggregateFunctionParams) -> Result<String> {
        self.datafusion().display_name(params)
    }

    fn human_display(&self, params: &AggregateFunctionParams) -> Result<String> {
        self.datafusion().human_display(params)
    }

    fn window_function_schema_name(
        &self,
        params: &datafusion::logical_expr::expr::WindowFunctionParams,
    ) -> Result<String> {
        self.datafusion().window_function_schema_name(params)
    }

    fn window_function_display_name(
        &self,
        params: &datafusion::logical_expr::expr::WindowFunctionParams,
    ) -> Result<String> {
        self.datafusion().window_function_display_name(params)
    }

    fn accumulator(&self, args: AccumulatorArgs) -> Result<Box<dyn Accumulator>> {
        Ok(Box::new(Extreme { max: self.max, slot: Slot::Empty, data_type: args.return_type().clone() }))
    }

    fn state_fields(&self, args: StateFieldsArgs) -> Result<Vec<FieldRef>> {
        self.datafusion().state_fields(args)
    }

    fn groups_accumulator_supported(&self, _args: AccumulatorArgs) -> bool {
        true
    }

    fn create_groups_accumulator(&self, args: AccumulatorArgs) -> Result<Box<dyn GroupsAccumulator>> {
        Ok(Box::new(GroupExtremes { max: self.max, slots: Vec::new(), data_type: args.return_type().clone() }))
    }

    fn create_sliding_accumulator(&self, args: AccumulatorArgs) -> Result<Box<dyn Accumulator>> {
        Ok(Box::new(SlidingExtreme {
            max: self.max,
            values: BTreeMap::new(),
            nans: 0,
            data_type: args.return_type().clone(),
        }))
    }

    fn reverse_expr(&self) -> ReversedUDAF {
        ReversedUDAF::Identical
    }

    fn order_sensitivity(&self) -> AggregateOrderSensitivity {
        AggregateOrderSensitivity::Insensitive
    }
}

/// What a group has seen: nothing (or only NULLs), only NaN, or a number.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Slot {
    Empty,
    Nan,
    Number(f64),
}

impl Slot {
    /// The slot after seeing `v`; a state merged in is seen like a value, since a
    /// part's NaN means the part held only NaN.
    fn seen(self, v: f64, max: bool) -> Slot {
        match self {
            _ if v.is_nan() => {
                if self == Slot::Empty {
                    Slot::Nan
                } else {
                    self
                }
            }
            Slot::Number(best) if (max && best >= v) || (!max && best <= v) => self,
            _ => Slot::Number(v),
        }
    }

    fn value(self) -> Option<f64> {
        match self {
            Slot::Empty => None,
            Slot::Nan => Some(f64::NAN),
            Slot::Number(v) => Some(v),
        }
    }
}

/// `values` as doubles (a `real` widens exactly).
fn doubles(values: &ArrayRef) -> Result<Float64Array> {
    Ok(cast(values, &DataType::Float64)?.as_primitive::<Float64Type>().clone())
}

/// `values`, doubles, back in the function's type.
fn typed(values: Float64Array, data_type: &DataType) -> Result<ArrayRef> {
    Ok(cast(&(Arc::new(values) as ArrayRef), data_type)?)
}

fn scalar(v: Option<f64>, data_type: &DataType) -> Result<ScalarValue> {
    ScalarValue::Float64(v).cast_to(data_type)
}

/// The extreme of one group (aggregation without GROUP BY).
#[derive(Debug)]
struct Extreme {
    max: bool,
    slot: Slot,
    data_type: DataType,
}

impl Accumulator for Extreme {
    fn update_batch(&mut self, values: &[ArrayRef]) -> Result<()> {
        for v in doubles(&values[0])?.iter().flatten() {
            self.slot = self.slot.seen(v, self.max);
        }
        Ok(())
    }

    fn evaluate(&mut self) -> Result<ScalarValue> {
        scalar(self.slot.value(), &self.data_type)
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

/// The extreme over a window's sliding frame: the frame's numbers counted by value in
/// their total order, and its NaNs counted apart.
#[derive(Debug)]
struct SlidingExtreme {
    max: bool,
    values: BTreeMap<i64, usize>,
    nans: usize,
    data_type: DataType,
}

/// A key whose integer order is the doubles' total order (and back: the map is its own
/// inverse, as the sign bit it reads is one it leaves).
fn ordered(bits: i64) -> i64 {
    bits ^ ((((bits >> 63) as u64) >> 1) as i64)
}

impl Accumulator for SlidingExtreme {
    fn update_batch(&mut self, values: &[ArrayRef]) -> Result<()> {
        for v in doubles(&values[0])?.iter().flatten() {
            if v.is_nan() {
                self.nans += 1;
            } else {
                *self.values.entry(ordered(v.to_bits() as i64)).or_default() += 1;
            }
        }
        Ok(())
    }

    fn retract_batch(&mut self, values: &[ArrayRef]) -> Result<()> {
        for v in doubles(&values[0])?.iter().flatten() {
            if v.is_nan() {
                self.nans = self.nans.saturating_sub(1);
                continue;
            }
            let key = ordered(v.to_bits() as i64);
            if let Some(n) = self.values.get_mut(&key) {
                *n -= 1;
                if *n == 0 {
                    self.values.remove(&key);
                }
            }
        }
        Ok(())
    }

    fn supports_retract_batch(&self) -> bool {
        true
    }

    fn evaluate(&mut self) -> Result<ScalarValue> {
        let key = if self.max { self.values.keys().next_back() } else { self.values.keys().next() };
        let value = match key {
            Some(k) => Some(f64::from_bits(ordered(*k) as u64)),
            None if self.nans > 0 => Some(f64::NAN),
            None => None,
        };
        scalar(value, &self.data_type)
    }

    fn size(&self) -> usize {
        std::mem::size_of_val(self) + self.values.len() * 2 * std::mem::size_of::<i64>()
    }

    fn state(&mut self) -> Result<Vec<ScalarValue>> {
        Ok(vec![self.evaluate()?])
    }

    fn merge_batch(&mut self, states: &[ArrayRef]) -> Result<()> {
        self.update_batch(states)
    }
}

/// The extremes of many groups.
#[derive(Debug)]
struct GroupExtremes {
    max: bool,
    slots: Vec<Slot>,
    data_type: DataType,
}

impl GroupExtremes {
    fn add(&mut self, values: &ArrayRef, groups: &[usize], filter: Option<&BooleanArray>, total: usize) -> Result<()> {
        self.slots.resize(total, Slot::Empty);
        let values = doubles(values)?;
        for (row, &g) in groups.iter().enumerate() {
            if values.is_null(row) || filter.is_some_and(|f| !f.is_valid(row) || !f.value(row)) {
                continue;
            }
            self.slots[g] = self.slots[g].seen(values.value(row), self.max);
        }
        Ok(())
    }

    fn emit(&mut self, emit_to: EmitTo) -> Result<ArrayRef> {
        let slots = emit_to.take_needed(&mut self.slots);
        typed(slots.into_iter().map(Slot::value).collect(), &self.data_type)
    }
}

impl GroupsAccumulator for GroupExtremes {
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
        self.emit(emit_to)
    }

    fn state(&mut self, emit_to: EmitTo) -> Result<Vec<ArrayRef>> {
        Ok(vec![self.emit(emit_to)?])
    }

    fn merge_batch(&mut self, values: &[ArrayRef], group_indices: &[usize], total_num_groups: usize) -> Result<()> {
        self.add(&values[0], group_indices, None, total_num_groups)
    }

    /// Each row its own partial extreme: itself, or NULL where filtered out.
    fn convert_to_state(&self, values: &[ArrayRef], opt_filter: Option<&BooleanArray>) -> Result<Vec<ArrayRef>> {
        let v = doubles(&values[0])?;
        let kept = |i: usize| v.is_valid(i) && opt_filter.is_none_or(|f| f.is_valid(i) && f.value(i));
        let state: Float64Array = (0..v.len()).map(|i| kept(i).then(|| v.value(i))).collect();
        Ok(vec![typed(state, &self.data_type)?])
    }

    fn size(&self) -> usize {
        self.slots.capacity() * std::mem::size_of::<Slot>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_key_orders_doubles_totally_and_maps_back() {
        let values = [f64::NEG_INFINITY, -2.5, -0.0, 0.0, 1e-300, 3.0, f64::INFINITY];
        let keys: Vec<i64> = values.iter().map(|v| ordered(v.to_bits() as i64)).collect();
        assert!(keys.windows(2).all(|w| w[0] < w[1]), "{keys:?}");
        for (v, k) in values.iter().zip(keys) {
            assert_eq!(f64::from_bits(ordered(k) as u64).to_bits(), v.to_bits());
        }
    }
}
