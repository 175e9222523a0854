"""Trino's Python client over HTTPS with a password (`BasicAuthentication`, `verify`
set to the test CA) against a flotilla coordinator started by `run.sh` with a
certificate, a password file and HTTPS workers.

Expected values are TPC-H facts (the fixed NATION table, the tiny row counts that
test_trino_client.py also uses), not flotilla's output.
"""

import datetime
import decimal
import os
import unittest
import urllib.parse

import trino
import trino.auth
import trino.dbapi
import trino.exceptions

URL = os.environ.get("FLOTILLA_HTTPS_URL", "")
CA = os.environ.get("FLOTILLA_CA", "")
USER, PASSWORD = "alice", os.environ.get("FLOTILLA_TEST_PASSWORD", "")

# TPC-H spec 4.2.3: the nations of region 1 (AMERICA).
AMERICA = ["ARGENTINA", "BRAZIL", "CANADA", "PERU", "UNITED STATES"]


def connect(password):
    u = urllib.parse.urlsplit(URL)
    return trino.dbapi.connect(
        host=u.hostname,
        port=u.port,
        user=USER,
        http_scheme="https",
        auth=trino.auth.BasicAuthentication(USER, password),
        verify=CA,
        catalog="tpch",
        schema="tiny",
    )


class HttpsWithPassword(unittest.TestCase):
    def test_queries_over_https_with_a_password(self):
        cur = connect(PASSWORD).cursor()
        cur.execute("SELECT n_name FROM nation WHERE n_regionkey = 1 ORDER BY n_name")
        self.assertEqual([r[0] for r in cur.fetchall()], AMERICA)
        cur.execute("SELECT count(*) FROM lineitem")
        self.assertEqual(cur.fetchall(), [[60175]])

    def test_tpch_q6_over_https_equals_a_recomputation_from_raw_rows(self):
        here = os.path.dirname(os.path.abspath(__file__))
        with open(os.path.join(here, "..", "..", "queries", "tpch", "q6.sql")) as f:
            q6 = f.read().strip().rstrip(";")
        cur = connect(PASSWORD).cursor()
        cur.execute(q6)
        (revenue,), = cur.fetchall()
        cur.execute("SELECT l_extendedprice, l_discount, l_shipdate, l_quantity FROM lineitem")
        rows = cur.fetchall()
        self.assertEqual(len(rows), 60175)
        lo, hi = datetime.date(1994, 1, 1), datetime.date(1995, 1, 1)
        want = sum(
            (price * discount for price, discount, shipdate, quantity in rows
             if lo <= shipdate < hi and decimal.Decimal("0.05") <= discount <= decimal.Decimal("0.07")
             and quantity < 24),
            decimal.Decimal(0),
        )
        self.assertEqual(decimal.Decimal(revenue), want)

    def test_a_wrong_password_is_refused(self):
        cur = connect(PASSWORD + "-wrong").cursor()
        with self.assertRaises(trino.exceptions.HttpError) as caught:
            cur.execute("SELECT 1")
            cur.fetchall()
        self.assertIn("401", str(caught.exception))


if __name__ == "__main__":
    if not URL or not CA or not PASSWORD:
        raise SystemExit("FLOTILLA_HTTPS_URL, FLOTILLA_CA and FLOTILLA_TEST_PASSWORD must be set")
    unittest.main(verbosity=2)
