"""Every statement form Trino documents for what flotilla has, through Trino's own
Python client: `SHOW ... [FROM|IN ...] [LIKE ... [ESCAPE ...]]`, `SHOW CREATE
SCHEMA`, `SHOW STATS`, `EXPLAIN (TYPE ..., FORMAT ...)`, `DESCRIBE INPUT|OUTPUT`,
`current_user` and its kin, and a write's update count.

The expected shapes are Trino's documented ones (column names, the JSON plan's
keys); the expected rows are facts of the TPC-H specification (its eight tables,
NATION's 25 rows) or filters of them computed here, never copied from flotilla's
output. FLOTILLA_URL names the coordinator; `tests/python/run.sh` starts one.
"""

import json
import os
import re
import unittest
import urllib.parse

import trino
import trino.dbapi
import trino.exceptions

URL = os.environ.get("FLOTILLA_URL", "")
TPCH_TABLES = sorted(["customer", "lineitem", "nation", "orders", "part", "partsupp", "region", "supplier"])


def connect(**kw):
    u = urllib.parse.urlsplit(URL)
    return trino.dbapi.connect(host=u.hostname, port=u.port, user="test", catalog="tpch", schema="tiny",
                               http_scheme="http", **kw)


def run(sql, conn=None):
    own = conn is None
    conn = conn or connect()
    try:
        cur = conn.cursor()
        cur.execute(sql)
        rows = cur.fetchall()
        return rows, [c[0] for c in cur.description or []], cur
    finally:
        if own:
            conn.close()


def like(names, pattern):
    """SQL LIKE without escapes, in Python: the independent filter."""
    rx = "^" + "".join(".*" if c == "%" else "." if c == "_" else re.escape(c) for c in pattern) + "$"
    return sorted(n for n in names if re.match(rx, n, re.S))


class ShowStatements(unittest.TestCase):
    def test_show_tables_with_from_in_like_escape_and_quoted_names(self):
        rows, columns, _ = run("SHOW TABLES FROM tpch.tiny")
        self.assertEqual(columns, ["Table"])
        self.assertEqual(sorted(r[0] for r in rows), TPCH_TABLES)
        rows, _, _ = run("SHOW TABLES FROM tpch.tiny LIKE 'n%'")
        self.assertEqual([r[0] for r in rows], like(TPCH_TABLES, "n%"))
        rows, _, _ = run('SHOW TABLES IN "tpch"."tiny" LIKE \'part_%\'')
        self.assertEqual([r[0] for r in rows], like(TPCH_TABLES, "part_%"))
        # An escaped underscore is itself: no TPC-H table has one.
        rows, _, _ = run("SHOW TABLES LIKE 'part\\_%' ESCAPE '\\'")
        self.assertEqual(rows, [])
        with self.assertRaises(trino.exceptions.TrinoUserError) as missing:
            run('SHOW TABLES FROM "tpch"."no such"')
        self.assertEqual(missing.exception.error_name, "SCHEMA_NOT_FOUND")
        self.assertIn("no such", missing.exception.message)

    def test_show_schemas_and_catalogs_with_like(self):
        rows, columns, _ = run("SHOW SCHEMAS FROM tpch")
        self.assertEqual(columns, ["Schema"])
        schemas = [r[0] for r in rows]
        self.assertIn("sf1", schemas)
        rows, _, _ = run("SHOW SCHEMAS FROM tpch LIKE 'sf%'")
        self.assertEqual([r[0] for r in rows], like(schemas, "sf%"))
        self.assertNotIn("tiny", [r[0] for r in rows])
        rows, columns, _ = run("SHOW CATALOGS")
        self.assertEqual(columns, ["Catalog"])
        catalogs = [r[0] for r in rows]
        rows, _, _ = run("SHOW CATALOGS LIKE 't%'")
        self.assertEqual([r[0] for r in rows], like(catalogs, "t%"))
        self.assertIn("tpch", [r[0] for r in rows])

    def test_show_columns_and_session_with_like(self):
        rows, columns, _ = run("SHOW COLUMNS FROM tpch.tiny.nation")
        self.assertEqual(columns, ["Column", "Type", "Extra", "Comment"])
        names = [r[0] for r in rows]
        self.assertEqual(len(names), 4, "NATION has four columns (TPC-H 1.4.1)")
        rows, _, _ = run("SHOW COLUMNS FROM nation LIKE '%name'")
        self.assertEqual([r[0] for r in rows], like(names, "%name"))
        self.assertEqual(len(rows), 1)
        rows, columns, _ = run("SHOW SESSION LIKE 'query%'")
        self.assertEqual(columns, ["Name", "Value", "Default", "Type", "Description"])
        self.assertTrue(rows and all(r[0].startswith("query") for r in rows), rows)

    def test_show_create_schema(self):
        rows, columns, _ = run("SHOW CREATE SCHEMA tpch.tiny")
        self.assertEqual(columns, ["Create Schema"])
        self.assertEqual(rows, [["CREATE SCHEMA tpch.tiny"]])

    def test_show_stats_for_a_table_and_a_query(self):
        rows, columns, _ = run("SHOW STATS FOR nation")
        self.assertEqual(columns, ["column_name", "data_size", "distinct_values_count", "nulls_fraction",
                                   "row_count", "low_value", "high_value"])
        self.assertEqual(len(rows), 5, "one row per column and the summary")
        summary = rows[-1]
        self.assertIsNone(summary[0])
        self.assertEqual(summary[4], 25.0, "NATION has 25 rows (TPC-H 4.2.3)")
        rows, _, _ = run("SHOW STATS FOR (SELECT n_nationkey FROM nation)")
        self.assertEqual([r[0] for r in rows[:-1]], ["n_nationkey"])
        self.assertIsNone(rows[-1][0])


