//! Trino's array functions taking lambdas that DataFusion lacks: `zip_with`,
//! `reduce`, `all_match`, `none_match`, and `array_sort` with a comparator (planned as `array_sort_by`: the
//! dialect renames the call, DataFusion's `array_sort` keeps its own).

use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, AsArray, GenericListArray, Int64Array, ListArray, UInt32Array};
use datafusion::arrow::buffer::OffsetBuffer;
use datafusion::arrow::compute::kernels::nullif::nullif;
use datafusion::arrow::compute::{cast, interleave, take};
use datafusion::arrow::datatypes::{DataType, Field, FieldRef};
use datafusion::common::{exec_err, Result};
use datafusion::logical_expr::{HigherOrderUDF, ValueOrLambda};

use super::higher_order::{apply, element, is_null, lambda, lambda_field, value_field, value_fields, ArgFields, Call};
use super::invalid_argument;

pub fn functions() -> Vec<Arc<HigherOrderUDF>> {
    vec![
        lambda("zip_with", 2, 1, zip_with_parameters, zip_with_returns, zip_with),
        lambda("reduce", 2, 2, reduce_parameters, reduce_returns, reduce),
        lambda("array_sort_by", 1, 1, sort_parameters, sort_returns, array_sort_by),
        lambda("all_match", 1, 1, match_parameters, boolean_result, |c| quantified(c, true)),
        lambda("none_match", 1, 1, match_parameters, boolean_result, |c| quantified(c, false)),
    ]
}

/// `array` as a `List` (large and fixed-size lists cast), with its rows' value ranges.
fn list(array: &ArrayRef) -> Result<ListArray> {
    Ok(match array.data_type() {
        DataType::List(_) => array.as_list::<i32>().clone(),
        DataType::Null => {
            let item = Arc::new(Field::new("item", DataType::Null, true));
            ListArray::new_null(item, array.len())
        }
        DataType::LargeList(f) | DataType::FixedSizeList(f, _) => {
            cast(array, &DataType::List(f.clone()))?.as_list::<i32>().clone()
        }
        other => return exec_err!("expected an array, got {other}"),
    })
}

fn range(list: &ListArray, row: usize) -> (usize, usize) {
    let offsets = list.value_offsets();
    (offsets[row] as usize, offsets[row + 1] as usize)
}

fn zip_with_parameters(fields: ArgFields) -> Result<Vec<Vec<FieldRef>>> {
    let values = value_fields(fields);
    Ok(vec![vec![element(&values[0], "zip_with")?, element(&values[1], "zip_with")?]])
}

fn zip_with_returns(fields: &[ValueOrLambda<FieldRef, FieldRef>]) -> Result<FieldRef> {
    let out = lambda_field(fields, 0)?;
    let item = Field::new("item", out.data_type().clone(), true);
    Ok(Arc::new(Field::new("zip_with", DataType::List(Arc::new(item)), true)))
}

/// Pairs the elements of two arrays by position (the shorter padded with NULLs) and
/// applies the lambda to each pair; NULL where either array is.
fn zip_with(call: &Call) -> Result<ArrayRef> {
    let (a, b) = (list(&call.values[0])?, list(&call.values[1])?);
    let (mut left, mut right, mut rows, mut lengths) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let mut nulls = datafusion::arrow::array::NullBufferBuilder::new(a.len());
    for row in 0..a.len() {
        if is_null(&a, row) || is_null(&b, row) {
            nulls.append_null();
            lengths.push(0);
            continue;
        }
        nulls.append_non_null();
        let ((a0, a1), (b0, b1)) = (range(&a, row), range(&b, row));
        let n = (a1 - a0).max(b1 - b0);
        for j in 0..n {
            left.push((a0 + j < a1).then_some((a0 + j) as u32));
            right.push((b0 + j < b1).then_some((b0 + j) as u32));
            rows.push(row as u32);
        }
        lengths.push(n);
    }
    let left = take(a.values(), &UInt32Array::from(left), None)?;
    let right = take(b.values(), &UInt32Array::from(right), None)?;
    let out = apply(call.lambdas[0], &[left, right], &UInt32Array::from(rows))?;
    let DataType::List(item) = call.return_field.data_type() else { return exec_err!("zip_with answers an array") };
    let out = cast(&out, item.data_type())?;
    Ok(Arc::new(GenericListArray::<i32>::try_new(
        item.clone(),
        OffsetBuffer::from_lengths(lengths),
        out,
        nulls.finish(),
    )?))
}

