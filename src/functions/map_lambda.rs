//! Trino's map functions taking lambdas: `transform_keys`, `transform_values`,
//! `map_filter` and `map_zip_with`, each evaluating its lambda once per batch over
//! the flattened entries of the batch's maps.

use std::collections::HashMap;
use std::sync::Arc;

use datafusion::arrow::array::{
    Array, ArrayRef, AsArray, BooleanArray, MapArray, NullBufferBuilder, StructArray, UInt32Array,
};
use datafusion::arrow::buffer::OffsetBuffer;
use datafusion::arrow::compute::{cast, filter, interleave, take};
use datafusion::arrow::datatypes::{DataType, Field, FieldRef, Fields};
use datafusion::common::{exec_err, Result, ScalarValue};
use datafusion::logical_expr::{HigherOrderUDF, ValueOrLambda};

use super::higher_order::{apply, entries, lambda, lambda_field, value_field, value_fields, ArgFields, Call};
use super::invalid_argument;

pub fn functions() -> Vec<Arc<HigherOrderUDF>> {
    vec![
        lambda("transform_keys", 1, 1, entry_parameters, transform_keys_returns, transform_keys),
        lambda("transform_values", 1, 1, entry_parameters, transform_values_returns, transform_values),
        lambda("map_filter", 1, 1, entry_parameters, same_map, map_filter),
        lambda("map_zip_with", 2, 1, zip_parameters, map_zip_with_returns, map_zip_with),
    ]
}

/// A map type of `key` and `value` fields.
fn map_field(name: &str, key: &FieldRef, value: &FieldRef) -> FieldRef {
    let key = Field::new("key", key.data_type().clone(), false);
    let value = Field::new("value", value.data_type().clone(), true);
    let entries = Field::new("entries", DataType::Struct(Fields::from(vec![key, value])), false);
    Arc::new(Field::new(name, DataType::Map(Arc::new(entries), false), true))
}

fn entry_parameters(fields: ArgFields) -> Result<Vec<Vec<FieldRef>>> {
    let (k, v) = entries(&value_fields(fields)[0], "map lambda")?;
    Ok(vec![vec![k, v]])
}

fn transform_keys_returns(fields: &[ValueOrLambda<FieldRef, FieldRef>]) -> Result<FieldRef> {
    let (_, v) = entries(&value_field(fields, 0)?, "transform_keys")?;
    Ok(map_field("transform_keys", &lambda_field(fields, 0)?, &v))
}

fn transform_values_returns(fields: &[ValueOrLambda<FieldRef, FieldRef>]) -> Result<FieldRef> {
    let (k, _) = entries(&value_field(fields, 0)?, "transform_values")?;
    Ok(map_field("transform_values", &k, &lambda_field(fields, 0)?))
}

fn same_map(fields: &[ValueOrLambda<FieldRef, FieldRef>]) -> Result<FieldRef> {
    let (k, v) = entries(&value_field(fields, 0)?, "map_filter")?;
    Ok(map_field("map_filter", &k, &v))
}

/// The batch's maps with entries rebased to start at zero, and each entry's row.
struct Flat {
    keys: ArrayRef,
    values: ArrayRef,
    lengths: Vec<usize>,
    rows: UInt32Array,
    nulls: Option<datafusion::arrow::buffer::NullBuffer>,
}

fn flatten(array: &ArrayRef) -> Result<Flat> {
    let DataType::Map(..) = array.data_type() else { return exec_err!("expected a map, got {}", array.data_type()) };
    let map = array.as_map();
    let offsets = map.value_offsets();
    let (first, last) = (offsets[0] as usize, offsets[map.len()] as usize);
    let lengths: Vec<usize> = (0..map.len()).map(|r| (offsets[r + 1] - offsets[r]) as usize).collect();
    let rows: Vec<u32> = lengths.iter().enumerate().flat_map(|(r, &n)| std::iter::repeat_n(r as u32, n)).collect();
    Ok(Flat {
        keys: map.keys().slice(first, last - first),
        values: map.values().slice(first, last - first),
        lengths,
        rows: UInt32Array::from(rows),
        nulls: map.logical_nulls(),
    })
}

fn build(
    field: &FieldRef,
    keys: ArrayRef,
    values: ArrayRef,
    lengths: Vec<usize>,
    nulls: Option<datafusion::arrow::buffer::NullBuffer>,
) -> Result<ArrayRef> {
    let DataType::Map(entries, _) = field.data_type() else { return exec_err!("expected a map type") };
    let DataType::Struct(kv) = entries.data_type() else { return exec_err!("a map's entries are a struct") };
    let keys = cast(&keys, kv[0].data_type())?;
    let values = cast(&values, kv[1].data_type())?;
    let entries_array = StructArray::try_new(kv.clone(), vec![keys, values], None)?;
    Ok(Arc::new(MapArray::try_new(entries.clone(), OffsetBuffer::from_lengths(lengths), entries_array, nulls, false)?))
}

