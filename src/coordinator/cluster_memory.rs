//! The cluster's memory, as the coordinator sees it: what each query's tasks hold on
//! each worker, from the workers' heartbeats (`Announcement::query_memory`, every
//! 500 ms), and the check that holds a query to `query_max_memory` (Trino's
//! `query.max-memory`) over the whole cluster. The announcement handler records;
//! the coordinator's 500 ms housekeeping enforces. It also knows what one query may
//! hold on each worker (`Announcement::query_memory_capacity`), which bounds the
//! session's partition count and buffer sizes before a query is planned.

use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};

use super::planner::QueryError;
use crate::error_code::ErrorCode;
use crate::worker::memory::human;

/// A worker's report older than this no longer counts (the worker is gone).
const STALE: Duration = Duration::from_secs(5);

/// One worker's last report: when it came, bytes by query id, and what one query may
/// hold there.
type Report = (Instant, BTreeMap<String, u64>, u64);

#[derive(Debug, Default)]
pub struct ClusterMemoryManager {
    reports: parking_lot::Mutex<HashMap<String, Report>>,
}

impl ClusterMemoryManager {
    /// A worker's heartbeat: what each query holds there now.
    pub fn report(&self, node_id: &str, queries: BTreeMap<String, u64>, capacity: u64) {
        self.reports.lock().insert(node_id.to_string(), (Instant::now(), queries, capacity));
    }

    /// What one query may hold on each of `workers` that has said so recently.
    pub fn capacities(&self, workers: &[crate::cluster::node_manager::WorkerNode]) -> Vec<u64> {
        let reports = self.reports.lock();
        workers
            .iter()
            .filter_map(|w| reports.get(&w.node_id))
            .filter(|(at, _, capacity)| at.elapsed() <= STALE && *capacity > 0)
            .map(|(_, _, capacity)| *capacity)
            .collect()
    }

    /// What `query` holds over the cluster, and the worker holding most of it.
    pub fn query_memory(&self, query: &str) -> (u64, Option<(String, u64)>) {
        let reports = self.reports.lock();
        let mut total = 0;
        let mut most: Option<(String, u64)> = None;
        for (node, (at, queries, _)) in reports.iter() {
            if at.elapsed() > STALE {
                continue;
            }
            let bytes = queries.get(query).copied().unwrap_or(0);
            total += bytes;
            if bytes > most.as_ref().map_or(0, |m| m.1) {
                most = Some((node.clone(), bytes));
            }
        }
        (total, most)
    }

    /// `EXCEEDED_GLOBAL_MEMORY_LIMIT` when `query` holds more than `limit` bytes.
    pub fn check(&self, query: &str, limit: u64) -> Result<(), QueryError> {
        let (total, most) = self.query_memory(query);
        if total <= limit {
            return Ok(());
        }
        let (node, bytes) = most.unwrap_or_default();
        Err(QueryError::new(
            ErrorCode::ExceededGlobalMemoryLimit,
            format!(
                "Query exceeded distributed memory limit of {} (query_max_memory): its tasks held {} over the \
                 cluster, the most ({}) on worker {node}",
                human(limit as usize),
                human(total as usize),
                human(bytes as usize)
            ),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_query_is_held_to_its_limit_over_every_worker() {
        let m = ClusterMemoryManager::default();
        m.report("w1", BTreeMap::from([("q1".to_string(), 30 << 20), ("q2".to_string(), 1 << 20)]), 0);
        m.report("w2", BTreeMap::from([("q1".to_string(), 50 << 20)]), 0);
        assert_eq!(m.query_memory("q1"), (80 << 20, Some(("w2".to_string(), 50 << 20))));
        assert!(m.check("q1", 100 << 20).is_ok());
        let e = m.check("q1", 64 << 20).unwrap_err();
        assert_eq!(e.error_name, "EXCEEDED_GLOBAL_MEMORY_LIMIT");
        assert!(
            e.message.contains("64.0 MiB") && e.message.contains("80.0 MiB") && e.message.contains("w2"),
            "{}",
            e.message
        );
        // A new report replaces the worker's last one: the query let go there.
        m.report("w2", BTreeMap::new(), 0);
        assert!(m.check("q1", 64 << 20).is_ok());
        assert!(m.check("q3", 1).is_ok(), "a query nobody reports holds nothing");
    }
}
