//! The one place where errors become HTTP responses: each layer's error type says its
//! stable `ApiCode` (which fixes the status) through `ApiError`, and this module renders the JSON body
//! `{"error": {"code", "message"}}`. Also the small helpers both servers share.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use std::sync::Arc;
use std::time::Duration;

use crate::error_code::ApiCode;
use crate::protocol::{ErrorBody, ErrorDetail};

/// An error with a stable HTTP API code.
pub trait ApiError: std::fmt::Display {
    fn code(&self) -> ApiCode;

    fn status(&self) -> StatusCode {
        self.code().status()
    }
}

/// Renders any `ApiError` as the JSON error body.
pub fn error_response<E: ApiError>(e: &E) -> Response {
    let body = ErrorBody { error: ErrorDetail { code: e.code().into(), message: e.to_string() } };
    (e.status(), Json(body)).into_response()
}

/// Binds a TCP listener; port 0 picks a free one.
pub async fn bind(addr: &str) -> std::io::Result<tokio::net::TcpListener> {
    tokio::net::TcpListener::bind(addr).await
}

/// Header carrying the cluster's shared secret on internal requests.
pub const HEADER_INTERNAL_TOKEN: &str = "x-flotilla-internal-token";

/// The shared HTTP client of a process: one connection pool for tasks and exchanges.
/// With a shared secret, every request it sends carries it.
pub fn http_client(secret: Option<&str>) -> reqwest::Client {
    internal_client(secret, &[])
}

/// The client of internal requests: carries the shared secret, and trusts the
/// system's roots plus `extra_roots` (the cluster's CA, for internal HTTPS).
pub fn internal_client(secret: Option<&str>, extra_roots: &[reqwest::Certificate]) -> reqwest::Client {
    let mut headers = reqwest::header::HeaderMap::new();
    if let Some(s) = secret {
        let mut v = reqwest::header::HeaderValue::from_str(s).expect("the shared secret is a valid header value");
        v.set_sensitive(true);
        headers.insert(HEADER_INTERNAL_TOKEN, v);
    }
    let mut builder = reqwest::Client::builder()
        // Below the servers' idle limit (`serve::HEADER_READ_TIMEOUT`), so a pooled
        // connection is not reused just as the server closes it.
        .pool_idle_timeout(serve::HEADER_READ_TIMEOUT / 2)
        .tcp_nodelay(true)
        .default_headers(headers);
    for root in extra_roots {
        builder = builder.add_root_certificate(root.clone());
    }
    builder.build().expect("building the HTTP client")
}

pub mod serve;

/// Serves `app` on `listener`, over TLS when `tls` is given, until `shutdown` (see
/// `serve` for the limits every connection is held to).
pub async fn serve(
    listener: tokio::net::TcpListener,
    tls: Option<Arc<tokio_rustls::rustls::ServerConfig>>,
    app: axum::Router,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    use axum::serve::ListenerExt;
    match tls {
        Some(config) => serve::serve_on(crate::tls::TlsListener::new(listener, config)?, app, shutdown).await,
        // Small responses (task status, acknowledgements) go out at once rather than
        // waiting on Nagle's algorithm for the peer's delayed ACK.
        None => {
            let listener = listener.tap_io(|tcp| {
                let _ = tcp.set_nodelay(true);
            });
            serve::serve_on(listener, app, shutdown).await
        }
    }
}

/// Internal security: the secret every coordinator<->worker and worker<->worker
/// request must carry. `None` leaves internal endpoints open (a single trusted host).
#[derive(Clone, Default)]
pub struct InternalAuth(pub Option<Arc<str>>);

#[derive(Debug, thiserror::Error)]
#[error("internal request without a valid shared secret")]
pub struct Unauthorized;

impl ApiError for Unauthorized {
    fn code(&self) -> ApiCode {
        ApiCode::Unauthenticated
    }
}

/// Middleware refusing internal requests that lack the shared secret.
pub async fn require_internal(
    axum::extract::State(auth): axum::extract::State<InternalAuth>,
    req: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    if let Some(secret) = &auth.0 {
        let given = req.headers().get(HEADER_INTERNAL_TOKEN).map(|v| v.as_bytes()).unwrap_or_default();
        if !crate::util::constant_time_eq(given, secret.as_bytes()) {
            return error_response(&Unauthorized);
        }
    }
    next.run(req).await
}

