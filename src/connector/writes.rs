//! The write half of a connector, as Trino's `ConnectorMetadata` has it. A statement
//! that writes a table begins a write with the table's connector
//! (`ConnectorWrites::begin_create_table`, `begin_insert`, `begin_row_change`), which
//! answers the rows its writers take, where they put them and how they end
//! (`ConnectorWrite`); once every writer has succeeded, the connector publishes what
//! they reported (`WritePublish::publish`, Trino's `finishInsert` and `finishMerge`),
//! and whatever the outcome it removes what is left (`WritePublish::finish`).
//!
//! The coordinator plans every write through this and knows no connector by name;
//! it owns the commit's state machine (one publish, never after a cancel, never
//! twice) and the writers' plan. Each connector's write and commit code lives in its
//! own module (`files::write`, `memory::write`, `iceberg::table_write`).
//!
//! Row-level changes (`DELETE`, `UPDATE`, `MERGE`) use the merge paradigm: the
//! coordinator plans, as a query cut into stages like any other, the table's rows
//! after the change with an operation code each (`RowOperation`); the writers write
//! the rows to keep and count the ones changed, and the connector's publish puts the
//! written rows in place of the ones read, if nothing else changed them meanwhile.

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

use async_trait::async_trait;
use datafusion::catalog::TableProvider;
use datafusion::common::TableReference;
use datafusion::error::DataFusionError;
use datafusion::logical_expr::{CreateMemoryTable, LogicalPlan};
use datafusion::physical_plan::ExecutionPlan;
use datafusion::prelude::SessionContext;
use datafusion::sql::sqlparser::ast::Expr as SqlExpr;
use serde::{Deserialize, Serialize};

use crate::error_code::{ErrorCode, QueryError};

/// Where and how a write puts its rows (the writers' part of a `ConnectorWrite`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WriteTarget {
    /// The staging location, ending in `/`; each writer makes a directory below it.
    pub staging: String,
    /// `PARQUET`, `CSV`, `JSON`, or `MEMORY`.
    pub format: String,
    /// The table's format options (`CREATE EXTERNAL TABLE ... OPTIONS`).
    pub options: HashMap<String, String>,
    /// Hive-style partition columns, the last columns of the input, in order.
    pub partition_columns: Vec<String>,
    /// Columns declared `NOT NULL`: a null there fails the write (memory tables).
    #[serde(default)]
    pub not_null: Vec<String>,
    /// Each column's field id, written into the Parquet schema (Iceberg tables,
    /// whose readers match columns by id); none for other tables.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub field_ids: Vec<i32>,
    /// The input's last column is a `RowOperation` code (a row-level change): the
    /// writers write the rows it keeps, without it, and count the changed ones.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub operations: bool,
}

/// The format of a write into a `memory` table: its writers keep their rows in
/// their worker's memory (`memory::fragments`) and report `STAGING` `ID@WORKER_URL`.
pub const MEMORY_FORMAT: &str = "MEMORY";

impl WriteTarget {
    /// A target with the table's format and nothing else said.
    pub fn new(staging: String, format: &str) -> Self {
        WriteTarget {
            staging,
            format: format.to_string(),
            options: HashMap::new(),
            partition_columns: Vec::new(),
            not_null: Vec::new(),
            field_ids: Vec::new(),
            operations: false,
        }
    }

    /// Whether its writers must run on workers (where the rows of memory tables live).
    pub fn needs_worker(&self) -> bool {
        self.format == MEMORY_FORMAT
    }

    pub fn file_extension(&self) -> String {
        self.format.to_lowercase()
    }
}

/// What a row of a row-level change's input does, in its operation column
/// (`OPERATION_COLUMN`, an `Int8`): the writers write `Keep` and `Changed` rows and
/// count `Changed` and `Deleted` ones (Trino's update count).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(i8)]
pub enum RowOperation {
    /// A row of the table the change leaves as it was.
    Keep = 0,
    /// A row the change updated or inserted: written, and counted.
    Changed = 1,
    /// A row the change deleted: counted, not written.
    Deleted = 2,
}

/// The name of a row-level change's operation column.
pub const OPERATION_COLUMN: &str = "$operation";

