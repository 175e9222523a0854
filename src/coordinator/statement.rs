//! The client protocol: Trino's v1 statement API. `POST /v1/statement` starts a query
//! and answers with a `QueryResults` document; the client follows `nextUri` until it
//! is absent, taking rows as they come; `DELETE` on `nextUri` cancels. Type names and
//! value encodings are Trino's (see `format`), so Trino's own clients work.

use crate::error_code::ErrorCode;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use datafusion::arrow::record_batch::RecordBatch;
use serde_json::{json, Value};

use super::planner::{QueryError, SessionSpec};
use super::query::{PageState, QueryExecution};
use super::spooling::{encode_segment, Encoding, SegmentRows};
use super::{Authenticated, CoordinatorError, CoordinatorState};
use crate::exchange::page::{frame_pages_after, Page};
use crate::format::{field_signature, field_type, write_delimited_rows, write_json_rows, Delimited};
use crate::protocol::{
    RowsAs, ARROW_RESULTS_CONTENT_TYPE, HEADER_EARLY_RESULTS, HEADER_ROWS_AS, TEXT_RESULTS_CONTENT_TYPE,
};

/// Trino's spooling protocol: the encodings the client reads, in its order.
const HEADER_QUERY_DATA_ENCODING: &str = "x-trino-query-data-encoding";
use crate::scheduling::state_machine::{QueryState, StageState, StateKind, TaskState};

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
    spec.time_zone = header(headers, "x-trino-time-zone")?.filter(|z| !z.is_empty());
    spec.transaction = super::transaction::named(header(headers, "x-trino-transaction-id")?.as_deref());
    spec.prepared = prepared_statements(headers);
    for value in headers.get_all("x-trino-session") {
        let text =
            value.to_str().map_err(|_| CoordinatorError::BadRequest("X-Trino-Session is not valid text".into()))?;
        for pair in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (k, v) = pair.split_once('=').ok_or_else(|| {
                CoordinatorError::BadRequest(format!("X-Trino-Session entry '{pair}' is not name=value"))
            })?;
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

/// The query's user: the logged-in one, unless `X-Trino-User` names another whom the
/// access rules let them act as.
fn settle_user(
    coord: &CoordinatorState,
    login: Option<&Authenticated>,
    spec: &mut SessionSpec,
    named: bool,
) -> Result<(), CoordinatorError> {
    let Some(Authenticated(user)) = login else { return Ok(()) };
    if !named {
        spec.user = user.clone();
        return Ok(());
    }
    let allowed =
        spec.user == *user || coord.config.security.rules.as_ref().is_some_and(|r| r.may_impersonate(user, &spec.user));
    if allowed {
        Ok(())
    } else {
        Err(CoordinatorError::PermissionDenied(format!(
            "Access Denied: User {user} cannot impersonate user {}",
            spec.user
        )))
    }
}

pub async fn post_statement(
    State(coord): State<Arc<CoordinatorState>>,
    login: Option<axum::Extension<Authenticated>>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, CoordinatorError> {
    let login = login.map(|axum::Extension(a)| a);
    let mut session = session_from_headers(&headers)?;
    let named = header(&headers, "x-trino-user")?.is_some_and(|u| !u.is_empty());
    settle_user(&coord, login.as_ref(), &mut session, named)?;
    let sql =
        std::str::from_utf8(&body).map_err(|_| CoordinatorError::BadRequest("statement is not UTF-8".into()))?.trim();
    let sql = sql.trim_end_matches(';').trim();
    if sql.len() > super::planning::MAX_QUERY_LENGTH {
        let error = QueryError::new(
            ErrorCode::QueryTextTooLarge,
            format!(
                "Query text length ({} bytes) exceeds the maximum length ({} bytes)",
                sql.len(),
                super::planning::MAX_QUERY_LENGTH
            ),
        );
        let q = coord.submit_failed(sql.chars().take(1000).collect(), session, error);
        return first_page(&coord, &q, &headers).await;
    }
    if sql.is_empty() {
        return Err(CoordinatorError::BadRequest("empty statement".into()));
    }
    let q = coord.submit(sql.to_string(), session);
    first_page(&coord, &q, &headers).await
}

/// The answer to `POST /v1/statement`, page 0 of the query. For a client that asks
/// ([`HEADER_EARLY_RESULTS`], flotilla's own) it is served like any other page but
/// waiting at most `FIRST_PAGE_WAIT`, so a quick query's rows and end come in this one
/// response and a slower one still hands the client its id and `nextUri` at once.
/// Any other client gets Trino's answer: the query `QUEUED`, with no rows, columns or
/// error, and a `nextUri`; clients written against Trino (its Node.js client) read
/// rows and errors only from the pages they fetch.
async fn first_page(
    coord: &CoordinatorState,
    q: &Arc<QueryExecution>,
    headers: &HeaderMap,
) -> Result<Response, CoordinatorError> {
    let mut paging = q.paging.lock().await;
    // Trino's spooling protocol is agreed on once, when the query is submitted.
    if coord.config.spooling.enabled {
        paging.encoding = header(headers, HEADER_QUERY_DATA_ENCODING)?.and_then(|e| Encoding::negotiate(&e));
    }
    if header(headers, HEADER_EARLY_RESULTS)?.is_some_and(|v| v.eq_ignore_ascii_case("true")) {
        let deadline = tokio::time::Instant::now() + FIRST_PAGE_WAIT;
        return serve_page(coord, q, headers, &mut paging, 0, deadline).await;
    }
    let doc = queued_document(q, &coord.base_url(headers));
    let page = Bytes::from(serde_json::to_vec(&doc).map_err(|e| CoordinatorError::Internal(e.to_string()))?);
    paging.token = 0;
    paging.page = Some((page.clone(), "application/json"));
    Ok(page_response(page, "application/json"))
}

/// Trino's first `QueryResults`: the query's id and URIs, its state `QUEUED`.
fn queued_document(q: &Arc<QueryExecution>, base: &str) -> Value {
    let mut stats = stats(q);
    stats["state"] = json!(QueryState::Queued);
    stats["queued"] = json!(true);
    stats["scheduled"] = json!(false);
    json!({
        "id": q.id,
        "infoUri": info_uri(q, base),
        "nextUri": executing_uri(q, base, 1),
        "partialCancelUri": executing_uri(q, base, 1),
        "stats": stats,
    })
}

/// How long `POST /v1/statement` waits for rows or the end before answering.
const FIRST_PAGE_WAIT: Duration = Duration::from_millis(20);

/// `X-Trino-Prepared-Statement: name=form-encoded statement, ...`
fn prepared_statements(headers: &HeaderMap) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for value in headers.get_all("x-trino-prepared-statement") {
        let Ok(text) = value.to_str() else { continue };
        for pair in text.split(',') {
            if let Some((k, v)) = pair.trim().split_once('=') {
                out.insert(k.trim().to_string(), crate::util::form_decode(v));
            }
        }
    }
    out
}

/// A page of a query (Trino's `nextUri`). The slug is the client's proof that it
/// started the query; with logins, the login must also be one that may see it.
pub async fn get_results(
    State(coord): State<Arc<CoordinatorState>>,
    login: Option<axum::Extension<Authenticated>>,
    Path((query_id, slug, token)): Path<(String, String, String)>,
    headers: HeaderMap,
) -> Result<Response, CoordinatorError> {
    let token: u64 = token.parse().map_err(|_| CoordinatorError::BadRequest(format!("bad token '{token}'")))?;
    let q = query_by_uri(&coord, &query_id, &slug)?;
    coord.check_login_sees(login.map(|axum::Extension(a)| a).as_ref(), &q)?;
    q.touch_client();
    // The lock is held while rows are taken, so two requests for the same token (a
    // client retrying one that timed out) get the same page: the second waits for
    // the first and is served its document.
    let mut paging = q.paging.lock().await;
    if token == paging.token {
        if let Some((page, content_type)) = &paging.page {
            return Ok(with_session_changes(page_response(page.clone(), content_type), &q));
        }
    }
    if q.results_dropped() {
        return Err(CoordinatorError::Gone(format!(
            "the results of query {query_id} were dropped: its client did not ask for them for {:?} \
             (query.client.timeout)",
            coord.config.query_client_timeout
        )));
    }
    if token != paging.token + 1 {
        return Err(CoordinatorError::Gone(format!(
            "token {token} of query {query_id} is not the current ({}) or the next one; the pages before are gone",
            paging.token
        )));
    }
    // Wait for rows, or for the query to end, at most a second, so clients see progress.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(1);
    serve_page(&coord, &q, &headers, &mut paging, token, deadline).await
}

/// Serves page `token` (the current one plus one, or 0 for the first) and keeps it as
/// the current page. Waits until `deadline` for rows or the end. A query still queued
/// or planning is waited for first, within the same time: answering the moment it
/// starts would hand the client an empty page, and it pauses before asking again
/// after two of those.
async fn serve_page(
    coord: &CoordinatorState,
    q: &Arc<QueryExecution>,
    headers: &HeaderMap,
    paging: &mut PageState,
    token: u64,
    deadline: tokio::time::Instant,
) -> Result<Response, CoordinatorError> {
    let base = coord.base_url(headers);
    let rows_as = header(headers, HEADER_ROWS_AS)?.and_then(|name| RowsAs::by_name(&name));
    // Trino's spooling protocol, when the client asked for it (and not for our own
    // text or Arrow rows).
    let spooled = match &rows_as {
        None => paging.encoding,
        Some(_) => None,
    };
    if q.schema().is_none() && q.state() != QueryState::Running {
        let mut rx = q.watch_state();
        let _ =
            tokio::time::timeout_at(deadline, rx.wait_for(|s| *s != QueryState::Queued && *s != QueryState::Planning))
                .await;
    }
    let (mut batches, exhausted) = if q.schema().is_some() || q.state() == QueryState::Running {
        let arrow = matches!(rows_as, Some(RowsAs::Arrow));
        let rows = match spooled {
            Some(_) => segment_rows(paging, &coord.config.spooling),
            None => page_rows(paging.row_bytes, arrow),
        };
        q.take_results(rows, PAGE_MAX_ARROW_BYTES, deadline).await
    } else {
        (Vec::new(), false)
    };
    // A statement without a result (PREPARE, DEALLOCATE) is exhausted once it ends.
    let exhausted = exhausted || (q.schema().is_none() && q.state().is_final());
    let row_count: usize = batches.iter().map(|b| b.num_rows()).sum();
    let mut doc = results_document(q, &base, token, exhausted);
    // Sized from the last page's bytes per row, so the rows are not copied on growth.
    let guess = paging.row_bytes.map_or(0, |b| (b * 1.1 * row_count as f64) as usize);
    // A result without rows still tells an Arrow reader its schema: its last page
    // carries one empty batch.
    let finished = exhausted && q.state() == QueryState::Finished;
    let empty_result = (row_count == 0 && finished && paging.row_bytes.is_none()).then(|| q.schema()).flatten();
    let (page, content_type) = match rows_as {
        _ if spooled.is_some() && row_count > 0 => {
            let mut json = Vec::with_capacity(guess + 2);
            json.push(b'[');
            for b in &batches {
                write_json_rows(b, &mut json).map_err(|e| CoordinatorError::Internal(e.to_string()))?;
            }
            json.push(b']');
            // The next segment is sized from this one's JSON, not from its compressed bytes.
            paging.row_bytes = Some(json.len() as f64 / row_count as f64);
            let rows = SegmentRows { offset: paging.rows_served, rows: row_count as u64, json };
            doc["data"] = encode_segment(coord, &q.id, &base, spooled.expect("spooled"), rows).await?;
            paging.segments += 1;
            (serialize(&doc, None)?, "application/json")
        }
        Some(RowsAs::Text(style)) if row_count > 0 => {
            doc["textRows"] = json!(row_count);
            (serialize_text(&doc, &batches, style, guess)?, TEXT_RESULTS_CONTENT_TYPE)
        }
        Some(RowsAs::Arrow) if row_count > 0 || empty_result.is_some() => {
            if let Some(schema) = empty_result {
                batches = vec![RecordBatch::new_empty(schema)];
            }
            doc["arrowRows"] = json!(row_count);
            (serialize_arrow(&doc, batches)?, ARROW_RESULTS_CONTENT_TYPE)
        }
        _ => (serialize(&doc, (row_count > 0).then_some((batches.as_slice(), guess)))?, "application/json"),
    };
    if row_count > 0 && spooled.is_none() {
        paging.row_bytes = Some(page.len() as f64 / row_count as f64);
    }
    paging.rows_served += row_count as u64;
    paging.token = token;
    paging.page = Some((page.clone(), content_type));
    Ok(with_session_changes(page_response(page, content_type), q))
}

/// A finished session statement's headers (`X-Trino-Set-Session`, ...), on every page
/// served once it finished, as Trino sends them with its end.
fn with_session_changes(mut resp: Response, q: &QueryExecution) -> Response {
    if q.state() != QueryState::Finished {
        return resp;
    }
    for (name, value) in q.progress().session_changes.clone() {
        if let Ok(v) = axum::http::HeaderValue::from_str(&value) {
            resp.headers_mut().append(name, v);
        }
    }
    resp
}

/// A page for a client that asked for its rows as Arrow: the document, a newline, the
/// batches framed as the exchange frames its pages (each an IPC stream with its schema),
/// written once into the page's buffer.
fn serialize_arrow(doc: &Value, batches: Vec<RecordBatch>) -> Result<Bytes, CoordinatorError> {
    let pages: Vec<Page> = batches.into_iter().map(Page::new).collect();
    let mut head = serde_json::to_vec(doc).map_err(|e| CoordinatorError::Internal(e.to_string()))?;
    head.push(b'\n');
    frame_pages_after(&head, &pages).map_err(|e| CoordinatorError::Internal(e.to_string()))
}

/// A page for a client that asked for its rows as `style`'s lines: the document, a
/// newline (compact JSON has none of its own), the lines.
fn serialize_text(
    doc: &Value,
    batches: &[RecordBatch],
    style: Delimited,
    size_guess: usize,
) -> Result<Bytes, CoordinatorError> {
    let mut page = serde_json::to_string(doc).map_err(|e| CoordinatorError::Internal(e.to_string()))?;
    page.reserve(1 + size_guess);
    page.push('\n');
    for b in batches {
        write_delimited_rows(b, style, &mut page).map_err(|e| CoordinatorError::Internal(e.to_string()))?;
    }
    Ok(Bytes::from(page))
}

/// A page is serialized once: the cached copy a retried request gets is these bytes.
/// The rows are written straight after the document's other members, as its last
/// member `data`, without `Value`s in between.
fn serialize(doc: &Value, data: Option<(&[RecordBatch], usize)>) -> Result<Bytes, CoordinatorError> {
    let mut page = serde_json::to_vec(doc).map_err(|e| CoordinatorError::Internal(e.to_string()))?;
    if let Some((batches, size_guess)) = data {
        if page.pop() != Some(b'}') {
            return Err(CoordinatorError::Internal("a results document is not a JSON object".into()));
        }
        page.reserve(size_guess);
        page.extend_from_slice(if page.len() > 1 { b",\"data\":[" } else { b"\"data\":[" });
        for b in batches {
            write_json_rows(b, &mut page).map_err(|e| CoordinatorError::Internal(e.to_string()))?;
        }
        page.extend_from_slice(b"]}");
    }
    Ok(Bytes::from(page))
}

fn page_response(page: Bytes, content_type: &'static str) -> Response {
    ([(axum::http::header::CONTENT_TYPE, content_type)], page).into_response()
}

/// Pages aim at `PAGE_TARGET_BYTES` (of JSON, or of text lines for a client that
/// asked for them): the rows of the next page are sized
/// from the bytes per row of the last one, so narrow rows come in large pages (fewer
/// round trips) and wide ones in small pages. The Arrow-memory cap stops a page early
/// when rows suddenly widen. The first page takes the rows at hand once there are
/// `FIRST_PAGE_ROWS`, usually one batch: the client parses it while the next is
/// encoded, and a person sees the first rows sooner. Arrow rows cost a client next
/// to nothing to decode, so their first page aims at the byte target too, from a
/// guess of `ARROW_FIRST_ROW_BYTES` a row: a result of a few batches (q16's 18,000
/// rows) then comes in one page, not two round trips.
const PAGE_TARGET_BYTES: f64 = (4 << 20) as f64;
const FIRST_PAGE_ROWS: usize = 4_096;
const ARROW_FIRST_ROW_BYTES: f64 = 64.0;
const PAGE_MAX_ROWS: usize = 1_000_000;
const PAGE_MAX_ARROW_BYTES: usize = 64 << 20;

/// Rows for the next spooling segment: the first page's rows as for JSON pages (a
/// small result comes inline at once), then Trino's segment sizes, doubling from
/// `initial_segment_size` to `max_segment_size`.
fn segment_rows(paging: &PageState, config: &crate::etc::SpoolingConfig) -> usize {
    let Some(row_bytes) = paging.row_bytes else { return FIRST_PAGE_ROWS };
    let target = config.initial_segment_size.saturating_mul(1 << paging.segments.min(16)).min(config.max_segment_size);
    ((target as f64 / row_bytes.max(1.0)) as usize).clamp(1, PAGE_MAX_ROWS)
}

/// Rows for the next page, given the page bytes per row seen so far.
fn page_rows(row_bytes: Option<f64>, arrow: bool) -> usize {
    match (row_bytes, arrow) {
        (None, false) => FIRST_PAGE_ROWS,
        (None, true) => page_rows(Some(ARROW_FIRST_ROW_BYTES), true),
        (Some(b), _) => ((PAGE_TARGET_BYTES / b.max(1.0)) as usize).clamp(1, PAGE_MAX_ROWS),
    }
}

/// `HEAD` on `nextUri`: Trino's clients send it while they download a spooled
/// segment, to say they are still there. It must not serve (and so consume) a page.
pub async fn heartbeat(
    State(coord): State<Arc<CoordinatorState>>,
    login: Option<axum::Extension<Authenticated>>,
    Path((query_id, slug, _token)): Path<(String, String, String)>,
) -> Result<Response, CoordinatorError> {
    let q = query_by_uri(&coord, &query_id, &slug)?;
    coord.check_login_sees(login.map(|axum::Extension(a)| a).as_ref(), &q)?;
    q.touch_client();
    Ok(StatusCode::OK.into_response())
}

pub async fn cancel_query(
    State(coord): State<Arc<CoordinatorState>>,
    login: Option<axum::Extension<Authenticated>>,
    Path((query_id, slug, _token)): Path<(String, String, String)>,
) -> Result<Response, CoordinatorError> {
    let q = query_by_uri(&coord, &query_id, &slug)?;
    coord.check_login_sees(login.map(|axum::Extension(a)| a).as_ref(), &q)?;
    q.cancel();
    Ok(StatusCode::NO_CONTENT.into_response())
}

/// Whether `s` is a plain `host[:port]` (a name, an IPv4 or a bracketed IPv6 address),
/// safe to put into a URI we hand out.
pub fn is_authority(s: &str) -> bool {
    if s.is_empty() || s.len() > 255 {
        return false;
    }
    let (host_ok, rest) = match s.strip_prefix('[') {
        Some(bracketed) => {
            let Some((v6, tail)) = bracketed.split_once(']') else { return false };
            (v6.parse::<std::net::Ipv6Addr>().is_ok(), tail)
        }
        None => {
            let end = s.find(':').unwrap_or(s.len());
            let host = &s[..end];
            let ok = !host.is_empty()
                && !host.starts_with('-')
                && host.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_'));
            (ok, &s[end..])
        }
    };
    let port_ok = rest.is_empty() || rest.strip_prefix(':').is_some_and(|p| p.parse::<u16>().is_ok());
    host_ok && port_ok
}

/// Where page `token` of `q` is fetched, and the query cancelled: with its slug, as
/// Trino's `nextUri`, so that knowing a query's id is not enough.
fn executing_uri(q: &QueryExecution, base: &str, token: u64) -> String {
    format!("{base}/v1/statement/executing/{}/{}/{token}", q.id, q.slug)
}

/// The web page of `q`, with the slug that lets it read the query's info.
fn info_uri(q: &QueryExecution, base: &str) -> String {
    format!("{base}/ui/query.html?{}&slug={}", q.id, q.slug)
}

/// The query behind a statement URI: its id and its slug must both match.
fn query_by_uri(coord: &CoordinatorState, query_id: &str, slug: &str) -> Result<Arc<QueryExecution>, CoordinatorError> {
    let q = coord.query(query_id)?;
    match q.has_slug(slug) {
        true => Ok(q),
        false => Err(CoordinatorError::QueryNotFound(query_id.to_string())),
    }
}

/// Builds Trino's `QueryResults` for the page `token` holding `rows`.
fn results_document(q: &Arc<QueryExecution>, base: &str, token: u64, exhausted: bool) -> Value {
    let state = q.state();
    let mut doc = json!({
        "id": q.id,
        "infoUri": info_uri(q, base),
        "stats": stats(q),
    });
    let columns = q.schema().map(|schema| {
        schema
            .fields()
            .iter()
            .map(|f| {
                let name = super::dialect::output_names::client_name(f.name());
                json!({"name": name, "type": field_type(f), "typeSignature": field_signature(f)})
            })
            .collect::<Vec<_>>()
    });
    if let Some(cols) = &columns {
        doc["columns"] = json!(cols);
    }
    let failed = state == QueryState::Failed;
    if failed {
        if let Some(e) = q.error() {
            let mut error = json!(e);
            error["failureInfo"] = json!({"type": e.error_name, "message": e.message});
            doc["error"] = error;
        }
    }
    let (update, statement_update) = {
        let p = q.progress();
        (p.update.clone(), p.update_type)
    };
    if let (None, Some(kind)) = (&update, statement_update) {
        doc["updateType"] = json!(kind);
    }
    if let Some(write) = update {
        doc["updateType"] = json!(write.update_type());
        if let Some(rows) = write.update_count() {
            doc["updateCount"] = json!(rows);
        }
    }
    let done = failed || (exhausted && state.is_final());
    if !done {
        doc["nextUri"] = json!(executing_uri(q, base, token + 1));
        doc["partialCancelUri"] = json!(executing_uri(q, base, token + 1));
    }
    doc
}

/// Trino's `StatementStats`, counting tasks where Trino counts splits.
fn stats(q: &QueryExecution) -> Value {
    let stages = q.stages();
    let tasks: Vec<_> = stages.iter().flat_map(|s| s.tasks()).map(|t| t.status()).collect();
    let total_tasks: usize = stages.iter().map(|s| s.task_count()).sum();
    let done = tasks.iter().filter(|t| t.state.is_done()).count();
    let running = tasks.iter().filter(|t| matches!(t.state, TaskState::Running | TaskState::Flushing)).count();
    let processed_rows: u64 = stages
        .iter()
        .filter(|s| s.fragment().has_scan)
        .flat_map(|s| s.tasks())
        .map(|t| t.status().stats.output_rows)
        .sum();
    let processed_bytes: u64 = tasks.iter().map(|t| t.stats.output_bytes).sum();
    let memory = crate::protocol::MemoryStats::of(tasks.iter().map(|t| &t.stats));
    let elapsed = q.elapsed().as_millis() as u64;
    let state = q.state();
    let stages_done =
        stages.iter().filter(|s| matches!(s.state(), StageState::Finished | StageState::Flushing)).count();
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
        "peakMemoryBytes": memory.peak_bytes,
        "spilledBytes": memory.spilled_bytes,
    })
}

