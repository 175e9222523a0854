//! The end of a write: `TableCommitExec`, the root of a write's plan on the
//! coordinator, gathers what the writers report and has the `TableCommit` publish
//! it; `QueryExecution` calls `TableCommit::finish` when the query ends, whatever
//! the outcome, to remove the staging directory. `write` plans both.
//!
//! Publishing moves the reported files into the table one by one (S3 has no rename
//! of a directory), so it must not stop half-way: it runs on a task of its own that
//! a cancelled query does not abort, `finish` waits for it, a failure takes back what
//! was moved, and a query whose publishing has begun is not run again.

use datafusion::common::internal_err;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use datafusion::arrow::array::{Array, Int64Array, RecordBatch, StringArray, UInt64Array};
use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::catalog::{SchemaProvider, TableProvider};
use datafusion::common::TableReference;
use datafusion::datasource::listing::ListingTableUrl;
use datafusion::error::{DataFusionError, Result};
use datafusion::execution::TaskContext;
use datafusion::logical_expr::{CreateExternalTable, DdlStatement, LogicalPlan};
use datafusion::physical_expr::EquivalenceProperties;
use datafusion::physical_plan::execution_plan::{Boundedness, EmissionType};
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{
    DisplayAs, DisplayFormatType, Distribution, ExecutionPlan, Partitioning, PlanProperties, SendableRecordBatchStream,
};
use datafusion::prelude::SessionContext;
use futures::{StreamExt, TryStreamExt};
use object_store::path::{Path, PathPart};
use object_store::{ObjectStore, ObjectStoreExt};

use super::planner::{planning_error, QueryError};
use crate::connector::memory::{FragmentRef, MemoryTable};
use crate::connector::metastore::TableEntry;
use crate::connector::Connector;
use crate::error_code::ErrorCode;
use crate::plan_node::plan_node;

pub(super) fn external(e: &dyn fmt::Display, location: &str) -> QueryError {
    QueryError::new(ErrorCode::ObjectStoreError, format!("{location}: {e}"))
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum CommitState {
    Pending,
    /// Publishing has begun: from here the write runs to its end, whatever happens to
    /// the query, and the query is not run again.
    Publishing,
    Committed,
    /// Publishing failed; what it had moved was taken back.
    Failed,
    Finished,
}

/// The end of a write into a `memory` table: its fragments join the table, and the
/// workers are told which of the write's fragments stay.
pub(super) struct MemoryPublish {
    pub table: Arc<MemoryTable>,
    /// For `CREATE TABLE`: the schema the new table goes into, under this name.
    pub create_in: Option<(Arc<dyn SchemaProvider>, String)>,
    /// `CREATE OR REPLACE`: a table of that name is dropped as the new one comes.
    pub replace: bool,
    /// The fragments the commit published (the ones the workers keep).
    pub kept: parking_lot::Mutex<Vec<String>>,
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
    /// Held while publishing, so that `finish` waits for a publish in flight.
    publishing: tokio::sync::Mutex<()>,
    /// Rows the committed write added (Trino's update count).
    rows: std::sync::OnceLock<u64>,
    /// A write into a `memory` table instead of files.
    memory: Option<MemoryPublish>,
    /// A `DELETE`: the table's files its query read, replaced by the files written.
    replaces: Option<Replaced>,
    /// The comment of a table `CREATE TABLE` makes.
    comment: Option<String>,
    /// A write into an Iceberg table: its files are committed to the catalog.
    #[cfg(feature = "iceberg")]
    iceberg: Option<super::iceberg_write::IcebergPublish>,
    /// The table an `INSERT` or `DELETE` was planned against: its commit checks that
    /// the catalog still holds this very table (`table_locks`).
    target: Option<Arc<dyn TableProvider>>,
}

/// What a `DELETE` replaces: the files it read, and their rows.
pub(super) struct Replaced {
    pub files: Vec<object_store::path::Path>,
    pub rows: u64,
}

impl fmt::Debug for TableCommit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TableCommit").field("table", &self.table).field("staging", &self.staging).finish()
    }
}

