//! Writes into a catalog of files (`connector::writes`): `CREATE TABLE c.s.t [WITH
//! (format = 'PARQUET', partitioned_by = ARRAY['col'])] [AS SELECT ...]`, `INSERT
//! INTO`, and the row-level changes (`DELETE`, `UPDATE`, `MERGE`).
//!
//! The writers put their files in a staging directory inside the table
//! (`staged_files`); `FilesPublish` moves the reported ones in once every writer has
//! succeeded. A `CREATE TABLE` table appears in the catalog (and its metastore) only
//! after its files are in place. A row-level change is copy-on-write: its writers
//! write every row the change keeps, and the publish replaces all the files the
//! change read with them, if the table's files are still exactly those; otherwise
//! another write committed meanwhile and the change fails as a conflict. A failed or
//! cancelled write leaves the table as it was.

use std::sync::Arc;

use async_trait::async_trait;
use datafusion::catalog::TableProvider;
use datafusion::common::tree_node::{TreeNode, TreeNodeRecursion};
use datafusion::common::{Constraints, DFSchema, TableReference};
use datafusion::datasource::listing::{ListingTable, ListingTableUrl};
use datafusion::datasource::physical_plan::FileScanConfig;
use datafusion::datasource::source::DataSourceExec;
use datafusion::execution::runtime_env::RuntimeEnv;
use datafusion::logical_expr::{CreateExternalTable, DdlStatement, LogicalPlan, LogicalPlanBuilder};
use datafusion::physical_plan::ExecutionPlan;
use datafusion::prelude::SessionContext;
use futures::StreamExt;
use object_store::path::Path;
use object_store::ObjectStoreExt;

use super::FilesConnector;
use crate::connector::metastore::{Metastore, TableEntry};
use crate::connector::staged_files::{external, in_staging, remove_staging, same_place, StagedFiles};
use crate::connector::writes::{
    array_property, conflict, unknown_property, unquote, Classify, ConnectorWrite, ConnectorWrites, CreateTable,
    Fragment, RowChange, WritePublish, WriteRequest, WriteTarget,
};
use crate::connector::Connector;
use crate::error_code::{ErrorCode, QueryError};

/// Trino's table properties a catalog of files takes.
#[derive(Debug, Default, PartialEq)]
pub struct FilesProperties {
    pub format: Option<String>,
    pub partitioned_by: Vec<String>,
}

impl FilesProperties {
    pub fn read(properties: Vec<(String, datafusion::sql::sqlparser::ast::Expr)>) -> Result<Self, QueryError> {
        let mut props = FilesProperties::default();
        for (key, value) in properties {
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
                other => return Err(unknown_property(other, "")),
            }
        }
        Ok(props)
    }
}

impl FilesConnector {
    /// Delta tables are read, not written: a write would need a commit to their log.
    fn refuse_delta_lake(&self, full: &TableReference, doing: &str) -> Result<(), QueryError> {
        match self.is_delta_lake() {
            true => Err(QueryError::new(
                ErrorCode::NotSupported,
                format!("{doing} Delta Lake tables is not supported ('{full}' is in a delta_lake catalog)"),
            )),
            false => Ok(()),
        }
    }

    /// The format options the metastore keeps for `schema.table`.
    fn table_options(
        &self,
        request: &WriteRequest<'_>,
    ) -> Result<std::collections::HashMap<String, String>, QueryError> {
        let (schema, table) = (request.table.schema().unwrap_or_default(), request.table.table());
        let Some(entry) = self.metastore().and_then(|m| m.table(schema, table)) else { return Ok(Default::default()) };
        match entry.plan(&request.ctx.task_ctx()).map_err(|e| request.error(&e))? {
            LogicalPlan::Ddl(DdlStatement::CreateExternalTable(c)) => Ok(c.options),
            _ => Ok(Default::default()),
        }
    }

