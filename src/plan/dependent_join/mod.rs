//! A correlated plan computed for every row of its domain at once: the push-down of
//! Neumann and Kemper's dependent join, which `correlated_domains` (subqueries in
//! expressions) and `lateral_joins` (`LATERAL` and `CROSS JOIN UNNEST` over outer
//! columns) call. It owns nothing past one call.
//!
//! The domain `D` of a correlated plan `R` is the set of distinct values of the outer
//! columns `R` reads. `D ⋈ R`, `R` evaluated once per row of `D`, is pushed down `R`'s
//! tree until what is left below carries no outer reference and becomes a cross join
//! with `D`. On the way each node carries `D`'s columns up and reads them where it read
//! the outer ones: a projection passes them on, an aggregation and a window partition
//! by them (each grouping set too), a `LIMIT` becomes a row number within each domain
//! row, a join takes them from the side that holds them, or from both and matches
//! rows of one domain row only (`join`). An aggregation with no `GROUP BY` must answer one row
//! for every domain row, even one that found no input: its input is outer-joined to
//! `D` and each aggregate counts only the rows that came from the input, so that
//! `count` is 0 and `sum` NULL there, as for an empty input.
//!
//! The result has `R`'s columns and `D`'s, the latter by names no query can write
//! (`__dN_vI`), read unqualified; the caller joins it to the outer rows on them. A
//! subquery inside `R` that reads the outer columns too reads `D`'s instead, as outer
//! references to the node it sits in: one level of correlation less, left to the rules
//! that decorrelate `R` afterwards. A shape this does not take (`DISTINCT ON`, a
//! `LIMIT` by an expression, a grouping id widened by the domain's columns) answers
//! None, and the caller leaves the plan as it was.

mod aggregate;
mod join;

use std::sync::Arc;

use datafusion::arrow::datatypes::{DataType, Field, FieldRef};
use datafusion::common::alias::AliasGenerator;
use datafusion::common::tree_node::{Transformed, TreeNode, TreeNodeRecursion};
use datafusion::common::{internal_err, Column, Result, ScalarValue};
use datafusion::functions::core::expr_fn::coalesce;
use datafusion::functions_window::expr_fn::row_number;
use datafusion::logical_expr::expr::ScalarFunction;
use datafusion::logical_expr::expr_rewriter::{normalize_col, NamePreserver};
use datafusion::logical_expr::logical_plan::{FetchType, SkipType};
use datafusion::optimizer::decorrelate::PullUpCorrelatedExpr;

use crate::functions::unnest::{entries_map, unnest_list};
use datafusion::logical_expr::{
    lit, Distinct, Expr, ExprFunctionExt, JoinType, LogicalPlan, LogicalPlanBuilder, Projection, Subquery, Window,
};

/// The distinct values of the outer columns a correlated plan reads.
pub struct Domain<'a> {
    plan: LogicalPlan,
    /// Each outer column read, and how the domain holds it.
    values: Vec<(FieldRef, Column, Value)>,
    /// Every column of the domain, by name.
    columns: Vec<String>,
    aliases: &'a AliasGenerator,
}

/// How the domain holds one outer column's value.
enum Value {
    /// As it is, in a column of this name.
    Plain(String),
    /// As the two keys an equality can match a NULL by, `v IS NULL` and `coalesce(v,
    /// default)`, for a correlation DataFusion pulls up (which only takes `=`); every
    /// column of a domain must be one its correlation equates, since the plan it is
    /// pushed into groups by them.
    Keyed { is_null: String, value: String, default: ScalarValue, null: ScalarValue },
}

impl Value {
    /// What the pushed plan reads in place of the outer column.
    fn local(&self) -> Expr {
        match self {
            Value::Plain(name) => Domain::column(name),
            Value::Keyed { is_null, value, null, .. } => Expr::Case(datafusion::logical_expr::expr::Case {
                expr: None,
                when_then_expr: vec![(Box::new(Domain::column(is_null)), Box::new(lit(null.clone())))],
                else_expr: Some(Box::new(Domain::column(value))),
            }),
        }
    }
}

