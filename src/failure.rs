//! A task's or the root stage's DataFusion error as the typed `TaskFailure` the
//! coordinator acts on: which code (and so whether it is worth a retry), and which
//! upstream task, when an exchange link broke. Workers and the coordinator's root
//! stage call `failure_from_error`; it is the one place that knows the errors of every
//! layer (exchange, spool, memory, checked arithmetic, connectors).

use datafusion::error::DataFusionError;

use crate::error_code::ErrorCode;
use crate::exchange::client::ExchangeError;
use crate::exchange::spool::SpoolError;
use crate::protocol::TaskFailure;

/// Names the upstream task when the error came from a broken or failed exchange link.
pub fn failure_from_error(e: &DataFusionError) -> TaskFailure {
    if let Some(x) = find_external::<ExchangeError>(e) {
        let (task, url) = x.upstream();
        let message = match x {
            ExchangeError::UpstreamFailed { message, .. } => message.clone(),
            other => other.to_string(),
        };
        return TaskFailure::fetch(x.code(), message, task.clone(), url);
    }
    let root = || e.find_root().to_string();
    let (code, message) = if find_external::<SpoolError>(e).is_some() {
        // The disk, not the query: worth another attempt elsewhere.
        (ErrorCode::SpoolError, e.to_string())
    } else if matches!(e.find_root(), DataFusionError::ResourcesExhausted(_)) {
        // Memory, not the query's logic: the worker's pool or the query's share of it.
        (ErrorCode::ExceededLocalMemoryLimit, root())
    } else if let Some(code) = crate::plan::checked_arithmetic::arithmetic_error_code(e) {
        (code, root())
    } else if crate::connector::postgresql::PostgresError::is(e) {
        (ErrorCode::JdbcError, root())
    } else if crate::connector::local_files::is_refused_path(e) {
        // A path this node may not open: the plan's fault, not the store's.
        (ErrorCode::PermissionDenied, e.to_string())
    } else if matches!(e.find_root(), DataFusionError::ObjectStore(_)) {
        // Object storage, not the query: worth another attempt (an external error).
        (ErrorCode::ObjectStoreError, e.to_string())
    } else {
        (ErrorCode::ExecutionError, e.to_string())
    };
    TaskFailure::new(code, message)
}

/// The error of type `T` a DataFusion error wraps, however deeply.
pub(crate) fn find_external<T: std::error::Error + 'static>(e: &DataFusionError) -> Option<&T> {
    match e {
        DataFusionError::External(inner) => inner.downcast_ref::<T>(),
        DataFusionError::Context(_, inner) => find_external(inner),
        DataFusionError::Shared(inner) => find_external(inner),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error_code::{ApiCode, FailureCode};
    use crate::protocol::TaskId;

    fn read_of_failed_task(cause: Option<&str>) -> DataFusionError {
        let upstream = ExchangeError::UpstreamFailed {
            task: TaskId::new("q", 1, 2, 0),
            url: "http://w1".into(),
            code: ApiCode::TaskFailed.into(),
            cause: cause.map(FailureCode::parse),
            message: "task q.1.2.0 failed: / by zero".into(),
        };
        DataFusionError::External(Box::new(upstream))
    }

    /// A reader of a failed task reports that task's own code when its worker said
    /// it (the cause, should the coordinator not see the task), and names the task;
    /// without it, or with a code this build does not know, the echo's code.
    #[test]
    fn a_read_of_a_failed_task_carries_its_own_code() {
        let f = failure_from_error(&read_of_failed_task(Some("DIVISION_BY_ZERO")));
        assert!(f.code.is(ErrorCode::DivisionByZero), "{f:?}");
        assert_eq!(f.upstream().map(|(t, _)| t.to_string()), Some("q.1.2.0".to_string()));
        assert_eq!(f.message, "task q.1.2.0 failed: / by zero");
        for cause in [None, Some("DISK_ON_FIRE")] {
            let f = failure_from_error(&read_of_failed_task(cause));
            assert!(f.code.is(ErrorCode::RemoteTaskFailed), "{cause:?}: {f:?}");
        }
    }
}
