//! Trino's calls that DataFusion plans under another name or shape, rewritten in the
//! parsed statement:
//! - a call with a lambda whose name DataFusion gives a scalar function
//!   (`array_sort(a, (x, y) -> ...)`, `regexp_replace(s, p, x -> ...)`) becomes the
//!   higher-order function of that meaning (`array_sort_by`, `regexp_replace_by`):
//!   DataFusion looks scalar functions up first;
//! - `listagg(x, s) WITHIN GROUP (ORDER BY k)` becomes `string_agg(x, s ORDER BY k)`
//!   (an `ON OVERFLOW` clause is dropped: a result has no length limit here);
//! - `reduce_agg(x, s, f, g)` becomes `reduce(array_agg(x) FILTER (WHERE x IS NOT
//!   NULL), s, f, s -> s)`: the input function folds the group's values in order, so
//!   the combine function is not needed;
//! - `TRY(e)` becomes `try_eval(0, _ -> e)`, a lambda, so that `e` is evaluated by the
//!   function that catches its errors;
//! - inside a lambda, `p.f` of a row parameter `p` becomes `p['f']`;
//! - Trino's functions that are DataFusion's under another shape (`RESHAPED`:
//!   `mod(a, b)` is `a % b`, `max_by(x, y)` is `first_value(x ORDER BY y DESC)`,
//!   `histogram(x)` is `array_histogram(array_agg(x))`, ...);
//! - the functions that read the session's time zone (`from_iso8601_timestamp` of a
//!   text without an offset, `at_timezone` of a timestamp without a zone) get it as a
//!   last argument.

use datafusion::common::Result;
use datafusion::sql::sqlparser::ast::{
    Expr, Function, FunctionArg, FunctionArgExpr, FunctionArgumentClause, FunctionArguments, Ident, LambdaFunction,
    ObjectName,
};

use super::rewrite::parse_expr;

fn arguments(f: &Function) -> Vec<&Expr> {
    let FunctionArguments::List(list) = &f.args else { return vec![] };
    list.args
        .iter()
        .filter_map(|a| if let FunctionArg::Unnamed(FunctionArgExpr::Expr(e)) = a { Some(e) } else { None })
        .collect()
}

fn renamed(f: &Function, name: &str) -> Expr {
    let mut out = f.clone();
    out.name = ObjectName::from(vec![Ident::new(name)]);
    Expr::Function(out)
}

/// The replacement of the call `f`, if Trino's meaning needs one.
pub fn call(f: &Function, time_zone: &str) -> Result<Option<Expr>> {
    if f.name.0.len() != 1 {
        return Ok(None);
    }
    let name = f.name.to_string().to_ascii_lowercase();
    let has_lambda = arguments(f).iter().any(|a| matches!(a, Expr::Lambda(_)));
    Ok(match name.as_str() {
        "array_sort" if has_lambda => Some(renamed(f, "array_sort_by")),
        "regexp_replace" if has_lambda => Some(renamed(f, "regexp_replace_by")),
        "listagg" => Some(listagg(f)),
        "reduce_agg" => reduce_agg(f)?,
        "try" => try_call(f)?,
        "from_iso8601_timestamp" | "from_iso8601_timestamp_nanos" if arguments(f).len() == 1 => {
            Some(with_zone(f, time_zone))
        }
        "at_timezone" if arguments(f).len() == 2 => Some(with_zone(f, time_zone)),
        "current_timezone" if arguments(f).is_empty() => {
            Some(parse_expr(&format!("'{}'", time_zone.replace('\'', "''")))?)
        }
        _ => reshaped(&name, &arguments(f))?,
    })
}

/// `f` with the session's time zone as a last argument.
fn with_zone(f: &Function, time_zone: &str) -> Expr {
    use datafusion::sql::sqlparser::ast::Value;
    let mut out = f.clone();
    if let FunctionArguments::List(list) = &mut out.args {
        let zone = Expr::Value(Value::SingleQuotedString(time_zone.to_string()).with_empty_span());
        list.args.push(FunctionArg::Unnamed(FunctionArgExpr::Expr(zone)));
    }
    Expr::Function(out)
}