/// A value as the domain holds it: a map as its entries, which a grouping and a join's
/// key take (DataFusion's join bounds refuse a map); anything else as it is.
fn held(e: Expr, data_type: &DataType) -> Expr {
    match data_type {
        DataType::Map(..) => Expr::ScalarFunction(ScalarFunction::new_udf(Arc::new(unnest_list()), vec![e])),
        _ => e,
    }
}

fn held_type(data_type: &DataType) -> DataType {
    match data_type {
        DataType::Map(entries, _) => DataType::List(Arc::new(Field::new_list_field(entries.data_type().clone(), true))),
        other => other.clone(),
    }
}

/// A value the domain holds as the outer column was.
fn unheld(e: Expr, data_type: &DataType) -> Expr {
    match data_type {
        DataType::Map(..) => Expr::ScalarFunction(ScalarFunction::new_udf(Arc::new(entries_map()), vec![e])),
        _ => e,
    }
}

/// The outer columns `plan` reads, each once: in its own expressions and in those of
/// the subqueries inside them, where a subquery's reference is not to a column of the
/// node it sits in (`escaping`).
pub fn outer_columns(plan: &LogicalPlan) -> Option<Vec<(FieldRef, Column)>> {
    escaping(plan).ok().map(|refs| refs.into_iter().map(|r| (r.field, r.column)).collect())
}

/// An outer reference that leaves a plan.
struct Escaping {
    field: FieldRef,
    column: Column,
    /// Read (also) by a subquery inside the plan rather than by its own nodes.
    nested: bool,
}

/// The outer references of `plan` that leave it, each once: those of its nodes' own
/// expressions, and those of each subquery inside them that are not to a column of
/// that node's inputs (a subquery reads its own node's columns first, as the planner
/// resolved them).
fn escaping(plan: &LogicalPlan) -> Result<Vec<Escaping>> {
    let mut refs: Vec<Escaping> = Vec::new();
    let mut add = |field: &FieldRef, column: &Column, nested: bool| match refs.iter_mut().find(|r| r.column == *column)
    {
        Some(found) => found.nested |= nested,
        None => refs.push(Escaping { field: field.clone(), column: column.clone(), nested }),
    };
    plan.apply(|node| {
        let inputs = node.inputs();
        for e in node.expressions() {
            e.apply(|e| {
                if let Expr::OuterReferenceColumn(field, column) = e {
                    add(field, column, false);
                }
                if let Some(subquery) = subquery_in(e) {
                    for r in escaping(&subquery.subquery)? {
                        if !inputs.iter().any(|i| i.schema().has_column(&r.column)) {
                            add(&r.field, &r.column, true);
                        }
                    }
                }
                Ok(TreeNodeRecursion::Continue)
            })?;
        }
        Ok(TreeNodeRecursion::Continue)
    })?;
    Ok(refs)
}

/// The subquery of a subquery expression.
fn subquery_in(e: &Expr) -> Option<&Subquery> {
    match e {
        Expr::ScalarSubquery(s) => Some(s),
        Expr::Exists(x) => Some(&x.subquery),
        Expr::InSubquery(x) => Some(&x.subquery),
        Expr::SetComparison(x) => Some(&x.subquery),
        _ => None,
    }
}

/// The subquery of a subquery expression, to change.
pub fn subquery_in_mut(e: &mut Expr) -> Option<&mut Subquery> {
    match e {
        Expr::ScalarSubquery(s) => Some(s),
        Expr::Exists(x) => Some(&mut x.subquery),
        Expr::InSubquery(x) => Some(&mut x.subquery),
        Expr::SetComparison(x) => Some(&mut x.subquery),
        _ => None,
    }
}

/// What an outer reference to a column becomes: an expression, or None to keep it.
type Replace<'r> = &'r dyn Fn(&Column) -> Result<Option<Expr>>;

/// `plan` with each outer reference that leaves it (see `escaping`) replaced by
/// `replace`'s expression where that answers one, and every subquery's list of its
/// outer references made anew.
fn replace_escaping(plan: &LogicalPlan, replace: Replace) -> Result<LogicalPlan> {
    plan.clone()
        .transform_up(|node| {
            let inputs: Vec<LogicalPlan> = node.inputs().into_iter().cloned().collect();
            let local = |c: &Column| inputs.iter().any(|i| i.schema().has_column(c));
            let inner = |c: &Column| if local(c) { Ok(None) } else { replace(c) };
            let names = NamePreserver::new(&node);
            node.map_expressions(|e| {
                let name = names.save(&e);
                Ok(replace_in_expr(e, replace, &inner)?.update_data(|e| name.restore(e)))
            })
        })
        .map(|t| t.data)
}