/// What one writer reported: the rows it wrote, the rows the statement changed
/// through it (those written for a plain write), and where its rows are.
#[derive(Debug, Clone, PartialEq)]
pub struct Fragment {
    pub address: String,
    pub rows: u64,
    pub changed: u64,
}

/// Classifies a DataFusion error as the coordinator reports it (its planning
/// errors), given to connectors so that theirs read the same.
pub type Classify = fn(&DataFusionError) -> QueryError;

/// What every write is begun with.
pub struct WriteRequest<'a> {
    pub ctx: &'a SessionContext,
    /// The query's id, which names its staging place.
    pub query_id: &'a str,
    /// The table written, named in full.
    pub table: TableReference,
    pub classify: Classify,
}

impl WriteRequest<'_> {
    pub fn error(&self, e: &DataFusionError) -> QueryError {
        (self.classify)(e)
    }

    /// `logical` planned for the writers.
    pub async fn physical(&self, logical: &LogicalPlan) -> Result<Arc<dyn ExecutionPlan>, QueryError> {
        self.ctx.state().create_physical_plan(logical).await.map_err(|e| self.error(&e))
    }

    /// A staging place inside `location`, of this query, that no other write shares.
    pub fn staging_in(&self, location: &str) -> String {
        staging_of(location, self.query_id)
    }
}

/// A `CREATE TABLE`, as DataFusion planned it (an in-memory table over its query, or
/// over no rows for one of columns only), with what was taken off it for the
/// connector: Trino's `WITH (...)` properties and the comment.
pub struct CreateTable<'a> {
    pub plan: &'a CreateMemoryTable,
    /// `(key in lower case, value)`, as written.
    pub properties: Vec<(String, SqlExpr)>,
    pub comment: Option<String>,
}

/// A row-level change: the table's rows after it, each with its `RowOperation` as
/// the last column (`OPERATION_COLUMN`), and which statement it is.
pub struct RowChange {
    pub rows: LogicalPlan,
    /// `DELETE`, `UPDATE` or `MERGE`: Trino's update type.
    pub statement: &'static str,
}

/// The write half of a connector.
#[async_trait]
pub trait ConnectorWrites: Send + Sync {
    /// `CREATE TABLE [AS]`; None when `IF NOT EXISTS` finds the table there.
    async fn begin_create_table(
        &self,
        request: &WriteRequest<'_>,
        create: CreateTable<'_>,
    ) -> Result<Option<ConnectorWrite>, QueryError>;

    /// `INSERT INTO` `table` the rows of `input`, in the table's column order.
    async fn begin_insert(
        &self,
        request: &WriteRequest<'_>,
        table: Arc<dyn TableProvider>,
        input: &LogicalPlan,
    ) -> Result<ConnectorWrite, QueryError>;

    /// A row-level change of `table`.
    async fn begin_row_change(
        &self,
        request: &WriteRequest<'_>,
        _table: Arc<dyn TableProvider>,
        change: RowChange,
    ) -> Result<ConnectorWrite, QueryError> {
        Err(QueryError::new(
            ErrorCode::NotSupported,
            format!("This connector does not support {}s ('{}')", change.statement.to_lowercase(), request.table),
        ))
    }
}

/// A begun write: the rows its writers take, where they go, and its end.
pub struct ConnectorWrite {
    /// The rows, shaped as the writers write them.
    pub input: Arc<dyn ExecutionPlan>,
    pub target: WriteTarget,
    pub publish: Arc<dyn WritePublish>,
    /// The table the write was planned against: the commit checks that the catalog
    /// still holds this very table (a `DROP` or `RENAME` meanwhile is a conflict).
    pub planned_against: Option<Arc<dyn TableProvider>>,
    /// Trino's update type: `CREATE TABLE`, `INSERT`, `DELETE`, `UPDATE`, `MERGE`.
    pub update_type: &'static str,
    /// Where the rows go, as `EXPLAIN` shows it.
    pub location: String,
}

/// The end of a write, in its connector.
#[async_trait]
pub trait WritePublish: Send + Sync + fmt::Debug {
    /// Puts what the writers reported into the table, whole or not at all, and
    /// answers Trino's update count. Called once, after every writer succeeded; a
    /// conflict with a change committed meanwhile is `TRANSACTION_CONFLICT`.
    async fn publish(&self, reported: &[Fragment]) -> Result<u64, QueryError>;

