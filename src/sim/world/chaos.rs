//! The seed's faults and the workers' own housekeeping: heartbeats to the node
//! manager while a worker is up and reachable, tasks dropped when their coordinator
//! went silent for `CLIENT_TIMEOUT`, and deaths, cuts and lost outputs at their
//! drawn times.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use super::{Worker, World, CLIENT_TIMEOUT, HEARTBEAT};
use crate::error_code::ErrorCode;
use crate::protocol::TaskState;
use crate::sim::params::Fault;

impl World {
    pub(super) fn start_background(self: &Arc<Self>) {
        let mut bg = self.background.lock();
        let world = self.clone();
        bg.spawn(async move { world.heartbeats().await });
        for fault in self.params.faults.clone() {
            let world = self.clone();
            bg.spawn(async move { world.inject(fault).await });
        }
    }

    /// Workers announce themselves while up and reachable, and drop tasks their
    /// coordinator stopped asking about.
    pub(super) async fn heartbeats(self: Arc<Self>) {
        loop {
            tokio::time::sleep(HEARTBEAT).await;
            let mut reaped = Vec::new();
            let mut touched = Vec::new();
            {
                let mut guard = self.state.lock();
                let s = &mut *guard;
                let now = Instant::now();
                for w in s.workers.iter_mut().filter(|w| w.up) {
                    if !w.cut {
                        self.nodes.announce(&w.node.node_id, &w.node.url);
                        s.record.traffic.heartbeats += 1;
                    }
                    let stale: Vec<String> = w
                        .tasks
                        .iter()
                        .filter(|(_, t)| now - t.last_contact > CLIENT_TIMEOUT)
                        .map(|(k, _)| k.clone())
                        .collect();
                    for key in stale {
                        let task = w.tasks.remove(&key).expect("listed");
                        s.counts[task.id.stage].remove(task.state);
                        touched.push((task.id.stage, task.notify));
                        w.removed.insert(key.clone());
                        reaped.push(format!("{key} on {}", w.node.node_id));
                    }
                }
                let at = self.started.elapsed().as_millis() as u64;
                s.record.reaped.extend(reaped.iter().map(|r| (at, r.clone())));
                if !reaped.is_empty() {
                    self.broke(s);
                }
            }
            for r in reaped {
                self.event(format!("reaped {r}: its coordinator went silent"));
            }
            for (stage, notify) in touched {
                self.touched(stage, Some(&notify));
            }
        }
    }

    pub(super) async fn inject(self: Arc<Self>, fault: Fault) {
        tokio::time::sleep(Duration::from_millis(fault.at_ms())).await;
        if self.ended() {
            return;
        }
        match fault {
            Fault::Kill { worker, down_ms, .. } => {
                let touched = {
                    let mut guard = self.state.lock();
                    let s = &mut *guard;
                    let w = &mut s.workers[worker];
                    w.up = false;
                    w.removed.clear();
                    let tasks = std::mem::take(&mut w.tasks);
                    for t in tasks.values() {
                        s.counts[t.id.stage].remove(t.state);
                    }
                    self.broke(s);
                    tasks.into_values().map(|t| (t.id.stage, t.notify)).collect::<Vec<_>>()
                };
                for (stage, notify) in touched {
                    self.touched(stage, Some(&notify));
                }
                self.event(format!("w{worker} died"));
                for code in [ErrorCode::RemoteHostGone, ErrorCode::TaskLost, ErrorCode::RemoteTaskUnreachable] {
                    self.note_fault_code(code);
                }
                self.note_fault_code(ErrorCode::TooManyRequestsFailed);
                tokio::time::sleep(Duration::from_millis(down_ms)).await;
                self.heal(worker);
                self.event(format!("w{worker} is back, empty"));
            }
            Fault::Cut { worker, for_ms, .. } => {
                self.set_worker(worker, |w| w.cut = true);
                // Long polls under way now time out.
                let notifies: Vec<_> =
                    self.state.lock().workers[worker].tasks.values().map(|t| t.notify.clone()).collect();
                for n in notifies {
                    n.notify_waiters();
                }
                self.event(format!("w{worker} cut off from the coordinator"));
                // Polls time out; heartbeats stop; a task the worker gave up on is lost.
                for code in [
                    ErrorCode::TooManyRequestsFailed,
                    ErrorCode::RemoteHostGone,
                    ErrorCode::TaskLost,
                    ErrorCode::RemoteTaskUnreachable,
                ] {
                    self.note_fault_code(code);
                }
                tokio::time::sleep(Duration::from_millis(for_ms)).await;
                self.heal(worker);
                self.event(format!("w{worker} reachable again"));
            }
            Fault::LoseOutput { pick, .. } => {
                let lost = {
                    let mut s = self.state.lock();
                    let mut finished: Vec<(usize, String)> = Vec::new();
                    for (i, w) in s.workers.iter().enumerate().filter(|(_, w)| w.up) {
                        for (k, t) in &w.tasks {
                            if t.spool && t.state == TaskState::Finished && !t.output_lost {
                                finished.push((i, k.clone()));
                            }
                        }
                    }
                    let chosen = (!finished.is_empty()).then(|| finished[pick % finished.len()].clone());
                    if let Some((i, k)) = &chosen {
                        s.workers[*i].tasks.get_mut(k).expect("listed").output_lost = true;
                        self.broke(&mut s);
                    }
                    chosen
                };
                if let Some((i, k)) = lost {
                    self.note_fault_code(ErrorCode::RemoteTaskUnreachable);
                    self.event(format!("the output of {k} on w{i} is lost"));
                }
            }
        }
    }

    /// The worker is up and reachable again, from now.
    fn heal(&self, worker: usize) {
        let at = self.now_ms();
        self.set_worker(worker, |w| {
            w.up = true;
            w.cut = false;
            w.healed_at = at;
        });
    }

    pub(super) fn set_worker(&self, w: usize, f: impl FnOnce(&mut Worker)) {
        f(&mut self.state.lock().workers[w]);
    }
}
