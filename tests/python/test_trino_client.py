"""Trino's own Python client (`trino` on PyPI: DB-API and SQLAlchemy dialect) against a
flotilla coordinator.

Plain `unittest`; needs only `trino` and `sqlalchemy`. The coordinator's URL comes from
FLOTILLA_URL (e.g. http://127.0.0.1:8080); the cluster must have live workers.
`tests/python/run.sh BINARY` starts one and runs this file.

Expected values are facts of the TPC-H specification (the fixed NATION and REGION
tables, the row-count rules, the value domains of LINEITEM columns) or are recomputed
in Python from raw rows, never copied from flotilla's output.
"""

import datetime
import decimal
import json
import os
import sys
import threading
import time
import unittest
import urllib.parse
import urllib.request

import trino
import trino.dbapi
import trino.exceptions

URL = os.environ.get("FLOTILLA_URL", "")

# TPC-H spec 4.2.3: NATION and REGION are fixed. (key, name, regionkey)
NATIONS = [
    (0, "ALGERIA", 0), (1, "ARGENTINA", 1), (2, "BRAZIL", 1), (3, "CANADA", 1),
    (4, "EGYPT", 4), (5, "ETHIOPIA", 0), (6, "FRANCE", 3), (7, "GERMANY", 3),
    (8, "INDIA", 2), (9, "INDONESIA", 2), (10, "IRAN", 4), (11, "IRAQ", 4),
    (12, "JAPAN", 2), (13, "JORDAN", 4), (14, "KENYA", 0), (15, "MOROCCO", 0),
    (16, "MOZAMBIQUE", 0), (17, "PERU", 1), (18, "CHINA", 2), (19, "ROMANIA", 3),
    (20, "SAUDI ARABIA", 4), (21, "VIETNAM", 2), (22, "RUSSIA", 3),
    (23, "UNITED KINGDOM", 3), (24, "UNITED STATES", 1),
]
REGIONS = ["AFRICA", "AMERICA", "ASIA", "EUROPE", "MIDDLE EAST"]
TPCH_TABLES = {"customer", "lineitem", "nation", "orders", "part", "partsupp", "region", "supplier"}
# TPC-H spec 1.4.1 (16 columns of LINEITEM, in order).
LINEITEM_COLUMNS = [
    "l_orderkey", "l_partkey", "l_suppkey", "l_linenumber", "l_quantity",
    "l_extendedprice", "l_discount", "l_tax", "l_returnflag", "l_linestatus",
    "l_shipdate", "l_commitdate", "l_receiptdate", "l_shipinstruct", "l_shipmode",
    "l_comment",
]
# Spec 4.2.3: O_ORDERDATE in [1992-01-01, 1998-12-31 - 151 days];
# L_SHIPDATE = O_ORDERDATE + [1..121] days.
MIN_SHIPDATE = datetime.date(1992, 1, 2)
MAX_SHIPDATE = datetime.date(1998, 12, 1)
# Row counts at SF 0.01 (spec 4.2.5: SF x 1,500,000 orders, ... ; LINEITEM as dbgen
# generates it, the number Trino's tpch.tiny answers).
TINY_COUNTS = {"region": 5, "nation": 25, "supplier": 100, "customer": 1500,
               "part": 2000, "partsupp": 8000, "orders": 15000, "lineitem": 60175}


def host_port():
    u = urllib.parse.urlsplit(URL)
    return u.hostname, u.port


def connect(**kw):
    host, port = host_port()
    return trino.dbapi.connect(host=host, port=port, user="test", catalog="tpch",
                               schema="tiny", http_scheme="http", **kw)


def query_all(sql, params=None):
    conn = connect()
    try:
        cur = conn.cursor()
        cur.execute(sql, params) if params is not None else cur.execute(sql)
        rows = cur.fetchall()
        return rows, cur.description
    finally:
        conn.close()


def coordinator_queries():
    # Without logins the list holds the queries of the user X-Trino-User names.
    req = urllib.request.Request(URL.rstrip("/") + "/v1/query", headers={"X-Trino-User": "test"})
    with urllib.request.urlopen(req, timeout=5) as r:
        return json.load(r)


def attempt(fn):
    """(result, None) or (None, exception), so a failure is reported without the
    chained client traceback."""
    try:
        return fn(), None
    except Exception as e:  # noqa: BLE001 - reported by the caller
        return None, e


