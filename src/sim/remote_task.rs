//! `SimRemoteTask`: the schedulers' `RemoteTask` over the simulated network. It keeps
//! the coordinator's side of the HTTP remote task's contract: creates and updates
//! retried until `MAX_ERROR` of failures; the status long-polled, a refused
//! connection marking the worker lost, an unknown task `TASK_LOST`, polls failing for
//! `MAX_ERROR` `TOO_MANY_REQUESTS_FAILED`; deletes waiting for a create under way and
//! tried three times. The HTTP client itself is not simulated: its sockets are not
//! tokio's paused-clock kind (see the module `sim`).

use std::sync::Arc;
use std::time::Duration;

use futures::future::{BoxFuture, FutureExt};
use tokio::sync::watch;
use tokio::time::Instant;

use super::world::{NetError, World};
use crate::cluster::node_manager::WorkerNode;
use crate::error_code::ErrorCode;
use crate::protocol::{TaskFailure, TaskId, TaskState, TaskStatus, TaskUpdateRequest};
use crate::scheduling::remote_task::{planned_status, RemoteTask, RemoteTaskError, RemoteTaskFactory, TaskStatusCell};

const REQUEST_TIMEOUT: Duration = Duration::from_secs(2);
/// How long requests to a task may fail before the task counts as failed.
const MAX_ERROR: Duration = Duration::from_secs(5);
/// How long a status request waits at the worker for a change.
const LONG_POLL: Duration = Duration::from_secs(1);

pub struct SimTaskFactory {
    pub world: Arc<World>,
}

impl RemoteTaskFactory for SimTaskFactory {
    fn create(
        &self,
        task_id: TaskId,
        worker: WorkerNode,
        partitions: Vec<usize>,
        changed: watch::Sender<u64>,
    ) -> Arc<dyn RemoteTask> {
        let (creating, _) = watch::channel(false);
        Arc::new(SimRemoteTask {
            world: self.world.clone(),
            index: self.world.worker_index(&worker.node_id),
            status: TaskStatusCell::new(planned_status(&task_id, &worker)),
            task_id,
            worker,
            partitions,
            changed,
            creating,
        })
    }
}

pub struct SimRemoteTask {
    world: Arc<World>,
    task_id: TaskId,
    worker: WorkerNode,
    index: usize,
    partitions: Vec<usize>,
    status: TaskStatusCell,
    changed: watch::Sender<u64>,
    creating: watch::Sender<bool>,
}

impl std::fmt::Debug for SimRemoteTask {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SimRemoteTask({})", self.task_id)
    }
}

impl SimRemoteTask {
    /// Takes a status the worker reported; final states stay final.
    fn set_status(&self, status: TaskStatus, from_poll: bool) {
        if !self.status.replace(status.clone()) {
            return;
        }
        if from_poll && self.world.ended() {
            self.world.violation(format!("the status of {} was still followed after the query ended", self.task_id));
        }
        if status.state.is_done() || status.state == TaskState::Flushing {
            self.world.event(format!("coordinator sees {} {:?}", self.task_id, status.state));
        }
        if matches!(status.state, TaskState::Flushing | TaskState::Finished) {
            self.world.note_seen_producing(&self.task_id);
        }
        self.changed.send_modify(|v| *v += 1);
    }

    fn fail(&self, code: ErrorCode, message: String) {
        let mut s = self.status.get();
        s.state = TaskState::Failed;
        s.failure = Some(TaskFailure::new(code, message));
        self.set_status(s, false);
    }

