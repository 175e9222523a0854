//! The `flotilla` command line as clap reads it: one subcommand each for a local
//! cluster, a coordinator, a worker, the SQL shell, the generator, the benchmarks
//! and the simulator,
//! with the flags coordinators and workers share. `main` dispatches on it.

use std::time::Duration;

use clap::{Args, Parser, Subcommand};
use flotilla::format::OutputFormat;

#[derive(Parser)]
#[command(name = "flotilla", version, about = "A distributed SQL query engine on DataFusion")]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand)]
pub enum Command {
    /// A coordinator and N workers in this process, then run SQL against them.
    Local(LocalArgs),
    /// Run a coordinator.
    Coordinator(CoordinatorArgs),
    /// Run a worker that joins a coordinator.
    Worker(WorkerArgs),
    /// Run SQL against a coordinator.
    Sql(SqlArgs),
    /// Write the 8 TPC-H tables (or the 24 TPC-DS tables) to files, one folder per
    /// table.
    TpchGen(TpchGenArgs),
    /// Benchmarks against single-node DataFusion.
    Bench {
        #[command(subcommand)]
        suite: BenchSuite,
    },
    /// Run the schedulers under the deterministic simulator, seed after seed.
    Sim(SimArgs),
    /// Run generated queries on a local cluster and compare each with an oracle
    /// (single-node DataFusion, counted multisets, ternary logic partitioning).
    Difftest(DifftestArgs),
}

#[derive(Args)]
pub struct DifftestArgs {
    /// The first query's seed; query i has seed + i.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// How many queries.
    #[arg(long, default_value_t = 1000)]
    pub queries: usize,
    #[arg(long, default_value_t = 2)]
    pub workers: usize,
    /// A Python that imports `duckdb`: DuckDB checks every query the engines mean
    /// alike too.
    #[arg(long)]
    pub duckdb_python: Option<std::path::PathBuf>,
}

#[derive(Args)]
pub struct SimArgs {
    /// How many seeds to run, from --seed on.
    #[arg(long, default_value_t = 1)]
    pub seeds: u64,
    /// The first seed.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Simulated workers.
    #[arg(long, default_value_t = 4)]
    pub workers: usize,
    /// Retry policy: none, task, or both.
    #[arg(long, default_value = "both")]
    pub policy: String,
    /// Worker stages of each query (drawn from the seed when not given).
    #[arg(long)]
    pub stages: Option<usize>,
    /// Most partitions a stage may have.
    #[arg(long, default_value_t = 6)]
    pub partitions: usize,
    /// Run without faults.
    #[arg(long)]
    pub no_faults: bool,
    /// Print every event of every run.
    #[arg(long)]
    pub trace: bool,
    /// Measure the control plane at scale instead: one calm query per size of the
    /// grid, a markdown table of its costs.
    #[arg(long)]
    pub scale: bool,
    /// Simulated workers of the scale grid, comma-separated.
    #[arg(long, value_delimiter = ',', default_values_t = [10, 100, 1000])]
    pub scale_workers: Vec<usize>,
    /// Stages of the scale grid's queries, comma-separated.
    #[arg(long, value_delimiter = ',', default_values_t = [10, 50, 200])]
    pub scale_stages: Vec<usize>,
    /// Partitions of the scale queries' join stages.
    #[arg(long, default_value_t = 100)]
    pub hash_partitions: usize,
    /// Kill a worker 3 s into each scale run of policy task.
    #[arg(long)]
    pub lose_worker: bool,
}

#[derive(Args)]
pub struct LocalArgs {
    #[arg(long, default_value_t = 2)]
    pub workers: usize,
    /// Keep the `files` catalog's tables here (DIR/catalogs/files.json), and put
    /// tables made by CREATE TABLE ... AS under DIR/warehouse.
    #[arg(long)]
    pub data_dir: Option<std::path::PathBuf>,
    #[command(flatten)]
    pub tpch: TpchArgs,
    #[command(flatten)]
    pub query: QueryArgs,
}

/// How the built-in `tpch` catalog spells its tables: the properties of Trino's tpch
/// connector, for a cluster without catalog files.
#[derive(Args, Clone, Default)]
pub struct TpchArgs {
    /// tpch.column-naming of the built-in `tpch`: SIMPLIFIED (Trino's default:
    /// `name`, `orderkey`) or STANDARD (the TPC-H queries' `n_name`, `o_orderkey`).
    #[arg(long)]
    pub tpch_column_naming: Option<String>,
    /// tpch.double-type-mapping of the built-in `tpch`: DOUBLE (Trino's default) or
    /// DECIMAL (decimal(12,2), exact money).
    #[arg(long)]
    pub tpch_double_type_mapping: Option<String>,
}

