//! `ErrorCode`: the one taxonomy of query and task failures, with Trino's names, numbers
//! and types, and one retry rule per code. The client protocol reports these, workers
//! put their names into task failures, the exchange reports upstream trouble with them,
//! and both retry policies ask `is_retryable`. Codes Trino lacks (flotilla's own
//! task-level detail) use the range Trino leaves to connectors (from 0x0100_0000).
//!
//! On the wire a code is its name. A name this process does not know (a newer worker)
//! is kept as sent by the caller: `ErrorCode::parse` returns `None` for it, and
//! `QueryError::from_name` keeps the name while reporting Trino's generic number.

use serde::Serialize;

/// Trino's `ErrorType`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum ErrorType {
    UserError,
    InternalError,
    InsufficientResources,
    External,
}

impl ErrorType {
    pub fn name(self) -> &'static str {
        match self {
            ErrorType::UserError => "USER_ERROR",
            ErrorType::InternalError => "INTERNAL_ERROR",
            ErrorType::InsufficientResources => "INSUFFICIENT_RESOURCES",
            ErrorType::External => "EXTERNAL",
        }
    }
}

/// Retry rule of a code: whether running the work again (the whole query under
/// `retry_policy=query`, the task under `task`) can succeed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Retry {
    /// The query itself is at fault (bad SQL, a failing cast): it would fail again.
    Never,
    /// The cluster was at fault (a lost worker, a broken link): worth another run.
    Retryable,
}

