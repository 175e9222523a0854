"""Writes the 99 TPC-DS queries of DuckDB's TPC-DS extension to q1.sql ... q99.sql
in the directory given as the first argument. .ci/run installs duckdb and the
extension's PyPI package (duckdb-extension-tpcds, the same version) into its
throwaway virtualenv; the extension is loaded from that package, not downloaded."""

import glob
import os
import sys

import duckdb
import duckdb_extension_tpcds

out = sys.argv[1]
package = os.path.dirname(duckdb_extension_tpcds.__file__)
[extension] = glob.glob(os.path.join(package, "extensions", "*", "tpcds.duckdb_extension"))
con = duckdb.connect(config={"autoinstall_known_extensions": False, "autoload_known_extensions": False})
con.sql(f"LOAD '{extension}'")
os.makedirs(out, exist_ok=True)
rows = con.sql("SELECT query_nr, query FROM tpcds_queries() ORDER BY query_nr").fetchall()
if len(rows) != 99:
    sys.exit(f"expected 99 TPC-DS queries, got {len(rows)}")
for number, text in rows:
    with open(os.path.join(out, f"q{number}.sql"), "w") as f:
        f.write(text)