    /// The conflict of a write that failed before publishing, when another write
    /// changed what it read meanwhile (a row-level change reading files or fragments
    /// that a concurrent change replaced fails on them): the statement's error is
    /// then this, not the failed read.
    async fn conflict(&self) -> Option<QueryError> {
        None
    }

    /// Removes what the write left outside the table (its staging place), whatever
    /// the outcome; `published` says whether `publish` succeeded.
    async fn finish(self: Arc<Self>, published: bool);
}

/// The columns `schema` declares NOT NULL: writers refuse a NULL there.
pub fn not_null_columns(schema: &datafusion::arrow::datatypes::Schema) -> Vec<String> {
    schema.fields().iter().filter(|f| !f.is_nullable()).map(|f| f.name().clone()).collect()
}

/// The columns of the table a `CREATE TABLE` makes: those declared, or for one
/// made from a query the query's, all nullable, as Trino makes them (a later
/// `INSERT` or `MERGE` may put NULLs there).
pub fn table_columns(create: &CreateMemoryTable) -> datafusion::arrow::datatypes::SchemaRef {
    let schema = create.input.schema().as_arrow();
    if matches!(create.input.as_ref(), LogicalPlan::EmptyRelation(_)) {
        return Arc::new(schema.clone());
    }
    let fields: Vec<_> = schema.fields().iter().map(|f| f.as_ref().clone().with_nullable(true)).collect();
    Arc::new(datafusion::arrow::datatypes::Schema::new_with_metadata(fields, schema.metadata().clone()))
}

/// A property's value as written, without its quotes.
pub fn unquote(e: &SqlExpr) -> String {
    let s = e.to_string();
    s.trim_matches('\'').trim_matches('"').to_string()
}

/// The unquoted elements of an `ARRAY[...]` property (`partitioned_by`, `partitioning`).
pub fn array_property(key: &str, value: &SqlExpr) -> Result<Vec<String>, QueryError> {
    match value {
        SqlExpr::Array(a) => Ok(a.elem.iter().map(unquote).collect()),
        other => Err(QueryError::new(
            ErrorCode::GenericUserError,
            format!("{key} must be an ARRAY of column names, got {other}"),
        )),
    }
}

/// A property no connector of this kind takes.
pub fn unknown_property(key: &str, takes: &str) -> QueryError {
    QueryError::new(ErrorCode::NotSupported, format!("table property '{key}'{takes}"))
}

/// Refuses a comment on a table of a connector that keeps none.
pub fn refuse_comment(create: &CreateTable<'_>) -> Result<(), QueryError> {
    match create.comment {
        Some(_) => Err(QueryError::new(
            ErrorCode::NotSupported,
            "CREATE TABLE ... COMMENT: tables take comments only in catalogs of files",
        )),
        None => Ok(()),
    }
}

/// The first part of a staging directory's name.
pub const STAGING_PREFIX: &str = ".flotilla-staging-";

/// A staging directory inside `location` for query `query_id`.
pub fn staging_of(location: &str, query_id: &str) -> String {
    format!("{}/{STAGING_PREFIX}{}-{}/", location.trim_end_matches('/'), query_id, crate::util::random_suffix(6))
}

/// The error of a write whose table changed under it.
pub fn conflict(statement: &str, table: &TableReference, what: &str) -> QueryError {
    let message = format!(
        "{statement} on '{table}' conflicts with a statement that committed while it ran: {what}; nothing was written"
    );
    QueryError::new(ErrorCode::TransactionConflict, message)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn staging_lies_inside_the_table_in_a_directory_listing_skips() {
        let s = staging_of("s3://b/w/s/t/", "20261201_000001_00001_abcde");
        assert!(s.starts_with("s3://b/w/s/t/.flotilla-staging-20261201_000001_00001_abcde-"));
        assert!(s.ends_with('/') && !s.contains('='));
    }

    #[test]
    fn operation_codes_are_stable() {
        assert_eq!([RowOperation::Keep as i8, RowOperation::Changed as i8, RowOperation::Deleted as i8], [0, 1, 2]);
    }
}
