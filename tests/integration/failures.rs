//! A failing query gives the client a clear error and leaves no task on any worker.

use super::common::{query_error, Cluster};

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
    // Trino's code for a string that is not a number is INVALID_CAST_ARGUMENT.
    let (name, message) = query_error(client.execute("SELECT sum(CAST(l_comment AS INT)) FROM lineitem").await);
    assert_eq!(name, "INVALID_CAST_ARGUMENT", "{message}");
    assert!(
        message.contains("stage") && message.contains("worker http://127.0.0.1:"),
        "error names stage and worker: {message}"
    );
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

/// Bad input on the worker's task API gets a 4xx JSON error and changes nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_task_api_requests_get_json_errors() {
    let cluster = Cluster::start(1, &[]).await;
    let worker = &cluster.workers[0].url;
    let http = reqwest::Client::new();
    let cases = [
        (http.post(format!("{worker}/v1/task/q.1.0.0")).body("{not json"), 400, "BAD_REQUEST"),
        (http.get(format!("{worker}/v1/task/q.1.0.0/status")), 404, "TASK_NOT_FOUND"),
        (http.get(format!("{worker}/v1/task/not-a-task-id")), 400, "BAD_REQUEST"),
        (http.get(format!("{worker}/v1/task/q.1.0.0/results/0/0")), 404, "TASK_NOT_FOUND"),
        (http.delete(format!("{worker}/v1/task/q.1.0.0")), 404, "TASK_NOT_FOUND"),
        (http.get(format!("{worker}/v1/task/q.1.0.0/dynamic-filter/1")), 404, "TASK_NOT_FOUND"),
        (http.get(format!("{worker}/v1/task/q.1.0.0/dynamic-filter/x")), 400, "BAD_REQUEST"),
        // q.1.0.0 was deleted above, before it existed: its create is refused for good
        // (a delete that overtakes its create must not leave a task behind).
        (
            http.post(format!("{worker}/v1/task/q.1.0.0"))
                .header("content-type", "application/json")
                .body(r#"{"fragment":"AAEC","partitions":[0],"output":{"type":"passthrough"}}"#),
            400,
            "BAD_REQUEST",
        ),
        (
            http.post(format!("{worker}/v1/task/q.2.0.0"))
                .header("content-type", "application/json")
                .body(r#"{"fragment":"AAEC","partitions":[0],"output":{"type":"passthrough"}}"#),
            400,
            "BAD_PLAN",
        ),
        (http.get(format!("{worker}/v1/nothing-here")), 404, "BAD_REQUEST"),
    ];
    for (req, status, code) in cases {
        let resp = req.send().await.expect("worker answers");
        assert_eq!(resp.status().as_u16(), status);
        let body: serde_json::Value = resp.json().await.expect("JSON error body");
        assert_eq!(body["error"]["code"], code, "{body}");
        assert!(body["error"]["message"].as_str().is_some_and(|m| !m.is_empty()));
    }
    cluster.assert_no_tasks_left().await;
    // The worker keeps serving.
    let ok = cluster.client("tiny").execute("SELECT count(*) FROM nation").await.expect("query after bad input");
    assert_eq!(ok.rows[0][0], serde_json::json!(25));
}

/// With a shared secret, internal requests without it get 401 and change nothing;
/// the cluster itself, which has the secret, works.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn internal_requests_need_the_shared_secret() {
    let secret = ["--shared-secret", "correct horse battery staple"];
    let cluster = Cluster::start_with(&secret, 2, &secret).await;
    let out =
        cluster.client("tiny").execute("SELECT count(*) FROM customer").await.expect("authenticated cluster works");
    assert_eq!(out.rows[0][0], serde_json::json!(1500));
    let http = reqwest::Client::new();
    let worker = &cluster.workers[0].url;
    for token in [None, Some("wrong")] {
        let with = |r: reqwest::RequestBuilder| match token {
            Some(t) => r.header("x-flotilla-internal-token", t),
            None => r,
        };
        let requests = [
            with(http.get(format!("{worker}/v1/task"))),
            with(http.get(format!("{worker}/v1/info"))),
            with(http.post(format!("{worker}/v1/task/q.1.0.0")).body("{}")),
            with(http.delete(format!("{worker}/v1/task/q.1.0.0"))),
            with(
                http.post(format!("{}/v1/announcement", cluster.coordinator.url))
                    .body(r#"{"node_id":"intruder","url":"http://127.0.0.1:9"}"#),
            ),
        ];
        for req in requests {
            let resp = req.send().await.expect("answers");
            assert_eq!(resp.status().as_u16(), 401);
            let body: serde_json::Value = resp.json().await.expect("JSON error");
            assert_eq!(body["error"]["code"], "UNAUTHENTICATED");
        }
    }
    // Nothing changed: no intruder node, no task.
    let nodes: Vec<serde_json::Value> =
        http.get(format!("{}/v1/node", cluster.coordinator.url)).send().await.unwrap().json().await.unwrap();
    assert_eq!(nodes.len(), 2, "{nodes:?}");
    cluster.assert_no_tasks_left().await;
}
