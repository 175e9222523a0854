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
use tokio::sync::futures::OwnedNotified;
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
    sources: BTreeMap<usize, Arc<Vec<UpstreamTask>>>,
    /// Input stages whose list of tasks is complete.
    complete: BTreeSet<usize>,
    /// Its output buffer is full until its consumers run.
    full: bool,
    /// Its spooled output was lost after it finished.
    output_lost: bool,
    /// What it writes to each consumer partition (a partitioned output only): a
    /// function of the task, not of the seed's draws, so adding it replayed every
    /// seed as before.
    partition_bytes: Vec<u64>,
    last_contact: Instant,
    /// Woken on every change of this task: its state, its sources, its removal.
    notify: Arc<Notify>,
    /// How far a pipelined reader got through its inputs (`reads`).
    cursor: Cursor,
}

/// A pipelined reader's place in its inputs: upstream tasks before it were seen done
/// producing, as of breakage epoch `epoch` (see `State::breakage`). Resuming there
/// keeps a reader's wake-up O(1) instead of a scan of every upstream task.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Cursor {
    pub input: usize,
    pub upstream: usize,
    pub epoch: u64,
}

/// A stage's tasks on the workers: how many exist, how many are done producing.
#[derive(Debug, Clone, Copy, Default)]
struct StageCount {
    existing: usize,
    producing_done: usize,
    /// Tasks ever created.
    created: usize,
}

impl StageCount {
    fn add(&mut self, state: TaskState) {
        self.existing += 1;
        self.producing_done += usize::from(done_producing(state));
    }

    fn remove(&mut self, state: TaskState) {
        self.existing -= 1;
        self.producing_done -= usize::from(done_producing(state));
    }
}

fn done_producing(state: TaskState) -> bool {
    matches!(state, TaskState::Flushing | TaskState::Finished)
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
    /// Requests the coordinator sent: status polls, creates and updates, deletes;
    /// and heartbeats the workers sent.
    pub traffic: Traffic,
}

/// Messages between the coordinator and the workers, counted.
#[derive(Debug, Default, Clone, Copy)]
pub struct Traffic {
    pub status_requests: u64,
    pub update_requests: u64,
    pub delete_requests: u64,
    pub heartbeats: u64,
}

struct State {
    rng: StdRng,
    workers: Vec<Worker>,
    record: Record,
    /// Upstream tasks the coordinator's root reads, by stage (pipelined).
    root_sources: BTreeMap<usize, Arc<Vec<UpstreamTask>>>,
    root_complete: BTreeSet<usize>,
    root_cursor: Cursor,
    /// Injected failures per (stage, partition), held to the seed's budget.
    injected: BTreeMap<(usize, usize), usize>,
    ended: bool,
    /// Tasks per stage, kept as tasks come, move and go.
    counts: Vec<StageCount>,
    /// Bumped whenever an output may have become unreadable (a task failed or was
    /// removed, a worker died, an output was lost): readers then look again at the
    /// upstream tasks they had passed.
    breakage: u64,
    /// Source lists as the scheduler sends them, one copy shared by all readers of
    /// a stage: all-to-all lists are stages' tasks squared.
    interned: BTreeMap<usize, Arc<Vec<UpstreamTask>>>,
    /// Stages the fault-tolerant scheduler took into their consumer, as readers
    /// found them (`reads.rs`): stage -> the stage that runs its work.
    merged: BTreeMap<usize, usize>,
}

pub struct World {
    state: Mutex<State>,
    /// Woken on any change of a stage's tasks (index 0: the root's sources and its
    /// end). Waiters are woken in the order they began to wait: tokio's `watch` wakes
    /// its receivers in a random order, which no replay could follow.
    stage_changed: Vec<Arc<Notify>>,
    /// Woken with every bump of `State::breakage`.
    broken: Arc<Notify>,
    /// Real time spent in the simulated world while a scheduler was being polled
    /// (see `scale`): subtracted from the scheduler's own time.
    pub(super) clock: Mutex<CpuClock>,
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
    /// The task is gone from its worker.
    Gone,
}

/// Real time a scheduler's polls took, and the part of it spent in the world.
#[derive(Debug, Default)]
pub struct CpuClock {
    pub polling: Duration,
    pub in_world: Duration,
    inside: bool,
}

