//! Writes into catalogs of files: `CREATE TABLE c.s.t [WITH (format = 'PARQUET',
//! partitioned_by = ARRAY['col'])] AS SELECT ...` and `INSERT INTO c.s.t SELECT ...`.
//! Planning (`plan_ctas`, `plan_insert`) turns the statement into writers over the
//! query's partitions (`TableWriterExec`, run by workers like any stage) under a
//! `TableCommitExec` root that runs on the coordinator (`table_commit`);
//! `QueryExecution` keeps the `TableCommit` and calls `finish` when the query ends.
//!
//! Why staging: the writers put their files under `LOCATION/.flotilla-staging-QUERY/`,
//! a directory DataFusion's listing skips, and the commit moves into the table only
//! the directories that successful writers reported, once every writer has succeeded.
//! A failed or cancelled write leaves the table as it was, and `finish` removes the
//! staging directory (again a little later, for a write still in flight on a worker
//! that was told to stop). A CTAS table appears in the catalog (and its metastore)
//! only after its files are in place.

use std::sync::Arc;

use datafusion::arrow::datatypes::{Field, Schema};
use datafusion::common::{Constraints, DFSchema, TableReference};
use datafusion::datasource::listing::{ListingTable, ListingTableUrl};
use datafusion::datasource::source_as_provider;
use datafusion::error::Result;
use datafusion::logical_expr::dml::InsertOp;
use datafusion::logical_expr::{CreateExternalTable, DdlStatement, DmlStatement, LogicalPlan, WriteOp};
use datafusion::physical_plan::coalesce_partitions::CoalescePartitionsExec;
use datafusion::physical_plan::ExecutionPlan;
use datafusion::prelude::SessionContext;
use datafusion::sql::planner::object_name_to_table_reference;
use datafusion::sql::sqlparser::ast::{CreateTable, CreateTableOptions, Expr as SqlExpr, SqlOption, Statement};
use futures::StreamExt;

use super::planner::{planning_error, QueryError};
use super::table_commit::{external, TableCommit, TableCommitExec};
use crate::connector::{Connector, Connectors};
use crate::error_code::ErrorCode;
use crate::plan::table_writer::{TableWriterExec, WriteTarget};

/// `WITH (...)` of a `CREATE TABLE ... AS`: Trino's table properties.
#[derive(Debug, Default, PartialEq)]
pub struct TableProperties {
    pub format: Option<String>,
    pub partitioned_by: Vec<String>,
    /// `COMMENT '...'` (taken off the text before parsing: `relations`).
    pub comment: Option<String>,
}

/// A property's value as written, without its quotes.
pub(super) fn unquote(e: &SqlExpr) -> String {
    let s = e.to_string();
    s.trim_matches('\'').trim_matches('"').to_string()
}

/// The `WITH (key = value, ...)` of a `CREATE TABLE`, taken off the statement so
/// that DataFusion plans the rest: (key in lower case, value) pairs.
pub(super) fn take_with_properties(ct: &mut CreateTable) -> Result<Vec<(String, SqlExpr)>, QueryError> {
    let options = match std::mem::take(&mut ct.table_options) {
        CreateTableOptions::None => return Ok(Vec::new()),
        CreateTableOptions::With(o) => o,
        other => {
            return Err(QueryError::new(ErrorCode::NotSupported, format!("table options '{other}': use WITH (...)")))
        }
    };
    options
        .into_iter()
        .map(|o| match o {
            SqlOption::KeyValue { key, value } => Ok((key.value.to_lowercase(), value)),
            o => Err(QueryError::new(ErrorCode::NotSupported, format!("table property '{o}'"))),
        })
        .collect()
}

/// The unquoted elements of an `ARRAY[...]` property (`partitioned_by`, `partitioning`).
pub(super) fn array_property(key: &str, value: &SqlExpr) -> Result<Vec<String>, QueryError> {
    match value {
        SqlExpr::Array(a) => Ok(a.elem.iter().map(unquote).collect()),
        other => Err(QueryError::new(
            ErrorCode::GenericUserError,
            format!("{key} must be an ARRAY of column names, got {other}"),
        )),
    }
}

/// Reads `format` and `partitioned_by`, and takes them off the statement.
pub fn take_table_properties(ct: &mut CreateTable) -> Result<TableProperties, QueryError> {
    let mut props = TableProperties::default();
    for (key, value) in take_with_properties(ct)? {
        match key.as_str() {
            "format" => {
                let f = unquote(&value).to_uppercase();
                if !["PARQUET", "CSV", "JSON"].contains(&f.as_str()) {
                    return Err(QueryError::new(
                        ErrorCode::NotSupported,
                        format!("format '{f}': tables are written as PARQUET, CSV or JSON"),
                    ));
                }
                props.format = Some(f);
            }
            "partitioned_by" => props.partitioned_by = array_property(&key, &value)?,
            other => {
                return Err(QueryError::new(ErrorCode::NotSupported, format!("table property '{other}'")));
            }
        }
    }
    Ok(props)
}

