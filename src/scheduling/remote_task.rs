//! `RemoteTask`: what a scheduler needs from one task running on a worker, and
//! `RemoteTaskFactory`, how it gets one. The coordinator's `HttpRemoteTask` is the
//! implementation that talks to workers; the schedulers' unit tests use a fake that
//! the test drives by hand. Keeping the schedulers on this interface is what lets
//! retry eligibility, root-cause choice and stage states be tested without a network.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use futures::future::{BoxFuture, FutureExt};
use parking_lot::Mutex;
use tokio::sync::watch;

use crate::cluster::node_manager::WorkerNode;
use crate::error_code::{ApiCode, ErrorCode, Named};
use crate::protocol::{SourceUpdate, TaskFailure, TaskId, TaskState, TaskStats, TaskStatus, TaskUpdateRequest};

#[derive(Debug, Clone, thiserror::Error)]
pub enum RemoteTaskError {
    #[error("worker {url} rejected task {task}: {code}: {message}")]
    Rejected { task: TaskId, url: String, code: Named<ApiCode>, message: String },
    #[error("task management requests for task {task} to worker {url} failed for {elapsed:.1?}: {message}")]
    RequestsFailed { task: TaskId, url: String, elapsed: Duration, message: String },
}

impl RemoteTaskError {
    /// The query's error code for it: a worker that cannot run the plan says so
    /// (`BAD_PLAN`); any other refusal is the task's.
    pub fn error_code(&self) -> ErrorCode {
        match self {
            RemoteTaskError::Rejected { code, .. } if code.is(ApiCode::BadPlan) => ErrorCode::BadPlan,
            RemoteTaskError::Rejected { .. } => ErrorCode::RemoteTaskRejected,
            RemoteTaskError::RequestsFailed { .. } => ErrorCode::TooManyRequestsFailed,
        }
    }
}

/// One task of a stage, placed on a worker. Status changes bump the `watch` sender the
/// task was created with, which is how a scheduler learns of them.
pub trait RemoteTask: Send + Sync + fmt::Debug {
    fn task_id(&self) -> &TaskId;
    fn worker(&self) -> &WorkerNode;
    /// The stage partitions this task runs.
    fn partitions(&self) -> &[usize];
    /// The last status known; final states stay final.
    fn status(&self) -> TaskStatus;
    /// The last state known, without a copy of the whole status.
    fn state(&self) -> TaskState {
        self.status().state
    }
    /// Whether the task said its output buffer is over its limit.
    fn output_buffer_full(&self) -> bool {
        self.status().output_buffer_overutilized
    }
    /// Creates the task (a request with a fragment) or sends it a later update.
    fn send_update(&self, req: TaskUpdateRequest) -> BoxFuture<'_, Result<(), RemoteTaskError>>;
    /// Marks a create as under way before it is handed to another tokio task, so a
    /// delete issued in between still waits for it.
    fn mark_creating(&self);
    /// Follows the task's status until `stop` fires (the query's end).
    fn poll_status(self: Arc<Self>, stop: watch::Receiver<bool>) -> BoxFuture<'static, ()>;
    /// Fails the task from the coordinator's side (its worker is lost or unreachable).
    fn mark_failed(&self, code: ErrorCode, message: String);
    /// Removes the task from its worker (abort or cancel); its final status when the
    /// worker told it.
    fn delete(&self, abort: bool) -> BoxFuture<'_, Option<TaskStatus>>;

    /// The join key hashes this build-side task collected for dynamic filter
    /// `filter` (`plan::dynamic_filter`); None when it has none to give.
    fn dynamic_filter(&self, _filter: usize) -> BoxFuture<'_, Option<Vec<u64>>> {
        async { None }.boxed()
    }

    fn add_sources(&self, sources: Vec<SourceUpdate>) -> BoxFuture<'_, Result<(), RemoteTaskError>> {
        self.send_update(TaskUpdateRequest { sources, ..Default::default() })
    }

    /// The task's failure, with a generic one when it failed without saying why.
    fn failure(&self) -> Option<TaskFailure> {
        if self.state() != TaskState::Failed {
            return None;
        }
        let s = self.status();
        (s.state == TaskState::Failed)
            .then(|| s.failure.unwrap_or_else(|| TaskFailure::new(ErrorCode::RemoteTaskError, "task failed")))
    }
}

/// Makes the remote tasks of a query; `changed` is bumped on every status change.
pub trait RemoteTaskFactory: Send + Sync {
    fn create(
        &self,
        task_id: TaskId,
        worker: WorkerNode,
        partitions: Vec<usize>,
        changed: watch::Sender<u64>,
    ) -> Arc<dyn RemoteTask>;
}

/// Deletes a task on a lost worker without making the query wait: its requests would
/// only time out. Should the worker come back, the delete still reaches it; if not,
/// the worker drops the task itself after `task.client.timeout`.
pub fn delete_in_background(task: Arc<dyn RemoteTask>, abort: bool) {
    tokio::spawn(async move {
        task.delete(abort).await;
    });
}

/// Deletes `tasks`, waiting for those on reachable workers only (`is_lost` says which
/// workers are not).
pub async fn delete_all(tasks: Vec<Arc<dyn RemoteTask>>, abort: bool, is_lost: impl Fn(&WorkerNode) -> bool) {
    let (lost, reachable): (Vec<_>, Vec<_>) = tasks.into_iter().partition(|t| is_lost(t.worker()));
    for t in lost {
        delete_in_background(t, abort);
    }
    futures::future::join_all(reachable.iter().map(|t| t.delete(abort))).await;
}

/// A remote task's last known status, as the coordinator keeps it: final states
/// stay final whatever a late poll says. Shared by every `RemoteTask`, so the rule is
/// written once.
#[derive(Debug)]
pub struct TaskStatusCell(Mutex<TaskStatus>);

impl TaskStatusCell {
    pub fn new(status: TaskStatus) -> Self {
        TaskStatusCell(Mutex::new(status))
    }

    pub fn get(&self) -> TaskStatus {
        self.0.lock().clone()
    }

    pub fn state(&self) -> TaskState {
        self.0.lock().state
    }

    pub fn version(&self) -> u64 {
        self.0.lock().version
    }

    pub fn output_buffer_full(&self) -> bool {
        self.0.lock().output_buffer_overutilized
    }

    /// Takes `status` unless the known one is final or the same; whether it changed.
    pub fn replace(&self, status: TaskStatus) -> bool {
        let mut cur = self.0.lock();
        if cur.state.is_done() || *cur == status {
            return false;
        }
        *cur = status;
        true
    }

    /// Changes the status in place (a new version) unless it is final; whether it
    /// changed. The schedulers' fake tasks change theirs so.
    #[cfg_attr(not(test), allow(dead_code))]
    pub fn modify(&self, f: impl FnOnce(&mut TaskStatus)) -> bool {
        let mut cur = self.0.lock();
        if cur.state.is_done() {
            return false;
        }
        f(&mut cur);
        cur.version += 1;
        true
    }
}

/// The status of a task nobody has heard from yet.
pub fn planned_status(task_id: &TaskId, worker: &WorkerNode) -> TaskStatus {
    TaskStatus {
        task_id: task_id.clone(),
        state: TaskState::Planned,
        version: 0,
        node_id: worker.node_id.clone(),
        failure: None,
        output_buffer_overutilized: false,
        output_buffer_bytes: 0,
        stats: TaskStats::default(),
    }
}
