//! Rewrites of the token stream for Trino spellings sqlparser cannot be configured to
//! read: `TABLE t`, the rows of `VALUES 1, 2` (Trino's rows need no parentheses) and of
//! `VALUES ROW(1, 2)`, and Trino's type
//! syntax in casts, `ARRAY(T)` and `ROW(a T, ...)`, which become the `ARRAY<T>` and
//! `STRUCT<a T, ...>` the generic dialect reads, `TRIM(LEADING FROM x)` (spaces) and
//! `GROUP BY DISTINCT`.
//! Tokens keep their source spans; the ones added here have none.

use datafusion::sql::sqlparser::keywords::Keyword;
use datafusion::sql::sqlparser::tokenizer::{Token, TokenWithSpan, Word};

/// The token stream with every rewrite applied.
pub fn rewrite(tokens: Vec<TokenWithSpan>) -> Vec<TokenWithSpan> {
    distinct_grouping(trim_spaces(type_syntax(values_rows(table_queries(tokens)))))
}

/// The mark `GROUP BY DISTINCT` leaves as its first grouping element, which
/// `query_clauses` replaces by the distinct grouping sets.
pub const DISTINCT_GROUPING: &str = "__distinct_grouping_sets";

/// `GROUP BY DISTINCT e, ...` -> `GROUP BY __distinct_grouping_sets, e, ...`: sqlparser
/// reads no set quantifier after `GROUP BY`.
fn distinct_grouping(tokens: Vec<TokenWithSpan>) -> Vec<TokenWithSpan> {
    let words: Vec<usize> = (0..tokens.len()).filter(|&i| !matches!(tokens[i].token, Token::Whitespace(_))).collect();
    let marks: Vec<usize> = words
        .windows(3)
        .filter(|w| {
            is_keyword(&tokens[w[0]].token, Keyword::GROUP)
                && is_keyword(&tokens[w[1]].token, Keyword::BY)
                && is_keyword(&tokens[w[2]].token, Keyword::DISTINCT)
        })
        .map(|w| w[2])
        .collect();
    if marks.is_empty() {
        return tokens;
    }
    let mut out = Vec::with_capacity(tokens.len() + marks.len());
    for (i, t) in tokens.into_iter().enumerate() {
        match marks.contains(&i) {
            true => out.extend([
                TokenWithSpan::wrap(Token::make_word(DISTINCT_GROUPING, None)),
                TokenWithSpan::wrap(Token::Comma),
            ]),
            false => out.push(t),
        }
    }
    out
}

/// `TABLE t` -> `SELECT * FROM t`, where a query may start: at the statement's start,
/// after `(` and after a set operation (`UNION [ALL | DISTINCT]`, ...). sqlparser reads
/// Trino's short query only inside some queries, and DataFusion plans none.
fn table_queries(tokens: Vec<TokenWithSpan>) -> Vec<TokenWithSpan> {
    let starts_query = |previous: Option<&Token>| match previous {
        None | Some(Token::LParen) => true,
        Some(t) => [Keyword::UNION, Keyword::EXCEPT, Keyword::INTERSECT, Keyword::ALL, Keyword::DISTINCT]
            .iter()
            .any(|k| is_keyword(t, *k)),
    };
    let mut previous: Option<Token> = None;
    let mut at = Vec::new();
    for (i, t) in tokens.iter().enumerate() {
        if matches!(t.token, Token::Whitespace(_)) {
            continue;
        }
        if is_keyword(&t.token, Keyword::TABLE) && starts_query(previous.as_ref()) {
            at.push(i);
        }
        previous = Some(t.token.clone());
    }
    if at.is_empty() {
        return tokens;
    }
    let space = || TokenWithSpan::wrap(Token::Whitespace(datafusion::sql::sqlparser::tokenizer::Whitespace::Space));
    let word = |k: &str| TokenWithSpan::wrap(Token::make_keyword(k));
    let mut out = Vec::with_capacity(tokens.len() + 4 * at.len());
    for (i, t) in tokens.into_iter().enumerate() {
        if at.contains(&i) {
            out.extend([word("SELECT"), space(), TokenWithSpan::wrap(Token::Mul), space(), word("FROM")]);
        } else {
            out.push(t);
        }
    }
    out
}

