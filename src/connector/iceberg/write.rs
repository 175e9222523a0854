//! What the coordinator's commit of a write into an Iceberg table asks of the
//! catalog: a new table's Iceberg schema and partition spec (from the query's
//! columns and Trino's `partitioning` property), and one atomic append of the data
//! files the writers left (a new snapshot, through the catalog's swap of the
//! metadata pointer; a commit that meets a concurrent one is tried again on top of
//! the newer snapshot, after a random wait, up to `COMMIT_ATTEMPTS` times, then fails
//! with `TRANSACTION_CONFLICT`). Nothing is in the table before that swap.

use std::sync::Arc;

use datafusion::arrow::datatypes::{DataType, Schema as ArrowSchema};
use datafusion::common::{not_impl_err, plan_datafusion_err, plan_err};
use datafusion::error::Result;
use iceberg::spec::{
    DataContentType, DataFileBuilder, DataFileFormat, NestedField, PartitionSpecRef, PrimitiveType, Schema, SchemaRef,
    Transform, Type, UnboundPartitionSpec,
};
use iceberg::transaction::{ApplyTransactionAction, Transaction};
use iceberg::{TableCreation, TableIdent};

use super::data_file::WrittenFile;
use super::{iceberg_error, namespace, IcebergConnector};

/// The Iceberg type of a column a query produces; Trino's mapping (small integers
/// widen to `int`, every timestamp is kept in microseconds).
fn iceberg_type(t: &DataType) -> Result<Type> {
    Ok(Type::Primitive(match t {
        DataType::Boolean => PrimitiveType::Boolean,
        DataType::Int8 | DataType::Int16 | DataType::Int32 => PrimitiveType::Int,
        DataType::Int64 => PrimitiveType::Long,
        DataType::Float32 => PrimitiveType::Float,
        DataType::Float64 => PrimitiveType::Double,
        DataType::Decimal128(p, s) if *s >= 0 => PrimitiveType::Decimal { precision: *p as u32, scale: *s as u32 },
        DataType::Date32 => PrimitiveType::Date,
        DataType::Time64(_) | DataType::Time32(_) => PrimitiveType::Time,
        DataType::Timestamp(_, None) => PrimitiveType::Timestamp,
        DataType::Timestamp(_, Some(_)) => PrimitiveType::Timestamptz,
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => PrimitiveType::String,
        DataType::Binary | DataType::LargeBinary | DataType::BinaryView => PrimitiveType::Binary,
        other => return not_impl_err!("an Iceberg table cannot hold a column of type {other}"),
    }))
}

/// The Iceberg schema of a new table with `columns`, field ids from 1.
pub fn table_schema(columns: &ArrowSchema) -> Result<Schema> {
    let fields = columns
        .fields()
        .iter()
        .enumerate()
        .map(|(i, f)| Ok(Arc::new(NestedField::new(i as i32 + 1, f.name(), iceberg_type(f.data_type())?, false))))
        .collect::<Result<Vec<_>>>()?;
    Schema::builder().with_fields(fields).build().map_err(|e| iceberg_error("schema", e))
}

/// Trino's `partitioning = ARRAY['col', 'day(ts)', 'bucket(id, 8)', ...]` as a spec.
pub fn partition_spec(schema: &Schema, partitioning: &[String]) -> Result<UnboundPartitionSpec> {
    let mut spec = UnboundPartitionSpec::builder();
    for text in partitioning {
        let (column, transform) = parse_partitioning(text)?;
        let field = schema
            .field_by_name(&column)
            .ok_or_else(|| plan_datafusion_err!("partitioning '{text}': the table has no column '{column}'"))?;
        let name = match transform {
            Transform::Identity => column.clone(),
            Transform::Bucket(_) => format!("{column}_bucket"),
            Transform::Truncate(_) => format!("{column}_trunc"),
            Transform::Year => format!("{column}_year"),
            Transform::Month => format!("{column}_month"),
            Transform::Day => format!("{column}_day"),
            Transform::Hour => format!("{column}_hour"),
            _ => return plan_err!("partitioning '{text}' is not a transform Trino takes"),
        };
        spec = spec.add_partition_field(field.id, name, transform).map_err(|e| iceberg_error("partitioning", e))?;
    }
    Ok(spec.build())
}

