//! The functions Trino's `UNNEST` relation is planned with (`dialect::unnest_relations`
//! writes them around its arguments): `__unnest_list` is the list an argument expands
//! to (an array as it is; a map as its entries, rows of key and value),
//! `__unnest_row` is an element as a row whose fields become the relation's columns (a
//! row as it is; any other value as a row of one field), and `__unnest_ordinals` is
//! `WITH ORDINALITY`'s 1, 2, ... up to the longest argument's length.
//!
//! `__entries_map` is `__unnest_list`'s inverse on a map: `plan::dependent_join` holds
//! a map as its entries, a list, which a join's key and a grouping take.

use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, AsArray, Int64Array, ListArray, StructArray};
use datafusion::arrow::buffer::OffsetBuffer;
use datafusion::arrow::datatypes::{DataType, Field, Fields};
use datafusion::common::{plan_err, Result};
use datafusion::logical_expr::{ScalarUDF, Signature, Volatility};

use super::simple::function;

pub fn functions() -> Vec<ScalarUDF> {
    vec![
        unnest_list(),
        entries_map(),
        function("__unnest_row", Signature::any(1, Volatility::Immutable), row_type, as_row),
        function("__unnest_ordinals", Signature::variadic_any(Volatility::Immutable), ordinals_type, ordinals),
    ]
}

/// An array as it is; a map as the list of its entries.
pub fn unnest_list() -> ScalarUDF {
    function("__unnest_list", Signature::any(1, Volatility::Immutable), list_type, as_list)
}

/// A map's list of entries as the map again.
pub fn entries_map() -> ScalarUDF {
    function("__entries_map", Signature::any(1, Volatility::Immutable), map_type, as_map)
}

fn map_type(args: &[DataType]) -> Result<DataType> {
    match &args[0] {
        DataType::List(item) if matches!(item.data_type(), DataType::Struct(f) if f.len() == 2) => {
            Ok(DataType::Map(Arc::new(Field::new("entries", item.data_type().clone(), false)), false))
        }
        other => plan_err!("not a map's entries: {other}"),
    }
}

fn as_map(args: &[ArrayRef]) -> Result<ArrayRef> {
    let list = args[0].as_list::<i32>();
    let entries = list.values().as_struct().clone();
    let field = Arc::new(Field::new("entries", entries.data_type().clone(), false));
    let map = datafusion::arrow::array::MapArray::try_new(
        field,
        list.offsets().clone(),
        entries,
        list.nulls().cloned(),
        false,
    )?;
    Ok(Arc::new(map))
}

fn list_type(args: &[DataType]) -> Result<DataType> {
    match &args[0] {
        DataType::List(_) | DataType::LargeList(_) | DataType::FixedSizeList(..) | DataType::Null => {
            Ok(args[0].clone())
        }
        DataType::Map(entries, _) => {
            Ok(DataType::List(Arc::new(Field::new_list_field(entries.data_type().clone(), true))))
        }
        other => plan_err!("Cannot unnest type: {other}"),
    }
}

fn as_list(args: &[ArrayRef]) -> Result<ArrayRef> {
    let DataType::Map(..) = args[0].data_type() else { return Ok(Arc::clone(&args[0])) };
    let map = args[0].as_map();
    let entries = map.entries().clone();
    let field = Arc::new(Field::new_list_field(entries.data_type().clone(), true));
    let offsets = map.offsets().clone();
    Ok(Arc::new(ListArray::try_new(field, offsets, Arc::new(entries), map.nulls().cloned())?))
}

fn row_type(args: &[DataType]) -> Result<DataType> {
    match &args[0] {
        DataType::Struct(_) => Ok(args[0].clone()),
        other => Ok(DataType::Struct(Fields::from(vec![Field::new("c0", other.clone(), true)]))),
    }
}

