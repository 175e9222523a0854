//! `NodeManager`: cluster membership as the coordinator sees it. Workers announce
//! themselves and keep announcing (heartbeats); a worker silent for longer than the
//! timeout is lost. The scheduler asks it for the live workers when it places tasks.
//! Its clock is tokio's, so under the simulator (`sim`) heartbeats run out in
//! simulated time.

use std::collections::HashMap;
use std::time::Duration;

use parking_lot::RwLock;
use serde::Serialize;
use tokio::time::Instant;

/// A worker as the scheduler uses it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct WorkerNode {
    pub node_id: String,
    pub url: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct NodeState {
    pub node_id: String,
    pub url: String,
    pub alive: bool,
    pub shutting_down: bool,
    pub last_seen_ms_ago: u64,
}

#[derive(Debug)]
struct Entry {
    url: String,
    seen: Instant,
    /// Known gone before its heartbeats ran out.
    lost: bool,
    /// Shutting down gracefully: alive, finishing its tasks, given no new query.
    draining: bool,
}

#[derive(Debug)]
pub struct NodeManager {
    nodes: RwLock<HashMap<String, Entry>>,
    timeout: Duration,
}

impl NodeManager {
    pub fn new(timeout: Duration) -> Self {
        NodeManager { nodes: RwLock::new(HashMap::new()), timeout }
    }

    /// Records a heartbeat of a worker that is not shutting down (see `heartbeat`).
    pub fn announce(&self, node_id: &str, url: &str) {
        if let Err(e) = self.heartbeat(node_id, url, false) {
            panic!("{e}");
        }
    }

    /// A heartbeat saying whether the worker is shutting down. Refused while another
    /// worker alive at another address has the node id: two workers started from one
    /// configuration directory would take turns being the node, each losing the
    /// other's tasks. A worker that restarted on a new address is taken once its old
    /// entry is lost (its heartbeats ran out, or a task found its address dead).
    pub fn heartbeat(&self, node_id: &str, url: &str, draining: bool) -> Result<(), String> {
        let url = url.trim_end_matches('/');
        let mut nodes = self.nodes.write();
        if let Some(other) = nodes.get(node_id).filter(|e| e.url != url && self.alive(e)) {
            return Err(format!(
                "node id '{node_id}' is already the worker at {}, alive; give this worker ({url}) a node.id of its own",
                other.url
            ));
        }
        let entry = Entry { url: url.to_string(), seen: Instant::now(), lost: false, draining };
        nodes.insert(node_id.to_string(), entry);
        Ok(())
    }

    pub fn live_workers(&self) -> Vec<WorkerNode> {
        let nodes = self.nodes.read();
        let mut v: Vec<WorkerNode> = nodes
            .iter()
            .filter(|(_, e)| self.alive(e) && !e.draining)
            .map(|(id, e)| WorkerNode { node_id: id.clone(), url: e.url.clone() })
            .collect();
        v.sort_by(|a, b| a.node_id.cmp(&b.node_id));
        v
    }

    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// Forgets a worker at once: it is known to be gone (its address refuses
    /// connections) or is leaving. A later announcement brings it back.
    pub fn mark_lost(&self, node_id: &str) {
        if let Some(e) = self.nodes.write().get_mut(node_id) {
            e.lost = true;
        }
    }

    fn alive(&self, e: &Entry) -> bool {
        !e.lost && e.seen.elapsed() <= self.timeout
    }

    /// Why a task on a lost worker failed, for the query's error.
    pub fn lost_message(&self, worker: &WorkerNode) -> String {
        format!("worker {} ({}) is lost: no heartbeat within {:?}", worker.node_id, worker.url, self.timeout)
    }

    pub fn is_alive(&self, node_id: &str) -> bool {
        self.nodes.read().get(node_id).is_some_and(|e| self.alive(e))
    }

    pub fn all(&self) -> Vec<NodeState> {
        let nodes = self.nodes.read();
        let mut v: Vec<NodeState> = nodes
            .iter()
            .map(|(id, e)| NodeState {
                node_id: id.clone(),
                url: e.url.clone(),
                alive: self.alive(e),
                shutting_down: e.draining,
                last_seen_ms_ago: e.seen.elapsed().as_millis() as u64,
            })
            .collect();
        v.sort_by(|a, b| a.node_id.cmp(&b.node_id));
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn silent_workers_are_lost_and_return_on_heartbeat() {
        let m = NodeManager::new(Duration::from_millis(50));
        m.announce("w1", "http://127.0.0.1:1/");
        m.announce("w2", "http://127.0.0.1:2");
        assert_eq!(m.live_workers().len(), 2);
        assert_eq!(m.live_workers()[0].url, "http://127.0.0.1:1");
        std::thread::sleep(Duration::from_millis(80));
        m.announce("w2", "http://127.0.0.1:2");
        let live = m.live_workers();
        assert_eq!(live.len(), 1);
        assert_eq!(live[0].node_id, "w2");
        assert!(!m.is_alive("w1"));
        m.announce("w1", "http://127.0.0.1:1");
        assert!(m.is_alive("w1"));
        // Known gone: lost at once, listed as lost, back when it announces again.
        m.mark_lost("w2");
        assert!(!m.is_alive("w2"));
        assert_eq!(m.live_workers().len(), 1);
        assert!(m.all().iter().any(|n| n.node_id == "w2" && !n.alive));
        m.announce("w2", "http://127.0.0.1:2");
        assert!(m.is_alive("w2"));
        // Draining: alive (its tasks go on) but given no new work.
        m.heartbeat("w2", "http://127.0.0.1:2", true).unwrap();
        assert!(m.is_alive("w2"));
        assert!(m.live_workers().iter().all(|w| w.node_id != "w2"));
        assert!(m.all().iter().any(|n| n.node_id == "w2" && n.shutting_down));
    }

    #[tokio::test]
    async fn a_second_worker_with_a_live_workers_node_id_is_refused() {
        let m = NodeManager::new(Duration::from_secs(10));
        m.heartbeat("w1", "http://a:1", false).unwrap();
        let e = m.heartbeat("w1", "http://b:2/", false).unwrap_err();
        assert!(e.contains("http://a:1") && e.contains("http://b:2") && e.contains("node.id"), "{e}");
        assert_eq!(m.live_workers(), vec![WorkerNode { node_id: "w1".into(), url: "http://a:1".into() }]);
        // The same worker again (a trailing slash is the same address), then a restart
        // on a new address once the old one is known lost.
        m.heartbeat("w1", "http://a:1/", true).unwrap();
        m.mark_lost("w1");
        m.heartbeat("w1", "http://b:2", false).unwrap();
        assert_eq!(m.live_workers(), vec![WorkerNode { node_id: "w1".into(), url: "http://b:2".into() }]);
    }
}
