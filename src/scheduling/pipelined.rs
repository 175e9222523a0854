//! `PipelinedQueryScheduler`: runs the worker stages of one query, all streaming at
//! once (retry policy `none`). Its loop asks the `ExecutionSchedule` which stages are
//! ready, lets each create its tasks (one `RemoteTask` per worker chosen by the
//! `NodeScheduler`), wires new task locations into consumers, and then waits with
//! `select_all` on the stages' change futures. Any task failure ends the loop with
//! the failure; the query execution aborts everything.
//!
//! It talks to tasks only through `RemoteTask`, so its unit tests drive it with fake
//! tasks.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use datafusion::physical_plan::ExecutionPlan;
use futures::future::{select_all, BoxFuture, FutureExt};
use futures::StreamExt;
use tokio::sync::watch;
use tokio::task::JoinSet;

use super::node_scheduler::{partition_slices, NodeScheduler};
use super::phased::ExecutionSchedule;
use super::planted;
use super::remote_task::{delete_in_background, RemoteTask, RemoteTaskError, RemoteTaskFactory};
pub use super::stage_execution::{StageExecution, StageInfo, TaskFailureReport};
use super::state_machine::{StageState, StateKind};
use crate::cluster::node_manager::{NodeManager, WorkerNode};
use crate::codec::FlotillaCodec;
use crate::error_code::ErrorCode;
use crate::plan::dynamic_filter::{union_of, with_collector, with_filter, DynamicFilter};
use crate::plan::fragmenter::{Fragment, FragmentOutput, FragmentedPlan};
use crate::protocol::{
    Base64Bytes, FailureReason, OutputBufferSpec, SourceUpdate, TaskFailure, TaskId, TaskState, TaskStatus,
    TaskUpdateRequest,
};

