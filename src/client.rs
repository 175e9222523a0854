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

use parking_lot::Mutex;
use reqwest::{Method, RequestBuilder, StatusCode};
use serde_json::Value;

use datafusion::arrow::record_batch::RecordBatch;

pub use crate::error_code::QueryError;
use crate::format::{Column, Delimited};
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
mod page;
mod session;

use page::{check_row_widths, http_error, text_results, Received};
pub use page::{ColumnInfo, QueryResultsPage, RowsText};
pub use session::ClientSession;

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

#[cfg(test)]
#[path = "client_tests.rs"]
mod tests;
