//! `StageExecution`: one stage of a running query, as both schedulers see it: its
//! fragment, the remote tasks created for it, and its `StageStateMachine`, whose state
//! follows from the tasks' states. Query info and `EXPLAIN ANALYZE` read it.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use futures::future::{BoxFuture, FutureExt};
use parking_lot::Mutex;
use serde::Serialize;
use tokio::sync::watch;

use super::remote_task::{RemoteTask, RemoteTaskFactory};
use super::state_machine::{StageState, StateMachine};
use crate::cluster::node_manager::WorkerNode;
use crate::plan::fragmenter::Fragment;
use crate::protocol::{MemoryStats, TaskFailure, TaskId, TaskState, TaskStatus, UpstreamTask};

/// Where a query's failure happened, for the one-line error the client sees.
#[derive(Debug, Clone, Serialize)]
pub struct TaskFailureReport {
    pub stage: usize,
    pub task: TaskId,
    pub worker: String,
    pub failure: TaskFailure,
}

/// A straggler's copy that finished before the attempt it copied: the copy's output
/// is the partition's, the first attempt was aborted (it may still show FINISHED when
/// it ended before the abort reached it). Query info lists them per stage.
#[derive(Debug, Clone, Serialize)]
pub struct CopyWon {
    pub partition: usize,
    pub winner: TaskId,
    pub winner_node: String,
    pub loser: TaskId,
    pub loser_node: String,
}

impl std::fmt::Display for TaskFailureReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "stage {} task {} on worker {}: {}: {}",
            self.stage, self.task, self.worker, self.failure.code, self.failure.message
        )
    }
}

#[derive(Debug)]
pub struct StageExecution {
    /// What its tasks run; adaptive planning may replace it before the first starts.
    fragment: Mutex<Arc<Fragment>>,
    /// Tasks the stage runs; adaptive planning may lower it before the first starts.
    task_count: AtomicUsize,
    /// What adaptive planning changed, for query info and EXPLAIN ANALYZE.
    adaptive: Mutex<Option<String>>,
    /// Copies of stragglers that won their race (speculation).
    copies_won: Mutex<Vec<CopyWon>>,
    machine: Mutex<StateMachine<StageState>>,
    tasks: Mutex<Vec<Arc<dyn RemoteTask>>>,
    changed: watch::Sender<u64>,
}

#[derive(Debug, Clone, Serialize)]
pub struct StageInfo {
    pub stage: usize,
    pub state: StageState,
    pub partitions: usize,
    pub task_count: usize,
    /// What adaptive planning changed in the stage, if anything.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub adaptive: Option<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub copies_won: Vec<CopyWon>,
    pub tasks: Vec<TaskStatus>,
    pub inputs: Vec<usize>,
    pub consumer: Option<usize>,
    /// Its tasks' memory, added up.
    pub memory: MemoryStats,
}

impl StageExecution {
    pub fn new(fragment: Arc<Fragment>, task_count: usize) -> Self {
        Self::with_changes(fragment, task_count, watch::channel(0).0)
    }

    /// A stage whose state changes and task status changes bump `changed`, shared
    /// with whoever waits on all stages at once.
    pub fn with_changes(fragment: Arc<Fragment>, task_count: usize, changed: watch::Sender<u64>) -> Self {
        StageExecution {
            machine: Mutex::new(StateMachine::new(format!("stage {}", fragment.id), StageState::Planned)),
            fragment: Mutex::new(fragment),
            task_count: AtomicUsize::new(task_count),
            adaptive: Mutex::new(None),
            copies_won: Mutex::new(Vec::new()),
            tasks: Mutex::new(Vec::new()),
            changed,
        }
    }

    pub fn id(&self) -> usize {
        self.fragment.lock().id
    }

    pub fn fragment(&self) -> Arc<Fragment> {
        self.fragment.lock().clone()
    }

    /// Tasks the stage runs (all of them, once it is scheduled).
    pub fn task_count(&self) -> usize {
        self.task_count.load(Ordering::Relaxed)
    }

    /// Adaptive planning gave the stage `tasks` tasks, for the reason `change`
    /// (after any earlier change's).
    pub(crate) fn adapt(&self, tasks: usize, change: String) {
        self.task_count.store(tasks, Ordering::Relaxed);
        let mut adaptive = self.adaptive.lock();
        *adaptive = Some(match adaptive.take() {
            Some(earlier) => format!("{earlier}; {change}"),
            None => change,
        });
    }

