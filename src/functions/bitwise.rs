//! Trino's bitwise functions (`bitwise.md`) over `bigint`: `bit_count`, `bitwise_and`,
//! `_or`, `_xor`, `_not`, and the three shifts. Shifting by the width or more gives 0
//! (the arithmetic right shift: the sign), as in Trino.

use std::sync::Arc;

use datafusion::arrow::array::{ArrayRef, AsArray, Int64Array};
use datafusion::arrow::compute::{binary, try_binary, unary};
use datafusion::arrow::datatypes::{DataType, Int64Type};
use datafusion::common::Result;
use datafusion::logical_expr::ScalarUDF;

use super::simple::fixed;

fn ints(a: &ArrayRef) -> &Int64Array {
    a.as_primitive::<Int64Type>()
}

fn op(f: fn(i64, i64) -> i64) -> impl Fn(&[ArrayRef]) -> Result<ArrayRef> {
    move |args| Ok(Arc::new(binary::<_, _, _, Int64Type>(ints(&args[0]), ints(&args[1]), f)?) as ArrayRef)
}

macro_rules! two {
    ($name:literal, $f:expr) => {
        fixed($name, vec![DataType::Int64, DataType::Int64], DataType::Int64, |args| op($f)(args))
    };
}

/// The number of bits set in `x` as a signed integer of `bits` bits (2 to 64).
fn bit_count(x: i64, bits: i64) -> Result<i64, datafusion::arrow::error::ArrowError> {
    if !(2..=64).contains(&bits) {
        return Err(super::invalid_argument_arrow(format!(
            "Bits specified in bit_count must be between 2 and 64, got {bits}"
        )));
    }
    let (low, high) = (-(1i128 << (bits - 1)), (1i128 << (bits - 1)) - 1);
    if !(low..=high).contains(&(x as i128)) {
        return Err(super::invalid_argument_arrow(format!(
            "Number must be representable with the bits specified. {x} cannot be represented with {bits} bits"
        )));
    }
    let mask = if bits == 64 { u64::MAX } else { (1u64 << bits) - 1 };
    Ok(((x as u64) & mask).count_ones() as i64)
}

pub fn functions() -> Vec<ScalarUDF> {
    vec![
        two!("bitwise_and", |x, y| x & y),
        two!("bitwise_or", |x, y| x | y),
        two!("bitwise_xor", |x, y| x ^ y),
        two!("bitwise_left_shift", |x, s| if (0..64).contains(&s) { x << s } else { 0 }),
        two!("bitwise_right_shift", |x, s| if (0..64).contains(&s) { ((x as u64) >> s) as i64 } else { 0 }),
        two!("bitwise_right_shift_arithmetic", |x, s| if (0..64).contains(&s) { x >> s } else { x >> 63 }),
        fixed("bitwise_not", vec![DataType::Int64], DataType::Int64, |args| {
            Ok(Arc::new(unary::<_, _, Int64Type>(ints(&args[0]), |x| !x)) as ArrayRef)
        }),
        fixed("bit_count", vec![DataType::Int64, DataType::Int64], DataType::Int64, |args| {
            let out: Int64Array = try_binary(ints(&args[0]), ints(&args[1]), bit_count)?;
            Ok(Arc::new(out) as ArrayRef)
        }),
    ]
}
