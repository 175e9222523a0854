//! Trino's query clauses DataFusion 55 does not parse into a plan, written as the ones
//! it does, as `dialect::parse_in` hands the statement to DataFusion:
//! - `FETCH FIRST n ROWS ONLY` (and `FETCH NEXT`, `ROW`) is `LIMIT n`, after any
//!   `OFFSET`; `PERCENT` stays DataFusion's refusal;
//! - `OFFSET m FETCH FIRST n ROWS WITH TIES` is the `ORDER BY` it needs with the mark
//!   `__fetch_with_ties(m, n)` at its end, which `plan::fetch_ties` plans;
//! - `GROUP BY ()`, the empty grouping set, groups by nothing: it is left out of the
//!   `GROUP BY` list, which without other items is the whole input's one group;
//! - `GROUP BY DISTINCT` (marked by `tokens`) is the cross product of its elements'
//!   grouping sets, each set once, as an explicit `GROUPING SETS` list: `ROLLUP (a,
//!   b), ROLLUP (a)` has `(a, b)` twice and `(a)` three times, `DISTINCT` once each.

use std::ops::ControlFlow;

use datafusion::common::{plan_datafusion_err, DataFusionError, Result};
use datafusion::sql::sqlparser::ast::{
    Expr, GroupByExpr, LimitClause, Offset, OrderByExpr, OrderByKind, OrderByOptions, Query, SetExpr, VisitMut,
    VisitorMut,
};

use crate::functions::fetch_ties;

/// Rewrites the clauses of every query in `statement`.
pub fn rewrite<V: VisitMut>(statement: &mut V) -> Result<()> {
    match statement.visit(&mut Clauses) {
        ControlFlow::Break(e) => Err(e),
        ControlFlow::Continue(()) => Ok(()),
    }
}

struct Clauses;

impl VisitorMut for Clauses {
    type Break = DataFusionError;

    fn pre_visit_query(&mut self, query: &mut Query) -> ControlFlow<Self::Break> {
        if let Err(e) = fetch_as_limit(query) {
            return ControlFlow::Break(e);
        }
        empty_groups(query.body.as_mut());
        ControlFlow::Continue(())
    }
}

fn fetch_as_limit(query: &mut Query) -> Result<()> {
    let Some(fetch) = query.fetch.as_ref() else { return Ok(()) };
    if fetch.percent {
        return Ok(());
    }
    let with_ties = fetch.with_ties;
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
            return Ok(());
        }
    };
    query.fetch = None;
    match with_ties {
        true => ties_marked(query, quantity, offset),
        false => {
            query.limit_clause = Some(LimitClause::LimitOffset { limit: Some(quantity), offset, limit_by: vec![] });
            Ok(())
        }
    }
}

/// `query`'s `ORDER BY` with the mark of `OFFSET offset FETCH FIRST quantity ROWS WITH
/// TIES` at its end.
fn ties_marked(query: &mut Query, quantity: Expr, offset: Option<Offset>) -> Result<()> {
    let Some(OrderByKind::Expressions(items)) = query.order_by.as_mut().map(|o| &mut o.kind) else {
        return Err(plan_datafusion_err!("FETCH FIRST WITH TIES clause requires ORDER BY"));
    };
    let offset = offset.map_or_else(|| "0".to_string(), |o| o.value.to_string());
    let mark = super::rewrite::parse_expr(&format!("{}({offset}, {quantity})", fetch_ties::NAME))?;
    let options = OrderByOptions { asc: None, nulls_first: None };
    items.push(OrderByExpr { expr: mark, options, with_fill: None });
    Ok(())
}

fn empty_groups(set: &mut SetExpr) {
    match set {
        SetExpr::Select(select) => {
            if let GroupByExpr::Expressions(items, _) = &mut select.group_by {
                items.retain(|e| !matches!(e, Expr::Tuple(t) if t.is_empty()));
                distinct_sets(items);
            }
        }
        SetExpr::SetOperation { left, right, .. } => {
            empty_groups(left.as_mut());
            empty_groups(right.as_mut());
        }
        _ => {}
    }
}

/// The grouping sets of one element of a `GROUP BY` list.
fn sets_of(element: &Expr) -> Vec<Vec<Expr>> {
    match element {
        Expr::Rollup(groups) => (0..=groups.len()).rev().map(|n| groups[..n].concat()).collect(),
        Expr::Cube(groups) => (0..1usize << groups.len())
            .rev()
            .map(|mask| (0..groups.len()).filter(|i| mask & (1 << i) != 0).flat_map(|i| groups[i].clone()).collect())
            .collect(),
        Expr::GroupingSets(sets) => sets.clone(),
        other => vec![vec![other.clone()]],
    }
}

/// A `GROUP BY DISTINCT` list as its distinct grouping sets; any other list as it is.
fn distinct_sets(items: &mut Vec<Expr>) {
    let marked = matches!(items.first(), Some(Expr::Identifier(i)) if i.value == super::tokens::DISTINCT_GROUPING);
    if !marked {
        return;
    }
    items.remove(0);
    let mut product: Vec<Vec<Expr>> = vec![vec![]];
    for element in items.iter() {
        let sets = sets_of(element);
        product = product
            .iter()
            .flat_map(|left| sets.iter().map(move |right| left.iter().chain(right).cloned().collect()))
            .collect();
    }
    // A set is its distinct expressions, in any order.
    let mut seen = std::collections::HashSet::new();
    let mut distinct = Vec::new();
    for set in product {
        let mut unique: Vec<Expr> = Vec::new();
        for e in set {
            if !unique.contains(&e) {
                unique.push(e);
            }
        }
        let mut key: Vec<String> = unique.iter().map(ToString::to_string).collect();
        key.sort();
        if seen.insert(key) {
            distinct.push(unique);
        }
    }
    *items = vec![Expr::GroupingSets(distinct)];
}
