//! Trino's array and map functions that DataFusion lacks (`array.md`, `map.md`):
//! `ngrams`, `combinations`, `trim_array`, `zip`, `array_histogram`,
//! `map_from_entries`, `multimap_from_entries`, `euclidean_distance`,
//! `cosine_similarity` and `cosine_distance` (Trino's also take maps),
//! `contains_sequence`, `shuffle`, `map_concat`. Each builds its result from index arrays over the input's
//! flattened values, so the values are copied once, by `take`.

use std::collections::HashMap;
use std::sync::Arc;

use datafusion::arrow::array::{
    Array, ArrayRef, AsArray, Float64Array, Int64Array, ListArray, MapArray, NullBufferBuilder, StructArray,
    UInt32Array,
};
use datafusion::arrow::buffer::OffsetBuffer;
use datafusion::arrow::compute::{cast, take};
use datafusion::arrow::datatypes::{DataType, Field, Fields};
use datafusion::common::{exec_err, plan_err, Result, ScalarValue};
use datafusion::logical_expr::{ScalarUDF, Signature, Volatility};

use super::invalid_argument;
use super::simple::function;

pub fn functions() -> Vec<ScalarUDF> {
    let any = |n| Signature::any(n, Volatility::Immutable);
    vec![
        function("ngrams", any(2), nested_list, ngrams),
        function("combinations", any(2), nested_list, combinations),
        function("trim_array", any(2), same_list, trim_array),
        function("zip", Signature::variadic_any(Volatility::Immutable), zip_type, zip),
        function("array_histogram", any(1), histogram_type, array_histogram),
        function("map_from_entries", any(1), map_from_entries_type, map_from_entries),
        function("multimap_from_entries", any(1), multimap_type, multimap_from_entries),
        function("euclidean_distance", any(2), |_| Ok(DataType::Float64), euclidean_distance),
        function("cosine_similarity", any(2), |_| Ok(DataType::Float64), cosine_similarity),
        function("cosine_distance", any(2), |_| Ok(DataType::Float64), cosine_distance),
        function("contains_sequence", any(2), |_| Ok(DataType::Boolean), contains_sequence),
        function("contains", any(2), |_| Ok(DataType::Boolean), contains),
        function("shuffle", Signature::any(1, Volatility::Volatile), same_list, shuffle),
        function("map_concat", Signature::variadic_any(Volatility::Immutable), |t| Ok(t[0].clone()), map_concat),
    ]
}

fn item(data_type: &DataType) -> Result<Arc<Field>> {
    match data_type {
        DataType::List(f) | DataType::LargeList(f) | DataType::FixedSizeList(f, _) => Ok(f.clone()),
        other => plan_err!("expected an array, got {other}"),
    }
}

fn list_of(data_type: DataType) -> DataType {
    DataType::List(Arc::new(Field::new("item", data_type, true)))
}

fn nested_list(args: &[DataType]) -> Result<DataType> {
    Ok(list_of(list_of(item(&args[0])?.data_type().clone())))
}

fn same_list(args: &[DataType]) -> Result<DataType> {
    Ok(list_of(item(&args[0])?.data_type().clone()))
}

/// `array` as a `List`.
fn list(array: &ArrayRef) -> Result<ListArray> {
    let f = item(array.data_type())?;
    Ok(cast(array, &DataType::List(Arc::new(Field::new("item", f.data_type().clone(), true))))?
        .as_list::<i32>()
        .clone())
}

fn range(list: &ListArray, row: usize) -> (usize, usize) {
    let o = list.value_offsets();
    (o[row] as usize, o[row + 1] as usize)
}

use super::simple::int64 as integer;

/// Arrays of arrays: for each row, `groups` lists index groups into `values`.
fn list_of_lists(values: &ArrayRef, rows: Vec<Option<Vec<Vec<u32>>>>) -> Result<ArrayRef> {
    let (mut inner_lengths, mut outer_lengths, mut indices) = (Vec::new(), Vec::new(), Vec::new());
    let mut nulls = NullBufferBuilder::new(rows.len());
    for row in rows {
        match row {
            None => {
                nulls.append_null();
                outer_lengths.push(0);
            }
            Some(groups) => {
                nulls.append_non_null();
                outer_lengths.push(groups.len());
                for g in groups {
                    inner_lengths.push(g.len());
                    indices.extend(g);
                }
            }
        }
    }
    let taken = take(values, &UInt32Array::from(indices), None)?;
    let inner_field = Arc::new(Field::new("item", values.data_type().clone(), true));
    let inner = ListArray::try_new(inner_field.clone(), OffsetBuffer::from_lengths(inner_lengths), taken, None)?;
    let outer_field = Arc::new(Field::new("item", DataType::List(inner_field), true));
    Ok(Arc::new(ListArray::try_new(
        outer_field,
        OffsetBuffer::from_lengths(outer_lengths),
        Arc::new(inner),
        nulls.finish(),
    )?))
}