#[derive(Debug, Clone, thiserror::Error)]
pub enum SchedulerError {
    #[error("{0}")]
    TaskFailed(Box<TaskFailureReport>),
    #[error("{0}")]
    RemoteTask(#[from] RemoteTaskError),
    #[error("no live workers to run stage {0}")]
    NoWorkers(usize),
    /// The fault-tolerant graph refused an update or could not be built.
    #[error("execution graph: {0}")]
    Graph(String),
    /// The coordinator's root stage failed (fault-tolerant mode, where it runs inside
    /// the scheduler).
    #[error("{0}")]
    Root(crate::error_code::QueryError),
}

/// Receives upstream locations for the coordinator's own root stage.
pub trait RootSourceSink: Send + Sync {
    fn add_source(&self, update: SourceUpdate);
}

pub struct SchedulerSettings {
    pub query_id: String,
    /// Attempt of the whole query (retry_policy=query), part of every task id.
    pub attempt: usize,
    /// Makes the query's tasks: `HttpRemoteTask`s, or fakes in tests.
    pub remote_tasks: Arc<dyn RemoteTaskFactory>,
    /// Encodes the fragments sent to workers.
    pub codec: FlotillaCodec,
    pub workers: Vec<WorkerNode>,
    pub node_scheduler: Arc<NodeScheduler>,
    pub session: BTreeMap<String, String>,
    /// Membership, to fail tasks on workers that stopped sending heartbeats.
    pub nodes: Option<Arc<NodeManager>>,
    /// How long a scheduler waits for a change before it looks again anyway
    /// (`IDLE_TICK`). Every change should wake it sooner; the simulator sets this
    /// long, so that a change that fails to wake it shows as a stall.
    pub tick: Duration,
}

/// The schedulers' safety net: they look at their tasks at least this often, for
/// what no event announces (a heartbeat that ran out, a grace period that ended).
pub const IDLE_TICK: Duration = Duration::from_millis(500);

/// A task and the request that creates it on its worker.
type TaskCreation = (Arc<dyn RemoteTask>, TaskUpdateRequest);

impl SchedulerSettings {
    /// The worker stopped sending heartbeats (or is known gone).
    pub fn is_lost(&self, worker: &WorkerNode) -> bool {
        self.nodes.as_ref().is_some_and(|n| !n.is_alive(&worker.node_id))
    }
}

pub struct PipelinedQueryScheduler {
    settings: SchedulerSettings,
    /// Partitioned joins whose probe stage the build stage's keys filter.
    dynamic_filters: Vec<DynamicFilter>,
    stages: BTreeMap<usize, Arc<StageExecution>>,
    schedule: Box<dyn ExecutionSchedule>,
    root_sink: Arc<dyn RootSourceSink>,
    stop_pollers: watch::Sender<bool>,
    /// The tasks' status pollers, owned here: they end when told (`stop_pollers`), and
    /// are aborted should the scheduler be dropped without being told.
    pollers: JoinSet<()>,
    /// What each stage looked like at the version last seen: a round looks again only
    /// at stages that changed, so a round costs the changed stages' tasks, not all
    /// tasks of the query (quadratic in tasks at a thousand workers, `sim::scale`).
    views: BTreeMap<usize, StageView>,
}

/// A stage as a scheduling round last saw it.
#[derive(Clone)]
struct StageView {
    version: u64,
    state: StageState,
    full_output: bool,
    failure: Option<TaskFailureReport>,
}

impl StageView {
    /// What a round decides from.
    fn key(&self) -> (StageState, bool, bool) {
        (self.state, self.full_output, self.failure.is_some())
    }
}

/// Tasks of a stage: one per worker, never more than its partitions.
pub fn task_count(fragment: &Fragment, workers: usize) -> usize {
    if fragment.output == FragmentOutput::Root || fragment.partitions <= 1 {
        1
    } else {
        fragment.partitions.min(workers.max(1))
    }
}

/// How a stage's tasks lay out their output; a broadcast has a buffer per task of
/// its consumer (one for the coordinator's root stage).
pub fn output_spec(fragment: &Fragment, stages: &BTreeMap<usize, Arc<StageExecution>>) -> OutputBufferSpec {
    match fragment.output {
        FragmentOutput::Repartition { partitions } => OutputBufferSpec::Partitioned { partitions },
        FragmentOutput::Passthrough => OutputBufferSpec::Passthrough,
        FragmentOutput::Broadcast | FragmentOutput::Root => {
            let consumer_tasks = match fragment.consumer {
                Some(c) if c != 0 => stages.get(&c).map_or(1, |s| s.task_count()),
                _ => 1,
            };
            OutputBufferSpec::Broadcast { buffers: consumer_tasks }
        }
    }
}

/// Among failures, the one closest to the cause: a task's own failure first, then a
/// broken data link (which is itself the cause) or a read of a failed task that
/// carried that task's own code, and only then the echo of an upstream task's
/// failure without it.
pub fn pick_root_cause(failures: Vec<TaskFailureReport>) -> Option<TaskFailureReport> {
    let rank = |f: &TaskFailureReport| match (&f.failure.reason, f.failure.code.known()) {
        (FailureReason::Execution, _) => 0,
        (FailureReason::Fetch { .. }, Some(ErrorCode::RemoteTaskFailed)) => 2,
        (FailureReason::Fetch { .. }, _) => 1,
    };
    failures.into_iter().min_by_key(rank)
}

/// How a pipelined query's run failed: in the scheduler, or in the coordinator's
/// root stage (whose error type is the caller's).
#[derive(Debug)]
pub enum PipelinedFailure<R> {
    Scheduler(SchedulerError),
    Root(R),
}

impl<R> From<SchedulerError> for PipelinedFailure<R> {
    fn from(e: SchedulerError) -> Self {
        PipelinedFailure::Scheduler(e)
    }
}

/// What a pipelined query fails with, chosen once for the coordinator and the
/// simulator: the closest to the cause among the run's failure and the failures the
/// workers reported as the tasks were removed (`reported`). A root stage that could
/// not read an input yields to a task's own failure, never to its echo
/// (`REMOTE_TASK_FAILED`).
#[derive(Debug)]
pub enum QueryFailure<R> {
    Task(TaskFailureReport),
    RemoteTask(RemoteTaskError),
    Scheduler(SchedulerError),
    Root(R),
}

pub fn query_failure<R>(failure: PipelinedFailure<R>, reported: Vec<TaskFailureReport>) -> QueryFailure<R> {
    match failure {
        PipelinedFailure::Scheduler(SchedulerError::TaskFailed(report)) => {
            let all = std::iter::once(*report).chain(reported).collect();
            QueryFailure::Task(pick_root_cause(all).expect("one report at least"))
        }
        PipelinedFailure::Scheduler(SchedulerError::RemoteTask(e)) => QueryFailure::RemoteTask(e),
        PipelinedFailure::Scheduler(e) => QueryFailure::Scheduler(e),
        PipelinedFailure::Root(r) => match pick_root_cause(reported) {
            Some(best) if !best.failure.code.is(ErrorCode::RemoteTaskFailed) => QueryFailure::Task(best),
            _ => QueryFailure::Root(r),
        },
    }
}

impl PipelinedQueryScheduler {
    pub fn new(
        settings: SchedulerSettings,
        plan: Arc<FragmentedPlan>,
        schedule: Box<dyn ExecutionSchedule>,
        root_sink: Arc<dyn RootSourceSink>,
    ) -> Self {
        let workers = settings.workers.len();
        let stages = plan
            .worker_stages()
            .into_iter()
            .map(|id| {
                let fragment = Arc::new(plan.fragments[id].clone());
                (id, Arc::new(StageExecution::new(fragment.clone(), task_count(&fragment, workers))))
            })
            .collect();
        let (stop_pollers, _) = watch::channel(false);
        PipelinedQueryScheduler {
            settings,
            stages,
            schedule,
            root_sink,
            stop_pollers,
            pollers: JoinSet::new(),
            dynamic_filters: vec![],
            views: BTreeMap::new(),
        }
    }

