//! Test fixtures for the schedulers: `FakeRemoteTask`, a `RemoteTask` whose status the
//! test sets by hand and which records what the scheduler sent it; `FakeCluster`, the
//! factory that makes and keeps them; and small fragmented plans to schedule.

use std::sync::Arc;
use std::time::{Duration, Instant};

use datafusion::arrow::datatypes::{DataType, Field, Schema};
use datafusion::physical_plan::empty::EmptyExec;
use futures::future::{BoxFuture, FutureExt};
use parking_lot::Mutex;
use tokio::sync::watch;

use super::remote_task::{planned_status, RemoteTask, RemoteTaskError, RemoteTaskFactory, TaskStatusCell};
use crate::cluster::node_manager::WorkerNode;
use crate::error_code::ErrorCode;
use crate::exchange::remote_source::ExchangeMode;
use crate::plan::fragmenter::{Fragment, FragmentOutput, FragmentedPlan};
use crate::protocol::{TaskFailure, TaskId, TaskState, TaskStatus, TaskUpdateRequest};

#[derive(Debug)]
pub struct FakeRemoteTask {
    task_id: TaskId,
    worker: WorkerNode,
    partitions: Vec<usize>,
    status: TaskStatusCell,
    changed: watch::Sender<u64>,
    /// Every create or update the scheduler sent, in order.
    pub requests: Mutex<Vec<TaskUpdateRequest>>,
    /// `Some(abort)` once deleted.
    pub deleted: Mutex<Option<bool>>,
}

impl FakeRemoteTask {
    fn update(&self, f: impl FnOnce(&mut TaskStatus)) {
        if self.status.modify(f) {
            self.changed.send_modify(|v| *v += 1);
        }
    }

    /// What the worker would report next.
    pub fn set_state(&self, state: TaskState) {
        self.update(|s| s.state = state);
    }

    pub fn finish(&self) {
        self.set_state(TaskState::Finished);
    }

    /// Finishes having written `bytes` to each consumer partition.
    pub fn finish_with_partition_bytes(&self, bytes: Vec<u64>) {
        self.update(|s| {
            s.state = TaskState::Finished;
            s.stats.output_partition_bytes = bytes;
        });
    }

    /// Fails with `code`; `upstream` names an output it could not read.
    pub fn fail(&self, code: ErrorCode, upstream: Option<&FakeRemoteTask>) {
        self.update(|s| {
            s.state = TaskState::Failed;
            let message = format!("failure of {}", s.task_id);
            s.failure = Some(match upstream {
                Some(u) => TaskFailure::fetch(code, message, u.task_id.clone(), u.worker.url.clone()),
                None => TaskFailure::new(code, message),
            });
        });
    }

    pub fn created(&self) -> bool {
        self.requests.lock().first().is_some_and(|r| r.fragment.is_some())
    }

    /// Upstream task ids of `stage` this task was told about, in all its requests.
    pub fn sources_of(&self, stage: usize) -> Vec<String> {
        let requests = self.requests.lock();
        let mut ids: Vec<String> = requests
            .iter()
            .flat_map(|r| r.sources.iter())
            .filter(|s| s.stage == stage)
            .flat_map(|s| s.tasks.iter().map(|t| t.task_id.to_string()))
            .collect();
        ids.sort();
        ids
    }
}

impl RemoteTask for FakeRemoteTask {
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

    fn send_update(&self, req: TaskUpdateRequest) -> BoxFuture<'_, Result<(), RemoteTaskError>> {
        self.requests.lock().push(req);
        futures::future::ready(Ok(())).boxed()
    }

    fn mark_creating(&self) {}

    fn poll_status(self: Arc<Self>, mut stop: watch::Receiver<bool>) -> BoxFuture<'static, ()> {
        async move {
            let _ = stop.wait_for(|s| *s).await;
        }
        .boxed()
    }

    fn mark_failed(&self, code: ErrorCode, message: String) {
        self.update(|s| {
            s.state = TaskState::Failed;
            s.failure = Some(TaskFailure::new(code, message));
        });
    }

    fn delete(&self, abort: bool) -> BoxFuture<'_, Option<TaskStatus>> {
        *self.deleted.lock() = Some(abort);
        // As a worker ends a task: one that produced all its output is FINISHED by
        // a delete after success, whether or not its pages were read.
        let state = match (abort, self.status().state) {
            (true, _) => TaskState::Aborted,
            (false, TaskState::Flushing) => TaskState::Finished,
            (false, _) => TaskState::Canceled,
        };
        self.set_state(state);
        futures::future::ready(Some(self.status())).boxed()
    }
}

