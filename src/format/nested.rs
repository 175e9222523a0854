//! Trino's JSON encodings of its nested types, for `column_to_json`: a `map` is a JSON
//! object whose keys are the keys' text (Trino's clients parse them back with the key
//! type), a `row` is a JSON array of its fields in order. The type names and
//! signatures of both are in `mod.rs`.

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