/// `e` with its own outer references replaced by `own`, and those inside its
/// subqueries by `inner`.
fn replace_in_expr(e: Expr, own: Replace, inner: Replace) -> Result<Transformed<Expr>> {
    e.transform(|mut e| {
        if let Expr::OuterReferenceColumn(_, c) = &e {
            return Ok(match own(c)? {
                Some(local) => Transformed::yes(local),
                None => Transformed::no(e),
            });
        }
        let Some(subquery) = subquery_in_mut(&mut e) else { return Ok(Transformed::no(e)) };
        let plan = replace_escaping(&subquery.subquery, inner)?;
        subquery.outer_ref_columns = plan.all_out_ref_exprs();
        subquery.subquery = Arc::new(plan);
        Ok(Transformed::yes(e))
    })
}

impl<'a> Domain<'a> {
    /// The domain of the outer columns `refs` over the outer rows `outer`, or None
    /// where one is not `outer`'s own (a reference to a query further out). A nullable
    /// value is held as the two keys an equality matches a NULL by, so that no column
    /// of a domain is NULL and every join on them is a plain equality: DataFusion
    /// pulls up only `=`, and moves a filter's `a = b` above a join whose keys match
    /// NULL to NULL into those keys, where NULL then equals NULL.
    pub fn new(
        outer: &LogicalPlan,
        refs: Vec<(FieldRef, Column)>,
        aliases: &'a AliasGenerator,
    ) -> Result<Option<Self>> {
        if refs.is_empty() || refs.iter().any(|(_, c)| !outer.schema().has_column(c)) {
            return Ok(None);
        }
        let tag = aliases.next("__d");
        let mut values = Vec::new();
        let mut columns = Vec::new();
        let mut keys = Vec::new();
        let mut projected = Vec::new();
        for (i, (field, column)) in refs.into_iter().enumerate() {
            let name = format!("{tag}_v{i}");
            projected.push(held(Expr::Column(column.clone()), field.data_type()).alias(&name));
            let data_type = held_type(field.data_type());
            let read = Self::column(&name);
            let value = match field.is_nullable() {
                false => {
                    keys.push(read);
                    columns.push(name.clone());
                    Value::Plain(name)
                }
                true => {
                    let Ok(default) = ScalarValue::new_default(&data_type) else { return Ok(None) };
                    let null = ScalarValue::try_from(&data_type)?;
                    let (is_null, value) = (format!("{tag}_n{i}"), format!("{tag}_c{i}"));
                    keys.push(read.clone().is_null().alias(&is_null));
                    keys.push(coalesce(vec![read, lit(default.clone())]).alias(&value));
                    columns.extend([is_null.clone(), value.clone()]);
                    Value::Keyed { is_null, value, default, null }
                }
            };
            values.push((field, column, value));
        }
        let plan = LogicalPlanBuilder::from(outer.clone())
            .project(projected)?
            .distinct()?
            .project(keys)?
            .alias(aliases.next("__domain"))?
            .build()?;
        Ok(Some(Self { plan, values, columns, aliases }))
    }

    fn column(name: &str) -> Expr {
        Expr::Column(Column::new_unqualified(name))
    }

