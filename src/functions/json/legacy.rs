//! Trino's older JSON functions (`json_parse`, `json_format`, `json_extract`,
//! `json_extract_scalar`, `json_array_get`, `json_array_length`,
//! `json_array_contains`, `json_size`, `is_json_scalar`) and the two casts the planner
//! writes for `CAST(x AS JSON)` and `CAST(j AS T)`. Their paths are JSONPath, read as
//! strict SQL/JSON paths: a path that does not apply answers NULL.

use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, AsArray, BooleanArray, Int64Array, StringArray};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{DataType, FieldRef};
use datafusion::common::Result;
use datafusion::logical_expr::{ScalarUDF, Signature, TypeSignature, Volatility};
use serde_json::Value;

use super::path::{self, Path};
use super::value::{canonical, from_json, parse, to_json_texts};
use super::{any, function, string_at, text, Returns};
use crate::functions::invalid_argument;

pub fn functions() -> Vec<ScalarUDF> {
    let parse_signature = Signature::one_of(vec![TypeSignature::Any(1), TypeSignature::Any(2)], Volatility::Immutable);
    vec![
        function("json_parse", parse_signature, Returns::Json, json_parse),
        any("json_format", 1, Returns::Fixed(|| DataType::Utf8), json_format),
        any("is_json_scalar", 1, Returns::Fixed(|| DataType::Boolean), is_json_scalar),
        any("json_array_length", 1, Returns::Fixed(|| DataType::Int64), json_array_length),
        any("json_array_get", 2, Returns::Json, json_array_get),
        any("json_array_contains", 2, Returns::Fixed(|| DataType::Boolean), json_array_contains),
        any("json_extract", 2, Returns::Json, json_extract),
        any("json_extract_scalar", 2, Returns::Fixed(|| DataType::Utf8), json_extract_scalar),
        any("json_size", 2, Returns::Fixed(|| DataType::Int64), json_size),
        any("cast_to_json", 1, Returns::Json, cast_to_json),
        any("cast_from_json", 2, Returns::Argument(1), cast_from_json),
    ]
}

/// Each row's JSON parsed (`None` for NULL); text that is not JSON is an error.
fn parsed(array: &ArrayRef) -> Result<Vec<Option<Value>>> {
    let text = text(array)?;
    (0..text.len()).map(|i| string_at(&text, i).map(parse).transpose()).collect()
}

/// Bytes in `encoding` (UTF8, UTF16 or UTF32, little-endian) as text.
pub fn decode(bytes: &[u8], encoding: &str) -> Result<String> {
    let units = |n: usize| bytes.chunks(n).map(|c| c.iter().rev().fold(0u32, |a, b| (a << 8) | *b as u32));
    let text = match encoding.to_ascii_uppercase().as_str() {
        "UTF8" => String::from_utf8(bytes.to_vec()).ok(),
        "UTF16" => {
            let units: Vec<u16> = units(2).map(|u| u as u16).collect();
            String::from_utf16(&units).ok()
        }
        "UTF32" => units(4).map(char::from_u32).collect(),
        other => return Err(invalid_argument(format!("unknown encoding {other}"))),
    };
    text.ok_or_else(|| invalid_argument(format!("input is not valid {encoding}")))
}

/// `json_parse(text)`, and `json_parse(bytes, encoding)` for `FORMAT JSON ENCODING`.
fn json_parse(args: &[ArrayRef], _: &[FieldRef]) -> Result<ArrayRef> {
    let texts: Vec<Option<String>> = match (args[0].data_type(), args.get(1)) {
        (DataType::Binary | DataType::LargeBinary | DataType::BinaryView, encoding) => {
            let bytes = cast(&args[0], &DataType::Binary)?;
            let bytes = bytes.as_binary::<i32>();
            let encoding = encoding.map(text).transpose()?;
            (0..bytes.len())
                .map(|i| {
                    let e = encoding.as_ref().and_then(|e| string_at(e, i)).unwrap_or("UTF8");
                    (!bytes.is_null(i)).then(|| decode(bytes.value(i), e)).transpose()
                })
                .collect::<Result<_>>()?
        }
        _ => {
            let t = text(&args[0])?;
            (0..t.len()).map(|i| string_at(&t, i).map(str::to_string)).collect()
        }
    };
    let out: Vec<Option<String>> = texts
        .iter()
        .map(|t| t.as_deref().map(|t| parse(t).map(|v| canonical(&v))).transpose())
        .collect::<Result<_>>()?;
    Ok(Arc::new(StringArray::from(out)))
}

fn json_format(args: &[ArrayRef], _: &[FieldRef]) -> Result<ArrayRef> {
    let out: Vec<Option<String>> = parsed(&args[0])?.iter().map(|v| v.as_ref().map(canonical)).collect();
    Ok(Arc::new(StringArray::from(out)))
}

