//! The partition of each row a write into a partitioned Iceberg table produces.
//! Planning (`coordinator::iceberg_write`) adds the column `$partition` (Trino's
//! name for an Iceberg table's hidden partition column), computed by the function
//! `$iceberg_partition`; the writers split their files by it, one directory per
//! value, as for Hive-style partitions. The commit reads each directory's key back
//! into the partition tuple its data file records, and names the directory as
//! Iceberg does (`ts_day=2024-01-03/id_bucket=5`).
//!
//! The transforms are iceberg-rust's (`transform_literal`, row by row: its array
//! transforms take the arrow of another major version). A key is the hex of the
//! JSON array of the transformed values (Iceberg's single-value JSON), so that any
//! value, `/` or a null included, makes one safe directory name and reads back exact.

use std::sync::Arc;

use datafusion::arrow::array::{ArrayRef, StringBuilder};
use datafusion::arrow::datatypes::{DataType, Decimal128Type, DecimalType, Schema as ArrowSchema, TimeUnit};
use datafusion::common::{exec_datafusion_err, exec_err, plan_datafusion_err, Result, ScalarValue};
use datafusion::logical_expr::{ScalarUDF, Signature, Volatility};
use iceberg::spec::{Datum, Literal, PartitionSpec, Schema, Struct, Transform, Type};
use iceberg::transform::create_transform_function;

/// The hidden column of a write's rows that holds their partition key.
pub const PARTITION_COLUMN: &str = "$partition";

/// The function computing it: `$iceberg_partition('day', ts, 'bucket[8]', id, ...)`,
/// a transform (as Iceberg spells it in metadata) and its source column per field.
pub const PARTITION_FUNCTION: &str = "$iceberg_partition";

/// The function, registered on every node with Trino's library.
pub fn functions() -> Vec<ScalarUDF> {
    let signature = Signature::variadic_any(Volatility::Immutable);
    vec![crate::functions::simple::function(PARTITION_FUNCTION, signature, |_| Ok(DataType::Utf8), partition_keys)]
}

/// The function's arguments for `spec`'s fields over `columns` (the written table's
/// columns, named as in `schema`): (transform, column index) per field.
pub fn arguments(spec: &PartitionSpec, schema: &Schema, columns: &ArrowSchema) -> Result<Vec<(String, usize)>> {
    spec.fields()
        .iter()
        .map(|f| {
            let source = schema
                .field_by_id(f.source_id)
                .ok_or_else(|| plan_datafusion_err!("partition field {} has no source column", f.name))?;
            Ok((f.transform.to_string(), columns.index_of(&source.name)?))
        })
        .collect()
}

fn partition_keys(args: &[ArrayRef]) -> Result<ArrayRef> {
    if !args.len().is_multiple_of(2) || args.is_empty() {
        return exec_err!("{PARTITION_FUNCTION} takes pairs of a transform and a column");
    }
    let rows = args[0].len();
    let mut fields = Vec::with_capacity(args.len() / 2);
    for pair in args.chunks(2) {
        let transform: Transform = match ScalarValue::try_from_array(&pair[0], 0)? {
            ScalarValue::Utf8(Some(t)) | ScalarValue::Utf8View(Some(t)) => t.parse().map_err(external)?,
            other => return exec_err!("{PARTITION_FUNCTION}: {other} is not a transform"),
        };
        fields.push((create_transform_function(&transform).map_err(external)?, &pair[1]));
    }
    let mut keys = StringBuilder::with_capacity(rows, rows * 16);
    for row in 0..rows {
        let mut values = Vec::with_capacity(fields.len());
        for (transform, column) in &fields {
            let value = match datum(&ScalarValue::try_from_array(column, row)?)? {
                None => None,
                Some(d) => transform.transform_literal(&d).map_err(external)?,
            };
            values.push(match value {
                None => serde_json::Value::Null,
                Some(d) => {
                    let t = Type::Primitive(d.data_type().clone());
                    Literal::Primitive(d.literal().clone()).try_into_json(&t).map_err(external)?
                }
            });
        }
        keys.append_value(hex(serde_json::Value::Array(values).to_string().as_bytes()));
    }
    Ok(Arc::new(keys.finish()))
}

fn external(e: iceberg::Error) -> datafusion::error::DataFusionError {
    exec_datafusion_err!("Iceberg partition: {e}")
}

