//! Conformance with Trino's SQL reference: the examples of its SELECT page (GROUP BY,
//! grouping sets, set operations, subqueries, UNNEST) and of its window functions,
//! run unchanged on a cluster of its own whose built-in `tpch` is spelled as Trino's
//! by default (`name`, `regionkey`, money as DOUBLE), with every query cut into
//! stages. The expected rows are the page's where it prints them; where it does not,
//! they are worked out by hand in the comment beside each case, over the page's
//! `shipping` table (six rows, below) or TPC-H `tiny`'s `nation` and `region`.

use serde_json::Value;

use super::common::{assert_same_rows, Cluster};

/// The page's `shipping` table: (origin_state, origin_zip, destination_state,
/// destination_zip, package_weight).
const SHIPPING: &str = "CREATE TABLE memory.default.shipping AS SELECT * FROM (VALUES \
    ('California', 94131, 'New Jersey', 8648, 13), ('California', 94131, 'New Jersey', 8540, 42), \
    ('California', 90210, 'Connecticut', 6927, 1337), ('California', 94131, 'Colorado', 80302, 5), \
    ('New York', 10002, 'New Jersey', 8540, 3), ('New Jersey', 7081, 'Connecticut', 6708, 225)) \
    t(origin_state, origin_zip, destination_state, destination_zip, package_weight)";