    fn columns(&self) -> impl Iterator<Item = Expr> + '_ {
        self.columns.iter().map(|n| Self::column(n))
    }

    /// `e` reading the domain's values where it read the outer columns, its columns
    /// qualified as in `input` (an expression the optimizer later moves into a join's
    /// key is looked up by the name its qualified columns give it).
    fn local(&self, e: Expr, input: &LogicalPlan) -> Result<Expr> {
        let value = |c: &Column| {
            let Some((field, _, value)) = self.values.iter().find(|(_, o, _)| o == c) else { return Ok(None) };
            Ok(Some(unheld(value.local(), field.data_type())))
        };
        // Inside a subquery the domain's columns are outer references to `input`'s.
        let referenced = |c: &Column| {
            let Some(read) = value(c)? else { return Ok(None) };
            let referenced = read.transform(|e| match e {
                Expr::Column(c) => {
                    let found = input.schema().columns().into_iter().find(|q| q.name == c.name);
                    let Some(q) = found else {
                        return internal_err!("the domain's column {} is not in the plan it was pushed into", c.name);
                    };
                    let (_, field) = input.schema().qualified_field_from_column(&q)?;
                    Ok(Transformed::yes(Expr::OuterReferenceColumn(field.clone(), q)))
                }
                other => Ok(Transformed::no(other)),
            })?;
            Ok(Some(referenced.data))
        };
        let local = replace_in_expr(e, &value, &referenced)?.data;
        normalize_col(local, input)
    }

    /// Each outer value as the domain holds it (a nullable one as its two keys), read
    /// by `outer` from its column, paired with the domain's column of it.
    fn keys(&self, outer: impl Fn(&FieldRef, &Column) -> Expr) -> Vec<(Expr, Column)> {
        let mut keys = Vec::new();
        for (field, column, value) in &self.values {
            let outer = held(outer(field, column), field.data_type());
            match value {
                Value::Plain(name) => keys.push((outer, Column::new_unqualified(name))),
                Value::Keyed { is_null, value, default, .. } => {
                    keys.push((outer.clone().is_null(), Column::new_unqualified(is_null)));
                    keys.push((coalesce(vec![outer, lit(default.clone())]), Column::new_unqualified(value)));
                }
            }
        }
        keys
    }

    /// The equalities, outer column to domain value, that correlate the plan this
    /// domain was pushed into with the outer rows (NULL matching NULL by its keys).
    pub fn correlation(&self) -> Expr {
        let keys = self.keys(|field, column| Expr::OuterReferenceColumn(field.clone(), column.clone()));
        let equalities = keys.into_iter().map(|(outer, domain)| Expr::Column(domain).eq(outer));
        datafusion::logical_expr::utils::conjunction(equalities).expect("a domain has a value")
    }

    /// The outer columns as the domain holds them and, pairwise, the domain's columns:
    /// the keys of a join of the outer rows to a plan this domain was pushed into.
    pub fn join_keys(&self) -> (Vec<Expr>, Vec<Column>) {
        self.keys(|_, column| Expr::Column(column.clone())).into_iter().unzip()
    }

    /// `plan` computed for every row of the domain: its columns, then the domain's;
    /// None where a node's shape is not one this takes.
    pub fn push(&self, plan: &LogicalPlan) -> Result<Option<LogicalPlan>> {
        if !reads_outer(plan) {
            let one_row = matches!(plan, LogicalPlan::EmptyRelation(e) if e.produce_one_row);
            return Ok(Some(match one_row {
                true => self.plan.clone(),
                false => LogicalPlanBuilder::from(plan.clone()).cross_join(self.plan.clone())?.build()?,
            }));
        }
        match plan {
            LogicalPlan::Projection(p) => {
                let Some(input) = self.push(&p.input)? else { return Ok(None) };
                let mut exprs = self.local_keeping_names(&p.expr, &input)?;
                // Qualified as the input has them: DataFusion's pull-up looks for the
                // columns a correlation reads among a projection's by qualified name,
                // and adds any it misses under the same name.
                for column in self.columns() {
                    exprs.push(normalize_col(column, &input)?);
                }
                Ok(Some(LogicalPlan::Projection(Projection::try_new(exprs, Arc::new(input))?)))
            }
            LogicalPlan::Filter(_)
            | LogicalPlan::SubqueryAlias(_)
            | LogicalPlan::Unnest(_)
            | LogicalPlan::Distinct(Distinct::All(_))
            | LogicalPlan::Sort(datafusion::logical_expr::Sort { fetch: None, .. }) => {
                let Some(input) = self.push(plan.inputs()[0])? else { return Ok(None) };
                let exprs = plan.expressions().into_iter().map(|e| self.local(e, &input)).collect::<Result<_>>()?;
                Ok(Some(plan.with_new_exprs(exprs, vec![input])?))
            }
            // The planner's mark of a relation reading columns before it (an `UNNEST`
            // of an outer column): what it wraps is what is pushed.
            LogicalPlan::Subquery(s) => self.push(&s.subquery),
            LogicalPlan::Aggregate(a) => self.aggregate(a),
            LogicalPlan::Window(w) => self.window(w),
            LogicalPlan::Limit(_) | LogicalPlan::Sort(_) => self.limit(plan),
            LogicalPlan::Join(j) => self.join(plan, j),
            LogicalPlan::Union(u) => {
                let mut inputs = Vec::new();
                for input in &u.inputs {
                    let Some(pushed) = self.push(input)? else { return Ok(None) };
                    // Each branch answers its columns, then the domain's, in order.
                    let columns = input.schema().columns().into_iter().map(Expr::Column).chain(self.columns());
                    inputs.push(LogicalPlanBuilder::from(pushed).project(columns)?.build()?);
                }
                let mut inputs = inputs.into_iter();
                let first = LogicalPlanBuilder::from(inputs.next().expect("a union has inputs"));
                Ok(Some(inputs.try_fold(first, |b, i| b.union(i))?.build()?))
            }
            _ => Ok(None),
        }
    }

    /// `exprs` reading the domain, each keeping the name the nodes above read it by.
    fn local_keeping_names(&self, exprs: &[Expr], input: &LogicalPlan) -> Result<Vec<Expr>> {
        let names = NamePreserver::new_for_projection();
        exprs
            .iter()
            .map(|e| {
                let name = names.save(e);
                Ok(name.restore(self.local(e.clone(), input)?))
            })
            .collect()
    }

    fn window(&self, w: &Window) -> Result<Option<LogicalPlan>> {
        let Some(input) = self.push(&w.input)? else { return Ok(None) };
        let names = NamePreserver::new_for_projection();
        let exprs = w
            .window_expr
            .iter()
            .map(|e| {
                let name = names.save(e);
                let local = self.local(e.clone(), &input)?.transform(|e| match e {
                    Expr::WindowFunction(mut f) => {
                        f.params.partition_by.extend(self.columns());
                        Ok(Transformed::yes(Expr::WindowFunction(f)))
                    }
                    other => Ok(Transformed::no(other)),
                })?;
                Ok(name.restore(local.data))
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Some(LogicalPlan::Window(Window::try_new(exprs, Arc::new(input))?)))
    }

    /// A `LIMIT` (and `OFFSET`), with the `ORDER BY` under it, per domain row: the rows
    /// numbered within each, by that order.
    fn limit(&self, plan: &LogicalPlan) -> Result<Option<LogicalPlan>> {
        let (skip, fetch, order, input) = match plan {
            LogicalPlan::Limit(l) => {
                let (SkipType::Literal(skip), FetchType::Literal(fetch)) = (l.get_skip_type()?, l.get_fetch_type()?)
                else {
                    return Ok(None);
                };
                match l.input.as_ref() {
                    LogicalPlan::Sort(s) if s.fetch.is_none() => (skip, fetch, s.expr.clone(), s.input.as_ref()),
                    LogicalPlan::Sort(_) => return Ok(None),
                    other => (skip, fetch, Vec::new(), other),
                }
            }
            LogicalPlan::Sort(s) => (0, s.fetch, s.expr.clone(), s.input.as_ref()),
            _ => return Ok(None),
        };
        let Some(pushed) = self.push(input)? else { return Ok(None) };
        let order = order
            .into_iter()
            .map(|s| Ok(datafusion::logical_expr::SortExpr { expr: self.local(s.expr, &pushed)?, ..s }))
            .collect::<Result<Vec<_>>>()?;
        let number = self.aliases.next("__row_number");
        let numbered = row_number().partition_by(self.columns().collect()).order_by(order).build()?.alias(&number);
        let columns: Vec<Expr> = pushed.schema().columns().into_iter().map(Expr::Column).collect();
        let n = Self::column(&number);
        let mut kept = n.clone().gt(lit(skip as u64));
        if let Some(fetch) = fetch {
            kept = kept.and(n.lt_eq(lit((skip + fetch) as u64)));
        }
        Ok(Some(LogicalPlanBuilder::from(pushed).window(vec![numbered])?.filter(kept)?.project(columns)?.build()?))
    }
}

