//! A select's `WINDOW` clause written into each window call that names one of its
//! windows, as `dialect::parse_in` hands the statement to DataFusion.
//!
//! DataFusion 55 replaces only a bare `OVER w` in the select list: the window a call
//! refines, `OVER (w ORDER BY b DESC)`, is dropped with its `PARTITION BY`, which
//! numbers rows across partitions without a word (a wrong answer), and a name in
//! `ORDER BY` is not found. Here every call in the select list, `HAVING`, `QUALIFY` and
//! the query's `ORDER BY` gets the whole window: the named window's `PARTITION BY`,
//! its `ORDER BY` unless the call has its own, and the call's frame or else the named
//! one's, with SQL's rules for refining a window (Trino's too): a call cannot add a
//! `PARTITION BY` to a named window, nor an `ORDER BY` to one that has one. A window
//! defined from another (`WINDOW w2 AS (w1 ORDER BY x)`) is resolved the same way.
//! Inner queries are resolved first, so their own `WINDOW` clauses win.

use std::ops::ControlFlow;

use datafusion::common::{plan_err, DataFusionError, Result};
use datafusion::sql::sqlparser::ast::{
    visit_expressions_mut, Expr, Ident, NamedWindowDefinition, NamedWindowExpr, OrderByKind, Query, SetExpr, VisitMut,
    VisitorMut, WindowSpec, WindowType,
};

/// Resolves the named windows of every select in `statement`.
pub fn resolve<V: VisitMut>(statement: &mut V) -> Result<()> {
    match statement.visit(&mut Resolver) {
        ControlFlow::Break(e) => Err(e),
        ControlFlow::Continue(()) => Ok(()),
    }
}

struct Resolver;

impl VisitorMut for Resolver {
    type Break = DataFusionError;

    fn post_visit_query(&mut self, query: &mut Query) -> ControlFlow<Self::Break> {
        match resolve_query(query) {
            Ok(()) => ControlFlow::Continue(()),
            Err(e) => ControlFlow::Break(e),
        }
    }
}

/// A name as the planner compares it: unquoted names in lower case.
fn normalized(i: &Ident) -> String {
    match i.quote_style {
        Some(_) => i.value.clone(),
        None => i.value.to_lowercase(),
    }
}

fn resolve_query(query: &mut Query) -> Result<()> {
    let SetExpr::Select(select) = query.body.as_mut() else { return Ok(()) };
    let windows = definitions(&select.named_window)?;
    select.named_window.clear();
    let mut failure = None;
    let mut apply = |e: &mut Expr| match expand(e, &windows) {
        Ok(()) => ControlFlow::Continue(()),
        Err(err) => {
            failure = Some(err);
            ControlFlow::Break(())
        }
    };
    let _ = visit_expressions_mut(&mut select.projection, &mut apply);
    let _ = visit_expressions_mut(&mut select.having, &mut apply);
    let _ = visit_expressions_mut(&mut select.qualify, &mut apply);
    if let Some(order_by) = query.order_by.as_mut() {
        if let OrderByKind::Expressions(items) = &mut order_by.kind {
            for item in items {
                let _ = visit_expressions_mut(&mut item.expr, &mut apply);
            }
        }
    }
    failure.map_or(Ok(()), Err)
}

/// Each named window as a full specification, in the order defined.
fn definitions(named: &[NamedWindowDefinition]) -> Result<Vec<(String, WindowSpec)>> {
    let mut done: Vec<(String, WindowSpec)> = Vec::with_capacity(named.len());
    for NamedWindowDefinition(name, expr) in named {
        let key = normalized(name);
        if done.iter().any(|(n, _)| *n == key) {
            return plan_err!("WINDOW '{name}' is already defined");
        }
        let spec = match expr {
            NamedWindowExpr::NamedWindow(base) => lookup(&done, base)?.clone(),
            NamedWindowExpr::WindowSpec(spec) => refined(spec, &done)?,
        };
        done.push((key, spec));
    }
    Ok(done)
}

fn lookup<'a>(windows: &'a [(String, WindowSpec)], name: &Ident) -> Result<&'a WindowSpec> {
    let key = normalized(name);
    match windows.iter().find(|(n, _)| *n == key) {
        Some((_, spec)) => Ok(spec),
        None => plan_err!("Cannot resolve WINDOW name {name}"),
    }
}

/// `spec` with the window it names (if any) folded in.
fn refined(spec: &WindowSpec, windows: &[(String, WindowSpec)]) -> Result<WindowSpec> {
    let Some(name) = &spec.window_name else { return Ok(spec.clone()) };
    let base = lookup(windows, name)?;
    if !spec.partition_by.is_empty() {
        return plan_err!("WINDOW specification with named WINDOW reference cannot specify PARTITION BY");
    }
    if !spec.order_by.is_empty() && !base.order_by.is_empty() {
        return plan_err!("Cannot specify ORDER BY if referenced named WINDOW specifies ORDER BY");
    }
    if base.window_frame.is_some() {
        return plan_err!("Cannot reference named WINDOW containing frame specification");
    }
    Ok(WindowSpec {
        window_name: None,
        partition_by: base.partition_by.clone(),
        order_by: if spec.order_by.is_empty() { base.order_by.clone() } else { spec.order_by.clone() },
        window_frame: spec.window_frame.clone(),
    })
}

fn expand(expr: &mut Expr, windows: &[(String, WindowSpec)]) -> Result<()> {
    let Expr::Function(f) = expr else { return Ok(()) };
    let resolved = match &f.over {
        Some(WindowType::NamedWindow(name)) => lookup(windows, name)?.clone(),
        Some(WindowType::WindowSpec(spec)) if spec.window_name.is_some() => refined(spec, windows)?,
        _ => return Ok(()),
    };
    f.over = Some(WindowType::WindowSpec(resolved));
    Ok(())
}
