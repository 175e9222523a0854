//! The push-down's shapes, each with its rows worked out by hand.

use crate::plan::correlated_domains::CorrelatedDomains;
use crate::plan::lateral_joins::LateralJoins;
use datafusion::prelude::SessionContext;
use std::sync::Arc;

/// The scalar subquery rule's session with both rules that push domains down, and
/// the marks.
fn session() -> SessionContext {
    let ctx = crate::plan::scalar_subqueries::tests::session();
    ctx.add_analyzer_rule(Arc::new(LateralJoins));
    ctx.add_analyzer_rule(Arc::new(CorrelatedDomains));
    ctx.add_analyzer_rule(Arc::new(crate::plan::subquery_marks::SubqueryMarks));
    ctx
}

async fn rows(sql: &str) -> Vec<String> {
    let mut rows = crate::plan::rule_tests::table_rows(&session(), sql).await.unwrap();
    rows.sort();
    rows
}

/// Each node the push-down passes, with the expected rows worked out per outer x.
#[tokio::test]
async fn every_shape_is_computed_per_outer_row() {
    // A window partitioned per x: row numbers 1 and 2, plus x, at most 2 + x.
    let window = "SELECT x, (SELECT max(r) FROM (SELECT row_number() OVER (ORDER BY y) + t.x AS r \
                  FROM (VALUES (5), (6)) u(y))) FROM (VALUES (1), (2)) t(x)";
    assert_eq!(rows(window).await, ["|1|3|", "|2|4|"]);
    // A union of a correlated filter and the outer value alone: x = 0 sees 1, 2
    // and itself; x = 1 sees 2 and itself; x = 5 itself only.
    let union = "SELECT x, (SELECT count(*) FROM (SELECT y FROM (VALUES (1), (2)) u(y) WHERE y > t.x \
                 UNION ALL SELECT t.x)) FROM (VALUES (0), (1), (5)) t(x)";
    assert_eq!(rows(union).await, ["|0|3|", "|1|2|", "|5|1|"]);
    // A join correlated in its condition: of the matches 2 and 3, those above x.
    let join = "SELECT x, (SELECT count(*) FROM (VALUES (1), (2), (3)) u(y) JOIN (VALUES (2), (3), (4)) v(z) \
                ON y = z AND z > t.x) FROM (VALUES (1), (2)) t(x)";
    assert_eq!(rows(join).await, ["|1|2|", "|2|1|"]);
    // LIMIT 2 OFFSET 1 per x: above 0, the second and third of 1..4 (2 + 3); above
    // 2, the second of 3, 4 (4).
    let limit = "SELECT x, (SELECT sum(y) FROM (SELECT y FROM (VALUES (1), (2), (3), (4)) u(y) WHERE y > t.x \
                 ORDER BY y LIMIT 2 OFFSET 1)) FROM (VALUES (0), (2)) t(x)";
    assert_eq!(rows(limit).await, ["|0|5|", "|2|4|"]);
}

/// A subquery inside a subquery, reading the outer row: x = 2 alone finds y = 2
/// and z = 2; correlated only through the inner one, the same.
#[tokio::test]
async fn nested_subqueries_read_the_domain() {
    let both = "SELECT x FROM (VALUES (1), (2)) t(x) WHERE EXISTS (SELECT 1 FROM (VALUES (1), (2)) u(y) \
                WHERE y = t.x AND EXISTS (SELECT 1 FROM (VALUES (2)) v(z) WHERE z = t.x))";
    assert_eq!(rows(both).await, ["|2|"]);
    let inner_only = "SELECT x FROM (VALUES (1), (2)) t(x) WHERE EXISTS (SELECT 1 FROM (VALUES (1), (2)) u(y) \
                      WHERE EXISTS (SELECT 1 FROM (VALUES (2)) v(z) WHERE z = t.x AND z = y))";
    assert_eq!(rows(inner_only).await, ["|2|"]);
}

/// A lateral join per left row, NULL matching NULL: the NULL row's projection is
/// NULL + 1, and the left join keeps the row whose lateral side is empty.
#[tokio::test]
async fn lateral_joins_per_left_row() {
    let projection = "SELECT x, y FROM (VALUES (1), (NULL)) t(x), LATERAL (SELECT x + 1 AS y)";
    assert_eq!(rows(projection).await, ["|1|2|", "|||"]);
    let filtered = "SELECT x, y FROM (VALUES (1), (3)) t(x) LEFT JOIN LATERAL \
                    (SELECT y FROM (VALUES (2), (4)) u(y) WHERE y > t.x ORDER BY y LIMIT 1) ON true";
    assert_eq!(rows(filtered).await, ["|1|2|", "|3|4|"]);
    let empty = "SELECT x, y FROM (VALUES (1), (5)) t(x) LEFT JOIN LATERAL \
                 (SELECT y FROM (VALUES (2), (4)) u(y) WHERE y > t.x ORDER BY y LIMIT 1) ON true";
    assert_eq!(rows(empty).await, ["|1|2|", "|5||"]);
}