    /// Refuses to write a new table into files another table (or a person) left there.
    async fn check_empty_location(&self, request: &WriteRequest<'_>, location: &str) -> Result<(), QueryError> {
        let full = &request.table;
        let url = ListingTableUrl::parse(location).map_err(|e| request.error(&e))?;
        let store = request.ctx.runtime_env().object_store(url.object_store()).map_err(|e| request.error(&e))?;
        match store.list(Some(url.prefix())).next().await {
            None | Some(Err(object_store::Error::NotFound { .. })) => Ok(()),
            Some(Err(e)) => Err(external(&e, location)),
            Some(Ok(first)) if in_staging(&first.location) => Err(QueryError::new(
                ErrorCode::GenericUserError,
                format!(
                    "Target location for table '{full}' holds the staging files of another write to it, still \
                     running or left by a coordinator that stopped (a restart removes those): {location} ({})",
                    first.location
                ),
            )),
            Some(Ok(first)) => Err(QueryError::new(
                ErrorCode::GenericUserError,
                format!("Target location for table '{full}' already holds files: {location} ({})", first.location),
            )),
        }
    }

    /// Where and how rows written into the existing `table` at `location` go: its
    /// format, options and partition columns.
    fn target_of(
        &self,
        request: &WriteRequest<'_>,
        listing: &ListingTable,
        location: &str,
        table: &Arc<dyn TableProvider>,
    ) -> Result<WriteTarget, QueryError> {
        let format = listing.options().format.get_ext().to_uppercase();
        let mut target = WriteTarget::new(request.staging_in(location), &format);
        target.options = self.table_options(request)?;
        target.partition_columns = listing.options().table_partition_cols.iter().map(|(n, _)| n.clone()).collect();
        // A NULL in a column the table declares NOT NULL would make its files
        // unreadable: the writers refuse it.
        target.not_null = crate::connector::writes::not_null_columns(&table.schema());
        Ok(target)
    }

    fn publish(&self, request: &WriteRequest<'_>, location: String, staging: &str) -> FilesPublish {
        let location = if location.ends_with('/') { location } else { format!("{location}/") };
        FilesPublish {
            ctx: request.ctx.clone(),
            runtime: request.ctx.runtime_env(),
            table: request.table.clone(),
            location,
            staging: staging.to_string(),
            classify: request.classify,
            create: None,
            comment: None,
            metastore: self.metastore().cloned(),
            replaces: None,
        }
    }
}

