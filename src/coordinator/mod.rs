//! The coordinator: owns cluster membership (`NodeManager`), the queries
//! (`QueryExecution`, each with its own scheduler task) and the server of its HTTP
//! surface (routes and handlers in `api`, the statement protocol in `statement`).
//! Started by `flotilla coordinator` and by `flotilla local`.

pub mod admission;
mod api;
pub mod cluster_memory;
pub mod ddl;
mod describe;
mod dialect;
pub mod execution;
mod explain;
mod flight_sql;
mod merge;
pub mod metadata;
pub mod planner;
pub mod planning;
pub mod query;
mod query_errors;
mod relations;
pub mod remote_task;
pub mod root_stage;
mod row_changes;
pub mod session_bounds;
pub mod session_statement;
mod show_create;
mod show_functions;
mod show_stats;
pub mod spooling;
pub mod sql_parser;
pub mod staging;
mod stars;
pub mod statement;
mod system_tables;
pub mod table_commit;
pub mod table_locks;
pub mod transaction;
pub mod ui;
mod views;

use crate::error_code::{ApiCode, ErrorCode};
use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use axum::response::{IntoResponse, Response};
use parking_lot::RwLock;
use tokio::sync::watch;

use crate::cluster::node_manager::NodeManager;
use crate::connector::Connectors;
use crate::exchange::client::ExchangeConfig;
use crate::http::ApiError;
use crate::scheduling::node_scheduler::NodeScheduler;
use crate::scheduling::state_machine::StateKind;
use planner::SessionSpec;
use query::QueryExecution;

pub use api::Authenticated;

#[derive(Debug, thiserror::Error)]
pub enum CoordinatorError {
    #[error("unknown query {0}")]
    QueryNotFound(String),
    #[error("{0}")]
    BadRequest(String),
    /// A statement page that no longer exists (or never will).
    #[error("{0}")]
    Gone(String),
    #[error("{0}")]
    Internal(String),
    /// A worker of another `node.environment` announced itself.
    #[error("{0}")]
    WrongEnvironment(String),
    /// A worker announced a node id another live worker has.
    #[error("{0}")]
    DuplicateNodeId(String),
    /// No valid login (PASSWORD authentication).
    #[error("{0}")]
    Unauthenticated(String),
    #[error("{0}")]
    PermissionDenied(String),
    /// Logins refused for a while after failures (`security::throttle`).
    #[error("{0}")]
    TooManyFailedLogins(String),
}

impl ApiError for CoordinatorError {
    fn code(&self) -> ApiCode {
        match self {
            CoordinatorError::QueryNotFound(_) => ApiCode::QueryNotFound,
            CoordinatorError::BadRequest(_) => ApiCode::BadRequest,
            CoordinatorError::Gone(_) => ApiCode::InvalidToken,
            CoordinatorError::Internal(_) => ApiCode::InternalError,
            CoordinatorError::WrongEnvironment(_) => ApiCode::WrongEnvironment,
            CoordinatorError::DuplicateNodeId(_) => ApiCode::DuplicateNodeId,
            CoordinatorError::Unauthenticated(_) => ApiCode::Unauthenticated,
            CoordinatorError::PermissionDenied(_) => ApiCode::PermissionDenied,
            CoordinatorError::TooManyFailedLogins(_) => ApiCode::TooManyFailedLogins,
        }
    }
}

impl IntoResponse for CoordinatorError {
    fn into_response(self) -> Response {
        crate::http::error_response(&self)
    }
}