fn is_json_scalar(args: &[ArrayRef], _: &[FieldRef]) -> Result<ArrayRef> {
    let out: BooleanArray =
        parsed(&args[0])?.iter().map(|v| v.as_ref().map(|v| !v.is_array() && !v.is_object())).collect();
    Ok(Arc::new(out))
}

fn json_array_length(args: &[ArrayRef], _: &[FieldRef]) -> Result<ArrayRef> {
    let out: Int64Array =
        parsed(&args[0])?.iter().map(|v| v.as_ref().and_then(|v| v.as_array()).map(|a| a.len() as i64)).collect();
    Ok(Arc::new(out))
}

/// The element at `index` (from the end when negative); a string element is given as
/// its bare text, as Trino does.
fn json_array_get(args: &[ArrayRef], _: &[FieldRef]) -> Result<ArrayRef> {
    let index = cast(&args[1], &DataType::Int64)?;
    let index = index.as_primitive::<datafusion::arrow::datatypes::Int64Type>();
    let out: Vec<Option<String>> = parsed(&args[0])?
        .iter()
        .enumerate()
        .map(|(i, v)| {
            let items = v.as_ref()?.as_array()?;
            let at = index.is_valid(i).then(|| index.value(i))?;
            let at = if at < 0 { items.len() as i64 + at } else { at };
            match items.get(usize::try_from(at).ok()?)? {
                Value::String(s) => Some(s.clone()),
                other => Some(canonical(other)),
            }
        })
        .collect();
    Ok(Arc::new(StringArray::from(out)))
}

fn json_array_contains(args: &[ArrayRef], fields: &[FieldRef]) -> Result<ArrayRef> {
    let needles = super::value::to_json_values(&args[1], &fields[1])?;
    let out: BooleanArray = parsed(&args[0])?
        .iter()
        .zip(&needles)
        .map(|(v, needle)| {
            let (items, needle) = (v.as_ref()?.as_array()?, needle.as_ref()?);
            Some(items.iter().any(|item| match (item, needle) {
                (Value::Number(a), Value::Number(b)) => a.as_f64() == b.as_f64(),
                (a, b) => a == b,
            }))
        })
        .collect();
    Ok(Arc::new(out))
}

/// The single item `path` selects in each row, or `None`.
fn extract(args: &[ArrayRef]) -> Result<Vec<Option<Value>>> {
    let paths = text(&args[1])?;
    let mut compiled: Option<(String, Path)> = None;
    let documents = parsed(&args[0])?;
    let mut out = Vec::with_capacity(documents.len());
    for (i, document) in documents.into_iter().enumerate() {
        let (Some(document), Some(p)) = (document, string_at(&paths, i)) else {
            out.push(None);
            continue;
        };
        if compiled.as_ref().is_none_or(|(t, _)| t != p) {
            let parsed = path::parse(&format!("strict {p}"))
                .map_err(|e| invalid_argument(format!("Invalid JSON path: '{p}': {e}")))?;
            compiled = Some((p.to_string(), parsed));
        }
        let path = &compiled.as_ref().expect("compiled above").1;
        out.push(match path.evaluate(&document) {
            Ok(mut items) if items.len() == 1 => items.pop(),
            _ => None,
        });
    }
    Ok(out)
}

fn json_extract(args: &[ArrayRef], _: &[FieldRef]) -> Result<ArrayRef> {
    let out: Vec<Option<String>> = extract(args)?.iter().map(|v| v.as_ref().map(canonical)).collect();
    Ok(Arc::new(StringArray::from(out)))
}

fn json_extract_scalar(args: &[ArrayRef], _: &[FieldRef]) -> Result<ArrayRef> {
    let out: Vec<Option<String>> = extract(args)?
        .into_iter()
        .map(|v| match v? {
            Value::String(s) => Some(s),
            v @ (Value::Number(_) | Value::Bool(_)) => Some(canonical(&v)),
            _ => None,
        })
        .collect();
    Ok(Arc::new(StringArray::from(out)))
}

fn json_size(args: &[ArrayRef], _: &[FieldRef]) -> Result<ArrayRef> {
    let out: Int64Array = extract(args)?
        .iter()
        .map(|v| {
            Some(match v.as_ref()? {
                Value::Array(a) => a.len() as i64,
                Value::Object(o) => o.len() as i64,
                _ => 0,
            })
        })
        .collect();
    Ok(Arc::new(out))
}

/// `CAST(x AS JSON)`: a JSON value is itself; a string becomes a JSON string.
fn cast_to_json(args: &[ArrayRef], fields: &[FieldRef]) -> Result<ArrayRef> {
    Ok(Arc::new(StringArray::from(to_json_texts(&args[0], &fields[0])?)))
}

/// `CAST(j AS T)`, `T` being the type of the second argument (a typed NULL).
fn cast_from_json(args: &[ArrayRef], fields: &[FieldRef]) -> Result<ArrayRef> {
    let values = parsed(&args[0])?;
    let refs: Vec<Option<&Value>> = values.iter().map(Option::as_ref).collect();
    from_json(&refs, &fields[1])
}
