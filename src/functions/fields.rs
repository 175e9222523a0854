//! Trino's date and time field functions (`year`, `month`, `day_of_week`, `hour`,
//! `millisecond`, `year_of_week`, `timezone_hour`, ...), `last_day_of_month`,
//! `to_iso8601`, `to_milliseconds`, `date_add` of any unit and amount, and the
//! Joda-Time patterns of `format_datetime`. A value with a time zone is read in its
//! zone's local time.

use std::sync::Arc;

use chrono::{DateTime, Datelike, Duration, Months, NaiveDate, NaiveDateTime, Offset, TimeZone, Timelike};
use datafusion::arrow::array::timezone::Tz;
use datafusion::arrow::array::{
    Array, ArrayRef, AsArray, Date32Array, Int64Array, StringArray, TimestampNanosecondArray,
};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{DataType, Date32Type, Int64Type, IntervalUnit, TimeUnit, TimestampNanosecondType};
use datafusion::common::{exec_err, Result};
use datafusion::logical_expr::{ScalarUDF, Signature, Volatility};

use super::invalid_argument;
use super::simple::function;

/// A field of a local date-time, as Trino numbers it.
type Field = fn(&NaiveDateTime) -> i64;

fn epoch() -> NaiveDateTime {
    NaiveDate::from_ymd_opt(1970, 1, 1).and_then(|d| d.and_hms_opt(0, 0, 0)).unwrap_or_default()
}

/// Each row's local date-time (a date at midnight; a zoned timestamp in its zone) and
/// its zone's offset in seconds.
fn local(array: &ArrayRef) -> Result<Vec<Option<(NaiveDateTime, i32)>>> {
    match array.data_type() {
        DataType::Date32 | DataType::Date64 => {
            let days = cast(array, &DataType::Date32)?;
            let days = days.as_primitive::<Date32Type>();
            Ok(days.iter().map(|d| d.map(|d| (epoch() + Duration::days(d as i64), 0))).collect())
        }
        DataType::Timestamp(_, zone) => {
            let nanos = cast(array, &DataType::Timestamp(TimeUnit::Nanosecond, zone.clone()))?;
            let nanos = nanos.as_primitive::<TimestampNanosecondType>();
            let tz: Option<Tz> = zone.as_ref().map(|z| z.parse()).transpose()?;
            let at = |n: i64| {
                let utc = DateTime::from_timestamp_nanos(n);
                match &tz {
                    Some(tz) => {
                        let t = utc.with_timezone(tz);
                        (t.naive_local(), t.offset().fix().local_minus_utc())
                    }
                    None => (utc.naive_utc(), 0),
                }
            };
            Ok(nanos.iter().map(|n| n.map(at)).collect())
        }
        DataType::Time32(_) | DataType::Time64(_) => {
            let nanos = cast(&cast(array, &DataType::Time64(TimeUnit::Nanosecond))?, &DataType::Int64)?;
            Ok(nanos
                .as_primitive::<Int64Type>()
                .iter()
                .map(|n| n.map(|n| (epoch() + Duration::nanoseconds(n), 0)))
                .collect())
        }
        DataType::Utf8 | DataType::Utf8View | DataType::LargeUtf8 => {
            local(&cast(array, &DataType::Timestamp(TimeUnit::Nanosecond, None))?)
        }
        other => exec_err!("expected a date or time, got {other}"),
    }
}

fn field_values(args: &[ArrayRef], f: Field) -> Result<ArrayRef> {
    let values: Int64Array = local(&args[0])?.iter().map(|v| v.map(|(t, _)| f(&t))).collect();
    Ok(Arc::new(values))
}

pub fn functions() -> Vec<ScalarUDF> {
    let one = || Signature::any(1, Volatility::Immutable);
    let int = |_: &[DataType]| Ok(DataType::Int64);
    macro_rules! field {
        ($name:literal, $f:expr) => {
            function($name, one(), int, |args| field_values(args, $f))
        };
    }
    vec![
        field!("year", |t| t.year() as i64),
        field!("quarter", |t| t.month0() as i64 / 3 + 1),
        field!("month", |t| t.month() as i64),
        field!("week", |t| t.iso_week().week() as i64),
        field!("week_of_year", |t| t.iso_week().week() as i64),
        field!("day", |t| t.day() as i64),
        field!("day_of_month", |t| t.day() as i64),
        field!("day_of_week", |t| t.weekday().number_from_monday() as i64),
        field!("dow", |t| t.weekday().number_from_monday() as i64),
        field!("day_of_year", |t| t.ordinal() as i64),
        field!("doy", |t| t.ordinal() as i64),
        field!("year_of_week", |t| t.iso_week().year() as i64),
        field!("yow", |t| t.iso_week().year() as i64),
        field!("hour", |t| t.hour() as i64),
        field!("minute", |t| t.minute() as i64),
        field!("second", |t| t.second() as i64),
        field!("millisecond", |t| (t.nanosecond() / 1_000_000) as i64 % 1000),
        function("timezone_hour", one(), int, |args| {
            let out: Int64Array = local(&args[0])?.iter().map(|v| v.map(|(_, o)| o as i64 / 3600)).collect();
            Ok(Arc::new(out) as ArrayRef)
        }),
        function("timezone_minute", one(), int, |args| {
            let out: Int64Array = local(&args[0])?.iter().map(|v| v.map(|(_, o)| (o as i64 % 3600) / 60)).collect();
            Ok(Arc::new(out) as ArrayRef)
        }),
        function("last_day_of_month", one(), |_| Ok(DataType::Date32), last_day_of_month),
        function("to_iso8601", one(), |_| Ok(DataType::Utf8), to_iso8601),
        function("to_milliseconds", one(), int, to_milliseconds),
        function("date_add", Signature::any(3, Volatility::Immutable), |t| Ok(t[2].clone()), date_add),
        function("format_datetime", Signature::any(2, Volatility::Immutable), |_| Ok(DataType::Utf8), format_datetime),
    ]
}

