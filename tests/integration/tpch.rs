//! All 22 TPC-H queries on a real cluster equal single-node DataFusion's answers,
//! with hash joins and (`spill_enabled`) with sort-merge joins, distributed and as one
//! task (`single_task_max_rows`).

use super::common::{assert_same_rows, oracle, query_info, Cluster};
use flotilla::format::batch_to_json_rows;
use flotilla::local::TPCH_QUERIES;

async fn run_all(cluster: &Cluster, schema: &str) {
    run_all_with(cluster, schema, &[]).await
}

async fn run_all_with(cluster: &Cluster, schema: &str, session: &[(&str, &str)]) {
    let mut client = cluster.client(schema);
    for (k, v) in session {
        client = client.with_session(*k, *v);
    }
    for (i, sql) in TPCH_QUERIES.iter().enumerate() {
        let label = format!("{schema} q{} {session:?}", i + 1);
        let got = client.execute(sql).await.unwrap_or_else(|e| panic!("{label} failed: {e}"));
        let want = oracle(schema, sql).await;
        assert_same_rows(&label, sql, &got.rows, &want);
    }
}

/// The 22 answers taken as Arrow batches (`with_rows_as_arrow`), encoded as the
/// protocol encodes values, equal DataFusion's.
async fn run_all_as_arrow(cluster: &Cluster, schema: &str) {
    let client = cluster.client(schema).with_rows_as_arrow();
    for (i, sql) in TPCH_QUERIES.iter().enumerate() {
        let label = format!("{schema} q{} as Arrow", i + 1);
        let got = client.execute(sql).await.unwrap_or_else(|e| panic!("{label} failed: {e}"));
        assert!(got.rows.is_empty(), "{label}: rows came as JSON too");
        assert!(!got.batches.is_empty(), "{label}: no batches, not even the schema's");
        let rows: Vec<_> = got.batches.iter().flat_map(|b| batch_to_json_rows(b).expect("encode")).collect();
        assert_same_rows(&label, sql, &rows, &oracle(schema, sql).await);
    }
}

/// The tasks q22 at sf0_1 ran on the workers under `single_task_max_rows=max`.
async fn q22_tasks(cluster: &Cluster, max: &str) -> usize {
    let client = cluster.client("sf0_1").with_session("single_task_max_rows", max);
    let got = client.execute(TPCH_QUERIES[21]).await.expect("q22");
    let info = query_info(&cluster.coordinator.url, &got.id).await;
    let stages = info["stages"].as_array().expect("stages").clone();
    stages.iter().map(|s| s["tasks"].as_array().map_or(0, |t| t.len())).sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tpch_on_three_workers_matches_datafusion() {
    let cluster = Cluster::start(3, &[]).await;
    // At these scales every join's build side is under join_max_broadcast_table_size:
    // tiny runs with none broadcast, so repartitioned joins are covered too.
    run_all_with(&cluster, "tiny", &[("join_max_broadcast_table_size", "0B")]).await;
    run_all(&cluster, "sf0_1").await;
    // Joins as sort-merge joins (spill_enabled): the same answers.
    run_all_with(&cluster, "sf0_1", &[("spill_enabled", "true")]).await;
    // Small queries as one task on one worker, as the default runs them at sf0_1; and
    // so under retry_policy=task, whose one task spools its output.
    run_all_with(&cluster, "sf0_1", &[("single_task_max_rows", "3000000")]).await;
    run_all_with(&cluster, "tiny", &[("single_task_max_rows", "3000000"), ("retry_policy", "task")]).await;
    // Such a query ran as one task on the workers; at 0 (the tests' clusters) as many.
    assert_eq!(q22_tasks(&cluster, "3000000").await, 1, "one task");
    assert!(q22_tasks(&cluster, "0").await > 3, "stages of tasks");
    super::dynamic_filters::check(&cluster).await;
    super::shapes::check(&cluster).await;
    super::trino_functions::check(&cluster).await;
    super::trino_sql::check(&cluster).await;
    super::differential::check(&cluster).await;
    cluster.assert_no_tasks_left().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tpch_on_one_worker_matches_datafusion() {
    let cluster = Cluster::start(1, &[]).await;
    run_all(&cluster, "tiny").await;
    run_all(&cluster, "sf0_1").await;
    run_all_as_arrow(&cluster, "tiny").await;
    cluster.assert_no_tasks_left().await;
}

/// With 1 MiB output buffers, stages must stream: backpressure, no deadlock, no
/// whole-input materialization.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn small_output_buffers_still_stream_q1_and_q18() {
    let cluster = Cluster::start(3, &["--output-buffer-max-bytes", "1MB"]).await;
    let client = cluster.client("sf0_1");
    for q in [1usize, 18] {
        let sql = TPCH_QUERIES[q - 1];
        let got = client.execute(sql).await.unwrap_or_else(|e| panic!("q{q} failed: {e}"));
        let want = oracle("sf0_1", sql).await;
        assert_same_rows(&format!("sf0_1 q{q} (1 MiB buffers)"), sql, &got.rows, &want);
    }
    cluster.assert_no_tasks_left().await;
}

/// Metadata statements answer as Trino does, with Trino's type names. Expected types
/// are the catalog's contract (keys BIGINT, money DECIMAL(15,2), dates DATE).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metadata_statements_answer_like_trino() {
    let cluster = Cluster::start(1, &[]).await;
    let client = cluster.client("tiny");
    let column =
        |rows: &[Vec<serde_json::Value>]| rows.iter().map(|r| r[0].as_str().unwrap().to_string()).collect::<Vec<_>>();
    let catalogs = client.execute("SHOW CATALOGS").await.expect("show catalogs");
    assert_eq!(catalogs.columns[0].name, "Catalog");
    assert!(column(&catalogs.rows).contains(&"tpch".to_string()));
    let schemas = column(&client.execute("SHOW SCHEMAS FROM tpch").await.expect("show schemas").rows);
    for s in ["tiny", "sf0_1", "sf1", "sf10", "information_schema"] {
        assert!(schemas.contains(&s.to_string()), "{s} in {schemas:?}");
    }
    let tables = column(&client.execute("SHOW TABLES").await.expect("show tables").rows);
    assert_eq!(tables, ["customer", "lineitem", "nation", "orders", "part", "partsupp", "region", "supplier"]);
    let d = client.execute("DESCRIBE lineitem").await.expect("describe");
    let names: Vec<&str> = d.columns.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, ["Column", "Type", "Extra", "Comment"]);
    assert_eq!(d.rows.len(), 16);
    let ty = |col: &str| d.rows.iter().find(|r| r[0] == col).map(|r| r[1].as_str().unwrap().to_string()).unwrap();
    assert_eq!(ty("l_orderkey"), "bigint");
    assert_eq!(ty("l_quantity"), "decimal(12,2)");
    assert_eq!(ty("l_shipdate"), "date");
    assert_eq!(ty("l_comment"), "varchar");
    // An unknown session property is a query error, not an HTTP one.
    match client.clone().with_session("no_such_property", "1").execute("SELECT 1").await {
        Err(flotilla::client::ClientError::Query(flotilla::client::QueryError { error_name, message, .. })) => {
            assert_eq!(error_name, "INVALID_SESSION_PROPERTY", "{message}");
            assert!(message.contains("no_such_property"), "{message}");
        }
        other => panic!("expected INVALID_SESSION_PROPERTY, got {other:?}"),
    }
}
