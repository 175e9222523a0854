//! Writes into catalogs of files: `CREATE TABLE c.s.t [WITH (format = 'PARQUET',
//! partitioned_by = ARRAY['col'])] AS SELECT ...` and `INSERT INTO c.s.t SELECT ...`.
//! Planning (`plan_ctas`, `plan_insert`) turns the statement into writers over the
//! query's partitions (`TableWriterExec`, run by workers like any stage) under a
//! `TableCommitExec` root that runs on the coordinator; `QueryExecution` keeps the
//! `TableCommit` and calls `finish` when the query ends.
//!
//! Why staging: the writers put their files under `LOCATION/.flotilla-staging-QUERY/`,
//! a directory DataFusion's listing skips, and the commit moves into the table only
//! the directories that successful writers reported, once every writer has succeeded.
//! A failed or cancelled write leaves the table as it was, and `finish` removes the
//! staging directory (again a little later, for a write still in flight on a worker
//! that was told to stop). A CTAS table appears in the catalog (and its metastore)
//! only after its files are in place.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use datafusion::arrow::array::{Array, Int64Array, RecordBatch, StringArray, UInt64Array};
use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::common::tree_node::TreeNodeRecursion;
use datafusion::common::{Constraints, DFSchema, TableReference};
use datafusion::datasource::listing::{ListingTable, ListingTableUrl};
use datafusion::datasource::source_as_provider;
use datafusion::error::{DataFusionError, Result};
use datafusion::execution::TaskContext;
use datafusion::logical_expr::dml::InsertOp;
use datafusion::logical_expr::{CreateExternalTable, DdlStatement, DmlStatement, LogicalPlan, WriteOp};
use datafusion::physical_expr::{EquivalenceProperties, PhysicalExpr};
use datafusion::physical_plan::coalesce_partitions::CoalescePartitionsExec;
use datafusion::physical_plan::execution_plan::{Boundedness, EmissionType};
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{
    DisplayAs, DisplayFormatType, Distribution, ExecutionPlan, Partitioning, PlanProperties, ReplaceChildrenOptions,
    SendableRecordBatchStream,
};
use datafusion::prelude::SessionContext;
use datafusion::sql::sqlparser::ast::{CreateTable, CreateTableOptions, Expr as SqlExpr, SqlOption, Statement};
use futures::{StreamExt, TryStreamExt};
use object_store::{ObjectStore, ObjectStoreExt};

use super::planner::QueryError;
use crate::connector::metastore::TableEntry;
use crate::connector::{Connector, Connectors};
use crate::error_code::ErrorCode;
use crate::plan::table_writer::{TableWriterExec, WriteTarget};

/// `WITH (...)` of a `CREATE TABLE ... AS`: Trino's table properties.
#[derive(Debug, Default, PartialEq)]
pub struct TableProperties {
    pub format: Option<String>,
    pub partitioned_by: Vec<String>,
}

fn unquote(e: &SqlExpr) -> String {
    let s = e.to_string();
    s.trim_matches('\'').trim_matches('"').to_string()
}

/// Reads `format` and `partitioned_by`, and takes them off the statement so that
/// DataFusion plans the rest.
pub fn take_table_properties(ct: &mut CreateTable) -> Result<TableProperties, QueryError> {
    let options = match std::mem::take(&mut ct.table_options) {
        CreateTableOptions::None => return Ok(TableProperties::default()),
        CreateTableOptions::With(o) => o,
        other => {
            return Err(QueryError::new(ErrorCode::NotSupported, format!("table options '{other}': use WITH (...)")))
        }
    };
    let mut props = TableProperties::default();
    for o in options {
        let SqlOption::KeyValue { key, value } = o else {
            return Err(QueryError::new(ErrorCode::NotSupported, format!("table property '{o}'")));
        };
        match key.value.to_lowercase().as_str() {
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
            "partitioned_by" => match &value {
                SqlExpr::Array(a) => props.partitioned_by = a.elem.iter().map(unquote).collect(),
                other => {
                    return Err(QueryError::new(
                        ErrorCode::GenericUserError,
                        format!("partitioned_by must be an ARRAY of column names, got {other}"),
                    ))
                }
            },
            other => {
                return Err(QueryError::new(ErrorCode::NotSupported, format!("table property '{other}'")));
            }
        }
    }
    Ok(props)
}

