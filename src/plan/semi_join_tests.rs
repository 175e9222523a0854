use std::sync::Arc;

use datafusion::common::JoinType;
use datafusion::logical_expr::LogicalPlan;

use super::PushDownSemiJoin;
use crate::plan::rule_tests::{self, Run};

/// Three small tables in the shape of TPC-H's customers, orders and line items:
/// orders 1-4, where only order 2's quantities sum past 10, customer 30 without orders,
/// a line item without an order key (so that `NOT IN` over line items must mind NULLs).
const TABLES: &[&str] = &[
    "CREATE TABLE customer AS VALUES (10, 'a'), (20, 'b'), (30, 'c')",
    "CREATE TABLE orders AS VALUES (1, 10), (2, 10), (3, 20), (4, 20)",
    "CREATE TABLE lineitem AS VALUES (1, 4), (2, 6), (2, 7), (3, 1), (3, 2), (4, 9), (5, 50), (NULL, 1)",
];

/// The line item columns are column1 and column2 after `AS VALUES`; the views give
/// them TPC-H's names.
const VIEWS: &str = "with c as (select column1 as c_custkey, column2 as c_name from customer),
     o as (select column1 as o_orderkey, column2 as o_custkey from orders),
     l as (select column1 as l_orderkey, column2 as l_quantity from lineitem) ";

async fn without_and_with(sql: &str) -> (Run, Run) {
    rule_tests::without_and_with(TABLES, Arc::new(PushDownSemiJoin), &format!("{VIEWS}{sql}")).await
}

/// Whether some semi or anti join sits below the inner join on the order key.
fn semi_below_order_join(plan: &LogicalPlan) -> bool {
    fn has_semi(plan: &LogicalPlan) -> bool {
        let here =
            matches!(plan, LogicalPlan::Join(j) if matches!(j.join_type, JoinType::LeftSemi | JoinType::LeftAnti));
        here || plan.inputs().into_iter().any(has_semi)
    }
    let on_order_key = |p: &LogicalPlan| match p {
        LogicalPlan::Join(j) if j.join_type == JoinType::Inner => {
            j.on.iter().any(|(l, r)| l.to_string().contains("l_orderkey") || r.to_string().contains("l_orderkey"))
        }
        _ => false,
    };
    if on_order_key(plan) {
        return plan.inputs().into_iter().any(has_semi);
    }
    plan.inputs().into_iter().any(semi_below_order_join)
}

#[tokio::test]
async fn a_semi_join_moves_below_the_join_on_its_key_and_answers_the_same() {
    // q18's shape: IN over an aggregate, then EXISTS and NOT EXISTS forms of it.
    let queries = [
        "select c_name, o_orderkey, sum(l_quantity) as q from c, o, l
         where o_orderkey in (select l_orderkey from l group by l_orderkey having sum(l_quantity) > 10)
           and c_custkey = o_custkey and o_orderkey = l_orderkey
         group by c_name, o_orderkey order by o_orderkey",
        "select c_name, o_orderkey, sum(l_quantity) as q from c, o, l
         where exists (select 1 from l l2 where l2.l_orderkey = o_orderkey and l2.l_quantity > 6)
           and c_custkey = o_custkey and o_orderkey = l_orderkey
         group by c_name, o_orderkey order by o_orderkey",
        "select c_name, o_orderkey, sum(l_quantity) as q from c, o, l
         where not exists (select 1 from l l2 where l2.l_orderkey = o_orderkey and l2.l_quantity > 6)
           and c_custkey = o_custkey and o_orderkey = l_orderkey
         group by c_name, o_orderkey order by o_orderkey",
    ];
    for sql in queries {
        let (before, after) = without_and_with(sql).await;
        assert!(!semi_below_order_join(&before.plan), "DataFusion alone already moved it:\n{}", before.plan);
        assert!(semi_below_order_join(&after.plan), "not moved:\n{}", after.plan);
        assert_eq!(after.answer, before.answer, "{sql}");
        assert!(before.answer.lines().count() > 4, "the query keeps some rows:\n{}", before.answer);
    }
}

#[tokio::test]
async fn semi_joins_on_other_keys_and_not_in_stay_where_they_are() {
    let queries = [
        // The semi join's key is not the join's (q21's nation join).
        "select c_name, o_orderkey from c, o
         where o_orderkey in (select l_orderkey from l where l_quantity > 5) and c_custkey = o_custkey",
        // NOT IN over a column that may hold NULL must see the subquery's NULLs; it
        // stays a null-aware anti join on top.
        "select c_name, o_orderkey, l_quantity from c, o, l
         where o_orderkey not in (select l_orderkey from l where l_quantity > 6)
           and c_custkey = o_custkey and o_orderkey = l_orderkey",
    ];
    for sql in queries {
        rule_tests::assert_untouched(TABLES, Arc::new(PushDownSemiJoin), &format!("{VIEWS}{sql}")).await;
    }
}
