//! The configuration directory, as Trino's `etc/`: `config.properties` (the server:
//! role, port, discovery URI, secret, timeouts, session defaults), `node.properties`
//! (the node's identity: `node.id`, `node.environment`, `node.internal-address`) and
//! `catalog/*.properties` (one catalog per file, named after it, with
//! `connector.name`). `flotilla coordinator --etc DIR` and `flotilla worker --etc DIR`
//! load it at start-up; command-line flags override it.
//!
//! A line that is not `key=value`, an unknown key or a bad value fails start-up
//! naming the file, the line and the key: a typo must not silently fall back to a
//! default. A missing `node.id` is generated once and written back to
//! `node.properties`, so a restarted node keeps its identity.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::config::{parse_bytes, parse_duration, SESSION_PROPERTIES};

#[derive(Debug, thiserror::Error)]
pub enum EtcError {
    #[error("cannot read {path}: {source}")]
    Read { path: String, source: std::io::Error },
    #[error("cannot write {path}: {source}")]
    Write { path: String, source: std::io::Error },
    #[error("{path}:{line}: expected key=value, got '{text}'")]
    Malformed { path: String, line: usize, text: String },
    #[error("{path}:{line}: unknown property '{key}'")]
    UnknownKey { path: String, line: usize, key: String },
    #[error("{path}:{line}: property '{key}' is set twice")]
    Duplicate { path: String, line: usize, key: String },
    #[error("{path}:{line}: bad value for '{key}': {message}")]
    BadValue { path: String, line: usize, key: String, message: String },
    #[error("{path}: {message}")]
    Invalid { path: String, message: String },
}

/// One `.properties` file: its entries with their line numbers.
#[derive(Debug, Clone)]
pub struct PropertiesFile {
    pub path: PathBuf,
    entries: BTreeMap<String, (String, usize)>,
}

impl PropertiesFile {
    /// Reads `path`; a missing file is empty when `optional`.
    pub fn read(path: &Path, optional: bool) -> Result<Self, EtcError> {
        match std::fs::read_to_string(path) {
            Ok(text) => Self::parse(path, &text),
            Err(e) if optional && e.kind() == std::io::ErrorKind::NotFound => {
                Ok(PropertiesFile { path: path.to_path_buf(), entries: BTreeMap::new() })
            }
            Err(source) => Err(EtcError::Read { path: path.display().to_string(), source }),
        }
    }

    /// Java-properties style, as Trino reads them: `key=value` per line, `#` and `!`
    /// comments, surrounding spaces ignored.
    pub fn parse(path: &Path, text: &str) -> Result<Self, EtcError> {
        let name = path.display().to_string();
        let mut entries = BTreeMap::new();
        for (i, raw) in text.lines().enumerate() {
            let line = raw.trim();
            if line.is_empty() || line.starts_with('#') || line.starts_with('!') {
                continue;
            }
            let Some((key, value)) = line.split_once('=') else {
                return Err(EtcError::Malformed { path: name, line: i + 1, text: line.to_string() });
            };
            let key = key.trim();
            if key.is_empty() {
                return Err(EtcError::Malformed { path: name, line: i + 1, text: line.to_string() });
            }
            if entries.insert(key.to_string(), (value.trim().to_string(), i + 1)).is_some() {
                return Err(EtcError::Duplicate { path: name, line: i + 1, key: key.to_string() });
            }
        }
        Ok(PropertiesFile { path: path.to_path_buf(), entries })
    }

    pub fn get(&self, key: &str) -> Option<&str> {
        self.entries.get(key).map(|(v, _)| v.as_str())
    }

    fn line(&self, key: &str) -> usize {
        self.entries.get(key).map_or(0, |(_, l)| *l)
    }

    /// Fails on the first key that is not `known` (or accepted by `also`).
    pub fn check_keys(&self, known: &[&str], also: &dyn Fn(&str) -> bool) -> Result<(), EtcError> {
        let mut by_line: Vec<(&String, &usize)> = self.entries.iter().map(|(k, (_, l))| (k, l)).collect();
        by_line.sort_by_key(|(_, l)| **l);
        match by_line.into_iter().find(|(k, _)| !known.contains(&k.as_str()) && !also(k)) {
            Some((key, line)) => {
                Err(EtcError::UnknownKey { path: self.path.display().to_string(), line: *line, key: key.clone() })
            }
            None => Ok(()),
        }
    }

