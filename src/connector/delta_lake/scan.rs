//! One version of a Delta table as DataFusion reads it: its columns (data columns in
//! the table's order, then its partition columns, as DataFusion's file scans lay
//! them out), its live files with their partition values, and the statistics the
//! log keeps for each file. A scan drops the files that the query's filters rule
//! out by those values and statistics, spreads the rest over the scan's partitions
//! and reads them with DataFusion's Parquet scan.

use datafusion::common::{not_impl_err, plan_datafusion_err};
use std::sync::Arc;

use async_trait::async_trait;
use datafusion::arrow::array::{Array, ArrayRef, AsArray, RecordBatch, UInt64Array};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{DataType, FieldRef, Int64Type, Schema, SchemaRef};
use datafusion::catalog::{Session, TableProvider};
use datafusion::common::pruning::PruningStatistics;
use datafusion::common::{project_schema, Column, DFSchema, ScalarValue};
use datafusion::datasource::file_format::parquet::ParquetFormat;
use datafusion::datasource::file_format::FileFormat;
use datafusion::datasource::listing::PartitionedFile;
use datafusion::datasource::physical_plan::FileScanConfigBuilder;
use datafusion::datasource::table_schema::TableSchema;
use datafusion::datasource::TableType;
use datafusion::error::Result;
use datafusion::execution::object_store::ObjectStoreUrl;
use datafusion::logical_expr::utils::conjunction;
use datafusion::logical_expr::{Expr, TableProviderFilterPushDown};
use datafusion::physical_optimizer::pruning::PruningPredicateBuilder;
use datafusion::physical_plan::empty::EmptyExec;
use datafusion::physical_plan::ExecutionPlan;
use deltalake_core::kernel::engine::arrow_conversion::TryIntoArrow;
use deltalake_core::DeltaTable;
use object_store::path::Path;
use object_store::ObjectMeta;
use url::Url;

/// A Delta table at one version.
#[derive(Debug)]
pub struct DeltaSnapshotTable {
    location: Url,
    version: i64,
    store_url: ObjectStoreUrl,
    schema: SchemaRef,
    file_schema: SchemaRef,
    partition_fields: Vec<FieldRef>,
    /// The live files, in the log's order, with their partition values.
    files: Vec<PartitionedFile>,
    stats: FileStatistics,
}

impl DeltaSnapshotTable {
    pub fn new(location: &Url, store_url: ObjectStoreUrl, table: &DeltaTable) -> Result<Self> {
        let fail = |what: String| plan_datafusion_err!("Delta table at {location}: {what}");
        let state = table.snapshot().map_err(|e| fail(e.to_string()))?;
        let mode = state.metadata().configuration().get("delta.columnMapping.mode").map(String::as_str);
        if !matches!(mode, None | Some("none")) {
            return not_impl_err!(
                "Delta table at {location} uses column mapping (mode {}), which flotilla does not read",
                mode.unwrap_or_default()
            );
        }
        let logical: Schema = state.schema().as_ref().try_into_arrow().map_err(|e| fail(e.to_string()))?;
        let partition_columns = state.metadata().partition_columns();
        let is_partition = |name: &str| partition_columns.iter().any(|c| c == name);
        let file_fields: Vec<FieldRef> = logical.fields().iter().filter(|f| !is_partition(f.name())).cloned().collect();
        let partition_fields = partition_columns
            .iter()
            .map(|c| logical.field_with_name(c).map(|f| Arc::new(f.clone().with_nullable(true))))
            .collect::<Result<Vec<FieldRef>, _>>()?;
        let file_schema = Arc::new(Schema::new(file_fields.clone()));
        let schema = Arc::new(Schema::new([file_fields, partition_fields.clone()].concat()));

        let actions = state.add_actions_table(true).map_err(|e| fail(e.to_string()))?;
        for (field, column) in actions.schema().fields().iter().zip(actions.columns()) {
            if field.name().starts_with("deletion_vector.") && column.null_count() < column.len() {
                return not_impl_err!(
                    "Delta table at {location} (version {}) has deletion vectors, which flotilla does not apply",
                    state.version()
                );
            }
        }
        let column = |name: &str| {
            actions.column_by_name(name).cloned().ok_or_else(|| fail(format!("its log has no '{name}' for files")))
        };
        let paths = cast(&column("path")?, &DataType::Utf8)?;
        let paths = paths.as_string::<i32>();
        let sizes = column("size_bytes")?;
        let sizes = sizes.as_primitive::<Int64Type>();
        let modified = cast(&column("modification_time")?, &DataType::Int64)?;
        let modified = modified.as_primitive::<Int64Type>();
        let partition_values = partition_fields
            .iter()
            .map(|f| match actions.column_by_name(&format!("partition.{}", f.name())) {
                Some(values) => Ok(cast(values, f.data_type())?),
                None => Err(fail(format!("its log has no values for partition column '{}'", f.name()))),
            })
            .collect::<Result<Vec<ArrayRef>>>()?;
        let mut files = Vec::with_capacity(actions.num_rows());
        for row in 0..actions.num_rows() {
            let location = file_location(location, paths.value(row)).map_err(fail)?;
            let meta = ObjectMeta {
                location,
                last_modified: chrono::DateTime::from_timestamp_millis(modified.value(row)).unwrap_or_default(),
                size: sizes.value(row).max(0) as u64,
                e_tag: None,
                version: None,
            };
            let values =
                partition_values.iter().map(|a| ScalarValue::try_from_array(a, row)).collect::<Result<Vec<_>>>()?;
            files.push(PartitionedFile::new_from_meta(meta).with_partition_values(values));
        }
        let stats = FileStatistics { actions, schema: schema.clone(), partition_values };
        Ok(DeltaSnapshotTable {
            location: location.clone(),
            version: state.version() as i64,
            store_url,
            schema,
            file_schema,
            partition_fields,
            files,
            stats,
        })
    }

