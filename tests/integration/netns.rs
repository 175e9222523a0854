//! A real multi-host cluster, as far as one machine can make one: a coordinator and
//! three workers, each in its own network namespace, on a bridge with addresses of a
//! private test range, every node started from a configuration directory only and
//! bound to the wildcard address without `--advertise`. The test sets the network up
//! and tears it down; without the rights to (not root, no `ip`), it says it skipped
//! and why.
//!
//! Shown here: the workers announce reachable addresses and all 22 TPC-H queries on
//! `sf0_1` equal DataFusion's answers; a worker's link taken down mid-query fails a
//! `retry_policy=none` query within 15 s naming the worker, and a `task` query still
//! returns the right rows; with the link up again the worker rejoins and gets tasks.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use flotilla::local::TPCH_QUERIES;
use serde_json::Value;

use super::common::{assert_same_rows, oracle, tasks_on, Proc, BIN};

const SECRET: &str = "netns-test-secret";
const WORKERS: usize = 3;

fn ip(args: &[&str]) -> Result<(), String> {
    let out = Command::new("ip").args(args).output().map_err(|e| format!("cannot run ip: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!("ip {}: {}", args.join(" "), String::from_utf8_lossy(&out.stderr).trim()))
    }
}

/// The namespaces, links and bridge of one test, removed when dropped (after the
/// processes in them are gone).
struct Network {
    id: String,
    subnet: String,
    procs: Vec<Proc>,
    dirs: Vec<std::path::PathBuf>,
}

impl Network {
    fn ns(&self, node: usize) -> String {
        format!("fl{}n{node}", self.id)
    }

    /// The bridge-side end of a node's link: down means the node is cut off.
    fn host_link(&self, node: usize) -> String {
        format!("fl{}h{node}", self.id)
    }

    fn addr(&self, node: usize) -> String {
        format!("{}.{}", self.subnet, 10 + node)
    }

    fn create() -> Result<Network, String> {
        let id = flotilla::util::random_suffix(4);
        let n: u32 = rand_octet();
        let subnet = format!("10.{}.{}", 100 + n % 150, n % 250);
        let net = Network { id, subnet, procs: Vec::new(), dirs: Vec::new() };
        let bridge = format!("flb{}", net.id);
        ip(&["link", "add", &bridge, "type", "bridge"])?;
        ip(&["addr", "add", &format!("{}.1/24", net.subnet), "dev", &bridge])?;
        ip(&["link", "set", &bridge, "up"])?;
        for node in 0..=WORKERS {
            let (ns, host, peer) = (net.ns(node), net.host_link(node), format!("fl{}p{node}", net.id));
            ip(&["netns", "add", &ns])?;
            ip(&["link", "add", &host, "type", "veth", "peer", "name", &peer])?;
            ip(&["link", "set", &peer, "netns", &ns])?;
            ip(&["link", "set", &host, "master", &bridge])?;
            ip(&["link", "set", &host, "up"])?;
            ip(&["-n", &ns, "addr", "add", &format!("{}/24", net.addr(node)), "dev", &peer])?;
            ip(&["-n", &ns, "link", "set", &peer, "up"])?;
            ip(&["-n", &ns, "link", "set", "lo", "up"])?;
            ip(&["-n", &ns, "route", "add", "default", "via", &format!("{}.1", net.subnet)])?;
        }
        Ok(net)
    }

    /// Starts `flotilla role --etc DIR` in a node's namespace.
    fn start(&mut self, node: usize, role: &str, config: &str) {
        let dir = std::env::temp_dir().join(format!("flotilla-netns-{}-{node}", self.id));
        std::fs::create_dir_all(dir.join("catalog")).unwrap();
        std::fs::write(dir.join("config.properties"), config).unwrap();
        std::fs::write(dir.join("node.properties"), "node.environment=netns_test\n").unwrap();
        std::fs::write(dir.join("catalog/tpch.properties"), super::common::TPCH_BENCHMARK_CATALOG).unwrap();
        let mut child = Command::new("ip")
            .args(["netns", "exec", &self.ns(node), BIN, role, "--etc"])
            .arg(&dir)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("ip netns exec");
        let stdout = child.stdout.take().unwrap();
        std::thread::spawn(move || for _ in BufReader::new(stdout).lines() {});
        self.dirs.push(dir);
        self.procs
            .push(Proc { child, url: format!("http://{}:{}", self.addr(node), if node == 0 { 8080 } else { 8081 }) });
    }
}

impl Drop for Network {
    fn drop(&mut self) {
        self.procs.clear();
        for node in 0..=WORKERS {
            let _ = ip(&["netns", "del", &self.ns(node)]);
            let _ = ip(&["link", "del", &self.host_link(node)]);
        }
        let _ = ip(&["link", "del", &format!("flb{}", self.id)]);
        for d in &self.dirs {
            let _ = std::fs::remove_dir_all(d);
        }
    }
}

fn rand_octet() -> u32 {
    rand::random::<u32>()
}

async fn nodes(http: &reqwest::Client, coordinator: &str) -> Vec<Value> {
    match http.get(format!("{coordinator}/v1/node")).timeout(Duration::from_secs(2)).send().await {
        Ok(r) => r.json().await.unwrap_or_default(),
        Err(_) => Vec::new(),
    }
}

async fn wait_alive(http: &reqwest::Client, coordinator: &str, want: &[String]) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let live: Vec<String> = nodes(http, coordinator)
            .await
            .into_iter()
            .filter(|n| n["alive"] == Value::Bool(true))
            .map(|n| n["url"].as_str().unwrap_or_default().to_string())
            .collect();
        if want.iter().all(|w| live.contains(w)) {
            return;
        }
        assert!(Instant::now() < deadline, "workers {want:?} not all alive: {live:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

const LONG_QUERY: &str = "SELECT l_returnflag, count(*), sum(l_extendedprice) FROM lineitem GROUP BY 1 ORDER BY 1";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_across_network_namespaces() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return super::common::missing_service(
            "a_cluster_across_network_namespaces",
            "creating network namespaces needs root",
        );
    }
    let mut net = match Network::create() {
        Ok(n) => n,
        Err(e) => {
            return super::common::missing_service(
                "a_cluster_across_network_namespaces",
                &format!("cannot set up namespaces: {e}"),
            );
        }
    };
    let coordinator_url = format!("http://{}:8080", net.addr(0));
    net.start(
        0,
        "coordinator",
        &format!("coordinator=true\nhttp-server.http.port=8080\ninternal-communication.shared-secret={SECRET}\nfailure-detector.timeout=3s\n\
          single-task-max-rows=0\n"),
    );
    for w in 1..=WORKERS {
        let config = format!(
            "coordinator=false\nhttp-server.http.port=8081\ndiscovery.uri={coordinator_url}\n\
             internal-communication.shared-secret={SECRET}\ntask.client.timeout=5s\n"
        );
        net.start(w, "worker", &config);
    }
    let http = reqwest::Client::new();
    let worker_urls: Vec<String> = (1..=WORKERS).map(|w| format!("http://{}:8081", net.addr(w))).collect();
    // Bound to 0.0.0.0 without --advertise, each announces its namespace's address.
    wait_alive(&http, &coordinator_url, &worker_urls).await;
    let client = flotilla::client::StatementClient::new(&coordinator_url).with_catalog("tpch").with_schema("sf0_1");
    let started = Instant::now();
    for (i, sql) in TPCH_QUERIES.iter().enumerate() {
        let label = format!("netns q{}", i + 1);
        let q = Instant::now();
        let got = client.execute(sql).await.unwrap_or_else(|e| panic!("{label} failed: {e}"));
        let took = q.elapsed();
        assert_same_rows(&label, sql, &got.rows, &oracle("sf0_1", sql).await);
        println!("{label}: {took:?}");
    }
    println!("22 TPC-H sf0_1 queries across namespaces: {:?} (oracle included)", started.elapsed());

    // A worker's link goes down mid-query.
    let (cut, cut_url) = (WORKERS, worker_urls[WORKERS - 1].clone());
    let want = oracle("sf1", LONG_QUERY).await;
    for policy in ["none", "task"] {
        let client = flotilla::client::StatementClient::new(&coordinator_url)
            .with_catalog("tpch")
            .with_schema("sf1")
            .with_session("retry_policy", policy);
        let run = tokio::spawn(async move { client.execute(LONG_QUERY).await });
        let deadline = Instant::now() + Duration::from_secs(30);
        while tasks_on(&http, &cut_url, Some(SECRET)).await.unwrap_or_default().is_empty() {
            assert!(Instant::now() < deadline, "{policy}: the query never reached {cut_url}");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        ip(&["link", "set", &net.host_link(cut), "down"]).unwrap();
        let down = Instant::now();
        let outcome = tokio::time::timeout(Duration::from_secs(60), run).await.expect("the query ends").unwrap();
        match (policy, outcome) {
            (
                "none",
                Err(flotilla::client::ClientError::Query(flotilla::client::QueryError { error_name, message, .. })),
            ) => {
                assert!(
                    down.elapsed() < Duration::from_secs(15),
                    "failed only after {:?}: {error_name}: {message}",
                    down.elapsed()
                );
                assert!(message.contains(&net.addr(cut)), "{error_name}: {message} does not name the worker");
                println!("none: failed {:?} after the link went down: {error_name}: {message}", down.elapsed());
            }
            ("task", Ok(got)) => {
                assert_same_rows("task with a lost link", LONG_QUERY, &got.rows, &want);
                println!("task: right rows {:?} after the link went down", down.elapsed());
            }
            (policy, other) => panic!("{policy}: unexpected outcome {other:?}"),
        }
        ip(&["link", "set", &net.host_link(cut), "up"]).unwrap();
        // Back on the network, the worker rejoins and gets tasks again.
        wait_alive(&http, &coordinator_url, &worker_urls).await;
    }
    let cut_id = nodes(&http, &coordinator_url)
        .await
        .into_iter()
        .find(|n| n["url"] == Value::String(cut_url.clone()))
        .map(|n| n["node_id"].as_str().unwrap().to_string())
        .expect("the rejoined worker is listed");
    let client = flotilla::client::StatementClient::new(&coordinator_url).with_catalog("tpch").with_schema("sf0_1");
    let got = client.execute(LONG_QUERY).await.expect("a query after the rejoin");
    assert_same_rows("after the rejoin", LONG_QUERY, &got.rows, &oracle("sf0_1", LONG_QUERY).await);
    let info: Value =
        http.get(format!("{coordinator_url}/v1/query/{}", got.id)).send().await.unwrap().json().await.unwrap();
    let ran_on: Vec<&str> = info["stages"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|s| s["tasks"].as_array().unwrap().iter().map(|t| t["node_id"].as_str().unwrap_or_default()))
        .collect();
    assert!(ran_on.contains(&cut_id.as_str()), "the rejoined worker {cut_id} got no task: {ran_on:?}");
    // Nothing is left on any worker: tasks cut off with the link were abandoned.
    let deadline = Instant::now() + Duration::from_secs(30);
    for url in &worker_urls {
        while !tasks_on(&http, url, Some(SECRET)).await.unwrap_or_default().is_empty() {
            assert!(Instant::now() < deadline, "tasks left on {url}");
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
}