    async fn send(&self, req: TaskUpdateRequest) -> Result<(), RemoteTaskError> {
        if self.world.ended() {
            self.world.violation(format!("an update of {} was sent after the query ended", self.task_id));
        }
        if req.fragment.is_some() {
            self.world.note_create_sent(&self.task_id);
        }
        let started = Instant::now();
        let mut backoff = Duration::from_millis(50);
        let result = loop {
            let there = self.world.delay();
            tokio::time::sleep(there).await;
            let message = match self.world.deliver_update(self.index, &self.task_id, &req) {
                Ok(()) => {
                    tokio::time::sleep(self.world.delay()).await;
                    break Ok(());
                }
                Err(NetError::Refused) => "connection refused",
                Err(NetError::TimedOut) | Err(NetError::NotFound) => {
                    tokio::time::sleep(REQUEST_TIMEOUT.saturating_sub(there)).await;
                    "timed out"
                }
            };
            if started.elapsed() >= MAX_ERROR {
                self.world.note_fault_code(ErrorCode::TooManyRequestsFailed);
                break Err(RemoteTaskError::RequestsFailed {
                    task: self.task_id.clone(),
                    url: self.worker.url.clone(),
                    elapsed: started.elapsed(),
                    message: message.into(),
                });
            }
            tokio::time::sleep(backoff).await;
            backoff = (backoff * 2).min(Duration::from_secs(1));
        };
        if req.fragment.is_some() {
            self.creating.send_replace(false);
        }
        result
    }

    /// One long poll: there, a wait at the worker for a newer version, and back.
    async fn poll_once(&self, version: u64) -> Result<TaskStatus, NetError> {
        self.world.count_status_request();
        tokio::time::sleep(self.world.delay()).await;
        let deadline = Instant::now() + LONG_POLL;
        let status = loop {
            let (status, change) = self.world.status(self.index, &self.task_id)?;
            if status.version != version || Instant::now() >= deadline {
                break status;
            }
            if tokio::time::timeout_at(deadline, change.wait()).await.is_err() {
                break self.world.status(self.index, &self.task_id)?.0;
            }
        };
        tokio::time::sleep(self.world.delay()).await;
        Ok(status)
    }

    async fn poll(self: Arc<Self>, mut stop: watch::Receiver<bool>) {
        let mut failing_since: Option<Instant> = None;
        let mut version = self.status.version();
        loop {
            if *stop.borrow() {
                return;
            }
            let outcome = tokio::select! {
                biased;
                _ = stop.wait_for(|s| *s) => return,
                r = self.poll_once(version) => r,
            };
            match outcome {
                Ok(status) => {
                    failing_since = None;
                    version = status.version;
                    self.set_status(status, true);
                    continue;
                }
                Err(NetError::Refused) => {
                    self.world.nodes.mark_lost(&self.worker.node_id);
                    let message = format!("worker {} is gone: it refused the connection", self.worker.node_id);
                    return self.fail(ErrorCode::RemoteHostGone, message);
                }
                Err(NetError::NotFound) => {
                    let message = format!("task {} is gone from worker {}", self.task_id, self.worker.url);
                    return self.fail(ErrorCode::TaskLost, message);
                }
                Err(NetError::TimedOut) => {
                    tokio::time::sleep(REQUEST_TIMEOUT).await;
                    let since = *failing_since.get_or_insert_with(Instant::now);
                    if since.elapsed() >= MAX_ERROR {
                        let message = format!("status requests for task {} failed for {MAX_ERROR:?}", self.task_id);
                        self.fail(ErrorCode::TooManyRequestsFailed, message);
                    }
                }
            }
            tokio::select! {
                biased;
                _ = stop.wait_for(|s| *s) => return,
                _ = tokio::time::sleep(Duration::from_millis(100)) => {}
            }
        }
    }

    async fn remove(&self, abort: bool) -> Option<TaskStatus> {
        let mut creating = self.creating.subscribe();
        let _ = tokio::time::timeout(MAX_ERROR + REQUEST_TIMEOUT * 2, creating.wait_for(|c| !*c)).await;
        for attempt in 0..3u32 {
            tokio::time::sleep(self.world.delay()).await;
            match self.world.delete(self.index, &self.task_id, abort) {
                Ok(status) => {
                    tokio::time::sleep(self.world.delay()).await;
                    self.set_status(status.clone(), false);
                    return Some(status);
                }
                Err(NetError::NotFound) => return None,
                Err(NetError::Refused) => {}
                Err(NetError::TimedOut) => tokio::time::sleep(REQUEST_TIMEOUT).await,
            }
            tokio::time::sleep(Duration::from_millis(100) * (attempt + 1)).await;
        }
        None
    }
}

impl RemoteTask for SimRemoteTask {
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
        self.send(req).boxed()
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
}
