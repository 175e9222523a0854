//! The simulated cluster: workers with their tasks, the network between them and
//! the coordinator, and the faults a seed plants. Everything random is drawn from one
//! seeded generator, and everything runs on one thread under tokio's paused clock, so
//! a seed replays exactly. The schedulers reach it through `SimRemoteTask`
//! (`remote_task`); the simulated roots read from it (`query`).
//!
//! A worker task runs as the real ones do, coarsely: a pipelined task waits for all
//! its inputs to be done producing, produces for a drawn time, and is FLUSHING until
//! every consumer has read it; a spooled task (retry policy `task`) reads its inputs'
//! spooled outputs at its start, produces, and is FINISHED with its output kept until
//! it is deleted. A read of an output that is gone is a fetch failure naming it.

use std::collections::{BTreeMap, BTreeSet};
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use rand::rngs::StdRng;
use rand::Rng;
use tokio::sync::futures::Notified;
use tokio::sync::Notify;
use tokio::task::JoinSet;
use tokio::time::Instant;

use super::params::SimParams;
use crate::cluster::node_manager::{NodeManager, WorkerNode};
use crate::error_code::ErrorCode;
use crate::plan::fragmenter::FragmentedPlan;
use crate::protocol::{
    SourceUpdate, TaskFailure, TaskId, TaskState, TaskStats, TaskStatus, TaskUpdateRequest, UpstreamTask,
};

mod chaos;
mod reads;

/// A worker silent this long loses its tasks there (`task.client.timeout`).
const CLIENT_TIMEOUT: Duration = Duration::from_secs(10);
const HEARTBEAT: Duration = Duration::from_secs(1);

/// Why a request to a worker did not get an answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NetError {
    /// The worker is down: the connection is refused at once.
    Refused,
    /// Partitioned from the coordinator, or the request was lost: it times out.
    TimedOut,
    /// The worker does not know the task (it restarted, or the task was removed).
    NotFound,
}

struct WorkerTask {
    id: TaskId,
    state: TaskState,
    version: u64,
    failure: Option<TaskFailure>,
    spool: bool,
    sources: BTreeMap<usize, Vec<UpstreamTask>>,
    /// Input stages whose list of tasks is complete.
    complete: BTreeSet<usize>,
    /// Its output buffer is full until its consumers run.
    full: bool,
    /// Its spooled output was lost after it finished.
    output_lost: bool,
    last_contact: Instant,
}

struct Worker {
    node: WorkerNode,
    up: bool,
    /// Cut off from the coordinator (not from other workers).
    cut: bool,
    /// When it last became reachable again, in simulated milliseconds.
    healed_at: u64,
    tasks: BTreeMap<String, WorkerTask>,
    /// Tasks removed here: a late or duplicated create must not bring one back.
    removed: BTreeSet<String>,
}

/// What a run saw, for the invariants.
#[derive(Default)]
pub struct Record {
    pub events: Vec<(u64, String)>,
    pub violations: Vec<String>,
    /// Error codes the faults so far can explain a failed query with.
    pub fault_codes: BTreeSet<ErrorCode>,
    pub tasks_created: usize,
    /// The coordinator's root read all it needed, at this simulated millisecond.
    pub root_done_at: Option<u64>,
    /// The scheduler returned (the client has its answer or its error).
    pub answered_at: Option<u64>,
    pub ended_at: Option<u64>,
    /// Tasks a worker dropped itself, with when.
    pub reaped: Vec<(u64, String)>,
    /// When the scheduler sent each task's create request.
    pub creates_sent: Vec<(u64, TaskId)>,
    /// When the coordinator first saw each task done producing.
    pub seen_producing: BTreeMap<String, (TaskId, u64)>,
}

