//! `HttpRemoteTask`: the coordinator's handle on one task running on a worker, the
//! schedulers' `RemoteTask` over the task REST API. It creates the task, sends later
//! updates (upstream locations), long-polls its status and aborts it. Owned by the
//! stage that created it; status changes wake the query's scheduler through a `watch`
//! channel. `HttpRemoteTaskFactory` makes them for the schedulers.
//!
//! Request errors are retried with backoff until `max_error_duration`; past that the
//! task counts as failed (the worker is unreachable), which the scheduler turns into a
//! query failure naming the worker.

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::future::{BoxFuture, FutureExt};
use tokio::sync::watch;

use crate::cluster::node_manager::NodeManager;
use crate::cluster::node_manager::WorkerNode;
use crate::error_code::{ApiCode, ErrorCode};
use crate::http::{describe_request_error, is_connection_refused, ErrorBudget};
use crate::protocol::{self, ErrorBody, TaskFailure, TaskId, TaskState, TaskStatus, TaskUpdateRequest};
use crate::scheduling::remote_task::{planned_status, RemoteTask, RemoteTaskError, RemoteTaskFactory, TaskStatusCell};

#[derive(Debug)]
pub struct HttpRemoteTask {
    pub task_id: TaskId,
    pub worker: WorkerNode,
    pub partitions: Vec<usize>,
    http: reqwest::Client,
    status: TaskStatusCell,
    max_error_duration: Duration,
    /// Bumped on every status change; the stage and scheduler watch it.
    changed: watch::Sender<u64>,
    /// True while a create request is in flight. A delete waits for it to settle, or
    /// the create could land after the delete and leave an orphan task behind.
    creating: watch::Sender<bool>,
    /// Told at once when the worker refuses connections (its process is gone), so
    /// its work is recomputed now rather than after the heartbeat timeout.
    nodes: Option<Arc<NodeManager>>,
}

/// Clears `creating` however `send_update` ends, including by being dropped.
struct CreatingGuard<'a>(&'a watch::Sender<bool>);

impl Drop for CreatingGuard<'_> {
    fn drop(&mut self) {
        self.0.send_replace(false);
    }
}

impl HttpRemoteTask {
    pub fn new(
        task_id: TaskId,
        worker: WorkerNode,
        partitions: Vec<usize>,
        http: reqwest::Client,
        max_error_duration: Duration,
        changed: watch::Sender<u64>,
    ) -> Self {
        let status = planned_status(&task_id, &worker);
        let (creating, _) = watch::channel(false);
        HttpRemoteTask {
            task_id,
            worker,
            partitions,
            http,
            status: TaskStatusCell::new(status),
            max_error_duration,
            changed,
            creating,
            nodes: None,
        }
    }

    fn task_url(&self) -> String {
        format!("{}/v1/task/{}", self.worker.url, self.task_id)
    }

    fn error_budget(&self) -> ErrorBudget {
        ErrorBudget::new(self.max_error_duration, Duration::from_millis(500))
    }

    /// Bounds each request so that a hung worker counts against the error budget.
    fn request_timeout(&self, floor: Duration) -> Duration {
        self.max_error_duration.clamp(floor, Duration::from_secs(30))
    }

    async fn send(&self, req: &TaskUpdateRequest) -> Result<(), RemoteTaskError> {
        let _creating = req.fragment.is_some().then(|| {
            self.creating.send_replace(true);
            CreatingGuard(&self.creating)
        });
        let mut budget = self.error_budget();
        loop {
            let request_started = Instant::now();
            let sent = self
                .http
                .post(self.task_url())
                .json(req)
                .timeout(self.request_timeout(Duration::from_secs(2)))
                .send()
                .await;
            match sent {
                Ok(resp) if resp.status().is_success() => return Ok(()),
                Ok(resp) if resp.status().is_client_error() => {
                    let body = resp.bytes().await.unwrap_or_default();
                    let (code, message) = match serde_json::from_slice::<ErrorBody>(&body) {
                        Ok(e) => (e.error.code, e.error.message),
                        Err(_) => (ApiCode::InternalError.into(), String::from_utf8_lossy(&body).into_owned()),
                    };
                    return Err(RemoteTaskError::Rejected {
                        task: self.task_id.clone(),
                        url: self.worker.url.clone(),
                        code,
                        message,
                    });
                }
                Err(e) if is_connection_refused(&e) => {
                    self.worker_gone(&e);
                    return Err(RemoteTaskError::RequestsFailed {
                        task: self.task_id.clone(),
                        url: self.worker.url.clone(),
                        elapsed: Duration::ZERO,
                        message: describe_request_error(&e),
                    });
                }
                other => {
                    let message = match other {
                        Ok(resp) => format!("HTTP {}", resp.status()),
                        Err(e) => e.to_string(),
                    };
                    match budget.failed(request_started) {
                        Ok(pause) => tokio::time::sleep(pause).await,
                        Err(elapsed) => {
                            return Err(RemoteTaskError::RequestsFailed {
                                task: self.task_id.clone(),
                                url: self.worker.url.clone(),
                                elapsed,
                                message,
                            })
                        }
                    }
                }
            }
        }
    }

