//! The one place where errors become HTTP responses: each layer's error type says its
//! status and stable code through `ApiError`, and this module renders the JSON body
//! `{"error": {"code", "message"}}`. Also the small helpers both servers share.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;

use crate::protocol::{ErrorBody, ErrorDetail};

/// An error with an HTTP status and a stable error code.
pub trait ApiError: std::fmt::Display {
    fn status(&self) -> StatusCode;
    fn code(&self) -> &'static str;
}

/// Renders any `ApiError` as the JSON error body.
pub fn error_response<E: ApiError>(e: &E) -> Response {
    let body = ErrorBody { error: ErrorDetail { code: e.code().to_string(), message: e.to_string() } };
    (e.status(), Json(body)).into_response()
}

/// Binds a TCP listener; port 0 picks a free one.
pub async fn bind(addr: &str) -> std::io::Result<tokio::net::TcpListener> {
    tokio::net::TcpListener::bind(addr).await
}

/// The shared HTTP client of a process: one connection pool for tasks and exchanges.
pub fn http_client() -> reqwest::Client {
    reqwest::Client::builder()
        .pool_idle_timeout(std::time::Duration::from_secs(30))
        .tcp_nodelay(true)
        .build()
        .expect("building the HTTP client")
}
