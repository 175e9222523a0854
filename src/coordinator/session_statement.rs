//! Trino's session statements: `SET SESSION name = value`, `RESET SESSION name`,
//! `USE [catalog.]schema`, `SET TIME ZONE zone | LOCAL` (Trino's `time_zone_id`
//! property), and `START TRANSACTION`, `COMMIT`, `ROLLBACK` (whose
//! semantics are in `transaction`). As in Trino the client keeps the session and sends it with
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
    /// Recognizes a session statement; `Err` for one that starts like it but is
    /// malformed (a syntax error), `None` for any other statement.
    pub fn parse(sql: &str) -> Option<Result<SessionStatement, QueryError>> {
        let syntax = |m: String| QueryError::new(ErrorCode::SyntaxError, m);
        let sql = sql.trim().trim_end_matches(';').trim();
        let words: Vec<&str> = sql.split_whitespace().collect();
        let kw = |i: usize, w: &str| words.get(i).is_some_and(|x| x.eq_ignore_ascii_case(w));
        if kw(0, "start") && kw(1, "transaction") {
            return Some(parse_start_transaction(&words[2..]));
        }
        if (kw(0, "commit") || kw(0, "rollback")) && (words.len() == 1 || (words.len() == 2 && kw(1, "work"))) {
            return Some(Ok(if kw(0, "commit") { SessionStatement::Commit } else { SessionStatement::Rollback }));
        }
        Self::parse_session(sql).map(|r| r.map_err(syntax))
    }

    /// `SET SESSION`, `RESET SESSION` and `USE`; a malformed one's message.
    fn parse_session(sql: &str) -> Option<Result<SessionStatement, String>> {
        let sql = sql.trim().trim_end_matches(';').trim();
        let words: Vec<&str> = sql.split_whitespace().collect();
        let kw = |i: usize, w: &str| words.get(i).is_some_and(|x| x.eq_ignore_ascii_case(w));
        if kw(0, "set") && kw(1, "session") {
            return Some(parse_set(sql));
        }
        if kw(0, "set") && kw(1, "time") && kw(2, "zone") {
            return Some(parse_time_zone(&words[3..].join(" ")));
        }
        if kw(0, "reset") && kw(1, "session") {
            return Some(match words.as_slice() {
                [_, _, name] => Ok(SessionStatement::ResetSession { name: unquote_identifier(name) }),
                _ => Err("expected RESET SESSION name".into()),
            });
        }
        if kw(0, "use") {
            return Some(match words.as_slice() {
                [_, target] => {
                    let parts: Vec<String> = target.split('.').map(unquote_identifier).collect();
                    match parts.as_slice() {
                        [schema] if !schema.is_empty() => {
                            Ok(SessionStatement::Use { catalog: None, schema: schema.clone() })
                        }
                        [catalog, schema] if !catalog.is_empty() && !schema.is_empty() => {
                            Ok(SessionStatement::Use { catalog: Some(catalog.clone()), schema: schema.clone() })
                        }
                        _ => Err(format!("expected USE [catalog.]schema, got USE {target}")),
                    }
                }
                _ => Err("expected USE [catalog.]schema".into()),
            });
        }
        None
    }

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

/// `START TRANSACTION [mode, ...]`: an access mode (`READ ONLY`, `READ WRITE`) or an
/// isolation level. Each statement commits on its own here, so the levels a
/// transaction of several statements would have to keep are refused.
fn parse_start_transaction(modes: &[&str]) -> Result<SessionStatement, QueryError> {
    let text = modes.join(" ").to_uppercase();
    for mode in text.split(',').map(str::trim).filter(|m| !m.is_empty()) {
        match mode {
            "READ ONLY" | "READ WRITE" | "ISOLATION LEVEL READ UNCOMMITTED" | "ISOLATION LEVEL READ COMMITTED" => {}
            "ISOLATION LEVEL REPEATABLE READ" | "ISOLATION LEVEL SERIALIZABLE" => {
                let m = format!("{} is not supported: each statement of a transaction commits on its own", &mode[16..]);
                return Err(QueryError::new(ErrorCode::UnsupportedIsolationLevel, m));
            }
            other => return Err(QueryError::new(ErrorCode::SyntaxError, format!("unknown transaction mode: {other}"))),
        }
    }
    Ok(SessionStatement::StartTransaction)
}

/// The session property `SET TIME ZONE` sets (Trino's name).
const TIME_ZONE_ID: &str = "time_zone_id";

/// What follows `SET TIME ZONE`: `LOCAL`, a string (a zone name or an offset), or
/// an interval of hours (and minutes), which is an offset (`INTERVAL '-08:00' HOUR TO
/// MINUTE`, `INTERVAL '5' HOUR`). Read by the SQL parser, not by splitting.
fn parse_time_zone(text: &str) -> Result<SessionStatement, String> {
    use datafusion::sql::sqlparser::ast::{DateTimeField, Expr, Value};
    let expected = || format!("expected SET TIME ZONE LOCAL, a string or an INTERVAL, got SET TIME ZONE {text}");
    if text.eq_ignore_ascii_case("local") {
        return Ok(SessionStatement::SetTimeZone { zone: None });
    }
    let dialect = super::dialect::TrinoDialect;
    let mut parser =
        datafusion::sql::sqlparser::parser::Parser::new(&dialect).try_with_sql(text).map_err(|e| e.to_string())?;
    let expr = parser.parse_expr().map_err(|e| e.to_string())?;
    if parser.peek_token().token != datafusion::sql::sqlparser::tokenizer::Token::EOF {
        return Err(expected());
    }
    let string = |e: &Expr| match e {
        Expr::Value(v) => match &v.value {
            Value::SingleQuotedString(s) => Some(s.clone()),
            _ => None,
        },
        _ => None,
    };
    let zone = match &expr {
        Expr::Interval(i) => {
            let value = string(i.value.as_ref()).ok_or_else(expected)?;
            let (sign, digits) = match value.trim().strip_prefix('-') {
                Some(rest) => ('-', rest.to_string()),
                None => ('+', value.trim().trim_start_matches('+').to_string()),
            };
            let (hours, minutes) = match (&i.leading_field, &i.last_field) {
                (Some(DateTimeField::Hour), None) => (digits, "0".to_string()),
                (Some(DateTimeField::Hour), Some(DateTimeField::Minute)) => {
                    let (h, m) = digits.split_once(':').ok_or_else(expected)?;
                    (h.to_string(), m.to_string())
                }
                _ => return Err(expected()),
            };
            let (h, m): (u32, u32) = (hours.parse().map_err(|_| expected())?, minutes.parse().map_err(|_| expected())?);
            format!("{sign}{h:02}:{m:02}")
        }
        other => string(other).ok_or_else(expected)?,
    };
    Ok(SessionStatement::SetTimeZone { zone: Some(zone) })
}

