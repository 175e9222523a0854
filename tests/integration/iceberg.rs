//! The `iceberg` connector on tables written by another implementation: PyPI's
//! `pyiceberg` writes TPC-H sf0_1 `orders` (as flotilla wrote it to Parquet) into
//! SQL catalogs (`tests/python/write_iceberg_tables.py`): unpartitioned with three
//! snapshots (two appends around a column rename, then an overwrite), partitioned by
//! day, partitioned by bucket. Each snapshot, read as the current one, by
//! `FOR VERSION AS OF` and by `FOR TIMESTAMP AS OF`, equals single-node DataFusion
//! over `tpch` with the same filter; filters on partition columns drop files before
//! any opens (`EXPLAIN`); the metadata tables agree with what pyiceberg reports. The
//! same runs on a SQLite catalog with a local warehouse, on a PostgreSQL catalog
//! (Debian's server, started here), and on a SQLite catalog whose warehouse is a
//! bucket of moto's S3 server.
//!
//! Then tables flotilla writes into the SQLite catalog: unpartitioned (CTAS, INSERT,
//! two INSERTs at once) and partitioned by day, bucket and identity, and by year and
//! bucket; read back by flotilla against the oracle and by pyiceberg, whose filtered
//! scans trust the partition values and column bounds flotilla recorded; files
//! pruned by both in `EXPLAIN`; a schema and a table made and dropped; a CTAS whose
//! worker is killed leaves nothing.
//!
//! `.ci/run` installs `pyiceberg[sql-sqlite,sql-postgres,pyarrow]` into a throwaway
//! virtualenv and names its Python in `FLOTILLA_ICEBERG_PYTHON`; without it (or
//! PostgreSQL, or moto) the test says what it skipped.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use super::common::{assert_same_rows, missing_service, oracle, python_with, query_error, scanned_files, EtcCluster};
use super::object_storage::{moto_server, start_moto};
use super::postgresql::{server_bin, Postgres};

const BUCKET: &str = "flotilla-iceberg";

/// A Python that can import pyiceberg.catalog.sql.
fn python() -> Option<PathBuf> {
    python_with("FLOTILLA_ICEBERG_PYTHON", "pyiceberg.catalog.sql, pyarrow, sqlalchemy")
}

