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
//! Not yet: writing partitioned tables (their files must be split by partition
//! value; refused with `NOT_SUPPORTED`), `CREATE OR REPLACE`, `DELETE`, `UPDATE`,
//! `MERGE`.

use std::sync::Arc;

use datafusion::arrow::datatypes::SchemaRef;
use datafusion::common::TableReference;
use datafusion::datasource::physical_plan::parquet::metadata::DFParquetMetadata;
use datafusion::logical_expr::dml::InsertOp;
use datafusion::logical_expr::{DdlStatement, DmlStatement, LogicalPlan, WriteOp};
use datafusion::physical_expr::expressions::{cast, col};
use datafusion::physical_plan::projection::ProjectionExec;
use datafusion::physical_plan::ExecutionPlan;
use datafusion::prelude::SessionContext;
use datafusion::sql::planner::object_name_to_table_reference;
use datafusion::sql::sqlparser::ast::{CreateTable, CreateTableOptions, Expr as SqlExpr, SqlOption, Statement};
use object_store::{ObjectStore, ObjectStoreExt};

use super::planner::{planning_error, QueryError};
use super::table_commit::{external, TableCommit};
use super::write::{staging_of, writing, PlannedWrite};
use crate::connector::field_ids::field_id;
use crate::connector::iceberg::write::{partition_spec, table_schema, WrittenFile};
use crate::connector::iceberg::IcebergConnector;
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
    let catalog = name.catalog().unwrap_or(catalog);
    let connector = connectors.get(catalog)?;
    connector.iceberg()?;
    Some((connector, TableReference::full(catalog, name.schema().unwrap_or(schema), name.table())))
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
    let options = match std::mem::take(&mut ct.table_options) {
        CreateTableOptions::None => return Ok(IcebergProperties::default()),
        CreateTableOptions::With(o) => o,
        other => {
            return Err(QueryError::new(ErrorCode::NotSupported, format!("table options '{other}': use WITH (...)")))
        }
    };
    let mut props = IcebergProperties::default();
    let unquote = |e: &SqlExpr| e.to_string().trim_matches('\'').to_string();
    for o in options {
        let SqlOption::KeyValue { key, value } = o else {
            return Err(QueryError::new(ErrorCode::NotSupported, format!("table property '{o}'")));
        };
        match key.value.to_lowercase().as_str() {
            "format" if unquote(&value).eq_ignore_ascii_case("PARQUET") => {}
            "format" => {
                let m = format!("format {value}: Iceberg tables are written as PARQUET");
                return Err(QueryError::new(ErrorCode::NotSupported, m));
            }
            "partitioning" => match &value {
                SqlExpr::Array(a) => props.partitioning = a.elem.iter().map(unquote).collect(),
                other => {
                    let m = format!("partitioning must be an ARRAY of column names and transforms, got {other}");
                    return Err(QueryError::new(ErrorCode::GenericUserError, m));
                }
            },
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
    let columns = table_schema(c.input.schema().as_arrow()).map_err(|e| planning_error(&e))?;
    let partitioning = match props.partitioning.is_empty() {
        true => None,
        false => {
            let spec = partition_spec(&columns, &props.partitioning).map_err(|e| planning_error(&e))?;
            Some(spec)
        }
    };
    let input = ctx.state().create_physical_plan(&c.input).await.map_err(|e| planning_error(&e))?;
    if partitioning.is_some() && !is_empty(&input) {
        return Err(QueryError::new(
            ErrorCode::NotSupported,
            format!("CREATE TABLE ... AS into a partitioned Iceberg table ('{full}'): writing partitioned tables is not supported yet"),
        ));
    }
    let written = crate::connector::iceberg::schema::arrow_schema(&columns).map_err(|e| planning_error(&e))?;
    let location = iceberg.new_table_location(&schema, &table);
    let publish = IcebergPublish { schema, table, create: Some((columns, partitioning)), location: location.clone() };
    Ok(Some(plan_write(ctx, connector, full, cast_to(input, &written)?, &written, publish, query_id)))
}

/// Whether a plan surely produces no rows (`CREATE TABLE t (columns)`).
fn is_empty(plan: &Arc<dyn ExecutionPlan>) -> bool {
    plan.downcast_ref::<datafusion::physical_plan::empty::EmptyExec>().is_some()
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
    let (location, partitioned) = iceberg
        .table_layout(&schema, &table)
        .await
        .map_err(|e| planning_error(&e))?
        .ok_or_else(|| QueryError::new(ErrorCode::TableNotFound, format!("Table '{full}' does not exist")))?;
    if partitioned {
        return Err(QueryError::new(
            ErrorCode::NotSupported,
            format!("INSERT into partitioned Iceberg table '{full}': writing partitioned tables is not supported yet"),
        ));
    }
    let written = datafusion::datasource::source_as_provider(target).map_err(|e| planning_error(&e))?.schema();
    let input = ctx.state().create_physical_plan(input).await.map_err(|e| planning_error(&e))?;
    let publish = IcebergPublish { schema, table, create: None, location };
    Ok(Some(plan_write(ctx, connector, full, cast_to(input, &written)?, &written, publish, query_id)))
}

fn plan_write(
    ctx: &SessionContext,
    connector: &Arc<dyn Connector>,
    full: TableReference,
    input: Arc<dyn ExecutionPlan>,
    written: &SchemaRef,
    publish: IcebergPublish,
    query_id: &str,
) -> PlannedWrite {
    let data = format!("{}/data/", publish.location);
    let target = WriteTarget {
        staging: staging_of(&data, query_id),
        format: "PARQUET".into(),
        options: Default::default(),
        partition_columns: Vec::new(),
        not_null: Vec::new(),
        field_ids: written.fields().iter().map(|f| field_id(f).unwrap_or_default()).collect(),
    };
    let commit = TableCommit::new(ctx, connector.clone(), full, data, None).for_iceberg(publish);
    writing(input, target, commit)
}

/// The end of a write into an Iceberg table, once its files are in `data/`.
#[derive(Debug)]
pub struct IcebergPublish {
    schema: String,
    table: String,
    /// For `CREATE TABLE`: the new table's columns and partitioning.
    create: Option<(iceberg::spec::Schema, Option<iceberg::spec::UnboundPartitionSpec>)>,
    /// The table's location, without a trailing `/`.
    location: String,
}

impl IcebergPublish {
    pub fn creates(&self) -> bool {
        self.create.is_some()
    }

    /// Makes the table (for `CREATE TABLE`) and appends `files` (paths in `store`,
    /// whose URL is `store_url`) as one snapshot.
    pub async fn commit(
        &self,
        connector: &dyn Connector,
        store: &Arc<dyn ObjectStore>,
        store_url: &str,
        files: &[object_store::path::Path],
    ) -> Result<(), QueryError> {
        let iceberg = connector.iceberg().expect("an Iceberg catalog");
        let mut written = Vec::with_capacity(files.len());
        for path in files {
            let location = format!("{}/{path}", store_url.trim_end_matches('/'));
            let meta = store.head(path).await.map_err(|e| external(&e, &location))?;
            let footer = DFParquetMetadata::new(store.as_ref(), &meta).fetch_metadata().await;
            let rows = footer.map_err(|e| external(&e, &location))?.file_metadata().num_rows().max(0) as u64;
            written.push(WrittenFile { location, size: meta.size, rows });
        }
        if let Some((columns, partitioning)) = &self.create {
            iceberg
                .create_table(&self.schema, &self.table, columns.clone(), partitioning.clone(), &self.location)
                .await
                .map_err(|e| planning_error(&e))?;
        }
        if written.is_empty() {
            return Ok(());
        }
        if let Err(e) = iceberg.append(&self.schema, &self.table, &written).await {
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
}