/// Joins correlated on both sides or on the side they pad, per outer x.
#[tokio::test]
async fn joins_correlated_on_any_side() {
    // Both sides: y >= x of 1..3 against z <= x + 1 of 2..4, matched on y = z: for x =
    // 1 {1, 2, 3} and {2} share 2; for x = 2 {2, 3} and {2, 3} share both; for x = 3
    // {3} and {2, 3, 4} share 3.
    let inner = "SELECT x, (SELECT count(*) FROM (SELECT y FROM (VALUES (1), (2), (3)) u(y) WHERE y >= t.x) a \
                 JOIN (SELECT z FROM (VALUES (2), (3), (4)) v(z) WHERE z <= t.x + 1) b ON y = z) \
                 FROM (VALUES (1), (2), (3)) t(x)";
    assert_eq!(rows(inner).await, ["|1|1|", "|2|2|", "|3|1|"]);
    // The padded side: 1..3 each kept once (30), plus the matches among z > x of 2, 3:
    // two for x = 1, one for x = 2, none for x = 5.
    let left = "SELECT x, (SELECT count(*) * 10 + count(z) FROM (VALUES (1), (2), (3)) u(y) LEFT JOIN \
                (SELECT z FROM (VALUES (2), (3)) v(z) WHERE z > t.x) b ON y = z) FROM (VALUES (1), (2), (5)) t(x)";
    assert_eq!(rows(left).await, ["|1|32|", "|2|31|", "|5|30|"]);
    // A full join of y <= x of 1, 2 and z >= x of 2, 3, counted as rows * 100 + ys *
    // 10 + zs: x = 0 has no y and z = 2, 3 (202); x = 1 has (1, -), (-, 2), (-, 3)
    // (312); x = 2 has (1, -), (2, 2), (-, 3) (322); x = 3 has (1, -), (2, -), (-, 3)
    // (321); x = 4 has y = 1, 2 and no z (220).
    let full = "SELECT x, (SELECT count(*) * 100 + count(y) * 10 + count(z) FROM \
                (SELECT y FROM (VALUES (1), (2)) u(y) WHERE y <= t.x) a FULL JOIN \
                (SELECT z FROM (VALUES (2), (3)) v(z) WHERE z >= t.x) b ON y = z) \
                FROM (VALUES (0), (1), (2), (3), (4)) t(x)";
    assert_eq!(rows(full).await, ["|0|202|", "|1|312|", "|2|322|", "|3|321|", "|4|220|"]);
    // A right join correlated in its condition only: every z is kept for every x; the
    // matches of y = z and y > x are 2 and 3 for x = 1, 3 for x = 2.
    let on = "SELECT x, (SELECT count(*) * 10 + count(y) FROM (VALUES (1), (2), (3)) u(y) RIGHT JOIN \
              (VALUES (2), (3), (4)) v(z) ON y = z AND y > t.x) FROM (VALUES (1), (2)) t(x)";
    assert_eq!(rows(on).await, ["|1|32|", "|2|31|"]);
}

/// `ROLLUP` per outer x over rows (g, y) = (1, 1), (1, 2), (2, 3) with y >= x, read
/// as groups * 100 + the largest sum + the grand totals' `grouping(g)` * 1000: x = 1
/// keeps all (groups 1, 2 and the total, largest sum 6); x = 3 keeps (2, 3) (group 2
/// and the total, 3); x = 9 keeps none, and the total alone answers, its sum NULL.
#[tokio::test]
async fn grouping_sets_per_outer_row() {
    let sql = "SELECT x, (SELECT count(*) * 100 + coalesce(max(s), 0) + sum(gg) * 1000 FROM \
               (SELECT g, sum(y) s, grouping(g) gg FROM (VALUES (1, 1), (1, 2), (2, 3)) u(g, y) WHERE y >= t.x \
               GROUP BY ROLLUP (g))) FROM (VALUES (1), (3), (9)) t(x)";
    assert_eq!(rows(sql).await, ["|1|1306|", "|3|1203|", "|9|1100|"]);
    // Without an empty set: groups of g and of (g, y) for y >= x.
    let sets = "SELECT x, (SELECT count(*) FROM (SELECT g, y FROM (VALUES (1, 1), (1, 2), (2, 3)) u(g, y) \
                WHERE y >= t.x GROUP BY GROUPING SETS ((g), (g, y)))) FROM (VALUES (1), (3), (9)) t(x)";
    assert_eq!(rows(sets).await, ["|1|5|", "|3|2|", "|9|0|"]);
}

