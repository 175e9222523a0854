//! A failing query gives the client a clear error and leaves no task on any worker.

use super::common::Cluster;
use flotilla::client::ClientError;

fn query_error(r: Result<flotilla::client::QueryOutcome, ClientError>) -> (String, String) {
    match r {
        Err(ClientError::Query { error_name, message, .. }) => (error_name, message),
        other => panic!("expected a query error, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failing_queries_report_clear_errors_and_leave_no_tasks() {
    let cluster = Cluster::start(3, &[]).await;
    let client = cluster.client("tiny");

    let (name, message) = query_error(client.execute("SELEC * FROM nation").await);
    assert_eq!(name, "SYNTAX_ERROR", "{message}");

    let (name, message) = query_error(client.execute("SELECT * FROM no_such_table").await);
    assert_eq!(name, "TABLE_NOT_FOUND", "{message}");
    assert!(message.contains("no_such_table"), "{message}");

    // A runtime error raised inside a worker: the cast fails on the first comment.
    let (name, message) = query_error(client.execute("SELECT sum(CAST(l_comment AS INT)) FROM lineitem").await);
    assert_eq!(name, "EXECUTION_ERROR", "{message}");
    assert!(message.contains("stage") && message.contains("worker http://127.0.0.1:"), "error names stage and worker: {message}");
    assert!(message.to_lowercase().contains("cast"), "error names the cause: {message}");
    cluster.assert_no_tasks_left().await;

    // The cluster still serves the next query.
    let ok = client.execute("SELECT count(*) FROM orders").await.expect("next query runs");
    assert_eq!(ok.rows[0][0], serde_json::json!(15000));
    cluster.assert_no_tasks_left().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_coordinator_without_workers_refuses_queries() {
    let cluster = Cluster::start(0, &[]).await;
    let (name, message) = query_error(cluster.client("tiny").execute("SELECT count(*) FROM lineitem").await);
    assert_eq!(name, "NO_NODES_AVAILABLE", "{message}");
    // Queries that need no worker still run.
    let ok = cluster.client("tiny").execute("SELECT 1 + 1").await.expect("constant query");
    assert_eq!(ok.rows[0][0], serde_json::json!(2));
}
