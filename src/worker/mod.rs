//! The worker: an axum server exposing the task API of docs/architecture.md over a
//! `SqlTaskManager`, plus the heartbeat that announces the worker to its coordinator.
//! Started by `flotilla worker` and, several times in one process, by `flotilla local`.

pub mod api;
pub mod budgeted;
pub mod failure_injector;
pub mod heartbeat;
pub mod memory;
pub mod task;
pub mod task_manager;
pub mod task_output;
mod task_plan;

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

use crate::connector::Connectors;
use crate::error_code::{ApiCode, FailureCode};
use crate::exchange::client::ExchangeConfig;
use crate::http::ApiError;
use crate::protocol::{Announcement, TaskId};
use task::TaskSettings;
use task_manager::SqlTaskManager;

#[derive(Debug, thiserror::Error)]
pub enum WorkerError {
    #[error("unknown task {0}")]
    TaskNotFound(TaskId),
    #[error("{0}")]
    BadRequest(String),
    #[error("fragment cannot be run: {0}")]
    BadPlan(String),
    #[error("{0}")]
    Buffer(#[from] crate::exchange::output_buffer::BufferError),
    #[error("task {task} failed: {message}")]
    TaskFailed { task: TaskId, code: FailureCode, message: String },
    #[error("injected failure: {0:?}")]
    Injected(failure_injector::InjectedFailureKind),
    #[error("cannot read spooled output: {0}")]
    Spool(String),
    #[error("cannot encode a results page: {0}")]
    Encode(String),
    /// Try again shortly (a create of the same task is under way).
    #[error("{0}")]
    Busy(String),
    /// Shutting down gracefully: no task of a new query.
    #[error("{0}")]
    ShuttingDown(String),
    /// The task has no such dynamic filter, not yet (its plan still runs), or no
    /// longer (it had too many keys).
    #[error("task {task} has no dynamic filter {filter}")]
    NoDynamicFilter { task: TaskId, filter: usize },
    /// A `memory` table fragment this worker does not hold (it restarted since).
    #[error("no memory table fragment {0} here")]
    NoMemoryFragment(String),
}

impl WorkerError {
    /// A failed task's own error code, which a reader of it is told (it may be all
    /// anyone hears of the cause).
    pub fn failed_task_code(&self) -> Option<&FailureCode> {
        match self {
            WorkerError::TaskFailed { code, .. } => Some(code),
            _ => None,
        }
    }
}

impl ApiError for WorkerError {
    fn code(&self) -> ApiCode {
        match self {
            WorkerError::TaskNotFound(_) => ApiCode::TaskNotFound,
            WorkerError::BadRequest(_) => ApiCode::BadRequest,
            WorkerError::BadPlan(_) => ApiCode::BadPlan,
            WorkerError::Buffer(_) => ApiCode::BadBufferRequest,
            WorkerError::TaskFailed { .. } => ApiCode::TaskFailed,
            WorkerError::Injected(_) => ApiCode::InjectedFailure,
            WorkerError::Spool(_) => ApiCode::SpoolError,
            WorkerError::Encode(_) => ApiCode::PageEncodingError,
            WorkerError::Busy(_) => ApiCode::TaskBeingCreated,
            WorkerError::ShuttingDown(_) => ApiCode::ServerShuttingDown,
            WorkerError::NoDynamicFilter { .. } => ApiCode::NoDynamicFilter,
            WorkerError::NoMemoryFragment(_) => ApiCode::NoMemoryFragment,
        }
    }
}

impl axum::response::IntoResponse for WorkerError {
    fn into_response(self) -> axum::response::Response {
        crate::http::error_response(&self)
    }
}

/// Largest task update accepted: plans carry their literals.
pub const MAX_TASK_UPDATE_BYTES: usize = 512 << 20;

#[derive(Debug, Clone)]
pub struct WorkerConfig {
    pub bind: String,
    pub coordinator: String,
    pub heartbeat: Duration,
    pub settings: TaskSettings,
    pub exchange: ExchangeConfig,
    /// Accept injected failures (`POST /v1/failure-injection`); tests only.
    pub enable_failure_injection: bool,
    /// Shared secret of internal requests, sent and required.
    pub shared_secret: Option<String>,
    /// Where spooled task output goes; each worker uses a directory of its own below.
    pub spool_root: std::path::PathBuf,
    /// A task no client asked about for this long is abandoned (`task.client.timeout`).
    pub task_client_timeout: Duration,
    /// `node.id`; generated per start when not configured.
    pub node_id: Option<String>,
    /// `node.environment`, announced: the coordinator takes only its own.
    pub environment: String,
    /// The URL announced to the coordinator (`node.internal-address`); by default the
    /// bound address, a wildcard replaced by the host's address.
    pub advertise: Option<String>,
    /// The catalogs, to decode their scans.
    pub connectors: Connectors,
    /// The catalogs are the built-in ones and no flag says where the `files`
    /// catalog's tables are: open files where the coordinator's are
    /// (`AnnouncementAnswer::files_directories`).
    pub adopt_coordinator_files: bool,
    /// Serve without a shared secret on a non-loopback address (explicitly insecure).
    pub insecure_internal: bool,
    /// How long a graceful shutdown waits for the worker's tasks before it aborts
    /// them (Trino's `shutdown.grace-period`).
    pub shutdown_grace_period: Duration,
    /// Serve HTTPS with this certificate (`http-server.https.*`).
    pub tls: Option<crate::tls::TlsConfig>,
    /// CA certificates internal requests trust besides the system's.
    pub truststore: Option<std::path::PathBuf>,
    /// The memory pool, spill directory and per-query limit.
    pub memory: memory::MemorySettings,
}

impl WorkerConfig {
    pub fn new(bind: &str, coordinator: &str) -> Self {
        WorkerConfig {
            bind: bind.to_string(),
            coordinator: coordinator.trim_end_matches('/').to_string(),
            heartbeat: Duration::from_millis(500),
            settings: TaskSettings { batch_size: 8192, output_buffer_bytes: 32 << 20 },
            exchange: ExchangeConfig::default(),
            enable_failure_injection: false,
            shared_secret: None,
            spool_root: std::env::temp_dir().join("flotilla-spool"),
            task_client_timeout: Duration::from_secs(120),
            node_id: None,
            environment: crate::etc::DEFAULT_ENVIRONMENT.to_string(),
            advertise: None,
            connectors: Connectors::builtin(),
            adopt_coordinator_files: false,
            insecure_internal: false,
            shutdown_grace_period: Duration::from_secs(120),
            tls: None,
            truststore: None,
            memory: memory::MemorySettings::default_for_machine(std::env::temp_dir().join("flotilla-spill")),
        }
    }
}

impl WorkerConfig {
    /// The worker a configuration directory describes (flags may override it).
    pub fn from_etc(etc: &crate::etc::Etc) -> Result<Self, String> {
        if etc.server.coordinator == Some(true) {
            return Err(format!(
                "{}/config.properties says coordinator=true: start this node with `flotilla coordinator`",
                etc.dir.display()
            ));
        }
        let coordinator = etc.server.discovery_uri.clone().unwrap_or_default();
        let port = match &etc.server.tls {
            Some(_) => etc.server.https_port.unwrap_or(8444),
            None => etc.server.http_port.unwrap_or(8081),
        };
        let mut c = WorkerConfig::new(&format!("0.0.0.0:{port}"), &coordinator);
        c.tls = etc.server.tls.clone();
        c.truststore = etc.server.truststore.clone();
        if etc.server.https_required == Some(true) && c.tls.is_none() {
            return Err("internal-communication.https.required needs http-server.https.enabled on this worker".into());
        }
        if let Some(t) = etc.server.task_client_timeout {
            c.task_client_timeout = t;
        }
        if let Some(b) = etc.server.output_buffer_max_bytes {
            c.settings.output_buffer_bytes = b;
        }
        if let Some(dir) = &etc.server.spool_dir {
            c.spool_root = dir.clone();
        }
        if let Some(g) = etc.server.shutdown_grace_period {
            c.shutdown_grace_period = g;
        }
        if let Some(headroom) = etc.server.memory_heap_headroom {
            c.memory.pool_bytes = (memory::available_memory().saturating_sub(headroom) as usize).max(64 << 20);
            c.memory.query_max_per_node = c.memory.pool_bytes;
        }
        if let Some(q) = etc.server.query_max_memory_per_node {
            c.memory.query_max_per_node = q as usize;
        }
        if let Some(dir) = &etc.server.spill_path {
            c.memory.spill_path = dir.clone();
        }
        if let Some(m) = etc.server.max_spill_per_node {
            c.memory.max_spill_bytes = m;
        }
        c.shared_secret = etc.server.shared_secret.clone();
        c.node_id = Some(etc.node.id.clone());
        c.environment = etc.node.environment.clone();
        c.advertise = etc.node.internal_address.clone();
        if !etc.catalogs.is_empty() {
            c.connectors = Connectors::from_catalogs(&etc.catalogs, None).map_err(|e| e.to_string())?;
        }
        Ok(c)
    }
}

/// A running worker; dropping the handle does not stop it, `shutdown` does.
pub struct WorkerHandle {
    pub url: String,
    pub node_id: String,
    pub manager: Arc<SqlTaskManager>,
    grace: Duration,
    stop: watch::Sender<bool>,
    server: tokio::task::JoinHandle<()>,
    local: crate::exchange::local::LocalExchanges,
}

impl WorkerHandle {
    /// Starts a graceful shutdown (as `PUT /v1/info/state "SHUTTING_DOWN"` does).
    pub fn begin_shutdown(&self) {
        self.manager.begin_shutdown();
    }