/// (label, SQL, the expected rows as JSON; compared as multisets where the query has
/// no ORDER BY).
const CASES: &[(&str, &str, &str)] = &[
    // GROUPING SETS: California's four packages weigh 1397, of which 60 from 94131;
    // 58 go to New Jersey, 1562 to Connecticut, 5 to Colorado.
    (
        "GROUPING SETS",
        "SELECT origin_state, origin_zip, destination_state, sum(package_weight) FROM memory.default.shipping \
         GROUP BY GROUPING SETS ((origin_state), (origin_state, origin_zip), (destination_state))",
        r#"[["California", null, null, 1397], ["New York", null, null, 3], ["New Jersey", null, null, 225],
            ["California", 94131, null, 60], ["California", 90210, null, 1337], ["New York", 10002, null, 3],
            ["New Jersey", 7081, null, 225], [null, null, "New Jersey", 58], [null, null, "Connecticut", 1562],
            [null, null, "Colorado", 5]]"#,
    ),
    // CUBE: every pair, each side alone, and the total of all six, 1625.
    (
        "CUBE",
        "SELECT origin_state, destination_state, sum(package_weight) FROM memory.default.shipping \
         GROUP BY CUBE (origin_state, destination_state)",
        r#"[["California", "New Jersey", 55], ["California", "Connecticut", 1337], ["California", "Colorado", 5],
            ["New York", "New Jersey", 3], ["New Jersey", "Connecticut", 225], ["California", null, 1397],
            ["New York", null, 3], ["New Jersey", null, 225], [null, "New Jersey", 58], [null, "Connecticut", 1562],
            [null, "Colorado", 5], [null, null, 1625]]"#,
    ),
    // ROLLUP: by state and zip, by state, and the total.
    (
        "ROLLUP",
        "SELECT origin_state, origin_zip, sum(package_weight) FROM memory.default.shipping \
         GROUP BY ROLLUP (origin_state, origin_zip)",
        r#"[["California", 94131, 60], ["California", 90210, 1337], ["New York", 10002, 3], ["New Jersey", 7081, 225],
            ["California", null, 1397], ["New York", null, 3], ["New Jersey", null, 225], [null, null, 1625]]"#,
    ),
    // grouping(): a bit per argument, set where the argument is not grouped: 3 for
    // (origin_state), 1 for (origin_state, origin_zip), 6 for (destination_state).
    (
        "grouping()",
        "SELECT origin_state, origin_zip, destination_state, sum(package_weight), \
         grouping(origin_state, origin_zip, destination_state) FROM memory.default.shipping \
         GROUP BY GROUPING SETS ((origin_state), (origin_state, origin_zip), (destination_state))",
        r#"[["California", null, null, 1397, 3], ["New York", null, null, 3, 3], ["New Jersey", null, null, 225, 3],
            ["California", 94131, null, 60, 1], ["California", 90210, null, 1337, 1], ["New York", 10002, null, 3, 1],
            ["New Jersey", 7081, null, 225, 1], [null, null, "New Jersey", 58, 6], [null, null, "Connecticut", 1562, 6],
            [null, null, "Colorado", 5, 6]]"#,
    ),
    // A grouping set crossed with plain keys: origin_state with each of the zip and
    // the destination.
    (
        "a grouping set beside a plain key",
        "SELECT origin_state, origin_zip, destination_state, sum(package_weight) FROM memory.default.shipping \
         GROUP BY origin_state, GROUPING SETS ((origin_zip), (destination_state))",
        r#"[["California", 94131, null, 60], ["California", 90210, null, 1337], ["New York", 10002, null, 3],
            ["New Jersey", 7081, null, 225], ["California", null, "New Jersey", 55],
            ["California", null, "Connecticut", 1337], ["California", null, "Colorado", 5],
            ["New York", null, "New Jersey", 3], ["New Jersey", null, "Connecticut", 225]]"#,
    ),
    // HAVING over a group: only California ships more than 1000.
    (
        "HAVING",
        "SELECT origin_state, sum(package_weight) FROM memory.default.shipping GROUP BY origin_state \
         HAVING sum(package_weight) > 1000",
        r#"[["California", 1397]]"#,
    ),
    // The set operations of the page.
    ("UNION", "SELECT 13 UNION SELECT 42", "[[13], [42]]"),
    ("UNION of a duplicate", "SELECT 13 UNION SELECT * FROM (VALUES 42, 13)", "[[13], [42]]"),
    ("UNION ALL", "SELECT 13 UNION ALL SELECT * FROM (VALUES 42, 13)", "[[13], [42], [13]]"),
    ("INTERSECT", "SELECT * FROM (VALUES 13, 42) INTERSECT SELECT 13", "[[13]]"),
    ("EXCEPT", "SELECT * FROM (VALUES 13, 42) EXCEPT SELECT 13", "[[42]]"),
    // The subqueries of the page, over TPC-H: every nation's region exists; AMERICA's
    // five nations; the five of the region with the largest key, MIDDLE EAST.
    (
        "EXISTS",
        "SELECT count(*) FROM nation WHERE EXISTS (SELECT * FROM region WHERE region.regionkey = nation.regionkey)",
        "[[25]]",
    ),
    (
        "IN",
        "SELECT name FROM nation WHERE regionkey IN (SELECT regionkey FROM region WHERE name = 'AMERICA')",
        r#"[["ARGENTINA"], ["BRAZIL"], ["CANADA"], ["PERU"], ["UNITED STATES"]]"#,
    ),
    (
        "a scalar subquery",
        "SELECT name FROM nation WHERE regionkey = (SELECT max(regionkey) FROM region)",
        r#"[["EGYPT"], ["IRAN"], ["IRAQ"], ["JORDAN"], ["SAUDI ARABIA"]]"#,
    ),
    // The string functions page's SOUNDEX example, whose answer it prints.
    ("SOUNDEX", "SELECT name FROM nation WHERE SOUNDEX(name) = SOUNDEX('CHYNA')", r#"[["CHINA"]]"#),
    // The tpch connector's types: identifiers bigint, counts integer, money double.
    (
        "tpch types",
        "SELECT typeof(orderkey), typeof(linenumber), typeof(quantity), typeof(extendedprice), typeof(shipdate) \
         FROM lineitem LIMIT 1",
        r#"[["bigint", "integer", "double", "double", "date"]]"#,
    ),
    // UNNEST: an array's elements; two arrays side by side, the shorter padded with NULL.
    ("UNNEST", "SELECT * FROM UNNEST(ARRAY[1, 2]) AS t(number)", "[[1], [2]]"),
    (
        "UNNEST of two arrays",
        "SELECT a, b FROM UNNEST(ARRAY[2, 5], ARRAY[7, 8, 9]) AS t(a, b)",
        "[[2, 7], [5, 8], [null, 9]]",
    ),
    // LIMIT, OFFSET and FETCH FIRST over the nations in key order.
    ("OFFSET and LIMIT", "SELECT nationkey FROM nation ORDER BY nationkey OFFSET 22 LIMIT 5", "[[22], [23], [24]]"),
    (
        "FETCH FIRST",
        "SELECT nationkey FROM nation ORDER BY nationkey OFFSET 1 ROW FETCH FIRST 2 ROWS ONLY",
        "[[1], [2]]",
    ),
    // Window functions, by hand over (a, x): a running sum, a frame of neighbours, ranks
    // with ties, and lag/lead with a default.
    (
        "a running sum per partition",
        "SELECT a, x, sum(x) OVER (PARTITION BY a ORDER BY x) FROM (VALUES (1, 1), (1, 2), (1, 2), (2, 5)) t(a, x) \
         ORDER BY a, x",
        // RANGE by default: the two x = 2 are peers and share their sum.
        "[[1, 1, 1], [1, 2, 5], [1, 2, 5], [2, 5, 5]]",
    ),
    (
        "a frame of neighbouring rows",
        "SELECT x, sum(x) OVER (ORDER BY x ROWS BETWEEN 1 PRECEDING AND 1 FOLLOWING) FROM (VALUES 1, 2, 4, 8) t(x) \
         ORDER BY x",
        "[[1, 3], [2, 7], [4, 14], [8, 12]]",
    ),
    (
        "rank, dense_rank and row_number with ties",
        "SELECT x, rank() OVER (ORDER BY x), dense_rank() OVER (ORDER BY x), row_number() OVER (ORDER BY x, y) \
         FROM (VALUES (1, 'a'), (2, 'b'), (2, 'c'), (3, 'd')) t(x, y) ORDER BY x, y",
        "[[1, 1, 1, 1], [2, 2, 2, 2], [2, 2, 2, 3], [3, 4, 3, 4]]",
    ),
    (
        "lag and lead with a default",
        "SELECT x, lag(x) OVER (ORDER BY x), lead(x, 1, 0) OVER (ORDER BY x) FROM (VALUES 1, 2, 4) t(x) ORDER BY x",
        "[[1, null, 2], [2, 1, 4], [4, 2, 0]]",
    ),
    (
        "first_value and last_value over a whole partition",
        "SELECT a, x, first_value(x) OVER w, last_value(x) OVER w FROM (VALUES (1, 3), (1, 1), (2, 7)) t(a, x) \
         WINDOW w AS (PARTITION BY a ORDER BY x ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING) ORDER BY a, x",
        "[[1, 1, 1, 3], [1, 3, 1, 3], [2, 7, 7, 7]]",
    ),
    (
        "ntile",
        "SELECT x, ntile(2) OVER (ORDER BY x) FROM (VALUES 1, 2, 3, 4, 5) t(x) ORDER BY x",
        // Five rows in two buckets: the first gets the extra row.
        "[[1, 1], [2, 1], [3, 1], [4, 2], [5, 2]]",
    ),
];