/// `SET SESSION name = value`, the value a literal: a quoted string, a number, or a
/// word (`true`).
fn parse_set(sql: &str) -> Result<SessionStatement, String> {
    let rest = sql.split_whitespace().skip(2).collect::<Vec<_>>().join(" ");
    let (name, value) = rest.split_once('=').ok_or("expected SET SESSION name = value")?;
    let name = unquote_identifier(name.trim());
    let value = value.trim();
    if name.is_empty() || value.is_empty() {
        return Err("expected SET SESSION name = value".into());
    }
    let value = match value.strip_prefix('\'').and_then(|v| v.strip_suffix('\'')) {
        Some(quoted) => quoted.replace("''", "'"),
        None if value.contains(char::is_whitespace) || value.contains('\'') => {
            return Err(format!("the value of SET SESSION must be a literal, got {value}"));
        }
        None => value.to_string(),
    };
    Ok(SessionStatement::SetSession { name, value })
}

fn unquote_identifier(s: &str) -> String {
    match s.strip_prefix('"').and_then(|v| v.strip_suffix('"')) {
        Some(quoted) => quoted.replace("\"\"", "\""),
        None => s.to_lowercase(),
    }
}

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
        SessionStatement::parse(sql).expect("a session statement").expect("well formed")
    }

    #[test]
    fn statements_parse_as_trino_users_write_them() {
        assert_eq!(
            parsed("SET SESSION execution_policy = 'all-at-once'"),
            SessionStatement::SetSession { name: "execution_policy".into(), value: "all-at-once".into() }
        );
        assert_eq!(
            parsed("set session hash_partition_count=8;"),
            SessionStatement::SetSession { name: "hash_partition_count".into(), value: "8".into() }
        );
        assert_eq!(
            parsed("SET SESSION x = 'it''s'"),
            SessionStatement::SetSession { name: "x".into(), value: "it's".into() }
        );
        assert_eq!(
            parsed("RESET SESSION Execution_Policy"),
            SessionStatement::ResetSession { name: "execution_policy".into() }
        );
        assert_eq!(parsed("USE sf1"), SessionStatement::Use { catalog: None, schema: "sf1".into() });
        assert_eq!(
            parsed("use TPCH.\"sf1\""),
            SessionStatement::Use { catalog: Some("tpch".into()), schema: "sf1".into() }
        );
        let zone = |z: &str| SessionStatement::SetTimeZone { zone: Some(z.into()) };
        assert_eq!(parsed("SET TIME ZONE 'America/Los_Angeles'"), zone("America/Los_Angeles"));
        assert_eq!(parsed("set time zone interval '-08:00' hour to minute;"), zone("-08:00"));
        assert_eq!(parsed("SET TIME ZONE INTERVAL '5' HOUR"), zone("+05:00"));
        assert_eq!(parsed("SET TIME ZONE LOCAL"), SessionStatement::SetTimeZone { zone: None });
        assert!(SessionStatement::parse("SET TIME ZONE 'UTC' 'x'").unwrap().is_err());
        assert!(SessionStatement::parse("SET TIME ZONE INTERVAL '1' DAY").unwrap().is_err());
        assert_eq!(parsed("START TRANSACTION"), SessionStatement::StartTransaction);
        assert_eq!(
            parsed("start transaction read only, isolation level read committed"),
            SessionStatement::StartTransaction
        );
        assert_eq!(parsed("COMMIT WORK;"), SessionStatement::Commit);
        assert_eq!(parsed("rollback"), SessionStatement::Rollback);
        let serializable = SessionStatement::parse("START TRANSACTION ISOLATION LEVEL SERIALIZABLE").unwrap();
        assert_eq!(serializable.unwrap_err().error_name, "UNSUPPORTED_ISOLATION_LEVEL");
        assert!(SessionStatement::parse("SELECT 1").is_none());
        assert!(SessionStatement::parse("COMMIT PLEASE").is_none());
        assert!(SessionStatement::parse("SET SESSION x").unwrap().is_err());
        assert!(SessionStatement::parse("USE a.b.c").unwrap().is_err());
        assert!(SessionStatement::parse("SET SESSION x = a b").unwrap().is_err());
    }

    #[test]
    fn changes_are_checked_and_encoded_for_the_client() {
        let ctx = crate::coordinator::planner::session_context(
            &SessionSpec::default(),
            &Default::default(),
            2,
            &crate::connector::Connectors::builtin(),
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
            &crate::connector::Connectors::builtin(),
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
