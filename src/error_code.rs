//! `ErrorCode`: the one taxonomy of query and task failures, with Trino's names, numbers
//! and types, and one retry rule per code. The client protocol reports these, workers
//! put their names into task failures, the exchange reports upstream trouble with them,
//! and both retry policies ask `is_retryable`. Codes Trino lacks (flotilla's own
//! task-level detail) use the range Trino leaves to connectors (from 0x0100_0000).
//!
//! On the wire a code is its name. It is parsed once, where it arrives, into a
//! [`Named`] code: one this build knows, or the name kept as sent (a newer peer's).
//! `QueryError` is the one shape of a query's error, the coordinator's to send and the
//! client's to read.

use serde::{Deserialize, Serialize};

/// Trino's `ErrorType`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum ErrorType {
    UserError,
    #[default]
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
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
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

        impl CodeName for ErrorCode {
            fn name(self) -> &'static str {
                ErrorCode::name(self)
            }
            fn parse(name: &str) -> Option<Self> {
                ErrorCode::parse(name)
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
    /// A named thing the statement refers to is not there (a prepared statement).
    NotFound = ("NOT_FOUND", 5, UserError, Never),
    /// A function given an argument outside its domain (`bit_count(300, 8)`).
    InvalidFunctionArgument = ("INVALID_FUNCTION_ARGUMENT", 7, UserError, Never),
    DivisionByZero = ("DIVISION_BY_ZERO", 8, UserError, Never),
    /// A cast of a value that is not one of the type (`CAST('abc' AS INTEGER)`).
    InvalidCastArgument = ("INVALID_CAST_ARGUMENT", 9, UserError, Never),
    /// An integer result (or cast) out of its type's range.
    NumericValueOutOfRange = ("NUMERIC_VALUE_OUT_OF_RANGE", 19, UserError, Never),
    /// A transaction id the coordinator does not know, or no longer (idle too long).
    UnknownTransaction = ("UNKNOWN_TRANSACTION", 20, UserError, Never),
    /// `COMMIT` or `ROLLBACK` without a transaction.
    NotInTransaction = ("NOT_IN_TRANSACTION", 21, UserError, Never),
    /// An isolation level this engine cannot keep (`REPEATABLE READ`, `SERIALIZABLE`).
    UnsupportedIsolationLevel = ("UNSUPPORTED_ISOLATION_LEVEL", 26, UserError, Never),
    /// A scalar subquery with more than one row for a row that reads it.
    SubqueryMultipleRows = ("SUBQUERY_MULTIPLE_ROWS", 28, UserError, Never),
    /// A `MERGE` whose target row matched more than one source row.
    MergeTargetRowMultipleMatches = ("MERGE_TARGET_ROW_MULTIPLE_MATCHES", 119, UserError, Never),
    /// A stored view whose text no longer plans (a table it reads is gone).
    InvalidView = ("INVALID_VIEW", 11, UserError, Never),
    NotSupported = ("NOT_SUPPORTED", 13, UserError, Never),
    /// A write whose table another statement dropped, renamed, replaced or rewrote
    /// while it ran (`coordinator::table_locks`).
    TransactionConflict = ("TRANSACTION_CONFLICT", 17, UserError, Never),
    InvalidSessionProperty = ("INVALID_SESSION_PROPERTY", 14, UserError, Never),
    QueryTextTooLarge = ("QUERY_TEXT_TOO_LARGE", 35, UserError, Never),
    /// A function would make a value or a batch past the limits of `functions::bounded`.
    ExceededFunctionMemoryLimit = ("EXCEEDED_FUNCTION_MEMORY_LIMIT", 37, UserError, Never),
    CatalogNotFound = ("CATALOG_NOT_FOUND", 44, UserError, Never),
    /// An expression of another type than its place takes (`(x).*` of a non-row).
    TypeMismatch = ("TYPE_MISMATCH", 58, UserError, Never),
    /// More or fewer column aliases than columns (`t.* AS (a, b)`).
    MismatchedColumnAliases = ("MISMATCHED_COLUMN_ALIASES", 61, UserError, Never),
    SchemaNotFound = ("SCHEMA_NOT_FOUND", 45, UserError, Never),
    TableNotFound = ("TABLE_NOT_FOUND", 46, UserError, Never),
    ColumnNotFound = ("COLUMN_NOT_FOUND", 47, UserError, Never),
    /// A table or view of the name exists already (`CREATE`, `ALTER ... RENAME TO`).
    TableAlreadyExists = ("TABLE_ALREADY_EXISTS", 50, UserError, Never),
    /// `EXECUTE` with more or fewer values than the statement has parameters.
    InvalidParameterUsage = ("INVALID_PARAMETER_USAGE", 80, UserError, Never),
    /// A view that reads itself, directly or through other views.
    ViewIsRecursive = ("VIEW_IS_RECURSIVE", 82, UserError, Never),
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

macro_rules! api_codes {
    ($( $(#[$doc:meta])* $variant:ident = ($name:literal, $status:ident), )*) => {
        /// The stable codes of the HTTP API's JSON errors (`{"error":{"code":..}}`),
        /// each with its one HTTP status. Query failures use `ErrorCode` instead.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum ApiCode { $( $(#[$doc])* $variant, )* }

        impl ApiCode {
            pub const ALL: &'static [ApiCode] = &[$(ApiCode::$variant,)*];

            pub fn status(self) -> axum::http::StatusCode {
                match self { $(ApiCode::$variant => axum::http::StatusCode::$status,)* }
            }
        }

        impl CodeName for ApiCode {
            fn name(self) -> &'static str {
                match self { $(ApiCode::$variant => $name,)* }
            }
            fn parse(name: &str) -> Option<Self> {
                match name { $($name => Some(ApiCode::$variant),)* _ => None }
            }
        }
    };
}

api_codes! {
    BadRequest = ("BAD_REQUEST", BAD_REQUEST),
    /// A worker cannot run the fragment it was sent.
    BadPlan = ("BAD_PLAN", BAD_REQUEST),
    BadBufferRequest = ("BAD_BUFFER_REQUEST", BAD_REQUEST),
    /// No valid login, or an internal request without the cluster's shared secret.
    Unauthenticated = ("UNAUTHENTICATED", UNAUTHORIZED),
    PermissionDenied = ("PERMISSION_DENIED", FORBIDDEN),
    NotFound = ("NOT_FOUND", NOT_FOUND),
    QueryNotFound = ("QUERY_NOT_FOUND", NOT_FOUND),
    TaskNotFound = ("TASK_NOT_FOUND", NOT_FOUND),
    NoDynamicFilter = ("NO_DYNAMIC_FILTER", NOT_FOUND),
    NoMemoryFragment = ("NO_MEMORY_FRAGMENT", NOT_FOUND),
    MethodNotAllowed = ("METHOD_NOT_ALLOWED", METHOD_NOT_ALLOWED),
    /// A worker of another `node.environment` announced itself.
    WrongEnvironment = ("WRONG_ENVIRONMENT", CONFLICT),
    /// A worker announced the node id of another live worker.
    DuplicateNodeId = ("DUPLICATE_NODE_ID", CONFLICT),
    /// A results token the query has moved past.
    InvalidToken = ("INVALID_TOKEN", GONE),
    RequestTooLarge = ("REQUEST_TOO_LARGE", PAYLOAD_TOO_LARGE),
    UnsupportedMediaType = ("UNSUPPORTED_MEDIA_TYPE", UNSUPPORTED_MEDIA_TYPE),
    TooManyFailedLogins = ("TOO_MANY_FAILED_LOGINS", TOO_MANY_REQUESTS),
    InternalError = ("INTERNAL_ERROR", INTERNAL_SERVER_ERROR),
    /// The task whose results were asked for failed; the message says how.
    TaskFailed = ("TASK_FAILED", INTERNAL_SERVER_ERROR),
    InjectedFailure = ("INJECTED_FAILURE", INTERNAL_SERVER_ERROR),
    SpoolError = ("SPOOL_ERROR", INTERNAL_SERVER_ERROR),
    PageEncodingError = ("PAGE_ENCODING_ERROR", INTERNAL_SERVER_ERROR),
    /// Try again shortly: a create of the same task is under way.
    TaskBeingCreated = ("TASK_BEING_CREATED", SERVICE_UNAVAILABLE),
    ServerShuttingDown = ("SERVER_SHUTTING_DOWN", SERVICE_UNAVAILABLE),
}

/// A code type whose values travel by name: `ErrorCode`, and the HTTP API's `ApiCode`.
pub trait CodeName: Copy + Sized {
    fn name(self) -> &'static str;
    fn parse(name: &str) -> Option<Self>;
}

/// A code as a peer named it, parsed once where it arrives: one this build knows, or
/// the name kept as sent (a newer peer's), so that it can be reported unchanged.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Named<T> {
    Known(T),
    Unknown(String),
}

/// A task's or a query's failure code on the wire.
pub type FailureCode = Named<ErrorCode>;

impl<T: CodeName> Named<T> {
    pub fn parse(name: &str) -> Self {
        T::parse(name).map_or_else(|| Named::Unknown(name.to_string()), Named::Known)
    }

    pub fn name(&self) -> &str {
        match self {
            Named::Known(c) => c.name(),
            Named::Unknown(name) => name,
        }
    }

    pub fn known(&self) -> Option<T> {
        match self {
            Named::Known(c) => Some(*c),
            Named::Unknown(_) => None,
        }
    }
}

impl<T: CodeName + PartialEq> Named<T> {
    pub fn is(&self, code: T) -> bool {
        self.known() == Some(code)
    }
}

impl FailureCode {
    /// Trino's number; a name this build does not know reports Trino's generic
    /// internal error's.
    pub fn number(&self) -> i64 {
        self.known().unwrap_or(ErrorCode::GenericInternalError).number()
    }

    pub fn error_type(&self) -> ErrorType {
        self.known().map_or(ErrorType::InternalError, ErrorCode::error_type)
    }

    /// Whether running the work again can succeed. A name this process does not know
    /// is an internal failure of a newer peer: retryable, as Trino treats errors that
    /// are not the user's.
    pub fn is_retryable(&self) -> bool {
        self.known().is_none_or(ErrorCode::is_retryable)
    }
}

impl<T> From<T> for Named<T> {
    fn from(code: T) -> Self {
        Named::Known(code)
    }
}

impl<T: CodeName> Default for Named<T> {
    fn default() -> Self {
        Named::Unknown(String::new())
    }
}

impl<T: CodeName> std::fmt::Display for Named<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl<T: CodeName> PartialEq<str> for Named<T> {
    fn eq(&self, other: &str) -> bool {
        self.name() == other
    }
}

impl<T: CodeName> PartialEq<&str> for Named<T> {
    fn eq(&self, other: &&str) -> bool {
        self.name() == *other
    }
}

impl<T: CodeName> Serialize for Named<T> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

impl<'de, T: CodeName> Deserialize<'de> for Named<T> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let name = String::deserialize(d)?;
        Ok(Named::parse(&name))
    }
}

