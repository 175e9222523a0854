//! The accept loop both servers (coordinator, worker) run: HTTP/1.1 connections from
//! a plain or TLS listener, each served by hyper with the limits a server facing
//! strangers needs, which `axum::serve` does not set:
//!
//! - a connection's request headers must arrive within `HEADER_READ_TIMEOUT`;
//! - a request body may pause at most `BODY_READ_TIMEOUT` between two pieces;
//! - at most `max_connections()` connections are open at once; past it a new one is
//!   closed at once rather than queued behind idle ones.
//!
//! Without them 3,000 connections that never finished their headers, or sent a
//! chunked body that never ended, stayed open until the process ran out of
//! descriptors. `crate::http::serve` calls [`serve_on`].

use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::extract::ConnectInfo;
use bytes::Bytes;
use http_body::{Body as HttpBody, Frame};
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::io::{AsyncRead, AsyncWrite};

/// How long a connection may take to send a request's headers, counted from when it
/// became idle: an idle keep-alive connection is closed after it too, so clients
/// keeping connections in a pool must let them go sooner (`internal_client` does).
pub const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(15);
/// Longest pause inside a request body.
pub const BODY_READ_TIMEOUT: Duration = Duration::from_secs(15);
/// How long open connections get to finish once the server stops.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(5);

/// Connections open at once: a quarter of the descriptors the process may open, so
/// that files, spill and outgoing connections keep the rest, between 256 and 4,096.
pub fn max_connections() -> usize {
    let mut limit = libc::rlimit { rlim_cur: 1024, rlim_max: 1024 };
    // SAFETY: getrlimit writes into the struct it is given.
    let soft = match unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } {
        0 => limit.rlim_cur as usize,
        _ => 1024,
    };
    (soft / 4).clamp(256, 4096)
}

/// What both servers' listeners give: a connection and its peer's address.
pub trait Accept: Send + 'static {
    type Io: AsyncRead + AsyncWrite + Unpin + Send + 'static;
    fn accept(&mut self) -> impl Future<Output = (Self::Io, SocketAddr)> + Send;
}

impl<L> Accept for L
where
    L: axum::serve::Listener<Addr = SocketAddr>,
{
    type Io = L::Io;
    fn accept(&mut self) -> impl Future<Output = (Self::Io, SocketAddr)> + Send {
        axum::serve::Listener::accept(self)
    }
}

/// Serves `app` on every connection `listener` accepts until `shutdown`, then lets
/// open connections finish their requests for up to `DRAIN_TIMEOUT`.
pub async fn serve_on<L: Accept>(
    listener: L,
    app: axum::Router,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    serve_at_most(listener, app, shutdown, max_connections()).await
}

/// The same with at most `limit` connections open at once.
async fn serve_at_most<L: Accept>(
    mut listener: L,
    app: axum::Router,
    shutdown: impl Future<Output = ()> + Send + 'static,
    limit: usize,
) -> std::io::Result<()> {
    let slots = Arc::new(tokio::sync::Semaphore::new(limit));
    let app = app.layer(axum::middleware::from_fn(limit_body_pauses));
    let (stop, stopping) = tokio::sync::watch::channel(false);
    let mut connections = tokio::task::JoinSet::new();
    tokio::pin!(shutdown);
    loop {
        let (io, peer) = tokio::select! {
            accepted = listener.accept() => accepted,
            _ = &mut shutdown => break,
            // Reap finished connection tasks as they go.
            Some(_) = connections.join_next(), if !connections.is_empty() => continue,
        };
        let Ok(slot) = slots.clone().try_acquire_owned() else {
            tracing::debug!("refusing a connection from {peer}: {limit} are open");
            drop(io);
            continue;
        };
        let service = TowerToHyperService::new(app.clone().layer(axum::Extension(ConnectInfo(peer))));
        let mut stopping = stopping.clone();
        connections.spawn(async move {
            let _slot = slot;
            let mut builder = hyper::server::conn::http1::Builder::new();
            builder.timer(TokioTimer::new()).header_read_timeout(HEADER_READ_TIMEOUT);
            let connection = builder.serve_connection(TokioIo::new(io), service);
            tokio::pin!(connection);
            tokio::select! {
                r = connection.as_mut() => {
                    if let Err(e) = r {
                        tracing::debug!("connection from {peer}: {e}");
                    }
                    return;
                }
                _ = stopping.wait_for(|s| *s) => connection.as_mut().graceful_shutdown(),
            }
            let _ = tokio::time::timeout(DRAIN_TIMEOUT, connection).await;
        });
    }
    let _ = stop.send(true);
    let _ = tokio::time::timeout(DRAIN_TIMEOUT + Duration::from_secs(1), async {
        while connections.join_next().await.is_some() {}
    })
    .await;
    Ok(())
}

