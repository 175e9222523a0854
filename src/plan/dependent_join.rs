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
//! by them, a `LIMIT` becomes a row number within each domain row, a join takes them
//! from the side that holds them. An aggregation with no `GROUP BY` must answer one row
//! for every domain row, even one that found no input: its input is outer-joined to
//! `D` and each aggregate counts only the rows that came from the input, so that
//! `count` is 0 and `sum` NULL there, as for an empty input.
//!
//! The result has `R`'s columns and `D`'s, the latter by names no query can write
//! (`__dN_vI`), read unqualified; the caller joins it to the outer rows on them. A
//! subquery inside `R` that reads the outer columns too reads `D`'s instead, as outer
//! references to the node it sits in: one level of correlation less, left to the rules
//! that decorrelate `R` afterwards. A shape this does not take (a join correlated on
//! both sides or on its null-supplying side, `GROUPING SETS`, `DISTINCT ON`) answers
//! None, and the caller leaves the plan as it was.

use std::sync::Arc;

use datafusion::arrow::datatypes::{DataType, Field, FieldRef};
use datafusion::common::alias::AliasGenerator;
use datafusion::common::tree_node::{Transformed, TreeNode, TreeNodeRecursion};
use datafusion::common::{Column, NullEquality, Result, ScalarValue};
use datafusion::functions::core::expr_fn::coalesce;
use datafusion::functions_window::expr_fn::row_number;
use datafusion::logical_expr::expr::{AggregateFunction, ScalarFunction};
use datafusion::logical_expr::expr_rewriter::{normalize_col, NamePreserver};
use datafusion::logical_expr::logical_plan::{FetchType, SkipType};
use datafusion::optimizer::decorrelate::PullUpCorrelatedExpr;

use crate::functions::unnest::{entries_map, unnest_list};
use datafusion::logical_expr::{
    lit, Aggregate, Distinct, Expr, ExprFunctionExt, JoinType, LogicalPlan, LogicalPlanBuilder, Projection, Subquery,
    Window,
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
    escaping(plan, true).ok()
}