struct State {
    rng: StdRng,
    workers: Vec<Worker>,
    record: Record,
    /// Upstream tasks the coordinator's root reads, by stage (pipelined).
    root_sources: BTreeMap<usize, Vec<UpstreamTask>>,
    root_complete: BTreeSet<usize>,
    /// Injected failures per (stage, partition), held to the seed's budget.
    injected: BTreeMap<(usize, usize), usize>,
    ended: bool,
}

pub struct World {
    state: Mutex<State>,
    /// Wakes whoever waits for the world to change, in the order they began to
    /// wait: tokio's `watch` wakes its receivers in a random order, which no replay
    /// could follow.
    changed: Notify,
    pub params: SimParams,
    pub nodes: Arc<NodeManager>,
    pub plan: Arc<FragmentedPlan>,
    started: Instant,
    /// The workers' task runners, heartbeats and the seed's faults.
    background: Mutex<JoinSet<()>>,
}

/// What a pipelined task (or the root) finds when it looks at its inputs.
enum Inputs {
    Ready,
    Waiting,
    Broken(TaskFailure),
}

impl World {
    pub fn new(params: SimParams, rng: StdRng, plan: Arc<FragmentedPlan>) -> Arc<World> {
        let nodes = Arc::new(NodeManager::new(Duration::from_secs(3)));
        let workers: Vec<Worker> = (0..params.workers)
            .map(|i| Worker {
                node: WorkerNode { node_id: format!("w{i}"), url: format!("http://w{i}") },
                up: true,
                cut: false,
                healed_at: 0,
                tasks: BTreeMap::new(),
                removed: BTreeSet::new(),
            })
            .collect();
        for w in &workers {
            nodes.announce(&w.node.node_id, &w.node.url);
        }
        let state = State {
            rng,
            workers,
            record: Record::default(),
            root_sources: BTreeMap::new(),
            root_complete: BTreeSet::new(),
            injected: BTreeMap::new(),
            ended: false,
        };
        let changed = Notify::new();
        let world = Arc::new(World {
            state: Mutex::new(state),
            changed,
            params,
            nodes,
            plan,
            started: Instant::now(),
            background: Mutex::new(JoinSet::new()),
        });
        world.start_background();
        world
    }

    pub fn now_ms(&self) -> u64 {
        self.started.elapsed().as_millis() as u64
    }

    /// Logs an event that counts as progress (see `invariants`).
    pub fn event(&self, text: impl Into<String>) {
        let at = self.now_ms();
        self.state.lock().record.events.push((at, text.into()));
    }

    pub fn violation(&self, text: impl Into<String>) {
        let at = self.now_ms();
        let text = text.into();
        let mut s = self.state.lock();
        s.record.events.push((at, format!("VIOLATION {text}")));
        s.record.violations.push(text);
    }

    pub fn note_create_sent(&self, id: &TaskId) {
        let at = self.now_ms();
        self.state.lock().record.creates_sent.push((at, id.clone()));
    }

    pub fn note_seen_producing(&self, id: &TaskId) {
        let at = self.now_ms();
        self.state.lock().record.seen_producing.entry(id.to_string()).or_insert((id.clone(), at));
    }

    pub fn note_fault_code(&self, code: ErrorCode) {
        self.state.lock().record.fault_codes.insert(code);
    }

    fn bump(&self) {
        self.changed.notify_waiters();
    }

