//! The `flotilla` command: `local`, `coordinator`, `worker`, `sql` and `bench`.
//! Parsing is clap's; each subcommand hands over to the library at once. Errors end
//! as one readable line on stderr and a non-zero exit.

use std::process::ExitCode;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};
use flotilla::client::{ClientError, StatementClient};
use flotilla::format::OutputFormat;
use flotilla::local::{split_statements, LocalCluster, LocalOptions};

#[derive(Parser)]
#[command(name = "flotilla", version, about = "A distributed SQL query engine on DataFusion")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// A coordinator and N workers in this process, then run SQL against them.
    Local {
        #[arg(long, default_value_t = 2)]
        workers: usize,
        /// Keep the `files` catalog's tables here (DIR/catalogs/files.json), and put
        /// tables made by CREATE TABLE ... AS under DIR/warehouse.
        #[arg(long)]
        data_dir: Option<std::path::PathBuf>,
        #[command(flatten)]
        query: QueryArgs,
    },
    /// Run a coordinator.
    Coordinator {
        #[command(flatten)]
        node: NodeArgs,
        /// Address to listen on (default 127.0.0.1:8080, or 0.0.0.0:http-server.http.port).
        #[arg(long)]
        bind: Option<String>,
        /// Seconds without a heartbeat after which a worker is lost (default 5).
        #[arg(long)]
        worker_timeout: Option<u64>,
        /// A query whose client stops asking for results this long is abandoned
        /// (Trino's query.client.timeout), e.g. 5m or 30s.
        #[arg(long, value_parser = flotilla::config::parse_duration)]
        query_client_timeout: Option<Duration>,
        /// Build client URIs from X-Forwarded-Proto/-Host (behind a trusted proxy).
        #[arg(long)]
        process_forwarded: bool,
        /// Directories under which `files` tables may live, comma separated
        /// (files.allowed-locations of the built-in `files` catalog; default none).
        #[arg(long)]
        files_allowed_locations: Option<String>,
        /// Keep the built-in `files` catalog's tables in DIR/catalogs/files.json and
        /// put CREATE TABLE ... AS tables under DIR/warehouse (with catalog files, set
        /// node.data-dir and files.warehouse instead).
        #[arg(long)]
        data_dir: Option<std::path::PathBuf>,
        /// Accept test-only failure hooks (for tests).
        #[arg(long)]
        enable_failure_injection: bool,
        /// Queries that run at once; the others wait QUEUED
        /// (query.max-concurrent-queries; default no limit).
        #[arg(long)]
        max_concurrent_queries: Option<usize>,
        /// Queries that may wait for a slot; beyond, QUERY_QUEUE_FULL
        /// (query.max-queued-queries; default 1000).
        #[arg(long)]
        max_queued_queries: Option<usize>,
        /// Require logins: Trino's password file (bcrypt or PBKDF2 entries); needs HTTPS.
        #[arg(long)]
        password_file: Option<std::path::PathBuf>,
        /// Trino's file-based access control rules (rules.json).
        #[arg(long)]
        access_rules: Option<std::path::PathBuf>,
        /// Users' groups for the access rules (group:user1,user2 lines).
        #[arg(long)]
        groups_file: Option<std::path::PathBuf>,
        /// The default of a session property for every query, NAME=VALUE (repeatable;
        /// the same as NAME with dashes in config.properties; a client's value wins).
        #[arg(long = "session", value_name = "NAME=VALUE")]
        session_defaults: Vec<String>,
    },
    /// Run a worker that joins a coordinator.
    Worker {
        #[command(flatten)]
        node: NodeArgs,
        /// The coordinator's URL (discovery.uri).
        #[arg(long)]
        coordinator: Option<String>,
        /// Address to listen on (default 127.0.0.1:0, or 0.0.0.0:http-server.http.port).
        #[arg(long)]
        bind: Option<String>,
        /// What to announce to the coordinator: a URL, or a host name or address that
        /// takes the bound port (node.internal-address). Default: the bound address,
        /// a wildcard replaced by this host's address.
        #[arg(long)]
        advertise: Option<String>,
        /// Bytes a task's output buffer holds before its producer waits (e.g. 32MB).
        #[arg(long)]
        output_buffer_max_bytes: Option<String>,
        /// Accept injected failures through POST /v1/failure-injection (for tests).
        #[arg(long)]
        enable_failure_injection: bool,
        /// Directory for spooled task output (retry_policy=task); the worker uses a
        /// subdirectory named after itself. Default: the system temp directory.
        #[arg(long, env = "FLOTILLA_SPOOL_DIR")]
        spool_dir: Option<String>,
        /// A task no client asked about for this long is abandoned (Trino's
        /// task.client.timeout), e.g. 2m or 30s (default 2m).
        #[arg(long, value_parser = flotilla::config::parse_duration)]
        task_client_timeout: Option<Duration>,
        /// How long a graceful shutdown (SIGTERM, Ctrl-C, PUT /v1/info/state) waits for
        /// the worker's queries before aborting their tasks (shutdown.grace-period; 2m).
        #[arg(long, value_parser = flotilla::config::parse_duration)]
        shutdown_grace_period: Option<Duration>,
        /// The memory pool every task of the worker reserves from, e.g. 2GB (default:
        /// 70% of the machine's or the cgroup's memory; memory.heap-headroom-per-node
        /// in --etc leaves that much outside it); `unlimited` for no pool (benchmarks).
        #[arg(long)]
        memory: Option<String>,
        /// What one query's tasks on this worker may hold together (Trino's
        /// query.max-memory-per-node; default: the whole pool).
        #[arg(long)]
        query_max_memory_per_node: Option<String>,
        /// Where operators spill (spiller-spill-path; a subdirectory per worker).
        /// Default: the system temp directory.
        #[arg(long)]
        spill_path: Option<String>,
        /// Bytes of spill files the worker may hold at once (max-spill-per-node;
        /// default 100GB).
        #[arg(long)]
        max_spill_per_node: Option<String>,
        /// Directories (and s3:// prefixes) the built-in `files` catalog's tables may
        /// live under, as on the coordinator: the worker opens no file elsewhere,
        /// whatever a plan names (with catalog files, files.allowed-locations).
        #[arg(long)]
        files_allowed_locations: Option<String>,
    },
    /// Run SQL against a coordinator.
    Sql {
        /// The coordinator: http(s)://host:port, or host:port.
        #[arg(long)]
        server: String,
        /// HTTPS: accept any server certificate (tests, first steps only).
        #[arg(long)]
        insecure: bool,
        /// HTTPS: trust the CA certificates in this PEM file besides the system's.
        #[arg(long)]
        ca: Option<std::path::PathBuf>,
        /// Log in with a password: from FLOTILLA_PASSWORD (or TRINO_PASSWORD) when
        /// set, else asked for on the terminal.
        #[arg(long)]
        password: bool,
        #[command(flatten)]
        query: QueryArgs,
    },
    /// Write the 8 TPC-H tables (or the 24 TPC-DS tables) to files, one folder per
    /// table.
    TpchGen {
        #[arg(long, value_enum, default_value = "tpch")]
        benchmark: flotilla::generate::Benchmark,
        #[arg(long, default_value = "1")]
        scale: f64,
        #[arg(long)]
        output: String,
        #[arg(long, value_enum, default_value = "parquet")]
        format: flotilla::generate::FileFormat,
    },
    /// Benchmarks against single-node DataFusion.
    Bench {
        #[command(subcommand)]
        suite: BenchSuite,
    },
}

