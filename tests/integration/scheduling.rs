//! Scheduling under pressure: tiny buffers under both execution policies, many
//! concurrent clients, and cancellation that leaves nothing behind.

use std::time::{Duration, Instant};

use super::common::{assert_same_rows, oracle, Cluster};
use flotilla::local::TPCH_QUERIES;
use serde_json::Value;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tiny_buffers_under_both_policies_match_datafusion() {
    let cluster = Cluster::start(3, &[]).await;
    let mut wants = Vec::new();
    for sql in TPCH_QUERIES {
        wants.push(oracle("sf0_1", sql).await);
    }
    for policy in ["phased", "all-at-once"] {
        let client = cluster
            .client("sf0_1")
            .with_session("execution_policy", policy)
            .with_session("output_buffer_max_bytes", "64KB")
            .with_session("exchange_max_buffer_bytes", "64KB");
        for (i, sql) in TPCH_QUERIES.iter().enumerate() {
            let label = format!("{policy} 64KiB q{}", i + 1);
            let got = client.execute(sql).await.unwrap_or_else(|e| panic!("{label} failed: {e}"));
            assert_same_rows(&label, sql, &got.rows, &wants[i]);
        }
    }
    cluster.assert_no_tasks_left().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn thirty_two_concurrent_clients_all_get_right_answers() {
    let cluster = Cluster::start(3, &[]).await;
    let mut wants = Vec::new();
    for sql in TPCH_QUERIES {
        wants.push(oracle("tiny", sql).await);
    }
    let wants = std::sync::Arc::new(wants);
    let mut clients = Vec::new();
    for c in 0..32usize {
        let client = cluster.client("tiny");
        let wants = wants.clone();
        clients.push(tokio::spawn(async move {
            for k in 0..3usize {
                let q = (c * 7 + k * 5) % 22;
                let sql = TPCH_QUERIES[q];
                let label = format!("client {c} q{}", q + 1);
                let got = tokio::time::timeout(Duration::from_secs(240), client.execute(sql))
                    .await
                    .unwrap_or_else(|_| panic!("{label} stuck"))
                    .unwrap_or_else(|e| panic!("{label} failed: {e}"));
                assert_same_rows(&label, sql, &got.rows, &wants[q]);
            }
        }));
    }
    for c in clients {
        c.await.expect("client task");
    }
    cluster.assert_no_tasks_left().await;
}

/// DELETE on a running query ends it as FAILED with USER_CANCELED and removes every
/// task from every worker.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelling_mid_query_leaves_no_task() {
    let cluster = Cluster::start(3, &[]).await;
    let http = reqwest::Client::new();
    let base = &cluster.coordinator.url;
    // Big enough to still be running after a second on this machine.
    let sql = "SELECT l_orderkey, count(*) FROM lineitem GROUP BY l_orderkey ORDER BY 2 DESC, 1";
    let first = cluster.start_statement_page("sf1", sql, "").await;
    let id = first["id"].as_str().unwrap().to_string();
    cluster.wait_for_tasks(1).await;
    let resp = http.delete(format!("{base}/v1/query/{id}")).send().await.unwrap();
    assert!(resp.status().is_success());
    let deadline = Instant::now() + Duration::from_secs(10);
    let info = loop {
        let info: Value = http.get(format!("{base}/v1/query/{id}")).send().await.unwrap().json().await.unwrap();
        if info["state"] == "FAILED" || info["state"] == "FINISHED" {
            break info;
        }
        assert!(Instant::now() < deadline, "query did not end after cancel: {info}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert_eq!(info["state"], "FAILED", "{info}");
    assert_eq!(info["error"]["error_name"], "USER_CANCELED", "{info}");
    cluster.assert_no_tasks_left().await;
    // The client protocol shows the cancel too.
    let next: Value = http.get(first["nextUri"].as_str().unwrap()).send().await.unwrap().json().await.unwrap();
    assert_eq!(next["error"]["errorName"], "USER_CANCELED", "{next}");
    assert!(next.get("nextUri").is_none());
}

/// EXPLAIN shows the fragments; EXPLAIN ANALYZE runs the query and reports each
/// stage's tasks with rows, bytes and times.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn explain_and_explain_analyze_describe_the_stages() {
    let cluster = Cluster::start(2, &[]).await;
    let client = cluster.client("tiny");
    let q3 = TPCH_QUERIES[2];
    let plan = client.execute(&format!("EXPLAIN {q3}")).await.expect("explain");
    let text = plan.rows[0][0].as_str().unwrap().to_string();
    for needle in
        ["Fragment 0", "coordinator", "HASH [", "tasks", "Inputs: fragment", "RemoteSourceExec", "TpchScanExec"]
    {
        assert!(text.contains(needle), "EXPLAIN lacks {needle}:\n{text}");
    }
    let analyzed = client.execute(&format!("EXPLAIN ANALYZE {q3}")).await.expect("explain analyze");
    let text = analyzed.rows[0][0].as_str().unwrap().to_string();
    assert!(text.contains("Output: 10 rows"), "{text}");
    assert!(text.contains("FINISHED") && text.contains("task ") && text.contains(" ms"), "{text}");
    let stages = text.lines().filter(|l| l.starts_with("Fragment ")).count();
    assert!(stages >= 4, "q3 has a stage per scan, a join stage and the root: {text}");
    cluster.assert_no_tasks_left().await;
}

/// Ctrl-C in `flotilla sql` cancels the running query, not just the client.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctrl_c_in_the_cli_cancels_the_query() {
    let cluster = Cluster::start(2, &[]).await;
    let mut cli = std::process::Command::new(super::common::BIN)
        .args(["sql", "--server", &cluster.coordinator.url, "--schema", "sf1", "-e"])
        .arg("SELECT l_orderkey, count(*) FROM lineitem GROUP BY l_orderkey ORDER BY 2 DESC, 1")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn flotilla sql");
    cluster.wait_for_tasks(1).await;
    let status = std::process::Command::new("kill").args(["-INT", &cli.id().to_string()]).status().expect("kill");
    assert!(status.success());
    let deadline = Instant::now() + Duration::from_secs(10);
    let code = loop {
        if let Some(code) = cli.try_wait().expect("wait") {
            break code;
        }
        assert!(Instant::now() < deadline, "CLI did not exit after Ctrl-C");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert!(!code.success(), "a cancelled query exits non-zero");
    let mut stderr = String::new();
    std::io::Read::read_to_string(cli.stderr.as_mut().unwrap(), &mut stderr).unwrap();
    assert!(stderr.to_lowercase().contains("cancel"), "{stderr}");
    cluster.assert_no_tasks_left().await;
    let http = reqwest::Client::new();
    let queries: Vec<Value> =
        http.get(format!("{}/v1/query", cluster.coordinator.url)).send().await.unwrap().json().await.unwrap();
    assert_eq!(queries.len(), 1);
    assert_eq!(queries[0]["state"], "FAILED");
    assert_eq!(queries[0]["error"]["error_name"], "USER_CANCELED");
}