/// Whether DataFusion cannot pull `subquery`'s correlation up into a join, or would
/// answer it wrongly; `scalar` where it is a scalar subquery.
pub fn stuck(subquery: &Subquery, scalar: bool) -> bool {
    let Ok(refs) = escaping(&subquery.subquery) else { return true };
    if refs.is_empty() {
        return false;
    }
    if empty_grouping_over_correlation(&subquery.subquery, scalar) || correlated_under_padding(&subquery.subquery) {
        return true;
    }
    // DataFusion's pull-up takes a subquery's own outer references, not those of a
    // subquery inside it.
    if refs.iter().any(|r| r.nested) {
        return true;
    }
    // DataFusion's pull-up stops at a relation the planner marked as reading the
    // columns before it (an `UNNEST` of an outer column): it never takes those.
    let marked =
        subquery.subquery.exists(|p| Ok(matches!(p, LogicalPlan::Subquery(s) if !s.outer_ref_columns.is_empty())));
    if marked.unwrap_or(true) {
        return true;
    }
    let mut pull_up = PullUpCorrelatedExpr::new().with_need_handle_count_bug(true);
    match subquery.subquery.as_ref().clone().rewrite(&mut pull_up) {
        Ok(_) => !pull_up.can_pull_up,
        Err(_) => true,
    }
}