    /// A copy of a straggler finished first and is now the partition's attempt.
    pub(crate) fn copy_won(&self, won: CopyWon) {
        self.copies_won.lock().push(won);
    }

    /// Adaptive planning rewrote the stage's fragment (of the same id and output).
    pub(crate) fn replace_fragment(&self, fragment: Arc<Fragment>) {
        *self.fragment.lock() = fragment;
    }

    pub fn state(&self) -> StageState {
        self.machine.lock().state()
    }

    pub fn tasks(&self) -> Vec<Arc<dyn RemoteTask>> {
        self.tasks.lock().clone()
    }

    /// Creates a task of this stage (not yet on its worker) and adds it to the stage,
    /// whose state then follows it. The stage owns its tasks before they exist
    /// remotely, so an abort reaches every task even if creation fails half way.
    pub(crate) fn add_task(
        &self,
        factory: &dyn RemoteTaskFactory,
        task_id: TaskId,
        worker: WorkerNode,
        partitions: Vec<usize>,
    ) -> Arc<dyn RemoteTask> {
        let task = factory.create(task_id, worker, partitions, self.changed.clone());
        self.tasks.lock().push(task.clone());
        task
    }

    pub(crate) fn transition(&self, to: StageState) {
        if self.machine.lock().try_transition(to) {
            self.changed.send_modify(|v| *v += 1);
        }
    }

    /// Bumped by every change of the stage and of its tasks: a scheduler that saw
    /// this version need not look at the tasks again.
    pub fn version(&self) -> u64 {
        *self.changed.borrow()
    }

    /// Derives the stage state from its tasks' states.
    pub fn refresh(&self) -> StageState {
        let tasks = self.tasks();
        if tasks.len() < self.task_count() || self.state() == StageState::Planned {
            return self.state();
        }
        let states: Vec<TaskState> = tasks.iter().map(|t| t.state()).collect();
        let target = if states.contains(&TaskState::Failed) {
            StageState::Failed
        } else if states.iter().all(|s| *s == TaskState::Finished) {
            StageState::Finished
        } else if states.iter().all(|s| matches!(s, TaskState::Flushing | TaskState::Finished)) {
            StageState::Flushing
        } else if states.iter().any(|s| *s != TaskState::Planned) {
            StageState::Running
        } else {
            StageState::Scheduled
        };
        self.transition(target);
        self.state()
    }

    pub fn has_full_output_buffer(&self) -> bool {
        self.tasks().iter().any(|t| t.output_buffer_full())
    }

    pub fn upstream_tasks(&self) -> Vec<UpstreamTask> {
        self.tasks()
            .iter()
            .map(|t| UpstreamTask {
                task_id: t.task_id().clone(),
                url: t.worker().url.clone(),
                partitions: t.partitions().to_vec(),
            })
            .collect()
    }

    pub(crate) fn failed_task(&self) -> Option<(Arc<dyn RemoteTask>, TaskFailure)> {
        let tasks = self.tasks.lock();
        tasks.iter().find_map(|t| t.failure().map(|f| (t.clone(), f)))
    }

    /// Resolves at the first change after this call: it subscribes now, not when
    /// first polled, so callers take it before reading the state they wait on.
    pub(crate) fn wait_changed(&self) -> BoxFuture<'static, ()> {
        let mut rx = self.changed.subscribe();
        rx.mark_unchanged();
        async move {
            let _ = rx.changed().await;
        }
        .boxed()
    }

    pub fn info(&self) -> StageInfo {
        let tasks: Vec<TaskStatus> = self.tasks().iter().map(|t| t.status()).collect();
        let fragment = self.fragment();
        StageInfo {
            stage: fragment.id,
            state: self.state(),
            partitions: fragment.partitions,
            task_count: self.task_count(),
            adaptive: self.adaptive.lock().clone(),
            copies_won: self.copies_won.lock().clone(),
            memory: MemoryStats::of(tasks.iter().map(|t| &t.stats)),
            tasks,
            inputs: fragment.inputs.clone(),
            consumer: fragment.consumer,
        }
    }
}