    /// Runs `filters` (`plan::dynamic_filter::dynamic_filters` of the plan): build
    /// stages collect their keys, and a probe stage scheduled after its build stage is
    /// done producing keeps only rows with those keys. The schedule must hold each
    /// probe stage back until then (`dynamic_filter::dependencies`), or it starts
    /// without its filter.
    pub fn with_dynamic_filters(mut self, filters: Vec<DynamicFilter>) -> Self {
        self.dynamic_filters = filters;
        self
    }

    pub fn stages(&self) -> Vec<Arc<StageExecution>> {
        self.stages.values().cloned().collect()
    }

    /// Schedules stages as the schedule allows and watches them until all are done
    /// producing or one fails. Cancel by dropping the future.
    pub async fn run(&mut self) -> Result<(), SchedulerError> {
        loop {
            // Subscribed before the states are read: a change that lands between the
            // two wakes the wait below, instead of waiting for the tick (a missed wake-up
            // that stalled about one query in a few hundred by up to half a second).
            let mut waits: Vec<BoxFuture<'static, ()>> = self.watched_stages().map(|s| s.wait_changed()).collect();
            let planted_late = planted::is(planted::Bug::LateWakeup);
            self.fail_tasks_on_lost_workers();
            // What follows depends on the stages' views alone: when none moved, the
            // round would decide what the last one did (a look per stage a round made
            // scheduling cost grow with a query's stages as with its tasks).
            if !self.look_at_changed_stages() && !planted_late {
                waits.push(tokio::time::sleep(self.settings.tick).boxed());
                select_all(waits).await;
                continue;
            }
            self.check_failures()?;
            let states: BTreeMap<usize, StageState> = self.views.iter().map(|(id, v)| (*id, v.state)).collect();
            let full: BTreeSet<usize> = self.views.iter().filter(|(_, v)| v.full_output).map(|(id, _)| *id).collect();
            let mut ready = self.schedule.get_stages_to_schedule(&states, &full);
            ready.sort_unstable();
            if !ready.is_empty() {
                // Subscribed before their first task exists, as the others above.
                waits.extend(ready.iter().map(|id| self.stages[id].wait_changed()));
                self.schedule_stages(&ready).await?;
            }
            if self.schedule.is_finished() && self.stages.values().all(|s| s.state() == StageState::Finished) {
                return Ok(());
            }
            if planted_late {
                // The bug this loop once had: subscribing after the round, so a
                // change while the round's requests were out woke nobody.
                waits = self.stages.values().map(|s| s.wait_changed()).collect();
            }
            waits.push(tokio::time::sleep(self.settings.tick).boxed());
            select_all(waits).await;
        }
    }

