//! Trino's lambdas, JSON functions and `TRY` inside distributed queries over TPC-H
//! tables: each query's answer equals single-node DataFusion's answer to the same
//! question written without them (DataFusion has none of these functions, so the
//! oracle cannot run the first form). Run on the 3-worker cluster of the TPC-H test.

use super::common::{assert_same_rows, oracle, Cluster};

/// (Trino's form, the same question without Trino's functions).
const PAIRS: [(&str, &str); 8] = [
    (
        "SELECT l_returnflag, sum(reduce(ARRAY[l_linenumber, l_suppkey], 0, (s, x) -> s + x, s -> s * 2)) \
         FROM lineitem GROUP BY l_returnflag",
        "SELECT l_returnflag, sum((l_linenumber + l_suppkey) * 2) FROM lineitem GROUP BY l_returnflag",
    ),
    (
        "SELECT o_orderkey, zip_with(ARRAY[o_custkey, c_nationkey], ARRAY[3, 5], (x, y) -> x * y), \
         transform(filter(ARRAY[o_custkey, c_nationkey, 0], x -> x > 0), x -> x + 1) \
         FROM orders JOIN customer ON o_custkey = c_custkey WHERE o_orderkey < 2000 ORDER BY o_orderkey",
        "SELECT o_orderkey, make_array(o_custkey * 3, c_nationkey * 5), \
         CASE WHEN c_nationkey > 0 THEN make_array(o_custkey + 1, c_nationkey + 1) ELSE make_array(o_custkey + 1) END \
         FROM orders JOIN customer ON o_custkey = c_custkey WHERE o_orderkey < 2000 ORDER BY o_orderkey",
    ),
    (
        "SELECT o_orderkey, array_sort(ARRAY[o_custkey, o_orderkey, o_shippriority], \
         (a, b) -> IF(a < b, 1, IF(a = b, 0, -1))) FROM orders WHERE o_orderkey < 500 ORDER BY o_orderkey",
        "SELECT o_orderkey, array_sort(make_array(o_custkey, o_orderkey, o_shippriority), 'DESC') \
         FROM orders WHERE o_orderkey < 500 ORDER BY o_orderkey",
    ),
    (
        "SELECT n_name, cardinality(map_filter(MAP(ARRAY['c', 'o'], ARRAY[count(*), max(o_orderkey)]), \
         (k, v) -> v > 100000)) FROM orders JOIN customer ON o_custkey = c_custkey \
         JOIN nation ON c_nationkey = n_nationkey GROUP BY n_name",
        "SELECT n_name, CASE WHEN count(*) > 100000 THEN 1 ELSE 0 END \
         + CASE WHEN max(o_orderkey) > 100000 THEN 1 ELSE 0 END \
         FROM orders JOIN customer ON o_custkey = c_custkey JOIN nation ON c_nationkey = n_nationkey GROUP BY n_name",
    ),
    (
        "SELECT o_orderpriority, count(*) FROM orders \
         WHERE json_extract_scalar(json_object('p' : o_orderpriority, 'k' : o_orderkey), '$.p') <> '1-URGENT' \
         GROUP BY o_orderpriority",
        "SELECT o_orderpriority, count(*) FROM orders WHERE o_orderpriority <> '1-URGENT' GROUP BY o_orderpriority",
    ),
    (
        "SELECT o_orderkey, CAST(json_parse(json_format(CAST(ARRAY[o_orderkey, o_custkey] AS JSON))) AS ARRAY(BIGINT)) \
         FROM orders WHERE o_orderkey < 300 ORDER BY o_orderkey",
        "SELECT o_orderkey, make_array(o_orderkey, o_custkey) FROM orders WHERE o_orderkey < 300 ORDER BY o_orderkey",
    ),
    (
        "SELECT l_returnflag, sum(CAST(json_value(json_object('q' : l_quantity), 'lax $.q') AS DECIMAL(15, 2))), \
         count(*) FILTER (WHERE json_exists(json_array(l_quantity, l_tax), 'lax $[*]?(@ > 49)')) \
         FROM lineitem GROUP BY l_returnflag",
        "SELECT l_returnflag, sum(l_quantity), count(*) FILTER (WHERE l_quantity > 49 OR l_tax > 49) \
         FROM lineitem GROUP BY l_returnflag",
    ),
    (
        "SELECT l_linestatus, sum(TRY(l_quantity / (l_linenumber - 1))) FROM lineitem GROUP BY l_linestatus",
        "SELECT l_linestatus, sum(CASE WHEN l_linenumber = 1 THEN NULL ELSE l_quantity / (l_linenumber - 1) END) \
         FROM lineitem GROUP BY l_linestatus",
    ),
];

pub async fn check(cluster: &Cluster) {
    let client = cluster.client("sf0_1");
    for (i, (trino, plain)) in PAIRS.iter().enumerate() {
        let label = format!("Trino functions, pair {}", i + 1);
        let got = client.execute(trino).await.unwrap_or_else(|e| panic!("{label} failed: {e}\n{trino}"));
        assert!(!got.rows.is_empty(), "{label}: no rows");
        assert_same_rows(&label, trino, &got.rows, &oracle("sf0_1", plain).await);
    }
}
