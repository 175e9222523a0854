//! Shapes beyond TPC-H's 22 queries, run on a cluster another test started: unions
//! of inputs DataFusion hash-partitioned alike (it interleaves them; TPC-DS q14, q23,
//! q33, q56, q60, q66 failed to cut), and queries whose stages leave pages unread (a
//! partitioned join over an empty build side never reads its probe side; a root that
//! stops at a LIMIT). Each equals DataFusion's answer and takes at most DataFusion's
//! time in the same run plus a second: a stall detector (TPC-DS sat idle for 5 s on
//! such queries), not a benchmark.

use std::time::{Duration, Instant};

use super::common::{assert_same_rows, oracle, Cluster};

/// A query's label, the session properties it runs with, and its SQL.
type Shape = (&'static str, &'static [(&'static str, &'static str)], &'static str);

/// Queries over `tiny`.
const SHAPES: [Shape; 9] = [
    (
        "union of two aggregations on one key",
        &[],
        "SELECT k, sum(s) FROM (\
             SELECT o_custkey k, sum(o_totalprice) s FROM orders GROUP BY o_custkey \
             UNION ALL SELECT c_custkey k, sum(c_acctbal) s FROM customer GROUP BY c_custkey) t \
         GROUP BY k",
    ),
    (
        "union of three branches, one a join",
        &[],
        "SELECT k, count(*), sum(v) FROM (\
             SELECT o_custkey k, max(o_totalprice) v FROM orders GROUP BY o_custkey \
             UNION ALL SELECT c_custkey k, max(c_acctbal) v FROM customer GROUP BY c_custkey \
             UNION ALL SELECT c_custkey k, max(o_totalprice) v FROM customer JOIN orders ON c_custkey = o_custkey \
                 GROUP BY c_custkey) t \
         GROUP BY k",
    ),
    (
        "union on a key of two columns",
        &[],
        "SELECT a, b, sum(n) FROM (\
             SELECT o_custkey a, o_orderstatus b, count(*) n FROM orders GROUP BY 1, 2 \
             UNION ALL SELECT o_custkey, o_orderpriority, count(*) FROM orders GROUP BY 1, 2) t \
         GROUP BY a, b",
    ),
    (
        "partitioned join over an empty build side",
        &[("join_max_broadcast_table_size", "0B")],
        "SELECT count(*), sum(l_quantity) FROM lineitem JOIN part ON l_partkey = p_partkey WHERE p_size > 1000",
    ),
    (
        "the same without dynamic filters",
        &[("join_max_broadcast_table_size", "0B"), ("enable_dynamic_filtering", "false")],
        "SELECT count(*), sum(l_quantity) FROM lineitem JOIN part ON l_partkey = p_partkey WHERE p_size > 1000",
    ),
    // Joins that keep their build side whole, cut into stages: each once ran in
    // several tasks over parts of its probe side (the left join answered 15 rows of
    // 35, the NOT IN none).
    (
        "a left join on a non-equal condition, in stages",
        &[("single_task_max_rows", "0")],
        "SELECT count(*), count(s_suppkey) FROM nation LEFT JOIN supplier ON n_nationkey < s_suppkey - 95",
    ),
    (
        "NOT IN over a nullable column, in stages",
        &[("single_task_max_rows", "0")],
        "SELECT count(*) FROM customer WHERE c_custkey NOT IN \
         (SELECT nullif(o_custkey, -1) FROM orders WHERE o_orderstatus = 'F')",
    ),
    (
        "a LIMIT over a sorted result",
        &[],
        "SELECT o_orderkey, o_totalprice FROM orders ORDER BY o_totalprice DESC, o_orderkey LIMIT 10",
    ),
    (
        "a LIMIT over a grouped result",
        &[],
        "SELECT l_orderkey, sum(l_quantity) q FROM lineitem GROUP BY l_orderkey ORDER BY q DESC, l_orderkey LIMIT 3",
    ),
];

pub async fn check(cluster: &Cluster) {
    for (label, session, sql) in SHAPES {
        let mut client = cluster.client("tiny");
        for (k, v) in session {
            client = client.with_session(*k, *v);
        }
        // Five runs each: a stall that depends on which stage ends first shows in some.
        for run in 0..5 {
            let asked = Instant::now();
            let want = oracle("tiny", sql).await;
            let alone = asked.elapsed();
            let asked = Instant::now();
            let got = client.execute(sql).await.unwrap_or_else(|e| panic!("{label} failed: {e}"));
            let took = asked.elapsed();
            assert_same_rows(label, sql, &got.rows, &want);
            assert!(
                took <= alone + Duration::from_secs(1),
                "{label} (run {run}) took {took:?}, DataFusion {alone:?}: the query sat idle"
            );
        }
    }
}