/// Runs the writer into one catalog; its JSON summary.
fn write_tables(python: &Path, parquet: &Path, uri: &str, warehouse: &str, s3: Option<&str>) -> Value {
    let mut command = Command::new(python);
    command
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/python/write_iceberg_tables.py"))
        .arg(parquet)
        .arg(uri)
        .arg(warehouse)
        .args(s3);
    // Run from the test's directory: a module there must not shadow the standard
    // library's.
    let out = command.current_dir(parquet).output().expect("run the Iceberg writer");
    assert!(out.status.success(), "write_iceberg_tables.py: {}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).expect("the writer's summary")
}

/// `ms` since the epoch as Trino's timestamp literal text in UTC.
fn utc_text(ms: i64) -> String {
    let t = chrono::DateTime::from_timestamp_millis(ms).unwrap();
    t.format("%Y-%m-%d %H:%M:%S%.3f UTC").to_string()
}

async fn count(client: &flotilla::client::StatementClient, sql: &str) -> i64 {
    let rows = client.execute(sql).await.unwrap_or_else(|e| panic!("{sql}: {e:?}")).rows;
    rows[0][0].as_i64().unwrap_or_else(|| rows[0][0].as_str().unwrap().parse().unwrap())
}

/// Every check on one catalog whose tables `written` describes.
async fn check_catalog(client: &flotilla::client::StatementClient, catalog: &str, written: &Value) {
    let label = |what: &str| format!("{catalog}: {what}");
    let per_status = "SELECT o_orderstatus, count(*), sum(o_totalprice), min(o_orderkey), max(o_orderdate), \
        count({NOTE}), max({NOTE}) FROM orders {FILTER} GROUP BY o_orderstatus ORDER BY o_orderstatus";
    let snapshots = written["orders"]["snapshots"].as_array().unwrap();
    assert_eq!(snapshots.len(), 3, "{written}");
    let ops: Vec<&str> = snapshots.iter().map(|s| s["operation"].as_str().unwrap()).collect();
    assert_eq!(ops, ["append", "append", "overwrite"]);
    let id = |i: usize| snapshots[i]["id"].as_i64().unwrap();
    let ms = |i: usize| snapshots[i]["ms"].as_i64().unwrap();
    let cases = [
        ("current", String::new(), "o_note", "WHERE o_orderpriority <> '5-LOW'"),
        ("snapshot 1", format!(" FOR VERSION AS OF {}", id(0)), "o_comment", "WHERE o_orderdate < DATE '1995-01-01'"),
        ("snapshot 2", format!(" FOR VERSION AS OF {}", id(1)), "o_note", ""),
        ("snapshot 3", format!(" FOR VERSION AS OF {}", id(2)), "o_note", "WHERE o_orderpriority <> '5-LOW'"),
        (
            "at time 1",
            format!(" FOR TIMESTAMP AS OF TIMESTAMP '{}'", utc_text(ms(0))),
            "o_comment",
            "WHERE o_orderdate < DATE '1995-01-01'",
        ),
        ("between 2 and 3", format!(" FOR TIMESTAMP AS OF TIMESTAMP '{}'", utc_text(ms(2) - 1)), "o_note", ""),
    ];
    for (what, clause, note, filter) in &cases {
        let want = oracle("sf0_1", &per_status.replace("{FILTER}", filter).replace("{NOTE}", "o_comment")).await;
        let sql = per_status
            .replace("FROM orders {FILTER}", &format!("FROM {catalog}.web.orders{clause}"))
            .replace("{NOTE}", note);
        let got = client.execute(&sql).await.unwrap_or_else(|e| panic!("{}: {e:?}", label(what))).rows;
        assert_same_rows(&label(what), &sql, &got, &want);
    }

    // Partitioned by day: a day's filter reads that day's one file.
    let by_day = &written["orders_by_day"];
    let sql = "SELECT o_orderdate, count(*), sum(o_totalprice) FROM {T} GROUP BY o_orderdate ORDER BY o_orderdate";
    let want = oracle("sf0_1", &sql.replace("{T}", "orders WHERE o_orderdate >= DATE '1998-07-01'")).await;
    let day_sql = sql.replace("{T}", &format!("{catalog}.web.orders_by_day"));
    assert_same_rows(&label("by day"), &day_sql, &client.execute(&day_sql).await.expect("by day").rows, &want);
    let one_day = format!(
        "SELECT count(*), sum(o_totalprice) FROM {catalog}.web.orders_by_day WHERE o_orderdate = DATE '1998-07-15'"
    );
    let files = scanned_files(&client.execute(&format!("EXPLAIN {one_day}")).await.unwrap().rows);
    assert_eq!(files.len(), 1, "one day, one file: {files:?}");
    let want =
        oracle("sf0_1", "SELECT count(*), sum(o_totalprice) FROM orders WHERE o_orderdate = DATE '1998-07-15'").await;
    assert_same_rows(&label("one day"), &one_day, &client.execute(&one_day).await.unwrap().rows, &want);

    // Partitioned by bucket: a key's filter reads its bucket's file.
    let key =
        format!("SELECT o_orderkey, o_custkey, o_totalprice FROM {catalog}.web.orders_by_bucket WHERE o_orderkey = 7");
    let files = scanned_files(&client.execute(&format!("EXPLAIN {key}")).await.unwrap().rows);
    assert_eq!(files.len(), 1, "one bucket: {files:?}");
    let want = oracle("sf0_1", "SELECT o_orderkey, o_custkey, o_totalprice FROM orders WHERE o_orderkey = 7").await;
    assert_same_rows(&label("one key"), &key, &client.execute(&key).await.unwrap().rows, &want);
    let sql =
        format!("SELECT count(*), sum(o_totalprice), count(DISTINCT o_custkey) FROM {catalog}.web.orders_by_bucket");
    let want = oracle("sf0_1", "SELECT count(*), sum(o_totalprice), count(DISTINCT o_custkey) FROM orders").await;
    assert_same_rows(&label("buckets"), &sql, &client.execute(&sql).await.unwrap().rows, &want);

    // The metadata tables say what pyiceberg says.
    let ids = client
        .execute(&format!(
            "SELECT snapshot_id, operation FROM {catalog}.web.\"orders$snapshots\" ORDER BY committed_at"
        ))
        .await
        .unwrap()
        .rows;
    let got: Vec<(i64, String)> =
        ids.iter().map(|r| (r[0].as_i64().unwrap(), r[1].as_str().unwrap().to_string())).collect();
    let want: Vec<(i64, String)> = (0..3).map(|i| (id(i), ops[i].to_string())).collect();
    assert_eq!(got, want, "{catalog} $snapshots");
    let history = format!("SELECT count(*) FROM {catalog}.web.\"orders$history\" WHERE is_current_ancestor");
    assert_eq!(count(client, &history).await, 3);
    let files = format!("SELECT count(*), sum(record_count) FROM {catalog}.web.\"orders$files\"");
    let rows = client.execute(&files).await.unwrap().rows;
    assert_eq!(rows[0][0].as_i64(), written["orders"]["files"].as_i64(), "{catalog} $files");
    assert_eq!(rows[0][1].as_i64(), written["orders"]["rows"].as_i64(), "{catalog} $files");
    let partitions =
        format!("SELECT count(*), sum(record_count), sum(file_count) FROM {catalog}.web.\"orders_by_day$partitions\"");
    let rows = client.execute(&partitions).await.unwrap().rows;
    let days = oracle(
        "sf0_1",
        "SELECT count(DISTINCT o_orderdate), count(*) FROM orders WHERE o_orderdate >= DATE '1998-07-01'",
    )
    .await;
    assert_eq!(rows[0][0], days[0][0], "{catalog} $partitions: one per day");
    assert_eq!(rows[0][1], days[0][1], "{catalog} $partitions: every row");
    assert_eq!(rows[0][2].as_u64(), by_day["files"].as_u64());

    // Listed like any catalog.
    let tables = client
        .execute(&format!(
            "SELECT table_name FROM {catalog}.information_schema.tables WHERE table_schema = 'web' ORDER BY 1"
        ))
        .await
        .unwrap()
        .rows;
    let names: Vec<&str> = tables.iter().map(|r| r[0].as_str().unwrap()).collect();
    assert_eq!(names, ["orders", "orders_by_bucket", "orders_by_day"]);

    // Clear errors.
    let (_, message) =
        query_error(client.execute(&format!("SELECT count(*) FROM {catalog}.web.orders FOR VERSION AS OF 1")).await);
    assert!(message.contains("no snapshot 1"), "{message}");
    let (_, message) = query_error(
        client
            .execute(&format!(
                "SELECT count(*) FROM {catalog}.web.orders FOR TIMESTAMP AS OF TIMESTAMP '2000-01-01 00:00:00 UTC'"
            ))
            .await,
    );
    assert!(message.contains("no snapshot at or before"), "{message}");
}

/// pyiceberg's own read of `table` (`namespace.name`) in the catalog at `uri`, with its row
/// filter `filter` (pyiceberg's syntax; empty for all rows): row count and the sum
/// of `column`.
fn pyiceberg_read(python: &Path, uri: &str, table: &str, column: &str, filter: &str, dir: &Path) -> (i64, i64) {
    let filter = if filter.is_empty() { "AlwaysTrue()".to_string() } else { format!("{filter:?}") };
    let script = format!(
        "import json\nfrom pyiceberg.catalog.sql import SqlCatalog\nfrom pyiceberg.expressions import AlwaysTrue\n\
         t = SqlCatalog('lake', uri='{uri}').load_table('{table}').scan(row_filter={filter}).to_arrow()\n\
         print(json.dumps([t.num_rows, sum(v for v in t.column('{column}').to_pylist() if v is not None)]))\n"
    );
    let out = Command::new(python).args(["-c", &script]).current_dir(dir).output().expect("run pyiceberg");
    assert!(out.status.success(), "pyiceberg read: {}", String::from_utf8_lossy(&out.stderr));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    (v[0].as_i64().unwrap(), v[1].as_i64().unwrap())
}

/// An integer the oracle answers (as a number or as decimal text).
fn int(v: &Value) -> i64 {
    v.as_i64().or_else(|| v.as_str().and_then(|s| s.parse().ok())).unwrap_or_else(|| panic!("an integer: {v}"))
}

/// A `.parquet` path by its partition directories and name (a writer gives its files
/// the same name in each partition; what precedes the table differs between `$files`
/// and `EXPLAIN`).
fn file_key(path: &str) -> String {
    path.rsplit('/').take(3).collect::<Vec<_>>().join("/")
}

fn file_names(paths: &[String]) -> std::collections::BTreeSet<String> {
    paths.iter().map(|p| file_key(p)).collect()
}

/// The data files `"<table>$files"` lists.
async fn data_files(client: &flotilla::client::StatementClient, table: &str) -> Vec<String> {
    let sql = format!("SELECT file_path FROM ice.web.\"{table}$files\"");
    client.execute(&sql).await.unwrap().rows.iter().map(|r| r[0].as_str().unwrap().to_string()).collect()
}

/// Partitioned tables flotilla writes: each file in its partition's directory,
/// read back right by flotilla and by pyiceberg (whose filtered scans trust the
/// partition values and column bounds the commit recorded), files skipped by both.
async fn check_partitioned_writes(
    client: &flotilla::client::StatementClient,
    python: &Path,
    uri: &str,
    warehouse: &Path,
) {
    // Nulls, a slash, a name "null" and a time before 1970, by day, bucket and identity.
    client
        .execute(
            "CREATE TABLE ice.web.events (id bigint, ts timestamp(6), name varchar) \
             WITH (partitioning = ARRAY['day(ts)', 'bucket(id, 4)', 'name'])",
        )
        .await
        .expect("create partitioned");
    assert_eq!(count(client, "SELECT count(*) FROM ice.web.events").await, 0);
    let inserted = client
        .execute(
            "INSERT INTO ice.web.events VALUES (1, TIMESTAMP '2024-01-01 10:00:00', 'a/b'), (2, NULL, NULL), \
             (3, TIMESTAMP '2024-01-02 23:59:59.999999', 'null'), (4, TIMESTAMP '1969-12-31 23:00:00', 'a/b')",
        )
        .await
        .expect("insert partitioned");
    assert_eq!(inserted.update_count, Some(4));
    let ids = |sql: &'static str| async move {
        let rows = client.execute(sql).await.unwrap().rows;
        rows.iter().map(|r| r[0].as_i64().unwrap()).collect::<Vec<_>>()
    };
    assert_eq!(ids("SELECT id FROM ice.web.events ORDER BY id").await, [1, 2, 3, 4]);
    assert_eq!(ids("SELECT id FROM ice.web.events WHERE name IS NULL").await, [2]);
    assert_eq!(ids("SELECT id FROM ice.web.events WHERE name = 'null'").await, [3]);
    assert_eq!(ids("SELECT id FROM ice.web.events WHERE ts < TIMESTAMP '1970-01-01 00:00:00'").await, [4]);
    assert_eq!(ids("SELECT id FROM ice.web.events WHERE ts = TIMESTAMP '2024-01-02 23:59:59.999999'").await, [3]);
    assert_eq!(count(client, "SELECT count(*) FROM ice.web.\"events$partitions\"").await, 4);
    assert_eq!(pyiceberg_read(python, uri, "web.events", "id", "", warehouse), (4, 10));
    assert_eq!(pyiceberg_read(python, uri, "web.events", "id", "ts < '1970-01-01T00:00:00'", warehouse), (1, 4));
    assert_eq!(pyiceberg_read(python, uri, "web.events", "id", "name == 'a/b'", warehouse), (2, 5));

    // TPC-H orders by year and customer bucket: a CTAS, then an INSERT of the rest.
    let ctas = client
        .execute(
            "CREATE TABLE ice.web.orders_p WITH (partitioning = ARRAY['year(o_orderdate)', 'bucket(o_custkey, 4)']) \
             AS SELECT * FROM tpch.sf0_1.orders WHERE o_orderpriority <> '1-URGENT'",
        )
        .await
        .expect("partitioned ctas");
    let rest = oracle("sf0_1", "SELECT count(*) FROM orders WHERE o_orderpriority <> '1-URGENT'").await;
    assert_eq!(ctas.update_count, Some(int(&rest[0][0])));
    let first = data_files(client, "orders_p").await;
    client
        .execute("INSERT INTO ice.web.orders_p SELECT * FROM tpch.sf0_1.orders WHERE o_orderpriority = '1-URGENT'")
        .await
        .expect("partitioned insert");
    let all = data_files(client, "orders_p").await;
    for f in &all {
        let dirs: Vec<&str> = f.rsplit('/').skip(1).take(2).collect();
        assert!(
            dirs[1].starts_with("o_orderdate_year=") && dirs[0].starts_with("o_custkey_bucket="),
            "{f} is in its partition's directory"
        );
    }
    let sql =
        "SELECT extract(year FROM o_orderdate), o_orderpriority, count(*), sum(o_totalprice), min(o_comment) FROM {T} \
               GROUP BY 1, 2 ORDER BY 1, 2";
    let want = oracle("sf0_1", &sql.replace("{T}", "orders")).await;
    let got_sql = sql.replace("{T}", "ice.web.orders_p");
    assert_same_rows("partitioned", &got_sql, &client.execute(&got_sql).await.unwrap().rows, &want);

    // Pruned by partition (year, bucket) and by column bounds: the INSERT's files
    // hold only '1-URGENT', the CTAS's none.
    let inserted = &file_names(&all) - &file_names(&first);
    assert!(!inserted.is_empty() && all.len() <= 2 * 7 * 4, "one file per partition and write: {}", all.len());
    for (filter, check) in [
        ("o_orderdate >= DATE '1998-01-01'", "o_orderdate_year=1998"),
        ("o_custkey = 370", "o_custkey_bucket="),
        ("o_orderdate >= DATE '1998-01-01' AND o_orderpriority = '1-URGENT'", "o_orderdate_year=1998"),
    ] {
        let explain = format!("EXPLAIN SELECT count(*) FROM ice.web.orders_p WHERE {filter}");
        let scanned = scanned_files(&client.execute(&explain).await.unwrap().rows);
        assert!(!scanned.is_empty() && scanned.len() < all.len(), "{filter}: {} of {} files", scanned.len(), all.len());
        let read = file_names(&scanned);
        let paths: Vec<&String> = all.iter().filter(|p| read.contains(&file_key(p))).collect();
        assert_eq!(paths.len(), scanned.len(), "{filter}: {scanned:?} are files of the table");
        assert!(paths.iter().all(|p| p.contains(check)), "{filter}: {paths:?}");
        if filter.contains("o_custkey") {
            let buckets: std::collections::BTreeSet<&str> =
                paths.iter().map(|p| p.rsplit('/').nth(1).unwrap()).collect();
            assert_eq!(buckets.len(), 1, "{filter}: one bucket, {buckets:?}");
        }
        if filter.contains("URGENT") {
            assert!(file_names(&scanned).is_subset(&inserted), "{filter}: only the INSERT's files are read");
        }
        let sql = format!("SELECT count(*), sum(o_orderkey) FROM {{T}} WHERE {filter}");
        let want = oracle("sf0_1", &sql.replace("{T}", "orders")).await;
        let got = sql.replace("{T}", "ice.web.orders_p");
        assert_same_rows(filter, &got, &client.execute(&got).await.unwrap().rows, &want);
    }
    for (filter, pyfilter) in [
        ("", ""),
        ("o_orderdate >= DATE '1998-01-01'", "o_orderdate >= '1998-01-01'"),
        ("o_custkey = 370", "o_custkey == 370"),
    ] {
        let sql = format!(
            "SELECT count(*), sum(o_orderkey) FROM orders {}",
            if filter.is_empty() { String::new() } else { format!("WHERE {filter}") }
        );
        let want = oracle("sf0_1", &sql).await;
        let got = pyiceberg_read(python, uri, "web.orders_p", "o_orderkey", pyfilter, warehouse);
        assert_eq!(got, (int(&want[0][0]), int(&want[0][1])), "pyiceberg: {filter}");
    }
}