#[derive(Subcommand)]
enum BenchSuite {
    /// The 22 TPC-H queries on a local cluster and on single-node DataFusion.
    Tpch(flotilla::bench::TpchBench),
    /// The 99 TPC-DS queries (texts from --queries-dir) the same way.
    Tpcds(flotilla::bench::TpchBench),
    /// One exchange link: a worker's output buffer read by another over HTTP.
    Exchange {
        /// Bytes of Arrow data to move.
        #[arg(long, default_value = "2GB")]
        bytes: String,
        #[arg(long, default_value_t = 3)]
        iterations: usize,
    },
    /// Scheduling overhead: a synthetic chain of stages, all tasks created at once.
    Scheduling {
        #[arg(long, default_value_t = 100)]
        stages: usize,
        #[arg(long, default_value_t = 16)]
        tasks: usize,
        #[arg(long, default_value_t = 2)]
        workers: usize,
        #[arg(long, default_value_t = 5)]
        iterations: usize,
    },
    /// Latency of one statement through the statement protocol, run again and again.
    Latency {
        #[arg(long, default_value = "SELECT 1")]
        sql: String,
        #[arg(long, default_value_t = 1)]
        workers: usize,
        #[arg(long, default_value_t = 200)]
        iterations: usize,
        /// A running coordinator to measure instead of a local cluster in this process
        /// (whose servers then share the client's cores and runtime).
        #[arg(long)]
        server: Option<String>,
    },
}

