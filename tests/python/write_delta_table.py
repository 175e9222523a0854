"""Writes the Delta table the delta_lake integration test reads, with the Python
`deltalake` package (delta-rs) and pyarrow, from a directory of Parquet files
holding TPC-H `orders`:

  version 0: the orders before 1995, partitioned by o_orderstatus;
  version 1: the rest appended (new files, so each file holds one side of 1995);
  version 2: the '5-LOW' orders deleted (their files rewritten).

Prints the table's last version and its live file count as JSON.
"""

import datetime
import json
import sys

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
from deltalake import DeltaTable, write_deltalake


def main(source: str, target: str) -> None:
    orders = ds.dataset(source, format="parquet").to_table()
    # flotilla writes strings as Arrow string views; pyarrow's filters want strings.
    orders = orders.cast(
        pa.schema([pa.field(f.name, pa.string() if f.type == pa.string_view() else f.type) for f in orders.schema])
    )
    early = pc.less(orders["o_orderdate"], pa.scalar(datetime.date(1995, 1, 1)))
    write_deltalake(target, orders.filter(early), partition_by=["o_orderstatus"])
    write_deltalake(target, orders.filter(pc.invert(early)), partition_by=["o_orderstatus"], mode="append")
    DeltaTable(target).delete("o_orderpriority = '5-LOW'")
    table = DeltaTable(target)
    print(json.dumps({"version": table.version(), "files": len(table.file_uris())}))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