/// The factory: keeps every task it made, in creation order.
#[derive(Default)]
pub struct FakeCluster {
    tasks: Mutex<Vec<Arc<FakeRemoteTask>>>,
}

impl RemoteTaskFactory for FakeCluster {
    fn create(
        &self,
        task_id: TaskId,
        worker: WorkerNode,
        partitions: Vec<usize>,
        changed: watch::Sender<u64>,
    ) -> Arc<dyn RemoteTask> {
        let task = Arc::new(FakeRemoteTask {
            status: TaskStatusCell::new(planned_status(&task_id, &worker)),
            task_id,
            worker,
            partitions,
            changed,
            requests: Mutex::new(Vec::new()),
            deleted: Mutex::new(None),
        });
        self.tasks.lock().push(task.clone());
        task
    }
}

impl FakeCluster {
    pub fn tasks(&self) -> Vec<Arc<FakeRemoteTask>> {
        self.tasks.lock().clone()
    }

    /// Tasks of a stage, every attempt, in creation order.
    pub fn stage_tasks(&self, stage: usize) -> Vec<Arc<FakeRemoteTask>> {
        self.tasks().into_iter().filter(|t| t.task_id.stage == stage).collect()
    }

    /// The task with this stage, partition (task index) and attempt, once made.
    pub fn task(&self, stage: usize, task: usize, attempt: usize) -> Option<Arc<FakeRemoteTask>> {
        self.tasks()
            .into_iter()
            .find(|t| (t.task_id.stage, t.task_id.task, t.task_id.attempt) == (stage, task, attempt))
    }

    /// The newest attempt of a stage's task (partition, in fault-tolerant mode).
    pub fn latest(&self, stage: usize, task: usize) -> Option<Arc<FakeRemoteTask>> {
        self.stage_tasks(stage).into_iter().filter(|t| t.task_id.task == task).max_by_key(|t| t.task_id.attempt)
    }

    /// Waits (a bounded time) for that task to be created on its worker.
    pub async fn created(&self, stage: usize, task: usize, attempt: usize) -> Arc<FakeRemoteTask> {
        let what = format!("task {stage}.{task}.{attempt} to be created");
        eventually(&what, || self.task(stage, task, attempt).is_some_and(|t| t.created())).await;
        self.task(stage, task, attempt).expect("created")
    }
}

/// Waits until `done` holds, polling; fails the test after ten seconds.
pub async fn eventually(what: &str, done: impl Fn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

pub fn workers(n: usize) -> Vec<WorkerNode> {
    (1..=n).map(|i| WorkerNode { node_id: format!("w{i}"), url: format!("http://127.0.0.1:{}", 9000 + i) }).collect()
}

/// A two-stage query as the fragmenter would cut a grouped aggregation: stage 1 scans
/// with `partitions` partitions and repartitions into stage 2's `partitions`, which
/// sends its output to the root (stage 0) on the coordinator.
pub fn two_stage_plan(partitions: usize) -> Arc<FragmentedPlan> {
    let schema = Arc::new(Schema::new(vec![Field::new("x", DataType::Int64, true)]));
    let plan = |n: usize| Arc::new(EmptyExec::new(schema.clone()).with_partitions(n));
    let fragments = vec![
        Fragment {
            id: 0,
            plan: plan(1),
            output: FragmentOutput::Root,
            partitions: 1,
            consumer: None,
            inputs: vec![2],
            has_scan: false,
        },
        Fragment {
            id: 1,
            plan: plan(partitions),
            output: FragmentOutput::Repartition { partitions },
            partitions,
            consumer: Some(2),
            inputs: vec![],
            has_scan: true,
        },
        Fragment {
            id: 2,
            plan: plan(partitions),
            output: FragmentOutput::Broadcast,
            partitions,
            consumer: Some(0),
            inputs: vec![1],
            has_scan: false,
        },
    ];
    let mut graph = petgraph::graph::DiGraph::new();
    let nodes: Vec<_> = (0..3).map(|i| graph.add_node(i)).collect();
    graph.add_edge(nodes[1], nodes[2], ExchangeMode::Repartition);
    graph.add_edge(nodes[2], nodes[0], ExchangeMode::Broadcast);
    Arc::new(FragmentedPlan { fragments, graph })
}