    fn set_status(&self, status: TaskStatus) {
        if self.status.replace(status) {
            self.changed.send_modify(|v| *v += 1);
        }
    }

    /// The worker refused a connection: it is lost now, and this task with it.
    fn worker_gone(&self, e: &reqwest::Error) {
        if let Some(nodes) = &self.nodes {
            nodes.mark_lost(&self.worker.node_id);
        }
        self.fail(
            ErrorCode::RemoteHostGone,
            format!(
                "worker {} ({}) is gone: it refused the connection ({})",
                self.worker.node_id,
                self.worker.url,
                describe_request_error(e)
            ),
        );
    }

    fn fail(&self, code: ErrorCode, message: String) {
        let mut s = self.status.get();
        s.state = TaskState::Failed;
        s.failure = Some(TaskFailure::new(code, message));
        self.set_status(s);
    }

    /// Long-polls the task's status until `stop` fires. A done task is still polled: the polls are what tells the worker that the task's
    /// coordinator is alive, and a task nobody asks about is abandoned there
    /// (`task.client.timeout`); a finished task may hold output a later stage reads.
    async fn poll(self: Arc<Self>, mut stop: watch::Receiver<bool>) {
        let url = format!("{}/status", self.task_url());
        let mut budget = self.error_budget();
        // The version the worker last reported: a done task's cached status no longer
        // follows the worker's, and asking with a stale version would not wait.
        let mut version = self.status.version();
        loop {
            if *stop.borrow() {
                return;
            }
            let request_started = Instant::now();
            let request = self
                .http
                .get(&url)
                .header(protocol::HEADER_CURRENT_VERSION, version.to_string())
                .header(protocol::HEADER_MAX_WAIT, "1000")
                .timeout(self.request_timeout(Duration::from_secs(2)))
                .send();
            let outcome = tokio::select! {
                r = request => r,
                _ = stop.wait_for(|s| *s) => return,
            };
            let pause = match outcome {
                Ok(resp) if resp.status().is_success() => match resp.json::<TaskStatus>().await {
                    Ok(status) => {
                        budget.succeeded();
                        version = status.version;
                        self.set_status(status);
                        continue;
                    }
                    Err(e) => self.on_poll_error(&mut budget, request_started, format!("bad status body: {e}")),
                },
                Ok(resp) if resp.status() == reqwest::StatusCode::NOT_FOUND => {
                    self.fail(
                        ErrorCode::TaskLost,
                        format!("task {} is gone from worker {}", self.task_id, self.worker.url),
                    );
                    return;
                }
                Ok(resp) => self.on_poll_error(&mut budget, request_started, format!("HTTP {}", resp.status())),
                Err(e) if is_connection_refused(&e) => {
                    self.worker_gone(&e);
                    return;
                }
                Err(e) => self.on_poll_error(&mut budget, request_started, describe_request_error(&e)),
            };
            tokio::select! {
                _ = tokio::time::sleep(pause) => {}
                _ = stop.wait_for(|s| *s) => return,
            }
        }
    }

