//! Trino type names and Trino JSON value encodings; the CLI's text output formats are
//! in `text`.
//!
//! The coordinator calls [`trino_type`], [`type_signature`] and [`batch_to_json_rows`] to turn
//! Arrow schemas and batches into the `columns` and `data` of Trino's `QueryResults`; the CLI
//! (`flotilla sql`, `flotilla local`) calls [`format_rows`] to print the rows the client collected.
//! This module owns the mapping Arrow type -> Trino type and the exact wire spelling of values,
//! so that Trino clients (JDBC, the Trino CLI, Python) can parse what the coordinator sends.

use std::fmt::Display;

use arrow::array::{
    Array, AsArray, BooleanArray, GenericStringArray, OffsetSizeTrait, PrimitiveArray, StringViewArray,
};
use arrow::buffer::NullBuffer;
use arrow::compute::cast;
use arrow::datatypes::*;
use arrow::error::ArrowError;
use arrow::record_batch::RecordBatch;
use arrow::util::display::{ArrayFormatter, FormatOptions};
use base64::Engine as _;
use datafusion::arrow;
use serde_json::{json, Value};

mod delimited;
mod nested;
mod rows_text;
mod text;
pub use delimited::write_delimited_rows;
pub use rows_text::{find_member, rows_to_text};
pub use text::*;

/// A result column as the client sees it: its name and its Trino type name.
#[derive(serde::Serialize, serde::Deserialize, Clone, Debug, PartialEq)]
pub struct Column {
    pub name: String,
    pub type_name: String,
}

/// Arrow's second-precision timestamps are reported as millisecond ones: `timestamp(3)` is what
/// Trino clients expect by default, and widening loses nothing.
fn time_precision(unit: &TimeUnit) -> u8 {
    match unit {
        TimeUnit::Second | TimeUnit::Millisecond => 3,
        TimeUnit::Microsecond => 6,
        TimeUnit::Nanosecond => 9,
    }
}

/// Whether a field holds JSON text: its Arrow extension is the canonical `arrow.json`.
fn is_json(field: &Field) -> bool {
    field.extension_type_name() == Some("arrow.json")
}

/// The Trino type name of a field: its Arrow type's, or `json` for JSON text (the
/// canonical `arrow.json` extension).
pub fn field_type(field: &Field) -> String {
    match is_json(field) {
        true => "json".into(),
        false => trino_type(field.data_type()),
    }
}

/// Trino's `typeSignature` of a field (see [`field_type`]).
pub fn field_signature(field: &Field) -> Value {
    match is_json(field) {
        true => json!({"rawType": "json", "arguments": []}),
        false => type_signature(field.data_type()),
    }
}

/// The Trino type name of an Arrow type, e.g. `decimal(15,2)` or `array(varchar)`.
pub fn trino_type(dt: &DataType) -> String {
    match dt {
        DataType::Int64 | DataType::UInt64 | DataType::UInt32 => "bigint".into(),
        DataType::Int32 | DataType::UInt16 => "integer".into(),
        DataType::Int16 | DataType::UInt8 => "smallint".into(),
        DataType::Int8 => "tinyint".into(),
        DataType::Float64 => "double".into(),
        DataType::Float32 | DataType::Float16 => "real".into(),
        DataType::Decimal32(p, s)
        | DataType::Decimal64(p, s)
        | DataType::Decimal128(p, s)
        | DataType::Decimal256(p, s) => format!("decimal({p},{})", (*s).max(0)),
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => "varchar".into(),
        DataType::Boolean => "boolean".into(),
        DataType::Date32 | DataType::Date64 => "date".into(),
        DataType::Timestamp(unit, tz) => {
            let zone = if tz.is_some() { " with time zone" } else { "" };
            format!("timestamp({}){zone}", time_precision(unit))
        }
        DataType::Time32(unit) | DataType::Time64(unit) => {
            format!("time({})", time_precision(unit))
        }
        DataType::Null => "unknown".into(),
        DataType::Binary | DataType::LargeBinary | DataType::BinaryView | DataType::FixedSizeBinary(_) => {
            "varbinary".into()
        }
        DataType::Interval(IntervalUnit::YearMonth) => "interval year to month".into(),
        DataType::Interval(_) => "interval day to second".into(),
        DataType::Dictionary(_, value) => trino_type(value),
        DataType::List(f) | DataType::LargeList(f) | DataType::FixedSizeList(f, _) => {
            format!("array({})", field_type(f))
        }
        DataType::Map(entries, _) => match entries.data_type() {
            DataType::Struct(kv) if kv.len() == 2 => {
                format!("map({}, {})", field_type(&kv[0]), field_type(&kv[1]))
            }
            other => format!("map({other})"),
        },
        DataType::Struct(fields) => {
            let fields: Vec<String> =
                fields.iter().map(|f| format!("{} {}", row_field_name(f.name()), field_type(f))).collect();
            format!("row({})", fields.join(", "))
        }
        other => format!("{other:?}").to_lowercase(),
    }
}

