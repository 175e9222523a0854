//! Writes into Iceberg tables: `CREATE TABLE c.s.t (...) [WITH (partitioning =
//! ARRAY[...])]`, `CREATE TABLE c.s.t [WITH (...)] AS SELECT ...` and `INSERT INTO
//! c.s.t SELECT ...`. Planning gives the same writers as every file write
//! (`TableWriterExec` on workers, Parquet with each column's Iceberg field id) under
//! the same `TableCommitExec`; the commit moves the reported files from staging into
//! the table's `data/` directory and then, here, commits them to the catalog as one
//! snapshot (`IcebergPublish`). A CTAS table is made in the catalog at that moment
//! too, so a failed or cancelled write leaves neither a table nor a snapshot, and
//! its files are removed with the staging directory.
//!
//! A partitioned table's rows get the hidden column `$partition`
//! (`connector::iceberg::partition`), by which the writers split their files; the
//! commit names each file's directory as Iceberg does and records its partition.
//!
//! Not yet: `CREATE OR REPLACE`, `DELETE`, `UPDATE`, `MERGE`.

use std::collections::HashMap;
use std::sync::Arc;

use datafusion::arrow::datatypes::SchemaRef;
use datafusion::common::{ScalarValue, TableReference};
use datafusion::datasource::physical_plan::parquet::metadata::DFParquetMetadata;
use datafusion::logical_expr::dml::InsertOp;
use datafusion::logical_expr::{DdlStatement, DmlStatement, LogicalPlan, WriteOp};
use datafusion::physical_expr::expressions::{cast, col, Column, Literal};
use datafusion::physical_expr::{PhysicalExpr, ScalarFunctionExpr};
use datafusion::physical_plan::projection::ProjectionExec;
use datafusion::physical_plan::repartition::RepartitionExec;
use datafusion::physical_plan::{ExecutionPlan, Partitioning};
use datafusion::prelude::SessionContext;
use datafusion::sql::planner::object_name_to_table_reference;
use datafusion::sql::sqlparser::ast::{CreateTable, Statement};
use iceberg::spec::{PartitionSpec, Struct, UnboundPartitionSpec};
use object_store::path::{Path, PathPart};
use object_store::{ObjectStore, ObjectStoreExt};

use super::planner::{planning_error, QueryError};
use super::table_commit::{external, TableCommit};
use super::write::{array_property, catalog_target, staging_of, take_with_properties, unquote, writing, PlannedWrite};
use crate::connector::field_ids::field_id;
use crate::connector::iceberg::data_file::{ColumnStatistics, WrittenFile};
use crate::connector::iceberg::write::{partition_spec, table_schema};
use crate::connector::iceberg::{iceberg_error, partition, IcebergConnector};
use crate::connector::{Connector, Connectors};
use crate::error_code::ErrorCode;
use crate::plan::table_writer::WriteTarget;

/// `WITH (...)` of a `CREATE TABLE` in an Iceberg catalog: Trino's Iceberg table
/// properties.
#[derive(Debug, Default, PartialEq)]
pub struct IcebergProperties {
    pub partitioning: Vec<String>,
}

/// The Iceberg catalog a table name falls in, with the name resolved.
fn iceberg_target<'a>(
    connectors: &'a Connectors,
    name: &TableReference,
    catalog: &str,
    schema: &str,
) -> Option<(&'a Arc<dyn Connector>, TableReference)> {
    catalog_target(connectors, name, catalog, schema, |c| c.iceberg().is_some())
}

fn iceberg_of(connector: &Arc<dyn Connector>) -> &IcebergConnector {
    connector.iceberg().expect("an Iceberg catalog")
}

/// Whether a statement creates a table in an Iceberg catalog.
pub fn is_create_in_iceberg(
    statement: &Statement,
    connectors: &Connectors,
    catalog: &str,
    schema: &str,
    normalize: bool,
) -> bool {
    let Statement::CreateTable(ct) = statement else { return false };
    let Ok(name) = object_name_to_table_reference(ct.name.clone(), normalize) else { return false };
    iceberg_target(connectors, &name, catalog, schema).is_some()
}

/// Reads Trino's `format` and `partitioning` and takes them off the statement.
pub fn take_properties(ct: &mut CreateTable) -> Result<IcebergProperties, QueryError> {
    let mut props = IcebergProperties::default();
    for (key, value) in take_with_properties(ct)? {
        match key.as_str() {
            "format" if unquote(&value).eq_ignore_ascii_case("PARQUET") => {}
            "format" => {
                let m = format!("format {value}: Iceberg tables are written as PARQUET");
                return Err(QueryError::new(ErrorCode::NotSupported, m));
            }
            "partitioning" => props.partitioning = array_property(&key, &value)?,
            other => {
                let m = format!("table property '{other}' (Iceberg tables take format and partitioning)");
                return Err(QueryError::new(ErrorCode::NotSupported, m));
            }
        }
    }
    Ok(props)
}