#[async_trait]
impl ConnectorWrites for FilesConnector {
    async fn begin_create_table(
        &self,
        request: &WriteRequest<'_>,
        create: CreateTable<'_>,
    ) -> Result<Option<ConnectorWrite>, QueryError> {
        let c = create.plan;
        let props = FilesProperties::read(create.properties)?;
        let full = &request.table;
        let (schema, table) = (full.schema().unwrap_or_default(), full.table());
        self.refuse_delta_lake(full, "Writing")?;
        let catalog = self.catalog_name();
        let Some(schema_provider) = self.catalog().schema(schema) else {
            return Err(QueryError::new(
                ErrorCode::SchemaNotFound,
                format!("Schema '{catalog}.{schema}' does not exist"),
            ));
        };
        if c.or_replace {
            return Err(QueryError::new(ErrorCode::NotSupported, "CREATE OR REPLACE TABLE ... AS"));
        }
        if schema_provider.table_exist(table) {
            if c.if_not_exists {
                return Ok(None);
            }
            return Err(QueryError::new(ErrorCode::GenericUserError, format!("Table '{full}' already exists")));
        }
        let location =
            self.new_managed_location(schema, table).map_err(|m| QueryError::new(ErrorCode::GenericUserError, m))?;
        let location = location.ok_or_else(|| {
            QueryError::new(
                ErrorCode::NotSupported,
                format!(
                    "catalog '{catalog}' has no files.warehouse: CREATE TABLE ... AS needs one to place the table's files"
                ),
            )
        })?;
        if !self.allows_location(&location) {
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
        self.check_empty_location(request, &location).await?;
        // The query's columns as they are, NULL or NOT NULL. Trino makes them all
        // nullable; with nullable columns the S3 TPC-H test's q16 (`NOT IN`, a
        // null-aware anti join) answered no rows until `plan::distribute` kept such a
        // join's probe side whole. Nullable columns here are a change of their own.
        let columns = c.input.schema().as_arrow().clone();
        let table_schema = Arc::new(DFSchema::try_from(columns).map_err(|e| request.error(&e))?);
        let definition = CreateExternalTable {
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
        let input = request.physical(&c.input).await?;
        let mut target = WriteTarget::new(request.staging_in(&location), &format);
        target.partition_columns = props.partitioned_by;
        let mut publish = self.publish(request, location.clone(), &target.staging);
        publish.create = Some(definition);
        publish.comment = create.comment;
        Ok(Some(ConnectorWrite {
            input,
            target,
            publish: Arc::new(publish),
            planned_against: None,
            update_type: "CREATE TABLE",
            location,
        }))
    }

    async fn begin_insert(
        &self,
        request: &WriteRequest<'_>,
        table: Arc<dyn TableProvider>,
        input: &LogicalPlan,
    ) -> Result<ConnectorWrite, QueryError> {
        self.refuse_delta_lake(&request.table, "Writing")?;
        let (listing, path) = table_directory(&table, &request.table, "insert")?;
        let location = path.as_str().to_string();
        let target = self.target_of(request, listing, &location, &table)?;
        let input = request.physical(input).await?;
        let publish = self.publish(request, location.clone(), &target.staging);
        Ok(ConnectorWrite {
            input,
            target,
            publish: Arc::new(publish),
            planned_against: Some(table),
            update_type: "INSERT",
            location,
        })
    }

    async fn begin_row_change(
        &self,
        request: &WriteRequest<'_>,
        table: Arc<dyn TableProvider>,
        change: RowChange,
    ) -> Result<ConnectorWrite, QueryError> {
        let doing = match change.statement {
            "DELETE" => "Deleting from",
            "UPDATE" => "Updating",
            _ => "Merging into",
        };
        self.refuse_delta_lake(&request.table, doing)?;
        let verb = change.statement.to_lowercase();
        let (listing, path) = table_directory(&table, &request.table, &verb)?;
        let location = path.as_str().to_string();
        // The files replaced: all the table's, listed on their own. The change's query
        // must read exactly these (it reads every row: no predicate prunes a file), or
        // a file added in between would be read, rewritten and kept twice.
        let whole = files_read(&request.physical(&whole_table(&request.table, &table)?).await?, path.prefix());
        let input = request.physical(&change.rows).await?;
        let read = files_read(&input, path.prefix());
        if !same_files(&read, &whole) {
            return Err(conflict(change.statement, &request.table, "its files changed while it was planned"));
        }
        let mut target = self.target_of(request, listing, &location, &table)?;
        target.operations = true;
        let mut publish = self.publish(request, location.clone(), &target.staging);
        publish.replaces = Some(Replaced { files: whole, table: table.clone(), statement: change.statement });
        Ok(ConnectorWrite {
            input,
            target,
            publish: Arc::new(publish),
            planned_against: Some(table),
            update_type: change.statement,
            location,
        })
    }
}

/// A scan of every row of `table`.
fn whole_table(name: &TableReference, table: &Arc<dyn TableProvider>) -> Result<LogicalPlan, QueryError> {
    let source = datafusion::datasource::provider_as_source(table.clone());
    LogicalPlanBuilder::scan(name.clone(), source, None)
        .and_then(|b| b.build())
        .map_err(|e| QueryError::new(ErrorCode::GenericInternalError, e.to_string()))
}

fn same_files(a: &[Path], b: &[Path]) -> bool {
    let set = |v: &[Path]| v.iter().map(|p| p.to_string()).collect::<std::collections::BTreeSet<_>>();
    set(a) == set(b)
}

/// The listing table a statement writes, and its one directory; `verb` ("insert",
/// "delete") says what cannot be done to a table of another kind.
fn table_directory<'a>(
    provider: &'a Arc<dyn TableProvider>,
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

/// The files under `table` (an object store prefix) that the plan's scans list.
fn files_read(plan: &Arc<dyn ExecutionPlan>, table: &Path) -> Vec<Path> {
    let mut out = Vec::new();
    let _ = plan.apply(|node| {
        let config = (node.as_ref() as &dyn std::any::Any)
            .downcast_ref::<DataSourceExec>()
            .and_then(|d| (d.data_source().as_ref() as &dyn std::any::Any).downcast_ref::<FileScanConfig>());
        if let Some(config) = config {
            for f in config.file_groups.iter().flat_map(|g| g.files()) {
                if f.object_meta.location.prefix_match(table).is_some() && !out.contains(&f.object_meta.location) {
                    out.push(f.object_meta.location.clone());
                }
            }
        }
        Ok(TreeNodeRecursion::Continue)
    });
    out
}

/// What a row-level change replaces: the table's files it read.
struct Replaced {
    files: Vec<Path>,
    table: Arc<dyn TableProvider>,
    statement: &'static str,
}

/// The end of a write into a catalog of files.
pub struct FilesPublish {
    ctx: SessionContext,
    runtime: Arc<RuntimeEnv>,
    table: TableReference,
    /// The table's location, ending in `/`.
    location: String,
    staging: String,
    classify: Classify,
    /// For `CREATE TABLE`: the table to make once its files are in place.
    create: Option<CreateExternalTable>,
    comment: Option<String>,
    metastore: Option<Arc<Metastore>>,
    replaces: Option<Replaced>,
}

impl std::fmt::Debug for FilesPublish {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FilesPublish").field("table", &self.table).field("staging", &self.staging).finish()
    }
}

impl FilesPublish {
    /// A row-level change's files must all still be the table's, and the table have
    /// no others: otherwise another write committed while the change ran.
    async fn check_replaced(&self, replaced: &Replaced) -> Result<(), QueryError> {
        let scan = whole_table(&self.table, &replaced.table)?;
        let plan = self.ctx.state().create_physical_plan(&scan).await.map_err(|e| (self.classify)(&e))?;
        let (_, url) = crate::connector::staged_files::store_of(&self.runtime, &self.location)?;
        let now = files_read(&plan, url.prefix());
        if let Some(gone) = replaced.files.iter().find(|f| !now.contains(f)) {
            return Err(conflict(
                replaced.statement,
                &self.table,
                &format!("its file {gone} was replaced by another write"),
            ));
        }
        if let Some(added) = now.iter().find(|f| !replaced.files.contains(f)) {
            return Err(conflict(replaced.statement, &self.table, &format!("another write added {added}")));
        }
        Ok(())
    }