/// `TRIM(LEADING FROM x)` -> `TRIM(LEADING ' ' FROM x)`: Trino's trim of spaces names
/// no characters, sqlparser's wants them.
fn trim_spaces(tokens: Vec<TokenWithSpan>) -> Vec<TokenWithSpan> {
    let words: Vec<usize> = (0..tokens.len()).filter(|&i| !matches!(tokens[i].token, Token::Whitespace(_))).collect();
    let mut insert_before = Vec::new();
    for w in words.windows(4) {
        let [trim, open, side, from] = [w[0], w[1], w[2], w[3]];
        let sided =
            [Keyword::LEADING, Keyword::TRAILING, Keyword::BOTH].iter().any(|k| is_keyword(&tokens[side].token, *k));
        if is_keyword(&tokens[trim].token, Keyword::TRIM)
            && tokens[open].token == Token::LParen
            && sided
            && is_keyword(&tokens[from].token, Keyword::FROM)
        {
            insert_before.push(from);
        }
    }
    if insert_before.is_empty() {
        return tokens;
    }
    let mut out = Vec::with_capacity(tokens.len() + 2 * insert_before.len());
    for (i, t) in tokens.into_iter().enumerate() {
        if insert_before.contains(&i) {
            out.push(TokenWithSpan::wrap(Token::SingleQuotedString(" ".into())));
            out.push(TokenWithSpan::wrap(Token::Whitespace(datafusion::sql::sqlparser::tokenizer::Whitespace::Space)));
        }
        out.push(t);
    }
    out
}

/// Whether `t` is the unquoted word `name` (in any case), keyword or not.
fn is_word(t: &Token, name: &str) -> bool {
    matches!(t, Token::Word(w) if w.quote_style.is_none() && w.value.eq_ignore_ascii_case(name))
}

fn is_keyword(t: &Token, k: Keyword) -> bool {
    matches!(t, Token::Word(w) if w.keyword == k && w.quote_style.is_none())
}

fn significant(tokens: &[TokenWithSpan], from: usize) -> Option<usize> {
    (from..tokens.len()).find(|&i| !matches!(tokens[i].token, Token::Whitespace(_)))
}

/// Keywords that end a `VALUES` list at its own nesting depth.
const AFTER_VALUES: [Keyword; 8] = [
    Keyword::ORDER,
    Keyword::LIMIT,
    Keyword::OFFSET,
    Keyword::FETCH,
    Keyword::UNION,
    Keyword::EXCEPT,
    Keyword::INTERSECT,
    Keyword::RETURNING,
];

/// Where the `VALUES` element starting at `from` ends: the index of the comma after
/// it (`true`) or of the token that ends the list (`false`).
fn element_end(tokens: &[TokenWithSpan], from: usize) -> (usize, bool) {
    let mut depth = 0usize;
    for (i, t) in tokens.iter().enumerate().skip(from) {
        match &t.token {
            Token::LParen | Token::LBracket => depth += 1,
            Token::RParen | Token::RBracket if depth == 0 => return (i, false),
            Token::RParen | Token::RBracket => depth -= 1,
            Token::Comma if depth == 0 => return (i, true),
            Token::SemiColon | Token::EOF if depth == 0 => return (i, false),
            tok if depth == 0 && AFTER_VALUES.iter().any(|k| is_keyword(tok, *k)) => return (i, false),
            _ => {}
        }
    }
    (tokens.len(), false)
}

/// The index of the parenthesis closing the one at `open`.
pub(super) fn closing(tokens: &[TokenWithSpan], open: usize) -> Option<usize> {
    let mut depth = 0usize;
    for (i, t) in tokens.iter().enumerate().skip(open) {
        match t.token {
            Token::LParen => depth += 1,
            Token::RParen => {
                depth -= 1;
                if depth == 0 {
                    return Some(i);
                }
            }
            _ => {}
        }
    }
    None
}

/// Whether the parenthesised row at `from` ends the list where it stands: an alias
/// follows it (`FROM VALUES (1, 2) t(a, b)`, DataFusion's table factor).
fn aliased_row(tokens: &[TokenWithSpan], from: usize) -> bool {
    let after = closing(tokens, from).and_then(|c| significant(tokens, c + 1));
    after.is_some_and(|a| match &tokens[a].token {
        Token::Word(w) => w.quote_style.is_some() || w.keyword == Keyword::NoKeyword || w.keyword == Keyword::AS,
        _ => false,
    })
}

/// Whether the element `[from, end)` is already one parenthesised row.
fn is_parenthesised(tokens: &[TokenWithSpan], from: usize, end: usize) -> bool {
    let last = (from..end).rev().find(|&i| !matches!(tokens[i].token, Token::Whitespace(_)));
    tokens[from].token == Token::LParen && closing(tokens, from) == last
}