/// The outer references of `plan` that leave it: those of its nodes' own expressions
/// (where `own`), and those of each subquery inside them that are not to a column of
/// that node's inputs (a subquery reads its own node's columns first, as the planner
/// resolved them).
fn escaping(plan: &LogicalPlan, own: bool) -> Result<Vec<(FieldRef, Column)>> {
    let mut refs: Vec<(FieldRef, Column)> = Vec::new();
    let mut add = |field: &FieldRef, column: &Column| {
        if !refs.iter().any(|(_, c)| c == column) {
            refs.push((field.clone(), column.clone()));
        }
    };
    plan.apply(|node| {
        let inputs = node.inputs();
        for e in node.expressions() {
            e.apply(|e| {
                match e {
                    Expr::OuterReferenceColumn(field, column) if own => add(field, column),
                    _ => {}
                }
                if let Some(subquery) = subquery_in(e) {
                    for (field, column) in escaping(&subquery.subquery, true)? {
                        if !inputs.iter().any(|i| i.schema().has_column(&column)) {
                            add(&field, &column);
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

/// `plan` with each outer reference that leaves it (see `escaping`) replaced by
/// `replace`'s expression where that answers one, and every subquery's list of its
/// outer references made anew.
fn replace_escaping(plan: &LogicalPlan, replace: &dyn Fn(&Column) -> Option<Expr>) -> Result<LogicalPlan> {
    plan.clone()
        .transform_up(|node| {
            let inputs: Vec<LogicalPlan> = node.inputs().into_iter().cloned().collect();
            let local = |c: &Column| inputs.iter().any(|i| i.schema().has_column(c));
            let inner = |c: &Column| if local(c) { None } else { replace(c) };
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
fn replace_in_expr(
    e: Expr,
    own: &dyn Fn(&Column) -> Option<Expr>,
    inner: &dyn Fn(&Column) -> Option<Expr>,
) -> Result<Transformed<Expr>> {
    e.transform(|e| {
        let renewed = |s: &Subquery| -> Result<Subquery> {
            let plan = replace_escaping(&s.subquery, inner)?;
            Ok(Subquery {
                outer_ref_columns: plan.all_out_ref_exprs(),
                subquery: Arc::new(plan),
                spans: s.spans.clone(),
            })
        };
        Ok(match e {
            Expr::OuterReferenceColumn(field, c) => match own(&c) {
                Some(local) => Transformed::yes(local),
                None => Transformed::no(Expr::OuterReferenceColumn(field, c)),
            },
            Expr::ScalarSubquery(s) => Transformed::yes(Expr::ScalarSubquery(renewed(&s)?)),
            Expr::Exists(mut x) => {
                x.subquery = renewed(&x.subquery)?;
                Transformed::yes(Expr::Exists(x))
            }
            Expr::InSubquery(mut x) => {
                x.subquery = renewed(&x.subquery)?;
                Transformed::yes(Expr::InSubquery(x))
            }
            Expr::SetComparison(mut x) => {
                x.subquery = renewed(&x.subquery)?;
                Transformed::yes(Expr::SetComparison(x))
            }
            other => Transformed::no(other),
        })
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
            let (field, _, value) = self.values.iter().find(|(_, o, _)| o == c)?;
            Some(unheld(value.local(), field.data_type()))
        };
        // Inside a subquery the domain's columns are outer references to `input`'s.
        let referenced = |c: &Column| {
            let read = value(c)?;
            read.transform(|e| match e {
                Expr::Column(c) => {
                    let found = input.schema().columns().into_iter().find(|q| q.name == c.name);
                    let Some(q) = found else { return Ok(Transformed::no(Expr::Column(c))) };
                    let (_, field) = input.schema().qualified_field_from_column(&q)?;
                    Ok(Transformed::yes(Expr::OuterReferenceColumn(field.clone(), q)))
                }
                other => Ok(Transformed::no(other)),
            })
            .ok()
            .map(|t| t.data)
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

    fn aggregate(&self, a: &Aggregate) -> Result<Option<LogicalPlan>> {
        if a.group_expr.iter().any(|e| matches!(e, Expr::GroupingSet(_))) {
            return Ok(None);
        }
        let Some(input) = self.push(&a.input)? else { return Ok(None) };
        let (input, marker) = match a.group_expr.is_empty() {
            false => (input, None),
            true => {
                let (input, marker) = self.with_every_domain_row(input)?;
                (input, Some(marker))
            }
        };
        let mut group = self.local_keeping_names(&a.group_expr, &input)?;
        group.extend(self.columns());
        let mut aggregates = self.local_keeping_names(&a.aggr_expr, &input)?;
        if let Some(marker) = &marker {
            let names = NamePreserver::new_for_projection();
            aggregates = aggregates
                .into_iter()
                .map(|e| {
                    let name = names.save(&e);
                    Ok(name.restore(counting_only(e, marker)?))
                })
                .collect::<Result<_>>()?;
        }
        let aggregate = Aggregate::try_new(Arc::new(input), group, aggregates)?;
        // The domain's columns last, as every pushed node answers them.
        let output = LogicalPlan::Aggregate(aggregate);
        let groups = a.group_expr.len();
        let schema = output.schema().clone();
        let columns: Vec<Expr> = (0..groups)
            .chain(groups + self.columns.len()..schema.fields().len())
            .chain(groups..groups + self.columns.len())
            .map(|i| Expr::Column(Column::from(schema.qualified_field(i))))
            .collect();
        Ok(Some(LogicalPlanBuilder::from(output).project(columns)?.build()?))
    }

    /// `input` (pushed) outer-joined to the domain, so that every domain row has at
    /// least one row, and the name of a marker that is true on the rows from `input`.
    fn with_every_domain_row(&self, input: LogicalPlan) -> Result<(LogicalPlan, String)> {
        let marker = self.aliases.next("__from_input");
        let tagged = {
            let mut columns: Vec<Expr> = input.schema().columns().into_iter().map(Expr::Column).collect();
            columns.push(lit(true).alias(&marker));
            LogicalPlanBuilder::from(input).project(columns)?.build()?
        };
        // The domain again, its columns renamed so that both sides can be told apart.
        let other = |name: &String| format!("{name}_all");
        let every = LogicalPlanBuilder::from(self.plan.clone())
            .project(self.columns.iter().map(|n| Self::column(n).alias(other(n))))?
            .build()?;
        let keys: (Vec<Column>, Vec<Column>) =
            self.columns.iter().map(|n| (Column::new_unqualified(n), Column::new_unqualified(other(n)))).unzip();
        let joined = LogicalPlanBuilder::from(tagged.clone())
            .join_detailed(every, JoinType::Right, keys, None, NullEquality::NullEqualsNothing)?
            .build()?;
        let columns = tagged.schema().columns().into_iter().map(|c| match self.columns.contains(&c.name) {
            true => Self::column(&other(&c.name)).alias(&c.name),
            false => Expr::Column(c),
        });
        Ok((LogicalPlanBuilder::from(joined).project(columns)?.build()?, marker))
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

    fn join(&self, plan: &LogicalPlan, j: &datafusion::logical_expr::Join) -> Result<Option<LogicalPlan>> {
        use JoinType::*;
        let (left, right) = (reads_outer(&j.left), reads_outer(&j.right));
        // The domain enters on a side whose every row the join keeps or filters, never
        // on a side whose rows it may fill with NULLs for want of a match.
        let into_left = match (left, right) {
            (true, true) => return Ok(None),
            (false, true) => false,
            _ => true,
        };
        let takes = match into_left {
            true => matches!(j.join_type, Inner | Left | LeftSemi | LeftAnti | LeftMark),
            false => matches!(j.join_type, Inner | Right | RightSemi | RightAnti | RightMark),
        };
        if !takes {
            return Ok(None);
        }
        let (left, right) = match into_left {
            true => match self.push(&j.left)? {
                Some(l) => (l, j.right.as_ref().clone()),
                None => return Ok(None),
            },
            false => match self.push(&j.right)? {
                Some(r) => (j.left.as_ref().clone(), r),
                None => return Ok(None),
            },
        };
        let both = LogicalPlanBuilder::from(left.clone()).cross_join(right.clone())?.build()?;
        let exprs = plan.expressions().into_iter().map(|e| self.local(e, &both)).collect::<Result<_>>()?;
        Ok(Some(plan.with_new_exprs(exprs, vec![left, right])?))
    }
}

/// Whether DataFusion cannot pull `subquery`'s correlation up into a join.
pub fn stuck(subquery: &Subquery) -> bool {
    if !reads_outer(&subquery.subquery) {
        return false;
    }
    // DataFusion's pull-up takes a subquery's own outer references, not those of a
    // subquery inside it.
    if escaping(&subquery.subquery, false).map_or(true, |nested| !nested.is_empty()) {
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

/// Whether `e` holds a subquery expression (of any kind, correlated or not).
pub fn has_subquery(e: &Expr) -> bool {
    e.exists(|e| {
        Ok(matches!(e, Expr::ScalarSubquery(_) | Expr::Exists(_) | Expr::InSubquery(_) | Expr::SetComparison(_)))
    })
    .unwrap_or(true)
}

/// Whether `plan` reads an outer column anywhere, inside its subqueries too.
pub fn reads_outer(plan: &LogicalPlan) -> bool {
    escaping(plan, true).map_or(true, |refs| !refs.is_empty())
}

/// The aggregate expression `e` counting only the rows where `marker` is true.
fn counting_only(e: Expr, marker: &str) -> Result<Expr> {
    let marked = Expr::Column(Column::new_unqualified(marker));
    Ok(e.transform(|e| match e {
        Expr::AggregateFunction(AggregateFunction { func, mut params }) => {
            params.filter = Some(Box::new(match params.filter.take() {
                Some(filter) => filter.and(marked.clone()),
                None => marked.clone(),
            }));
            Ok(Transformed::yes(Expr::AggregateFunction(AggregateFunction { func, params })))
        }
        other => Ok(Transformed::no(other)),
    })?
    .data)
}

#[cfg(test)]
mod tests {
    use crate::plan::correlated_domains::CorrelatedDomains;
    use crate::plan::lateral_joins::LateralJoins;
    use datafusion::prelude::SessionContext;
    use std::sync::Arc;

    /// The scalar subquery rule's session with both rules that push domains down.
    fn session() -> SessionContext {
        let ctx = crate::plan::scalar_subqueries::tests::session();
        ctx.add_analyzer_rule(Arc::new(CorrelatedDomains));
        ctx.add_analyzer_rule(Arc::new(LateralJoins));
        ctx
    }

    async fn rows(sql: &str) -> Vec<String> {
        let batches = session().sql(sql).await.unwrap().collect().await.unwrap();
        let text = datafusion::arrow::util::pretty::pretty_format_batches(&batches).unwrap().to_string();
        let mut rows: Vec<String> =
            text.lines().skip(3).filter(|l| l.starts_with('|')).map(|l| l.split_whitespace().collect()).collect();
        rows.sort();
        rows
    }

    /// Each node the push-down passes, with the expected rows worked out per outer x.
    #[tokio::test]
    async fn every_shape_is_computed_per_outer_row() {
        // A window partitioned per x: row numbers 1 and 2, plus x, at most 2 + x.
        let window = "SELECT x, (SELECT max(r) FROM (SELECT row_number() OVER (ORDER BY y) + t.x AS r \
                      FROM (VALUES (5), (6)) u(y))) FROM (VALUES (1), (2)) t(x)";
        assert_eq!(rows(window).await, ["|1|3|", "|2|4|"]);
        // A union of a correlated filter and the outer value alone: x = 0 sees 1, 2
        // and itself; x = 1 sees 2 and itself; x = 5 itself only.
        let union = "SELECT x, (SELECT count(*) FROM (SELECT y FROM (VALUES (1), (2)) u(y) WHERE y > t.x \
                     UNION ALL SELECT t.x)) FROM (VALUES (0), (1), (5)) t(x)";
        assert_eq!(rows(union).await, ["|0|3|", "|1|2|", "|5|1|"]);
        // A join correlated in its condition: of the matches 2 and 3, those above x.
        let join = "SELECT x, (SELECT count(*) FROM (VALUES (1), (2), (3)) u(y) JOIN (VALUES (2), (3), (4)) v(z) \
                    ON y = z AND z > t.x) FROM (VALUES (1), (2)) t(x)";
        assert_eq!(rows(join).await, ["|1|2|", "|2|1|"]);
        // LIMIT 2 OFFSET 1 per x: above 0, the second and third of 1..4 (2 + 3); above
        // 2, the second of 3, 4 (4).
        let limit = "SELECT x, (SELECT sum(y) FROM (SELECT y FROM (VALUES (1), (2), (3), (4)) u(y) WHERE y > t.x \
                     ORDER BY y LIMIT 2 OFFSET 1)) FROM (VALUES (0), (2)) t(x)";
        assert_eq!(rows(limit).await, ["|0|5|", "|2|4|"]);
    }

    /// A subquery inside a subquery, reading the outer row: x = 2 alone finds y = 2
    /// and z = 2; correlated only through the inner one, the same.
    #[tokio::test]
    async fn nested_subqueries_read_the_domain() {
        let both = "SELECT x FROM (VALUES (1), (2)) t(x) WHERE EXISTS (SELECT 1 FROM (VALUES (1), (2)) u(y) \
                    WHERE y = t.x AND EXISTS (SELECT 1 FROM (VALUES (2)) v(z) WHERE z = t.x))";
        assert_eq!(rows(both).await, ["|2|"]);
        let inner_only = "SELECT x FROM (VALUES (1), (2)) t(x) WHERE EXISTS (SELECT 1 FROM (VALUES (1), (2)) u(y) \
                          WHERE EXISTS (SELECT 1 FROM (VALUES (2)) v(z) WHERE z = t.x AND z = y))";
        assert_eq!(rows(inner_only).await, ["|2|"]);
    }

    /// A lateral join per left row, NULL matching NULL: the NULL row's projection is
    /// NULL + 1, and the left join keeps the row whose lateral side is empty.
    #[tokio::test]
    async fn lateral_joins_per_left_row() {
        let projection = "SELECT x, y FROM (VALUES (1), (NULL)) t(x), LATERAL (SELECT x + 1 AS y)";
        assert_eq!(rows(projection).await, ["|1|2|", "|||"]);
        let filtered = "SELECT x, y FROM (VALUES (1), (3)) t(x) LEFT JOIN LATERAL \
                        (SELECT y FROM (VALUES (2), (4)) u(y) WHERE y > t.x ORDER BY y LIMIT 1) ON true";
        assert_eq!(rows(filtered).await, ["|1|2|", "|3|4|"]);
        let empty = "SELECT x, y FROM (VALUES (1), (5)) t(x) LEFT JOIN LATERAL \
                     (SELECT y FROM (VALUES (2), (4)) u(y) WHERE y > t.x ORDER BY y LIMIT 1) ON true";
        assert_eq!(rows(empty).await, ["|1|2|", "|5||"]);
    }
}
