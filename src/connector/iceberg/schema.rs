//! Iceberg types as Arrow types, the way Trino shows them: an Iceberg schema becomes
//! the Arrow schema a table is planned with, each field carrying its Iceberg field id
//! under Parquet's `PARQUET:field_id` key (as the Parquet reader reports a file's
//! ids), which is what `field_ids` matches file columns by. iceberg-rust has this
//! conversion too, but for its own Arrow major; this one is for ours.

use std::collections::HashMap;
use std::sync::Arc;

use datafusion::arrow::datatypes::{DataType, Field, Fields, Schema, SchemaRef, TimeUnit};
use datafusion::common::{not_impl_err, Result};
use datafusion::parquet::arrow::PARQUET_FIELD_ID_META_KEY;
use iceberg::spec::{NestedField, PrimitiveType, Type};

use crate::connector::field_ids::FIELD_ID_MAPPING;

/// The Arrow schema of an Iceberg schema, its fields carrying their ids.
pub fn arrow_schema(schema: &iceberg::spec::Schema) -> Result<SchemaRef> {
    let fields = schema.as_struct().fields().iter().map(|f| arrow_field(f)).collect::<Result<Vec<_>>>()?;
    let metadata = HashMap::from([(FIELD_ID_MAPPING.to_string(), "true".to_string())]);
    Ok(Arc::new(Schema::new_with_metadata(fields, metadata)))
}

fn arrow_field(field: &NestedField) -> Result<Field> {
    let metadata = HashMap::from([(PARQUET_FIELD_ID_META_KEY.to_string(), field.id.to_string())]);
    Ok(Field::new(&field.name, arrow_type(&field.field_type)?, !field.required).with_metadata(metadata))
}

/// The Arrow type of an Iceberg type. Timestamps are microseconds (nanoseconds for
/// the v3 `_ns` types); `timestamptz` is in UTC; `uuid` is its 16 bytes; `time` is
/// microseconds since midnight; strings are string views.
pub fn arrow_type(t: &Type) -> Result<DataType> {
    Ok(match t {
        Type::Primitive(p) => match p {
            PrimitiveType::Boolean => DataType::Boolean,
            PrimitiveType::Int => DataType::Int32,
            PrimitiveType::Long => DataType::Int64,
            PrimitiveType::Float => DataType::Float32,
            PrimitiveType::Double => DataType::Float64,
            PrimitiveType::Decimal { precision, scale } => {
                let (Ok(p), Ok(s)) = (u8::try_from(*precision), i8::try_from(*scale)) else {
                    return not_impl_err!("Iceberg decimal({precision}, {scale}) is wider than flotilla's decimals");
                };
                if p > 38 {
                    return not_impl_err!("Iceberg decimal({precision}, {scale}) is wider than flotilla's decimals");
                }
                DataType::Decimal128(p, s)
            }
            PrimitiveType::Date => DataType::Date32,
            PrimitiveType::Time => DataType::Time64(TimeUnit::Microsecond),
            PrimitiveType::Timestamp => DataType::Timestamp(TimeUnit::Microsecond, None),
            PrimitiveType::Timestamptz => DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into())),
            PrimitiveType::TimestampNs => DataType::Timestamp(TimeUnit::Nanosecond, None),
            PrimitiveType::TimestamptzNs => DataType::Timestamp(TimeUnit::Nanosecond, Some("UTC".into())),
            // Views, as DataFusion reads Parquet strings for its own file tables:
            // decoded without copying, and grouped and compared faster.
            PrimitiveType::String => DataType::Utf8View,
            PrimitiveType::Uuid => DataType::FixedSizeBinary(16),
            PrimitiveType::Fixed(n) => match i32::try_from(*n) {
                Ok(n) => DataType::FixedSizeBinary(n),
                Err(_) => return not_impl_err!("Iceberg fixed({n}) is too wide"),
            },
            PrimitiveType::Binary => DataType::Binary,
        },
        Type::Struct(s) => {
            DataType::Struct(Fields::from(s.fields().iter().map(|f| arrow_field(f)).collect::<Result<Vec<_>>>()?))
        }
        Type::List(l) => DataType::List(Arc::new(arrow_field(&l.element_field)?)),
        Type::Map(m) => {
            let entries = Field::new(
                "key_value",
                DataType::Struct(Fields::from(vec![arrow_field(&m.key_field)?, arrow_field(&m.value_field)?])),
                false,
            );
            DataType::Map(Arc::new(entries), false)
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::connector::field_ids::field_id;
    use iceberg::spec::{ListType, NestedField, Schema as IcebergSchema};

    #[test]
    fn fields_keep_their_ids_and_trino_types() {
        let schema = IcebergSchema::builder()
            .with_fields(vec![
                NestedField::required(1, "id", Type::Primitive(PrimitiveType::Long)).into(),
                NestedField::optional(2, "label", Type::Primitive(PrimitiveType::String)).into(),
                NestedField::optional(3, "ts", Type::Primitive(PrimitiveType::Timestamptz)).into(),
                NestedField::optional(
                    4,
                    "tags",
                    Type::List(ListType::new(
                        NestedField::list_element(5, Type::Primitive(PrimitiveType::String), false).into(),
                    )),
                )
                .into(),
                NestedField::optional(6, "amount", Type::Primitive(PrimitiveType::Decimal { precision: 12, scale: 2 }))
                    .into(),
            ])
            .build()
            .unwrap();
        let arrow = arrow_schema(&schema).unwrap();
        assert_eq!(arrow.metadata().get(FIELD_ID_MAPPING).map(String::as_str), Some("true"));
        let ids: Vec<Option<i32>> = arrow.fields().iter().map(|f| field_id(f)).collect();
        assert_eq!(ids, vec![Some(1), Some(2), Some(3), Some(4), Some(6)]);
        assert!(!arrow.field(0).is_nullable() && arrow.field(1).is_nullable());
        assert_eq!(arrow.field(2).data_type(), &DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into())));
        assert_eq!(arrow.field(4).data_type(), &DataType::Decimal128(12, 2));
        assert_eq!(arrow.field(1).data_type(), &DataType::Utf8View);
        let DataType::List(element) = arrow.field(3).data_type() else { panic!("a list") };
        assert_eq!(field_id(element), Some(5));
    }
}
