//! The worker's task REST API (axum). Thin: parse the request, call the
//! `SqlTaskManager` or the task's `OutputBuffer`, render JSON or framed Arrow pages.
//! Bodies are parsed by hand so a malformed one gets our JSON error, not axum's text.

use std::sync::Arc;
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, HeaderValue};
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get};
use axum::{Json, Router};
use serde::Deserialize;

use super::failure_injector::{InjectedFailure, InjectedFailureKind};
use super::task_manager::SqlTaskManager;
use super::WorkerError;
use crate::exchange::page::frame_pages;
use crate::protocol::{self, TaskId, TaskUpdateRequest};

type Mgr = State<Arc<SqlTaskManager>>;

pub fn router(manager: Arc<SqlTaskManager>) -> Router {
    let router = Router::new();
    let router = if manager.injector.is_some() {
        router.route("/v1/failure-injection", get(list_failures).post(inject_failure).delete(clear_failures))
    } else {
        router
    };
    router
        .route("/v1/task", get(list_tasks))
        .route("/v1/task/{task_id}", get(task_info).post(update_task).delete(delete_task))
        .route("/v1/task/{task_id}/status", get(task_status))
        .route("/v1/task/{task_id}/results/{buffer_id}/{token}", get(get_results))
        .route("/v1/task/{task_id}/results/{buffer_id}/{token}/acknowledge", get(acknowledge))
        .route("/v1/task/{task_id}/results/{buffer_id}", delete(destroy_buffer))
        .route("/v1/task/{task_id}/dynamic-filter/{filter_id}", get(dynamic_filter))
        .route("/v1/memory/fragments/{id}", get(memory_fragment))
        .route("/v1/memory/settle", axum::routing::post(settle_memory_write))
        .route("/v1/memory/drop", axum::routing::post(drop_memory_fragments))
        .route("/v1/info", get(info))
        .route("/v1/info/state", get(node_state).put(set_node_state))
        .route("/v1/status", get(info))
        .fallback(not_found)
        .with_state(manager)
}

/// Trino's node state: `"ACTIVE"` or `"SHUTTING_DOWN"`.
async fn node_state(State(m): Mgr) -> Response {
    Json(if m.is_shutting_down() { "SHUTTING_DOWN" } else { "ACTIVE" }).into_response()
}

/// `PUT /v1/info/state` with `"SHUTTING_DOWN"` drains the worker and then stops it;
/// there is no way back, as in Trino.
async fn set_node_state(State(m): Mgr, body: Bytes) -> Result<Response, WorkerError> {
    let state: String = serde_json::from_slice(&body)
        .map_err(|e| WorkerError::BadRequest(format!("expected a JSON string such as \"SHUTTING_DOWN\": {e}")))?;
    match state.as_str() {
        "SHUTTING_DOWN" => {
            m.begin_shutdown();
            Ok(axum::http::StatusCode::OK.into_response())
        }
        "ACTIVE" if !m.is_shutting_down() => Ok(axum::http::StatusCode::OK.into_response()),
        other => Err(WorkerError::BadRequest(format!("cannot change a worker's state to '{other}'"))),
    }
}

async fn not_found() -> Response {
    let mut resp = WorkerError::BadRequest("no such endpoint".into()).into_response();
    *resp.status_mut() = axum::http::StatusCode::NOT_FOUND;
    resp
}

fn parse_task_id(raw: &str) -> Result<TaskId, WorkerError> {
    raw.parse().map_err(WorkerError::BadRequest)
}

fn header_u64(headers: &HeaderMap, name: &str) -> Option<u64> {
    headers.get(name)?.to_str().ok()?.parse().ok()
}

async fn list_tasks(State(m): Mgr) -> Response {
    Json(m.list()).into_response()
}

async fn info(State(m): Mgr) -> Response {
    Json(m.node_info()).into_response()
}

async fn update_task(State(m): Mgr, Path(task_id): Path<String>, body: Bytes) -> Result<Response, WorkerError> {
    let id = parse_task_id(&task_id)?;
    m.injected(&id, InjectedFailureKind::is_task_management).await?;
    let req: TaskUpdateRequest =
        serde_json::from_slice(&body).map_err(|e| WorkerError::BadRequest(format!("malformed task update: {e}")))?;
    if id.query_id.is_empty() {
        return Err(WorkerError::BadRequest("empty query id".into()));
    }
    Ok(Json(m.update(id, req)?).into_response())
}

async fn task_info(State(m): Mgr, Path(task_id): Path<String>) -> Result<Response, WorkerError> {
    let id = parse_task_id(&task_id)?;
    Ok(Json(m.get(&id)?.info()).into_response())
}

