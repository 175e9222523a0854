//! Trino's `ALTER VIEW [IF EXISTS] v RENAME TO w`, which sqlparser does not read (it
//! reads only `ALTER VIEW v AS query`): the dialect's `parse_statement` hook parses it
//! as the `ALTER TABLE ... RENAME TO` it is to a metastore, whose entries are tables
//! and views alike (`relations::parse` runs it). Any other statement is left to
//! sqlparser, with no token consumed.

use datafusion::sql::sqlparser::ast::{AlterTableOperation, Statement};
use datafusion::sql::sqlparser::keywords::Keyword;
use datafusion::sql::sqlparser::parser::{Parser, ParserError};
use datafusion::sql::sqlparser::tokenizer::Token;

/// The rename, when the next tokens are `ALTER VIEW [IF EXISTS] name RENAME`.
pub(super) fn parse(parser: &mut Parser) -> Option<Result<Statement, ParserError>> {
    if !is_view_rename(parser) {
        return None;
    }
    Some(parse_rename(parser))
}

/// Looks ahead without consuming: `ALTER VIEW`, then the words and periods of
/// `[IF EXISTS] name`, then `RENAME`.
fn is_view_rename(parser: &Parser) -> bool {
    let keyword =
        |n: usize, k: Keyword| matches!(&parser.peek_nth_token_ref(n).token, Token::Word(w) if w.keyword == k);
    if !(keyword(0, Keyword::ALTER) && keyword(1, Keyword::VIEW)) {
        return false;
    }
    let mut n = 2;
    loop {
        match &parser.peek_nth_token_ref(n).token {
            Token::Word(w) if w.keyword == Keyword::RENAME && w.quote_style.is_none() => return true,
            Token::Word(_) | Token::Period => n += 1,
            _ => return false,
        }
    }
}

fn parse_rename(parser: &mut Parser) -> Result<Statement, ParserError> {
    parser.expect_keywords(&[Keyword::ALTER, Keyword::VIEW])?;
    let statement = parser.parse_alter_table(false)?;
    match &statement {
        Statement::AlterTable(alter)
            if matches!(alter.operations.as_slice(), [AlterTableOperation::RenameTable { .. }]) =>
        {
            Ok(statement)
        }
        _ => Err(ParserError::ParserError("ALTER VIEW ... RENAME takes one RENAME TO new_name".into())),
    }
}
