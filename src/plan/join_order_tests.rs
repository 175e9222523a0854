use std::sync::Arc;

use datafusion::logical_expr::LogicalPlan;

use super::JoinFilteredScanEarly;
use crate::plan::rule_tests;

/// TPC-H's suppliers, line items, orders, customers and nations, a few rows each:
/// nations 1 and 2, suppliers and customers in both.
const TABLES: &[&str] = &[
    "CREATE TABLE n (n_nationkey BIGINT, n_name VARCHAR)",
    "INSERT INTO n VALUES (1, 'F'), (2, 'G')",
    "CREATE TABLE s (s_suppkey BIGINT, s_nationkey BIGINT)",
    "INSERT INTO s VALUES (10, 1), (11, 2), (12, 1)",
    "CREATE TABLE c (c_custkey BIGINT, c_nationkey BIGINT, c_segment VARCHAR)",
    "INSERT INTO c VALUES (20, 2, 'B'), (21, 1, 'A'), (22, 1, 'B')",
    "CREATE TABLE o (o_orderkey BIGINT, o_custkey BIGINT, o_date BIGINT)",
    "INSERT INTO o VALUES (1, 20, 5), (2, 21, 1), (3, 22, 7), (4, 20, 2)",
    "CREATE TABLE l (l_orderkey BIGINT, l_suppkey BIGINT, l_price DOUBLE, l_date BIGINT)",
    "INSERT INTO l VALUES (1, 10, 1, 6), (1, 11, 2, 6), (2, 12, 4, 2), (3, 10, 8, 8), (3, 11, 16, 3), (4, 12, 32, 9)",
];

/// Whether the join on the supplier's nation has no line items below it.
fn nations_meet_suppliers_first(plan: &LogicalPlan) -> bool {
    fn reads(plan: &LogicalPlan, table: &str) -> bool {
        matches!(plan, LogicalPlan::TableScan(t) if t.table_name.table() == table)
            || plan.inputs().into_iter().any(|p| reads(p, table))
    }
    match plan {
        LogicalPlan::Join(j) if j.on.iter().any(|(l, r)| format!("{l}{r}").contains("s_nationkey")) => {
            !reads(plan, "l")
        }
        _ => plan.inputs().into_iter().any(nations_meet_suppliers_first),
    }
}

#[tokio::test]
async fn a_filtered_dimension_joins_the_table_that_holds_its_key_first() {
    // q7's shape: the nation filter is written last, its key belongs to the first table.
    let sql = "select n1.n_name as supp_nation, n2.n_name as cust_nation, sum(l_price) as revenue
        from s, l, o, c, n n1, n n2
        where s_suppkey = l_suppkey and o_orderkey = l_orderkey and c_custkey = o_custkey
          and s_nationkey = n1.n_nationkey and c_nationkey = n2.n_nationkey
          and ((n1.n_name = 'F' and n2.n_name = 'G') or (n1.n_name = 'G' and n2.n_name = 'F'))
        group by n1.n_name, n2.n_name order by 1, 2";
    let (before, after) = rule_tests::without_and_with(TABLES, Arc::new(JoinFilteredScanEarly), sql).await;
    assert!(!nations_meet_suppliers_first(&before.plan), "DataFusion alone already did:\n{}", before.plan);
    assert!(nations_meet_suppliers_first(&after.plan), "not moved:\n{}", after.plan);
    assert_eq!(after.answer, before.answer, "{}", after.plan);
    assert!(before.answer.lines().count() > 5, "the query keeps rows of both directions:\n{}", before.answer);
}

#[tokio::test]
async fn a_filtered_scan_does_not_pass_another() {
    // q3's shape: line items must not move before the customer filter.
    let sql = "select o_orderkey, sum(l_price) as revenue from c, o, l
        where c_segment = 'B' and c_custkey = o_custkey and l_orderkey = o_orderkey
          and o_date < 6 and l_date > 4
        group by o_orderkey order by o_orderkey";
    let before = rule_tests::assert_untouched(TABLES, Arc::new(JoinFilteredScanEarly), sql).await;
    assert!(before.answer.lines().count() > 4, "{}", before.answer);
}