/// Notifications a waiter takes while the state they guard is locked, so that no
/// change between its look and its wait is missed.
#[derive(Default)]
pub(crate) struct Wake(Vec<Pin<Box<OwnedNotified>>>);

impl Wake {
    pub(crate) fn on(mut self, notify: &Arc<Notify>) -> Self {
        let mut next = Box::pin(notify.clone().notified_owned());
        next.as_mut().enable();
        self.0.push(next);
        self
    }

    pub(crate) async fn wait(self) {
        if self.0.is_empty() {
            return std::future::pending().await;
        }
        futures::future::select_all(self.0).await;
    }
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
            root_cursor: Cursor::default(),
            injected: BTreeMap::new(),
            ended: false,
            counts: vec![StageCount::default(); plan.fragments.len()],
            breakage: 0,
            interned: BTreeMap::new(),
            merged: BTreeMap::new(),
        };
        let world = Arc::new(World {
            state: Mutex::new(state),
            stage_changed: (0..plan.fragments.len()).map(|_| Arc::new(Notify::new())).collect(),
            broken: Arc::new(Notify::new()),
            clock: Mutex::new(CpuClock::default()),
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

    /// Wakes who waits on stage `stage` and on the task whose notify is given.
    fn touched(&self, stage: usize, task: Option<&Arc<Notify>>) {
        self.stage_changed[stage].notify_waiters();
        if let Some(n) = task {
            n.notify_waiters();
        }
    }

    /// An output may have become unreadable: readers look again.
    fn broke(&self, s: &mut State) {
        s.breakage += 1;
        self.broken.notify_waiters();
    }

    /// Runs `f`, the world's own work, outside a scheduler's measured time.
    pub(super) fn world_work<T>(&self, f: impl FnOnce() -> T) -> T {
        if !self.clock.lock().inside {
            return f();
        }
        let started = std::time::Instant::now();
        let out = f();
        self.clock.lock().in_world += started.elapsed();
        out
    }

    /// Polls `f` (a scheduler) counting the real time its polls take.
    pub async fn timed<F: std::future::Future>(&self, f: F) -> F::Output {
        let mut f = std::pin::pin!(f);
        std::future::poll_fn(|cx| {
            self.clock.lock().inside = true;
            let started = std::time::Instant::now();
            let out = f.as_mut().poll(cx);
            let mut clock = self.clock.lock();
            clock.polling += started.elapsed();
            clock.inside = false;
            out
        })
        .await
    }

    pub fn traffic(&self) -> Traffic {
        self.state.lock().record.traffic
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
        self.world_work(|| self.deliver(w, id, req))
    }

    fn deliver(self: &Arc<Self>, w: usize, id: &TaskId, req: &TaskUpdateRequest) -> Result<(), NetError> {
        let duplicate = {
            let mut s = self.state.lock();
            s.record.traffic.update_requests += 1;
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
        let State { rng, workers, record, counts, interned, .. } = &mut *guard;
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
                partition_bytes: partition_bytes(id, self.plan.fragments[id.stage].output),
                last_contact: now,
                notify: Arc::new(Notify::new()),
                cursor: Cursor::default(),
            };
            worker.tasks.insert(key.clone(), task);
            counts[id.stage].add(TaskState::Running);
            counts[id.stage].created += 1;
            record.tasks_created += 1;
            record.events.push((at, format!("created {id} on w{w}")));
        }
        let task = worker.tasks.get_mut(&key).expect("present");
        task.last_contact = now;
        for update in &req.sources {
            merge_sources(interned, &mut task.sources, &mut task.complete, update);
        }
        if !req.sources.is_empty() {
            task.cursor = Cursor::default();
        }
        let notify = task.notify.clone();
        drop(guard);
        if created {
            let world = self.clone();
            let id = id.clone();
            self.background.lock().spawn(async move { world.run_task(w, id).await });
        }
        self.touched(id.stage, Some(&notify));
    }

    /// The task's status as its worker answers a status request, and (for a long
    /// poll) the wake-up of its next change, taken with it.
    pub fn status(&self, w: usize, id: &TaskId) -> Result<(TaskStatus, Wake), NetError> {
        self.world_work(|| {
            let mut s = self.state.lock();
            self.reachable(&s, w)?;
            let worker = &mut s.workers[w];
            let node_id = worker.node.node_id.clone();
            let task = worker.tasks.get_mut(&id.to_string()).ok_or(NetError::NotFound)?;
            task.last_contact = Instant::now();
            Ok((status_of(task, &node_id), Wake::default().on(&task.notify)))
        })
    }

    pub fn count_status_request(&self) {
        self.state.lock().record.traffic.status_requests += 1;
    }

    /// Removes a task (abort or cancel), answering with its final status.
    pub fn delete(&self, w: usize, id: &TaskId, abort: bool) -> Result<TaskStatus, NetError> {
        let key = id.to_string();
        let status = self.world_work(|| {
            let mut guard = self.state.lock();
            let s = &mut *guard;
            s.record.traffic.delete_requests += 1;
            self.reachable(s, w)?;
            let worker = &mut s.workers[w];
            worker.removed.insert(key.clone());
            let node_id = worker.node.node_id.clone();
            let mut task = worker.tasks.remove(&key).ok_or(NetError::NotFound)?;
            s.counts[id.stage].remove(task.state);
            if !task.state.is_done() {
                task.state = match (abort, task.state) {
                    (true, _) => TaskState::Aborted,
                    (false, TaskState::Flushing) => TaskState::Finished,
                    (false, _) => TaskState::Canceled,
                };
                task.version += 1;
            }
            self.broke(s);
            drop(guard);
            self.touched(id.stage, Some(&task.notify));
            Ok(status_of(&task, &node_id))
        })?;
        self.event(format!("deleted {id} ({:?})", status.state));
        Ok(status)
    }

    /// Moves a task on, if it is still there and not yet done.
    fn set_state(&self, w: usize, id: &TaskId, state: TaskState, failure: Option<TaskFailure>) {
        let notify = {
            let mut guard = self.state.lock();
            let s = &mut *guard;
            match s.workers[w].tasks.get_mut(&id.to_string()) {
                Some(t) if !t.state.is_done() && t.state != state => {
                    s.counts[id.stage].remove(t.state);
                    s.counts[id.stage].add(state);
                    t.state = state;
                    t.failure = failure;
                    t.version += 1;
                    let notify = t.notify.clone();
                    if !done_producing(state) {
                        self.broke(s);
                    }
                    Some(notify)
                }
                _ => None,
            }
        };
        if let Some(notify) = notify {
            self.event(format!("{id} {state:?} on w{w}"));
            self.touched(id.stage, Some(&notify));
        }
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
                let (inputs, wake) = self.pipelined_inputs(Some((w, &id)));
                match inputs {
                    Inputs::Ready => {
                        self.check_pipelined_reads(w, &id);
                        break;
                    }
                    Inputs::Broken(f) => return self.set_state(w, &id, TaskState::Failed, Some(f)),
                    Inputs::Gone => return,
                    Inputs::Waiting => wake.wait().await,
                }
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
            match self.output_full(w, &id) {
                None => return,
                Some((false, _)) => break,
                Some((true, wake)) => wake.wait().await,
            }
        }
        if spool {
            return self.set_state(w, &id, TaskState::Finished, None);
        }
        self.set_state(w, &id, TaskState::Flushing, None);
        loop {
            match self.consumers_read(w, &id) {
                None => return,
                Some((true, _)) => return self.set_state(w, &id, TaskState::Finished, None),
                Some((false, wake)) => wake.wait().await,
            }
        }
    }

    /// How long the task works, and whether (after how long) it fails instead.
    fn draw_work(&self, w: usize, id: &TaskId) -> (Duration, Option<Duration>, bool) {
        let mut s = self.state.lock();
        let spool = s.workers[w].tasks.get(&id.to_string()).is_some_and(|t| t.spool);
        let (lo, hi) = self.params.task_ms;
        let mut work = Duration::from_millis(s.rng.random_range(lo..=hi));
        if let Some((slow, times)) = self.params.slow_worker {
            if slow == w {
                work = work.mul_f64(times);
            }
        }
        let used = s.injected.get(&(id.stage, id.task)).copied().unwrap_or(0);
        let fails = used < self.params.failures_per_partition && s.rng.random_bool(self.params.task_failure_rate);
        if fails {
            *s.injected.entry((id.stage, id.task)).or_default() += 1;
        }
        (work, fails.then(|| work.mul_f64(0.5)), spool)
    }

    /// Whether the task's output buffer holds it back (None: the task is gone).
    fn output_full(&self, w: usize, id: &TaskId) -> Option<(bool, Wake)> {
        let s = self.state.lock();
        let task = s.workers[w].tasks.get(&id.to_string())?;
        // A spooled output goes to disk: nothing holds its producer back.
        if !task.full || task.spool {
            return Some((false, Wake::default()));
        }
        // Unblocked once a consumer task exists (it reads, the buffer drains).
        let full = match self.plan.fragments[id.stage].consumer {
            Some(0) | None => return Some((false, Wake::default())),
            Some(c) => (s.counts[c].existing == 0).then_some(c),
        };
        Some(match full {
            Some(c) => (true, Wake::default().on(&task.notify).on(&self.stage_changed[c])),
            None => (false, Wake::default()),
        })
    }

    /// Whether every consumer of a pipelined task's output has read all of it (None:
    /// the task is gone). A consumer task done producing has read all its inputs,
    /// and pipelined consumers read every producer task.
    fn consumers_read(&self, w: usize, id: &TaskId) -> Option<(bool, Wake)> {
        let s = self.state.lock();
        let task = s.workers[w].tasks.get(&id.to_string())?;
        let (read, stage) = match self.plan.fragments[id.stage].consumer {
            // A root that stopped at its LIMIT never reads the rest.
            Some(0) | None => (s.record.root_done_at.is_some() && !self.params.root_limit, 0),
            Some(c) => {
                let n = s.counts[c];
                (n.existing > 0 && n.producing_done == n.existing, c)
            }
        };
        Some((read, Wake::default().on(&task.notify).on(&self.stage_changed[stage])))
    }
}