async fn task_status(State(m): Mgr, Path(task_id): Path<String>, headers: HeaderMap) -> Result<Response, WorkerError> {
    let id = parse_task_id(&task_id)?;
    m.injected(&id, InjectedFailureKind::is_task_management).await?;
    let task = m.get(&id)?;
    let status = match header_u64(&headers, protocol::HEADER_CURRENT_VERSION) {
        Some(version) => {
            let wait =
                Duration::from_millis(header_u64(&headers, protocol::HEADER_MAX_WAIT).unwrap_or(1000).min(10_000));
            let status = task.wait_status(version, wait).await;
            task.touch();
            status
        }
        None => task.status(),
    };
    Ok(Json(status).into_response())
}

#[derive(Deserialize)]
struct DeleteParams {
    #[serde(default)]
    abort: Option<bool>,
}

async fn delete_task(
    State(m): Mgr,
    Path(task_id): Path<String>,
    Query(p): Query<DeleteParams>,
) -> Result<Response, WorkerError> {
    let id = parse_task_id(&task_id)?;
    Ok(Json(m.delete(&id, p.abort.unwrap_or(true))?).into_response())
}

async fn get_results(
    State(m): Mgr,
    Path((task_id, buffer_id, token)): Path<(String, String, String)>,
    headers: HeaderMap,
) -> Result<Response, WorkerError> {
    let id = parse_task_id(&task_id)?;
    let buffer: usize =
        buffer_id.parse().map_err(|_| WorkerError::BadRequest(format!("bad buffer id '{buffer_id}'")))?;
    let token: u64 = token.parse().map_err(|_| WorkerError::BadRequest(format!("bad token '{token}'")))?;
    let (max_bytes, max_wait) = results_limits(&headers);
    match m.read_results(&id, buffer, token, max_bytes, max_wait).await {
        Ok(result) => pages_response(&result),
        Err(e @ WorkerError::TaskFailed { .. }) => {
            // A consumer asking a failed (or, spooled, aborted) task for pages learns why.
            let cause = e.failed_task_code().and_then(|c| HeaderValue::from_str(c.name()).ok());
            let mut resp = e.into_response();
            resp.headers_mut().insert(protocol::HEADER_TASK_FAILED, HeaderValue::from_static("true"));
            if let Some(cause) = cause {
                resp.headers_mut().insert(protocol::HEADER_TASK_FAILURE_CODE, cause);
            }
            Ok(resp)
        }
        Err(e) => Err(e),
    }
}

/// The body and headers of one results response; `flotilla bench exchange` serves
/// the same.
pub(crate) fn pages_response(result: &crate::exchange::output_buffer::BufferResult) -> Result<Response, WorkerError> {
    let body = frame_pages(&result.pages).map_err(|e| WorkerError::Encode(e.to_string()))?;
    let mut resp = body.into_response();
    let h = resp.headers_mut();
    h.insert(protocol::HEADER_NEXT_TOKEN, HeaderValue::from(result.next_token));
    h.insert(
        protocol::HEADER_BUFFER_COMPLETE,
        HeaderValue::from_static(if result.complete { "true" } else { "false" }),
    );
    h.insert(axum::http::header::CONTENT_TYPE, HeaderValue::from_static("application/x-flotilla-pages"));
    Ok(resp)
}

/// A results request's page-size limit and long-poll wait, from its headers.
pub(crate) fn results_limits(headers: &HeaderMap) -> (u64, Duration) {
    let max_bytes = header_u64(headers, protocol::HEADER_MAX_SIZE).unwrap_or(8 << 20);
    let max_wait = Duration::from_millis(header_u64(headers, protocol::HEADER_MAX_WAIT).unwrap_or(1000).min(10_000));
    (max_bytes, max_wait)
}

/// A `memory` table fragment held here, as an Arrow IPC stream.
async fn memory_fragment(State(m): Mgr, Path(id): Path<String>) -> Result<Response, WorkerError> {
    let batches = m.memory_fragments().local(&id).ok_or(WorkerError::NoMemoryFragment(id))?;
    let body = crate::connector::memory::fragments::to_ipc(&batches).map_err(|e| WorkerError::Encode(e.to_string()))?;
    let mut resp = body.into_response();
    resp.headers_mut()
        .insert(axum::http::header::CONTENT_TYPE, HeaderValue::from_static("application/vnd.apache.arrow.stream"));
    Ok(resp)
}

/// The end of a write into a `memory` table: what its commit kept stays.
async fn settle_memory_write(State(m): Mgr, body: Bytes) -> Result<Response, WorkerError> {
    let settle: crate::connector::memory::fragments::Settle =
        serde_json::from_slice(&body).map_err(|e| WorkerError::BadRequest(format!("malformed settle: {e}")))?;
    m.memory_fragments().settle(&settle);
    Ok(axum::http::StatusCode::NO_CONTENT.into_response())
}

