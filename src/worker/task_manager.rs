//! `SqlTaskManager`: the tasks of one worker, by id. Creates a task on its first update,
//! forwards later updates (new upstream locations), and removes a task when the
//! coordinator deletes it, freeing its buffers. The task API handlers call it.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use datafusion::execution::TaskContext;
use datafusion::prelude::{SessionConfig, SessionContext};
use parking_lot::RwLock;

use super::failure_injector::{FailureInjector, InjectedFailureKind};
use super::task::{SqlTask, TaskSettings, TaskStart};
use super::WorkerError;
use crate::codec::FlotillaCodec;
use crate::exchange::client::{ExchangeClient, ExchangeConfig, ExchangeStats};
use crate::exchange::local::{LocalFetch, LocalResults};
use crate::exchange::output_buffer::BufferResult;
use crate::exchange::spool::SpoolWriter;
use crate::protocol::{NodeInfo, TaskId, TaskInfo, TaskStatus, TaskUpdateRequest};

pub struct SqlTaskManager {
    node_id: String,
    url: String,
    tasks: RwLock<HashMap<TaskId, Arc<SqlTask>>>,
    http: reqwest::Client,
    defaults: TaskSettings,
    exchange: ExchangeConfig,
    started: Instant,
    /// Function registry and runtime shared by every task: building a session per
    /// task would dominate the cost of creating small tasks.
    base: Arc<TaskContext>,
    /// The worker's memory pool and spill directory, and each query's share here.
    memory: super::memory::WorkerMemory,
    pub injector: Option<Arc<FailureInjector>>,
    /// Set by a graceful shutdown.
    shutting_down: tokio::sync::watch::Sender<bool>,
    /// Decodes fragments, scans of the worker's catalogs included.
    codec: FlotillaCodec,
    /// Ids of tasks being created (outside the task map's lock).
    creating: parking_lot::Mutex<std::collections::HashSet<TaskId>>,
    /// Ids deleted before their task existed here: a delete that overtook its create
    /// (the coordinator gave up on the query while the create was on its way, or
    /// while it was being built) makes the create refuse instead of leaving a task
    /// nobody will delete. Both sides look under the task map's write lock.
    tombstones: parking_lot::Mutex<Tombstones>,
    /// This worker's spool directory; a spooled task writes below it.
    spool_root: std::path::PathBuf,
    /// The rows of `memory` tables this worker holds; tasks reach it through their
    /// session config.
    memory_fragments: Arc<crate::connector::memory::fragments::MemoryFragments>,
    /// The coordinator process last heard of (`coordinator_is`).
    coordinator: parking_lot::Mutex<Option<String>>,
}

impl SqlTaskManager {
    pub fn new(
        node_id: String,
        url: String,
        http: reqwest::Client,
        config: &super::WorkerConfig,
        injector: Option<Arc<FailureInjector>>,
        spool_root: std::path::PathBuf,
        memory: super::memory::WorkerMemory,
    ) -> Self {
        let (defaults, exchange) = (config.settings.clone(), config.exchange.clone());
        let mut base = SessionContext::new_with_config_rt(SessionConfig::new(), config.connectors.runtime());
        crate::functions::register(&mut base).expect("registering functions cannot fail");
        crate::connector::register_functions(&mut base).expect("registering functions cannot fail");
        // Plans name Trino's checked arithmetic and sum (`plan::checked_arithmetic`).
        crate::plan::checked_arithmetic::register(&base);
        let base = base.task_ctx();
        let memory_fragments =
            Arc::new(crate::connector::memory::fragments::MemoryFragments::new(&url, memory.pool(), http.clone()));
        SqlTaskManager {
            memory_fragments,
            node_id,
            url,
            tasks: RwLock::new(HashMap::new()),
            http,
            defaults,
            exchange,
            started: Instant::now(),
            base,
            codec: FlotillaCodec::new(config.connectors.clone()),
            shutting_down: tokio::sync::watch::channel(false).0,
            memory,
            injector,
            creating: Default::default(),
            tombstones: Default::default(),
            spool_root,
            coordinator: Default::default(),
        }
    }

    /// Starts a graceful shutdown: no task of a new query from now on.
    pub fn begin_shutdown(&self) {
        self.shutting_down.send_replace(true);
    }

    pub fn is_shutting_down(&self) -> bool {
        *self.shutting_down.borrow()
    }

    /// Resolves once a graceful shutdown has begun.
    pub async fn shutdown_requested(&self) {
        let mut rx = self.shutting_down.subscribe();
        let _ = rx.wait_for(|s| *s).await;
    }

    /// Removes the worker's spool and spill directories (at shutdown, with every
    /// task aborted).
    pub fn remove_worker_dirs(&self) {
        let _ = std::fs::remove_dir_all(&self.spool_root);
        self.memory.remove_spill_dir();
    }