/// The catalog a table name falls in when its connector is of the kind `is_kind`
/// tells, with the name resolved against the session's catalog and schema.
pub(super) fn catalog_target<'a>(
    connectors: &'a Connectors,
    name: &TableReference,
    catalog: &str,
    schema: &str,
    is_kind: fn(&dyn Connector) -> bool,
) -> Option<(&'a Arc<dyn Connector>, TableReference)> {
    let catalog = name.catalog().unwrap_or(catalog);
    let connector = connectors.get(catalog)?;
    if !is_kind(connector.as_ref()) {
        return None;
    }
    Some((connector, TableReference::full(catalog, name.schema().unwrap_or(schema), name.table())))
}

/// The files catalog named by `name`, with its schema and table names resolved.
pub(super) fn files_target<'a>(
    connectors: &'a Connectors,
    name: &TableReference,
    catalog: &str,
    schema: &str,
) -> Option<(&'a Arc<dyn Connector>, String, String, String)> {
    let catalog = name.catalog().unwrap_or(catalog).to_string();
    let schema = name.schema().unwrap_or(schema).to_string();
    let connector = connectors.get(&catalog)?;
    connector.files()?;
    Some((connector, catalog, schema, name.table().to_string()))
}

/// Whether a statement creates a table in a catalog of files: from a query, or
/// empty from its columns (`CREATE TABLE t (a integer, b varchar)`).
/// `normalize`: the session's `enable_ident_normalization`, as DataFusion resolves
/// the same name.
pub fn is_ctas_into_files(
    statement: &Statement,
    connectors: &Connectors,
    catalog: &str,
    schema: &str,
    normalize: bool,
) -> bool {
    let Statement::CreateTable(ct) = statement else { return false };
    if ct.query.is_none() && ct.columns.is_empty() {
        return false;
    }
    let Ok(name) = object_name_to_table_reference(ct.name.clone(), normalize) else { return false };
    files_target(connectors, &name, catalog, schema).is_some()
}

/// A planned write: the query whose rows are written, where they go, and the commit
/// it ends with.
pub struct PlannedWrite {
    pub input: Arc<dyn ExecutionPlan>,
    target: WriteTarget,
    pub commit: Arc<TableCommit>,
}

impl PlannedWrite {
    /// The whole plan over `input` (the query's plan, made ready for distribution):
    /// writers over its partitions, gathered always through a `CoalescePartitionsExec`
    /// (the cut the fragmenter makes between the workers' writers and the
    /// coordinator's commit), then the commit.
    pub fn assemble(&self, input: Arc<dyn ExecutionPlan>) -> Arc<dyn ExecutionPlan> {
        let writers: Arc<dyn ExecutionPlan> = Arc::new(TableWriterExec::new(input, self.target.clone()));
        let gathered = Arc::new(CoalescePartitionsExec::new(writers));
        Arc::new(TableCommitExec::new(gathered, self.commit.clone()))
    }
}