fn ngrams(args: &[ArrayRef]) -> Result<ArrayRef> {
    let (items, n) = (list(&args[0])?, integer(&args[1])?);
    let mut rows = Vec::with_capacity(items.len());
    for row in 0..items.len() {
        if items.is_null(row) || n.is_null(row) {
            rows.push(None);
            continue;
        }
        let size = n.value(row);
        if size <= 0 {
            return Err(invalid_argument(format!("N must be positive: {size}")));
        }
        let (from, to) = range(&items, row);
        let size = (size as usize).min(to - from).max(if to == from { 0 } else { 1 });
        let windows = if to == from {
            vec![vec![]]
        } else {
            (from..=to - size).map(|s| (s as u32..(s + size) as u32).collect()).collect()
        };
        rows.push(Some(windows));
    }
    list_of_lists(items.values(), rows)
}

/// Each `k`-combination of `0..n`, in lexicographic order.
fn index_combinations(n: usize, k: usize) -> Vec<Vec<usize>> {
    if k > n {
        return vec![];
    }
    let mut out = Vec::new();
    let mut current: Vec<usize> = (0..k).collect();
    loop {
        out.push(current.clone());
        let Some(i) = (0..k).rev().find(|&i| current[i] != i + n - k) else { return out };
        current[i] += 1;
        for j in i + 1..k {
            current[j] = current[j - 1] + 1;
        }
    }
}

fn combinations(args: &[ArrayRef]) -> Result<ArrayRef> {
    let (items, n) = (list(&args[0])?, integer(&args[1])?);
    let mut rows = Vec::with_capacity(items.len());
    for row in 0..items.len() {
        if items.is_null(row) || n.is_null(row) {
            rows.push(None);
            continue;
        }
        let k = n.value(row);
        if !(0..=5).contains(&k) {
            return Err(invalid_argument(format!("combination size must be between 0 and 5: {k}")));
        }
        let (from, to) = range(&items, row);
        let groups = index_combinations(to - from, k as usize)
            .into_iter()
            .map(|c| c.into_iter().map(|i| (from + i) as u32).collect())
            .collect();
        rows.push(Some(groups));
    }
    list_of_lists(items.values(), rows)
}

fn trim_array(args: &[ArrayRef]) -> Result<ArrayRef> {
    let (items, n) = (list(&args[0])?, integer(&args[1])?);
    let (mut indices, mut lengths) = (Vec::new(), Vec::new());
    let mut nulls = NullBufferBuilder::new(items.len());
    for row in 0..items.len() {
        let (from, to) = range(&items, row);
        if items.is_null(row) || n.is_null(row) {
            nulls.append_null();
            lengths.push(0);
            continue;
        }
        let cut = n.value(row);
        if cut < 0 || cut as usize > to - from {
            return Err(invalid_argument(format!(
                "size must not be negative or exceed the array's cardinality: {cut}"
            )));
        }
        nulls.append_non_null();
        let keep = to - from - cut as usize;
        indices.extend((from..from + keep).map(|i| i as u32));
        lengths.push(keep);
    }
    let values = take(items.values(), &UInt32Array::from(indices), None)?;
    let field = Arc::new(Field::new("item", items.values().data_type().clone(), true));
    Ok(Arc::new(ListArray::try_new(field, OffsetBuffer::from_lengths(lengths), values, nulls.finish())?))
}

fn zip_fields(args: &[DataType]) -> Result<Fields> {
    let fields: Vec<Field> = args
        .iter()
        .enumerate()
        .map(|(i, t)| Ok(Field::new(format!("field{i}"), item(t)?.data_type().clone(), true)))
        .collect::<Result<_>>()?;
    Ok(Fields::from(fields))
}