class Explain(unittest.TestCase):
    SQL = "SELECT n_regionkey, count(*) FROM nation GROUP BY n_regionkey"

    def explain(self, options):
        rows, columns, _ = run(f"EXPLAIN {options} {self.SQL}")
        self.assertEqual(len(rows), 1)
        return columns, rows[0][0]

    def test_distributed_text_is_the_default(self):
        columns, text = self.explain("")
        self.assertEqual(columns, ["Query Plan"])
        self.assertIn("Fragment 0", text)
        self.assertEqual(self.explain("(TYPE DISTRIBUTED)")[1], text)
        self.assertEqual(self.explain("(TYPE DISTRIBUTED, FORMAT TEXT)")[1], text)

    def test_json_plans_have_trinos_node_shape(self):
        def check(node):
            for key in ["id", "name", "descriptor", "outputs", "details", "estimates", "children"]:
                self.assertIn(key, node)
            for child in node["children"]:
                check(child)

        _, text = self.explain("(FORMAT JSON)")
        stages = json.loads(text)
        self.assertIn("0", stages, "a distributed plan maps stage ids to their roots")
        self.assertGreater(len(stages), 1, "the query reads a table: more than the root stage")
        for node in stages.values():
            check(node)
        _, text = self.explain("(TYPE LOGICAL, FORMAT JSON)")
        root = json.loads(text)
        check(root)
        self.assertEqual([o["symbol"] for o in root["outputs"]][:1], ["n_regionkey"])

    def test_graphviz_validate_and_io(self):
        _, text = self.explain("(FORMAT GRAPHVIZ)")
        self.assertTrue(text.lstrip().startswith("digraph"), text[:80])
        rows, columns, _ = run(f"EXPLAIN (TYPE VALIDATE) {self.SQL}")
        self.assertEqual((columns, rows), (["Valid"], [[True]]))
        with self.assertRaises(trino.exceptions.TrinoUserError):
            run("EXPLAIN (TYPE VALIDATE) SELECT no_such_column FROM nation")
        rows, _, _ = run("EXPLAIN (TYPE IO, FORMAT JSON) SELECT * FROM nation WHERE n_nationkey = 2")
        io = json.loads(rows[0][0])
        self.assertEqual([i["table"] for i in io["inputTableColumnInfos"]],
                         [{"catalog": "tpch", "schemaTable": {"schema": "tiny", "table": "nation"}}])
        self.assertIn("estimate", io)
        self.assertNotIn("outputTable", io, "a query writes no table")

    def test_unknown_options_are_syntax_errors(self):
        for options in ["(TYPE SIDEWAYS)", "(FORMAT XML)", "(COLOR RED)"]:
            with self.assertRaises(trino.exceptions.TrinoUserError) as e:
                self.explain(options)
            self.assertEqual(e.exception.error_name, "SYNTAX_ERROR", options)


