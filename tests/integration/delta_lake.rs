//! The `delta_lake` connector on a Delta table written by another implementation:
//! PyPI's `deltalake` (delta-rs) writes TPC-H sf0_1 `orders` as a partitioned Delta
//! table in three versions (`tests/python/write_delta_table.py`): the orders before
//! 1995, the rest appended, the '5-LOW' orders deleted. Each version, read as the
//! current snapshot or with `FOR VERSION AS OF`, equals single-node DataFusion's
//! answer over `tpch` with the same filter; filters on the partition column and on
//! columns with log statistics drop files before any is opened; the table survives
//! a coordinator restart; writes and misplaced tables are clear errors. With moto's
//! S3 server at hand, the same table uploaded into a bucket reads the same.
//!
//! `.ci/run` installs `deltalake` and `pyarrow` into a throwaway virtualenv and names
//! its Python in `FLOTILLA_PYTHON`; without a Python that has them the test says it
//! skipped, and why.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use super::common::{
    assert_same_rows, files_below, missing_service, oracle, python_with, query_error, scanned_files, EtcCluster,
};
use super::object_storage::{moto_server, start_moto};

const BUCKET: &str = "flotilla-delta";

/// A Python that can import deltalake.
fn python() -> Option<PathBuf> {
    python_with("FLOTILLA_PYTHON", "deltalake, pyarrow")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delta_table_versions_read_right_with_files_pruned_by_the_log() {
    let Some(python) = python() else {
        return missing_service(
            "delta_lake",
            "no Python with PyPI's deltalake and pyarrow (set FLOTILLA_PYTHON to one, as .ci/run does with a \
             throwaway virtualenv)",
        );
    };
    let root_tmp = tempfile::Builder::new().prefix("flotilla-delta-").tempdir().unwrap();
    let root = root_tmp.path().to_path_buf();
    let delta_dir = root.join("delta");
    std::fs::create_dir_all(&delta_dir).unwrap();
    let lake = format!("connector.name=files\nfiles.warehouse={}\n", root.join("warehouse").display());
    let delta = format!("connector.name=delta_lake\nfiles.allowed-locations={}\n", delta_dir.display());
    // The same table in a bucket of moto's S3 server, when there is one.
    let moto = match moto_server() {
        Some(bin) => Some(start_moto(&bin, &root).await),
        None => {
            missing_service("delta_lake in S3", "no S3-compatible server (PyPI moto[server], as .ci/run installs)");
            None
        }
    };
    let s3_delta = moto.as_ref().map(|m| {
        format!(
            "connector.name=delta_lake\nfiles.allowed-locations=s3://{BUCKET}/\ns3.endpoint={}\ns3.region=us-east-1\n\
             s3.path-style-access=true\ns3.aws-access-key=testing\ns3.aws-secret-key=testing\n",
            m.endpoint
        )
    });
    let mut catalogs = vec![("lake", lake.as_str()), ("delta", delta.as_str())];
    catalogs.extend(s3_delta.as_deref().map(|text| ("s3delta", text)));
    let mut c = EtcCluster::start(&root, &catalogs, 2).await;
    let client = c.client("tpch", "sf0_1");

    // The Parquet files the Python writer reads: orders, written by flotilla.
    client.execute("CREATE SCHEMA lake.w").await.expect("schema");
    client.execute("CREATE TABLE lake.w.orders AS SELECT * FROM tpch.sf0_1.orders").await.expect("ctas");
    let table_dir = delta_dir.join("orders");
    let out = Command::new(&python)
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/python/write_delta_table.py"))
        .arg(root.join("warehouse/w/orders"))
        .arg(&table_dir)
        .output()
        .expect("run the Delta writer");
    assert!(out.status.success(), "write_delta_table.py: {}", String::from_utf8_lossy(&out.stderr));
    let written: Value = serde_json::from_slice(&out.stdout).expect("the writer's summary");
    assert_eq!(written["version"], 2, "{written}");
    let live_files = written["files"].as_u64().unwrap() as usize;

    client.execute("CREATE SCHEMA delta.s").await.expect("delta schema");
    let create = format!("CREATE EXTERNAL TABLE delta.s.orders STORED AS DELTA LOCATION '{}'", table_dir.display());
    client.execute(&create).await.expect("register the Delta table");

    let per_status = "SELECT o_orderstatus, count(*), sum(o_totalprice), min(o_orderkey), max(o_orderdate) \
        FROM orders {FILTER} GROUP BY o_orderstatus ORDER BY o_orderstatus";
    let versions = [
        ("version 0", " FOR VERSION AS OF 0", "WHERE o_orderdate < DATE '1995-01-01'"),
        ("version 1", " FOR VERSION AS OF 1", ""),
        ("version 2", " FOR VERSION AS OF 2", "WHERE o_orderpriority <> '5-LOW'"),
        ("current", "", "WHERE o_orderpriority <> '5-LOW'"),
    ];
    let check_versions = |client: flotilla::client::StatementClient| async move {
        for (label, version, filter) in versions {
            let want = oracle("sf0_1", &per_status.replace("{FILTER}", filter)).await;
            let sql = per_status.replace("FROM orders {FILTER}", &format!("FROM delta.s.orders{version}"));
            let got = client.execute(&sql).await.unwrap_or_else(|e| panic!("{label}: {e:?}")).rows;
            assert_same_rows(label, &sql, &got, &want);
        }
    };
    check_versions(client.clone()).await;

    // An old version joined with a tpch table, under an alias of its own.
    let join = "SELECT c_mktsegment, count(*), sum(o_totalprice) FROM delta.s.orders FOR VERSION AS OF 0 o \
        JOIN tpch.sf0_1.customer c ON o.o_custkey = c.c_custkey GROUP BY c_mktsegment ORDER BY c_mktsegment";
    let want = oracle(
        "sf0_1",
        "SELECT c_mktsegment, count(*), sum(o_totalprice) FROM orders JOIN customer ON o_custkey = c_custkey \
         WHERE o_orderdate < DATE '1995-01-01' GROUP BY c_mktsegment ORDER BY c_mktsegment",
    )
    .await;
    assert_same_rows("join", join, &client.execute(join).await.expect("join").rows, &want);

    if let Some(moto) = &moto {
        // Uploaded as it is (moto checks no signature), read through the catalog's
        // S3 settings: the log and the data files both come from the bucket.
        let http = reqwest::Client::new();
        let made = http.put(format!("{}/{BUCKET}", moto.endpoint)).send().await.unwrap();
        assert!(made.status().is_success(), "create bucket: {}", made.status());
        for file in files_below(&table_dir) {
            let key = file.strip_prefix(&delta_dir).unwrap().display().to_string();
            let put = http.put(format!("{}/{BUCKET}/{key}", moto.endpoint)).body(std::fs::read(&file).unwrap());
            assert!(put.send().await.unwrap().status().is_success(), "upload {key}");
        }
        client.execute("CREATE SCHEMA s3delta.s").await.expect("s3 schema");
        let create = format!("CREATE EXTERNAL TABLE s3delta.s.orders STORED AS DELTA LOCATION 's3://{BUCKET}/orders/'");
        client.execute(&create).await.expect("register the Delta table in the bucket");
        for (label, version, filter) in [versions[0], versions[3]] {
            let want = oracle("sf0_1", &per_status.replace("{FILTER}", filter)).await;
            let sql = per_status.replace("FROM orders {FILTER}", &format!("FROM s3delta.s.orders{version}"));
            let got = client.execute(&sql).await.unwrap_or_else(|e| panic!("s3 {label}: {e:?}")).rows;
            assert_same_rows(&format!("s3 {label}"), &sql, &got, &want);
        }
        let plan = client.execute("EXPLAIN SELECT count(*) FROM s3delta.s.orders WHERE o_orderstatus = 'F'").await;
        let f_only = scanned_files(&plan.unwrap().rows);
        assert!(!f_only.is_empty() && f_only.iter().all(|f| f.starts_with("orders/o_orderstatus=F/")), "{f_only:?}");
    }

    // Every live file is read by a full scan, spread over more than one task.
    let plan = client.execute("EXPLAIN SELECT * FROM delta.s.orders").await.unwrap().rows;
    let all = scanned_files(&plan);
    assert_eq!(all.len(), live_files, "{all:?}");
    // A partition filter reads its partition's files only.
    let f_only = scanned_files(
        &client.execute("EXPLAIN SELECT count(*) FROM delta.s.orders WHERE o_orderstatus = 'F'").await.unwrap().rows,
    );
    assert!(!f_only.is_empty() && f_only.iter().all(|f| f.contains("o_orderstatus=F/")), "{f_only:?}");
    assert!(f_only.len() < all.len(), "{} of {} files", f_only.len(), all.len());
    // Statistics: at version 1 each file holds one side of 1995, so a filter on the
    // date keeps the later files only; a key no file can hold reads none.
    let v1 =
        scanned_files(&client.execute("EXPLAIN SELECT * FROM delta.s.orders FOR VERSION AS OF 1").await.unwrap().rows);
    let late_sql = "SELECT count(*), sum(o_totalprice) FROM delta.s.orders FOR VERSION AS OF 1 \
        WHERE o_orderdate >= DATE '1996-01-01'";
    let late = scanned_files(&client.execute(&format!("EXPLAIN {late_sql}")).await.unwrap().rows);
    assert!(!late.is_empty() && late.len() < v1.len(), "{} of {} files: {late:?}", late.len(), v1.len());
    let want =
        oracle("sf0_1", "SELECT count(*), sum(o_totalprice) FROM orders WHERE o_orderdate >= DATE '1996-01-01'").await;
    assert_same_rows("late", late_sql, &client.execute(late_sql).await.expect("late").rows, &want);
    let none_sql = "SELECT count(*) FROM delta.s.orders WHERE o_orderkey < 0";
    assert!(scanned_files(&client.execute(&format!("EXPLAIN {none_sql}")).await.unwrap().rows).is_empty());
    let got = client.execute(none_sql).await.expect("no rows").rows;
    assert_same_rows(
        "none",
        none_sql,
        &got,
        &oracle("sf0_1", "SELECT count(*) FROM orders WHERE o_orderkey < 0").await,
    );

    // Clear errors: a version that does not exist, versions of a table that has
    // none, writes, a table without a log, formats in the wrong catalog.
    let (name, message) = query_error(client.execute("SELECT count(*) FROM delta.s.orders FOR VERSION AS OF 9").await);
    assert!(message.contains("no version 9"), "{name}: {message}");
    let (name, _) = query_error(client.execute("SELECT count(*) FROM lake.w.orders FOR VERSION AS OF 0").await);
    assert_eq!(name, "NOT_SUPPORTED");
    let (name, message) =
        query_error(client.execute("INSERT INTO delta.s.orders SELECT * FROM delta.s.orders LIMIT 1").await);
    assert_eq!(name, "NOT_SUPPORTED", "{message}");
    let (name, _) = query_error(client.execute("CREATE TABLE delta.s.copy AS SELECT * FROM tpch.sf0_1.nation").await);
    assert_eq!(name, "NOT_SUPPORTED");
    std::fs::create_dir_all(delta_dir.join("empty")).unwrap();
    let (_, message) = query_error(
        client
            .execute(&format!(
                "CREATE EXTERNAL TABLE delta.s.empty STORED AS DELTA LOCATION '{}'",
                delta_dir.join("empty").display()
            ))
            .await,
    );
    assert!(message.contains("no Delta table at"), "{message}");
    let (name, _) = query_error(
        client
            .execute(&format!(
                "CREATE EXTERNAL TABLE delta.s.p STORED AS PARQUET LOCATION '{}'",
                root.join("warehouse/w/orders").display()
            ))
            .await,
    );
    assert_eq!(name, "NOT_SUPPORTED");
    let (name, _) = query_error(
        client
            .execute(&format!("CREATE EXTERNAL TABLE lake.w.d STORED AS DELTA LOCATION '{}'", table_dir.display()))
            .await,
    );
    assert_eq!(name, "NOT_SUPPORTED");

    // The catalog keeps the table across a coordinator restart.
    c.restart_coordinator().await;
    check_versions(c.client("tpch", "sf0_1")).await;
    c.cluster.assert_no_tasks_left().await;
    drop(c);
    drop(moto);
}
