//! One snapshot of an Iceberg table as DataFusion reads it. iceberg-rust plans the
//! scan (manifests dropped by the partition spec's transforms, data files by their
//! column bounds, both against the query's filters as `filter` translates them);
//! the live files left are read by DataFusion's own Parquet scan, spread over the
//! scan's partitions by bytes, with columns matched by field id (`field_ids`). The
//! scan is a plain `DataSourceExec`: it travels to workers in DataFusion's plan
//! encoding, and `EXPLAIN` lists the files it reads.
//!
//! Delete files (position or equality deletes, v2 row-level deletes) are not
//! applied: a snapshot holding any is refused with `NOT_SUPPORTED`, never read as
//! if its deleted rows were there.

use std::sync::Arc;

use async_trait::async_trait;
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::catalog::{Session, TableProvider};
use datafusion::common::{not_impl_err, plan_datafusion_err, project_schema, Statistics};
use datafusion::datasource::file_format::parquet::ParquetFormat;
use datafusion::datasource::file_format::FileFormat;
use datafusion::datasource::listing::PartitionedFile;
use datafusion::datasource::physical_plan::FileScanConfigBuilder;
use datafusion::datasource::table_schema::TableSchema;
use datafusion::datasource::TableType;
use datafusion::error::Result;
use datafusion::execution::object_store::ObjectStoreUrl;
use datafusion::logical_expr::{Expr, TableProviderFilterPushDown};
use datafusion::physical_plan::empty::EmptyExec;
use datafusion::physical_plan::ExecutionPlan;
use futures::TryStreamExt;
use iceberg::table::Table;

use super::storage::object_url;
use super::{filter, iceberg_error};
use crate::connector::field_ids::FieldIdAdapterFactory;

/// An Iceberg table at one snapshot (none for a table never written).
#[derive(Debug)]
pub struct IcebergSnapshotTable {
    /// `catalog.schema.table`, for messages.
    name: String,
    table: Table,
    snapshot_id: Option<i64>,
    schema: SchemaRef,
}

impl IcebergSnapshotTable {
    /// The table at `snapshot_id`, or at its current snapshot; read with the schema
    /// the snapshot was written with.
    pub fn new(name: String, table: Table, snapshot_id: Option<i64>) -> Result<Self> {
        let metadata = table.metadata();
        let snapshot = match snapshot_id {
            Some(id) => Some(
                metadata
                    .snapshot_by_id(id)
                    .ok_or_else(|| plan_datafusion_err!("Iceberg table {name} has no snapshot {id}"))?,
            ),
            None => metadata.current_snapshot(),
        };
        let schema = match snapshot.and_then(|s| s.schema_id()).and_then(|id| metadata.schema_by_id(id)) {
            Some(s) if snapshot_id.is_some() => s.clone(),
            _ => metadata.current_schema().clone(),
        };
        let schema = super::schema::arrow_schema(&schema)?;
        Ok(IcebergSnapshotTable { snapshot_id: snapshot.map(|s| s.snapshot_id()), name, table, schema })
    }

    /// The store the table's files are in, and where in it each of `paths` is.
    fn locate(&self, paths: &[(String, u64, u64, u64)]) -> Result<(ObjectStoreUrl, Vec<PartitionedFile>)> {
        let fail = |e: String| plan_datafusion_err!("Iceberg table {}: {e}", self.name);
        let root = object_url(self.table.metadata().location()).map_err(fail)?;
        let store = ObjectStoreUrl::parse(&root[..url::Position::BeforePath])?;
        let mut files = Vec::with_capacity(paths.len());
        for (path, size, start, length) in paths {
            let url = object_url(path).map_err(fail)?;
            if url.scheme() != root.scheme() || url.host_str() != root.host_str() {
                return Err(fail(format!("its data file {path} is outside the table's store {store}")));
            }
            let location = super::storage::object_path(path).map_err(fail)?;
            let mut file = PartitionedFile::new(location.to_string(), *size);
            file.object_meta.location = location;
            if *start != 0 || *length != *size {
                file = file.with_range(*start as i64, (*start + *length) as i64);
            }
            files.push(file);
        }
        Ok((store, files))
    }

    /// The live data files that may hold rows passing `filters`: path, size, and
    /// the byte range to read.
    async fn plan_files(&self, filters: &[Expr]) -> Result<Vec<(String, u64, u64, u64)>> {
        let Some(snapshot_id) = self.snapshot_id else { return Ok(Vec::new()) };
        let mut scan = self.table.scan().snapshot_id(snapshot_id).select_all();
        if let Some(predicate) = filter::predicate(filters, &self.schema) {
            scan = scan.with_filter(predicate);
        }
        let scan = scan.build().map_err(|e| iceberg_error(&self.name, e))?;
        let tasks: Vec<_> = scan
            .plan_files()
            .await
            .map_err(|e| iceberg_error(&self.name, e))?
            .try_collect()
            .await
            .map_err(|e| iceberg_error(&self.name, e))?;
        let mut files = Vec::with_capacity(tasks.len());
        for task in tasks {
            if let Some(delete) = task.deletes.first() {
                return not_impl_err!(
                    "Iceberg table {} (snapshot {snapshot_id}) has row-level deletes ({:?} file {}), which flotilla does not apply yet",
                    self.name,
                    delete.file_type,
                    delete.file_path
                );
            }
            if task.data_file_format != iceberg::spec::DataFileFormat::Parquet {
                return not_impl_err!(
                    "Iceberg table {}: data file {} is {:?}; flotilla reads Parquet data files",
                    self.name,
                    task.data_file_path,
                    task.data_file_format
                );
            }
            files.push((task.data_file_path, task.file_size_in_bytes, task.start, task.length));
        }
        Ok(files)
    }
}

#[async_trait]
impl TableProvider for IcebergSnapshotTable {
    fn schema(&self) -> SchemaRef {
        self.schema.clone()
    }

    fn table_type(&self) -> TableType {
        TableType::Base
    }

    /// Inexact: pruning keeps every file that may hold a matching row.
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
        let planned = self.plan_files(filters).await?;
        tracing::debug!("Iceberg table {} snapshot {:?}: {} files to read", self.name, self.snapshot_id, planned.len());
        if planned.is_empty() {
            return Ok(Arc::new(EmptyExec::new(project_schema(&self.schema, projection)?)));
        }
        let (store, files) = self.locate(&planned)?;
        let groups = crate::connector::files::balance_by_bytes(files, state.config().target_partitions());
        let format = ParquetFormat::default().with_options(state.table_options().parquet.clone());
        let source = format.file_source(TableSchema::builder(self.schema.clone()).build());
        let config = FileScanConfigBuilder::new(store, source)
            .with_file_groups(groups)
            .with_statistics(Statistics::new_unknown(&self.schema))
            .with_projection_indices(projection.cloned())?
            .with_limit(limit)
            .with_expr_adapter(Some(Arc::new(FieldIdAdapterFactory)))
            .build();
        format.create_physical_plan(state, config).await
    }
}
