//! The push-down through an aggregation, part of `dependent_join`: the domain's
//! columns join every grouping (each grouping set too), and a grouping without
//! columns, which answers one row even for an empty input, answers one for every
//! domain row.

use std::sync::Arc;

use datafusion::arrow::datatypes::DataType;
use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::common::{Column, NullEquality, Result, ScalarValue};
use datafusion::functions_aggregate::expr_fn::count;
use datafusion::logical_expr::expr::{AggregateFunction, GroupingSet};
use datafusion::logical_expr::expr_rewriter::NamePreserver;
use datafusion::logical_expr::utils::grouping_set_to_exprlist;
use datafusion::logical_expr::{
    binary_expr, lit, Aggregate, Expr, JoinType, LogicalPlan, LogicalPlanBuilder, Operator,
};

use super::Domain;

impl Domain<'_> {
    pub(super) fn aggregate(&self, a: &Aggregate) -> Result<Option<LogicalPlan>> {
        let Some(input) = self.push(&a.input)? else { return Ok(None) };
        let (input, marker) = match answers_empty_input(&a.group_expr) {
            false => (input, None),
            true => {
                let (input, marker) = self.with_every_domain_row(input)?;
                (input, Some(marker))
            }
        };
        // The domain's columns first: in a grouping set they are then the grouping
        // id's highest bits, always 0, and `grouping()`, resolved before this rule
        // runs, reads the same bits as before.
        let mut group: Vec<Expr> = self.columns().collect();
        for e in &a.group_expr {
            group.push(self.local_grouping(e, &input)?);
        }
        let mut aggregates = self.local_keeping_names(&a.aggr_expr, &input)?;
        let mut found = None;
        if let Some(marker) = &marker {
            let names = NamePreserver::new_for_projection();
            aggregates = aggregates
                .into_iter()
                .map(|e| {
                    let name = names.save(&e);
                    Ok(name.restore(counting_only(e, marker)?))
                })
                .collect::<Result<_>>()?;
            if is_grouping_set(a) {
                let name = self.aliases.next("__found");
                aggregates.push(count(Self::column(marker)).alias(&name));
                found = Some(name);
            }
        }
        let aggregate = Aggregate::try_new(Arc::new(input), group, aggregates)?;
        let id = |schema: &datafusion::common::DFSchema| {
            schema.field_with_unqualified_name(Aggregate::INTERNAL_GROUPING_ID).ok().map(|f| f.data_type().clone())
        };
        let id_type = id(aggregate.schema.as_ref());
        // A wider grouping id than the one `grouping()` was resolved against.
        if id_type != id(a.schema.as_ref()) {
            return Ok(None);
        }
        let mut output = LogicalPlanBuilder::from(LogicalPlan::Aggregate(aggregate));
        if let (Some(found), Some(id_type)) = (&found, id_type) {
            // A domain row without input rows was padded by one row of NULLs: only
            // the empty grouping set may answer it.
            let groups = grouping_set_to_exprlist(&a.group_expr)?.len();
            let Some(all) = mask(&id_type, groups) else { return Ok(None) };
            let id = Self::column(Aggregate::INTERNAL_GROUPING_ID);
            let empty_set = binary_expr(id, Operator::BitwiseAnd, lit(all.clone())).eq(lit(all));
            output = output.filter(Self::column(found).gt(lit(0i64)).or(empty_set))?;
        }
        // The domain's columns last, as every pushed node answers them.
        let columns = output.schema().columns();
        let (domain, own): (Vec<Column>, Vec<Column>) =
            columns.into_iter().partition(|c| self.columns.contains(&c.name));
        let own = own.into_iter().filter(|c| Some(&c.name) != found.as_ref());
        Ok(Some(output.project(own.chain(domain).map(Expr::Column))?.build()?))
    }

    /// The grouping `e` reading the domain, a grouping set's members one by one.
    fn local_grouping(&self, e: &Expr, input: &LogicalPlan) -> Result<Expr> {
        let local = |exprs: &[Expr]| self.local_keeping_names(exprs, input);
        Ok(match e {
            Expr::GroupingSet(GroupingSet::Rollup(exprs)) => Expr::GroupingSet(GroupingSet::Rollup(local(exprs)?)),
            Expr::GroupingSet(GroupingSet::Cube(exprs)) => Expr::GroupingSet(GroupingSet::Cube(local(exprs)?)),
            Expr::GroupingSet(GroupingSet::GroupingSets(sets)) => {
                Expr::GroupingSet(GroupingSet::GroupingSets(sets.iter().map(|s| local(s)).collect::<Result<_>>()?))
            }
            other => local(std::slice::from_ref(other))?.remove(0),
        })
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
}

fn is_grouping_set(a: &Aggregate) -> bool {
    matches!(a.group_expr.as_slice(), [Expr::GroupingSet(_)])
}

/// Whether an aggregation grouped by `group` answers a row even for an empty input:
/// no grouping, or a grouping set without columns (`ROLLUP` and `CUBE` always have
/// one).
pub(super) fn answers_empty_input(group: &[Expr]) -> bool {
    match group {
        [] => true,
        [Expr::GroupingSet(GroupingSet::GroupingSets(sets))] => sets.iter().any(|s| s.is_empty()),
        [Expr::GroupingSet(_)] => true,
        _ => false,
    }
}

/// The grouping id's bits of `groups` expressions, all set, in the id's type.
fn mask(id_type: &DataType, groups: usize) -> Option<ScalarValue> {
    let all = 1u64.checked_shl(groups as u32)?.wrapping_sub(1);
    Some(match id_type {
        DataType::UInt8 => ScalarValue::UInt8(Some(u8::try_from(all).ok()?)),
        DataType::UInt16 => ScalarValue::UInt16(Some(u16::try_from(all).ok()?)),
        DataType::UInt32 => ScalarValue::UInt32(Some(u32::try_from(all).ok()?)),
        DataType::UInt64 => ScalarValue::UInt64(Some(all)),
        _ => return None,
    })
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