/// A cluster with Trino's tpch spelling runs the documented examples as printed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn trinos_documented_examples_run_unchanged() {
    let cluster = Cluster::start_with(&["--tpch-column-naming", "SIMPLIFIED"], 2, &[]).await;
    check(&cluster).await;
    // The comparison page's IN list, whose rows it does not print: AMERICA (1) and
    // EUROPE (3), with every column of region.
    let client = cluster.client("tiny");
    let sql = "SELECT * FROM region WHERE name IN ('AMERICA', 'EUROPE')";
    let got = client.execute(sql).await.unwrap_or_else(|e| panic!("{sql}: {e}"));
    let names: Vec<&str> = got.columns.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, ["regionkey", "name", "comment"]);
    let mut keys: Vec<(i64, String)> =
        got.rows.iter().map(|r| (r[0].as_i64().unwrap(), r[1].as_str().unwrap().to_string())).collect();
    keys.sort();
    assert_eq!(keys, [(1, "AMERICA".to_string()), (3, "EUROPE".to_string())]);
    // The specification's prefixed names are a catalog property away, as in Trino.
    let err = client.execute("SELECT n_name FROM nation").await.expect_err("no prefixed names by default");
    assert!(err.to_string().contains("n_name"), "{err}");
    cluster.assert_no_tasks_left().await;
}

async fn check(cluster: &Cluster) {
    let client = cluster.client("tiny");
    client.execute(SHIPPING).await.unwrap_or_else(|e| panic!("{SHIPPING}: {e}"));
    for (label, sql, expected) in CASES {
        let want: Vec<Vec<Value>> = serde_json::from_str(expected).expect("expected rows are JSON");
        let got = client.execute(sql).await.unwrap_or_else(|e| panic!("{label} failed: {e}"));
        assert_same_rows(label, sql, &got.rows, &want);
    }
    client.execute("DROP TABLE memory.default.shipping").await.expect("drop shipping");
    eprintln!("Trino's documented examples: {} cases", CASES.len());
}
