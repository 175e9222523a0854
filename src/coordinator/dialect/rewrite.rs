//! Rewrites of a parsed statement into what DataFusion plans with Trino's meaning
//! (the calls renamed or reshaped are in `calls`):
//! digit separators leave numbers (`1_000` is 1000),
//! `date_add` with literal arguments becomes an interval addition,
//! `IF(c, a[, b])` becomes a `CASE` (its branches are evaluated only when taken, as
//! Trino's are), a timestamp literal with a zone becomes that instant in that zone
//! (DataFusion would drop the zone), one without seconds gets them, and
//! `DECIMAL '...'` gets the precision and scale of its digits (DataFusion's is
//! `decimal(38,10)` whatever the literal), `JSON '...'` is the text parsed, a
//! cast to `CHAR(n)` pads to its length, and `EXISTS (SELECT t.* ...)` selects `1`.

use std::ops::ControlFlow;

use datafusion::arrow::datatypes::{DataType as ArrowType, TimeUnit};
use datafusion::common::{plan_datafusion_err, plan_err, DataFusionError, Result};
use datafusion::sql::parser::Statement;
use datafusion::sql::sqlparser::ast::helpers::attached_token::AttachedToken;
use datafusion::sql::sqlparser::ast::{
    visit_expressions_mut, CaseWhen, CharacterLength, DataType, Expr, FunctionArg, FunctionArgExpr, FunctionArguments,
    GroupByExpr, Query, SelectItem, SetExpr, TimezoneInfo, Value,
};
use datafusion::sql::sqlparser::parser::Parser;

use super::SessionValues;

/// Applies every rewrite to `statement` in place, in `session`.
pub fn statement(statement: &mut Statement, session: &SessionValues) -> Result<()> {
    let flow = match statement {
        Statement::Statement(s) => {
            let view = matches!(s.as_ref(), datafusion::sql::sqlparser::ast::Statement::CreateView(_));
            let session = if view { &session.for_view() } else { session };
            visit_expressions_mut(s.as_mut(), |e| {
                expression(e, session).map_or_else(ControlFlow::Break, ControlFlow::Continue)
            })
        }
        Statement::Explain(explain) => return self::statement(explain.statement.as_mut(), session),
        _ => ControlFlow::Continue(()),
    };
    match flow {
        ControlFlow::Break(e) => Err(e),
        ControlFlow::Continue(()) => Ok(()),
    }
}

fn expression(expr: &mut Expr, session: &SessionValues) -> Result<()> {
    let replacement = match &*expr {
        Expr::Function(f) if f.name.0.len() == 1 && f.name.to_string().eq_ignore_ascii_case("if") => if_to_case(f)?,
        Expr::Function(f) if f.name.0.len() == 1 && f.name.to_string().eq_ignore_ascii_case("date_add") => date_add(f)?,
        Expr::Function(f) => super::calls::call(f, session)?,
        Expr::Lambda(l) => {
            let mut l = l.clone();
            super::calls::lambda_fields(&mut l)?;
            Some(Expr::Lambda(l))
        }
        // Digit separators: `1_000` is 1000.
        Expr::Value(v) => match &v.value {
            Value::Number(n, long) if n.contains('_') => {
                Some(Expr::Value(Value::Number(n.replace('_', ""), *long).with_empty_span()))
            }
            // `U&'\+01F600'`: the parser decoded the escapes; it is a string.
            Value::UnicodeStringLiteral(s) => Some(Expr::Value(Value::SingleQuotedString(s.clone()).with_empty_span())),
            _ => None,
        },
        Expr::Interval(i) => year_month_interval(i)?,
        Expr::Exists { subquery, negated } => {
            exists_of_rows(subquery).map(|subquery| Expr::Exists { subquery: Box::new(subquery), negated: *negated })
        }
        // A row's field after an expression or a subscript (`CAST(r AS ROW(x int)).x`,
        // `a.b[1].c`): DataFusion takes only a column path's dots, but reads a field
        // by name in brackets.
        Expr::CompoundFieldAccess { root, access_chain } if access_chain.iter().any(is_dot) => {
            let path = matches!(root.as_ref(), Expr::Identifier(_) | Expr::CompoundIdentifier(_));
            Some(Expr::CompoundFieldAccess { root: root.clone(), access_chain: bracketed(access_chain, path) })
        }
        // Trino's `CHAR(n)` pads with spaces (and cuts) to its length; DataFusion's is varchar.
        Expr::Cast {
            kind,
            expr: inner,
            data_type: DataType::Char(Some(CharacterLength::IntegerLength { length, .. })),
            format: None,
            array: false,
        } => {
            let varchar = Expr::Cast {
                kind: kind.clone(),
                expr: inner.clone(),
                data_type: DataType::Varchar(None),
                array: false,
                format: None,
            };
            let mut call = parse_expr(&format!("rpad(x, {length})"))?;
            if let Expr::Function(f) = &mut call {
                if let FunctionArguments::List(list) = &mut f.args {
                    list.args[0] = FunctionArg::Unnamed(FunctionArgExpr::Expr(varchar));
                }
            }
            Some(call)
        }
        Expr::TypedString(t) => match (&t.data_type, string_value(&t.value.value)) {
            (DataType::Timestamp(None, TimezoneInfo::None), Some(text)) => timestamp_literal(text)?,
            (DataType::Decimal(_), Some(text)) => decimal_literal(text)?,
            // `JSON '[1, 2]'` is the parsed value; a cast would make it a JSON string.
            (DataType::JSON, Some(text)) => Some(parse_expr(&format!("json_parse({})", quoted(text)))?),
            _ => None,
        },
        _ => None,
    };
    if let Some(r) = replacement {
        *expr = r;
    }
    Ok(())
}