/// An aggregation without grouping answers one row even where no input row matches the
/// outer one; over u(g, y) = (1, 1), (1, 2), (2, 3) correlated on y = x, x = 9 matches
/// none. `EXISTS` is then true for every x; `x + 1 NOT IN` the sum is true for 1 (2
/// against 1) and 3 (4 against 3) and NULL for 9 (against a NULL sum); the largest of
/// one count is that count, 0 for 9.
#[tokio::test]
async fn aggregations_answer_outer_rows_without_input() {
    let u = "(VALUES (1, 1), (1, 2), (2, 3)) u(g, y)";
    let t = "(VALUES (1), (3), (9)) t(x)";
    let exists = format!("SELECT x FROM {t} WHERE EXISTS (SELECT sum(y) FROM {u} WHERE y = t.x)");
    assert_eq!(rows(&exists).await, ["|1|", "|3|", "|9|"]);
    let not_exists = format!("SELECT x FROM {t} WHERE NOT EXISTS (SELECT count(*) FROM {u} WHERE y = t.x)");
    assert!(rows(&not_exists).await.is_empty());
    let listed = format!("SELECT x, EXISTS (SELECT sum(y) FROM {u} WHERE y = t.x) FROM {t}");
    assert_eq!(rows(&listed).await, ["|1|true|", "|3|true|", "|9|true|"]);
    let not_in = format!("SELECT x FROM {t} WHERE x + 1 NOT IN (SELECT sum(y) FROM {u} WHERE y = t.x)");
    assert_eq!(rows(&not_in).await, ["|1|", "|3|"]);
    let nested = format!("SELECT x, (SELECT max(c) FROM (SELECT count(*) c FROM {u} WHERE y = t.x)) FROM {t}");
    assert_eq!(rows(&nested).await, ["|1|1|", "|3|1|", "|9|0|"]);
    let rollup = format!("SELECT x FROM {t} WHERE EXISTS (SELECT g FROM {u} WHERE y = t.x GROUP BY ROLLUP (g))");
    assert_eq!(rows(&rollup).await, ["|1|", "|3|", "|9|"]);
}

/// A correlated filter on a side a join pads, under an alias: x = 1 keeps z1 = {1, 2}
/// (a >= x) and z2 = {2} (b < 3), a full join on k giving (1, -) and (2, 2), two rows;
/// x = 2 keeps {2} and {2}, one row.
#[tokio::test]
async fn padded_sides_under_aliases() {
    let sql = "SELECT x, (SELECT count(*) FROM (SELECT * FROM (VALUES (1), (2)) a(a) WHERE a >= t.x) z1 \
               FULL JOIN (SELECT * FROM (VALUES (2), (5)) b(b) WHERE b < t.x + 2) z2 ON z1.a = z2.b) \
               FROM (VALUES (1), (2)) t(x)";
    assert_eq!(rows(sql).await, ["|1|2|", "|2|1|"]);
}

/// A subquery correlated on an inequality over a lateral join's rows: row k = 4 (r = 1)
/// has four regions at or above its own, and matches, beside the four other regions;
/// the others count 5, 4 and 1 against their k of 0, 2 and 3.
#[tokio::test]
async fn subqueries_over_lateral_joins() {
    let n = "(VALUES (0, 0), (4, 1), (2, 1), (3, 4)) n(k, r)";
    let regions = "(VALUES (0), (1), (2), (3), (4)) g(r)";
    let sql = format!(
        "SELECT n.k, y.o FROM {n} CROSS JOIN LATERAL (SELECT g.r o FROM {regions} WHERE g.r <> n.r) y \
         WHERE n.k = (SELECT count(*) FROM {regions} WHERE g.r >= n.r) ORDER BY 1, 2"
    );
    assert_eq!(rows(&sql).await, ["|4|0|", "|4|2|", "|4|3|", "|4|4|"]);
}