class SessionFunctionsAndPrepared(unittest.TestCase):
    def test_current_user_catalog_schema(self):
        rows, _, _ = run("SELECT current_user, current_catalog, current_schema")
        self.assertEqual(rows, [["test", "tpch", "tiny"]])
        conn = connect()
        try:
            run("USE tpcds.tiny", conn)
            rows, _, _ = run("SELECT current_catalog, current_schema", conn)
            self.assertEqual(rows, [["tpcds", "tiny"]])
        finally:
            conn.close()

    def test_describe_input_and_output_of_a_prepared_statement(self):
        conn = connect()
        try:
            run("PREPARE q FROM SELECT n_name, n_nationkey + 1 AS next FROM nation WHERE n_nationkey = ? AND n_regionkey < ?", conn)
            rows, columns, _ = run("DESCRIBE INPUT q", conn)
            self.assertEqual(columns, ["Position", "Type"])
            self.assertEqual([r[0] for r in rows], [0, 1])
            rows, columns, _ = run("DESCRIBE OUTPUT q", conn)
            self.assertEqual(columns, ["Column Name", "Catalog", "Schema", "Table", "Type", "Type Size", "Aliased"])
            self.assertEqual([r[0] for r in rows], ["n_name", "next"])
            self.assertEqual(rows[0][1:4], ["tpch", "tiny", "nation"])
            self.assertEqual(rows[1][5:], [8, True], "bigint is 8 bytes; 'next' is an alias")
            rows, _, _ = run("EXECUTE q USING 3, 5", conn)
            self.assertEqual(rows[0][1], 4, "nation 3 plus one")
            run("DEALLOCATE PREPARE q", conn)
            # The client drops what the answer's X-Trino-Deallocated-Prepare names.
            self.assertEqual(conn._client_session.prepared_statements, {})
        finally:
            conn.close()
        with self.assertRaises(trino.exceptions.TrinoUserError) as unknown:
            run("EXECUTE never_prepared USING 1")
        self.assertEqual(unknown.exception.error_name, "NOT_FOUND")
        with self.assertRaises(trino.exceptions.TrinoUserError) as count:
            run("EXECUTE IMMEDIATE 'SELECT ?, ?' USING 1")
        self.assertEqual(count.exception.error_name, "INVALID_PARAMETER_USAGE")


    def test_delete_answers_the_rows_deleted(self):
        # A table of files (the coordinator's --data-dir warehouse): Trino's DELETE
        # answers the rows it deleted, as its one row and as the update count.
        conn = connect()
        try:
            run("CREATE SCHEMA IF NOT EXISTS files.forms", conn)
            run("CREATE TABLE files.forms.doomed AS SELECT * FROM tpch.tiny.nation", conn)
            rows, columns, cur = run("DELETE FROM files.forms.doomed WHERE n_regionkey = 1", conn)
            # America's five nations (TPC-H 4.2.3).
            self.assertEqual((columns, rows, cur.rowcount), (["rows"], [[5]], 5))
            rows, _, _ = run("SELECT count(*) FROM files.forms.doomed", conn)
            self.assertEqual(rows, [[20]])
        finally:
            try:
                run("DROP TABLE IF EXISTS files.forms.doomed", conn)
            finally:
                conn.close()


if __name__ == "__main__":
    if not URL:
        raise SystemExit("FLOTILLA_URL is not set")
    unittest.main(verbosity=2)
