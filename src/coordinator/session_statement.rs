//! Trino's session statements: `SET SESSION name = value`, `RESET SESSION name`,
//! `USE [catalog.]schema`, `SET TIME ZONE zone | LOCAL` (Trino's `time_zone_id`
//! property), and `START TRANSACTION`, `COMMIT`, `ROLLBACK` (whose
//! semantics are in `transaction`); `sql_parser` reads them. As in Trino the client keeps the session and sends it with
//! every statement (`X-Trino-Session`, `-Catalog`, `-Schema`); such a statement is
//! checked here and answered with the headers that change the client's session
//! (`X-Trino-Set-Session`, `-Clear-Session`, `-Set-Catalog`, `-Set-Schema`), sent on
//! the page that ends it. The query execution runs it; the statement protocol sends
//! its headers.

use datafusion::prelude::SessionContext;

use super::planner::{QueryError, SessionSpec};
use super::transaction::Transactions;
use crate::error_code::ErrorCode;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SessionStatement {
    SetSession {
        name: String,
        value: String,
    },
    ResetSession {
        name: String,
    },
    Use {
        catalog: Option<String>,
        schema: String,
    },
    /// `SET TIME ZONE 'zone'` or `INTERVAL ...`; `None` for `SET TIME ZONE LOCAL`.
    SetTimeZone {
        zone: Option<String>,
    },
    StartTransaction,
    Commit,
    Rollback,
}

/// A response header that changes the client's session.
pub type SessionChange = (&'static str, String);

impl SessionStatement {
    /// `START TRANSACTION`, `COMMIT` or `ROLLBACK`.
    pub fn is_transaction_control(&self) -> bool {
        matches!(self, SessionStatement::StartTransaction | SessionStatement::Commit | SessionStatement::Rollback)
    }

    /// Trino's `updateType` for the statement.
    pub fn update_type(&self) -> &'static str {
        match self {
            SessionStatement::SetSession { .. } => "SET SESSION",
            SessionStatement::ResetSession { .. } => "RESET SESSION",
            SessionStatement::Use { .. } => "USE",
            SessionStatement::SetTimeZone { .. } => "SET TIME ZONE",
            SessionStatement::StartTransaction => "START TRANSACTION",
            SessionStatement::Commit => "COMMIT",
            SessionStatement::Rollback => "ROLLBACK",
        }
    }

    /// Checks the statement against the session's catalogs and the property table,
    /// and returns the headers that make the change on the client.
    pub fn changes(
        &self,
        ctx: &SessionContext,
        session: &SessionSpec,
        transactions: &Transactions,
    ) -> Result<Vec<SessionChange>, QueryError> {
        let now = std::time::Instant::now();
        match self {
            SessionStatement::StartTransaction => {
                let id = transactions.begin(session.transaction.as_deref(), now)?;
                Ok(vec![("x-trino-started-transaction-id", id)])
            }
            SessionStatement::Commit | SessionStatement::Rollback => {
                transactions.end(session.transaction.as_deref(), now)?;
                Ok(vec![("x-trino-clear-transaction-id", "true".to_string())])
            }
            SessionStatement::SetSession { name, value } => {
                let one = [(name.clone(), value.clone())].into_iter().collect();
                crate::config::SessionProperties::parse(&one)
                    .map_err(|m| QueryError::new(ErrorCode::InvalidSessionProperty, m))?;
                Ok(vec![("x-trino-set-session", format!("{name}={}", form_encode(value)))])
            }
            SessionStatement::SetTimeZone { zone: Some(zone) } => {
                let zone = crate::config::time_zone(zone).map_err(|m| QueryError::new(ErrorCode::NotSupported, m))?;
                Ok(vec![("x-trino-set-session", format!("{TIME_ZONE_ID}={}", form_encode(&zone)))])
            }
            SessionStatement::SetTimeZone { zone: None } => Ok(vec![("x-trino-clear-session", TIME_ZONE_ID.into())]),
            SessionStatement::ResetSession { name } => {
                if !crate::config::SESSION_PROPERTIES.iter().any(|d| d.name == name) {
                    let m = format!("Session property '{name}' does not exist");
                    return Err(QueryError::new(ErrorCode::InvalidSessionProperty, m));
                }
                Ok(vec![("x-trino-clear-session", name.clone())])
            }
            SessionStatement::Use { catalog, schema } => {
                let catalog_name = catalog.as_deref().unwrap_or(&session.catalog);
                let found = ctx.catalog(catalog_name).ok_or_else(|| {
                    QueryError::new(ErrorCode::CatalogNotFound, format!("Catalog '{catalog_name}' does not exist"))
                })?;
                if found.schema(schema).is_none() {
                    let m = format!("Schema '{catalog_name}.{schema}' does not exist");
                    return Err(QueryError::new(ErrorCode::SchemaNotFound, m));
                }
                let mut headers = vec![("x-trino-set-schema", schema.clone())];
                if let Some(c) = catalog {
                    headers.insert(0, ("x-trino-set-catalog", c.clone()));
                }
                Ok(headers)
            }
        }
    }
}

