//! The client protocol: Trino's v1 statement API. `POST /v1/statement` starts a query
//! and answers with a `QueryResults` document; the client follows `nextUri` until it
//! is absent, taking rows as they come; `DELETE` on `nextUri` cancels. Type names and
//! value encodings are Trino's (see `format`), so Trino's own clients work.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use parking_lot::Mutex;
use serde_json::{json, Value};

use super::execute_immediate::{bind, parse_prepared, PreparedStatement};
use super::planner::SessionSpec;
use super::query::QueryExecution;
use super::{CoordinatorError, CoordinatorState};
use crate::format::{batch_to_json_rows, trino_type, type_signature};
use crate::scheduling::state_machine::{QueryState, StageState, StateKind, TaskState};

/// The last page served for each query, so a retried `nextUri` gets the same rows.
#[derive(Default)]
pub struct PageCache {
    pages: Mutex<BTreeMap<String, (u64, Value)>>,
}

fn header(headers: &HeaderMap, name: &str) -> Result<Option<String>, CoordinatorError> {
    match headers.get(name) {
        None => Ok(None),
        Some(v) => v
            .to_str()
            .map(|s| Some(s.trim().to_string()))
            .map_err(|_| CoordinatorError::BadRequest(format!("header {name} is not valid text"))),
    }
}

/// Reads the session from Trino's headers.
pub fn session_from_headers(headers: &HeaderMap) -> Result<SessionSpec, CoordinatorError> {
    let mut spec = SessionSpec::default();
    if let Some(u) = header(headers, "x-trino-user")?.filter(|u| !u.is_empty()) {
        spec.user = u;
    }
    if let Some(c) = header(headers, "x-trino-catalog")?.filter(|c| !c.is_empty()) {
        spec.catalog = c;
    }
    if let Some(s) = header(headers, "x-trino-schema")?.filter(|s| !s.is_empty()) {
        spec.schema = s;
    }
    for value in headers.get_all("x-trino-session") {
        let text = value.to_str().map_err(|_| CoordinatorError::BadRequest("X-Trino-Session is not valid text".into()))?;
        for pair in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (k, v) = pair
                .split_once('=')
                .ok_or_else(|| CoordinatorError::BadRequest(format!("X-Trino-Session entry '{pair}' is not name=value")))?;
            let v = percent_decode(v.trim());
            spec.properties.insert(k.trim().to_string(), v);
        }
    }
    // Unknown or invalid properties fail the query (INVALID_SESSION_PROPERTY), as in
    // Trino, rather than the HTTP request: clients report query errors better.
    Ok(spec)
}

fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' && i + 2 < bytes.len() {
            if let Ok(b) = u8::from_str_radix(&s[i + 1..i + 3], 16) {
                out.push(b);
                i += 3;
                continue;
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

pub async fn post_statement(State(coord): State<Arc<CoordinatorState>>, headers: HeaderMap, body: Bytes) -> Result<Response, CoordinatorError> {
    let sql = std::str::from_utf8(&body).map_err(|_| CoordinatorError::BadRequest("statement is not UTF-8".into()))?.trim();
    let sql = sql.trim_end_matches(';').trim();
    if sql.is_empty() {
        return Err(CoordinatorError::BadRequest("empty statement".into()));
    }
    let session = session_from_headers(&headers)?;
    let mut response_headers = Vec::new();
    let mut sql = sql.to_string();
    match parse_prepared(&sql) {
        Some(PreparedStatement::Prepare { name, statement }) => {
            response_headers.push(("x-trino-added-prepare", format!("{name}={}", form_encode(&statement))));
        }
        Some(PreparedStatement::Deallocate { name }) => response_headers.push(("x-trino-deallocated-prepare", name)),
        Some(PreparedStatement::Execute { name, using }) => {
            let prepared = prepared_statements(&headers);
            // An unknown name is left for the planner, whose error names it.
            if let Some(statement) = prepared.get(&name) {
                sql = bind(statement, &using).map_err(CoordinatorError::BadRequest)?;
            }
        }
        None => {}
    }
    let q = coord.submit(sql, session);
    let base = base_url(&headers);
    let mut resp = Json(results_document(&q, &base, 0, Vec::new(), false)).into_response();
    for (name, value) in response_headers {
        if let Ok(v) = axum::http::HeaderValue::from_str(&value) {
            resp.headers_mut().insert(name, v);
        }
    }
    Ok(resp)
}

/// `X-Trino-Prepared-Statement: name=form-encoded statement, ...`
fn prepared_statements(headers: &HeaderMap) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for value in headers.get_all("x-trino-prepared-statement") {
        let Ok(text) = value.to_str() else { continue };
        for pair in text.split(',') {
            if let Some((k, v)) = pair.trim().split_once('=') {
                out.insert(k.trim().to_string(), percent_decode(&v.replace('+', " ")));
            }
        }
    }
    out
}