fn user_error(code: ErrorCode, m: impl Into<String>) -> QueryError {
    QueryError::new(code, m)
}

/// The files catalog named by `name`, with its schema and table names resolved.
fn files_target<'a>(
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

/// Whether a statement creates a table from a query in a catalog of files.
pub fn is_ctas_into_files(statement: &Statement, connectors: &Connectors, catalog: &str, schema: &str) -> bool {
    let Statement::CreateTable(ct) = statement else { return false };
    if ct.query.is_none() {
        return false;
    }
    let Ok(name) = object_name_to_reference(&ct.name) else { return false };
    files_target(connectors, &name, catalog, schema).is_some()
}

fn object_name_to_reference(name: &datafusion::sql::sqlparser::ast::ObjectName) -> Result<TableReference> {
    let parts: Vec<String> = name.0.iter().map(|p| p.to_string().trim_matches('"').to_string()).collect();
    match parts.as_slice() {
        [t] => Ok(TableReference::bare(t.as_str())),
        [s, t] => Ok(TableReference::partial(s.as_str(), t.as_str())),
        [c, s, t] => Ok(TableReference::full(c.as_str(), s.as_str(), t.as_str())),
        _ => Err(DataFusionError::Plan(format!("'{name}' is not a table name"))),
    }
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
/// table, `WITH` taken off) into the catalog of files it names.
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
    let Some(schema_provider) = connector.catalog().schema(&schema) else {
        return Err(user_error(ErrorCode::SchemaNotFound, format!("Schema '{catalog}.{schema}' does not exist")));
    };
    if c.or_replace {
        return Err(user_error(ErrorCode::NotSupported, "CREATE OR REPLACE TABLE ... AS"));
    }
    if schema_provider.table_exist(&table) {
        if c.if_not_exists {
            return Ok(None);
        }
        return Err(user_error(ErrorCode::GenericUserError, format!("Table '{full}' already exists")));
    }
    let location = files.managed_location(&schema, &table).ok_or_else(|| {
        user_error(
            ErrorCode::NotSupported,
            format!(
                "catalog '{catalog}' has no files.warehouse: CREATE TABLE ... AS needs one to place the table's files"
            ),
        )
    })?;
    let input_schema = c.input.schema().clone();
    let names: Vec<String> = input_schema.fields().iter().map(|f| f.name().clone()).collect();
    let p = props.partitioned_by.len();
    if p > 0 && (p >= names.len() || names[names.len() - p..] != props.partitioned_by[..]) {
        return Err(user_error(
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
    let url = ListingTableUrl::parse(&location).map_err(|e| planning(&e))?;
    let store = runtime.object_store(url.object_store()).map_err(|e| planning(&e))?;
    match store.list(Some(url.prefix())).next().await {
        None | Some(Err(object_store::Error::NotFound { .. })) => {}
        Some(Err(e)) => return Err(external(&e, &location)),
        Some(Ok(first)) => {
            return Err(user_error(
                ErrorCode::GenericUserError,
                format!("Target location for table '{full}' already holds files: {location} ({})", first.location),
            ))
        }
    }
    let fields: Vec<Field> = input_schema.fields().iter().map(|f| f.as_ref().clone()).collect();
    let table_schema = Arc::new(DFSchema::try_from(Schema::new(fields)).map_err(|e| planning(&e))?);
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
    let input = ctx.state().create_physical_plan(&c.input).await.map_err(|e| planning(&e))?;
    let target = WriteTarget {
        staging: staging_of(&location, query_id),
        format,
        options: Default::default(),
        partition_columns: props.partitioned_by,
    };
    Ok(Some(writing(input, target, TableCommit::new(ctx, connector.clone(), full, location, Some(create)))))
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
    if *op != InsertOp::Append {
        return Err(user_error(ErrorCode::NotSupported, format!("INSERT {op} into '{full}': only appending")));
    }
    let provider = source_as_provider(target).map_err(|e| planning(&e))?;
    let Some(listing) = provider.downcast_ref::<ListingTable>() else {
        return Err(user_error(ErrorCode::NotSupported, format!("'{full}' cannot be written")));
    };
    let [path] = listing.table_paths().as_slice() else {
        return Err(user_error(ErrorCode::NotSupported, format!("'{full}' has several locations: cannot insert")));
    };
    if !path.is_collection() {
        return Err(user_error(ErrorCode::NotSupported, format!("'{full}' is one file: cannot insert")));
    }
    let location = path.as_str().to_string();
    let entry = connector.files().and_then(|f| f.metastore()).and_then(|m| m.table(&schema, &table));
    let definition = match &entry {
        Some(e) => match e.plan(&ctx.task_ctx()).map_err(|e| planning(&e))? {
            LogicalPlan::Ddl(DdlStatement::CreateExternalTable(c)) => Some(c),
            _ => None,
        },
        None => None,
    };
    let format = listing.options().format.get_ext().to_uppercase();
    let input = ctx.state().create_physical_plan(input).await.map_err(|e| planning(&e))?;
    let target = WriteTarget {
        staging: staging_of(&location, query_id),
        format,
        options: definition.map(|d| d.options).unwrap_or_default(),
        partition_columns: listing.options().table_partition_cols.iter().map(|(n, _)| n.clone()).collect(),
    };
    Ok(Some(writing(input, target, TableCommit::new(ctx, connector.clone(), full, location, None))))
}

fn writing(input: Arc<dyn ExecutionPlan>, target: WriteTarget, commit: TableCommit) -> PlannedWrite {
    let commit = Arc::new(commit.with_staging(target.staging.clone()));
    PlannedWrite { input, target, commit }
}

fn staging_of(location: &str, query_id: &str) -> String {
    format!("{}/.flotilla-staging-{}-{}/", location.trim_end_matches('/'), query_id, crate::util::random_suffix(6))
}

fn planning(e: &DataFusionError) -> QueryError {
    super::planner::planning_error(e)
}

fn external(e: &dyn fmt::Display, location: &str) -> QueryError {
    QueryError::new(ErrorCode::ObjectStoreError, format!("{location}: {e}"))
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum CommitState {
    Pending,
    Committed,
    Finished,
}

/// The end of one write: publishing the writers' files, and removing what is left.
pub struct TableCommit {
    ctx: SessionContext,
    connector: Arc<dyn Connector>,
    table: TableReference,
    /// The table's location, ending in `/`.
    location: String,
    staging: String,
    /// For `CREATE TABLE ... AS`: the table to make once its files are in place.
    create: Option<CreateExternalTable>,
    state: parking_lot::Mutex<CommitState>,
    /// Rows the committed write added (Trino's update count).
    rows: std::sync::OnceLock<u64>,
}

impl fmt::Debug for TableCommit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TableCommit").field("table", &self.table).field("staging", &self.staging).finish()
    }
}

impl TableCommit {
    fn new(
        ctx: &SessionContext,
        connector: Arc<dyn Connector>,
        table: TableReference,
        location: String,
        create: Option<CreateExternalTable>,
    ) -> Self {
        let location = if location.ends_with('/') { location } else { format!("{location}/") };
        TableCommit {
            ctx: ctx.clone(),
            connector,
            table,
            location,
            staging: String::new(),
            create,
            state: parking_lot::Mutex::new(CommitState::Pending),
            rows: std::sync::OnceLock::new(),
        }
    }

    fn with_staging(mut self, staging: String) -> Self {
        self.staging = staging;
        self
    }

    pub fn table(&self) -> &TableReference {
        &self.table
    }

    /// Trino's `updateType` of the statement.
    pub fn update_type(&self) -> &'static str {
        if self.create.is_some() {
            "CREATE TABLE"
        } else {
            "INSERT"
        }
    }

    /// The rows the write added, once it is committed.
    pub fn rows_written(&self) -> Option<u64> {
        self.rows.get().copied()
    }

    fn store(&self, location: &str) -> Result<(Arc<dyn ObjectStore>, ListingTableUrl)> {
        let url = ListingTableUrl::parse(location)?;
        Ok((self.ctx.runtime_env().object_store(url.object_store())?, url))
    }

    /// Moves every file of the reported writer directories into the table, then makes
    /// the table of a CTAS. Called once every writer has succeeded.
    async fn publish(&self, fragments: &[String], rows: u64) -> Result<(), QueryError> {
        {
            let mut s = self.state.lock();
            if *s != CommitState::Pending {
                return Err(QueryError::new(ErrorCode::GenericInternalError, "a write was committed twice"));
            }
            *s = CommitState::Committed;
        }
        let (store, table_url) = self.store(&self.location).map_err(|e| planning(&e))?;
        let mut moved = Vec::new();
        for dir in fragments {
            if !dir.starts_with(&self.staging) {
                return Err(QueryError::new(ErrorCode::GenericInternalError, format!("a writer reported '{dir}'")));
            }
            let (_, frag_url) = self.store(dir).map_err(|e| planning(&e))?;
            let files: Vec<_> =
                store.list(Some(frag_url.prefix())).try_collect().await.map_err(|e| external(&e, dir))?;
            for f in files {
                let Some(rest) = f.location.prefix_match(frag_url.prefix()) else { continue };
                let mut dest = table_url.prefix().clone();
                for part in rest {
                    dest = dest.clone().join(part);
                }
                store.rename(&f.location, &dest).await.map_err(|e| external(&e, &self.location))?;
                moved.push(dest);
            }
        }
        if let Some(create) = &self.create {
            let made = self.make_table(create).await;
            if let Err(e) = made {
                // The table could not be made: its files must not stay behind.
                for f in &moved {
                    let _ = store.delete(f).await;
                }
                return Err(e);
            }
        }
        let _ = self.rows.set(rows);
        Ok(())
    }

    async fn make_table(&self, create: &CreateExternalTable) -> Result<(), QueryError> {
        self.ctx
            .execute_logical_plan(LogicalPlan::Ddl(DdlStatement::CreateExternalTable(Box::new(create.clone()))))
            .await
            .map_err(|e| planning(&e))?;
        if let Some(store) = self.connector.files().and_then(|f| f.metastore()) {
            let schema = self.table.schema().unwrap_or_default();
            let entry = TableEntry::new(schema, create, true).map_err(|e| planning(&e))?;
            if let Err(e) = store.put_table(entry) {
                let _ = self.ctx.deregister_table(self.table.clone());
                return Err(QueryError::new(
                    ErrorCode::GenericInternalError,
                    format!("cannot record table '{}' in {}: {e}", self.table, store.path().display()),
                ));
            }
        }
        Ok(())
    }

    /// Removes the staging directory, whatever the outcome (the query has ended);
    /// once more a little later, for files of writers still stopping then.
    pub async fn finish(self: &Arc<Self>) {
        let committed = {
            let mut s = self.state.lock();
            let was = *s;
            *s = CommitState::Finished;
            was == CommitState::Committed
        };
        if !committed {
            tracing::info!(table = %self.table, "write not committed; removing its staged files");
        }
        self.remove_staging().await;
        let again = self.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_secs(3)).await;
            again.remove_staging().await;
        });
    }

    async fn remove_staging(&self) {
        if let Some(path) = local_dir(&self.staging) {
            let _ = tokio::fs::remove_dir_all(path).await;
            return;
        }
        let Ok((store, url)) = self.store(&self.staging) else { return };
        let files: Vec<_> = store.list(Some(url.prefix())).filter_map(|r| async { r.ok() }).collect().await;
        for f in files {
            let _ = store.delete(&f.location).await;
        }
    }
}