#[derive(Debug, Clone)]
pub struct CoordinatorConfig {
    pub bind: String,
    /// Silence after which a worker counts as lost.
    pub worker_timeout: Duration,
    /// Hash partitions per live worker (the query's H = workers x this).
    pub partitions_per_worker: usize,
    pub exchange: ExchangeConfig,
    /// Finished queries kept for `/v1/query`.
    pub max_history: usize,
    /// Shared secret of internal requests (announcements, task API).
    pub shared_secret: Option<String>,
    /// A query whose client has not asked for results this long is abandoned
    /// (Trino's `query.client.timeout`).
    pub query_client_timeout: Duration,
    /// Build `nextUri` from `X-Forwarded-Proto`/`-Host` (Trino's
    /// `http-server.process-forwarded`): only behind a proxy that sets them.
    pub process_forwarded: bool,
    /// Accept test-only failure hooks (a panic in a query runner).
    pub enable_failure_injection: bool,
    /// `node.environment`: workers of another environment are refused.
    pub environment: String,
    /// The catalogs.
    pub connectors: Connectors,
    /// Session property defaults from the configuration (a client's values win).
    pub session_defaults: BTreeMap<String, String>,
    /// Serve without a shared secret on a non-loopback address (explicitly insecure).
    pub insecure_internal: bool,
    /// Serve HTTPS with this certificate (`http-server.https.*`).
    pub tls: Option<crate::tls::TlsConfig>,
    /// CA certificates internal requests trust besides the system's
    /// (`internal-communication.https.truststore.path`).
    pub truststore: Option<std::path::PathBuf>,
    /// Take only workers that announce an `https://` address
    /// (`internal-communication.https.required`).
    pub https_required: bool,
    /// Password logins and access rules.
    pub security: crate::security::Security,
    /// `query.max-concurrent-queries` and `query.max-queued-queries`.
    pub admission: admission::AdmissionLimits,
    /// `query.max-memory`: what one query may hold over the cluster (no limit
    /// without it).
    pub query_max_memory: Option<u64>,
    /// Trino's spooling protocol (`protocol.spooling.*`, `spooling-manager.properties`).
    pub spooling: spooling::SpoolingConfig,
    /// Serve Arrow Flight SQL on this port of the bound address (`flight-sql.port`;
    /// 0: any free port).
    pub flight_sql_port: Option<u16>,
}

impl CoordinatorConfig {
    pub fn new(bind: &str) -> Self {
        let cores = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(2);
        CoordinatorConfig {
            bind: bind.to_string(),
            worker_timeout: Duration::from_secs(5),
            partitions_per_worker: cores.max(2),
            exchange: ExchangeConfig::default(),
            max_history: 200,
            shared_secret: None,
            query_client_timeout: Duration::from_secs(300),
            process_forwarded: false,
            enable_failure_injection: false,
            environment: crate::etc::DEFAULT_ENVIRONMENT.to_string(),
            connectors: Connectors::builtin(),
            session_defaults: BTreeMap::new(),
            insecure_internal: false,
            tls: None,
            truststore: None,
            https_required: false,
            security: Default::default(),
            admission: Default::default(),
            query_max_memory: None,
            spooling: Default::default(),
            flight_sql_port: None,
        }
    }
}

impl CoordinatorConfig {
    /// The coordinator a configuration directory describes (flags may override it).
    pub fn from_etc(etc: &crate::etc::Etc) -> Result<Self, String> {
        if etc.server.coordinator == Some(false) {
            return Err(format!(
                "{}/config.properties says coordinator=false: start this node with `flotilla worker`",
                etc.dir.display()
            ));
        }
        let port = match &etc.server.tls {
            Some(_) => etc.server.https_port.unwrap_or(8443),
            None => etc.server.http_port.unwrap_or(8080),
        };
        let mut c = CoordinatorConfig::new(&format!("0.0.0.0:{port}"));
        c.tls = etc.server.tls.clone();
        c.truststore = etc.server.truststore.clone();
        c.https_required = etc.server.https_required.unwrap_or(false);
        if let Some(t) = etc.server.worker_timeout {
            c.worker_timeout = t;
        }
        if let Some(t) = etc.server.query_client_timeout {
            c.query_client_timeout = t;
        }
        c.process_forwarded = etc.server.process_forwarded.unwrap_or(false);
        c.shared_secret = etc.server.shared_secret.clone();
        c.environment = etc.node.environment.clone();
        c.session_defaults = etc.server.session_defaults.clone();
        if let Some(n) = etc.server.max_concurrent_queries {
            c.admission.max_concurrent = Some(n);
        }
        if let Some(n) = etc.server.max_queued_queries {
            c.admission.max_queued = n;
        }
        c.query_max_memory = etc.server.query_max_memory;
        c.spooling = etc.server.spooling.clone();
        c.flight_sql_port = etc.server.flight_sql_port;
        c.security = crate::security::Security::load(
            etc.password_file.as_deref(),
            etc.access_rules.as_deref(),
            etc.group_file.as_deref(),
        )
        .map_err(|e| e.to_string())?;
        if !etc.catalogs.is_empty() {
            c.connectors =
                Connectors::from_catalogs(&etc.catalogs, etc.node.data_dir.as_deref()).map_err(|e| e.to_string())?;
        }
        Ok(c)
    }
}

