//! Lateral joins over the outer rows' columns, `LATERAL (...)` and `CROSS JOIN
//! UNNEST(t.a)`: the analyzer rule `LateralJoins` (the coordinator's planner registers
//! it with the other subquery rules).
//!
//! DataFusion plans the right side of a lateral join as a subquery reading the left
//! side's columns, and decorrelates it only where those reads are filters it can pull
//! up; an `UNNEST` of a left column, a projection of one, a `LIMIT` per left row or an
//! aggregation over an unnested array fail to execute. Such a right side is computed
//! once per distinct value of the left columns it reads (`dependent_join`) and joined
//! to the left rows on those values (a NULL by its keys); an inner or left join as
//! written, with its `ON` condition. Every correlated lateral join is taken here, also
//! those DataFusion's `DecorrelateLateralJoin` would: one method for all of them, which
//! the differential tester checks against DuckDB.

use std::sync::Arc;

use datafusion::common::alias::AliasGenerator;
use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::Transformed;
use datafusion::common::{Column, NullEquality, Result};
use datafusion::logical_expr::{Expr, Join, JoinType, LogicalPlan, LogicalPlanBuilder, Subquery, SubqueryAlias};
use datafusion::optimizer::AnalyzerRule;

use super::dependent_join::{outer_columns, Domain};

/// The analyzer rule; see the module's comment.
#[derive(Debug, Default)]
pub struct LateralJoins;

impl AnalyzerRule for LateralJoins {
    fn name(&self) -> &str {
        "lateral_joins"
    }

    fn analyze(&self, plan: LogicalPlan, _config: &ConfigOptions) -> Result<LogicalPlan> {
        let aliases = AliasGenerator::new();
        plan.transform_up_with_subqueries(|node| {
            let LogicalPlan::Join(join) = &node else { return Ok(Transformed::no(node)) };
            let new = decorrelated(join, &aliases);
            Ok(super::rewritten_or_unchanged("lateral_joins", node, new))
        })
        .map(|t| t.data)
    }
}

/// The right side's subquery of a lateral join, and its alias.
fn lateral(join: &Join) -> Option<(&Subquery, Option<&datafusion::common::TableReference>)> {
    match join.right.as_ref() {
        LogicalPlan::Subquery(s) => Some((s, None)),
        LogicalPlan::SubqueryAlias(SubqueryAlias { input, alias, .. }) => match input.as_ref() {
            LogicalPlan::Subquery(s) => Some((s, Some(alias))),
            _ => None,
        },
        _ => None,
    }
}

fn decorrelated(join: &Join, aliases: &AliasGenerator) -> Result<Option<LogicalPlan>> {
    if !matches!(join.join_type, JoinType::Inner | JoinType::Left) || !join.on.is_empty() {
        return Ok(None);
    }
    let Some((subquery, alias)) = lateral(join) else { return Ok(None) };
    let Some(refs) = outer_columns(&subquery.subquery) else { return Ok(None) };
    let Some(domain) = Domain::new(&join.left, refs, aliases)? else { return Ok(None) };
    let Some(right) = domain.push(&subquery.subquery)? else { return Ok(None) };
    // A subquery inside that read the left columns reads the domain's now.
    let right = super::correlated_domains::decorrelate(right, aliases)?;
    let right = match alias {
        Some(alias) => LogicalPlan::SubqueryAlias(SubqueryAlias::try_new(Arc::new(right), alias.clone())?),
        None => right,
    };
    let (left_keys, right_keys) = domain.join_keys();
    // The left side's keys as its columns (computed: a map's entries, a NULL's keys).
    let names: Vec<String> = left_keys.iter().map(|_| aliases.next("__lateral_key")).collect();
    let left = LogicalPlanBuilder::from(join.left.as_ref().clone())
        .project(
            join.left
                .schema()
                .columns()
                .into_iter()
                .map(Expr::Column)
                .chain(left_keys.into_iter().zip(&names).map(|(k, name)| k.alias(name))),
        )?
        .build()?;
    let left_keys: Vec<Column> = names.iter().map(Column::new_unqualified).collect();
    let joined = LogicalPlanBuilder::from(left)
        .join_detailed(
            right,
            join.join_type,
            (left_keys, right_keys),
            join.filter.clone(),
            NullEquality::NullEqualsNothing,
        )?
        .project(join.schema.columns().into_iter().map(Expr::Column))?
        .build()?;
    Ok(Some(joined))
}