    /// Spends the budget on a failed poll; past it the task counts as failed. Returns
    /// the pause before the next poll (polling goes on: the query may still delete it).
    fn on_poll_error(&self, budget: &mut ErrorBudget, request_started: Instant, message: String) -> Duration {
        match budget.failed(request_started) {
            Ok(pause) => pause,
            Err(elapsed) => {
                self.fail(
                    ErrorCode::TooManyRequestsFailed,
                    format!(
                        "status requests for task {} to worker {} ({}) failed for {elapsed:.1?}: {message}",
                        self.task_id, self.worker.node_id, self.worker.url
                    ),
                );
                Duration::from_millis(500)
            }
        }
    }

    /// The worker's answer to a delete carries the task's final status, so a failure
    /// not yet polled is still learned.
    async fn remove(&self, abort: bool) -> Option<TaskStatus> {
        // A create ends by itself: its retries stop after max_error_duration, and its
        // last request after the request timeout; this bound is only a safety net.
        let mut creating = self.creating.subscribe();
        let settle = self.max_error_duration + self.request_timeout(Duration::from_secs(2)) + Duration::from_secs(5);
        let _ = tokio::time::timeout(settle, creating.wait_for(|c| !*c)).await;
        let url = format!("{}?abort={abort}", self.task_url());
        for attempt in 0..3 {
            match self.http.delete(&url).timeout(Duration::from_secs(5)).send().await {
                Ok(resp) if resp.status().is_success() => {
                    // The worker's last word is the task's final state in query info.
                    let status = resp.json::<TaskStatus>().await.ok();
                    if let Some(s) = &status {
                        self.set_status(s.clone());
                    }
                    return status;
                }
                Ok(resp) if resp.status() == reqwest::StatusCode::NOT_FOUND => return None,
                _ => tokio::time::sleep(Duration::from_millis(100 * (attempt + 1))).await,
            }
        }
        None
    }
}

impl RemoteTask for HttpRemoteTask {
    fn task_id(&self) -> &TaskId {
        &self.task_id
    }

    fn worker(&self) -> &WorkerNode {
        &self.worker
    }

    fn partitions(&self) -> &[usize] {
        &self.partitions
    }

    fn status(&self) -> TaskStatus {
        self.status.get()
    }

    fn state(&self) -> TaskState {
        self.status.state()
    }

    fn output_buffer_full(&self) -> bool {
        self.status.output_buffer_full()
    }

    fn send_update(&self, req: TaskUpdateRequest) -> BoxFuture<'_, Result<(), RemoteTaskError>> {
        async move { self.send(&req).await }.boxed()
    }

    fn mark_creating(&self) {
        self.creating.send_replace(true);
    }

    fn poll_status(self: Arc<Self>, stop: watch::Receiver<bool>) -> BoxFuture<'static, ()> {
        self.poll(stop).boxed()
    }

    fn mark_failed(&self, code: ErrorCode, message: String) {
        self.fail(code, message)
    }

    fn delete(&self, abort: bool) -> BoxFuture<'_, Option<TaskStatus>> {
        self.remove(abort).boxed()
    }

    /// One request, no retries, a short timeout: the scheduler waits for it, and a
    /// probe stage without its filter only sends more rows.
    fn dynamic_filter(&self, filter: usize) -> BoxFuture<'_, Option<Vec<u64>>> {
        async move {
            let url = format!("{}/dynamic-filter/{filter}", self.task_url());
            let resp = self.http.get(url).timeout(Duration::from_secs(2)).send().await.ok()?;
            if !resp.status().is_success() {
                return None;
            }
            crate::plan::dynamic_filter_exec::hashes_from_bytes(&resp.bytes().await.ok()?)
        }
        .boxed()
    }
}

/// Makes `HttpRemoteTask`s sharing one HTTP client and one error budget length.
pub struct HttpRemoteTaskFactory {
    pub http: reqwest::Client,
    pub max_error_duration: Duration,
    /// Membership, told when a worker refuses connections.
    pub nodes: Option<Arc<NodeManager>>,
}

impl RemoteTaskFactory for HttpRemoteTaskFactory {
    fn create(
        &self,
        task_id: TaskId,
        worker: WorkerNode,
        partitions: Vec<usize>,
        changed: watch::Sender<u64>,
    ) -> Arc<dyn RemoteTask> {
        let mut task =
            HttpRemoteTask::new(task_id, worker, partitions, self.http.clone(), self.max_error_duration, changed);
        task.nodes = self.nodes.clone();
        Arc::new(task)
    }
}