/// A query's error as the client protocol carries it (Trino's `QueryError`): the
/// coordinator sends it, the client reads it.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(default, rename_all = "camelCase")]
pub struct QueryError {
    pub message: String,
    pub error_code: i64,
    pub error_name: FailureCode,
    pub error_type: ErrorType,
}

impl QueryError {
    pub fn new(code: impl Into<FailureCode>, message: impl Into<String>) -> Self {
        let code = code.into();
        QueryError {
            message: message.into(),
            error_code: code.number(),
            error_type: code.error_type(),
            error_name: code,
        }
    }

    /// Whether running the query again can succeed (`retry_policy=query`).
    pub fn is_retryable(&self) -> bool {
        self.error_name.is_retryable()
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
    fn api_codes_are_unique_and_round_trip() {
        let mut names = std::collections::HashSet::new();
        for &c in ApiCode::ALL {
            assert!(names.insert(c.name()), "{c:?} twice");
            assert_eq!(<ApiCode as CodeName>::parse(c.name()), Some(c));
            assert!(c.status().is_client_error() || c.status().is_server_error(), "{c:?}");
        }
    }

    #[test]
    fn unknown_names_are_kept_through_the_wire() {
        let code: FailureCode = serde_json::from_str("\"DISK_ON_FIRE\"").unwrap();
        assert_eq!(code, Named::Unknown("DISK_ON_FIRE".into()));
        assert_eq!(serde_json::to_string(&code).unwrap(), "\"DISK_ON_FIRE\"");
        let e = QueryError::new(code, "boom");
        assert_eq!((e.error_code, e.error_type), (65536, ErrorType::InternalError));
        let known: FailureCode = serde_json::from_str("\"TABLE_NOT_FOUND\"").unwrap();
        assert!(known.is(ErrorCode::TableNotFound));
        // The client protocol's shape: camelCase, the name and type as strings.
        let sent = serde_json::to_value(QueryError::new(ErrorCode::TableNotFound, "no t")).unwrap();
        assert_eq!(
            sent,
            serde_json::json!({"message": "no t", "errorCode": 46, "errorName": "TABLE_NOT_FOUND", "errorType": "USER_ERROR"})
        );
        assert_eq!(serde_json::from_value::<QueryError>(sent).unwrap().error_name, "TABLE_NOT_FOUND");
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
        assert!(FailureCode::parse("FROM_A_NEWER_WORKER").is_retryable());
        assert!(!FailureCode::parse("EXECUTION_ERROR").is_retryable());
    }
}