/// `col`, `year(col)`, `month(col)`, `day(col)`, `hour(col)`, `bucket(col, n)`,
/// `truncate(col, n)`: the column and the transform.
fn parse_partitioning(text: &str) -> Result<(String, Transform)> {
    let bad = || {
        plan_datafusion_err!("partitioning '{text}': expected col, year(col), month(col), day(col), hour(col), bucket(col, n) or truncate(col, n)")
    };
    let t = text.trim();
    let Some((function, rest)) = t.split_once('(') else {
        return Ok((t.trim_matches('"').to_lowercase(), Transform::Identity));
    };
    let args: Vec<&str> = rest.strip_suffix(')').ok_or_else(bad)?.split(',').map(str::trim).collect();
    let column = args[0].trim_matches('"').to_lowercase();
    let n = || args.get(1).and_then(|n| n.parse::<u32>().ok()).filter(|n| *n > 0).ok_or_else(bad);
    let transform = match (function.trim().to_lowercase().as_str(), args.len()) {
        ("year", 1) => Transform::Year,
        ("month", 1) => Transform::Month,
        ("day", 1) => Transform::Day,
        ("hour", 1) => Transform::Hour,
        ("bucket", 2) => Transform::Bucket(n()?),
        ("truncate", 2) => Transform::Truncate(n()?),
        _ => return Err(bad()),
    };
    Ok((column, transform))
}

/// What a write into an existing table follows: where its files go, the columns
/// they hold, and how they are partitioned.
pub struct TableLayout {
    /// The table's location, without a trailing `/`.
    pub location: String,
    pub schema: SchemaRef,
    pub spec: PartitionSpecRef,
}

impl IcebergConnector {
    /// Where a new table `schema.table` puts its files: under the warehouse, as
    /// iceberg-rust's SQL catalog places tables it creates.
    pub fn new_table_location(&self, schema: &str, table: &str) -> String {
        format!("{}/{}/{table}", self.state.settings.warehouse, schema.replace('.', "/"))
    }

    /// Whether the catalog has the namespace `schema`.
    pub async fn has_schema(&self, schema: &str) -> Result<bool> {
        let ns = namespace(schema);
        self.state
            .on_runtime(|s| async move {
                let catalog = s.catalog().await?;
                catalog.namespace_exists(&ns).await.map_err(|e| iceberg_error(&format!("schema {}", ns.join(".")), e))
            })
            .await
    }

    /// The table `schema.table` as the catalog has it now, or None.
    pub async fn table_layout(&self, schema: &str, table: &str) -> Result<Option<TableLayout>> {
        Ok(self.state.load(schema, table).await?.map(|t| {
            let m = t.metadata();
            TableLayout {
                location: m.location().trim_end_matches('/').to_string(),
                schema: m.current_schema().clone(),
                spec: m.default_partition_spec().clone(),
            }
        }))
    }

    /// Makes table `schema.table` at `location`, without a snapshot.
    pub async fn create_table(
        &self,
        schema: &str,
        table: &str,
        columns: Schema,
        partitioning: Option<UnboundPartitionSpec>,
        location: &str,
    ) -> Result<()> {
        let creation = TableCreation::builder()
            .name(table.to_string())
            .location(location.to_string())
            .schema(columns)
            .partition_spec_opt(partitioning)
            .build();
        let (ns, what) = (namespace(schema), format!("{}.{schema}.{table}", self.state.name));
        self.state
            .on_runtime(|s| async move {
                let catalog = s.catalog().await?;
                catalog.create_table(&ns, creation).await.map(|_| ()).map_err(|e| iceberg_error(&what, e))
            })
            .await?;
        self.state.listing.lock().fetched = None;
        Ok(())
    }

    /// Drops table `schema.table` from the catalog (its files stay: a CTAS whose
    /// append failed wrote none the table references).
    pub async fn drop_table(&self, schema: &str, table: &str) -> Result<()> {
        let ident = TableIdent::new(namespace(schema), table.to_string());
        let what = format!("{}.{schema}.{table}", self.state.name);
        self.state
            .on_runtime(|s| async move {
                let catalog = s.catalog().await?;
                catalog.drop_table(&ident).await.map_err(|e| iceberg_error(&what, e))
            })
            .await?;
        self.state.listing.lock().fetched = None;
        Ok(())
    }

