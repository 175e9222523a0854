//! Trino's date and time functions that DataFusion lacks and that read or make time
//! zones: `from_iso8601_timestamp[_nanos]`, `from_iso8601_date`, `at_timezone`,
//! `with_timezone`, `timezone`, `from_unixtime_nanos`, `date_diff` and `date_parse`.
//! A timestamp with time zone is an Arrow timestamp whose type names the zone (one
//! zone per column, where Trino has one per value): a function that makes one takes
//! its zone from a constant argument. The functions that read the session's zone
//! (an ISO 8601 text without an offset, a timestamp without a zone) get it as a last
//! argument the dialect adds.

use std::sync::Arc;

use chrono::{DateTime, Datelike, FixedOffset, NaiveDate, NaiveDateTime};
use datafusion::arrow::array::{
    Array, ArrayRef, AsArray, Date32Array, Int64Array, StringArray, TimestampMillisecondArray, TimestampNanosecondArray,
};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{DataType, Int64Type, TimeUnit, TimestampNanosecondType};
use datafusion::common::Result;
use datafusion::logical_expr::{ReturnFieldArgs, ScalarUDF, Signature, TypeSignature, Volatility};

use super::invalid_argument;
use super::simple::{constant_string, function, typed};

pub fn functions() -> Vec<ScalarUDF> {
    let one_or_two = || Signature::one_of(vec![TypeSignature::Any(1), TypeSignature::Any(2)], Volatility::Immutable);
    let two_or_three = || Signature::one_of(vec![TypeSignature::Any(2), TypeSignature::Any(3)], Volatility::Immutable);
    vec![
        typed("from_iso8601_timestamp", one_or_two(), |a| iso_type(a, TimeUnit::Millisecond), from_iso8601),
        typed("from_iso8601_timestamp_nanos", one_or_two(), |a| iso_type(a, TimeUnit::Nanosecond), from_iso8601),
        function(
            "from_iso8601_date",
            Signature::any(1, Volatility::Immutable),
            |_| Ok(DataType::Date32),
            from_iso8601_date,
        ),
        typed("at_timezone", two_or_three(), zone_from_argument, at_timezone),
        typed("with_timezone", Signature::any(2, Volatility::Immutable), zone_from_argument, with_timezone),
        function("timezone", Signature::any(1, Volatility::Immutable), |_| Ok(DataType::Utf8), timezone),
        function(
            "from_unixtime_nanos",
            Signature::any(1, Volatility::Immutable),
            |_| Ok(DataType::Timestamp(TimeUnit::Nanosecond, Some("UTC".into()))),
            from_unixtime_nanos,
        ),
        function("date_diff", Signature::any(3, Volatility::Immutable), |_| Ok(DataType::Int64), date_diff),
        function(
            "date_parse",
            Signature::any(2, Volatility::Immutable),
            |_| Ok(DataType::Timestamp(TimeUnit::Millisecond, None)),
            date_parse,
        ),
    ]
}

use super::simple::utf8 as strings;

/// What an ISO 8601 text names: an instant with its offset, or a local date-time
/// (nanoseconds of the naive time) to be read in the session's zone.
enum Iso {
    Instant(i64, FixedOffset),
    Local(i64),
}

fn iso(text: &str) -> Result<Iso> {
    let bad = || invalid_argument(format!("Invalid format: \"{text}\""));
    let t = text.trim();
    let zoned = DateTime::parse_from_rfc3339(t).ok().or_else(|| {
        ["%Y-%m-%dT%H:%M:%S%.f%:z", "%Y-%m-%dT%H:%M%:z", "%Y-%m-%dT%H:%M:%S%.f%z"]
            .iter()
            .find_map(|f| DateTime::parse_from_str(t, f).ok())
    });
    if let Some(dt) = zoned {
        return Ok(Iso::Instant(dt.timestamp_nanos_opt().ok_or_else(bad)?, *dt.offset()));
    }
    let naive = ["%Y-%m-%dT%H:%M:%S%.f", "%Y-%m-%dT%H:%M"]
        .iter()
        .find_map(|f| NaiveDateTime::parse_from_str(t, f).ok())
        .or_else(|| NaiveDate::parse_from_str(t, "%Y-%m-%d").ok().and_then(|d| d.and_hms_opt(0, 0, 0)))
        .ok_or_else(bad)?;
    Ok(Iso::Local(naive.and_utc().timestamp_nanos_opt().ok_or_else(bad)?))
}

/// The zone of `from_iso8601_timestamp`'s result: a constant text's own offset, else
/// the session's.
fn iso_type(args: &ReturnFieldArgs, unit: TimeUnit) -> Result<DataType> {
    let session = constant_string(args, 1).unwrap_or("UTC");
    let zone = match constant_string(args, 0).map(iso) {
        Some(Ok(Iso::Instant(_, offset))) => offset.to_string(),
        _ => session.to_string(),
    };
    Ok(DataType::Timestamp(unit, Some(zone.into())))
}