/// A row field's name as Trino prints it in a type: quoted unless a plain identifier.
fn row_field_name(name: &str) -> String {
    let plain = name.chars().next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    match plain {
        true => name.to_string(),
        false => format!("\"{}\"", name.replace('"', "\"\"")),
    }
}

fn long_arg(v: i64) -> Value {
    json!({"kind": "LONG", "value": v})
}

fn type_arg(field: &Field) -> Value {
    json!({"kind": "TYPE", "value": field_signature(field)})
}

/// Trino's `typeSignature` object; clients use it (rather than the type string) to pick decoders.
pub fn type_signature(dt: &DataType) -> Value {
    let (raw, args): (String, Vec<Value>) = match dt {
        DataType::Decimal32(p, s)
        | DataType::Decimal64(p, s)
        | DataType::Decimal128(p, s)
        | DataType::Decimal256(p, s) => ("decimal".into(), vec![long_arg(*p as i64), long_arg((*s).max(0) as i64)]),
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => {
            // Unbounded varchar is spelled as the maximum length in Trino's signatures.
            ("varchar".into(), vec![long_arg(i32::MAX as i64)])
        }
        DataType::Timestamp(unit, tz) => {
            let zone = if tz.is_some() { " with time zone" } else { "" };
            (format!("timestamp{zone}"), vec![long_arg(time_precision(unit) as i64)])
        }
        DataType::Time32(unit) | DataType::Time64(unit) => ("time".into(), vec![long_arg(time_precision(unit) as i64)]),
        DataType::Dictionary(_, value) => return type_signature(value),
        DataType::List(f) | DataType::LargeList(f) | DataType::FixedSizeList(f, _) => {
            ("array".into(), vec![type_arg(f)])
        }
        DataType::Map(entries, _) => match entries.data_type() {
            DataType::Struct(kv) if kv.len() == 2 => ("map".into(), vec![type_arg(&kv[0]), type_arg(&kv[1])]),
            other => (trino_type(other), vec![]),
        },
        DataType::Struct(fields) => {
            let named = |f: &FieldRef| json!({"kind": "NAMED_TYPE", "value": {"fieldName": {"name": f.name()}, "typeSignature": field_signature(f)}});
            ("row".into(), fields.iter().map(named).collect())
        }
        other => (trino_type(other), vec![]),
    };
    json!({"rawType": raw, "arguments": args})
}

/// Places the decimal point into the digits of an unscaled decimal value. Works on the integer's
/// decimal digits rather than on floats so that every digit of a 38-digit decimal survives.
fn decimal_to_string(unscaled: impl Display, scale: i8) -> String {
    let mut out = Vec::new();
    push_decimal(&unscaled.to_string(), scale, &mut out);
    String::from_utf8(out).expect("digits, a sign and a point are ASCII")
}