/// Adds an update's upstream tasks to what a reader knows, each once (updates may
/// come twice), and marks the stage complete when the update says so. A first list
/// equal to the one other readers got is shared with them.
fn merge_sources(
    interned: &mut BTreeMap<usize, Arc<Vec<UpstreamTask>>>,
    sources: &mut BTreeMap<usize, Arc<Vec<UpstreamTask>>>,
    complete: &mut BTreeSet<usize>,
    update: &SourceUpdate,
) {
    let known = sources.entry(update.stage).or_default();
    let shared = interned.get(&update.stage).filter(|l| l.as_slice() == update.tasks.as_slice());
    match shared {
        Some(list) if known.is_empty() => *known = list.clone(),
        _ => {
            let mut list: Vec<UpstreamTask> = known.as_ref().clone();
            let mut seen: std::collections::HashSet<TaskId> = list.iter().map(|u| u.task_id.clone()).collect();
            let before = list.len();
            for t in &update.tasks {
                // Known by id; an id seen before with another place or other
                // partitions is kept, for the readers' checks to report.
                if seen.insert(t.task_id.clone()) || !list.contains(t) {
                    list.push(t.clone());
                }
            }
            let fresh = before == 0 && list.as_slice() == update.tasks.as_slice();
            *known = Arc::new(list);
            if fresh {
                interned.insert(update.stage, known.clone());
            }
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
        stats: TaskStats {
            output_partition_bytes: match task.state {
                TaskState::Finished => task.partition_bytes.clone(),
                _ => Vec::new(),
            },
            ..TaskStats::default()
        },
    }
}

/// Bytes task `id` writes to each partition of a partitioned output: up to 256 KiB,
/// mixed by the task and the partition so that stages differ.
fn partition_bytes(id: &TaskId, output: crate::plan::fragmenter::FragmentOutput) -> Vec<u64> {
    let crate::plan::fragmenter::FragmentOutput::Repartition { partitions } = output else { return Vec::new() };
    let mix = |p: usize| {
        let x = (id.stage as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ ((id.task * 31 + p) as u64);
        x.wrapping_mul(0xBF58_476D_1CE4_E5B9) >> 46
    };
    (0..partitions).map(mix).collect()
}
