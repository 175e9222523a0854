//! Trino's conversion functions (`conversion.md`) that DataFusion lacks:
//! `parse_data_size` (`2.3MB` -> 2411724 bytes, powers of 1024, as a `decimal(38,0)`).

use std::sync::Arc;

use datafusion::arrow::array::{ArrayRef, AsArray, Decimal128Array};
use datafusion::arrow::datatypes::DataType;
use datafusion::common::Result;
use datafusion::logical_expr::{ScalarUDF, Signature, Volatility};

use super::invalid_argument;
use super::simple::function;

const UNITS: [&str; 9] = ["B", "kB", "MB", "GB", "TB", "PB", "EB", "ZB", "YB"];

fn bytes(text: &str) -> Result<i128> {
    let bad = || invalid_argument(format!("Invalid data size: '{text}'"));
    let t = text.trim();
    let split = t.find(|c: char| !(c.is_ascii_digit() || c == '.')).ok_or_else(bad)?;
    let (number, unit) = (&t[..split], t[split..].trim());
    let power = UNITS.iter().position(|u| *u == unit).ok_or_else(bad)? as u32;
    let (int, frac) = number.split_once('.').unwrap_or((number, ""));
    if int.is_empty() || !int.bytes().chain(frac.bytes()).all(|b| b.is_ascii_digit()) {
        return Err(bad());
    }
    // Exact: digits times 1024^power, then the fraction's digits divided away.
    let digits: i128 = format!("{int}{frac}").parse().map_err(|_| bad())?;
    let scaled = digits.checked_mul(1024i128.pow(power)).ok_or_else(bad)?;
    Ok(scaled / 10i128.pow(frac.len() as u32))
}

pub fn functions() -> Vec<ScalarUDF> {
    vec![function(
        "parse_data_size",
        Signature::exact(vec![DataType::Utf8], Volatility::Immutable),
        |_| Ok(DataType::Decimal128(38, 0)),
        |args| {
            let out = args[0]
                .as_string::<i32>()
                .iter()
                .map(|v| v.map(bytes).transpose())
                .collect::<Result<Decimal128Array>>()?
                .with_precision_and_scale(38, 0)?;
            Ok(Arc::new(out) as ArrayRef)
        },
    )]
}

#[cfg(test)]
mod tests {
    #[test]
    fn sizes_as_documented() {
        assert_eq!(super::bytes("1B").unwrap(), 1);
        assert_eq!(super::bytes("1kB").unwrap(), 1024);
        assert_eq!(super::bytes("2.3MB").unwrap(), 2_411_724);
        assert!(super::bytes("2 parsecs").is_err());
    }
}
