//! Test harness: real `flotilla` processes on loopback (a coordinator and workers on
//! port 0, killed when the cluster is dropped), and the oracle that compares a
//! distributed answer with single-node DataFusion over the same generated data.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use flotilla::client::StatementClient;
use flotilla::coordinator::planner::single_node_context;
use flotilla::format::batch_to_json_rows;
use serde_json::Value;

pub const BIN: &str = env!("CARGO_BIN_EXE_flotilla");

/// A process that is killed when dropped, so a failing test leaves nothing behind.
pub struct Proc {
    pub child: Child,
    pub url: String,
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts `flotilla <args>` and reads the URL it prints on its first line.
pub fn spawn(args: &[&str]) -> Proc {
    spawn_with(args, Stdio::inherit(), &[])
}

/// `spawn`, its log (standard error) written to `log`.
pub fn spawn_logging_to(args: &[&str], log: &std::path::Path) -> Proc {
    spawn_with(args, Stdio::from(std::fs::File::create(log).expect("create the log file")), &[])
}

fn spawn_with(args: &[&str], stderr: Stdio, env: &[(String, String)]) -> Proc {
    let mut child = Command::new(BIN)
        .args(args)
        .envs(env.iter().map(|(k, v)| (k, v)))
        .stdout(Stdio::piped())
        .stderr(stderr)
        .spawn()
        .expect("spawn flotilla");
    let stdout = child.stdout.take().expect("stdout");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut lines = BufReader::new(stdout).lines();
        if let Some(Ok(line)) = lines.next() {
            let _ = tx.send(line);
        }
        // Keep draining so the child never blocks on a full pipe.
        for _ in lines {}
    });
    let line = match rx.recv_timeout(Duration::from_secs(20)) {
        Ok(l) => l,
        Err(_) => {
            let _ = child.kill();
            panic!("flotilla {args:?} printed no address");
        }
    };
    let url = line.split_whitespace().last().expect("url").to_string();
    assert!(
        url.starts_with("http://127.0.0.1:") || url.starts_with("https://127.0.0.1:"),
        "unexpected first line: {line}"
    );
    Proc { child, url }
}

/// A test whose outside service (a package, a server) is missing: under `CI=true`
/// that is a failure, elsewhere the test says it skipped and why, and the skip is
/// listed again when the test binary exits (see `list_skipped_at_exit`).
pub fn missing_service(test: &str, why: &str) {
    if std::env::var("CI").is_ok_and(|v| v == "true") {
        panic!("{test}: {why} (CI=true: a missing service is a failure)");
    }
    println!("SKIPPED {test}: {why}");
    SKIPPED.lock().unwrap_or_else(|e| e.into_inner()).push(format!("{test}: {why}"));
    list_skipped_at_exit();
}

static SKIPPED: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());

/// Registers, once, a handler that prints the skipped tests after the test harness's
/// own summary: the integration binary is the last thing `cargo test` runs, so the
/// list ends the README's test command, where it is seen. Output a passing test
/// prints is captured and never shown, hence the handler.
fn list_skipped_at_exit() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    extern "C" fn print_skipped() {
        use std::io::Write;
        let skipped = SKIPPED.lock().unwrap_or_else(|e| e.into_inner());
        let mut text = format!(
            "\n{} integration test(s) skipped for want of a service (.ci/run installs them all; under CI=true \
             a skip is a failure):\n",
            skipped.len()
        );
        for s in skipped.iter() {
            text.push_str(&format!("  SKIPPED {s}\n"));
        }
        // Straight to the file descriptor: the harness's capture is gone by now.
        let _ = std::io::stderr().write_all(text.as_bytes());
    }
    // SAFETY: registers a plain function without arguments, as atexit requires.
    ONCE.call_once(|| unsafe {
        libc::atexit(print_skipped);
    });
}

/// The built-in `tpch` as the TPC-H queries spell it, exact money, in the catalog file
/// of a cluster configured by files (`TpchSpelling::BENCHMARK_FLAGS` on the others).
pub const TPCH_BENCHMARK_CATALOG: &str =
    "connector.name=tpch\ntpch.column-naming=STANDARD\ntpch.double-type-mapping=DECIMAL\n";

