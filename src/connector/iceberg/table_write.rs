//! Writes into Iceberg tables (`connector::writes`): `CREATE TABLE c.s.t (...)
//! [WITH (partitioning = ARRAY[...])]`, `CREATE TABLE c.s.t [WITH (...)] AS SELECT
//! ...` and `INSERT INTO c.s.t SELECT ...`. The writers are the same as every file
//! write's (`TableWriterExec` on workers, Parquet with each column's Iceberg field
//! id); `IcebergPublish` moves the reported files from staging into the table's
//! `data/` directory and commits them to the catalog as one snapshot. A CTAS table
//! is made in the catalog at that moment too, so a failed or cancelled write leaves
//! neither a table nor a snapshot, and its files are removed with the staging
//! directory.
//!
//! A partitioned table's rows get the hidden column `$partition` (`partition`), by
//! which the writers split their files; the publish names each file's directory as
//! Iceberg does and records its partition.

use std::collections::HashMap;
use std::sync::Arc;

use async_trait::async_trait;
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::catalog::TableProvider;
use datafusion::common::ScalarValue;
use datafusion::datasource::physical_plan::parquet::metadata::DFParquetMetadata;
use datafusion::execution::runtime_env::RuntimeEnv;
use datafusion::logical_expr::LogicalPlan;
use datafusion::physical_expr::expressions::{cast, col, Column, Literal};
use datafusion::physical_expr::{PhysicalExpr, ScalarFunctionExpr};
use datafusion::physical_plan::projection::ProjectionExec;
use datafusion::physical_plan::repartition::RepartitionExec;
use datafusion::physical_plan::{ExecutionPlan, Partitioning};
use iceberg::spec::{PartitionSpec, Struct, UnboundPartitionSpec};
use object_store::path::{Path, PathPart};
use object_store::{ObjectStore, ObjectStoreExt};

use super::data_file::{ColumnStatistics, WrittenFile};
use super::write::{partition_spec, table_schema};
use super::{iceberg_error, partition, IcebergConnector};
use crate::connector::field_ids::field_id;
use crate::connector::staged_files::{external, remove_staging, StagedFiles};
use crate::connector::writes::{
    array_property, refuse_comment, unknown_property, unquote, Classify, ConnectorWrite, ConnectorWrites, CreateTable,
    Fragment, WritePublish, WriteRequest, WriteTarget,
};
use crate::error_code::{ErrorCode, QueryError};

/// Trino's Iceberg table properties flotilla takes.
#[derive(Debug, Default, PartialEq)]
pub struct IcebergProperties {
    pub partitioning: Vec<String>,
}

impl IcebergProperties {
    pub fn read(properties: Vec<(String, datafusion::sql::sqlparser::ast::Expr)>) -> Result<Self, QueryError> {
        let mut props = IcebergProperties::default();
        for (key, value) in properties {
            match key.as_str() {
                "format" if unquote(&value).eq_ignore_ascii_case("PARQUET") => {}
                "format" => {
                    let m = format!("format {value}: Iceberg tables are written as PARQUET");
                    return Err(QueryError::new(ErrorCode::NotSupported, m));
                }
                "partitioning" => props.partitioning = array_property(&key, &value)?,
                other => return Err(unknown_property(other, " (Iceberg tables take format and partitioning)")),
            }
        }
        Ok(props)
    }
}

/// `input` with its columns cast to the types and names of `table`.
fn cast_to(
    request: &WriteRequest<'_>,
    input: Arc<dyn ExecutionPlan>,
    table: &SchemaRef,
) -> Result<Arc<dyn ExecutionPlan>, QueryError> {
    let from = input.schema();
    let exprs = from
        .fields()
        .iter()
        .zip(table.fields())
        .map(|(f, t)| {
            let column = col(f.name(), &from)?;
            Ok((cast(column, &from, t.data_type().clone())?, t.name().clone()))
        })
        .collect::<datafusion::error::Result<Vec<_>>>()
        .map_err(|e| request.error(&e))?;
    Ok(Arc::new(ProjectionExec::try_new(exprs, input).map_err(|e| request.error(&e))?))
}

