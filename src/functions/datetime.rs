//! Trino's date and time functions (`datetime.md`) that DataFusion lacks:
//! `human_readable_seconds` and `parse_duration` (an `interval day to second`, to the
//! millisecond, as Trino rounds it).

use std::sync::Arc;

use datafusion::arrow::array::{ArrayRef, AsArray, IntervalMonthDayNanoArray, StringArray};
use datafusion::arrow::datatypes::{DataType, Float64Type, IntervalMonthDayNano, IntervalUnit};
use datafusion::common::Result;
use datafusion::logical_expr::ScalarUDF;

use super::invalid_argument;
use super::simple::{fixed, function};

/// `96` -> `1 minute, 36 seconds`: weeks, days, hours, minutes and seconds, the ones
/// that are not zero, of the rounded seconds.
fn human_readable(seconds: f64) -> Result<String> {
    if !seconds.is_finite() || seconds < 0.0 {
        return Err(invalid_argument(format!("human_readable_seconds: {seconds} is not a number of seconds")));
    }
    let mut left = seconds.round() as u64;
    if left == 0 {
        return Ok("0 seconds".into());
    }
    let mut parts = Vec::new();
    for (size, unit) in [(604_800, "week"), (86_400, "day"), (3_600, "hour"), (60, "minute"), (1, "second")] {
        let n = left / size;
        left %= size;
        if n > 0 {
            parts.push(format!("{n} {unit}{}", if n == 1 { "" } else { "s" }));
        }
    }
    Ok(parts.join(", "))
}

/// `42.8ms` -> 43 milliseconds: a number, optional spaces, and a unit (`ns`, `us`,
/// `ms`, `s`, `m`, `h`, `d`).
fn duration_millis(text: &str) -> Result<i64> {
    let bad = || invalid_argument(format!("duration is not a valid data duration string: {text}"));
    let t = text.trim();
    let split = t.find(|c: char| !(c.is_ascii_digit() || c == '.')).ok_or_else(bad)?;
    let (number, unit) = (&t[..split], t[split..].trim());
    let value: f64 = number.parse().map_err(|_| bad())?;
    let millis_per = match unit {
        "ns" => 1e-6,
        "us" => 1e-3,
        "ms" => 1.0,
        "s" => 1_000.0,
        "m" => 60_000.0,
        "h" => 3_600_000.0,
        "d" => 86_400_000.0,
        _ => return Err(bad()),
    };
    Ok((value * millis_per).round() as i64)
}

pub fn functions() -> Vec<ScalarUDF> {
    vec![
        fixed("human_readable_seconds", vec![DataType::Float64], DataType::Utf8, |args| {
            let out = args[0]
                .as_primitive::<Float64Type>()
                .iter()
                .map(|v| v.map(human_readable).transpose())
                .collect::<Result<StringArray>>()?;
            Ok(Arc::new(out) as ArrayRef)
        }),
        function(
            "parse_duration",
            datafusion::logical_expr::Signature::exact(
                vec![DataType::Utf8],
                datafusion::logical_expr::Volatility::Immutable,
            ),
            |_| Ok(DataType::Interval(IntervalUnit::MonthDayNano)),
            |args| {
                let out = args[0]
                    .as_string::<i32>()
                    .iter()
                    .map(|v| {
                        v.map(|t| duration_millis(t).map(|ms| IntervalMonthDayNano::new(0, 0, ms * 1_000_000)))
                            .transpose()
                    })
                    .collect::<Result<IntervalMonthDayNanoArray>>()?;
                Ok(Arc::new(out) as ArrayRef)
            },
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_and_seconds_as_documented() {
        assert_eq!(human_readable(96.0).unwrap(), "1 minute, 36 seconds");
        assert_eq!(human_readable(56363463.0).unwrap(), "93 weeks, 1 day, 8 hours, 31 minutes, 3 seconds");
        assert_eq!(duration_millis("42.8ms").unwrap(), 43);
        assert_eq!(duration_millis("3.81 d").unwrap(), 329_184_000);
        assert!(duration_millis("5 parsecs").is_err());
    }
}