    pub fn node_id(&self) -> &str {
        &self.node_id
    }

    /// The task, marked as asked about (see `expire_abandoned`).
    pub fn get(&self, id: &TaskId) -> Result<Arc<SqlTask>, WorkerError> {
        let task = self.tasks.read().get(id).cloned().ok_or_else(|| WorkerError::TaskNotFound(id.clone()))?;
        task.touch();
        Ok(task)
    }

    /// Fails (`ABANDONED_TASK`) and forgets every task no client has asked about for
    /// `timeout` (Trino's `task.client.timeout`): its coordinator is gone (killed,
    /// restarted) or lost track of it. The coordinator polls each task it owns until
    /// its query ends, so a live query's tasks are never idle that long.
    pub fn expire_abandoned(&self, timeout: Duration) {
        let expired: Vec<Arc<SqlTask>> =
            self.tasks.write().extract_if(|_, t| t.idle() > timeout).map(|(_, t)| t).collect();
        for t in &expired {
            tracing::warn!(task = %t.id(), "no client asked about the task for {timeout:?}; abandoning it");
            if t.state().is_done() {
                t.release();
            } else {
                t.abandon(timeout);
            }
        }
    }

    /// Creates the task on its first request, or applies an update to it.
    pub fn update(&self, id: TaskId, req: TaskUpdateRequest) -> Result<TaskInfo, WorkerError> {
        if let Some(task) = self.tasks.read().get(&id).cloned() {
            task.touch();
            task.add_sources(req.sources);
            return Ok(task.info());
        }
        // Draining: the queries already here may still add tasks (a later phase), a
        // new query goes elsewhere.
        if self.is_shutting_down() && !self.tasks.read().keys().any(|t| t.query_id == id.query_id) {
            return Err(WorkerError::ShuttingDown(format!(
                "worker {} is shutting down and takes no task of a new query",
                self.node_id
            )));
        }
        // One create per id at a time: a second one (a retry racing the first) would
        // make the same spool directory. It is told to come back.
        let _creating = match Creating::claim(&self.creating, &id) {
            Some(claim) => claim,
            None => return Err(WorkerError::Busy(format!("task {id} is being created"))),
        };
        if let Some(task) = self.tasks.read().get(&id).cloned() {
            return Ok(task.info());
        }
        if self.tombstones.lock().contains(&id) {
            return Err(WorkerError::BadRequest(format!("task {id} was deleted before it was created")));
        }
        let fragment = req.fragment.ok_or_else(|| {
            WorkerError::BadRequest(format!("task {id} does not exist and the request has no fragment"))
        })?;
        let spec =
            req.output.ok_or_else(|| WorkerError::BadRequest("a new task needs an output buffer spec".into()))?;
        if req.partitions.is_empty() {
            return Err(WorkerError::BadRequest("a new task needs at least one partition".into()));
        }
        // Checked here too: a request that skipped the coordinator is held to the same
        // ranges (a batch of 10^12 rows would abort the worker on allocation).
        let props = crate::config::SessionProperties::parse(&req.session).map_err(WorkerError::BadRequest)?;
        let settings = TaskSettings::from_properties(&props, &self.defaults);
        let exchange = self.exchange.with_properties(&props);
        let input_stats = Arc::new(ExchangeStats::default());
        let client = ExchangeClient::new(self.http.clone(), exchange, input_stats.clone());
        let limit = props.query_max_memory_per_node.map(|b| b as usize);
        let (runtime, memory) =
            self.memory.task_runtime(&id.query_id, limit).map_err(|e| WorkerError::BadRequest(e.to_string()))?;
        let task_ctx = self.task_context(settings.batch_size, runtime);
        // Decoding a plan and creating a spool take a while; they happen outside the
        // worker-wide lock so that status and results requests of other tasks go on.
        // A disk problem is this worker's, not the plan's: a 5xx the coordinator
        // retries, and in the end another attempt elsewhere.
        let spool = match req.spool {
            true => {
                let broadcast = matches!(spec, crate::protocol::OutputBufferSpec::Broadcast { .. });
                let writer = SpoolWriter::create(self.spool_root.join(id.to_string()), broadcast)
                    .map_err(|e| WorkerError::Spool(e.to_string()))?;
                Some(Arc::new(writer))
            }
            false => None,
        };
        let fail_injected =
            self.injector.as_ref().is_some_and(|i| i.find(&id, |k| k == InjectedFailureKind::TaskFailure).is_some());
        let batch_delay = self.injector.as_ref().and_then(|i| i.batch_delay(&id));
        let started = SqlTask::start(TaskStart {
            id: id.clone(),
            node_id: self.node_id.clone(),
            fragment: fragment.0,
            partitions: req.partitions,
            task_index: req.task_index,
            spec,
            sources: req.sources,
            settings,
            client,
            input_stats,
            task_ctx,
            spool: spool.clone(),
            codec: self.codec.clone(),
            memory,
            fail_injected,
            batch_delay,
        });
        let task = match started {
            Ok(task) => task,
            Err(e) => {
                if let Some(s) = spool {
                    s.remove();
                }
                return Err(WorkerError::BadPlan(e.to_string()));
            }
        };
        let info = task.info();
        let mut tasks = self.tasks.write();
        if self.tombstones.lock().contains(&id) {
            drop(tasks);
            task.abort(false);
            return Err(WorkerError::BadRequest(format!("task {id} was deleted while it was being created")));
        }
        tasks.insert(id, task);
        Ok(info)
    }