fn from_iso8601(args: &[ArrayRef], returns: &DataType) -> Result<ArrayRef> {
    let text = strings(&args[0])?;
    let session = args.get(1).map(strings).transpose()?;
    let session = session.as_ref().filter(|s| !s.is_empty() && s.is_valid(0)).map_or("UTC", |s| s.value(0));
    let (mut instants, mut locals) = (vec![None; text.len()], vec![None; text.len()]);
    for i in (0..text.len()).filter(|&i| text.is_valid(i)) {
        match iso(text.value(i))? {
            Iso::Instant(n, _) => instants[i] = Some(n),
            Iso::Local(n) => locals[i] = Some(n),
        }
    }
    // Local times are read in the session's zone, all at once.
    let locals: ArrayRef = Arc::new(TimestampNanosecondArray::from(locals));
    let locals = instants_of(&locals, session)?;
    let merged: Vec<Option<i64>> =
        instants.into_iter().enumerate().map(|(i, n)| n.or(locals.is_valid(i).then(|| locals.value(i)))).collect();
    let DataType::Timestamp(_, zone) = returns else { return datafusion::common::exec_err!("a timestamp type") };
    let out: ArrayRef = Arc::new(TimestampNanosecondArray::from(merged).with_timezone_opt(zone.clone()));
    Ok(cast(&out, returns)?)
}

fn from_iso8601_date(args: &[ArrayRef]) -> Result<ArrayRef> {
    let text = strings(&args[0])?;
    let epoch = NaiveDate::from_ymd_opt(1970, 1, 1).expect("the epoch is a date");
    let out: Date32Array = (0..text.len())
        .map(|i| {
            if text.is_null(i) {
                return Ok(None);
            }
            let t = text.value(i).trim();
            let week = if t.matches('-').count() == 1 { format!("{t}-1") } else { t.to_string() };
            let date = NaiveDate::parse_from_str(t, "%Y-%m-%d")
                .or_else(|_| NaiveDate::parse_from_str(&week, "%G-W%V-%u"))
                .or_else(|_| NaiveDate::parse_from_str(t, "%Y-%j"))
                .or_else(|_| NaiveDate::parse_from_str(&format!("{t}-01"), "%Y-%m-%d"))
                .map_err(|_| invalid_argument(format!("Invalid format: \"{t}\"")))?;
            Ok(Some((date - epoch).num_days() as i32))
        })
        .collect::<Result<_>>()?;
    Ok(Arc::new(out))
}

/// The zone named by the constant second argument, on the first argument's unit.
fn zone_from_argument(args: &ReturnFieldArgs) -> Result<DataType> {
    let zone = constant_string(args, 1).ok_or_else(|| invalid_argument("the time zone must be a constant"))?;
    let unit = match args.arg_fields[0].data_type() {
        DataType::Timestamp(unit, _) => *unit,
        _ => TimeUnit::Millisecond,
    };
    Ok(DataType::Timestamp(unit, Some(zone.into())))
}

/// The instants of `array`: a timestamp without a zone is local time in `session`.
fn instants_of(array: &ArrayRef, session: &str) -> Result<TimestampNanosecondArray> {
    let with_zone = match array.data_type() {
        DataType::Timestamp(_, Some(_)) => array.clone(),
        _ => cast(array, &DataType::Timestamp(TimeUnit::Nanosecond, Some(session.into())))?,
    };
    Ok(cast(&with_zone, &DataType::Timestamp(TimeUnit::Nanosecond, Some("UTC".into())))?
        .as_primitive::<TimestampNanosecondType>()
        .clone())
}

/// The same instant, shown in another zone.
fn at_timezone(args: &[ArrayRef], returns: &DataType) -> Result<ArrayRef> {
    let session = args.get(2).map(strings).transpose()?;
    let session = session.as_ref().filter(|s| !s.is_empty() && s.is_valid(0)).map_or("UTC", |s| s.value(0));
    let DataType::Timestamp(_, zone) = returns else { return datafusion::common::exec_err!("a timestamp type") };
    let out: ArrayRef = Arc::new(instants_of(&args[0], session)?.with_timezone_opt(zone.clone()));
    Ok(cast(&out, returns)?)
}

/// The same local time, in the given zone.
fn with_timezone(args: &[ArrayRef], returns: &DataType) -> Result<ArrayRef> {
    let local = cast(&args[0], &DataType::Timestamp(TimeUnit::Nanosecond, None))?;
    Ok(cast(&local, returns)?)
}

