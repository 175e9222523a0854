//! The SQL/JSON path language of Trino's `json_exists`, `json_query` and `json_value`
//! (`lax $.children[*]?(@ > 10)`), and the JSONPath of the older `json_extract`
//! family (`$.store.book[0]`, `$["key"]`), which is read as a strict path. A path
//! is parsed once per call site and evaluated on `serde_json` values; the result is
//! a sequence of items, or a structural error that the caller's `ON ERROR` decides.

use serde_json::Value;

#[derive(Debug, Clone, PartialEq)]
pub enum Mode {
    Lax,
    Strict,
}

#[derive(Debug, Clone)]
pub struct Path {
    pub mode: Mode,
    expr: Expr,
}

#[derive(Debug, Clone)]
enum Expr {
    Root,
    Current,
    Last,
    Literal(Value),
    Member(Box<Expr>, String),
    WildcardMember(Box<Expr>),
    Element(Box<Expr>, Vec<(Expr, Option<Expr>)>),
    WildcardElement(Box<Expr>),
    Filter(Box<Expr>, Box<Predicate>),
    Method(Box<Expr>, String),
    Arithmetic(Box<Expr>, char, Box<Expr>),
    Negate(Box<Expr>),
}

#[derive(Debug, Clone)]
enum Predicate {
    Compare(Expr, String, Expr),
    And(Box<Predicate>, Box<Predicate>),
    Or(Box<Predicate>, Box<Predicate>),
    Not(Box<Predicate>),
    Exists(Expr),
    StartsWith(Expr, Expr),
    IsUnknown(Box<Predicate>),
}

/// A path that does not apply to the value (strict mode), or an invalid operation.
#[derive(Debug, Clone, PartialEq)]
pub struct PathError(pub String);

type Eval<T> = Result<T, PathError>;

fn fail<T>(message: impl Into<String>) -> Eval<T> {
    Err(PathError(message.into()))
}

#[derive(Debug, Clone, PartialEq)]
enum Token {
    Dollar,
    At,
    Dot,
    Star,
    LBracket,
    RBracket,
    LParen,
    RParen,
    Comma,
    Question,
    Op(String),
    Word(String),
    Str(String),
    Num(Value),
}

fn tokenize(text: &str) -> Result<Vec<Token>, String> {
    let chars: Vec<char> = text.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let two: String = chars[i..(i + 2).min(chars.len())].iter().collect();
        match c {
            _ if c.is_whitespace() => i += 1,
            '$' => (out.push(Token::Dollar), i += 1).1,
            '@' => (out.push(Token::At), i += 1).1,
            '.' if !chars.get(i + 1).is_some_and(|d| d.is_ascii_digit()) => (out.push(Token::Dot), i += 1).1,
            '*' => (out.push(Token::Star), i += 1).1,
            '[' => (out.push(Token::LBracket), i += 1).1,
            ']' => (out.push(Token::RBracket), i += 1).1,
            '(' => (out.push(Token::LParen), i += 1).1,
            ')' => (out.push(Token::RParen), i += 1).1,
            ',' => (out.push(Token::Comma), i += 1).1,
            '?' => (out.push(Token::Question), i += 1).1,
            _ if ["==", "!=", "<>", "<=", ">=", "&&", "||"].contains(&two.as_str()) => {
                out.push(Token::Op(two));
                i += 2;
            }
            '<' | '>' | '!' | '+' | '-' | '/' | '%' | '=' => {
                out.push(Token::Op(c.to_string()));
                i += 1;
            }
            '"' | '\'' => {
                let mut s = String::new();
                i += 1;
                while i < chars.len() && chars[i] != c {
                    if chars[i] == '\\' && i + 1 < chars.len() {
                        i += 1;
                    }
                    s.push(chars[i]);
                    i += 1;
                }
                if i >= chars.len() {
                    return Err("unterminated string".into());
                }
                i += 1;
                out.push(Token::Str(s));
            }
            _ if c.is_ascii_digit() || c == '.' => {
                let start = i;
                while i < chars.len() && (chars[i].is_ascii_digit() || chars[i] == '.') {
                    i += 1;
                }
                if i < chars.len() && (chars[i] == 'e' || chars[i] == 'E') {
                    i += 1;
                    if i < chars.len() && (chars[i] == '+' || chars[i] == '-') {
                        i += 1;
                    }
                    while i < chars.len() && chars[i].is_ascii_digit() {
                        i += 1;
                    }
                }
                let text: String = chars[start..i].iter().collect();
                let number =
                    serde_json::from_str(text.trim_start_matches('+')).map_err(|_| format!("bad number {text}"))?;
                out.push(Token::Num(number));
            }
            _ if c.is_alphabetic() || c == '_' => {
                let start = i;
                while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
                    i += 1;
                }
                out.push(Token::Word(chars[start..i].iter().collect()));
            }
            _ => return Err(format!("unexpected character '{c}'")),
        }
    }
    Ok(out)
}