impl TpchArgs {
    /// The spelling the flags ask for, if any was given.
    pub fn spelling(&self) -> Result<Option<flotilla::connector::tpch::TpchSpelling>, String> {
        if self.tpch_column_naming.is_none() && self.tpch_double_type_mapping.is_none() {
            return Ok(None);
        }
        flotilla::connector::tpch::TpchSpelling::from_properties(
            self.tpch_column_naming.as_deref(),
            self.tpch_double_type_mapping.as_deref(),
        )
        .map(Some)
    }
}

#[derive(Args)]
pub struct CoordinatorArgs {
    #[command(flatten)]
    pub node: NodeArgs,
    /// Address to listen on (default 127.0.0.1:8080, or 0.0.0.0:http-server.http.port).
    #[arg(long)]
    pub bind: Option<String>,
    /// Seconds without a heartbeat after which a worker is lost (default 5).
    #[arg(long)]
    pub worker_timeout: Option<u64>,
    /// A query whose client stops asking for results this long is abandoned
    /// (Trino's query.client.timeout), e.g. 5m or 30s.
    #[arg(long, value_parser = flotilla::config::parse_duration)]
    pub query_client_timeout: Option<Duration>,
    /// Build client URIs from X-Forwarded-Proto/-Host (behind a trusted proxy).
    #[arg(long)]
    pub process_forwarded: bool,
    /// Directories under which `files` tables may live, comma separated
    /// (files.allowed-locations of the built-in `files` catalog; default none).
    #[arg(long)]
    pub files_allowed_locations: Option<String>,
    /// Keep the built-in `files` catalog's tables in DIR/catalogs/files.json and
    /// put CREATE TABLE ... AS tables under DIR/warehouse (with catalog files, set
    /// node.data-dir and files.warehouse instead).
    #[arg(long)]
    pub data_dir: Option<std::path::PathBuf>,
    #[command(flatten)]
    pub tpch: TpchArgs,
    /// Accept test-only failure hooks (for tests).
    #[arg(long)]
    pub enable_failure_injection: bool,
    /// Queries that run at once; the others wait QUEUED
    /// (query.max-concurrent-queries; default no limit).
    #[arg(long)]
    pub max_concurrent_queries: Option<usize>,
    /// Queries that may wait for a slot; beyond, QUERY_QUEUE_FULL
    /// (query.max-queued-queries; default 1000).
    #[arg(long)]
    pub max_queued_queries: Option<usize>,
    /// Require logins: Trino's password file (bcrypt or PBKDF2 entries); needs HTTPS.
    #[arg(long)]
    pub password_file: Option<std::path::PathBuf>,
    /// Trino's file-based access control rules (rules.json).
    #[arg(long)]
    pub access_rules: Option<std::path::PathBuf>,
    /// Users' groups for the access rules (group:user1,user2 lines).
    #[arg(long)]
    pub groups_file: Option<std::path::PathBuf>,
    /// The default of a session property for every query, NAME=VALUE (repeatable;
    /// the same as NAME with dashes in config.properties; a client's value wins).
    #[arg(long = "session", value_name = "NAME=VALUE")]
    pub session_defaults: Vec<String>,
    /// Serve Arrow Flight SQL on this port of the bound address (flight-sql.port;
    /// 0: any free port; default not served).
    #[arg(long)]
    pub flight_sql_port: Option<u16>,
}