/// Plans `CREATE TABLE ... AS` (already planned by DataFusion as an in-memory
/// table, `WITH` taken off) into the catalog of files it names; a `CREATE TABLE`
/// with columns only is one over no rows, and makes an empty table.
#[allow(clippy::too_many_arguments)]
pub async fn plan_ctas(
    ctx: &SessionContext,
    connectors: &Connectors,
    logical: &LogicalPlan,
    props: TableProperties,
    query_id: &str,
    catalog: &str,
    schema: &str,
) -> Result<Option<PlannedWrite>, QueryError> {
    let LogicalPlan::Ddl(DdlStatement::CreateMemoryTable(c)) = logical else { return Ok(None) };
    let Some((connector, catalog, schema, table)) = files_target(connectors, &c.name, catalog, schema) else {
        return Ok(None);
    };
    let files = connector.files().expect("a files catalog");
    let full = TableReference::full(catalog.as_str(), schema.as_str(), table.as_str());
    refuse_delta_lake(files, &full, "Writing")?;
    let Some(schema_provider) = connector.catalog().schema(&schema) else {
        return Err(QueryError::new(ErrorCode::SchemaNotFound, format!("Schema '{catalog}.{schema}' does not exist")));
    };
    if c.or_replace {
        return Err(QueryError::new(ErrorCode::NotSupported, "CREATE OR REPLACE TABLE ... AS"));
    }
    if schema_provider.table_exist(&table) {
        if c.if_not_exists {
            return Ok(None);
        }
        return Err(QueryError::new(ErrorCode::GenericUserError, format!("Table '{full}' already exists")));
    }
    let location =
        files.new_managed_location(&schema, &table).map_err(|m| QueryError::new(ErrorCode::GenericUserError, m))?;
    let location = location.ok_or_else(|| {
        QueryError::new(
            ErrorCode::NotSupported,
            format!(
                "catalog '{catalog}' has no files.warehouse: CREATE TABLE ... AS needs one to place the table's files"
            ),
        )
    })?;
    if !connector.allows_location(&location) {
        return Err(QueryError::new(
            ErrorCode::PermissionDenied,
            format!("Access Denied: '{location}' is not allowed"),
        ));
    }
    let input_schema = c.input.schema().clone();
    let names: Vec<String> = input_schema.fields().iter().map(|f| f.name().clone()).collect();
    let p = props.partitioned_by.len();
    if p > 0 && (p >= names.len() || names[names.len() - p..] != props.partitioned_by[..]) {
        return Err(QueryError::new(
            ErrorCode::GenericUserError,
            format!(
                "partitioned_by {:?} must name the last columns of the query, in order (the query has {:?})",
                props.partitioned_by, names
            ),
        ));
    }
    let format = props.format.unwrap_or_else(|| "PARQUET".into());
    // Refuse to write into files another table (or a person) left there.
    let runtime = ctx.runtime_env();
    let url = ListingTableUrl::parse(&location).map_err(|e| planning_error(&e))?;
    let store = runtime.object_store(url.object_store()).map_err(|e| planning_error(&e))?;
    match store.list(Some(url.prefix())).next().await {
        None | Some(Err(object_store::Error::NotFound { .. })) => {}
        Some(Err(e)) => return Err(external(&e, &location)),
        Some(Ok(first)) if super::staging::in_staging(&first.location) => {
            return Err(QueryError::new(
                ErrorCode::GenericUserError,
                format!(
                    "Target location for table '{full}' holds the staging files of another write to it, still \
                     running or left by a coordinator that stopped (a restart removes those): {location} ({})",
                    first.location
                ),
            ))
        }
        Some(Ok(first)) => {
            return Err(QueryError::new(
                ErrorCode::GenericUserError,
                format!("Target location for table '{full}' already holds files: {location} ({})", first.location),
            ))
        }
    }
    let fields: Vec<Field> = input_schema.fields().iter().map(|f| f.as_ref().clone()).collect();
    let table_schema = Arc::new(DFSchema::try_from(Schema::new(fields)).map_err(|e| planning_error(&e))?);
    let create = CreateExternalTable {
        schema: table_schema,
        name: full.clone(),
        locations: vec![location.clone()],
        file_type: format.clone(),
        table_partition_cols: props.partitioned_by.clone(),
        if_not_exists: false,
        or_replace: false,
        temporary: false,
        definition: None,
        order_exprs: vec![],
        unbounded: false,
        options: Default::default(),
        constraints: Constraints::default(),
        column_defaults: Default::default(),
    };
    let input = ctx.state().create_physical_plan(&c.input).await.map_err(|e| planning_error(&e))?;
    let target = WriteTarget {
        staging: staging_of(&location, query_id),
        format,
        options: Default::default(),
        partition_columns: props.partitioned_by,
        not_null: Vec::new(),
        field_ids: Vec::new(),
    };
    let commit = TableCommit::new(ctx, connector.clone(), full, location, Some(create)).with_comment(props.comment);
    Ok(Some(writing(input, target, commit)))
}

/// Delta tables are read, not written: a write would need a commit to their log.
/// `doing`: "Writing", "Deleting from".
pub(super) fn refuse_delta_lake(
    files: &crate::connector::files::FilesConnector,
    full: &TableReference,
    doing: &str,
) -> Result<(), QueryError> {
    match files.is_delta_lake() {
        true => Err(QueryError::new(
            ErrorCode::NotSupported,
            format!("{doing} Delta Lake tables is not supported ('{full}' is in a delta_lake catalog)"),
        )),
        false => Ok(()),
    }
}

/// The listing table a statement writes, and its one directory; `verb` ("insert",
/// "delete") says what cannot be done to a table of another kind.
pub(super) fn table_directory<'a>(
    provider: &'a Arc<dyn datafusion::catalog::TableProvider>,
    full: &TableReference,
    verb: &str,
) -> Result<(&'a ListingTable, &'a ListingTableUrl), QueryError> {
    let Some(listing) = provider.downcast_ref::<ListingTable>() else {
        return Err(QueryError::new(ErrorCode::NotSupported, format!("'{full}' cannot be written")));
    };
    let [path] = listing.table_paths().as_slice() else {
        return Err(QueryError::new(ErrorCode::NotSupported, format!("'{full}' has several locations: cannot {verb}")));
    };
    if !path.is_collection() {
        return Err(QueryError::new(ErrorCode::NotSupported, format!("'{full}' is one file: cannot {verb}")));
    }
    Ok((listing, path))
}

