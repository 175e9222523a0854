//! `FaultTolerantQueryScheduler`: runs the stages of one query with retry policy
//! `task`. Unlike the pipelined scheduler, a stage starts only when its inputs are
//! complete, and every task writes its output to its worker's spool, so any task can
//! be run again without re-running the others. The `ExecutionGraph` decides what runs
//! and what is recomputed; this module is the thin I/O around it:
//!
//! - a free slot on a live worker gets `pop_next_task`, launched as a spooled
//!   `RemoteTask` (one task per stage partition, attempt = the graph's attempt);
//! - a finished task is reported `Successful` with its task id as the output path; a
//!   failed one `Failed`, or `FetchFailed` when it could not read an upstream output;
//! - a worker that stops sending heartbeats is reported to
//!   `reset_stages_on_lost_executor`;
//! - attempts the graph no longer counts (rolled back, superseded) are aborted;
//! - the final stage is the coordinator's root fragment, run through `RootStage`
//!   once every other stage has succeeded.
//!
//! Built and driven by `QueryExecution` when the session says `retry_policy=task`.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use parking_lot::Mutex;
use tokio::sync::watch;
use tokio::task::JoinSet;
use tokio::time::Instant;

use super::adaptive::AdaptivePolicy;
use super::execution_graph::{
    ExecutionGraph, ExecutionStage, GraphEvent, PartitionLocation, StageSpec, TaskAttemptStatus, TaskDescription,
    TaskStatusUpdate, TaskUpdateState,
};
use super::pipelined::{SchedulerError, SchedulerSettings};
use super::remote_task::{delete_all, RemoteTask, RemoteTaskError};
use super::speculation::{PartitionKey, SpeculationPolicy, Stragglers};
use super::stage_execution::{StageExecution, TaskFailureReport};
use super::state_machine::{StageState, StateKind};
use crate::cluster::node_manager::WorkerNode;
use crate::error_code::{ErrorCode, QueryError};
use crate::plan::fragmenter::FragmentedPlan;
use crate::protocol::{Base64Bytes, SourceUpdate, TaskFailure, TaskId, TaskState, TaskUpdateRequest, UpstreamTask};

#[path = "fault_tolerant_adaptive.rs"]
mod adaptive;
#[path = "fault_tolerant_copies.rs"]
mod copies;

/// The executor id the graph knows the coordinator's root stage by.
pub const COORDINATOR: &str = "coordinator";

/// How stale the graph's text in query info may be while the query runs.
const DISPLAY_INTERVAL: Duration = Duration::from_millis(250);

/// The execution graph as text, for query info: rendered by the scheduler when
/// asked (`FaultTolerantQueryScheduler::refresh_display`).
#[derive(Debug, Default)]
pub struct GraphText {
    text: Mutex<String>,
    wanted: AtomicBool,
}

impl GraphText {
    /// The last render, asking for a fresh one at the scheduler's next round.
    pub fn read(&self) -> String {
        self.wanted.store(true, Ordering::Relaxed);
        self.text.lock().clone()
    }
}

/// The least time between two scheduling rounds (see `run_rounds`).
const MIN_ROUND_GAP: Duration = Duration::from_millis(10);

/// How long a superseded attempt may still report what it could not read.
const SUPERSEDED_GRACE: Duration = Duration::from_secs(2);

/// Limits of fault-tolerant execution, from the session.
#[derive(Debug, Clone, Copy)]
pub struct RetryLimits {
    /// A partition whose task failed this many times fails the query.
    pub max_task_failures: usize,
    /// A stage restarted this many times by fetch failures fails the query.
    pub max_stage_failures: usize,
    /// Tasks run at once on one worker.
    pub slots_per_worker: usize,
    /// Copies of stragglers (`task_speculation_enabled`), or none.
    pub speculation: Option<SpeculationPolicy>,
    /// Coalescing of small partitions (`adaptive_partitioning_enabled`), or none.
    pub adaptive: Option<AdaptivePolicy>,
}