    /// Which files may hold rows passing `filters`; all of them when the filters
    /// say nothing about the statistics the log keeps.
    fn prune(&self, state: &dyn Session, filters: &[Expr]) -> Vec<bool> {
        let all = vec![true; self.files.len()];
        let Some(predicate) = conjunction(filters.iter().cloned()) else { return all };
        let pruned = DFSchema::try_from(self.schema.clone())
            .and_then(|df_schema| state.create_physical_expr(predicate, &df_schema))
            .and_then(|physical| {
                PruningPredicateBuilder::new().with_file_schema(self.schema.clone()).try_build(physical)
            })
            .and_then(|p| p.prune(&self.stats));
        match pruned {
            Ok(keep) if keep.len() == self.files.len() => keep,
            Ok(_) => all,
            Err(e) => {
                tracing::debug!("Delta table at {}: no file pruning: {e}", self.location);
                all
            }
        }
    }
}

/// Where a file named in the log lives, as a path in the table's object store. The
/// log names files relative to the table, percent-encoded; an absolute URL must
/// stay in the table's store.
fn file_location(table: &Url, raw: &str) -> Result<Path, String> {
    let url = match raw.contains("://") {
        true => Url::parse(raw),
        false => table.join(raw),
    }
    .map_err(|e| format!("its log names a file '{raw}' that is not a location: {e}"))?;
    if url.scheme() != table.scheme() || url.host_str() != table.host_str() {
        return Err(format!("its log names a file '{raw}' in another store"));
    }
    Path::from_url_path(url.path()).map_err(|e| format!("its log names a file '{raw}': {e}"))
}

#[async_trait]
impl TableProvider for DeltaSnapshotTable {
    fn schema(&self) -> SchemaRef {
        self.schema.clone()
    }

    fn table_type(&self) -> TableType {
        TableType::Base
    }

    /// Inexact: pruning by statistics keeps files that may hold a matching row, so
    /// the filter stays above the scan.
    fn supports_filters_pushdown(&self, filters: &[&Expr]) -> Result<Vec<TableProviderFilterPushDown>> {
        Ok(vec![TableProviderFilterPushDown::Inexact; filters.len()])
    }

    async fn scan(
        &self,
        state: &dyn Session,
        projection: Option<&Vec<usize>>,
        filters: &[Expr],
        limit: Option<usize>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        let keep = self.prune(state, filters);
        let files: Vec<PartitionedFile> =
            self.files.iter().zip(keep).filter(|(_, keep)| *keep).map(|(f, _)| f.clone()).collect();
        tracing::debug!(
            "Delta table at {} version {}: {} of {} files to read",
            self.location,
            self.version,
            files.len(),
            self.files.len()
        );
        if files.is_empty() {
            return Ok(Arc::new(EmptyExec::new(project_schema(&self.schema, projection)?)));
        }
        let groups = crate::connector::files::balance_by_bytes(files, state.config().target_partitions());
        let format = ParquetFormat::default().with_options(state.table_options().parquet.clone());
        let source = format.file_source(
            TableSchema::builder(self.file_schema.clone())
                .with_table_partition_cols(self.partition_fields.clone())
                .build(),
        );
        let config = FileScanConfigBuilder::new(self.store_url.clone(), source)
            .with_file_groups(groups)
            .with_projection_indices(projection.cloned())?
            .with_limit(limit)
            .build();
        format.create_physical_plan(state, config).await
    }
}

