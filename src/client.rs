//! Rust client of the coordinator's Trino-compatible statement endpoint (`/v1/statement`).
//!
//! `flotilla sql`, `flotilla local` and the integration tests use [`StatementClient`] to submit
//! SQL and collect results. This module owns the client half of the protocol: the `X-Trino-*`
//! request headers, following `nextUri` until the query is done, collecting columns and rows,
//! mapping transport, HTTP and query failures onto [`ClientError`], and cancellation.
//!
//! Clones of a client share the `nextUri` of the query in flight, so a Ctrl-C handler holding a
//! clone can call [`StatementClient::cancel_current`] while the original awaits `execute`.
//! Clones running queries concurrently overwrite each other's slot; build separate clients with
//! [`StatementClient::new`] when each needs its own cancel handle.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use parking_lot::Mutex;
use reqwest::{Method, RequestBuilder, StatusCode};
use serde::Deserialize;
use serde_json::Value;

use datafusion::arrow::record_batch::RecordBatch;

pub use crate::error_code::QueryError;
use crate::exchange::page::{unframe_pages, Page};
use crate::format::{self, Column, Delimited};
use crate::protocol::{RowsAs, ARROW_RESULTS_CONTENT_TYPE, HEADER_ROWS_AS, TEXT_RESULTS_CONTENT_TYPE};

const DEFAULT_USER: &str = "flotilla";

/// Idle connections are dropped before the server closes them (it does after 15 s,
/// `http::serve`), so a statement after a pause in the shell opens a fresh one.
const POOL_IDLE_TIMEOUT: Duration = Duration::from_secs(7);
/// Bounds every request, so a coordinator that stops answering cannot hang the client.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(60);
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// A coordinator still handing out `nextUri` after this many pages is treated as broken rather
/// than followed forever.
const MAX_PAGES: usize = 1_000_000;
/// Ceiling of the pause between consecutive pages that carried no rows. It keeps the client from
/// spinning on a coordinator that answers polls immediately, at a small cost in latency.
const MAX_IDLE_PAUSE: Duration = Duration::from_millis(100);

#[derive(thiserror::Error, Debug)]
pub enum ClientError {
    #[error("cannot reach {server}: {source}")]
    Connect { server: String, source: reqwest::Error },
    #[error("{}", .0.message)]
    Query(QueryError),
    #[error("server error {status}: {message}")]
    Http { status: u16, code: String, message: String },
    #[error("bad response: {0}")]
    Protocol(String),
    #[error("cannot write the output: {0}")]
    Output(String),
}

/// One `QueryResults` document as the coordinator sends it. Every field is optional so that a
/// sparse page (a bare poll answer) still parses.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct QueryResultsPage {
    pub id: String,
    pub info_uri: Option<String>,
    pub partial_cancel_uri: Option<String>,
    pub next_uri: Option<String>,
    pub columns: Option<Vec<ColumnInfo>>,
    pub data: Option<Vec<Vec<Value>>>,
    pub stats: Value,
    pub error: Option<QueryError>,
    pub warnings: Option<Vec<Value>>,
    pub update_type: Option<String>,
    pub update_count: Option<i64>,
    /// With [`StatementClient::with_rows_as_text`]: the page's rows as the lines of a
    /// delimited format, in place of `data`.
    #[serde(skip)]
    pub rows_text: Option<RowsText>,
    /// How many rows follow a text page's document.
    pub text_rows: Option<usize>,
    /// With [`StatementClient::with_rows_as_arrow`]: the page's rows as Arrow batches,
    /// in place of `data`.
    #[serde(skip)]
    pub batches: Option<Vec<RecordBatch>>,
    /// How many rows follow an Arrow page's document.
    pub arrow_rows: Option<usize>,
}

/// A page's rows already printed as delimited text.
#[derive(Debug, Clone)]
pub struct RowsText {
    pub text: Bytes,
    pub rows: usize,
}

impl QueryResultsPage {
    /// The query state from `stats.state`, e.g. `QUEUED`, `RUNNING`, `FINISHED`, `FAILED`.
    pub fn state(&self) -> Option<&str> {
        self.stats.get("state")?.as_str()
    }
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct ColumnInfo {
    pub name: String,
    #[serde(rename = "type")]
    pub type_name: String,
    pub type_signature: Option<Value>,
}

impl From<ColumnInfo> for Column {
    fn from(c: ColumnInfo) -> Self {
        Column { name: c.name, type_name: c.type_name }
    }
}

/// What a client sends with each statement, as Trino's clients keep it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClientSession {
    pub catalog: Option<String>,
    pub schema: Option<String>,
    /// Session properties, in the order they were set.
    pub properties: Vec<(String, String)>,
}

impl ClientSession {
    fn set(&mut self, key: String, value: String) {
        self.properties.retain(|(k, _)| *k != key);
        self.properties.push((key, value));
    }