    /// A task's context: the worker's functions, and a runtime whose memory pool is
    /// the task's own share of the worker's.
    fn task_context(
        &self,
        batch_size: usize,
        runtime: Arc<datafusion::execution::runtime_env::RuntimeEnv>,
    ) -> Arc<TaskContext> {
        let mut config = SessionConfig::new().with_batch_size(batch_size);
        // A task runs only some partitions of a file scan; with work stealing they
        // would also read the file groups of partitions other tasks own.
        config.options_mut().execution.enable_file_stream_work_stealing = false;
        // Nor may its hash joins wait for partitions other tasks run; `task_plan`
        // turns their dynamic filters on where the task's plan allows.
        config.options_mut().optimizer.enable_join_dynamic_filter_pushdown = false;
        let config = config.with_extension(self.memory_fragments.clone());
        super::task::derived_context(&self.base, config, runtime)
    }

    /// The rows of `memory` tables held here.
    pub fn memory_fragments(&self) -> &crate::connector::memory::fragments::MemoryFragments {
        &self.memory_fragments
    }

    /// The worker's memory: its pool, spill directory and limits.
    pub fn memory(&self) -> &super::memory::WorkerMemory {
        &self.memory
    }

    /// Ends and forgets a task; its final status is returned so the coordinator learns
    /// a failure it may not have polled yet.
    pub fn delete(&self, id: &TaskId, abort: bool) -> Result<TaskStatus, WorkerError> {
        let task = {
            let mut tasks = self.tasks.write();
            match tasks.remove(id) {
                Some(task) => task,
                None => {
                    self.tombstones.lock().insert(id.clone());
                    return Err(WorkerError::TaskNotFound(id.clone()));
                }
            }
        };
        if !task.state().is_done() {
            task.end(abort);
        } else {
            task.release();
        }
        Ok(task.status())
    }

    /// Hears which coordinator process is the cluster's, from its answer to the
    /// heartbeat (its incarnation ends every query id it makes). A new one means the
    /// one before died or restarted and its queries with it: their tasks are aborted
    /// (their writers stop making staging directories) and the memory table fragments
    /// they wrote are dropped, since nobody can read or drop them any more. Answers how
    /// many tasks and fragments went.
    pub fn coordinator_is(&self, incarnation: &str) -> (usize, usize) {
        let before = self.coordinator.lock().replace(incarnation.to_string());
        let Some(before) = before.filter(|b| b != incarnation) else { return (0, 0) };
        let ours = |query_id: &str| query_id.rsplit('_').next() == Some(incarnation);
        let stale: Vec<TaskId> = self.tasks.read().keys().filter(|id| !ours(&id.query_id)).cloned().collect();
        for id in &stale {
            let _ = self.delete(id, true);
        }
        let dropped = self.memory_fragments.drop_unless(&|query_id| ours(query_id));
        tracing::warn!(
            "the coordinator restarted ({before} before, {incarnation} now): aborted {} tasks and dropped {dropped} \
             memory table fragments of the queries of the one before",
            stale.len()
        );
        (stale.len(), dropped)
    }

    /// Whether the worker holds no task.
    pub fn is_idle(&self) -> bool {
        self.tasks.read().is_empty()
    }

    pub fn list(&self) -> Vec<TaskStatus> {
        let mut v: Vec<TaskStatus> = self.tasks.read().values().map(|t| t.status()).collect();
        v.sort_by(|a, b| a.task_id.cmp(&b.task_id));
        v
    }

    /// Bytes in all tasks' output buffers.
    pub fn buffered_bytes(&self) -> u64 {
        self.tasks.read().values().map(|t| t.buffered_bytes()).sum()
    }

    pub fn node_info(&self) -> NodeInfo {
        // Walks the allocator's arenas: not under the task table's lock.
        let heap_used = crate::util::heap_used_bytes();
        let tasks = self.tasks.read();
        NodeInfo {
            node_id: self.node_id.clone(),
            url: self.url.clone(),
            version: env!("CARGO_PKG_VERSION").to_string(),
            tasks: tasks.len(),
            running_tasks: tasks.values().filter(|t| !t.state().is_done()).count(),
            buffered_bytes: tasks.values().map(|t| t.buffered_bytes()).sum(),
            uptime_ms: self.started.elapsed().as_millis() as u64,
            heap_used,
        }
    }

