//! `FailureInjector`: failures a worker started with `--enable-failure-injection`
//! inflicts on itself, keyed by query, stage, task and attempt, with Trino's five
//! kinds and a sixth of ours, `slow` (a straggler: a wait after every batch). Tests
//! set them through `POST /v1/failure-injection` (an endpoint that does not exist
//! without the flag); the task API consults the injector on each request.

use std::time::Duration;

use parking_lot::Mutex;
use serde::{Deserialize, Serialize};

use crate::protocol::TaskId;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum InjectedFailureKind {
    /// Create, update and status requests answer 500.
    TaskManagementRequestFailure,
    /// Create, update and status requests hang past any client timeout.
    TaskManagementRequestTimeout,
    /// Results requests answer 500.
    GetResultsRequestFailure,
    /// Results requests hang past any client timeout.
    GetResultsRequestTimeout,
    /// The task itself fails.
    TaskFailure,
    /// The task runs, waiting `delay_ms` (100 by default) after every batch its plan
    /// yields: a straggler, for speculative execution.
    Slow,
}

impl InjectedFailureKind {
    pub fn is_task_management(self) -> bool {
        matches!(self, Self::TaskManagementRequestFailure | Self::TaskManagementRequestTimeout)
    }

    pub fn is_get_results(self) -> bool {
        matches!(self, Self::GetResultsRequestFailure | Self::GetResultsRequestTimeout)
    }

    pub fn is_timeout(self) -> bool {
        matches!(self, Self::TaskManagementRequestTimeout | Self::GetResultsRequestTimeout)
    }
}

/// One injected failure; absent key fields match any value.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InjectedFailure {
    #[serde(default)]
    pub query_id: Option<String>,
    #[serde(default)]
    pub stage: Option<usize>,
    #[serde(default)]
    pub task: Option<usize>,
    #[serde(default)]
    pub attempt: Option<usize>,
    pub kind: InjectedFailureKind,
    /// The `slow` kind's wait per batch, in milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delay_ms: Option<u64>,
}

impl InjectedFailure {
    fn matches(&self, id: &TaskId) -> bool {
        self.query_id.as_deref().is_none_or(|q| q == id.query_id)
            && self.stage.is_none_or(|s| s == id.stage)
            && self.task.is_none_or(|t| t == id.task)
            && self.attempt.is_none_or(|a| a == id.attempt)
    }
}

/// How long an injected timeout holds a request: longer than any client waits.
pub const INJECTED_TIMEOUT: Duration = Duration::from_secs(120);

#[derive(Debug, Default)]
pub struct FailureInjector {
    failures: Mutex<Vec<InjectedFailure>>,
}

impl FailureInjector {
    pub fn inject(&self, f: InjectedFailure) {
        self.failures.lock().push(f);
    }

    pub fn clear(&self) {
        self.failures.lock().clear();
    }

    pub fn list(&self) -> Vec<InjectedFailure> {
        self.failures.lock().clone()
    }

    /// The `slow` kind's wait per batch for this task, if one is set.
    pub fn batch_delay(&self, id: &TaskId) -> Option<Duration> {
        let failures = self.failures.lock();
        let slow = failures.iter().find(|f| f.kind == InjectedFailureKind::Slow && f.matches(id))?;
        Some(Duration::from_millis(slow.delay_ms.unwrap_or(100)))
    }

    /// The failure of one of `kinds` set for this task, if any.
    pub fn find(&self, id: &TaskId, wanted: impl Fn(InjectedFailureKind) -> bool) -> Option<InjectedFailureKind> {
        self.failures.lock().iter().find(|f| wanted(f.kind) && f.matches(id)).map(|f| f.kind)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failures_match_by_key_with_wildcards() {
        let inj = FailureInjector::default();
        inj.inject(InjectedFailure {
            query_id: None,
            stage: Some(2),
            task: None,
            attempt: Some(0),
            kind: InjectedFailureKind::TaskFailure,
            delay_ms: None,
        });
        let hit = TaskId::new("q1", 2, 5, 0);
        assert_eq!(inj.find(&hit, |k| k == InjectedFailureKind::TaskFailure), Some(InjectedFailureKind::TaskFailure));
        assert_eq!(inj.find(&TaskId::new("q1", 2, 5, 1), |_| true), None, "other attempt");
        assert_eq!(inj.find(&TaskId::new("q1", 3, 5, 0), |_| true), None, "other stage");
        assert_eq!(inj.find(&hit, InjectedFailureKind::is_get_results), None, "other kind");
        inj.clear();
        assert!(inj.find(&hit, |_| true).is_none());
    }

    #[test]
    fn kinds_parse_from_snake_case() {
        let f: InjectedFailure =
            serde_json::from_str(r#"{"stage": 1, "kind": "get_results_request_timeout"}"#).unwrap();
        assert!(f.kind.is_get_results() && f.kind.is_timeout());
        assert!(serde_json::from_str::<InjectedFailure>(r#"{"kind": "meteor_strike"}"#).is_err());
        let slow: InjectedFailure = serde_json::from_str(r#"{"kind": "slow", "delay_ms": 250}"#).unwrap();
        let inj = FailureInjector::default();
        inj.inject(slow);
        assert_eq!(inj.batch_delay(&TaskId::new("q", 1, 0, 0)), Some(Duration::from_millis(250)));
        assert_eq!(inj.find(&TaskId::new("q", 1, 0, 0), |k| k != InjectedFailureKind::Slow), None);
    }
}
