//! Trino's `EXECUTE IMMEDIATE '<statement>' [USING value, ...]`, which Trino's clients
//! send for every query with bound parameters (the SQLAlchemy dialect's reflection
//! among them). The coordinator rewrites it into the plain statement, each `?` outside
//! quotes replaced by the next `USING` expression, before planning.

/// The rewritten statement, `None` when `sql` is not an EXECUTE IMMEDIATE, or an error
/// naming what is malformed.
pub fn rewrite(sql: &str) -> Option<Result<String, String>> {
    let trimmed = sql.trim_start();
    let mut words = trimmed.split_whitespace();
    let (a, b) = (words.next()?, words.next()?);
    if !a.eq_ignore_ascii_case("execute") || !b.eq_ignore_ascii_case("immediate") {
        return None;
    }
    let rest = trimmed[a.len()..].trim_start()[b.len()..].trim_start();
    Some(rewrite_body(rest))
}

fn rewrite_body(rest: &str) -> Result<String, String> {
    let (statement, after) = quoted_literal(rest).ok_or("EXECUTE IMMEDIATE needs the statement as a quoted string")?;
    bind(&statement, after.trim())
}

/// Reads a single-quoted SQL string (`''` is a quote); returns it and what follows.
fn quoted_literal(s: &str) -> Option<(String, &str)> {
    let mut chars = s.char_indices();
    if chars.next()?.1 != '\'' {
        return None;
    }
    let mut out = String::new();
    let bytes = s.as_bytes();
    let mut i = 1;
    while i < bytes.len() {
        let c = s[i..].chars().next()?;
        if c == '\'' {
            if bytes.get(i + 1) == Some(&b'\'') {
                out.push('\'');
                i += 2;
                continue;
            }
            return Some((out, &s[i + 1..]));
        }
        out.push(c);
        i += c.len_utf8();
    }
    None
}

/// Splits `a, f(b, c), 'x,y'` on commas outside quotes and parentheses.
fn split_top_level(s: &str) -> Vec<String> {
    let (mut out, mut cur, mut depth, mut quote) = (Vec::new(), String::new(), 0i32, None::<char>);
    for c in s.chars() {
        match (quote, c) {
            (Some(q), _) => {
                cur.push(c);
                if c == q {
                    quote = None;
                }
            }
            (None, '\'' | '"') => {
                quote = Some(c);
                cur.push(c);
            }
            (None, '(' | '[') => {
                depth += 1;
                cur.push(c);
            }
            (None, ')' | ']') => {
                depth -= 1;
                cur.push(c);
            }
            (None, ',') if depth == 0 => out.push(std::mem::take(&mut cur).trim().to_string()),
            _ => cur.push(c),
        }
    }
    if !cur.trim().is_empty() {
        out.push(cur.trim().to_string());
    }
    out
}