/// Form encoding, as the client decodes prepared statements.
fn form_encode(s: &str) -> String {
    let mut out = String::new();
    for b in s.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => out.push(b as char),
            b' ' => out.push('+'),
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

pub async fn get_results(
    State(coord): State<Arc<CoordinatorState>>,
    Path((query_id, token)): Path<(String, String)>,
    headers: HeaderMap,
) -> Result<Response, CoordinatorError> {
    let token: u64 = token.parse().map_err(|_| CoordinatorError::BadRequest(format!("bad token '{token}'")))?;
    let q = coord.query(&query_id)?;
    if let Some((t, page)) = coord.pages.pages.lock().get(&query_id) {
        if *t == token {
            return Ok(Json(page.clone()).into_response());
        }
    }
    let base = base_url(&headers);
    // Wait for rows, or for the query to end, at most a second, so clients see progress.
    let (batches, exhausted) = if q.schema().is_some() || q.state() == QueryState::Running {
        q.take_results(10_000, Duration::from_secs(1)).await
    } else {
        let mut rx = q.watch_state();
        let _ = tokio::time::timeout(Duration::from_secs(1), rx.wait_for(|s| *s != QueryState::Queued && *s != QueryState::Planning)).await;
        (Vec::new(), false)
    };
    // A statement without a result (PREPARE, DEALLOCATE) is exhausted once it ends.
    let exhausted = exhausted || (q.schema().is_none() && q.state().is_final());
    let mut rows = Vec::new();
    for b in &batches {
        rows.extend(batch_to_json_rows(b).map_err(|e| CoordinatorError::Internal(e.to_string()))?);
    }
    let doc = results_document(&q, &base, token, rows, exhausted);
    coord.pages.pages.lock().insert(query_id.clone(), (token, doc.clone()));
    if doc.get("nextUri").is_none() {
        coord.pages.pages.lock().remove(&query_id);
    }
    Ok(Json(doc).into_response())
}

pub async fn cancel_query(State(coord): State<Arc<CoordinatorState>>, Path((query_id, _token)): Path<(String, String)>) -> Result<Response, CoordinatorError> {
    let q = coord.query(&query_id)?;
    q.cancel();
    coord.pages.pages.lock().remove(&query_id);
    Ok(StatusCode::NO_CONTENT.into_response())
}

fn base_url(headers: &HeaderMap) -> String {
    let host = headers.get("host").and_then(|h| h.to_str().ok()).unwrap_or("127.0.0.1");
    let proto = headers.get("x-forwarded-proto").and_then(|h| h.to_str().ok()).unwrap_or("http");
    format!("{proto}://{host}")
}

/// Builds Trino's `QueryResults` for the page `token` holding `rows`.
fn results_document(q: &Arc<QueryExecution>, base: &str, token: u64, rows: Vec<Vec<Value>>, exhausted: bool) -> Value {
    let state = q.state();
    let mut doc = json!({
        "id": q.id,
        "infoUri": format!("{base}/ui/query.html?{}", q.id),
        "stats": stats(q),
    });
    let columns = q.schema().map(|schema| {
        schema
            .fields()
            .iter()
            .map(|f| json!({"name": f.name(), "type": trino_type(f.data_type()), "typeSignature": type_signature(f.data_type())}))
            .collect::<Vec<_>>()
    });
    if let Some(cols) = &columns {
        doc["columns"] = json!(cols);
    }
    if !rows.is_empty() {
        doc["data"] = json!(rows);
    }
    let failed = state == QueryState::Failed;
    if failed {
        if let Some(e) = q.error() {
            doc["error"] = json!({
                "message": e.message,
                "errorCode": e.error_code,
                "errorName": e.error_name,
                "errorType": e.error_type,
                "failureInfo": {"type": e.error_name, "message": e.message},
            });
        }
    }
    let done = failed || (exhausted && state.is_final());
    if !done {
        doc["nextUri"] = json!(format!("{base}/v1/statement/executing/{}/{}", q.id, token + 1));
        doc["partialCancelUri"] = json!(format!("{base}/v1/statement/executing/{}/{}", q.id, token + 1));
    }
    doc
}


/// Trino's `StatementStats`, counting tasks where Trino counts splits.
fn stats(q: &QueryExecution) -> Value {
    let stages = q.stages();
    let tasks: Vec<_> = stages.iter().flat_map(|s| s.tasks()).map(|t| t.status()).collect();
    let total_tasks: usize = stages.iter().map(|s| s.task_count).sum();
    let done = tasks.iter().filter(|t| t.state.is_done()).count();
    let running = tasks.iter().filter(|t| matches!(t.state, TaskState::Running | TaskState::Flushing)).count();
    let processed_rows: u64 = stages
        .iter()
        .filter(|s| s.fragment.has_scan)
        .flat_map(|s| s.tasks())
        .map(|t| t.status().stats.output_rows)
        .sum();
    let processed_bytes: u64 = tasks.iter().map(|t| t.stats.output_bytes).sum();
    let elapsed = q.elapsed().as_millis() as u64;
    let state = q.state();
    let stages_done = stages.iter().filter(|s| matches!(s.state(), StageState::Finished | StageState::Flushing)).count();
    json!({
        "state": state,
        "queued": state == QueryState::Queued,
        "scheduled": !matches!(state, QueryState::Queued | QueryState::Planning | QueryState::Starting),
        "nodes": q.node_count(),
        "totalSplits": total_tasks,
        "queuedSplits": total_tasks.saturating_sub(tasks.len()),
        "runningSplits": running,
        "completedSplits": done,
        "totalStages": stages.len(),
        "completedStages": stages_done,
        "cpuTimeMillis": 0,
        "wallTimeMillis": elapsed,
        "queuedTimeMillis": 0,
        "elapsedTimeMillis": elapsed,
        "processedRows": processed_rows,
        "processedBytes": processed_bytes,
        "outputRows": q.output_rows(),
        "physicalInputBytes": 0,
        "peakMemoryBytes": 0,
        "spilledBytes": 0,
    })
}