struct Parser {
    tokens: Vec<Token>,
    at: usize,
}

impl Parser {
    fn peek(&self) -> Option<&Token> {
        self.tokens.get(self.at)
    }
    fn next(&mut self) -> Option<Token> {
        let t = self.tokens.get(self.at).cloned();
        self.at += 1;
        t
    }
    fn eat(&mut self, t: &Token) -> bool {
        if self.peek() == Some(t) {
            self.at += 1;
            true
        } else {
            false
        }
    }
    fn eat_word(&mut self, w: &str) -> bool {
        match self.peek() {
            Some(Token::Word(x)) if x.eq_ignore_ascii_case(w) => {
                self.at += 1;
                true
            }
            _ => false,
        }
    }
    fn expect(&mut self, t: Token) -> Result<(), String> {
        match self.eat(&t) {
            true => Ok(()),
            false => Err(format!("expected {t:?} at {:?}", self.peek())),
        }
    }

    fn additive(&mut self) -> Result<Expr, String> {
        let mut left = self.multiplicative()?;
        while let Some(Token::Op(op)) = self.peek().cloned() {
            if op != "+" && op != "-" {
                break;
            }
            self.at += 1;
            let right = self.multiplicative()?;
            left = Expr::Arithmetic(Box::new(left), op.chars().next().unwrap_or('+'), Box::new(right));
        }
        Ok(left)
    }

    fn multiplicative(&mut self) -> Result<Expr, String> {
        let mut left = self.unary()?;
        loop {
            let op = match self.peek() {
                Some(Token::Star) => '*',
                Some(Token::Op(o)) if o == "/" || o == "%" => o.chars().next().unwrap_or('/'),
                _ => break,
            };
            self.at += 1;
            let right = self.unary()?;
            left = Expr::Arithmetic(Box::new(left), op, Box::new(right));
        }
        Ok(left)
    }

    fn unary(&mut self) -> Result<Expr, String> {
        match self.peek() {
            Some(Token::Op(o)) if o == "-" => {
                self.at += 1;
                Ok(Expr::Negate(Box::new(self.unary()?)))
            }
            Some(Token::Op(o)) if o == "+" => {
                self.at += 1;
                self.unary()
            }
            _ => self.accessors(),
        }
    }

    fn primary(&mut self) -> Result<Expr, String> {
        match self.next() {
            Some(Token::Dollar) => Ok(Expr::Root),
            Some(Token::At) => Ok(Expr::Current),
            Some(Token::Num(n)) => Ok(Expr::Literal(n)),
            Some(Token::Str(s)) => Ok(Expr::Literal(Value::String(s))),
            Some(Token::Word(w)) if w == "last" => Ok(Expr::Last),
            Some(Token::Word(w)) if w == "true" => Ok(Expr::Literal(Value::Bool(true))),
            Some(Token::Word(w)) if w == "false" => Ok(Expr::Literal(Value::Bool(false))),
            Some(Token::Word(w)) if w == "null" => Ok(Expr::Literal(Value::Null)),
            Some(Token::LParen) => {
                let e = self.additive()?;
                self.expect(Token::RParen)?;
                Ok(e)
            }
            other => Err(format!("unexpected {other:?}")),
        }
    }

