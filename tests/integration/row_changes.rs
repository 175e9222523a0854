//! `UPDATE`, `DELETE` and `MERGE` in a catalog of files and in `memory`, on the
//! cluster of `writes::tables_made_from_columns_fill_by_insert_in_files_and_memory`:
//! a small table whose rows after each statement are worked out by hand (each
//! expected table is written in the comments' terms), TPC-H orders changed and
//! checked against single-node DataFusion, Trino's rule that a target row matched by
//! two source rows fails the `MERGE` (and leaves the table as it was), and
//! concurrent `UPDATE`s that either both apply or fail as a conflict, never lose one.

use serde_json::{json, Value};

use super::common::{assert_same_rows, files_below, oracle, query_error, EtcCluster};

fn row(k: i64, v: Option<&str>, n: Option<i64>) -> Vec<Value> {
    vec![json!(k), v.map(|v| json!(v)).unwrap_or(Value::Null), n.map(|n| json!(n)).unwrap_or(Value::Null)]
}

/// Runs `sql` and checks its update count.
async fn changes(c: &flotilla::client::StatementClient, sql: &str, count: i64) {
    let done = c.execute(sql).await.unwrap_or_else(|e| panic!("{sql}: {e}"));
    assert_eq!(done.update_count, Some(count), "{sql}");
}

async fn rows_of(c: &flotilla::client::StatementClient, table: &str) -> Vec<Vec<Value>> {
    c.execute(&format!("SELECT k, v, n FROM {table} ORDER BY k")).await.unwrap().rows
}

/// Every statement on a table of four rows, in `table` (`catalog.schema.name`).
async fn by_hand(c: &flotilla::client::StatementClient, table: &str) {
    let t = table;
    let made = format!(
        "CREATE TABLE {t} AS SELECT * FROM (VALUES (1, 'a', 10), (2, 'b', 20), (3, 'c', 30), (4, NULL, NULL)) AS r(k, v, n)"
    );
    c.execute(&made).await.unwrap_or_else(|e| panic!("{made}: {e}"));
    // k <= 2 matches 1 and 2.
    changes(c, &format!("UPDATE {t} SET v = 'x', n = n + 1 WHERE k <= 2"), 2).await;
    let want =
        vec![row(1, Some("x"), Some(11)), row(2, Some("x"), Some(21)), row(3, Some("c"), Some(30)), row(4, None, None)];
    assert_eq!(rows_of(c, t).await, want, "{t} after UPDATE");
    // A predicate that is NULL for row 4 (n is NULL) and false elsewhere changes nothing.
    changes(c, &format!("UPDATE {t} SET v = 'z' WHERE n > 100"), 0).await;
    changes(c, &format!("UPDATE {t} SET n = 0 WHERE v IS NULL"), 1).await;
    changes(c, &format!("DELETE FROM {t} WHERE n = 0"), 1).await;
    // Subqueries, as dbt's delete+insert writes them: nation 3 is row 3.
    let sub = "SELECT n_nationkey FROM tpch.tiny.nation WHERE n_nationkey = 3";
    changes(c, &format!("DELETE FROM {t} WHERE k IN ({sub})"), 1).await;
    changes(
        c,
        &format!("UPDATE {t} SET v = 'sub' WHERE EXISTS (SELECT 1 FROM tpch.tiny.region WHERE r_regionkey = k)"),
        2,
    )
    .await;
    let want = vec![row(1, Some("sub"), Some(11)), row(2, Some("sub"), Some(21))];
    assert_eq!(rows_of(c, t).await, want, "{t} after the subqueries");
    // MERGE: 2 is matched (n 5 < 100: updated, 21 + 5), 5 is inserted (50 < 55), 6
    // is not (60), 1 is left alone.
    let merge = format!(
        "MERGE INTO {t} t USING (VALUES (2, 'm', 5), (5, 'new', 50), (6, 'skip', 60)) AS s(k, v, n) ON t.k = s.k \
         WHEN MATCHED AND s.n > 100 THEN DELETE \
         WHEN MATCHED THEN UPDATE SET v = s.v, n = t.n + s.n \
         WHEN NOT MATCHED AND s.n < 55 THEN INSERT (k, v, n) VALUES (s.k, s.v, s.n)"
    );
    changes(c, &merge, 2).await;
    let want = vec![row(1, Some("sub"), Some(11)), row(2, Some("m"), Some(26)), row(5, Some("new"), Some(50))];
    assert_eq!(rows_of(c, t).await, want, "{t} after MERGE");
    // A matched DELETE, and an INSERT of some columns (the others NULL).
    changes(
        c,
        &format!(
            "MERGE INTO {t} USING (VALUES 1) AS s(k) ON {}.k = s.k WHEN MATCHED THEN DELETE",
            t.rsplit('.').next().unwrap()
        ),
        1,
    )
    .await;
    changes(
        c,
        &format!("MERGE INTO {t} t USING (SELECT 7 AS k) s ON t.k = s.k WHEN NOT MATCHED THEN INSERT (k) VALUES (s.k)"),
        1,
    )
    .await;
    let want = vec![row(2, Some("m"), Some(26)), row(5, Some("new"), Some(50)), row(7, None, None)];
    assert_eq!(rows_of(c, t).await, want, "{t} after the second MERGEs");
    // Row 2 matched twice: when no clause applies to the pairs it stays, once ...
    let twice = "(VALUES (2, 1), (2, 2)) AS s(k, x)";
    changes(c, &format!("MERGE INTO {t} t USING {twice} ON t.k = s.k WHEN MATCHED AND s.x = 3 THEN DELETE"), 0).await;
    assert_eq!(rows_of(c, t).await, want, "{t}: a row matched twice without a clause that applies");
    // ... and when one applies to both, the MERGE fails and changes nothing.
    let failed =
        c.execute(&format!("MERGE INTO {t} t USING {twice} ON t.k = s.k WHEN MATCHED THEN UPDATE SET n = 0")).await;
    let (name, message) = query_error(failed);
    assert_eq!(name, "MERGE_TARGET_ROW_MULTIPLE_MATCHES", "{message}");
    assert!(message.contains("One MERGE target table row matched more than one source row"), "{message}");
    assert_eq!(rows_of(c, t).await, want, "{t}: the failed MERGE left it as it was");
}