macro_rules! error_codes {
    ($( $(#[$doc:meta])* $variant:ident = ($name:literal, $number:expr, $kind:ident, $retry:ident), )*) => {
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum ErrorCode { $( $(#[$doc])* $variant, )* }

        impl ErrorCode {
            pub const ALL: &'static [ErrorCode] = &[$(ErrorCode::$variant,)*];

            /// Trino's name, e.g. `REMOTE_HOST_GONE`.
            pub fn name(self) -> &'static str {
                match self { $(ErrorCode::$variant => $name,)* }
            }

            /// Trino's number, e.g. 65558.
            pub fn number(self) -> i64 {
                match self { $(ErrorCode::$variant => $number,)* }
            }

            pub fn error_type(self) -> ErrorType {
                match self { $(ErrorCode::$variant => ErrorType::$kind,)* }
            }

            pub fn retry(self) -> Retry {
                match self { $(ErrorCode::$variant => Retry::$retry,)* }
            }

            pub fn parse(name: &str) -> Option<ErrorCode> {
                match name { $($name => Some(ErrorCode::$variant),)* _ => None }
            }
        }
    };
}

/// Where flotilla's own codes start: in the range Trino leaves to connectors, clear of
/// the bases its own connectors use (Hive's is 0x0100_0000).
const FLOTILLA: i64 = 0x0F10_0000;

error_codes! {
    GenericUserError = ("GENERIC_USER_ERROR", 0, UserError, Never),
    SyntaxError = ("SYNTAX_ERROR", 1, UserError, Never),
    /// The client stopped asking for results (`query.client.timeout`).
    AbandonedQuery = ("ABANDONED_QUERY", 2, UserError, Never),
    UserCanceled = ("USER_CANCELED", 3, UserError, Never),
    PermissionDenied = ("PERMISSION_DENIED", 4, UserError, Never),
    DivisionByZero = ("DIVISION_BY_ZERO", 8, UserError, Never),
    /// A cast of a value that is not one of the type (`CAST('abc' AS INTEGER)`).
    InvalidCastArgument = ("INVALID_CAST_ARGUMENT", 9, UserError, Never),
    /// An integer result (or cast) out of its type's range.
    NumericValueOutOfRange = ("NUMERIC_VALUE_OUT_OF_RANGE", 19, UserError, Never),
    NotSupported = ("NOT_SUPPORTED", 13, UserError, Never),
    InvalidSessionProperty = ("INVALID_SESSION_PROPERTY", 14, UserError, Never),
    QueryTextTooLarge = ("QUERY_TEXT_TOO_LARGE", 35, UserError, Never),
    CatalogNotFound = ("CATALOG_NOT_FOUND", 44, UserError, Never),
    SchemaNotFound = ("SCHEMA_NOT_FOUND", 45, UserError, Never),
    TableNotFound = ("TABLE_NOT_FOUND", 46, UserError, Never),
    /// A bug or an unexpected state: running the same thing again would hit it again.
    GenericInternalError = ("GENERIC_INTERNAL_ERROR", 65536, InternalError, Never),
    TooManyRequestsFailed = ("TOO_MANY_REQUESTS_FAILED", 65537, InternalError, Retryable),
    PageTransportError = ("PAGE_TRANSPORT_ERROR", 65539, InternalError, Retryable),
    NoNodesAvailable = ("NO_NODES_AVAILABLE", 65541, InternalError, Retryable),
    RemoteTaskError = ("REMOTE_TASK_ERROR", 65542, InternalError, Retryable),
    ServerShuttingDown = ("SERVER_SHUTTING_DOWN", 65545, InternalError, Retryable),
    /// A worker dropped a task nobody asked about (`task.client.timeout`).
    AbandonedTask = ("ABANDONED_TASK", 65553, InternalError, Retryable),
    RemoteHostGone = ("REMOTE_HOST_GONE", 65558, InternalError, Retryable),
    /// A query held more memory across the cluster than `query_max_memory`.
    ExceededGlobalMemoryLimit = ("EXCEEDED_GLOBAL_MEMORY_LIMIT", 131073, InsufficientResources, Never),
    /// More queries wait for a slot than `query.max-queued-queries`.
    QueryQueueFull = ("QUERY_QUEUE_FULL", 131074, InsufficientResources, Never),
    ExceededTimeLimit = ("EXCEEDED_TIME_LIMIT", 131075, InsufficientResources, Never),
    /// A query's tasks on one worker wanted more than `query_max_memory_per_node`, or
    /// than the worker's pool had left with spilling done.
    ExceededLocalMemoryLimit = ("EXCEEDED_LOCAL_MEMORY_LIMIT", 131079, InsufficientResources, Never),
    /// DataFusion failed while running the plan: a failing cast, a division by zero.
    ExecutionError = ("EXECUTION_ERROR", FLOTILLA, UserError, Never),
    /// A task could not reach an upstream task's output (it names the upstream).
    RemoteTaskUnreachable = ("REMOTE_TASK_UNREACHABLE", FLOTILLA + 1, InternalError, Retryable),
    /// An upstream task failed; the reader echoes its failure (it names the upstream).
    RemoteTaskFailed = ("REMOTE_TASK_FAILED", FLOTILLA + 2, InternalError, Retryable),
    /// A worker refused to create a task: its plan cannot run there.
    RemoteTaskRejected = ("REMOTE_TASK_REJECTED", FLOTILLA + 3, InternalError, Never),
    /// A task the coordinator polled is gone from its worker.
    TaskLost = ("TASK_LOST", FLOTILLA + 4, InternalError, Retryable),
    /// Spooled output could not be written or read (the worker's disk).
    SpoolError = ("SPOOL_ERROR", FLOTILLA + 5, External, Retryable),
    /// A failure injected on purpose (`--enable-failure-injection`).
    InjectedFailure = ("INJECTED_FAILURE", FLOTILLA + 6, InternalError, Retryable),
    /// A fragment could not be encoded for the workers.
    PlanSerialization = ("PLAN_SERIALIZATION", FLOTILLA + 7, InternalError, Never),
    /// A task whose output was aborted (its spooled files are gone).
    TaskAborted = ("TASK_ABORTED", FLOTILLA + 8, InternalError, Retryable),
    /// An upstream task answered with something that is not our page format.
    RemoteTaskProtocolError = ("REMOTE_TASK_PROTOCOL_ERROR", FLOTILLA + 9, InternalError, Retryable),
    /// Object storage or a file system failed (an endpoint down, a bucket missing,
    /// access refused): outside the engine, worth another attempt.
    ObjectStoreError = ("OBJECT_STORE_ERROR", FLOTILLA + 10, External, Retryable),
    /// A database behind a catalog refused or failed (a wrong login, a server down):
    /// Trino's code of its JDBC connectors.
    JdbcError = ("JDBC_ERROR", 0x0400_0000, External, Never),
    /// A worker could not decode or build a task's plan: running it again would fail
    /// the same way.
    BadPlan = ("BAD_PLAN", FLOTILLA + 11, InternalError, Never),
    /// A table's file cannot be read as its format says (a Parquet footer past the
    /// file's start); the message names the file.
    CorruptFile = ("CORRUPT_FILE", FLOTILLA + 12, External, Never),
}

impl ErrorCode {
    pub fn is_retryable(self) -> bool {
        self.retry() == Retry::Retryable
    }
}

impl std::fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Whether a failure named `name` on the wire is worth retrying. A name this process
/// does not know is an internal failure of a newer peer: retryable, as Trino treats
/// errors that are not the user's.
pub fn name_is_retryable(name: &str) -> bool {
    ErrorCode::parse(name).is_none_or(ErrorCode::is_retryable)
}

/// An error as the client protocol reports it.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct QueryError {
    pub error_name: String,
    pub error_code: i64,
    /// USER_ERROR, INTERNAL_ERROR, INSUFFICIENT_RESOURCES or EXTERNAL.
    pub error_type: String,
    pub message: String,
}

impl QueryError {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        QueryError {
            error_name: code.name().to_string(),
            error_code: code.number(),
            error_type: code.error_type().name().to_string(),
            message: message.into(),
        }
    }

    /// A failure named on the wire (a task failure's code). A name this process does
    /// not know is kept as sent, with Trino's generic internal number and type.
    pub fn from_name(name: &str, message: impl Into<String>) -> Self {
        match ErrorCode::parse(name) {
            Some(code) => QueryError::new(code, message),
            None => QueryError {
                error_name: name.to_string(),
                error_code: ErrorCode::GenericInternalError.number(),
                error_type: ErrorType::InternalError.name().to_string(),
                message: message.into(),
            },
        }
    }

    /// Whether running the query again can succeed (`retry_policy=query`).
    pub fn is_retryable(&self) -> bool {
        name_is_retryable(&self.error_name)
    }
}

impl std::fmt::Display for QueryError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.error_name, self.message)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_numbers_are_unique_and_round_trip() {
        let mut names = std::collections::HashSet::new();
        let mut numbers = std::collections::HashSet::new();
        for &c in ErrorCode::ALL {
            assert!(names.insert(c.name()), "{c} twice");
            assert!(numbers.insert(c.number()), "{} twice", c.number());
            assert_eq!(ErrorCode::parse(c.name()), Some(c));
        }
        assert_eq!(ErrorCode::parse("SOMETHING_NEW"), None);
    }

    #[test]
    fn numbers_and_types_are_trinos() {
        // From Trino's StandardErrorCode.
        assert_eq!((ErrorCode::SyntaxError.number(), ErrorCode::SyntaxError.error_type()), (1, ErrorType::UserError));
        assert_eq!(ErrorCode::InvalidSessionProperty.number(), 14);
        assert_eq!(ErrorCode::TableNotFound.number(), 46);
        assert_eq!(ErrorCode::NoNodesAvailable.number(), 65541);
        assert_eq!(ErrorCode::RemoteHostGone.number(), 65558);
        assert_eq!(ErrorCode::ExceededTimeLimit.error_type(), ErrorType::InsufficientResources);
    }

    #[test]
    fn user_errors_are_never_retried_and_unknown_names_are() {
        for &c in ErrorCode::ALL {
            if c.error_type() == ErrorType::UserError {
                assert!(!c.is_retryable(), "{c}");
            }
        }
        assert!(ErrorCode::RemoteHostGone.is_retryable());
        assert!(!ErrorCode::GenericInternalError.is_retryable());
        assert!(!ErrorCode::RemoteTaskRejected.is_retryable());
        assert!(name_is_retryable("FROM_A_NEWER_WORKER"));
        assert!(!name_is_retryable("EXECUTION_ERROR"));
    }
}
