//! Dynamic filters on a real cluster: join shapes a filter may and may not touch give
//! single-node DataFusion's answers with every join partitioned, and the filter does
//! drop probe rows before the exchange (fewer rows leave the stages). Called from the
//! three-worker TPC-H test, to share its cluster.

use serde_json::Value;

use super::common::{assert_same_rows, oracle, query_info, Cluster};
use flotilla::local::TPCH_QUERIES;

const SHAPES: [&str; 8] = [
    // Two keys, inner join.
    "SELECT count(*), sum(l_quantity) FROM lineitem JOIN partsupp ON l_partkey = ps_partkey AND l_suppkey = ps_suppkey WHERE ps_availqty < 500",
    // A left join: the build side is kept whole, the probe side filtered.
    "SELECT o_orderkey, count(l_orderkey) FROM orders LEFT JOIN lineitem ON o_orderkey = l_orderkey AND l_quantity > 45 WHERE o_totalprice > 300000 GROUP BY o_orderkey",
    // EXISTS and NOT EXISTS.
    "SELECT c_name FROM customer WHERE EXISTS (SELECT 1 FROM orders WHERE o_custkey = c_custkey AND o_orderpriority = '1-URGENT' AND o_totalprice > 300000)",
    "SELECT count(*) FROM orders WHERE NOT EXISTS (SELECT 1 FROM lineitem WHERE l_orderkey = o_orderkey AND l_shipmode = 'AIR')",
    // NOT IN over a nullable column: a NULL on the probe side empties the answer.
    "SELECT count(*) FROM orders WHERE o_orderkey NOT IN (SELECT CASE WHEN l_quantity > 49 THEN NULL ELSE l_orderkey END FROM lineitem)",
    // An empty build side.
    "SELECT count(*) FROM orders JOIN lineitem ON o_orderkey = l_orderkey WHERE o_totalprice < 0",
    // Text keys, many to many; and an outer join that keeps the probe side.
    "SELECT count(*) FROM part p1 JOIN part p2 ON p1.p_type = p2.p_type WHERE p1.p_size = 1 AND p2.p_size < 3",
    "SELECT c_mktsegment, count(o_orderkey) FROM orders RIGHT JOIN customer ON o_custkey = c_custkey AND o_orderstatus = 'F' GROUP BY c_mktsegment",
];

/// Rows all of a query's stages sent on.
fn rows_out(info: &Value) -> u64 {
    let stages = info["stages"].as_array().cloned().unwrap_or_default();
    stages
        .iter()
        .flat_map(|s| s["tasks"].as_array().cloned().unwrap_or_default())
        .map(|t| t["stats"]["output_rows"].as_u64().unwrap_or(0))
        .sum()
}

pub async fn check(cluster: &Cluster) {
    let client = cluster.client("tiny").with_session("join_max_broadcast_table_size", "0B");
    for sql in SHAPES {
        for on in ["true", "false"] {
            let got = client
                .clone()
                .with_session("enable_dynamic_filtering", on)
                .execute(sql)
                .await
                .unwrap_or_else(|e| panic!("{sql} failed: {e}"));
            assert_same_rows(
                &format!("tiny, dynamic filtering {on}: {sql}"),
                sql,
                &got.rows,
                &oracle("tiny", sql).await,
            );
        }
    }
    // q4 sends the line items of three months of orders on, not all of them.
    let mut sent = Vec::new();
    for on in ["true", "false"] {
        let got =
            client.clone().with_session("enable_dynamic_filtering", on).execute(TPCH_QUERIES[3]).await.expect("q4");
        sent.push(rows_out(&query_info(&cluster.coordinator.url, &got.id).await));
    }
    assert!(sent[0] * 4 < sent[1], "rows out of q4's stages with and without the filter: {sent:?}");
}
