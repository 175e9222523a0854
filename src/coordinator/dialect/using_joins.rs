//! Unqualified columns of a chain of inner joins `USING` the same column. In
//! `a JOIN b USING (k) JOIN c USING (k)` the column `k` is one column to SQL, but
//! DataFusion keeps each `USING` as its own set of equal columns and finds `k` in
//! three relations no single set covers: "Ambiguous reference". (dbt-trino's
//! `docs generate` joins three relations that way.) For inner joins every `k` holds
//! the same value, so a bare `k` in the select's own expressions is written as the
//! first relation's `a.k`, which is what DataFusion would pick for one `USING`. Only
//! chains whose first join names the column are rewritten: there the first
//! relation surely has it.
//!
//! A `USING` column is also no longer either relation's own, in Trino: `a.*` after `a
//! JOIN b USING (k)` is `a`'s other columns (`*` has `k` once). `a.*` and `b.*` are
//! written with `EXCLUDE (k)` for the relations known to hold it: the relation a
//! `USING` join adds, and the one it joins when it is the first join of its `FROM`
//! item (further left, which relation of a chain has `k` is the schema's to say).

use std::collections::HashSet;
use std::ops::ControlFlow;

use datafusion::sql::sqlparser::ast::{
    ExcludeSelectItem, Expr, GroupByExpr, Ident, JoinConstraint, JoinOperator, ObjectName, ObjectNamePart, Query,
    Select, SelectItem, SelectItemQualifiedWildcardKind, TableFactor, VisitMut, VisitorMut, WildcardAdditionalOptions,
};

/// A name as the planner compares it: unquoted names in lower case.
pub fn normalized(i: &Ident) -> String {
    match i.quote_style {
        Some(_) => i.value.clone(),
        None => i.value.to_lowercase(),
    }
}

/// The name the first relation is known by in the select (its alias, or its
/// table's last name part).
fn known_as(factor: &TableFactor) -> Option<Ident> {
    match factor {
        TableFactor::Table { alias: Some(a), .. } | TableFactor::Derived { alias: Some(a), .. } => Some(a.name.clone()),
        TableFactor::Table { name, alias: None, .. } => match name.0.last() {
            Some(ObjectNamePart::Identifier(i)) => Some(i.clone()),
            _ => None,
        },
        _ => None,
    }
}

/// The columns to qualify in `select`, and with what.
fn targets(select: &Select) -> Option<(HashSet<String>, Ident)> {
    let [from] = select.from.as_slice() else { return None };
    let mut first_join = HashSet::new();
    let mut later = HashSet::new();
    for (i, join) in from.joins.iter().enumerate() {
        let constraint = match &join.join_operator {
            JoinOperator::Join(c) | JoinOperator::Inner(c) => c,
            // An outer join's USING column is not every relation's value.
            other if matches!(other_constraint(other), Some(JoinConstraint::Using(_))) => return None,
            _ => continue,
        };
        let JoinConstraint::Using(names) = constraint else { continue };
        for n in names {
            if let Some(ObjectNamePart::Identifier(id)) = n.0.last() {
                match i {
                    0 => first_join.insert(normalized(id)),
                    _ => later.insert(normalized(id)),
                };
            }
        }
    }
    let both: HashSet<String> = first_join.intersection(&later).cloned().collect();
    match both.is_empty() {
        true => None,
        false => Some((both, known_as(&from.relation)?)),
    }
}

/// The `USING` columns each relation known by name gives up to its join, by the
/// relation's name as the planner compares it.
fn using_columns(select: &Select) -> Vec<(String, Vec<ObjectName>)> {
    let mut out = Vec::new();
    for item in &select.from {
        for (i, join) in item.joins.iter().enumerate() {
            let constraint = match &join.join_operator {
                JoinOperator::Join(c) | JoinOperator::Inner(c) => Some(c),
                other => other_constraint(other),
            };
            let Some(JoinConstraint::Using(names)) = constraint else { continue };
            let relations = [Some(&join.relation), (i == 0).then_some(&item.relation)];
            for relation in relations.into_iter().flatten() {
                if let Some(name) = known_as(relation) {
                    out.push((normalized(&name), names.clone()));
                }
            }
        }
    }
    out
}

/// `r.*` without the `USING` columns `r` gave up.
fn hide_using_columns(select: &mut Select) {
    let given = using_columns(select);
    if given.is_empty() {
        return;
    }
    for item in &mut select.projection {
        if let SelectItem::QualifiedWildcard(SelectItemQualifiedWildcardKind::ObjectName(name), options) = item {
            hide(&given, name, options);
        }
    }
}

