//! File tables: `flotilla tpch-gen` writes the TPC-H tables, `CREATE EXTERNAL TABLE`
//! puts them in the coordinator's `files` catalog, and the 22 queries over the
//! Parquet files, scanned in splits by the workers, match the `tpch` catalog's answers
//! as single-node DataFusion computes them.

use super::common::{assert_same_rows, oracle, Cluster, BIN};
use flotilla::local::TPCH_QUERIES;

const TABLES: [&str; 8] = ["nation", "region", "part", "supplier", "partsupp", "customer", "orders", "lineitem"];

fn generate(dir: &std::path::Path, format: &str) {
    let status = std::process::Command::new(BIN)
        .args(["tpch-gen", "--scale", "0.1", "--format", format, "--output"])
        .arg(dir)
        .stdout(std::process::Stdio::null())
        .status()
        .expect("run tpch-gen");
    assert!(status.success(), "tpch-gen failed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tpch_over_generated_parquet_matches_the_tpch_catalog() {
    let dir_tmp = tempfile::Builder::new().prefix("flotilla-files-").tempdir().unwrap();
    let dir = dir_tmp.path().to_path_buf();
    generate(&dir, "parquet");
    let allowed = dir.display().to_string();
    let cluster = Cluster::start_with(&["--files-allowed-locations", &allowed], 3, &[]).await;
    let client = cluster.client("tiny");
    for t in TABLES {
        let location = dir.join(t);
        let ddl =
            format!("CREATE EXTERNAL TABLE files.default.{t} STORED AS PARQUET LOCATION '{}/'", location.display());
        client.execute(&ddl).await.unwrap_or_else(|e| panic!("{ddl}: {e}"));
    }
    let files =
        flotilla::client::StatementClient::new(&cluster.coordinator.url).with_catalog("files").with_schema("default");
    // The catalog lists its tables, as SHOW TABLES and as its information_schema.
    let names = |rows: &[Vec<serde_json::Value>]| {
        let mut v: Vec<String> = rows.iter().map(|r| r[0].as_str().unwrap().to_string()).collect();
        v.sort();
        v
    };
    let mut want: Vec<String> = TABLES.iter().map(|t| t.to_string()).collect();
    want.sort();
    let shown = client.execute("SHOW TABLES FROM files.default").await.expect("show tables");
    assert_eq!(names(&shown.rows), want);
    let listed = client
        .execute("SELECT table_name, table_type FROM files.information_schema.tables WHERE table_schema = 'default'")
        .await
        .expect("information_schema.tables");
    assert_eq!(names(&listed.rows), want);
    assert!(listed.rows.iter().all(|r| r[1] == "BASE TABLE"), "{:?}", listed.rows);
    let columns = files
        .execute("SELECT data_type FROM information_schema.columns WHERE table_name = 'lineitem' AND column_name = 'l_quantity'")
        .await
        .expect("information_schema.columns");
    assert_eq!(columns.rows, vec![vec![serde_json::json!("decimal(15,2)")]]);
    let schemas = names(&client.execute("SHOW SCHEMAS FROM files").await.expect("show schemas").rows);
    assert_eq!(schemas, ["default", "information_schema"]);
    // The scans really are split over tasks: the lineitem leaf stage has several.
    let sql = "SELECT l_returnflag, count(*) FROM lineitem GROUP BY 1 ORDER BY 1";
    let out = files.execute(sql).await.expect("count");
    assert_same_rows("lineitem by flag", sql, &out.rows, &oracle("sf0_1", sql).await);
    let info: serde_json::Value =
        reqwest::get(format!("{}/v1/query/{}", cluster.coordinator.url, out.id)).await.unwrap().json().await.unwrap();
    let leaf = info["stages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["inputs"].as_array().unwrap().is_empty())
        .expect("leaf stage")
        .clone();
    assert_eq!(leaf["task_count"], serde_json::json!(3), "the file scan is spread over the 3 workers: {leaf}");
    for (i, sql) in TPCH_QUERIES.iter().enumerate() {
        let label = format!("parquet q{}", i + 1);
        let got = files.execute(sql).await.unwrap_or_else(|e| panic!("{label} failed: {e}"));
        let want = oracle("sf0_1", sql).await;
        assert_same_rows(&label, sql, &got.rows, &want);
    }
    cluster.assert_no_tasks_left().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn csv_tables_work_too() {
    let dir_tmp = tempfile::Builder::new().prefix("flotilla-csv-").tempdir().unwrap();
    let dir = dir_tmp.path().to_path_buf();
    generate(&dir, "csv");
    let allowed = dir.display().to_string();
    let cluster = Cluster::start_with(&["--files-allowed-locations", &allowed], 2, &[]).await;
    let client = cluster.client("tiny");
    // Outside the allowed locations nothing is read or written, whatever the path.
    let escapes = [
        "CREATE EXTERNAL TABLE files.default.pw STORED AS CSV LOCATION '/etc/passwd'".to_string(),
        format!("CREATE EXTERNAL TABLE files.default.up STORED AS CSV LOCATION '{}/../'", dir.display()),
        "COPY (SELECT 1) TO '/tmp/flotilla-copy-escape.csv' STORED AS CSV".to_string(),
    ];
    for sql in &escapes {
        match client.execute(sql).await {
            Err(flotilla::client::ClientError::Query(flotilla::client::QueryError { error_name, message, .. })) => {
                assert_eq!(error_name, "PERMISSION_DENIED", "{sql}: {message}");
                assert!(message.contains("allowed locations"), "{message}");
            }
            other => panic!("{sql} was not refused: {other:?}"),
        }
    }
    assert!(!std::path::Path::new("/tmp/flotilla-copy-escape.csv").exists());
    let ddl = format!(
        "CREATE EXTERNAL TABLE files.default.orders STORED AS CSV LOCATION '{}/' OPTIONS ('format.has_header' 'true')",
        dir.join("orders").display()
    );
    client.execute(&ddl).await.expect("create csv table");
    let sql = "SELECT o_orderstatus, count(*), sum(o_custkey) FROM files.default.orders GROUP BY 1 ORDER BY 1";
    let got = client.execute(sql).await.expect("query csv");
    let want =
        oracle("sf0_1", "SELECT o_orderstatus, count(*), sum(o_custkey) FROM orders GROUP BY 1 ORDER BY 1").await;
    assert_same_rows("csv orders", sql, &got.rows, &want);
    // A Parquet file whose footer claims 2^31-1 bytes of metadata: named, and called
    // corrupt (the Parquet reader panicked on it, "range start must not be greater
    // than end").
    std::fs::create_dir_all(dir.join("broken")).unwrap();
    let footer = [b"PAR1".as_slice(), &[0u8; 100], &i32::MAX.to_le_bytes(), b"PAR1"].concat();
    std::fs::write(dir.join("broken/part-0.parquet"), footer).unwrap();
    let broken = format!(
        "CREATE EXTERNAL TABLE files.default.broken STORED AS PARQUET LOCATION '{}/'",
        dir.join("broken").display()
    );
    match client.execute(&broken).await {
        Err(flotilla::client::ClientError::Query(flotilla::client::QueryError { message, .. })) => {
            assert!(message.contains("part-0.parquet is corrupt"), "{message}");
        }
        other => panic!("a corrupt Parquet file made a table: {other:?}"),
    }
    // A table whose file goes bad after its CREATE: its queries fail naming the file,
    // and the next query runs.
    let copy = format!(
        "COPY (SELECT * FROM tpch.sf0_1.nation) TO '{}/part-0.parquet' STORED AS PARQUET",
        dir.join("spoiled").display()
    );
    client.execute(&copy).await.expect("copy nation to parquet");
    let spoiled = format!(
        "CREATE EXTERNAL TABLE files.default.spoiled STORED AS PARQUET LOCATION '{}/'",
        dir.join("spoiled").display()
    );
    client.execute(&spoiled).await.expect("a sound table");
    let file = dir.join("spoiled/part-0.parquet");
    let mut bytes = std::fs::read(&file).unwrap();
    let at = bytes.len() - 8;
    bytes[at..at + 4].copy_from_slice(&i32::MAX.to_le_bytes());
    std::fs::write(&file, bytes).unwrap();
    match client.execute("SELECT count(*), sum(n_regionkey) FROM files.default.spoiled").await {
        Err(flotilla::client::ClientError::Query(flotilla::client::QueryError { error_name, message, .. })) => {
            assert_eq!(error_name, "CORRUPT_FILE", "{message}");
            assert!(message.contains("spoiled/part-0.parquet is corrupt"), "{message}");
        }
        other => panic!("a spoiled Parquet file was read: {other:?}"),
    }
    let got = client.execute("SELECT count(*) FROM files.default.orders").await.expect("the next query runs");
    assert_same_rows("after", "", &got.rows, &oracle("sf0_1", "SELECT count(*) FROM orders").await);
    cluster.assert_no_tasks_left().await;
}