    fn accessors(&mut self) -> Result<Expr, String> {
        let mut e = self.primary()?;
        loop {
            match self.peek() {
                Some(Token::Dot) => {
                    self.at += 1;
                    e = match self.next() {
                        Some(Token::Star) => Expr::WildcardMember(Box::new(e)),
                        Some(Token::Str(s)) => Expr::Member(Box::new(e), s),
                        Some(Token::Word(w)) if self.peek() == Some(&Token::LParen) => {
                            self.at += 1;
                            self.expect(Token::RParen)?;
                            Expr::Method(Box::new(e), w)
                        }
                        Some(Token::Word(w)) => Expr::Member(Box::new(e), w),
                        other => return Err(format!("unexpected {other:?} after '.'")),
                    };
                }
                Some(Token::LBracket) => {
                    self.at += 1;
                    if self.eat(&Token::Star) {
                        self.expect(Token::RBracket)?;
                        e = Expr::WildcardElement(Box::new(e));
                        continue;
                    }
                    if let Some(Token::Str(s)) = self.peek().cloned() {
                        // JSONPath's `$["key"]`: a member.
                        self.at += 1;
                        self.expect(Token::RBracket)?;
                        e = Expr::Member(Box::new(e), s);
                        continue;
                    }
                    let mut subscripts = Vec::new();
                    loop {
                        let from = self.additive()?;
                        let to = if self.eat_word("to") { Some(self.additive()?) } else { None };
                        subscripts.push((from, to));
                        if !self.eat(&Token::Comma) {
                            break;
                        }
                    }
                    self.expect(Token::RBracket)?;
                    e = Expr::Element(Box::new(e), subscripts);
                }
                Some(Token::Question) => {
                    self.at += 1;
                    self.expect(Token::LParen)?;
                    let p = self.or()?;
                    self.expect(Token::RParen)?;
                    e = Expr::Filter(Box::new(e), Box::new(p));
                }
                _ => return Ok(e),
            }
        }
    }

    fn or(&mut self) -> Result<Predicate, String> {
        let mut left = self.and()?;
        while self.eat(&Token::Op("||".into())) {
            left = Predicate::Or(Box::new(left), Box::new(self.and()?));
        }
        Ok(left)
    }

    fn and(&mut self) -> Result<Predicate, String> {
        let mut left = self.not()?;
        while self.eat(&Token::Op("&&".into())) {
            left = Predicate::And(Box::new(left), Box::new(self.not()?));
        }
        Ok(left)
    }

    fn not(&mut self) -> Result<Predicate, String> {
        if self.eat(&Token::Op("!".into())) {
            self.expect(Token::LParen)?;
            let p = self.or()?;
            self.expect(Token::RParen)?;
            return Ok(Predicate::Not(Box::new(p)));
        }
        self.atom()
    }

    fn atom(&mut self) -> Result<Predicate, String> {
        if self.eat_word("exists") {
            self.expect(Token::LParen)?;
            let e = self.additive()?;
            self.expect(Token::RParen)?;
            return Ok(Predicate::Exists(e));
        }
        // A parenthesised predicate, or an expression in parentheses starting a comparison.
        if self.peek() == Some(&Token::LParen) {
            let saved = self.at;
            self.at += 1;
            if let Ok(p) = self.or() {
                if self.eat(&Token::RParen) {
                    if self.eat_word("is") {
                        if !self.eat_word("unknown") {
                            return Err("expected UNKNOWN".into());
                        }
                        return Ok(Predicate::IsUnknown(Box::new(p)));
                    }
                    return Ok(p);
                }
            }
            self.at = saved;
        }
        let left = self.additive()?;
        if self.eat_word("starts") {
            if !self.eat_word("with") {
                return Err("expected WITH".into());
            }
            return Ok(Predicate::StartsWith(left, self.additive()?));
        }
        match self.next() {
            Some(Token::Op(op)) if ["==", "!=", "<>", "<", "<=", ">", ">=", "="].contains(&op.as_str()) => {
                Ok(Predicate::Compare(left, op, self.additive()?))
            }
            other => Err(format!("expected a comparison, found {other:?}")),
        }
    }
}

/// Parses `text`: an optional `lax` or `strict` (lax by default) and a path.
pub fn parse(text: &str) -> Result<Path, String> {
    let mut parser = Parser { tokens: tokenize(text)?, at: 0 };
    let mode = if parser.eat_word("strict") {
        Mode::Strict
    } else {
        parser.eat_word("lax");
        Mode::Lax
    };
    let expr = parser.additive()?;
    if parser.at < parser.tokens.len() {
        return Err(format!("unexpected {:?}", parser.tokens[parser.at]));
    }
    Ok(Path { mode, expr })
}

struct Context<'a> {
    root: &'a Value,
    lax: bool,
}

impl Path {
    /// The items `self` selects from `root`.
    pub fn evaluate(&self, root: &Value) -> Eval<Vec<Value>> {
        let cx = Context { root, lax: self.mode == Mode::Lax };
        eval(&cx, &self.expr, None, None)
    }
}