    /// The stages whose changes a round waits for: not those still planned, which
    /// change only when this loop schedules them (it subscribes then), nor those
    /// final, whose tasks are all final. A wait per stage per round made a query's
    /// scheduling cost grow with its stages as much as with its tasks (`sim::scale`:
    /// 46 to 107 µs a task from 10 to 200 stages at 100 workers).
    fn watched_stages(&self) -> impl Iterator<Item = &Arc<StageExecution>> {
        self.stages.values().filter(|s| {
            let state = s.state();
            state != StageState::Planned && !state.is_final()
        })
    }

    /// Runs the stages beside `root`, the coordinator's root stage reading their
    /// output, until the root has every row. Then the answer is complete and nothing
    /// more is waited for: stages done producing may hold pages nobody will ever read
    /// (a partitioned join that skipped its probe side after an empty build, a root
    /// that stopped at a LIMIT), and `remove_all_tasks` finishes them. Waiting for
    /// their buffers to drain waited for an event that never comes, until a 5 s timer
    /// ran out (TPC-DS q27, q32, q36, q75, q76, q77: whenever the unread stage was
    /// done producing before the root ended). A scheduler failure before the root
    /// ends fails the query; stages all finished before it do not end it.
    pub async fn run_with_root<T, E: From<SchedulerError>>(
        &mut self,
        root: impl std::future::Future<Output = Result<T, E>>,
    ) -> Result<T, E> {
        let scheduling = self.run();
        tokio::pin!(root, scheduling);
        let mut scheduled = false;
        loop {
            // Biased: a fixed order keeps a simulated run replayable (`sim`).
            tokio::select! {
                biased;
                r = &mut scheduling, if !scheduled => match r {
                    Ok(()) => scheduled = true,
                    Err(e) => return Err(e.into()),
                },
                r = &mut root => {
                    if planted::is(planted::Bug::WaitForDrain) && !scheduled {
                        // The stall TPC-DS once had: waiting, after the root has every
                        // row, for stages whose last pages nobody will read.
                        let _ = (&mut scheduling).await;
                    }
                    return r;
                }
            }
        }
    }

    /// A task on a worker that stopped sending heartbeats is failed here: its status
    /// link may still look alive to nobody, and waiting for request errors is slower.
    /// The query's workers are looked at first, its tasks only when one is lost.
    fn fail_tasks_on_lost_workers(&self) {
        let Some(nodes) = &self.settings.nodes else { return };
        let lost: BTreeSet<&str> =
            self.settings.workers.iter().filter(|w| !nodes.is_alive(&w.node_id)).map(|w| w.node_id.as_str()).collect();
        if lost.is_empty() {
            return;
        }
        for s in self.stages.values() {
            for t in s.tasks() {
                let worker = t.worker();
                if lost.contains(worker.node_id.as_str()) && !t.state().is_done() {
                    t.mark_failed(ErrorCode::RemoteHostGone, nodes.lost_message(worker));
                }
            }
        }
    }

    /// Derives again the state, full buffers and failure of each stage that changed
    /// since the last round; true if any of those moved (or a stage is seen first).
    /// The version is read first: a change during the look shows as a new version
    /// next round.
    fn look_at_changed_stages(&mut self) -> bool {
        let mut moved = false;
        for s in self.stages.values() {
            let version = s.version();
            if self.views.get(&s.id()).is_some_and(|v| v.version == version) {
                continue;
            }
            let failure = s.failed_task().map(|(task, failure)| TaskFailureReport {
                stage: s.id(),
                task: task.task_id().clone(),
                worker: task.worker().url.clone(),
                failure,
            });
            let view = StageView { version, state: s.refresh(), full_output: s.has_full_output_buffer(), failure };
            let key = view.key();
            moved |= self.views.insert(s.id(), view).is_none_or(|old| old.key() != key);
        }
        moved
    }

