"""Arrow Flight SQL through PyPI's ADBC driver (adbc-driver-flightsql with
adbc-driver-manager's DB-API) and pyarrow.flight, against a coordinator serving it
with TLS and password logins. Prints one JSON document of what the clients got;
tests/integration/flight_sql.rs compares it with single-node DataFusion and with
the coordinator's own view of the queries.

  test_flight_sql.py checks URI CA_PEM     the checks below
  test_flight_sql.py bench URI CA_PEM SQL  rows/s of one query, fetched as Arrow
"""

import json
import sys
import time

import adbc_driver_flightsql.dbapi as flight_sql
import pyarrow.flight as flight
from adbc_driver_flightsql import DatabaseOptions


def connect(uri, ca, user, password, **headers):
    kwargs = {DatabaseOptions.TLS_ROOT_CERTS.value: ca, "username": user, "password": password}
    for name, value in headers.items():
        kwargs[DatabaseOptions.RPC_CALL_HEADER_PREFIX.value + name.replace("_", "-")] = value
    return flight_sql.connect(uri, db_kwargs=kwargs, autocommit=True)


def plain(value):
    """A value as JSON carries it, decimals as their exact text."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return str(value)


def rows_of(table):
    columns = [table.column(i).to_pylist() for i in range(table.num_columns)]
    return [[plain(c[r]) for c in columns] for r in range(table.num_rows)]


def error_of(call):
    try:
        call()
    except Exception as e:  # the driver's error classes differ by version
        return f"{type(e).__name__}: {e}"
    return None


def field(number, value):
    """A length-delimited protobuf field."""
    key, size, out = bytes([number << 3 | 2]), len(value), b""
    while size >= 0x80:
        out += bytes([size & 0x7F | 0x80])
        size >>= 7
    return key + out + bytes([size]) + value


def command(name, message=b""):
    """A Flight SQL command, packed as a protobuf Any."""
    return field(1, b"type.googleapis.com/arrow.flight.protocol.sql." + name.encode()) + field(2, message)


def flight_client(uri, ca, user, password):
    client = flight.FlightClient(uri, tls_root_certs=ca.encode())
    header = client.authenticate_basic_token(user, password)
    return client, flight.FlightCallOptions(headers=[header])


def xdbc_types(uri, ca, user, password):
    """GetXdbcTypeInfo, which ADBC does not expose, through pyarrow's Flight client."""
    client, options = flight_client(uri, ca, user, password)
    descriptor = flight.FlightDescriptor.for_command(command("CommandGetXdbcTypeInfo"))
    info = client.get_flight_info(descriptor, options)
    table = client.do_get(info.endpoints[0].ticket, options).read_all()
    return sorted(table.column("type_name").to_pylist())


def cancel_flight_info(uri, ca, user, password, sql):
    """Flight's CancelFlightInfo action on a statement's FlightInfo (no ticket read);
    returns the CancelFlightInfoResult's bytes as hex."""
    client, options = flight_client(uri, ca, user, password)
    descriptor = flight.FlightDescriptor.for_command(command("CommandStatementQuery", field(1, sql.encode())))
    info = client.get_flight_info(descriptor, options)
    action = flight.Action("CancelFlightInfo", field(1, info.serialize()))
    return [r.body.to_pybytes().hex() for r in client.do_action(action, options)]


