//! A query's errors as its client sees them: a DataFusion error at the root stage, or a
//! task's reported failure, mapped to Trino's code and a message saying where it
//! happened. The query runner (`execution`) and the fault-tolerant root stage
//! (`root_stage`) call it.

use super::planner::QueryError;
use crate::error_code::ErrorCode;

pub(crate) fn root_error(e: &datafusion::error::DataFusionError) -> QueryError {
    if let Some(commit) = crate::failure::find_external::<super::table_commit::CommitError>(e) {
        return commit.0.clone();
    }
    let failure = crate::failure::failure_from_error(e);
    if let Some((upstream, url)) = failure.upstream() {
        let code = match failure.code.is(ErrorCode::RemoteTaskUnreachable) {
            true => ErrorCode::PageTransportError,
            false => ErrorCode::RemoteTaskError,
        };
        let message =
            format!("stage 0 (coordinator) could not read from task {upstream} on worker {url}: {}", failure.message);
        return QueryError::new(code, message);
    }
    // The code the failure names (an overflow, a refused path, memory).
    QueryError::new(failure.code, failure.message)
}

/// The query's error for a failed task: the task's own code where it says what went
/// wrong to a user, Trino's transport and host codes for the cluster's failures, and
/// a code this coordinator does not know kept as the worker sent it.
pub(crate) fn task_failure_error(r: &crate::scheduling::pipelined::TaskFailureReport) -> QueryError {
    let message = format!("stage {} task {} on worker {} failed: {}", r.stage, r.task, r.worker, r.failure.message);
    let code = match r.failure.code.known() {
        None => return QueryError::new(r.failure.code.clone(), message),
        Some(ErrorCode::RemoteHostGone | ErrorCode::TaskLost) => ErrorCode::RemoteHostGone,
        Some(ErrorCode::RemoteTaskUnreachable) => ErrorCode::PageTransportError,
        Some(c @ (ErrorCode::TooManyRequestsFailed | ErrorCode::BadPlan | ErrorCode::JdbcError)) => c,
        Some(c) if c.error_type() == crate::error_code::ErrorType::UserError => c,
        // Memory limits say what the query needed: the user's to act on.
        Some(c) if c.error_type() == crate::error_code::ErrorType::InsufficientResources => c,
        Some(_) => ErrorCode::RemoteTaskError,
    };
    QueryError::new(code, message)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::{TaskFailure, TaskId};
    use crate::scheduling::pipelined::TaskFailureReport;

    fn report(code: &str) -> TaskFailureReport {
        let code = crate::error_code::FailureCode::parse(code);
        TaskFailureReport {
            stage: 1,
            task: TaskId::new("q", 1, 0, 0),
            worker: "http://w".into(),
            failure: TaskFailure::new(code, "boom"),
        }
    }

    #[test]
    fn task_failures_become_trino_codes_and_unknown_names_are_kept() {
        let e = task_failure_error(&report("EXECUTION_ERROR"));
        assert_eq!((e.error_name.name(), e.error_type), ("EXECUTION_ERROR", crate::error_code::ErrorType::UserError));
        assert!(!e.is_retryable());
        assert_eq!(task_failure_error(&report("TASK_LOST")).error_name, "REMOTE_HOST_GONE");
        assert_eq!(task_failure_error(&report("REMOTE_TASK_UNREACHABLE")).error_name, "PAGE_TRANSPORT_ERROR");
        assert_eq!(task_failure_error(&report("SPOOL_ERROR")).error_name, "REMOTE_TASK_ERROR");
        let memory = task_failure_error(&report("EXCEEDED_LOCAL_MEMORY_LIMIT"));
        assert_eq!((memory.error_name.name(), memory.error_code), ("EXCEEDED_LOCAL_MEMORY_LIMIT", 131079));
        assert_eq!(memory.error_type, crate::error_code::ErrorType::InsufficientResources);
        let unknown = task_failure_error(&report("DISK_ON_FIRE"));
        assert_eq!((unknown.error_name.name(), unknown.error_code), ("DISK_ON_FIRE", 65536));
        // Unknown names are a newer peer's internal failures, retried; our own catch-all
        // GENERIC_INTERNAL_ERROR is a bug and is not.
        assert!(unknown.is_retryable());
        assert!(unknown.message.contains("stage 1") && unknown.message.contains("boom"));
    }
}
