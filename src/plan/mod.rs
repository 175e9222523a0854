//! Distributed plans: logical rules that filter before joining (`join_order`,
//! `semi_join`) and before aggregating (`semi_join_reduction`), making a single-node
//! DataFusion plan safe to cut (`distribute`), cutting it into fragments linked in a
//! DAG (`fragmenter`), filtering a partitioned join's probe stage by the keys of its
//! build stage (`dynamic_filter`), pacing nested-loop joins so that a cancel lands
//! (`probe_pacer`), what adaptive planning may change about a partitioned join
//! (`probe_join`), and the writers of a table write (`table_writer`). The
//! coordinator's planning produces them; the schedulers run one stage per fragment.
//! It imports nothing from the coordinator or the schedulers: the dependency kinds
//! between fragments that the phased schedule reads are defined here.

pub mod casts;
pub mod checked_arithmetic;
pub mod checked_sum;
pub mod correlated_domains;
pub mod dependent_join;
pub mod distribute;
pub mod dynamic_filter;
pub mod dynamic_filter_exec;
pub mod explain;
pub mod fetch_ties;
pub mod fragmenter;
pub mod grouping_sets;
pub mod join_order;
pub mod lateral_joins;
pub mod nan_extremes;
pub mod partition_subset;
pub mod probe_join;
pub mod probe_pacer;
pub mod scalar_subqueries;
pub mod semi_join;
pub mod semi_join_reduction;
pub mod set_operations;
pub mod subquery_arguments;
pub mod subquery_marks;
pub mod table_writer;
pub mod window_nulls;

/// A logical rewrite's result; the plan unchanged when rebuilding it failed, since an
/// optional rewrite of ours must not fail the query (the warning names the rule).
pub(crate) fn rewritten_or_unchanged(
    rule: &str,
    plan: datafusion::logical_expr::LogicalPlan,
    new: datafusion::common::Result<Option<datafusion::logical_expr::LogicalPlan>>,
) -> datafusion::common::tree_node::Transformed<datafusion::logical_expr::LogicalPlan> {
    use datafusion::common::tree_node::Transformed;
    match new {
        Ok(Some(new)) => Transformed::yes(new),
        Ok(None) => Transformed::no(plan),
        Err(e) => {
            tracing::warn!(rule, error = %e, "a logical rewrite failed; the plan stays as it was");
            Transformed::no(plan)
        }
    }
}

/// A join as `like` (keys, condition, type, NULL handling) over other inputs.
pub(crate) fn join_like(
    like: &datafusion::logical_expr::Join,
    left: std::sync::Arc<datafusion::logical_expr::LogicalPlan>,
    right: std::sync::Arc<datafusion::logical_expr::LogicalPlan>,
) -> datafusion::common::Result<datafusion::logical_expr::Join> {
    datafusion::logical_expr::Join::try_new(
        left,
        right,
        like.on.clone(),
        like.filter.clone(),
        like.join_type,
        like.join_constraint,
        like.null_equality,
        like.null_aware,
    )
}

/// Whether a projection only passes columns on (renaming none), so that a join
/// below it may move above it.
pub(crate) fn passes_columns_only(p: &datafusion::logical_expr::Projection) -> bool {
    p.expr.iter().all(|e| matches!(e, datafusion::logical_expr::Expr::Column(_)))
}

#[cfg(test)]
pub(crate) mod rule_tests;

/// Why one stage waits for another.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DependencyKind {
    /// Probe-side source of a partitioned join waits for the build side.
    PartitionedJoinBuild,
    /// The stage of a broadcast join waits for its build stage (the stages feeding
    /// its probe side do not).
    BroadcastJoinBuild,
}

/// `plan`'s expressions rewritten bottom-up by `rewrite`, each keeping its name: the
/// nodes above read a projection's, an aggregate's or a window's output by the name
/// DataFusion gives its expression, which a rewrite inside it would change. What the
/// analyzer rules that rewrite expressions in place share.
pub fn rewrite_keeping_names(
    plan: datafusion::logical_expr::LogicalPlan,
    mut rewrite: impl FnMut(
        datafusion::logical_expr::Expr,
    ) -> datafusion::common::Result<
        datafusion::common::tree_node::Transformed<datafusion::logical_expr::Expr>,
    >,
) -> datafusion::common::Result<datafusion::common::tree_node::Transformed<datafusion::logical_expr::LogicalPlan>> {
    use datafusion::common::tree_node::TreeNode;
    let names = datafusion::logical_expr::expr_rewriter::NamePreserver::new(&plan);
    plan.map_expressions(|e| {
        let name = names.save(&e);
        Ok(e.transform_up(&mut rewrite)?.update_data(|e| name.restore(e)))
    })
}