fn reduce_parameters(fields: ArgFields) -> Result<Vec<Vec<FieldRef>>> {
    let values = value_fields(fields);
    let state = Arc::new(values[1].as_ref().clone().with_nullable(true));
    Ok(vec![vec![state.clone(), element(&values[0], "reduce")?], vec![state]])
}

fn reduce_returns(fields: &[ValueOrLambda<FieldRef, FieldRef>]) -> Result<FieldRef> {
    let out = lambda_field(fields, 1)?;
    Ok(Arc::new(Field::new("reduce", out.data_type().clone(), true)))
}

/// Folds each array from its initial state with the merge lambda, then applies the
/// finish lambda. The fold is sequential within an array, so it is vectorised across
/// arrays: one evaluation per element position, over the arrays that long.
fn reduce(call: &Call) -> Result<ArrayRef> {
    let items = list(&call.values[0])?;
    let mut state = call.values[1].clone();
    let state_type = state.data_type().clone();
    let lengths: Vec<usize> = (0..items.len())
        .map(|r| if is_null(&items, r) { 0 } else { range(&items, r).1 - range(&items, r).0 })
        .collect();
    let longest = lengths.iter().copied().max().unwrap_or(0);
    for position in 0..longest {
        let active: Vec<u32> = (0..items.len()).filter(|&r| lengths[r] > position).map(|r| r as u32).collect();
        let rows = UInt32Array::from(active.clone());
        let elements: Vec<u32> = active.iter().map(|&r| (range(&items, r as usize).0 + position) as u32).collect();
        let s = take(&state, &rows, None)?;
        let x = take(items.values(), &UInt32Array::from(elements), None)?;
        let merged = cast(&apply(call.lambdas[0], &[s, x], &rows)?, &state_type)?;
        // The active rows take their merged state, the others keep theirs.
        let mut next = active.iter().peekable();
        let mut picks = Vec::with_capacity(items.len());
        let mut taken = 0usize;
        for r in 0..items.len() {
            if next.peek().is_some_and(|&&a| a as usize == r) {
                next.next();
                picks.push((1, taken));
                taken += 1;
            } else {
                picks.push((0, r));
            }
        }
        state = interleave(&[state.as_ref(), merged.as_ref()], &picks)?;
    }
    let all = UInt32Array::from((0..items.len() as u32).collect::<Vec<_>>());
    let out = cast(&apply(call.lambdas[1], &[state], &all)?, call.return_field.data_type())?;
    let null_rows: datafusion::arrow::array::BooleanArray =
        (0..items.len()).map(|r| Some(is_null(&items, r))).collect();
    Ok(nullif(&out, &null_rows)?)
}

fn sort_parameters(fields: ArgFields) -> Result<Vec<Vec<FieldRef>>> {
    let values = value_fields(fields);
    let item = element(&values[0], "array_sort")?;
    Ok(vec![vec![item.clone(), item]])
}

fn sort_returns(fields: &[ValueOrLambda<FieldRef, FieldRef>]) -> Result<FieldRef> {
    let array = value_field(fields, 0)?;
    Ok(Arc::new(Field::new("array_sort", array.data_type().clone(), true)))
}

/// Arrays longer than this are refused: the comparator is evaluated on every pair.
const SORT_LIMIT: usize = 2048;