/// An `EXISTS` whose subquery selects only stars (`SELECT t.*`, `SELECT *`) as the same
/// subquery selecting `1`: whether a row exists does not depend on its columns, and a
/// star naming an outer relation (`EXISTS (SELECT t.* FROM u WHERE u.k = t.k)`), which
/// Trino takes, DataFusion expands against the subquery's own relations only. Without
/// `GROUP BY` or `HAVING` the select has as many rows whatever it selects.
fn exists_of_rows(subquery: &Query) -> Option<Query> {
    let SetExpr::Select(select) = subquery.body.as_ref() else { return None };
    let stars = !select.projection.is_empty()
        && select.projection.iter().all(|i| matches!(i, SelectItem::Wildcard(_) | SelectItem::QualifiedWildcard(..)));
    let grouped = !matches!(&select.group_by, GroupByExpr::Expressions(e, m) if e.is_empty() && m.is_empty());
    if !stars || grouped || select.having.is_some() {
        return None;
    }
    let mut select = select.clone();
    select.projection = vec![SelectItem::UnnamedExpr(Expr::value(Value::Number("1".into(), false)))];
    Some(Query { body: Box::new(SetExpr::Select(select)), ..subquery.clone() })
}

fn string_value(v: &Value) -> Option<&str> {
    match v {
        Value::SingleQuotedString(s) | Value::DoubleQuotedString(s) => Some(s),
        _ => None,
    }
}

/// An expression of Trino's dialect, from text this module wrote.
pub(super) fn parse_expr(text: &str) -> Result<Expr> {
    Ok(Parser::new(&super::TrinoDialect).try_with_sql(text)?.parse_expr()?)
}

fn quoted(text: &str) -> String {
    format!("'{}'", text.replace('\'', "''"))
}

/// `INTERVAL '3' YEAR`, `INTERVAL '5' MONTH`, `INTERVAL '1-2' YEAR TO MONTH`: Trino's
/// `interval year to month`, where DataFusion makes every interval a month-day-nano one
/// (and a sum of two prints as `41 mons`).
fn year_month_interval(i: &datafusion::sql::sqlparser::ast::Interval) -> Result<Option<Expr>> {
    use datafusion::sql::sqlparser::ast::DateTimeField;
    let Expr::Value(v) = i.value.as_ref() else { return Ok(None) };
    let Some(text) = string_value(&v.value) else { return Ok(None) };
    let text = text.trim();
    let (negative, digits) = text.strip_prefix('-').map_or((false, text), |d| (true, d));
    let months = match (&i.leading_field, &i.last_field) {
        (Some(DateTimeField::Year), None) => digits.parse::<i64>().ok().map(|y| y * 12),
        (Some(DateTimeField::Month), None) => digits.parse::<i64>().ok(),
        (Some(DateTimeField::Year), Some(DateTimeField::Month)) => {
            digits.split_once('-').and_then(|(y, m)| Some(y.parse::<i64>().ok()? * 12 + m.parse::<i64>().ok()?))
        }
        _ => return Ok(None),
    };
    let Some(months) = months else { return Ok(None) };
    let months = if negative { -months } else { months };
    parse_expr(&format!("arrow_cast('{months} months', 'Interval(YearMonth)')")).map(Some)
}

