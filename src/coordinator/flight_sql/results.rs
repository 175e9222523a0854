//! A statement through Flight SQL: submitted as any client's query, its schema
//! answered once planning gives it (`GetFlightInfo`), its rows streamed from the
//! query's results channel as the root stage produces them (`DoGet`), never
//! collected whole. A call that goes away before the query ends (the client
//! cancelled, the connection dropped) cancels the query, so nothing runs for a
//! client that is gone. Called by the service; owns nothing past a call.

use std::sync::Arc;
use std::time::Duration;

use arrow_flight::error::FlightError;
use datafusion::arrow::array::{ArrayRef, RecordBatch};
use datafusion::arrow::datatypes::{DataType, Field, FieldRef, Schema, SchemaRef};
use futures::{Stream, StreamExt};
use tonic::Status;

use super::status::{coordinator_status, query_status};
use crate::coordinator::planner::SessionSpec;
use crate::coordinator::query::QueryExecution;
use crate::coordinator::{Authenticated, CoordinatorError, CoordinatorState};
use crate::error_code::{ErrorCode, QueryError};
use crate::scheduling::state_machine::{QueryState, StateKind};

/// Rows and Arrow bytes taken from the results channel at a time.
const TAKE_ROWS: usize = 1 << 16;
const TAKE_BYTES: usize = 8 << 20;

/// Cancels its query when dropped, unless disarmed: a call that ends early (its
/// future or stream dropped) takes its query with it.
pub struct CancelOnDrop {
    query: Option<Arc<QueryExecution>>,
}

impl CancelOnDrop {
    pub fn new(query: Arc<QueryExecution>) -> Self {
        CancelOnDrop { query: Some(query) }
    }

    pub fn disarm(&mut self) {
        self.query = None;
    }
}

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        if let Some(q) = self.query.take() {
            if !q.state().is_final() {
                q.stop_with(QueryError::new(ErrorCode::UserCanceled, "the Flight SQL client went away"));
            }
        }
    }
}

/// A query's handle in its ticket: its id and its slug (the secret that serves it).
pub fn handle_of(q: &QueryExecution) -> String {
    format!("{}/{}", q.id, q.slug)
}

/// The query a ticket's handle names, if `login` may see it.
pub fn query_of_handle(
    coord: &CoordinatorState,
    handle: &[u8],
    login: Option<&Authenticated>,
) -> Result<Arc<QueryExecution>, Status> {
    let text = std::str::from_utf8(handle).map_err(|_| super::status::invalid("a ticket that is not ours"))?;
    let (id, slug) = text.split_once('/').ok_or_else(|| super::status::invalid("a ticket that is not ours"))?;
    let q = coord.query(id).map_err(|e| coordinator_status(&e))?;
    if !q.has_slug(slug) {
        return Err(coordinator_status(&CoordinatorError::QueryNotFound(id.to_string())));
    }
    coord.check_login_sees(login, &q).map_err(|e| coordinator_status(&e))?;
    Ok(q)
}

/// Submits `sql` and waits until its result's schema is known, or until it has ended
/// for a statement without rows of its own (DDL) or one that writes: a client that
/// sends its next statement when `GetFlightInfo` returns (ADBC's `execute` does)
/// must find the table created or the rows written, as a Trino client does after
/// the last page. Fails with the query's error if it failed by then. A query keeps
/// running for the `DoGet` that reads it.
pub async fn start(
    coord: &Arc<CoordinatorState>,
    sql: String,
    session: SessionSpec,
) -> Result<(Arc<QueryExecution>, SchemaRef), Status> {
    let q = coord.submit(sql, session);
    let mut guard = CancelOnDrop::new(q.clone());
    let mut state = q.watch_state();
    loop {
        let now = *state.borrow_and_update();
        let planned = !matches!(now, QueryState::Queued | QueryState::Planning);
        if now.is_final() || (planned && q.schema().is_some() && !changes_data(&q)) {
            break;
        }
        // A statement planned without a schema yet (EXPLAIN ANALYZE) is looked at
        // again shortly; the others wake on their next state.
        let _ = tokio::time::timeout(Duration::from_millis(20), state.changed()).await;
    }
    if q.state() == QueryState::Failed {
        return Err(failure(&q));
    }
    let schema = flight_schema(&q.schema().unwrap_or_else(|| Arc::new(Schema::empty())));
    guard.disarm();
    Ok((q, schema))
}

/// Whether a statement writes or changes metadata (its update type is known once it
/// is planned).
fn changes_data(q: &QueryExecution) -> bool {
    let p = q.progress();
    p.update.is_some() || p.update_type.is_some()
}

/// The status of a failed query.
pub fn failure(q: &QueryExecution) -> Status {
    let e = q.error().unwrap_or_else(|| QueryError::new(ErrorCode::GenericInternalError, "the query failed"));
    query_status(&e)
}

/// Runs a statement to its end, its rows (if any) read and dropped, and returns it
/// with its update count (0 for a statement that writes none).
pub async fn run_to_end(
    coord: &Arc<CoordinatorState>,
    sql: String,
    session: SessionSpec,
) -> Result<(Arc<QueryExecution>, i64), Status> {
    let q = coord.submit(sql, session);
    let _guard = CancelOnDrop::new(q.clone());
    loop {
        q.touch_client();
        let deadline = tokio::time::Instant::now() + Duration::from_secs(1);
        let (_, exhausted) = q.take_results(TAKE_ROWS, TAKE_BYTES, deadline).await;
        if exhausted || (q.schema().is_none() && q.state().is_final()) {
            break;
        }
    }
    let _ = q.watch_state().wait_for(|s| s.is_final()).await;
    if q.state() == QueryState::Failed {
        return Err(failure(&q));
    }
    let update = q.progress().update.clone();
    let count = update.and_then(|w| w.update_count()).map_or(0, |n| n as i64);
    Ok((q, count))
}