/// TPC-H's orders, changed and compared with DataFusion's answer over the rows the
/// changes leave.
async fn orders_changed(c: &flotilla::client::StatementClient, table: &str) {
    let t = table;
    c.execute(&format!("CREATE TABLE {t} AS SELECT * FROM tpch.tiny.orders")).await.expect("ctas");
    let count = |sql: &str| {
        let sql = sql.to_string();
        async move { oracle("tiny", &sql).await[0][0].as_i64().expect("a count") }
    };
    let urgent = count("SELECT count(*) FROM orders WHERE o_orderpriority = '1-URGENT'").await;
    changes(
        c,
        &format!("UPDATE {t} SET o_comment = 'urgent', o_shippriority = 1 WHERE o_orderpriority = '1-URGENT'"),
        urgent,
    )
    .await;
    let tenth = count("SELECT count(*) FROM orders WHERE o_orderkey % 10 = 0").await;
    let merge = format!(
        "MERGE INTO {t} o USING (SELECT o_orderkey AS k FROM tpch.tiny.orders WHERE o_orderkey % 10 = 0 \
         UNION ALL SELECT 9000000 + n_nationkey FROM tpch.tiny.nation) s ON o.o_orderkey = s.k \
         WHEN MATCHED AND o.o_orderstatus = 'F' THEN DELETE \
         WHEN MATCHED THEN UPDATE SET o_totalprice = 0 \
         WHEN NOT MATCHED THEN INSERT VALUES (s.k, 0, 'N', 0, DATE '1999-01-01', '5-LOW', 'Clerk#0', 0, 'merged')"
    );
    changes(c, &merge, tenth + 25).await;
    let q = "SELECT o_orderstatus, o_shippriority, count(*), sum(o_totalprice), count(o_comment), \
             min(o_comment), max(o_orderkey) FROM orders GROUP BY 1, 2 ORDER BY 1, 2";
    let want = oracle(
        "tiny",
        "SELECT o_orderstatus, o_shippriority, count(*), sum(o_totalprice), count(o_comment), min(o_comment), \
         max(o_orderkey) FROM (\
           SELECT o_orderkey, o_orderstatus, \
                  CASE WHEN o_orderpriority = '1-URGENT' THEN 1 ELSE o_shippriority END AS o_shippriority, \
                  CASE WHEN o_orderkey % 10 = 0 THEN 0 ELSE o_totalprice END AS o_totalprice, \
                  CASE WHEN o_orderpriority = '1-URGENT' THEN 'urgent' ELSE o_comment END AS o_comment \
           FROM orders WHERE NOT (o_orderkey % 10 = 0 AND o_orderstatus = 'F') \
           UNION ALL SELECT 9000000 + n_nationkey, 'N', 0, 0, 'merged' FROM nation) \
         GROUP BY 1, 2 ORDER BY 1, 2",
    )
    .await;
    let got = c.execute(&q.replace("FROM orders", &format!("FROM {t}"))).await.unwrap().rows;
    assert_same_rows(t, q, &got, &want);
    // NOT IN over the changed table cut into stages: in `memory` its columns are
    // nullable (Trino's CTAS), which makes the anti join null-aware, and such a join
    // once ran over parts of its probe side in several tasks and answered no rows.
    let staged = c.clone().with_session("single_task_max_rows", "0");
    let not_in = format!(
        "SELECT count(*) FROM tpch.tiny.customer WHERE c_custkey NOT IN (SELECT o_custkey FROM {t} WHERE o_orderstatus = 'F')"
    );
    let not_in_want = oracle(
        "tiny",
        "SELECT count(*) FROM customer WHERE c_custkey NOT IN \
         (SELECT o_custkey FROM orders WHERE o_orderstatus = 'F' AND o_orderkey % 10 <> 0)",
    )
    .await;
    assert_eq!(staged.execute(&not_in).await.unwrap().rows, not_in_want, "{not_in}");
    // Its columns are NOT NULL (those of tpch's orders, in a catalog of files): a
    // NULL there fails the MERGE, whose table stays as it was.
    if t.starts_with("lake.") {
        let null = format!("MERGE INTO {t} o USING (SELECT 1 AS k) s ON o.o_orderkey = s.k WHEN MATCHED THEN UPDATE SET o_comment = NULL");
        let (name, message) = query_error(c.execute(&null).await);
        assert!(message.contains("NULL value not allowed for NOT NULL column: o_comment"), "{name}: {message}");
        let again = c.execute(&q.replace("FROM orders", &format!("FROM {t}"))).await.unwrap().rows;
        assert_same_rows(t, q, &again, &want);
    }
}