/// What coordinators and workers share: configuration directory, identity, secret.
#[derive(Args, Clone)]
struct NodeArgs {
    /// Configuration directory like Trino's etc/: config.properties, node.properties,
    /// catalog/*.properties. Flags override it.
    #[arg(long)]
    etc: Option<std::path::PathBuf>,
    /// node.environment: a coordinator takes only workers of its own (default production).
    #[arg(long)]
    environment: Option<String>,
    /// Secret every internal request must carry; prefer FLOTILLA_SHARED_SECRET or
    /// internal-communication.shared-secret, which `ps` does not show.
    #[arg(long)]
    shared_secret: Option<String>,
    /// Serve internal endpoints without a shared secret on a non-loopback address.
    #[arg(long)]
    insecure_internal: bool,
    /// Serve HTTPS with this PEM certificate chain (http-server.https.keystore.path).
    #[arg(long)]
    https_cert: Option<std::path::PathBuf>,
    /// The private key of --https-cert, when not in the same file.
    #[arg(long, requires = "https_cert")]
    https_key: Option<std::path::PathBuf>,
    /// CA certificates (PEM) internal requests trust besides the system's
    /// (internal-communication.https.truststore.path).
    #[arg(long)]
    truststore: Option<std::path::PathBuf>,
}

impl NodeArgs {
    /// The flags coordinators and workers share, over what their configuration says.
    fn apply(
        &self,
        shared_secret: &mut Option<String>,
        insecure_internal: &mut bool,
        environment: &mut String,
        tls: &mut Option<flotilla::tls::TlsConfig>,
        truststore: &mut Option<std::path::PathBuf>,
    ) {
        *shared_secret = flotilla::http::shared_secret(self.shared_secret.clone()).or(shared_secret.take());
        *insecure_internal = self.insecure_internal;
        if let Some(env) = &self.environment {
            *environment = env.clone();
        }
        if let Some(cert_chain) = self.https_cert.clone() {
            *tls = Some(flotilla::tls::TlsConfig { cert_chain, private_key: self.https_key.clone() });
        }
        if self.truststore.is_some() {
            *truststore = self.truststore.clone();
        }
    }
}

impl NodeArgs {
    fn etc(&self) -> Result<Option<flotilla::etc::Etc>, String> {
        self.etc.as_deref().map(flotilla::etc::Etc::load).transpose().map_err(|e| e.to_string())
    }
}

#[derive(Args, Clone)]
struct QueryArgs {
    #[arg(long, default_value = "tpch")]
    catalog: String,
    #[arg(long, default_value = "tiny")]
    schema: String,
    /// Session property, repeatable: --session execution_policy=all-at-once
    #[arg(long = "session", value_parser = flotilla::config::parse_name_value)]
    session: Vec<(String, String)>,
    #[arg(long, default_value = "flotilla")]
    user: String,
    /// SQL to run (may start with a `--` comment).
    #[arg(short = 'e', long = "execute", conflicts_with = "file", allow_hyphen_values = true)]
    execute: Option<String>,
    /// File of `;`-separated statements to run.
    #[arg(short = 'f', long = "file")]
    file: Option<String>,
    #[arg(long, value_enum, default_value = "aligned")]
    output_format: OutputFormat,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::try_from_env("FLOTILLA_LOG").unwrap_or_else(|_| "warn".into()))
        .with_writer(std::io::stderr)
        .init();
    // The control runtime: HTTP, long polls, heartbeats. Query execution runs on the
    // compute runtime (`flotilla::runtime`). Big stacks: plans are encoded and
    // decoded recursively here.
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .thread_stack_size(flotilla::runtime::THREAD_STACK)
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("flotilla: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let result = runtime.block_on(run(cli));
    // Blocking work still running (a generator, a planning thread's caller) must not
    // hold the exit; the compute runtime's threads end with the process.
    runtime.shutdown_timeout(Duration::from_secs(1));
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("{message}");
            ExitCode::FAILURE
        }
    }
}

