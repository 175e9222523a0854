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

use std::ops::ControlFlow;

use datafusion::sql::sqlparser::ast::{
    Expr, Ident, OrderByKind, Query, SelectItem, SetExpr, Value, VisitMut, VisitorMut,
};

/// Names the unnamed items of every select in `statement`.
pub fn name<V: VisitMut>(statement: &mut V) {
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

/// Names the unnamed items of the selects of a set expression (a query nested in it
/// is visited on its own); of a select, the items named and their names.
fn name_set(set: &mut SetExpr) -> Vec<(Expr, Ident)> {
    match set {
        SetExpr::Select(select) => {
            let mut named = Vec::new();
            for (position, item) in select.projection.iter_mut().enumerate() {
                if let SelectItem::UnnamedExpr(expr) = item {
                    if !is_reference(expr) {
                        let expr = std::mem::replace(expr, Expr::value(Value::Null));
                        let alias = Ident::new(format!("_col{position}"));
                        named.push((expr.clone(), alias.clone()));
                        *item = SelectItem::ExprWithAlias { expr, alias };
                    }
                }
            }
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