impl RetryLimits {
    /// `task_retry_attempts` retries of a task means its next failure is fatal.
    pub fn from_properties(props: &crate::config::SessionProperties, slots_per_worker: usize) -> Self {
        RetryLimits {
            max_task_failures: props.task_retry_attempts.saturating_add(1),
            max_stage_failures: props.stage_retry_attempts,
            slots_per_worker: slots_per_worker.max(1),
            speculation: props
                .task_speculation_enabled
                .then(|| SpeculationPolicy::new(props.task_speculation_multiplier, props.task_speculation_quantile)),
            adaptive: props.adaptive_partitioning_enabled.then_some(AdaptivePolicy {
                target_bytes: props.adaptive_partition_target_size,
                broadcast_bytes: props.adaptive_join_max_broadcast_size,
            }),
        }
    }
}

/// Why the root stage stopped.
#[derive(Debug)]
pub enum RootFailure {
    /// An upstream output could not be read, before any row reached the client: the
    /// producer can be re-run and the root tried again.
    Fetch { upstream: TaskId, url: String, message: String },
    /// Anything else fails the query with this error.
    Fatal(QueryError),
}

/// How far the current run of the root stage has got, which decides what losing one
/// of its inputs does to it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RootProgress {
    /// Reading its inputs, nothing delivered yet: it can start over.
    Reading,
    /// Every input read to the end: losing one no longer matters.
    InputsRead,
    /// Rows reached the client while inputs are still being read: it cannot start
    /// over without delivering rows twice.
    Streaming,
}

/// The coordinator's part of the final stage: runs the root fragment over the
/// spooled outputs of its inputs, delivering rows to the client. One run at a time.
pub trait RootStage: Send + Sync {
    fn run(&self, sources: Vec<SourceUpdate>) -> BoxFuture<'static, Result<(), RootFailure>>;
    fn progress(&self) -> RootProgress;
}

pub struct FaultTolerantQueryScheduler {
    settings: SchedulerSettings,
    limits: RetryLimits,
    graph: ExecutionGraph,
    stages: BTreeMap<usize, Arc<StageExecution>>,
    fragments: BTreeMap<usize, Base64Bytes>,
    /// The attempt of each (stage, partition) the graph has running on a worker.
    running: BTreeMap<(usize, usize), Arc<dyn RemoteTask>>,
    /// Attempts the graph dropped, kept alive for `SUPERSEDED_GRACE` before they are
    /// aborted: readers rolled back by one fetch failure are usually about to report
    /// the other unreadable outputs, which saves a rollback per broken worker.
    superseded: Vec<(Arc<dyn RemoteTask>, Instant)>,
    /// Workers that ran something for this query, by node id.
    workers: BTreeMap<String, WorkerNode>,
    /// Workers already reported lost (and not used since).
    lost: BTreeSet<String>,
    /// Every task's status change bumps it; the loop waits on it.
    changed: watch::Sender<u64>,
    stop_pollers: watch::Sender<bool>,
    /// Each attempt's creation and status polling, owned here: it ends when told
    /// (`stop_pollers`), and is aborted should the scheduler be dropped untold.
    attempts: JoinSet<()>,
    /// The graph as text, for query info (`refresh_display`).
    display: Arc<GraphText>,
    displayed: Option<Instant>,
    last_failure: Option<TaskFailureReport>,
    /// Attempt times, for speculation (`None` when it is off).
    stragglers: Option<Stragglers>,
    /// Copies of stragglers running beside them, with the attempt they copy
    /// (`fault_tolerant_copies.rs`).
    copies: BTreeMap<PartitionKey, (Arc<dyn RemoteTask>, usize)>,
    /// When the next straggler becomes due, to wake for it.
    next_copy_due: Option<Instant>,
    /// Workers whose attempt lost to a copy: they get no new tasks of this query
    /// while other workers are live, or every stage would wait on them again.
    slow_workers: BTreeSet<String>,
    /// Stages adaptive planning has looked at (once each, when first resolved).
    adapted: BTreeSet<usize>,
    /// The stages it changed, with their tasks.
    adapted_stages: BTreeMap<usize, adaptive::AdaptedStage>,
    /// Joins that may yet broadcast their build side (`fault_tolerant_adaptive.rs`).
    broadcast_candidates: Vec<adaptive::BroadcastCandidate>,
    /// Probe stages taken into their join stage, with that stage.
    merged: BTreeMap<usize, usize>,
}