def checks(uri, ca):
    out = {}
    conn = connect(uri, ca, "alice", "alice-pw", x_trino_catalog="tpch", x_trino_schema="tiny")
    cur = conn.cursor()
    cur.execute("SELECT n_nationkey, n_name, n_regionkey FROM nation ORDER BY n_nationkey")
    out["description"] = [[d[0], str(d[1])] for d in cur.description]
    out["nation"] = [[plain(v) for v in row] for row in cur.fetchall()]
    cur.execute(
        "SELECT o_orderstatus, count(*) AS n, sum(o_totalprice) AS total, min(o_orderdate) AS first "
        "FROM orders GROUP BY o_orderstatus ORDER BY o_orderstatus"
    )
    table = cur.fetch_arrow_table()
    out["orders_types"] = [str(f.type) for f in table.schema]
    out["orders"] = rows_of(table)
    cur.execute(
        "SELECT count(*), sum(o_totalprice) FROM orders WHERE o_custkey = ? AND o_orderstatus = ?",
        parameters=(370, "O"),
    )
    out["parameterised"] = [plain(v) for v in cur.fetchone()]
    cur.execute("SELECT count(*) FROM orders WHERE o_custkey = ?", parameters=(1,))
    out["parameterised_again"] = [plain(v) for v in cur.fetchone()]
    out["missing_table"] = error_of(lambda: cur.execute("SELECT * FROM no_such_table"))
    # The session changes with USE, for this connection's later statements.
    cur.execute("USE tpch.sf1")
    cur.execute("SELECT count(*) FROM customer")
    out["after_use"] = [plain(v) for v in cur.fetchone()]
    # Writes: a table with columns, rows inserted one execution per parameter row.
    cur.execute("CREATE TABLE memory.default.flight_t (k bigint, v varchar)")
    cur.executemany("INSERT INTO memory.default.flight_t VALUES (?, ?)", [(1, "one"), (2, "two"), (3, None)])
    cur.execute("SELECT k, v FROM memory.default.flight_t ORDER BY k")
    out["inserted"] = [[plain(v) for v in row] for row in cur.fetchall()]
    cur.execute("DROP TABLE memory.default.flight_t")
    # Metadata.
    info = conn.adbc_get_info()
    out["vendor_name"] = info.get("vendor_name")
    objects = conn.adbc_get_objects(
        depth="all", catalog_filter="tpch", db_schema_filter="tiny", table_name_filter="nation"
    ).read_all().to_pylist()
    out["objects"] = [
        [c["catalog_name"], s["db_schema_name"], t["table_name"], t["table_type"],
         [col["column_name"] for col in t["table_columns"]]]
        for c in objects
        for s in c["catalog_db_schemas"]
        for t in s["db_schema_tables"]
    ]
    catalogs = conn.adbc_get_objects(depth="catalogs").read_all().to_pylist()
    out["alice_catalogs"] = sorted(c["catalog_name"] for c in catalogs)
    out["table_schema"] = str(conn.adbc_get_table_schema("region", catalog_filter="tpch", db_schema_filter="tiny"))
    out["table_types"] = sorted(conn.adbc_get_table_types())
    out["xdbc_types"] = xdbc_types(uri, ca, "alice", "alice-pw")
    out["cancel_flight_info"] = cancel_flight_info(uri, ca, "alice", "alice-pw", "SELECT l_orderkey FROM tpch.sf1.lineitem")
    # Cancel: a large result, one batch read, then cancelled.
    cur.execute("SELECT * FROM tpch.sf1.lineitem")
    reader = cur.fetch_record_batch()
    reader.read_next_batch()
    cur.adbc_cancel()
    out["after_cancel"] = error_of(reader.read_all)
    cur.close()
    conn.close()
    # Another user: the access rules hold, the catalogs are theirs.
    reader_conn = connect(uri, ca, "reader", "reader-pw")
    catalogs = reader_conn.adbc_get_objects(depth="catalogs").read_all().to_pylist()
    out["reader_catalogs"] = sorted(c["catalog_name"] for c in catalogs)
    rc = reader_conn.cursor()
    out["reader_write"] = error_of(lambda: rc.execute("CREATE TABLE tpch.tiny.t AS SELECT 1 AS a"))
    rc.close()
    reader_conn.close()
    out["wrong_password"] = error_of(lambda: connect(uri, ca, "alice", "not-her-password").cursor().execute("SELECT 1"))
    print(json.dumps(out))


def bench(uri, ca, sql):
    conn = connect(uri, ca, "alice", "alice-pw")
    cur = conn.cursor()
    started = time.monotonic()
    cur.execute(sql)
    table = cur.fetch_arrow_table()
    seconds = time.monotonic() - started
    print(json.dumps({"rows": table.num_rows, "seconds": seconds, "rows_per_second": table.num_rows / seconds}))


if __name__ == "__main__":
    mode, uri, ca_path = sys.argv[1], sys.argv[2], sys.argv[3]
    ca = open(ca_path).read()
    if mode == "checks":
        checks(uri, ca)
    elif mode == "bench":
        bench(uri, ca, sys.argv[4])
    else:
        sys.exit(f"unknown mode {mode}")
