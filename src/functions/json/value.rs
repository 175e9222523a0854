//! Trino's `JSON` values in Arrow: canonical text in a string column whose field
//! carries the canonical `arrow.json` extension name. This module converts between
//! that text, parsed values, and the Arrow arrays of SQL values (`CAST(x AS JSON)`
//! and `CAST(j AS T)`); the casts, the functions and the protocol all go through it.

use std::collections::HashMap;
use std::sync::Arc;

use datafusion::arrow::array::{
    Array, ArrayRef, AsArray, BooleanArray, GenericListArray, MapArray, NullBufferBuilder, StringArray, StructArray,
};
use datafusion::arrow::buffer::OffsetBuffer;
use datafusion::arrow::compute::{cast_with_options, CastOptions};
use datafusion::arrow::datatypes::{DataType, Field};
use datafusion::arrow::util::display::{ArrayFormatter, FormatOptions};
use datafusion::common::{exec_err, Result};
use serde_json::Value;

use crate::functions::{invalid_argument, invalid_cast};

/// The extension name the canonical Arrow JSON type is known by.
pub const JSON_EXTENSION: &str = "arrow.json";
const EXTENSION_KEY: &str = "ARROW:extension:name";

/// Whether `field` holds JSON text.
pub fn is_json(field: &Field) -> bool {
    field.metadata().get(EXTENSION_KEY).is_some_and(|n| n == JSON_EXTENSION)
}

/// A nullable JSON field named `name`.
pub fn json_field(name: &str) -> Field {
    let metadata = HashMap::from([(EXTENSION_KEY.to_string(), JSON_EXTENSION.to_string())]);
    Field::new(name, DataType::Utf8, true).with_metadata(metadata)
}

/// `text` parsed as one JSON value, or Trino's error for text that is not one.
pub fn parse(text: &str) -> Result<Value> {
    serde_json::from_str(text).map_err(|e| invalid_argument(format!("Cannot convert value to JSON: '{text}': {e}")))
}

/// The canonical text of `value`: no insignificant white space, object members sorted
/// by key (as Trino prints them).
pub fn canonical(value: &Value) -> String {
    serde_json::to_string(value).expect("a parsed value prints")
}

/// Each row of `array` (of `field`'s type) as JSON text; `None` where the row is NULL.
/// This is `CAST(x AS JSON)`.
pub fn to_json_texts(array: &ArrayRef, field: &Field) -> Result<Vec<Option<String>>> {
    let values = to_json_values(array, field)?;
    Ok(values.into_iter().map(|v| v.map(|v| canonical(&v))).collect())
}

/// Each row of `array` as a JSON value; `None` where the row is NULL.
pub fn to_json_values(array: &ArrayRef, field: &Field) -> Result<Vec<Option<Value>>> {
    // Logical nulls: a NULL literal's array has no null buffer, yet every row is NULL.
    let nulls = array.logical_nulls();
    let values = element_values(array, field)?;
    let row = |(i, v)| if nulls.as_ref().is_some_and(|n| n.is_null(i)) { None } else { Some(v) };
    Ok(values.into_iter().enumerate().map(row).collect())
}

