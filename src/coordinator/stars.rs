//! Stars whose columns only a plan knows: Trino's `(row).*` (a row's fields as
//! columns), `t.r.*` where `t.r` names a row rather than a relation of the `FROM`
//! clause, and column aliases for a star, `t.* AS (a, b)` and `(row).* AS (a, b)`
//! (`dialect::star_aliases`). DataFusion's planner expands only a relation's star, so
//! each such select item is written out as its columns before the statement is
//! planned: a probe query, the item alone over its select's own `FROM` and the CTEs
//! that select sees, is planned to learn the relation's columns or the row's fields,
//! and the item becomes one item per column. Inner selects are expanded first, so a
//! probe never holds a star left to expand. The outermost select's unnamed columns are
//! then numbered as Trino numbers them, counting a star's columns
//! (`number_after_stars`). Called by `planning::plan_here` and by the DDL that plans a
//! stored view; a statement without such an item costs one walk.

use std::ops::ControlFlow;

use datafusion::arrow::datatypes::DataType;
use datafusion::execution::SessionState;
use datafusion::sql::parser::Statement as DFStatement;
use datafusion::sql::sqlparser::ast::helpers::attached_token::AttachedToken;
use datafusion::sql::sqlparser::ast::{
    AccessExpr, Cte, Expr, GroupByExpr, Ident, ObjectName, ObjectNamePart, OrderBy, OrderByKind, Query, Select,
    SelectItem, SelectItemQualifiedWildcardKind, SetExpr, Statement, Subscript, TableFactor, TableWithJoins, Value,
    VisitMut, VisitorMut, With,
};

use super::dialect::{output_names, using_joins};
use super::planner::{planning_error, QueryError};
use crate::error_code::ErrorCode;
use using_joins::normalized;

/// A select item whose columns the plan must say.
#[derive(Debug, Clone)]
enum Star {
    /// `name.* AS (aliases)`: a relation's columns, renamed.
    Relation { name: ObjectName, aliases: Vec<Ident> },
    /// `(row).* [AS (aliases)]`: a row's fields.
    Row { row: Box<Expr>, aliases: Option<Vec<Ident>> },
}

/// Writes out every star of `statement` whose columns DataFusion cannot expand.
pub async fn expand(state: &SessionState, statement: &mut DFStatement) -> Result<(), QueryError> {
    let statement = match statement {
        DFStatement::Statement(s) => s.as_mut(),
        DFStatement::Explain(e) => return Box::pin(expand(state, e.statement.as_mut())).await,
        _ => return Ok(()),
    };
    // Each round writes out one item, so the rounds end; a statement has few.
    while let Some((probe, star)) = find(statement, &mut |select, at, scope| probe(select, at, scope)) {
        let planned =
            state.statement_to_plan(DFStatement::Statement(Box::new(Statement::Query(Box::new(probe))))).await;
        let columns: Vec<(String, DataType)> = match planned {
            Ok(plan) => plan.schema().fields().iter().map(|f| (f.name().clone(), f.data_type().clone())).collect(),
            Err(e) => return Err(star_error(&star, planning_error(&e))),
        };
        find(statement, &mut |select, at, _| write_out(select, at, &star, &columns))
            .expect("the probed item is found again")?;
    }
    match statement {
        Statement::Query(query) => number_after_stars(state, query).await,
        _ => Ok(()),
    }
}

fn star_error(star: &Star, mut cause: QueryError) -> QueryError {
    let item = match star {
        Star::Relation { name, .. } => format!("{name}.*"),
        Star::Row { row, .. } => format!("({row}).*"),
    };
    cause.message = format!("{item}: {}", cause.message);
    cause
}

/// The CTEs a select sees, innermost last.
#[derive(Default)]
struct Scope {
    ctes: Vec<Cte>,
    recursive: bool,
}

type Found<'f, R> = dyn FnMut(&mut Select, usize, &Scope) -> R + 'f;

/// Calls `f` on the first select item to write out, inner selects first, and answers
/// what `f` does; `None` when there is none.
fn find<R>(statement: &mut Statement, f: &mut Found<'_, R>) -> Option<R> {
    nested(statement, &mut Scope::default(), f)
}

