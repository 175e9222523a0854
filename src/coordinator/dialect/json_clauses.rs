//! Trino's SQL/JSON call syntax, rewritten in the token stream into plain calls of the
//! functions in `functions::json`: the clauses become one options string argument
//! (`json_query(j, 'lax $.a' WITH ARRAY WRAPPER)` -> `json_query(j, 'lax $.a',
//! 'WITH ARRAY WRAPPER')`), `DEFAULT x ON EMPTY` values become arguments,
//! `RETURNING T` of `json_value` a cast, `v FORMAT JSON [ENCODING e]` a
//! `json_parse(v[, 'e'])`, and `json_object`'s `k : v`, `KEY k VALUE v` pairs two
//! arguments each. A `PASSING` clause is refused.

use datafusion::sql::sqlparser::tokenizer::{Token, TokenWithSpan};

type Tokens = Vec<TokenWithSpan>;

const FUNCTIONS: [&str; 5] = ["JSON_EXISTS", "JSON_QUERY", "JSON_VALUE", "JSON_ARRAY", "JSON_OBJECT"];

fn word(t: &Token) -> Option<String> {
    match t {
        Token::Word(w) if w.quote_style.is_none() => Some(w.value.to_ascii_uppercase()),
        _ => None,
    }
}

fn is_word(t: &TokenWithSpan, w: &str) -> bool {
    word(&t.token).is_some_and(|x| x == w)
}

fn wrap(t: Token) -> TokenWithSpan {
    TokenWithSpan::wrap(t)
}

fn ident(name: &str) -> TokenWithSpan {
    wrap(Token::make_word(name, None))
}

fn string(text: &str) -> TokenWithSpan {
    wrap(Token::SingleQuotedString(text.to_string()))
}

fn significant(tokens: &[TokenWithSpan]) -> Tokens {
    tokens.iter().filter(|t| !matches!(t.token, Token::Whitespace(_))).cloned().collect()
}

use super::tokens::closing;

/// `tokens` split at commas outside parentheses and brackets.
fn arguments(tokens: &[TokenWithSpan]) -> Vec<Tokens> {
    let mut out = vec![Vec::new()];
    let mut depth = 0usize;
    for t in tokens {
        match t.token {
            Token::LParen | Token::LBracket => depth += 1,
            Token::RParen | Token::RBracket => depth = depth.saturating_sub(1),
            Token::Comma if depth == 0 => {
                out.push(Vec::new());
                continue;
            }
            _ => {}
        }
        out.last_mut().expect("one argument at least").push(t.clone());
    }
    if out.len() == 1 && out[0].is_empty() {
        out.clear();
    }
    out
}

/// The index of the first top-level token of `tokens` where `starts` holds.
fn find_top(tokens: &[TokenWithSpan], starts: impl Fn(&[TokenWithSpan]) -> bool) -> Option<usize> {
    let mut depth = 0usize;
    for i in 0..tokens.len() {
        match tokens[i].token {
            Token::LParen | Token::LBracket => depth += 1,
            Token::RParen | Token::RBracket => depth = depth.saturating_sub(1),
            _ if depth == 0 && starts(&tokens[i..]) => return Some(i),
            _ => {}
        }
    }
    None
}

fn words_are(tokens: &[TokenWithSpan], words: &[&str]) -> bool {
    tokens.len() >= words.len() && words.iter().zip(tokens).all(|(w, t)| is_word(t, w))
}

/// The clause words as one normalised string (`WITH ARRAY WRAPPER NULL ON ERROR`).
fn clause_text(tokens: &[TokenWithSpan]) -> String {
    let parts: Vec<String> = tokens.iter().map(|t| word(&t.token).unwrap_or_else(|| t.token.to_string())).collect();
    parts.join(" ")
}

/// A value with an optional `FORMAT JSON [ENCODING e]` suffix, the suffix made a call.
fn value_argument(tokens: &[TokenWithSpan]) -> Tokens {
    let Some(at) = find_top(tokens, |t| words_are(t, &["FORMAT", "JSON"])) else { return tokens.to_vec() };
    let mut out = vec![ident("json_parse"), wrap(Token::LParen)];
    out.extend_from_slice(&tokens[..at]);
    if let Some(e) = tokens.get(at + 2..).filter(|rest| !rest.is_empty() && is_word(&rest[0], "ENCODING")) {
        if let Some(encoding) = e.get(1).and_then(|t| word(&t.token)) {
            out.extend([wrap(Token::Comma), string(&encoding)]);
        }
    }
    out.push(wrap(Token::RParen));
    out
}

fn comma() -> TokenWithSpan {
    wrap(Token::Comma)
}

/// The call `name(args)` with the arguments separated by commas.
fn call(name: &str, args: Vec<Tokens>) -> Tokens {
    let mut out = vec![ident(name), wrap(Token::LParen)];
    for (i, a) in args.into_iter().enumerate() {
        if i > 0 {
            out.push(comma());
        }
        out.extend(a);
    }
    out.push(wrap(Token::RParen));
    out
}