/// Replaces each `?` outside quotes with the next parameter.
pub(crate) fn substitute(statement: &str, params: &[String]) -> Result<String, String> {
    let (mut out, mut next, mut quote) = (String::new(), 0usize, None::<char>);
    for c in statement.chars() {
        match (quote, c) {
            (Some(q), _) => {
                out.push(c);
                if c == q {
                    quote = None;
                }
            }
            (None, '\'' | '"') => {
                quote = Some(c);
                out.push(c);
            }
            (None, '?') => {
                let p = params
                    .get(next)
                    .ok_or_else(|| format!("statement has more parameters than the {} values given", params.len()))?;
                out.push_str(p);
                next += 1;
            }
            _ => out.push(c),
        }
    }
    if next != params.len() {
        return Err(format!("{} values given for {next} parameters", params.len()));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_statements_are_left_alone() {
        assert!(rewrite("SELECT 1").is_none());
        assert!(rewrite("EXECUTE stmt").is_none());
    }

    #[test]
    fn parameters_replace_placeholders_outside_quotes() {
        let sql = "EXECUTE IMMEDIATE 'SELECT n_name FROM nation WHERE n_nationkey = ? AND n_comment <> ''?'' AND n_name = ?' USING 3, 'it''s, here'";
        assert_eq!(
            rewrite(sql).unwrap().unwrap(),
            "SELECT n_name FROM nation WHERE n_nationkey = 3 AND n_comment <> '?' AND n_name = 'it''s, here'"
        );
        assert_eq!(rewrite("execute immediate 'SELECT 1'").unwrap().unwrap(), "SELECT 1");
        assert_eq!(rewrite("EXECUTE IMMEDIATE 'SELECT ?' USING ARRAY[1, 2]").unwrap().unwrap(), "SELECT ARRAY[1, 2]");
    }

    #[test]
    fn mismatched_parameters_are_errors() {
        assert!(rewrite("EXECUTE IMMEDIATE 'SELECT ?, ?' USING 1").unwrap().is_err());
        assert!(rewrite("EXECUTE IMMEDIATE 'SELECT 1' USING 1").unwrap().is_err());
        assert!(rewrite("EXECUTE IMMEDIATE SELECT 1").unwrap().is_err());
    }
}

/// Trino's older client-side prepared statements: the client keeps them and sends them
/// back in `X-Trino-Prepared-Statement` with each request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PreparedStatement {
    /// `PREPARE name FROM statement`: answered with `X-Trino-Added-Prepare`.
    Prepare { name: String, statement: String },
    /// `DEALLOCATE PREPARE name`: answered with `X-Trino-Deallocated-Prepare`.
    Deallocate { name: String },
    /// `EXECUTE name [USING ...]`: the rest after the name.
    Execute { name: String, using: String },
}

pub fn parse_prepared(sql: &str) -> Option<PreparedStatement> {
    let t = sql.trim();
    let words: Vec<&str> = t.split_whitespace().collect();
    let kw = |i: usize, w: &str| words.get(i).is_some_and(|x| x.eq_ignore_ascii_case(w));
    if kw(0, "prepare") && kw(2, "from") {
        let name = words[1].to_string();
        let from = t.to_ascii_lowercase().find(" from ")?;
        return Some(PreparedStatement::Prepare { name, statement: t[from + 6..].trim().to_string() });
    }
    if kw(0, "deallocate") && kw(1, "prepare") && words.len() == 3 {
        return Some(PreparedStatement::Deallocate { name: words[2].to_string() });
    }
    if kw(0, "execute") && words.len() >= 2 && !kw(1, "immediate") {
        let name = words[1].to_string();
        let after = t[t.find(words[1])? + words[1].len()..].trim().to_string();
        return Some(PreparedStatement::Execute { name, using: after });
    }
    None
}

/// `EXECUTE name USING ...` with the statement text the client sent back.
pub fn bind(statement: &str, using: &str) -> Result<String, String> {
    let params = if using.is_empty() {
        Vec::new()
    } else {
        let rest = using
            .get(..5)
            .filter(|w| w.eq_ignore_ascii_case("using"))
            .ok_or_else(|| format!("unexpected '{using}'"))?;
        split_top_level(using[rest.len()..].trim())
    };
    substitute(statement, &params)
}

#[cfg(test)]
mod prepared_tests {
    use super::*;

    #[test]
    fn prepared_statement_forms_parse() {
        assert_eq!(
            parse_prepared("PREPARE st1 FROM SELECT * FROM t WHERE a = ?"),
            Some(PreparedStatement::Prepare { name: "st1".into(), statement: "SELECT * FROM t WHERE a = ?".into() })
        );
        assert_eq!(
            parse_prepared("DEALLOCATE PREPARE st1"),
            Some(PreparedStatement::Deallocate { name: "st1".into() })
        );
        assert_eq!(
            parse_prepared("EXECUTE st1 USING 'x'"),
            Some(PreparedStatement::Execute { name: "st1".into(), using: "USING 'x'".into() })
        );
        assert_eq!(parse_prepared("EXECUTE IMMEDIATE 'SELECT 1'"), None);
        assert_eq!(bind("SELECT ? + ?", "USING 1, 2").unwrap(), "SELECT 1 + 2");
    }
}