/// The statistics a Delta log keeps for each live file, for `PruningPredicate`:
/// partition values are exact; of the columns' minimum and maximum only those of
/// types whose log statistics are exact bounds are used (strings are truncated,
/// timestamps rounded to milliseconds, and floats say nothing of NaN).
#[derive(Debug)]
struct FileStatistics {
    /// The log's flattened add actions (`num_records`, `min.c`, `max.c`,
    /// `null_count.c`), one row per file.
    actions: RecordBatch,
    schema: SchemaRef,
    /// Each partition column's values, one row per file.
    partition_values: Vec<ArrayRef>,
}

impl FileStatistics {
    fn partition(&self, column: &Column) -> Option<&ArrayRef> {
        let index = self.schema.index_of(&column.name).ok()?;
        let first_partition = self.schema.fields().len() - self.partition_values.len();
        index.checked_sub(first_partition).map(|i| &self.partition_values[i])
    }

    fn bound(&self, which: &str, column: &Column) -> Option<ArrayRef> {
        if let Some(values) = self.partition(column) {
            return Some(values.clone());
        }
        let field = self.schema.field_with_name(&column.name).ok()?;
        let exact = field.data_type().is_integer()
            || matches!(field.data_type(), DataType::Decimal128(..) | DataType::Date32 | DataType::Boolean);
        if !exact {
            return None;
        }
        let values = self.actions.column_by_name(&format!("{which}.{}", column.name))?;
        cast(values, field.data_type()).ok()
    }
}

impl PruningStatistics for FileStatistics {
    fn min_values(&self, column: &Column) -> Option<ArrayRef> {
        self.bound("min", column)
    }

    fn max_values(&self, column: &Column) -> Option<ArrayRef> {
        self.bound("max", column)
    }

    fn num_containers(&self) -> usize {
        self.actions.num_rows()
    }

    fn null_counts(&self, column: &Column) -> Option<ArrayRef> {
        if let Some(values) = self.partition(column) {
            let rows = self.row_counts()?;
            let rows = rows.as_primitive::<datafusion::arrow::datatypes::UInt64Type>();
            let counts: UInt64Array = (0..values.len())
                .map(|i| rows.is_valid(i).then(|| if values.is_null(i) { rows.value(i) } else { 0 }))
                .collect();
            return Some(Arc::new(counts));
        }
        let counts = self.actions.column_by_name(&format!("null_count.{}", column.name))?;
        cast(counts, &DataType::UInt64).ok()
    }

    fn row_counts(&self) -> Option<ArrayRef> {
        cast(self.actions.column_by_name("num_records")?, &DataType::UInt64).ok()
    }

    fn contained(
        &self,
        _column: &Column,
        _values: &std::collections::HashSet<ScalarValue>,
    ) -> Option<datafusion::arrow::array::BooleanArray> {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_named_by_the_log_stay_in_the_table_store() {
        let table = Url::parse("s3://bucket/lake/t/").unwrap();
        assert_eq!(file_location(&table, "part-0.parquet").unwrap().as_ref(), "lake/t/part-0.parquet");
        assert_eq!(
            file_location(&table, "p=a%20b/part-1.parquet").unwrap().as_ref(),
            "lake/t/p=a b/part-1.parquet",
            "percent-encoded names are decoded"
        );
        assert_eq!(file_location(&table, "s3://bucket/elsewhere/x.parquet").unwrap().as_ref(), "elsewhere/x.parquet");
        assert!(file_location(&table, "s3://other/x.parquet").is_err());
        assert!(file_location(&table, "file:///etc/passwd").is_err());
        let local = Url::parse("file:///data/t/").unwrap();
        assert_eq!(file_location(&local, "a.parquet").unwrap().as_ref(), "data/t/a.parquet");
    }
}
