//! Trino's `UNNEST` relation, as `dialect::parse_in` hands it to DataFusion: an `UNNEST`
//! with column names or `WITH ORDINALITY` is written as a derived table of DataFusion's
//! unnests, which plans what DataFusion's own `UNNEST` relation does not.
//!
//! Trino expands an array of rows into a column per field and a map into a key and a
//! value column, numbers the elements `WITH ORDINALITY`, and pads the shorter of
//! several arrays with NULLs. DataFusion's `UNNEST` relation gives a row as one column,
//! refuses a map and ordinality, so `UNNEST(a, m) WITH ORDINALITY AS t(x, k, v, n)` is
//! written as
//!
//! ```sql
//! LATERAL (SELECT unnest(__unnest_row(__unnest_args.a1)), unnest(__unnest_row(__unnest_args.a2)), __unnest_args.o
//!          FROM UNNEST(__unnest_list(a), __unnest_list(m), __unnest_ordinals(a, m))
//!            AS __unnest_args(a1, a2, o)) AS t(x, k, v, n)
//! ```
//!
//! where DataFusion's `UNNEST` still zips and pads the lists, and the select list's
//! `unnest` of a row is its fields (`functions::unnest` makes a map's entries rows of
//! key and value, and any other element a row of one field). The types decide the
//! columns when the plan is made, as in Trino. `LATERAL` lets the arguments read the
//! columns of the relations before it in the `FROM` clause (`plan::lateral_joins`
//! decorrelates it); the first relation of a `FROM` reads no such columns and is not
//! marked. An `UNNEST` without either is left to DataFusion, which names its column as
//! Trino does not need to.

use std::ops::ControlFlow;

use datafusion::common::{plan_datafusion_err, Result};
use datafusion::sql::sqlparser::ast::{
    visit_expressions_mut, Expr, Query, SetExpr, TableFactor, TableWithJoins, VisitMut, VisitorMut,
};
use datafusion::sql::sqlparser::parser::Parser;

/// The alias of the derived table's inner `UNNEST`, which is not rewritten again.
const ARGUMENTS: &str = "__unnest_args";

/// Rewrites every `UNNEST` relation of `statement` that names its columns or numbers
/// its rows.
pub fn rewrite<V: VisitMut>(statement: &mut V) -> Result<()> {
    match statement.visit(&mut Relations) {
        ControlFlow::Break(e) => Err(e),
        ControlFlow::Continue(()) => Ok(()),
    }
}

struct Relations;

impl VisitorMut for Relations {
    type Break = datafusion::error::DataFusionError;

    fn pre_visit_query(&mut self, query: &mut Query) -> ControlFlow<Self::Break> {
        match set(query.body.as_mut()) {
            Ok(()) => ControlFlow::Continue(()),
            Err(e) => ControlFlow::Break(e),
        }
    }
}

fn set(body: &mut SetExpr) -> Result<()> {
    match body {
        SetExpr::Select(select) => from(&mut select.from),
        SetExpr::SetOperation { left, right, .. } => {
            set(left)?;
            set(right)
        }
        _ => Ok(()),
    }
}

/// The relations of a `FROM` list: each but the very first may read those before it.
fn from(items: &mut [TableWithJoins]) -> Result<()> {
    for (i, item) in items.iter_mut().enumerate() {
        relation(&mut item.relation, i > 0)?;
        for join in &mut item.joins {
            relation(&mut join.relation, true)?;
        }
    }
    Ok(())
}

fn relation(factor: &mut TableFactor, after_others: bool) -> Result<()> {
    match factor {
        TableFactor::NestedJoin { table_with_joins, .. } => {
            relation(&mut table_with_joins.relation, after_others)?;
            for join in &mut table_with_joins.joins {
                relation(&mut join.relation, true)?;
            }
            Ok(())
        }
        TableFactor::UNNEST { alias, array_exprs, with_offset: false, with_offset_alias: None, with_ordinality } => {
            let named = alias.as_ref().is_some_and(|a| !a.columns.is_empty());
            let inner = alias.as_ref().is_some_and(|a| a.name.value == ARGUMENTS);
            if inner || !(named || *with_ordinality) {
                return Ok(());
            }
            let subquery = derived(array_exprs, *with_ordinality)?;
            *factor = TableFactor::Derived {
                lateral: after_others,
                subquery: Box::new(subquery),
                alias: alias.take(),
                sample: None,
            };
            Ok(())
        }
        _ => Ok(()),
    }
}

/// The derived table's query over `arguments`.
fn derived(arguments: &[Expr], ordinality: bool) -> Result<Query> {
    let n = arguments.len();
    let mut items: Vec<String> = (1..=n).map(|i| format!("unnest(__unnest_row({ARGUMENTS}.a{i}))")).collect();
    let mut lists: Vec<String> = (1..=n).map(|i| format!("__unnest_list(__argument{i})")).collect();
    let mut names: Vec<String> = (1..=n).map(|i| format!("a{i}")).collect();
    if ordinality {
        items.push(format!("{ARGUMENTS}.o"));
        let all: Vec<String> = (1..=n).map(|i| format!("__argument{i}")).collect();
        lists.push(format!("__unnest_ordinals({})", all.join(", ")));
        names.push("o".into());
    }
    let sql =
        format!("SELECT {} FROM UNNEST({}) AS {ARGUMENTS}({})", items.join(", "), lists.join(", "), names.join(", "));
    let mut query = Parser::new(&super::TrinoDialect)
        .try_with_sql(&sql)
        .and_then(|mut p| p.parse_query())
        .map_err(|e| plan_datafusion_err!("UNNEST: {e}"))?;
    // The placeholders become the arguments, each parsed once already.
    let _ = visit_expressions_mut(query.as_mut(), |e| {
        if let Expr::Identifier(id) = e {
            if let Some(i) = id.value.strip_prefix("__argument").and_then(|i| i.parse::<usize>().ok()) {
                *e = arguments[i - 1].clone();
            }
        }
        ControlFlow::<()>::Continue(())
    });
    Ok(*query)
}
