//! Trino's `EXPLAIN [ANALYZE [VERBOSE]] [(option [, ...])] statement`, the options
//! `TYPE LOGICAL | DISTRIBUTED | VALIDATE | IO` and `FORMAT TEXT | GRAPHVIZ | JSON`.
//! `EXPLAIN ANALYZE` runs the statement, so DataFusion plans it (`Planned`).

use datafusion::sql::sqlparser::keywords::Keyword;
use datafusion::sql::sqlparser::tokenizer::Token;

use super::{parser_error, syntax, Reader, Statement};
use crate::coordinator::planner::QueryError;

/// `EXPLAIN`'s options and the statement it explains.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Explain {
    pub kind: ExplainType,
    pub format: ExplainFormat,
    /// The explained statement's text.
    pub statement: String,
}

/// `TYPE`: what the plan shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExplainType {
    /// The plan as one tree, before it is cut into stages.
    Logical,
    /// The stages (fragments) and their exchanges: Trino's default.
    Distributed,
    /// Whether the statement plans, without showing the plan.
    Validate,
    /// The tables read and written, as JSON.
    Io,
}

/// `FORMAT`: how the plan is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExplainFormat {
    Text,
    Graphviz,
    Json,
}

/// What follows `EXPLAIN`.
pub(super) fn explain(r: &mut Reader) -> Result<Statement, QueryError> {
    if r.parser.parse_keyword(Keyword::ANALYZE) {
        return Ok(Statement::Planned(r.sql.trim().trim_end_matches(';').trim_end().to_string()));
    }
    let (mut kind, mut format) = (None, None);
    if r.parser.consume_token(&Token::LParen) {
        loop {
            if r.parser.parse_keyword(Keyword::TYPE) {
                let k = explain_type(r)?;
                if kind.replace(k).is_some() {
                    return Err(syntax("EXPLAIN: the TYPE option is given twice".into()));
                }
            } else if r.parser.parse_keyword(Keyword::FORMAT) {
                let f = explain_format(r)?;
                if format.replace(f).is_some() {
                    return Err(syntax("EXPLAIN: the FORMAT option is given twice".into()));
                }
            } else {
                let next = r.parser.peek_token().token;
                return Err(syntax(format!("EXPLAIN: unknown option {next}; expected TYPE or FORMAT")));
            }
            if r.parser.consume_token(&Token::RParen) {
                break;
            }
            r.parser.expect_token(&Token::Comma).map_err(parser_error)?;
        }
    }
    let statement = r.rest();
    if statement.is_empty() {
        return Err(syntax("EXPLAIN needs a statement to explain".into()));
    }
    let kind = kind.unwrap_or(ExplainType::Distributed);
    // Trino writes the IO plan as JSON whatever the format says.
    let format = if kind == ExplainType::Io { ExplainFormat::Json } else { format.unwrap_or(ExplainFormat::Text) };
    Ok(Statement::Explain(Explain { kind, format, statement }))
}

fn explain_type(r: &mut Reader) -> Result<ExplainType, QueryError> {
    use ExplainType::*;
    let types = [("logical", Logical), ("distributed", Distributed), ("validate", Validate), ("io", Io)];
    one_of(r, &types).ok_or_else(|| {
        let next = r.parser.peek_token().token;
        syntax(format!("EXPLAIN: unknown TYPE {next}; expected LOGICAL, DISTRIBUTED, VALIDATE or IO"))
    })
}

fn explain_format(r: &mut Reader) -> Result<ExplainFormat, QueryError> {
    use ExplainFormat::*;
    one_of(r, &[("text", Text), ("graphviz", Graphviz), ("json", Json)]).ok_or_else(|| {
        let next = r.parser.peek_token().token;
        syntax(format!("EXPLAIN: unknown FORMAT {next}; expected TEXT, GRAPHVIZ or JSON"))
    })
}

/// The value of the next word, when it is one of `words`.
fn one_of<T: Copy>(r: &mut Reader, words: &[(&str, T)]) -> Option<T> {
    words.iter().find(|(w, _)| r.word(w)).map(|(_, v)| *v)
}