async fn run(cli: Cli) -> Result<(), String> {
    match cli.command {
        Command::Local { workers, data_dir, query } => {
            if workers == 0 {
                return Err("flotilla local needs at least one worker (--workers N)".into());
            }
            let data_dir = data_dir.map(|d| std::path::absolute(&d).unwrap_or(d));
            let cluster = LocalCluster::start(workers, LocalOptions { data_dir, ..Default::default() }).await?;
            let result = run_queries(client_for(cluster.url(), &query), &query).await;
            cluster.shutdown().await;
            result
        }
        Command::Coordinator {
            node,
            bind,
            worker_timeout,
            query_client_timeout,
            process_forwarded,
            files_allowed_locations,
            data_dir,
            enable_failure_injection,
            max_concurrent_queries,
            max_queued_queries,
            password_file,
            access_rules,
            groups_file,
            session_defaults,
        } => {
            use flotilla::coordinator::CoordinatorConfig;
            let etc = node.etc()?;
            let mut config = match &etc {
                Some(etc) => CoordinatorConfig::from_etc(etc)?,
                None => CoordinatorConfig::new("127.0.0.1:8080"),
            };
            if let Some(b) = bind {
                config.bind = b;
            }
            if let Some(t) = query_client_timeout {
                config.query_client_timeout = t.max(Duration::from_secs(1));
            }
            if let Some(t) = worker_timeout {
                config.worker_timeout = Duration::from_secs(t.max(1));
            }
            config.process_forwarded |= process_forwarded;
            config.enable_failure_injection = enable_failure_injection;
            if let Some(n) = max_concurrent_queries {
                config.admission.max_concurrent = Some(n.max(1));
            }
            if let Some(n) = max_queued_queries {
                config.admission.max_queued = n;
            }
            for entry in session_defaults {
                let (name, value) =
                    entry.split_once('=').ok_or_else(|| format!("--session {entry}: expected NAME=VALUE"))?;
                let one = [(name.trim().to_string(), value.trim().to_string())].into_iter().collect();
                flotilla::config::SessionProperties::parse(&one).map_err(|e| format!("--session {entry}: {e}"))?;
                config.session_defaults.extend(one);
            }
            node.apply(
                &mut config.shared_secret,
                &mut config.insecure_internal,
                &mut config.environment,
                &mut config.tls,
                &mut config.truststore,
            );
            if password_file.is_some() || access_rules.is_some() || groups_file.is_some() {
                config.security = flotilla::security::Security::load(
                    password_file.as_deref(),
                    access_rules.as_deref(),
                    groups_file.as_deref(),
                )
                .map_err(|e| e.to_string())?;
            }
            if files_allowed_locations.is_some() || data_dir.is_some() {
                if etc.as_ref().is_some_and(|e| !e.catalogs.is_empty()) {
                    return Err("--files-allowed-locations and --data-dir are for the built-in catalogs; with \
                                catalog files, set files.allowed-locations in the files catalog's file and \
                                node.data-dir"
                        .into());
                }
                let allowed = match files_allowed_locations {
                    Some(dirs) => flotilla::connector::files::FilesConnector::parse_allowed(&dirs)
                        .map_err(|e| format!("--files-allowed-locations: {e}"))?,
                    None => Vec::new(),
                };
                let data_dir = data_dir.map(|d| std::path::absolute(&d).unwrap_or(d));
                config.connectors = flotilla::connector::Connectors::builtin_with(
                    flotilla::connector::files::FilesSettings::in_data_dir(allowed, data_dir.as_deref()),
                );
            }
            let bind = config.bind.clone();
            let handle = flotilla::coordinator::start_coordinator(config)
                .await
                .map_err(|e| format!("cannot start the coordinator on {bind}: {e}"))?;
            println!("flotilla coordinator listening on {}", handle.url);
            wait_for_ctrl_c().await;
            let _ = tokio::time::timeout(SHUTDOWN_GRACE, handle.shutdown()).await;
            Ok(())
        }
        Command::Worker {
            node,
            coordinator,
            bind,
            advertise,
            output_buffer_max_bytes,
            enable_failure_injection,
            spool_dir,
            task_client_timeout,
            shutdown_grace_period,
            memory,
            query_max_memory_per_node,
            spill_path,
            max_spill_per_node,
            files_allowed_locations,
        } => {
            use flotilla::worker::WorkerConfig;
            let etc = node.etc()?;
            let mut config = match &etc {
                Some(etc) => WorkerConfig::from_etc(etc)?,
                None => WorkerConfig::new("127.0.0.1:0", ""),
            };
            if let Some(dirs) = files_allowed_locations {
                if etc.as_ref().is_some_and(|e| !e.catalogs.is_empty()) {
                    return Err("--files-allowed-locations is for the built-in catalogs; with catalog files, set \
                                files.allowed-locations in the files catalog's file"
                        .into());
                }
                let allowed = flotilla::connector::files::FilesConnector::parse_allowed(&dirs)
                    .map_err(|e| format!("--files-allowed-locations: {e}"))?;
                config.connectors = flotilla::connector::Connectors::builtin_with_files(&allowed);
            }
            if let Some(c) = coordinator {
                config.coordinator = c.trim_end_matches('/').to_string();
            }
            if config.coordinator.is_empty() {
                return Err("a worker needs its coordinator: --coordinator URL, or discovery.uri in --etc".into());
            }
            if let Some(b) = bind {
                config.bind = b;
            }
            if advertise.is_some() {
                config.advertise = advertise;
            }
            // Clients long-poll for up to a second between contacts.
            if let Some(t) = task_client_timeout {
                config.task_client_timeout = t;
            }
            config.task_client_timeout = config.task_client_timeout.max(Duration::from_secs(2));
            if let Some(dir) = spool_dir {
                config.spool_root = dir.into();
            }
            node.apply(
                &mut config.shared_secret,
                &mut config.insecure_internal,
                &mut config.environment,
                &mut config.tls,
                &mut config.truststore,
            );
            config.enable_failure_injection = enable_failure_injection;
            if let Some(g) = shutdown_grace_period {
                config.shutdown_grace_period = g;
            }
            if let Some(b) = output_buffer_max_bytes {
                config.settings.output_buffer_bytes = flotilla::config::parse_bytes(&b)?;
            }
            if let Some(m) = memory {
                let pool = match m.as_str() {
                    "unlimited" => usize::MAX,
                    size => flotilla::config::parse_bytes(size)? as usize,
                };
                if config.memory.query_max_per_node == config.memory.pool_bytes {
                    config.memory.query_max_per_node = pool;
                }
                config.memory.pool_bytes = pool;
            }
            if let Some(q) = query_max_memory_per_node {
                config.memory.query_max_per_node = flotilla::config::parse_bytes(&q)? as usize;
            }
            if let Some(p) = spill_path {
                config.memory.spill_path = p.into();
            }
            if let Some(m) = max_spill_per_node {
                config.memory.max_spill_bytes = flotilla::config::parse_bytes(&m)?;
            }
            let bind = config.bind.clone();
            let handle = flotilla::worker::start_worker(config)
                .await
                .map_err(|e| format!("cannot start the worker on {bind}: {e}"))?;
            println!("flotilla worker {} listening on {}", handle.node_id, handle.url);
            // A signal or PUT /v1/info/state starts a graceful shutdown: no new queries,
            // the running ones finish (within the grace period); a second signal stops
            // at once.
            tokio::select! {
                _ = wait_for_ctrl_c() => {
                    handle.begin_shutdown();
                    eprintln!("flotilla worker {}: shutting down once its queries end (signal again to stop now)", handle.node_id);
                    tokio::select! {
                        _ = handle.drained() => {}
                        _ = wait_for_ctrl_c() => {}
                    }
                }
                _ = handle.drained() => {}
            }
            // Tasks left are aborted at once; the bound only caps waiting for open requests.
            let _ = tokio::time::timeout(SHUTDOWN_GRACE, handle.shutdown()).await;
            Ok(())
        }
        Command::Sql { server, insecure, ca, password, query } => {
            let mut client = client_for(&server, &query);
            if insecure || ca.is_some() {
                client = client.with_tls(insecure, ca.as_deref())?;
            }
            if password {
                client = client.with_password(read_password(&query.user)?);
            }
            run_queries(client, &query).await
        }
        Command::TpchGen { benchmark, scale, output, format } => {
            if scale.is_nan() || scale <= 0.0 {
                return Err(format!("scale factor must be positive, got {scale}"));
            }
            let folders = flotilla::generate::generate(benchmark, scale, std::path::Path::new(&output), format).await?;
            for f in folders {
                println!("{}", f.display());
            }
            Ok(())
        }
        Command::Bench { suite: BenchSuite::Tpch(options) } => flotilla::bench::run_tpch(&options).await,
        Command::Bench { suite: BenchSuite::Tpcds(options) } => flotilla::bench::run_tpcds(&options).await,
        Command::Bench { suite: BenchSuite::Scheduling { stages, tasks, workers, iterations } } => {
            flotilla::bench::run_scheduling(stages.max(1), tasks.max(1), workers, iterations.max(1)).await
        }
        Command::Bench { suite: BenchSuite::Latency { sql, workers, iterations, server } } => {
            flotilla::bench::run_latency(&sql, workers, iterations, server).await
        }
        Command::Bench { suite: BenchSuite::Exchange { bytes, iterations } } => {
            flotilla::bench::run_exchange(flotilla::config::parse_bytes(&bytes)?, iterations.max(1)).await
        }
    }
}