/// How long an ended query's last page stays for a retried request.
const FINAL_PAGE_RETENTION: Duration = Duration::from_secs(60);

pub struct CoordinatorState {
    pub config: CoordinatorConfig,
    pub nodes: Arc<NodeManager>,
    pub node_scheduler: Arc<NodeScheduler>,
    pub http: reqwest::Client,
    /// Pulls of root stages from workers, on the compute runtime. A pool of its own:
    /// hyper drives a connection on the runtime that opened it, and control requests
    /// (status polls, deletes) must not ride on connections the busy compute threads drive.
    pub exchange_http: reqwest::Client,
    /// The catalogs, shared by every query's planning context (so external file
    /// tables stay), and the plan codec that ships their scans.
    pub connectors: Connectors,
    /// Slots for running queries, and the queue for them.
    pub admission: admission::Admission,
    /// What each query holds on each worker, from their heartbeats.
    pub cluster_memory: cluster_memory::ClusterMemoryManager,
    /// Workers refused (another environment, a live worker's node id), so each is
    /// logged once.
    refused: parking_lot::Mutex<std::collections::HashSet<String>>,
    queries: RwLock<BTreeMap<String, Arc<QueryExecution>>>,
    history: parking_lot::Mutex<VecDeque<String>>,
    counter: AtomicU64,
    /// This process among the coordinators the workers have known: the last part of
    /// every query id (as Trino's coordinator id is), and what the announcement answers.
    /// A worker that hears a new one drops the tasks and memory table fragments of
    /// queries of the one before (`SqlTaskManager::coordinator_is`).
    pub incarnation: String,
    /// The address the server is bound to, for URIs handed to clients.
    bound: std::net::SocketAddr,
    /// Bytes of rows waiting for their clients, over all queries (see `ResultsBudget`).
    results_budget: query::ResultsBudget,
    /// Open transactions (autocommit: see `transaction`).
    pub transactions: transaction::Transactions,
    /// Spooled result segments not yet acknowledged (`spooling`).
    pub segments: Arc<spooling::SegmentStore>,
}

impl CoordinatorState {
    /// Starts a query on its own task and returns it at once (QUEUED).
    pub fn submit(self: &Arc<Self>, sql: String, session: SessionSpec) -> Arc<QueryExecution> {
        let q = self.register(sql, session);
        crate::metrics::QUERIES_SUBMITTED.fetch_add(1, Ordering::Relaxed);
        // Supervised: a panic in the runner fails the query and removes its tasks,
        // instead of leaving it running forever in the list.
        let runner = tokio::spawn(execution::run_query(self.clone(), q.clone()));
        let supervised = q.clone();
        let nodes = self.nodes.clone();
        tokio::spawn(async move {
            if let Err(e) = runner.await {
                let what = if e.is_panic() { "panicked" } else { "was cancelled" };
                tracing::error!(query = %supervised.id, "the query runner {what}: {e}");
                execution::fail_after_runner_died(&nodes, &supervised, format!("the query runner {what}")).await;
            }
        });
        q
    }

    /// Registers a query that failed before it could start (its text too large).
    pub fn submit_failed(
        self: &Arc<Self>,
        sql: String,
        session: SessionSpec,
        error: planner::QueryError,
    ) -> Arc<QueryExecution> {
        let q = self.register(sql, session);
        q.fail_at_once(error);
        q
    }

    /// A new query with a fresh id, listed in `/v1/query`.
    fn register(&self, sql: String, session: SessionSpec) -> Arc<QueryExecution> {
        let id = format!(
            "{}_{:06}_{}",
            chrono::Utc::now().format("%Y%m%d"),
            self.counter.fetch_add(1, Ordering::Relaxed) + 1,
            self.incarnation
        );
        let q = QueryExecution::new(id.clone(), sql, session, self.results_budget.clone());
        self.queries.write().insert(id.clone(), q.clone());
        self.remember(id);
        q
    }