fn last_day_of_month(args: &[ArrayRef]) -> Result<ArrayRef> {
    let out: Date32Array = local(&args[0])?
        .iter()
        .map(|v| {
            v.and_then(|(t, _)| {
                let first = NaiveDate::from_ymd_opt(t.year(), t.month(), 1)?;
                let last = first.checked_add_months(Months::new(1))? - Duration::days(1);
                Some((last - epoch().date()).num_days() as i32)
            })
        })
        .collect();
    Ok(Arc::new(out))
}

fn to_iso8601(args: &[ArrayRef]) -> Result<ArrayRef> {
    let date = matches!(args[0].data_type(), DataType::Date32 | DataType::Date64);
    let out: StringArray = local(&args[0])?
        .iter()
        .map(|v| {
            v.map(|(t, offset)| match date {
                true => t.format("%Y-%m-%d").to_string(),
                false if offset == 0 && !matches!(args[0].data_type(), DataType::Timestamp(_, Some(_))) => {
                    t.format("%Y-%m-%dT%H:%M:%S%.3f").to_string()
                }
                false => {
                    let z = chrono::FixedOffset::east_opt(offset).map(|o| o.to_string()).unwrap_or_default();
                    let z = if z == "+00:00" { "Z".to_string() } else { z };
                    format!("{}{z}", t.format("%Y-%m-%dT%H:%M:%S%.3f"))
                }
            })
        })
        .collect();
    Ok(Arc::new(out))
}

fn to_milliseconds(args: &[ArrayRef]) -> Result<ArrayRef> {
    let DataType::Interval(unit) = args[0].data_type() else {
        return Err(invalid_argument("to_milliseconds takes an interval day to second"));
    };
    let out: Int64Array = match unit {
        IntervalUnit::MonthDayNano => args[0]
            .as_primitive::<datafusion::arrow::datatypes::IntervalMonthDayNanoType>()
            .iter()
            .map(|v| v.map(|v| v.days as i64 * 86_400_000 + v.nanoseconds / 1_000_000))
            .collect(),
        IntervalUnit::DayTime => args[0]
            .as_primitive::<datafusion::arrow::datatypes::IntervalDayTimeType>()
            .iter()
            .map(|v| v.map(|v| v.days as i64 * 86_400_000 + v.milliseconds as i64))
            .collect(),
        IntervalUnit::YearMonth => return Err(invalid_argument("to_milliseconds takes an interval day to second")),
    };
    Ok(Arc::new(out))
}

/// `t` moved by `n` units, in local time (months keep the day where it exists).
fn add(unit: &str, n: i64, t: NaiveDateTime) -> Result<NaiveDateTime> {
    let fixed = |d: Duration| t.checked_add_signed(d).ok_or_else(|| invalid_argument("date_add overflows"));
    let months = |m: i64| {
        let moved = match m >= 0 {
            true => t.checked_add_months(Months::new(m as u32)),
            false => t.checked_sub_months(Months::new(m.unsigned_abs() as u32)),
        };
        moved.ok_or_else(|| invalid_argument("date_add overflows"))
    };
    match unit {
        "millisecond" => fixed(Duration::milliseconds(n)),
        "second" => fixed(Duration::seconds(n)),
        "minute" => fixed(Duration::minutes(n)),
        "hour" => fixed(Duration::hours(n)),
        "day" => fixed(Duration::days(n)),
        "week" => fixed(Duration::weeks(n)),
        "month" => months(n),
        "quarter" => months(n * 3),
        "year" => months(n * 12),
        other => Err(invalid_argument(format!("'{other}' is not a valid unit for date_add"))),
    }
}