    /// The changes a server's answer asks for: `X-Trino-Set-Catalog`, `-Set-Schema`,
    /// `-Set-Session` (`name=form-encoded value`) and `-Clear-Session`.
    fn apply(&mut self, headers: &reqwest::header::HeaderMap) {
        let values = |name: &str| -> Vec<String> {
            headers.get_all(name).iter().filter_map(|v| v.to_str().ok()).map(str::to_string).collect()
        };
        if let Some(c) = values("x-trino-set-catalog").pop() {
            self.catalog = Some(c);
        }
        if let Some(s) = values("x-trino-set-schema").pop() {
            self.schema = Some(s);
        }
        for pair in values("x-trino-set-session") {
            if let Some((k, v)) = pair.split_once('=') {
                self.set(k.trim().to_string(), form_decode(v.trim()));
            }
        }
        for name in values("x-trino-clear-session") {
            self.properties.retain(|(k, _)| *k != name.trim());
        }
    }
}

/// The inverse of the server's form encoding of header values (`+` is a space).
fn form_decode(s: &str) -> String {
    let hex = |b: u8| (b as char).to_digit(16);
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match (bytes[i], bytes.get(i + 1).copied().and_then(hex), bytes.get(i + 2).copied().and_then(hex)) {
            (b'+', _, _) => out.push(b' '),
            (b'%', Some(hi), Some(lo)) => {
                out.push((hi * 16 + lo) as u8);
                i += 2;
            }
            (b, _, _) => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Everything a finished query returned.
#[derive(Debug, Clone, Default)]
pub struct QueryOutcome {
    pub id: String,
    pub columns: Vec<Column>,
    pub rows: Vec<Vec<Value>>,
    /// The rows as Arrow batches, for a client that asked for them so
    /// ([`StatementClient::with_rows_as_arrow`]); a result without rows has one empty
    /// batch, for its schema. Empty otherwise.
    pub batches: Vec<RecordBatch>,
    /// `stats` of the last page, i.e. the final state of the query.
    pub stats: Value,
    /// `updateType` and `updateCount` of a statement that changed a table.
    pub update_type: Option<String>,
    pub update_count: Option<i64>,
}

/// The flotilla HTTP error shape, `{"error": {"code": ..., "message": ...}}`.
#[derive(Deserialize)]
struct HttpErrorBody {
    error: HttpErrorDetail,
}

#[derive(Deserialize)]
struct HttpErrorDetail {
    // Required: a Trino `QueryResults` error has no `code`, which is how the two shapes differ.
    code: String,
    #[serde(default)]
    message: String,
}

#[derive(Clone, Debug)]
pub struct StatementClient {
    http: reqwest::Client,
    server: String,
    user: String,
    /// Catalog, schema and properties, sent with each statement and changed by the
    /// server's answers to `USE`, `SET SESSION` and `RESET SESSION`; shared by clones.
    session: Arc<Mutex<ClientSession>>,
    timeout: Duration,
    current: Arc<Mutex<InFlight>>,
    /// Sent as HTTP basic authentication with `user` (PASSWORD authentication).
    password: Option<String>,
    /// Rows come as text lines or Arrow batches instead of `Value`s.
    rows_as: Option<RowsAs>,
}

/// What a canceller needs of the query a client (or a clone) is running.
#[derive(Debug, Default)]
enum InFlight {
    #[default]
    Idle,
    /// The statement is posted and its first answer (which names the query) not yet in.
    Posting(tokio::sync::watch::Receiver<bool>),
    /// The query's current `nextUri`.
    Next(String),
}

impl InFlight {
    fn after(page: &QueryResultsPage) -> Self {
        page.next_uri.clone().map_or(InFlight::Idle, InFlight::Next)
    }
}

impl StatementClient {
    /// A client for the coordinator at `server` (`host:port` or a full `http://` URL).
    pub fn new(server: impl Into<String>) -> Self {
        let server = server.into();
        let server = server.trim().trim_end_matches('/');
        let server = if server.contains("://") { server.to_string() } else { format!("http://{server}") };
        // Loading the system's root certificates took about 4 ms of the 7 ms that
        // `flotilla sql -e 'select 1'` took; a plain-HTTP coordinator needs none.
        let http = reqwest::Client::builder()
            .connect_timeout(CONNECT_TIMEOUT)
            .pool_idle_timeout(POOL_IDLE_TIMEOUT)
            .tls_built_in_root_certs(!server.starts_with("http://"))
            .build()
            .expect("a plain-HTTP reqwest client has nothing that can fail to initialise");
        StatementClient {
            http,
            server,
            user: DEFAULT_USER.to_string(),
            session: Default::default(),
            timeout: REQUEST_TIMEOUT,
            current: Arc::new(Mutex::new(InFlight::Idle)),
            password: None,
            rows_as: None,
        }
    }

    /// Pages come with their rows as `style`'s lines in `rows_text` and without `data`, so
    /// `QueryOutcome::rows` stays empty: the fastest way to print a large result. A
    /// flotilla coordinator writes the lines itself (asked by `X-Flotilla-Rows-As`);
    /// from any other server's JSON they are made here.
    pub fn with_rows_as_text(mut self, style: Delimited) -> Self {
        self.rows_as = Some(RowsAs::Text(style));
        self
    }

    /// Pages come with their rows as Arrow record batches in `batches` and without
    /// `data`, collected in `QueryOutcome::batches`: no value is turned into JSON and
    /// back, and the batches have the result's Arrow types (decimals, dates) as the
    /// coordinator's DataFusion made them. From a server that does not know the header
    /// (Trino) the rows still come as JSON, in `data`.
    pub fn with_rows_as_arrow(mut self) -> Self {
        self.rows_as = Some(RowsAs::Arrow);
        self
    }

    /// HTTPS settings: trust the CA certificates in `ca` (PEM) besides the system's,
    /// or, `insecure`, any certificate at all (tests, first steps).
    pub fn with_tls(mut self, insecure: bool, ca: Option<&std::path::Path>) -> Result<Self, String> {
        let mut builder =
            reqwest::Client::builder().connect_timeout(CONNECT_TIMEOUT).pool_idle_timeout(POOL_IDLE_TIMEOUT);
        if let Some(path) = ca {
            for root in crate::tls::read_ca(path).map_err(|e| e.to_string())? {
                builder = builder.add_root_certificate(root);
            }
        }
        if insecure {
            builder = builder.danger_accept_invalid_certs(true);
        }
        self.http = builder.build().map_err(|e| format!("cannot set up HTTPS: {e}"))?;
        Ok(self)
    }

    /// Logs in with the user's password (over HTTPS; the coordinator refuses it otherwise).
    pub fn with_password(mut self, password: impl Into<String>) -> Self {
        self.password = Some(password.into());
        self
    }

    pub fn with_user(mut self, user: impl Into<String>) -> Self {
        self.user = user.into();
        self
    }

    pub fn with_catalog(self, catalog: impl Into<String>) -> Self {
        self.with_own_session(|s| s.catalog = Some(catalog.into()))
    }

    pub fn with_schema(self, schema: impl Into<String>) -> Self {
        self.with_own_session(|s| s.schema = Some(schema.into()))
    }

    /// Adds a session property; setting the same key again replaces the earlier value.
    pub fn with_session(self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.with_own_session(|s| s.set(key.into(), value.into()))
    }

    /// This client with a session of its own (clones made before do not see `change`).
    fn with_own_session(mut self, change: impl FnOnce(&mut ClientSession)) -> Self {
        let mut session = self.session.lock().clone();
        change(&mut session);
        self.session = Arc::new(Mutex::new(session));
        self
    }

    /// The session this client (and its clones) sends now.
    pub fn session(&self) -> ClientSession {
        self.session.lock().clone()
    }

    /// Overrides the per-request timeout (60 s by default).
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// The normalised server URL, without a trailing slash.
    pub fn server(&self) -> &str {
        &self.server
    }

    /// The `nextUri` of the query this client (or a clone) is running, if any.
    pub fn current_next_uri(&self) -> Option<String> {
        match &*self.current.lock() {
            InFlight::Next(uri) => Some(uri.clone()),
            _ => None,
        }
    }

    /// Runs `sql` to completion and returns all of its rows.
    pub async fn execute(&self, sql: &str) -> Result<QueryOutcome, ClientError> {
        self.execute_with_progress(sql, |_| {}).await
    }

    /// Runs `sql` to completion, calling `on_page` with every page as it arrives (before its
    /// error, if any, is raised) so a caller can show progress from `stats`.
    pub async fn execute_with_progress<F>(&self, sql: &str, mut on_page: F) -> Result<QueryOutcome, ClientError>
    where
        F: FnMut(&QueryResultsPage),
    {
        self.execute_streaming(sql, |page| {
            on_page(page);
            Ok(())
        })
        .await
    }

    /// Runs `sql` to completion, handing every page to `on_page` as it arrives. Rows the
    /// callback takes out of `page.data` are not collected, so a caller that prints
    /// them holds one page at a time. An error from the callback (say, a closed output)
    /// cancels the query and is returned.
    pub async fn execute_streaming<F>(&self, sql: &str, mut on_page: F) -> Result<QueryOutcome, ClientError>
    where
        F: FnMut(&mut QueryResultsPage) -> Result<(), ClientError>,
    {
        let result = self.run(sql, &mut on_page).await;
        if result.is_err() {
            // Best effort: a query whose reader gave up should not run on.
            let _ = self.cancel_current().await;
        }
        // The slot must not outlive the query, or a later Ctrl-C would cancel a finished one.
        *self.current.lock() = InFlight::Idle;
        result
    }

    async fn run<F>(&self, sql: &str, on_page: &mut F) -> Result<QueryOutcome, ClientError>
    where
        F: FnMut(&mut QueryResultsPage) -> Result<(), ClientError>,
    {
        let mut request = self
            .request(Method::POST, format!("{}/v1/statement", self.server))
            .header(reqwest::header::CONTENT_TYPE, "text/plain; charset=utf-8")
            .header(crate::protocol::HEADER_EARLY_RESULTS, "true")
            .body(sql.to_string());
        let session = self.session();
        if let Some(catalog) = &session.catalog {
            request = request.header("X-Trino-Catalog", catalog);
        }
        if let Some(schema) = &session.schema {
            request = request.header("X-Trino-Schema", schema);
        }
        if !session.properties.is_empty() {
            let pairs: Vec<String> = session.properties.iter().map(|(k, v)| format!("{k}={v}")).collect();
            request = request.header("X-Trino-Session", pairs.join(","));
        }
        let mut received = Received { page: self.post(request).await?, rows: None };
        let mut outcome = QueryOutcome::default();
        let mut idle_pages: u32 = 0;
        for _ in 0..MAX_PAGES {
            *self.current.lock() = InFlight::after(&received.page);
            let had_rows = received.has_rows();
            // A page with rows is usually followed by more: the next one is asked for
            // before this one's rows are parsed, so the server's encoding of the next
            // page overlaps our parsing of this one and the caller's handling of it.
            let prefetch = match (&received.page.next_uri, had_rows && received.page.error.is_none()) {
                (Some(next), true) => {
                    let (client, request) = (self.clone(), self.request(Method::GET, self.resolve(next)));
                    Some(tokio::spawn(async move { client.receive(request).await }))
                }
                _ => None,
            };
            let mut page = received.finish(self.rows_as)?;
            on_page(&mut page)?;
            if let Some(error) = page.error.take() {
                return Err(ClientError::Query(error));
            }
            if outcome.id.is_empty() {
                outcome.id = std::mem::take(&mut page.id);
            }
            if let Some(columns) = page.columns.take() {
                outcome.columns = columns.into_iter().map(Column::from).collect();
            }
            if let Some(rows) = page.data.take() {
                outcome.rows.extend(rows);
            }
            if let Some(batches) = page.batches.take() {
                outcome.batches.extend(batches);
            }
            match had_rows {
                true => idle_pages = 0,
                false => idle_pages += 1,
            }
            outcome.stats = std::mem::take(&mut page.stats);
            outcome.update_type = page.update_type.take().or(outcome.update_type.take());
            outcome.update_count = page.update_count.or(outcome.update_count);
            let Some(next) = page.next_uri.take() else {
                check_row_widths(&outcome)?;
                return Ok(outcome);
            };
            if let Some(fetch) = prefetch {
                received = fetch.await.map_err(|e| ClientError::Protocol(format!("fetching {next}: {e}")))??;
                continue;
            }
            if idle_pages > 1 {
                let pause = Duration::from_millis(5 * u64::from(idle_pages));
                tokio::time::sleep(pause.min(MAX_IDLE_PAUSE)).await;
            }
            received = self.receive(self.request(Method::GET, self.resolve(&next))).await?;
        }
        Err(ClientError::Protocol(format!("query {} still had a nextUri after {MAX_PAGES} pages", outcome.id)))
    }

    /// Cancels the query behind `next_uri` (a `nextUri` it returned). A query the coordinator no
    /// longer knows counts as cancelled.
    pub async fn cancel(&self, next_uri: &str) -> Result<(), ClientError> {
        let response =
            self.request(Method::DELETE, self.resolve(next_uri)).send().await.map_err(|e| self.transport_error(e))?;
        let status = response.status();
        if status.is_success() || status == StatusCode::NOT_FOUND || status == StatusCode::GONE {
            return Ok(());
        }
        let body = response.text().await.unwrap_or_default();
        Err(http_error(status, &body))
    }

    /// Cancels the query this client (or a clone) is running; `Ok(false)` when there is none.
    /// A statement still being posted is waited for: its first answer names the query.
    pub async fn cancel_current(&self) -> Result<bool, ClientError> {
        let posting = match &*self.current.lock() {
            InFlight::Posting(rx) => Some(rx.clone()),
            _ => None,
        };
        if let Some(mut rx) = posting {
            let _ = tokio::time::timeout(self.timeout, rx.wait_for(|posted| *posted)).await;
        }
        let next_uri = match std::mem::take(&mut *self.current.lock()) {
            InFlight::Next(uri) => uri,
            _ => return Ok(false),
        };
        self.cancel(&next_uri).await.map(|()| true)
    }

    /// Posts the statement from a task of its own, which records the first answer's
    /// `nextUri` for `cancel_current` even when the caller stopped waiting (a Ctrl-C
    /// handler dropped it): the coordinator may hold that answer a few milliseconds, to
    /// send a quick query's rows and end with it, and the query would otherwise run on
    /// with nobody knowing its name.
    async fn post(&self, request: RequestBuilder) -> Result<QueryResultsPage, ClientError> {
        let (posted, rx) = tokio::sync::watch::channel(false);
        *self.current.lock() = InFlight::Posting(rx.clone());
        let client = self.clone();
        let task = tokio::spawn(async move {
            let page = client.send(request).await;
            let mut current = client.current.lock();
            // Only if no later statement of a clone took the slot meanwhile.
            if matches!(&*current, InFlight::Posting(r) if r.same_channel(&rx)) {
                *current = page.as_ref().map_or(InFlight::Idle, InFlight::after);
            }
            drop(current);
            let _ = posted.send(true);
            page
        });
        task.await.map_err(|e| ClientError::Protocol(format!("posting the statement: {e}")))?
    }

    fn request(&self, method: Method, url: String) -> RequestBuilder {
        let mut request = self.http.request(method, url).timeout(self.timeout).header("X-Trino-User", &self.user);
        if let Some(rows_as) = self.rows_as {
            request = request.header(HEADER_ROWS_AS, rows_as.name());
        }
        match &self.password {
            Some(p) => request.basic_auth(&self.user, Some(p)),
            None => request,
        }
    }

    /// The coordinator sends absolute URIs, but relative ones are accepted as well.
    fn resolve(&self, uri: &str) -> String {
        if uri.contains("://") {
            uri.to_string()
        } else if uri.starts_with('/') {
            format!("{}{uri}", self.server)
        } else {
            format!("{}/{uri}", self.server)
        }
    }

    async fn send(&self, request: RequestBuilder) -> Result<QueryResultsPage, ClientError> {
        self.receive(request).await?.finish(self.rows_as)
    }

    /// One page, its document parsed and its rows (when the coordinator sent them as
    /// JSON) left as bytes for [`Received::finish`].
    async fn receive(&self, request: RequestBuilder) -> Result<Received, ClientError> {
        let response = request.send().await.map_err(|e| self.transport_error(e))?;
        let status = response.status();
        if status.is_success() {
            self.session.lock().apply(response.headers());
        }
        let content_type = response.headers().get(reqwest::header::CONTENT_TYPE).map(|t| t.as_bytes());
        let text_page = content_type.is_some_and(|t| t.starts_with(TEXT_RESULTS_CONTENT_TYPE.as_bytes()));
        let arrow_page = content_type.is_some_and(|t| t.starts_with(ARROW_RESULTS_CONTENT_TYPE.as_bytes()));
        // Parsed from the bytes: JSON parsing checks UTF-8 itself, and a lossy copy into
        // a String first cost a tenth of the time of a large result.
        let body = response.bytes().await.map_err(|e| self.transport_error(e))?;
        if !status.is_success() {
            return Err(http_error(status, &String::from_utf8_lossy(&body)));
        }
        if text_page {
            return Ok(Received { page: text_results(body)?, rows: None });
        }
        if arrow_page {
            return Received::from_arrow(body);
        }
        Received::from_json(body)
    }

    fn transport_error(&self, source: reqwest::Error) -> ClientError {
        // A request that could not even be built (say, a header value with a newline) is the
        // caller's input at fault, not the network.
        if source.is_builder() {
            return ClientError::Protocol(format!("invalid request: {source}"));
        }
        ClientError::Connect { server: self.server.clone(), source }
    }
}

/// A page as it came: its document parsed, its JSON or Arrow rows still the bytes
/// they came in, so that the next page can be asked for before they are decoded.
#[derive(Debug)]
struct Received {
    page: QueryResultsPage,
    rows: Option<Rows>,
}

#[derive(Debug)]
enum Rows {
    /// The body and where `data` is in it.
    Json(Bytes, std::ops::Range<usize>),
    /// The framed Arrow pages after the document.
    Arrow(Bytes),
}

impl Received {
    /// A JSON page: the document is parsed without its `data` member, wherever that is.
    fn from_json(body: Bytes) -> Result<Received, ClientError> {
        let bad = |e: serde_json::Error| {
            ClientError::Protocol(format!("{e} in {}", excerpt(&String::from_utf8_lossy(&body))))
        };
        let doc =
            std::str::from_utf8(&body).map_err(|e| ClientError::Protocol(format!("results are not UTF-8: {e}")))?;
        let bad_rows = |e: String| ClientError::Protocol(format!("{e} in {}", excerpt(doc)));
        let data = format::find_member(doc, "data").map_err(bad_rows)?;
        let Some(data) = data.filter(|d| &doc[d.clone()] != "null") else {
            return Ok(Received { page: serde_json::from_str(doc).map_err(bad)?, rows: None });
        };
        // The document without its rows: a copy of the few hundred bytes around them.
        let rest = [&doc[..data.start], "null", &doc[data.end..]].concat();
        let page = serde_json::from_str(&rest).map_err(bad)?;
        Ok(Received { page, rows: Some(Rows::Json(body, data)) })
    }

    /// An Arrow page: the document up to the first newline, the framed batches after it.
    fn from_arrow(body: Bytes) -> Result<Received, ClientError> {
        let bad = |what: String| ClientError::Protocol(format!("{what} in an Arrow results page"));
        let split = body.iter().position(|b| *b == b'\n').ok_or_else(|| bad("no document".into()))?;
        let page: QueryResultsPage = serde_json::from_slice(&body[..split]).map_err(|e| bad(e.to_string()))?;
        if page.arrow_rows.is_none() {
            return Err(bad("no arrowRows".into()));
        }
        Ok(Received { page, rows: Some(Rows::Arrow(body.slice(split + 1..))) })
    }

    fn has_rows(&self) -> bool {
        let json = match &self.rows {
            Some(Rows::Json(body, data)) => {
                body[data.clone()].iter().any(|b| !matches!(b, b'[' | b']' | b' ' | b'\n' | b'\r' | b'\t'))
            }
            Some(Rows::Arrow(_)) => self.page.arrow_rows.is_some_and(|n| n > 0),
            None => false,
        };
        // The statement's first answer comes parsed (its rows in `data`).
        let parsed = self.page.data.as_ref().is_some_and(|d| !d.is_empty())
            || self.page.batches.as_ref().is_some_and(|b| b.iter().any(|b| b.num_rows() > 0));
        json || parsed || self.page.rows_text.is_some()
    }

    /// The page with its rows decoded: Arrow ones into batches, JSON ones as `Value`s,
    /// or as `rows_as`'s text lines.
    fn finish(self, rows_as: Option<RowsAs>) -> Result<QueryResultsPage, ClientError> {
        let Received { mut page, rows } = self;
        let (body, data) = match rows {
            None => return Ok(page),
            Some(Rows::Arrow(framed)) => {
                page.batches = Some(decode_arrow_rows(&framed, page.arrow_rows.unwrap_or(0))?);
                return Ok(page);
            }
            Some(Rows::Json(body, data)) => (body, data),
        };
        let rows = &body[data.clone()];
        let bad = |e: String| ClientError::Protocol(format!("{e} in {}", excerpt(&String::from_utf8_lossy(rows))));
        match rows_as {
            // The body was checked as UTF-8 when received; JSON parsing reads bytes.
            None | Some(RowsAs::Arrow) => {
                page.data = Some(serde_json::from_slice(rows).map_err(|e| bad(e.to_string()))?)
            }
            Some(RowsAs::Text(style)) => {
                // The scanner takes text: only the rows are checked again, not the body.
                let rows = std::str::from_utf8(rows).map_err(|e| bad(e.to_string()))?;
                // The text is shorter than the JSON it comes from: one allocation.
                let mut text = String::with_capacity(data.len());
                let count = format::rows_to_text(rows, style, &mut text).map_err(bad)?;
                if count > 0 {
                    page.rows_text = Some(RowsText { text: Bytes::from(text.into_bytes()), rows: count });
                }
            }
        }
        Ok(page)
    }
}

/// The batches of an Arrow page, decoded and checked as the exchange decodes pages
/// (bytes from the network are not trusted); they must hold the `rows` the document
/// announced.
fn decode_arrow_rows(framed: &[u8], rows: usize) -> Result<Vec<RecordBatch>, ClientError> {
    let bad = |what: String| ClientError::Protocol(format!("{what} in an Arrow results page"));
    let mut batches = Vec::new();
    for page in unframe_pages(framed).map_err(bad)? {
        batches.extend(Page::decode(&page).map_err(|e| bad(e.to_string()))?);
    }
    let got: usize = batches.iter().map(|b| b.num_rows()).sum();
    if got != rows {
        return Err(bad(format!("{got} rows where the document announced {rows}")));
    }
    Ok(batches)
}

/// A page whose rows the coordinator sent as text (`protocol::TEXT_RESULTS_CONTENT_TYPE`):
/// the document up to the first newline, the rows after it, kept as they came.
fn text_results(body: Bytes) -> Result<QueryResultsPage, ClientError> {
    let bad = |what: String| ClientError::Protocol(format!("{what} in {}", excerpt(&String::from_utf8_lossy(&body))));
    let split = body.iter().position(|b| *b == b'\n').ok_or_else(|| bad("a text page without its document".into()))?;
    let mut page: QueryResultsPage = serde_json::from_slice(&body[..split]).map_err(|e| bad(e.to_string()))?;
    let rows = page.text_rows.take().ok_or_else(|| bad("a text page without textRows".into()))?;
    page.rows_text = Some(RowsText { text: body.slice(split + 1..), rows });
    Ok(page)
}

/// Prefers the flotilla error shape; a Trino `QueryResults` carrying an error is honoured too, and
/// anything else is reported by status with the start of the body.
fn http_error(status: StatusCode, body: &str) -> ClientError {
    if let Ok(parsed) = serde_json::from_str::<HttpErrorBody>(body) {
        return ClientError::Http { status: status.as_u16(), code: parsed.error.code, message: parsed.error.message };
    }
    if let Ok(QueryResultsPage { error: Some(error), .. }) = serde_json::from_str::<QueryResultsPage>(body) {
        return ClientError::Query(error);
    }
    let message = match body.trim() {
        "" => status.canonical_reason().unwrap_or("no message").to_string(),
        text => excerpt(text),
    };
    ClientError::Http { status: status.as_u16(), code: String::new(), message }
}

fn check_row_widths(outcome: &QueryOutcome) -> Result<(), ClientError> {
    let width = outcome.columns.len();
    match outcome.rows.iter().find(|row| row.len() != width) {
        Some(row) if width > 0 => {
            Err(ClientError::Protocol(format!("a row has {} values but the query has {width} columns", row.len())))
        }
        _ => Ok(()),
    }
}

/// Keeps error messages readable when a proxy answers with a whole HTML page.
fn excerpt(text: &str) -> String {
    const LIMIT: usize = 300;
    match text.char_indices().nth(LIMIT) {
        Some((cut, _)) => format!("{}...", &text[..cut]),
        None => text.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Rows are parsed after the document, wherever `data` stands in it (Trino puts
    /// `stats` after it, flotilla puts it last), as values or as text lines.
    #[test]
    fn rows_are_parsed_apart_from_their_document() {
        let trino = r#"{"id":"q1","nextUri":"http://c/v1/statement/q1/2","data":[[1,"a]}"],[null,"b"]],"stats":{"state":"RUNNING"}}"#;
        // A page already parsed (the answer to the POST) counts its rows too.
        let posted = Received { page: serde_json::from_str(trino).unwrap(), rows: None };
        assert!(posted.has_rows());
        let received = Received::from_json(Bytes::from_static(trino.as_bytes())).unwrap();
        assert!(received.has_rows());
        assert_eq!(received.page.next_uri.as_deref(), Some("http://c/v1/statement/q1/2"));
        assert_eq!(received.page.stats["state"], "RUNNING");
        assert!(received.page.data.is_none(), "rows wait for finish");
        let page = received.finish(None).unwrap();
        let whole: QueryResultsPage = serde_json::from_str(trino).unwrap();
        assert_eq!(page.data, whole.data);
        let text = Received::from_json(Bytes::from_static(trino.as_bytes()))
            .unwrap()
            .finish(Some(RowsAs::Text(Delimited::for_format(crate::format::OutputFormat::Csv).unwrap())))
            .unwrap();
        assert_eq!(text.rows_text.as_ref().map(|t| t.rows), Some(2));
        assert!(text.data.is_none());
        for empty in [r#"{"id":"q1","data":[],"stats":{}}"#, r#"{"id":"q1","data":null}"#, r#"{"id":"q1"}"#] {
            let received = Received::from_json(Bytes::from_static(empty.as_bytes())).unwrap();
            assert!(!received.has_rows(), "{empty}");
            let page = received.finish(None).unwrap();
            assert!(page.data.as_ref().is_none_or(|d| d.is_empty()), "{empty}");
        }
        let broken = Received::from_json(Bytes::from_static(br#"{"id":"q1","data":[[1,2],"stats":{}}"#));
        assert!(matches!(broken, Err(ClientError::Protocol(_))), "{broken:?}");
    }

    /// An Arrow page: the document, a newline, the batches framed as the exchange
    /// frames them. Its batches come back equal, its row count is checked against the
    /// document, and damaged bytes are an error, not a panic.
    #[test]
    fn arrow_pages_decode_into_the_batches_sent() {
        use datafusion::arrow::array::{Decimal128Array, Int64Array, StringArray};
        use datafusion::arrow::datatypes::{DataType, Field, Schema};
        let schema = Arc::new(Schema::new(vec![
            Field::new("k", DataType::Int64, false),
            Field::new("name", DataType::Utf8, true),
            Field::new("price", DataType::Decimal128(15, 2), true),
        ]));
        let batch = |from: i64, n: i64| {
            RecordBatch::try_new(
                schema.clone(),
                vec![
                    Arc::new(Int64Array::from_iter_values(from..from + n)),
                    Arc::new(StringArray::from_iter((from..from + n).map(|i| (i % 3 != 0).then(|| format!("r{i}"))))),
                    Arc::new(
                        Decimal128Array::from_iter(
                            (from..from + n).map(|i| (i % 5 != 0).then_some(i128::from(i) * 101)),
                        )
                        .with_precision_and_scale(15, 2)
                        .unwrap(),
                    ),
                ],
            )
            .unwrap()
        };
        let sent = vec![batch(0, 1000), batch(1000, 7)];
        let body = |rows: usize, batches: &[RecordBatch]| {
            let pages: Vec<Page> = batches.iter().cloned().map(Page::new).collect();
            let mut body =
                format!(r#"{{"id":"q1","nextUri":"http://c/v1/statement/q1/2","arrowRows":{rows}}}"#).into_bytes();
            body.push(b'\n');
            body.extend_from_slice(&crate::exchange::page::frame_pages(&pages).unwrap());
            Bytes::from(body)
        };
        let received = Received::from_arrow(body(1007, &sent)).unwrap();
        assert!(received.has_rows());
        assert_eq!(received.page.next_uri.as_deref(), Some("http://c/v1/statement/q1/2"));
        let page = received.finish(Some(RowsAs::Arrow)).unwrap();
        assert_eq!(page.batches.as_deref(), Some(sent.as_slice()));
        assert!(page.data.is_none());
        // A result without rows: one empty batch, for its schema; not a page with rows.
        let empty = Received::from_arrow(body(0, &[RecordBatch::new_empty(schema.clone())])).unwrap();
        assert!(!empty.has_rows());
        let page = empty.finish(Some(RowsAs::Arrow)).unwrap();
        assert_eq!(page.batches.as_ref().map(|b| b[0].schema()), Some(schema.clone()));
        // Fewer rows than announced, a cut body, no document, no count: errors.
        let short = Received::from_arrow(body(1008, &sent)).unwrap().finish(Some(RowsAs::Arrow));
        assert!(matches!(short, Err(ClientError::Protocol(ref m)) if m.contains("1007 rows")), "{short:?}");
        let whole = body(1007, &sent);
        for cut in [whole.len() - 1, whole.len() - 300, whole.len() / 2] {
            let cut = Received::from_arrow(whole.slice(..cut)).and_then(|r| r.finish(Some(RowsAs::Arrow)));
            assert!(matches!(cut, Err(ClientError::Protocol(_))), "{cut:?}");
        }
        let mut garbled = whole.to_vec();
        let at = garbled.len() - 200;
        garbled[at..at + 50].fill(0xff);
        // Bytes garbled among the values may decode to other values; they must not panic.
        let _ = Received::from_arrow(Bytes::from(garbled)).and_then(|r| r.finish(Some(RowsAs::Arrow)));
        for broken in [&b"no newline"[..], b"{\"id\":\"q1\"}\n"] {
            let got = Received::from_arrow(Bytes::from_static(broken));
            assert!(matches!(got, Err(ClientError::Protocol(_))), "{got:?}");
        }
    }

    #[test]
    fn pages_parse_sparse_and_full() {
        let sparse: QueryResultsPage = serde_json::from_str(r#"{"id":"q1","stats":{"state":"QUEUED"}}"#).unwrap();
        assert_eq!(sparse.state(), Some("QUEUED"));
        assert!(sparse.next_uri.is_none() && sparse.columns.is_none());
        let full = r#"{"id":"q1","infoUri":"http://c/ui/q1","nextUri":"http://c/v1/statement/q1/2",
            "columns":[{"name":"n","type":"bigint","typeSignature":{"rawType":"bigint","arguments":[]}}],
            "data":[[1],[2]],"stats":{"state":"RUNNING"},"warnings":null}"#;
        let page: QueryResultsPage = serde_json::from_str(full).unwrap();
        assert_eq!(page.next_uri.as_deref(), Some("http://c/v1/statement/q1/2"));
        assert_eq!(page.columns.unwrap()[0].type_name, "bigint");
        assert_eq!(page.data.unwrap().len(), 2);
    }

    #[test]
    fn http_errors_use_the_flotilla_shape() {
        let body = r#"{"error":{"code":"NOT_FOUND","message":"no such query"}}"#;
        match http_error(StatusCode::NOT_FOUND, body) {
            ClientError::Http { status, code, message } => {
                assert_eq!((status, code.as_str(), message.as_str()), (404, "NOT_FOUND", "no such query"));
            }
            other => panic!("unexpected {other:?}"),
        }
        let body = r#"{"id":"q","error":{"message":"line 1:1: boom","errorCode":1,"errorName":"SYNTAX_ERROR"}}"#;
        let err = http_error(StatusCode::BAD_REQUEST, body);
        assert!(matches!(err, ClientError::Query(crate::client::QueryError { error_code: 1, .. })));
        assert_eq!(err.to_string(), "line 1:1: boom");
        let err = http_error(StatusCode::BAD_GATEWAY, "");
        assert_eq!(err.to_string(), "server error 502: Bad Gateway");
    }

    #[test]
    fn servers_and_uris_are_normalised() {
        let client = StatementClient::new("localhost:8080/");
        assert_eq!(client.server(), "http://localhost:8080");
        assert_eq!(client.resolve("/v1/statement/q/1"), "http://localhost:8080/v1/statement/q/1");
        assert_eq!(client.resolve("http://other:1/x"), "http://other:1/x");
        let client = client.with_session("a", "1").with_session("a", "2");
        assert_eq!(client.session().properties, vec![("a".to_string(), "2".to_string())]);
    }

    #[test]
    fn session_headers_change_the_session_of_the_client_and_its_clones() {
        let client = StatementClient::new("localhost:8080").with_catalog("tpch").with_session("a", "1");
        let clone = client.clone();
        let mut headers = reqwest::header::HeaderMap::new();
        headers.append("x-trino-set-schema", "sf1".parse().unwrap());
        headers.append("x-trino-set-session", "b=all-at-once".parse().unwrap());
        headers.append("x-trino-set-session", "c=it%27s+here%C3%A9".parse().unwrap());
        headers.append("x-trino-clear-session", "a".parse().unwrap());
        client.session.lock().apply(&headers);
        let s = clone.session();
        assert_eq!((s.catalog.as_deref(), s.schema.as_deref()), (Some("tpch"), Some("sf1")));
        let want = [("b", "all-at-once"), ("c", "it's here\u{e9}")];
        assert_eq!(s.properties, want.map(|(k, v)| (k.to_string(), v.to_string())).to_vec());
        // A builder gives a session of its own.
        let other = clone.clone().with_session("d", "1");
        assert!(client.session().properties.iter().all(|(k, _)| k != "d"));
        assert_eq!(other.session().properties.len(), 3);
    }
}
