//! Trino's `format(fmt, args...)` (Java's `String.format`: `%s`, `%d`, `%f`, `%e`,
//! `%x`, `%b`, `%c`, `%%`, `%n`, with argument indexes `%2$s`, flags `-`, `0`, `,`,
//! `+`, ` `, width and precision, and the date conversions `%tY`, `%tB`, ...),
//! `format_number(n)` (`123456` -> `123K`) and `typeof(x)`.

use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, AsArray, StringArray, StringBuilder};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{DataType, Int64Type};
use datafusion::common::{Result, ScalarValue};
use datafusion::logical_expr::{ScalarUDF, Signature, Volatility};

use super::invalid_argument;
use super::simple::function;

pub fn functions() -> Vec<ScalarUDF> {
    vec![
        function("format", Signature::variadic_any(Volatility::Immutable), |_| Ok(DataType::Utf8), format),
        function("format_number", Signature::any(1, Volatility::Immutable), |_| Ok(DataType::Utf8), format_number),
        function("typeof", Signature::any(1, Volatility::Immutable), |_| Ok(DataType::Utf8), type_of),
    ]
}

fn type_of(args: &[ArrayRef]) -> Result<ArrayRef> {
    let name = crate::format::trino_type(args[0].data_type());
    Ok(Arc::new(StringArray::from(vec![name; args[0].len()])))
}

/// `1234567` -> `1.23M`: the largest of K, M, B, T, Q that fits, to three significant
/// digits (two decimals under 10, one under 100, none above), halves rounded up.
fn compact(n: i64) -> String {
    let units = [(1e15, "Q"), (1e12, "T"), (1e9, "B"), (1e6, "M"), (1e3, "K")];
    let n = n as f64;
    let (value, unit) = units.iter().find(|(size, _)| n.abs() >= *size).map_or((n, ""), |(size, u)| (n / size, *u));
    let decimals = match value.abs() {
        v if v < 10.0 => 2,
        v if v < 100.0 => 1,
        _ => 0,
    };
    let scale = 10f64.powi(decimals);
    let rounded = (value.abs() * scale + 0.5).floor() / scale * value.signum();
    let text = format!("{rounded:.prec$}", prec = decimals as usize);
    let text = if text.contains('.') { text.trim_end_matches('0').trim_end_matches('.') } else { &text };
    format!("{text}{unit}")
}

fn format_number(args: &[ArrayRef]) -> Result<ArrayRef> {
    // Trino formats the whole part: a double is truncated first.
    let numbers = cast(&cast(&args[0], &DataType::Float64)?, &DataType::Int64)?;
    let out: StringArray = numbers.as_primitive::<Int64Type>().iter().map(|n| n.map(compact)).collect();
    Ok(Arc::new(out))
}

/// One `%...` specifier.
#[derive(Debug, Default)]
struct Spec {
    index: Option<usize>,
    flags: String,
    width: Option<usize>,
    precision: Option<usize>,
    conversion: char,
    date: Option<char>,
}

enum Piece {
    Text(String),
    Spec(Spec),
}