/// The options of `name.*` in `select` that leave out the `USING` columns the
/// relation gave up (for `coordinator::stars`, which expands `name.* AS (...)`).
pub fn star_options(select: &Select, name: &ObjectName) -> WildcardAdditionalOptions {
    let mut options = WildcardAdditionalOptions::default();
    hide(&using_columns(select), name, &mut options);
    options
}

/// Adds to `options` the `USING` columns (of `given`) relation `name` gave up.
fn hide(given: &[(String, Vec<ObjectName>)], name: &ObjectName, options: &mut WildcardAdditionalOptions) {
    let Some(ObjectNamePart::Identifier(relation)) = name.0.last() else { return };
    let hidden: Vec<ObjectName> =
        given.iter().filter(|(r, _)| *r == normalized(relation)).flat_map(|(_, names)| names.iter().cloned()).collect();
    if hidden.is_empty() {
        return;
    }
    let mut excluded = match options.opt_exclude.take() {
        Some(ExcludeSelectItem::Single(one)) => vec![one],
        Some(ExcludeSelectItem::Multiple(many)) => many,
        None => Vec::new(),
    };
    for name in hidden {
        if !excluded.contains(&name) {
            excluded.push(name);
        }
    }
    options.opt_exclude = Some(ExcludeSelectItem::Multiple(excluded));
}

fn other_constraint(op: &JoinOperator) -> Option<&JoinConstraint> {
    match op {
        JoinOperator::Left(c)
        | JoinOperator::LeftOuter(c)
        | JoinOperator::Right(c)
        | JoinOperator::RightOuter(c)
        | JoinOperator::FullOuter(c) => Some(c),
        _ => None,
    }
}

/// Qualifies the target columns in one select's own expressions (not in its
/// subqueries, whose names are their own).
struct Qualify {
    columns: HashSet<String>,
    qualifier: Ident,
    depth: usize,
}

impl VisitorMut for Qualify {
    type Break = ();

    fn pre_visit_query(&mut self, _: &mut Query) -> ControlFlow<()> {
        self.depth += 1;
        ControlFlow::Continue(())
    }

    fn post_visit_query(&mut self, _: &mut Query) -> ControlFlow<()> {
        self.depth -= 1;
        ControlFlow::Continue(())
    }

    fn pre_visit_expr(&mut self, expr: &mut Expr) -> ControlFlow<()> {
        if self.depth == 0 {
            if let Expr::Identifier(id) = expr {
                if self.columns.contains(&normalized(id)) {
                    *expr = Expr::CompoundIdentifier(vec![self.qualifier.clone(), id.clone()]);
                }
            }
        }
        ControlFlow::Continue(())
    }
}

struct Selects;

impl VisitorMut for Selects {
    type Break = ();

    fn pre_visit_select(&mut self, select: &mut Select) -> ControlFlow<()> {
        hide_using_columns(select);
        let Some((columns, qualifier)) = targets(select) else { return ControlFlow::Continue(()) };
        let mut q = Qualify { columns, qualifier, depth: 0 };
        for item in &mut select.projection {
            // The output keeps the bare name.
            if let SelectItem::UnnamedExpr(Expr::Identifier(id)) = item {
                if q.columns.contains(&normalized(id)) {
                    let alias = id.clone();
                    let expr = Expr::CompoundIdentifier(vec![q.qualifier.clone(), id.clone()]);
                    *item = SelectItem::ExprWithAlias { expr, alias };
                    continue;
                }
            }
            let _ = item.visit(&mut q);
        }
        let _ = select.selection.visit(&mut q);
        if let GroupByExpr::Expressions(exprs, _) = &mut select.group_by {
            let _ = exprs.visit(&mut q);
        }
        let _ = select.having.visit(&mut q);
        ControlFlow::Continue(())
    }
}

/// Rewrites every select of `statement` that needs it.
pub fn qualify<T: VisitMut>(statement: &mut T) {
    let _ = statement.visit(&mut Selects);
}

#[cfg(test)]
mod tests {
    use super::super::parse;

    #[test]
    fn chained_using_columns_are_qualified_by_the_first_relation() {
        let sql = "SELECT k, \"v\", w FROM a JOIN b USING (\"k\") JOIN c USING (k) WHERE k > 1 \
                   AND EXISTS (SELECT k FROM d)";
        let text = parse(sql, 50).unwrap().to_string();
        assert_eq!(text, "SELECT a.k AS k, \"v\", w FROM a JOIN b USING(\"k\") JOIN c USING(k) WHERE a.k > 1 AND EXISTS (SELECT k FROM d)");
        // One USING, or an outer join: DataFusion resolves them itself.
        for sql in ["SELECT k FROM a JOIN b USING (k)", "SELECT k FROM a JOIN b USING (k) LEFT JOIN c USING (k)"] {
            assert_eq!(parse(sql, 50).unwrap().to_string().replace("USING(", "USING ("), sql);
        }
    }
}
