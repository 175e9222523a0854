//! The tools data engineers drive a cluster with, and the statements they need, on
//! one cluster with a catalog of files (`lake`): first the statements by hand
//! (`DELETE`, `ALTER ... RENAME TO`, views, comments, the `system` catalog), checked
//! against single-node DataFusion; then dbt-trino building the project in
//! `tests/dbt` (seeds, views, tables, incremental models, tests, docs),
//! SQLAlchemy's inspector reading it and Trino's Python client reading a result in
//! each encoding of the spooling protocol (`tests/python/test_dbt.py`); then a
//! coordinator restart, after which the views, renamed tables and comments are all
//! still there.

use serde_json::{json, Value};

use super::common::{missing_service, oracle, query_error, EtcCluster};

fn rows(r: Result<flotilla::client::QueryOutcome, flotilla::client::ClientError>) -> Vec<Vec<Value>> {
    match r {
        Ok(o) => o.rows,
        Err(e) => panic!("query failed: {e}"),
    }
}

/// Statements on relations of a catalog of files, by hand.
async fn relations_by_hand(cluster: &EtcCluster) {
    let c = cluster.client("lake", "hand");
    rows(c.execute("CREATE SCHEMA lake.hand").await);
    rows(c.execute("CREATE TABLE orders AS SELECT * FROM tpch.tiny.orders").await);
    // DELETE with a plain predicate, then with a subquery (dbt's delete+insert).
    let deleted = c.execute("DELETE FROM orders WHERE o_orderpriority = '1-URGENT'").await.unwrap();
    let want = oracle("tiny", "SELECT count(*) FROM orders WHERE o_orderpriority = '1-URGENT'").await;
    assert_eq!(deleted.update_count.map(|n| json!(n)), Some(want[0][0].clone()), "the rows deleted");
    let sql = "DELETE FROM orders WHERE o_custkey IN (SELECT c_custkey FROM tpch.tiny.customer WHERE c_nationkey = 3)";
    rows(c.execute(sql).await);
    let check = "SELECT count(*), sum(o_totalprice), min(o_orderkey), max(o_orderkey) FROM orders";
    let want = oracle(
        "tiny",
        "SELECT count(*), sum(o_totalprice), min(o_orderkey), max(o_orderkey) FROM orders \
         WHERE o_orderpriority <> '1-URGENT' AND o_custkey NOT IN (SELECT c_custkey FROM customer WHERE c_nationkey = 3)",
    )
    .await;
    assert_eq!(rows(c.execute(check).await), want, "the rows kept");
    // A view, renamed with its table, commented.
    rows(c.execute("ALTER TABLE orders RENAME TO kept_orders").await);
    let (name, _) = query_error(c.execute("SELECT count(*) FROM orders").await);
    assert_eq!(name, "TABLE_NOT_FOUND");
    let view = "CREATE VIEW open_orders SECURITY INVOKER AS SELECT o_orderkey, o_totalprice FROM kept_orders \
                WHERE o_orderstatus = 'O'";
    rows(c.execute(view).await);
    rows(c.execute("ALTER VIEW open_orders RENAME TO lake.hand.open_kept").await);
    rows(c.execute("COMMENT ON TABLE kept_orders IS 'orders, some deleted'").await);
    rows(c.execute("COMMENT ON COLUMN kept_orders.o_totalprice IS 'with tax'").await);
    let (name, _) = query_error(c.execute("COMMENT ON COLUMN kept_orders.nope IS 'x'").await);
    assert_eq!(name, "COLUMN_NOT_FOUND");
    let (name, _) = query_error(c.execute("ALTER TABLE kept_orders RENAME TO open_kept").await);
    assert_eq!(name, "TABLE_ALREADY_EXISTS");
    // The memory catalog keeps no metastore: refused, not ignored.
    let (name, _) = query_error(c.execute("COMMENT ON TABLE tpch.tiny.nation IS 'x'").await);
    assert_eq!(name, "NOT_SUPPORTED");
    // The system catalog, from the coordinator's state.
    let nodes = rows(
        c.execute("SELECT count(*), count_if(coordinator) FROM system.runtime.nodes WHERE state = 'active'").await,
    );
    assert_eq!(nodes, vec![vec![json!(3), json!(1)]], "a coordinator and two workers");
    // The table is read while the query reading it is planned.
    let me =
        rows(c.execute("SELECT state, \"user\" FROM system.runtime.queries WHERE query LIKE 'SELECT state, %'").await);
    assert_eq!(me, vec![vec![json!("PLANNING"), json!("flotilla")]], "the query itself");
    let sql = "SELECT state, error_code FROM system.runtime.queries WHERE query LIKE 'DELETE FROM orders WHERE o_orderpriority%'";
    assert_eq!(rows(c.execute(sql).await), vec![vec![json!("FINISHED"), Value::Null]], "an earlier query");
    let sql = "SELECT state, error_code FROM system.runtime.queries WHERE query = 'SELECT count(*) FROM orders'";
    assert_eq!(rows(c.execute(sql).await), vec![vec![json!("FAILED"), json!("TABLE_NOT_FOUND")]], "a failed one");
    let catalogs =
        rows(c.execute("SELECT catalog_name, connector_name FROM system.metadata.catalogs ORDER BY 1").await);
    assert_eq!(
        catalogs,
        vec![
            vec![json!("lake"), json!("files")],
            vec![json!("system"), json!("system")],
            vec![json!("tpch"), json!("tpch")],
        ]
    );
    let mv = rows(c.execute("SELECT count(*) FROM system.metadata.materialized_views").await);
    assert_eq!(mv, vec![vec![json!(0)]]);
}

