//! Session properties, typed: `SessionProperties` holds every property a query can set,
//! parsed and checked once (one default and one allowed range each, in
//! `SESSION_PROPERTIES`). The coordinator parses a query's `X-Trino-Session` into it
//! before planning; workers parse the same map from each task update, so a request that
//! skipped the coordinator is held to the same ranges. The session property table of
//! `docs/operations/configuration.md` is tested against `SESSION_PROPERTIES`.

use std::collections::BTreeMap;
use std::time::Duration;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExecutionPolicy {
    /// Trino's phases: build sides before probe sides.
    Phased,
    AllAtOnce,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RetryPolicy {
    None,
    Query,
    Task,
}

/// Every session property of one query, parsed. `None` means "the worker's or
/// coordinator's own default" where that depends on the process (buffer sizes, H).
#[derive(Debug, Clone, PartialEq)]
pub struct SessionProperties {
    pub execution_policy: ExecutionPolicy,
    pub retry_policy: RetryPolicy,
    pub query_retry_attempts: usize,
    pub task_retry_attempts: usize,
    pub stage_retry_attempts: usize,
    pub batch_size: Option<usize>,
    pub output_buffer_max_bytes: Option<u64>,
    pub exchange_max_buffer_bytes: Option<u64>,
    pub exchange_max_error_duration: Option<Duration>,
    pub hash_partition_count: Option<usize>,
    pub query_max_planning_time: Duration,
    /// What the query's tasks on one worker may hold together; the worker's
    /// `query.max-memory-per-node` without it.
    pub query_max_memory_per_node: Option<u64>,
    /// What the query's tasks may hold together over the cluster; the coordinator's
    /// `query.max-memory` without it.
    pub query_max_memory: Option<u64>,
    /// Joins as sort-merge joins, whose sorted inputs spill, instead of hash joins,
    /// whose build side must fit in memory.
    pub spill_enabled: bool,
    /// Largest estimated build side a join broadcasts to every task of its probe
    /// side instead of repartitioning both sides (Trino's name).
    pub join_max_broadcast_table_size: u64,
    /// Largest number of rows, by the tables' statistics, a query's scans may read for
    /// it to run as one task on one worker instead of stages over the cluster.
    pub single_task_max_rows: u64,
    /// flotilla's logical rewrites that filter before joining and aggregating
    /// (`plan::join_order`, `plan::semi_join`, `plan::semi_join_reduction`).
    pub early_filter_rewrites: bool,
    /// A partitioned join's probe stage starts after its build stage and drops the
    /// rows whose keys the build side lacks (`plan::dynamic_filter`; Trino's name).
    pub enable_dynamic_filtering: bool,
    /// Under `retry_policy=task`, a task far slower than its stage's median gets a
    /// copy on another worker; the first to finish wins (`scheduling::speculation`).
    pub task_speculation_enabled: bool,
    /// How many times its stage's median a task must have run to be copied.
    pub task_speculation_multiplier: f64,
    /// Share of a stage's tasks finished before any is copied.
    pub task_speculation_quantile: f64,
    /// Under `retry_policy=task`, a stage whose spooled inputs turned out small runs
    /// as fewer tasks over neighbouring partitions (`scheduling::adaptive`).
    pub adaptive_partitioning_enabled: bool,
    /// What one coalesced task should read at most.
    pub adaptive_partition_target_size: u64,
    /// Under `retry_policy=task`, the largest build side, by what its stage wrote, a
    /// partitioned join broadcasts at run time (`plan::probe_join`; Spark's
    /// `adaptive.autoBroadcastJoinThreshold`).
    pub adaptive_join_max_broadcast_size: u64,
    /// The session's time zone as `SET TIME ZONE` set it (Trino's `time_zone_id`);
    /// the client's `X-Trino-Time-Zone` without it.
    pub time_zone_id: Option<String>,
}

/// Default of `join_max_broadcast_table_size`.
pub const DEFAULT_JOIN_MAX_BROADCAST: u64 = 100 << 20;

/// Default of `single_task_max_rows`: a few million rows, which one node scans, joins
/// and aggregates in tens of milliseconds, where a distributed plan's stages, tasks and
/// exchanges cost 10 to 30 ms more (TPC-H q2, q11, q16 and q22 at sf1).
pub const DEFAULT_SINGLE_TASK_MAX_ROWS: u64 = 3_000_000;

impl Default for SessionProperties {
    fn default() -> Self {
        SessionProperties {
            execution_policy: ExecutionPolicy::Phased,
            retry_policy: RetryPolicy::None,
            query_retry_attempts: 4,
            task_retry_attempts: 4,
            stage_retry_attempts: 4,
            batch_size: None,
            output_buffer_max_bytes: None,
            exchange_max_buffer_bytes: None,
            exchange_max_error_duration: None,
            hash_partition_count: None,
            query_max_planning_time: Duration::from_secs(600),
            query_max_memory_per_node: None,
            query_max_memory: None,
            spill_enabled: false,
            join_max_broadcast_table_size: DEFAULT_JOIN_MAX_BROADCAST,
            single_task_max_rows: DEFAULT_SINGLE_TASK_MAX_ROWS,
            early_filter_rewrites: true,
            enable_dynamic_filtering: true,
            task_speculation_enabled: false,
            task_speculation_multiplier: 1.5,
            task_speculation_quantile: 0.75,
            adaptive_partitioning_enabled: true,
            adaptive_partition_target_size: 64 << 20,
            adaptive_join_max_broadcast_size: 32 << 20,
            time_zone_id: None,
        }
    }
}

/// One property: its name, its default as users read it, what it means, and how a
/// value is checked and stored.
pub struct PropertyDef {
    pub name: &'static str,
    pub default: &'static str,
    pub description: &'static str,
    set: fn(&mut SessionProperties, &str) -> Result<(), String>,
}

/// Upper bounds of numeric session properties: beyond them a worker would abort on an
/// allocation (a batch of 10^12 rows) or the coordinator plan 10^9 partitions.
pub const MAX_BATCH_SIZE: usize = 1 << 20;
pub const MAX_HASH_PARTITIONS: usize = 4096;
pub const MAX_BUFFER_BYTES: u64 = 4 << 30;
pub const MIN_BUFFER_BYTES: u64 = 1 << 10;
pub const MAX_RETRY_ATTEMPTS: usize = 100;

fn ranged<T: PartialOrd + std::fmt::Display + Copy>(name: &str, n: T, lo: T, hi: T) -> Result<T, String> {
    if n < lo || n > hi {
        return Err(format!("session property '{name}' must be between {lo} and {hi}, got {n}"));
    }
    Ok(n)
}

fn fraction(name: &str, v: &str, lo: f64, hi: f64) -> Result<f64, String> {
    let n: f64 = v.trim().parse().map_err(|_| format!("session property '{name}' must be a number, got '{v}'"))?;
    if !n.is_finite() {
        return Err(format!("session property '{name}' must be a number, got '{v}'"));
    }
    ranged(name, n, lo, hi)
}

fn count(name: &str, v: &str, lo: usize, hi: usize) -> Result<usize, String> {
    let n =
        v.trim().parse::<u64>().map_err(|_| format!("session property '{name}' must be a whole number, got '{v}'"))?;
    ranged(name, n, lo as u64, hi as u64).map(|n| n as usize)
}

fn bytes(name: &str, v: &str) -> Result<u64, String> {
    bytes_between(name, v, MIN_BUFFER_BYTES, MAX_BUFFER_BYTES)
}

fn bytes_between(name: &str, v: &str, lo: u64, hi: u64) -> Result<u64, String> {
    let n = parse_bytes(v).map_err(|e| format!("session property '{name}': {e}"))?;
    ranged(name, n, lo, hi)
}

fn duration(name: &str, v: &str) -> Result<Duration, String> {
    let d = parse_duration(v).map_err(|e| format!("session property '{name}': {e}"))?;
    if d.is_zero() || d > Duration::from_secs(24 * 3600) {
        return Err(format!("session property '{name}' must be between 1ms and 24h, got {v}"));
    }
    Ok(d)
}

/// One of a fixed set of words, e.g. `phased` or `all-at-once`.
/// `true` or `false`.
fn flag(name: &str, v: &str) -> Result<bool, String> {
    choice(name, v, &[("true", true), ("false", false)])
}

fn choice<T: Copy>(name: &str, v: &str, options: &[(&str, T)]) -> Result<T, String> {
    if let Some((_, t)) = options.iter().find(|(word, _)| *word == v) {
        return Ok(*t);
    }
    let words: Vec<&str> = options.iter().map(|(word, _)| *word).collect();
    let (last, rest) = words.split_last().expect("a choice has options");
    Err(format!("session property '{name}' is {} or {last}, got '{v}'", rest.join(", ")))
}

/// The properties a user may set, with their defaults and ranges.
pub const SESSION_PROPERTIES: &[PropertyDef] = &[
    PropertyDef {
        name: "execution_policy",
        default: "phased",
        description: "`phased` (Trino's phases: build before probe) or `all-at-once`",
        set: |p, v| {
            let options = [("phased", ExecutionPolicy::Phased), ("all-at-once", ExecutionPolicy::AllAtOnce)];
            { p.execution_policy = choice("execution_policy", v, &options)?; Ok(()) }
        },
    },
    PropertyDef {
        name: "batch_size",
        default: "8192",
        description: "rows per batch inside tasks (1 to 1048576)",
        set: |p, v| { p.batch_size = Some(count("batch_size", v, 1, MAX_BATCH_SIZE)?); Ok(()) },
    },
    PropertyDef {
        name: "hash_partition_count",
        default: "workers x cores",
        description: "partitions of hash exchanges, the query's H (1 to 4096); by default live workers x the coordinator's cores, at least 2 per worker",
        set: |p, v| { p.hash_partition_count = Some(count("hash_partition_count", v, 1, MAX_HASH_PARTITIONS)?); Ok(()) },
    },
    PropertyDef {
        name: "query_max_memory_per_node",
        default: "worker's query.max-memory-per-node",
        description: "bytes the query's tasks on one worker may hold together (1MB to 1PB); over it the query fails with EXCEEDED_LOCAL_MEMORY_LIMIT",
        set: |p, v| {
            p.query_max_memory_per_node = Some(bytes_between("query_max_memory_per_node", v, 1 << 20, 1 << 50)?);
            Ok(())
        },
    },
    PropertyDef {
        name: "query_max_memory",
        default: "coordinator's query.max-memory",
        description: "bytes the query's tasks may hold together over the cluster (1MB to 1PB); over it the query fails with EXCEEDED_GLOBAL_MEMORY_LIMIT",
        set: |p, v| {
            p.query_max_memory = Some(bytes_between("query_max_memory", v, 1 << 20, 1 << 50)?);
            Ok(())
        },
    },
    PropertyDef {
        name: "output_buffer_max_bytes",
        default: "worker's (32MB)",
        description: "bytes a task's output buffer holds before its producer waits (1KB to 4GB)",
        set: |p, v| { p.output_buffer_max_bytes = Some(bytes("output_buffer_max_bytes", v)?); Ok(()) },
    },
    PropertyDef {
        name: "exchange_max_buffer_bytes",
        default: "32MB",
        description: "bytes a consumer buffers from its upstream tasks (1KB to 4GB)",
        set: |p, v| { p.exchange_max_buffer_bytes = Some(bytes("exchange_max_buffer_bytes", v)?); Ok(()) },
    },
    PropertyDef {
        name: "exchange_max_error_duration",
        default: "10s",
        description: "how long an exchange or task link may fail before the query fails",
        set: |p, v| { p.exchange_max_error_duration = Some(duration("exchange_max_error_duration", v)?); Ok(()) },
    },
    PropertyDef {
        name: "query_max_planning_time",
        default: "10m",
        description: "how long planning may take before the query fails with `EXCEEDED_TIME_LIMIT`",
        set: |p, v| { p.query_max_planning_time = duration("query_max_planning_time", v)?; Ok(()) },
    },
    PropertyDef {
        name: "join_max_broadcast_table_size",
        default: "100MB",
        description: "largest estimated build side a join broadcasts to every task of its probe side instead of repartitioning both sides (0B to 4GB; 0B never broadcasts)",
        set: |p, v| {
            p.join_max_broadcast_table_size = bytes_between("join_max_broadcast_table_size", v, 0, MAX_BUFFER_BYTES)?;
            Ok(())
        },
    },
    PropertyDef {
        name: "single_task_max_rows",
        default: "3000000",
        description: "a query whose table scans read at most this many rows, by the tables' statistics, runs whole as one task on one worker, its exchanges inside that task (0 to 10^12; 0 always distributes)",
        set: |p, v| {
            p.single_task_max_rows = count("single_task_max_rows", v, 0, 1_000_000_000_000)? as u64;
            Ok(())
        },
    },
    PropertyDef {
        name: "early_filter_rewrites",
        default: "true",
        description: "`false`: plans joins and subqueries as DataFusion alone would, without flotilla's rewrites that join filtered tables first, move semi joins below joins on their key and aggregate only the keys a filtered table holds",
        set: |p, v| {
            p.early_filter_rewrites = flag("early_filter_rewrites", v)?;
            Ok(())
        },
    },
    PropertyDef {
        name: "enable_dynamic_filtering",
        default: "true",
        description: "a partitioned join's probe-side stage starts once its build-side stage is done and keeps only the rows whose join keys the build side has, before they cross the exchange (phased execution policy only); and, under any policy, a hash join's build side prunes the Parquet scans of its probe side in the same stage",
        set: |p, v| {
            p.enable_dynamic_filtering = flag("enable_dynamic_filtering", v)?;
            Ok(())
        },
    },
    PropertyDef {
        name: "spill_enabled",
        default: "false",
        description: "`true`: joins run as sort-merge joins, whose inputs spill when memory runs short, instead of hash joins, whose build side must fit (slower when it does)",
        set: |p, v| {
            p.spill_enabled = flag("spill_enabled", v)?;
            Ok(())
        },
    },
    PropertyDef {
        name: "retry_policy",
        default: "none",
        description: "`none`, `query` or `task` (see Failures)",
        set: |p, v| {
            let options = [("none", RetryPolicy::None), ("query", RetryPolicy::Query), ("task", RetryPolicy::Task)];
            { p.retry_policy = choice("retry_policy", v, &options)?; Ok(()) }
        },
    },
    PropertyDef {
        name: "task_speculation_enabled",
        default: "false",
        description: "`true`: under `retry_policy=task`, a task far slower than its stage's others gets a copy on another worker; the first to finish wins",
        set: |p, v| {
            p.task_speculation_enabled = flag("task_speculation_enabled", v)?;
            Ok(())
        },
    },
    PropertyDef {
        name: "task_speculation_multiplier",
        default: "1.5",
        description: "a task is copied once it ran this many times its stage's median (1 to 100)",
        set: |p, v| {
            p.task_speculation_multiplier = fraction("task_speculation_multiplier", v, 1.0, 100.0)?;
            Ok(())
        },
    },
    PropertyDef {
        name: "task_speculation_quantile",
        default: "0.75",
        description: "share of a stage's tasks finished before any is copied (0 to 1)",
        set: |p, v| {
            p.task_speculation_quantile = fraction("task_speculation_quantile", v, 0.0, 1.0)?;
            Ok(())
        },
    },
    PropertyDef {
        name: "adaptive_partitioning_enabled",
        default: "true",
        description: "under `retry_policy=task`, a stage whose inputs turned out small, by what their spooled outputs hold, runs as fewer tasks, each over neighbouring partitions; EXPLAIN ANALYZE shows the change",
        set: |p, v| {
            p.adaptive_partitioning_enabled = flag("adaptive_partitioning_enabled", v)?;
            Ok(())
        },
    },
    PropertyDef {
        name: "adaptive_partition_target_size",
        default: "64MB",
        description: "what one coalesced task reads at most, and less when the stage's input spread over the cluster's task slots is smaller, but not under 1MB (1MB to 4GB)",
        set: |p, v| {
            p.adaptive_partition_target_size =
                bytes_between("adaptive_partition_target_size", v, 1 << 20, MAX_BUFFER_BYTES)?;
            Ok(())
        },
    },
    PropertyDef {
        name: "adaptive_join_max_broadcast_size",
        default: "32MB",
        description: "under `retry_policy=task` with `adaptive_partitioning_enabled`, a partitioned join whose build stage wrote at most this much, by the time its probe stage has yet to start, sends the build side whole to every task and runs the probe stage's work in its own tasks, so the probe side is never repartitioned; EXPLAIN ANALYZE shows the change (0B to 4GB; 0B never)",
        set: |p, v| {
            p.adaptive_join_max_broadcast_size =
                bytes_between("adaptive_join_max_broadcast_size", v, 0, MAX_BUFFER_BYTES)?;
            Ok(())
        },
    },
    PropertyDef {
        name: "query_retry_attempts",
        default: "4",
        description: "times `query` runs a failed query again (0 to 100)",
        set: |p, v| { p.query_retry_attempts = count("query_retry_attempts", v, 0, MAX_RETRY_ATTEMPTS)?; Ok(()) },
    },
    PropertyDef {
        name: "task_retry_attempts",
        default: "4",
        description: "times `task` retries one partition's task (0 to 100)",
        set: |p, v| { p.task_retry_attempts = count("task_retry_attempts", v, 0, MAX_RETRY_ATTEMPTS)?; Ok(()) },
    },
    PropertyDef {
        name: "stage_retry_attempts",
        default: "4",
        description: "times `task` restarts a stage after fetch failures (0 to 100)",
        set: |p, v| { p.stage_retry_attempts = count("stage_retry_attempts", v, 0, MAX_RETRY_ATTEMPTS)?; Ok(()) },
    },
    PropertyDef {
        name: "time_zone_id",
        default: "the client's (`X-Trino-Time-Zone`, else UTC)",
        description: "the session's time zone, as `SET TIME ZONE` sets it: a zone name or an offset (`+05:30`)",
        set: |p, v| { p.time_zone_id = Some(time_zone(v)?); Ok(()) },
    },
];

/// Longest time zone name or offset read (the longest IANA name has 32 characters).
const MAX_TIME_ZONE_LENGTH: usize = 64;

/// A time zone as Trino takes it, an IANA name (`America/New_York`, `UTC`) or an
/// offset (`+05:30`, `-08`), checked; Trino's message for any other text.
pub fn time_zone(text: &str) -> Result<String, String> {
    use std::str::FromStr;
    let zone = text.trim();
    let known = zone.len() <= MAX_TIME_ZONE_LENGTH
        && !zone.is_empty()
        && datafusion::arrow::array::timezone::Tz::from_str(zone).is_ok();
    match known {
        true => Ok(zone.to_string()),
        false => {
            let shown: String = zone.chars().take(MAX_TIME_ZONE_LENGTH).collect();
            let more = if shown.len() < zone.len() { "..." } else { "" };
            Err(format!("Time zone not supported: {shown}{more}"))
        }
    }
}

impl SessionProperties {
    /// Whether queries run with dynamic filters (`plan::dynamic_filter`): asked for,
    /// under the phased policy (the probe stage must start after its build), and not
    /// under task retries (whose scheduler runs none). Execution and `EXPLAIN` ask.
    pub fn runs_dynamic_filters(&self) -> bool {
        self.enable_dynamic_filtering
            && self.execution_policy == ExecutionPolicy::Phased
            && self.retry_policy != RetryPolicy::Task
    }

    /// Parses and checks every property; the error names the bad one and its range.
    pub fn parse(session: &BTreeMap<String, String>) -> Result<SessionProperties, String> {
        let mut props = SessionProperties::default();
        for (k, v) in session {
            let Some(def) = SESSION_PROPERTIES.iter().find(|d| d.name == k) else {
                let known: Vec<&str> = SESSION_PROPERTIES.iter().map(|d| d.name).collect();
                return Err(format!("unknown session property '{k}' (known: {})", known.join(", ")));
            };
            (def.set)(&mut props, v.trim())?;
        }
        Ok(props)
    }
}

/// Parses `1024`, `64KB`, `1MB`, `2GB` (also `KiB` etc., all powers of 1024).
pub fn parse_bytes(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let n: u64 = num.parse().map_err(|_| format!("'{text}' is not a byte size"))?;
    let mult = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kb" | "kib" => 1 << 10,
        "m" | "mb" | "mib" => 1 << 20,
        "g" | "gb" | "gib" => 1 << 30,
        _ => return Err(format!("'{text}' has an unknown unit")),
    };
    Ok(n * mult)
}