/// Plans `INSERT INTO` a table of a catalog of files.
pub async fn plan_insert(
    ctx: &SessionContext,
    connectors: &Connectors,
    logical: &LogicalPlan,
    query_id: &str,
    catalog: &str,
    schema: &str,
) -> Result<Option<PlannedWrite>, QueryError> {
    let LogicalPlan::Dml(DmlStatement { table_name, target, op: WriteOp::Insert(op), input, .. }) = logical else {
        return Ok(None);
    };
    let Some((connector, catalog, schema, table)) = files_target(connectors, table_name, catalog, schema) else {
        return Ok(None);
    };
    let full = TableReference::full(catalog.as_str(), schema.as_str(), table.as_str());
    refuse_delta_lake(connector.files().expect("a files catalog"), &full, "Writing")?;
    if *op != InsertOp::Append {
        return Err(QueryError::new(ErrorCode::NotSupported, format!("INSERT {op} into '{full}': only appending")));
    }
    let provider = source_as_provider(target).map_err(|e| planning_error(&e))?;
    let (listing, path) = table_directory(&provider, &full, "insert")?;
    let location = path.as_str().to_string();
    let entry = connector.files().and_then(|f| f.metastore()).and_then(|m| m.table(&schema, &table));
    let definition = match &entry {
        Some(e) => match e.plan(&ctx.task_ctx()).map_err(|e| planning_error(&e))? {
            LogicalPlan::Ddl(DdlStatement::CreateExternalTable(c)) => Some(c),
            _ => None,
        },
        None => None,
    };
    let format = listing.options().format.get_ext().to_uppercase();
    let input = ctx.state().create_physical_plan(input).await.map_err(|e| planning_error(&e))?;
    let target = WriteTarget {
        staging: staging_of(&location, query_id),
        format,
        options: definition.map(|d| d.options).unwrap_or_default(),
        partition_columns: listing.options().table_partition_cols.iter().map(|(n, _)| n.clone()).collect(),
        not_null: Vec::new(),
        field_ids: Vec::new(),
    };
    let commit = TableCommit::new(ctx, connector.clone(), full, location, None).into_table(provider);
    Ok(Some(writing(input, target, commit)))
}

pub(super) fn writing(input: Arc<dyn ExecutionPlan>, target: WriteTarget, commit: TableCommit) -> PlannedWrite {
    let commit = Arc::new(commit.with_staging(target.staging.clone()));
    PlannedWrite { input, target, commit }
}

pub(super) fn staging_of(location: &str, query_id: &str) -> String {
    let prefix = super::staging::STAGING_PREFIX;
    format!("{}/{prefix}{}-{}/", location.trim_end_matches('/'), query_id, crate::util::random_suffix(6))
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::sql::sqlparser::dialect::GenericDialect;
    use datafusion::sql::sqlparser::parser::Parser;

    fn create_table(sql: &str) -> CreateTable {
        match Parser::parse_sql(&GenericDialect {}, sql).unwrap().remove(0) {
            Statement::CreateTable(ct) => ct,
            other => panic!("not a CREATE TABLE: {other}"),
        }
    }

    #[test]
    fn trino_table_properties_are_read_and_taken_off() {
        let mut ct = create_table(
            "CREATE TABLE lake.s.t WITH (format = 'parquet', partitioned_by = ARRAY['y', 'm']) AS SELECT 1 AS a",
        );
        let p = take_table_properties(&mut ct).unwrap();
        assert_eq!(
            p,
            TableProperties {
                format: Some("PARQUET".into()),
                partitioned_by: vec!["y".into(), "m".into()],
                comment: None
            }
        );
        assert!(matches!(ct.table_options, CreateTableOptions::None));
        let mut bad = create_table("CREATE TABLE t WITH (format = 'ORC') AS SELECT 1");
        assert_eq!(take_table_properties(&mut bad).unwrap_err().error_name, "NOT_SUPPORTED");
        let mut unknown = create_table("CREATE TABLE t WITH (bucket_count = 4) AS SELECT 1");
        assert!(take_table_properties(&mut unknown).unwrap_err().message.contains("bucket_count"));
    }

    #[test]
    fn staging_lies_inside_the_table_in_a_directory_listing_skips() {
        let s = staging_of("s3://b/w/s/t/", "20261201_000001_00001_abcde");
        assert!(s.starts_with("s3://b/w/s/t/.flotilla-staging-20261201_000001_00001_abcde-"));
        assert!(s.ends_with('/') && !s.contains('='));
        assert_eq!(super::super::table_commit::local_dir("file:///tmp/x/"), Some(std::path::PathBuf::from("/tmp/x/")));
        assert_eq!(super::super::table_commit::local_dir("s3://b/x/"), None);
    }
}