    /// Resolves at the first change after this call (it waits from now, not from
    /// its first poll, so a caller takes it before looking at what it waits on).
    pub fn next_change(&self) -> Pin<Box<Notified<'_>>> {
        let mut next = Box::pin(self.changed.notified());
        next.as_mut().enable();
        next
    }

    pub fn ended(&self) -> bool {
        self.state.lock().ended
    }

    /// The query is over: what the scheduler does from here on is a violation.
    pub fn end(&self) {
        let at = self.now_ms();
        let mut s = self.state.lock();
        s.ended = true;
        s.record.ended_at = Some(at);
        s.record.events.push((at, "query ended".into()));
    }

    pub fn answered_at(&self) -> Option<u64> {
        self.state.lock().record.answered_at
    }

    /// The scheduler returned, `ok` or not.
    pub fn answered(&self, ok: bool) {
        let at = self.now_ms();
        let mut s = self.state.lock();
        s.record.answered_at = Some(at);
        s.record.events.push((at, format!("scheduler returned {}", if ok { "ok" } else { "a failure" })));
    }

    /// Workers up and reachable, without a break, since the simulated millisecond
    /// `since`, by node id.
    pub fn reachable_since(&self, since: u64) -> Vec<String> {
        let s = self.state.lock();
        let steady = |w: &&Worker| w.up && !w.cut && w.healed_at <= since;
        s.workers.iter().filter(steady).map(|w| w.node.node_id.clone()).collect()
    }

    /// Stops every background task and hands over the record.
    pub fn finish(&self) -> Record {
        self.background.lock().abort_all();
        std::mem::take(&mut self.state.lock().record)
    }

    /// One-way delay of a message, drawn from the seed.
    pub fn delay(&self) -> Duration {
        let max = self.params.max_delay_ms;
        Duration::from_micros(self.state.lock().rng.random_range(0..=max * 1000))
    }

    pub fn worker_index(&self, node_id: &str) -> usize {
        node_id.trim_start_matches('w').parse().expect("a simulated worker id")
    }

    /// Tasks left on workers, by worker: after the query and its cleanup, none.
    pub fn tasks_left(&self) -> Vec<String> {
        let s = self.state.lock();
        s.workers.iter().flat_map(|w| w.tasks.keys().map(move |t| format!("{t} on {}", w.node.node_id))).collect()
    }

    fn reachable(&self, s: &State, w: usize) -> Result<(), NetError> {
        match (s.workers[w].up, s.workers[w].cut) {
            (false, _) => Err(NetError::Refused),
            (true, true) => Err(NetError::TimedOut),
            _ => Ok(()),
        }
    }

    /// A create or update request arrives at worker `w`; a dropped one never does.
    pub fn deliver_update(self: &Arc<Self>, w: usize, id: &TaskId, req: &TaskUpdateRequest) -> Result<(), NetError> {
        let duplicate = {
            let mut s = self.state.lock();
            self.reachable(&s, w)?;
            if s.rng.random_bool(self.params.drop_rate) {
                drop(s);
                self.event(format!("dropped update of {id}"));
                return Err(NetError::TimedOut);
            }
            s.rng.random_bool(self.params.duplicate_rate)
        };
        self.apply_update(w, id, req);
        if duplicate {
            // The same request again, a little later: workers must take it once.
            let (world, id, req) = (self.clone(), id.clone(), req.clone());
            let later = self.delay();
            self.background.lock().spawn(async move {
                tokio::time::sleep(later).await;
                let reachable = world.reachable(&world.state.lock(), w).is_ok();
                if reachable {
                    world.event(format!("duplicated update of {id}"));
                    world.apply_update(w, &id, &req);
                }
            });
        }
        Ok(())
    }

    fn apply_update(self: &Arc<Self>, w: usize, id: &TaskId, req: &TaskUpdateRequest) {
        let key = id.to_string();
        let now = Instant::now();
        let at = self.now_ms();
        let mut guard = self.state.lock();
        let State { rng, workers, record, .. } = &mut *guard;
        let worker = &mut workers[w];
        if worker.removed.contains(&key) {
            return;
        }
        let created = !worker.tasks.contains_key(&key);
        if created {
            if req.fragment.is_none() {
                return; // An update for a task this worker never had: ignored.
            }
            let task = WorkerTask {
                id: id.clone(),
                state: TaskState::Running,
                version: 1,
                failure: None,
                spool: req.spool,
                sources: BTreeMap::new(),
                complete: BTreeSet::new(),
                full: rng.random_bool(self.params.full_buffer_rate),
                output_lost: false,
                last_contact: now,
            };
            worker.tasks.insert(key.clone(), task);
            record.tasks_created += 1;
            record.events.push((at, format!("created {id} on w{w}")));
        }
        let task = worker.tasks.get_mut(&key).expect("present");
        task.last_contact = now;
        for update in &req.sources {
            merge_sources(&mut task.sources, &mut task.complete, update);
        }
        drop(guard);
        if created {
            let world = self.clone();
            let id = id.clone();
            self.background.lock().spawn(async move { world.run_task(w, id).await });
        }
        self.bump();
    }

    /// The task's status as its worker answers a status request.
    pub fn status(&self, w: usize, id: &TaskId) -> Result<TaskStatus, NetError> {
        let mut s = self.state.lock();
        self.reachable(&s, w)?;
        let worker = &mut s.workers[w];
        let node_id = worker.node.node_id.clone();
        let task = worker.tasks.get_mut(&id.to_string()).ok_or(NetError::NotFound)?;
        task.last_contact = Instant::now();
        Ok(status_of(task, &node_id))
    }

    /// Removes a task (abort or cancel), answering with its final status.
    pub fn delete(&self, w: usize, id: &TaskId, abort: bool) -> Result<TaskStatus, NetError> {
        let key = id.to_string();
        let status = {
            let mut s = self.state.lock();
            self.reachable(&s, w)?;
            let worker = &mut s.workers[w];
            worker.removed.insert(key.clone());
            let node_id = worker.node.node_id.clone();
            let mut task = worker.tasks.remove(&key).ok_or(NetError::NotFound)?;
            if !task.state.is_done() {
                task.state = match (abort, task.state) {
                    (true, _) => TaskState::Aborted,
                    (false, TaskState::Flushing) => TaskState::Finished,
                    (false, _) => TaskState::Canceled,
                };
                task.version += 1;
            }
            status_of(&task, &node_id)
        };
        self.event(format!("deleted {id} ({:?})", status.state));
        self.bump();
        Ok(status)
    }

    /// Moves a task on, if it is still there and not yet done.
    fn set_state(&self, w: usize, id: &TaskId, state: TaskState, failure: Option<TaskFailure>) {
        let changed = {
            let mut s = self.state.lock();
            match s.workers[w].tasks.get_mut(&id.to_string()) {
                Some(t) if !t.state.is_done() && t.state != state => {
                    t.state = state;
                    t.failure = failure;
                    t.version += 1;
                    true
                }
                _ => false,
            }
        };
        if changed {
            self.event(format!("{id} {state:?} on w{w}"));
            self.bump();
        }
    }

    fn task_exists(&self, w: usize, id: &TaskId) -> bool {
        self.state.lock().workers[w].tasks.contains_key(&id.to_string())
    }

    /// A worker task's life: inputs, work, output, and (pipelined) being read.
    async fn run_task(self: Arc<Self>, w: usize, id: TaskId) {
        let (work, fail_after, spool) = self.draw_work(w, &id);
        if spool {
            if let Err(f) = self.read_spooled_inputs(w, &id) {
                return self.set_state(w, &id, TaskState::Failed, Some(f));
            }
        } else {
            loop {
                let change = self.next_change();
                match self.pipelined_inputs(Some((w, &id))) {
                    Inputs::Ready => break,
                    Inputs::Broken(f) => return self.set_state(w, &id, TaskState::Failed, Some(f)),
                    Inputs::Waiting => {}
                }
                if !self.task_exists(w, &id) {
                    return;
                }
                change.await;
            }
        }
        if let Some(after) = fail_after {
            tokio::time::sleep(after).await;
            let failure = TaskFailure::new(ErrorCode::InjectedFailure, format!("injected failure of {id}"));
            self.note_fault_code(ErrorCode::InjectedFailure);
            return self.set_state(w, &id, TaskState::Failed, Some(failure));
        }
        tokio::time::sleep(work).await;
        // A full output buffer holds the task until its consumers run.
        loop {
            let change = self.next_change();
            if !self.output_full(w, &id) {
                break;
            }
            if !self.task_exists(w, &id) {
                return;
            }
            change.await;
        }
        if spool {
            return self.set_state(w, &id, TaskState::Finished, None);
        }
        self.set_state(w, &id, TaskState::Flushing, None);
        loop {
            let change = self.next_change();
            if self.consumers_read(&id) {
                return self.set_state(w, &id, TaskState::Finished, None);
            }
            if !self.task_exists(w, &id) {
                return;
            }
            change.await;
        }
    }

    /// How long the task works, and whether (after how long) it fails instead.
    fn draw_work(&self, w: usize, id: &TaskId) -> (Duration, Option<Duration>, bool) {
        let mut s = self.state.lock();
        let spool = s.workers[w].tasks.get(&id.to_string()).is_some_and(|t| t.spool);
        let (lo, hi) = self.params.task_ms;
        let work = Duration::from_millis(s.rng.random_range(lo..=hi));
        let used = s.injected.get(&(id.stage, id.task)).copied().unwrap_or(0);
        let fails = used < self.params.failures_per_partition && s.rng.random_bool(self.params.task_failure_rate);
        if fails {
            *s.injected.entry((id.stage, id.task)).or_default() += 1;
        }
        (work, fails.then(|| work.mul_f64(0.5)), spool)
    }

    fn output_full(&self, w: usize, id: &TaskId) -> bool {
        let s = self.state.lock();
        let Some(task) = s.workers[w].tasks.get(&id.to_string()) else { return false };
        // A spooled output goes to disk: nothing holds its producer back.
        if !task.full || task.spool {
            return false;
        }
        // Unblocked once a consumer task exists (it reads, the buffer drains).
        match self.plan.fragments[id.stage].consumer {
            Some(0) | None => false,
            Some(c) => !s.workers.iter().any(|w| w.tasks.values().any(|t| t.id.stage == c)),
        }
    }

    /// Whether every consumer of a pipelined task's output has read all of it.
    fn consumers_read(&self, id: &TaskId) -> bool {
        let s = self.state.lock();
        match self.plan.fragments[id.stage].consumer {
            // A root that stopped at its LIMIT never reads the rest.
            Some(0) | None => s.record.root_done_at.is_some() && !self.params.root_limit,
            Some(c) => {
                let readers: Vec<&WorkerTask> = s
                    .workers
                    .iter()
                    .flat_map(|w| w.tasks.values())
                    .filter(|t| {
                        t.id.stage == c && t.sources.get(&id.stage).is_some_and(|l| l.iter().any(|u| &u.task_id == id))
                    })
                    .collect();
                !readers.is_empty()
                    && readers.iter().all(|t| matches!(t.state, TaskState::Flushing | TaskState::Finished))
            }
        }
    }
}

/// Adds an update's upstream tasks to what a reader knows, each once (updates may
/// come twice), and marks the stage complete when the update says so.
fn merge_sources(
    sources: &mut BTreeMap<usize, Vec<UpstreamTask>>,
    complete: &mut BTreeSet<usize>,
    update: &SourceUpdate,
) {
    let known = sources.entry(update.stage).or_default();
    for t in &update.tasks {
        if !known.contains(t) {
            known.push(t.clone());
        }
    }
    if update.no_more {
        complete.insert(update.stage);
    }
}

fn status_of(task: &WorkerTask, node_id: &str) -> TaskStatus {
    TaskStatus {
        task_id: task.id.clone(),
        state: task.state,
        version: task.version,
        node_id: node_id.to_string(),
        failure: task.failure.clone(),
        output_buffer_overutilized: task.full && task.state == TaskState::Running,
        output_buffer_bytes: 0,
        stats: TaskStats::default(),
    }
}