fn timezone(args: &[ArrayRef]) -> Result<ArrayRef> {
    let zone = match args[0].data_type() {
        DataType::Timestamp(_, Some(zone)) => zone.to_string(),
        other => return Err(invalid_argument(format!("timezone() needs a value with a time zone, not {other}"))),
    };
    let out: StringArray = (0..args[0].len()).map(|i| args[0].is_valid(i).then(|| zone.clone())).collect();
    Ok(Arc::new(out))
}

fn from_unixtime_nanos(args: &[ArrayRef]) -> Result<ArrayRef> {
    let nanos = cast(&args[0], &DataType::Int64)?;
    let out = nanos.as_primitive::<Int64Type>().reinterpret_cast::<TimestampNanosecondType>().with_timezone("UTC");
    Ok(Arc::new(out))
}

/// Whole `unit`s from `a` to `b` (calendar months for month, quarter and year).
fn difference(unit: &str, a: i64, b: i64) -> Result<i64> {
    let fixed = match unit {
        "nanosecond" => Some(1),
        "microsecond" => Some(1_000),
        "millisecond" => Some(1_000_000),
        "second" => Some(1_000_000_000),
        "minute" => Some(60_000_000_000),
        "hour" => Some(3_600_000_000_000),
        "day" => Some(86_400_000_000_000),
        "week" => Some(7 * 86_400_000_000_000),
        _ => None,
    };
    if let Some(size) = fixed {
        return Ok((b - a) / size);
    }
    let (x, y) = (DateTime::from_timestamp_nanos(a).naive_utc(), DateTime::from_timestamp_nanos(b).naive_utc());
    let mut months = (y.year() - x.year()) as i64 * 12 + y.month() as i64 - x.month() as i64;
    // A month is whole once the later day and time of month are reached.
    let (xr, yr) = ((x.day(), x.time()), (y.day(), y.time()));
    if months > 0 && yr < xr {
        months -= 1;
    } else if months < 0 && yr > xr {
        months += 1;
    }
    match unit {
        "month" => Ok(months),
        "quarter" => Ok(months / 3),
        "year" => Ok(months / 12),
        other => Err(invalid_argument(format!("'{other}' is not a valid unit for date_diff"))),
    }
}

fn date_diff(args: &[ArrayRef]) -> Result<ArrayRef> {
    let units = strings(&args[0])?;
    let (a, b) = (instants_of(&args[1], "UTC")?, instants_of(&args[2], "UTC")?);
    let out: Int64Array = (0..units.len())
        .map(|i| {
            if units.is_null(i) || a.is_null(i) || b.is_null(i) {
                return Ok(None);
            }
            difference(&units.value(i).to_ascii_lowercase(), a.value(i), b.value(i)).map(Some)
        })
        .collect::<Result<_>>()?;
    Ok(Arc::new(out))
}

/// MySQL's format specifiers as chrono's.
fn chrono_format(mysql: &str) -> Result<String> {
    let mut out = String::new();
    let mut chars = mysql.chars();
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        let Some(spec) = chars.next() else { return Err(invalid_argument("a format ends with %")) };
        out.push_str(match spec {
            'Y' => "%Y",
            'y' => "%y",
            'm' | 'c' => "%m",
            'd' | 'e' => "%d",
            'H' | 'k' => "%H",
            'h' | 'I' | 'l' => "%I",
            'i' => "%M",
            's' | 'S' => "%S",
            'f' => "%6f",
            'p' => "%p",
            'M' => "%B",
            'b' => "%b",
            'W' => "%A",
            'a' => "%a",
            'j' => "%j",
            'T' => "%H:%M:%S",
            'r' => "%I:%M:%S %p",
            '%' => "%%",
            other => return Err(invalid_argument(format!("%{other} is not a supported format specifier"))),
        });
    }
    Ok(out)
}

fn date_parse(args: &[ArrayRef]) -> Result<ArrayRef> {
    let (text, formats) = (strings(&args[0])?, strings(&args[1])?);
    let out: TimestampMillisecondArray = (0..text.len())
        .map(|i| {
            if text.is_null(i) || formats.is_null(i) {
                return Ok(None);
            }
            let f = chrono_format(formats.value(i))?;
            let t = text.value(i);
            let bad = || invalid_argument(format!("Invalid format: \"{t}\""));
            // chrono needs a time of day and a day: give the parts the format lacks.
            let parsed = NaiveDateTime::parse_from_str(t, &f)
                .or_else(|_| NaiveDateTime::parse_from_str(&format!("{t} 00"), &format!("{f} %M")))
                .or_else(|_| NaiveDateTime::parse_from_str(&format!("{t} 00:00"), &format!("{f} %M:%S")))
                .or_else(|_| NaiveDate::parse_from_str(t, &f).map(|d| d.and_hms_opt(0, 0, 0).unwrap_or_default()))
                .map_err(|_| bad())?;
            Ok(Some(parsed.and_utc().timestamp_millis()))
        })
        .collect::<Result<_>>()?;
    Ok(Arc::new(out))
}