impl FaultTolerantQueryScheduler {
    pub fn new(
        settings: SchedulerSettings,
        limits: RetryLimits,
        plan: Arc<FragmentedPlan>,
    ) -> Result<Self, SchedulerError> {
        let (changed, _) = watch::channel(0);
        let mut specs = Vec::new();
        let mut stages = BTreeMap::new();
        for id in plan.worker_stages() {
            let fragment = Arc::new(plan.fragments[id].clone());
            let partitions = fragment.partitions.max(1);
            specs.push(StageSpec {
                stage_id: id,
                partitions,
                inputs: fragment.inputs.clone(),
                output_links: vec![fragment.consumer.unwrap_or(0)],
            });
            stages.insert(id, Arc::new(StageExecution::with_changes(fragment, partitions, changed.clone())));
        }
        specs.push(StageSpec { stage_id: 0, partitions: 1, inputs: plan.root().inputs.clone(), output_links: vec![] });
        let graph = ExecutionGraph::new(&settings.query_id, specs).map_err(|e| SchedulerError::Graph(e.to_string()))?;
        let mut fragments = BTreeMap::new();
        for &id in stages.keys() {
            let bytes = settings
                .codec
                .encode_plan(plan.fragments[id].plan.clone())
                .map_err(|e| SchedulerError::Graph(format!("stage {id} does not serialize: {e}")))?;
            fragments.insert(id, Base64Bytes(bytes));
        }
        let workers = settings.workers.iter().map(|w| (w.node_id.clone(), w.clone())).collect();
        let (stop_pollers, _) = watch::channel(false);
        let display = Arc::new(GraphText { text: Mutex::new(graph.to_string()), wanted: AtomicBool::new(false) });
        let partitions = stages.iter().map(|(&id, s)| (id, s.task_count())).collect();
        let stragglers = limits.speculation.map(|p| Stragglers::new(p, partitions));
        let broadcast_candidates = adaptive::broadcast_candidates(&limits, &stages);
        Ok(FaultTolerantQueryScheduler {
            settings,
            limits,
            graph,
            stages,
            fragments,
            running: BTreeMap::new(),
            superseded: Vec::new(),
            workers,
            lost: BTreeSet::new(),
            changed,
            stop_pollers,
            attempts: JoinSet::new(),
            display,
            displayed: None,
            last_failure: None,
            stragglers,
            copies: BTreeMap::new(),
            next_copy_due: None,
            slow_workers: BTreeSet::new(),
            adapted: BTreeSet::new(),
            adapted_stages: BTreeMap::new(),
            broadcast_candidates,
            merged: BTreeMap::new(),
        })
    }

    pub fn stages(&self) -> Vec<Arc<StageExecution>> {
        self.stages.values().cloned().collect()
    }

    /// The graph rendered as text, kept current while the query runs.
    pub fn display(&self) -> Arc<GraphText> {
        self.display.clone()
    }

    /// Runs every stage, the root last, until the root has delivered all rows or the
    /// graph gives up. Cancel by dropping the future.
    pub async fn run(&mut self, root: Arc<dyn RootStage>) -> Result<(), SchedulerError> {
        let outcome = self.run_rounds(root).await;
        self.refresh_display(true);
        outcome
    }

    /// Renders the graph for query info: while the query runs, only when query info
    /// asked for it since the last render and at most every `DISPLAY_INTERVAL`; and
    /// at its end. A render is linear in the graph's tasks: one per round made a
    /// query quadratic in its tasks, and one per interval made a long query so
    /// (`sim::scale` showed both).
    fn refresh_display(&mut self, end: bool) {
        let now = Instant::now();
        let due = self.displayed.is_none_or(|at| now.duration_since(at) >= DISPLAY_INTERVAL);
        if end || (due && self.display.wanted.swap(false, Ordering::Relaxed)) {
            *self.display.text.lock() = self.graph.to_string();
            self.displayed = Some(now);
        }
    }