/// In lax mode an array is taken apart where a member accessor meets it.
fn unwrapped(cx: &Context, items: Vec<Value>) -> Vec<Value> {
    if !cx.lax {
        return items;
    }
    items.into_iter().flat_map(|v| if let Value::Array(a) = v { a } else { vec![v] }).collect()
}

fn eval(cx: &Context, e: &Expr, current: Option<&Value>, last: Option<i64>) -> Eval<Vec<Value>> {
    match e {
        Expr::Root => Ok(vec![cx.root.clone()]),
        Expr::Current => current.map(|v| vec![v.clone()]).ok_or_else(|| PathError("@ outside a filter".into())),
        Expr::Last => last.map(|l| vec![Value::from(l)]).ok_or_else(|| PathError("last outside an array".into())),
        Expr::Literal(v) => Ok(vec![v.clone()]),
        Expr::Member(base, key) => {
            let mut out = Vec::new();
            for v in unwrapped(cx, eval(cx, base, current, last)?) {
                match v.get(key.as_str()).filter(|_| v.is_object()) {
                    Some(m) => out.push(m.clone()),
                    None if cx.lax => {}
                    None => return fail(format!("member '{key}' not found")),
                }
            }
            Ok(out)
        }
        Expr::WildcardMember(base) => {
            let mut out = Vec::new();
            for v in unwrapped(cx, eval(cx, base, current, last)?) {
                match v {
                    Value::Object(m) => out.extend(m.into_iter().map(|(_, v)| v)),
                    _ if cx.lax => {}
                    _ => return fail("member wildcard on a non-object"),
                }
            }
            Ok(out)
        }
        Expr::WildcardElement(base) => {
            let mut out = Vec::new();
            for v in eval(cx, base, current, last)? {
                match v {
                    Value::Array(a) => out.extend(a),
                    other if cx.lax => out.push(other),
                    _ => return fail("array wildcard on a non-array"),
                }
            }
            Ok(out)
        }
        Expr::Element(base, subscripts) => {
            let mut out = Vec::new();
            for v in eval(cx, base, current, last)? {
                let items = match v {
                    Value::Array(a) => a,
                    other if cx.lax => vec![other],
                    _ => return fail("array accessor on a non-array"),
                };
                let last = items.len() as i64 - 1;
                for (from, to) in subscripts {
                    let from = index(cx, from, current, last)?;
                    let to = match to {
                        Some(t) => index(cx, t, current, last)?,
                        None => from,
                    };
                    for i in from..=to {
                        match usize::try_from(i).ok().and_then(|i| items.get(i)) {
                            Some(item) => out.push(item.clone()),
                            None if cx.lax => {}
                            None => return fail(format!("array index {i} out of bounds")),
                        }
                    }
                }
            }
            Ok(out)
        }
        Expr::Filter(base, predicate) => {
            let mut out = Vec::new();
            for v in unwrapped(cx, eval(cx, base, current, last)?) {
                if test(cx, predicate, &v) == Some(true) {
                    out.push(v);
                }
            }
            Ok(out)
        }
        Expr::Method(base, name) => {
            let items = eval(cx, base, current, last)?;
            items.into_iter().map(|v| method(name, v)).collect()
        }
        Expr::Arithmetic(l, op, r) => {
            let (l, r) = (single_number(cx, l, current, last)?, single_number(cx, r, current, last)?);
            let value = match op {
                '+' => l + r,
                '-' => l - r,
                '*' => l * r,
                '/' if r == 0.0 => return fail("division by zero"),
                '/' => l / r,
                _ => l % r,
            };
            Ok(vec![number(value)])
        }
        Expr::Negate(inner) => Ok(vec![number(-single_number(cx, inner, current, last)?)]),
    }
}

fn number(f: f64) -> Value {
    if f.fract() == 0.0 && f.abs() < 9e15 {
        Value::from(f as i64)
    } else {
        serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number)
    }
}

fn single_number(cx: &Context, e: &Expr, current: Option<&Value>, last: Option<i64>) -> Eval<f64> {
    match eval(cx, e, current, last)?.as_slice() {
        [Value::Number(n)] => Ok(n.as_f64().unwrap_or(0.0)),
        _ => fail("arithmetic on a non-number"),
    }
}