#[async_trait]
impl ConnectorWrites for IcebergConnector {
    async fn begin_create_table(
        &self,
        request: &WriteRequest<'_>,
        create: CreateTable<'_>,
    ) -> Result<Option<ConnectorWrite>, QueryError> {
        refuse_comment(&create)?;
        let props = IcebergProperties::read(create.properties)?;
        let (c, full) = (create.plan, &request.table);
        let (schema, table) = (full.schema().unwrap_or_default().to_string(), full.table().to_string());
        if c.or_replace {
            return Err(QueryError::new(ErrorCode::NotSupported, "CREATE OR REPLACE TABLE in an Iceberg catalog"));
        }
        if !self.has_schema(&schema).await.map_err(|e| request.error(&e))? {
            let catalog = full.catalog().unwrap_or_default();
            return Err(QueryError::new(
                ErrorCode::SchemaNotFound,
                format!("Schema '{catalog}.{schema}' does not exist"),
            ));
        }
        if self.table_layout(&schema, &table).await.map_err(|e| request.error(&e))?.is_some() {
            if c.if_not_exists {
                return Ok(None);
            }
            return Err(QueryError::new(ErrorCode::GenericUserError, format!("Table '{full}' already exists")));
        }
        let columns = Arc::new(table_schema(c.input.schema().as_arrow()).map_err(|e| request.error(&e))?);
        let unbound = partition_spec(&columns, &props.partitioning).map_err(|e| request.error(&e))?;
        let bound = unbound.clone().bind(columns.clone());
        let spec = Arc::new(bound.map_err(|e| request.error(&iceberg_error("partitioning", e)))?);
        let input = request.physical(&c.input).await?;
        let written = super::schema::arrow_schema(&columns).map_err(|e| request.error(&e))?;
        let location = self.new_table_location(&schema, &table);
        let publish = IcebergPublish::new(self, request, (schema, table), location, columns, spec, Some(unbound));
        let input = cast_to(request, input, &written)?;
        self.write(request, input, &written, publish, None, "CREATE TABLE").map(Some)
    }

    async fn begin_insert(
        &self,
        request: &WriteRequest<'_>,
        table: Arc<dyn TableProvider>,
        input: &LogicalPlan,
    ) -> Result<ConnectorWrite, QueryError> {
        let full = &request.table;
        let (schema, name) = (full.schema().unwrap_or_default().to_string(), full.table().to_string());
        let layout = self
            .table_layout(&schema, &name)
            .await
            .map_err(|e| request.error(&e))?
            .ok_or_else(|| QueryError::new(ErrorCode::TableNotFound, format!("Table '{full}' does not exist")))?;
        let written = table.schema();
        let input = request.physical(input).await?;
        let publish =
            IcebergPublish::new(self, request, (schema, name), layout.location, layout.schema, layout.spec, None);
        let input = cast_to(request, input, &written)?;
        // The commit appends on top of the newest snapshot: an Iceberg table is the
        // catalog's, whatever provider the query planned with.
        self.write(request, input, &written, publish, None, "INSERT")
    }
}

impl IcebergConnector {
    fn write(
        &self,
        request: &WriteRequest<'_>,
        input: Arc<dyn ExecutionPlan>,
        written: &SchemaRef,
        publish: IcebergPublish,
        planned_against: Option<Arc<dyn TableProvider>>,
        update_type: &'static str,
    ) -> Result<ConnectorWrite, QueryError> {
        let mut field_ids: Vec<i32> = written.fields().iter().map(|f| field_id(f).unwrap_or_default()).collect();
        let mut target = WriteTarget::new(publish.staging.clone(), "PARQUET");
        if !publish.spec.is_unpartitioned() {
            // The key column is split off before the files are written: its id is never seen.
            field_ids.push(0);
            target.partition_columns.push(partition::PARTITION_COLUMN.to_string());
        }
        target.field_ids = field_ids;
        // Without Arrow's schema in the footer: its view types would reach other readers
        // (pyarrow cannot filter `string_view`), and Iceberg's schema is the one that counts.
        target.options = HashMap::from([("format.skip_arrow_metadata".to_string(), "true".to_string())]);
        let input = with_partition_key(request, input, &publish)?;
        let location = publish.data.clone();
        Ok(ConnectorWrite { input, target, publish: Arc::new(publish), planned_against, update_type, location })
    }
}

