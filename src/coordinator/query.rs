//! `QueryExecution`: one query on the coordinator as clients and the web page see it:
//! its state machine, its session, the bounded results channel that the statement
//! protocol drains, its stages and their tasks, cancellation. `execution::run_query`
//! drives it to a final state. Its progress (state, error, schema, stages, writes) is
//! one `QueryProgress` under one lock, read whole by `detail` as Trino's
//! `QueryStateMachine` gives a query's info; counters are atomics.

use crate::error_code::ErrorCode;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use datafusion::arrow::array::RecordBatch;
use datafusion::arrow::datatypes::SchemaRef;
use parking_lot::Mutex;
use serde::Serialize;
use tokio::sync::{mpsc, watch};

use super::planner::{QueryError, SessionSpec};
use crate::exchange::client::ExchangeStats;
use crate::plan::fragmenter::FragmentedPlan;
use crate::scheduling::pipelined::{StageExecution, StageInfo};
use crate::scheduling::state_machine::{QueryState, StateKind, StateMachine};

pub struct QueryExecution {
    pub id: String,
    /// The query's secret part of its URIs (Trino's slug): its `nextUri` pages and
    /// cancels it, its id alone does not.
    pub slug: String,
    pub sql: String,
    pub session: SessionSpec,
    pub(super) state_tx: watch::Sender<QueryState>,
    pub(super) created: Instant,
    pub(super) created_at: SystemTime,
    progress: Mutex<QueryProgress>,
    /// Async, as a page waits for rows holding it.
    pub(super) results_rx: tokio::sync::Mutex<mpsc::Receiver<Buffered>>,
    /// The coordinator's bytes for rows waiting for their clients, shared by every
    /// query: a batch holds its share until a page takes it.
    results_budget: ResultsBudget,
    pub(super) cancel: watch::Sender<bool>,
    /// The statement protocol's last page, under the lock that takes rows (see
    /// `statement::get_results`).
    pub(crate) paging: tokio::sync::Mutex<PageState>,
    pub(super) output_rows: AtomicU64,
    /// Set once the last row is emitted (see `take_results`).
    output_complete: AtomicBool,
    /// Rows the client never came for were dropped (`drop_unread_results`).
    results_dropped: AtomicBool,
    /// `query_max_memory` in bytes, once the session is read (0: no limit).
    pub(super) memory_limit: AtomicU64,
    /// Times the whole query was run again (retry_policy=query).
    pub retries: AtomicU64,
    pub root_input: Arc<ExchangeStats>,
    pub(super) nodes: AtomicU64,
}

/// What a query has done so far, changed under one lock.
pub(super) struct QueryProgress {
    machine: StateMachine<QueryState>,
    ended: Option<Instant>,
    error: Option<QueryError>,
    pub schema: Option<SchemaRef>,
    /// Closed (taken) when the query is final: readers learn no more batches come.
    results_tx: Option<mpsc::Sender<Buffered>>,
    pub stages: Vec<Arc<StageExecution>>,
    pub fragments: Option<Arc<FragmentedPlan>>,
    /// Writes of the query's attempts, finished (staging removed) when it ends.
    pub writes: Vec<Arc<super::table_commit::TableCommit>>,
    /// The write whose update count the client gets (the last attempt's).
    pub update: Option<Arc<super::table_commit::TableCommit>>,
    /// The `ExecutionGraph` as text (retry_policy=task), kept current by its scheduler.
    pub graph: Option<Arc<crate::scheduling::fault_tolerant::GraphText>>,
    /// Why the query was stopped from outside: USER_CANCELED, ABANDONED_QUERY.
    pub cancel_reason: Option<QueryError>,
    /// When the client last asked for results (`query.client.timeout`).
    last_client_contact: Instant,
    /// Trino's `updateType` of a statement that is not a write (`SET SESSION`, `USE`).
    pub update_type: Option<&'static str>,
    /// Headers that change the client's session, sent once the statement finished.
    pub session_changes: Vec<super::session_statement::SessionChange>,
}