    /// The value of `key` converted by `parse`; a failure names the file and line.
    pub fn parsed<T>(&self, key: &str, parse: impl Fn(&str) -> Result<T, String>) -> Result<Option<T>, EtcError> {
        let Some(v) = self.get(key) else { return Ok(None) };
        parse(v).map(Some).map_err(|message| EtcError::BadValue {
            path: self.path.display().to_string(),
            line: self.line(key),
            key: key.to_string(),
            message,
        })
    }

    pub fn entries(&self) -> impl Iterator<Item = (&str, &str)> {
        self.entries.iter().map(|(k, (v, _))| (k.as_str(), v.as_str()))
    }
}

fn boolean(v: &str) -> Result<bool, String> {
    match v.to_ascii_lowercase().as_str() {
        "true" => Ok(true),
        "false" => Ok(false),
        _ => Err(format!("expected true or false, got '{v}'")),
    }
}

fn port(v: &str) -> Result<u16, String> {
    v.parse::<u16>().map_err(|_| format!("expected a port number, got '{v}'"))
}

fn url(v: &str) -> Result<String, String> {
    if v.starts_with("http://") || v.starts_with("https://") {
        Ok(v.trim_end_matches('/').to_string())
    } else {
        Err(format!("expected an http:// or https:// URL, got '{v}'"))
    }
}

/// Keys of `config.properties` (and `node.properties`, which Trino merges with it).
const SERVER_KEYS: &[&str] = &[
    "coordinator",
    "http-server.http.port",
    "http-server.process-forwarded",
    "http-server.https.enabled",
    "http-server.https.port",
    "http-server.https.keystore.path",
    "http-server.https.keystore.key",
    "internal-communication.https.required",
    "internal-communication.https.truststore.path",
    "http-server.authentication.type",
    "discovery.uri",
    "internal-communication.shared-secret",
    "query.client.timeout",
    "task.client.timeout",
    "failure-detector.timeout",
    "sink.max-buffer-size",
    "exchange.base-directories",
    "shutdown.grace-period",
    "memory.heap-headroom-per-node",
    "query.max-memory-per-node",
    "spiller-spill-path",
    "max-spill-per-node",
    "query.max-concurrent-queries",
    "query.max-queued-queries",
    "query.max-memory",
    "node.id",
    "node.environment",
    "node.internal-address",
    "node.data-dir",
    "flight-sql.port",
    "protocol.spooling.enabled",
    "protocol.spooling.inlining.enabled",
    "protocol.spooling.inlining.max-rows",
    "protocol.spooling.inlining.max-size",
    "protocol.spooling.initial-segment-size",
    "protocol.spooling.max-segment-size",
    "protocol.spooling.encoding.compression.threshold",
];

/// A session property's config-file name: Trino's spelling, dashes for underscores
/// (`retry_policy` is `retry-policy`), setting the default of every query.
pub fn session_default_key(property: &str) -> String {
    property.replace('_', "-")
}

/// The server part of the directory.
#[derive(Debug, Clone, Default)]
pub struct ServerConfig {
    pub coordinator: Option<bool>,
    pub http_port: Option<u16>,
    pub process_forwarded: Option<bool>,
    pub discovery_uri: Option<String>,
    pub shared_secret: Option<String>,
    pub query_client_timeout: Option<Duration>,
    pub task_client_timeout: Option<Duration>,
    pub worker_timeout: Option<Duration>,
    pub output_buffer_max_bytes: Option<u64>,
    pub spool_dir: Option<PathBuf>,
    pub shutdown_grace_period: Option<Duration>,
    /// `memory.heap-headroom-per-node`: memory a worker leaves outside its pool.
    pub memory_heap_headroom: Option<u64>,
    /// `query.max-memory-per-node`, `spiller-spill-path`, `max-spill-per-node`.
    pub query_max_memory_per_node: Option<u64>,
    pub spill_path: Option<PathBuf>,
    pub max_spill_per_node: Option<u64>,
    /// `query.max-concurrent-queries`, `query.max-queued-queries` (coordinator).
    pub max_concurrent_queries: Option<usize>,
    pub max_queued_queries: Option<usize>,
    /// `query.max-memory` (coordinator).
    pub query_max_memory: Option<u64>,
    pub https_port: Option<u16>,
    /// Set when `http-server.https.enabled=true`.
    pub tls: Option<crate::tls::TlsConfig>,
    pub truststore: Option<PathBuf>,
    pub https_required: Option<bool>,
    /// `http-server.authentication.type` (PASSWORD is the one there is).
    pub authentication: Option<String>,
    /// Session property defaults, by session property name.
    pub session_defaults: BTreeMap<String, String>,
    /// `protocol.spooling.*`, and `spooling-manager.properties`.
    pub spooling: SpoolingConfig,
    /// `flight-sql.port`: Arrow Flight SQL's port (coordinator; none: not served).
    pub flight_sql_port: Option<u16>,
}