/// `date_add(unit, n, x)` where the unit or the amount is not a literal (the dialect
/// writes the literal case as an interval addition).
fn date_add(args: &[ArrayRef]) -> Result<ArrayRef> {
    let units = cast(&args[0], &DataType::Utf8)?;
    let units = units.as_string::<i32>();
    let amounts = cast(&args[1], &DataType::Int64)?;
    let amounts = amounts.as_primitive::<Int64Type>();
    let values = local(&args[2])?;
    let moved: Vec<Option<NaiveDateTime>> = (0..values.len())
        .map(|i| match (units.is_valid(i), amounts.is_valid(i), values[i]) {
            (true, true, Some((t, _))) => add(&units.value(i).to_ascii_lowercase(), amounts.value(i), t).map(Some),
            _ => Ok(None),
        })
        .collect::<Result<_>>()?;
    let data_type = args[2].data_type();
    match data_type {
        DataType::Date32 | DataType::Date64 => {
            let days: Date32Array =
                moved.iter().map(|t| t.map(|t| (t.date() - epoch().date()).num_days() as i32)).collect();
            Ok(cast(&(Arc::new(days) as ArrayRef), data_type)?)
        }
        DataType::Timestamp(_, zone) => {
            // Local times back to instants: naive ones are; zoned ones shift by their offset.
            let offsets: Vec<i64> = values.iter().map(|v| v.map_or(0, |(_, o)| o as i64)).collect();
            let nanos: TimestampNanosecondArray = moved
                .iter()
                .zip(&offsets)
                .map(|(t, o)| t.and_then(|t| t.and_utc().timestamp_nanos_opt()).map(|n| n - o * 1_000_000_000))
                .collect();
            Ok(cast(&(Arc::new(nanos.with_timezone_opt(zone.clone())) as ArrayRef), data_type)?)
        }
        other => Err(invalid_argument(format!("date_add takes a date or a timestamp, not {other}"))),
    }
}

/// A Joda-Time pattern (`yyyy-MM-dd HH:mm:ss`) as chrono's.
fn joda(pattern: &str) -> Result<String> {
    let chars: Vec<char> = pattern.chars().collect();
    let mut out = String::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c == '\'' {
            let end = chars[i + 1..].iter().position(|&x| x == '\'').map(|p| i + 1 + p).unwrap_or(chars.len());
            let text: String = chars[i + 1..end].iter().collect();
            out.push_str(&if text.is_empty() { "'".to_string() } else { text.replace('%', "%%") });
            i = end + 1;
            continue;
        }
        let run = chars[i..].iter().take_while(|&&x| x == c).count();
        i += run;
        if !c.is_ascii_alphabetic() {
            out.extend(std::iter::repeat_n(c, run).map(|c| if c == '%' { "%%".to_string() } else { c.to_string() }));
            continue;
        }
        out.push_str(match (c, run) {
            ('y' | 'Y' | 'x', 2) => "%y",
            ('y' | 'Y' | 'x', _) => "%Y",
            ('M', 1) => "%-m",
            ('M', 2) => "%m",
            ('M', 3) => "%b",
            ('M', _) => "%B",
            ('d', 1) => "%-d",
            ('d', _) => "%d",
            ('D', _) => "%j",
            ('H', 1) => "%-H",
            ('H', _) => "%H",
            ('h', 1) => "%-I",
            ('h', _) => "%I",
            ('m', 1) => "%-M",
            ('m', _) => "%M",
            ('s', 1) => "%-S",
            ('s', _) => "%S",
            ('S', 1..=3) => "%3f",
            ('S', 4..=6) => "%6f",
            ('S', _) => "%9f",
            ('a', _) => "%p",
            ('E', 1..=3) => "%a",
            ('E', _) => "%A",
            ('e', _) => "%u",
            ('Z', 1) => "%z",
            ('Z', _) => "%:z",
            ('z', _) => "%Z",
            ('w', _) => "%V",
            (other, _) => return Err(invalid_argument(format!("the pattern letter '{other}' is not supported"))),
        });
    }
    Ok(out)
}

fn format_datetime(args: &[ArrayRef]) -> Result<ArrayRef> {
    let patterns = cast(&args[1], &DataType::Utf8)?;
    let patterns = patterns.as_string::<i32>();
    let values = local(&args[0])?;
    let mut compiled: Option<(String, String)> = None;
    let out: StringArray = (0..values.len())
        .map(|i| {
            let (Some((t, offset)), true) = (values[i], patterns.is_valid(i)) else { return Ok(None) };
            if compiled.as_ref().is_none_or(|(p, _)| p != patterns.value(i)) {
                compiled = Some((patterns.value(i).to_string(), joda(patterns.value(i))?));
            }
            let format = &compiled.as_ref().expect("compiled above").1;
            let zoned = chrono::FixedOffset::east_opt(offset)
                .and_then(|o| o.from_local_datetime(&t).single())
                .ok_or_else(|| invalid_argument("an offset out of range"))?;
            Ok(Some(zoned.format(format).to_string()))
        })
        .collect::<Result<_>>()?;
    Ok(Arc::new(out))
}

#[cfg(test)]
mod tests {
    #[test]
    fn joda_patterns_as_chrono() {
        assert_eq!(super::joda("yyyy-MM-dd HH:mm:ss.SSS").unwrap(), "%Y-%m-%d %H:%M:%S.%3f");
        assert_eq!(super::joda("EEEE, MMMM d, yy 'at' h a").unwrap(), "%A, %B %-d, %y at %-I %p");
        assert!(super::joda("G").is_err());
    }
}