/// A value of a column of an Iceberg table as Iceberg's datum; None for a null.
pub fn datum(value: &ScalarValue) -> Result<Option<Datum>> {
    if value.is_null() {
        return Ok(None);
    }
    let bad = || exec_datafusion_err!("an Iceberg table holds no value {value} of type {}", value.data_type());
    let micros = |unit: &TimeUnit, v: i64| match unit {
        TimeUnit::Second => v * 1_000_000,
        TimeUnit::Millisecond => v * 1_000,
        TimeUnit::Microsecond => v,
        TimeUnit::Nanosecond => v.div_euclid(1_000),
    };
    Ok(Some(match value {
        ScalarValue::Boolean(Some(v)) => Datum::bool(*v),
        ScalarValue::Int8(Some(v)) => Datum::int(*v as i32),
        ScalarValue::Int16(Some(v)) => Datum::int(*v as i32),
        ScalarValue::Int32(Some(v)) => Datum::int(*v),
        ScalarValue::Int64(Some(v)) => Datum::long(*v),
        ScalarValue::Float32(Some(v)) => Datum::float(*v),
        ScalarValue::Float64(Some(v)) => Datum::double(*v),
        ScalarValue::Decimal128(Some(v), p, s) if *s >= 0 => {
            Datum::decimal_from_str(Decimal128Type::format_decimal(*v, *p, *s)).map_err(external)?
        }
        ScalarValue::Date32(Some(v)) => Datum::date(*v),
        ScalarValue::Time64Microsecond(Some(v)) => Datum::time_micros(*v).map_err(external)?,
        ScalarValue::Time64Nanosecond(Some(v)) => Datum::time_micros(v / 1_000).map_err(external)?,
        ScalarValue::TimestampSecond(Some(v), tz) => timestamp(micros(&TimeUnit::Second, *v), tz.is_some()),
        ScalarValue::TimestampMillisecond(Some(v), tz) => timestamp(micros(&TimeUnit::Millisecond, *v), tz.is_some()),
        ScalarValue::TimestampMicrosecond(Some(v), tz) => timestamp(*v, tz.is_some()),
        ScalarValue::TimestampNanosecond(Some(v), tz) => timestamp(micros(&TimeUnit::Nanosecond, *v), tz.is_some()),
        ScalarValue::Utf8(Some(v)) | ScalarValue::Utf8View(Some(v)) | ScalarValue::LargeUtf8(Some(v)) => {
            Datum::string(v)
        }
        ScalarValue::Binary(Some(v)) | ScalarValue::BinaryView(Some(v)) | ScalarValue::LargeBinary(Some(v)) => {
            Datum::binary(v.iter().copied())
        }
        _ => return Err(bad()),
    }))
}

fn timestamp(micros: i64, with_zone: bool) -> Datum {
    match with_zone {
        true => Datum::timestamptz_micros(micros),
        false => Datum::timestamp_micros(micros),
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) {
        return None;
    }
    (0..text.len()).step_by(2).map(|i| u8::from_str_radix(text.get(i..i + 2)?, 16).ok()).collect()
}

/// The partition tuple of the key `key` under `spec` of a table with `schema`.
pub fn decode(key: &str, spec: &PartitionSpec, schema: &Schema) -> Result<Struct> {
    let bad = || exec_datafusion_err!("a writer left a file under an unknown partition key '{key}'");
    let json: serde_json::Value = serde_json::from_slice(&unhex(key).ok_or_else(bad)?).map_err(|_| bad())?;
    let serde_json::Value::Array(values) = json else { return Err(bad()) };
    let types = spec.partition_type(schema).map_err(external)?;
    if values.len() != types.fields().len() {
        return Err(bad());
    }
    values
        .into_iter()
        .zip(types.fields())
        .map(|(v, f)| Literal::try_from_json(v, &f.field_type).map_err(external))
        .collect()
}