    fn check_failures(&self) -> Result<(), SchedulerError> {
        let failures: Vec<TaskFailureReport> = self.views.values().filter_map(|v| v.failure.clone()).collect();
        match pick_root_cause(failures) {
            Some(r) => Err(SchedulerError::TaskFailed(Box::new(r))),
            None => Ok(()),
        }
    }

    /// Schedules a round of ready stages. First every task of every stage is created,
    /// concurrently, carrying the locations of producers from earlier rounds; then, with
    /// all of them existing, each consumer is told where this round's producers run,
    /// one update per consumer task. Doing it in that order means a consumer never
    /// learns of a producer task that does not exist yet.
    async fn schedule_stages(&mut self, ids: &[usize]) -> Result<(), SchedulerError> {
        let mut creations = Vec::new();
        for &id in ids {
            let filter = self.probe_filter(id).await;
            creations.extend(self.prepare_stage(id, filter)?);
        }
        let sends: Vec<BoxFuture<'static, Result<(), RemoteTaskError>>> = creations
            .iter()
            .map(|(t, req)| {
                let (t, req) = (t.clone(), req.clone());
                async move { t.send_update(req).await }.boxed()
            })
            .collect();
        let results: Vec<Result<(), RemoteTaskError>> =
            futures::stream::iter(sends).buffer_unordered(64).collect().await;
        for r in results {
            r?;
        }
        for (task, _) in &creations {
            self.pollers.spawn(task.clone().poll_status(self.stop_pollers.subscribe()));
        }
        let mut updates: BTreeMap<usize, Vec<SourceUpdate>> = BTreeMap::new();
        for &id in ids {
            let stage = self.stages[&id].clone();
            stage.transition(StageState::Scheduled);
            let update = SourceUpdate { stage: id, tasks: stage.upstream_tasks(), no_more: true };
            match stage.fragment().consumer {
                Some(0) | None => self.root_sink.add_source(update),
                Some(c) => updates.entry(c).or_default().push(update),
            }
        }
        let mut sends: Vec<BoxFuture<'static, Result<(), RemoteTaskError>>> = Vec::new();
        for (consumer, list) in updates {
            for task in self.stages[&consumer].tasks() {
                let list = list.clone();
                sends.push(async move { task.add_sources(list).await }.boxed());
            }
        }
        let results: Vec<Result<(), RemoteTaskError>> =
            futures::stream::iter(sends).buffer_unordered(64).collect().await;
        for r in results {
            r?;
        }
        Ok(())
    }

    /// The key hashes that filter probe stage `id`: every task of its build stage,
    /// done producing, collected its keys. None when the stage is no probe stage, or
    /// its build stage is not done (its full output buffer let the probe start), or a
    /// build task has no hashes to give (too many keys).
    async fn probe_filter(&self, id: usize) -> Option<(DynamicFilter, Arc<[u64]>)> {
        let f = self.dynamic_filters.iter().find(|f| f.probe == id)?;
        let build = self.stages.get(&f.build)?;
        if !build.state().is_done_producing() {
            return None;
        }
        let started = std::time::Instant::now();
        let lists = futures::future::join_all(build.tasks().iter().map(|t| t.dynamic_filter(f.build))).await;
        let set = union_of(lists);
        tracing::debug!(
            query = %self.settings.query_id, build = f.build, probe = id,
            hashes = set.as_ref().map(|s| s.len()), elapsed = ?started.elapsed(), "dynamic filter"
        );
        Some((f.clone(), set?))
    }

    /// The plan a stage's tasks run: its fragment, with a build stage's key collector
    /// or a probe stage's filter.
    fn stage_plan(&self, id: usize, filter: Option<(DynamicFilter, Arc<[u64]>)>) -> Arc<dyn ExecutionPlan> {
        let plan = self.stages[&id].fragment().plan.clone();
        let wrapped = match (self.dynamic_filters.iter().find(|f| f.build == id), filter) {
            (Some(f), _) => with_collector(&plan, f),
            (None, Some((f, hashes))) => with_filter(&plan, &f, hashes),
            (None, None) => return plan,
        };
        wrapped.unwrap_or_else(|e| {
            tracing::warn!(query = %self.settings.query_id, stage = id, error = %e, "stage runs without its dynamic filter");
            plan
        })
    }

