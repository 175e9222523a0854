//! The `flotilla` command: `local`, `coordinator`, `worker`, `sql`, `tpch-gen` and
//! `bench`, one function each. Parsing is clap's (`args`); each subcommand hands over
//! to the library at once. Errors end as one readable line on stderr and a non-zero
//! exit.

mod args;

use std::process::ExitCode;
use std::time::Duration;

use args::{
    BenchSuite, Cli, Command, CoordinatorArgs, DifftestArgs, LocalArgs, QueryArgs, SimArgs, SqlArgs, TpchGenArgs,
    WorkerArgs,
};
use clap::Parser;
use flotilla::client::{ClientError, StatementClient};
use flotilla::format::OutputFormat;
use flotilla::local::{split_statements, LocalCluster, LocalOptions};

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
        Command::Local(args) => local(args).await,
        Command::Coordinator(args) => coordinator(args).await,
        Command::Worker(args) => worker(args).await,
        Command::Sql(args) => sql(args).await,
        Command::TpchGen(args) => generate(args).await,
        Command::Bench { suite } => bench(suite).await,
        Command::Sim(args) => sim(args).await,
        Command::Difftest(args) => difftest(args).await,
    }
}

/// Generated queries on a local cluster of stages forced; a mismatch fails the command.
async fn difftest(args: DifftestArgs) -> Result<(), String> {
    let cluster = LocalCluster::start(args.workers.max(1), LocalOptions::default()).await?;
    let client = StatementClient::new(cluster.url()).with_session("single_task_max_rows", "0");
    let report = flotilla::difftest::run(client, args.seed, args.queries, args.duckdb_python.as_deref()).await;
    cluster.shutdown().await;
    let report = report?;
    for m in &report.mismatches {
        println!("{m}");
    }
    if !report.refusals.is_empty() {
        println!("refused by both sides (the first {}):", report.refusals.len());
        for r in &report.refusals {
            println!("  {r}");
        }
    }
    println!(
        "{} queries, {} checks, {} refused by both sides, {} beyond DataFusion (TLP only), {} against DuckDB, {} mismatches",
        report.queries,
        report.checks,
        report.refused,
        report.beyond_oracle,
        report.duckdb_checks,
        report.mismatches.len()
    );
    match report.mismatches.is_empty() {
        true => Ok(()),
        false => Err(format!("{} mismatches", report.mismatches.len())),
    }
}

/// Each seed runs on a single-threaded runtime of its own, off this one.
async fn sim(args: SimArgs) -> Result<(), String> {
    use flotilla::sim::{Policy, SimConfig};
    let policies = match args.policy.as_str() {
        "both" => vec![Policy::None, Policy::Task],
        one => vec![one.parse::<Policy>()?],
    };
    if args.workers == 0 {
        return Err("flotilla sim needs at least one worker (--workers N)".into());
    }
    if args.scale {
        let SimArgs { scale_workers, scale_stages, hash_partitions, lose_worker, .. } = args;
        return tokio::task::spawn_blocking(move || {
            flotilla::sim::run_grid(&scale_workers, &scale_stages, &policies, hash_partitions.max(1), lose_worker)
        })
        .await
        .map_err(|e| format!("the simulator stopped: {e}"))?;
    }
    let template = SimConfig {
        stages: args.stages,
        faults: !args.no_faults,
        partitions: args.partitions.max(1),
        ..SimConfig::new(args.seed, policies[0], args.workers)
    };
    tokio::task::spawn_blocking(move || {
        flotilla::sim::run_seeds(args.seed, args.seeds, &policies, &template, args.trace)
    })
    .await
    .map_err(|e| format!("the simulator stopped: {e}"))?
}

async fn local(args: LocalArgs) -> Result<(), String> {
    let LocalArgs { workers, data_dir, tpch, query } = args;
    if workers == 0 {
        return Err("flotilla local needs at least one worker (--workers N)".into());
    }
    let data_dir = data_dir.map(|d| std::path::absolute(&d).unwrap_or(d));
    let options = LocalOptions { data_dir, tpch: tpch.spelling()?.unwrap_or_default(), ..Default::default() };
    let cluster = LocalCluster::start(workers, options).await?;
    let result = run_queries(client_for(cluster.url(), &query), &query).await;
    cluster.shutdown().await;
    result
}

