//! Trino's `SHOW` statements and `DESCRIBE`, as its grammar has them:
//! `SHOW CATALOGS | SCHEMAS [FROM|IN c] | TABLES [FROM|IN [c.]s] | COLUMNS FROM|IN t |
//! FUNCTIONS | SESSION`, each with `[LIKE pattern [ESCAPE c]]`; `SHOW CREATE SCHEMA |
//! TABLE | VIEW | MATERIALIZED VIEW name`; `SHOW STATS FOR t | (query)`; `DESCRIBE t`
//! and `DESCRIBE INPUT | OUTPUT name`.

use std::collections::BTreeMap;

use datafusion::sql::sqlparser::keywords::Keyword;
use datafusion::sql::sqlparser::tokenizer::Token;

use super::{parser_error, syntax, table_reference, Reader, Statement};
use crate::coordinator::metadata::{CreateKind, MetadataStatement};
use crate::coordinator::planner::QueryError;
use crate::coordinator::show_stats::StatsTarget;
use crate::error_code::ErrorCode;

/// `LIKE 'pattern' [ESCAPE 'c']` of a `SHOW` statement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Like {
    pub pattern: String,
    pub escape: Option<char>,
}

impl Like {
    /// Whether `name` matches, as SQL's `LIKE` does (`%` any text, `_` one character).
    pub fn matches(&self, name: &str) -> Result<bool, QueryError> {
        let mut re = String::from("^");
        let mut chars = self.pattern.chars();
        while let Some(c) = chars.next() {
            match c {
                c if Some(c) == self.escape => match chars.next() {
                    Some(e @ ('%' | '_')) => re.push_str(&regex::escape(&e.to_string())),
                    Some(e) if Some(e) == self.escape => re.push_str(&regex::escape(&e.to_string())),
                    _ => {
                        return Err(QueryError::new(
                            ErrorCode::InvalidFunctionArgument,
                            "Escape character must be followed by '%', '_' or the escape character",
                        ))
                    }
                },
                '%' => re.push_str("(?s:.*)"),
                '_' => re.push_str("(?s:.)"),
                c => re.push_str(&regex::escape(&c.to_string())),
            }
        }
        re.push('$');
        let re = regex::Regex::new(&re).map_err(|e| QueryError::new(ErrorCode::GenericInternalError, e.to_string()))?;
        Ok(re.is_match(name))
    }
}

/// What follows `SHOW`.
pub(super) fn show(r: &mut Reader) -> Result<Statement, QueryError> {
    let statement = if r.parser.parse_keyword(Keyword::CATALOGS) {
        MetadataStatement::ShowCatalogs { like: like(r)? }
    } else if r.parser.parse_keyword(Keyword::SCHEMAS) {
        let catalog = match from(r) {
            true => Some(r.identifier()?),
            false => None,
        };
        MetadataStatement::ShowSchemas { catalog, like: like(r)? }
    } else if r.parser.parse_keyword(Keyword::TABLES) {
        let (catalog, schema) = match from(r) {
            false => (None, None),
            true => {
                let mut parts = r.name()?;
                match parts.len() {
                    1 => (None, parts.pop()),
                    2 => {
                        let schema = parts.pop();
                        (parts.pop(), schema)
                    }
                    _ => return Err(syntax("SHOW TABLES FROM takes a schema: [catalog.]schema".into())),
                }
            }
        };
        MetadataStatement::ShowTables { catalog, schema, like: like(r)? }
    } else if r.parser.parse_keyword(Keyword::COLUMNS) {
        if !from(r) {
            return Err(syntax("expected SHOW COLUMNS FROM table".into()));
        }
        let table = table_reference(r.name()?)?;
        MetadataStatement::ShowColumns { table, like: like(r)? }
    } else if r.parser.parse_keyword(Keyword::FUNCTIONS) {
        MetadataStatement::ShowFunctions { like: like(r)? }
    } else if r.parser.parse_keyword(Keyword::SESSION) {
        MetadataStatement::ShowSession { like: like(r)? }
    } else if r.parser.parse_keyword(Keyword::CREATE) {
        show_create(r)?
    } else if r.word("stats") {
        let target = show_stats(r)?;
        r.end()?;
        return Ok(Statement::ShowStats(target));
    } else {
        let next = r.parser.peek_token().token;
        let m = format!(
            "SHOW {next} is not a statement: SHOW CATALOGS, SCHEMAS, TABLES, COLUMNS, FUNCTIONS, SESSION, CREATE or STATS"
        );
        return Err(syntax(m));
    };
    r.end()?;
    Ok(Statement::Metadata(statement))
}

