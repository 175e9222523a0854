"""dbt-trino and SQLAlchemy's inspector against a flotilla cluster.

Run by tests/integration/dbt.rs with the virtualenv .ci/run makes (dbt-core,
dbt-trino, sqlalchemy):

    test_dbt.py build PORT PROJECT_DIR    dbt seed, run, test, docs generate, a second
                                          run and test; checks every model's rows
    test_dbt.py inspect PORT              SQLAlchemy's inspector on every catalog
    test_dbt.py restarted PORT            after a coordinator restart: the views, the
                                          renamed tables and the comments are back
    test_dbt.py spooling PORT SPOOL_DIR   Trino's spooling protocol in each encoding:
                                          the same rows as JSON pages, segments spooled
                                          and acknowledged

Expected rows are computed here from the seed files, not by the engine.
"""

import csv
import decimal
import os
import subprocess
import sys
from collections import defaultdict
from datetime import date

import trino

CATALOG = "lake"
SCHEMA = "analytics"
HERE = os.path.dirname(os.path.abspath(__file__))
SEEDS = os.path.join(HERE, "..", "dbt", "seeds")


def connect(port):
    return trino.dbapi.connect(host="127.0.0.1", port=port, user="dbt", catalog=CATALOG, schema=SCHEMA)


def rows(port, sql):
    cur = connect(port).cursor()
    cur.execute(sql)
    return cur.fetchall()


def check(what, got, want):
    if got != want:
        raise AssertionError(f"{what}:\n  got  {got!r}\n  want {want!r}")
    print(f"ok: {what}")


def seed(name):
    with open(os.path.join(SEEDS, f"{name}.csv"), newline="") as f:
        return list(csv.DictReader(f))


def kept_orders():
    """stg_orders, from the seed: orders that were not returned."""
    return [o for o in seed("orders") if o["status"] != "returned"]


def expected_customer_orders():
    orders = defaultdict(list)
    for o in kept_orders():
        orders[int(o["customer_id"])].append(o)
    out = []
    for c in seed("customers"):
        mine = orders[int(c["customer_id"])]
        total = sum((decimal.Decimal(o["amount"]) for o in mine), decimal.Decimal("0.00"))
        last = max((date.fromisoformat(o["ordered_at"]) for o in mine), default=None)
        out.append([int(c["customer_id"]), c["name"], c["segment"], len(mine), total, last])
    return sorted(out)


def dbt(project, port, *args):
    env = dict(os.environ, FLOTILLA_DBT_PORT=str(port), DBT_PROFILES_DIR=project, DBT_SEND_ANONYMOUS_USAGE_STATS="false")
    cmd = [os.path.join(os.path.dirname(sys.executable), "dbt"), *args, "--project-dir", project]
    print("$ dbt " + " ".join(args), flush=True)
    done = subprocess.run(cmd, env=env, capture_output=True, text=True)
    print(done.stdout[-4000:])
    if done.returncode != 0:
        print(done.stderr[-4000:])
        raise AssertionError(f"dbt {' '.join(args)} failed with {done.returncode}")
    return done.stdout


def check_models(port, runs):
    check("seed customers", len(rows(port, "SELECT * FROM customers")), len(seed("customers")))
    check(
        "stg_orders (a view)",
        sorted(r[0] for r in rows(port, "SELECT order_id FROM stg_orders")),
        sorted(int(o["order_id"]) for o in kept_orders()),
    )
    got = sorted(list(r) for r in rows(port, "SELECT * FROM customer_orders"))
    check("customer_orders (a table, rebuilt by renames)", got, expected_customer_orders())
    # Append: every run adds the orders it sees.
    events = rows(port, "SELECT run_number, count(*) FROM order_events GROUP BY run_number ORDER BY 1")
    check("order_events (incremental, append)", [list(r) for r in events], [[n, len(kept_orders())] for n in range(1, runs + 1)])
    # delete+insert: the second run replaces the orders over 50 with its own rows.
    latest = sorted(list(r) for r in rows(port, "SELECT order_id, run_number FROM latest_orders"))
    want = sorted(
        [int(o["order_id"]), runs if runs > 1 and decimal.Decimal(o["amount"]) > 50 else 1] for o in kept_orders()
    )
    check("latest_orders (incremental, delete+insert)", latest, want)