/// The last page the statement protocol served: its token and document.
#[derive(Default)]
pub struct PageState {
    pub token: u64,
    /// The serialized `QueryResults` document (rows following it as text or Arrow
    /// where the client asked for them so), and its content type.
    pub page: Option<(bytes::Bytes, &'static str)>,
    /// Bytes per row of the last page with rows, which sizes the next; None while no
    /// page had rows (an Arrow client then gets the schema with the last page).
    pub row_bytes: Option<f64>,
    /// Rows served so far, and spooling segments (Trino's spooling protocol).
    pub rows_served: u64,
    pub segments: u32,
    /// The spooling protocol's encoding, chosen from the client's list when the
    /// query was submitted; None: JSON pages.
    pub encoding: Option<super::spooling::Encoding>,
}

#[derive(Debug, Clone, Serialize)]
pub struct QuerySummary {
    pub query_id: String,
    pub state: QueryState,
    pub user: String,
    pub sql: String,
    pub elapsed_ms: u64,
    pub rows: u64,
    pub created_epoch_ms: u64,
    #[serde(serialize_with = "error_info")]
    pub error: Option<QueryError>,
}

/// A query's error as query info shows it: in this API's snake_case, where the client
/// protocol's `QueryError` is Trino's camelCase.
fn error_info<S: serde::Serializer>(e: &Option<QueryError>, s: S) -> Result<S::Ok, S::Error> {
    #[derive(Serialize)]
    struct ErrorInfo<'a> {
        error_name: &'a str,
        error_code: i64,
        error_type: crate::error_code::ErrorType,
        message: &'a str,
    }
    let info = e.as_ref().map(|e| ErrorInfo {
        error_name: e.error_name.name(),
        error_code: e.error_code,
        error_type: e.error_type,
        message: &e.message,
    });
    info.serialize(s)
}

#[derive(Debug, Clone, Serialize)]
pub struct QueryDetail {
    #[serde(flatten)]
    pub summary: QuerySummary,
    pub stages: Vec<StageInfo>,
    /// Its stages' memory, added up (the coordinator's own stage is not counted).
    pub memory: crate::protocol::MemoryStats,
    pub fragment_dag: Option<String>,
    /// Fault-tolerant mode: the execution graph, rendered as Ballista does.
    pub execution_graph: Option<String>,
}

/// A batch waiting for its client, with its share of the results budget.
pub(super) type Buffered = (RecordBatch, tokio::sync::OwnedSemaphorePermit);

/// What the coordinator may hold of rows no client has taken yet, over all queries
/// (in KiB). A query whose rows would pass it waits, and so do its tasks, until pages
/// take rows or ended queries' unread rows are dropped (`query.client.timeout`):
/// queries nobody reads cannot fill the coordinator's memory.
#[derive(Debug, Clone)]
pub struct ResultsBudget {
    kib: Arc<tokio::sync::Semaphore>,
    total_kib: usize,
}

impl ResultsBudget {
    pub fn new(bytes: usize) -> Self {
        let total_kib = (bytes >> 10).max(1);
        ResultsBudget { kib: Arc::new(tokio::sync::Semaphore::new(total_kib)), total_kib }
    }

    /// A tenth of the machine's memory, between 256 MiB and 4 GiB.
    pub fn for_machine() -> Self {
        let tenth = (crate::worker::memory::available_memory() / 10) as usize;
        Self::new(tenth.clamp(256 << 20, 4 << 30))
    }

    /// Waits for `batch`'s share (the whole budget at most, so any batch fits alone).
    async fn reserve(&self, batch: &RecordBatch) -> Option<tokio::sync::OwnedSemaphorePermit> {
        let kib = (batch.get_array_memory_size() >> 10).clamp(1, self.total_kib) as u32;
        self.kib.clone().acquire_many_owned(kib).await.ok()
    }

    /// KiB not held by any buffered batch.
    pub fn available_kib(&self) -> usize {
        self.kib.available_permits()
    }
}

