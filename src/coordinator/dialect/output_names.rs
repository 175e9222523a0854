//! Trino's names for unnamed select items: an expression that is not a column
//! reference and has no alias is `_col` and its position (`SELECT 1, a, a + 1` has
//! the columns `_col0`, `a`, `_col2`), in every select of a statement, as
//! `dialect::parse_in` hands it to DataFusion.
//!
//! Clients see the names Trino would give, and DataFusion's rule that a projection's
//! names be unique no longer refuses what Trino takes: `SELECT sum(x), sum(x)` or two
//! scalar subqueries `SELECT (SELECT count(*) FROM a), (SELECT count(*) FROM b)`
//! would both be named by their text. An `ORDER BY` or `HAVING` written with the
//! same expression still finds it: DataFusion matches them to the aliased item.
//!
//! A `VALUES` list's columns are anonymous in Trino, `_col0`, `_col1`, ... as any
//! unnamed column, where DataFusion names them `column1`, `column2`, ...: a statement
//! that is a `VALUES` (or a set operation of them) is selected from under Trino's
//! names. A `VALUES` inside a query keeps DataFusion's names, which SQL written for
//! DataFusion reads (`SELECT column1 FROM (VALUES 1)`) and Trino's SQL cannot name.

use std::ops::ControlFlow;

use datafusion::sql::sqlparser::ast::{
    Expr, Ident, OrderByKind, Query, SelectItem, SetExpr, Statement, TableFactor, Value, VisitMut, VisitorMut,
};
use datafusion::sql::sqlparser::parser::Parser;

/// Names the unnamed items of every select in `statement`.
pub fn name(statement: &mut Statement) {
    if let Statement::Query(query) = statement {
        name_values(query.body.as_mut());
    }
    let _ = statement.visit(&mut Namer);
}

struct Namer;

impl VisitorMut for Namer {
    type Break = ();

    fn pre_visit_query(&mut self, query: &mut Query) -> ControlFlow<Self::Break> {
        let named = name_set(query.body.as_mut());
        // An `ORDER BY` expression written as a select item is that item (a `SELECT
        // DISTINCT` can only sort by its items): it names the item's new name.
        if let (false, Some(order_by)) = (named.is_empty(), query.order_by.as_mut()) {
            if let OrderByKind::Expressions(items) = &mut order_by.kind {
                for item in items {
                    if let Some((_, alias)) = named.iter().find(|(e, _)| *e == item.expr) {
                        item.expr = Expr::Identifier(alias.clone());
                    }
                }
            }
        }
        ControlFlow::Continue(())
    }
}

/// Each `VALUES` of a statement's set expression (not of a query nested in it) as a
/// select of its columns under Trino's names.
fn name_values(set: &mut SetExpr) {
    match set {
        SetExpr::Values(values) => {
            let Some(width) = values.rows.first().map(|r| r.len()).filter(|w| *w > 0) else { return };
            let items: Vec<String> = (0..width).map(|i| format!("column{} AS _col{i}", i + 1)).collect();
            let text = format!("SELECT {} FROM (VALUES (0)) AS __values", items.join(", "));
            let Ok(mut select) =
                Parser::new(&super::TrinoDialect).try_with_sql(&text).and_then(|mut p| p.parse_query())
            else {
                return;
            };
            {
                let SetExpr::Select(s) = select.body.as_mut() else { return };
                let Some(TableFactor::Derived { subquery, .. }) = s.from.first_mut().map(|f| &mut f.relation) else {
                    return;
                };
                std::mem::swap(subquery.body.as_mut(), set);
            }
            *set = *select.body;
        }
        SetExpr::SetOperation { left, right, .. } => {
            name_values(left);
            name_values(right);
        }
        _ => {}
    }
}

/// Names the unnamed items of the selects of a set expression (a query nested in it
/// is visited on its own); of a select, the items named and their names.
fn name_set(set: &mut SetExpr) -> Vec<(Expr, Ident)> {
    match set {
        SetExpr::Select(select) => {
            let mut named = Vec::new();
            // A star with column aliases is as many columns as it has names.
            let widths: Vec<usize> = select.projection.iter().map(width).collect();
            for (k, item) in select.projection.iter_mut().enumerate() {
                let position: usize = widths[..k].iter().sum();
                if let SelectItem::UnnamedExpr(expr) = item {
                    if !is_reference(expr) {
                        let expr = std::mem::replace(expr, Expr::value(Value::Null));
                        let alias = Ident::new(format!("_col{position}"));
                        named.push((expr.clone(), alias.clone()));
                        *item = SelectItem::ExprWithAlias { expr, alias };
                    }
                }
            }
            repeated_names_apart(&mut select.projection);
            named
        }
        SetExpr::SetOperation { left, right, .. } => {
            name_set(left.as_mut());
            name_set(right.as_mut());
            Vec::new()
        }
        _ => Vec::new(),
    }
}

/// How many columns an item is, where the text says: a star is counted as one.
pub(crate) fn width(item: &SelectItem) -> usize {
    match item {
        SelectItem::ExprWithAliases { aliases, .. } => aliases.len(),
        _ => 1,
    }
}

/// What sets a repeated output name apart inside the plan (`SELECT a, a` is Trino's
/// but two columns of one name are not DataFusion's): the second `a` is `a` + this +
/// its position, and a client is shown `client_name`'s `a`.
const REPEATED: char = '\u{1f}';

/// The name a client sees of a plan's column: without what set a repeat apart.
pub fn client_name(name: &str) -> &str {
    name.split(REPEATED).next().unwrap_or(name)
}

/// An item's output name, where the text gives it: its alias, or the column named.
fn output_name(item: &SelectItem) -> Option<String> {
    match item {
        SelectItem::ExprWithAlias { alias, .. } => Some(alias.value.to_lowercase()),
        SelectItem::UnnamedExpr(Expr::Identifier(i)) => Some(i.value.to_lowercase()),
        SelectItem::UnnamedExpr(Expr::CompoundIdentifier(parts)) => parts.last().map(|i| i.value.to_lowercase()),
        _ => None,
    }
}

/// Aliases each item whose output name an earlier item has, apart (see `REPEATED`).
/// A select with a wildcard is left alone: its names are not in the text.
pub(crate) fn repeated_names_apart(items: &mut [SelectItem]) {
    if items.iter().any(|i| matches!(i, SelectItem::Wildcard(_) | SelectItem::QualifiedWildcard(..))) {
        return;
    }
    let mut seen = std::collections::HashSet::new();
    for (position, item) in items.iter_mut().enumerate() {
        let Some(name) = output_name(item) else { continue };
        if seen.insert(name.clone()) {
            continue;
        }
        let alias = Ident::with_quote('"', format!("{name}{REPEATED}{position}"));
        let expr = match std::mem::replace(item, SelectItem::UnnamedExpr(Expr::value(Value::Null))) {
            SelectItem::ExprWithAlias { expr, .. } | SelectItem::UnnamedExpr(expr) => expr,
            other => unreachable!("named items only: {other}"),
        };
        *item = SelectItem::ExprWithAlias { expr, alias };
    }
}

/// Whether `expr` names a column (or a field of one), which keeps its name, or is
/// named otherwise.
fn is_reference(expr: &Expr) -> bool {
    match expr {
        Expr::Identifier(_) | Expr::CompoundIdentifier(_) => true,
        Expr::Nested(inner) => is_reference(inner),
        // DataFusion's `unnest` in a select list names the columns it makes itself.
        Expr::Function(f) => f.name.to_string().eq_ignore_ascii_case("unnest"),
        _ => false,
    }
}