fn if_to_case(f: &datafusion::sql::sqlparser::ast::Function) -> Result<Option<Expr>> {
    let FunctionArguments::List(list) = &f.args else { return Ok(None) };
    let mut args = Vec::with_capacity(list.args.len());
    for arg in &list.args {
        match arg {
            FunctionArg::Unnamed(FunctionArgExpr::Expr(e)) => args.push(e.clone()),
            _ => return plan_err!("IF takes a condition and one or two values"),
        }
    }
    let mut args = args.into_iter();
    let (Some(condition), Some(result), rest) = (args.next(), args.next(), args.next()) else {
        return plan_err!("IF takes a condition and one or two values");
    };
    if args.next().is_some() {
        return plan_err!("IF takes a condition and one or two values");
    }
    Ok(Some(Expr::Case {
        case_token: AttachedToken::empty(),
        end_token: AttachedToken::empty(),
        operand: None,
        conditions: vec![CaseWhen { condition, result }],
        else_result: rest.map(Box::new),
    }))
}

/// `date_add('day', -1, x)` as `x + INTERVAL '-1 day'`, when the unit and the amount
/// are literals (Trino's units; a week is 7 days, a quarter 3 months). Another form is
/// left as written, and fails as an unknown function.
fn date_add(f: &datafusion::sql::sqlparser::ast::Function) -> Result<Option<Expr>> {
    let FunctionArguments::List(list) = &f.args else { return Ok(None) };
    let args: Vec<&Expr> = list
        .args
        .iter()
        .filter_map(|a| if let FunctionArg::Unnamed(FunctionArgExpr::Expr(e)) = a { Some(e) } else { None })
        .collect();
    let [unit, amount, value] = args.as_slice() else { return Ok(None) };
    let Expr::Value(unit) = unit else { return Ok(None) };
    let Some(unit) = string_value(&unit.value) else { return Ok(None) };
    let number = |e: &Expr| match e {
        Expr::Value(v) => match &v.value {
            Value::Number(n, _) => n.parse::<i64>().ok(),
            _ => None,
        },
        _ => None,
    };
    let amount = match amount {
        Expr::UnaryOp { op: datafusion::sql::sqlparser::ast::UnaryOperator::Minus, expr } => number(expr).map(|n| -n),
        e => number(e),
    };
    let Some(amount) = amount else { return Ok(None) };
    let (amount, unit) = match unit.to_lowercase().as_str() {
        "millisecond" | "second" | "minute" | "hour" | "day" | "month" | "year" => (amount, unit.to_lowercase()),
        "week" => (amount * 7, "day".into()),
        "quarter" => (amount * 3, "month".into()),
        other => return plan_err!("'{other}' is not a valid date_add unit"),
    };
    let interval = parse_expr(&format!("INTERVAL '{amount} {unit}'"))?;
    Ok(Some(Expr::BinaryOp {
        left: Box::new(Expr::Nested(Box::new((*value).clone()))),
        op: datafusion::sql::sqlparser::ast::BinaryOperator::Plus,
        right: Box::new(interval),
    }))
}

/// A timestamp literal in Trino's form, `YYYY-MM-DD[ HH:MM[:SS[.fraction]]][ zone]`:
/// `date time` with seconds, the fraction's digits, and the zone if any. Another
/// form (`2020-01-01T10:00:00`) is left to DataFusion's reading.
fn timestamp_parts(text: &str) -> Option<(String, usize, Option<String>)> {
    let text = text.trim();
    let (date, rest) = text.split_once(' ').unwrap_or((text, ""));
    let date_shaped = date.len() >= 8 && date.chars().all(|c| c.is_ascii_digit() || c == '-');
    if !date_shaped {
        return None;
    }
    let rest = rest.trim_start();
    let time_len = rest.find(|c: char| !(c.is_ascii_digit() || c == ':' || c == '.')).unwrap_or(rest.len());
    let (time, zone) = rest.split_at(time_len);
    let zone = zone.trim();
    let mut time = time.to_string();
    match time.matches(':').count() {
        0 if time.is_empty() && zone.is_empty() => time = "00:00:00".into(),
        1 => time.push_str(":00"),
        2 => {}
        _ => return None,
    }
    let digits = time.split_once('.').map_or(0, |(_, f)| f.len());
    let zone = match zone {
        "" => None,
        "Z" => Some("+00:00".to_string()),
        z => Some(z.to_string()),
    };
    Some((format!("{date} {time}"), digits, zone))
}