    /// Removes the files a row-level change read, once the rows it kept are in the
    /// table. A failure here leaves the table with both (kept rows twice): it is
    /// reported with the files left, and the query fails.
    async fn remove_replaced(&self, staged: &StagedFiles, replaced: &Replaced) -> Result<(), QueryError> {
        let mut left = Vec::new();
        for f in &replaced.files {
            match staged.store.delete(f).await {
                Ok(()) | Err(object_store::Error::NotFound { .. }) => {}
                Err(e) => {
                    tracing::error!(table = %self.table, "{} cannot remove {f}: {e}", replaced.statement);
                    left.push(f.to_string());
                }
            }
        }
        match left.is_empty() {
            true => Ok(()),
            false => Err(QueryError::new(
                ErrorCode::ObjectStoreError,
                format!(
                    "{} on '{}' wrote the rows it keeps, but could not remove {} of the files it replaces \
                     (their rows are now in the table twice): {}",
                    replaced.statement,
                    self.table,
                    left.len(),
                    left.join(", ")
                ),
            )),
        }
    }

    async fn make_table(&self, create: &CreateExternalTable) -> Result<(), QueryError> {
        self.ctx
            .execute_logical_plan(LogicalPlan::Ddl(DdlStatement::CreateExternalTable(Box::new(create.clone()))))
            .await
            .map_err(|e| (self.classify)(&e))?;
        if let Some(store) = &self.metastore {
            let schema = self.table.schema().unwrap_or_default();
            let mut entry = TableEntry::new(schema, create, true).map_err(|e| (self.classify)(&e))?;
            entry.comment = self.comment.clone();
            if let Err(e) = store.put_table(entry) {
                let _ = self.ctx.deregister_table(self.table.clone());
                return Err(QueryError::new(
                    ErrorCode::GenericInternalError,
                    format!("cannot record table '{}' in {}: {e}", self.table, store.describe()),
                ));
            }
        }
        Ok(())
    }
}

#[async_trait]
impl WritePublish for FilesPublish {
    async fn publish(&self, reported: &[Fragment]) -> Result<u64, QueryError> {
        if let Some(replaced) = &self.replaces {
            self.check_replaced(replaced).await?;
        }
        let staged = StagedFiles::new(&self.runtime, &self.location, &self.staging)?;
        let directories: Vec<String> = reported.iter().map(|f| f.address.clone()).collect();
        let mut moved = Vec::new();
        let mut outcome = staged.move_into_table(&self.runtime, &directories, &same_place, &mut moved).await;
        if let (Ok(()), Some(create)) = (&outcome, &self.create) {
            outcome = self.make_table(create).await;
        }
        if outcome.is_err() {
            staged.take_back(&moved).await;
        }
        outcome?;
        if let Some(replaced) = &self.replaces {
            self.remove_replaced(&staged, replaced).await?;
        }
        Ok(reported.iter().map(|f| f.changed).sum())
    }