/// [`decimal_to_string`] into `out`, from the integer's decimal text (`-` and digits).
fn push_decimal(text: &str, scale: i8, out: &mut Vec<u8>) {
    let (sign, digits) = match text.strip_prefix('-') {
        Some(d) => ("-", d),
        None => ("", text),
    };
    out.extend_from_slice(sign.as_bytes());
    if scale <= 0 {
        out.extend_from_slice(digits.as_bytes());
        if digits != "0" {
            out.resize(out.len() + scale.unsigned_abs() as usize, b'0');
        }
        return;
    }
    let scale = scale as usize;
    if digits.len() <= scale {
        out.extend_from_slice(b"0.");
        out.resize(out.len() + scale - digits.len(), b'0');
        out.extend_from_slice(digits.as_bytes());
    } else {
        let (whole, fraction) = digits.split_at(digits.len() - scale);
        out.extend_from_slice(whole.as_bytes());
        out.push(b'.');
        out.extend_from_slice(fraction.as_bytes());
    }
}

fn decimal_json(unscaled: impl Display, scale: i8) -> Value {
    Value::String(decimal_to_string(unscaled, scale))
}

fn float_json(v: f64) -> Value {
    if v.is_nan() {
        Value::String("NaN".into())
    } else if v.is_infinite() {
        Value::String(if v > 0.0 { "Infinity" } else { "-Infinity" }.into())
    } else {
        serde_json::Number::from_f64(v).map_or(Value::Null, Value::Number)
    }
}

/// Goes through the shortest decimal text of the f32 so `real` 0.1 is sent as 0.1, not as the
/// 0.10000000149011612 a plain widening to f64 would produce.
fn real_json(v: f32) -> Value {
    if v.is_finite() {
        float_json(v.to_string().parse::<f64>().unwrap_or(v as f64))
    } else {
        float_json(v as f64)
    }
}

/// `None` when the day lies outside chrono's range; callers fall back to Arrow's display then.
fn date_string(days: i64) -> Option<String> {
    match date_digits(days) {
        Some(text) => Some(String::from_utf8(text.to_vec()).expect("digits and dashes are ASCII")),
        None => Some(date_of(days)?.format("%Y-%m-%d").to_string()),
    }
}

fn date_of(days: i64) -> Option<chrono::NaiveDate> {
    const UNIX_EPOCH_FROM_CE: i64 = 719_163;
    let ce = i32::try_from(days.checked_add(UNIX_EPOCH_FROM_CE)?).ok()?;
    chrono::NaiveDate::from_num_days_from_ce_opt(ce)
}

/// `YYYY-MM-DD` without chrono's format-string parser, which dominated result encoding.
fn ymd(d: chrono::NaiveDate) -> String {
    use chrono::Datelike;
    match ymd_digits(d.year() as i64, d.month(), d.day()) {
        Some(text) => String::from_utf8(text.to_vec()).expect("digits and dashes are ASCII"),
        None => d.format("%Y-%m-%d").to_string(),
    }
}

/// `YYYY-MM-DD` digit by digit, for years 0 to 9999 (`None` for the others).
fn ymd_digits(year: i64, month: u32, day: u32) -> Option<[u8; 10]> {
    let y = u32::try_from(year).ok().filter(|y| *y <= 9999)?;
    let mut text = *b"0000-00-00";
    for (at, value, width) in [(0, y, 4), (5, month, 2), (8, day, 2)] {
        let mut v = value;
        for k in (at..at + width).rev() {
            text[k] = b'0' + (v % 10) as u8;
            v /= 10;
        }
    }
    Some(text)
}

/// `YYYY-MM-DD` of a count of days since 1970-01-01, for years 0 to 9999: the one
/// path from day counts to text, for `Value`s and for rows written straight.
fn date_digits(days: i64) -> Option<[u8; 10]> {
    let (y, m, d) = civil_from_days(days);
    ymd_digits(y, m, d)
}