    async fn run_rounds(&mut self, root: Arc<dyn RootStage>) -> Result<(), SchedulerError> {
        let mut wake = self.changed.subscribe();
        let mut root_run: Option<(usize, BoxFuture<'static, Result<(), RootFailure>>)> = None;
        let mut last_round: Option<Instant> = None;
        loop {
            // Changes that come faster than `MIN_ROUND_GAP` wait for one round
            // together: a round costs the cluster's size (workers, slots, running
            // attempts), and one per status change made the scheduler the busiest
            // part of a 1,000-worker query (`sim::scale`).
            if let Some(at) = last_round {
                tokio::time::sleep_until(at + MIN_ROUND_GAP).await;
            }
            last_round = Some(Instant::now());
            wake.borrow_and_update();
            self.check_lost_workers()?;
            self.settle_copies();
            self.apply_task_updates()?;
            self.settle_copies();
            self.abort_superseded_attempts();
            self.broadcast_small_build_sides();
            self.adapt_resolved_stages();
            if let Some((attempt, _)) = &root_run {
                if !self.graph.running_tasks().iter().any(|t| t.stage_id == 0 && t.task_id == *attempt) {
                    // Rolled back: an input is being recomputed.
                    match root.progress() {
                        RootProgress::Reading => root_run = None,
                        // Its rows are all in hand; it finishes, and so does the query.
                        RootProgress::InputsRead => {}
                        RootProgress::Streaming => {
                            return Err(SchedulerError::Root(QueryError::new(
                                ErrorCode::RemoteHostGone,
                                "an input of the root stage was lost after rows had reached the client; the query cannot be recomputed",
                            )))
                        }
                    }
                }
            }
            if self.graph.is_successful() {
                return Ok(());
            }
            if root_run.is_none() && self.root_available() {
                if let Some(desc) =
                    self.graph.pop_next_task(COORDINATOR).map_err(|e| SchedulerError::Graph(e.to_string()))?
                {
                    if desc.stage_id != 0 {
                        return Err(SchedulerError::Graph(format!(
                            "stage {} became runnable on the coordinator",
                            desc.stage_id
                        )));
                    }
                    let sources = self.sources_for(&desc);
                    root_run = Some((desc.task_attempt, root.run(sources)));
                }
            }
            self.launch_tasks()?;
            self.launch_copies();
            self.refresh_stage_states();
            self.refresh_display(false);
            let root_done = async {
                match root_run.as_mut() {
                    Some((_, f)) => f.await,
                    None => futures::future::pending().await,
                }
            };
            // Biased, as every select here: the simulator replays a seed only if the
            // order things are looked at in is fixed.
            let copy_due = async {
                match self.next_copy_due {
                    Some(at) => tokio::time::sleep_until(at).await,
                    None => futures::future::pending().await,
                }
            };
            let outcome = tokio::select! {
                biased;
                r = root_done => Some(r),
                _ = wake.changed() => None,
                _ = copy_due => None,
                _ = tokio::time::sleep(self.settings.tick) => None,
            };
            if let Some(result) = outcome {
                let (attempt, _) = root_run.take().expect("the root was running");
                if self.apply_root_result(attempt, result)? {
                    return Ok(());
                }
            }
        }
    }

    fn root_available(&self) -> bool {
        match self.graph.stage(0).map(|s| &s.state) {
            Some(ExecutionStage::Resolved) => true,
            Some(ExecutionStage::Running { tasks }) => {
                tasks[0].as_ref().is_none_or(|t| matches!(t.status, TaskAttemptStatus::Failed { .. }))
            }
            _ => false,
        }
    }

    /// A worker that missed its heartbeats loses everything it ran for this query.
    fn check_lost_workers(&mut self) -> Result<(), SchedulerError> {
        let Some(nodes) = self.settings.nodes.clone() else { return Ok(()) };
        let gone: Vec<String> =
            self.workers.keys().filter(|id| !nodes.is_alive(id) && !self.lost.contains(*id)).cloned().collect();
        for node in gone {
            tracing::warn!(query = %self.settings.query_id, worker = %node, "worker lost, recomputing its work");
            self.lost.insert(node.clone());
            for task in self.attempt_tasks().filter(|t| t.worker().node_id == node) {
                task.mark_failed(ErrorCode::RemoteHostGone, nodes.lost_message(task.worker()));
            }
            self.graph.reset_stages_on_lost_executor(&node).map_err(|e| SchedulerError::Graph(e.to_string()))?;
        }
        Ok(())
    }

    /// Reports every attempt that reached a final state to the graph.
    fn apply_task_updates(&mut self) -> Result<(), SchedulerError> {
        let mut by_executor: BTreeMap<String, Vec<TaskStatusUpdate>> = BTreeMap::new();
        let mut done = Vec::new();
        let mut unreadable = Vec::new();
        for (&(stage, partition), task) in &self.running {
            let state = match task.state() {
                TaskState::Finished => TaskUpdateState::Successful { path: task.task_id().to_string() },
                TaskState::Failed => {
                    let failure = task.failure().expect("a failed task has a failure");
                    let report = TaskFailureReport {
                        stage,
                        task: task.task_id().clone(),
                        worker: task.worker().url.clone(),
                        failure: failure.clone(),
                    };
                    let update = self.classify(stage, &failure);
                    if let (TaskUpdateState::FetchFailed { executor_id, .. }, Some((upstream, _))) =
                        (&update, failure.upstream())
                    {
                        unreadable.push((upstream.clone(), executor_id.clone()));
                    }
                    if !matches!(update, TaskUpdateState::FetchFailed { .. }) || self.last_failure.is_none() {
                        self.last_failure = Some(report);
                    }
                    update
                }
                TaskState::Canceled | TaskState::Aborted => TaskUpdateState::Failed {
                    reason: format!("task {} was aborted on its worker", task.task_id()),
                    retryable: true,
                },
                _ => continue,
            };
            done.push(((stage, partition), matches!(state, TaskUpdateState::Successful { .. })));
            let update = TaskStatusUpdate { stage_id: stage, partition, task_attempt: task.task_id().attempt, state };
            by_executor.entry(task.worker().node_id.clone()).or_default().push(update);
        }
        let now = Instant::now();
        for (key, finished) in done {
            self.running.remove(&key);
            if let Some(s) = &mut self.stragglers {
                match finished {
                    true => s.finished(key, now),
                    false => s.stopped(key),
                }
            }
        }
        for (executor, updates) in by_executor {
            let events = self
                .graph
                .update_task_status(&executor, updates, self.limits.max_task_failures, self.limits.max_stage_failures)
                .map_err(|e| SchedulerError::Graph(e.to_string()))?;
            self.handle_events(events)?;
        }
        self.report_unreadable_outputs(unreadable);
        Ok(())
    }

    /// Fetch failures the graph did not count (their reader was superseded, perhaps by
    /// another fetch failure in the same batch) still say which outputs cannot be
    /// read; hand them to the graph as such. For a counted one this changes nothing.
    fn report_unreadable_outputs(&mut self, mut reports: Vec<(TaskId, String)>) {
        for (task, _) in &self.superseded {
            let Some(failure) = task.failure() else { continue };
            let Some((upstream, url)) = failure.upstream() else { continue };
            let executor = self.executor_of(upstream, url);
            reports.push((upstream.clone(), executor));
        }
        for (upstream, executor) in reports {
            if let Err(e) =
                self.graph.report_unreadable_output(upstream.stage, upstream.task, &upstream.to_string(), &executor)
            {
                tracing::debug!(query = %self.settings.query_id, "ignored a report about {upstream}: {e}");
            }
        }
    }

    /// A failure naming an upstream task is a fetch failure: that output is what has
    /// to be recomputed, not this task. Errors of the query itself are not retried.
    fn classify(&self, stage: usize, failure: &TaskFailure) -> TaskUpdateState {
        if let Some((upstream, url)) = failure.upstream() {
            let is_input = self.graph.stage(stage).is_some_and(|s| s.inputs.contains_key(&upstream.stage));
            if is_input {
                return TaskUpdateState::FetchFailed {
                    map_stage_id: upstream.stage,
                    map_partition: upstream.task,
                    executor_id: self.executor_of(upstream, url),
                    reason: format!("{}: {}", failure.code, failure.message),
                };
            }
        }
        let retryable = failure.code.is_retryable();
        TaskUpdateState::Failed { reason: format!("{}: {}", failure.code, failure.message), retryable }
    }

    /// The worker an upstream task id ran on (its node id, as the graph knows it).
    fn executor_of(&self, upstream: &TaskId, url: &str) -> String {
        let by_url = self.workers.values().find(|w| w.url == url);
        match by_url {
            Some(w) => w.node_id.clone(),
            None => self
                .stages
                .get(&upstream.stage)
                .and_then(|s| s.tasks().into_iter().find(|t| t.task_id() == upstream))
                .map(|t| t.worker().node_id.clone())
                .unwrap_or_default(),
        }
    }

    fn handle_events(&mut self, events: Vec<GraphEvent>) -> Result<(), SchedulerError> {
        for event in events {
            if let GraphEvent::JobFailed(message) = event {
                let mut report = self.last_failure.clone().unwrap_or(TaskFailureReport {
                    stage: 0,
                    task: TaskId::new(&self.settings.query_id, 0, 0, 0),
                    worker: COORDINATOR.into(),
                    failure: TaskFailure::new(ErrorCode::RemoteTaskError, String::new()),
                });
                report.failure.message = message;
                return Err(SchedulerError::TaskFailed(Box::new(report)));
            }
        }
        Ok(())
    }

    /// Reports the end of a root run; true when the query is done. A root that got
    /// all its rows is done even if the graph rolled it back meanwhile: the rows it
    /// delivered are the answer, and running it again would deliver them twice.
    fn apply_root_result(&mut self, attempt: usize, result: Result<(), RootFailure>) -> Result<bool, SchedulerError> {
        let state = match result {
            Ok(()) => {
                let update = TaskStatusUpdate {
                    stage_id: 0,
                    partition: 0,
                    task_attempt: attempt,
                    state: TaskUpdateState::Successful { path: format!("{}.0.0.{attempt}", self.settings.query_id) },
                };
                let limits = self.limits;
                let _ = self.graph.update_task_status(
                    COORDINATOR,
                    vec![update],
                    limits.max_task_failures,
                    limits.max_stage_failures,
                );
                return Ok(true);
            }
            Err(RootFailure::Fatal(e)) => return Err(SchedulerError::Root(e)),
            Err(RootFailure::Fetch { upstream, url, message }) => {
                let failure = TaskFailure::fetch(ErrorCode::RemoteTaskUnreachable, message, upstream, url);
                if self.last_failure.is_none() {
                    let task = TaskId::new(&self.settings.query_id, 0, 0, attempt);
                    self.last_failure = Some(TaskFailureReport {
                        stage: 0,
                        task,
                        worker: COORDINATOR.into(),
                        failure: failure.clone(),
                    });
                }
                self.classify(0, &failure)
            }
        };
        let update = TaskStatusUpdate { stage_id: 0, partition: 0, task_attempt: attempt, state };
        let events = self
            .graph
            .update_task_status(
                COORDINATOR,
                vec![update],
                self.limits.max_task_failures,
                self.limits.max_stage_failures,
            )
            .map_err(|e| SchedulerError::Graph(e.to_string()))?;
        self.handle_events(events)?;
        Ok(false)
    }

    /// Moves attempts the graph has dropped (their stage was rolled back or their
    /// worker lost) aside, and aborts those that ended or had their grace.
    fn abort_superseded_attempts(&mut self) {
        let current: BTreeSet<(usize, usize, usize)> =
            self.graph.running_tasks().into_iter().map(|t| (t.stage_id, t.partition, t.task_id)).collect();
        let now = Instant::now();
        let superseded = &mut self.superseded;
        self.running.retain(|&(stage, partition), task| {
            let keep = current.contains(&(stage, partition, task.task_id().attempt));
            if !keep {
                superseded.push((task.clone(), now));
            }
            keep
        });
        self.superseded.retain(|(task, since)| {
            let expired = task.state().is_done() || now.duration_since(*since) >= SUPERSEDED_GRACE;
            if expired {
                let task = task.clone();
                tokio::spawn(async move { task.delete(true).await });
            }
            !expired
        });
    }

    /// Every running attempt, copies of stragglers too.
    fn attempt_tasks(&self) -> impl Iterator<Item = &Arc<dyn RemoteTask>> {
        self.running.values().chain(self.copies.values().map(|(t, _)| t))
    }

    fn live_workers(&self) -> Vec<WorkerNode> {
        match &self.settings.nodes {
            Some(nodes) => nodes.live_workers(),
            None => self.settings.workers.clone(),
        }
    }

    /// Free slots of each of `live`, attempts and copies counted once, not once per
    /// worker: at a thousand workers that was a million comparisons a round.
    fn free_slots(&self, live: &[WorkerNode]) -> Vec<usize> {
        let mut running_on: BTreeMap<&str, usize> = BTreeMap::new();
        for t in self.attempt_tasks() {
            *running_on.entry(t.worker().node_id.as_str()).or_default() += 1;
        }
        let slots = self.limits.slots_per_worker;
        live.iter().map(|w| slots.saturating_sub(running_on.get(w.node_id.as_str()).copied().unwrap_or(0))).collect()
    }

    /// Fills every free slot of every live worker, spreading tasks round robin.
    fn launch_tasks(&mut self) -> Result<(), SchedulerError> {
        let live = self.live_workers();
        if live.is_empty() {
            if self.graph.available_tasks() > 0 && self.running.is_empty() {
                let stage = self.graph.running_stages().first().copied().unwrap_or(0);
                return Err(SchedulerError::NoWorkers(stage));
            }
            return Ok(());
        }
        let mut free = self.free_slots(&live);
        if live.iter().any(|w| !self.slow_workers.contains(&w.node_id)) {
            for (f, w) in free.iter_mut().zip(&live) {
                if self.slow_workers.contains(&w.node_id) {
                    *f = 0;
                }
            }
        }
        let start = self
            .settings
            .node_scheduler
            .place(&live, 1)
            .first()
            .and_then(|w| live.iter().position(|l| l == w))
            .unwrap_or(0);
        loop {
            let mut launched = false;
            for i in 0..live.len() {
                let w = (start + i) % live.len();
                if free[w] == 0 {
                    continue;
                }
                let Some(desc) =
                    self.graph.pop_next_task(&live[w].node_id).map_err(|e| SchedulerError::Graph(e.to_string()))?
                else {
                    return Ok(());
                };
                if desc.stage_id == 0 {
                    return Err(SchedulerError::Graph("the root stage was handed to a worker".into()));
                }
                self.launch(desc, live[w].clone());
                free[w] -= 1;
                launched = true;
            }
            if !launched {
                return Ok(());
            }
        }
    }

    fn launch(&mut self, desc: TaskDescription, worker: WorkerNode) {
        let key = (desc.stage_id, desc.partition);
        let task = self.start_attempt(desc, worker);
        if let Some(s) = &mut self.stragglers {
            s.started(key, Instant::now());
        }
        self.running.insert(key, task);
    }

    /// Creates an attempt on its worker and follows its status, in the background.
    fn start_attempt(&mut self, desc: TaskDescription, worker: WorkerNode) -> Arc<dyn RemoteTask> {
        let (stage_id, partition) = (desc.stage_id, desc.partition);
        self.lost.remove(&worker.node_id);
        self.workers.insert(worker.node_id.clone(), worker.clone());
        let stage = self.stages[&stage_id].clone();
        let task_id = TaskId::new(&self.settings.query_id, stage_id, partition, desc.task_attempt);
        let partitions = self.fragment_partitions(stage_id, partition);
        let task = stage.add_task(self.settings.remote_tasks.as_ref(), task_id, worker, partitions.clone());
        let request = TaskUpdateRequest {
            fragment: Some(self.fragments[&stage_id].clone()),
            partitions,
            task_index: partition,
            output: Some(self.output_spec(&stage.fragment())),
            sources: self.sources_for(&desc),
            session: self.settings.session.clone(),
            spool: true,
        };
        task.mark_creating();
        let stop = self.stop_pollers.subscribe();
        // Finished attempts leave the set as new ones come.
        while self.attempts.try_join_next().is_some() {}
        let attempt = task.clone();
        self.attempts.spawn(async move {
            let task = attempt;
            match task.send_update(request).await {
                Ok(()) => task.poll_status(stop).await,
                Err(e) => {
                    let message = match &e {
                        RemoteTaskError::Rejected { code, message, .. } => format!("{code}: {message}"),
                        other => other.to_string(),
                    };
                    task.mark_failed(e.error_code(), message)
                }
            }
        });
        task
    }

    /// Upstream locations of a task: every partition's successful attempt.
    fn sources_for(&self, desc: &TaskDescription) -> Vec<SourceUpdate> {
        // In stage order: the locations are keyed by stage in an ordered map.
        let mut updates: Vec<SourceUpdate> = desc
            .input_locations
            .iter()
            .map(|(&stage, locations)| SourceUpdate {
                stage,
                tasks: locations.iter().filter_map(|l| self.upstream_task(l)).collect(),
                no_more: true,
            })
            .collect();
        self.restrict_to_slice(desc, &mut updates);
        if super::planted::is(super::planted::Bug::DoubleRead) {
            // Names one upstream output twice: its reader would count its rows twice.
            if let Some(first) = updates.iter_mut().find_map(|u| u.tasks.first().cloned().map(|t| (u, t))) {
                first.0.tasks.push(first.1);
            }
        }
        updates
    }

    fn upstream_task(&self, l: &PartitionLocation) -> Option<UpstreamTask> {
        let task_id: TaskId = l.path.parse().ok()?;
        let url = self.workers.get(&l.executor_id)?.url.clone();
        Some(UpstreamTask { task_id, url, partitions: self.fragment_partitions(l.stage_id, l.partition) })
    }

    /// Moves the query-info stage states forward as the graph progresses. They never
    /// go back: a stage re-run after a rollback shows in the graph's text instead.
    fn refresh_stage_states(&self) {
        for (id, stage) in &self.stages {
            // A stage taken into another moves with it.
            let target = match self.graph.stage(self.running_as(*id)).map(|s| &s.state) {
                Some(ExecutionStage::Running { .. }) => StageState::Running,
                Some(ExecutionStage::Successful { .. }) => StageState::Finished,
                Some(ExecutionStage::Failed { .. }) => StageState::Failed,
                _ => continue,
            };
            for step in [StageState::Scheduling, StageState::Scheduled, StageState::Running, target] {
                stage.transition(step);
            }
        }
    }

    /// Deletes every attempt of the query on every worker (which removes their spool
    /// files) and stops status polling.
    pub async fn remove_all_tasks(&self, abort: bool) {
        let _ = self.stop_pollers.send(true);
        let tasks = self.stages.values().flat_map(|s| s.tasks()).collect();
        delete_all(tasks, abort, |w| self.settings.is_lost(w)).await;
        for s in self.stages.values() {
            if !s.state().is_final() {
                s.transition(if abort { StageState::Aborted } else { StageState::Canceled });
            }
        }
    }
}

#[cfg(test)]
#[path = "fault_tolerant_tests.rs"]
mod tests;