/// Middleware giving every error response our JSON shape. Errors of our own handlers
/// already have it; this catches what axum answers by itself in plain text: a body
/// over the size limit (413), a malformed query string or path (400), a wrong method.
pub async fn json_errors(req: axum::extract::Request, next: axum::middleware::Next) -> Response {
    let resp = next.run(req).await;
    let status = resp.status();
    let is_json = resp
        .headers()
        .get(axum::http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"));
    if !(status.is_client_error() || status.is_server_error()) || is_json {
        return resp;
    }
    // Rejection texts are short; a body that is not is cut rather than buffered whole.
    let (parts, body) = resp.into_parts();
    let text = match axum::body::to_bytes(body, 64 << 10).await {
        Ok(b) => String::from_utf8_lossy(&b).trim().to_string(),
        Err(_) => String::new(),
    };
    let code = match status {
        StatusCode::PAYLOAD_TOO_LARGE => ApiCode::RequestTooLarge,
        StatusCode::METHOD_NOT_ALLOWED => ApiCode::MethodNotAllowed,
        StatusCode::NOT_FOUND => ApiCode::NotFound,
        StatusCode::UNSUPPORTED_MEDIA_TYPE => ApiCode::UnsupportedMediaType,
        s if s.is_client_error() => ApiCode::BadRequest,
        _ => ApiCode::InternalError,
    };
    let message = if text.is_empty() { status.canonical_reason().unwrap_or("error").to_string() } else { text };
    let body = ErrorBody { error: ErrorDetail { code: code.into(), message } };
    let mut out = (status, Json(body)).into_response();
    // Keep what the original said besides its body (`Allow`, `Retry-After`, ...).
    for (name, value) in parts.headers.iter() {
        if name != axum::http::header::CONTENT_TYPE && name != axum::http::header::CONTENT_LENGTH {
            out.headers_mut().insert(name.clone(), value.clone());
        }
    }
    out
}

/// Reads the secret from a flag value or `FLOTILLA_SHARED_SECRET`; empty means none.
pub fn shared_secret(flag: Option<String>) -> Option<String> {
    flag.or_else(|| std::env::var("FLOTILLA_SHARED_SECRET").ok()).filter(|s| !s.is_empty())
}

/// One request-error budget for a link to one peer: failed requests are retried with
/// jittered exponential backoff until `max` has passed since the first failure of a
/// run of failures; a success starts afresh. Task creation and updates, status polls
/// and exchange pulls all follow it (`exchange_max_error_duration`).
pub struct ErrorBudget {
    max: Duration,
    max_delay: Duration,
    failing_since: Option<std::time::Instant>,
    backoff: backon::ExponentialBackoff,
}

impl ErrorBudget {
    pub fn new(max: Duration, max_delay: Duration) -> Self {
        ErrorBudget { max, max_delay, failing_since: None, backoff: Self::backoff(max_delay) }
    }

    fn backoff(max_delay: Duration) -> backon::ExponentialBackoff {
        use backon::BackoffBuilder;
        backon::ExponentialBuilder::default()
            .with_min_delay(Duration::from_millis(50))
            .with_max_delay(max_delay)
            .with_jitter()
            .without_max_times()
            .build()
    }

    /// A request worked: the next failure starts a new run.
    pub fn succeeded(&mut self) {
        self.failing_since = None;
        self.backoff = Self::backoff(self.max_delay);
    }

    /// A request begun at `started` failed: `Ok(pause)` before the next try, or
    /// `Err(how long the link has been failing)` once the budget is spent.
    pub fn failed(&mut self, started: std::time::Instant) -> Result<Duration, Duration> {
        let since = *self.failing_since.get_or_insert(started);
        let elapsed = since.elapsed();
        if elapsed >= self.max {
            return Err(elapsed);
        }
        Ok(self.backoff.next().unwrap_or(self.max_delay))
    }
}

/// A server on a non-loopback address without a shared secret lets anyone on the
/// network register a fake worker or drive tasks; it starts only when told to.
pub fn check_internal_exposure(addr: std::net::SocketAddr, has_secret: bool, insecure: bool) -> std::io::Result<()> {
    if addr.ip().is_loopback() || has_secret || insecure {
        return Ok(());
    }
    Err(std::io::Error::other(format!(
        "{addr} is reachable from other hosts but no shared secret is set: set \
         internal-communication.shared-secret (or FLOTILLA_SHARED_SECRET), or pass --insecure-internal"
    )))
}

/// The peer refused the connection: nothing listens at its address any more (its
/// process is gone), unlike a timeout, which may be a slow or cut-off link.
pub fn is_connection_refused(e: &reqwest::Error) -> bool {
    let mut source: Option<&(dyn std::error::Error + 'static)> = std::error::Error::source(e);
    while let Some(s) = source {
        if let Some(io) = s.downcast_ref::<std::io::Error>() {
            if io.kind() == std::io::ErrorKind::ConnectionRefused {
                return true;
            }
        }
        source = s.source();
    }
    false
}

/// reqwest's errors print their source chain poorly; say which kind of failure it was.
pub fn describe_request_error(e: &reqwest::Error) -> String {
    if e.is_timeout() {
        format!("request timed out ({e})")
    } else if e.is_connect() {
        format!("connection failed ({e})")
    } else {
        e.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_error_budget_runs_out_after_its_duration_and_resets_on_success() {
        let mut budget = ErrorBudget::new(Duration::from_millis(40), Duration::from_millis(5));
        let first = std::time::Instant::now();
        assert!(budget.failed(first).is_ok());
        std::thread::sleep(Duration::from_millis(50));
        // Measured from the first failure of the run, not from the latest request.
        assert!(budget.failed(std::time::Instant::now()).is_err());
        budget.succeeded();
        assert!(budget.failed(std::time::Instant::now()).is_ok());
    }
}
