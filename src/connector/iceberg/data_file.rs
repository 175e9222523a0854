//! What a Parquet file a writer left says of itself as an Iceberg data file: its rows,
//! and per column (by field id) its size, value and null counts and its bounds, from
//! the footer's statistics. The coordinator's commit (`coordinator::iceberg_write`)
//! reads each footer once; the manifests carry these, so that readers (ours,
//! pyiceberg, Trino) skip the file by them before opening it.

use std::collections::HashMap;

use datafusion::arrow::datatypes::{Decimal128Type, DecimalType};
use datafusion::parquet::file::metadata::ParquetMetaData;
use datafusion::parquet::file::statistics::Statistics;
use iceberg::spec::{Datum, PrimitiveType, Schema, Struct, Type};

/// A data file a writer left, as the commit found it.
#[derive(Debug, Clone)]
pub struct WrittenFile {
    /// Its absolute location (`file:///...`, `s3://...`).
    pub location: String,
    pub size: u64,
    pub rows: u64,
    /// Its partition tuple (empty for an unpartitioned table).
    pub partition: Struct,
    pub columns: ColumnStatistics,
}

/// Per field id: what Iceberg's `data_file` struct records of each column.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ColumnStatistics {
    pub sizes: HashMap<i32, u64>,
    pub values: HashMap<i32, u64>,
    pub nulls: HashMap<i32, u64>,
    pub lower: HashMap<i32, Datum>,
    pub upper: HashMap<i32, Datum>,
}

impl ColumnStatistics {
    /// The statistics of a file with `footer`, whose columns belong to `schema`.
    /// A bound is kept only when every row group has one.
    pub fn of(footer: &ParquetMetaData, schema: &Schema) -> Self {
        let mut stats = ColumnStatistics::default();
        let mut unbounded = (Vec::new(), Vec::new());
        for (i, group) in footer.row_groups().iter().enumerate() {
            for column in group.columns() {
                let info = column.column_descr().self_type().get_basic_info();
                if !info.has_id() {
                    continue;
                }
                let id = info.id();
                let Some(Type::Primitive(t)) = schema.field_by_id(id).map(|f| f.field_type.as_ref()) else { continue };
                *stats.sizes.entry(id).or_default() += column.compressed_size().max(0) as u64;
                *stats.values.entry(id).or_default() += column.num_values().max(0) as u64;
                let s = column.statistics();
                if let Some(nulls) = s.and_then(Statistics::null_count_opt) {
                    *stats.nulls.entry(id).or_default() += nulls;
                }
                merge(&mut stats.lower, &mut unbounded.0, id, i, s.and_then(|s| bound(s, t, false)), false);
                merge(&mut stats.upper, &mut unbounded.1, id, i, s.and_then(|s| bound(s, t, true)), true);
            }
        }
        stats
    }
}

/// Folds a row group's bound into the file's: the least lower and greatest upper
/// bound, none at all once a row group has none (`missing`).
fn merge(
    bounds: &mut HashMap<i32, Datum>,
    missing: &mut Vec<i32>,
    id: i32,
    group: usize,
    b: Option<Datum>,
    upper: bool,
) {
    if missing.contains(&id) {
        return;
    }
    let Some(b) = b else {
        missing.push(id);
        bounds.remove(&id);
        return;
    };
    match bounds.get(&id) {
        None if group == 0 => {
            bounds.insert(id, b);
        }
        None => missing.push(id),
        Some(old) => {
            let wider = if upper { b > *old } else { b < *old };
            if wider {
                bounds.insert(id, b);
            }
        }
    }
}

/// A row group's lower (or upper) bound of a column of type `t`, where its
/// statistics give one. A truncated string bound stays a bound: the writer cuts a
/// lower one short and raises the last character of an upper one.
fn bound(s: &Statistics, t: &PrimitiveType, upper: bool) -> Option<Datum> {
    macro_rules! pick {
        ($v:expr) => {
            if upper {
                $v.max_opt()
            } else {
                $v.min_opt()
            }
        };
    }
    Some(match (s, t) {
        (Statistics::Boolean(v), PrimitiveType::Boolean) => Datum::bool(*pick!(v)?),
        (Statistics::Int32(v), PrimitiveType::Int) => Datum::int(*pick!(v)?),
        (Statistics::Int32(v), PrimitiveType::Date) => Datum::date(*pick!(v)?),
        (Statistics::Int64(v), PrimitiveType::Long) => Datum::long(*pick!(v)?),
        (Statistics::Int64(v), PrimitiveType::Time) => Datum::time_micros(*pick!(v)?).ok()?,
        (Statistics::Int64(v), PrimitiveType::Timestamp) => Datum::timestamp_micros(*pick!(v)?),
        (Statistics::Int64(v), PrimitiveType::Timestamptz) => Datum::timestamptz_micros(*pick!(v)?),
        // Iceberg's float bounds are never NaN.
        (Statistics::Float(v), PrimitiveType::Float) => Datum::float(Some(*pick!(v)?).filter(|f| !f.is_nan())?),
        (Statistics::Double(v), PrimitiveType::Double) => Datum::double(Some(*pick!(v)?).filter(|f| !f.is_nan())?),
        (Statistics::ByteArray(v), PrimitiveType::String) => Datum::string(std::str::from_utf8(pick!(v)?.data()).ok()?),
        (Statistics::ByteArray(v), PrimitiveType::Binary) => Datum::binary(pick!(v)?.data().iter().copied()),
        (s, PrimitiveType::Decimal { precision, scale }) => {
            let unscaled = match s {
                Statistics::Int32(v) => *pick!(v)? as i128,
                Statistics::Int64(v) => *pick!(v)? as i128,
                Statistics::FixedLenByteArray(v) => big_endian(pick!(v)?.data())?,
                Statistics::ByteArray(v) => big_endian(pick!(v)?.data())?,
                _ => return None,
            };
            let text = Decimal128Type::format_decimal(unscaled, *precision as u8, *scale as i8);
            Datum::decimal_from_str(text).ok()?
        }
        _ => return None,
    })
}

