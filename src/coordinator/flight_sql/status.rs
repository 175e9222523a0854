//! Errors as Flight SQL clients get them: a gRPC status whose code says the kind of
//! failure and whose message starts with Trino's error name, as the Trino protocol
//! names it (`TABLE_NOT_FOUND: ...`), with the name, number and type also in the
//! status's metadata (`x-trino-error-name`, `-code`, `-type`). The one mapping from
//! the coordinator's errors to gRPC, used by every call of the service.

use tonic::metadata::{MetadataMap, MetadataValue};
use tonic::{Code, Status};

use crate::coordinator::CoordinatorError;
use crate::error_code::{ApiCode, CodeName, ErrorCode, ErrorType, QueryError};
use crate::http::ApiError;

/// The gRPC code of a query's error.
fn query_code(e: &QueryError) -> Code {
    let name = e.error_name.name();
    if e.error_name.is(ErrorCode::UserCanceled) {
        Code::Cancelled
    } else if e.error_name.is(ErrorCode::PermissionDenied) {
        Code::PermissionDenied
    } else if e.error_name.is(ErrorCode::NotSupported) {
        Code::Unimplemented
    } else if name.ends_with("_NOT_FOUND") {
        Code::NotFound
    } else if name.ends_with("_ALREADY_EXISTS") {
        Code::AlreadyExists
    } else if name.starts_with("EXCEEDED_") && name.ends_with("_TIME_LIMIT") {
        Code::DeadlineExceeded
    } else {
        match e.error_type {
            ErrorType::UserError => Code::InvalidArgument,
            ErrorType::InsufficientResources => Code::ResourceExhausted,
            ErrorType::External => Code::Unavailable,
            ErrorType::InternalError => Code::Internal,
        }
    }
}

fn with_metadata(code: Code, name: &str, number: i64, kind: &str, message: &str) -> Status {
    let mut metadata = MetadataMap::new();
    for (key, value) in [("x-trino-error-name", name.to_string()), ("x-trino-error-code", number.to_string())]
        .into_iter()
        .chain([("x-trino-error-type", kind.to_string())])
    {
        if let Ok(v) = MetadataValue::try_from(value.as_str()) {
            metadata.insert(key, v);
        }
    }
    Status::with_metadata(code, format!("{name}: {message}"), metadata)
}

/// A failed query's status.
pub fn query_status(e: &QueryError) -> Status {
    with_metadata(query_code(e), e.error_name.name(), e.error_code, e.error_type.name(), &e.message)
}

/// A refused request's status (a login, a lost query, a malformed call).
pub fn coordinator_status(e: &CoordinatorError) -> Status {
    let code = match e.code() {
        ApiCode::Unauthenticated | ApiCode::TooManyFailedLogins => Code::Unauthenticated,
        ApiCode::PermissionDenied => Code::PermissionDenied,
        ApiCode::QueryNotFound | ApiCode::InvalidToken => Code::NotFound,
        ApiCode::BadRequest => Code::InvalidArgument,
        _ => Code::Internal,
    };
    let api = e.code();
    with_metadata(code, api.name(), i64::from(api.status().as_u16()), "REQUEST", &e.to_string())
}

/// A malformed call (a bad handle, parameters that cannot be bound).
pub fn invalid(message: impl std::fmt::Display) -> Status {
    query_status(&QueryError::new(ErrorCode::GenericUserError, message.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_follow_the_error_kind_and_keep_trinos_name() {
        let s = query_status(&QueryError::new(ErrorCode::TableNotFound, "Table 'x' does not exist"));
        assert_eq!(s.code(), Code::NotFound);
        assert_eq!(s.message(), "TABLE_NOT_FOUND: Table 'x' does not exist");
        assert_eq!(s.metadata().get("x-trino-error-name").unwrap(), "TABLE_NOT_FOUND");
        assert_eq!(s.metadata().get("x-trino-error-type").unwrap(), "USER_ERROR");
        assert_eq!(query_status(&QueryError::new(ErrorCode::UserCanceled, "c")).code(), Code::Cancelled);
        assert_eq!(query_status(&QueryError::new(ErrorCode::SyntaxError, "s")).code(), Code::InvalidArgument);
        assert_eq!(query_status(&QueryError::new(ErrorCode::NotSupported, "n")).code(), Code::Unimplemented);
        let login = coordinator_status(&CoordinatorError::Unauthenticated("wrong user or password".into()));
        assert_eq!(login.code(), Code::Unauthenticated);
        assert!(login.message().contains("wrong user or password"), "{}", login.message());
    }
}