impl TableCommit {
    pub(super) fn new(
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
            publishing: tokio::sync::Mutex::new(()),
            rows: std::sync::OnceLock::new(),
            memory: None,
            replaces: None,
            comment: None,
            #[cfg(feature = "iceberg")]
            iceberg: None,
            target: None,
        }
    }

    /// The table the write was planned against, which must still be there, itself,
    /// when the write commits.
    pub(super) fn into_table(mut self, target: Arc<dyn TableProvider>) -> Self {
        self.target = Some(target);
        self
    }

    /// The commit of a write into an Iceberg table, whose files `publish` commits.
    #[cfg(feature = "iceberg")]
    pub(super) fn for_iceberg(mut self, publish: super::iceberg_write::IcebergPublish) -> Self {
        self.iceberg = Some(publish);
        self
    }

    /// Whether the write makes a new Iceberg table.
    fn creates_iceberg_table(&self) -> bool {
        #[cfg(feature = "iceberg")]
        return self.iceberg.as_ref().is_some_and(|i| i.creates());
        #[cfg(not(feature = "iceberg"))]
        false
    }

    /// After the files are in place: the table made (CTAS into files) or the files
    /// committed to an Iceberg catalog.
    async fn complete(
        &self,
        store: &Arc<dyn ObjectStore>,
        table_url: &ListingTableUrl,
        moved: &[object_store::path::Path],
    ) -> Result<(), QueryError> {
        #[cfg(feature = "iceberg")]
        if let Some(iceberg) = &self.iceberg {
            let base = table_url.object_store();
            return iceberg.commit(self.connector.as_ref(), store, base.as_str(), moved).await;
        }
        let _ = (store, table_url, moved);
        match &self.create {
            Some(create) => self.make_table(create).await,
            None => Ok(()),
        }
    }

    /// The comment the new table gets.
    pub(super) fn with_comment(mut self, comment: Option<String>) -> Self {
        self.comment = comment;
        self
    }

    /// The commit of a `DELETE`: the written files take the place of `replaced`.
    pub(super) fn replacing(mut self, replaced: Replaced) -> Self {
        self.replaces = Some(replaced);
        self
    }

    /// The commit of a write into a `memory` table, whose writers report fragments of
    /// `staging`.
    pub(super) fn for_memory(
        ctx: &SessionContext,
        connector: Arc<dyn Connector>,
        table: TableReference,
        publish: MemoryPublish,
        staging: String,
    ) -> Self {
        let mut commit = TableCommit::new(ctx, connector, table, String::new(), None).with_staging(staging);
        commit.memory = Some(publish);
        commit
    }

    pub(super) fn with_staging(mut self, staging: String) -> Self {
        self.staging = staging;
        self
    }

    /// Trino's `updateType` of the statement.
    pub fn update_type(&self) -> &'static str {
        if self.creates_table() {
            "CREATE TABLE"
        } else if self.replaces.is_some() {
            "DELETE"
        } else {
            "INSERT"
        }
    }

    /// Whether the write makes a new table (`CREATE TABLE ... AS`, or of columns).
    pub fn creates_table(&self) -> bool {
        self.create.is_some()
            || self.memory.as_ref().is_some_and(|m| m.create_in.is_some())
            || self.creates_iceberg_table()
    }

    /// Trino's update count, once the write is committed: the rows it added, or for a
    /// `DELETE` the rows it took away.
    pub fn update_count(&self) -> Option<u64> {
        self.rows.get().copied()
    }

    fn store(&self, location: &str) -> Result<(Arc<dyn ObjectStore>, ListingTableUrl)> {
        let url = ListingTableUrl::parse(location)?;
        Ok((self.ctx.runtime_env().object_store(url.object_store())?, url))
    }

    /// Whether publishing has begun (the query must then not be run again: part of
    /// its rows may be in the table).
    pub fn commit_started(&self) -> bool {
        *self.state.lock() != CommitState::Pending
    }

    /// Publishes the reported writer directories, on a task of its own: a query
    /// cancelled or failing meanwhile does not stop it half-way. A second call (the
    /// root stage run again after a recovery) waits for the first and answers as it
    /// did.
    async fn publish(self: &Arc<Self>, fragments: Vec<(String, u64)>) -> Result<(), QueryError> {
        let this = self.clone();
        let run = tokio::spawn(async move {
            let _publishing = this.publishing.lock().await;
            let state = *this.state.lock();
            match state {
                CommitState::Committed => return Ok(()),
                CommitState::Pending => *this.state.lock() = CommitState::Publishing,
                _ => return Err(QueryError::new(ErrorCode::GenericInternalError, "the write was already ended")),
            }
            // A DROP, RENAME or replacement of the table waits for this, or this for
            // it: then the table is checked to be the one the write was planned on.
            let _table = super::table_locks::lock([super::table_locks::key(&this.table)]).await;
            let outcome = match this.check_table().await {
                Ok(()) => this.publish_now(&fragments).await,
                Err(e) => Err(e),
            };
            *this.state.lock() = if outcome.is_ok() { CommitState::Committed } else { CommitState::Failed };
            outcome
        });
        run.await.map_err(|e| QueryError::new(ErrorCode::GenericInternalError, format!("publishing stopped: {e}")))?
    }

    /// Whether the table is still the one the write was planned against (an `INSERT`'s,
    /// a `DELETE`'s), and a `DELETE`'s files still all there: a `DROP`, `RENAME` or
    /// `CREATE OR REPLACE` of the table, or another `DELETE` of it, committed while
    /// this write ran is a conflict.
    async fn check_table(&self) -> Result<(), QueryError> {
        let conflict = |what: &str| {
            let message = format!(
                "{} on '{}' conflicts with a statement that committed while it ran: {what}; nothing was written",
                self.update_type(),
                self.table
            );
            QueryError::new(ErrorCode::TransactionConflict, message)
        };
        if let Some(planned) = &self.target {
            let now = self.ctx.table_provider(self.table.clone()).await.ok();
            if !now.is_some_and(|now| std::ptr::addr_eq(Arc::as_ptr(&now), Arc::as_ptr(planned))) {
                return Err(conflict("the table was dropped, renamed or replaced"));
            }
        }
        if let Some(replaced) = &self.replaces {
            let (store, _) = self.store(&self.location).map_err(|e| planning_error(&e))?;
            for f in &replaced.files {
                match store.head(f).await {
                    Ok(_) => {}
                    Err(object_store::Error::NotFound { .. }) => {
                        return Err(conflict(&format!("its file {f} was replaced by another write")))
                    }
                    Err(e) => return Err(external(&e, &self.location)),
                }
            }
        }
        Ok(())
    }

    /// Moves every file of the reported writer directories into the table, then makes
    /// the table of a CTAS; on a failure, the files already moved are taken back out.
    async fn publish_now(&self, reported: &[(String, u64)]) -> Result<(), QueryError> {
        let rows = reported.iter().map(|(_, rows)| rows).sum();
        if let Some(memory) = &self.memory {
            self.publish_to_memory(memory, reported)?;
            let _ = self.rows.set(rows);
            return Ok(());
        }
        let fragments: Vec<String> = reported.iter().map(|(f, _)| f.clone()).collect();
        let (store, table_url) = self.store(&self.location).map_err(|e| planning_error(&e))?;
        let mut moved = Vec::new();
        let outcome = self.move_files(&store, &table_url, &fragments, &mut moved).await;
        let outcome = match outcome {
            Ok(()) => self.complete(&store, &table_url, &moved).await,
            other => other,
        };
        if outcome.is_err() {
            for f in &moved {
                if let Err(e) = store.delete(f).await {
                    tracing::error!(table = %self.table, "cannot take back {f} of a failed write: {e}");
                }
            }
            return outcome;
        }
        match &self.replaces {
            None => {
                let _ = self.rows.set(rows);
                Ok(())
            }
            Some(replaced) => {
                self.remove_replaced(&store, replaced).await?;
                let _ = self.rows.set(replaced.rows.saturating_sub(rows));
                Ok(())
            }
        }
    }

    /// Removes the files a `DELETE` read, once the rows it kept are in the table. A
    /// failure here leaves the table with both (kept rows twice): it is reported with
    /// the files left, and the query fails.
    async fn remove_replaced(&self, store: &Arc<dyn ObjectStore>, replaced: &Replaced) -> Result<(), QueryError> {
        let mut left = Vec::new();
        for f in &replaced.files {
            match store.delete(f).await {
                Ok(()) | Err(object_store::Error::NotFound { .. }) => {}
                Err(e) => {
                    tracing::error!(table = %self.table, "DELETE cannot remove {f}: {e}");
                    left.push(f.to_string());
                }
            }
        }
        match left.is_empty() {
            true => Ok(()),
            false => Err(QueryError::new(
                ErrorCode::ObjectStoreError,
                format!(
                    "DELETE on '{}' wrote the rows it keeps, but could not remove {} of the files it replaces \
                     (their rows are now in the table twice): {}",
                    self.table,
                    left.len(),
                    left.join(", ")
                ),
            )),
        }
    }

    /// Adds the reported fragments to the table (all at once: nothing to take back
    /// half-way), then puts a new table into its schema.
    fn publish_to_memory(&self, memory: &MemoryPublish, reported: &[(String, u64)]) -> Result<(), QueryError> {
        let mut refs = Vec::with_capacity(reported.len());
        for (address, rows) in reported {
            let parsed = address.strip_prefix(&self.staging).and_then(|rest| rest.split_once('@'));
            let Some((id, worker)) = parsed else {
                return Err(QueryError::new(ErrorCode::GenericInternalError, format!("a writer reported '{address}'")));
            };
            // A fragment without rows is not kept: the table would need its worker
            // for nothing, and be unreadable once that worker restarted.
            if *rows > 0 {
                refs.push(FragmentRef { worker: worker.to_string(), id: id.to_string(), rows: *rows });
            }
        }
        if let Some((schema, name)) = &memory.create_in {
            if schema.table_exist(name) && !memory.replace {
                return Err(QueryError::new(
                    ErrorCode::GenericUserError,
                    format!("Table '{}' already exists", self.table),
                ));
            }
        }
        *memory.kept.lock() = refs.iter().map(|r| r.id.clone()).collect();
        memory.table.append(refs);
        if let Some((schema, name)) = &memory.create_in {
            if memory.replace {
                schema.deregister_table(name).map_err(|e| planning_error(&e))?;
            }
            schema.register_table(name.clone(), memory.table.clone()).map_err(|e| planning_error(&e))?;
        }
        Ok(())
    }

    async fn move_files(
        &self,
        store: &Arc<dyn ObjectStore>,
        table_url: &ListingTableUrl,
        fragments: &[String],
        moved: &mut Vec<object_store::path::Path>,
    ) -> Result<(), QueryError> {
        for dir in fragments {
            if !dir.starts_with(&self.staging) {
                return Err(QueryError::new(ErrorCode::GenericInternalError, format!("a writer reported '{dir}'")));
            }
            let (_, frag_url) = self.store(dir).map_err(|e| planning_error(&e))?;
            let files: Vec<_> =
                store.list(Some(frag_url.prefix())).try_collect().await.map_err(|e| external(&e, dir))?;
            for f in files {
                let Some(rest) = f.location.prefix_match(frag_url.prefix()) else { continue };
                let dest = self.destination(table_url.prefix(), rest.collect())?;
                store.rename(&f.location, &dest).await.map_err(|e| external(&e, &self.location))?;
                moved.push(dest);
            }
        }
        Ok(())
    }

    /// Where a file a writer left at `parts` (below its directory) goes below `table`.
    fn destination(&self, table: &Path, parts: Vec<PathPart<'_>>) -> Result<Path, QueryError> {
        #[cfg(feature = "iceberg")]
        if let Some(iceberg) = &self.iceberg {
            return iceberg.destination(table, parts);
        }
        Ok(parts.into_iter().fold(table.clone(), |dest, part| dest.join(part)))
    }

    async fn make_table(&self, create: &CreateExternalTable) -> Result<(), QueryError> {
        self.ctx
            .execute_logical_plan(LogicalPlan::Ddl(DdlStatement::CreateExternalTable(Box::new(create.clone()))))
            .await
            .map_err(|e| planning_error(&e))?;
        if let Some(store) = self.connector.files().and_then(|f| f.metastore()) {
            let schema = self.table.schema().unwrap_or_default();
            let mut entry = TableEntry::new(schema, create, true).map_err(|e| planning_error(&e))?;
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

    /// Removes the staging directory, whatever the outcome (the query has ended);
    /// once more a little later, for files of writers still stopping then.
    pub async fn finish(self: &Arc<Self>) {
        // A publish in flight ends first: its files are still being moved.
        let _publishing = self.publishing.lock().await;
        let committed = {
            let mut s = self.state.lock();
            let was = *s;
            *s = CommitState::Finished;
            was == CommitState::Committed
        };
        if !committed {
            tracing::info!(table = %self.table, "write not committed; removing its staged files");
        }
        if let Some(memory) = &self.memory {
            let keep = if committed { memory.kept.lock().clone() } else { Vec::new() };
            let settle = crate::connector::memory::fragments::Settle { staging: self.staging.clone(), keep };
            memory.table.shared().settle(settle).await;
            return;
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

pub(super) fn local_dir(location: &str) -> Option<std::path::PathBuf> {
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
    pub(super) fn new(input: Arc<dyn ExecutionPlan>, commit: Arc<TableCommit>) -> Self {
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
    plan_node!(
        unary "TableCommitExec",
        input: input,
        properties: own,
        rebuild: |this, child| TableCommitExec::new(child, this.commit.clone())
    );

    fn required_input_distribution(&self) -> Vec<Distribution> {
        vec![Distribution::SinglePartition]
    }

    fn execute(&self, partition: usize, context: Arc<TaskContext>) -> Result<SendableRecordBatchStream> {
        if partition != 0 {
            return internal_err!("TableCommitExec has one partition, asked for {partition}");
        }
        let mut input = self.input.execute(0, context)?;
        let commit = self.commit.clone();
        let stream = futures::stream::once(async move {
            let mut fragments = Vec::new();
            while let Some(batch) = input.next().await {
                let batch = batch?;
                let (Some(r), Some(f)) = (
                    batch.column(0).as_any().downcast_ref::<UInt64Array>(),
                    batch.column(1).as_any().downcast_ref::<StringArray>(),
                ) else {
                    return internal_err!("writers answered an unexpected schema");
                };
                fragments.extend((0..f.len()).map(|i| (f.value(i).to_string(), r.value(i))));
            }
            let rows: u64 = fragments.iter().map(|(_, rows)| rows).sum();
            commit.publish(fragments).await.map_err(|e| DataFusionError::External(Box::new(CommitError(e))))?;
            // Trino's `rows`: those written, or for a `DELETE` those it took away.
            let answered = commit.update_count().unwrap_or(rows);
            Ok(RecordBatch::try_new(rows_schema(), vec![Arc::new(Int64Array::from(vec![answered as i64]))])?)
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