fn index(cx: &Context, e: &Expr, current: Option<&Value>, last: i64) -> Eval<i64> {
    let i = single_number(cx, e, current, Some(last))?;
    Ok(i as i64)
}

fn method(name: &str, v: Value) -> Eval<Value> {
    Ok(match (name, &v) {
        ("type", _) => Value::String(
            match v {
                Value::Null => "null",
                Value::Bool(_) => "boolean",
                Value::Number(_) => "number",
                Value::String(_) => "string",
                Value::Array(_) => "array",
                Value::Object(_) => "object",
            }
            .into(),
        ),
        ("size", Value::Array(a)) => Value::from(a.len()),
        ("size", _) => Value::from(1),
        ("double", Value::Number(n)) => number(n.as_f64().unwrap_or(0.0)),
        ("double", Value::String(s)) => number(s.parse().map_err(|_| PathError(format!("not a number: {s}")))?),
        ("abs", Value::Number(n)) => number(n.as_f64().unwrap_or(0.0).abs()),
        ("floor", Value::Number(n)) => number(n.as_f64().unwrap_or(0.0).floor()),
        ("ceiling", Value::Number(n)) => number(n.as_f64().unwrap_or(0.0).ceil()),
        _ => return fail(format!("method {name}() does not apply to {v}")),
    })
}

/// SQL/JSON's three-valued predicate result: `None` is unknown (an error inside).
fn test(cx: &Context, p: &Predicate, current: &Value) -> Option<bool> {
    let at = Some(current);
    match p {
        Predicate::And(a, b) => match (test(cx, a, current), test(cx, b, current)) {
            (Some(false), _) | (_, Some(false)) => Some(false),
            (Some(true), Some(true)) => Some(true),
            _ => None,
        },
        Predicate::Or(a, b) => match (test(cx, a, current), test(cx, b, current)) {
            (Some(true), _) | (_, Some(true)) => Some(true),
            (Some(false), Some(false)) => Some(false),
            _ => None,
        },
        Predicate::Not(a) => test(cx, a, current).map(|b| !b),
        Predicate::IsUnknown(a) => Some(test(cx, a, current).is_none()),
        Predicate::Exists(e) => eval(cx, e, at, None).ok().map(|items| !items.is_empty()),
        Predicate::StartsWith(l, r) => {
            let (l, r) = (eval(cx, l, at, None).ok()?, eval(cx, r, at, None).ok()?);
            let prefix = match r.as_slice() {
                [Value::String(s)] => s.clone(),
                _ => return None,
            };
            let mut unknown = false;
            for v in unwrapped(cx, l) {
                match v {
                    Value::String(s) if s.starts_with(&prefix) => return Some(true),
                    Value::String(_) => {}
                    _ => unknown = true,
                }
            }
            if unknown {
                None
            } else {
                Some(false)
            }
        }
        Predicate::Compare(l, op, r) => {
            let (l, r) = (eval(cx, l, at, None).ok()?, eval(cx, r, at, None).ok()?);
            let (l, r) = (unwrapped(cx, l), unwrapped(cx, r));
            let mut unknown = false;
            for a in &l {
                for b in &r {
                    match compare(a, op, b) {
                        Some(true) => return Some(true),
                        Some(false) => {}
                        None => unknown = true,
                    }
                }
            }
            if unknown {
                None
            } else {
                Some(false)
            }
        }
    }
}

fn compare(a: &Value, op: &str, b: &Value) -> Option<bool> {
    use std::cmp::Ordering;
    let ordering = match (a, b) {
        (Value::Number(x), Value::Number(y)) => x.as_f64()?.partial_cmp(&y.as_f64()?)?,
        (Value::String(x), Value::String(y)) => x.cmp(y),
        (Value::Bool(x), Value::Bool(y)) => x.cmp(y),
        (Value::Null, Value::Null) => Ordering::Equal,
        (Value::Null, _) | (_, Value::Null) => {
            return match op {
                "==" | "=" => Some(false),
                "!=" | "<>" => Some(true),
                _ => Some(false),
            };
        }
        _ => return None,
    };
    Some(match op {
        "==" | "=" => ordering == Ordering::Equal,
        "!=" | "<>" => ordering != Ordering::Equal,
        "<" => ordering == Ordering::Less,
        "<=" => ordering != Ordering::Greater,
        ">" => ordering == Ordering::Greater,
        _ => ordering != Ordering::Less,
    })
}