/// `protocol.spooling.*` of `config.properties` and `fs.*` of
/// `spooling-manager.properties`, with Trino's defaults.
#[derive(Debug, Clone)]
pub struct SpoolingConfig {
    /// `protocol.spooling.enabled`.
    pub enabled: bool,
    /// `protocol.spooling.inlining.enabled`, `.max-rows`, `.max-size`.
    pub inlining_enabled: bool,
    pub inlining_max_rows: usize,
    pub inlining_max_size: usize,
    /// `protocol.spooling.initial-segment-size` and `.max-segment-size`: a query's
    /// segments start at the first and double up to the second.
    pub initial_segment_size: usize,
    pub max_segment_size: usize,
    /// `protocol.spooling.encoding.compression.threshold`: smaller segments are sent
    /// uncompressed.
    pub compression_threshold: usize,
    /// `fs.location`: where segments are written, a local directory or
    /// `s3://bucket/prefix`. None: a directory of the process's own under the
    /// system's temporary directory.
    pub location: Option<String>,
    /// `spooling-manager.properties` itself, for its `s3.*` keys.
    pub manager: Option<PropertiesFile>,
    /// `fs.segment.ttl`: an unacknowledged segment is deleted this long after it
    /// was written.
    pub segment_ttl: Duration,
    /// `fs.max-spooled-size`: unacknowledged segments of all queries together may
    /// hold this many bytes; past it a page's rows come inline (flotilla's key).
    pub max_spooled_size: u64,
    /// `fs.max-query-spooled-size`: the same for one query's segments.
    pub max_query_spooled_size: u64,
}

impl Default for SpoolingConfig {
    fn default() -> Self {
        SpoolingConfig {
            enabled: true,
            inlining_enabled: true,
            inlining_max_rows: 1000,
            inlining_max_size: 128 << 10,
            initial_segment_size: 8 << 20,
            max_segment_size: 16 << 20,
            compression_threshold: 8 << 10,
            location: None,
            manager: None,
            segment_ttl: Duration::from_secs(12 * 3600),
            max_spooled_size: 4 << 30,
            max_query_spooled_size: 512 << 20,
        }
    }
}

/// The node's identity.
#[derive(Debug, Clone)]
pub struct NodeIdentity {
    pub id: String,
    pub environment: String,
    /// The address other nodes reach this one at (`node.internal-address`).
    pub internal_address: Option<String>,
    /// `node.data-dir`: where the node keeps state (the coordinator its catalogs'
    /// tables, when a catalog names no metastore path of its own).
    pub data_dir: Option<PathBuf>,
}

pub const DEFAULT_ENVIRONMENT: &str = "production";

/// One `catalog/NAME.properties`.
#[derive(Debug, Clone)]
pub struct CatalogFile {
    pub name: String,
    pub connector: String,
    pub properties: PropertiesFile,
}

#[derive(Debug, Clone)]
pub struct Etc {
    pub dir: PathBuf,
    pub server: ServerConfig,
    pub node: NodeIdentity,
    pub catalogs: Vec<CatalogFile>,
    /// `password-authenticator.properties`: `file.password-file`.
    pub password_file: Option<PathBuf>,
    /// `access-control.properties`: `security.config-file` (rules.json).
    pub access_rules: Option<PathBuf>,
    /// `group-provider.properties`: `file.group-file`.
    pub group_file: Option<PathBuf>,
}

