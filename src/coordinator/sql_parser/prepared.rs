//! Trino's prepared statements: `PREPARE name FROM statement`, `DEALLOCATE PREPARE
//! name`, `EXECUTE name [USING value, ...]` and `EXECUTE IMMEDIATE 'statement' [USING
//! value, ...]` (what Trino's clients send for every query with bound parameters).
//! The client keeps prepared statements and sends them back with each request
//! (`X-Trino-Prepared-Statement`); `EXECUTE` binds the values to the statement's `?`
//! parameters here, and the bound statement is parsed as any other.
//!
//! Binding works on tokens: each `?` placeholder token is replaced by its value's
//! text, which a quoted `'?'` or a comment never is.

use std::collections::BTreeMap;

use datafusion::sql::sqlparser::ast::{Expr, UnaryOperator};
use datafusion::sql::sqlparser::keywords::Keyword;
use datafusion::sql::sqlparser::tokenizer::{Token, TokenWithSpan};

use super::{parser_error, syntax, tokenize, Reader, Statement};
use crate::coordinator::planner::QueryError;
use crate::error_code::ErrorCode;
use crate::util::SqlText;

/// What follows `PREPARE`.
pub(super) fn prepare(r: &mut Reader) -> Result<Statement, QueryError> {
    let name = r.identifier()?;
    if !r.parser.parse_keyword(Keyword::FROM) {
        return Err(syntax("expected PREPARE name FROM statement".into()));
    }
    let statement = r.rest();
    if statement.is_empty() {
        return Err(syntax("PREPARE needs a statement".into()));
    }
    Ok(Statement::Prepare { name, statement })
}

/// What follows `DEALLOCATE`.
pub(super) fn deallocate(r: &mut Reader) -> Result<Statement, QueryError> {
    if !r.parser.parse_keyword(Keyword::PREPARE) {
        return Err(syntax("expected DEALLOCATE PREPARE name".into()));
    }
    let name = r.identifier()?;
    r.end()?;
    Ok(Statement::Deallocate { name })
}

/// What follows `EXECUTE`: the bound statement's text.
pub(super) fn execute(r: &mut Reader, prepared: &BTreeMap<String, String>) -> Result<String, QueryError> {
    let statement = if r.parser.parse_keyword(Keyword::IMMEDIATE) {
        r.parser
            .parse_literal_string()
            .map_err(|_| syntax("EXECUTE IMMEDIATE needs the statement as a string".into()))?
    } else {
        let name = r.identifier()?;
        named(prepared, &name)?.to_string()
    };
    let mut values = Vec::new();
    if r.parser.parse_keyword(Keyword::USING) {
        loop {
            values.push(value(r)?);
            if !r.parser.consume_token(&Token::Comma) {
                break;
            }
        }
    }
    r.end()?;
    bind(&statement, &values)
}

/// The prepared statement called `name`.
pub(super) fn named<'p>(prepared: &'p BTreeMap<String, String>, name: &str) -> Result<&'p str, QueryError> {
    // Clients send the name as the user wrote it; it is matched as Trino does.
    let found =
        prepared.get(name).or_else(|| prepared.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v));
    found
        .map(String::as_str)
        .ok_or_else(|| QueryError::new(ErrorCode::NotFound, format!("Prepared statement not found: {name}")))
}

/// One `USING` value: an expression, as its text, in parentheses unless it is an
/// atom (so `? * 2` bound to `1 + 1` stays `(1 + 1) * 2`, and `LIMIT ?` a literal).
fn value(r: &mut Reader) -> Result<String, QueryError> {
    let start = r.offset(r.parser.peek_token().span.start);
    let expr = r.parser.parse_expr().map_err(parser_error)?;
    let next = r.parser.peek_token();
    let end = if next.token == Token::EOF { r.sql.len() } else { r.offset(next.span.start) };
    let text = r.sql[start..end].trim().trim_end_matches(';').trim_end();
    let atom = match &expr {
        Expr::UnaryOp { op: UnaryOperator::Minus | UnaryOperator::Plus, expr } => {
            matches!(expr.as_ref(), Expr::Value(_))
        }
        Expr::Value(_)
        | Expr::TypedString { .. }
        | Expr::Array(_)
        | Expr::Function(_)
        | Expr::Identifier(_)
        | Expr::CompoundIdentifier(_)
        | Expr::Cast { .. }
        | Expr::Nested(_) => true,
        _ => false,
    };
    Ok(if atom { text.to_string() } else { format!("({text})") })
}

/// `statement` with its `?` parameters replaced by `values`, in order.
pub fn bind(statement: &str, values: &[String]) -> Result<String, QueryError> {
    substitute(statement, |i, count| values.get(i).cloned().ok_or_else(|| parameter_count(values.len(), count)))
        .and_then(|(text, count)| match count == values.len() {
            true => Ok(text),
            false => Err(parameter_count(values.len(), count)),
        })
}

/// `statement` with its `?` parameters numbered `$1`, `$2`, ... (so the planner
/// tells them apart, as `DESCRIBE INPUT` needs).
pub fn numbered_parameters(statement: &str) -> Result<String, QueryError> {
    substitute(statement, |i, _| Ok(format!("${}", i + 1))).map(|(text, _)| text)
}

/// `statement` with its `i`th `?` token (of `count`) replaced by `value(i, count)`;
/// and `count`.
fn substitute(
    statement: &str,
    mut value: impl FnMut(usize, usize) -> Result<String, QueryError>,
) -> Result<(String, usize), QueryError> {
    let tokens = tokenize(statement)?;
    let text = SqlText::new(statement);
    let is_parameter = |t: &&TokenWithSpan| matches!(&t.token, Token::Placeholder(p) if p == "?");
    let count = tokens.iter().filter(is_parameter).count();
    let mut out = String::with_capacity(statement.len());
    let mut copied = 0;
    for (i, t) in tokens.iter().filter(is_parameter).enumerate() {
        let (from, to) = (text.offset(t.span.start), text.offset(t.span.end));
        out.push_str(&statement[copied..from]);
        out.push_str(&value(i, count)?);
        copied = to;
    }
    out.push_str(&statement[copied..]);
    Ok((out, count))
}

fn parameter_count(given: usize, expected: usize) -> QueryError {
    let m = format!("Incorrect number of parameters: expected {expected} but found {given}");
    QueryError::new(ErrorCode::InvalidParameterUsage, m)
}
