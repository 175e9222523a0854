//! Trino's Iceberg metadata tables, read from a table's metadata as it is now:
//! `"t$snapshots"` (every snapshot, with its summary), `"t$history"` (the
//! snapshot log: which snapshot was current when), `"t$files"` (the current
//! snapshot's live data and delete files, from its manifests) and
//! `"t$partitions"` (those files summed per partition). Columns and types are
//! Trino's; `$files` leaves out the raw key metadata and `readable_metrics`, and
//! `$partitions` the per-column `data` summary.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use datafusion::arrow::array::{
    ArrayRef, BooleanArray, Int32Array, Int64Array, MapBuilder, RecordBatch, StringArray, StringBuilder,
    TimestampMillisecondArray,
};
use datafusion::arrow::array::{Int32Builder, Int64Builder};
use datafusion::arrow::datatypes::{DataType, Field, Fields, Schema, SchemaRef, TimeUnit};
use datafusion::catalog::TableProvider;
use datafusion::common::{Result, ScalarValue};
use datafusion::datasource::MemTable;
use iceberg::spec::{
    DataFile, Literal, ManifestList, PrimitiveLiteral, PrimitiveType, StructType, TableMetadata, Type,
};
use iceberg::table::Table;

use super::iceberg_error;

/// Which metadata table a `t$kind` name asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MetadataTable {
    Snapshots,
    History,
    Files,
    Partitions,
}

impl MetadataTable {
    pub fn parse(kind: &str) -> Option<Self> {
        Some(match kind {
            "snapshots" => MetadataTable::Snapshots,
            "history" => MetadataTable::History,
            "files" => MetadataTable::Files,
            "partitions" => MetadataTable::Partitions,
            _ => return None,
        })
    }
}

/// The snapshot that was current at `ms` (milliseconds since the epoch): the last
/// entry of the snapshot log at or before it, as Trino's `FOR TIMESTAMP AS OF`.
pub fn snapshot_as_of(metadata: &TableMetadata, ms: i64) -> Option<i64> {
    metadata.history().iter().filter(|l| l.timestamp_ms <= ms).max_by_key(|l| l.timestamp_ms).map(|l| l.snapshot_id)
}

/// The metadata table `kind` of `table` (named `name` in messages).
pub async fn table(kind: MetadataTable, name: &str, table: &Table) -> Result<Arc<dyn TableProvider>> {
    let batch = match kind {
        MetadataTable::Snapshots => snapshots(table.metadata())?,
        MetadataTable::History => history(table.metadata())?,
        MetadataTable::Files => files(name, table).await?.0,
        MetadataTable::Partitions => {
            let (batch, partition_type) = files(name, table).await?;
            partitions(&batch, partition_type)?
        }
    };
    Ok(Arc::new(MemTable::try_new(batch.schema(), vec![vec![batch]])?))
}

fn committed_at(name: &str) -> Field {
    Field::new(name, DataType::Timestamp(TimeUnit::Millisecond, Some("UTC".into())), false)
}

fn string_map(name: &str) -> Field {
    let entries =
        Fields::from(vec![Field::new("keys", DataType::Utf8, false), Field::new("values", DataType::Utf8, true)]);
    Field::new(name, DataType::Map(Arc::new(Field::new("entries", DataType::Struct(entries), false)), false), true)
}

fn snapshots(metadata: &TableMetadata) -> Result<RecordBatch> {
    let mut list: Vec<_> = metadata.snapshots().collect();
    list.sort_by_key(|s| (s.timestamp_ms(), s.sequence_number()));
    let schema = Arc::new(Schema::new(vec![
        committed_at("committed_at"),
        Field::new("snapshot_id", DataType::Int64, false),
        Field::new("parent_id", DataType::Int64, true),
        Field::new("operation", DataType::Utf8, true),
        Field::new("manifest_list", DataType::Utf8, true),
        string_map("summary"),
    ]));
    let mut summary = MapBuilder::new(None, StringBuilder::new(), StringBuilder::new());
    for s in &list {
        let sorted: BTreeMap<_, _> = s.summary().additional_properties.iter().collect();
        for (k, v) in sorted {
            summary.keys().append_value(k);
            summary.values().append_value(v);
        }
        summary.append(true)?;
    }
    let columns: Vec<ArrayRef> = vec![
        Arc::new(
            TimestampMillisecondArray::from_iter_values(list.iter().map(|s| s.timestamp_ms())).with_timezone("UTC"),
        ),
        Arc::new(Int64Array::from_iter_values(list.iter().map(|s| s.snapshot_id()))),
        Arc::new(Int64Array::from_iter(list.iter().map(|s| s.parent_snapshot_id()))),
        Arc::new(StringArray::from_iter_values(list.iter().map(|s| s.summary().operation.as_str()))),
        Arc::new(StringArray::from_iter_values(list.iter().map(|s| s.manifest_list()))),
        Arc::new(summary.finish()),
    ];
    Ok(RecordBatch::try_new(with_map_field(schema, 5, &columns[5]), columns)?)
}

