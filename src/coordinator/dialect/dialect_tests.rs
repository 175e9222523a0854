use super::parse;

/// The statement as DataFusion's parser prints it after the dialect's rewrites.
fn parsed(sql: &str) -> String {
    parse(sql, 64).unwrap().to_string()
}

/// `values` (of `width` columns) as `output_names` selects it, under Trino's names.
fn selected(values: &str, width: usize) -> String {
    let items: Vec<String> = (0..width).map(|i| format!("column{} AS _col{i}", i + 1)).collect();
    format!("SELECT {} FROM ({values}) AS __values", items.join(", "))
}

#[test]
fn digit_separators_are_part_of_the_number() {
    assert_eq!(parsed("SELECT 1_000, 1_000.5"), "SELECT 1000 AS _col0, 1000.5 AS _col1");
}

#[test]
fn values_rows_need_no_parentheses() {
    assert_eq!(parsed("VALUES 1, 2"), selected("VALUES (1), (2)", 1));
    assert_eq!(parsed("VALUES (1, 'a'), (2, 'b')"), selected("VALUES (1, 'a'), (2, 'b')", 2));
    assert_eq!(
        parsed("SELECT * FROM (VALUES 'a', 'b' || 'c') AS t (x) ORDER BY x"),
        "SELECT * FROM (VALUES ('a'), ('b' || 'c')) AS t (x) ORDER BY x"
    );
    assert_eq!(parsed("VALUES (1) + 2, 3 LIMIT 1"), selected("VALUES ((1) + 2), (3)", 1) + " LIMIT 1");
    assert_eq!(parsed("SELECT 1 IN (VALUES 1, 2)"), "SELECT 1 IN (VALUES (1), (2)) AS _col0");
    // DataFusion's table factor: the alias ends the list.
    assert_eq!(parsed("SELECT * FROM VALUES (1, 2), (3, 4) t(a, b)"), "SELECT * FROM (VALUES (1, 2), (3, 4)) t (a, b)");
}

#[test]
fn trino_type_syntax_reads_as_the_generic_dialects() {
    assert_eq!(parsed("SELECT CAST(x AS ARRAY(INTEGER))"), "SELECT CAST(x AS ARRAY<INTEGER>) AS _col0");
    assert_eq!(
        parsed("SELECT CAST(ROW(1, 'a') AS ROW(a INTEGER, b ARRAY(DECIMAL(10, 2))))"),
        "SELECT CAST(ROW(1, 'a') AS STRUCT<a INTEGER, b ARRAY<DECIMAL(10,2)>>) AS _col0"
    );
    assert_eq!(
        parsed("SELECT TRY_CAST(x AS MAP(VARCHAR, INTEGER))"),
        "SELECT TRY_CAST(x AS Map(VARCHAR, INTEGER)) AS _col0"
    );
}

#[test]
fn lambdas_are_lambdas() {
    assert_eq!(parsed("SELECT transform(a, x -> x + 1)"), "SELECT transform(a, x -> x + 1) AS _col0");
    assert_eq!(parsed("SELECT zip_with(a, b, (x, y) -> x * y)"), "SELECT zip_with(a, b, (x, y) -> x * y) AS _col0");
}

#[test]
fn if_is_a_case() {
    assert_eq!(parsed("SELECT IF(a > 0, 1 / a)"), "SELECT CASE WHEN a > 0 THEN 1 / a END AS _col0");
    assert_eq!(parsed("SELECT if(a, 'y', 'n')"), "SELECT CASE WHEN a THEN 'y' ELSE 'n' END AS _col0");
    assert!(parse("SELECT IF(a)", 64).is_err());
}