fn in_query<R>(query: &mut Query, scope: &mut Scope, f: &mut Found<'_, R>) -> Option<R> {
    let (mark, recursive) = (scope.ctes.len(), scope.recursive);
    let found = (|| {
        if let Some(with) = query.with.as_mut() {
            scope.recursive |= with.recursive;
            for cte in &mut with.cte_tables {
                if let Some(r) = in_query(&mut cte.query, scope, f) {
                    return Some(r);
                }
                scope.ctes.push(cte.clone());
            }
        }
        if let Some(r) = in_set(query.body.as_mut(), scope, f) {
            return Some(r);
        }
        if let Some(r) = nested(&mut query.order_by, scope, f) {
            return Some(r);
        }
        nested(&mut query.limit_clause, scope, f)
    })();
    scope.ctes.truncate(mark);
    scope.recursive = recursive;
    found
}

fn in_set<R>(set: &mut SetExpr, scope: &mut Scope, f: &mut Found<'_, R>) -> Option<R> {
    match set {
        SetExpr::Select(select) => {
            if let Some(r) = nested(select.as_mut(), scope, f) {
                return Some(r);
            }
            let relations = relation_names(&select.from);
            let at = select.projection.iter().position(|item| star_of(item, &relations).is_some())?;
            Some(f(select, at, scope))
        }
        SetExpr::Query(q) => in_query(q, scope, f),
        SetExpr::SetOperation { left, right, .. } => match in_set(left, scope, f) {
            Some(r) => Some(r),
            None => in_set(right, scope, f),
        },
        other => nested(other, scope, f),
    }
}

/// Looks for items in the queries directly inside `node` (each one's own nested
/// queries are its to walk).
fn nested<R, V: VisitMut>(node: &mut V, scope: &mut Scope, f: &mut Found<'_, R>) -> Option<R> {
    let mut visitor = Nested { scope, f, depth: 0 };
    match node.visit(&mut visitor) {
        ControlFlow::Break(r) => Some(r),
        ControlFlow::Continue(()) => None,
    }
}

struct Nested<'s, 'f, 'g, R> {
    scope: &'s mut Scope,
    f: &'f mut Found<'g, R>,
    depth: usize,
}

impl<R> VisitorMut for Nested<'_, '_, '_, R> {
    type Break = R;

    fn pre_visit_query(&mut self, query: &mut Query) -> ControlFlow<R> {
        if self.depth == 0 {
            if let Some(r) = in_query(query, self.scope, self.f) {
                return ControlFlow::Break(r);
            }
        }
        self.depth += 1;
        ControlFlow::Continue(())
    }

    fn post_visit_query(&mut self, _: &mut Query) -> ControlFlow<R> {
        self.depth -= 1;
        ControlFlow::Continue(())
    }
}

fn parts(name: &ObjectName) -> Vec<String> {
    name.0
        .iter()
        .map(|p| match p {
            ObjectNamePart::Identifier(i) => normalized(i),
            other => other.to_string(),
        })
        .collect()
}

/// The names the relations of a `FROM` clause are known by, each as its parts.
fn relation_names(from: &[TableWithJoins]) -> Vec<Vec<String>> {
    fn add(factor: &TableFactor, out: &mut Vec<Vec<String>>) {
        let alias = match factor {
            TableFactor::Table { name, alias: None, .. } => return out.push(parts(name)),
            TableFactor::NestedJoin { table_with_joins, alias } => {
                add(&table_with_joins.relation, out);
                table_with_joins.joins.iter().for_each(|j| add(&j.relation, out));
                alias
            }
            TableFactor::Table { alias, .. }
            | TableFactor::Derived { alias, .. }
            | TableFactor::Function { alias, .. }
            | TableFactor::TableFunction { alias, .. }
            | TableFactor::UNNEST { alias, .. } => alias,
            _ => &None,
        };
        if let Some(a) = alias {
            out.push(vec![normalized(&a.name)]);
        }
    }
    let mut out = Vec::new();
    for t in from {
        add(&t.relation, &mut out);
        t.joins.iter().for_each(|j| add(&j.relation, &mut out));
    }
    out
}

/// Whether `name.*` is a relation's star: `name` ends one of `relations`' names.
fn names_relation(name: &ObjectName, relations: &[Vec<String>]) -> bool {
    let name = parts(name);
    relations.iter().any(|r| r.ends_with(&name))
}

fn as_expr(name: &ObjectName) -> Expr {
    let idents: Vec<Ident> = name
        .0
        .iter()
        .map(|p| match p {
            ObjectNamePart::Identifier(i) => i.clone(),
            other => Ident::new(other.to_string()),
        })
        .collect();
    match <[Ident; 1]>::try_from(idents) {
        Ok([one]) => Expr::Identifier(one),
        Err(many) => Expr::CompoundIdentifier(many),
    }
}