fn zip_type(args: &[DataType]) -> Result<DataType> {
    if args.len() < 2 {
        return plan_err!("zip takes two arrays or more");
    }
    Ok(list_of(DataType::Struct(zip_fields(args)?)))
}

/// Rows of the arrays' elements by position; the shorter arrays give NULLs.
fn zip(args: &[ArrayRef]) -> Result<ArrayRef> {
    let lists: Vec<ListArray> = args.iter().map(list).collect::<Result<_>>()?;
    let rows = lists[0].len();
    let mut indices: Vec<Vec<Option<u32>>> = vec![Vec::new(); lists.len()];
    let (mut lengths, mut nulls) = (Vec::with_capacity(rows), NullBufferBuilder::new(rows));
    for row in 0..rows {
        if lists.iter().any(|l| l.is_null(row)) {
            nulls.append_null();
            lengths.push(0);
            continue;
        }
        nulls.append_non_null();
        let longest = lists.iter().map(|l| range(l, row).1 - range(l, row).0).max().unwrap_or(0);
        for (l, idx) in lists.iter().zip(indices.iter_mut()) {
            let (from, to) = range(l, row);
            idx.extend((0..longest).map(|j| (from + j < to).then_some((from + j) as u32)));
        }
        lengths.push(longest);
    }
    let columns = lists
        .iter()
        .zip(indices)
        .map(|(l, idx)| take(l.values(), &UInt32Array::from(idx), None))
        .collect::<std::result::Result<Vec<_>, _>>()?;
    let types: Vec<DataType> = args.iter().map(|a| a.data_type().clone()).collect();
    let rows_array = StructArray::try_new(zip_fields(&types)?, columns, None)?;
    let field = Arc::new(Field::new("item", rows_array.data_type().clone(), true));
    Ok(Arc::new(ListArray::try_new(field, OffsetBuffer::from_lengths(lengths), Arc::new(rows_array), nulls.finish())?))
}

fn map_type(key: DataType, value: DataType) -> DataType {
    let key = if key == DataType::Null { DataType::Utf8 } else { key };
    let kv = Fields::from(vec![Field::new("key", key, false), Field::new("value", value, true)]);
    DataType::Map(Arc::new(Field::new("entries", DataType::Struct(kv), false)), false)
}

fn histogram_type(args: &[DataType]) -> Result<DataType> {
    Ok(map_type(item(&args[0])?.data_type().clone(), DataType::Int64))
}

/// A map built from per-row lists of (key index into `keys`, value) pairs.
fn map_of(
    keys: &ArrayRef,
    values: ArrayRef,
    key_indices: Vec<u32>,
    lengths: Vec<usize>,
    nulls: Option<datafusion::arrow::buffer::NullBuffer>,
) -> Result<ArrayRef> {
    let keys = take(keys, &UInt32Array::from(key_indices), None)?;
    // A map's keys cannot be NULL: keys of unknown type (all NULL, so none) are varchar.
    let keys = if keys.data_type() == &DataType::Null { cast(&keys, &DataType::Utf8)? } else { keys };
    let DataType::Map(entries, _) = map_type(keys.data_type().clone(), values.data_type().clone()) else {
        return exec_err!("a map type");
    };
    let DataType::Struct(kv) = entries.data_type() else { return exec_err!("a map's entries") };
    let entries_array = StructArray::try_new(kv.clone(), vec![keys, values], None)?;
    Ok(Arc::new(MapArray::try_new(entries, OffsetBuffer::from_lengths(lengths), entries_array, nulls, false)?))
}

fn array_histogram(args: &[ArrayRef]) -> Result<ArrayRef> {
    let items = list(&args[0])?;
    let (mut keys, mut counts, mut lengths) = (Vec::new(), Vec::new(), Vec::new());
    let mut nulls = NullBufferBuilder::new(items.len());
    for row in 0..items.len() {
        if items.is_null(row) {
            nulls.append_null();
            lengths.push(0);
            continue;
        }
        nulls.append_non_null();
        let (from, to) = range(&items, row);
        let mut seen: HashMap<ScalarValue, usize> = HashMap::new();
        let start = counts.len();
        let nulls = items.values().logical_nulls();
        for i in (from..to).filter(|&i| nulls.as_ref().is_none_or(|n| n.is_valid(i))) {
            let key = ScalarValue::try_from_array(items.values(), i)?;
            match seen.get(&key) {
                Some(&at) => counts[at] += 1,
                None => {
                    seen.insert(key, counts.len());
                    keys.push(i as u32);
                    counts.push(1i64);
                }
            }
        }
        lengths.push(counts.len() - start);
    }
    map_of(items.values(), Arc::new(Int64Array::from(counts)), keys, lengths, nulls.finish())
}