/// Every row of `array` as a JSON value, NULL rows as JSON `null` (inside an array or
/// object, where SQL NULL is written so).
fn element_values(array: &ArrayRef, field: &Field) -> Result<Vec<Value>> {
    let len = array.len();
    let null_or = |i: usize, f: &dyn Fn(usize) -> Result<Value>| -> Result<Value> {
        if array.is_null(i) {
            Ok(Value::Null)
        } else {
            f(i)
        }
    };
    let mut out = Vec::with_capacity(len);
    match array.data_type() {
        DataType::Null => out.resize(len, Value::Null),
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View if is_json(field) => {
            let text = cast_with_options(array, &DataType::Utf8, &CastOptions::default())?;
            let text = text.as_string::<i32>();
            for i in 0..len {
                out.push(null_or(i, &|i| parse(text.value(i)))?);
            }
        }
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => {
            let text = cast_with_options(array, &DataType::Utf8, &CastOptions::default())?;
            let text = text.as_string::<i32>();
            for i in 0..len {
                out.push(null_or(i, &|i| Ok(Value::String(text.value(i).to_string())))?);
            }
        }
        DataType::Boolean => {
            let b = array.as_boolean();
            for i in 0..len {
                out.push(null_or(i, &|i| Ok(Value::Bool(b.value(i))))?);
            }
        }
        DataType::Int8 | DataType::Int16 | DataType::Int32 | DataType::Int64 => {
            let n = cast_with_options(array, &DataType::Int64, &CastOptions::default())?;
            let n = n.as_primitive::<datafusion::arrow::datatypes::Int64Type>();
            for i in 0..len {
                out.push(null_or(i, &|i| Ok(Value::from(n.value(i))))?);
            }
        }
        DataType::UInt8 | DataType::UInt16 | DataType::UInt32 | DataType::UInt64 => {
            let n = cast_with_options(array, &DataType::UInt64, &CastOptions::default())?;
            let n = n.as_primitive::<datafusion::arrow::datatypes::UInt64Type>();
            for i in 0..len {
                out.push(null_or(i, &|i| Ok(Value::from(n.value(i))))?);
            }
        }
        DataType::Float16
        | DataType::Float32
        | DataType::Float64
        | DataType::Decimal32(..)
        | DataType::Decimal64(..)
        | DataType::Decimal128(..)
        | DataType::Decimal256(..) => {
            // Decimals keep their digits: their text is read back as a JSON number.
            let formatter = ArrayFormatter::try_new(array.as_ref(), &FormatOptions::default())?;
            for i in 0..len {
                out.push(null_or(i, &|i| number_from_text(&formatter.value(i).to_string()))?);
            }
        }
        DataType::List(child) | DataType::LargeList(child) => {
            let list = cast_with_options(array, &DataType::List(child.clone()), &CastOptions::default())?;
            let list = list.as_list::<i32>();
            let values = element_values(list.values(), child)?;
            let offsets = list.value_offsets();
            for i in 0..len {
                let (from, to) = (offsets[i] as usize, offsets[i + 1] as usize);
                out.push(null_or(i, &|_| Ok(Value::Array(values[from..to].to_vec())))?);
            }
        }
        DataType::Map(entries, _) => {
            let map = array.as_map();
            let DataType::Struct(kv) = entries.data_type() else { return exec_err!("a map's entries are a struct") };
            let keys = element_values(map.keys(), &kv[0])?;
            let values = element_values(map.values(), &kv[1])?;
            let offsets = map.value_offsets();
            for i in 0..len {
                let (from, to) = (offsets[i] as usize, offsets[i + 1] as usize);
                let object: serde_json::Map<String, Value> =
                    (from..to).map(|k| (key_text(&keys[k]), values[k].clone())).collect();
                out.push(null_or(i, &|_| Ok(Value::Object(object.clone())))?);
            }
        }
        DataType::Struct(fields) => {
            let row = array.as_struct();
            let columns: Vec<Vec<Value>> =
                row.columns().iter().zip(fields.iter()).map(|(c, f)| element_values(c, f)).collect::<Result<_>>()?;
            // A row of anonymous fields (`ROW(1, 'a')`) is a JSON array, as Trino casts
            // it; a named one an object.
            let anonymous = crate::functions::types::anonymous_fields(fields);
            for i in 0..len {
                let value = match anonymous {
                    true => Value::Array(columns.iter().map(|c| c[i].clone()).collect()),
                    false => Value::Object(
                        fields.iter().zip(&columns).map(|(f, c)| (f.name().clone(), c[i].clone())).collect(),
                    ),
                };
                out.push(null_or(i, &|_| Ok(value.clone()))?);
            }
        }
        DataType::Dictionary(_, value_type) => {
            let plain = cast_with_options(array, value_type, &CastOptions::default())?;
            return element_values(&plain, &Field::new(field.name(), (**value_type).clone(), true));
        }
        _ => {
            // Dates, times, timestamps, intervals: their text, as a JSON string.
            let formatter = ArrayFormatter::try_new(array.as_ref(), &FormatOptions::default())?;
            for i in 0..len {
                out.push(null_or(i, &|i| Ok(Value::String(formatter.value(i).to_string())))?);
            }
        }
    }
    Ok(out)
}