    /// Appends `files`, written under partition spec `spec_id`, to table
    /// `schema.table` as one new snapshot; its id.
    pub async fn append(&self, schema: &str, table: &str, spec_id: i32, files: &[WrittenFile]) -> Result<Option<i64>> {
        let what = format!("{}.{schema}.{table}", self.state.name);
        let loaded =
            self.state.load(schema, table).await?.ok_or_else(|| plan_datafusion_err!("table {what} is gone"))?;
        if loaded.metadata().default_partition_spec_id() != spec_id {
            return plan_err!("the partitioning of Iceberg table {what} changed while rows were written into it");
        }
        let data_files = files
            .iter()
            .map(|f| {
                DataFileBuilder::default()
                    .content(DataContentType::Data)
                    .file_path(f.location.clone())
                    .file_format(DataFileFormat::Parquet)
                    .record_count(f.rows)
                    .file_size_in_bytes(f.size)
                    .partition_spec_id(spec_id)
                    .partition(f.partition.clone())
                    .column_sizes(f.columns.sizes.clone())
                    .value_counts(f.columns.values.clone())
                    .null_value_counts(f.columns.nulls.clone())
                    .lower_bounds(f.columns.lower.clone())
                    .upper_bounds(f.columns.upper.clone())
                    .build()
                    .map_err(|e| plan_datafusion_err!("Iceberg table {what}: data file {}: {e}", f.location))
            })
            .collect::<Result<Vec<_>>>()?;
        for attempt in 1..=COMMIT_ATTEMPTS {
            // Each commit loads the table itself and appends on top of its newest
            // snapshot (iceberg-rust's `do_commit`), so `loaded` serves every try.
            let tx = Transaction::new(&loaded);
            let files = data_files.clone();
            let tx = tx.fast_append().add_data_files(files).apply(tx).map_err(|e| iceberg_error(&what, e))?;
            let outcome = self
                .state
                .on_runtime(|s| async move {
                    let catalog = s.catalog().await?;
                    Ok(tx.commit(catalog.as_ref()).await.map(|t| t.metadata().current_snapshot_id()))
                })
                .await?;
            match outcome {
                Ok(snapshot) => return Ok(snapshot),
                Err(e) if e.kind() != iceberg::ErrorKind::CatalogCommitConflicts => {
                    return Err(iceberg_error(&what, e))
                }
                Err(_) if attempt < COMMIT_ATTEMPTS => {
                    // Others' commits won: wait a random while, so that writers that
                    // met do not meet again.
                    let most = (25u64 << attempt.min(6)).min(1000);
                    tokio::time::sleep(std::time::Duration::from_millis(rand::random_range(1..=most))).await;
                }
                Err(e) => {
                    let message = format!(
                        "Iceberg table {what}: {COMMIT_ATTEMPTS} commits of this write met concurrent ones; nothing was \
                         written: {e}"
                    );
                    let conflict = crate::functions::FunctionError {
                        code: crate::error_code::ErrorCode::TransactionConflict,
                        message,
                    };
                    return Err(datafusion::error::DataFusionError::External(Box::new(conflict)));
                }
            }
        }
        unreachable!("the last attempt returns")
    }
}

/// Tries of one append's commit while concurrent commits keep winning (each try is
/// retried by iceberg-rust as the table's `commit.retry.*` properties say, without
/// the random waits that part writers which collided).
const COMMIT_ATTEMPTS: u32 = 20;

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::arrow::datatypes::{Field, TimeUnit};

    #[test]
    fn partitioning_is_read_as_trino_writes_it() {
        let columns = ArrowSchema::new(vec![
            Field::new("id", DataType::Int64, true),
            Field::new("ts", DataType::Timestamp(TimeUnit::Microsecond, None), true),
            Field::new("name", DataType::Utf8, true),
        ]);
        let schema = table_schema(&columns).unwrap();
        let spec = partition_spec(&schema, &["day(ts)".into(), "bucket(id, 8)".into(), "name".into()]).unwrap();
        let fields: Vec<(i32, String, Transform)> =
            spec.fields().iter().map(|f| (f.source_id, f.name.clone(), f.transform)).collect();
        assert_eq!(
            fields,
            vec![
                (2, "ts_day".into(), Transform::Day),
                (1, "id_bucket".into(), Transform::Bucket(8)),
                (3, "name".into(), Transform::Identity)
            ]
        );
        assert!(partition_spec(&schema, &["day(nope)".into()]).is_err());
        assert!(partition_spec(&schema, &["bucket(id)".into()]).is_err());
        assert!(partition_spec(&schema, &["week(ts)".into()]).is_err());
    }

    #[test]
    fn query_columns_take_trinos_iceberg_types() {
        let t = |d: DataType| iceberg_type(&d).unwrap();
        assert_eq!(t(DataType::Int16), Type::Primitive(PrimitiveType::Int));
        assert_eq!(t(DataType::Utf8View), Type::Primitive(PrimitiveType::String));
        assert_eq!(
            t(DataType::Timestamp(TimeUnit::Nanosecond, Some("UTC".into()))),
            Type::Primitive(PrimitiveType::Timestamptz)
        );
        assert!(iceberg_type(&DataType::Null).is_err());
    }
}