/// A plug-in file like `password-authenticator.properties`: its `NAME_KEY` must be
/// `file`, and `path_key` names the file it uses (relative to the directory).
fn plugin_file(dir: &Path, file: &str, name_key: &str, path_key: &str) -> Result<Option<PathBuf>, EtcError> {
    let path = dir.join(file);
    if !path.exists() {
        return Ok(None);
    }
    let p = PropertiesFile::read(&path, false)?;
    p.check_keys(&[name_key, path_key, "file.refresh-period"], &|_| false)?;
    if p.get(name_key) != Some("file") {
        return Err(EtcError::Invalid {
            path: path.display().to_string(),
            message: format!("{name_key} must be 'file'"),
        });
    }
    match p.get(path_key) {
        Some(v) => Ok(Some(dir.join(v))),
        None => Err(EtcError::Invalid { path: path.display().to_string(), message: format!("{path_key} is missing") }),
    }
}

impl Etc {
    pub fn load(dir: &Path) -> Result<Etc, EtcError> {
        if !dir.is_dir() {
            return Err(EtcError::Invalid { path: dir.display().to_string(), message: "not a directory".into() });
        }
        let config = PropertiesFile::read(&dir.join("config.properties"), false)?;
        let node_path = dir.join("node.properties");
        let node = PropertiesFile::read(&node_path, true)?;
        let is_session = |k: &str| SESSION_PROPERTIES.iter().any(|p| session_default_key(p.name) == k);
        config.check_keys(SERVER_KEYS, &is_session)?;
        node.check_keys(SERVER_KEYS, &is_session)?;
        let mut server = ServerConfig::default();
        for file in [&config, &node] {
            merge_server(&mut server, file)?;
        }
        let id = match node.get("node.id").or(config.get("node.id")) {
            Some(id) => check_node_id(id).map_err(|message| EtcError::BadValue {
                path: node_path.display().to_string(),
                line: node.line("node.id"),
                key: "node.id".into(),
                message,
            })?,
            None => write_node_id(&node_path)?,
        };
        let environment =
            node.get("node.environment").or(config.get("node.environment")).unwrap_or(DEFAULT_ENVIRONMENT).to_string();
        let internal_address =
            node.get("node.internal-address").or(config.get("node.internal-address")).map(str::to_string);
        let data_dir = node.get("node.data-dir").or(config.get("node.data-dir")).map(PathBuf::from);
        let catalogs = load_catalogs(&dir.join("catalog"))?;
        let password_file =
            plugin_file(dir, "password-authenticator.properties", "password-authenticator.name", "file.password-file")?;
        if server.authentication.is_some() && password_file.is_none() {
            return Err(EtcError::Invalid {
                path: dir.join("config.properties").display().to_string(),
                message: "http-server.authentication.type=PASSWORD needs password-authenticator.properties \
                          (password-authenticator.name=file, file.password-file=...)"
                    .into(),
            });
        }
        spooling_manager(dir, &mut server.spooling)?;
        let access_rules =
            plugin_file(dir, "access-control.properties", "access-control.name", "security.config-file")?;
        let group_file = plugin_file(dir, "group-provider.properties", "group-provider.name", "file.group-file")?;
        Ok(Etc {
            dir: dir.to_path_buf(),
            server,
            node: NodeIdentity { id, environment, internal_address, data_dir },
            catalogs,
            password_file,
            access_rules,
            group_file,
        })
    }
}

/// `protocol.spooling.*` of one file.
fn merge_spooling(s: &mut SpoolingConfig, f: &PropertiesFile) -> Result<(), EtcError> {
    let size = |v: &str| parse_bytes(v).map(|b| b as usize);
    let count = |v: &str| v.trim().parse::<usize>().map_err(|_| format!("expected a whole number, got '{v}'"));
    if let Some(v) = f.parsed("protocol.spooling.enabled", boolean)? {
        s.enabled = v;
    }
    if let Some(v) = f.parsed("protocol.spooling.inlining.enabled", boolean)? {
        s.inlining_enabled = v;
    }
    if let Some(v) = f.parsed("protocol.spooling.inlining.max-rows", count)? {
        s.inlining_max_rows = v;
    }
    if let Some(v) = f.parsed("protocol.spooling.inlining.max-size", size)? {
        s.inlining_max_size = v;
    }
    if let Some(v) = f.parsed("protocol.spooling.initial-segment-size", size)? {
        s.initial_segment_size = v;
    }
    if let Some(v) = f.parsed("protocol.spooling.max-segment-size", size)? {
        s.max_segment_size = v;
    }
    if let Some(v) = f.parsed("protocol.spooling.encoding.compression.threshold", size)? {
        s.compression_threshold = v;
    }
    Ok(())
}