#[test]
fn timestamp_literals_keep_their_zone_and_get_seconds() {
    assert_eq!(
        parsed("SELECT TIMESTAMP '2020-06-10 15:55:23 UTC'"),
        r#"SELECT arrow_cast('2020-06-10 15:55:23', 'Timestamp(ms, "UTC")') AS _col0"#
    );
    assert_eq!(
        parsed("SELECT TIMESTAMP '2001-08-22 03:04:05.321456+01:00'"),
        r#"SELECT arrow_cast('2001-08-22 03:04:05.321456', 'Timestamp(µs, "+01:00")') AS _col0"#
    );
    assert_eq!(parsed("SELECT TIMESTAMP '2020-06-10 15:55'"), "SELECT TIMESTAMP '2020-06-10 15:55:00' AS _col0");
    assert_eq!(parsed("SELECT TIMESTAMP '2020-06-10 15:55:23'"), "SELECT TIMESTAMP '2020-06-10 15:55:23' AS _col0");
    // Forms that are not Trino's stay DataFusion's.
    assert_eq!(
        parsed("SELECT TIMESTAMP '2020-06-10T15:55:23+00:00'"),
        "SELECT TIMESTAMP '2020-06-10T15:55:23+00:00' AS _col0"
    );
    assert_eq!(
        parsed("SELECT TIMESTAMPTZ '2020-06-10 15:55:23+07'"),
        "SELECT TIMESTAMPTZ '2020-06-10 15:55:23+07' AS _col0"
    );
    let e = parse("SELECT TIMESTAMP '2020-06-10 15:55:23 Mars/Olympus'", 64).unwrap_err();
    assert!(e.to_string().contains("Time zone not supported: Mars/Olympus"), "{e}");
}

#[test]
fn decimal_literals_have_their_digits_precision() {
    assert_eq!(parsed("SELECT DECIMAL '12345'"), "SELECT CAST('12345' AS DECIMAL(5,0)) AS _col0");
    // Every digit written counts (Trino's `DECIMAL '0000012345.1234500000'` is decimal(20,10)).
    assert_eq!(parsed("SELECT DECIMAL '-0.50'"), "SELECT CAST('-0.50' AS DECIMAL(3,2)) AS _col0");
    assert_eq!(parsed("SELECT DECIMAL '0'"), "SELECT CAST('0' AS DECIMAL(1,0)) AS _col0");
    assert!(parse("SELECT DECIMAL 'x1'", 64).is_err());
}

#[test]
fn date_add_with_literals_adds_an_interval() {
    assert_eq!(parsed("SELECT date_add('day', -1, d)"), "SELECT (d) + INTERVAL '-1 day' AS _col0");
    assert_eq!(parsed("SELECT date_add('quarter', 2, d)"), "SELECT (d) + INTERVAL '6 month' AS _col0");
    assert_eq!(parsed("SELECT date_add('day', n, d)"), "SELECT date_add('day', n, d) AS _col0");
    assert!(parse("SELECT date_add('fortnight', 1, d)", 64).is_err());
}

#[test]
fn unnamed_items_get_trinos_names() {
    assert_eq!(parsed("SELECT a, a + 1, b AS c, t.d, (e)"), "SELECT a, a + 1 AS _col1, b AS c, t.d, (e)");
    // An ORDER BY of an item's expression names the item.
    assert_eq!(
        parsed("SELECT DISTINCT a + 1 FROM t ORDER BY a + 1 DESC"),
        "SELECT DISTINCT a + 1 AS _col0 FROM t ORDER BY _col0 DESC"
    );
    assert_eq!(
        parsed("SELECT x FROM t UNION SELECT count(*) FROM u"),
        "SELECT x FROM t UNION SELECT count(*) AS _col0 FROM u"
    );
}

#[test]
fn table_is_select_star() {
    assert_eq!(parsed("TABLE t"), "SELECT * FROM t");
    assert_eq!(
        parsed("SELECT * FROM (TABLE t) UNION ALL TABLE u"),
        "SELECT * FROM (SELECT * FROM t) UNION ALL SELECT * FROM u"
    );
    assert_eq!(parsed("SELECT * FROM t WHERE t.table = 1"), "SELECT * FROM t WHERE t.table = 1");
}

#[test]
fn values_of_rows_are_the_rows() {
    assert_eq!(parsed("VALUES ROW(1, 2), ROW(3, 4)"), selected("VALUES (1, 2), (3, 4)", 2));
    // A row inside a row stays one.
    assert_eq!(parsed("VALUES (1, ROW(2, 3))"), selected("VALUES (1, ROW(2, 3))", 2));
}