impl QueryExecution {
    /// Whether `slug` is this query's (compared in constant time: a wrong guess
    /// learns nothing of how close it came).
    pub fn has_slug(&self, slug: &str) -> bool {
        crate::util::constant_time_eq(self.slug.as_bytes(), slug.as_bytes())
    }

    pub fn new(id: String, sql: String, session: SessionSpec, results_budget: ResultsBudget) -> Arc<Self> {
        let (tx, rx) = mpsc::channel(8);
        let (cancel, _) = watch::channel(false);
        let (state_tx, _) = watch::channel(QueryState::Queued);
        let progress = QueryProgress {
            machine: StateMachine::new(format!("query {id}"), QueryState::Queued),
            ended: None,
            error: None,
            schema: None,
            results_tx: Some(tx),
            stages: Vec::new(),
            fragments: None,
            writes: Vec::new(),
            update: None,
            graph: None,
            cancel_reason: None,
            last_client_contact: Instant::now(),
            update_type: None,
            session_changes: Vec::new(),
        };
        Arc::new(QueryExecution {
            progress: Mutex::new(progress),
            id,
            slug: crate::util::random_suffix(24),
            sql,
            session,
            state_tx,
            created: Instant::now(),
            created_at: SystemTime::now(),
            results_rx: tokio::sync::Mutex::new(rx),
            results_budget,
            cancel,
            paging: tokio::sync::Mutex::new(PageState::default()),
            output_rows: AtomicU64::new(0),
            output_complete: AtomicBool::new(false),
            results_dropped: AtomicBool::new(false),
            memory_limit: AtomicU64::new(0),
            retries: AtomicU64::new(0),
            root_input: Arc::new(ExchangeStats::default()),
            nodes: AtomicU64::new(0),
        })
    }

