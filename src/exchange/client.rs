//! `ExchangeClient`: pulls the pages of a set of upstream buffers over HTTP and hands
//! them on as one stream of record batches. Used by `RemoteSourceExec` inside worker
//! fragments and inside the coordinator's root stage.
//!
//! One puller per upstream buffer asks for pages by token (so a retried request gets
//! the same pages), acknowledges by asking for the next token, and deletes the buffer
//! when it is complete or the consumer stops reading. Transient request errors are
//! retried with backoff until `max_error_duration`; after that, or when the upstream
//! task reports failure, the stream ends with an `ExchangeError` that names the
//! upstream task and worker, so the consumer can tell the coordinator which task broke.

use crate::error_code::{ApiCode, FailureCode, Named};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use datafusion::arrow::array::RecordBatch;
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::error::DataFusionError;
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::SendableRecordBatchStream;
use futures::StreamExt;
use tokio::sync::{mpsc, OwnedSemaphorePermit, Semaphore};

use super::local::{LocalFetch, LocalResults};
use super::page::{Page, PageAssembler};
use crate::protocol::{self, ErrorBody, TaskId};

/// Tunables of the exchange, from session properties or the node's configuration.
#[derive(Debug, Clone)]
pub struct ExchangeConfig {
    /// How long a link may keep failing before it counts as failed for good.
    pub max_error_duration: Duration,
    /// Largest response a puller asks for.
    pub max_response_bytes: u64,
    /// How long one results request may wait on the producer.
    pub max_wait: Duration,
    /// Bytes of decoded-but-unconsumed pages a consumer holds across all its pullers.
    pub buffer_bytes: usize,
    /// Producers in this process, read by a call instead of a request.
    pub local: super::local::LocalExchanges,
}

impl Default for ExchangeConfig {
    fn default() -> Self {
        ExchangeConfig {
            max_error_duration: Duration::from_secs(10),
            max_response_bytes: 8 << 20,
            max_wait: Duration::from_secs(1),
            buffer_bytes: 32 << 20,
            local: Default::default(),
        }
    }
}

impl ExchangeConfig {
    /// This configuration with a query's session overrides applied.
    pub fn with_properties(&self, props: &crate::config::SessionProperties) -> ExchangeConfig {
        let mut c = self.clone();
        if let Some(v) = props.exchange_max_buffer_bytes {
            c.buffer_bytes = v as usize;
            c.max_response_bytes = c.max_response_bytes.min(v.max(1));
        }
        if let Some(v) = props.exchange_max_error_duration {
            c.max_error_duration = v;
        }
        c
    }
}

/// One upstream buffer to read.
#[derive(Debug, Clone)]
pub struct ExchangeSource {
    pub task_id: TaskId,
    pub url: String,
    pub buffer: usize,
}

/// Why an exchange link failed. Carried inside `DataFusionError::External` so the task
/// runner can recover the upstream task id for its `TaskFailure`.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ExchangeError {
    #[error("upstream task {task} on {url} failed: {message}")]
    UpstreamFailed { task: TaskId, url: String, code: Named<ApiCode>, cause: Option<FailureCode>, message: String },
    #[error("cannot fetch results of upstream task {task} on {url} for {elapsed:.1?}: {message}")]
    Unreachable { task: TaskId, url: String, elapsed: Duration, message: String },
    #[error("bad results from upstream task {task} on {url}: {message}")]
    Protocol { task: TaskId, url: String, message: String },
}

impl ExchangeError {
    pub fn upstream(&self) -> (&TaskId, &str) {
        match self {
            ExchangeError::UpstreamFailed { task, url, .. }
            | ExchangeError::Unreachable { task, url, .. }
            | ExchangeError::Protocol { task, url, .. } => (task, url),
        }
    }

    pub fn code(&self) -> crate::error_code::ErrorCode {
        use crate::error_code::ErrorCode;
        match self {
            // The upstream task's own code where it said it: the cause, which the
            // coordinator may not see itself (its worker cut off from it).
            ExchangeError::UpstreamFailed { cause, .. } => {
                cause.as_ref().and_then(FailureCode::known).unwrap_or(ErrorCode::RemoteTaskFailed)
            }
            ExchangeError::Unreachable { .. } => ErrorCode::RemoteTaskUnreachable,
            ExchangeError::Protocol { .. } => ErrorCode::RemoteTaskProtocolError,
        }
    }
}