/// `input` with the hidden column `$partition` after the table's columns, computed
/// by the spec's transforms, and its rows hashed by it to the writers, as Trino's
/// preferred write partitioning does: a partition is then one file per write, not
/// one per writer that saw a row of it. `input` itself for an unpartitioned table.
fn with_partition_key(
    request: &WriteRequest<'_>,
    input: Arc<dyn ExecutionPlan>,
    publish: &IcebergPublish,
) -> Result<Arc<dyn ExecutionPlan>, QueryError> {
    if publish.spec.is_unpartitioned() {
        return Ok(input);
    }
    let schema = input.schema();
    let fields = partition::arguments(&publish.spec, &publish.columns, &schema).map_err(|e| request.error(&e))?;
    let mut args: Vec<Arc<dyn PhysicalExpr>> = Vec::with_capacity(fields.len() * 2);
    for (transform, column) in fields {
        args.push(Arc::new(Literal::new(ScalarValue::Utf8(Some(transform)))));
        args.push(Arc::new(Column::new(schema.field(column).name(), column)));
    }
    let state = request.ctx.state();
    let function =
        state.scalar_functions().get(partition::PARTITION_FUNCTION).cloned().ok_or_else(|| {
            QueryError::new(ErrorCode::GenericInternalError, "the Iceberg partition function is missing")
        })?;
    let options = Arc::new(state.config_options().as_ref().clone());
    let key = ScalarFunctionExpr::try_new(function, args, &schema, options).map_err(|e| request.error(&e))?;
    let mut exprs: Vec<(Arc<dyn PhysicalExpr>, String)> = schema
        .fields()
        .iter()
        .enumerate()
        .map(|(i, f)| (Arc::new(Column::new(f.name(), i)) as Arc<dyn PhysicalExpr>, f.name().clone()))
        .collect();
    exprs.push((Arc::new(key), partition::PARTITION_COLUMN.to_string()));
    let keyed: Arc<dyn ExecutionPlan> = Arc::new(ProjectionExec::try_new(exprs, input).map_err(|e| request.error(&e))?);
    let key = col(partition::PARTITION_COLUMN, &keyed.schema()).map_err(|e| request.error(&e))?;
    let hashed = RepartitionExec::try_new(keyed, Partitioning::Hash(vec![key], state.config().target_partitions()));
    Ok(Arc::new(hashed.map_err(|e| request.error(&e))?))
}

/// The end of a write into an Iceberg table: its files moved into `data/`, then
/// committed to the catalog.
#[derive(Debug)]
pub struct IcebergPublish {
    connector: IcebergConnector,
    runtime: Arc<RuntimeEnv>,
    schema: String,
    table: String,
    /// The table's location, without a trailing `/`.
    location: String,
    /// Its `data/` directory, where the files go, ending in `/`.
    data: String,
    staging: String,
    /// The table's columns and partitioning the files were written by.
    columns: Arc<iceberg::spec::Schema>,
    spec: Arc<PartitionSpec>,
    /// For `CREATE TABLE`: the new table's partitioning, as it is made.
    create: Option<UnboundPartitionSpec>,
    /// Each moved file's partition, by its place in the table.
    partitions: parking_lot::Mutex<HashMap<Path, Struct>>,
    classify: Classify,
}

impl IcebergPublish {
    fn new(
        connector: &IcebergConnector,
        request: &WriteRequest<'_>,
        (schema, table): (String, String),
        location: String,
        columns: Arc<iceberg::spec::Schema>,
        spec: Arc<PartitionSpec>,
        create: Option<UnboundPartitionSpec>,
    ) -> Self {
        let data = format!("{location}/data/");
        IcebergPublish {
            connector: connector.clone(),
            runtime: request.ctx.runtime_env(),
            schema,
            table,
            staging: request.staging_in(&data),
            location,
            data,
            columns,
            spec,
            create,
            partitions: Default::default(),
            classify: request.classify,
        }
    }