/// `spooling-manager.properties`: Trino's file system spooling manager, on a local
/// directory or in S3 (`fs.location`; `s3.*` as for catalogs), with `fs.segment.ttl`.
fn spooling_manager(dir: &Path, s: &mut SpoolingConfig) -> Result<(), EtcError> {
    let path = dir.join("spooling-manager.properties");
    if !path.exists() {
        return Ok(());
    }
    let p = PropertiesFile::read(&path, false)?;
    let keys = [
        "spooling-manager.name",
        "fs.location",
        "fs.segment.ttl",
        "fs.native-s3.enabled",
        "fs.max-spooled-size",
        "fs.max-query-spooled-size",
    ];
    p.check_keys(&keys, &|k| k.starts_with("s3."))?;
    let invalid = |message: String| EtcError::Invalid { path: path.display().to_string(), message };
    if p.get("spooling-manager.name").is_some_and(|n| n != "filesystem") {
        return Err(invalid("spooling-manager.name must be 'filesystem'".into()));
    }
    if let Some(location) = p.get("fs.location") {
        let local = location.strip_prefix("file://").unwrap_or(location);
        let s3 = local.strip_prefix("s3://").is_some_and(|rest| !rest.is_empty() && !rest.starts_with('/'));
        if !s3 && (local.contains("://") || !Path::new(local).is_absolute()) {
            let m = format!("fs.location '{location}': expected an absolute local directory or s3://bucket/prefix");
            return Err(invalid(m));
        }
        s.location = Some(local.to_string());
    }
    if let Some(ttl) = p.parsed("fs.segment.ttl", parse_duration)? {
        s.segment_ttl = ttl;
    }
    if let Some(v) = p.parsed("fs.max-spooled-size", parse_bytes)? {
        s.max_spooled_size = v;
    }
    if let Some(v) = p.parsed("fs.max-query-spooled-size", parse_bytes)? {
        s.max_query_spooled_size = v;
    }
    s.manager = Some(p);
    Ok(())
}