    /// The query's progress, to read or change under its one lock. Hold it briefly:
    /// never across an await or a call back into this query.
    pub(super) fn progress(&self) -> parking_lot::MutexGuard<'_, QueryProgress> {
        self.progress.lock()
    }

    pub fn state(&self) -> QueryState {
        self.progress().machine.state()
    }

    pub fn watch_state(&self) -> watch::Receiver<QueryState> {
        self.state_tx.subscribe()
    }

    pub(crate) fn transition(&self, to: QueryState) -> bool {
        let mut p = self.progress();
        let changed = p.machine.try_transition(to);
        if changed {
            if to.is_final() {
                p.ended = Some(Instant::now());
                // Closing the channel tells readers no more batches come.
                p.results_tx.take();
            }
            self.state_tx.send_replace(to);
        }
        changed
    }

    pub fn error(&self) -> Option<QueryError> {
        self.progress().error.clone()
    }

    pub fn schema(&self) -> Option<SchemaRef> {
        self.progress().schema.clone()
    }

    pub fn elapsed(&self) -> Duration {
        let ended = self.progress().ended;
        ended.unwrap_or_else(Instant::now).duration_since(self.created)
    }

    pub fn output_rows(&self) -> u64 {
        self.output_rows.load(Ordering::Relaxed)
    }

    pub fn node_count(&self) -> u64 {
        self.nodes.load(Ordering::Relaxed)
    }

    pub fn stages(&self) -> Vec<Arc<StageExecution>> {
        self.progress().stages.clone()
    }

    /// Asks the query to stop; it ends FAILED with USER_CANCELED.
    pub fn cancel(&self) {
        self.stop_with(QueryError::new(ErrorCode::UserCanceled, "Query was canceled"));
    }

    /// Stops the query from outside; it ends FAILED with `reason` (the first one given).
    pub fn stop_with(&self, reason: QueryError) {
        self.progress().cancel_reason.get_or_insert(reason);
        self.cancel.send_replace(true);
    }

    /// Why the query was stopped from outside (USER_CANCELED unless told otherwise).
    pub(super) fn stop_reason(&self) -> QueryError {
        let reason = self.progress().cancel_reason.clone();
        reason.unwrap_or_else(|| QueryError::new(ErrorCode::UserCanceled, "Query was canceled"))
    }

    /// Whether the query was told to stop (`stop_with`), ended or not.
    pub fn is_stopping(&self) -> bool {
        *self.cancel.borrow()
    }

    /// Records that the client asked for results.
    pub fn touch_client(&self) {
        self.progress().last_client_contact = Instant::now();
    }

    /// How long since the client last asked for results.
    pub fn client_idle(&self) -> Duration {
        self.progress().last_client_contact.elapsed()
    }

    /// Takes up to `max_rows` buffered rows, waiting until `deadline` for the first
    /// batch. Returns the batches and whether the results are exhausted.
    ///
    /// Once rows are in hand it still waits a moment (`END_GRACE`) when the channel
    /// runs dry, and up to `deadline` once the producer has said no rows follow
    /// (`mark_output_complete`): the channel closes only when the query is final, a
    /// moment after its last rows, and a page that carries them together with the end
    /// spares the client a round trip (`SELECT 1` is then one request).
    pub async fn take_results(
        &self,
        max_rows: usize,
        max_bytes: usize,
        deadline: tokio::time::Instant,
    ) -> (Vec<RecordBatch>, bool) {
        const END_GRACE: Duration = Duration::from_millis(2);
        let mut rx = self.results_rx.lock().await;
        let mut out = Vec::new();
        let (mut rows, mut bytes) = (0, 0);
        match tokio::time::timeout_at(deadline, rx.recv()).await {
            Err(_) => return (out, false),
            Ok(None) => return (out, true),
            // The batch leaves the buffer, and its share of the budget with it.
            Ok(Some((b, _share))) => {
                rows += b.num_rows();
                bytes += b.get_array_memory_size();
                out.push(b);
            }
        }
        while rows < max_rows && bytes < max_bytes {
            let (next, _share) = match rx.try_recv() {
                Ok(b) => b,
                Err(mpsc::error::TryRecvError::Disconnected) => return (out, true),
                Err(mpsc::error::TryRecvError::Empty) => {
                    let now = tokio::time::Instant::now();
                    let until = if self.output_complete.load(Ordering::Acquire) {
                        deadline
                    } else {
                        deadline.min(now + END_GRACE)
                    };
                    match tokio::time::timeout_at(until, rx.recv()).await {
                        Ok(Some(b)) => b,
                        Ok(None) => return (out, true),
                        Err(_) if until < deadline && self.output_complete.load(Ordering::Acquire) => continue,
                        Err(_) => return (out, false),
                    }
                }
            };
            rows += next.num_rows();
            bytes += next.get_array_memory_size();
            out.push(next);
        }
        (out, false)
    }

    /// Drops the rows of an ended query that its client stopped coming for
    /// (`query.client.timeout`): they are the coordinator's memory, and nobody is
    /// going to read them. Later pages say so rather than end the result early.
    pub(super) fn drop_unread_results(&self) -> bool {
        let Ok(mut rx) = self.results_rx.try_lock() else { return false };
        let mut dropped = false;
        while rx.try_recv().is_ok() {
            dropped = true;
        }
        if dropped {
            self.results_dropped.store(true, Ordering::Release);
        }
        dropped
    }

    /// Whether rows were dropped unread (see `drop_unread_results`).
    pub fn results_dropped(&self) -> bool {
        self.results_dropped.load(Ordering::Acquire)
    }

    /// The producer has emitted its last row: a reader may wait for the channel to
    /// close (the query to end) rather than hand out a page without the end.
    pub(crate) fn mark_output_complete(&self) {
        self.output_complete.store(true, Ordering::Release);
    }

    pub fn summary(&self) -> QuerySummary {
        self.summary_of(&self.progress())
    }

    /// The summary as of `p`, one consistent moment of the query.
    fn summary_of(&self, p: &QueryProgress) -> QuerySummary {
        QuerySummary {
            query_id: self.id.clone(),
            state: p.machine.state(),
            user: self.session.user.clone(),
            sql: self.sql.clone(),
            elapsed_ms: p.ended.unwrap_or_else(Instant::now).duration_since(self.created).as_millis() as u64,
            rows: self.output_rows(),
            created_epoch_ms: self
                .created_at
                .duration_since(SystemTime::UNIX_EPOCH)
                .map(|d| d.as_millis() as u64)
                .unwrap_or(0),
            error: p.error.clone(),
        }
    }

    /// The query's info: its progress read under the lock once, its stages' (which
    /// have locks of their own) after.
    pub fn detail(&self) -> QueryDetail {
        let (summary, stages, fragment_dag, graph) = {
            let p = self.progress();
            (self.summary_of(&p), p.stages.clone(), p.fragments.as_ref().map(|f| f.to_dot()), p.graph.clone())
        };
        let stages: Vec<StageInfo> = stages.iter().map(|s| s.info()).collect();
        QueryDetail {
            summary,
            memory: stages.iter().fold(Default::default(), |m, s| m + s.memory),
            stages,
            fragment_dag,
            execution_graph: graph.map(|g| g.read()),
        }
    }

    /// Fails a query that never ran (refused before planning).
    pub(crate) fn fail_at_once(&self, e: QueryError) {
        self.fail(e);
    }

    pub(super) fn fail(&self, e: QueryError) {
        {
            let mut p = self.progress();
            if p.error.is_none() && !p.machine.is_final() {
                p.error = Some(e);
            }
        }
        self.transition(QueryState::Failed);
    }

    pub(crate) async fn emit(&self, batch: RecordBatch) -> bool {
        if batch.num_rows() == 0 {
            return true;
        }
        let tx = self.progress().results_tx.clone();
        let Some(tx) = tx else { return false };
        let Some(share) = self.results_budget.reserve(&batch).await else { return false };
        self.output_rows.fetch_add(batch.num_rows() as u64, Ordering::Relaxed);
        tx.send((batch, share)).await.is_ok()
    }

    pub(super) async fn cancelled(&self) {
        let mut rx = self.cancel.subscribe();
        let _ = rx.wait_for(|c| *c).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::arrow::array::Int64Array;
    use datafusion::arrow::datatypes::{DataType, Field, Schema};

    fn batch(rows: i64) -> RecordBatch {
        let schema = Arc::new(Schema::new(vec![Field::new("k", DataType::Int64, false)]));
        RecordBatch::try_new(schema, vec![Arc::new(Int64Array::from_iter_values(0..rows))]).unwrap()
    }

    /// Rows waiting for clients hold the shared budget: a query past it waits until a
    /// page takes rows, or its unread rows are dropped.
    #[tokio::test]
    async fn buffered_rows_are_bounded_by_the_results_budget() {
        let budget = ResultsBudget::new(96 << 10);
        let q = QueryExecution::new("q".into(), "SELECT".into(), SessionSpec::default(), budget.clone());
        let other = QueryExecution::new("o".into(), "SELECT".into(), SessionSpec::default(), budget.clone());
        // 8,192 rows of 8 bytes: 64 KiB each.
        assert!(q.emit(batch(8192)).await);
        assert!(budget.available_kib() < 64, "{}", budget.available_kib());
        let waiting = tokio::time::timeout(Duration::from_millis(200), other.emit(batch(8192))).await;
        assert!(waiting.is_err(), "a second batch past the budget waits");
        let deadline = tokio::time::Instant::now() + Duration::from_secs(1);
        let (taken, _) = q.take_results(100_000, usize::MAX, deadline).await;
        assert_eq!(taken.iter().map(|b| b.num_rows()).sum::<usize>(), 8192);
        assert!(tokio::time::timeout(Duration::from_secs(1), other.emit(batch(8192))).await.is_ok(), "room again");
        assert!(other.drop_unread_results());
        assert_eq!(budget.available_kib(), 96, "dropped rows give their share back");
    }
}
