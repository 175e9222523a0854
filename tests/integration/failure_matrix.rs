//! Failures with retry_policy=none: each injected failure kind at a leaf stage, an
//! intermediate stage and the stage feeding the root ends the query fast with an
//! error naming what broke, and leaves no task behind; so does a killed worker. The
//! same with retry_policy=query, which survives them. (retry_policy=task: see
//! `fault_tolerant`.)

use std::time::{Duration, Instant};

use super::common::{query_info, spawn, Cluster};
use flotilla::client::ClientError;
use serde_json::{json, Value};

pub const QUERY: &str = "SELECT n_name, count(*) AS orders, sum(o_totalprice) AS total \
    FROM orders JOIN customer ON o_custkey = c_custkey JOIN nation ON c_nationkey = n_nationkey \
    GROUP BY n_name ORDER BY n_name";

/// Trino's five injected failure kinds, as the failure injection endpoint names them.
pub const KINDS: [&str; 5] = [
    "task_management_request_failure",
    "task_management_request_timeout",
    "get_results_request_failure",
    "get_results_request_timeout",
    "task_failure",
];

/// The session QUERY runs with here: every join repartitioned, so that its plan has a
/// leaf, an intermediate and a root-feeding stage whatever the broadcast and
/// small-scan choices make of it (with them, sf0_1's customer and nation are scanned
/// inside the orders stage, leaving no intermediate stage).
pub const PARTITIONED_JOINS: (&str, &str) = ("join_max_broadcast_table_size", "0B");

/// The leaf, an intermediate and the root-feeding stage of QUERY, from a clean run.
pub async fn stage_positions(cluster: &Cluster) -> Vec<(&'static str, u64)> {
    let client = cluster.client("sf0_1").with_session(PARTITIONED_JOINS.0, PARTITIONED_JOINS.1);
    let out = client.execute(QUERY).await.expect("clean run");
    assert_eq!(out.rows.len(), 25, "one row per nation");
    let info = query_info(&cluster.coordinator.url, &out.id).await;
    let stages = info["stages"].as_array().expect("stages").clone();
    let leaf = stages.iter().find(|s| s["inputs"].as_array().unwrap().is_empty()).expect("a leaf stage");
    let feeding_root = stages.iter().find(|s| s["consumer"] == json!(0)).expect("a stage feeding the root");
    let intermediate = stages
        .iter()
        .find(|s| !s["inputs"].as_array().unwrap().is_empty() && s["consumer"] != json!(0))
        .expect("an intermediate stage");
    vec![
        ("leaf", leaf["stage"].as_u64().unwrap()),
        ("intermediate", intermediate["stage"].as_u64().unwrap()),
        ("feeding the root", feeding_root["stage"].as_u64().unwrap()),
    ]
}