/// A schema and a table made and dropped through SQL: pyiceberg reads the table, and
/// dropping it takes its files.
async fn check_ddl(client: &flotilla::client::StatementClient, python: &Path, uri: &str, warehouse: &Path) {
    let names = |sql: &'static str| async move {
        let rows = client.execute(sql).await.unwrap().rows;
        rows.iter().map(|r| r[0].as_str().unwrap().to_string()).collect::<Vec<_>>()
    };
    client.execute("CREATE SCHEMA ice.made").await.expect("create schema");
    assert!(names("SHOW SCHEMAS FROM ice").await.contains(&"made".to_string()));
    let (_, message) = query_error(client.execute("CREATE SCHEMA ice.made").await);
    assert!(message.contains("already exists"), "{message}");
    let made = client.execute("CREATE TABLE ice.made.region AS SELECT * FROM tpch.sf0_1.region").await.expect("ctas");
    assert_eq!(made.update_count, Some(5));
    assert_eq!(pyiceberg_read(python, uri, "made.region", "r_regionkey", "", warehouse), (5, 10));
    let (_, message) = query_error(client.execute("DROP SCHEMA ice.made").await);
    assert!(message.contains("non-empty"), "{message}");
    assert!(!super::common::files_below(&warehouse.join("made/region")).is_empty());
    client.execute("DROP TABLE ice.made.region").await.expect("drop table");
    assert!(names("SHOW TABLES FROM ice.made").await.is_empty());
    let left = super::common::files_below(&warehouse.join("made/region"));
    assert!(left.is_empty(), "files of the dropped table: {left:?}");
    let (_, message) = query_error(client.execute("DROP TABLE ice.made.region").await);
    assert!(message.contains("doesn't exist") || message.contains("does not exist"), "{message}");
    client.execute("DROP SCHEMA ice.made").await.expect("drop schema");
    assert!(!names("SHOW SCHEMAS FROM ice").await.contains(&"made".to_string()));
}