fn entry_types(arg: &DataType) -> Result<(DataType, DataType)> {
    match item(arg)?.data_type() {
        DataType::Struct(f) if f.len() == 2 => Ok((f[0].data_type().clone(), f[1].data_type().clone())),
        other => plan_err!("expected an array of rows of a key and a value, got {other}"),
    }
}

fn map_from_entries_type(args: &[DataType]) -> Result<DataType> {
    let (k, v) = entry_types(&args[0])?;
    Ok(map_type(k, v))
}

fn multimap_type(args: &[DataType]) -> Result<DataType> {
    let (k, v) = entry_types(&args[0])?;
    Ok(map_type(k, list_of(v)))
}

/// The entries of each row: (key position, value positions) in first-seen key order.
/// Each distinct key's first position, the positions of its entries, and each row's
/// count of distinct keys.
type Grouped = (Vec<u32>, Vec<Vec<u32>>, Vec<usize>);

fn grouped_entries(items: &ListArray, unique: bool) -> Result<Grouped> {
    let rows = items.values().as_struct();
    let keys = rows.column(0);
    let (mut key_at, mut groups, mut lengths): (Vec<u32>, Vec<Vec<u32>>, Vec<usize>) =
        (Vec::new(), Vec::new(), Vec::new());
    for row in 0..items.len() {
        let (from, to) = range(items, row);
        let start = groups.len();
        let mut seen: HashMap<ScalarValue, usize> = HashMap::new();
        for i in from..to {
            if rows.is_null(i) || keys.is_null(i) {
                return Err(invalid_argument("map entry and key cannot be null"));
            }
            let key = ScalarValue::try_from_array(keys, i)?;
            match seen.get(&key) {
                Some(_) if unique => {
                    return Err(invalid_argument(format!("Duplicate map keys ({key}) are not allowed")))
                }
                Some(&g) => groups[g].push(i as u32),
                None => {
                    seen.insert(key, groups.len());
                    key_at.push(i as u32);
                    groups.push(vec![i as u32]);
                }
            }
        }
        lengths.push(groups.len() - start);
    }
    Ok((key_at, groups, lengths))
}

fn map_from_entries(args: &[ArrayRef]) -> Result<ArrayRef> {
    let items = list(&args[0])?;
    let (keys, groups, lengths) = grouped_entries(&items, true)?;
    let rows = items.values().as_struct();
    let firsts: Vec<u32> = groups.iter().map(|g| g[0]).collect();
    let values = take(rows.column(1), &UInt32Array::from(firsts), None)?;
    map_of(rows.column(0), values, keys, lengths, items.logical_nulls())
}

fn multimap_from_entries(args: &[ArrayRef]) -> Result<ArrayRef> {
    let items = list(&args[0])?;
    let (keys, groups, lengths) = grouped_entries(&items, false)?;
    let rows = items.values().as_struct();
    let group_lengths: Vec<usize> = groups.iter().map(Vec::len).collect();
    let flat: Vec<u32> = groups.into_iter().flatten().collect();
    let values = take(rows.column(1), &UInt32Array::from(flat), None)?;
    let field = Arc::new(Field::new("item", values.data_type().clone(), true));
    let values: ArrayRef =
        Arc::new(ListArray::try_new(field, OffsetBuffer::from_lengths(group_lengths), values, None)?);
    map_of(rows.column(0), values, keys, lengths, items.logical_nulls())
}

