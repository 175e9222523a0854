use std::sync::Arc;

use datafusion::logical_expr::LogicalPlan;

use super::{reduced, SemiJoinReduction};
use crate::plan::rule_tests;

/// Parts, line items and part suppliers in TPC-H's shape: brand `x` holds parts 1 and
/// 3; part 4 and a line item without a part are never matched.
const TABLES: &[&str] = &[
    "CREATE TABLE p (p_partkey BIGINT, p_brand VARCHAR)",
    "INSERT INTO p VALUES (1, 'x'), (2, 'y'), (3, 'x'), (4, 'y')",
    "CREATE TABLE l (l_partkey BIGINT, l_quantity DOUBLE, l_price DOUBLE)",
    "INSERT INTO l VALUES (1, 5, 10), (1, 1, 20), (2, 3, 5), (3, 2, 7), (3, 8, 1), (4, 1, 1), (NULL, 1, 1)",
    "CREATE TABLE ps (ps_partkey BIGINT, ps_suppkey BIGINT, ps_availqty DOUBLE)",
    "INSERT INTO ps VALUES (1, 100, 5), (2, 200, 1), (3, 300, 1), (3, 301, 9), (4, 400, 9)",
];

/// Whether some aggregate's input was semi-joined with a reduction's keys.
fn has_reduced_aggregate(plan: &LogicalPlan) -> bool {
    matches!(plan, LogicalPlan::Aggregate(a) if reduced(&a.input))
        || plan.inputs().into_iter().any(has_reduced_aggregate)
}

#[tokio::test]
async fn a_grouped_subquery_aggregates_only_the_keys_a_filtered_scan_holds() {
    let queries = [
        // q17: the part filter reaches the join key directly.
        "select p_partkey, sum(l_price) as s from l, p
         where p_partkey = l_partkey and p_brand = 'x'
           and l_quantity < (select 0.9 * avg(l2.l_quantity) from l l2 where l2.l_partkey = p_partkey)
         group by p_partkey order by p_partkey",
        // q20: part suppliers take their part keys from a semi join with filtered parts.
        "select ps_suppkey from ps
         where ps_partkey in (select p_partkey from p where p_brand = 'x')
           and ps_availqty > (select 0.5 * sum(l_quantity) from l where l_partkey = ps_partkey)
         order by ps_suppkey",
    ];
    for sql in queries {
        let (before, after) = rule_tests::without_and_with(TABLES, Arc::new(SemiJoinReduction), sql).await;
        assert!(!has_reduced_aggregate(&before.plan), "{}", before.plan);
        assert!(has_reduced_aggregate(&after.plan), "not reduced:\n{}", after.plan);
        assert_eq!(after.answer, before.answer, "{sql}\n{}", after.plan);
        assert!(before.answer.lines().count() > 4, "the query keeps some rows:\n{}", before.answer);
    }
}

#[tokio::test]
async fn unfiltered_or_volatile_keys_and_not_in_leave_the_aggregate_whole() {
    let queries = [
        // No filter on either side of the join key: no group would be removed.
        "select p_partkey, sum(l_price) as s from l, p
         where p_partkey = l_partkey
           and l_quantity < (select 0.9 * avg(l2.l_quantity) from l l2 where l2.l_partkey = p_partkey)
         group by p_partkey order by p_partkey",
        // A filter read twice must give the same rows: not a volatile one.
        "select p_partkey, sum(l_price) as s from l, p
         where p_partkey = l_partkey and p_brand = 'x' and p_partkey + random() >= 1
           and l_quantity < (select 0.9 * avg(l2.l_quantity) from l l2 where l2.l_partkey = p_partkey)
         group by p_partkey order by p_partkey",
        // NOT IN over a grouped subquery: its NULL group decides the answer.
        "select p_partkey from p where p_brand = 'x'
           and p_partkey not in (select l_partkey from l group by l_partkey having sum(l_quantity) > 100)",
    ];
    for sql in queries {
        rule_tests::assert_untouched(TABLES, Arc::new(SemiJoinReduction), sql).await;
    }
}