/// A partitioned CTAS and an INSERT into `catalog` (PostgreSQL's catalog, or the
/// warehouse in S3): read back right, each file under its partition in the warehouse.
async fn check_remote_write(client: &flotilla::client::StatementClient, catalog: &str) {
    let ctas = format!(
        "CREATE TABLE {catalog}.web.nation_w WITH (partitioning = ARRAY['n_regionkey']) AS \
         SELECT * FROM tpch.sf0_1.nation WHERE n_regionkey < 3"
    );
    assert_eq!(client.execute(&ctas).await.expect("remote ctas").update_count, Some(15));
    let insert = format!("INSERT INTO {catalog}.web.nation_w SELECT * FROM tpch.sf0_1.nation WHERE n_regionkey >= 3");
    assert_eq!(client.execute(&insert).await.expect("remote insert").update_count, Some(10));
    let sql = "SELECT n_regionkey, count(*), sum(n_nationkey), min(n_name) FROM {T} GROUP BY 1 ORDER BY 1";
    let want = oracle("sf0_1", &sql.replace("{T}", "nation")).await;
    let got = sql.replace("{T}", &format!("{catalog}.web.nation_w"));
    assert_same_rows(catalog, &got, &client.execute(&got).await.unwrap().rows, &want);
    let files = format!("SELECT file_path FROM {catalog}.web.\"nation_w$files\"");
    let files = client.execute(&files).await.unwrap().rows;
    assert_eq!(files.len(), 5, "{catalog}: one file per region: {files:?}");
    let prefix = if catalog == "ices3" {
        format!("s3://{BUCKET}/warehouse/web/nation_w/data/n_regionkey=")
    } else {
        "file://".into()
    };
    for f in &files {
        let path = f[0].as_str().unwrap();
        assert!(path.starts_with(&prefix) && path.contains("/data/n_regionkey="), "{catalog}: {path}");
    }
}