/// Each row's pair of vectors, as (key, x, y) with keys for maps and positions for arrays.
fn vector_pairs(a: &ArrayRef, b: &ArrayRef, row: usize) -> Result<Option<Vec<(f64, f64)>>> {
    if a.is_null(row) || b.is_null(row) {
        return Ok(None);
    }
    let floats = |x: ArrayRef| -> Result<Vec<Option<f64>>> {
        Ok(cast(&x, &DataType::Float64)?.as_primitive::<datafusion::arrow::datatypes::Float64Type>().iter().collect())
    };
    match (a.data_type(), b.data_type()) {
        (DataType::Map(..), DataType::Map(..)) => {
            let (ma, mb) = (a.as_map().value(row), b.as_map().value(row));
            let (xa, xb) = (floats(ma.column(1).clone())?, floats(mb.column(1).clone())?);
            let mut by_key: HashMap<ScalarValue, (f64, f64)> = HashMap::new();
            for (i, x) in xa.iter().enumerate() {
                by_key.entry(ScalarValue::try_from_array(ma.column(0), i)?).or_default().0 = x.unwrap_or(0.0);
            }
            for (i, y) in xb.iter().enumerate() {
                by_key.entry(ScalarValue::try_from_array(mb.column(0), i)?).or_default().1 = y.unwrap_or(0.0);
            }
            Ok(Some(by_key.into_values().collect()))
        }
        _ => {
            let (la, lb) = (list(a)?, list(b)?);
            let (xa, xb) = (floats(la.value(row))?, floats(lb.value(row))?);
            if xa.len() != xb.len() {
                return Err(invalid_argument("the arrays must have the same length"));
            }
            if xa.iter().chain(&xb).any(Option::is_none) {
                return Err(invalid_argument("the arrays must not contain NULL"));
            }
            Ok(Some(xa.into_iter().zip(xb).map(|(x, y)| (x.unwrap_or(0.0), y.unwrap_or(0.0))).collect()))
        }
    }
}

fn euclidean_distance(args: &[ArrayRef]) -> Result<ArrayRef> {
    let out: Float64Array = (0..args[0].len())
        .map(|r| {
            Ok(vector_pairs(&args[0], &args[1], r)?
                .map(|p| p.iter().map(|(x, y)| (x - y) * (x - y)).sum::<f64>().sqrt()))
        })
        .collect::<Result<_>>()?;
    Ok(Arc::new(out))
}

fn cosine_similarity(args: &[ArrayRef]) -> Result<ArrayRef> {
    let out: Float64Array = (0..args[0].len())
        .map(|r| {
            Ok(vector_pairs(&args[0], &args[1], r)?.and_then(|p| {
                let dot: f64 = p.iter().map(|(x, y)| x * y).sum();
                let (na, nb) = (
                    p.iter().map(|(x, _)| x * x).sum::<f64>().sqrt(),
                    p.iter().map(|(_, y)| y * y).sum::<f64>().sqrt(),
                );
                (na > 0.0 && nb > 0.0).then(|| dot / (na * nb))
            }))
        })
        .collect::<Result<_>>()?;
    Ok(Arc::new(out))
}

fn cosine_distance(args: &[ArrayRef]) -> Result<ArrayRef> {
    let similarity = cosine_similarity(args)?;
    let out: Float64Array = similarity
        .as_primitive::<datafusion::arrow::datatypes::Float64Type>()
        .iter()
        .map(|s| s.map(|s| 1.0 - s))
        .collect();
    Ok(Arc::new(out))
}

/// Whether the second array occurs in the first as consecutive elements.
fn contains_sequence(args: &[ArrayRef]) -> Result<ArrayRef> {
    let (items, sequence) = (list(&args[0])?, list(&args[1])?);
    let out: datafusion::arrow::array::BooleanArray = (0..items.len())
        .map(|r| {
            if items.is_null(r) || sequence.is_null(r) {
                return Ok(None);
            }
            let (a, b) = (items.value(r), sequence.value(r));
            let keys =
                |x: &ArrayRef| (0..x.len()).map(|i| ScalarValue::try_from_array(x, i)).collect::<Result<Vec<_>>>();
            let (a, b) = (keys(&a)?, keys(&b)?);
            Ok(Some(b.is_empty() || a.windows(b.len()).any(|w| w == b.as_slice())))
        })
        .collect::<Result<_>>()?;
    Ok(Arc::new(out))
}