pub struct Cluster {
    pub coordinator: Proc,
    pub workers: Vec<Proc>,
    /// The shared secret the cluster was started with, sent on internal requests.
    pub secret: Option<String>,
}

impl Cluster {
    pub async fn start(workers: usize, worker_args: &[&str]) -> Cluster {
        Self::start_with(&[], workers, worker_args).await
    }

    pub async fn start_with(coordinator_args: &[&str], workers: usize, worker_args: &[&str]) -> Cluster {
        let mut args = vec!["coordinator", "--bind", "127.0.0.1:0"];
        // Queries over the tests' small tables would run as one task each
        // (single_task_max_rows); the tests are about stages, tasks and exchanges, so
        // they are distributed unless a test says otherwise (per query, or here).
        if !coordinator_args.iter().any(|a| a.starts_with("single_task_max_rows=")) {
            args.extend_from_slice(&["--session", "single_task_max_rows=0"]);
        }
        // The built-in tpch spelled as the TPC-H queries the tests run spell it.
        if !coordinator_args.iter().any(|a| *a == "--etc" || a.starts_with("--tpch-")) {
            args.extend_from_slice(&flotilla::connector::tpch::TpchSpelling::BENCHMARK_FLAGS);
        }
        args.extend_from_slice(coordinator_args);
        let coordinator = spawn(&args);
        let mut ws = Vec::new();
        for _ in 0..workers {
            let mut args = vec!["worker", "--coordinator", coordinator.url.as_str(), "--bind", "127.0.0.1:0"];
            // Workers open files only where their own catalogs allow: the
            // coordinator's places, as a deployment gives both the same catalogs.
            if let Some(w) = coordinator_args.windows(2).find(|w| w[0] == "--files-allowed-locations") {
                args.extend_from_slice(w);
            }
            args.extend_from_slice(worker_args);
            ws.push(spawn(&args));
        }
        let secret = coordinator_args.windows(2).find(|w| w[0] == "--shared-secret").map(|w| w[1].to_string());
        let cluster = Cluster { coordinator, workers: ws, secret };
        cluster.wait_for_workers(workers).await;
        cluster
    }

    /// Kills worker `i` with SIGKILL, waits for it to be gone, and hands it back
    /// (its URL names what it left behind).
    pub fn kill_worker(&mut self, i: usize) -> Proc {
        let mut victim = self.workers.remove(i);
        victim.child.kill().expect("kill -9");
        let _ = victim.child.wait();
        victim
    }