#[test]
fn named_windows_are_written_into_their_calls() {
    assert_eq!(
        parsed("SELECT rank() OVER (w ORDER BY b) FROM t WINDOW w AS (PARTITION BY a)"),
        "SELECT rank() OVER (PARTITION BY a ORDER BY b) AS _col0 FROM t"
    );
    assert_eq!(
        parsed(
            "SELECT sum(b) OVER w2 FROM t WINDOW w1 AS (PARTITION BY a), w2 AS (w1 ORDER BY b) ORDER BY rank() OVER w1"
        ),
        "SELECT sum(b) OVER (PARTITION BY a ORDER BY b) AS _col0 FROM t ORDER BY rank() OVER (PARTITION BY a)"
    );
    assert!(parse("SELECT rank() OVER (w PARTITION BY b) FROM t WINDOW w AS (PARTITION BY a)", 64).is_err());
    assert!(parse("SELECT rank() OVER (v ORDER BY b) FROM t", 64).is_err());
}

#[test]
fn reshaped_aggregates_keep_their_filter_and_window() {
    assert_eq!(
        parsed("SELECT count_if(a > 1) FILTER (WHERE b < 3) FROM t"),
        "SELECT count(CASE WHEN a > 1 THEN 1 END) FILTER (WHERE b < 3) AS _col0 FROM t"
    );
    assert_eq!(
        parsed("SELECT count_if(a > 1) OVER (PARTITION BY b) FROM t"),
        "SELECT count(CASE WHEN a > 1 THEN 1 END) OVER (PARTITION BY b) AS _col0 FROM t"
    );
    // The text's own filter (keys that are NULL or NaN) and the call's, both.
    assert_eq!(
        parsed("SELECT max_by(a, b) FILTER (WHERE c) FROM t"),
        "SELECT first_value(a ORDER BY __nan_as_null(b) DESC NULLS LAST) \
         FILTER (WHERE (__nan_as_null(b) IS NOT NULL) AND (c)) AS _col0 FROM t"
    );
    // A call inside an argument is the argument's, not the text's aggregate.
    assert_eq!(
        parsed("SELECT geometric_mean(avg(x)) OVER () FROM t"),
        "SELECT exp(avg(ln(avg(x))) OVER ()) AS _col0 FROM t"
    );
    assert!(parse("SELECT count_if(DISTINCT a > 1) FROM t", 64).is_err());
    assert!(parse("SELECT mod(a, 2) FILTER (WHERE b) FROM t", 64).is_err());
}

#[test]
fn repeated_output_names_are_set_apart() {
    assert_eq!(
        parsed("SELECT a, a, t.a, b AS a FROM t"),
        "SELECT a, a AS \"a\u{1f}1\", t.a AS \"a\u{1f}2\", b AS \"a\u{1f}3\" FROM t"
    );
    assert_eq!(super::output_names::client_name("a\u{1f}3"), "a");
    assert_eq!(parsed("SELECT *, a FROM t"), "SELECT *, a FROM t");
}

#[test]
fn fetch_first_is_a_limit_and_an_empty_grouping_set_is_none() {
    assert_eq!(parsed("SELECT a FROM t ORDER BY a FETCH FIRST 2 ROWS ONLY"), "SELECT a FROM t ORDER BY a LIMIT 2");
    assert_eq!(parsed("SELECT a FROM t OFFSET 1 ROW FETCH NEXT ROW ONLY"), "SELECT a FROM t LIMIT 1 OFFSET 1 ROW");
    assert_eq!(
        parsed("SELECT a FROM t ORDER BY a FETCH FIRST 2 ROWS WITH TIES"),
        "SELECT a FROM t ORDER BY a, __fetch_with_ties(0, 2)"
    );
    assert_eq!(
        parsed("SELECT a FROM t ORDER BY a DESC OFFSET 3 ROWS FETCH NEXT ROW WITH TIES"),
        "SELECT a FROM t ORDER BY a DESC, __fetch_with_ties(3, 1)"
    );
    let unordered = parse("SELECT a FROM t FETCH FIRST 2 ROWS WITH TIES", 64).unwrap_err().to_string();
    assert!(unordered.contains("WITH TIES clause requires ORDER BY"), "{unordered}");
    assert_eq!(parsed("SELECT count(*) FROM t GROUP BY ()"), "SELECT count(*) AS _col0 FROM t");
    assert_eq!(parsed("SELECT a, count(*) FROM t GROUP BY (), a"), "SELECT a, count(*) AS _col1 FROM t GROUP BY a");
}

#[test]
fn a_rows_field_after_an_expression_is_bracketed() {
    let sql = parsed("SELECT CAST(r AS ROW(x INT)).x, a.b[1].C, (s).\"Q\" FROM t");
    assert!(sql.contains(")['x'] AS _col0"), "{sql}");
    assert!(sql.contains("a.b[1]['c'] AS _col1"), "{sql}");
    assert!(sql.contains("(s)['Q'] AS _col2"), "{sql}");
}