fn local_dir(location: &str) -> Option<std::path::PathBuf> {
    let url = url::Url::parse(location).ok().filter(|u| u.scheme() == "file");
    match url {
        Some(u) => u.to_file_path().ok(),
        None if !location.contains("://") => Some(std::path::PathBuf::from(location)),
        None => None,
    }
}

/// The root of a write, on the coordinator: gathers what the writers report,
/// publishes it, and answers Trino's update count (`rows`).
#[derive(Debug)]
pub struct TableCommitExec {
    input: Arc<dyn ExecutionPlan>,
    commit: Arc<TableCommit>,
    properties: Arc<PlanProperties>,
}

pub fn rows_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![Field::new("rows", DataType::Int64, false)]))
}

impl TableCommitExec {
    fn new(input: Arc<dyn ExecutionPlan>, commit: Arc<TableCommit>) -> Self {
        let properties = Arc::new(PlanProperties::new(
            EquivalenceProperties::new(rows_schema()),
            Partitioning::UnknownPartitioning(1),
            EmissionType::Final,
            Boundedness::Bounded,
        ));
        TableCommitExec { input, commit, properties }
    }
}

impl DisplayAs for TableCommitExec {
    fn fmt_as(&self, _t: DisplayFormatType, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "TableCommitExec: table={}, location={}", self.commit.table, self.commit.location)
    }
}