    /// The scheme and authority of URIs handed to clients (`nextUri`, `infoUri`): the
    /// bound address, or the request's `Host` when bound to a wildcard address, or the
    /// forwarded headers when configured to trust them. A header that is not a plain
    /// authority is ignored, so a client cannot make us hand out arbitrary URIs.
    pub fn base_url(&self, headers: &axum::http::HeaderMap) -> String {
        let get = |name: &str| {
            headers.get(name).and_then(|h| h.to_str().ok()).map(str::trim).filter(|h| statement::is_authority(h))
        };
        let mut scheme = if self.config.tls.is_some() { "https" } else { "http" };
        let mut authority = match self.bound.ip().is_unspecified() {
            true => get("host").map(str::to_string).unwrap_or_else(|| {
                // Never hand out 0.0.0.0: without a usable Host, the loopback address.
                let loopback: std::net::IpAddr = if self.bound.is_ipv6() {
                    std::net::Ipv6Addr::LOCALHOST.into()
                } else {
                    std::net::Ipv4Addr::LOCALHOST.into()
                };
                std::net::SocketAddr::new(loopback, self.bound.port()).to_string()
            }),
            false => self.bound.to_string(),
        };
        if self.config.process_forwarded {
            if headers.get("x-forwarded-proto").and_then(|h| h.to_str().ok()).map(str::trim) == Some("https") {
                scheme = "https";
            }
            if let Some(h) = get("x-forwarded-host").or_else(|| get("host")) {
                authority = h.to_string();
            }
        }
        format!("{scheme}://{authority}")
    }

    /// Fails queries whose client stopped asking for results (`query.client.timeout`),
    /// and forgets the last page of ended queries nobody asked about for a minute (it
    /// is kept for a client retrying its last request, not for ever). Returns whether
    /// it dropped anything.
    fn abandon_idle_queries(&self) -> bool {
        let timeout = self.config.query_client_timeout;
        let mut dropped = false;
        for q in self.queries() {
            if q.state().is_final() && q.client_idle() > FINAL_PAGE_RETENTION {
                if let Ok(mut paging) = q.paging.try_lock() {
                    dropped |= paging.page.take().is_some();
                }
            }
            if q.client_idle() <= timeout {
                continue;
            }
            if !q.state().is_final() && !q.is_stopping() {
                tracing::warn!(query = %q.id, "the client has not asked for results for {timeout:?}; abandoning the query");
                q.stop_with(planner::QueryError::new(
                    ErrorCode::AbandonedQuery,
                    format!("Query {} was abandoned: its client has not asked for results for {timeout:?}", q.id),
                ));
            }
            // The unread rows of a query whose client is that late go at once, not when
            // the query has ended: removing its tasks from busy workers can take seconds,
            // and many abandoned together would hold their rows all that while.
            dropped |= q.drop_unread_results();
        }
        dropped
    }

    /// Removes the spooled segments of queries that failed (cancelled and abandoned
    /// ones included): no client will download them. A finished query's stay until
    /// acknowledged or expired, as its client may still be reading.
    fn remove_segments_of_failed_queries(&self) {
        let spooling = self.segments.queries();
        if spooling.is_empty() {
            return;
        }
        for q in self.queries().into_iter().filter(|q| spooling.contains(q.id.as_str())) {
            if q.state() == crate::scheduling::state_machine::QueryState::Failed {
                self.segments.remove_query(&q.id);
            }
        }
    }

    /// Stops every running query holding more than its `query_max_memory` over the
    /// cluster (`EXCEEDED_GLOBAL_MEMORY_LIMIT`); the others go on.
    fn enforce_memory_limits(&self) {
        for q in self.queries() {
            let limit = q.memory_limit.load(Ordering::Relaxed);
            if limit == 0 || q.state().is_final() {
                continue;
            }
            if let Err(e) = self.cluster_memory.check(&q.id, limit) {
                tracing::warn!(query = %q.id, "{}", e.message);
                q.stop_with(e);
            }
        }
    }

    fn remember(&self, id: String) {
        let mut h = self.history.lock();
        h.push_back(id);
        while h.len() > self.config.max_history {
            let Some(old) = h.front().cloned() else { break };
            let done = self.queries.read().get(&old).map(|q| q.state().is_final()).unwrap_or(true);
            if !done {
                break;
            }
            h.pop_front();
            self.queries.write().remove(&old);
        }
    }

    pub fn query(&self, id: &str) -> Result<Arc<QueryExecution>, CoordinatorError> {
        self.queries.read().get(id).cloned().ok_or_else(|| CoordinatorError::QueryNotFound(id.to_string()))
    }

