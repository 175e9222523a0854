//! Trino's `FOR VERSION AS OF n` after a table name, which DataFusion's SQL parser
//! does not know. Before parsing, the clause is taken out of the statement and the
//! table's name becomes `"name@n"` (aliased back to `name`, so the query's column
//! references still resolve), which a Delta catalog's schemas read as version `n`
//! of table `name`. Only the tokens involved are touched; the rest of the text,
//! string literals included, stays byte for byte. Coordinator planning calls
//! `rewrite` and refuses versions of tables outside Delta Lake catalogs.

use datafusion::sql::sqlparser::dialect::Dialect;
use datafusion::sql::sqlparser::keywords::Keyword;
use datafusion::sql::sqlparser::tokenizer::{Location, Token, TokenWithSpan, Tokenizer};

/// A table read at a version: its name's parts as written (normalized as the
/// session does), and the version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VersionedTable {
    pub parts: Vec<String>,
    pub version: i64,
}

/// The statement with its `FOR VERSION AS OF` clauses taken out, and the tables
/// they named.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rewritten {
    pub sql: String,
    pub tables: Vec<VersionedTable>,
}

/// `name@n` back into `name` and `n`.
pub fn split_versioned_name(name: &str) -> Option<(&str, i64)> {
    let (base, version) = name.rsplit_once('@')?;
    (!base.is_empty() && !version.is_empty() && version.bytes().all(|b| b.is_ascii_digit()))
        .then(|| version.parse().ok().map(|v| (base, v)))
        .flatten()
}

/// The statement without its `FOR VERSION AS OF` clauses; None when it has none
/// (or does not tokenize: the parser then says why).
pub fn rewrite(sql: &str, dialect: &dyn Dialect, normalize: bool) -> Result<Option<Rewritten>, String> {
    if !sql.to_ascii_lowercase().contains("version") {
        return Ok(None);
    }
    let Ok(tokens) = Tokenizer::new(dialect, sql).tokenize_with_location() else { return Ok(None) };
    let significant: Vec<&TokenWithSpan> =
        tokens.iter().filter(|t| !matches!(t.token, Token::Whitespace(_) | Token::EOF)).collect();
    let is_word = |i: usize, word: &str| matches!(significant.get(i).map(|t| &t.token), Some(Token::Word(w)) if w.quote_style.is_none() && w.value.eq_ignore_ascii_case(word));
    let offsets = Offsets::new(sql);
    let mut edits: Vec<(usize, usize, String)> = Vec::new();
    let mut tables = Vec::new();
    for k in 0..significant.len() {
        if !(is_word(k, "FOR") && is_word(k + 1, "VERSION") && is_word(k + 2, "AS") && is_word(k + 3, "OF")) {
            continue;
        }
        let version = match significant.get(k + 4).map(|t| &t.token) {
            Some(Token::Number(n, _)) => {
                n.parse::<i64>().map_err(|_| format!("FOR VERSION AS OF takes a version number, not '{n}'"))?
            }
            _ => return Err("FOR VERSION AS OF takes a version number".into()),
        };
        // The table's name: `a`, `a.b` or `a.b.c`, right before the clause.
        let mut parts = Vec::new();
        let mut i = k;
        while i > 0 {
            let Token::Word(w) = &significant[i - 1].token else { break };
            parts.push(if w.quote_style.is_none() && normalize { w.value.to_lowercase() } else { w.value.clone() });
            if i >= 2 && significant[i - 2].token == Token::Period {
                i -= 2;
            } else {
                break;
            }
        }
        parts.reverse();
        if parts.is_empty() || is_word(k - 1, "FROM") || is_word(k - 1, "JOIN") {
            return Err("FOR VERSION AS OF must follow a table name".into());
        }
        let last = parts.last().expect("a part").clone();
        let name_token = significant[k - 1];
        edits.push((
            offsets.of(name_token.span.start),
            offsets.of(name_token.span.end),
            quote(&format!("{last}@{version}")),
        ));
        // Aliased back to its own name unless the query gave it one.
        let aliased = match significant.get(k + 5).map(|t| &t.token) {
            Some(Token::Word(w)) => {
                w.keyword == Keyword::AS || w.keyword == Keyword::NoKeyword || w.quote_style.is_some()
            }
            _ => false,
        };
        let alias = if aliased { String::new() } else { format!("AS {}", quote(&last)) };
        edits.push((offsets.of(significant[k].span.start), offsets.of(significant[k + 4].span.end), alias));
        tables.push(VersionedTable { parts, version });
    }
    if edits.is_empty() {
        return Ok(None);
    }
    let mut out = sql.to_string();
    edits.sort_by_key(|e| std::cmp::Reverse(e.0));
    for (start, end, text) in edits {
        out.replace_range(start..end, &text);
    }
    Ok(Some(Rewritten { sql: out, tables }))
}