/// Counters the owning task reports as its input statistics.
#[derive(Debug, Default)]
pub struct ExchangeStats {
    pub rows: AtomicU64,
    pub bytes: AtomicU64,
    pub pages: AtomicU64,
}

#[derive(Debug, Clone)]
pub struct ExchangeClient {
    http: reqwest::Client,
    config: ExchangeConfig,
    stats: Arc<ExchangeStats>,
}

type Item = Result<(RecordBatch, Option<OwnedSemaphorePermit>), DataFusionError>;

impl ExchangeClient {
    pub fn new(http: reqwest::Client, config: ExchangeConfig, stats: Arc<ExchangeStats>) -> Self {
        ExchangeClient { http, config, stats }
    }

    pub fn config(&self) -> &ExchangeConfig {
        &self.config
    }

    /// Streams the batches of all `sources`, in arrival order.
    pub fn stream(&self, schema: SchemaRef, sources: Vec<ExchangeSource>) -> SendableRecordBatchStream {
        let (tx, rx) = mpsc::channel::<Item>(64);
        let memory = Arc::new(Semaphore::new(self.config.buffer_bytes.max(1)));
        for source in sources {
            let puller = Puller {
                http: self.http.clone(),
                config: self.config.clone(),
                stats: self.stats.clone(),
                source,
                tx: tx.clone(),
                memory: memory.clone(),
            };
            tokio::spawn(puller.run());
        }
        drop(tx);
        let stream = futures::stream::unfold(rx, |mut rx| async move {
            let item = rx.recv().await?;
            // The permit is released as soon as the batch leaves the exchange.
            Some((item.map(|(batch, _permit)| batch), rx))
        });
        Box::pin(RecordBatchStreamAdapter::new(schema, stream.boxed()))
    }
}

struct Puller {
    http: reqwest::Client,
    config: ExchangeConfig,
    stats: Arc<ExchangeStats>,
    source: ExchangeSource,
    tx: mpsc::Sender<Item>,
    memory: Arc<Semaphore>,
}

enum Fetched {
    Pages { pages: Vec<Received>, next_token: u64, complete: bool },
    Failed(ExchangeError),
}

/// A page as it arrived: encoded in a response body, or as the batch itself from a
/// producer in this process.
enum Received {
    Encoded(datafusion::arrow::buffer::Buffer),
    Batch(Page),
}

impl Received {
    /// Bytes it holds, as `deliver` counts them against the consumer's buffer.
    fn held(&self) -> usize {
        match self {
            Received::Encoded(raw) => raw.len(),
            Received::Batch(page) => page.len(),
        }
    }
}

impl Puller {
    fn results_url(&self, token: u64) -> String {
        format!("{}/v1/task/{}/results/{}/{}", self.source.url, self.source.task_id, self.source.buffer, token)
    }

