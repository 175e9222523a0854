//! What operators of a real cluster rely on, on loopback: a worker drained by
//! `PUT /v1/info/state` loses no query under any retry policy and then exits by
//! itself; a configuration directory with a mistake fails start-up naming the file,
//! line and key; a worker of another environment is refused; a server reachable from
//! other hosts does not start without a shared secret. (The same across network
//! namespaces, with wildcard binds and lost links, is in `netns`.)

use std::time::{Duration, Instant};

use serde_json::Value;

use super::common::{assert_same_rows, oracle, tasks_on, Cluster, BIN};

const SECRET: &str = "deployment-test-secret";
const LONG_QUERY: &str = "SELECT l_returnflag, count(*), sum(l_extendedprice) FROM lineitem GROUP BY 1 ORDER BY 1";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_drained_worker_finishes_its_queries_under_every_policy_then_exits() {
    let mut cluster = Cluster::start_with(
        &["--shared-secret", SECRET],
        4,
        &["--shared-secret", SECRET, "--shutdown-grace-period", "60s"],
    )
    .await;
    let want = oracle("sf1", LONG_QUERY).await;
    let http = reqwest::Client::new();
    // The state endpoint is internal: nobody without the secret drains a worker.
    let refused = http.put(format!("{}/v1/info/state", cluster.workers[0].url)).body("\"SHUTTING_DOWN\"").send().await;
    assert_eq!(refused.unwrap().status(), 401);
    for (i, policy) in ["none", "query", "task"].into_iter().enumerate() {
        let worker = cluster.workers[i].url.clone();
        let client = cluster.client("sf1").with_session("retry_policy", policy);
        let run = tokio::spawn(async move { client.execute(LONG_QUERY).await });
        let deadline = Instant::now() + Duration::from_secs(30);
        while tasks_on(&reqwest::Client::new(), &worker, Some(SECRET)).await.expect("the worker answers").is_empty() {
            assert!(Instant::now() < deadline, "{policy}: the query never reached worker {worker}");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let put = http
            .put(format!("{worker}/v1/info/state"))
            .header("x-flotilla-internal-token", SECRET)
            .body("\"SHUTTING_DOWN\"")
            .send()
            .await
            .unwrap();
        assert_eq!(put.status(), 200, "{policy}");
        let state: String = http
            .get(format!("{worker}/v1/info/state"))
            .header("x-flotilla-internal-token", SECRET)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert_eq!(state, "SHUTTING_DOWN");
        let drained_at = Instant::now();
        let got =
            run.await.unwrap().unwrap_or_else(|e| panic!("{policy}: the query failed while a worker drained: {e}"));
        assert_same_rows(&format!("drained under {policy}"), LONG_QUERY, &got.rows, &want);
        // With its queries over, the worker leaves by itself.
        let status = loop {
            if let Some(status) = cluster.workers[i].child.try_wait().unwrap() {
                break status;
            }
            assert!(drained_at.elapsed() < Duration::from_secs(60), "{policy}: the drained worker never exited");
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        assert!(status.success(), "{policy}: {status}");
        println!("{policy}: worker drained and exited {:?} after the request", drained_at.elapsed());
    }
    // The one worker left runs the next query.
    let got = cluster.client("sf1").execute(LONG_QUERY).await.expect("after the drains");
    assert_same_rows("after the drains", LONG_QUERY, &got.rows, &want);
}

fn temp_dir(tag: &str) -> tempfile::TempDir {
    tempfile::Builder::new().prefix(&format!("flotilla-{tag}-")).tempdir().unwrap()
}

/// Runs `flotilla args`, expecting it to fail at start-up; returns its stderr.
fn start_fails(args: &[&str]) -> String {
    let mut child = std::process::Command::new(BIN)
        .args(args)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("flotilla {args:?} started instead of failing");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(!status.success());
    let mut err = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
    err
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn start_up_refuses_bad_configuration_and_exposed_servers() {
    let etc_tmp = temp_dir("etc");
    let etc = etc_tmp.path();
    std::fs::write(etc.join("config.properties"), "coordinator=false\nhttp-server.http.prot=8081\n").unwrap();
    let etc_arg = etc.display().to_string();
    let err = start_fails(&["worker", "--etc", &etc_arg]);
    assert!(err.contains("config.properties:2: unknown property 'http-server.http.prot'"), "{err}");
    assert_eq!(err.lines().count(), 1, "one readable line: {err}");
    std::fs::write(etc.join("config.properties"), "coordinator=true\n").unwrap();
    let err = start_fails(&["worker", "--etc", &etc_arg]);
    assert!(err.contains("coordinator=true"), "{err}");
    // Reachable from other hosts without a secret: refused unless asked for.
    let err = start_fails(&["coordinator", "--bind", "0.0.0.0:0"]);
    assert!(err.contains("no shared secret"), "{err}");
    let err = start_fails(&["worker", "--coordinator", "http://127.0.0.1:9", "--bind", "0.0.0.0:0"]);
    assert!(err.contains("no shared secret"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_from_configuration_directories_keeps_identities_and_environments() {
    let (coord_tmp, worker_tmp) = (temp_dir("etc-coordinator"), temp_dir("etc-worker"));
    let (coord_etc, worker_etc) = (coord_tmp.path(), worker_tmp.path());
    std::fs::write(
        coord_etc.join("config.properties"),
        format!("coordinator=true\ninternal-communication.shared-secret={SECRET}\nquery.client.timeout=1m\n"),
    )
    .unwrap();
    std::fs::write(coord_etc.join("node.properties"), "node.environment=staging\n").unwrap();
    std::fs::create_dir_all(coord_etc.join("catalog")).unwrap();
    std::fs::write(coord_etc.join("catalog/gen.properties"), super::common::TPCH_BENCHMARK_CATALOG).unwrap();
    let coordinator =
        super::common::spawn(&["coordinator", "--etc", &coord_etc.display().to_string(), "--bind", "127.0.0.1:0"]);
    let write_worker = |env: &str| {
        std::fs::write(
            worker_etc.join("config.properties"),
            format!(
                "coordinator=false\ndiscovery.uri={}\ninternal-communication.shared-secret={SECRET}\n",
                coordinator.url
            ),
        )
        .unwrap();
        std::fs::create_dir_all(worker_etc.join("catalog")).unwrap();
        std::fs::write(worker_etc.join("catalog/gen.properties"), super::common::TPCH_BENCHMARK_CATALOG).unwrap();
        let node = std::fs::read_to_string(worker_etc.join("node.properties")).unwrap_or_default();
        let kept: String =
            node.lines().filter(|l| !l.starts_with("node.environment")).map(|l| format!("{l}\n")).collect();
        std::fs::write(worker_etc.join("node.properties"), format!("{kept}node.environment={env}\n")).unwrap();
    };
    let worker_args = ["worker", "--etc", &worker_etc.display().to_string(), "--bind", "127.0.0.1:0"];
    let http = reqwest::Client::new();
    let nodes = || async {
        http.get(format!("{}/v1/node", coordinator.url)).send().await.unwrap().json::<Vec<Value>>().await.unwrap()
    };
    // A worker of another environment is refused.
    write_worker("production");
    let stranger = super::common::spawn(&worker_args);
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(nodes().await.is_empty(), "a worker of another environment joined");
    drop(stranger);
    // One of the same environment joins, under the id it keeps across restarts.
    write_worker("staging");
    let mut ids = Vec::new();
    for _ in 0..2 {
        let worker = super::common::spawn(&worker_args);
        let deadline = Instant::now() + Duration::from_secs(20);
        let id = loop {
            // Alive at this process's address: a restarted worker's node is the old one
            // with its new address.
            let live: Vec<Value> = nodes()
                .await
                .into_iter()
                .filter(|n| n["alive"] == Value::Bool(true) && n["url"] == Value::String(worker.url.clone()))
                .collect();
            if let Some(n) = live.first() {
                break n["node_id"].as_str().unwrap().to_string();
            }
            assert!(Instant::now() < deadline, "the worker never joined");
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        // The catalog named by its file answers on the worker too.
        let client = flotilla::client::StatementClient::new(&coordinator.url).with_catalog("gen").with_schema("tiny");
        let got = client.execute("SELECT count(*) FROM nation").await.expect("query the gen catalog");
        assert_eq!(got.rows, oracle("tiny", "SELECT count(*) FROM nation").await);
        ids.push(id);
        drop(worker);
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert_eq!(ids[0], ids[1], "a restarted worker keeps its node.id");

    // Two workers started from one directory share its node id: the second is refused
    // while the first lives (`DUPLICATE_NODE_ID`), instead of the two taking turns.
    let first = super::common::spawn(&worker_args);
    let deadline = Instant::now() + Duration::from_secs(20);
    while !nodes().await.iter().any(|n| n["alive"] == Value::Bool(true) && n["url"] == Value::String(first.url.clone()))
    {
        assert!(Instant::now() < deadline, "the first worker never joined");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let second = super::common::spawn(&worker_args);
    for _ in 0..20 {
        let live: Vec<Value> = nodes().await.into_iter().filter(|n| n["alive"] == Value::Bool(true)).collect();
        assert_eq!(live.len(), 1, "{live:?}");
        assert_eq!(live[0]["url"], Value::String(first.url.clone()), "the node stays the first worker: {live:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let announcement = serde_json::json!({"node_id": ids[0], "url": second.url, "environment": "staging"});
    let internal = flotilla::http::http_client(Some(SECRET));
    let refused =
        internal.post(format!("{}/v1/announcement", coordinator.url)).json(&announcement).send().await.unwrap();
    assert_eq!(refused.status(), 409);
    let body: Value = refused.json().await.unwrap();
    assert_eq!(body["error"]["code"], "DUPLICATE_NODE_ID", "{body}");
}

/// The deployment page's cluster by hand, typed as written (ports left to the system,
/// a throwaway data directory): a coordinator with `--data-dir` and workers started
/// with nothing but their coordinator write and read tables of the `files` catalog.
/// The workers take the coordinator's warehouse from its answer to their
/// announcements; before, every worker needed `--files-allowed-locations` repeated.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workers_write_where_the_coordinators_data_directory_keeps_tables() {
    let dir = tempfile::Builder::new().prefix("flotilla-by-hand-").tempdir().unwrap();
    let data_dir = dir.path().display().to_string();
    let cluster = Cluster::start_with(&["--data-dir", &data_dir], 2, &[]).await;
    let client = cluster.client("tiny");
    client.execute("CREATE SCHEMA files.s").await.expect("create schema");
    let made = client.execute("CREATE TABLE files.s.orders AS SELECT * FROM tpch.tiny.orders").await;
    assert_eq!(made.expect("create table as, written by the workers").update_count, Some(15_000));
    let added =
        client.execute("INSERT INTO files.s.orders SELECT * FROM tpch.tiny.orders WHERE o_orderkey < 100").await;
    let want_added = oracle("tiny", "SELECT count(*) FROM orders WHERE o_orderkey < 100").await;
    assert_eq!(added.expect("insert").update_count, want_added[0][0].as_i64());
    let q = "SELECT o_orderstatus, count(*), sum(o_totalprice) FROM files.s.orders GROUP BY 1";
    let want = oracle(
        "tiny",
        "SELECT o_orderstatus, count(*), sum(o_totalprice) FROM \
         (SELECT * FROM orders UNION ALL SELECT * FROM orders WHERE o_orderkey < 100) GROUP BY 1",
    )
    .await;
    assert_same_rows("files table", q, &client.execute(q).await.expect("read back").rows, &want);
    assert!(dir.path().join("warehouse").join("s").join("orders").is_dir(), "the table is in the warehouse");
}