/// Year, month and day of a count of days since 1970-01-01 (proleptic Gregorian), by
/// arithmetic over 400-year eras of 146,097 days whose years start on March 1st (so
/// that the leap day ends a year). chrono's conversion was a tenth of the time the
/// coordinator spent writing lineitem's rows.
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468; // days from 0000-03-01
    let era = z.div_euclid(146_097);
    let day_of_era = z.rem_euclid(146_097);
    let year_of_era = (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let month_from_march = (5 * day_of_year + 2) / 153;
    let day = (day_of_year - (153 * month_from_march + 2) / 5 + 1) as u32;
    let month = if month_from_march < 10 { month_from_march + 3 } else { month_from_march - 9 } as u32;
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

fn timestamp_string(v: i64, unit: &TimeUnit) -> Option<String> {
    let per_sec: i64 = match unit {
        TimeUnit::Second => 1,
        TimeUnit::Millisecond => 1_000,
        TimeUnit::Microsecond => 1_000_000,
        TimeUnit::Nanosecond => 1_000_000_000,
    };
    let (secs, sub) = (v.div_euclid(per_sec), v.rem_euclid(per_sec));
    let nanos = (sub * (1_000_000_000 / per_sec)) as u32;
    let dt = chrono::DateTime::from_timestamp(secs, nanos)?.naive_utc();
    let digits = time_precision(unit) as usize;
    let frac = nanos / 10u32.pow(9 - digits as u32);
    use chrono::Timelike;
    let (date, (h, m, sec)) = (ymd(dt.date()), (dt.hour(), dt.minute(), dt.second()));
    Some(format!("{date} {h:02}:{m:02}:{sec:02}.{frac:0digits$}"))
}

/// Encodes a batch as Trino's `data` rows: one JSON array per row, one value per column.
pub fn batch_to_json_rows(batch: &RecordBatch) -> Result<Vec<Vec<Value>>, ArrowError> {
    let mut rows: Vec<Vec<Value>> = (0..batch.num_rows()).map(|_| Vec::with_capacity(batch.num_columns())).collect();
    for column in batch.columns() {
        for (row, value) in rows.iter_mut().zip(column_to_json(column.as_ref())?) {
            row.push(value);
        }
    }
    Ok(rows)
}

/// Appends a batch's rows to `out` as Trino's `data` rows (`[v,v,...]`, comma separated,
/// a comma before the first when `out` ends with a row's `]`), the same text
/// [`batch_to_json_rows`] would serialize to. Common column types are written straight
/// from the arrays; the rest go through their `Value`s. Writing bytes instead of building
/// `Value`s saves an allocation per row and per string, most of the coordinator's
/// cost when a client pages through millions of rows.
pub fn write_json_rows(batch: &RecordBatch, out: &mut Vec<u8>) -> Result<(), ArrowError> {
    let cells = batch.columns().iter().map(|c| CellWriter::new(c.as_ref())).collect::<Result<Vec<_>, _>>()?;
    for row in 0..batch.num_rows() {
        // Rows follow the `data` array's `[` or the previous row's `]`.
        if out.last() == Some(&b']') {
            out.push(b',');
        }
        out.push(b'[');
        for (i, cell) in cells.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            match cell.nulls.is_some_and(|n| n.is_null(row)) {
                true => out.extend_from_slice(b"null"),
                false => cell.values.write(row, out),
            }
        }
        out.push(b']');
    }
    Ok(())
}

/// One column, ready to write any of its values as JSON.
struct CellWriter<'a> {
    /// The column's nulls, for the kinds that read the arrays (a `Value` carries its own).
    nulls: Option<&'a NullBuffer>,
    values: Cells<'a>,
}