/// The directories of a file of `partition`, as Iceberg's Java writers name them
/// (`ts_day=2024-01-03`, `ts_year=2024`, `ts_month=2024-01`, `ts_hour=2024-01-03-10`).
pub fn path_parts(spec: &PartitionSpec, schema: &Schema, partition: &Struct) -> Result<Vec<String>> {
    let types = spec.partition_type(schema).map_err(external)?;
    Ok(spec
        .fields()
        .iter()
        .zip(types.fields())
        .zip(partition.iter())
        .map(|((f, t), value)| {
            let ordinal = match value.and_then(Literal::as_primitive_literal) {
                Some(iceberg::spec::PrimitiveLiteral::Int(v)) => Some(v as i64),
                _ => None,
            };
            let human = match (f.transform, ordinal) {
                (Transform::Year, Some(v)) => format!("{:04}", 1970 + v),
                (Transform::Month, Some(v)) => format!("{:04}-{:02}", 1970 + v.div_euclid(12), v.rem_euclid(12) + 1),
                (Transform::Hour, Some(v)) => {
                    let start = chrono::DateTime::from_timestamp(v * 3600, 0).unwrap_or_default();
                    start.format("%Y-%m-%d-%H").to_string()
                }
                _ => f.transform.to_human_string(&t.field_type, value),
            };
            format!("{}={human}", f.name)
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::arrow::array::{Int64Array, StringArray, TimestampMicrosecondArray};
    use iceberg::spec::{NestedField, PrimitiveType, UnboundPartitionSpec};

    fn table() -> (Arc<Schema>, PartitionSpec) {
        let schema = Schema::builder()
            .with_fields(vec![
                Arc::new(NestedField::optional(1, "id", Type::Primitive(PrimitiveType::Long))),
                Arc::new(NestedField::optional(2, "ts", Type::Primitive(PrimitiveType::Timestamp))),
                Arc::new(NestedField::optional(3, "name", Type::Primitive(PrimitiveType::String))),
            ])
            .build()
            .unwrap();
        let schema = Arc::new(schema);
        let spec = UnboundPartitionSpec::builder()
            .add_partition_field(2, "ts_day", Transform::Day)
            .unwrap()
            .add_partition_field(1, "id_bucket", Transform::Bucket(16))
            .unwrap()
            .add_partition_field(3, "name", Transform::Identity)
            .unwrap()
            .build()
            .bind(schema.clone())
            .unwrap();
        (schema, spec)
    }

    #[test]
    fn keys_read_back_as_the_partition_and_its_iceberg_path() {
        let (schema, spec) = table();
        let constant = |t: &str| -> ArrayRef { Arc::new(StringArray::from(vec![t; 2])) };
        // 2024-01-03T10:00:00 and a null; 34 and 7; a name with a slash and a null.
        let ts: ArrayRef = Arc::new(TimestampMicrosecondArray::from(vec![Some(1_704_276_000_000_000), None]));
        let ids: ArrayRef = Arc::new(Int64Array::from(vec![34, 7]));
        let names: ArrayRef = Arc::new(StringArray::from(vec![Some("a/b"), None]));
        let args = [constant("day"), ts, constant("bucket[16]"), ids, constant("identity"), names];
        let keys = partition_keys(&args).unwrap();
        let keys = keys.as_any().downcast_ref::<StringArray>().unwrap();
        assert!(keys.value(0).bytes().all(|b| b.is_ascii_hexdigit()));
        let first = decode(keys.value(0), &spec, &schema).unwrap();
        // The bucket of long 34 is 3 under 16 buckets: Iceberg's spec gives
        // murmur3 of 34 as 2017239379, and 2017239379 % 16 = 3.
        assert_eq!(
            path_parts(&spec, &schema, &first).unwrap(),
            vec!["ts_day=2024-01-03".to_string(), "id_bucket=3".into(), "name=a/b".into()]
        );
        let second = decode(keys.value(1), &spec, &schema).unwrap();
        assert_eq!(second.iter().filter(|v| v.is_none()).count(), 2);
        assert!(decode("zz", &spec, &schema).is_err());
        assert!(decode(&hex(b"[1]"), &spec, &schema).is_err());
    }

    #[test]
    fn temporal_directories_are_named_as_iceberg_java_names_them() {
        let (schema, _) = table();
        // 2024-01-03T10:00:00 and half an hour before 1970.
        let ts: ArrayRef =
            Arc::new(TimestampMicrosecondArray::from(vec![Some(1_704_276_000_000_000), Some(-1_800_000_000)]));
        let cases = [
            ("year", Transform::Year, ["ts_year=2024", "ts_year=1969"]),
            ("month", Transform::Month, ["ts_month=2024-01", "ts_month=1969-12"]),
            ("hour", Transform::Hour, ["ts_hour=2024-01-03-10", "ts_hour=1969-12-31-23"]),
        ];
        for (name, transform, want) in cases {
            let spec = UnboundPartitionSpec::builder()
                .add_partition_field(2, format!("ts_{name}"), transform)
                .unwrap()
                .build()
                .bind(schema.clone())
                .unwrap();
            let keys = partition_keys(&[Arc::new(StringArray::from(vec![name; 2])), ts.clone()]).unwrap();
            let keys = keys.as_any().downcast_ref::<StringArray>().unwrap();
            for (i, want) in want.iter().enumerate() {
                let partition = decode(keys.value(i), &spec, &schema).unwrap();
                assert_eq!(path_parts(&spec, &schema, &partition).unwrap(), [want.to_string()]);
            }
        }
    }

    #[test]
    fn values_become_iceberg_datums() {
        assert_eq!(datum(&ScalarValue::Int16(Some(3))).unwrap(), Some(Datum::int(3)));
        assert_eq!(datum(&ScalarValue::Int64(None)).unwrap(), None);
        assert_eq!(
            datum(&ScalarValue::TimestampNanosecond(Some(1_500), Some("UTC".into()))).unwrap(),
            Some(Datum::timestamptz_micros(1))
        );
        assert_eq!(
            datum(&ScalarValue::Decimal128(Some(12345), 10, 2)).unwrap(),
            Some(Datum::decimal_from_str("123.45").unwrap())
        );
        assert!(datum(&ScalarValue::IntervalDayTime(Some(Default::default()))).is_err());
    }
}
