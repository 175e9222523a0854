//! `LocalCluster`: a coordinator and N workers in one process, talking real HTTP on
//! loopback. Used by `flotilla local` and `flotilla bench`. Also the TPC-H query set
//! shipped with the binary.

use crate::connector::Connectors;
use std::time::Duration;

use crate::coordinator::{start_coordinator, CoordinatorConfig, CoordinatorHandle};
use crate::worker::{start_worker, WorkerConfig, WorkerHandle};

pub struct LocalCluster {
    pub coordinator: CoordinatorHandle,
    pub workers: Vec<WorkerHandle>,
}

/// Knobs of a local cluster that tests and the benchmark vary.
#[derive(Debug, Clone, Default)]
pub struct LocalOptions {
    pub output_buffer_bytes: Option<u64>,
    /// Where the `files` catalog keeps its tables and writes new ones.
    pub data_dir: Option<std::path::PathBuf>,
    /// Each worker's pool in bytes (`usize::MAX`: none); default: a share of this
    /// process's default pool.
    pub worker_memory: Option<usize>,
    /// How the built-in `tpch` catalog spells its tables (Trino's by default).
    pub tpch: crate::connector::tpch::TpchSpelling,
}

impl LocalCluster {
    pub async fn start(workers: usize, options: LocalOptions) -> Result<LocalCluster, String> {
        // Internal requests are authenticated even on one host: a generated secret.
        let secret = crate::util::random_suffix(32);
        // Every node of the cluster reads the others' output by a call.
        let exchanges = crate::exchange::local::LocalExchanges::default();
        let mut config = CoordinatorConfig::new("127.0.0.1:0");
        config.shared_secret = Some(secret.clone());
        config.exchange.local = exchanges.clone();
        // One user on their own machine: file tables may live anywhere they can read.
        config.connectors = Connectors::builtin_with(
            crate::connector::files::FilesSettings::in_data_dir(vec!["/".to_string()], options.data_dir.as_deref()),
            options.tpch,
        );
        let coordinator = start_coordinator(config).await.map_err(|e| format!("cannot start the coordinator: {e}"))?;
        let mut handles = Vec::new();
        for _ in 0..workers {
            let mut config = WorkerConfig::new("127.0.0.1:0", &coordinator.url);
            config.shared_secret = Some(secret.clone());
            config.exchange.local = exchanges.clone();
            // The coordinator's places, as on any cluster: here, every local path.
            config.connectors = Connectors::builtin_with_files(&["/".to_string()]);
            if let Some(b) = options.output_buffer_bytes {
                config.settings.output_buffer_bytes = b;
            }
            // The workers share this process's memory: the default pool is split.
            config.memory.pool_bytes = options.worker_memory.unwrap_or(config.memory.pool_bytes / workers.max(1));
            config.memory.query_max_per_node = config.memory.pool_bytes;
            handles.push(start_worker(config).await.map_err(|e| format!("cannot start a worker: {e}"))?);
        }
        if !coordinator.wait_for_workers(workers, Duration::from_secs(10)).await {
            return Err(format!(
                "only {} of {workers} workers announced themselves",
                coordinator.state.nodes.live_workers().len()
            ));
        }
        Ok(LocalCluster { coordinator, workers: handles })
    }

    pub fn url(&self) -> &str {
        &self.coordinator.url
    }

    pub async fn shutdown(self) {
        for w in self.workers {
            w.shutdown().await;
        }
        self.coordinator.shutdown().await;
    }
}

/// The 22 TPC-H queries with the specification's validation parameters.
pub const TPCH_QUERIES: [&str; 22] = [
    include_str!("../queries/tpch/q1.sql"),
    include_str!("../queries/tpch/q2.sql"),
    include_str!("../queries/tpch/q3.sql"),
    include_str!("../queries/tpch/q4.sql"),
    include_str!("../queries/tpch/q5.sql"),
    include_str!("../queries/tpch/q6.sql"),
    include_str!("../queries/tpch/q7.sql"),
    include_str!("../queries/tpch/q8.sql"),
    include_str!("../queries/tpch/q9.sql"),
    include_str!("../queries/tpch/q10.sql"),
    include_str!("../queries/tpch/q11.sql"),
    include_str!("../queries/tpch/q12.sql"),
    include_str!("../queries/tpch/q13.sql"),
    include_str!("../queries/tpch/q14.sql"),
    include_str!("../queries/tpch/q15.sql"),
    include_str!("../queries/tpch/q16.sql"),
    include_str!("../queries/tpch/q17.sql"),
    include_str!("../queries/tpch/q18.sql"),
    include_str!("../queries/tpch/q19.sql"),
    include_str!("../queries/tpch/q20.sql"),
    include_str!("../queries/tpch/q21.sql"),
    include_str!("../queries/tpch/q22.sql"),
];

/// Splits a script into statements on `;` outside quotes and comments.
pub fn split_statements(script: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut chars = script.chars().peekable();
    let mut quote: Option<char> = None;
    while let Some(c) = chars.next() {
        match quote {
            Some(q) => {
                cur.push(c);
                if c == q {
                    quote = None;
                }
            }
            None => match c {
                '\'' | '"' => {
                    quote = Some(c);
                    cur.push(c);
                }
                '-' if chars.peek() == Some(&'-') => {
                    // Comment to end of line.
                    for d in chars.by_ref() {
                        if d == '\n' {
                            cur.push('\n');
                            break;
                        }
                    }
                }
                ';' => {
                    if !cur.trim().is_empty() {
                        out.push(cur.trim().to_string());
                    }
                    cur.clear();
                }
                _ => cur.push(c),
            },
        }
    }
    if !cur.trim().is_empty() {
        out.push(cur.trim().to_string());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scripts_split_on_semicolons_outside_quotes_and_comments() {
        let s = "select 1; -- a comment; with semicolon\nselect 'a;b';\n\n select 3";
        assert_eq!(split_statements(s), vec!["select 1", "select 'a;b'", "select 3"]);
        assert!(split_statements(" ;; -- only a comment\n").is_empty());
    }

    #[test]
    fn every_tpch_query_is_one_statement() {
        for (i, q) in TPCH_QUERIES.iter().enumerate() {
            assert_eq!(split_statements(q).len(), 1, "q{}", i + 1);
        }
    }
}