/// The session changes of a finished statement (`USE`, `SET SESSION`).
pub fn session_changes(q: &QueryExecution) -> Vec<crate::coordinator::session_statement::SessionChange> {
    match q.state() {
        QueryState::Finished => q.progress().session_changes.clone(),
        _ => Vec::new(),
    }
}

/// The query's rows as they come, as `schema`'s batches; ends with the query's error
/// if it fails. Dropping the stream before its end cancels the query.
pub fn stream_results(
    q: Arc<QueryExecution>,
    schema: SchemaRef,
) -> impl Stream<Item = Result<RecordBatch, FlightError>> + Send + 'static {
    struct Reading {
        q: Arc<QueryExecution>,
        schema: SchemaRef,
        guard: CancelOnDrop,
        done: bool,
    }
    let start = Reading { guard: CancelOnDrop::new(q.clone()), q, schema, done: false };
    futures::stream::unfold(start, |mut r| async move {
        if r.done {
            return None;
        }
        loop {
            r.q.touch_client();
            let deadline = tokio::time::Instant::now() + Duration::from_secs(1);
            let (batches, exhausted) = r.q.take_results(TAKE_ROWS, TAKE_BYTES, deadline).await;
            let ended = exhausted || (r.q.schema().is_none() && r.q.state().is_final());
            let mut out: Vec<Result<RecordBatch, FlightError>> =
                batches.into_iter().map(|b| conform(b, &r.schema).map_err(FlightError::from)).collect();
            if ended {
                let _ = r.q.watch_state().wait_for(|s| s.is_final()).await;
                if r.q.state() == QueryState::Failed {
                    out.push(Err(FlightError::Tonic(Box::new(failure(&r.q)))));
                } else if r.q.results_dropped() {
                    let e = QueryError::new(ErrorCode::AbandonedQuery, "the query's rows were dropped unread");
                    out.push(Err(FlightError::Tonic(Box::new(query_status(&e)))));
                }
                r.guard.disarm();
                r.done = true;
            }
            if !out.is_empty() || r.done {
                return Some((futures::stream::iter(out), r));
            }
        }
    })
    .flatten()
}

/// A schema as Flight SQL clients read it: string and binary views as their plain
/// types, which every Arrow implementation reads (the engine's views are a
/// representation, not a type the user chose). Nested fields are converted too.
pub fn flight_schema(schema: &Schema) -> SchemaRef {
    let fields: Vec<FieldRef> = schema.fields().iter().map(|f| Arc::new(flight_field(f))).collect();
    Arc::new(Schema::new(fields))
}

fn flight_field(f: &Field) -> Field {
    f.clone().with_data_type(flight_type(f.data_type()))
}

fn flight_type(t: &DataType) -> DataType {
    match t {
        DataType::Utf8View => DataType::Utf8,
        DataType::BinaryView => DataType::Binary,
        DataType::List(f) => DataType::List(Arc::new(flight_field(f))),
        DataType::LargeList(f) => DataType::LargeList(Arc::new(flight_field(f))),
        DataType::ListView(f) => DataType::List(Arc::new(flight_field(f))),
        DataType::FixedSizeList(f, n) => DataType::FixedSizeList(Arc::new(flight_field(f)), *n),
        DataType::Struct(fields) => DataType::Struct(fields.iter().map(|f| Arc::new(flight_field(f))).collect()),
        DataType::Map(f, sorted) => DataType::Map(Arc::new(flight_field(f)), *sorted),
        other => other.clone(),
    }
}

/// A batch in the schema announced for its query: columns cast where their type
/// differs (views), the announced names and nullability kept.
pub fn conform(batch: RecordBatch, schema: &SchemaRef) -> Result<RecordBatch, datafusion::arrow::error::ArrowError> {
    if batch.schema() == *schema {
        return Ok(batch);
    }
    let columns = batch
        .columns()
        .iter()
        .zip(schema.fields())
        .map(|(c, f)| match c.data_type() == f.data_type() {
            true => Ok(c.clone()),
            false => datafusion::arrow::compute::cast(c, f.data_type()),
        })
        .collect::<Result<Vec<ArrayRef>, _>>()?;
    let options = datafusion::arrow::array::RecordBatchOptions::new().with_row_count(Some(batch.num_rows()));
    RecordBatch::try_new_with_options(schema.clone(), columns, &options)
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::arrow::array::{Int32Array, StringViewArray};

    #[test]
    fn views_become_plain_types_and_batches_follow() {
        let engine = Arc::new(Schema::new(vec![
            Field::new("a", DataType::Int32, false),
            Field::new("s", DataType::Utf8View, true),
            Field::new("l", DataType::List(Arc::new(Field::new("item", DataType::Utf8View, true))), true),
        ]));
        let announced = flight_schema(&engine);
        assert_eq!(announced.field(1).data_type(), &DataType::Utf8);
        assert!(!announced.field(0).is_nullable());
        let list = DataType::List(Arc::new(Field::new("item", DataType::Utf8, true)));
        assert_eq!(announced.field(2).data_type(), &list);
        let batch = RecordBatch::try_new(
            Arc::new(Schema::new(engine.fields()[..2].to_vec())),
            vec![Arc::new(Int32Array::from(vec![1, 2])), Arc::new(StringViewArray::from(vec![Some("x"), None]))],
        )
        .unwrap();
        let two = Arc::new(Schema::new(announced.fields()[..2].to_vec()));
        let out = conform(batch, &two).unwrap();
        assert_eq!(out.schema(), two);
        assert_eq!(out.num_rows(), 2);
        assert_eq!(out.column(1).null_count(), 1);
    }
}