/// The schema with field `i` typed as `column` is (a map's entry names are the
/// builder's).
fn with_map_field(schema: SchemaRef, i: usize, column: &ArrayRef) -> SchemaRef {
    let mut fields: Vec<Field> = schema.fields().iter().map(|f| f.as_ref().clone()).collect();
    fields[i] = fields[i].clone().with_data_type(column.data_type().clone());
    Arc::new(Schema::new(fields))
}

fn history(metadata: &TableMetadata) -> Result<RecordBatch> {
    // Ancestors of the current snapshot: rolled-back snapshots are not.
    let mut ancestors = std::collections::HashSet::new();
    let mut at = metadata.current_snapshot().map(|s| s.snapshot_id());
    while let Some(id) = at.filter(|id| ancestors.insert(*id)) {
        at = metadata.snapshot_by_id(id).and_then(|s| s.parent_snapshot_id());
    }
    let log = metadata.history();
    let parent = |id: i64| metadata.snapshot_by_id(id).and_then(|s| s.parent_snapshot_id());
    let schema = Arc::new(Schema::new(vec![
        committed_at("made_current_at"),
        Field::new("snapshot_id", DataType::Int64, false),
        Field::new("parent_id", DataType::Int64, true),
        Field::new("is_current_ancestor", DataType::Boolean, false),
    ]));
    Ok(RecordBatch::try_new(
        schema,
        vec![
            Arc::new(
                TimestampMillisecondArray::from_iter_values(log.iter().map(|l| l.timestamp_ms)).with_timezone("UTC"),
            ),
            Arc::new(Int64Array::from_iter_values(log.iter().map(|l| l.snapshot_id))),
            Arc::new(Int64Array::from_iter(log.iter().map(|l| parent(l.snapshot_id)))),
            Arc::new(BooleanArray::from_iter(log.iter().map(|l| Some(ancestors.contains(&l.snapshot_id))))),
        ],
    )?)
}

/// The current snapshot's live files, one row each, and the partition type of the
/// table's current spec (`$partitions` groups by it).
async fn files(name: &str, table: &Table) -> Result<(RecordBatch, StructType)> {
    let metadata = table.metadata();
    let partition_type = metadata
        .default_partition_spec()
        .partition_type(metadata.current_schema())
        .map_err(|e| iceberg_error(name, e))?;
    let rows = live_files(name, table).await?;
    let sizes = |pick: fn(&DataFile) -> &HashMap<i32, u64>| {
        counts(&rows, |d| pick(d).iter().map(|(k, v)| (*k, *v as i64)).collect())
    };
    let columns: Vec<(&str, ArrayRef)> = vec![
        ("content", Arc::new(Int32Array::from_iter_values(rows.iter().map(|(_, d)| d.content_type() as i32)))),
        ("file_path", Arc::new(StringArray::from_iter_values(rows.iter().map(|(_, d)| d.file_path())))),
        (
            "file_format",
            Arc::new(StringArray::from_iter_values(
                rows.iter().map(|(_, d)| d.file_format().to_string().to_uppercase()),
            )),
        ),
        ("spec_id", Arc::new(Int32Array::from_iter_values(rows.iter().map(|(s, _)| *s)))),
        ("partition", partition_column(&rows, &partition_type)?),
        ("record_count", Arc::new(Int64Array::from_iter_values(rows.iter().map(|(_, d)| d.record_count() as i64)))),
        (
            "file_size_in_bytes",
            Arc::new(Int64Array::from_iter_values(rows.iter().map(|(_, d)| d.file_size_in_bytes() as i64))),
        ),
        ("column_sizes", sizes(DataFile::column_sizes)?),
        ("value_counts", sizes(DataFile::value_counts)?),
        ("null_value_counts", sizes(DataFile::null_value_counts)?),
        ("nan_value_counts", sizes(DataFile::nan_value_counts)?),
        ("lower_bounds", bounds(&rows, false)?),
        ("upper_bounds", bounds(&rows, true)?),
    ];
    let named = |name: &str, a: &ArrayRef| Field::new(name, a.data_type().clone(), true);
    let schema = Arc::new(Schema::new(columns.iter().map(|(n, a)| named(n, a)).collect::<Vec<_>>()));
    Ok((RecordBatch::try_new(schema, columns.into_iter().map(|(_, a)| a).collect())?, partition_type))
}

