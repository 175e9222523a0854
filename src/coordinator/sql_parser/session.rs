//! Trino's session statements: `SET SESSION name = value`, `RESET SESSION name`,
//! `USE [catalog.]schema`, `SET TIME ZONE LOCAL | zone`, `START TRANSACTION [mode,
//! ...]`, `COMMIT [WORK]`, `ROLLBACK [WORK]`. What they do is `session_statement`'s.

use datafusion::sql::sqlparser::ast::{DateTimeField, Expr, Value};
use datafusion::sql::sqlparser::keywords::Keyword;

use super::{parser_error, syntax, Reader};
use crate::coordinator::planner::QueryError;
use crate::coordinator::session_statement::SessionStatement;
use crate::error_code::ErrorCode;

/// A session statement, or `None` (nothing consumed) for any other statement.
pub(super) fn session(r: &mut Reader) -> Result<Option<SessionStatement>, QueryError> {
    let statement = if r.parser.parse_keywords(&[Keyword::SET, Keyword::SESSION]) {
        set_session(r)?
    } else if r.parser.parse_keywords(&[Keyword::SET, Keyword::TIME, Keyword::ZONE]) {
        time_zone(r)?
    } else if r.parser.parse_keywords(&[Keyword::RESET, Keyword::SESSION]) {
        SessionStatement::ResetSession { name: r.name()?.join(".") }
    } else if r.parser.parse_keyword(Keyword::USE) {
        let mut parts = r.name()?;
        match parts.len() {
            1 => SessionStatement::Use { catalog: None, schema: parts.remove(0) },
            2 => {
                let schema = parts.remove(1);
                SessionStatement::Use { catalog: Some(parts.remove(0)), schema }
            }
            _ => return Err(syntax(format!("expected USE [catalog.]schema, got USE {}", parts.join(".")))),
        }
    } else if r.parser.parse_keywords(&[Keyword::START, Keyword::TRANSACTION]) {
        start_transaction(r)?
    } else if r.parser.parse_keyword(Keyword::COMMIT) {
        let _ = r.parser.parse_keyword(Keyword::WORK);
        SessionStatement::Commit
    } else if r.parser.parse_keyword(Keyword::ROLLBACK) {
        let _ = r.parser.parse_keyword(Keyword::WORK);
        SessionStatement::Rollback
    } else {
        return Ok(None);
    };
    r.end()?;
    Ok(Some(statement))
}

/// `name = value`, the value a literal: a string, a number, or a word (`true`).
fn set_session(r: &mut Reader) -> Result<SessionStatement, QueryError> {
    let name = r.name()?.join(".");
    r.parser
        .expect_token(&datafusion::sql::sqlparser::tokenizer::Token::Eq)
        .map_err(|_| syntax("expected SET SESSION name = value".into()))?;
    let expr = r.parser.parse_expr().map_err(parser_error)?;
    let value = match &expr {
        Expr::Value(v) => match &v.value {
            Value::SingleQuotedString(s) => s.clone(),
            Value::Number(n, _) => n.to_string(),
            Value::Boolean(b) => b.to_string(),
            _ => return Err(not_literal(&expr)),
        },
        Expr::UnaryOp { op: datafusion::sql::sqlparser::ast::UnaryOperator::Minus, expr: inner } => {
            match inner.as_ref() {
                Expr::Value(v) if matches!(v.value, Value::Number(..)) => format!("-{}", v.value),
                _ => return Err(not_literal(&expr)),
            }
        }
        Expr::Identifier(i) => i.value.clone(),
        _ => return Err(not_literal(&expr)),
    };
    Ok(SessionStatement::SetSession { name, value })
}

fn not_literal(expr: &Expr) -> QueryError {
    syntax(format!("the value of SET SESSION must be a literal, got {expr}"))
}

/// What follows `SET TIME ZONE`: `LOCAL`, a string (a zone name or an offset), or an
/// interval of hours (and minutes), which is an offset (`INTERVAL '-08:00' HOUR TO
/// MINUTE`, `INTERVAL '5' HOUR`).
fn time_zone(r: &mut Reader) -> Result<SessionStatement, QueryError> {
    if r.parser.parse_keyword(Keyword::LOCAL) {
        return Ok(SessionStatement::SetTimeZone { zone: None });
    }
    let expr = r.parser.parse_expr().map_err(parser_error)?;
    let expected =
        || syntax(format!("expected SET TIME ZONE LOCAL, a string or an INTERVAL, got SET TIME ZONE {expr}"));
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

/// `[mode, ...]` after `START TRANSACTION`: an access mode (`READ ONLY`, `READ
/// WRITE`) or an isolation level. Each statement commits on its own here, so the
/// levels a transaction of several statements would have to keep are refused.
fn start_transaction(r: &mut Reader) -> Result<SessionStatement, QueryError> {
    let p = &mut r.parser;
    let mut first = true;
    while first || p.consume_token(&datafusion::sql::sqlparser::tokenizer::Token::Comma) {
        let refused = if p.parse_keywords(&[Keyword::READ, Keyword::ONLY])
            || p.parse_keywords(&[Keyword::READ, Keyword::WRITE])
            || p.parse_keywords(&[Keyword::ISOLATION, Keyword::LEVEL, Keyword::READ, Keyword::UNCOMMITTED])
            || p.parse_keywords(&[Keyword::ISOLATION, Keyword::LEVEL, Keyword::READ, Keyword::COMMITTED])
        {
            None
        } else if p.parse_keywords(&[Keyword::ISOLATION, Keyword::LEVEL, Keyword::REPEATABLE, Keyword::READ]) {
            Some("REPEATABLE READ")
        } else if p.parse_keywords(&[Keyword::ISOLATION, Keyword::LEVEL, Keyword::SERIALIZABLE]) {
            Some("SERIALIZABLE")
        } else if first {
            break;
        } else {
            let next = p.peek_token().token;
            return Err(syntax(format!("unknown transaction mode: {next}")));
        };
        if let Some(level) = refused {
            let m = format!("{level} is not supported: each statement of a transaction commits on its own");
            return Err(QueryError::new(ErrorCode::UnsupportedIsolationLevel, m));
        }
        first = false;
    }
    Ok(SessionStatement::StartTransaction)
}