impl ExecutionPlan for TableCommitExec {
    fn name(&self) -> &str {
        "TableCommitExec"
    }

    fn properties(&self) -> &Arc<PlanProperties> {
        &self.properties
    }

    fn children(&self) -> Vec<&Arc<dyn ExecutionPlan>> {
        vec![&self.input]
    }

    fn required_input_distribution(&self) -> Vec<Distribution> {
        vec![Distribution::SinglePartition]
    }

    fn apply_expressions(
        &self,
        _f: &mut dyn FnMut(&Arc<dyn PhysicalExpr>) -> Result<TreeNodeRecursion>,
    ) -> Result<TreeNodeRecursion> {
        Ok(TreeNodeRecursion::Continue)
    }

    fn replace_children(
        self: Arc<Self>,
        mut children: Vec<Arc<dyn ExecutionPlan>>,
        _options: ReplaceChildrenOptions,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        if children.len() != 1 {
            return Err(DataFusionError::Internal("TableCommitExec has one child".into()));
        }
        Ok(Arc::new(TableCommitExec::new(children.remove(0), self.commit.clone())))
    }

    #[allow(deprecated)]
    fn with_new_children(self: Arc<Self>, children: Vec<Arc<dyn ExecutionPlan>>) -> Result<Arc<dyn ExecutionPlan>> {
        self.replace_children(
            children,
            ReplaceChildrenOptions::new(datafusion::physical_plan::ChildrenPropertiesMode::Recompute),
        )
    }