/// Parses `500ms`, `10s`, `2m`.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let t = text.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let n: u64 = num.parse().map_err(|_| format!("'{text}' is not a duration"))?;
    Ok(match unit.trim() {
        "ms" => Duration::from_millis(n),
        "" | "s" => Duration::from_secs(n),
        "m" => Duration::from_secs(n * 60),
        _ => return Err(format!("'{text}' has an unknown unit")),
    })
}

/// `name=value`, as `--session` takes it, both sides trimmed.
pub fn parse_name_value(s: &str) -> Result<(String, String), String> {
    let (k, v) = s.split_once('=').ok_or_else(|| format!("'{s}' is not name=value"))?;
    Ok((k.trim().to_string(), v.trim().to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_sizes_parse() {
        assert_eq!(parse_bytes("1024").unwrap(), 1024);
        assert_eq!(parse_bytes("64KB").unwrap(), 65536);
        assert_eq!(parse_bytes("1MB").unwrap(), 1 << 20);
        assert_eq!(parse_bytes("2gib").unwrap(), 2 << 30);
        assert!(parse_bytes("lots").is_err());
        assert!(parse_bytes("5XB").is_err());
    }

    #[test]
    fn durations_parse() {
        assert_eq!(parse_duration("500ms").unwrap(), Duration::from_millis(500));
        assert_eq!(parse_duration("3s").unwrap(), Duration::from_secs(3));
        assert_eq!(parse_duration("2m").unwrap(), Duration::from_secs(120));
        assert!(parse_duration("soon").is_err());
    }

    fn parse(pairs: &[(&str, &str)]) -> Result<SessionProperties, String> {
        SessionProperties::parse(&pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect())
    }

    #[test]
    fn sessions_parse_once_into_typed_values() {
        let p = parse(&[
            ("execution_policy", "all-at-once"),
            ("output_buffer_max_bytes", "1MB"),
            ("retry_policy", "task"),
            ("task_retry_attempts", "2"),
        ])
        .unwrap();
        assert_eq!(p.execution_policy, ExecutionPolicy::AllAtOnce);
        assert_eq!(p.output_buffer_max_bytes, Some(1 << 20));
        assert_eq!((p.retry_policy, p.task_retry_attempts, p.stage_retry_attempts), (RetryPolicy::Task, 2, 4));
        assert_eq!(parse(&[]).unwrap(), SessionProperties::default());
    }

    #[test]
    fn bad_values_name_the_property_and_its_range() {
        assert!(parse(&[("stage_retry_attempts", "-1")]).unwrap_err().contains("stage_retry_attempts"));
        assert!(parse(&[("execution_policy", "sometimes")])
            .unwrap_err()
            .contains("'execution_policy' is phased or all-at-once"));
        assert!(parse(&[("retry_policy", "often")])
            .unwrap_err()
            .contains("'retry_policy' is none, query or task, got 'often'"));
        assert!(parse(&[("batch_size", "1000000000000")]).unwrap_err().contains("between 1 and 1048576"));
        assert!(parse(&[("hash_partition_count", "1000000000")])
            .unwrap_err()
            .contains("'hash_partition_count' must be between 1 and 4096"));
        assert!(parse(&[("output_buffer_max_bytes", "1")]).unwrap_err().contains("between 1024"));
        assert!(parse(&[("query_max_planning_time", "0s")]).unwrap_err().contains("query_max_planning_time"));
        assert!(parse(&[("nope", "1")]).unwrap_err().contains("unknown session property 'nope'"));
    }

    /// The header row of the session property table in docs/operations/configuration.md.
    const SESSION_TABLE_HEADER: &str = "| property | default | meaning |";

    /// The rows of the session property table: the lines after its header row up to
    /// the first line that is not a table row, the separator row left out.
    fn session_property_rows(doc: &str) -> Vec<&str> {
        let mut lines = doc.lines().skip_while(|l| l.trim_end() != SESSION_TABLE_HEADER);
        assert!(lines.next().is_some(), "configuration.md has no session property table ({SESSION_TABLE_HEADER})");
        lines.take_while(|l| l.starts_with('|')).filter(|l| !l.starts_with("|---")).collect()
    }

    /// The session property table of docs/operations/configuration.md lists every
    /// property with its default and meaning, and nothing else.
    #[test]
    fn the_documented_table_matches_the_properties() {
        let doc = include_str!("../docs/operations/configuration.md");
        let table = session_property_rows(doc);
        for def in SESSION_PROPERTIES {
            let row = table
                .iter()
                .find(|l| l.starts_with(&format!("| `{}` |", def.name)))
                .unwrap_or_else(|| panic!("configuration.md has no row for {}", def.name));
            assert!(
                row.contains(def.description),
                "configuration.md row for {} lacks its meaning '{}': {row}",
                def.name,
                def.description
            );
            assert!(
                row.contains(&format!("| {} |", def.default)),
                "configuration.md row for {} lacks its default {}: {row}",
                def.name,
                def.default
            );
        }
        for row in &table {
            let name = row
                .strip_prefix("| `")
                .and_then(|rest| rest.split_once("` |"))
                .map(|(name, _)| name)
                .unwrap_or_else(|| panic!("configuration.md has a session property row without a `name`: {row}"));
            assert!(
                SESSION_PROPERTIES.iter().any(|def| def.name == name),
                "configuration.md has a row for '{name}', which is not a session property: {row}"
            );
        }
    }
}