fn as_row(args: &[ArrayRef]) -> Result<ArrayRef> {
    if let DataType::Struct(_) = args[0].data_type() {
        return Ok(Arc::clone(&args[0]));
    }
    let fields = Fields::from(vec![Field::new("c0", args[0].data_type().clone(), true)]);
    Ok(Arc::new(StructArray::try_new(fields, vec![Arc::clone(&args[0])], None)?))
}

fn ordinals_type(_: &[DataType]) -> Result<DataType> {
    Ok(DataType::List(Arc::new(Field::new_list_field(DataType::Int64, false))))
}

/// Each row's length of a list or map argument (NULL is empty).
fn lengths(array: &ArrayRef) -> Result<Vec<usize>> {
    let length = |offsets: &[i32], nulls: Option<&datafusion::arrow::buffer::NullBuffer>| -> Vec<usize> {
        (0..offsets.len() - 1)
            .map(|i| match nulls.is_some_and(|n| n.is_null(i)) {
                true => 0,
                false => (offsets[i + 1] - offsets[i]) as usize,
            })
            .collect()
    };
    Ok(match array.data_type() {
        DataType::List(_) => length(array.as_list::<i32>().value_offsets(), array.nulls()),
        DataType::Map(..) => length(array.as_map().value_offsets(), array.nulls()),
        DataType::LargeList(_) => {
            let list = array.as_list::<i64>();
            (0..list.len()).map(|i| if list.is_null(i) { 0 } else { list.value_length(i) as usize }).collect()
        }
        DataType::FixedSizeList(_, n) => {
            (0..array.len()).map(|i| if array.is_null(i) { 0 } else { *n as usize }).collect()
        }
        DataType::Null => vec![0; array.len()],
        other => return plan_err!("Cannot unnest type: {other}"),
    })
}

fn ordinals(args: &[ArrayRef]) -> Result<ArrayRef> {
    let rows = args.first().map_or(0, |a| a.len());
    let mut longest = vec![0usize; rows];
    for array in args {
        for (l, n) in longest.iter_mut().zip(lengths(array)?) {
            *l = (*l).max(n);
        }
    }
    let values = Int64Array::from_iter_values(longest.iter().flat_map(|&n| 1..=n as i64));
    let field = Arc::new(Field::new_list_field(DataType::Int64, false));
    Ok(Arc::new(ListArray::try_new(field, OffsetBuffer::from_lengths(longest), Arc::new(values), None)?))
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::arrow::array::{Int32Array, ListArray};
    use datafusion::arrow::datatypes::Int32Type;

    /// Per row, 1 up to the longer of the two arrays; a NULL array counts as empty.
    #[test]
    fn ordinals_count_the_longest_argument() {
        let a: ArrayRef = Arc::new(ListArray::from_iter_primitive::<Int32Type, _, _>(vec![
            Some(vec![Some(1), Some(2)]),
            None,
            Some(vec![]),
        ]));
        let b: ArrayRef = Arc::new(ListArray::from_iter_primitive::<Int32Type, _, _>(vec![
            Some(vec![Some(1)]),
            Some(vec![Some(7), None, Some(9)]),
            None,
        ]));
        let got = ordinals(&[a, b]).unwrap();
        let got = got.as_list::<i32>();
        let row = |i: usize| got.value(i).as_primitive::<datafusion::arrow::datatypes::Int64Type>().values().to_vec();
        assert_eq!((row(0), row(1), row(2)), (vec![1, 2], vec![1, 2, 3], vec![]));
    }

    /// A value that is not a row becomes a row of one field; a row stays itself.
    #[test]
    fn elements_become_rows() {
        let ints: ArrayRef = Arc::new(Int32Array::from(vec![Some(4), None]));
        let row = as_row(&[Arc::clone(&ints)]).unwrap();
        assert_eq!(row.as_struct().column(0).as_ref(), ints.as_ref());
        assert_eq!(as_row(&[Arc::clone(&row)]).unwrap().as_ref(), row.as_ref());
    }
}