    /// Applies an injected request failure for `id`, if one of `wanted` is set:
    /// an error at once, or one after a hang longer than any client waits.
    pub async fn injected(&self, id: &TaskId, wanted: fn(InjectedFailureKind) -> bool) -> Result<(), WorkerError> {
        let Some(kind) = self.injector.as_ref().and_then(|i| i.find(id, wanted)) else { return Ok(()) };
        if kind.is_timeout() {
            tokio::time::sleep(super::failure_injector::INJECTED_TIMEOUT).await;
        }
        Err(WorkerError::Injected(kind))
    }

    /// A results request, from HTTP or from a consumer in this process: the pages
    /// from `token` on, or why there are none (`TaskFailed` for a task that failed
    /// or whose spooled output is gone, checked before and after the long poll).
    pub async fn read_results(
        &self,
        id: &TaskId,
        buffer: usize,
        token: u64,
        max_bytes: u64,
        max_wait: Duration,
    ) -> Result<BufferResult, WorkerError> {
        self.injected(id, InjectedFailureKind::is_get_results).await?;
        let task = self.get(id)?;
        let failed = |task: &SqlTask| {
            task.reader_failure().map(|(code, message)| WorkerError::TaskFailed { task: id.clone(), code, message })
        };
        if let Some(e) = failed(&task) {
            return Err(e);
        }
        let result = task.results(buffer, token, max_bytes, max_wait).await?;
        // A long poll is contact at both ends: its client is waiting all along.
        task.touch();
        match failed(&task) {
            Some(e) => Err(e),
            None => Ok(result),
        }
    }

    /// Aborts every task (worker shutdown).
    pub fn abort_all(&self) {
        let all: Vec<Arc<SqlTask>> = self.tasks.write().drain().map(|(_, t)| t).collect();
        for t in all {
            t.abort(false);
        }
    }
}

/// A claim on creating one task id, released when dropped.
struct Creating<'a> {
    set: &'a parking_lot::Mutex<std::collections::HashSet<TaskId>>,
    id: TaskId,
}

impl<'a> Creating<'a> {
    fn claim(set: &'a parking_lot::Mutex<std::collections::HashSet<TaskId>>, id: &TaskId) -> Option<Self> {
        set.lock().insert(id.clone()).then(|| Creating { set, id: id.clone() })
    }
}

impl Drop for Creating<'_> {
    fn drop(&mut self) {
        self.set.lock().remove(&self.id);
    }
}

#[async_trait::async_trait]
impl LocalResults for SqlTaskManager {
    async fn results(
        &self,
        task: &TaskId,
        buffer: usize,
        token: u64,
        max_bytes: u64,
        max_wait: Duration,
    ) -> LocalFetch {
        use crate::http::ApiError;
        match self.read_results(task, buffer, token, max_bytes, max_wait).await {
            Ok(result) => LocalFetch::Pages(result),
            Err(e) if matches!(e, WorkerError::TaskFailed { .. }) || e.status().is_client_error() => {
                let cause = e.failed_task_code().cloned();
                LocalFetch::Failed { code: e.code().into(), cause, message: e.to_string() }
            }
            Err(e) => LocalFetch::Transient(format!("{}: {e}", e.status())),
        }
    }

    fn destroy_buffer(&self, task: &TaskId, buffer: usize) {
        if let Ok(t) = self.get(task) {
            let _ = t.destroy_buffer(buffer);
        }
    }
}

/// Task ids deleted before they existed, kept `TOMBSTONE_LIFE` (longer than any
/// create retries) and at most `MAX_TOMBSTONES`, oldest forgotten first.
#[derive(Debug, Default)]
struct Tombstones {
    ids: HashMap<TaskId, Instant>,
}

const TOMBSTONE_LIFE: std::time::Duration = std::time::Duration::from_secs(300);
const MAX_TOMBSTONES: usize = 100_000;

impl Tombstones {
    fn insert(&mut self, id: TaskId) {
        if self.ids.len() >= MAX_TOMBSTONES {
            self.ids.retain(|_, at| at.elapsed() < TOMBSTONE_LIFE);
            if self.ids.len() >= MAX_TOMBSTONES {
                let oldest = self.ids.iter().min_by_key(|(_, at)| **at).map(|(id, _)| id.clone());
                if let Some(id) = oldest {
                    self.ids.remove(&id);
                }
            }
        }
        self.ids.insert(id, Instant::now());
    }

    fn contains(&self, id: &TaskId) -> bool {
        self.ids.get(id).is_some_and(|at| at.elapsed() < TOMBSTONE_LIFE)
    }
}
