//! The front door for statements: Trino's grammar for every statement the coordinator
//! answers itself, read once by sqlparser's parser (over `dialect::TrinoDialect`'s
//! tokens) into one [`Statement`], which the query execution dispatches with one
//! `match` (`execution::execute`), as Trino maps a statement's class to its task.
//!
//! What DataFusion plans (queries, writes, DDL, `EXPLAIN ANALYZE`) is
//! [`Statement::Planned`]: its text, parsed by `dialect::parse_in` when it is planned.
//! `EXECUTE` and `EXECUTE IMMEDIATE` are bound here (`prepared`), so a prepared
//! statement of any kind is dispatched as its own kind. Nothing here looks at the
//! statement's text except through the tokenizer and the parser.
//!
//! Called by the query execution and the Flight SQL service; owns nothing.

mod explain;
mod prepared;
mod session;
mod show;
#[cfg(test)]
mod tests;

use std::collections::BTreeMap;

use datafusion::common::TableReference;
use datafusion::sql::sqlparser::ast::{Ident, ObjectName};
use datafusion::sql::sqlparser::keywords::Keyword;
use datafusion::sql::sqlparser::parser::{Parser, ParserError};
use datafusion::sql::sqlparser::tokenizer::{Location, Token, TokenWithSpan};

use crate::util::SqlText;

pub use explain::{Explain, ExplainFormat, ExplainType};
pub use prepared::{bind, numbered_parameters};
pub use show::Like;

use super::dialect::TrinoDialect;
use super::metadata::MetadataStatement;
use super::planner::QueryError;
use super::session_statement::SessionStatement;
use super::show_stats::StatsTarget;
use crate::error_code::ErrorCode;

/// One statement, as the coordinator dispatches it.
#[derive(Debug, Clone, PartialEq)]
pub enum Statement {
    /// Planned by DataFusion and run: a query, a write, DDL, `EXPLAIN ANALYZE`. The
    /// text as sent (or as `EXECUTE` bound it).
    Planned(String),
    /// `EXPLAIN [(TYPE ..., FORMAT ...)] statement`.
    Explain(Explain),
    /// `SHOW ...` and `DESCRIBE table`, answered from the catalogs.
    Metadata(MetadataStatement),
    /// `SHOW STATS FOR t | (query)`: planned (as `SELECT * FROM t` or the query),
    /// under planning's limits, and answered from the plan's statistics.
    ShowStats(StatsTarget),
    /// `SET SESSION`, `USE`, transactions...: answered with headers.
    Session(SessionStatement),
    /// `PREPARE name FROM statement`: the client keeps it (`X-Trino-Added-Prepare`).
    Prepare { name: String, statement: String },
    /// `DEALLOCATE PREPARE name` (`X-Trino-Deallocated-Prepare`).
    Deallocate { name: String },
    /// `DESCRIBE INPUT name` (`output` false) or `DESCRIBE OUTPUT name`: the
    /// parameters or the columns of a prepared statement, whose text is `statement`.
    DescribePrepared { output: bool, statement: String },
}

impl Statement {
    /// Whether the statement changes the client's session (its answer carries headers).
    pub fn changes_session(&self) -> bool {
        matches!(self, Statement::Session(_) | Statement::Prepare { .. } | Statement::Deallocate { .. })
    }
}

/// Reads one statement. `prepared` are the session's prepared statements
/// (`X-Trino-Prepared-Statement`), which `EXECUTE` and `DESCRIBE INPUT|OUTPUT` name.
pub fn parse(sql: &str, prepared: &BTreeMap<String, String>) -> Result<Statement, QueryError> {
    parse_nested(sql, prepared, 0)
}

/// `EXECUTE` of a statement that is itself an `EXECUTE`: bounded.
const MAX_NESTED_EXECUTE: usize = 8;

fn parse_nested(sql: &str, prepared: &BTreeMap<String, String>, depth: usize) -> Result<Statement, QueryError> {
    if depth > MAX_NESTED_EXECUTE {
        return Err(QueryError::new(ErrorCode::SyntaxError, "EXECUTE nests too deeply"));
    }
    let mut r = Reader::new(sql)?;
    let statement = if r.parser.parse_keyword(Keyword::SHOW) {
        show::show(&mut r)?
    } else if r.parser.parse_keyword(Keyword::DESCRIBE) || r.parser.parse_keyword(Keyword::DESC) {
        show::describe(&mut r, prepared)?
    } else if r.parser.parse_keyword(Keyword::EXPLAIN) {
        explain::explain(&mut r)?
    } else if r.parser.parse_keyword(Keyword::ANALYZE) {
        return Err(analyze(&mut r));
    } else if r.parser.parse_keyword(Keyword::PREPARE) {
        prepared::prepare(&mut r)?
    } else if r.parser.parse_keyword(Keyword::DEALLOCATE) {
        prepared::deallocate(&mut r)?
    } else if r.parser.parse_keyword(Keyword::EXECUTE) {
        let bound = prepared::execute(&mut r, prepared)?;
        return parse_nested(&bound, prepared, depth + 1);
    } else if let Some(s) = session::session(&mut r)? {
        Statement::Session(s)
    } else {
        Statement::Planned(sql.trim().trim_end_matches(';').trim_end().to_string())
    };
    Ok(statement)
}