    /// Places a stage's tasks and builds their create requests.
    fn prepare_stage(
        &mut self,
        id: usize,
        filter: Option<(DynamicFilter, Arc<[u64]>)>,
    ) -> Result<Vec<TaskCreation>, SchedulerError> {
        let stage = self.stages[&id].clone();
        stage.transition(StageState::Scheduling);
        let fragment = stage.fragment();
        let workers = self.settings.node_scheduler.place(&self.settings.workers, stage.task_count());
        if workers.is_empty() {
            return Err(SchedulerError::NoWorkers(id));
        }
        let bytes = self.settings.codec.encode_plan(self.stage_plan(id, filter)).map_err(|e| {
            SchedulerError::TaskFailed(Box::new(TaskFailureReport {
                stage: id,
                task: TaskId::new(&self.settings.query_id, id, 0, 0),
                worker: "coordinator".into(),
                failure: TaskFailure::new(ErrorCode::PlanSerialization, e.to_string()),
            }))
        })?;
        let output = output_spec(&fragment, &self.stages);
        // Only producers whose tasks were all created in an earlier round.
        let sources: Vec<SourceUpdate> = fragment
            .inputs
            .iter()
            .filter_map(|i| {
                let upstream = &self.stages[i];
                let created = !matches!(upstream.state(), StageState::Planned | StageState::Scheduling);
                created.then(|| SourceUpdate { stage: *i, tasks: upstream.upstream_tasks(), no_more: true })
            })
            .collect();
        let slices = partition_slices(fragment.partitions, stage.task_count());
        tracing::debug!(query = %self.settings.query_id, stage = id, bytes = bytes.len(), "fragment encoded");
        let fragment_bytes = Base64Bytes(bytes);
        let mut created = Vec::new();
        for (t, (worker, partitions)) in workers.into_iter().zip(slices).enumerate() {
            let task_id = TaskId::new(&self.settings.query_id, id, t, self.settings.attempt);
            let task = stage.add_task(self.settings.remote_tasks.as_ref(), task_id, worker, partitions.clone());
            let req = TaskUpdateRequest {
                fragment: Some(fragment_bytes.clone()),
                partitions,
                task_index: t,
                output: Some(output),
                sources: sources.clone(),
                session: self.settings.session.clone(),
                spool: false,
            };
            created.push((task, req));
        }
        Ok(created)
    }

    /// Deletes every task of the query on every worker, stops status polling, and
    /// returns the final statuses the workers reported.
    pub async fn remove_all_tasks(&self, abort: bool) -> Vec<TaskFailureReport> {
        let _ = self.stop_pollers.send(true);
        let mut deletes = Vec::new();
        for s in self.stages.values() {
            for t in s.tasks() {
                if self.settings.is_lost(t.worker()) {
                    delete_in_background(t, abort);
                    continue;
                }
                let stage = s.id();
                deletes.push(async move { (stage, t.worker().url.clone(), t.delete(abort).await) });
            }
        }
        let mut failures = Vec::new();
        for (stage, worker, status) in futures::future::join_all(deletes).await {
            if let Some(TaskStatus { state: TaskState::Failed, failure: Some(f), task_id, .. }) = status {
                failures.push(TaskFailureReport { stage, task: task_id, worker, failure: f });
            }
        }
        self.settle_stages(abort);
        failures
    }

    /// Moves every stage not yet final to where the query's end leaves it: finished
    /// (or canceled, if it never ran) when the query succeeded, aborted when not.
    pub fn settle_stages(&self, abort: bool) {
        for s in self.stages.values() {
            let state = s.state();
            if state.is_final() {
                continue;
            }
            let to = match (abort, state) {
                (false, StageState::Flushing | StageState::Running | StageState::Scheduled) => StageState::Finished,
                (false, _) => StageState::Canceled,
                (true, _) => StageState::Aborted,
            };
            s.transition(to);
        }
    }
}

#[cfg(test)]
#[path = "pipelined_tests.rs"]
mod tests;