/// Whether `plan` has an aggregation that answers a row even for an empty input (no
/// grouping, or a grouping set without columns) over rows that read outer columns.
/// DataFusion pulls a correlation up through an aggregation by grouping it by the
/// correlated columns, which loses that row for an outer value no input row matches:
/// `EXISTS (SELECT count(*) FROM u WHERE u.k = t.k)` is false where it is always true
/// (apache/datafusion#24960). Only a scalar subquery's topmost aggregation without
/// grouping is mended by DataFusion (its count-bug handling); any other is the
/// push-down's, whose aggregation answers every domain row.
fn empty_grouping_over_correlation(plan: &LogicalPlan, scalar: bool) -> bool {
    fn walk(plan: &LogicalPlan, mended: bool) -> bool {
        let LogicalPlan::Aggregate(a) = plan else {
            let joins = matches!(plan, LogicalPlan::Join(_));
            return plan.inputs().into_iter().any(|i| walk(i, mended && !joins));
        };
        let mended_here = mended && a.group_expr.is_empty();
        (aggregate::answers_empty_input(&a.group_expr) && !mended_here && reads_outer(&a.input))
            || walk(&a.input, false)
    }
    walk(plan, scalar)
}

/// Whether `plan` has a join whose side it may pad with NULLs reads outer columns (the
/// right of a `LEFT JOIN`, both of a `FULL JOIN`), or whose sides both do: DataFusion's
/// pull-up would move a side's correlated filter above the join, which for a padded
/// side does not mean the same, and from under an alias fails to find the columns it
/// read ("No field named"). The push-down takes such a join into both sides.
fn correlated_under_padding(plan: &LogicalPlan) -> bool {
    plan.exists(|p| {
        let LogicalPlan::Join(j) = p else { return Ok(false) };
        let (pads_left, pads_right) = match j.join_type {
            JoinType::Left | JoinType::LeftMark => (false, true),
            JoinType::Right | JoinType::RightMark => (true, false),
            JoinType::Full => (true, true),
            _ => (false, false),
        };
        Ok(match (reads_outer(&j.left), reads_outer(&j.right)) {
            (true, true) => true,
            (true, false) => pads_left,
            (false, true) => pads_right,
            (false, false) => false,
        })
    })
    .unwrap_or(true)
}

/// Whether `e` holds a subquery expression (of any kind, correlated or not).
pub fn has_subquery(e: &Expr) -> bool {
    e.exists(|e| {
        Ok(matches!(e, Expr::ScalarSubquery(_) | Expr::Exists(_) | Expr::InSubquery(_) | Expr::SetComparison(_)))
    })
    .unwrap_or(true)
}

/// Whether `plan` reads an outer column anywhere, inside its subqueries too.
pub fn reads_outer(plan: &LogicalPlan) -> bool {
    escaping(plan).map_or(true, |refs| !refs.is_empty())
}

#[cfg(test)]
mod tests;