    async fn run(self) {
        let mut token = 0u64;
        let mut budget = crate::http::ErrorBudget::new(self.config.max_error_duration, Duration::from_secs(1));
        // The next response, when it was asked for while the last was handed on.
        let mut ahead: Option<(Instant, Result<Fetched, String>)> = None;
        loop {
            if self.tx.is_closed() {
                break;
            }
            let (request_started, fetched) = match ahead.take() {
                Some(fetched) => fetched,
                None => (Instant::now(), self.fetch(token).await),
            };
            match fetched {
                Ok(Fetched::Pages { pages, next_token, complete }) => {
                    budget.succeeded();
                    token = next_token;
                    if complete {
                        self.deliver(pages).await;
                        break;
                    }
                    let (delivered, next) = self.deliver_fetching_ahead(pages, token).await;
                    if !delivered {
                        break;
                    }
                    ahead = next;
                }
                Ok(Fetched::Failed(err)) => {
                    let _ = self.tx.send(Err(DataFusionError::External(Box::new(err)))).await;
                    return;
                }
                Err(message) => {
                    let delay = match budget.failed(request_started) {
                        Ok(delay) => delay,
                        Err(elapsed) => {
                            let err = ExchangeError::Unreachable {
                                task: self.source.task_id.clone(),
                                url: self.source.url.clone(),
                                elapsed,
                                message,
                            };
                            let _ = self.tx.send(Err(DataFusionError::External(Box::new(err)))).await;
                            return;
                        }
                    };
                    tracing::debug!(task = %self.source.task_id, %message, ?delay, "results request failed, retrying");
                    tokio::time::sleep(delay).await;
                }
            }
        }
        // Done reading (or the consumer went away): free the producer's buffer.
        if let Some(local) = self.config.local.lookup(&self.source.url) {
            local.destroy_buffer(&self.source.task_id, self.source.buffer);
            return;
        }
        let url = format!("{}/v1/task/{}/results/{}", self.source.url, self.source.task_id, self.source.buffer);
        let _ = self.http.delete(url).timeout(Duration::from_secs(5)).send().await;
    }

    /// Hands `pages` on and, when the consumer's buffer has room for them and for a
    /// whole response besides, asks for the pages after `token` meanwhile: a link then
    /// waits one round trip per response, not a round trip and the decoding of the
    /// last response (q16's 18,000 rows from one task: three responses). Without room
    /// it asks after, as the buffer's bound wants: a response waiting for room is not
    /// counted in it. Returns whether the consumer is still there, and the next
    /// response when it was asked for.
    async fn deliver_fetching_ahead(
        &self,
        pages: Vec<Received>,
        token: u64,
    ) -> (bool, Option<(Instant, Result<Fetched, String>)>) {
        let wanted: usize = pages.iter().map(|p| self.permits_for(p.held())).sum();
        let room = (self.memory.available_permits() as u64).saturating_sub(wanted as u64);
        if room < self.config.max_response_bytes {
            return (self.deliver(pages).await, None);
        }
        let started = Instant::now();
        let deliver = self.deliver(pages);
        let next = self.fetch(token);
        tokio::pin!(deliver, next);
        let mut fetched = None;
        let delivered = loop {
            tokio::select! {
                delivered = &mut deliver => break delivered,
                f = &mut next, if fetched.is_none() => fetched = Some(f),
            }
        };
        if !delivered {
            return (false, None);
        }
        let fetched = match fetched {
            Some(f) => f,
            None => next.await,
        };
        (true, Some((started, fetched)))
    }

    /// Permits of the consumer's buffer a page holding `held` bytes takes.
    fn permits_for(&self, held: usize) -> usize {
        held.clamp(1, self.config.buffer_bytes.max(1))
    }

    /// Decodes pages and hands them on; false when the consumer has gone.
    async fn deliver(&self, pages: Vec<Received>) -> bool {
        for page in pages {
            // What the rows measure (statistics) and what the batches hold (memory).
            let held = page.held();
            let (batches, bytes) = match page {
                Received::Batch(page) => {
                    let bytes = page.data_bytes();
                    (vec![page.into_batch()], bytes)
                }
                Received::Encoded(raw) => match Page::decode(&raw) {
                    Ok(b) => (b, raw.len()),
                    Err(e) => {
                        let err = ExchangeError::Protocol {
                            task: self.source.task_id.clone(),
                            url: self.source.url.clone(),
                            message: e.to_string(),
                        };
                        let _ = self.tx.send(Err(DataFusionError::External(Box::new(err)))).await;
                        return false;
                    }
                },
            };
            self.stats.pages.fetch_add(1, Ordering::Relaxed);
            crate::metrics::EXCHANGE_PAGES.fetch_add(1, Ordering::Relaxed);
            crate::metrics::EXCHANGE_BYTES.fetch_add(bytes as u64, Ordering::Relaxed);
            self.stats.bytes.fetch_add(bytes as u64, Ordering::Relaxed);
            let want = self.permits_for(held) as u32;
            let permit = match self.memory.clone().acquire_many_owned(want).await {
                Ok(p) => p,
                Err(_) => return false,
            };
            let mut permit = Some(permit);
            for batch in batches {
                self.stats.rows.fetch_add(batch.num_rows() as u64, Ordering::Relaxed);
                if self.tx.send(Ok((batch, permit.take()))).await.is_err() {
                    return false;
                }
            }
        }
        true
    }

