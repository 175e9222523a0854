//! Rows cast by position, at any depth: Trino casts a row to a row type field by field
//! in order (`CAST(ROW(ARRAY[ROW(5)]) AS ROW(b ARRAY(ROW(c int))))`), where Arrow casts
//! structs by field name. `__rename_fields(x, shape)` is `x` with the field names of
//! `shape`'s type, taken by position at every level, its values untouched; Arrow's cast
//! from there to the target matches the fields by name. `plan::casts` writes it under
//! a cast whose rows' names differ from the target's.

use std::sync::Arc;

use datafusion::arrow::array::{make_array, Array, ArrayData, ArrayRef};
use datafusion::arrow::datatypes::{DataType, Field, FieldRef, Fields};
use datafusion::common::Result;
use datafusion::logical_expr::{ScalarUDF, Signature, Volatility};

pub const RENAME_FIELDS: &str = "__rename_fields";

pub fn functions() -> Vec<ScalarUDF> {
    vec![super::simple::function(
        RENAME_FIELDS,
        Signature::any(2, Volatility::Immutable),
        |types| Ok(types[1].clone()),
        |args| rename(&args[0], args[1].data_type()),
    )]
}

/// `from` with the field names of `to`, by position, where both have the same shape
/// (rows of as many fields, lists, maps) and some name differs; `None` otherwise.
pub fn renamed_type(from: &DataType, to: &DataType) -> Option<DataType> {
    let renamed = named_as(from, to)?;
    (renamed != *from).then_some(renamed)
}

/// `from`'s types under `to`'s names where the shapes allow; `from` itself below a
/// point where they differ (Arrow's cast then says whether it can).
fn named_as(from: &DataType, to: &DataType) -> Option<DataType> {
    let field = |f: &FieldRef, t: &FieldRef, name: &str| -> FieldRef {
        let inner = named_as(f.data_type(), t.data_type()).unwrap_or_else(|| f.data_type().clone());
        Arc::new(Field::new(name, inner, f.is_nullable()).with_metadata(f.metadata().clone()))
    };
    Some(match (from, to) {
        (DataType::Struct(a), DataType::Struct(b)) if a.len() == b.len() => {
            DataType::Struct(a.iter().zip(b.iter()).map(|(f, t)| field(f, t, t.name())).collect::<Fields>())
        }
        (DataType::List(f), DataType::List(t)) => DataType::List(field(f, t, f.name())),
        (DataType::LargeList(f), DataType::LargeList(t)) => DataType::LargeList(field(f, t, f.name())),
        (DataType::FixedSizeList(f, n), DataType::FixedSizeList(t, _)) => {
            DataType::FixedSizeList(field(f, t, f.name()), *n)
        }
        (DataType::Map(f, sorted), DataType::Map(t, _)) => DataType::Map(field(f, t, f.name()), *sorted),
        _ => from.clone(),
    })
}

/// `array` as the type `to`, which has its values' layout and other field names.
fn rename(array: &ArrayRef, to: &DataType) -> Result<ArrayRef> {
    Ok(make_array(renamed_data(array.to_data(), to)?))
}

fn renamed_data(data: ArrayData, to: &DataType) -> Result<ArrayData> {
    let children: Vec<DataType> = match to {
        DataType::Struct(fields) => fields.iter().map(|f| f.data_type().clone()).collect(),
        DataType::List(f) | DataType::LargeList(f) | DataType::FixedSizeList(f, _) | DataType::Map(f, _) => {
            vec![f.data_type().clone()]
        }
        _ => Vec::new(),
    };
    let child_data = match children.len() == data.child_data().len() && !children.is_empty() {
        true => data
            .child_data()
            .iter()
            .zip(&children)
            .map(|(c, t)| renamed_data(c.clone(), t))
            .collect::<Result<Vec<_>>>()?,
        false => data.child_data().to_vec(),
    };
    Ok(data.into_builder().data_type(to.clone()).child_data(child_data).build()?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::arrow::array::{Int64Array, ListArray, StructArray};
    use datafusion::arrow::buffer::OffsetBuffer;

    /// A list of rows `(c0)` renamed as a list of rows `(c)`: the same values.
    #[test]
    fn rows_inside_lists_take_the_targets_names() {
        let inner = Fields::from(vec![Field::new("c0", DataType::Int64, true)]);
        let rows = StructArray::new(inner.clone(), vec![Arc::new(Int64Array::from(vec![5, 6]))], None);
        let element = Arc::new(Field::new("item", DataType::Struct(inner), true));
        let list: ArrayRef = Arc::new(ListArray::new(element, OffsetBuffer::from_lengths([2]), Arc::new(rows), None));
        let target_element =
            Field::new("item", DataType::Struct(vec![Field::new("c", DataType::Int32, true)].into()), true);
        let target = DataType::List(Arc::new(target_element));
        let renamed = renamed_type(list.data_type(), &target).expect("names differ");
        let out = rename(&list, &renamed).unwrap();
        let DataType::List(f) = out.data_type() else { panic!("a list") };
        let DataType::Struct(fields) = f.data_type() else { panic!("of rows") };
        // The name is the target's, the type still the input's.
        assert_eq!((fields[0].name().as_str(), fields[0].data_type()), ("c", &DataType::Int64));
        let cast = datafusion::arrow::compute::cast(&out, &target).unwrap();
        let values = cast.as_any().downcast_ref::<ListArray>().unwrap().value(0);
        let row = values.as_any().downcast_ref::<StructArray>().unwrap();
        let c = row.column(0).as_any().downcast_ref::<datafusion::arrow::array::Int32Array>().unwrap();
        assert_eq!(c.values().to_vec(), vec![5, 6]);
    }

    #[test]
    fn other_shapes_are_left_to_the_cast() {
        let two = DataType::Struct(
            vec![Field::new("a", DataType::Int64, true), Field::new("b", DataType::Int64, true)].into(),
        );
        let one = DataType::Struct(vec![Field::new("x", DataType::Int64, true)].into());
        assert_eq!(renamed_type(&two, &one), None);
        assert_eq!(renamed_type(&DataType::Int64, &DataType::Int32), None);
        assert_eq!(renamed_type(&one, &one), None);
    }
}