def check_metadata(port):
    views = rows(
        port,
        f"SELECT table_name, view_definition FROM {CATALOG}.information_schema.views "
        f"WHERE table_schema = '{SCHEMA}' ORDER BY 1",
    )
    check("views listed", [v[0] for v in views], ["stg_customers", "stg_orders"])
    if "where status <> 'returned'" not in views[1][1]:
        raise AssertionError(f"the view's definition: {views[1][1]!r}")
    comments = rows(
        port,
        f"SELECT table_name, comment FROM system.metadata.table_comments "
        f"WHERE catalog_name = '{CATALOG}' AND schema_name = '{SCHEMA}' AND table_name IN ('customer_orders', 'stg_customers') ORDER BY 1",
    )
    check("table comments", [list(c) for c in comments], [["customer_orders", "Orders and spend per customer"], ["stg_customers", "One row per customer"]])
    column = rows(
        port,
        f"SELECT comment FROM {CATALOG}.information_schema.columns WHERE table_schema = '{SCHEMA}' "
        "AND table_name = 'customer_orders' AND column_name = 'customer_id'",
    )
    check("column comment", column, [["The customer's key"]])
    create = rows(port, "SHOW CREATE VIEW stg_orders")[0][0]
    if not create.startswith(f"CREATE VIEW {CATALOG}.{SCHEMA}.stg_orders SECURITY DEFINER AS"):
        raise AssertionError(f"SHOW CREATE VIEW: {create!r}")
    table = rows(port, "SHOW CREATE TABLE customer_orders")[0][0]
    if "COMMENT 'Orders and spend per customer'" not in table or "format = 'PARQUET'" not in table:
        raise AssertionError(f"SHOW CREATE TABLE: {table!r}")
    print("ok: SHOW CREATE VIEW / TABLE")
    leftovers = rows(
        port,
        f"SELECT table_name FROM {CATALOG}.information_schema.tables WHERE table_schema = '{SCHEMA}' "
        "AND (table_name LIKE '%__dbt_tmp' OR table_name LIKE '%__dbt_backup')",
    )
    check("no intermediate relations left", leftovers, [])


def build(port, project):
    dbt(project, port, "seed")
    dbt(project, port, "run", "--vars", "{run_number: 1}")
    check_models(port, 1)
    dbt(project, port, "test")
    dbt(project, port, "docs", "generate")
    with open(os.path.join(project, "target", "catalog.json")) as f:
        catalog = f.read()
    for name in ["customer_orders", "stg_orders", "Orders and spend per customer"]:
        if name not in catalog:
            raise AssertionError(f"catalog.json lacks {name!r}")
    print("ok: dbt docs generate documents the models")
    # Again: tables are replaced through renames, views re-created, incrementals grow.
    dbt(project, port, "run", "--vars", "{run_number: 2}")
    check_models(port, 2)
    dbt(project, port, "test")
    check_metadata(port)