#[test]
fn group_by_distinct_is_its_distinct_grouping_sets() {
    // CUBE (a, b) x (a): (a, b) twice, (a) twice; each once.
    let text = parsed("SELECT a, b FROM t GROUP BY DISTINCT CUBE (a, b), a");
    assert!(text.ends_with("GROUP BY GROUPING SETS ((a, b), (a))"), "{text}");
    // Without DISTINCT the list is as written.
    let text = parsed("SELECT a FROM t GROUP BY ROLLUP (a), a");
    assert!(text.ends_with("GROUP BY ROLLUP (a), a"), "{text}");
}

#[test]
fn unnest_with_names_is_a_derived_table_of_unnests() {
    let text = parsed("SELECT * FROM t CROSS JOIN UNNEST(t.m) WITH ORDINALITY AS u(k, v, n)");
    assert_eq!(
        text,
        "SELECT * FROM t CROSS JOIN LATERAL (SELECT unnest(__unnest_row(__unnest_args.a1)), __unnest_args.o \
         FROM UNNEST(__unnest_list(t.m), __unnest_ordinals(t.m)) AS __unnest_args (a1, o)) AS u (k, v, n)"
    );
    // Without names or ordinals, DataFusion's own UNNEST.
    assert_eq!(parsed("SELECT * FROM UNNEST(ARRAY[1])"), "SELECT * FROM UNNEST(ARRAY[1])");
}

#[test]
fn exists_of_stars_selects_one() {
    assert_eq!(
        parsed("SELECT k FROM t WHERE EXISTS (SELECT t.* FROM u WHERE u.k = t.k)"),
        "SELECT k FROM t WHERE EXISTS (SELECT 1 AS _col0 FROM u WHERE u.k = t.k)"
    );
    // A grouped select may have no row, or one, whatever its input: left as it is.
    assert_eq!(
        parsed("SELECT k FROM t WHERE NOT EXISTS (SELECT * FROM u GROUP BY a HAVING count(*) > 1)"),
        "SELECT k FROM t WHERE NOT EXISTS (SELECT * FROM u GROUP BY a HAVING count(*) > 1)"
    );
}

/// Trino's `ALTER VIEW ... RENAME TO`, which sqlparser does not read, is the rename of
/// a metastore entry (`ALTER TABLE ... RENAME TO`); `ALTER VIEW ... AS` stays
/// sqlparser's, and a rename without its new name is a syntax error.
#[test]
fn views_are_renamed_as_tables_are() {
    assert_eq!(parsed("ALTER VIEW a.b RENAME TO c"), "ALTER TABLE a.b RENAME TO c");
    assert_eq!(parsed("alter view if exists \"v\" rename to w"), "ALTER TABLE IF EXISTS \"v\" RENAME TO w");
    assert_eq!(parsed("ALTER VIEW v AS SELECT 1"), "ALTER VIEW v AS SELECT 1 AS _col0");
    assert!(parse("ALTER VIEW v RENAME TO", 64).is_err());
    assert!(parse("ALTER VIEW v RENAME TO w, ADD COLUMN x INT", 64).is_err());
}

#[test]
fn values_columns_are_named_as_trinos_anonymous_columns() {
    assert_eq!(
        parsed("VALUES (1, 'a')"),
        "SELECT column1 AS _col0, column2 AS _col1 FROM (VALUES (1, 'a')) AS __values"
    );
    assert_eq!(
        parsed("VALUES 1 EXCEPT ALL VALUES 2"),
        "SELECT column1 AS _col0 FROM (VALUES (1)) AS __values EXCEPT ALL SELECT column1 AS _col0 FROM (VALUES (2)) AS __values"
    );
    // The rows an INSERT writes are DataFusion's to fit to the table.
    assert_eq!(parsed("INSERT INTO t VALUES (1, 2)"), "INSERT INTO t VALUES (1, 2)");
    // Inside a query they keep DataFusion's names, which SQL written for it reads.
    assert_eq!(parsed("SELECT column1 FROM (VALUES 1)"), "SELECT column1 FROM (VALUES (1))");
    assert_eq!(parsed("CREATE TABLE t AS VALUES (1)"), "CREATE TABLE t AS VALUES (1)");
}