/// Sorts each array with a comparator lambda (negative, zero, positive). The lambda
/// is evaluated once per batch on every pair of each array's elements; the sort then
/// reads the answers. The merge sort is stable and tolerates a comparator that is
/// not a total order.
fn array_sort_by(call: &Call) -> Result<ArrayRef> {
    let items = list(&call.values[0])?;
    let (mut left, mut right, mut rows) = (Vec::new(), Vec::new(), Vec::new());
    for row in (0..items.len()).filter(|&r| !is_null(&items, r)) {
        let (from, to) = range(&items, row);
        if to - from > SORT_LIMIT {
            return Err(invalid_argument(format!(
                "array_sort with a comparator sorts arrays of up to {SORT_LIMIT} elements, not {}",
                to - from
            )));
        }
        for p in from..to {
            for q in from..to {
                left.push(p as u32);
                right.push(q as u32);
                rows.push(row as u32);
            }
        }
    }
    let (l, r) =
        (take(items.values(), &UInt32Array::from(left), None)?, take(items.values(), &UInt32Array::from(right), None)?);
    let answers = cast(&apply(call.lambdas[0], &[l, r], &UInt32Array::from(rows))?, &DataType::Int64)?;
    let answers: &Int64Array = answers.as_primitive();
    if answers.null_count() > 0 {
        return Err(invalid_argument("Lambda comparator must return either -1, 0, or 1"));
    }
    let mut order = Vec::with_capacity(items.values().len());
    let mut at = 0usize;
    for row in 0..items.len() {
        let (from, to) = range(&items, row);
        if is_null(&items, row) {
            continue;
        }
        let n = to - from;
        let matrix = &answers.values()[at..at + n * n];
        at += n * n;
        let sorted = merge_sort((0..n).collect(), &|p, q| matrix[p * n + q] > 0);
        order.extend(sorted.into_iter().map(|i| (from + i) as u32));
    }
    // Values of NULL rows are not taken; their offsets collapse.
    let lengths: Vec<usize> = (0..items.len())
        .map(|r| if is_null(&items, r) { 0 } else { range(&items, r).1 - range(&items, r).0 })
        .collect();
    let values = take(items.values(), &UInt32Array::from(order), None)?;
    let DataType::List(item) = items.data_type() else { return exec_err!("array_sort sorts arrays") };
    let sorted = ListArray::try_new(item.clone(), OffsetBuffer::from_lengths(lengths), values, items.nulls().cloned())?;
    Ok(cast(&(Arc::new(sorted) as ArrayRef), call.return_field.data_type())?)
}

fn match_parameters(fields: ArgFields) -> Result<Vec<Vec<FieldRef>>> {
    Ok(vec![vec![element(&value_fields(fields)[0], "all_match")?]])
}

fn boolean_result(_: &[ValueOrLambda<FieldRef, FieldRef>]) -> Result<FieldRef> {
    Ok(Arc::new(Field::new("match", DataType::Boolean, true)))
}

/// Each array's predicate values: `all` decides true unless one is false (NULL if
/// one is NULL), `none` true unless one is true. Empty arrays: true.
fn quantified(call: &Call, all: bool) -> Result<ArrayRef> {
    let items = list(&call.values[0])?;
    let offsets = items.value_offsets();
    let (first, last) = (offsets[0] as usize, offsets[items.len()] as usize);
    let values = items.values().slice(first, last - first);
    let rows: Vec<u32> =
        (0..items.len()).flat_map(|r| std::iter::repeat_n(r as u32, range(&items, r).1 - range(&items, r).0)).collect();
    let tested = apply(call.lambdas[0], &[values], &UInt32Array::from(rows))?;
    let tested = tested.as_boolean();
    let decisive = !all;
    let out: datafusion::arrow::array::BooleanArray = (0..items.len())
        .map(|r| {
            if is_null(&items, r) {
                return None;
            }
            let (from, to) = range(&items, r);
            let mut unknown = false;
            for i in from - first..to - first {
                match tested.is_valid(i).then(|| tested.value(i)) {
                    Some(v) if v == decisive => return Some(false),
                    Some(_) => {}
                    None => unknown = true,
                }
            }
            if unknown {
                None
            } else {
                Some(true)
            }
        })
        .collect();
    Ok(Arc::new(out))
}

/// A stable merge sort of `items` where `after(p, q)` says `p` sorts after `q`.
fn merge_sort(items: Vec<usize>, after: &dyn Fn(usize, usize) -> bool) -> Vec<usize> {
    if items.len() <= 1 {
        return items;
    }
    let right = items[items.len() / 2..].to_vec();
    let left = merge_sort(items[..items.len() / 2].to_vec(), after);
    let right = merge_sort(right, after);
    let mut out = Vec::with_capacity(left.len() + right.len());
    let (mut i, mut j) = (0, 0);
    while i < left.len() && j < right.len() {
        if after(left[i], right[j]) {
            out.push(right[j]);
            j += 1;
        } else {
            out.push(left[i]);
            i += 1;
        }
    }
    out.extend_from_slice(&left[i..]);
    out.extend_from_slice(&right[j..]);
    out
}

#[cfg(test)]
mod tests {
    use super::merge_sort;

    #[test]
    fn merge_sort_is_stable_and_survives_a_comparator_that_is_no_order() {
        let keys = [3, 1, 3, 2, 1];
        let after = |p: usize, q: usize| keys[p] > keys[q];
        assert_eq!(merge_sort((0..5).collect(), &after), vec![1, 4, 3, 0, 2]);
        // "Everything sorts after everything": any order, but every element once.
        let mut out = merge_sort((0..7).collect(), &|_, _| true);
        out.sort();
        assert_eq!(out, (0..7).collect::<Vec<_>>());
    }
}