/// Trino's functions written with DataFusion's: (name, arity, the text with `{0}`,
/// `{1}`, ... for the arguments).
const RESHAPED: [(&str, usize, &str); 12] = [
    ("mod", 2, "(({0}) % ({1}))"),
    ("count_if", 1, "count(CASE WHEN {0} THEN 1 END)"),
    ("max_by", 2, "first_value({0} ORDER BY {1} DESC NULLS LAST)"),
    ("min_by", 2, "first_value({0} ORDER BY {1} ASC NULLS LAST)"),
    ("geometric_mean", 1, "exp(avg(ln({0})))"),
    ("histogram", 1, "array_histogram(array_agg({0}))"),
    ("multimap_agg", 2, "multimap_from_entries(array_agg(struct({0}, {1})))"),
    (
        "map_agg",
        2,
        "transform_values(multimap_from_entries(array_agg(struct({0}, {1}))), (\"$k\", \"$v\") -> \"$v\"[1])",
    ),
    ("date", 1, "CAST({0} AS DATE)"),
    ("slice", 3, "array_slice({0}, {1}, ({1}) + ({2}) - 1)"),
    ("to_utf8", 1, "CAST({0} AS BYTEA)"),
    ("array_last", 1, "array_element({0}, -1)"),
];

fn reshaped(name: &str, args: &[&Expr]) -> Result<Option<Expr>> {
    let Some((_, _, text)) = RESHAPED.iter().find(|(n, arity, _)| *n == name && *arity == args.len()) else {
        return Ok(None);
    };
    let mut out = text.to_string();
    for (i, a) in args.iter().enumerate() {
        out = out.replace(&format!("{{{i}}}"), &a.to_string());
    }
    parse_expr(&out).map(Some)
}

fn listagg(f: &Function) -> Expr {
    let mut out = f.clone();
    out.name = ObjectName::from(vec![Ident::new("string_agg")]);
    if let FunctionArguments::List(list) = &mut out.args {
        list.clauses.retain(|c| !matches!(c, FunctionArgumentClause::OnOverflow(_)));
        if !f.within_group.is_empty() {
            list.clauses.push(FunctionArgumentClause::OrderBy(f.within_group.clone()));
        }
    }
    out.within_group = vec![];
    Expr::Function(out)
}

fn reduce_agg(f: &Function) -> Result<Option<Expr>> {
    let [value, initial, input, _combine] = arguments(f)[..] else { return Ok(None) };
    let text = format!(
        "reduce(array_agg({value}) FILTER (WHERE ({value}) IS NOT NULL), {initial}, {input}, \"$state\" -> \"$state\")"
    );
    Ok(Some(parse_expr(&text)?))
}

fn try_call(f: &Function) -> Result<Option<Expr>> {
    let [inner] = arguments(f)[..] else { return Ok(None) };
    let mut call = parse_expr("try_eval(0, \"$try\" -> 0)")?;
    if let Expr::Function(g) = &mut call {
        if let FunctionArguments::List(list) = &mut g.args {
            if let Some(FunctionArg::Unnamed(FunctionArgExpr::Expr(Expr::Lambda(l)))) = list.args.get_mut(1) {
                *l.body = inner.clone();
            }
        }
    }
    Ok(Some(call))
}

/// `p.f` inside `lambda`, for each parameter `p`, as `p['f']`.
pub fn lambda_fields(lambda: &mut LambdaFunction) -> Result<()> {
    use datafusion::sql::sqlparser::ast::{visit_expressions_mut, OneOrManyWithParens};
    use std::ops::ControlFlow;
    let params: Vec<String> = match &lambda.params {
        OneOrManyWithParens::One(p) => vec![p.name.value.clone()],
        OneOrManyWithParens::Many(ps) => ps.iter().map(|p| p.name.value.clone()).collect(),
    };
    let flow = visit_expressions_mut(lambda.body.as_mut(), |e| {
        if let Expr::CompoundIdentifier(parts) = e {
            if parts.len() >= 2 && params.iter().any(|p| *p == parts[0].value) {
                let path: String = parts[1..].iter().map(|f| format!("['{}']", f.value.replace('\'', "''"))).collect();
                match parse_expr(&format!("\"{}\"{path}", parts[0].value)) {
                    Ok(access) => *e = access,
                    Err(err) => return ControlFlow::Break(err),
                }
            }
        }
        ControlFlow::Continue(())
    });
    match flow {
        ControlFlow::Break(e) => Err(e),
        ControlFlow::Continue(()) => Ok(()),
    }
}