/// What `item` is to write out, when it is.
fn star_of(item: &SelectItem, relations: &[Vec<String>]) -> Option<Star> {
    match item {
        SelectItem::QualifiedWildcard(SelectItemQualifiedWildcardKind::Expr(row), _) => {
            Some(Star::Row { row: Box::new(row.clone()), aliases: None })
        }
        // Trino reads `t.r.*` as a relation's star first, then as a row's.
        SelectItem::QualifiedWildcard(SelectItemQualifiedWildcardKind::ObjectName(name), _) => {
            (!names_relation(name, relations)).then(|| Star::Row { row: Box::new(as_expr(name)), aliases: None })
        }
        SelectItem::ExprWithAliases { expr: Expr::QualifiedWildcard(name, _), aliases } => {
            Some(match names_relation(name, relations) {
                true => Star::Relation { name: name.clone(), aliases: aliases.clone() },
                false => Star::Row { row: Box::new(as_expr(name)), aliases: Some(aliases.clone()) },
            })
        }
        SelectItem::ExprWithAliases { expr, aliases } => {
            Some(Star::Row { row: Box::new(expr.clone()), aliases: Some(aliases.clone()) })
        }
        _ => None,
    }
}

/// The query that says the columns of `select`'s item `at`: the item alone over the
/// select's `FROM`, with the CTEs the select sees.
fn probe(select: &Select, at: usize, scope: &Scope) -> (Query, Star) {
    let star = star_of(&select.projection[at], &relation_names(&select.from)).expect("found as a star");
    let item = match &star {
        Star::Relation { name, .. } => SelectItem::QualifiedWildcard(
            SelectItemQualifiedWildcardKind::ObjectName(name.clone()),
            using_joins::star_options(select, name),
        ),
        Star::Row { row, .. } => SelectItem::UnnamedExpr(row.as_ref().clone()),
    };
    (probe_item(select, item, scope), star)
}

/// `item` alone over `select`'s `FROM`, with the CTEs of `scope`.
fn probe_item(select: &Select, item: SelectItem, scope: &Scope) -> Query {
    let mut body = select.clone();
    body.projection = vec![item];
    body.distinct = None;
    body.top = None;
    body.into = None;
    body.selection = None;
    body.group_by = GroupByExpr::Expressions(Vec::new(), Vec::new());
    body.having = None;
    body.qualify = None;
    body.sort_by.clear();
    let with = (!scope.ctes.is_empty()).then(|| With {
        with_token: AttachedToken::empty(),
        recursive: scope.recursive,
        cte_tables: scope.ctes.clone(),
    });
    Query {
        with,
        body: Box::new(SetExpr::Select(Box::new(body))),
        order_by: None,
        limit_clause: None,
        fetch: None,
        locks: Vec::new(),
        for_clause: None,
        settings: None,
        format_clause: None,
        pipe_operators: Vec::new(),
    }
}

/// Trino numbers an unnamed column by its place among all the columns a select gives,
/// a star's too (`SELECT *, 1 FROM region` has `_col3`), where the dialect counted a
/// star as one column (`dialect::output_names`). The outermost select's names are the
/// ones clients see, so there a star's columns are counted by planning it alone, as a
/// probe, and the names the dialect gave are numbered again (its `ORDER BY` reads them
/// too). Only a select with both a star and a column named so pays for the probe.
async fn number_after_stars(state: &SessionState, query: &mut Query) -> Result<(), QueryError> {
    let scope = Scope {
        ctes: query.with.as_ref().map(|w| w.cte_tables.clone()).unwrap_or_default(),
        recursive: query.with.as_ref().is_some_and(|w| w.recursive),
    };
    let Some(select) = outermost_select(query.body.as_mut()) else { return Ok(()) };
    let is_star = |i: &SelectItem| matches!(i, SelectItem::Wildcard(_) | SelectItem::QualifiedWildcard(..));
    if !select.projection.iter().any(is_star) || !select.projection.iter().any(|i| generated_name(i).is_some()) {
        return Ok(());
    }
    let mut position = 0;
    let mut renamed = Vec::new();
    for at in 0..select.projection.len() {
        let width = match &select.projection[at] {
            item if is_star(item) => {
                let probe = probe_item(select, select.projection[at].clone(), &scope);
                let statement = DFStatement::Statement(Box::new(Statement::Query(Box::new(probe))));
                match state.statement_to_plan(statement).await {
                    Ok(plan) => plan.schema().fields().len(),
                    // DataFusion says what is wrong with the star when it plans the statement.
                    Err(_) => return Ok(()),
                }
            }
            item => output_names::width(item),
        };
        if let Some(old) = generated_name(&select.projection[at]) {
            let new = format!("_col{position}");
            if old != new {
                renamed.push((old, new.clone()));
                if let SelectItem::ExprWithAlias { alias, .. } = &mut select.projection[at] {
                    alias.value = new;
                }
            }
        }
        position += width;
    }
    if let Some(OrderBy { kind: OrderByKind::Expressions(items), .. }) = query.order_by.as_mut() {
        for item in items {
            if let Expr::Identifier(i) = &mut item.expr {
                if let Some((_, new)) = renamed.iter().find(|(old, _)| i.quote_style.is_none() && *old == i.value) {
                    i.value = new.clone();
                }
            }
        }
    }
    Ok(())
}

