//! Trino's `FOR VERSION AS OF n` and `FOR TIMESTAMP AS OF TIMESTAMP '...'` after a
//! table name, which DataFusion's SQL parser does not know. Before parsing, the
//! clause is taken out of the statement and the table's name becomes `"name@n"` or
//! `"name@ts<ms>"` (milliseconds since the epoch; aliased back to `name`, so the
//! query's column references still resolve), which Delta and Iceberg catalogs'
//! schemas read as that version (snapshot) of table `name`, or the one current then. Only the tokens involved are touched; the rest of the text,
//! string literals included, stays byte for byte. Coordinator planning calls
//! `rewrite` and refuses versions of tables outside Delta Lake catalogs.

use datafusion::sql::sqlparser::dialect::Dialect;
use datafusion::sql::sqlparser::keywords::Keyword;
use datafusion::sql::sqlparser::tokenizer::{Token, TokenWithSpan, Tokenizer};

/// Which state of a table a query reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TravelPoint {
    /// A version (Delta) or snapshot id (Iceberg).
    Version(i64),
    /// The version current at this many milliseconds since the epoch.
    Timestamp(i64),
}

impl TravelPoint {
    /// The clause that asks for it, for messages.
    pub fn clause(&self) -> &'static str {
        match self {
            TravelPoint::Version(_) => "FOR VERSION AS OF",
            TravelPoint::Timestamp(_) => "FOR TIMESTAMP AS OF",
        }
    }

    fn suffix(&self) -> String {
        match self {
            TravelPoint::Version(v) => v.to_string(),
            TravelPoint::Timestamp(ms) => format!("ts{ms}"),
        }
    }
}

/// A table read at a version or time: its name's parts as written (normalized as
/// the session does), and which state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VersionedTable {
    pub parts: Vec<String>,
    pub point: TravelPoint,
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
    match split_travel_name(name)? {
        (base, TravelPoint::Version(v)) => Some((base, v)),
        _ => None,
    }
}

/// `name@n` or `name@ts<ms>` back into `name` and the point.
pub fn split_travel_name(name: &str) -> Option<(&str, TravelPoint)> {
    let (base, suffix) = name.rsplit_once('@')?;
    let (digits, make): (&str, fn(i64) -> TravelPoint) = match suffix.strip_prefix("ts") {
        Some(ms) => (ms.strip_prefix('-').unwrap_or(ms), TravelPoint::Timestamp),
        None => (suffix, TravelPoint::Version),
    };
    if base.is_empty() || digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let number = suffix.trim_start_matches("ts").parse().ok()?;
    Some((base, make(number)))
}

/// The instant `TIMESTAMP '<text>'` names, in milliseconds since the epoch: its own
/// zone when it has one (`UTC`, `+01:00`, `Europe/Vienna`), else `session_zone`.
fn timestamp_millis(text: &str, session_zone: &str) -> Result<i64, String> {
    use chrono::{NaiveDate, NaiveDateTime, TimeZone};
    use std::str::FromStr;
    let bad = || format!("FOR TIMESTAMP AS OF: '{text}' is not a timestamp (YYYY-MM-DD HH:MM:SS[.fff] [zone])");
    let words: Vec<&str> = text.split_whitespace().collect();
    let (local, zone) = match words.as_slice() {
        [date] => (NaiveDate::parse_from_str(date, "%Y-%m-%d").map_err(|_| bad())?.into(), None),
        [date, time, rest @ ..] if rest.len() <= 1 => {
            let at = format!("{date} {time}");
            let local = NaiveDateTime::parse_from_str(&at, "%Y-%m-%d %H:%M:%S%.f")
                .or_else(|_| NaiveDateTime::parse_from_str(&at, "%Y-%m-%d %H:%M"))
                .map_err(|_| bad())?;
            (local, rest.first().copied())
        }
        _ => return Err(bad()),
    };
    let zone = zone.unwrap_or(session_zone);
    let zone = if zone.eq_ignore_ascii_case("utc") || zone == "Z" { "+00:00" } else { zone };
    let tz = datafusion::arrow::array::timezone::Tz::from_str(zone)
        .map_err(|_| format!("FOR TIMESTAMP AS OF: '{zone}' is not a time zone"))?;
    let at = tz.from_local_datetime(&local).earliest().ok_or_else(bad)?;
    Ok(at.timestamp_millis())
}