/// The session property `SET TIME ZONE` sets (Trino's name).
const TIME_ZONE_ID: &str = "time_zone_id";

/// A header value as Trino's clients decode it (form encoding).
pub(super) fn form_encode(s: &str) -> String {
    let mut out = String::new();
    for b in s.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => out.push(b as char),
            b' ' => out.push('+'),
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(sql: &str) -> SessionStatement {
        match crate::coordinator::sql_parser::parse(sql, &Default::default()) {
            Ok(crate::coordinator::sql_parser::Statement::Session(s)) => s,
            other => panic!("{sql}: not a session statement: {other:?}"),
        }
    }

    #[test]
    fn changes_are_checked_and_encoded_for_the_client() {
        let ctx = crate::coordinator::planner::session_context(
            &SessionSpec::default(),
            &Default::default(),
            2,
            &crate::connector::Connectors::benchmark(),
        );
        let spec = SessionSpec::default();
        let t = Transactions::default();
        let set = parsed("SET SESSION execution_policy = 'all-at-once'").changes(&ctx, &spec, &t).unwrap();
        assert_eq!(set, vec![("x-trino-set-session", "execution_policy=all-at-once".to_string())]);
        let bad = parsed("SET SESSION execution_policy = 'sometimes'").changes(&ctx, &spec, &t).unwrap_err();
        assert_eq!(bad.error_name, "INVALID_SESSION_PROPERTY");
        let unknown = parsed("SET SESSION no_such = 1").changes(&ctx, &spec, &t).unwrap_err();
        assert_eq!(unknown.error_name, "INVALID_SESSION_PROPERTY");
        let reset = parsed("RESET SESSION execution_policy").changes(&ctx, &spec, &t).unwrap();
        assert_eq!(reset, vec![("x-trino-clear-session", "execution_policy".to_string())]);
        let use_schema = parsed("USE sf1").changes(&ctx, &spec, &t).unwrap();
        assert_eq!(use_schema, vec![("x-trino-set-schema", "sf1".to_string())]);
        let both = parsed("USE tpcds.sf1").changes(&ctx, &spec, &t).unwrap();
        assert_eq!(both, vec![("x-trino-set-catalog", "tpcds".to_string()), ("x-trino-set-schema", "sf1".into())]);
        assert_eq!(parsed("USE nope").changes(&ctx, &spec, &t).unwrap_err().error_name, "SCHEMA_NOT_FOUND");
        assert_eq!(parsed("USE nope.sf1").changes(&ctx, &spec, &t).unwrap_err().error_name, "CATALOG_NOT_FOUND");
    }

    #[test]
    fn transactions_start_and_end_with_trinos_headers() {
        let ctx = crate::coordinator::planner::session_context(
            &SessionSpec::default(),
            &Default::default(),
            2,
            &crate::connector::Connectors::benchmark(),
        );
        let t = Transactions::default();
        let started = parsed("START TRANSACTION").changes(&ctx, &SessionSpec::default(), &t).unwrap();
        assert_eq!(started[0].0, "x-trino-started-transaction-id");
        let inside = SessionSpec { transaction: Some(started[0].1.clone()), ..Default::default() };
        let nested = parsed("START TRANSACTION").changes(&ctx, &inside, &t).unwrap_err();
        assert_eq!(nested.error_name, "NOT_SUPPORTED");
        let committed = parsed("COMMIT").changes(&ctx, &inside, &t).unwrap();
        assert_eq!(committed, vec![("x-trino-clear-transaction-id", "true".to_string())]);
        let again = parsed("ROLLBACK").changes(&ctx, &inside, &t).unwrap_err();
        assert_eq!(again.error_name, "UNKNOWN_TRANSACTION");
        let outside = parsed("ROLLBACK").changes(&ctx, &SessionSpec::default(), &t).unwrap_err();
        assert_eq!(outside.error_name, "NOT_IN_TRANSACTION");
    }
}