/// Two `UPDATE`s of one table at once: each applies or fails as a conflict, and the
/// table shows exactly those that applied.
async fn concurrent_updates(c: &flotilla::client::StatementClient, table: &str) {
    let t = table;
    c.execute(&format!("CREATE TABLE {t} AS SELECT n_nationkey AS k, 0 AS n FROM tpch.tiny.nation"))
        .await
        .expect("ctas");
    let mut applied = 0;
    for _ in 0..3 {
        let sql = format!("UPDATE {t} SET n = n + 1");
        let (a, b) = tokio::join!(c.execute(&sql), c.execute(&sql));
        for outcome in [a, b] {
            match outcome {
                Ok(done) => {
                    assert_eq!(done.update_count, Some(25), "{sql}");
                    applied += 1;
                }
                failed => {
                    let (name, message) = query_error(failed);
                    assert_eq!(name, "TRANSACTION_CONFLICT", "{sql}: {message}");
                }
            }
        }
    }
    assert!(applied >= 3, "one of each pair applies: {applied}");
    let got = c.execute(&format!("SELECT count(*), min(n), max(n) FROM {t}")).await.unwrap().rows;
    assert_eq!(got, vec![vec![json!(25), json!(applied), json!(applied)]], "{t}: no update lost");
}

/// The row-level changes, in the catalog of files `lake.w` (its files under
/// `warehouse`) and in `mem.default`.
pub async fn row_level_changes(cluster: &EtcCluster, warehouse: &std::path::Path) {
    let c = cluster.client("lake", "w");
    for (catalog, dir) in [("lake.w", Some(warehouse.join("w"))), ("mem.default", None)] {
        by_hand(&c, &format!("{catalog}.changed")).await;
        orders_changed(&c, &format!("{catalog}.orders_changed")).await;
        concurrent_updates(&c, &format!("{catalog}.raced")).await;
        if let Some(dir) = dir {
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(15);
            loop {
                let staged: Vec<_> = files_below(&dir)
                    .into_iter()
                    .filter(|f| f.to_string_lossy().contains(".flotilla-staging"))
                    .collect();
                if staged.is_empty() {
                    break;
                }
                assert!(std::time::Instant::now() < deadline, "writes left staged files: {staged:?}");
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            }
        }
        for table in ["changed", "orders_changed", "raced"] {
            c.execute(&format!("DROP TABLE {catalog}.{table}")).await.expect("drop");
        }
    }
}