fn show_create(r: &mut Reader) -> Result<MetadataStatement, QueryError> {
    let kind = if r.parser.parse_keyword(Keyword::SCHEMA) {
        CreateKind::Schema
    } else if r.parser.parse_keyword(Keyword::TABLE) {
        CreateKind::Table
    } else if r.parser.parse_keyword(Keyword::VIEW) {
        CreateKind::View
    } else if r.parser.parse_keywords(&[Keyword::MATERIALIZED, Keyword::VIEW]) {
        return Err(QueryError::new(ErrorCode::NotSupported, "materialized views are not supported"));
    } else {
        return Err(syntax("expected SHOW CREATE SCHEMA, TABLE or VIEW".into()));
    };
    let name = r.name()?;
    if kind == CreateKind::Schema && name.len() > 2 {
        return Err(syntax("a schema's name has at most two parts (catalog.schema)".into()));
    }
    Ok(MetadataStatement::ShowCreate { kind, name })
}

/// `SHOW STATS FOR table` or `SHOW STATS FOR (query)`.
fn show_stats(r: &mut Reader) -> Result<StatsTarget, QueryError> {
    if !r.parser.parse_keyword(Keyword::FOR) {
        return Err(syntax("expected SHOW STATS FOR table or SHOW STATS FOR (query)".into()));
    }
    if r.parser.peek_token().token == Token::LParen {
        let start = r.offset(r.parser.peek_token().span.start);
        // The query is checked by the parser here and planned by DataFusion later.
        r.parser.expect_token(&Token::LParen).map_err(parser_error)?;
        r.parser.parse_query().map_err(parser_error)?;
        let close = r.parser.expect_token(&Token::RParen).map_err(parser_error)?;
        let end = r.offset(close.span.start);
        let query = r.sql[start + 1..end].trim().to_string();
        return Ok(StatsTarget::Query(query));
    }
    Ok(StatsTarget::Table(table_reference(r.name()?)?))
}

/// What follows `DESCRIBE` (or `DESC`): a table, or `INPUT`/`OUTPUT` of a prepared
/// statement.
pub(super) fn describe(r: &mut Reader, prepared: &BTreeMap<String, String>) -> Result<Statement, QueryError> {
    let output = match r.parser.peek_tokens::<2>() {
        [Token::Word(w), Token::Word(_)] if w.keyword == Keyword::INPUT || w.keyword == Keyword::OUTPUT => {
            r.parser.next_token();
            Some(w.keyword == Keyword::OUTPUT)
        }
        _ => None,
    };
    if let Some(output) = output {
        let name = r.identifier()?;
        r.end()?;
        let statement = super::prepared::named(prepared, &name)?.to_string();
        return Ok(Statement::DescribePrepared { output, statement });
    }
    let table = table_reference(r.name()?)?;
    r.end()?;
    Ok(Statement::Metadata(MetadataStatement::ShowColumns { table, like: None }))
}

/// `FROM` or `IN`.
fn from(r: &mut Reader) -> bool {
    r.parser.parse_keyword(Keyword::FROM) || r.parser.parse_keyword(Keyword::IN)
}

/// `[LIKE 'pattern' [ESCAPE 'c']]`.
fn like(r: &mut Reader) -> Result<Option<Like>, QueryError> {
    if !r.parser.parse_keyword(Keyword::LIKE) {
        return Ok(None);
    }
    let pattern = r.parser.parse_literal_string().map_err(parser_error)?;
    let escape = match r.parser.parse_keyword(Keyword::ESCAPE) {
        false => None,
        true => {
            let text = r.parser.parse_literal_string().map_err(parser_error)?;
            let mut chars = text.chars();
            match (chars.next(), chars.next()) {
                (Some(c), None) => Some(c),
                _ => {
                    let m = format!("Escape string must be a single character, got '{text}'");
                    return Err(QueryError::new(ErrorCode::InvalidFunctionArgument, m));
                }
            }
        }
    };
    Ok(Some(Like { pattern, escape }))
}