/// Middleware: the request's body fails once it pauses longer than
/// `BODY_READ_TIMEOUT`, so the handler reading it answers and the connection ends.
async fn limit_body_pauses(req: axum::extract::Request, next: axum::middleware::Next) -> axum::response::Response {
    let (parts, body) = req.into_parts();
    let body = axum::body::Body::new(PausingBody { inner: body, pause: None });
    next.run(axum::extract::Request::from_parts(parts, body)).await
}

/// A body that errs after a pause of `BODY_READ_TIMEOUT` between frames.
struct PausingBody {
    inner: axum::body::Body,
    pause: Option<Pin<Box<tokio::time::Sleep>>>,
}

#[derive(Debug, thiserror::Error)]
#[error("the request body paused for more than {BODY_READ_TIMEOUT:?}")]
struct BodyPaused;

impl HttpBody for PausingBody {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        let this = &mut *self;
        match Pin::new(&mut this.inner).poll_frame(cx) {
            Poll::Ready(frame) => {
                this.pause = None;
                Poll::Ready(frame)
            }
            Poll::Pending => {
                let pause = this.pause.get_or_insert_with(|| Box::pin(tokio::time::sleep(BODY_READ_TIMEOUT)));
                match pause.as_mut().poll(cx) {
                    Poll::Ready(()) => Poll::Ready(Some(Err(axum::Error::new(BodyPaused)))),
                    Poll::Pending => Poll::Pending,
                }
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpStream;

    /// What a `GET /` on a new connection gets back: the response's text, or "" when
    /// the server closed the connection without one.
    async fn get(addr: SocketAddr) -> String {
        let mut c = TcpStream::connect(addr).await.unwrap();
        // A refused connection may be reset before the request is written.
        let _ = c.write_all(b"GET / HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n").await;
        let mut out = Vec::new();
        let _ =
            tokio::time::timeout(Duration::from_secs(5), c.read_to_end(&mut out)).await.expect("an answer or a close");
        String::from_utf8_lossy(&out).into_owned()
    }

    /// Past the limit a new connection is closed at once, unanswered, rather than
    /// queued behind idle ones; once one of those goes, the next one is served.
    #[tokio::test]
    async fn connections_past_the_limit_are_closed_until_one_ends() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let app = axum::Router::new().route("/", axum::routing::get(|| async { "hello" }));
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let server = tokio::spawn(serve_at_most(listener, app, async move { drop(stopped.await) }, 2));
        assert!(get(addr).await.ends_with("hello"), "served under the limit");
        // Two idle connections take both places.
        let idle = [TcpStream::connect(addr).await.unwrap(), TcpStream::connect(addr).await.unwrap()];
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert_eq!(get(addr).await, "", "a third connection is closed unanswered");
        drop(idle);
        let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
        loop {
            if get(addr).await.ends_with("hello") {
                break;
            }
            assert!(tokio::time::Instant::now() < deadline, "the places were never freed");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let _ = stop.send(());
        server.await.unwrap().unwrap();
    }
}
