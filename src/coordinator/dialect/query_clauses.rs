//! Trino's query clauses DataFusion 55 does not parse into a plan, written as the ones
//! it does, as `dialect::parse_in` hands the statement to DataFusion:
//! - `FETCH FIRST n ROWS ONLY` (and `FETCH NEXT`, `ROW`) is `LIMIT n`, after any
//!   `OFFSET`; `WITH TIES` and `PERCENT` stay DataFusion's refusal;
//! - `GROUP BY ()`, the empty grouping set, groups by nothing: it is left out of the
//!   `GROUP BY` list, which without other items is the whole input's one group.

use std::ops::ControlFlow;

use datafusion::sql::sqlparser::ast::{Expr, GroupByExpr, LimitClause, Query, SetExpr, VisitMut, VisitorMut};

/// Rewrites the clauses of every query in `statement`.
pub fn rewrite<V: VisitMut>(statement: &mut V) {
    let _ = statement.visit(&mut Clauses);
}

struct Clauses;

impl VisitorMut for Clauses {
    type Break = ();

    fn pre_visit_query(&mut self, query: &mut Query) -> ControlFlow<Self::Break> {
        fetch_as_limit(query);
        empty_groups(query.body.as_mut());
        ControlFlow::Continue(())
    }
}

fn fetch_as_limit(query: &mut Query) {
    let Some(fetch) = query.fetch.as_ref() else { return };
    if fetch.with_ties || fetch.percent {
        return;
    }
    let quantity = fetch
        .quantity
        .clone()
        .unwrap_or_else(|| Expr::value(datafusion::sql::sqlparser::ast::Value::Number("1".into(), false)));
    let offset = match query.limit_clause.take() {
        Some(LimitClause::LimitOffset { limit: None, offset, limit_by }) if limit_by.is_empty() => offset,
        None => None,
        // A LIMIT and a FETCH both: DataFusion's refusal stays.
        other => {
            query.limit_clause = other;
            return;
        }
    };
    query.fetch = None;
    query.limit_clause = Some(LimitClause::LimitOffset { limit: Some(quantity), offset, limit_by: vec![] });
}

fn empty_groups(set: &mut SetExpr) {
    match set {
        SetExpr::Select(select) => {
            if let GroupByExpr::Expressions(items, _) = &mut select.group_by {
                items.retain(|e| !matches!(e, Expr::Tuple(t) if t.is_empty()));
            }
        }
        SetExpr::SetOperation { left, right, .. } => {
            empty_groups(left.as_mut());
            empty_groups(right.as_mut());
        }
        _ => {}
    }
}