/// The same relations after a restart.
async fn relations_after_restart(cluster: &EtcCluster) {
    let c = cluster.client("lake", "hand");
    let want = oracle(
        "tiny",
        "SELECT count(*), sum(o_totalprice) FROM orders WHERE o_orderstatus = 'O' AND o_orderpriority <> '1-URGENT' \
         AND o_custkey NOT IN (SELECT c_custkey FROM customer WHERE c_nationkey = 3)",
    )
    .await;
    assert_eq!(rows(c.execute("SELECT count(*), sum(o_totalprice) FROM open_kept").await), want, "the view reads");
    let comment = rows(c.execute(
        "SELECT comment FROM system.metadata.table_comments WHERE catalog_name = 'lake' AND table_name = 'kept_orders'",
    ).await);
    assert_eq!(comment, vec![vec![json!("orders, some deleted")]]);
    let described = rows(c.execute("DESCRIBE kept_orders").await);
    let price = described.iter().find(|r| r[0] == json!("o_totalprice")).expect("a column o_totalprice");
    assert_eq!(price[3], json!("with tax"));
    let create = rows(c.execute("SHOW CREATE VIEW open_kept").await);
    let text = create[0][0].as_str().unwrap();
    assert!(text.starts_with("CREATE VIEW lake.hand.open_kept SECURITY INVOKER AS\nSELECT o_orderkey"), "{text}");
    // Dropping the renamed table removes its files (it is still the warehouse's).
    rows(c.execute("DROP VIEW open_kept").await);
    rows(c.execute("DROP TABLE kept_orders").await);
    let left = super::common::files_below(&cluster.root.join("warehouse/hand"));
    assert!(left.is_empty(), "files of a dropped table: {left:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tools_over_a_catalog_of_files() {
    let python = std::env::var("FLOTILLA_DBT_PYTHON").ok();
    let dir = tempfile::Builder::new().prefix("flotilla-dbt-").tempdir().unwrap();
    let root = dir.path();
    let warehouse = root.join("warehouse");
    std::fs::create_dir_all(&warehouse).unwrap();
    let lake = format!("connector.name=files\nfiles.allowed-locations={0}\nfiles.warehouse={0}\n", warehouse.display());
    // Spooled result segments go where the test can see them (Trino's file name and keys).
    let spool = root.join("spool");
    std::fs::create_dir_all(root.join("etc-coordinator")).unwrap();
    let manager = format!("spooling-manager.name=filesystem\nfs.location={}\n", spool.display());
    std::fs::write(root.join("etc-coordinator/spooling-manager.properties"), manager).unwrap();
    let mut cluster = EtcCluster::start(root, &[("lake", &lake)], 2).await;
    relations_by_hand(&cluster).await;
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/python/test_dbt.py");
    let run = |python: &str, args: &[&str]| {
        let out = std::process::Command::new(python).arg(script).args(args).output().expect("run python");
        let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        assert!(out.status.success(), "test_dbt.py {args:?} failed:\n{stdout}\n{stderr}");
        println!("{stdout}");
    };
    let port = cluster.port.to_string();
    if let Some(python) = &python {
        // dbt writes target/ and logs/ into its project: it works on a copy.
        let project = root.join("project");
        copy_dir(std::path::Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/dbt")), &project);
        run(python, &["build", &port, &project.display().to_string()]);
        run(python, &["inspect", &port]);
        std::fs::create_dir_all(&spool).unwrap();
        run(python, &["spooling", &port, &spool.display().to_string()]);
    }
    cluster.restart_coordinator().await;
    relations_after_restart(&cluster).await;
    match &python {
        Some(python) => run(python, &["restarted", &port]),
        None => missing_service(
            "tools_over_a_catalog_of_files",
            "FLOTILLA_DBT_PYTHON is not set: a Python with PyPI's dbt-core 1.10, dbt-trino 1.10 and sqlalchemy \
             (.ci/run makes one)",
        ),
    }
}

fn copy_dir(from: &std::path::Path, to: &std::path::Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap().flatten() {
        let target = to.join(e.file_name());
        if e.path().is_dir() {
            copy_dir(&e.path(), &target);
        } else {
            std::fs::copy(e.path(), target).unwrap();
        }
    }
}
