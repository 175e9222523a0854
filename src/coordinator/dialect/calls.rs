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

use std::ops::ControlFlow;

use datafusion::sql::sqlparser::ast::visit_expressions_mut;

use super::rewrite::parse_expr;
use super::SessionValues;

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
pub fn call(f: &Function, session: &SessionValues) -> Result<Option<Expr>> {
    let time_zone = session.time_zone.as_str();
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
        "current_timezone" if arguments(f).is_empty() => Some(text(time_zone)),
        // The session's values, which Trino's grammar reads without parentheses.
        "current_user" if arguments(f).is_empty() => session.user.as_deref().map(text),
        "current_catalog" if arguments(f).is_empty() => session.catalog.as_deref().map(text),
        "current_schema" if arguments(f).is_empty() => session.schema.as_deref().map(text),
        "current_groups" if arguments(f).is_empty() => session.groups.as_ref().map(|groups| {
            let elem = groups.iter().map(|g| text(g)).collect();
            Expr::Array(datafusion::sql::sqlparser::ast::Array { elem, named: true })
        }),
        _ => reshaped(f, &name, &arguments(f))?,
    })
}

/// A string literal.
fn text(s: &str) -> Expr {
    use datafusion::sql::sqlparser::ast::Value;
    Expr::Value(Value::SingleQuotedString(s.to_string()).with_empty_span())
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
///
/// `min_by`, `max_by` and the forms with a count `n` skip rows whose key is NULL or
/// NaN, as Trino's do (`__nan_as_null` is NULL for NaN); `max(x, n)` is the `n` largest
/// values, largest first; `approx_distinct`'s standard error only tunes Trino's sketch.
const RESHAPED: [(&str, usize, &str); 19] = [
    ("mod", 2, "(({0}) % ({1}))"),
    // The lambda applied to the value, through the array functions' lambdas.
    ("apply", 2, "transform(ARRAY[{0}], {1})[1]"),
    ("count_if", 1, "count(CASE WHEN {0} THEN 1 END)"),
    (
        "max_by",
        2,
        "first_value({0} ORDER BY __nan_as_null({1}) DESC NULLS LAST) FILTER (WHERE __nan_as_null({1}) IS NOT NULL)",
    ),
    (
        "min_by",
        2,
        "first_value({0} ORDER BY __nan_as_null({1}) ASC NULLS LAST) FILTER (WHERE __nan_as_null({1}) IS NOT NULL)",
    ),
    (
        "max_by",
        3,
        "array_slice(array_agg({0} ORDER BY {1} DESC) FILTER (WHERE __nan_as_null({1}) IS NOT NULL), 1, {2})",
    ),
    ("min_by", 3, "array_slice(array_agg({0} ORDER BY {1} ASC) FILTER (WHERE __nan_as_null({1}) IS NOT NULL), 1, {2})"),
    ("max", 2, "array_slice(array_agg({0} ORDER BY {0} DESC) FILTER (WHERE __nan_as_null({0}) IS NOT NULL), 1, {1})"),
    ("min", 2, "array_slice(array_agg({0} ORDER BY {0} ASC) FILTER (WHERE __nan_as_null({0}) IS NOT NULL), 1, {1})"),
    ("approx_distinct", 2, "approx_distinct({0})"),
    ("approx_percentile", 3, "approx_percentile_cont_with_weight({0}, {1}, {2})"),
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

/// The aggregate calls of `RESHAPED`'s texts: the original call's `FILTER` and `OVER`
/// go to them, where they would otherwise be dropped with the original.
const RESHAPED_AGGREGATES: [&str; 6] =
    ["count", "first_value", "avg", "array_agg", "approx_distinct", "approx_percentile_cont_with_weight"];

/// `f`, Trino's `name` of `args`, as `RESHAPED` writes it: the text is parsed with a
/// placeholder for each argument, the call's `FILTER` and `OVER` are put on the
/// text's aggregate, and then the arguments take their placeholders' places (so no
/// call inside an argument is taken for the text's own).
fn reshaped(f: &Function, name: &str, args: &[&Expr]) -> Result<Option<Expr>> {
    let Some((_, _, text)) = RESHAPED.iter().find(|(n, arity, _)| *n == name && *arity == args.len()) else {
        return Ok(None);
    };
    let mut out = text.to_string();
    for i in 0..args.len() {
        out = out.replace(&format!("{{{i}}}"), &format!("\"$arg{i}\""));
    }
    let mut out = parse_expr(&out)?;
    clauses_onto_aggregate(&mut out, f, name)?;
    let flow = visit_expressions_mut(&mut out, |e| {
        if let Expr::Identifier(id) = e {
            if let Some(i) = id.value.strip_prefix("$arg").and_then(|i| i.parse::<usize>().ok()) {
                *e = args[i].clone();
            }
        }
        ControlFlow::<()>::Continue(())
    });
    debug_assert!(flow.is_continue());
    Ok(Some(out))
}

/// Puts `f`'s `FILTER` and `OVER` on the aggregate calls of `template`. An aggregate
/// form the text cannot keep (`DISTINCT`), or a clause on a scalar text, is an error,
/// never a silently different answer.
fn clauses_onto_aggregate(template: &mut Expr, f: &Function, name: &str) -> Result<()> {
    use datafusion::common::plan_err;
    use datafusion::sql::sqlparser::ast::DuplicateTreatment;
    if let FunctionArguments::List(list) = &f.args {
        if list.duplicate_treatment == Some(DuplicateTreatment::Distinct) {
            return plan_err!("{name}(DISTINCT ...) is not supported");
        }
    }
    if f.filter.is_none() && f.over.is_none() {
        return Ok(());
    }
    let mut found = false;
    let flow = visit_expressions_mut(template, |e| {
        if let Expr::Function(g) = e {
            let called = g.name.to_string().to_ascii_lowercase();
            if RESHAPED_AGGREGATES.contains(&called.as_str()) {
                found = true;
                g.over = f.over.clone();
                g.filter = match (g.filter.take(), &f.filter) {
                    // A window takes no FILTER: the text's own is dropped under OVER.
                    (_, _) if f.over.is_some() => f.filter.clone(),
                    (Some(own), Some(user)) => Some(Box::new(Expr::BinaryOp {
                        left: Box::new(Expr::Nested(own)),
                        op: datafusion::sql::sqlparser::ast::BinaryOperator::And,
                        right: Box::new(Expr::Nested(user.clone())),
                    })),
                    (own, user) => own.or_else(|| user.clone()),
                };
            }
        }
        ControlFlow::<()>::Continue(())
    });
    debug_assert!(flow.is_continue());
    if !found {
        return plan_err!("{name} is not an aggregate function: FILTER and OVER do not apply to it");
    }
    Ok(())
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