/// `ANALYZE table [WITH (...)]`: no catalog here keeps statistics of its own. The
/// planner reads them where they are, in the files' footers, each time; `SHOW STATS`
/// shows them.
fn analyze(r: &mut Reader) -> QueryError {
    let name = match r.name() {
        Ok(parts) => parts.join("."),
        Err(e) => return e,
    };
    let m = format!(
        "ANALYZE {name}: no catalog here keeps statistics to collect; the planner reads them from the files \
         themselves when it plans (SHOW STATS FOR {name} shows them)"
    );
    QueryError::new(ErrorCode::NotSupported, m)
}

/// The statement's tokens and a parser over them; spans map back to the text.
pub(super) struct Reader<'a> {
    sql: &'a str,
    parser: Parser<'static>,
    text: SqlText<'a>,
}

impl<'a> Reader<'a> {
    fn new(sql: &'a str) -> Result<Self, QueryError> {
        let tokens = tokenize(sql)?;
        let parser = Parser::new(&TrinoDialect).with_tokens_with_locations(tokens);
        Ok(Reader { sql, parser, text: SqlText::new(sql) })
    }

    /// Byte offset of `at` in the text.
    fn offset(&self, at: Location) -> usize {
        self.text.offset(at)
    }

    /// The text from the next token to the end, without a final `;`.
    fn rest(&self) -> String {
        let next = self.parser.peek_token();
        let from = if next.token == Token::EOF { self.sql.len() } else { self.offset(next.span.start) };
        self.sql[from..].trim().trim_end_matches(';').trim_end().to_string()
    }

    /// Consumes the next token when it is the unquoted word `w` (a word sqlparser does
    /// not list as a keyword, or one whatever its keyword).
    fn word(&mut self, w: &str) -> bool {
        match &self.parser.peek_token().token {
            Token::Word(x) if x.quote_style.is_none() && x.value.eq_ignore_ascii_case(w) => {
                self.parser.next_token();
                true
            }
            _ => false,
        }
    }

    /// The statement ends here (a `;` allowed).
    fn end(&mut self) -> Result<(), QueryError> {
        let _ = self.parser.consume_token(&Token::SemiColon);
        let next = self.parser.peek_token();
        if next.token == Token::EOF {
            return Ok(());
        }
        Err(syntax(format!(
            "unexpected '{}' at line {}, column {}",
            next.token, next.span.start.line, next.span.start.column
        )))
    }

    /// A name of one or more parts (`a`, `"A b"."c"`), each as Trino reads it:
    /// unquoted parts in lower case, quoted ones as written.
    fn name(&mut self) -> Result<Vec<String>, QueryError> {
        let name: ObjectName = self.parser.parse_object_name(false).map_err(parser_error)?;
        let mut parts = Vec::new();
        for part in &name.0 {
            let ident = part.as_ident().ok_or_else(|| syntax(format!("'{name}' is not a name")))?;
            parts.push(identifier(ident));
        }
        Ok(parts)
    }

    /// A one-part name.
    fn identifier(&mut self) -> Result<String, QueryError> {
        self.parser.parse_identifier().map(|i| identifier(&i)).map_err(parser_error)
    }
}

/// `ident` as Trino reads it: unquoted in lower case, quoted as written.
fn identifier(ident: &Ident) -> String {
    match ident.quote_style {
        Some(_) => ident.value.clone(),
        None => ident.value.to_lowercase(),
    }
}

/// A table's name of one to three parts.
pub(super) fn table_reference(parts: Vec<String>) -> Result<TableReference, QueryError> {
    let mut parts = parts.into_iter();
    Ok(match (parts.next(), parts.next(), parts.next(), parts.next()) {
        (Some(t), None, None, None) => TableReference::bare(t),
        (Some(s), Some(t), None, None) => TableReference::partial(s, t),
        (Some(c), Some(s), Some(t), None) => TableReference::full(c, s, t),
        _ => return Err(syntax("a table's name has at most three parts (catalog.schema.table)".into())),
    })
}

fn tokenize(sql: &str) -> Result<Vec<TokenWithSpan>, QueryError> {
    super::dialect::tokens(sql).map_err(|e| syntax(e.to_string()))
}

fn syntax(message: String) -> QueryError {
    QueryError::new(ErrorCode::SyntaxError, message)
}

fn parser_error(e: ParserError) -> QueryError {
    let message = match e {
        ParserError::ParserError(m) | ParserError::TokenizerError(m) => m,
        ParserError::RecursionLimitExceeded => "the statement nests too deeply".into(),
    };
    syntax(message)
}