/// `input` with its columns cast to the types and names of `table`.
fn cast_to(input: Arc<dyn ExecutionPlan>, table: &SchemaRef) -> Result<Arc<dyn ExecutionPlan>, QueryError> {
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
        .map_err(|e| planning_error(&e))?;
    Ok(Arc::new(ProjectionExec::try_new(exprs, input).map_err(|e| planning_error(&e))?))
}

/// Plans `CREATE TABLE [AS]` into an Iceberg catalog (DataFusion planned it as an
/// in-memory table, `WITH` taken off).
pub async fn plan_create(
    ctx: &SessionContext,
    connectors: &Connectors,
    logical: &LogicalPlan,
    props: IcebergProperties,
    query_id: &str,
    catalog: &str,
    schema: &str,
) -> Result<Option<PlannedWrite>, QueryError> {
    let LogicalPlan::Ddl(DdlStatement::CreateMemoryTable(c)) = logical else { return Ok(None) };
    let Some((connector, full)) = iceberg_target(connectors, &c.name, catalog, schema) else { return Ok(None) };
    let iceberg = iceberg_of(connector);
    let (schema, table) = (full.schema().unwrap_or_default().to_string(), full.table().to_string());
    if c.or_replace {
        return Err(QueryError::new(ErrorCode::NotSupported, "CREATE OR REPLACE TABLE in an Iceberg catalog"));
    }
    if !iceberg.has_schema(&schema).await.map_err(|e| planning_error(&e))? {
        return Err(QueryError::new(ErrorCode::SchemaNotFound, format!("Schema '{catalog}.{schema}' does not exist")));
    }
    if iceberg.table_layout(&schema, &table).await.map_err(|e| planning_error(&e))?.is_some() {
        if c.if_not_exists {
            return Ok(None);
        }
        return Err(QueryError::new(ErrorCode::GenericUserError, format!("Table '{full}' already exists")));
    }
    let columns = Arc::new(table_schema(c.input.schema().as_arrow()).map_err(|e| planning_error(&e))?);
    let unbound = partition_spec(&columns, &props.partitioning).map_err(|e| planning_error(&e))?;
    let spec =
        Arc::new(unbound.clone().bind(columns.clone()).map_err(|e| planning_error(&iceberg_error("partitioning", e)))?);
    let input = ctx.state().create_physical_plan(&c.input).await.map_err(|e| planning_error(&e))?;
    let written = crate::connector::iceberg::schema::arrow_schema(&columns).map_err(|e| planning_error(&e))?;
    let location = iceberg.new_table_location(&schema, &table);
    let publish = IcebergPublish::new(schema, table, location, columns, spec, Some(unbound));
    plan_write(ctx, connector, full, cast_to(input, &written)?, &written, publish, query_id).map(Some)
}

/// Plans `INSERT INTO` an Iceberg table.
pub async fn plan_insert(
    ctx: &SessionContext,
    connectors: &Connectors,
    logical: &LogicalPlan,
    query_id: &str,
    catalog: &str,
    schema: &str,
) -> Result<Option<PlannedWrite>, QueryError> {
    let LogicalPlan::Dml(DmlStatement { table_name, target, op, input, .. }) = logical else { return Ok(None) };
    let Some((connector, full)) = iceberg_target(connectors, table_name, catalog, schema) else { return Ok(None) };
    let WriteOp::Insert(InsertOp::Append) = op else {
        return Err(QueryError::new(ErrorCode::NotSupported, format!("{op} on Iceberg table '{full}'")));
    };
    let iceberg = iceberg_of(connector);
    let (schema, table) = (full.schema().unwrap_or_default().to_string(), full.table().to_string());
    let layout = iceberg
        .table_layout(&schema, &table)
        .await
        .map_err(|e| planning_error(&e))?
        .ok_or_else(|| QueryError::new(ErrorCode::TableNotFound, format!("Table '{full}' does not exist")))?;
    let written = datafusion::datasource::source_as_provider(target).map_err(|e| planning_error(&e))?.schema();
    let input = ctx.state().create_physical_plan(input).await.map_err(|e| planning_error(&e))?;
    let publish = IcebergPublish::new(schema, table, layout.location, layout.schema, layout.spec, None);
    plan_write(ctx, connector, full, cast_to(input, &written)?, &written, publish, query_id).map(Some)
}