    /// Whether `viewer` may see, page or cancel `q`: their own queries, and with a
    /// login those of users they may act as.
    pub fn may_see(&self, viewer: &Viewer, q: &QueryExecution) -> bool {
        match viewer {
            Viewer::Claimed(user) => q.session.user == *user,
            Viewer::Login(user) => {
                q.session.user == *user
                    || self.config.security.rules.as_ref().is_some_and(|r| r.may_impersonate(user, &q.session.user))
            }
        }
    }

    /// A query the viewer may see; another user's is as unknown as a missing one.
    pub fn query_for(&self, id: &str, viewer: &Viewer) -> Result<Arc<QueryExecution>, CoordinatorError> {
        let q = self.query(id)?;
        match self.may_see(viewer, &q) {
            true => Ok(q),
            false => Err(CoordinatorError::QueryNotFound(id.to_string())),
        }
    }

    /// With logins, a query's URIs serve only logins that may see it (its slug is
    /// not enough once it leaks); without, the slug alone, as in Trino.
    pub fn check_login_sees(&self, login: Option<&Authenticated>, q: &QueryExecution) -> Result<(), CoordinatorError> {
        match login {
            Some(Authenticated(user)) if !self.may_see(&Viewer::Login(user.clone()), q) => {
                Err(CoordinatorError::QueryNotFound(q.id.clone()))
            }
            _ => Ok(()),
        }
    }

    pub fn queries(&self) -> Vec<Arc<QueryExecution>> {
        self.queries.read().values().cloned().collect()
    }

    /// Exchange settings for the root stage, with the query's session overrides.
    pub fn exchange_config(&self, props: &crate::config::SessionProperties) -> ExchangeConfig {
        self.config.exchange.with_properties(props)
    }
}

/// Who asks about queries: a login, or without logins whoever `X-Trino-User` names
/// (the default user when it names nobody). The latter is a claim anyone can make;
/// it keeps users' queries apart, it does not protect them (see docs/operations/security.md).
#[derive(Debug, Clone)]
pub enum Viewer {
    Login(String),
    Claimed(String),
}

impl Viewer {
    pub fn of(login: Option<&Authenticated>, headers: &axum::http::HeaderMap) -> Viewer {
        match login {
            Some(Authenticated(user)) => Viewer::Login(user.clone()),
            None => Viewer::Claimed(
                headers
                    .get("x-trino-user")
                    .and_then(|v| v.to_str().ok())
                    .map(str::trim)
                    .filter(|u| !u.is_empty())
                    .map_or_else(|| planner::SessionSpec::default().user, str::to_string),
            ),
        }
    }
}

pub struct CoordinatorHandle {
    pub url: String,
    /// Arrow Flight SQL's URI (`grpc://` or `grpc+tls://`), when it is served.
    pub flight_sql_url: Option<String>,
    pub state: Arc<CoordinatorState>,
    stop: watch::Sender<bool>,
    server: tokio::task::JoinHandle<()>,
    flight_sql: Option<tokio::task::JoinHandle<()>>,
}

impl CoordinatorHandle {
    pub async fn shutdown(self) {
        let _ = self.stop.send(true);
        let _ = self.server.await;
        if let Some(flight_sql) = self.flight_sql {
            let _ = flight_sql.await;
        }
    }