/// The live data and delete files of the current snapshot, with their spec ids.
async fn live_files(name: &str, table: &Table) -> Result<Vec<(i32, DataFile)>> {
    let metadata = table.metadata();
    let fail = |e| iceberg_error(name, e);
    let mut rows = Vec::new();
    let Some(snapshot) = metadata.current_snapshot() else { return Ok(rows) };
    let bytes = table.file_io().new_input(snapshot.manifest_list()).map_err(fail)?.read().await.map_err(fail)?;
    let list = ManifestList::parse_with_version(&bytes, metadata.format_version()).map_err(fail)?;
    for manifest_file in list.entries() {
        let manifest = manifest_file.load_manifest(table.file_io()).await.map_err(fail)?;
        for entry in manifest.entries().iter().filter(|e| e.is_alive()) {
            rows.push((manifest_file.partition_spec_id, entry.data_file().clone()));
        }
    }
    Ok(rows)
}

/// The files' partitions as one struct column of `partition_type` (all null for an
/// unpartitioned table).
fn partition_column(rows: &[(i32, DataFile)], partition_type: &StructType) -> Result<ArrayRef> {
    let partition_fields: Vec<Field> = partition_type
        .fields()
        .iter()
        .map(|f| Ok(Field::new(&f.name, super::schema::arrow_type(&f.field_type)?, true)))
        .collect::<Result<_>>()?;
    if partition_fields.is_empty() {
        return Ok(Arc::new(datafusion::arrow::array::NullArray::new(rows.len())));
    }
    let mut columns: Vec<ArrayRef> = Vec::new();
    for (i, f) in partition_type.fields().iter().enumerate() {
        let values = rows
            .iter()
            .map(|(_, d)| scalar(d.partition().fields().get(i).and_then(Option::as_ref), &f.field_type))
            .collect::<Result<Vec<_>>>()?;
        columns.push(if values.is_empty() {
            datafusion::arrow::array::new_empty_array(partition_fields[i].data_type())
        } else {
            ScalarValue::iter_to_array(values)?
        });
    }
    Ok(Arc::new(datafusion::arrow::array::StructArray::try_new(Fields::from(partition_fields), columns, None)?))
}

/// A map column of field id to a count `pick` gives per file.
fn counts(rows: &[(i32, DataFile)], pick: impl Fn(&DataFile) -> Vec<(i32, i64)>) -> Result<ArrayRef> {
    let mut b = MapBuilder::new(None, Int32Builder::new(), Int64Builder::new());
    for (_, d) in rows {
        let mut pairs = pick(d);
        pairs.sort();
        for (k, v) in pairs {
            b.keys().append_value(k);
            b.values().append_value(v);
        }
        b.append(true)?;
    }
    Ok(Arc::new(b.finish()))
}

/// A map column of field id to each file's lower (or upper) bound, as text.
fn bounds(rows: &[(i32, DataFile)], upper: bool) -> Result<ArrayRef> {
    let mut b = MapBuilder::new(None, Int32Builder::new(), StringBuilder::new());
    for (_, d) in rows {
        let map = if upper { d.upper_bounds() } else { d.lower_bounds() };
        let sorted: BTreeMap<_, _> = map.iter().collect();
        for (k, v) in sorted {
            b.keys().append_value(*k);
            b.values().append_value(v.to_human_string());
        }
        b.append(true)?;
    }
    Ok(Arc::new(b.finish()))
}