pub async fn set_failure(cluster: &Cluster, body: Option<Value>) {
    let http = reqwest::Client::new();
    for w in &cluster.workers {
        let url = format!("{}/v1/failure-injection", w.url);
        let resp = match &body {
            Some(b) => http.post(url).json(b).send().await.unwrap(),
            None => http.delete(url).send().await.unwrap(),
        };
        assert!(resp.status().is_success(), "failure injection endpoint: {}", resp.status());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_injected_failure_fails_fast_and_cleanly() {
    let cluster = Cluster::start(3, &["--enable-failure-injection"]).await;
    let positions = stage_positions(&cluster).await;
    let kinds = [
        ("task_management_request_failure", "TOO_MANY_REQUESTS_FAILED"),
        ("task_management_request_timeout", "TOO_MANY_REQUESTS_FAILED"),
        ("get_results_request_failure", "PAGE_TRANSPORT_ERROR"),
        ("get_results_request_timeout", "PAGE_TRANSPORT_ERROR"),
        ("task_failure", "REMOTE_TASK_ERROR"),
    ];
    let client = cluster
        .client("sf0_1")
        .with_session(PARTITIONED_JOINS.0, PARTITIONED_JOINS.1)
        .with_session("exchange_max_error_duration", "3s");
    for (position, stage) in &positions {
        for (kind, expected) in kinds {
            set_failure(&cluster, Some(json!({"stage": stage, "kind": kind}))).await;
            let started = Instant::now();
            let result = tokio::time::timeout(Duration::from_secs(60), client.execute(QUERY))
                .await
                .expect("query must not hang");
            let elapsed = started.elapsed();
            let cell = format!("{kind} at the {position} stage {stage}");
            match result {
                Err(ClientError::Query(flotilla::client::QueryError { error_name, message, .. })) => {
                    assert_eq!(error_name, expected, "{cell}: {message}");
                    assert!(message.contains("worker http://127.0.0.1:"), "{cell}: error names the worker: {message}");
                    assert!(
                        message.contains(&format!(".{stage}.")),
                        "{cell}: error names a task of stage {stage}: {message}"
                    );
                    if kind == "task_failure" {
                        assert!(message.contains("injected task failure"), "{cell}: {message}");
                    }
                }
                other => panic!("{cell}: expected a failure, got {other:?}"),
            }
            assert!(elapsed < Duration::from_secs(15), "{cell}: took {elapsed:?}");
            set_failure(&cluster, None).await;
            cluster.assert_no_tasks_left().await;
        }
    }
    // The cluster serves the next query.
    let out = cluster
        .client("sf0_1")
        .with_session(PARTITIONED_JOINS.0, PARTITIONED_JOINS.1)
        .execute(QUERY)
        .await
        .expect("query after the failures");
    assert_eq!(out.rows.len(), 25);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_worker_fails_the_query_cleanly() {
    let mut cluster = Cluster::start(3, &[]).await;
    let base = cluster.coordinator.url.clone();
    let client = cluster.client("sf1");
    let query = tokio::spawn(async move {
        let started = Instant::now();
        let r =
            client.execute("SELECT l_orderkey, count(*) FROM lineitem GROUP BY l_orderkey ORDER BY 2 DESC, 1").await;
        (r, started)
    });
    cluster.wait_for_tasks(3).await;
    let killed_at = Instant::now();
    let victim = cluster.kill_worker(0);
    let (result, _) =
        tokio::time::timeout(Duration::from_secs(60), query).await.expect("query must end").expect("join");
    let waited = killed_at.elapsed();
    match result {
        Err(ClientError::Query(flotilla::client::QueryError { error_name, message, .. })) => {
            assert!(
                ["REMOTE_HOST_GONE", "PAGE_TRANSPORT_ERROR", "TOO_MANY_REQUESTS_FAILED"].contains(&error_name.name()),
                "{error_name}: {message}"
            );
            assert!(message.contains(&victim.url), "the error names the lost worker {}: {message}", victim.url);
        }
        other => panic!("expected a failure, got {other:?}"),
    }
    assert!(waited < Duration::from_secs(15), "failed after {waited:?}");
    println!("retry_policy=none: the query failed {waited:?} after kill -9 of a worker");
    cluster.assert_no_tasks_left().await;
    // Once the coordinator sees the worker gone, the survivors serve queries.
    cluster.wait_for_live_workers_exactly(2).await;
    let out = cluster.client("tiny").execute("SELECT count(*) FROM orders").await.expect("query on survivors");
    assert_eq!(out.rows[0][0], json!(15000));
    // A restarted worker rejoins.
    let _new = spawn(&["worker", "--coordinator", &base, "--bind", "127.0.0.1:0"]);
    cluster.wait_for_live_workers_exactly(3).await;
}

/// retry_policy=query: a failure of the first attempt, before any row reached the
/// client, runs the query again and the client gets the right rows.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retry_policy_query_survives_every_injected_failure() {
    let cluster = Cluster::start(3, &["--enable-failure-injection"]).await;
    let positions = stage_positions(&cluster).await;
    let want = super::common::oracle("sf0_1", QUERY).await;
    let client =
        cluster.client("sf0_1").with_session("retry_policy", "query").with_session("exchange_max_error_duration", "3s");
    let client = client.with_session(PARTITIONED_JOINS.0, PARTITIONED_JOINS.1);
    for (position, stage) in &positions {
        for kind in KINDS {
            // Only the first attempt's tasks (attempt 0) fail.
            set_failure(&cluster, Some(json!({"stage": stage, "attempt": 0, "kind": kind}))).await;
            let cell = format!("{kind} at the {position} stage {stage}");
            let got = tokio::time::timeout(Duration::from_secs(60), client.execute(QUERY))
                .await
                .unwrap_or_else(|_| panic!("{cell}: stuck"))
                .unwrap_or_else(|e| panic!("{cell}: {e}"));
            super::common::assert_same_rows(&cell, QUERY, &got.rows, &want);
            set_failure(&cluster, None).await;
            cluster.assert_no_tasks_left().await;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retry_policy_query_finishes_on_the_survivors_of_a_killed_worker() {
    let mut cluster = Cluster::start(3, &[]).await;
    let sql = "SELECT l_returnflag, l_linestatus, count(*), sum(l_quantity), sum(l_extendedprice) FROM lineitem GROUP BY 1, 2 ORDER BY 1, 2";
    let client =
        cluster.client("sf1").with_session("retry_policy", "query").with_session("exchange_max_error_duration", "3s");
    let query = tokio::spawn(async move { client.execute(sql).await });
    cluster.wait_for_tasks(3).await;
    cluster.kill_worker(0);
    let got = tokio::time::timeout(Duration::from_secs(120), query)
        .await
        .expect("query must end")
        .expect("join")
        .expect("query succeeds");
    let want = super::common::oracle("sf1", sql).await;
    super::common::assert_same_rows("sf1 after kill -9", sql, &got.rows, &want);
    cluster.assert_no_tasks_left().await;
}
