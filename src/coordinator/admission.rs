//! Admission: how many queries run at once (`query.max-concurrent-queries`) and how
//! many may wait for a slot (`query.max-queued-queries`). A query runner asks for a
//! slot before it plans; while it waits its query stays `QUEUED` (which clients,
//! `/v1/query`, the web UI and `/metrics` show), and beyond the queue's length it
//! fails at once with Trino's `QUERY_QUEUE_FULL`. The slot is given back when the
//! runner ends, whatever the outcome.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::planner::QueryError;
use crate::error_code::ErrorCode;

/// The limits: no limit on running queries by default, 1000 waiting.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AdmissionLimits {
    pub max_concurrent: Option<usize>,
    pub max_queued: usize,
}

impl Default for AdmissionLimits {
    fn default() -> Self {
        AdmissionLimits { max_concurrent: None, max_queued: 1000 }
    }
}

#[derive(Debug)]
pub struct Admission {
    limits: AdmissionLimits,
    slots: Option<Arc<Semaphore>>,
    queued: AtomicUsize,
}

/// A running query's slot; dropping it lets the next queued query run.
pub struct Slot {
    _permit: Option<OwnedSemaphorePermit>,
}

/// Keeps the queue's count right when a waiting query is cancelled.
struct Waiting<'a>(&'a AtomicUsize);

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Admission {
    pub fn new(limits: AdmissionLimits) -> Self {
        let slots = limits.max_concurrent.map(|n| Arc::new(Semaphore::new(n.max(1))));
        Admission { limits, slots, queued: AtomicUsize::new(0) }
    }

    /// Queries waiting for a slot now.
    pub fn queued(&self) -> usize {
        self.queued.load(Ordering::SeqCst)
    }

    /// A slot, at once or after waiting in the queue; `QUERY_QUEUE_FULL` when the
    /// queue is full.
    pub async fn admit(&self) -> Result<Slot, QueryError> {
        let Some(slots) = &self.slots else { return Ok(Slot { _permit: None }) };
        if let Ok(permit) = slots.clone().try_acquire_owned() {
            return Ok(Slot { _permit: Some(permit) });
        }
        if self.queued.fetch_add(1, Ordering::SeqCst) >= self.limits.max_queued {
            self.queued.fetch_sub(1, Ordering::SeqCst);
            return Err(QueryError::new(
                ErrorCode::QueryQueueFull,
                format!(
                    "Too many queued queries: {} wait for one of {} slots (query.max-queued-queries, \
                     query.max-concurrent-queries)",
                    self.limits.max_queued,
                    self.limits.max_concurrent.unwrap_or_default()
                ),
            ));
        }
        let _waiting = Waiting(&self.queued);
        let permit = slots.clone().acquire_owned().await.expect("the semaphore is never closed");
        Ok(Slot { _permit: Some(permit) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn queries_beyond_the_slots_wait_and_beyond_the_queue_are_refused() {
        let a = Arc::new(Admission::new(AdmissionLimits { max_concurrent: Some(2), max_queued: 1 }));
        let s1 = a.admit().await.unwrap();
        let _s2 = a.admit().await.unwrap();
        let waiter = tokio::spawn({
            let a = a.clone();
            async move { a.admit().await.map(|_| ()) }
        });
        while a.queued() == 0 {
            tokio::task::yield_now().await;
        }
        let full = a.admit().await.err().expect("the queue holds one");
        assert_eq!(full.error_name, "QUERY_QUEUE_FULL");
        assert!(!waiter.is_finished());
        drop(s1);
        waiter.await.unwrap().unwrap();
        assert_eq!(a.queued(), 0);
    }

    #[tokio::test]
    async fn a_cancelled_wait_leaves_the_queue() {
        let a = Admission::new(AdmissionLimits { max_concurrent: Some(1), max_queued: 1 });
        let _s = a.admit().await.unwrap();
        assert!(tokio::time::timeout(std::time::Duration::from_millis(20), a.admit()).await.is_err());
        assert_eq!(a.queued(), 0, "the abandoned wait is not counted");
        assert!(Admission::new(AdmissionLimits::default()).admit().await.is_ok(), "no limit by default");
    }
}