/// `json_exists`, `json_query`, `json_value`: input, path, then clauses.
fn path_call(name: &str, args: Vec<Tokens>) -> Result<Tokens, String> {
    if args.len() > 2 || args.get(1).is_some_and(|a| find_top(a, |t| is_word(&t[0], "PASSING")).is_some()) {
        return Err(format!("{name}: the PASSING clause is not supported"));
    }
    let [input, rest] = <[Tokens; 2]>::try_from(args).map_err(|_| format!("{name} takes an input and a path"))?;
    let input = value_argument(&input);
    let Some((path, clauses)) = rest.split_first() else { return Err(format!("{name} takes a path")) };
    // A path may be named (`'lax $' AS p`): the name is not used.
    let clauses = match clauses.first() {
        Some(t) if is_word(t, "AS") => &clauses[2.min(clauses.len())..],
        _ => clauses,
    };
    if name != "JSON_VALUE" {
        let lower = name.to_ascii_lowercase();
        return Ok(call(&lower, vec![input, vec![path.clone()], vec![string(&clause_text(clauses))]]));
    }
    let mut words: Tokens = Vec::new();
    let mut defaults: [Tokens; 2] = [vec![ident("NULL")], vec![ident("NULL")]];
    let mut returning: Option<Tokens> = None;
    let mut i = 0;
    while i < clauses.len() {
        if is_word(&clauses[i], "DEFAULT") {
            let rest = &clauses[i + 1..];
            let end = find_top(rest, |t| words_are(t, &["ON", "EMPTY"]) || words_are(t, &["ON", "ERROR"]))
                .ok_or_else(|| "DEFAULT needs ON EMPTY or ON ERROR".to_string())?;
            let which = if is_word(&rest[end + 1], "EMPTY") { 0 } else { 1 };
            defaults[which] = rest[..end].to_vec();
            words.extend([ident("DEFAULT"), rest[end].clone(), rest[end + 1].clone()]);
            i += end + 3;
        } else if is_word(&clauses[i], "RETURNING") {
            let rest = &clauses[i + 1..];
            let end = find_top(rest, |t| ["NULL", "ERROR", "DEFAULT", "ON"].iter().any(|w| is_word(&t[0], w)))
                .unwrap_or(rest.len());
            returning = Some(rest[..end].to_vec());
            i += end + 1;
        } else {
            words.push(clauses[i].clone());
            i += 1;
        }
    }
    let [empty, error] = defaults;
    let value = call("json_value", vec![input, vec![path.clone()], vec![string(&clause_text(&words))], empty, error]);
    Ok(match returning {
        None => value,
        Some(t) => {
            let mut out = vec![ident("CAST"), wrap(Token::LParen)];
            out.extend(value);
            out.push(ident("AS"));
            out.extend(t);
            out.push(wrap(Token::RParen));
            out
        }
    })
}

/// Where the trailing clauses of `json_array`/`json_object` begin in the last argument.
fn trailing_clauses(tokens: &[TokenWithSpan]) -> Option<usize> {
    find_top(tokens, |t| {
        words_are(t, &["ABSENT", "ON", "NULL"])
            || words_are(t, &["NULL", "ON", "NULL"])
            || words_are(t, &["WITH", "UNIQUE"])
            || words_are(t, &["WITHOUT", "UNIQUE"])
            || words_are(t, &["RETURNING"])
    })
}

/// `json_array` and `json_object`: the clauses first, then the values (and keys).
fn constructor(name: &str, mut args: Vec<Tokens>) -> Result<Tokens, String> {
    let mut clauses = String::new();
    if let Some(last) = args.last_mut() {
        if let Some(at) = trailing_clauses(last) {
            clauses = clause_text(&last[at..]);
            last.truncate(at);
            if last.is_empty() {
                args.pop();
            }
        }
    }
    let mut out = vec![vec![string(&clauses)]];
    for arg in args {
        if name == "JSON_ARRAY" {
            out.push(value_argument(&arg));
            continue;
        }
        let arg = if arg.first().is_some_and(|t| is_word(t, "KEY")) { arg[1..].to_vec() } else { arg };
        let split = find_top(&arg, |t| t[0].token == Token::Colon || is_word(&t[0], "VALUE"))
            .ok_or_else(|| "json_object takes key : value pairs".to_string())?;
        out.push(arg[..split].to_vec());
        out.push(value_argument(&arg[split + 1..]));
    }
    Ok(call(&name.to_ascii_lowercase(), out))
}

/// Every SQL/JSON call in `tokens` rewritten, inner calls first.
pub fn rewrite(tokens: Tokens) -> Result<Tokens, String> {
    let tokens = significant(&tokens);
    let mut out = Vec::with_capacity(tokens.len());
    let mut i = 0;
    while i < tokens.len() {
        let name = word(&tokens[i].token).filter(|w| FUNCTIONS.contains(&w.as_str()));
        let qualified = i > 0 && tokens[i - 1].token == Token::Period;
        let open = tokens.get(i + 1).is_some_and(|t| t.token == Token::LParen);
        match (name, qualified, open) {
            (Some(name), false, true) => {
                let close = closing(&tokens, i + 1).ok_or_else(|| format!("{name}: unbalanced parentheses"))?;
                let inner = rewrite(tokens[i + 2..close].to_vec())?;
                let args = arguments(&inner);
                out.extend(match name.as_str() {
                    "JSON_ARRAY" | "JSON_OBJECT" => constructor(&name, args)?,
                    _ => path_call(&name, args)?,
                });
                i = close + 1;
            }
            _ => {
                out.push(tokens[i].clone());
                i += 1;
            }
        }
    }
    Ok(out)
}

/// Whether `tokens` name a SQL/JSON function at all (most statements do not).
pub fn mentions(tokens: &[TokenWithSpan]) -> bool {
    tokens.iter().any(|t| word(&t.token).is_some_and(|w| FUNCTIONS.contains(&w.as_str())))
}