fn merge_server(server: &mut ServerConfig, f: &PropertiesFile) -> Result<(), EtcError> {
    fn or<T>(a: Option<T>, b: Option<T>) -> Option<T> {
        b.or(a)
    }
    server.coordinator = or(server.coordinator, f.parsed("coordinator", boolean)?);
    server.http_port = or(server.http_port, f.parsed("http-server.http.port", port)?);
    server.process_forwarded = or(server.process_forwarded, f.parsed("http-server.process-forwarded", boolean)?);
    server.discovery_uri = or(server.discovery_uri.take(), f.parsed("discovery.uri", url)?);
    server.shared_secret =
        or(server.shared_secret.take(), f.get("internal-communication.shared-secret").map(str::to_string));
    server.query_client_timeout = or(server.query_client_timeout, f.parsed("query.client.timeout", parse_duration)?);
    server.task_client_timeout = or(server.task_client_timeout, f.parsed("task.client.timeout", parse_duration)?);
    server.worker_timeout = or(server.worker_timeout, f.parsed("failure-detector.timeout", parse_duration)?);
    server.output_buffer_max_bytes = or(server.output_buffer_max_bytes, f.parsed("sink.max-buffer-size", parse_bytes)?);
    server.spool_dir = or(server.spool_dir.take(), f.get("exchange.base-directories").map(PathBuf::from));
    server.memory_heap_headroom =
        or(server.memory_heap_headroom, f.parsed("memory.heap-headroom-per-node", parse_bytes)?);
    server.query_max_memory_per_node =
        or(server.query_max_memory_per_node, f.parsed("query.max-memory-per-node", parse_bytes)?);
    server.spill_path = or(server.spill_path.take(), f.get("spiller-spill-path").map(PathBuf::from));
    server.max_spill_per_node = or(server.max_spill_per_node, f.parsed("max-spill-per-node", parse_bytes)?);
    let count = |v: &str| v.trim().parse::<usize>().map_err(|_| format!("expected a whole number, got '{v}'"));
    server.max_concurrent_queries = or(server.max_concurrent_queries, f.parsed("query.max-concurrent-queries", count)?);
    server.max_queued_queries = or(server.max_queued_queries, f.parsed("query.max-queued-queries", count)?);
    server.query_max_memory = or(server.query_max_memory, f.parsed("query.max-memory", parse_bytes)?);
    server.shutdown_grace_period = or(server.shutdown_grace_period, f.parsed("shutdown.grace-period", parse_duration)?);
    server.https_port = or(server.https_port, f.parsed("http-server.https.port", port)?);
    server.flight_sql_port = or(server.flight_sql_port, f.parsed("flight-sql.port", port)?);
    merge_spooling(&mut server.spooling, f)?;
    server.truststore =
        or(server.truststore.take(), f.get("internal-communication.https.truststore.path").map(PathBuf::from));
    server.https_required = or(server.https_required, f.parsed("internal-communication.https.required", boolean)?);
    if f.parsed("http-server.https.enabled", boolean)? == Some(true) {
        let Some(path) = f.get("http-server.https.keystore.path") else {
            return Err(EtcError::Invalid {
                path: f.path.display().to_string(),
                message: "http-server.https.enabled=true needs http-server.https.keystore.path (a PEM file \
                          with the certificate chain and the private key)"
                    .into(),
            });
        };
        if f.get("http-server.https.keystore.key").is_some_and(|k| !k.is_empty()) {
            return Err(EtcError::BadValue {
                path: f.path.display().to_string(),
                line: f.line("http-server.https.keystore.key"),
                key: "http-server.https.keystore.key".into(),
                message: "encrypted keys are not supported; give an unencrypted PEM key".into(),
            });
        }
        server.tls = Some(crate::tls::TlsConfig { cert_chain: PathBuf::from(path), private_key: None });
    }
    server.authentication = or(
        server.authentication.take(),
        f.parsed("http-server.authentication.type", |v| match v.to_ascii_uppercase().as_str() {
            "PASSWORD" => Ok("PASSWORD".to_string()),
            _ => Err(format!("'{v}' is not supported (PASSWORD is)")),
        })?,
    );
    for p in SESSION_PROPERTIES {
        let key = session_default_key(p.name);
        if let Some(v) = f.get(&key) {
            // Checked like a client's value, so a bad default fails start-up.
            let one: BTreeMap<String, String> = [(p.name.to_string(), v.to_string())].into_iter().collect();
            crate::config::SessionProperties::parse(&one).map_err(|e| EtcError::BadValue {
                path: f.path.display().to_string(),
                line: f.line(&key),
                key: key.clone(),
                message: e.to_string(),
            })?;
            server.session_defaults.insert(p.name.to_string(), v.to_string());
        }
    }
    Ok(())
}

fn check_node_id(id: &str) -> Result<String, String> {
    let ok = !id.is_empty() && id.len() <= 128 && id.bytes().all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b));
    if ok {
        Ok(id.to_string())
    } else {
        Err(format!("'{id}' is not a node id (letters, digits, '-', '_', '.'; at most 128)"))
    }
}

/// Generates a node id and appends it to `node.properties` (creating it), so the
/// next start finds it.
fn write_node_id(path: &Path) -> Result<String, EtcError> {
    let id = format!("{}-{}", "node", crate::util::random_suffix(12));
    let mut text = std::fs::read_to_string(path).unwrap_or_default();
    if !text.is_empty() && !text.ends_with('\n') {
        text.push('\n');
    }
    text.push_str(&format!("# generated at first start; keep it so the node keeps its identity\nnode.id={id}\n"));
    let tmp = path.with_extension("properties.tmp");
    std::fs::write(&tmp, text)
        .and_then(|_| std::fs::rename(&tmp, path))
        .map_err(|source| EtcError::Write { path: path.display().to_string(), source })?;
    Ok(id)
}