/// `VALUES 1, 2` -> `VALUES (1), (2)`: each element not already one parenthesised
/// row is wrapped.
fn values_rows(tokens: Vec<TokenWithSpan>) -> Vec<TokenWithSpan> {
    let mut open_before = Vec::new();
    let mut close_before = Vec::new();
    let mut drop = Vec::new();
    for i in 0..tokens.len() {
        if !is_keyword(&tokens[i].token, Keyword::VALUES) {
            continue;
        }
        let mut next = significant(&tokens, i + 1);
        while let Some(from) = next {
            if tokens[from].token == Token::LParen && aliased_row(&tokens, from) {
                break;
            }
            let (end, more) = element_end(&tokens, from);
            // `VALUES ROW(1, 2)` is the row (1, 2), not one column of a row type.
            let row_open = significant(&tokens, from + 1).filter(|_| is_word(&tokens[from].token, "row"));
            if let Some(open) = row_open.filter(|&o| o < end && is_parenthesised(&tokens, o, end)) {
                drop.extend(from..open);
            } else if end > from && !is_parenthesised(&tokens, from, end) {
                open_before.push(from);
                // Before any whitespace ahead of the end, so `1 ORDER` stays apart.
                let last = (from..end).rev().find(|&k| !matches!(tokens[k].token, Token::Whitespace(_)));
                close_before.push(last.map_or(end, |k| k + 1));
            }
            next = if more { significant(&tokens, end + 1) } else { None };
        }
    }
    if open_before.is_empty() && drop.is_empty() {
        return tokens;
    }
    let len = tokens.len();
    let mut out = Vec::with_capacity(len + 2 * open_before.len());
    for (i, t) in tokens.into_iter().enumerate() {
        out.extend(close_before.iter().filter(|&&c| c == i).map(|_| TokenWithSpan::wrap(Token::RParen)));
        out.extend(open_before.iter().filter(|&&o| o == i).map(|_| TokenWithSpan::wrap(Token::LParen)));
        if !drop.contains(&i) {
            out.push(t);
        }
    }
    out.extend(close_before.iter().filter(|&&c| c >= len).map(|_| TokenWithSpan::wrap(Token::RParen)));
    out
}

/// What an open parenthesis began, for the type rewrite.
#[derive(Clone, Copy, PartialEq)]
enum Frame {
    /// `CAST(` or `TRY_CAST(`: its `AS` starts a type.
    Cast { in_type: bool },
    /// `ARRAY(` or `ROW(` inside a type, now an angle bracket.
    Angle,
    /// Any other parenthesis; inside a type it stays one (`DECIMAL(10, 2)`).
    Paren { in_type: bool },
}

fn in_type(stack: &[Frame]) -> bool {
    match stack.last() {
        Some(Frame::Cast { in_type }) | Some(Frame::Paren { in_type }) => *in_type,
        Some(Frame::Angle) => true,
        None => false,
    }
}

fn struct_word() -> Token {
    Token::Word(Word { value: "STRUCT".to_string(), quote_style: None, keyword: Keyword::STRUCT })
}

/// `CAST(x AS ARRAY(ROW(a INTEGER)))` -> `CAST(x AS ARRAY<STRUCT<a INTEGER>>)`.
fn type_syntax(mut tokens: Vec<TokenWithSpan>) -> Vec<TokenWithSpan> {
    let mut stack: Vec<Frame> = Vec::new();
    let mut previous: Option<usize> = None;
    for i in 0..tokens.len() {
        let typed = in_type(&stack);
        match &tokens[i].token {
            Token::LParen => {
                let before = previous.map(|p| tokens[p].token.clone());
                let frame = match before {
                    Some(t) if is_keyword(&t, Keyword::CAST) || is_keyword(&t, Keyword::TRY_CAST) => {
                        Frame::Cast { in_type: false }
                    }
                    Some(t) if typed && is_keyword(&t, Keyword::ARRAY) => Frame::Angle,
                    Some(t) if typed && is_keyword(&t, Keyword::ROW) => {
                        tokens[previous.expect("a token came before")].token = struct_word();
                        Frame::Angle
                    }
                    _ => Frame::Paren { in_type: typed },
                };
                if frame == Frame::Angle {
                    tokens[i].token = Token::Lt;
                }
                stack.push(frame);
            }
            Token::RParen if stack.last() == Some(&Frame::Angle) => {
                stack.pop();
                tokens[i].token = Token::Gt;
            }
            Token::RParen => {
                stack.pop();
            }
            t if is_keyword(t, Keyword::AS) => {
                if let Some(Frame::Cast { in_type }) = stack.last_mut() {
                    *in_type = true;
                }
            }
            _ => {}
        }
        if !matches!(tokens[i].token, Token::Whitespace(_)) {
            previous = Some(i);
        }
    }
    tokens
}