/// The statement without its `FOR VERSION AS OF` and `FOR TIMESTAMP AS OF`
/// clauses; None when it has none (or does not tokenize: the parser then says why).
/// A timestamp without a zone is in `session_zone`.
pub fn rewrite(
    sql: &str,
    dialect: &dyn Dialect,
    normalize: bool,
    session_zone: &str,
) -> Result<Option<Rewritten>, String> {
    let lower = sql.to_ascii_lowercase();
    if !lower.contains("version") && !lower.contains("timestamp") {
        return Ok(None);
    }
    let Ok(tokens) = Tokenizer::new(dialect, sql).tokenize_with_location() else { return Ok(None) };
    let significant: Vec<&TokenWithSpan> =
        tokens.iter().filter(|t| !matches!(t.token, Token::Whitespace(_) | Token::EOF)).collect();
    let is_word = |i: usize, word: &str| matches!(significant.get(i).map(|t| &t.token), Some(Token::Word(w)) if w.quote_style.is_none() && w.value.eq_ignore_ascii_case(word));
    let offsets = crate::util::SqlText::new(sql);
    let mut edits: Vec<(usize, usize, String)> = Vec::new();
    let mut tables = Vec::new();
    for k in 0..significant.len() {
        let by_time = is_word(k + 1, "TIMESTAMP");
        if !(is_word(k, "FOR")
            && (is_word(k + 1, "VERSION") || by_time)
            && is_word(k + 2, "AS")
            && is_word(k + 3, "OF"))
        {
            continue;
        }
        // The last token of the clause.
        let mut end = k + 4;
        let point = if by_time {
            match (significant.get(k + 4).map(|t| &t.token), significant.get(k + 5).map(|t| &t.token)) {
                (Some(Token::Word(w)), Some(Token::SingleQuotedString(text)))
                    if w.value.eq_ignore_ascii_case("TIMESTAMP") =>
                {
                    end = k + 5;
                    TravelPoint::Timestamp(timestamp_millis(text, session_zone)?)
                }
                _ => return Err("FOR TIMESTAMP AS OF takes a literal: TIMESTAMP 'YYYY-MM-DD HH:MM:SS [zone]'".into()),
            }
        } else {
            match significant.get(k + 4).map(|t| &t.token) {
                Some(Token::Number(n, _)) => TravelPoint::Version(
                    n.parse::<i64>().map_err(|_| format!("FOR VERSION AS OF takes a version number, not '{n}'"))?,
                ),
                _ => return Err("FOR VERSION AS OF takes a version number".into()),
            }
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
            return Err(format!("{} must follow a table name", point.clause()));
        }
        let last = parts.last().expect("a part").clone();
        let name_token = significant[k - 1];
        edits.push((
            offsets.offset(name_token.span.start),
            offsets.offset(name_token.span.end),
            quote(&format!("{last}@{}", point.suffix())),
        ));
        // Aliased back to its own name unless the query gave it one.
        let aliased = match significant.get(end + 1).map(|t| &t.token) {
            Some(Token::Word(w)) => {
                w.keyword == Keyword::AS || w.keyword == Keyword::NoKeyword || w.quote_style.is_some()
            }
            _ => false,
        };
        let alias = if aliased { String::new() } else { format!("AS {}", quote(&last)) };
        edits.push((offsets.offset(significant[k].span.start), offsets.offset(significant[end].span.end), alias));
        tables.push(VersionedTable { parts, point });
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

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::sql::sqlparser::dialect::GenericDialect;

    fn run(sql: &str) -> Option<Rewritten> {
        rewrite(sql, &GenericDialect {}, true, "UTC").unwrap()
    }

    #[test]
    fn the_clause_becomes_a_versioned_name_aliased_back() {
        let r = run("select count(*) from delta.s.Orders for version as of 3 where o_orderkey < 10").unwrap();
        assert_eq!(r.sql, "select count(*) from delta.s.\"orders@3\" AS \"orders\" where o_orderkey < 10");
        assert_eq!(
            r.tables,
            vec![VersionedTable {
                parts: vec!["delta".into(), "s".into(), "orders".into()],
                point: TravelPoint::Version(3)
            }]
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
        let err = |sql: &str| rewrite(sql, &GenericDialect {}, true, "UTC").unwrap_err();
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
        assert_eq!(split_versioned_name("orders@ts5"), None, "a time is no version");
        assert_eq!(
            split_travel_name("orders@ts1700000000000"),
            Some(("orders", TravelPoint::Timestamp(1_700_000_000_000)))
        );
        assert_eq!(split_travel_name("orders@ts-5"), Some(("orders", TravelPoint::Timestamp(-5))));
        assert_eq!(split_travel_name("orders@tsx"), None);
    }

    #[test]
    fn timestamps_become_instants_in_their_zone_or_the_sessions() {
        let r = run("select * from ice.web.t FOR TIMESTAMP AS OF TIMESTAMP '2024-01-02 03:04:05.250 UTC' x").unwrap();
        assert_eq!(r.sql, "select * from ice.web.\"t@ts1704164645250\"  x");
        assert_eq!(r.tables[0].point, TravelPoint::Timestamp(1_704_164_645_250));
        let at = |sql: &str, zone: &str| {
            let r = rewrite(sql, &GenericDialect {}, true, zone).unwrap().unwrap();
            r.tables[0].point
        };
        let sql = "select * from t for timestamp as of timestamp '2024-01-02 04:04:05.25'";
        assert_eq!(at(sql, "+01:00"), TravelPoint::Timestamp(1_704_164_645_250), "the session's zone");
        let sql = "select * from t for timestamp as of timestamp '2024-01-02 04:04:05.25 Europe/Vienna'";
        assert_eq!(at(sql, "UTC"), TravelPoint::Timestamp(1_704_164_645_250), "its own zone");
        assert_eq!(
            at("select * from t for timestamp as of timestamp '2024-01-02'", "UTC"),
            TravelPoint::Timestamp(1_704_153_600_000)
        );
        let err = |sql: &str| rewrite(sql, &GenericDialect {}, true, "UTC").unwrap_err();
        assert!(err("select * from t for timestamp as of now()").contains("literal"));
        assert!(err("select * from t for timestamp as of timestamp 'yesterday'").contains("not a timestamp"));
        assert!(
            err("select * from t for timestamp as of timestamp '2024-01-02 00:00:00 Mars/Base'").contains("time zone")
        );
        assert_eq!(run("select timestamp '2024-01-01 00:00:00' from t"), None);
    }
}