/// `$partitions`: the data files of `files` summed per partition value.
fn partitions(files: &RecordBatch, partition_type: StructType) -> Result<RecordBatch> {
    let content = files.column_by_name("content").expect("a content column");
    let data_rows: Vec<usize> = {
        let c = content.as_any().downcast_ref::<Int32Array>().expect("int content");
        (0..files.num_rows()).filter(|i| c.value(*i) == 0).collect()
    };
    let partition = files.column_by_name("partition").expect("a partition column");
    let records = files.column_by_name("record_count").expect("records");
    let records = records.as_any().downcast_ref::<Int64Array>().expect("int64");
    let sizes = files.column_by_name("file_size_in_bytes").expect("sizes");
    let sizes = sizes.as_any().downcast_ref::<Int64Array>().expect("int64");
    // Groups in order of first appearance, keyed by the partition's values.
    let mut groups: Vec<(Vec<ScalarValue>, usize, i64, i64, i64)> = Vec::new();
    for &row in &data_rows {
        let key = if partition_type.fields().is_empty() {
            Vec::new()
        } else {
            vec![ScalarValue::try_from_array(partition, row)?]
        };
        match groups.iter_mut().find(|g| g.0 == key) {
            Some(g) => {
                g.2 += records.value(row);
                g.3 += 1;
                g.4 += sizes.value(row);
            }
            None => groups.push((key, row, records.value(row), 1, sizes.value(row))),
        }
    }
    let mut fields = Vec::new();
    let mut columns: Vec<ArrayRef> = Vec::new();
    if !partition_type.fields().is_empty() {
        let values = groups.iter().map(|g| g.0[0].clone());
        let array = if groups.is_empty() {
            datafusion::arrow::array::new_empty_array(partition.data_type())
        } else {
            ScalarValue::iter_to_array(values)?
        };
        fields.push(Field::new("partition", array.data_type().clone(), true));
        columns.push(array);
    }
    for (name, pick) in [("record_count", 2usize), ("file_count", 3), ("total_size", 4)] {
        let values = groups.iter().map(|g| match pick {
            2 => g.2,
            3 => g.3,
            _ => g.4,
        });
        fields.push(Field::new(name, DataType::Int64, false));
        columns.push(Arc::new(Int64Array::from_iter_values(values)));
    }
    Ok(RecordBatch::try_new(Arc::new(Schema::new(fields)), columns)?)
}

/// A partition value (of the partition field's result type) as a scalar.
fn scalar(value: Option<&Literal>, t: &Type) -> Result<ScalarValue> {
    let target = super::schema::arrow_type(t)?;
    let Some(Literal::Primitive(p)) = value else { return ScalarValue::try_from(&target) };
    let Type::Primitive(primitive) = t else { return ScalarValue::try_from(&target) };
    Ok(match (primitive, p) {
        (PrimitiveType::Boolean, PrimitiveLiteral::Boolean(v)) => ScalarValue::Boolean(Some(*v)),
        (PrimitiveType::Int, PrimitiveLiteral::Int(v)) => ScalarValue::Int32(Some(*v)),
        (PrimitiveType::Date, PrimitiveLiteral::Int(v)) => ScalarValue::Date32(Some(*v)),
        (PrimitiveType::Long, PrimitiveLiteral::Long(v)) => ScalarValue::Int64(Some(*v)),
        (PrimitiveType::Float, PrimitiveLiteral::Float(v)) => ScalarValue::Float32(Some(v.0)),
        (PrimitiveType::Double, PrimitiveLiteral::Double(v)) => ScalarValue::Float64(Some(v.0)),
        (PrimitiveType::String, PrimitiveLiteral::String(v)) => ScalarValue::Utf8View(Some(v.clone())),
        (PrimitiveType::Binary, PrimitiveLiteral::Binary(v)) => ScalarValue::Binary(Some(v.clone())),
        (PrimitiveType::Timestamp, PrimitiveLiteral::Long(v)) => ScalarValue::TimestampMicrosecond(Some(*v), None),
        (PrimitiveType::Timestamptz, PrimitiveLiteral::Long(v)) => {
            ScalarValue::TimestampMicrosecond(Some(*v), Some("UTC".into()))
        }
        (PrimitiveType::Decimal { precision, scale }, PrimitiveLiteral::Int128(v)) => {
            ScalarValue::Decimal128(Some(*v), *precision as u8, *scale as i8)
        }
        _ => ScalarValue::try_from(&target)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metadata_table_names_are_trinos() {
        assert_eq!(MetadataTable::parse("snapshots"), Some(MetadataTable::Snapshots));
        assert_eq!(MetadataTable::parse("history"), Some(MetadataTable::History));
        assert_eq!(MetadataTable::parse("files"), Some(MetadataTable::Files));
        assert_eq!(MetadataTable::parse("partitions"), Some(MetadataTable::Partitions));
        assert_eq!(MetadataTable::parse("Snapshots"), None);
    }

    #[test]
    fn partition_values_take_their_result_types() {
        let day = Type::Primitive(PrimitiveType::Date);
        let v = Literal::Primitive(PrimitiveLiteral::Int(19_000));
        assert_eq!(scalar(Some(&v), &day).unwrap(), ScalarValue::Date32(Some(19_000)));
        let bucket = Type::Primitive(PrimitiveType::Int);
        assert_eq!(scalar(None, &bucket).unwrap(), ScalarValue::Int32(None));
    }
}