/// The coordinator's configuration: its `--etc` directory, then the flags over it.
fn coordinator_config(args: CoordinatorArgs) -> Result<flotilla::coordinator::CoordinatorConfig, String> {
    let CoordinatorArgs {
        node,
        bind,
        worker_timeout,
        query_client_timeout,
        process_forwarded,
        files_allowed_locations,
        data_dir,
        tpch,
        enable_failure_injection,
        max_concurrent_queries,
        max_queued_queries,
        password_file,
        access_rules,
        groups_file,
        session_defaults,
        flight_sql_port,
    } = args;
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
    if flight_sql_port.is_some() {
        config.flight_sql_port = flight_sql_port;
    }
    if let Some(n) = max_concurrent_queries {
        config.admission.max_concurrent = Some(n.max(1));
    }
    if let Some(n) = max_queued_queries {
        config.admission.max_queued = n;
    }
    for entry in session_defaults {
        config.session_defaults.extend(session_default(&entry)?);
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
    let spelling = tpch.spelling()?;
    if files_allowed_locations.is_some() || data_dir.is_some() || spelling.is_some() {
        if etc.as_ref().is_some_and(|e| !e.catalogs.is_empty()) {
            return Err("--files-allowed-locations, --data-dir and --tpch-* are for the built-in catalogs; \
                        with catalog files, set files.allowed-locations in the files catalog's file, \
                        node.data-dir, and tpch.column-naming in the tpch catalog's file"
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
            spelling.unwrap_or_default(),
        );
    }
    Ok(config)
}

/// One `--session NAME=VALUE`, checked as a session property.
fn session_default(entry: &str) -> Result<std::collections::BTreeMap<String, String>, String> {
    let (name, value) = entry.split_once('=').ok_or_else(|| format!("--session {entry}: expected NAME=VALUE"))?;
    let one = [(name.trim().to_string(), value.trim().to_string())].into_iter().collect();
    flotilla::config::SessionProperties::parse(&one).map_err(|e| format!("--session {entry}: {e}"))?;
    Ok(one)
}

async fn coordinator(args: CoordinatorArgs) -> Result<(), String> {
    let config = coordinator_config(args)?;
    let bind = config.bind.clone();
    let handle = flotilla::coordinator::start_coordinator(config)
        .await
        .map_err(|e| format!("cannot start the coordinator on {bind}: {e}"))?;
    println!("flotilla coordinator listening on {}", handle.url);
    if let Some(flight_sql) = &handle.flight_sql_url {
        println!("flotilla Flight SQL listening on {flight_sql}");
    }
    wait_for_ctrl_c().await;
    let _ = tokio::time::timeout(SHUTDOWN_GRACE, handle.shutdown()).await;
    Ok(())
}

/// The worker's configuration: its `--etc` directory, then the flags over it.
fn worker_config(args: WorkerArgs) -> Result<flotilla::worker::WorkerConfig, String> {
    let WorkerArgs {
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
    } = args;
    use flotilla::worker::WorkerConfig;
    let etc = node.etc()?;
    let mut config = match &etc {
        Some(etc) => WorkerConfig::from_etc(etc)?,
        None => WorkerConfig::new("127.0.0.1:0", ""),
    };
    // Without catalog files or the flag, the worker opens files where its
    // coordinator's `files` catalog keeps them (its `--data-dir` warehouse).
    config.adopt_coordinator_files =
        files_allowed_locations.is_none() && etc.as_ref().is_none_or(|e| e.catalogs.is_empty());
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
    memory_flags(&mut config.memory, memory, query_max_memory_per_node, spill_path, max_spill_per_node)?;
    Ok(config)
}

/// A worker's memory flags over its configuration: `--memory` (a size or
/// `unlimited`) moves the per-query limit with it unless that was set apart.
fn memory_flags(
    settings: &mut flotilla::worker::memory::MemorySettings,
    pool: Option<String>,
    query_max_per_node: Option<String>,
    spill_path: Option<String>,
    max_spill: Option<String>,
) -> Result<(), String> {
    if let Some(m) = pool {
        let pool = match m.as_str() {
            "unlimited" => usize::MAX,
            size => flotilla::config::parse_bytes(size)? as usize,
        };
        if settings.query_max_per_node == settings.pool_bytes {
            settings.query_max_per_node = pool;
        }
        settings.pool_bytes = pool;
    }
    if let Some(q) = query_max_per_node {
        settings.query_max_per_node = flotilla::config::parse_bytes(&q)? as usize;
    }
    if let Some(p) = spill_path {
        settings.spill_path = p.into();
    }
    if let Some(m) = max_spill {
        settings.max_spill_bytes = flotilla::config::parse_bytes(&m)?;
    }
    Ok(())
}

async fn worker(args: WorkerArgs) -> Result<(), String> {
    let config = worker_config(args)?;
    let bind = config.bind.clone();
    let handle =
        flotilla::worker::start_worker(config).await.map_err(|e| format!("cannot start the worker on {bind}: {e}"))?;
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

async fn sql(args: SqlArgs) -> Result<(), String> {
    let SqlArgs { server, insecure, ca, password, query } = args;
    let mut client = client_for(&server, &query);
    if insecure || ca.is_some() {
        client = client.with_tls(insecure, ca.as_deref())?;
    }
    if password {
        client = client.with_password(read_password(&query.user)?);
    }
    run_queries(client, &query).await
}

async fn generate(args: TpchGenArgs) -> Result<(), String> {
    let TpchGenArgs { benchmark, scale, output, format } = args;
    if scale.is_nan() || scale <= 0.0 {
        return Err(format!("scale factor must be positive, got {scale}"));
    }
    let folders = flotilla::generate::generate(benchmark, scale, std::path::Path::new(&output), format).await?;
    for f in folders {
        println!("{}", f.display());
    }
    Ok(())
}

async fn bench(suite: BenchSuite) -> Result<(), String> {
    match suite {
        BenchSuite::Tpch(options) => flotilla::bench::run_tpch(&options).await,
        BenchSuite::Tpcds(options) => flotilla::bench::run_tpcds(&options).await,
        BenchSuite::Planning(options) => flotilla::bench::run_planning(&options).await,
        BenchSuite::Scheduling { stages, tasks, workers, iterations } => {
            flotilla::bench::run_scheduling(stages.max(1), tasks.max(1), workers, iterations.max(1)).await
        }
        BenchSuite::Latency { sql, workers, iterations, server } => {
            flotilla::bench::run_latency(&sql, workers, iterations, server).await
        }
        BenchSuite::Exchange { bytes, iterations } => {
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
