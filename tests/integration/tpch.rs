//! All 22 TPC-H queries on a real cluster equal single-node DataFusion's answers.

use super::common::{assert_same_rows, oracle, Cluster};
use flotilla::local::TPCH_QUERIES;

async fn run_all(cluster: &Cluster, schema: &str) {
    let client = cluster.client(schema);
    for (i, sql) in TPCH_QUERIES.iter().enumerate() {
        let label = format!("{schema} q{}", i + 1);
        let got = client.execute(sql).await.unwrap_or_else(|e| panic!("{label} failed: {e}"));
        let want = oracle(schema, sql).await;
        assert_same_rows(&label, sql, &got.rows, &want);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tpch_on_three_workers_matches_datafusion() {
    let cluster = Cluster::start(3, &[]).await;
    run_all(&cluster, "tiny").await;
    run_all(&cluster, "sf0_1").await;
    cluster.assert_no_tasks_left().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tpch_on_one_worker_matches_datafusion() {
    let cluster = Cluster::start(1, &[]).await;
    run_all(&cluster, "tiny").await;
    run_all(&cluster, "sf0_1").await;
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