/// The select whose names a query's columns have: the first of a set operation's.
fn outermost_select(set: &mut SetExpr) -> Option<&mut Select> {
    match set {
        SetExpr::Select(s) => Some(s),
        SetExpr::SetOperation { left, .. } => outermost_select(left),
        _ => None,
    }
}

/// The name `dialect::output_names` gave an unnamed item (`_colN`, without a place in
/// the text), if it gave this one.
fn generated_name(item: &SelectItem) -> Option<String> {
    match item {
        SelectItem::ExprWithAlias { alias, .. }
            if alias.quote_style.is_none()
                && alias.span.start.line == 0
                && alias.value.strip_prefix("_col").is_some_and(|n| n.parse::<usize>().is_ok()) =>
        {
            Some(alias.value.clone())
        }
        _ => None,
    }
}

fn quoted(name: &str) -> Ident {
    Ident::with_quote('"', name)
}

/// Replaces `select`'s item `at` by one item per column of the probe.
fn write_out(select: &mut Select, at: usize, star: &Star, columns: &[(String, DataType)]) -> Result<(), QueryError> {
    let position: usize = select.projection[..at].iter().map(output_names::width).sum();
    let aliases = match star {
        Star::Relation { aliases, .. } => Some(aliases),
        Star::Row { aliases, .. } => aliases.as_ref(),
    };
    let items: Vec<SelectItem> = match star {
        Star::Relation { name, .. } => {
            let aliases = checked(aliases.expect("a relation's star is here for its aliases"), columns.len(), name)?;
            columns
                .iter()
                .zip(aliases)
                .map(|((column, _), alias)| {
                    let mut reference: Vec<Ident> = match as_expr(name) {
                        Expr::Identifier(one) => vec![one],
                        Expr::CompoundIdentifier(many) => many,
                        _ => unreachable!("a name is identifiers"),
                    };
                    reference.push(quoted(column));
                    SelectItem::ExprWithAlias { expr: Expr::CompoundIdentifier(reference), alias: alias.clone() }
                })
                .collect()
        }
        Star::Row { row, .. } => {
            let Some((_, DataType::Struct(fields))) = columns.first() else {
                let found = columns.first().map(|(_, t)| t.to_string()).unwrap_or_default();
                let m = format!("({row}).*: expected a row, found {found}");
                return Err(QueryError::new(ErrorCode::TypeMismatch, m));
            };
            let names: Vec<Ident> = match aliases {
                Some(aliases) => checked(aliases, fields.len(), row)?.to_vec(),
                None if crate::functions::types::anonymous_fields(fields) => {
                    (0..fields.len()).map(|i| Ident::new(format!("_col{}", position + i))).collect()
                }
                None => fields.iter().map(|f| quoted(f.name())).collect(),
            };
            fields
                .iter()
                .zip(names)
                .map(|(field, alias)| {
                    let name = Value::SingleQuotedString(field.name().clone()).with_empty_span();
                    let expr = Expr::CompoundFieldAccess {
                        root: Box::new(Expr::Nested(row.clone())),
                        access_chain: vec![AccessExpr::Subscript(Subscript::Index { index: Expr::Value(name) })],
                    };
                    SelectItem::ExprWithAlias { expr, alias }
                })
                .collect()
        }
    };
    select.projection.splice(at..=at, items);
    output_names::repeated_names_apart(&mut select.projection);
    Ok(())
}

/// `aliases`, when there is one for each of `columns` columns of `what`.
fn checked<'a>(aliases: &'a [Ident], columns: usize, what: &dyn std::fmt::Display) -> Result<&'a [Ident], QueryError> {
    match aliases.len() == columns {
        true => Ok(aliases),
        false => Err(QueryError::new(
            ErrorCode::MismatchedColumnAliases,
            format!("Column alias list has {} entries but '{what}' has {columns} columns available", aliases.len()),
        )),
    }
}

#[cfg(test)]
#[path = "stars_tests.rs"]
mod tests;