    fn execute(&self, partition: usize, context: Arc<TaskContext>) -> Result<SendableRecordBatchStream> {
        if partition != 0 {
            return Err(DataFusionError::Internal(format!("TableCommitExec has one partition, asked for {partition}")));
        }
        let mut input = self.input.execute(0, context)?;
        let commit = self.commit.clone();
        let stream = futures::stream::once(async move {
            let (mut rows, mut fragments) = (0u64, Vec::new());
            while let Some(batch) = input.next().await {
                let batch = batch?;
                let (Some(r), Some(f)) = (
                    batch.column(0).as_any().downcast_ref::<UInt64Array>(),
                    batch.column(1).as_any().downcast_ref::<StringArray>(),
                ) else {
                    return Err(DataFusionError::Internal("writers answered an unexpected schema".into()));
                };
                rows += r.values().iter().sum::<u64>();
                fragments.extend((0..f.len()).map(|i| f.value(i).to_string()));
            }
            commit.publish(&fragments, rows).await.map_err(|e| DataFusionError::External(Box::new(CommitError(e))))?;
            Ok(RecordBatch::try_new(rows_schema(), vec![Arc::new(Int64Array::from(vec![rows as i64]))])?)
        });
        Ok(Box::pin(RecordBatchStreamAdapter::new(rows_schema(), stream)))
    }
}

/// A commit failure, carried through DataFusion to keep its error code.
#[derive(Debug)]
pub struct CommitError(pub QueryError);

impl fmt::Display for CommitError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0, f)
    }
}

impl std::error::Error for CommitError {}

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
        assert_eq!(p, TableProperties { format: Some("PARQUET".into()), partitioned_by: vec!["y".into(), "m".into()] });
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
        assert_eq!(local_dir("file:///tmp/x/"), Some(std::path::PathBuf::from("/tmp/x/")));
        assert_eq!(local_dir("s3://b/x/"), None);
    }
}