    /// One results request. `Err` is a transient failure worth retrying.
    async fn fetch(&self, token: u64) -> Result<Fetched, String> {
        if let Some(local) = self.config.local.lookup(&self.source.url) {
            return self.fetch_local(local.as_ref(), token).await;
        }
        let response = self
            .http
            .get(self.results_url(token))
            .header(protocol::HEADER_MAX_SIZE, self.config.max_response_bytes.to_string())
            .header(protocol::HEADER_MAX_WAIT, self.config.max_wait.as_millis().to_string())
            .timeout(self.request_limit())
            .send()
            .await
            .map_err(|e| crate::http::describe_request_error(&e))?;
        let status = response.status();
        let failed = response.headers().contains_key(protocol::HEADER_TASK_FAILED);
        let cause = response.headers().get(protocol::HEADER_TASK_FAILURE_CODE).and_then(|v| v.to_str().ok());
        let cause = cause.map(FailureCode::parse);
        if failed || status.is_client_error() {
            let body = response.bytes().await.unwrap_or_default();
            let (code, message) = match serde_json::from_slice::<ErrorBody>(&body) {
                Ok(e) => (e.error.code, e.error.message),
                Err(_) => (ApiCode::InternalError.into(), String::from_utf8_lossy(&body).into_owned()),
            };
            return Ok(Fetched::Failed(ExchangeError::UpstreamFailed {
                task: self.source.task_id.clone(),
                url: self.source.url.clone(),
                code,
                cause,
                message,
            }));
        }
        if !status.is_success() {
            return Err(format!("HTTP {status}"));
        }
        let header = |name: &str| response.headers().get(name).and_then(|v| v.to_str().ok()).map(str::to_string);
        let next_token = header(protocol::HEADER_NEXT_TOKEN)
            .and_then(|v| v.parse::<u64>().ok())
            .ok_or_else(|| "missing next token header".to_string())?;
        let complete = header(protocol::HEADER_BUFFER_COMPLETE).as_deref() == Some("true");
        // The length is the peer's word: it sizes allocations only up to what was asked.
        let expected = response.content_length().unwrap_or(0).min(2 * self.config.max_response_bytes);
        let mut assembler = PageAssembler::new(expected as usize);
        let mut response = response;
        while let Some(chunk) = response.chunk().await.map_err(|e| format!("reading body failed: {e}"))? {
            assembler.push(&chunk)?;
        }
        let pages = assembler.finish()?.into_iter().map(Received::Encoded).collect();
        Ok(Fetched::Pages { pages, next_token, complete })
    }

    /// How long one results request may take: the long poll and some slack.
    fn request_limit(&self) -> Duration {
        self.config.max_wait + self.config.max_error_duration.clamp(Duration::from_secs(1), Duration::from_secs(10))
    }

    /// The same request, to a producer in this process, under the same limit.
    async fn fetch_local(&self, local: &dyn LocalResults, token: u64) -> Result<Fetched, String> {
        let limit = self.request_limit();
        let (task, buffer) = (&self.source.task_id, self.source.buffer);
        let asked = local.results(task, buffer, token, self.config.max_response_bytes, self.config.max_wait);
        match tokio::time::timeout(limit, asked).await.map_err(|_| "timed out".to_string())? {
            LocalFetch::Pages(r) => Ok(Fetched::Pages {
                pages: r.pages.into_iter().map(Received::Batch).collect(),
                next_token: r.next_token,
                complete: r.complete,
            }),
            LocalFetch::Failed { code, cause, message } => Ok(Fetched::Failed(ExchangeError::UpstreamFailed {
                task: task.clone(),
                url: self.source.url.clone(),
                code,
                cause,
                message,
            })),
            LocalFetch::Transient(message) => Err(message),
        }
    }
}