/// How long a stopping server waits for requests in flight (long polls end within
/// seconds) before the process exits anyway.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

/// Ctrl-C or SIGTERM (what `kill` and service managers send): either way the server
/// shuts down cleanly, aborting its tasks and removing its spool.
async fn wait_for_ctrl_c() {
    #[cfg(unix)]
    {
        if let Ok(mut term) = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = term.recv() => {}
            }
            return;
        }
    }
    let _ = tokio::signal::ctrl_c().await;
}

fn client_for(server: &str, q: &QueryArgs) -> StatementClient {
    let mut c = StatementClient::new(server).with_user(&q.user).with_catalog(&q.catalog).with_schema(&q.schema);
    for (k, v) in &q.session {
        c = c.with_session(k, v);
    }
    c
}

/// The password for `--password`: the environment's, else typed without echo.
fn read_password(user: &str) -> Result<String, String> {
    for var in ["FLOTILLA_PASSWORD", "TRINO_PASSWORD"] {
        if let Ok(p) = std::env::var(var) {
            return Ok(p);
        }
    }
    use std::io::{BufRead, IsTerminal, Write};
    if !std::io::stdin().is_terminal() {
        return Err("--password: set FLOTILLA_PASSWORD, or run on a terminal to type it".into());
    }
    eprint!("Password for {user}: ");
    let _ = std::io::stderr().flush();
    let _echo_off = flotilla::util::EchoOff::new();
    let mut line = String::new();
    std::io::stdin().lock().read_line(&mut line).map_err(|e| format!("cannot read the password: {e}"))?;
    eprintln!();
    Ok(line.trim_end_matches(['\r', '\n']).to_string())
}