    pub async fn wait_for_workers(&self, n: usize) {
        let deadline = Instant::now() + Duration::from_secs(20);
        let url = format!("{}/v1/node", self.coordinator.url);
        let http = reqwest::Client::new();
        while Instant::now() < deadline {
            if let Ok(resp) = http.get(&url).send().await {
                if let Ok(nodes) = resp.json::<Vec<Value>>().await {
                    if nodes.iter().filter(|n| n["alive"] == Value::Bool(true)).count() >= n {
                        return;
                    }
                }
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("{n} workers did not join in time");
    }

    /// Waits until exactly `n` workers are alive (a lost one has timed out).
    pub async fn wait_for_live_workers_exactly(&self, n: usize) {
        let deadline = Instant::now() + Duration::from_secs(30);
        let url = format!("{}/v1/node", self.coordinator.url);
        let http = reqwest::Client::new();
        loop {
            let nodes: Vec<Value> = http.get(&url).send().await.unwrap().json().await.unwrap();
            let alive = nodes.iter().filter(|n| n["alive"] == Value::Bool(true)).count();
            if alive == n {
                return;
            }
            assert!(Instant::now() < deadline, "expected {n} live workers, have {alive}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    pub fn client(&self, schema: &str) -> StatementClient {
        StatementClient::new(&self.coordinator.url).with_catalog("tpch").with_schema(schema)
    }

    /// Every task each worker still holds (the workers' own API).
    pub async fn remaining_tasks(&self) -> Vec<Value> {
        let http = reqwest::Client::new();
        let mut all = Vec::new();
        for w in &self.workers {
            all.extend(tasks_on(&http, &w.url, self.secret.as_deref()).await.expect("worker answers"));
        }
        all
    }

    /// Starts `sql` through the raw statement protocol and returns the query id,
    /// without following `nextUri` (the query keeps running).
    pub async fn start_statement(&self, schema: &str, sql: &str) -> String {
        self.start_statement_with_session(schema, sql, "").await
    }

    /// The same with session properties, as `X-Trino-Session` carries them
    /// (`name=value,...`; empty for none).
    pub async fn start_statement_with_session(&self, schema: &str, sql: &str, session: &str) -> String {
        let first = self.start_statement_page(schema, sql, session).await;
        first["id"].as_str().expect("query id").to_string()
    }

    /// The same, handing back the first `QueryResults` (its `nextUri` carries the
    /// query's slug).
    pub async fn start_statement_page(&self, schema: &str, sql: &str, session: &str) -> Value {
        let mut request = reqwest::Client::new()
            .post(format!("{}/v1/statement", self.coordinator.url))
            .header("X-Trino-Catalog", "tpch")
            .header("X-Trino-Schema", schema);
        if !session.is_empty() {
            request = request.header("X-Trino-Session", session);
        }
        request.body(sql.to_string()).send().await.expect("statement accepted").json().await.expect("QueryResults JSON")
    }

    /// Waits (bounded) until the workers hold at least `n` tasks.
    pub async fn wait_for_tasks(&self, n: usize) {
        let deadline = Instant::now() + Duration::from_secs(30);
        while self.remaining_tasks().await.len() < n {
            assert!(Instant::now() < deadline, "query never started {n} tasks");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Waits (bounded) until no worker holds a task of any query.
    pub async fn assert_no_tasks_left(&self) {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let left = self.remaining_tasks().await;
            if left.is_empty() {
                return;
            }
            if Instant::now() > deadline {
                panic!("tasks left on workers: {left:?}");
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

/// Single-node DataFusion's answer, encoded as the protocol encodes values.
pub async fn oracle(schema: &str, sql: &str) -> Vec<Vec<Value>> {
    let ctx = single_node_context(schema, 2);
    let batches = ctx.sql(sql).await.expect("oracle plans").collect().await.expect("oracle runs");
    batches.iter().flat_map(|b| batch_to_json_rows(b).expect("encode")).collect()
}

/// Relative tolerance for floating point values, whose sums depend on the order in
/// which partial aggregates meet. Decimals are strings and compared exactly.
pub const FLOAT_TOLERANCE: f64 = 1e-9;

fn values_equal(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) if x.is_f64() || y.is_f64() => {
            let (x, y) = (x.as_f64().unwrap(), y.as_f64().unwrap());
            (x - y).abs() <= FLOAT_TOLERANCE * x.abs().max(y.abs()).max(1.0)
        }
        _ => a == b,
    }
}

fn sort_key(row: &[Value]) -> String {
    serde_json::to_string(row).unwrap()
}

/// Asserts the rows are equal: in order when the query orders them, as multisets
/// otherwise.
pub fn assert_same_rows(label: &str, sql: &str, got: &[Vec<Value>], want: &[Vec<Value>]) {
    assert_eq!(got.len(), want.len(), "{label}: {} rows, expected {}", got.len(), want.len());
    let ordered = sql.to_lowercase().contains("order by");
    let (mut g, mut w) = (got.to_vec(), want.to_vec());
    if !ordered {
        g.sort_by_key(|r| sort_key(r));
        w.sort_by_key(|r| sort_key(r));
    }
    for (i, (a, b)) in g.iter().zip(w.iter()).enumerate() {
        assert_eq!(a.len(), b.len(), "{label}: row {i} width");
        let same = a.iter().zip(b.iter()).all(|(x, y)| values_equal(x, y));
        assert!(same, "{label}: row {i} differs\n got:  {a:?}\n want: {b:?}");
    }
}

/// CPU time (user + system) a process has used so far, from `/proc/PID/stat`.
pub fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after the command name, which is in parentheses and may hold spaces.
    let rest = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| fields.get(i).and_then(|f| f.parse::<u64>().ok()).unwrap_or(0);
    // utime and stime are fields 14 and 15 of the line, 12 and 13 after the name.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    (ticks(11) + ticks(12)) as f64 / hz
}

/// Peak resident memory of a process so far (VmHWM), in bytes; 0 once it is gone.
pub fn peak_rss(pid: u32) -> u64 {
    status_bytes(pid, "VmHWM:")
}

/// Resident memory of a process now (VmRSS), in bytes; 0 once it is gone.
pub fn rss(pid: u32) -> u64 {
    status_bytes(pid, "VmRSS:")
}

/// A `kB` line of `/proc/PID/status`, in bytes.
fn status_bytes(pid: u32, key: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix(key))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map(|kb| kb * 1024)
        .unwrap_or(0)
}

/// Heap bytes a node has in use (its `/v1/info`'s `heapUsed`, a worker's
/// `heap_used`): unlike the resident size, free memory its allocator keeps is not in it.
pub async fn heap_used(base: &str) -> u64 {
    let info: Value =
        reqwest::get(format!("{base}/v1/info")).await.expect("node answers").json().await.expect("info JSON");
    let used = info.get("heapUsed").or_else(|| info.get("heap_used")).and_then(Value::as_u64);
    used.unwrap_or_else(|| panic!("no heap figure in {info}"))
}

/// `GET /v1/query/{id}` of the coordinator at `base`: the query's info.
pub async fn query_info(base: &str, id: &str) -> Value {
    reqwest::get(format!("{base}/v1/query/{id}"))
        .await
        .expect("coordinator answers")
        .json()
        .await
        .expect("query info JSON")
}

/// Waits (bounded) until the query is FINISHED or FAILED and returns its info.
pub async fn wait_for_query_end(base: &str, id: &str) -> Value {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let info = query_info(base, id).await;
        if info["state"] == "FAILED" || info["state"] == "FINISHED" {
            return info;
        }
        assert!(Instant::now() < deadline, "query {id} did not end: {info}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A loopback port free at the time of asking (for a coordinator that must come back
/// on the same address after a restart).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// A loopback port that refuses connections for as long as the returned socket lives:
/// bound, so no other process (another test's server) can take it, but never
/// listening, so the kernel answers every connection with a reset.
pub fn refusing_port() -> (tokio::net::TcpSocket, u16) {
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let port = socket.local_addr().unwrap().port();
    (socket, port)
}

/// A cluster started from configuration directories under `root`: the coordinator's
/// (`node.data-dir` below it, so catalogs keep their tables) on a fixed port, and
/// one per worker, every node with the given catalogs besides `tpch`.
pub struct EtcCluster {
    pub root: std::path::PathBuf,
    pub port: u16,
    pub cluster: Cluster,
    /// Environment variables every process of the cluster is started with.
    env: Vec<(String, String)>,
}

const ETC_SECRET: &str = "etc-cluster-secret-0123456789";

impl EtcCluster {
    pub async fn start(root: &std::path::Path, catalogs: &[(&str, &str)], workers: usize) -> EtcCluster {
        Self::start_with_env(root, catalogs, workers, &[]).await
    }

    /// `start`, every process with the environment variables `env` set.
    pub async fn start_with_env(
        root: &std::path::Path,
        catalogs: &[(&str, &str)],
        workers: usize,
        env: &[(&str, &str)],
    ) -> EtcCluster {
        let env: Vec<(String, String)> = env.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        let port = free_port();
        let write_etc = |dir: &std::path::Path, config: String, node: String| {
            std::fs::create_dir_all(dir.join("catalog")).unwrap();
            std::fs::write(dir.join("config.properties"), config).unwrap();
            std::fs::write(dir.join("node.properties"), node).unwrap();
            std::fs::write(dir.join("catalog/tpch.properties"), TPCH_BENCHMARK_CATALOG).unwrap();
            for (name, text) in catalogs {
                std::fs::write(dir.join(format!("catalog/{name}.properties")), text).unwrap();
            }
        };
        write_etc(
            &root.join("etc-coordinator"),
            // Distributed like `Cluster`'s queries (see `start_with`), here as the
            // cluster's default in its configuration file.
            format!("coordinator=true\ninternal-communication.shared-secret={ETC_SECRET}\nsingle-task-max-rows=0\n"),
            format!("node.environment=test\nnode.data-dir={}\n", root.join("data").display()),
        );
        for i in 0..workers {
            write_etc(
                &root.join(format!("etc-worker{i}")),
                format!(
                    "coordinator=false\ndiscovery.uri=http://127.0.0.1:{port}\n\
                     internal-communication.shared-secret={ETC_SECRET}\n"
                ),
                "node.environment=test\n".into(),
            );
        }
        let coordinator = Self::spawn_coordinator(root, port, &env);
        let ws = (0..workers)
            .map(|i| {
                let etc = root.join(format!("etc-worker{i}")).display().to_string();
                spawn_with(&["worker", "--etc", &etc, "--bind", "127.0.0.1:0"], Stdio::inherit(), &env)
            })
            .collect();
        let cluster = Cluster { coordinator, workers: ws, secret: Some(ETC_SECRET.into()) };
        cluster.wait_for_workers(workers).await;
        EtcCluster { root: root.to_path_buf(), port, cluster, env }
    }

    fn spawn_coordinator(root: &std::path::Path, port: u16, env: &[(String, String)]) -> Proc {
        let etc = root.join("etc-coordinator").display().to_string();
        spawn_with(&["coordinator", "--etc", &etc, "--bind", &format!("127.0.0.1:{port}")], Stdio::inherit(), env)
    }

    /// Kills the coordinator and starts it again on the same address and directory;
    /// waits for the live workers to find it.
    pub async fn restart_coordinator(&mut self) {
        let old = std::mem::replace(&mut self.cluster.coordinator, Self::placeholder());
        drop(old);
        // The port is ours again once the old process is gone.
        let deadline = Instant::now() + Duration::from_secs(10);
        while std::net::TcpListener::bind(("127.0.0.1", self.port)).is_err() {
            assert!(Instant::now() < deadline, "port {} stayed busy", self.port);
            std::thread::sleep(Duration::from_millis(50));
        }
        self.cluster.coordinator = Self::spawn_coordinator(&self.root, self.port, &self.env);
        self.cluster.wait_for_workers(self.cluster.workers.len()).await;
    }

    fn placeholder() -> Proc {
        Proc { child: Command::new("true").spawn().expect("spawn true"), url: String::new() }
    }

    pub fn client(&self, catalog: &str, schema: &str) -> StatementClient {
        StatementClient::new(&self.cluster.coordinator.url).with_catalog(catalog).with_schema(schema)
    }
}

/// Every regular file below `dir` (none when it does not exist).
pub fn files_below(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else { continue };
        for e in entries.flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

/// The name and message of a query's error; anything else fails the test.
pub fn query_error(r: Result<flotilla::client::QueryOutcome, flotilla::client::ClientError>) -> (String, String) {
    match r {
        Err(flotilla::client::ClientError::Query(e)) => (e.error_name.to_string(), e.message),
        other => panic!("expected a query error, got {other:?}"),
    }
}

/// The tasks a worker holds (`GET /v1/task`), or None when it does not answer within
/// 2 s.
pub async fn tasks_on(http: &reqwest::Client, worker: &str, secret: Option<&str>) -> Option<Vec<Value>> {
    let mut req = http.get(format!("{worker}/v1/task")).timeout(std::time::Duration::from_secs(2));
    if let Some(s) = secret {
        req = req.header("x-flotilla-internal-token", s);
    }
    req.send().await.ok()?.json().await.ok()
}

/// A Python named by the environment variable `var` (a throwaway virtualenv
/// `.ci/run` makes), or the machine's `python3`, that can run `import {imports}`.
pub fn python_with(var: &str, imports: &str) -> Option<std::path::PathBuf> {
    let candidates =
        std::env::var_os(var).map(std::path::PathBuf::from).into_iter().chain([std::path::PathBuf::from("python3")]);
    candidates.into_iter().find(|p| {
        std::process::Command::new(p)
            .args(["-c", &format!("import {imports}")])
            .stderr(std::process::Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    })
}

/// The `.parquet` files an EXPLAIN lists (each once: a big file is read in byte
/// ranges, `file.parquet:0..840835`).
pub fn scanned_files(plan: &[Vec<Value>]) -> Vec<String> {
    let text: String = plan.iter().map(|r| r[0].as_str().unwrap_or_default().to_string()).collect();
    assert!(!text.contains(", ...]"), "the plan lists every file it reads:\n{text}");
    let files: std::collections::BTreeSet<String> = text
        .split(|c: char| c == '[' || c == ']' || c == ',' || c.is_whitespace())
        .map(|w| w.split(':').next().unwrap_or_default())
        .filter(|w| w.ends_with(".parquet"))
        .map(str::to_string)
        .collect();
    files.into_iter().collect()
}
