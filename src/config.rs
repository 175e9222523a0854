//! Session properties and their defaults. The coordinator reads them from the client
//! (`--session k=v`, `X-Trino-Session`), checks them, and forwards the ones that shape
//! execution to workers inside each task update.

use std::collections::BTreeMap;
use std::time::Duration;

/// Properties a user may set, with a one-line description each (shown by errors).
pub const SESSION_PROPERTIES: &[(&str, &str)] = &[
    ("execution_policy", "phased | all-at-once"),
    ("retry_policy", "none | query | task"),
    ("query_retry_attempts", "how many times retry_policy=query runs a failed query again (default 4)"),
    ("task_retry_attempts", "how many times retry_policy=task retries one failed task (default 4)"),
    ("stage_retry_attempts", "how many times retry_policy=task restarts a stage after fetch failures (default 4)"),
    ("batch_size", "rows per batch inside tasks"),
    ("output_buffer_max_bytes", "bytes a task's output buffer holds before the producer waits, e.g. 1MB"),
    ("exchange_max_buffer_bytes", "bytes a consumer buffers from its upstream tasks, e.g. 64KB"),
    ("exchange_max_error_duration", "how long an exchange link may fail before the query fails, e.g. 10s"),
    ("hash_partition_count", "partitions of hash exchanges (default: live workers x the coordinator's cores, at least 2 per worker)"),
    ("query_max_planning_time", "how long planning may take before the query fails, e.g. 30s (default 10m)"),
];

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

/// Upper bounds of numeric session properties: beyond them a worker would abort on an
/// allocation (a batch of 10^12 rows) or the coordinator plan 10^9 partitions.
pub const MAX_BATCH_SIZE: usize = 1 << 20;
pub const MAX_HASH_PARTITIONS: usize = 4096;
pub const MAX_BUFFER_BYTES: u64 = 4 << 30;
pub const MAX_RETRY_ATTEMPTS: u64 = 100;

/// `Ok(true)` when `n` parsed and lies in `[lo, hi]`; out of range is an error naming
/// the range, unparsable is `Ok(false)` (the caller's generic message).
fn in_range(name: &str, n: Option<u64>, lo: u64, hi: u64) -> Result<bool, String> {
    match n {
        None => Ok(false),
        Some(n) if (lo..=hi).contains(&n) => Ok(true),
        Some(n) => Err(format!("session property '{name}' must be between {lo} and {hi}, got {n}")),
    }
}

/// Checks every property name and value; the error names the bad one.
pub fn validate_session(session: &BTreeMap<String, String>) -> Result<(), String> {
    for (k, v) in session {
        let ok = match k.as_str() {
            "execution_policy" => matches!(v.as_str(), "phased" | "all-at-once"),
            "retry_policy" => matches!(v.as_str(), "none" | "query" | "task"),
            "query_retry_attempts" | "task_retry_attempts" | "stage_retry_attempts" => in_range(k, v.parse::<u64>().ok(), 0, MAX_RETRY_ATTEMPTS)?,
            "batch_size" => in_range(k, v.parse::<u64>().ok(), 1, MAX_BATCH_SIZE as u64)?,
            "hash_partition_count" => in_range(k, v.parse::<u64>().ok(), 1, MAX_HASH_PARTITIONS as u64)?,
            "output_buffer_max_bytes" | "exchange_max_buffer_bytes" => in_range(k, parse_bytes(v).ok(), 1 << 10, MAX_BUFFER_BYTES)?,
            "exchange_max_error_duration" => parse_duration(v).is_ok(),
            "query_max_planning_time" => parse_duration(v).map(|d| !d.is_zero()).unwrap_or(false),
            _ => {
                let known: Vec<&str> = SESSION_PROPERTIES.iter().map(|(n, _)| *n).collect();
                return Err(format!("unknown session property '{k}' (known: {})", known.join(", ")));
            }
        };
        if !ok {
            let hint = SESSION_PROPERTIES.iter().find(|(n, _)| n == k).map(|(_, h)| *h).unwrap_or("");
            return Err(format!("invalid value '{v}' for session property '{k}' ({hint})"));
        }
    }
    Ok(())
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

    #[test]
    fn sessions_are_validated() {
        let mut s = BTreeMap::new();
        s.insert("execution_policy".to_string(), "all-at-once".to_string());
        s.insert("output_buffer_max_bytes".to_string(), "1MB".to_string());
        assert!(validate_session(&s).is_ok());
        s.insert("retry_policy".to_string(), "task".to_string());
        s.insert("task_retry_attempts".to_string(), "2".to_string());
        assert!(validate_session(&s).is_ok());
        s.insert("stage_retry_attempts".to_string(), "-1".to_string());
        assert!(validate_session(&s).unwrap_err().contains("stage_retry_attempts"));
        s.remove("stage_retry_attempts");
        s.insert("batch_size".to_string(), "1000000000000".to_string());
        assert!(validate_session(&s).unwrap_err().contains("between 1 and 1048576"));
        s.insert("batch_size".to_string(), "4096".to_string());
        s.insert("hash_partition_count".to_string(), "1000000000".to_string());
        assert!(validate_session(&s).unwrap_err().contains("hash_partition_count' must be between 1 and 4096"));
        s.remove("hash_partition_count");
        s.remove("stage_retry_attempts");
        s.insert("execution_policy".to_string(), "sometimes".to_string());
        assert!(validate_session(&s).unwrap_err().contains("execution_policy"));
        let mut u = BTreeMap::new();
        u.insert("nope".to_string(), "1".to_string());
        assert!(validate_session(&u).unwrap_err().contains("unknown session property 'nope'"));
    }
}