def inspect(port):
    import sqlalchemy

    engine = sqlalchemy.create_engine(f"trino://dbt@127.0.0.1:{port}/{CATALOG}")
    insp = sqlalchemy.inspect(engine)
    check("schemas", SCHEMA in insp.get_schema_names(), True)
    tables = insp.get_table_names(schema=SCHEMA)
    check("tables", sorted(t for t in tables if not t.startswith("stg_")), ["customer_orders", "customers", "latest_orders", "order_events", "orders"])
    check("views", sorted(insp.get_view_names(schema=SCHEMA)), ["stg_customers", "stg_orders"])
    definition = insp.get_view_definition("stg_customers", schema=SCHEMA)
    if "cast(signup_date as date)" not in definition:
        raise AssertionError(f"view definition: {definition!r}")
    columns = [(c["name"], str(c["type"])) for c in insp.get_columns("customer_orders", schema=SCHEMA)]
    # The seed's integers are dbt-trino's `integer`; a sum of decimal(10,2) keeps the scale.
    total = columns[4][1]
    if not (total.startswith("DECIMAL(") and total.endswith(", 2)")):
        raise AssertionError(f"total_amount's type: {total}")
    check(
        "columns",
        [c for i, c in enumerate(columns) if i != 4],
        [("customer_id", "INTEGER"), ("name", "VARCHAR"), ("segment", "VARCHAR"), ("order_count", "BIGINT"), ("last_ordered_at", "DATE")],
    )
    check("primary key", insp.get_pk_constraint("customer_orders", schema=SCHEMA)["constrained_columns"], [])
    check("table comment", insp.get_table_comment("customer_orders", schema=SCHEMA), {"text": "Orders and spend per customer"})
    check("no comment", insp.get_table_comment("orders", schema=SCHEMA), {"text": None})
    # The other catalogs answer too, as Trino's would.
    tpch = sqlalchemy.inspect(sqlalchemy.create_engine(f"trino://dbt@127.0.0.1:{port}/tpch"))
    check("tpch tables", "lineitem" in tpch.get_table_names(schema="tiny"), True)
    check("tpch views", tpch.get_view_names(schema="tiny"), [])
    check("tpch comment", tpch.get_table_comment("nation", schema="tiny"), {"text": None})
    check("tpch columns", [c["name"] for c in tpch.get_columns("nation", schema="tiny")], ["n_nationkey", "n_name", "n_regionkey", "n_comment"])


def spooling(port, spool_dir):
    sql = "SELECT l_orderkey, l_linenumber, l_quantity, l_extendedprice, l_shipdate, l_comment FROM tpch.tiny.lineitem"
    want = sorted(map(tuple, rows(port, sql)))
    for encoding in ["json", "json+zstd", "json+lz4"]:
        conn = trino.dbapi.connect(host="127.0.0.1", port=port, user="dbt", encoding=encoding)
        cur = conn.cursor()
        cur.execute(sql)
        got = sorted(map(tuple, cur.fetchall()))
        check(f"{encoding}: {len(want)} rows as JSON pages give", got, want)
        # A small result comes inline, in the same encoding.
        cur.execute("SELECT n_name FROM tpch.tiny.nation WHERE n_nationkey < 3 ORDER BY 1")
        check(f"{encoding}: inline", cur.fetchall(), [["ALGERIA"], ["ARGENTINA"], ["BRAZIL"]])
    # The client asked for segments the server spooled, and acknowledged each.
    import time
    deadline = time.time() + 10
    while os.listdir(spool_dir) and time.time() < deadline:
        time.sleep(0.1)
    check("spooled segments left after acknowledgement", os.listdir(spool_dir), [])
    # Segments were spooled at all: one held back, unacknowledged, is on disk.
    request = trino.client.TrinoRequest(
        host="127.0.0.1", port=port, client_session=trino.client.ClientSession(user="dbt", encoding="json+zstd")
    )
    query = trino.client.TrinoQuery(request, sql, fetch_mode="segments")
    segments = [s for page in query.execute() for s in ([page] if not isinstance(page, list) else page)]
    spooled = [s for s in segments if isinstance(s.segment, trino.client.SpooledSegment)]
    if not spooled or len(os.listdir(spool_dir)) != len(spooled):
        raise AssertionError(f"{len(spooled)} spooled segments, {len(os.listdir(spool_dir))} files")
    for s in spooled:
        requests_ok = request._get(s.segment.ack_uri).ok
        if not requests_ok:
            raise AssertionError("acknowledging a segment failed")
    check("files after acknowledging by hand", os.listdir(spool_dir), [])


def restarted(port):
    check_models(port, 2)
    check_metadata(port)


if __name__ == "__main__":
    mode, port = sys.argv[1], int(sys.argv[2])
    if mode == "build":
        build(port, sys.argv[3])
    elif mode == "inspect":
        inspect(port)
    elif mode == "restarted":
        restarted(port)
    elif mode == "spooling":
        spooling(port, sys.argv[3])
    else:
        raise SystemExit(f"unknown mode {mode}")