#[cfg(test)]
mod tests {
    use super::is_authority;

    #[test]
    fn pages_are_sized_to_a_byte_target() {
        use super::{page_rows, FIRST_PAGE_ROWS, PAGE_MAX_ROWS};
        assert_eq!(page_rows(None, false), FIRST_PAGE_ROWS);
        // Arrow's first page: 4 MiB of rows of 64 bytes.
        assert_eq!(page_rows(None, true), 65_536);
        // lineitem rows as JSON are about 200 bytes: some 21,000 per 4 MiB page.
        assert_eq!(page_rows(Some(200.0), false), 20_971);
        assert_eq!(page_rows(Some(200.0), true), 20_971);
        assert_eq!(page_rows(Some(4.0), false), PAGE_MAX_ROWS);
        assert_eq!(page_rows(Some(8.0 * 1024.0 * 1024.0), false), 1);
    }

    #[test]
    fn only_plain_authorities_are_used_in_uris() {
        for good in [
            "localhost",
            "127.0.0.1:8080",
            "coordinator.example-1.net:443",
            "[::1]:8080",
            "[fe80::1]",
            "flotilla_coordinator_1:8080",
        ] {
            assert!(is_authority(good), "{good}");
        }
        for bad in ["", "evil.com/path", "a b", "host:port", "host:99999", "[::1", "x@y", "-lead", "h:1:2", "evil.com#"]
        {
            assert!(!is_authority(bad), "{bad}");
        }
    }
}