async fn run_queries(client: StatementClient, q: &QueryArgs) -> Result<(), String> {
    let statements = match (&q.execute, &q.file) {
        (Some(sql), _) => split_statements(sql),
        (None, Some(path)) => {
            let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read {path}: {e}"))?;
            split_statements(&text)
        }
        (None, None) => return flotilla::cli::repl(client, q.output_format).await,
    };
    if statements.is_empty() {
        return Err("nothing to run: the SQL is empty".into());
    }
    for sql in statements {
        run_one(&client, &sql, q.output_format).await?;
    }
    Ok(())
}

async fn run_one(client: &StatementClient, sql: &str, format: OutputFormat) -> Result<(), String> {
    let canceller = client.clone();
    let outcome = tokio::select! {
        r = flotilla::cli::run_and_print(client, sql, format) => r,
        _ = tokio::signal::ctrl_c() => {
            let _ = canceller.cancel_current().await;
            return Err("Query canceled by user (Ctrl-C)".into());
        }
    };
    outcome.map_err(|e| describe(&e))
}

fn describe(e: &ClientError) -> String {
    match e {
        ClientError::Query(flotilla::client::QueryError { error_name, message, .. }) => {
            format!("Query failed ({error_name}): {message}")
        }
        other => format!("Error: {other}"),
    }
}