fn timestamp_literal(text: &str) -> Result<Option<Expr>> {
    let Some((local, digits, zone)) = timestamp_parts(text) else { return Ok(None) };
    let Some(zone) = zone else {
        if local == text.trim() {
            return Ok(None);
        }
        return parse_expr(&format!("TIMESTAMP {}", quoted(&local))).map(Some);
    };
    if digits > 9 {
        return plan_err!("timestamp literal '{text}' has more than 9 digits of fraction");
    }
    zone_exists(&zone).map_err(|_| plan_datafusion_err!("Time zone not supported: {zone}"))?;
    let unit = match digits {
        0..=3 => TimeUnit::Millisecond,
        4..=6 => TimeUnit::Microsecond,
        _ => TimeUnit::Nanosecond,
    };
    let arrow = ArrowType::Timestamp(unit, Some(zone.as_str().into()));
    parse_expr(&format!("arrow_cast({}, {})", quoted(&local), quoted(&arrow.to_string()))).map(Some)
}

fn zone_exists(zone: &str) -> Result<()> {
    zone.parse::<datafusion::arrow::array::timezone::Tz>().map(|_| ()).map_err(DataFusionError::from)
}

/// `DECIMAL '12.30'` as `CAST('12.30' AS DECIMAL(4, 2))`: Trino's literal has the
/// precision and scale of its digits.
fn decimal_literal(text: &str) -> Result<Option<Expr>> {
    let t = text.trim();
    let unsigned = t.strip_prefix(['-', '+']).unwrap_or(t);
    let (int, frac) = unsigned.split_once('.').unwrap_or((unsigned, ""));
    if !(int.chars().all(|c| c.is_ascii_digit()) && frac.chars().all(|c| c.is_ascii_digit()))
        || (int.is_empty() && frac.is_empty())
    {
        return Err(plan_datafusion_err!("'{text}' is not a valid decimal literal"));
    }
    // Every digit written counts, leading zeros too: `DECIMAL '007.5'` is decimal(4,1).
    let precision = (int.len() + frac.len()).max(1);
    if precision > 38 {
        return plan_err!("decimal literal '{text}' has more than 38 digits");
    }
    parse_expr(&format!("CAST({} AS DECIMAL({precision}, {}))", quoted(t), frac.len())).map(Some)
}

fn is_dot(access: &datafusion::sql::sqlparser::ast::AccessExpr) -> bool {
    matches!(access, datafusion::sql::sqlparser::ast::AccessExpr::Dot(_))
}

/// `chain` with each `.field` written `['field']` (an unquoted name lower case, as
/// Trino's names of a row's fields are). After a root that is a name (`path`), the
/// dots before the first subscript stay: they name a column (`t.c`), which DataFusion
/// resolves itself.
fn bracketed(
    chain: &[datafusion::sql::sqlparser::ast::AccessExpr],
    path: bool,
) -> Vec<datafusion::sql::sqlparser::ast::AccessExpr> {
    use datafusion::sql::sqlparser::ast::{AccessExpr, Ident, Subscript};
    let field = |i: &Ident| {
        let name = if i.quote_style.is_some() { i.value.clone() } else { i.value.to_lowercase() };
        AccessExpr::Subscript(Subscript::Index {
            index: Expr::Value(Value::SingleQuotedString(name).with_empty_span()),
        })
    };
    let mut out = Vec::with_capacity(chain.len());
    let mut leading = path;
    for access in chain {
        leading &= is_dot(access);
        match access {
            _ if leading => out.push(access.clone()),
            AccessExpr::Dot(Expr::Identifier(i)) => out.push(field(i)),
            AccessExpr::Dot(Expr::CompoundIdentifier(parts)) => out.extend(parts.iter().map(field)),
            other => out.push(other.clone()),
        }
    }
    out
}