#[derive(Args)]
pub struct WorkerArgs {
    #[command(flatten)]
    pub node: NodeArgs,
    /// The coordinator's URL (discovery.uri).
    #[arg(long)]
    pub coordinator: Option<String>,
    /// Address to listen on (default 127.0.0.1:0, or 0.0.0.0:http-server.http.port).
    #[arg(long)]
    pub bind: Option<String>,
    /// What to announce to the coordinator: a URL, or a host name or address that
    /// takes the bound port (node.internal-address). Default: the bound address,
    /// a wildcard replaced by this host's address.
    #[arg(long)]
    pub advertise: Option<String>,
    /// Bytes a task's output buffer holds before its producer waits (e.g. 32MB).
    #[arg(long)]
    pub output_buffer_max_bytes: Option<String>,
    /// Accept injected failures through POST /v1/failure-injection (for tests).
    #[arg(long)]
    pub enable_failure_injection: bool,
    /// Directory for spooled task output (retry_policy=task); the worker uses a
    /// subdirectory named after itself. Default: the system temp directory.
    #[arg(long, env = "FLOTILLA_SPOOL_DIR")]
    pub spool_dir: Option<String>,
    /// A task no client asked about for this long is abandoned (Trino's
    /// task.client.timeout), e.g. 2m or 30s (default 2m).
    #[arg(long, value_parser = flotilla::config::parse_duration)]
    pub task_client_timeout: Option<Duration>,
    /// How long a graceful shutdown (SIGTERM, Ctrl-C, PUT /v1/info/state) waits for
    /// the worker's queries before aborting their tasks (shutdown.grace-period; 2m).
    #[arg(long, value_parser = flotilla::config::parse_duration)]
    pub shutdown_grace_period: Option<Duration>,
    /// The memory pool every task of the worker reserves from, e.g. 2GB (default:
    /// 70% of the machine's or the cgroup's memory; memory.heap-headroom-per-node
    /// in --etc leaves that much outside it); `unlimited` for no pool (benchmarks).
    #[arg(long)]
    pub memory: Option<String>,
    /// What one query's tasks on this worker may hold together (Trino's
    /// query.max-memory-per-node; default: the whole pool).
    #[arg(long)]
    pub query_max_memory_per_node: Option<String>,
    /// Where operators spill (spiller-spill-path; a subdirectory per worker).
    /// Default: the system temp directory.
    #[arg(long)]
    pub spill_path: Option<String>,
    /// Bytes of spill files the worker may hold at once (max-spill-per-node;
    /// default 100GB).
    #[arg(long)]
    pub max_spill_per_node: Option<String>,
    /// Directories (and s3:// prefixes) the built-in `files` catalog's tables may
    /// live under: the worker opens no file elsewhere, whatever a plan names (with
    /// catalog files, files.allowed-locations). Default: the coordinator's
    /// directories (its --data-dir warehouse and allowed locations).
    #[arg(long)]
    pub files_allowed_locations: Option<String>,
}

#[derive(Args)]
pub struct SqlArgs {
    /// The coordinator: http(s)://host:port, or host:port.
    #[arg(long)]
    pub server: String,
    /// HTTPS: accept any server certificate (tests, first steps only).
    #[arg(long)]
    pub insecure: bool,
    /// HTTPS: trust the CA certificates in this PEM file besides the system's.
    #[arg(long)]
    pub ca: Option<std::path::PathBuf>,
    /// Log in with a password: from FLOTILLA_PASSWORD (or TRINO_PASSWORD) when
    /// set, else asked for on the terminal.
    #[arg(long)]
    pub password: bool,
    #[command(flatten)]
    pub query: QueryArgs,
}

#[derive(Args)]
pub struct TpchGenArgs {
    #[arg(long, value_enum, default_value = "tpch")]
    pub benchmark: flotilla::generate::Benchmark,
    #[arg(long, default_value = "1")]
    pub scale: f64,
    #[arg(long)]
    pub output: String,
    #[arg(long, value_enum, default_value = "parquet")]
    pub format: flotilla::generate::FileFormat,
}

#[derive(Subcommand)]
pub enum BenchSuite {
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
    /// Planning time of the TPC-H (and TPC-DS) queries, against DataFusion's.
    Planning(flotilla::bench::PlanningBench),
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
pub struct NodeArgs {
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
    pub fn apply(
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
    pub fn etc(&self) -> Result<Option<flotilla::etc::Etc>, String> {
        self.etc.as_deref().map(flotilla::etc::Etc::load).transpose().map_err(|e| e.to_string())
    }
}

#[derive(Args, Clone)]
pub struct QueryArgs {
    #[arg(long, default_value = "tpch")]
    pub catalog: String,
    #[arg(long, default_value = "tiny")]
    pub schema: String,
    /// Session property, repeatable: --session execution_policy=all-at-once
    #[arg(long = "session", value_parser = flotilla::config::parse_name_value)]
    pub session: Vec<(String, String)>,
    #[arg(long, default_value = "flotilla")]
    pub user: String,
    /// SQL to run (may start with a `--` comment).
    #[arg(short = 'e', long = "execute", conflicts_with = "file", allow_hyphen_values = true)]
    pub execute: Option<String>,
    /// File of `;`-separated statements to run.
    #[arg(short = 'f', long = "file")]
    pub file: Option<String>,
    #[arg(long, value_enum, default_value = "aligned")]
    pub output_format: OutputFormat,
}
