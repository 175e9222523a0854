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
        #[command(flatten)]
        query: QueryArgs,
    },
    /// Run a coordinator.
    Coordinator {
        #[arg(long, default_value = "127.0.0.1:8080")]
        bind: String,
        /// Seconds without a heartbeat after which a worker is lost.
        #[arg(long, default_value_t = 5)]
        worker_timeout: u64,
        /// Secret every internal request must carry (or FLOTILLA_SHARED_SECRET).
        #[arg(long)]
        shared_secret: Option<String>,
        /// A query whose client stops asking for results this long is abandoned
        /// (Trino's query.client.timeout), e.g. 5m or 30s.
        #[arg(long, default_value = "5m", value_parser = flotilla::config::parse_duration)]
        query_client_timeout: Duration,
        /// Build client URIs from X-Forwarded-Proto/-Host (behind a trusted proxy).
        #[arg(long)]
        process_forwarded: bool,
        /// Accept test-only failure hooks (for tests).
        #[arg(long)]
        enable_failure_injection: bool,
    },
    /// Run a worker that joins a coordinator.
    Worker {
        #[arg(long)]
        coordinator: String,
        #[arg(long, default_value = "127.0.0.1:0")]
        bind: String,
        /// Bytes a task's output buffer holds before its producer waits (e.g. 32MB).
        #[arg(long)]
        output_buffer_max_bytes: Option<String>,
        /// Accept injected failures through POST /v1/failure-injection (for tests).
        #[arg(long)]
        enable_failure_injection: bool,
        /// Secret every internal request must carry (or FLOTILLA_SHARED_SECRET).
        #[arg(long)]
        shared_secret: Option<String>,
        /// Directory for spooled task output (retry_policy=task); the worker uses a
        /// subdirectory named after itself. Default: the system temp directory.
        #[arg(long, env = "FLOTILLA_SPOOL_DIR")]
        spool_dir: Option<String>,
        /// A task no client asked about for this long is abandoned (Trino's
        /// task.client.timeout), e.g. 2m or 30s.
        #[arg(long, default_value = "2m", value_parser = flotilla::config::parse_duration)]
        task_client_timeout: Duration,
    },
    /// Run SQL against a coordinator.
    Sql {
        #[arg(long)]
        server: String,
        #[command(flatten)]
        query: QueryArgs,
    },
    /// Write the 8 TPC-H tables to files (one folder per table).
    TpchGen {
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
    Tpch {
        /// Scale factor, e.g. 0.1 or 1.
        #[arg(long, default_value = "1")]
        scale: String,
        #[arg(long, default_value_t = 2)]
        workers: usize,
        #[arg(long, default_value_t = 3)]
        iterations: usize,
        /// Only these queries (1-22), comma separated.
        #[arg(long, value_delimiter = ',')]
        queries: Vec<usize>,
        /// Session property for the distributed runs, repeatable: --session retry_policy=task
        #[arg(long = "session", value_parser = parse_kv)]
        session: Vec<(String, String)>,
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
    /// `SELECT 1` latency through the statement protocol.
    Latency {
        #[arg(long, default_value_t = 200)]
        iterations: usize,
    },
}

#[derive(Args, Clone)]
struct QueryArgs {
    #[arg(long, default_value = "tpch")]
    catalog: String,
    #[arg(long, default_value = "tiny")]
    schema: String,
    /// Session property, repeatable: --session execution_policy=all-at-once
    #[arg(long = "session", value_parser = parse_kv)]
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

fn parse_kv(s: &str) -> Result<(String, String), String> {
    let (k, v) = s.split_once('=').ok_or_else(|| format!("'{s}' is not name=value"))?;
    Ok((k.trim().to_string(), v.trim().to_string()))
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
        Command::Local { workers, query } => {
            if workers == 0 {
                return Err("flotilla local needs at least one worker (--workers N)".into());
            }
            let cluster = LocalCluster::start(workers, LocalOptions::default()).await?;
            let result = run_queries(cluster.url(), &query).await;
            cluster.shutdown().await;
            result
        }
        Command::Coordinator {
            bind,
            worker_timeout,
            shared_secret,
            query_client_timeout,
            process_forwarded,
            enable_failure_injection,
        } => {
            let mut config = flotilla::coordinator::CoordinatorConfig::new(&bind);
            config.query_client_timeout = query_client_timeout.max(Duration::from_secs(1));
            config.process_forwarded = process_forwarded;
            config.enable_failure_injection = enable_failure_injection;
            config.shared_secret = flotilla::http::shared_secret(shared_secret);
            config.worker_timeout = Duration::from_secs(worker_timeout.max(1));
            let handle = flotilla::coordinator::start_coordinator(config)
                .await
                .map_err(|e| format!("cannot bind {bind}: {e}"))?;
            println!("flotilla coordinator listening on {}", handle.url);
            wait_for_ctrl_c().await;
            let _ = tokio::time::timeout(SHUTDOWN_GRACE, handle.shutdown()).await;
            Ok(())
        }
        Command::Worker {
            coordinator,
            bind,
            output_buffer_max_bytes,
            enable_failure_injection,
            shared_secret,
            spool_dir,
            task_client_timeout,
        } => {
            let mut config = flotilla::worker::WorkerConfig::new(&bind, &coordinator);
            // Clients long-poll for up to a second between contacts.
            config.task_client_timeout = task_client_timeout.max(Duration::from_secs(2));
            if let Some(dir) = spool_dir {
                config.spool_root = dir.into();
            }
            config.shared_secret = flotilla::http::shared_secret(shared_secret);
            config.enable_failure_injection = enable_failure_injection;
            if let Some(b) = output_buffer_max_bytes {
                config.settings.output_buffer_bytes = flotilla::config::parse_bytes(&b)?;
            }
            let handle =
                flotilla::worker::start_worker(config).await.map_err(|e| format!("cannot bind {bind}: {e}"))?;
            println!("flotilla worker {} listening on {}", handle.node_id, handle.url);
            wait_for_ctrl_c().await;
            // Tasks are aborted at once; the bound only caps waiting for open requests.
            let _ = tokio::time::timeout(SHUTDOWN_GRACE, handle.shutdown()).await;
            Ok(())
        }
        Command::Sql { server, query } => run_queries(&server, &query).await,
        Command::TpchGen { scale, output, format } => {
            if scale.is_nan() || scale <= 0.0 {
                return Err(format!("scale factor must be positive, got {scale}"));
            }
            let folders = flotilla::generate::generate(scale, std::path::Path::new(&output), format).await?;
            for f in folders {
                println!("{}", f.display());
            }
            Ok(())
        }
        Command::Bench { suite: BenchSuite::Tpch { scale, workers, iterations, queries, session } } => {
            flotilla::bench::run_tpch(&scale, workers, iterations.max(1), &queries, &session).await
        }
        Command::Bench { suite: BenchSuite::Scheduling { stages, tasks, workers, iterations } } => {
            flotilla::bench::run_scheduling(stages.max(1), tasks.max(1), workers, iterations.max(1)).await
        }
        Command::Bench { suite: BenchSuite::Latency { iterations } } => flotilla::bench::run_latency(iterations).await,
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

async fn run_queries(server: &str, q: &QueryArgs) -> Result<(), String> {
    let client = client_for(server, q);
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
        ClientError::Query { error_name, message, .. } => format!("Query failed ({error_name}): {message}"),
        other => format!("Error: {other}"),
    }
}