    async fn conflict(&self) -> Option<QueryError> {
        self.check_replaced(self.replaces.as_ref()?).await.err()
    }

    async fn finish(self: Arc<Self>, _published: bool) {
        remove_staging(self.runtime.clone(), self.staging.clone()).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::sql::sqlparser::ast::{CreateTableOptions, SqlOption, Statement};
    use datafusion::sql::sqlparser::dialect::GenericDialect;
    use datafusion::sql::sqlparser::parser::Parser;

    fn properties(sql: &str) -> Vec<(String, datafusion::sql::sqlparser::ast::Expr)> {
        let Statement::CreateTable(ct) = Parser::parse_sql(&GenericDialect {}, sql).unwrap().remove(0) else {
            panic!("not a CREATE TABLE")
        };
        let CreateTableOptions::With(options) = ct.table_options else { return Vec::new() };
        options
            .into_iter()
            .map(|o| match o {
                SqlOption::KeyValue { key, value } => (key.value.to_lowercase(), value),
                o => panic!("{o}"),
            })
            .collect()
    }

    #[test]
    fn trino_table_properties_are_read() {
        let p = FilesProperties::read(properties(
            "CREATE TABLE lake.s.t WITH (format = 'parquet', partitioned_by = ARRAY['y', 'm']) AS SELECT 1 AS a",
        ))
        .unwrap();
        assert_eq!(p, FilesProperties { format: Some("PARQUET".into()), partitioned_by: vec!["y".into(), "m".into()] });
        let bad = FilesProperties::read(properties("CREATE TABLE t WITH (format = 'ORC') AS SELECT 1"));
        assert_eq!(bad.unwrap_err().error_name, "NOT_SUPPORTED");
        let unknown = FilesProperties::read(properties("CREATE TABLE t WITH (bucket_count = 4) AS SELECT 1"));
        assert!(unknown.unwrap_err().message.contains("bucket_count"));
    }
}