fn parse(fmt: &str) -> Result<Vec<Piece>> {
    let bad = || invalid_argument(format!("invalid format string: '{fmt}'"));
    let chars: Vec<char> = fmt.chars().collect();
    let mut pieces = Vec::new();
    let mut text = String::new();
    let mut i = 0;
    while i < chars.len() {
        if chars[i] != '%' {
            text.push(chars[i]);
            i += 1;
            continue;
        }
        i += 1;
        let start = i;
        while i < chars.len() && chars[i].is_ascii_digit() {
            i += 1;
        }
        let mut spec = Spec::default();
        if i < chars.len() && chars[i] == '$' {
            spec.index = Some(chars[start..i].iter().collect::<String>().parse().map_err(|_| bad())?);
            i += 1;
        } else {
            i = start;
        }
        while i < chars.len() && "-#+ 0,(".contains(chars[i]) {
            spec.flags.push(chars[i]);
            i += 1;
        }
        let w = i;
        while i < chars.len() && chars[i].is_ascii_digit() {
            i += 1;
        }
        if i > w {
            spec.width = Some(chars[w..i].iter().collect::<String>().parse().map_err(|_| bad())?);
        }
        if i < chars.len() && chars[i] == '.' {
            let p = i + 1;
            i += 1;
            while i < chars.len() && chars[i].is_ascii_digit() {
                i += 1;
            }
            spec.precision = Some(chars[p..i].iter().collect::<String>().parse().map_err(|_| bad())?);
        }
        spec.conversion = *chars.get(i).ok_or_else(bad)?;
        i += 1;
        if spec.conversion == 't' || spec.conversion == 'T' {
            spec.date = Some(*chars.get(i).ok_or_else(bad)?);
            i += 1;
        }
        match spec.conversion {
            '%' => text.push('%'),
            'n' => text.push('\n'),
            _ => {
                pieces.push(Piece::Text(std::mem::take(&mut text)));
                pieces.push(Piece::Spec(spec));
            }
        }
    }
    pieces.push(Piece::Text(text));
    Ok(pieces)
}