/// Tables flotilla writes, read back by flotilla and by pyiceberg; a write whose
/// worker dies commits nothing.
async fn check_writes(
    c: &mut EtcCluster,
    client: &flotilla::client::StatementClient,
    python: &Path,
    uri: &str,
    warehouse: &Path,
) {
    let ctas = client.execute("CREATE TABLE ice.web.nation AS SELECT * FROM tpch.sf0_1.nation").await.expect("ctas");
    assert_eq!(ctas.update_count, Some(25));
    let inserted = client
        .execute("INSERT INTO ice.web.nation SELECT * FROM tpch.sf0_1.nation WHERE n_regionkey = 1")
        .await
        .expect("insert");
    assert_eq!(inserted.update_count, Some(5));
    let sql =
        "SELECT n_regionkey, count(*), sum(n_nationkey), max(n_name), max(n_comment) FROM {T} GROUP BY 1 ORDER BY 1";
    let want = oracle(
        "sf0_1",
        &sql.replace("{T}", "(SELECT * FROM nation UNION ALL SELECT * FROM nation WHERE n_regionkey = 1)"),
    )
    .await;
    let got_sql = sql.replace("{T}", "ice.web.nation");
    assert_same_rows("written", &got_sql, &client.execute(&got_sql).await.unwrap().rows, &want);
    assert_eq!(count(client, "SELECT count(*) FROM ice.web.\"nation$snapshots\"").await, 2);
    let sums = oracle(
        "sf0_1",
        "SELECT sum(n_nationkey) + (SELECT sum(n_nationkey) FROM nation WHERE n_regionkey = 1) FROM nation",
    )
    .await;
    let (rows, sum) = pyiceberg_read(python, uri, "web.nation", "n_nationkey", "", warehouse);
    assert_eq!(rows, 30, "pyiceberg reads what flotilla wrote");
    assert_eq!(sum, int(&sums[0][0]));

    // Two inserts at once: iceberg-rust commits the second on top of the first.
    let (a, b) = tokio::join!(
        client.execute("INSERT INTO ice.web.nation SELECT * FROM tpch.sf0_1.nation WHERE n_regionkey = 2"),
        client.execute("INSERT INTO ice.web.nation SELECT * FROM tpch.sf0_1.nation WHERE n_regionkey = 3"),
    );
    assert_eq!(a.expect("first concurrent insert").update_count, Some(5));
    assert_eq!(b.expect("second concurrent insert").update_count, Some(5));
    assert_eq!(count(client, "SELECT count(*) FROM ice.web.nation").await, 40);
    assert_eq!(count(client, "SELECT count(*) FROM ice.web.\"nation$snapshots\"").await, 4);

    // Fifty at once: each commit that meets others is tried again on top of theirs,
    // and every one lands (18 of 50 failed with iceberg-rust's retries alone).
    client.execute("CREATE TABLE ice.web.many (k bigint)").await.expect("create many");
    let inserts = (1..=50).map(|k| {
        let client = client.clone();
        async move { client.execute(&format!("INSERT INTO ice.web.many VALUES ({k})")).await }
    });
    for (k, inserted) in futures::future::join_all(inserts).await.into_iter().enumerate() {
        assert_eq!(inserted.unwrap_or_else(|e| panic!("insert {}: {e}", k + 1)).update_count, Some(1));
    }
    assert_eq!(count(client, "SELECT count(*) FROM ice.web.many").await, 50);
    assert_eq!(count(client, "SELECT sum(k) FROM ice.web.many").await, 50 * 51 / 2);
    assert_eq!(count(client, "SELECT count(DISTINCT k) FROM ice.web.many").await, 50);

    check_partitioned_writes(client, python, uri, warehouse).await;
    check_ddl(client, python, uri, warehouse).await;
    let (name, _) = query_error(client.execute("CREATE TABLE ice.web.nation AS SELECT 1 AS x").await);
    assert_eq!(name, "GENERIC_USER_ERROR");

    // A write whose worker is killed (retry_policy=none) fails and commits nothing:
    // no table, no file left in its directory.
    let id = c.cluster.start_statement("sf1", "CREATE TABLE ice.web.big AS SELECT * FROM tpch.sf1.lineitem").await;
    c.cluster.wait_for_tasks(2).await;
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    c.cluster.kill_worker(0);
    let info = super::common::wait_for_query_end(&c.cluster.coordinator.url, &id).await;
    assert_eq!(info["state"], "FAILED", "{info}");
    let tables = client.execute("SHOW TABLES FROM ice.web").await.unwrap().rows;
    assert!(!tables.iter().any(|r| r[0] == "big"), "{tables:?}");
    let left = super::common::files_below(&warehouse.join("web/big"));
    assert!(left.is_empty(), "files left by the failed write: {left:?}");
    c.cluster.assert_no_tasks_left().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn iceberg_tables_read_right_in_every_snapshot_with_files_pruned() {
    let Some(python) = python() else {
        return missing_service(
            "iceberg",
            "no Python with PyPI's pyiceberg and its SQL catalog (set FLOTILLA_ICEBERG_PYTHON to one, as .ci/run \
             does with a throwaway virtualenv)",
        );
    };
    let root_tmp = tempfile::Builder::new().prefix("flotilla-iceberg-").tempdir().unwrap();
    let root = root_tmp.path().to_path_buf();
    let warehouse = root.join("warehouse");
    std::fs::create_dir_all(&warehouse).unwrap();
    let lake = format!("connector.name=files\nfiles.warehouse={}\n", root.join("parquet").display());
    let iceberg = |uri: &str, warehouse: &str, extra: &str| {
        format!(
            "connector.name=iceberg\niceberg.catalog.type=jdbc\niceberg.jdbc-catalog.connection-url={uri}\n\
             iceberg.jdbc-catalog.catalog-name=lake\niceberg.jdbc-catalog.default-warehouse-dir={warehouse}\n{extra}"
        )
    };
    let sqlite = root.join("catalog.db");
    let local = iceberg(&format!("jdbc:sqlite:{}", sqlite.display()), &warehouse.display().to_string(), "");

    let pg = match server_bin() {
        Some(bin) => Some(Postgres::start(bin)),
        None => {
            missing_service("iceberg on PostgreSQL", "no PostgreSQL server programs (Debian's postgresql)");
            None
        }
    };
    let pg_warehouse = root.join("pg-warehouse");
    let pg_catalog = pg.as_ref().map(|pg| {
        iceberg(
            &format!("jdbc:postgresql://127.0.0.1:{}/postgres", pg.port),
            &pg_warehouse.display().to_string(),
            "iceberg.jdbc-catalog.connection-user=postgres\n",
        )
    });
    let moto = match moto_server() {
        Some(bin) => Some(start_moto(&bin, &root).await),
        None => {
            missing_service("iceberg in S3", "no S3-compatible server (PyPI moto[server], as .ci/run installs)");
            None
        }
    };
    let s3_catalog = moto.as_ref().map(|m| {
        iceberg(
            &format!("jdbc:sqlite:{}", root.join("s3-catalog.db").display()),
            &format!("s3://{BUCKET}/warehouse"),
            &format!(
                "s3.endpoint={}\ns3.region=us-east-1\ns3.path-style-access=true\ns3.aws-access-key=testing\n\
                 s3.aws-secret-key=testing\n",
                m.endpoint
            ),
        )
    });
    let mut catalogs = vec![("lake", lake.as_str()), ("ice", local.as_str())];
    catalogs.extend(pg_catalog.as_deref().map(|t| ("icepg", t)));
    catalogs.extend(s3_catalog.as_deref().map(|t| ("ices3", t)));
    let mut c = EtcCluster::start(&root, &catalogs, 2).await;
    let client = c.client("tpch", "sf0_1");

    client.execute("CREATE SCHEMA lake.w").await.expect("schema");
    client.execute("CREATE TABLE lake.w.orders AS SELECT * FROM tpch.sf0_1.orders").await.expect("ctas");
    let parquet = root.join("parquet/w/orders");

    let mut written = vec![];
    let local_uri = format!("sqlite:///{}", sqlite.display());
    written
        .push(("ice", write_tables(&python, &parquet, &local_uri, &format!("file://{}", warehouse.display()), None)));
    if let Some(pg) = &pg {
        let uri = format!("postgresql+psycopg2://postgres@127.0.0.1:{}/postgres", pg.port);
        let wh = format!("file://{}", pg_warehouse.display());
        written.push(("icepg", write_tables(&python, &parquet, &uri, &wh, None)));
    }
    if let Some(moto) = &moto {
        let made = reqwest::Client::new().put(format!("{}/{BUCKET}", moto.endpoint)).send().await.unwrap();
        assert!(made.status().is_success(), "create bucket: {}", made.status());
        let uri = format!("sqlite:///{}", root.join("s3-catalog.db").display());
        let wh = format!("s3://{BUCKET}/warehouse");
        written.push(("ices3", write_tables(&python, &parquet, &uri, &wh, Some(&moto.endpoint))));
    }
    for (catalog, summary) in &written {
        check_catalog(&client, catalog, summary).await;
    }

    for (catalog, _) in written.iter().filter(|(c, _)| *c != "ice") {
        check_remote_write(&client, catalog).await;
    }
    check_writes(&mut c, &client, &python, &local_uri, &warehouse).await;

    // Versions of a table that has none.
    let (name, _) = query_error(client.execute("SELECT count(*) FROM tpch.sf0_1.nation FOR VERSION AS OF 1").await);
    assert_eq!(name, "NOT_SUPPORTED");
}