fn load_catalogs(dir: &Path) -> Result<Vec<CatalogFile>, EtcError> {
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(source) => return Err(EtcError::Read { path: dir.display().to_string(), source }),
    };
    let mut paths: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "properties"))
        .collect();
    paths.sort();
    let mut catalogs = Vec::new();
    for path in paths {
        let name = path.file_stem().and_then(|s| s.to_str()).unwrap_or_default().to_string();
        let valid = !name.is_empty() && name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_');
        if !valid {
            return Err(EtcError::Invalid {
                path: path.display().to_string(),
                message: format!("'{name}' is not a catalog name (lower-case letters, digits, '_')"),
            });
        }
        let properties = PropertiesFile::read(&path, false)?;
        let connector = properties.get("connector.name").map(str::to_string).ok_or_else(|| EtcError::Invalid {
            path: path.display().to_string(),
            message: "connector.name is missing".into(),
        })?;
        catalogs.push(CatalogFile { name, connector, properties });
    }
    Ok(catalogs)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp_etc(files: &[(&str, &str)]) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("flotilla-etc-{}", crate::util::random_suffix(8)));
        for (name, text) in files {
            let path = dir.join(name);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        }
        dir
    }

    #[test]
    fn a_directory_loads_and_the_node_id_is_kept() {
        let dir = temp_etc(&[
            (
                "config.properties",
                "# a worker\ncoordinator=false\nhttp-server.http.port=8081\ndiscovery.uri=http://c:8080/\n\
                 query.client.timeout=30s\nretry-policy=task\nsink.max-buffer-size=8MB\n",
            ),
            ("node.properties", "node.environment=test\n"),
            ("catalog/gen.properties", "connector.name=tpch\n"),
            ("catalog/files.properties", "connector.name=files\nfiles.allowed-locations=/data\n"),
        ]);
        let etc = Etc::load(&dir).unwrap();
        assert_eq!(etc.server.coordinator, Some(false));
        assert_eq!(etc.server.http_port, Some(8081));
        assert_eq!(etc.server.discovery_uri.as_deref(), Some("http://c:8080"));
        assert_eq!(etc.server.query_client_timeout, Some(Duration::from_secs(30)));
        assert_eq!(etc.server.output_buffer_max_bytes, Some(8 << 20));
        assert_eq!(etc.server.session_defaults.get("retry_policy").map(String::as_str), Some("task"));
        assert_eq!(etc.node.environment, "test");
        let names: Vec<&str> = etc.catalogs.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["files", "gen"]);
        // Generated once, then read back: a restart keeps the id.
        let again = Etc::load(&dir).unwrap();
        assert_eq!(again.node.id, etc.node.id);
        assert!(std::fs::read_to_string(dir.join("node.properties")).unwrap().contains("node.environment=test"));
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn mistakes_name_the_file_line_and_key() {
        let cases = [
            (
                "coordinator=true\nhttp-server.htp.port=1\n",
                "config.properties:2: unknown property 'http-server.htp.port'",
            ),
            ("coordinator=true\njust words\n", "config.properties:2: expected key=value"),
            ("coordinator=yes\n", "config.properties:1: bad value for 'coordinator'"),
            ("retry-policy=sometimes\n", "config.properties:1: bad value for 'retry-policy'"),
            ("discovery.uri=c:8080\n", "config.properties:1: bad value for 'discovery.uri'"),
            ("coordinator=true\ncoordinator=false\n", "config.properties:2: property 'coordinator' is set twice"),
        ];
        for (text, want) in cases {
            let dir = temp_etc(&[("config.properties", text)]);
            let e = Etc::load(&dir).unwrap_err().to_string();
            assert!(e.contains(want), "{text:?}: {e}");
            let _ = std::fs::remove_dir_all(&dir);
        }
        let dir = temp_etc(&[("config.properties", "coordinator=true\n"), ("catalog/x.properties", "a=b\n")]);
        let e = Etc::load(&dir).unwrap_err().to_string();
        assert!(e.contains("x.properties: connector.name is missing"), "{e}");
        let _ = std::fs::remove_dir_all(&dir);
        let missing = std::env::temp_dir().join("flotilla-etc-does-not-exist");
        assert!(Etc::load(&missing).unwrap_err().to_string().contains("not a directory"));
    }
}
