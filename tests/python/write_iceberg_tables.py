"""Writes the Iceberg tables of the Iceberg test with PyPI's pyiceberg.

Usage: write_iceberg_tables.py ORDERS_PARQUET_DIR CATALOG_URI WAREHOUSE [S3_ENDPOINT]

From TPC-H sf0_1 `orders` (Parquet written by flotilla), in namespace `web` of the
SQL catalog `lake` at CATALOG_URI (sqlite:///... or postgresql+psycopg2://...):

- `orders`, unpartitioned, three snapshots: the orders before 1995 appended; column
  `o_comment` renamed `o_note`; the rest appended; then the '5-LOW' orders deleted,
  which rewrites the files holding them (an `overwrite` snapshot).
- `orders_by_day`, partitioned by day(o_orderdate): the orders from 1998-07-01.
- `orders_by_bucket`, partitioned by bucket(8, o_orderkey): all orders.

Prints, as JSON, each table's snapshots (id, commit time in ms, operation) and its
live data files, as pyiceberg itself reports them.
"""

import json
import sys

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.expressions import EqualTo
from pyiceberg.transforms import BucketTransform, DayTransform


def plain_types(table):
    """pyiceberg takes no view types: strings as plain strings."""
    fields = []
    for f in table.schema:
        t = f.type
        if pa.types.is_string_view(t) or pa.types.is_large_string(t):
            t = pa.string()
        fields.append(pa.field(f.name, t, nullable=True))
    return table.cast(pa.schema(fields))


def main():
    parquet_dir, uri, warehouse = sys.argv[1:4]
    props = {"uri": uri, "warehouse": warehouse}
    if len(sys.argv) > 4:
        props.update({
            "s3.endpoint": sys.argv[4],
            "s3.access-key-id": "testing",
            "s3.secret-access-key": "testing",
            "s3.region": "us-east-1",
        })
    catalog = SqlCatalog("lake", **props)
    catalog.create_namespace("web")
    orders = plain_types(ds.dataset(parquet_dir, format="parquet").to_table())
    early = orders.filter(pc.field("o_orderdate") < pa.scalar("1995-01-01").cast(pa.date32()))
    late = orders.filter(pc.field("o_orderdate") >= pa.scalar("1995-01-01").cast(pa.date32()))

    t = catalog.create_table("web.orders", schema=orders.schema)
    t.append(early)
    with t.update_schema() as u:
        u.rename_column("o_comment", "o_note")
    t = catalog.load_table("web.orders")
    renamed = late.rename_columns(["o_note" if n == "o_comment" else n for n in late.column_names])
    t.append(renamed)
    t = catalog.load_table("web.orders")
    # Files holding some '5-LOW' orders are rewritten without them: an overwrite.
    t.delete(delete_filter=EqualTo("o_orderpriority", "5-LOW"))

    by_day = catalog.create_table("web.orders_by_day", schema=orders.schema)
    with by_day.update_spec() as u:
        u.add_field("o_orderdate", DayTransform(), "o_orderdate_day")
    by_day = catalog.load_table("web.orders_by_day")
    by_day.append(orders.filter(pc.field("o_orderdate") >= pa.scalar("1998-07-01").cast(pa.date32())))

    by_bucket = catalog.create_table("web.orders_by_bucket", schema=orders.schema)
    with by_bucket.update_spec() as u:
        u.add_field("o_orderkey", BucketTransform(8), "o_orderkey_bucket")
    by_bucket = catalog.load_table("web.orders_by_bucket")
    by_bucket.append(orders)

    out = {}
    for name in ["orders", "orders_by_day", "orders_by_bucket"]:
        t = catalog.load_table(f"web.{name}")
        snapshots = [
            {"id": s.snapshot_id, "ms": s.timestamp_ms, "operation": s.summary.operation.value}
            for s in t.snapshots()
        ]
        files = t.inspect.files()
        out[name] = {
            "snapshots": snapshots,
            "files": files.num_rows,
            "rows": sum(files.column("record_count").to_pylist()),
            "metadata": t.metadata_location,
        }
    print(json.dumps(out))


if __name__ == "__main__":
    main()
