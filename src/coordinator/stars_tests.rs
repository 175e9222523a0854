//! Stars written out as their columns: names and rows worked out by hand. Over a
//! bare DataFusion session, whose rows are made by `named_struct` (Trino's casts to
//! `ROW(...)` are the cluster tests' in `trino_sql`).

use datafusion::prelude::SessionContext;

use super::*;
use crate::coordinator::dialect::{parse_in, SessionValues};

/// The column names and rows (`|1|a|`) `sql` answers, or the error of its stars.
async fn answer(sql: &str) -> Result<(Vec<String>, Vec<String>), QueryError> {
    let ctx = SessionContext::new();
    let mut statement = parse_in(sql, 100, &SessionValues::utc()).unwrap();
    expand(&ctx.state(), &mut statement).await?;
    let plan = ctx.state().statement_to_plan(statement).await.unwrap();
    let names = plan.schema().fields().iter().map(|f| output_names::client_name(f.name()).to_string()).collect();
    let batches = ctx.execute_logical_plan(plan).await.unwrap().collect().await.unwrap();
    Ok((names, crate::plan::rule_tests::printed_rows(&batches).unwrap()))
}

fn owned(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

#[tokio::test]
async fn a_rows_fields_are_columns_named_as_the_fields() {
    let (names, rows) = answer("SELECT (named_struct('x', 1, 'y', 'a')).*").await.unwrap();
    assert_eq!((names, rows), (owned(&["x", "y"]), owned(&["|1|a|"])));
}

#[tokio::test]
async fn a_column_that_is_a_row_expands_by_its_qualified_name() {
    // k = 1 and 2; r = (10k, 'v').
    let sql = "SELECT t.r.*, t.k FROM (SELECT k, named_struct('x', k * 10, 'y', 'v') AS r
               FROM (VALUES 1, 2) v(k)) t ORDER BY k";
    let (names, rows) = answer(sql).await.unwrap();
    assert_eq!((names, rows), (owned(&["x", "y", "k"]), owned(&["|10|v|1|", "|20|v|2|"])));
}

#[tokio::test]
async fn anonymous_fields_are_named_by_their_position_among_the_columns() {
    let (names, rows) = answer("SELECT 7, (ROW(1, 'a')).*").await.unwrap();
    assert_eq!((names, rows), (owned(&["_col0", "_col1", "_col2"]), owned(&["|7|1|a|"])));
}

#[tokio::test]
async fn a_relations_star_takes_column_aliases() {
    let sql = "SELECT n.* AS (a, b), 0 FROM (VALUES (2, 'q'), (1, 'p')) n(k, s) ORDER BY a";
    let (names, rows) = answer(sql).await.unwrap();
    // The unnamed item after two columns is the third: `_col2`.
    assert_eq!((names, rows), (owned(&["a", "b", "_col2"]), owned(&["|1|p|0|", "|2|q|0|"])));
}

#[tokio::test]
async fn a_rows_star_takes_column_aliases() {
    let sql = "SELECT (named_struct('x', 1, 'y', 'a')).* AS (p, q)";
    let (names, rows) = answer(sql).await.unwrap();
    assert_eq!((names, rows), (owned(&["p", "q"]), owned(&["|1|a|"])));
}

#[tokio::test]
async fn a_star_after_using_leaves_the_join_column_out_before_its_aliases() {
    // `a.*` is `x` alone after `USING (k)`, `b.*` is `y`.
    let sql = "SELECT a.* AS (p), b.* AS (q) FROM (VALUES (1, 2)) a(k, x) JOIN (VALUES (1, 3)) b(k, y) USING (k)";
    let (names, rows) = answer(sql).await.unwrap();
    assert_eq!((names, rows), (owned(&["p", "q"]), owned(&["|2|3|"])));
}

#[tokio::test]
async fn stars_in_ctes_and_subqueries_see_the_ctes_around_them() {
    let sql = "WITH t AS (SELECT named_struct('x', 1, 'y', 2) AS r), u AS (SELECT (r).* FROM t)
               SELECT x + y AS s FROM u";
    let (names, rows) = answer(sql).await.unwrap();
    assert_eq!((names, rows), (owned(&["s"]), owned(&["|3|"])));
    let sql = "WITH t AS (SELECT named_struct('x', 1, 'y', 2) AS r)
               SELECT count(*) AS c FROM (SELECT z FROM (SELECT (r).* AS (z, w) FROM t) WHERE w = 2)";
    assert_eq!(answer(sql).await.unwrap(), (owned(&["c"]), owned(&["|1|"])));
}

#[tokio::test]
async fn wrong_counts_and_non_rows_are_trinos_errors() {
    let sql = "SELECT n.* AS (a) FROM (VALUES (1, 'p')) n(k, s)";
    let e = answer(sql).await.unwrap_err();
    assert_eq!(e.error_name.to_string(), "MISMATCHED_COLUMN_ALIASES", "{}", e.message);
    assert!(e.message.contains("has 1 entries but 'n' has 2 columns"), "{}", e.message);
    let e = answer("SELECT (1).*").await.unwrap_err();
    assert_eq!(e.error_name.to_string(), "TYPE_MISMATCH", "{}", e.message);
}

#[tokio::test]
async fn a_relations_own_star_is_left_to_datafusion() {
    let sql = "SELECT n.*, m.k FROM (VALUES (1, 'p')) n(k, s) JOIN (VALUES 1) m(k) ON n.k = m.k";
    let (names, rows) = answer(sql).await.unwrap();
    assert_eq!((names, rows), (owned(&["k", "s", "k"]), owned(&["|1|p|1|"])));
}

#[tokio::test]
async fn unnamed_columns_after_a_star_are_numbered_among_all_columns() {
    // `*` is two columns, so the unnamed item after `one` is the fourth: `_col3`.
    let sql = "SELECT *, 1 AS one, 2 FROM (VALUES (1, 'a')) t(k, s)";
    assert_eq!(answer(sql).await.unwrap(), (owned(&["k", "s", "one", "_col3"]), owned(&["|1|a|1|2|"])));
    // The ORDER BY that reads the unnamed item reads it under its new name.
    let sql = "SELECT *, k + 1 FROM (VALUES (2, 'b'), (1, 'a')) t(k, s) ORDER BY k + 1";
    assert_eq!(answer(sql).await.unwrap(), (owned(&["k", "s", "_col2"]), owned(&["|1|a|2|", "|2|b|3|"])));
    // A name the user wrote is theirs.
    let sql = "SELECT *, 5 AS _col1 FROM (VALUES 1) t(k)";
    assert_eq!(answer(sql).await.unwrap(), (owned(&["k", "_col1"]), owned(&["|1|5|"])));
}