/// Trino's `contains(array, x)`: true where the array holds `x`; else NULL where it
/// holds a NULL (or `x` is NULL), false otherwise. Over two strings it is DataFusion's
/// `contains`, whose name this takes: whether the second is inside the first.
fn contains(args: &[ArrayRef]) -> Result<ArrayRef> {
    use datafusion::arrow::array::{BooleanArray, Datum, Scalar};
    use datafusion::arrow::compute::kernels::cmp::eq;
    if !matches!(args[0].data_type(), DataType::List(_) | DataType::LargeList(_) | DataType::FixedSizeList(..)) {
        let (text, part) = (cast(&args[0], &DataType::Utf8)?, cast(&args[1], &DataType::Utf8)?);
        let (text, part) = (text.as_string::<i32>(), part.as_string::<i32>());
        let out: BooleanArray = text.iter().zip(part.iter()).map(|(t, p)| Some(t?.contains(p?))).collect();
        return Ok(Arc::new(out));
    }
    let items = list(&args[0])?;
    let wanted = cast(&args[1], &items.value_type())?;
    let out: BooleanArray = (0..items.len())
        .map(|r| {
            if items.is_null(r) || wanted.is_null(r) {
                return Ok(None);
            }
            let values = items.value(r);
            let x = Scalar::new(wanted.slice(r, 1));
            let found = eq(&values as &dyn Datum, &x)?;
            Ok(match (found.true_count() > 0, values.null_count() > 0) {
                (true, _) => Some(true),
                (false, true) => None,
                (false, false) => Some(false),
            })
        })
        .collect::<Result<_>>()?;
    Ok(Arc::new(out))
}

/// Each array's elements in a random order (Fisher-Yates over a seeded generator).
fn shuffle(args: &[ArrayRef]) -> Result<ArrayRef> {
    let items = list(&args[0])?;
    let mut state =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(1, |d| d.as_nanos() as u64) | 1;
    let mut next = move || {
        // xorshift64*: enough to shuffle, not for secrets.
        state ^= state >> 12;
        state ^= state << 25;
        state ^= state >> 27;
        state.wrapping_mul(0x2545_F491_4F6C_DD1D)
    };
    let mut indices = Vec::with_capacity(items.values().len());
    let mut lengths = Vec::with_capacity(items.len());
    for r in 0..items.len() {
        let (from, to) = range(&items, r);
        let mut row: Vec<u32> = (from as u32..to as u32).collect();
        for i in (1..row.len()).rev() {
            row.swap(i, (next() % (i as u64 + 1)) as usize);
        }
        lengths.push(row.len());
        indices.extend(row);
    }
    let values = take(items.values(), &UInt32Array::from(indices), None)?;
    let field = Arc::new(Field::new("item", values.data_type().clone(), true));
    Ok(Arc::new(ListArray::try_new(field, OffsetBuffer::from_lengths(lengths), values, items.nulls().cloned())?))
}

/// The maps' entries together; a key in several maps takes the last one's value.
fn map_concat(args: &[ArrayRef]) -> Result<ArrayRef> {
    let maps: Vec<&MapArray> = args.iter().map(|a| a.as_map()).collect();
    let rows = maps[0].len();
    let (mut picks, mut lengths) = (Vec::new(), Vec::with_capacity(rows));
    let mut nulls = NullBufferBuilder::new(rows);
    for r in 0..rows {
        if maps.iter().any(|m| m.is_null(r)) {
            nulls.append_null();
            lengths.push(0);
            continue;
        }
        nulls.append_non_null();
        let mut order: Vec<ScalarValue> = Vec::new();
        let mut at: HashMap<ScalarValue, (usize, usize)> = HashMap::new();
        for (m, map) in maps.iter().enumerate() {
            let offsets = map.value_offsets();
            for e in offsets[r] as usize..offsets[r + 1] as usize {
                let key = ScalarValue::try_from_array(map.keys(), e)?;
                if at.insert(key.clone(), (m, e)).is_none() {
                    order.push(key);
                }
            }
        }
        lengths.push(order.len());
        picks.extend(order.iter().map(|k| at[k]));
    }
    let keys: Vec<&dyn Array> = maps.iter().map(|m| m.keys().as_ref()).collect();
    let values: Vec<&dyn Array> = maps.iter().map(|m| m.values().as_ref()).collect();
    let keys = datafusion::arrow::compute::interleave(&keys, &picks)?;
    let values = datafusion::arrow::compute::interleave(&values, &picks)?;
    let DataType::Map(entries, sorted) = maps[0].data_type() else { return exec_err!("map_concat takes maps") };
    let DataType::Struct(kv) = entries.data_type() else { return exec_err!("a map's entries") };
    let entries_array = StructArray::try_new(kv.clone(), vec![keys, values], None)?;
    Ok(Arc::new(MapArray::try_new(
        entries.clone(),
        OffsetBuffer::from_lengths(lengths),
        entries_array,
        nulls.finish(),
        *sorted,
    )?))
}