fn number_from_text(text: &str) -> Result<Value> {
    match text {
        "NaN" | "inf" | "-inf" | "Infinity" | "-Infinity" => Ok(Value::String(text.to_string())),
        _ => serde_json::from_str(text).map_err(|_| invalid_cast(format!("Cannot cast '{text}' to JSON"))),
    }
}

/// A map key as an object member's name.
fn key_text(key: &Value) -> String {
    match key {
        Value::String(s) => s.clone(),
        other => canonical(other),
    }
}

/// `values` (one per row, `None` for a NULL row) as an array of `field`'s type: the
/// cast from JSON. A value of the wrong shape is Trino's `INVALID_CAST_ARGUMENT`.
pub fn from_json(values: &[Option<&Value>], field: &Field) -> Result<ArrayRef> {
    let data_type = field.data_type();
    let shape_error = |v: &Value| invalid_cast(format!("Cannot cast JSON '{}' to {}", canonical(v), trino_name(field)));
    Ok(match data_type {
        DataType::Utf8 if is_json(field) => {
            // A JSON element of an array or map: JSON `null` stays the text `null`.
            Arc::new(values.iter().map(|v| v.map(canonical)).collect::<StringArray>())
        }
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => {
            let text: Vec<Option<String>> = values
                .iter()
                .map(|v| match v {
                    None | Some(Value::Null) => Ok(None),
                    Some(Value::String(s)) => Ok(Some(s.clone())),
                    Some(v @ (Value::Number(_) | Value::Bool(_))) => Ok(Some(canonical(v))),
                    Some(v) => Err(shape_error(v)),
                })
                .collect::<Result<_>>()?;
            let array: ArrayRef = Arc::new(StringArray::from(text));
            cast_with_options(&array, data_type, &CastOptions::default())?
        }
        DataType::Boolean => {
            let b: Vec<Option<bool>> = values
                .iter()
                .map(|v| match v {
                    None | Some(Value::Null) => Ok(None),
                    Some(Value::Bool(b)) => Ok(Some(*b)),
                    Some(Value::Number(n)) => Ok(Some(n.as_f64().is_some_and(|f| f != 0.0))),
                    Some(Value::String(s)) if s.eq_ignore_ascii_case("true") => Ok(Some(true)),
                    Some(Value::String(s)) if s.eq_ignore_ascii_case("false") => Ok(Some(false)),
                    Some(v) => Err(shape_error(v)),
                })
                .collect::<Result<_>>()?;
            Arc::new(BooleanArray::from(b))
        }
        DataType::List(child) | DataType::LargeList(child) => {
            let mut nulls = NullBufferBuilder::new(values.len());
            let mut lengths = Vec::with_capacity(values.len());
            let mut elements: Vec<Option<&Value>> = Vec::new();
            for v in values {
                match v {
                    None | Some(Value::Null) => {
                        nulls.append_null();
                        lengths.push(0);
                    }
                    Some(Value::Array(items)) => {
                        nulls.append_non_null();
                        lengths.push(items.len());
                        elements.extend(items.iter().map(Some));
                    }
                    Some(v) => return Err(shape_error(v)),
                }
            }
            let child_values = from_json(&elements, child)?;
            let list = GenericListArray::<i32>::try_new(
                child.clone(),
                OffsetBuffer::from_lengths(lengths),
                child_values,
                nulls.finish(),
            )?;
            cast_with_options(&(Arc::new(list) as ArrayRef), data_type, &CastOptions::default())?
        }
        DataType::Map(entries, sorted) => {
            let DataType::Struct(kv) = entries.data_type() else { return exec_err!("a map's entries are a struct") };
            let mut nulls = NullBufferBuilder::new(values.len());
            let mut lengths = Vec::with_capacity(values.len());
            let mut keys: Vec<Value> = Vec::new();
            let mut items: Vec<Option<&Value>> = Vec::new();
            for v in values {
                match v {
                    None | Some(Value::Null) => {
                        nulls.append_null();
                        lengths.push(0);
                    }
                    Some(Value::Object(members)) => {
                        nulls.append_non_null();
                        lengths.push(members.len());
                        keys.extend(members.keys().map(|k| Value::String(k.clone())));
                        items.extend(members.values().map(Some));
                    }
                    Some(v) => return Err(shape_error(v)),
                }
            }
            let key_refs: Vec<Option<&Value>> = keys.iter().map(Some).collect();
            let key_array = from_json(&key_refs, &kv[0])?;
            let value_array = from_json(&items, &kv[1])?;
            let entries_array = StructArray::try_new(kv.clone(), vec![key_array, value_array], None)?;
            Arc::new(MapArray::try_new(
                entries.clone(),
                OffsetBuffer::from_lengths(lengths),
                entries_array,
                nulls.finish(),
                *sorted,
            )?)
        }
        DataType::Struct(fields) => {
            let mut nulls = NullBufferBuilder::new(values.len());
            let mut columns: Vec<Vec<Option<&Value>>> = vec![Vec::with_capacity(values.len()); fields.len()];
            for v in values {
                match v {
                    None | Some(Value::Null) => {
                        nulls.append_null();
                        columns.iter_mut().for_each(|c| c.push(None));
                    }
                    Some(Value::Object(members)) => {
                        nulls.append_non_null();
                        for (f, c) in fields.iter().zip(columns.iter_mut()) {
                            let member = members.iter().find(|(k, _)| k.eq_ignore_ascii_case(f.name()));
                            c.push(member.map(|(_, v)| v));
                        }
                    }
                    Some(Value::Array(items)) if items.len() == fields.len() => {
                        nulls.append_non_null();
                        columns.iter_mut().zip(items).for_each(|(c, v)| c.push(Some(v)));
                    }
                    Some(v) => return Err(shape_error(v)),
                }
            }
            let arrays = fields.iter().zip(&columns).map(|(f, c)| from_json(c, f)).collect::<Result<Vec<_>>>()?;
            Arc::new(StructArray::try_new(fields.clone(), arrays, nulls.finish())?)
        }
        DataType::Date32 | DataType::Date64 | DataType::Time32(_) | DataType::Time64(_) | DataType::Timestamp(..) => {
            // Temporal values come from JSON strings only.
            let text: Vec<Option<&str>> = values
                .iter()
                .map(|v| match v {
                    None | Some(Value::Null) => Ok(None),
                    Some(Value::String(s)) => Ok(Some(s.as_str())),
                    Some(v) => Err(invalid_cast(format!(
                        "Cannot cast JSON '{}' to {}; expected a JSON string",
                        canonical(v),
                        trino_name(field)
                    ))),
                })
                .collect::<Result<_>>()?;
            let array: ArrayRef = Arc::new(StringArray::from(text));
            cast_with_options(&array, data_type, &CastOptions { safe: false, ..Default::default() })?
        }
        _ => {
            // Numbers: through their text, so that decimals keep their digits.
            let text: Vec<Option<String>> = values
                .iter()
                .map(|v| match v {
                    None | Some(Value::Null) => Ok(None),
                    Some(Value::Number(n)) => Ok(Some(n.to_string())),
                    Some(Value::Bool(b)) => Ok(Some(if *b { "1" } else { "0" }.to_string())),
                    Some(Value::String(s)) => Ok(Some(s.clone())),
                    Some(v) => Err(shape_error(v)),
                })
                .collect::<Result<_>>()?;
            let array: ArrayRef = Arc::new(StringArray::from(text));
            cast_with_options(&array, data_type, &CastOptions { safe: false, ..Default::default() })
                .map_err(|_| invalid_cast(format!("Cannot cast JSON to {}", trino_name(field))))?
        }
    })
}

/// The target's name in a cast's error: `json` or the Arrow type.
fn trino_name(field: &Field) -> String {
    match is_json(field) {
        true => "json".into(),
        false => field.data_type().to_string(),
    }
}
