//! Trino's JSON encodings of its nested types and intervals, for `column_to_json`: a
//! `map` is a JSON object whose keys are the keys' text (Trino's clients parse them
//! back with the key type), a `row` is a JSON array of its fields in order; an
//! `interval day to second` is `D HH:MM:SS.mmm`, one `year to month` is `Y-M`. The type
//! names and signatures are in `mod.rs`.

use arrow::array::{Array, MapArray, StructArray};
use arrow::error::ArrowError;
use datafusion::arrow;
use serde_json::{Map, Value};

use super::column_to_json;

/// A map's key as the text a JSON object key must be.
fn key_text(key: Value) -> String {
    match key {
        Value::String(s) => s,
        other => other.to_string(),
    }
}

pub(super) fn map_values(a: &MapArray) -> Result<Vec<Value>, ArrowError> {
    let keys = column_to_json(a.keys().as_ref())?;
    let values = column_to_json(a.values().as_ref())?;
    let offsets = a.value_offsets();
    let mut out = Vec::with_capacity(a.len());
    for i in 0..a.len() {
        let (from, to) = (offsets[i] as usize, offsets[i + 1] as usize);
        let entry: Map<String, Value> = (from..to).map(|e| (key_text(keys[e].clone()), values[e].clone())).collect();
        out.push(if a.is_null(i) { Value::Null } else { Value::Object(entry) });
    }
    Ok(out)
}

pub(super) fn row_values(a: &StructArray) -> Result<Vec<Value>, ArrowError> {
    let fields = a.columns().iter().map(|c| column_to_json(c.as_ref())).collect::<Result<Vec<_>, _>>()?;
    Ok((0..a.len())
        .map(|i| match a.is_null(i) {
            true => Value::Null,
            false => Value::Array(fields.iter().map(|f| f[i].clone()).collect()),
        })
        .collect())
}

/// Trino's text of an `interval day to second` of `millis` milliseconds.
fn day_to_second(millis: i128) -> String {
    let sign = if millis < 0 { "-" } else { "" };
    let m = millis.unsigned_abs();
    let (days, rest) = (m / 86_400_000, m % 86_400_000);
    let (h, mi, s, ms) = (rest / 3_600_000, rest / 60_000 % 60, rest / 1000 % 60, rest % 1000);
    format!("{sign}{days} {h:02}:{mi:02}:{s:02}.{ms:03}")
}

/// Trino's text of an `interval year to month` of `months` months.
fn year_to_month(months: i64) -> String {
    let sign = if months < 0 { "-" } else { "" };
    let m = months.unsigned_abs();
    format!("{sign}{}-{}", m / 12, m % 12)
}

/// Intervals as Trino's clients read them; one that mixes months with days or time
/// has no Trino type and stays Arrow's text (`None`).
pub(super) fn interval_values(array: &dyn Array) -> Option<Vec<Value>> {
    use arrow::array::AsArray;
    use arrow::datatypes::DataType;
    use arrow::datatypes::{IntervalDayTimeType, IntervalMonthDayNanoType, IntervalUnit, IntervalYearMonthType};
    let text = |i: usize, f: &dyn Fn(usize) -> Option<String>| match array.is_null(i) {
        true => Some(Value::Null),
        false => f(i).map(Value::String),
    };
    (0..array.len())
        .map(|i| match array.data_type() {
            DataType::Interval(IntervalUnit::YearMonth) => {
                let a = array.as_primitive::<IntervalYearMonthType>();
                text(i, &|i| Some(year_to_month(a.value(i) as i64)))
            }
            DataType::Interval(IntervalUnit::DayTime) => {
                let a = array.as_primitive::<IntervalDayTimeType>();
                text(i, &|i| {
                    Some(day_to_second(a.value(i).days as i128 * 86_400_000 + a.value(i).milliseconds as i128))
                })
            }
            DataType::Interval(IntervalUnit::MonthDayNano) => {
                let a = array.as_primitive::<IntervalMonthDayNanoType>();
                text(i, &|i| {
                    let v = a.value(i);
                    (v.months == 0)
                        .then(|| day_to_second(v.days as i128 * 86_400_000 + v.nanoseconds as i128 / 1_000_000))
                })
            }
            _ => None,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    #[test]
    fn intervals_print_as_trino_prints_them() {
        assert_eq!(super::day_to_second(2 * 86_400_000 + 3 * 3_600_000), "2 03:00:00.000");
        assert_eq!(super::day_to_second(-(86_400_000 + 21 * 3_600_000 + 1)), "-1 21:00:00.001");
        assert_eq!(super::year_to_month(41), "3-5");
        assert_eq!(super::year_to_month(-14), "-1-2");
    }
}