fn quote(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

/// Byte offsets of the tokenizer's locations (lines and columns from 1, counted in
/// characters, a new line after each `\n`).
struct Offsets {
    /// Byte offset of each line's start.
    lines: Vec<usize>,
    sql: String,
}

impl Offsets {
    fn new(sql: &str) -> Self {
        let mut lines = vec![0];
        lines.extend(sql.char_indices().filter(|(_, c)| *c == '\n').map(|(i, _)| i + 1));
        Offsets { lines, sql: sql.to_string() }
    }

    fn of(&self, at: Location) -> usize {
        let start = self.lines.get((at.line as usize).saturating_sub(1)).copied().unwrap_or(self.sql.len());
        let column = (at.column as usize).saturating_sub(1);
        self.sql[start..].char_indices().nth(column).map(|(i, _)| start + i).unwrap_or(self.sql.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::sql::sqlparser::dialect::GenericDialect;

    fn run(sql: &str) -> Option<Rewritten> {
        rewrite(sql, &GenericDialect {}, true).unwrap()
    }

    #[test]
    fn the_clause_becomes_a_versioned_name_aliased_back() {
        let r = run("select count(*) from delta.s.Orders for version as of 3 where o_orderkey < 10").unwrap();
        assert_eq!(r.sql, "select count(*) from delta.s.\"orders@3\" AS \"orders\" where o_orderkey < 10");
        assert_eq!(
            r.tables,
            vec![VersionedTable { parts: vec!["delta".into(), "s".into(), "orders".into()], version: 3 }]
        );
        let r = run("SELECT o.x FROM \"T\" FOR VERSION AS OF 0 o JOIN t2 ON 1=1").unwrap();
        assert_eq!(r.sql, "SELECT o.x FROM \"T@0\"  o JOIN t2 ON 1=1");
        let r = run("select * from a for version as of 1 as x, b for version as of 2").unwrap();
        assert_eq!(r.sql, "select * from \"a@1\"  as x, \"b@2\" AS \"b\"");
        assert_eq!(r.tables.len(), 2);
    }

    #[test]
    fn everything_else_stays_as_written() {
        assert_eq!(run("select 'for version as of 1' from t"), None, "a string literal is no clause");
        let r = run("select 'it''s', \"é\" from\n  t for version\n as of 12 -- why\n").unwrap();
        assert_eq!(r.sql, "select 'it''s', \"é\" from\n  \"t@12\" AS \"t\" -- why\n");
        assert_eq!(run("select version from t"), None);
    }

    #[test]
    fn malformed_clauses_are_errors() {
        let err = |sql: &str| rewrite(sql, &GenericDialect {}, true).unwrap_err();
        assert!(err("select * from t for version as of x").contains("version number"));
        assert!(err("select * from t for version as of 1.5").contains("version number"));
        assert!(err("select * from for version as of 1").contains("table name"));
    }

    #[test]
    fn versioned_names_split_back() {
        assert_eq!(split_versioned_name("orders@3"), Some(("orders", 3)));
        assert_eq!(split_versioned_name("a@b@10"), Some(("a@b", 10)));
        assert_eq!(split_versioned_name("orders"), None);
        assert_eq!(split_versioned_name("orders@"), None);
        assert_eq!(split_versioned_name("@3"), None);
        assert_eq!(split_versioned_name("orders@-1"), None);
    }
}