/// Each row's keys must be distinct and not NULL, as in any map.
fn check_keys(keys: &ArrayRef, lengths: &[usize]) -> Result<()> {
    if keys.null_count() > 0 {
        return Err(invalid_argument("map key cannot be null"));
    }
    let mut at = 0;
    for &n in lengths {
        let mut seen = HashMap::with_capacity(n);
        for i in at..at + n {
            let key = ScalarValue::try_from_array(keys, i)?;
            if seen.insert(key.clone(), ()).is_some() {
                return Err(invalid_argument(format!("Duplicate map keys ({key}) are not allowed")));
            }
        }
        at += n;
    }
    Ok(())
}

fn transform_keys(call: &Call) -> Result<ArrayRef> {
    let flat = flatten(&call.values[0])?;
    let keys = apply(call.lambdas[0], &[flat.keys.clone(), flat.values.clone()], &flat.rows)?;
    check_keys(&keys, &flat.lengths)?;
    build(&call.return_field, keys, flat.values, flat.lengths, flat.nulls)
}

fn transform_values(call: &Call) -> Result<ArrayRef> {
    let flat = flatten(&call.values[0])?;
    let values = apply(call.lambdas[0], &[flat.keys.clone(), flat.values.clone()], &flat.rows)?;
    build(&call.return_field, flat.keys, values, flat.lengths, flat.nulls)
}

fn map_filter(call: &Call) -> Result<ArrayRef> {
    let flat = flatten(&call.values[0])?;
    let keep = apply(call.lambdas[0], &[flat.keys.clone(), flat.values.clone()], &flat.rows)?;
    let keep: BooleanArray = keep.as_boolean().iter().map(|b| Some(b == Some(true))).collect();
    let mut lengths = Vec::with_capacity(flat.lengths.len());
    let mut at = 0;
    for &n in &flat.lengths {
        lengths.push((at..at + n).filter(|&i| keep.value(i)).count());
        at += n;
    }
    let (keys, values) = (filter(&flat.keys, &keep)?, filter(&flat.values, &keep)?);
    build(&call.return_field, keys, values, lengths, flat.nulls)
}

fn zip_parameters(fields: ArgFields) -> Result<Vec<Vec<FieldRef>>> {
    let values = value_fields(fields);
    let (k, v1) = entries(&values[0], "map_zip_with")?;
    let (_, v2) = entries(&values[1], "map_zip_with")?;
    Ok(vec![vec![k, v1, v2]])
}

fn map_zip_with_returns(fields: &[ValueOrLambda<FieldRef, FieldRef>]) -> Result<FieldRef> {
    let (k, _) = entries(&value_field(fields, 0)?, "map_zip_with")?;
    Ok(map_field("map_zip_with", &k, &lambda_field(fields, 0)?))
}

/// Merges two maps by key: the lambda sees each key of either map with its value in
/// each (NULL where the map lacks the key); NULL where either map is.
fn map_zip_with(call: &Call) -> Result<ArrayRef> {
    let (a, b) = (flatten(&call.values[0])?, flatten(&call.values[1])?);
    let (mut keys, mut left, mut right, mut rows, mut lengths) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let mut nulls = NullBufferBuilder::new(a.lengths.len());
    let (mut at_a, mut at_b) = (0usize, 0usize);
    for row in 0..a.lengths.len() {
        let (na, nb) = (a.lengths[row], b.lengths[row]);
        let null = a.nulls.as_ref().is_some_and(|n| n.is_null(row)) || b.nulls.as_ref().is_some_and(|n| n.is_null(row));
        if null {
            nulls.append_null();
            lengths.push(0);
        } else {
            nulls.append_non_null();
            let mut in_b = HashMap::with_capacity(nb);
            for j in at_b..at_b + nb {
                in_b.insert(ScalarValue::try_from_array(&b.keys, j)?, j);
            }
            let mut from_a = HashMap::with_capacity(na);
            for i in at_a..at_a + na {
                let key = ScalarValue::try_from_array(&a.keys, i)?;
                keys.push((0, i));
                left.push(Some(i as u32));
                right.push(in_b.get(&key).map(|&j| j as u32));
                from_a.insert(key, ());
            }
            let mut extra = 0;
            for j in at_b..at_b + nb {
                if !from_a.contains_key(&ScalarValue::try_from_array(&b.keys, j)?) {
                    keys.push((1, j));
                    left.push(None);
                    right.push(Some(j as u32));
                    extra += 1;
                }
            }
            rows.extend(std::iter::repeat_n(row as u32, na + extra));
            lengths.push(na + extra);
        }
        at_a += na;
        at_b += nb;
    }
    let keys = interleave(&[a.keys.as_ref(), b.keys.as_ref()], &keys)?;
    let v1 = take(&a.values, &UInt32Array::from(left), None)?;
    let v2 = take(&b.values, &UInt32Array::from(right), None)?;
    let values = apply(call.lambdas[0], &[keys.clone(), v1, v2], &UInt32Array::from(rows))?;
    build(&call.return_field, keys, values, lengths, nulls.finish())
}