/// A two's-complement big-endian integer of at most 16 bytes.
fn big_endian(bytes: &[u8]) -> Option<i128> {
    if bytes.is_empty() || bytes.len() > 16 {
        return None;
    }
    let fill = if bytes[0] & 0x80 != 0 { 0xff } else { 0 };
    let mut full = [fill; 16];
    full[16 - bytes.len()..].copy_from_slice(bytes);
    Some(i128::from_be_bytes(full))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    use datafusion::arrow::array::{ArrayRef, Decimal128Array, Int64Array, RecordBatch, StringArray};
    use datafusion::arrow::datatypes::{DataType, Field, Schema as ArrowSchema};
    use datafusion::parquet::arrow::{ArrowWriter, PARQUET_FIELD_ID_META_KEY};
    use datafusion::parquet::file::properties::WriterProperties;
    use iceberg::spec::NestedField;

    #[test]
    fn a_footer_gives_counts_and_bounds_by_field_id() {
        let id = |f: Field, i: &str| f.with_metadata([(PARQUET_FIELD_ID_META_KEY.to_string(), i.to_string())].into());
        let arrow = Arc::new(ArrowSchema::new(vec![
            id(Field::new("n", DataType::Int64, true), "1"),
            id(Field::new("s", DataType::Utf8, true), "2"),
            id(Field::new("d", DataType::Decimal128(20, 2), true), "3"),
        ]));
        let batch = |n: Vec<Option<i64>>, s: Vec<Option<&str>>, d: Vec<Option<i128>>| {
            let columns: Vec<ArrayRef> = vec![
                Arc::new(Int64Array::from(n)),
                Arc::new(StringArray::from(s)),
                Arc::new(Decimal128Array::from(d).with_precision_and_scale(20, 2).unwrap()),
            ];
            RecordBatch::try_new(arrow.clone(), columns).unwrap()
        };
        // Two row groups of two rows each.
        let props = WriterProperties::builder().set_max_row_group_row_count(Some(2)).build();
        let mut buffer = Vec::new();
        let mut writer = ArrowWriter::try_new(&mut buffer, arrow.clone(), Some(props)).unwrap();
        writer.write(&batch(vec![Some(5), None], vec![Some("pear"), Some("apple")], vec![Some(-150), None])).unwrap();
        writer.write(&batch(vec![Some(-3), Some(9)], vec![None, Some("zoo")], vec![Some(99), Some(7)])).unwrap();
        writer.close().unwrap();
        let footer = datafusion::parquet::file::metadata::ParquetMetaDataReader::new()
            .parse_and_finish(&bytes::Bytes::from(buffer))
            .unwrap();
        assert_eq!(footer.num_row_groups(), 2, "{footer:?}");
        let schema = Schema::builder()
            .with_fields(vec![
                Arc::new(NestedField::optional(1, "n", Type::Primitive(PrimitiveType::Long))),
                Arc::new(NestedField::optional(2, "s", Type::Primitive(PrimitiveType::String))),
                Arc::new(NestedField::optional(
                    3,
                    "d",
                    Type::Primitive(PrimitiveType::Decimal { precision: 20, scale: 2 }),
                )),
            ])
            .build()
            .unwrap();
        let stats = ColumnStatistics::of(&footer, &schema);
        assert_eq!(stats.values, HashMap::from([(1, 4), (2, 4), (3, 4)]));
        assert_eq!(stats.nulls, HashMap::from([(1, 1), (2, 1), (3, 1)]));
        assert_eq!(stats.lower[&1], Datum::long(-3));
        assert_eq!(stats.upper[&1], Datum::long(9));
        assert_eq!(stats.lower[&2], Datum::string("apple"));
        assert_eq!(stats.upper[&2], Datum::string("zoo"));
        assert_eq!(stats.lower[&3], Datum::decimal_from_str("-1.50").unwrap());
        assert_eq!(stats.upper[&3], Datum::decimal_from_str("0.99").unwrap());
        assert!(stats.sizes.values().all(|s| *s > 0));
    }

    #[test]
    fn big_endian_integers_of_any_width() {
        assert_eq!(big_endian(&[0xff, 0x6a]), Some(-150));
        assert_eq!(big_endian(&[0x00, 0x63]), Some(99));
        assert_eq!(big_endian(&[]), None);
    }
}