    /// Waits until `n` workers are alive, at most `timeout`.
    pub async fn wait_for_workers(&self, n: usize, timeout: Duration) -> bool {
        let deadline = tokio::time::Instant::now() + timeout;
        while tokio::time::Instant::now() < deadline {
            if self.state.nodes.live_workers().len() >= n {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        false
    }
}

pub async fn start_coordinator(config: CoordinatorConfig) -> std::io::Result<CoordinatorHandle> {
    let listener = crate::http::bind(&config.bind).await?;
    let addr = listener.local_addr()?;
    crate::http::check_internal_exposure(addr, config.shared_secret.is_some(), config.insecure_internal)?;
    let tls = config.tls.as_ref().map(|t| t.server_config()).transpose()?;
    if config.security.passwords.is_some() && tls.is_none() {
        return Err(std::io::Error::other(
            "PASSWORD authentication needs HTTPS: passwords must not cross the network in clear \
             (http-server.https.enabled, or --https-cert)",
        ));
    }
    let roots = config.truststore.as_deref().map(crate::tls::read_ca).transpose()?.unwrap_or_default();
    let scheme = if tls.is_some() { "https" } else { "http" };
    let url = format!("{scheme}://{addr}");
    // The tables the catalogs' metastores keep, before the first query can look.
    let restore_ctx =
        crate::coordinator::planner::session_context(&Default::default(), &Default::default(), 1, &config.connectors);
    config.connectors.restore(&restore_ctx).await.map_err(std::io::Error::other)?;
    ddl::restore_views(&config.connectors).await;
    let incarnation = crate::util::random_suffix(5);
    let swept = staging::sweep(&config.connectors, &config.connectors.runtime(), &incarnation).await;
    if swept > 0 {
        tracing::info!("removed {swept} staging directories of writes a stopped coordinator left");
    }
    let state = Arc::new(CoordinatorState {
        nodes: Arc::new(NodeManager::new(config.worker_timeout)),
        node_scheduler: Arc::new(NodeScheduler::new()),
        http: crate::http::internal_client(config.shared_secret.as_deref(), &roots),
        exchange_http: crate::http::internal_client(config.shared_secret.as_deref(), &roots),
        connectors: config.connectors.clone(),
        admission: admission::Admission::new(config.admission),
        cluster_memory: Default::default(),
        refused: parking_lot::Mutex::new(std::collections::HashSet::new()),
        queries: RwLock::new(BTreeMap::new()),
        history: parking_lot::Mutex::new(VecDeque::new()),
        counter: AtomicU64::new(0),
        incarnation: incarnation.clone(),
        results_budget: query::ResultsBudget::for_machine(),
        transactions: Default::default(),
        segments: Arc::new(spooling::SegmentStore::new(&config.spooling).await?),
        bound: addr,
        config,
    });
    // The memory catalogs settle writes and drop tables on the workers.
    let nodes = Arc::downgrade(&state.nodes);
    state.connectors.attach_cluster(&|| {
        let nodes = nodes.clone();
        crate::connector::memory::ClusterHandle {
            http: state.http.clone(),
            runtime: tokio::runtime::Handle::current(),
            workers: Box::new(move || nodes.upgrade().map(|n| n.live_workers()).unwrap_or_default()),
        }
    });
    let app = api::router(state.clone());
    let (stop, mut stopped) = watch::channel(false);
    let (flight_sql_url, flight_sql) = match state.config.flight_sql_port {
        Some(port) => {
            let listener = tokio::net::TcpListener::bind(flight_sql::address(addr, port)).await?;
            let bound = listener.local_addr()?;
            let mut stopped = stop.subscribe();
            let shutdown = async move {
                let _ = stopped.wait_for(|s| *s).await;
            };
            let task = flight_sql::serve(state.clone(), listener, state.config.tls.as_ref(), shutdown).await?;
            let scheme = if state.config.tls.is_some() { "grpc+tls" } else { "grpc" };
            (Some(format!("{scheme}://{bound}")), Some(task))
        }
        None => (None, None),
    };
    // The second sweep (see `staging`): by then the workers have heard of this
    // coordinator and stopped the writers of queries of the one before.
    let (sweeper, mut stopping) = (state.clone(), stop.subscribe());
    tokio::spawn(async move {
        let stopped = async move {
            let _ = stopping.wait_for(|s| *s).await;
        };
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_secs(10)) => {
                let (connectors, incarnation) = (&sweeper.connectors, &sweeper.incarnation);
                staging::sweep(connectors, &connectors.runtime(), incarnation).await;
            }
            _ = stopped => {}
        }
    });
    let reaper = state.clone();
    let freed = crate::util::FreedMemory::default();
    crate::util::every(Duration::from_millis(500), stop.subscribe(), move || {
        if reaper.abandon_idle_queries() {
            freed.note_work();
        }
        reaper.enforce_memory_limits();
        reaper.segments.expire(std::time::Instant::now());
        reaper.remove_segments_of_failed_queries();
        freed.trim_if_idle(reaper.queries().iter().all(|q| q.state().is_final()));
    });
    let server = tokio::spawn(async move {
        let shutdown = async move {
            let _ = stopped.wait_for(|s| *s).await;
        };
        if let Err(e) = crate::http::serve(listener, tls, app, shutdown).await {
            tracing::error!("coordinator server failed: {e}");
        }
    });
    Ok(CoordinatorHandle { url, flight_sql_url, state, stop, server, flight_sql })
}