    /// Where a file a writer left at `parts` (below its directory) goes below
    /// `table`: a partitioned table's key directory becomes the partition's
    /// directories as Iceberg names them, and the file's partition is kept for the
    /// commit.
    fn destination(&self, table: &Path, parts: Vec<PathPart<'_>>) -> Result<Path, QueryError> {
        let prefix = PathPart::from(format!("{}=", partition::PARTITION_COLUMN));
        let mut dest = table.clone();
        let mut partition = None;
        for part in parts {
            match part.as_ref().strip_prefix(prefix.as_ref()) {
                Some(key) if partition.is_none() && !self.spec.is_unpartitioned() => {
                    let p = partition::decode(key, &self.spec, &self.columns).map_err(|e| (self.classify)(&e))?;
                    let dirs = partition::path_parts(&self.spec, &self.columns, &p).map_err(|e| (self.classify)(&e))?;
                    dest = dirs.into_iter().fold(dest, |d, dir| d.join(dir));
                    partition = Some(p);
                }
                _ => dest = dest.join(part),
            }
        }
        match partition {
            Some(p) => {
                self.partitions.lock().insert(dest.clone(), p);
            }
            None if !self.spec.is_unpartitioned() => {
                let m = format!("a writer left {dest} outside a partition of {}.{}", self.schema, self.table);
                return Err(QueryError::new(ErrorCode::GenericInternalError, m));
            }
            None => {}
        }
        Ok(dest)
    }

    /// Makes the table (for `CREATE TABLE`) and appends `files` (paths in `store`,
    /// whose URL is `store_url`) as one snapshot.
    async fn commit(&self, store: &Arc<dyn ObjectStore>, store_url: &str, files: &[Path]) -> Result<(), QueryError> {
        let iceberg = &self.connector;
        let mut written = Vec::with_capacity(files.len());
        for path in files {
            written.push(self.written_file(store, store_url, path).await?);
        }
        if let Some(partitioning) = &self.create {
            let columns = self.columns.as_ref().clone();
            let partitioning = Some(partitioning.clone()).filter(|p| !p.fields().is_empty());
            iceberg
                .create_table(&self.schema, &self.table, columns, partitioning, &self.location)
                .await
                .map_err(|e| (self.classify)(&e))?;
        }
        if written.is_empty() {
            return Ok(());
        }
        if let Err(e) = iceberg.append(&self.schema, &self.table, self.spec.spec_id(), &written).await {
            if self.create.is_some() {
                if let Err(dropped) = iceberg.drop_table(&self.schema, &self.table).await {
                    tracing::error!(
                        "cannot drop {}.{} after its first append failed: {dropped}",
                        self.schema,
                        self.table
                    );
                }
            }
            return Err((self.classify)(&e));
        }
        Ok(())
    }
    /// A moved file as a data file: its size, and what its footer says of its rows.
    async fn written_file(
        &self,
        store: &Arc<dyn ObjectStore>,
        store_url: &str,
        path: &Path,
    ) -> Result<WrittenFile, QueryError> {
        // One slash only: the local store's URL is `file:///`, and `file:/tmp/...`
        // is not the form the table's other locations take.
        let location = format!("{}/{path}", store_url.strip_suffix('/').unwrap_or(store_url));
        let meta = store.head(path).await.map_err(|e| external(&e, &location))?;
        let footer = DFParquetMetadata::new(store.as_ref(), &meta).fetch_metadata().await;
        let footer = footer.map_err(|e| external(&e, &location))?;
        let partition = self.partitions.lock().get(path).cloned().unwrap_or_else(Struct::empty);
        Ok(WrittenFile {
            location,
            size: meta.size,
            rows: footer.file_metadata().num_rows().max(0) as u64,
            partition,
            columns: ColumnStatistics::of(&footer, &self.columns),
        })
    }
}

#[async_trait]
impl WritePublish for IcebergPublish {
    async fn publish(&self, reported: &[Fragment]) -> Result<u64, QueryError> {
        let staged = StagedFiles::new(&self.runtime, &self.data, &self.staging)?;
        let directories: Vec<String> = reported.iter().map(|f| f.address.clone()).collect();
        let mut moved = Vec::new();
        let destination = |table: &Path, parts: Vec<PathPart<'_>>| self.destination(table, parts);
        let mut outcome = staged.move_into_table(&self.runtime, &directories, &destination, &mut moved).await;
        if outcome.is_ok() {
            let base = staged.table_url.object_store();
            outcome = self.commit(&staged.store, base.as_str(), &moved).await;
        }
        if outcome.is_err() {
            staged.take_back(&moved).await;
        }
        outcome?;
        Ok(reported.iter().map(|f| f.changed).sum())
    }

    async fn finish(self: Arc<Self>, _published: bool) {
        remove_staging(self.runtime.clone(), self.staging.clone()).await;
    }
}