enum Cells<'a> {
    Int64(&'a PrimitiveArray<Int64Type>),
    Int32(&'a PrimitiveArray<Int32Type>),
    Float64(&'a PrimitiveArray<Float64Type>),
    Decimal128(&'a PrimitiveArray<Decimal128Type>, i8),
    Utf8(&'a GenericStringArray<i32>),
    LargeUtf8(&'a GenericStringArray<i64>),
    Utf8View(&'a StringViewArray),
    Date32(&'a PrimitiveArray<Date32Type>),
    Boolean(&'a BooleanArray),
    /// Everything else: the values [`column_to_json`] makes.
    Values(Vec<Value>),
}

impl<'a> CellWriter<'a> {
    fn new(array: &'a dyn Array) -> Result<Self, ArrowError> {
        let values = match array.data_type() {
            DataType::Int64 => Cells::Int64(array.as_primitive()),
            DataType::Int32 => Cells::Int32(array.as_primitive()),
            DataType::Float64 => Cells::Float64(array.as_primitive()),
            DataType::Decimal128(_, s) => Cells::Decimal128(array.as_primitive(), *s),
            DataType::Utf8 => Cells::Utf8(array.as_string()),
            DataType::LargeUtf8 => Cells::LargeUtf8(array.as_string()),
            DataType::Utf8View => Cells::Utf8View(array.as_string_view()),
            DataType::Date32 => Cells::Date32(array.as_primitive()),
            DataType::Boolean => Cells::Boolean(array.as_boolean()),
            _ => return Ok(CellWriter { nulls: None, values: Cells::Values(column_to_json(array)?) }),
        };
        Ok(CellWriter { nulls: array.nulls(), values })
    }
}

impl Cells<'_> {
    /// Writes the value at `i`, which is not null.
    fn write(&self, i: usize, out: &mut Vec<u8>) {
        match self {
            Cells::Values(v) => write_value(&v[i], out),
            Cells::Int64(a) => out.extend_from_slice(itoa::Buffer::new().format(a.value(i)).as_bytes()),
            Cells::Int32(a) => out.extend_from_slice(itoa::Buffer::new().format(a.value(i)).as_bytes()),
            Cells::Float64(a) => write_value(&float_json(a.value(i)), out),
            Cells::Decimal128(a, s) => {
                out.push(b'"');
                push_decimal(itoa::Buffer::new().format(a.value(i)), *s, out);
                out.push(b'"');
            }
            Cells::Utf8(a) => write_str(a.value(i), out),
            Cells::LargeUtf8(a) => write_str(a.value(i), out),
            Cells::Utf8View(a) => write_str(a.value(i), out),
            Cells::Date32(a) => match date_digits(a.value(i) as i64) {
                Some(text) => {
                    out.push(b'"');
                    out.extend_from_slice(&text);
                    out.push(b'"');
                }
                None => write_value(&column_to_json(&a.slice(i, 1)).map_or(Value::Null, |mut v| v.remove(0)), out),
            },
            Cells::Boolean(a) => out.extend_from_slice(if a.value(i) { b"true" } else { b"false" }),
        }
    }
}

fn write_value(v: &Value, out: &mut Vec<u8>) {
    // Writing into a Vec cannot fail, and a Value always serializes.
    let _ = serde_json::to_writer(&mut *out, v);
}

fn write_str(s: &str, out: &mut Vec<u8>) {
    let _ = serde_json::to_writer(&mut *out, s);
}

/// Per-value encoding of an array, nulls included; recursion handles nested types.
fn column_to_json(array: &dyn Array) -> Result<Vec<Value>, ArrowError> {
    let n = array.len();
    macro_rules! each {
        ($a:expr, $f:expr) => {{
            let a = $a;
            let encode = |i| a.is_valid(i).then(|| $f(a.value(i))).unwrap_or_default();
            (0..n).map(encode).collect::<Vec<Value>>()
        }};
    }
    macro_rules! prim {
        ($t:ty, $f:expr) => {
            each!(array.as_primitive::<$t>(), $f)
        };
    }
    // Rare layouts are widened to a common one first, which keeps this match short.
    macro_rules! via {
        ($dt:expr) => {
            return column_to_json(cast(array, &$dt)?.as_ref())
        };
    }
    let plain = FormatOptions::new();
    let b64 = |b: &[u8]| Value::String(base64::engine::general_purpose::STANDARD.encode(b));
    let out: Vec<Value> = match array.data_type() {
        DataType::Dictionary(_, value_type) => via!(**value_type),
        DataType::Null => vec![Value::Null; n],
        DataType::Boolean => each!(array.as_boolean(), Value::Bool),
        DataType::Int8 | DataType::Int16 | DataType::Int32 => via!(DataType::Int64),
        DataType::UInt8 | DataType::UInt16 | DataType::UInt32 => via!(DataType::Int64),
        DataType::Int64 => prim!(Int64Type, |v: i64| Value::from(v)),
        DataType::UInt64 => prim!(UInt64Type, |v: u64| Value::from(v)),
        DataType::Float16 => via!(DataType::Float32),
        DataType::Float32 => prim!(Float32Type, real_json),
        DataType::Float64 => prim!(Float64Type, float_json),
        DataType::Decimal32(p, s) | DataType::Decimal64(p, s) => via!(DataType::Decimal128(*p, *s)),
        DataType::Decimal128(_, s) => prim!(Decimal128Type, |v: i128| decimal_json(v, *s)),
        DataType::Decimal256(_, s) => prim!(Decimal256Type, |v: i256| decimal_json(v, *s)),
        DataType::Utf8 => each!(array.as_string::<i32>(), |s: &str| Value::from(s)),
        DataType::LargeUtf8 => each!(array.as_string::<i64>(), |s: &str| Value::from(s)),
        DataType::Utf8View => each!(array.as_string_view(), |s: &str| Value::from(s)),
        DataType::Binary => each!(array.as_binary::<i32>(), b64),
        DataType::LargeBinary => each!(array.as_binary::<i64>(), b64),
        DataType::BinaryView => each!(array.as_binary_view(), b64),
        DataType::FixedSizeBinary(_) => each!(array.as_fixed_size_binary(), b64),
        DataType::Date32 => {
            let a = array.as_primitive::<Date32Type>();
            string_values(array, &plain, |i| date_string(a.value(i) as i64))?
        }
        DataType::Date64 => {
            let a = array.as_primitive::<Date64Type>();
            string_values(array, &plain, |i| date_string(a.value(i).div_euclid(86_400_000)))?
        }
        DataType::Timestamp(unit, None) => {
            // Every timestamp unit shares the i64 layout, so one downcast serves them all.
            let a = cast(array, &DataType::Int64)?;
            let a = a.as_primitive::<Int64Type>();
            string_values(array, &plain, |i| timestamp_string(a.value(i), unit))?
        }
        DataType::Timestamp(unit, Some(zone)) => {
            // The zone as the column names it (`UTC`, `America/New_York`, `+01:00`):
            // Trino's clients read a region name or an offset after the last space.
            let fmt = format!("%Y-%m-%d %H:%M:%S%.{}f {}", time_precision(unit), zone.replace('%', "%%"));
            let options = FormatOptions::new().with_timestamp_tz_format(Some(fmt.as_str()));
            string_values(array, &options, |_| None)?
        }
        DataType::Time32(unit) | DataType::Time64(unit) => {
            let fmt = format!("%H:%M:%S%.{}f", time_precision(unit));
            let options = FormatOptions::new().with_time_format(Some(fmt.as_str()));
            string_values(array, &options, |_| None)?
        }
        DataType::List(_) => list_values(array.as_list::<i32>())?,
        DataType::LargeList(_) => list_values(array.as_list::<i64>())?,
        DataType::FixedSizeList(f, _) => via!(DataType::List(f.clone())),
        DataType::Map(_, _) => nested::map_values(array.as_map())?,
        DataType::Interval(_) => match nested::interval_values(array) {
            Some(values) => values,
            None => string_values(array, &plain, |_| None)?,
        },
        DataType::Struct(_) => nested::row_values(array.as_struct())?,
        _ => string_values(array, &plain, |_| None)?,
    };
    Ok(out)
}

fn list_values<O: OffsetSizeTrait>(a: &arrow::array::GenericListArray<O>) -> Result<Vec<Value>, ArrowError> {
    let values = column_to_json(a.values().as_ref())?;
    let offsets = a.value_offsets();
    Ok((0..a.len())
        .map(|i| match a.is_null(i) {
            true => Value::Null,
            false => Value::Array(values[offsets[i].as_usize()..offsets[i + 1].as_usize()].to_vec()),
        })
        .collect())
}

/// Encodes each non-null value with `encode`, falling back to Arrow's display under `options`
/// where `encode` has no answer (e.g. dates beyond chrono's range).
fn string_values<'a>(
    array: &'a dyn Array,
    options: &FormatOptions<'a>,
    encode: impl Fn(usize) -> Option<String>,
) -> Result<Vec<Value>, ArrowError> {
    let formatter = ArrayFormatter::try_new(array, options)?;
    let value = |i| match encode(i) {
        Some(text) => Ok(text),
        None => formatter.value(i).try_to_string(),
    };
    (0..array.len())
        .map(|i| match array.is_null(i) {
            true => Ok(Value::Null),
            false => value(i).map(Value::String),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::arrow::array::{ArrayRef, Date32Array, Decimal128Array, Float64Array};
    use std::sync::Arc;

    #[test]
    fn dates_from_day_counts_equal_chrono() {
        use chrono::Datelike;
        let days = (-800_000..3_000_000).step_by(997).chain([-719_528, -719_162, -1, 0, 59, 60, 11_016, 2_932_896]);
        for n in days {
            let d = date_of(n).unwrap();
            assert_eq!(civil_from_days(n), (d.year() as i64, d.month(), d.day()), "day {n}");
        }
        assert_eq!(&date_digits(10_000).unwrap(), b"1997-05-19");
        assert_eq!(date_digits(-719_529), None, "year -1 takes the slow path");
        assert_eq!(date_string(-719_529).unwrap(), "-0001-12-31");
    }

    #[test]
    fn decimal_strings_keep_exact_scale() {
        let cases: [(i128, i8, &str); 7] = [
            (1234, 2, "12.34"),
            (-5, 2, "-0.05"),
            (-50, 2, "-0.50"),
            (0, 2, "0.00"),
            (1200, 2, "12.00"),
            (42, 0, "42"),
            (-42, 0, "-42"),
        ];
        for (unscaled, scale, want) in cases {
            assert_eq!(decimal_to_string(unscaled, scale), want);
        }
        // Checked against text made without `push_decimal`.
        for (unscaled, scale, want) in [(7i128, -3i8, "7000"), (0, -3, "0"), (-1, 5, "-0.00001"), (-123, 1, "-12.3")] {
            assert_eq!(decimal_to_string(unscaled, scale), want);
        }
        assert_eq!(decimal_to_string(i128::MIN, 38), "-1.70141183460469231731687303715884105728");
        let max = "1.70141183460469231731687303715884105727";
        assert_eq!(decimal_to_string(i128::MAX, 38), max);
        assert_eq!(decimal_to_string(i256::from_i128(-7), 3), "-0.007");
    }

    /// The direct writer must produce exactly what serializing the `Value`s produces,
    /// for the types it writes itself and for those it leaves to `column_to_json`.
    #[test]
    fn written_rows_equal_serialized_values() {
        use datafusion::arrow::array::{BooleanArray, Int32Array, Int64Array, ListArray, StringArray, StringViewArray};
        let dec = Decimal128Array::from(vec![Some(1234), None, Some(-5)]).with_precision_and_scale(15, 2).unwrap();
        let list =
            ListArray::from_iter_primitive::<Int32Type, _, _>(vec![Some(vec![Some(1), None]), None, Some(vec![])]);
        let columns: Vec<(&str, ArrayRef)> = vec![
            ("i", Arc::new(Int64Array::from(vec![Some(i64::MIN), None, Some(7)]))),
            ("f", Arc::new(Float64Array::from(vec![Some(0.1), Some(f64::NAN), None]))),
            ("d", Arc::new(dec)),
            ("s", Arc::new(StringArray::from(vec![Some("a\"b\\c\n\u{1}"), None, Some("é,x")]))),
            ("v", Arc::new(StringViewArray::from(vec![Some("a string longer than twelve bytes"), None, Some("")]))),
            ("dt", Arc::new(Date32Array::from(vec![Some(-1), None, Some(3_000_000)]))),
            ("b", Arc::new(BooleanArray::from(vec![Some(true), Some(false), None]))),
            ("n", Arc::new(Int32Array::from(vec![None, Some(i32::MIN), Some(4)]))),
            ("l", Arc::new(list)),
        ];
        let batch = RecordBatch::try_from_iter(columns).unwrap();
        let mut written = Vec::new();
        write_json_rows(&batch, &mut written).unwrap();
        write_json_rows(&batch.slice(1, 2), &mut written).unwrap();
        let mut rows = batch_to_json_rows(&batch).unwrap();
        rows.extend(batch_to_json_rows(&batch.slice(1, 2)).unwrap());
        let want = serde_json::to_string(&rows).unwrap();
        assert_eq!(format!("[{}]", String::from_utf8(written).unwrap()), want);
    }

    #[test]
    fn batch_encodings() {
        let dec = Decimal128Array::from(vec![Some(1234), Some(-5), None]);
        let dec = dec.with_precision_and_scale(15, 2).unwrap();
        let dates = Date32Array::from(vec![Some(0), Some(9131), None]);
        let floats = Float64Array::from(vec![1.5, f64::NAN, f64::NEG_INFINITY]);
        let batch = RecordBatch::try_from_iter(vec![
            ("d", Arc::new(dec) as ArrayRef),
            ("dt", Arc::new(dates) as ArrayRef),
            ("f", Arc::new(floats) as ArrayRef),
        ])
        .unwrap();
        let rows = batch_to_json_rows(&batch).unwrap();
        let want = json!([["12.34", "1970-01-01", 1.5], ["-0.05", "1995-01-01", "NaN"], [null, null, "-Infinity"]]);
        assert_eq!(json!(rows), want);
    }

    #[test]
    fn timestamps_and_dates() {
        assert_eq!(date_string(0).unwrap(), "1970-01-01");
        assert_eq!(date_string(9131).unwrap(), "1995-01-01");
        assert_eq!(date_string(-1).unwrap(), "1969-12-31");
        let ts = |v, unit| timestamp_string(v, &unit).unwrap();
        assert_eq!(ts(1_500, TimeUnit::Millisecond), "1970-01-01 00:00:01.500");
        assert_eq!(ts(-1, TimeUnit::Microsecond), "1969-12-31 23:59:59.999999");
        assert_eq!(ts(60, TimeUnit::Second), "1970-01-01 00:01:00.000");
    }

    #[test]
    fn type_names_and_signatures() {
        assert_eq!(trino_type(&DataType::Int64), "bigint");
        assert_eq!(trino_type(&DataType::Float32), "real");
        assert_eq!(trino_type(&DataType::Decimal128(15, 2)), "decimal(15,2)");
        assert_eq!(trino_type(&DataType::Utf8View), "varchar");
        let nanos = DataType::Timestamp(TimeUnit::Nanosecond, None);
        assert_eq!(trino_type(&nanos), "timestamp(9)");
        let long = |v: i64| json!({"kind": "LONG", "value": v});
        let decimal = json!({"rawType": "decimal", "arguments": [long(15), long(2)]});
        assert_eq!(type_signature(&DataType::Decimal128(15, 2)), decimal);
        let varchar = json!({"rawType": "varchar", "arguments": [long(2147483647)]});
        assert_eq!(type_signature(&DataType::Utf8), varchar);
        let boolean = json!({"rawType": "boolean", "arguments": []});
        assert_eq!(type_signature(&DataType::Boolean), boolean);
    }
}
