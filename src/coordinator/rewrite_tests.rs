//! The three logical rewrites (`plan::join_order`, `plan::semi_join`,
//! `plan::semi_join_reduction`) against DataFusion alone, over `tpch.tiny`, on query
//! shapes the TPC-H queries do not have: USING, outer joins in the chain, expression
//! keys, HAVING, several group keys, self joins, grouping sets, NOT IN.

use datafusion::arrow::record_batch::RecordBatch;

use super::*;

const QUERIES: &[&str] = &[
    // Semi and anti joins over a join on their key, and on another key.
    "select o_orderkey, l_linenumber from orders join lineitem on o_orderkey = l_orderkey
     where o_orderkey in (select l_orderkey from lineitem group by l_orderkey having sum(l_quantity) > 250)",
    "select o_orderkey, l_linenumber from orders join lineitem on o_orderkey = l_orderkey
     where not exists (select 1 from lineitem l2 where l2.l_orderkey = o_orderkey and l2.l_quantity > 49)",
    "select c_name, o_orderkey from customer join orders on c_custkey = o_custkey
     where o_orderkey in (select l_orderkey from lineitem where l_quantity > 49)",
    "select l1.l_linenumber as a, l2.l_linenumber as b from lineitem l1 join lineitem l2 using (l_orderkey)
     where l1.l_orderkey in (select o_orderkey from orders where o_totalprice > 400000)",
    "select l1.l_orderkey, l1.l_suppkey from lineitem l1 join orders on o_orderkey = l1.l_orderkey
     where o_orderstatus = 'F' and exists (select 1 from lineitem l2
       where l2.l_orderkey = l1.l_orderkey and l2.l_suppkey <> l1.l_suppkey and l2.l_quantity > 48)",
    // Under outer joins: only the preserved side may take the semi join.
    "select o_orderkey, l_linenumber from orders left join lineitem on o_orderkey = l_orderkey and l_quantity > 45
     where exists (select 1 from lineitem l2 where l2.l_orderkey = o_orderkey and l2.l_discount > 0.09)",
    "select o_orderkey, l_linenumber from lineitem right join orders on l_orderkey = o_orderkey and l_quantity > 45
     where o_orderkey in (select l_orderkey from lineitem where l_discount > 0.09)",
    "select o_orderkey, l_linenumber from orders left join lineitem on o_orderkey = l_orderkey and l_quantity > 45
     where l_orderkey in (select l_orderkey from lineitem where l_discount > 0.09)",
    // Grouped subqueries: HAVING, a left join, two keys, grouping sets, NOT IN.
    "select p_partkey, t.s from part join (select l_partkey, sum(l_quantity) as s from lineitem
       group by l_partkey having sum(l_quantity) > 10) t on p_partkey = t.l_partkey where p_size = 1",
    "select p_partkey, t.s from part left join (select l_partkey, sum(l_quantity) as s from lineitem
       group by l_partkey) t on p_partkey = t.l_partkey where p_size < 3",
    "select ps_partkey, ps_suppkey, t.q from partsupp join part on ps_partkey = p_partkey
     join (select l_partkey, l_suppkey, sum(l_quantity) as q from lineitem group by l_partkey, l_suppkey) t
       on ps_partkey = t.l_partkey and ps_suppkey = t.l_suppkey where p_brand = 'Brand#12'",
    "select p_partkey, t.s from part join (select l_partkey, sum(l_quantity) as s from lineitem
       group by rollup(l_partkey)) t on p_partkey = t.l_partkey where p_size = 1",
    "select p_partkey from part where p_size = 1 and p_partkey not in
       (select l_partkey from lineitem group by l_partkey having sum(l_quantity) > 1000)",
    "select p_partkey, t.s from part join (select l_partkey, sum(l_quantity) as s from lineitem
       where l_partkey in (select p_partkey from part where p_size = 1) group by l_partkey) t
       on p_partkey = t.l_partkey where p_size = 1",
    // Join order: a filtered dimension written last, an outer join in the chain,
    // an expression key, a self join.
    "select n_name, count(*) as c from supplier, lineitem, orders, nation
     where s_suppkey = l_suppkey and l_orderkey = o_orderkey and s_nationkey = n_nationkey
       and n_name = 'GERMANY' group by n_name",
    "select count(*) as c from customer left join orders on c_custkey = o_custkey
     join nation on c_nationkey = n_nationkey where n_name = 'FRANCE'",
    "select count(*) as c from supplier join lineitem on s_suppkey = l_suppkey
     join nation on s_nationkey + 0 = n_nationkey where n_name = 'CHINA'",
    "select count(*) as c from nation n1 join nation n2 on n1.n_regionkey = n2.n_regionkey
     join region on n1.n_regionkey = r_regionkey where r_name = 'ASIA'",
];

/// Every row as the client protocol's JSON, sorted: the queries have no ORDER BY,
/// and none returns floats.
fn rows(batches: &[RecordBatch]) -> Vec<String> {
    let mut rows: Vec<String> = batches
        .iter()
        .flat_map(|b| crate::format::batch_to_json_rows(b).unwrap())
        .map(|row| serde_json::to_string(&row).unwrap())
        .collect();
    rows.sort();
    rows
}

#[tokio::test]
async fn the_rewrites_answer_as_datafusion_alone_does() {
    let connectors = Connectors::benchmark();
    let oracle = single_node_context("tiny", 2);
    let mut rewritten = 0;
    for sql in QUERIES {
        let on = session_context(&SessionSpec::default(), &SessionProperties::default(), 2, &connectors);
        let off_props = SessionProperties { early_filter_rewrites: false, ..Default::default() };
        let off = session_context(&SessionSpec::default(), &off_props, 2, &connectors);
        let df = on.sql(sql).await.unwrap();
        let plan_on = df.clone().into_optimized_plan().unwrap().display_indent().to_string();
        let plan_off = off.sql(sql).await.unwrap().into_optimized_plan().unwrap().display_indent().to_string();
        rewritten += usize::from(plan_on != plan_off);
        let actual = rows(&df.collect().await.unwrap());
        let expected = rows(&oracle.sql(sql).await.unwrap().collect().await.unwrap());
        assert_eq!(actual, expected, "{sql}\n{plan_on}");
        assert!(!expected.is_empty(), "{sql} returns no rows over tpch.tiny");
    }
    // Most shapes above are ones the rules take; a change that stopped them all
    // would leave this test comparing DataFusion with itself.
    assert!(rewritten >= 12, "only {rewritten} of {} plans were rewritten", QUERIES.len());
}