/// `input` with the hidden column `$partition` after the table's columns, computed
/// by the spec's transforms, and its rows hashed by it to the writers, as Trino's
/// preferred write partitioning does: a partition is then one file per write, not
/// one per writer that saw a row of it. `input` itself for an unpartitioned table.
fn with_partition_key(
    ctx: &SessionContext,
    input: Arc<dyn ExecutionPlan>,
    publish: &IcebergPublish,
) -> Result<Arc<dyn ExecutionPlan>, QueryError> {
    if publish.spec.is_unpartitioned() {
        return Ok(input);
    }
    let schema = input.schema();
    let fields = partition::arguments(&publish.spec, &publish.columns, &schema).map_err(|e| planning_error(&e))?;
    let mut args: Vec<Arc<dyn PhysicalExpr>> = Vec::with_capacity(fields.len() * 2);
    for (transform, column) in fields {
        args.push(Arc::new(Literal::new(ScalarValue::Utf8(Some(transform)))));
        args.push(Arc::new(Column::new(schema.field(column).name(), column)));
    }
    let state = ctx.state();
    let function =
        state.scalar_functions().get(partition::PARTITION_FUNCTION).cloned().ok_or_else(|| {
            QueryError::new(ErrorCode::GenericInternalError, "the Iceberg partition function is missing")
        })?;
    let options = Arc::new(state.config_options().as_ref().clone());
    let key = ScalarFunctionExpr::try_new(function, args, &schema, options).map_err(|e| planning_error(&e))?;
    let mut exprs: Vec<(Arc<dyn PhysicalExpr>, String)> = schema
        .fields()
        .iter()
        .enumerate()
        .map(|(i, f)| (Arc::new(Column::new(f.name(), i)) as Arc<dyn PhysicalExpr>, f.name().clone()))
        .collect();
    exprs.push((Arc::new(key), partition::PARTITION_COLUMN.to_string()));
    let keyed: Arc<dyn ExecutionPlan> =
        Arc::new(ProjectionExec::try_new(exprs, input).map_err(|e| planning_error(&e))?);
    let key = col(partition::PARTITION_COLUMN, &keyed.schema()).map_err(|e| planning_error(&e))?;
    let hashed = RepartitionExec::try_new(keyed, Partitioning::Hash(vec![key], state.config().target_partitions()));
    Ok(Arc::new(hashed.map_err(|e| planning_error(&e))?))
}

fn plan_write(
    ctx: &SessionContext,
    connector: &Arc<dyn Connector>,
    full: TableReference,
    input: Arc<dyn ExecutionPlan>,
    written: &SchemaRef,
    publish: IcebergPublish,
    query_id: &str,
) -> Result<PlannedWrite, QueryError> {
    let data = format!("{}/data/", publish.location);
    let mut field_ids: Vec<i32> = written.fields().iter().map(|f| field_id(f).unwrap_or_default()).collect();
    let mut partition_columns = Vec::new();
    if !publish.spec.is_unpartitioned() {
        // The key column is split off before the files are written: its id is never seen.
        field_ids.push(0);
        partition_columns.push(partition::PARTITION_COLUMN.to_string());
    }
    // Without Arrow's schema in the footer: its view types would reach other readers
    // (pyarrow cannot filter `string_view`), and Iceberg's schema is the one that counts.
    let options = HashMap::from([("format.skip_arrow_metadata".to_string(), "true".to_string())]);
    let target = WriteTarget {
        staging: staging_of(&data, query_id),
        format: "PARQUET".into(),
        options,
        partition_columns,
        not_null: Vec::new(),
        field_ids,
    };
    let input = with_partition_key(ctx, input, &publish)?;
    let commit = TableCommit::new(ctx, connector.clone(), full, data, None).for_iceberg(publish);
    Ok(writing(input, target, commit))
}

/// The end of a write into an Iceberg table, once its files are in `data/`.
#[derive(Debug)]
pub struct IcebergPublish {
    schema: String,
    table: String,
    /// The table's location, without a trailing `/`.
    location: String,
    /// The table's columns and partitioning the files were written by.
    columns: Arc<iceberg::spec::Schema>,
    spec: Arc<PartitionSpec>,
    /// For `CREATE TABLE`: the new table's partitioning, as it is made.
    create: Option<UnboundPartitionSpec>,
    /// Each moved file's partition, by its place in the table.
    partitions: parking_lot::Mutex<HashMap<Path, Struct>>,
}

impl IcebergPublish {
    fn new(
        schema: String,
        table: String,
        location: String,
        columns: Arc<iceberg::spec::Schema>,
        spec: Arc<PartitionSpec>,
        create: Option<UnboundPartitionSpec>,
    ) -> Self {
        let partitions = Default::default();
        IcebergPublish { schema, table, location, columns, spec, create, partitions }
    }

    pub fn creates(&self) -> bool {
        self.create.is_some()
    }

    /// Where a file a writer left at `parts` (below its directory) goes below
    /// `table`: a partitioned table's key directory becomes the partition's
    /// directories as Iceberg names them, and the file's partition is kept for the
    /// commit.
    pub fn destination(&self, table: &Path, parts: Vec<PathPart<'_>>) -> Result<Path, QueryError> {
        let prefix = PathPart::from(format!("{}=", partition::PARTITION_COLUMN));
        let mut dest = table.clone();
        let mut partition = None;
        for part in parts {
            match part.as_ref().strip_prefix(prefix.as_ref()) {
                Some(key) if partition.is_none() && !self.spec.is_unpartitioned() => {
                    let p = partition::decode(key, &self.spec, &self.columns).map_err(|e| planning_error(&e))?;
                    let dirs = partition::path_parts(&self.spec, &self.columns, &p).map_err(|e| planning_error(&e))?;
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
    pub async fn commit(
        &self,
        connector: &dyn Connector,
        store: &Arc<dyn ObjectStore>,
        store_url: &str,
        files: &[Path],
    ) -> Result<(), QueryError> {
        let iceberg = connector.iceberg().expect("an Iceberg catalog");
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
                .map_err(|e| planning_error(&e))?;
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
            return Err(planning_error(&e));
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