    /// Resolves once a graceful shutdown has begun and the worker holds no task any
    /// more (every query that used it has ended), or the grace period has passed.
    pub async fn drained(&self) {
        self.manager.shutdown_requested().await;
        let deadline = tokio::time::Instant::now() + self.grace;
        while tokio::time::Instant::now() < deadline && !self.manager.list().is_empty() {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    pub async fn shutdown(self) {
        self.local.unregister(&self.url);
        self.manager.abort_all();
        self.manager.remove_worker_dirs();
        let _ = self.stop.send(true);
        let _ = self.server.await;
    }
}

/// Binds, starts serving and starts announcing to the coordinator.
pub async fn start_worker(config: WorkerConfig) -> std::io::Result<WorkerHandle> {
    let listener = crate::http::bind(&config.bind).await?;
    let addr = listener.local_addr()?;
    crate::http::check_internal_exposure(addr, config.shared_secret.is_some(), config.insecure_internal)?;
    let tls = config.tls.as_ref().map(|t| t.server_config()).transpose()?;
    let roots = config.truststore.as_deref().map(crate::tls::read_ca).transpose()?.unwrap_or_default();
    let scheme = if tls.is_some() { "https" } else { "http" };
    let url = crate::util::announced_url(scheme, addr, config.advertise.as_deref());
    let node_id =
        config.node_id.clone().unwrap_or_else(|| format!("worker-{}-{}", addr.port(), crate::util::random_suffix(4)));
    let http = crate::http::internal_client(config.shared_secret.as_deref(), &roots);
    let injector = config.enable_failure_injection.then(|| Arc::new(failure_injector::FailureInjector::default()));
    let spool_dir = config.spool_root.join(&node_id);
    crate::util::prepare_owned_dir(&spool_dir)?;
    config.connectors.warm_up();
    let memory = memory::WorkerMemory::new(config.memory.clone(), config.connectors.runtime(), &node_id)
        .map_err(std::io::Error::other)?;
    let manager =
        Arc::new(SqlTaskManager::new(node_id.clone(), url.clone(), http.clone(), &config, injector, spool_dir, memory));
    let local: std::sync::Weak<dyn crate::exchange::local::LocalResults> = Arc::downgrade(&manager) as _;
    config.exchange.local.register(&url, local);
    let auth = crate::http::InternalAuth(config.shared_secret.as_deref().map(Arc::from));
    // Scrapers do not carry the cluster secret; /metrics stays outside it.
    let app = api::router(manager.clone())
        .layer(axum::middleware::from_fn_with_state(auth, crate::http::require_internal))
        .merge(api::metrics_router(manager.clone()))
        // A fragment with large literals (a long IN list) is a large body.
        .layer(axum::extract::DefaultBodyLimit::max(MAX_TASK_UPDATE_BYTES))
        .layer(axum::middleware::from_fn(crate::http::json_errors));
    let (stop, mut stopped) = watch::channel(false);
    let mut stop_server = stop.subscribe();
    let server = tokio::spawn(async move {
        let shutdown = async move {
            let _ = stop_server.wait_for(|s| *s).await;
        };
        if let Err(e) = crate::http::serve(listener, tls, app, shutdown).await {
            tracing::error!("worker server failed: {e}");
        }
    });
    let reaper = manager.clone();
    let client_timeout = config.task_client_timeout;
    let period = (client_timeout / 4).clamp(Duration::from_millis(100), Duration::from_secs(5));
    crate::util::every(period, stop.subscribe(), move || reaper.expire_abandoned(client_timeout));
    let idle = manager.clone();
    let freed = crate::util::FreedMemory::default();
    crate::util::every(Duration::from_secs(1), stop.subscribe(), move || freed.trim_if_idle(idle.is_idle()));
    let mut announcement = Announcement {
        node_id: node_id.clone(),
        url: url.clone(),
        environment: Some(config.environment.clone()),
        shutting_down: false,
        query_memory: Default::default(),
        query_memory_capacity: config.memory.query_max_per_node.min(config.memory.pool_bytes) as u64,
    };
    let target = format!("{}/v1/announcement", config.coordinator);
    let (adopt_files, connectors) = (config.adopt_coordinator_files, config.connectors.clone());
    let period = config.heartbeat;
    let draining = manager.clone();
    tokio::spawn(async move {
        let mut log = heartbeat::HeartbeatLog::default();
        loop {
            announcement.shutting_down = draining.is_shutting_down();
            announcement.query_memory = draining.memory().query_reservations();
            let sent = http.post(&target).json(&announcement).timeout(Duration::from_secs(2)).send().await;
            let notice = match sent {
                Ok(r) if r.status().is_success() => {
                    let answer = r.json::<crate::protocol::AnnouncementAnswer>().await.unwrap_or_default();
                    if let Some(incarnation) = answer.coordinator_incarnation {
                        draining.coordinator_is(&incarnation);
                    }
                    if adopt_files {
                        let dirs: Vec<std::path::PathBuf> = answer.files_directories.iter().map(Into::into).collect();
                        for d in connectors.adopt_directories(&dirs) {
                            tracing::info!("files under {} are opened here too: the coordinator's files catalog keeps tables there", d.display());
                        }
                    }
                    log.succeeded()
                }
                Ok(r) => {
                    let status = r.status();
                    let body = r.text().await.unwrap_or_default();
                    let cause = format!("{status}: {}", body.chars().take(300).collect::<String>());
                    log.failed(cause, std::time::Instant::now())
                }
                Err(e) => log.failed(heartbeat::with_sources(&e), std::time::Instant::now()),
            };
            match notice {
                heartbeat::HeartbeatNotice::Quiet => {}
                heartbeat::HeartbeatNotice::Failing { cause, repeated } => {
                    tracing::warn!("cannot announce this worker to {target} (attempt {repeated}): {cause}")
                }
                heartbeat::HeartbeatNotice::Joined { after_failures } => {
                    tracing::info!("announced to {target} (after {after_failures} failed attempts)")
                }
            }
            tokio::select! {
                _ = tokio::time::sleep(period) => {}
                _ = stopped.wait_for(|s| *s) => break,
            }
        }
    });
    let local = config.exchange.local.clone();
    Ok(WorkerHandle { url, node_id, manager, grace: config.shutdown_grace_period, stop, server, local })
}