def types_of(row):
    return [type(v).__name__ for v in row]


class DbApiQueries(unittest.TestCase):
    maxDiff = None

    def test_nation_rows_and_types(self):
        rows, desc = query_all("SELECT n_nationkey, n_name FROM nation ORDER BY n_nationkey")
        self.assertEqual(len(rows), 25, "TPC-H NATION has 25 rows")
        for row in rows:
            self.assertIsInstance(row[0], int, f"n_nationkey should be a Python int, row {row!r}")
            self.assertIsInstance(row[1], str, f"n_name should be a Python str, row {row!r}")
        self.assertEqual([tuple(r) for r in rows], [(k, n) for k, n, _ in NATIONS],
                         "NATION rows differ from the TPC-H spec")
        self.assertEqual(rows[0], [0, "ALGERIA"], "nation 0 is ALGERIA per the spec")
        self.assertEqual([d[0] for d in desc], ["n_nationkey", "n_name"], "column names")
        self.assertEqual(desc[0][1], "bigint", "n_nationkey type name")
        self.assertTrue(desc[1][1].startswith("varchar"), f"n_name type name is {desc[1][1]!r}")

    def test_nation_region_join(self):
        rows, _ = query_all(
            "SELECT r_name, count(*) FROM nation JOIN region ON n_regionkey = r_regionkey "
            "GROUP BY r_name ORDER BY r_name")
        expected = [(r, sum(1 for _, _, rk in NATIONS if rk == i)) for i, r in enumerate(REGIONS)]
        self.assertEqual([tuple(r) for r in rows], expected, "nations per region (spec 4.2.3)")

    def test_region_names(self):
        rows, _ = query_all("SELECT r_name FROM region ORDER BY r_regionkey")
        self.assertEqual([r[0] for r in rows], REGIONS, "REGION names per the TPC-H spec")

    def test_table_counts_are_ints(self):
        for table, n in TINY_COUNTS.items():
            rows, desc = query_all(f"SELECT count(*) FROM {table}")
            self.assertEqual(len(rows), 1)
            self.assertIs(type(rows[0][0]), int, f"count(*) of {table} should be int, got {types_of(rows[0])}")
            self.assertEqual(rows[0][0], n, f"count(*) of tpch.tiny.{table}")
            self.assertEqual(desc[0][1], "bigint", "count(*) is bigint in Trino")

    def test_lineitem_aggregates_types_and_values(self):
        rows, desc = query_all("SELECT sum(l_quantity), min(l_shipdate), avg(l_discount) FROM lineitem")
        self.assertEqual(len(rows), 1)
        s, mn, avg = rows[0]
        self.assertIsInstance(s, decimal.Decimal, f"sum(decimal) should be Decimal, got {type(s)}")
        self.assertIs(type(mn), datetime.date, f"min(date) should be datetime.date, got {type(mn)}")
        self.assertIsInstance(avg, decimal.Decimal, f"avg(decimal) should be Decimal, got {type(avg)}")
        self.assertTrue(desc[0][1].startswith("decimal("), f"sum type name {desc[0][1]!r}")
        self.assertEqual(desc[1][1], "date", "min(l_shipdate) type name")
        self.assertTrue(desc[2][1].startswith("decimal("), f"avg type name {desc[2][1]!r}")

        # Recompute from raw rows (60175 rows: several nextUri pages).
        raw, _ = query_all("SELECT l_quantity, l_shipdate, l_discount FROM lineitem")
        self.assertEqual(len(raw), TINY_COUNTS["lineitem"], "raw lineitem rows over all pages")
        self.assertEqual(s, sum(r[0] for r in raw), "sum(l_quantity) vs Python sum of the rows")
        self.assertEqual(mn, min(r[1] for r in raw), "min(l_shipdate) vs Python min of the rows")
        mean = sum(r[2] for r in raw) / len(raw)
        # Trino's avg(decimal(12,2)) is decimal(12,2) (rounded); allow that rounding.
        self.assertLessEqual(abs(avg - mean), decimal.Decimal("0.005"), f"avg(l_discount) {avg} vs {mean}")
        # Spec domains: L_QUANTITY in [1, 50], L_DISCOUNT in [0.00, 0.10].
        self.assertTrue(all(1 <= r[0] <= 50 for r in raw), "l_quantity outside [1, 50]")
        self.assertTrue(all(0 <= r[2] <= decimal.Decimal("0.10") for r in raw), "l_discount outside [0, 0.10]")
        self.assertTrue(MIN_SHIPDATE <= mn <= MAX_SHIPDATE, f"min(l_shipdate) {mn} outside the spec's range")

    def test_double(self):
        rows, desc = query_all("SELECT CAST(1.5 AS DOUBLE)")
        self.assertEqual(rows, [[1.5]])
        self.assertIs(type(rows[0][0]), float, f"double should be float, got {types_of(rows[0])}")
        self.assertEqual(desc[0][1], "double")

    def test_scalar_types(self):
        rows, _ = query_all(
            "SELECT true, 'x', DATE '2020-02-29', CAST(NULL AS BIGINT), CAST(7 AS INTEGER), "
            "CAST('12.345' AS DECIMAL(10,3))")
        self.assertEqual(rows, [[True, "x", datetime.date(2020, 2, 29), None, 7, decimal.Decimal("12.345")]])
        self.assertEqual(types_of(rows[0]), ["bool", "str", "date", "NoneType", "int", "Decimal"])

    def test_session_property_header(self):
        # X-Trino-Session: batch_size=100 (a flotilla session property).
        conn = connect(session_properties={"batch_size": "100"})
        try:
            cur = conn.cursor()
            cur.execute("SELECT count(*) FROM orders")
            self.assertEqual(cur.fetchall(), [[15000]])
        finally:
            conn.close()

    def test_session_statements_change_the_client_session(self):
        # SET SESSION, RESET SESSION and USE are answered with X-Trino-Set-Session,
        # -Clear-Session, -Set-Catalog and -Set-Schema; the client keeps the session
        # and sends it with its next statements, as with Trino.
        conn = connect()
        try:
            cur = conn.cursor()
            cur.execute("SET SESSION execution_policy = 'all-at-once'")
            cur.fetchall()
            self.assertEqual(cur.update_type, "SET SESSION")
            self.assertEqual(conn._client_session.properties.get("execution_policy"), "all-at-once")
            cur.execute("SHOW SESSION")
            shown = {row[0]: row for row in cur.fetchall()}
            self.assertEqual([c[0] for c in cur.description], ["Name", "Value", "Default", "Type", "Description"])
            self.assertEqual(shown["execution_policy"][1:3], ["all-at-once", "phased"])
            cur.execute("RESET SESSION execution_policy")
            cur.fetchall()
            self.assertNotIn("execution_policy", conn._client_session.properties)
            cur.execute("SHOW SESSION")
            self.assertEqual({r[0]: r[1] for r in cur.fetchall()}["execution_policy"], "phased")
            cur.execute("USE tpch.sf1")
            cur.fetchall()
            self.assertEqual((conn._client_session.catalog, conn._client_session.schema), ("tpch", "sf1"))
            # An unqualified table is now sf1's: 150,000 customers (TPC-H spec 4.2.5).
            cur.execute("SELECT count(*) FROM customer")
            self.assertEqual(cur.fetchall(), [[150000]])
            with self.assertRaises(trino.exceptions.TrinoUserError) as bad:
                cur.execute("SET SESSION execution_policy = 'sometimes'")
                cur.fetchall()
            self.assertEqual(bad.exception.error_name, "INVALID_SESSION_PROPERTY")
            self.assertNotIn("execution_policy", conn._client_session.properties)
            with self.assertRaises(trino.exceptions.TrinoUserError) as missing:
                cur.execute("USE tpch.no_such_schema")
                cur.fetchall()
            self.assertEqual(missing.exception.error_name, "SCHEMA_NOT_FOUND")
            self.assertEqual(conn._client_session.schema, "sf1")
        finally:
            conn.close()

    def test_transactions_in_autocommit_semantics(self):
        # The client starts a transaction for a connection with an isolation level:
        # START TRANSACTION answers X-Trino-Started-Transaction-Id, the client sends it
        # with every statement, and COMMIT or ROLLBACK clear it. Reads run in one;
        # writes are refused (each statement commits on its own, so a ROLLBACK could
        # not undo one).
        from trino.transaction import IsolationLevel
        conn = connect(isolation_level=IsolationLevel.READ_COMMITTED)
        try:
            cur = conn.cursor()
            cur.execute("SELECT count(*) FROM region")
            self.assertEqual(cur.fetchall(), [[5]])
            started = conn.transaction.id
            self.assertNotIn(started, (None, "NONE"))
            cur.execute("SELECT count(*) FROM nation")
            self.assertEqual(cur.fetchall(), [[25]])
            self.assertEqual(conn.transaction.id, started)
            with self.assertRaises(trino.exceptions.TrinoUserError) as write:
                cur.execute("CREATE TABLE memory.default.in_transaction AS SELECT 1 AS x")
                cur.fetchall()
            self.assertEqual(write.exception.error_name, "NOT_SUPPORTED")
            conn.commit()
            self.assertIsNone(conn.transaction)
            # The next statement starts another transaction, which ROLLBACK ends.
            cur = conn.cursor()
            cur.execute("SELECT 1")
            cur.fetchall()
            self.assertNotEqual(conn.transaction.id, started)
            conn.rollback()
        finally:
            conn.close()
        # The table was not made, and a client without a transaction may make it.
        conn = connect()
        try:
            cur = conn.cursor()
            cur.execute("SHOW TABLES FROM memory.default")
            self.assertNotIn(["in_transaction"], cur.fetchall())
            # A transaction id the coordinator never gave is refused.
            conn._client_session.transaction_id = "f" * 32
            with self.assertRaises(trino.exceptions.TrinoUserError) as unknown:
                conn.cursor().execute("SELECT 1").fetchall()
            self.assertEqual(unknown.exception.error_name, "UNKNOWN_TRANSACTION")
        finally:
            conn.close()

    def test_show_functions_lists_the_registry(self):
        conn = connect()
        try:
            cur = conn.cursor()
            cur.execute("SHOW FUNCTIONS LIKE 'regexp%'")
            rows = cur.fetchall()
            self.assertEqual([c[0] for c in cur.description],
                             ["Function", "Return Type", "Argument Types", "Function Type", "Deterministic",
                              "Description"])
            self.assertIn(["regexp_replace", "varchar", "varchar, varchar, varchar", "scalar", True],
                          [r[:5] for r in rows])
            self.assertTrue(all(r[0].startswith("regexp") for r in rows))
        finally:
            conn.close()

    def test_invalid_session_property_is_a_query_error(self):
        # Trino accepts the POST and fails the query (INVALID_SESSION_PROPERTY, a
        # USER_ERROR), so the client raises TrinoUserError; an HTTP 4xx becomes a bare
        # trino.exceptions.HttpError without error name.
        conn = connect(session_properties={"no_such_property": "1"})
        try:
            _, e = attempt(lambda: conn.cursor().execute("SELECT 1").fetchall())
        finally:
            conn.close()
        self.assertIsInstance(e, trino.exceptions.TrinoUserError,
                              f"an unknown session property should fail the query, got {type(e).__name__}: {e}")
        self.assertEqual(e.error_name, "INVALID_SESSION_PROPERTY", f"{e}")

    def _parameter_query(self, legacy):
        conn = connect(legacy_prepared_statements=legacy)
        try:
            cur = conn.cursor()
            cur.execute("SELECT n_name FROM nation WHERE n_nationkey = ?", (3,))
            return cur.fetchall()
        finally:
            conn.close()

    def test_query_parameters_execute_immediate(self):
        # The client sends: EXECUTE IMMEDIATE 'SELECT n_name FROM nation WHERE n_nationkey = ?' USING 3
        # (and, unless told which, first probes with EXECUTE IMMEDIATE 'SELECT 1').
        rows, e = attempt(lambda: self._parameter_query(legacy=False))
        if e is not None:
            self.fail(f"EXECUTE IMMEDIATE ... USING failed: {e}")
        self.assertEqual(rows, [["CANADA"]], "nation 3 is CANADA")

    def test_query_parameters_legacy_prepare(self):
        # The client sends: PREPARE st_<hex> FROM SELECT ... = ?, expects the response
        # header X-Trino-Added-Prepare: st_<hex>=<urlencoded sql>, then sends
        # EXECUTE st_<hex> USING 3 with X-Trino-Prepared-Statement: st_<hex>=<urlencoded sql>,
        # then DEALLOCATE PREPARE st_<hex> (answer header X-Trino-Deallocated-Prepare).
        rows, e = attempt(lambda: self._parameter_query(legacy=True))
        if e is not None:
            self.fail(f"PREPARE ... FROM / EXECUTE ... USING failed: {e}")
        self.assertEqual(rows, [["CANADA"]], "nation 3 is CANADA")

    def test_failing_query_raises_user_error(self):
        conn = connect()
        try:
            cur = conn.cursor()
            with self.assertRaises(trino.exceptions.TrinoUserError) as cm:
                cur.execute("SELECT * FROM no_such_table")
                cur.fetchall()
            e = cm.exception
            self.assertIn("no_such_table", e.message, f"error message should name the table: {e.message!r}")
            self.assertEqual(e.error_name, "TABLE_NOT_FOUND", f"error_name is {e.error_name!r}")
            self.assertEqual(e.error_type, "USER_ERROR")
            self.assertTrue(e.query_id, "the error carries the query id")
        finally:
            conn.close()

    def test_syntax_error(self):
        with self.assertRaises(trino.exceptions.TrinoUserError) as cm:
            query_all("SELEC 1")
        self.assertEqual(cm.exception.error_name, "SYNTAX_ERROR")

    def test_cancel(self):
        conn = connect()
        cur = conn.cursor()
        started = time.monotonic()
        cur.execute("SELECT l_orderkey, count(*) FROM tpch.sf1.lineitem GROUP BY l_orderkey")
        qid = cur.query_id
        self.assertTrue(qid, "cursor.query_id after execute")
        cur.cancel()  # DELETE on nextUri
        deadline = time.monotonic() + 10
        last = None
        while time.monotonic() < deadline:
            last = next((q for q in coordinator_queries() if q.get("query_id") == qid), None)
            if last and last.get("state") in ("FAILED", "FINISHED"):
                break
            time.sleep(0.2)
        self.assertIsNotNone(last, f"query {qid} not listed by GET /v1/query")
        self.assertEqual(last.get("state"), "FAILED",
                         f"query {qid} should be FAILED within 10 s of cancel "
                         f"({time.monotonic() - started:.1f}s since execute): {last!r}")
        self.assertEqual((last.get("error") or {}).get("error_name"), "USER_CANCELED", f"{last!r}")
        conn.close()

    def test_cancel_from_other_thread(self):
        conn = connect()
        cur = conn.cursor()
        # A query still producing rows seconds after its first ones arrive: an
        # aggregation over sf1 could end (FINISHED, its rows all buffered for the
        # client) before the cancel came.
        cur.execute("SELECT * FROM tpch.sf1.lineitem")
        qid = cur.query_id
        fetched = []
        error = []

        def drain():
            try:
                while cur.fetchmany(1000):
                    fetched.append(1)
            except Exception as e:  # the client may raise once the query is gone
                error.append(e)

        t = threading.Thread(target=drain, daemon=True)
        t.start()
        time.sleep(0.3)
        cur.cancel()
        t.join(15)
        self.assertFalse(t.is_alive(), "fetching thread still running 15 s after cancel")
        q = next((q for q in coordinator_queries() if q.get("query_id") == qid), None)
        self.assertIsNotNone(q, f"query {qid} not listed by GET /v1/query")
        self.assertEqual(q.get("state"), "FAILED", f"{q!r}")
        self.assertEqual((q.get("error") or {}).get("error_name"), "USER_CANCELED", f"{q!r}")
        conn.close()

    def test_information_schema_columns_comment(self):
        # The exact query of TrinoDialect._get_columns (get_columns), parameters
        # inlined so this test does not depend on prepared statements.
        sql = (
            'SELECT "column_name", "data_type", "column_default", '
            'UPPER("is_nullable") AS "is_nullable", "comment" '
            'FROM "information_schema"."columns" '
            "WHERE \"table_schema\" = 'tiny' AND \"table_name\" = 'lineitem' "
            'ORDER BY "ordinal_position" ASC')
        res, e = attempt(lambda: query_all(sql))
        if e is not None:
            self.fail(f"the SQLAlchemy dialect's information_schema.columns query failed: {e}")
        self.assertEqual([r[0] for r in res[0]], LINEITEM_COLUMNS, "lineitem columns in order")

    def test_information_schema_columns_type_names(self):
        sql = ("SELECT column_name, data_type FROM information_schema.columns "
               "WHERE table_schema = 'tiny' AND table_name = 'lineitem' ORDER BY ordinal_position")
        rows, _ = query_all(sql)
        self.assertEqual([r[0] for r in rows], LINEITEM_COLUMNS, "lineitem columns in order")
        types = {r[0]: r[1] for r in rows}
        # Trino's type names, which the dialect parses (datatype.parse_sqltype); other
        # spellings reflect as NullType.
        expected = {"l_orderkey": "bigint", "l_linenumber": "integer", "l_quantity": "decimal(12,2)",
                    "l_shipdate": "date", "l_comment": "varchar"}
        got = {c: types[c] for c in expected}
        self.assertEqual(got, expected, "information_schema.columns.data_type should use Trino's type names")