/// A dropped `memory` table's fragments, by id.
async fn drop_memory_fragments(State(m): Mgr, body: Bytes) -> Result<Response, WorkerError> {
    let ids: Vec<String> =
        serde_json::from_slice(&body).map_err(|e| WorkerError::BadRequest(format!("malformed fragment ids: {e}")))?;
    m.memory_fragments().drop_fragments(&ids);
    Ok(axum::http::StatusCode::NO_CONTENT.into_response())
}

/// A build-side task's join key hashes for a dynamic filter, little-endian u64s.
async fn dynamic_filter(
    State(m): Mgr,
    Path((task_id, filter_id)): Path<(String, String)>,
) -> Result<Response, WorkerError> {
    let id = parse_task_id(&task_id)?;
    let filter: usize =
        filter_id.parse().map_err(|_| WorkerError::BadRequest(format!("bad dynamic filter id '{filter_id}'")))?;
    let hashes = m.get(&id)?.dynamic_filter(filter).ok_or(WorkerError::NoDynamicFilter { task: id, filter })?;
    let mut body = Vec::new();
    crate::plan::dynamic_filter_exec::hashes_to_bytes(&hashes, &mut body);
    let mut resp = body.into_response();
    resp.headers_mut().insert(axum::http::header::CONTENT_TYPE, HeaderValue::from_static("application/octet-stream"));
    Ok(resp)
}

async fn acknowledge(
    State(m): Mgr,
    Path((task_id, buffer_id, token)): Path<(String, String, String)>,
) -> Result<Response, WorkerError> {
    let id = parse_task_id(&task_id)?;
    let buffer: usize =
        buffer_id.parse().map_err(|_| WorkerError::BadRequest(format!("bad buffer id '{buffer_id}'")))?;
    let token: u64 = token.parse().map_err(|_| WorkerError::BadRequest(format!("bad token '{token}'")))?;
    m.get(&id)?.acknowledge(buffer, token)?;
    Ok(axum::http::StatusCode::NO_CONTENT.into_response())
}

async fn destroy_buffer(
    State(m): Mgr,
    Path((task_id, buffer_id)): Path<(String, String)>,
) -> Result<Response, WorkerError> {
    let id = parse_task_id(&task_id)?;
    let buffer: usize =
        buffer_id.parse().map_err(|_| WorkerError::BadRequest(format!("bad buffer id '{buffer_id}'")))?;
    m.get(&id)?.destroy_buffer(buffer)?;
    Ok(axum::http::StatusCode::NO_CONTENT.into_response())
}

async fn inject_failure(State(m): Mgr, body: Bytes) -> Result<Response, WorkerError> {
    let f: InjectedFailure =
        serde_json::from_slice(&body).map_err(|e| WorkerError::BadRequest(format!("malformed failure: {e}")))?;
    if let Some(inj) = &m.injector {
        inj.inject(f);
    }
    Ok(axum::http::StatusCode::NO_CONTENT.into_response())
}

async fn list_failures(State(m): Mgr) -> Response {
    Json(m.injector.as_ref().map(|i| i.list()).unwrap_or_default()).into_response()
}

async fn clear_failures(State(m): Mgr) -> Response {
    if let Some(inj) = &m.injector {
        inj.clear();
    }
    axum::http::StatusCode::NO_CONTENT.into_response()
}

/// `GET /metrics`: tasks by state, buffered bytes and the exchange counters.
pub fn metrics_router(manager: Arc<SqlTaskManager>) -> Router {
    Router::new().route("/metrics", get(metrics)).with_state(manager)
}

async fn metrics(State(m): Mgr) -> Response {
    use crate::protocol::TaskState::*;
    let states: Vec<_> = m.list().iter().map(|t| t.state).collect();
    let mut e = crate::metrics::Exposition::default();
    let all = [Planned, Running, Flushing, Finished, Canceled, Aborted, Failed];
    e.state_counts("flotilla_tasks", "Tasks held by this worker, by state.", &all, &states);
    e.gauge("flotilla_output_buffer_bytes", "Bytes in this worker's output buffers.", m.buffered_bytes() as f64);
    let memory = m.memory();
    e.gauge("flotilla_memory_pool_bytes", "Size of this worker's memory pool.", memory.settings().pool_bytes as f64);
    e.gauge("flotilla_memory_reserved_bytes", "Bytes reserved in this worker's memory pool.", memory.reserved() as f64);
    e.gauge("flotilla_spill_bytes", "Bytes of spill files on this worker's disk.", memory.spilled_on_disk() as f64);
    e.exchange_counters();
    ([(axum::http::header::CONTENT_TYPE, crate::metrics::CONTENT_TYPE)], e.finish()).into_response()
}
