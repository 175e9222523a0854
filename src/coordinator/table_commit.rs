//! The end of a write: `TableCommitExec`, the root of a write's plan on the
//! coordinator, gathers what the writers report and has the `TableCommit` publish
//! it through the connector (`connector::writes::WritePublish`); `QueryExecution`
//! calls `TableCommit::finish` when the query ends, whatever the outcome, so that the
//! connector removes what the write left. `planning::writes` plans both.
//!
//! The commit is a state machine of its own: it publishes once, on a task of its own
//! that a cancelled query does not abort (a publish must not stop half-way), and
//! `finish` waits for it; a query whose publishing has begun is not run again. While
//! it publishes it holds the table's lock (`table_locks`), and first checks that the
//! catalog still holds the table the write was planned against.

use datafusion::common::internal_err;
use std::fmt;
use std::sync::Arc;

use datafusion::arrow::array::{Array, Int64Array, RecordBatch, StringArray, UInt64Array};
use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::catalog::TableProvider;
use datafusion::common::TableReference;
use datafusion::error::{DataFusionError, Result};
use datafusion::execution::TaskContext;
use datafusion::physical_expr::EquivalenceProperties;
use datafusion::physical_plan::execution_plan::{Boundedness, EmissionType};
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{
    DisplayAs, DisplayFormatType, Distribution, ExecutionPlan, Partitioning, PlanProperties, SendableRecordBatchStream,
};
use datafusion::prelude::SessionContext;
use futures::StreamExt;

use super::planner::QueryError;
use crate::connector::writes::{conflict, ConnectorWrite, Fragment, WritePublish};
use crate::error_code::ErrorCode;
use crate::plan_node::plan_node;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum CommitState {
    Pending,
    /// Publishing has begun: from here the write runs to its end, whatever happens to
    /// the query, and the query is not run again.
    Publishing,
    Committed,
    /// Publishing failed; the connector took back what it had put in place.
    Failed,
    Finished,
}

/// The end of one write.
pub struct TableCommit {
    ctx: SessionContext,
    table: TableReference,
    /// Where the rows go, as `EXPLAIN` shows it.
    location: String,
    publisher: Arc<dyn WritePublish>,
    update_type: &'static str,
    /// The table the write was planned against: its commit checks that the catalog
    /// still holds this very table (`table_locks`).
    planned_against: Option<Arc<dyn TableProvider>>,
    state: parking_lot::Mutex<CommitState>,
    /// Held while publishing, so that `finish` waits for a publish in flight.
    publishing: tokio::sync::Mutex<()>,
    /// Trino's update count, once committed.
    rows: std::sync::OnceLock<u64>,
}

impl fmt::Debug for TableCommit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TableCommit").field("table", &self.table).field("publisher", &self.publisher).finish()
    }
}

impl TableCommit {
    pub(super) fn new(ctx: &SessionContext, table: TableReference, write: &ConnectorWrite) -> Self {
        TableCommit {
            ctx: ctx.clone(),
            table,
            location: write.location.clone(),
            publisher: write.publish.clone(),
            update_type: write.update_type,
            planned_against: write.planned_against.clone(),
            state: parking_lot::Mutex::new(CommitState::Pending),
            publishing: tokio::sync::Mutex::new(()),
            rows: std::sync::OnceLock::new(),
        }
    }

    /// Trino's `updateType` of the statement.
    pub fn update_type(&self) -> &'static str {
        self.update_type
    }

    /// Whether the write makes a new table (`CREATE TABLE ... AS`, or of columns).
    pub fn creates_table(&self) -> bool {
        self.update_type == "CREATE TABLE"
    }

    /// Trino's update count, once the write is committed: the rows it added, or for a
    /// row-level change the rows it changed.
    pub fn update_count(&self) -> Option<u64> {
        self.rows.get().copied()
    }

    /// Whether publishing has begun (the query must then not be run again: part of
    /// its rows may be in the table).
    pub fn commit_started(&self) -> bool {
        *self.state.lock() != CommitState::Pending
    }

    /// Publishes the reported fragments, on a task of its own: a query cancelled or
    /// failing meanwhile does not stop it half-way. A second call (the root stage run
    /// again after a recovery) waits for the first and answers as it did.
    async fn publish(self: &Arc<Self>, fragments: Vec<Fragment>) -> Result<u64, QueryError> {
        let this = self.clone();
        let run = tokio::spawn(async move {
            let _publishing = this.publishing.lock().await;
            let state = *this.state.lock();
            match state {
                CommitState::Committed => return Ok(this.rows.get().copied().unwrap_or_default()),
                CommitState::Pending => *this.state.lock() = CommitState::Publishing,
                _ => return Err(QueryError::new(ErrorCode::GenericInternalError, "the write was already ended")),
            }
            // A DROP, RENAME or replacement of the table waits for this, or this for
            // it: then the table is checked to be the one the write was planned on.
            let _table = super::table_locks::lock([super::table_locks::key(&this.table)]).await;
            let outcome = match this.check_table().await {
                Ok(()) => this.publisher.publish(&fragments).await,
                Err(e) => Err(e),
            };
            if let Ok(rows) = &outcome {
                let _ = this.rows.set(*rows);
            }
            *this.state.lock() = if outcome.is_ok() { CommitState::Committed } else { CommitState::Failed };
            outcome
        });
        run.await.map_err(|e| QueryError::new(ErrorCode::GenericInternalError, format!("publishing stopped: {e}")))?
    }

    /// Whether the table is still the one the write was planned against: a `DROP`,
    /// `RENAME` or `CREATE OR REPLACE` of the table committed while this write ran is
    /// a conflict.
    async fn check_table(&self) -> Result<(), QueryError> {
        if let Some(planned) = &self.planned_against {
            let now = self.ctx.table_provider(self.table.clone()).await.ok();
            if !now.is_some_and(|now| std::ptr::addr_eq(Arc::as_ptr(&now), Arc::as_ptr(planned))) {
                return Err(conflict(self.update_type, &self.table, "the table was dropped, renamed or replaced"));
            }
        }
        Ok(())
    }

    /// Why the write failed when another write changed what it read before it could
    /// publish (see `WritePublish::conflict`); None once publishing has begun.
    pub async fn conflict(&self) -> Option<QueryError> {
        if self.commit_started() {
            return None;
        }
        self.publisher.conflict().await
    }

    /// Has the connector remove what the write left, whatever the outcome (the query
    /// has ended); a publish in flight ends first.
    pub async fn finish(self: &Arc<Self>) {
        let _publishing = self.publishing.lock().await;
        let committed = {
            let mut s = self.state.lock();
            let was = *s;
            *s = CommitState::Finished;
            was == CommitState::Committed
        };
        if !committed {
            tracing::info!(table = %self.table, "write not committed; removing what it left");
        }
        self.publisher.clone().finish(committed).await;
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
                let (Some(r), Some(f), Some(c)) = (
                    batch.column(0).as_any().downcast_ref::<UInt64Array>(),
                    batch.column(1).as_any().downcast_ref::<StringArray>(),
                    batch.column(2).as_any().downcast_ref::<UInt64Array>(),
                ) else {
                    return internal_err!("writers answered an unexpected schema");
                };
                fragments.extend((0..f.len()).map(|i| Fragment {
                    address: f.value(i).to_string(),
                    rows: r.value(i),
                    changed: c.value(i),
                }));
            }
            let rows =
                commit.publish(fragments).await.map_err(|e| DataFusionError::External(Box::new(CommitError(e))))?;
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