class SqlAlchemyDialect(unittest.TestCase):
    maxDiff = None

    @classmethod
    def setUpClass(cls):
        import sqlalchemy
        host, port = host_port()
        cls.sa = sqlalchemy
        cls.engine = sqlalchemy.create_engine(f"trino://test@{host}:{port}/tpch/tiny")

    @classmethod
    def tearDownClass(cls):
        cls.engine.dispose()

    def test_table_names(self):
        names, e = attempt(lambda: self.sa.inspect(self.engine).get_table_names())
        if e is not None:
            self.fail(f"inspect(engine).get_table_names() raised {type(e).__name__}: {e}")
        self.assertTrue(TPCH_TABLES <= set(names), f"missing tables {TPCH_TABLES - set(names)} in {names}")

    def test_columns(self):
        cols, e = attempt(lambda: self.sa.inspect(self.engine).get_columns("lineitem"))
        if e is not None:
            self.fail(f"inspect(engine).get_columns('lineitem') raised {type(e).__name__}: {e}")
        self.assertEqual([c["name"] for c in cols], LINEITEM_COLUMNS, "lineitem has the 16 spec columns")
        by_name = {c["name"]: c for c in cols}
        t = by_name["l_orderkey"]["type"]
        self.assertIsInstance(t, self.sa.types.Integer, f"l_orderkey should reflect as an integer type, got {t!r}")
        self.assertIsInstance(by_name["l_quantity"]["type"], self.sa.types.Numeric, "l_quantity")
        self.assertIsInstance(by_name["l_shipdate"]["type"], self.sa.types.Date, "l_shipdate")
        self.assertIsInstance(by_name["l_comment"]["type"], self.sa.types.String, "l_comment")

    def test_simple_query(self):
        with self.engine.connect() as c:
            rows = c.execute(self.sa.text("SELECT r_name FROM region ORDER BY r_regionkey")).fetchall()
        self.assertEqual([r[0] for r in rows], REGIONS, "REGION names per the TPC-H spec")

    def test_query_with_bound_parameter(self):
        def run():
            with self.engine.connect() as c:
                return c.execute(self.sa.text("SELECT n_name FROM nation WHERE n_nationkey = :k"), {"k": 0}).fetchall()
        rows, e = attempt(run)
        if e is not None:
            self.fail(f"a bound parameter through SQLAlchemy raised {type(e).__name__}: {e}")
        self.assertEqual([tuple(r) for r in rows], [("ALGERIA",)])

    def test_core_select(self):
        sa = self.sa
        nation = sa.table("nation", sa.column("n_nationkey"), sa.column("n_name"), sa.column("n_regionkey"))
        stmt = (sa.select(nation.c.n_regionkey, sa.func.count().label("n"))
                .group_by(nation.c.n_regionkey).order_by(nation.c.n_regionkey))
        with self.engine.connect() as c:
            rows = [tuple(r) for r in c.execute(stmt)]
        expected = [(i, sum(1 for _, _, rk in NATIONS if rk == i)) for i in range(5)]
        self.assertEqual(rows, expected, "nations per region key through a Core select")


if __name__ == "__main__":
    if not URL:
        print("FLOTILLA_URL is not set (e.g. http://127.0.0.1:8080)", file=sys.stderr)
        sys.exit(2)
    unittest.main(verbosity=2)