/// `digits` with a comma every three digits of its integer part.
fn grouped(digits: &str) -> String {
    let (sign, rest) = digits.strip_prefix('-').map_or(("", digits), |r| ("-", r));
    let (int, frac) = rest.split_once('.').map_or((rest, None), |(a, b)| (a, Some(b)));
    let mut out = String::new();
    for (k, c) in int.chars().enumerate() {
        if k > 0 && (int.len() - k) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    format!("{sign}{out}{}", frac.map(|f| format!(".{f}")).unwrap_or_default())
}

fn number(value: &ScalarValue) -> Option<f64> {
    match value.cast_to(&DataType::Float64).ok()? {
        ScalarValue::Float64(v) => v,
        _ => None,
    }
}

fn apply(spec: &Spec, value: &ScalarValue) -> Result<String> {
    let null = value.is_null();
    let body = match (spec.conversion, spec.date) {
        (_, Some(d)) => {
            let ts = value.cast_to(&DataType::Timestamp(datafusion::arrow::datatypes::TimeUnit::Nanosecond, None))?;
            let ScalarValue::TimestampNanosecond(Some(ns), _) = ts else { return Ok("null".into()) };
            let t = chrono::DateTime::from_timestamp_nanos(ns).naive_utc();
            let pattern = match d {
                'A' => "%A",
                'a' => "%a",
                'B' => "%B",
                'b' | 'h' => "%b",
                'e' => "%-d",
                'd' => "%d",
                'Y' => "%Y",
                'y' => "%y",
                'm' => "%m",
                'H' => "%H",
                'M' => "%M",
                'S' => "%S",
                'j' => "%j",
                'p' => "%P",
                'I' => "%I",
                'L' => "%3f",
                'F' => "%Y-%m-%d",
                'T' => "%H:%M:%S",
                'D' => "%m/%d/%y",
                'R' => "%H:%M",
                other => return Err(invalid_argument(format!("unknown date conversion %t{other}"))),
            };
            t.format(pattern).to_string()
        }
        _ if null => "null".into(),
        ('s' | 'S', _) => {
            let text = match value {
                ScalarValue::Utf8(Some(s)) | ScalarValue::LargeUtf8(Some(s)) | ScalarValue::Utf8View(Some(s)) => {
                    s.clone()
                }
                other => other.to_string(),
            };
            let text = match spec.precision {
                Some(p) => text.chars().take(p).collect(),
                None => text,
            };
            if spec.conversion == 'S' {
                text.to_uppercase()
            } else {
                text
            }
        }
        ('d', _) => {
            let v = value.cast_to(&DataType::Int64)?;
            let ScalarValue::Int64(Some(n)) = v else { return Err(invalid_argument("%d needs an integer")) };
            let text = n.to_string();
            let text = if spec.flags.contains(',') { grouped(&text) } else { text };
            if spec.flags.contains('+') && n >= 0 {
                format!("+{text}")
            } else {
                text
            }
        }
        ('f' | 'e' | 'E', _) => {
            let n = number(value).ok_or_else(|| invalid_argument("%f needs a number"))?;
            let p = spec.precision.unwrap_or(6);
            let text = match spec.conversion {
                'f' => format!("{n:.p$}"),
                _ => {
                    let t = format!("{n:.p$e}");
                    let (m, e) = t.split_once('e').unwrap_or((&t, "0"));
                    let e: i32 = e.parse().unwrap_or(0);
                    let t = format!("{m}e{}{:02}", if e < 0 { '-' } else { '+' }, e.abs());
                    if spec.conversion == 'E' {
                        t.to_uppercase()
                    } else {
                        t
                    }
                }
            };
            let text = if spec.flags.contains(',') { grouped(&text) } else { text };
            if spec.flags.contains('+') && n >= 0.0 {
                format!("+{text}")
            } else {
                text
            }
        }
        ('x' | 'X', _) => {
            let ScalarValue::Int64(Some(n)) = value.cast_to(&DataType::Int64)? else { return Ok("null".into()) };
            let t = format!("{n:x}");
            if spec.conversion == 'X' {
                t.to_uppercase()
            } else {
                t
            }
        }
        ('b' | 'B', _) => match value {
            ScalarValue::Boolean(Some(b)) => b.to_string(),
            _ => "true".into(),
        },
        ('c', _) => match value {
            ScalarValue::Utf8(Some(s)) => s.chars().next().map(String::from).unwrap_or_default(),
            other => {
                let ScalarValue::Int64(Some(n)) = other.cast_to(&DataType::Int64)? else { return Ok("null".into()) };
                char::from_u32(n as u32).map(String::from).unwrap_or_default()
            }
        },
        (other, _) => return Err(invalid_argument(format!("unknown format conversion %{other}"))),
    };
    let width = spec.width.unwrap_or(0);
    super::bounded::check_growing("format", width, width)?;
    let len = body.chars().count();
    Ok(if len >= width {
        body
    } else if spec.flags.contains('-') {
        format!("{body}{}", " ".repeat(width - len))
    } else if spec.flags.contains('0') && !null {
        let (sign, digits) = body.strip_prefix('-').map_or(("", body.as_str()), |d| ("-", d));
        format!("{sign}{}{digits}", "0".repeat(width - len))
    } else {
        format!("{}{body}", " ".repeat(width - len))
    })
}

fn format(args: &[ArrayRef]) -> Result<ArrayRef> {
    let fmt = cast(&args[0], &DataType::Utf8)?;
    let fmt = fmt.as_string::<i32>();
    let mut out = StringBuilder::new();
    let mut parsed: Option<(String, Vec<Piece>)> = None;
    for row in 0..fmt.len() {
        if fmt.is_null(row) {
            out.append_null();
            continue;
        }
        if parsed.as_ref().is_none_or(|(f, _)| f != fmt.value(row)) {
            parsed = Some((fmt.value(row).to_string(), parse(fmt.value(row))?));
        }
        let pieces = &parsed.as_ref().expect("parsed above").1;
        let mut text = String::new();
        let mut next = 1;
        for piece in pieces {
            match piece {
                Piece::Text(t) => text.push_str(t),
                Piece::Spec(spec) => {
                    let at = spec.index.unwrap_or_else(|| {
                        next += 1;
                        next - 1
                    });
                    let arg = args.get(at).ok_or_else(|| invalid_argument(format!("format: no argument {at}")))?;
                    text.push_str(&apply(spec, &ScalarValue::try_from_array(arg, row)?)?);
                }
            }
        }
        out.append_value(text);
    }
    Ok(Arc::new(out.finish()))
}
