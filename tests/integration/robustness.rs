//! The cluster survives its users: busy workers stay in the cluster and answer their
//! task API, a cancel frees the cores (of a cross join, and of joins, scans,
//! aggregations and sorts that emit nothing for long), deep or huge statements get
//! clear errors, a user's constant expressions stay within the functions' limits, and
//! tasks of a dead coordinator expire.

use std::time::{Duration, Instant};

use serde_json::Value;

use super::common::{assert_same_rows, cpu_seconds, oracle, peak_rss, query_info, wait_for_query_end, Cluster};

/// 2.25 * 10^10 row pairs: minutes of CPU on this machine, so it is still running
/// whenever the test looks.
const CROSS_JOIN: &str = "SELECT max(a.o_orderkey + b.o_orderkey) FROM orders a, orders b";

fn worker_cpu(cluster: &Cluster) -> f64 {
    cluster.workers.iter().map(|w| cpu_seconds(w.child.id())).sum()
}

async fn live_workers(http: &reqwest::Client, coordinator: &str) -> usize {
    let nodes: Vec<Value> = http.get(format!("{coordinator}/v1/node")).send().await.unwrap().json().await.unwrap();
    nodes.iter().filter(|n| n["alive"] == Value::Bool(true)).count()
}

/// Waits (bounded) until the workers' CPU time grows by less than `idle` seconds per
/// second; returns how long that took.
async fn wait_for_idle_cores(cluster: &Cluster, idle: f64, within: Duration) -> Duration {
    let started = Instant::now();
    loop {
        let before = worker_cpu(cluster);
        tokio::time::sleep(Duration::from_millis(500)).await;
        let rate = (worker_cpu(cluster) - before) / 0.5;
        if rate < idle {
            return started.elapsed();
        }
        assert!(started.elapsed() < within, "workers still burn {rate:.2} cores {within:?} after the cancel");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn busy_workers_answer_stay_alive_and_a_cancel_frees_their_cores() {
    let cluster = Cluster::start(2, &[]).await;
    let http = reqwest::Client::new();
    let base = cluster.coordinator.url.clone();
    let id = cluster.start_statement("sf0_1", CROSS_JOIN).await;
    cluster.wait_for_tasks(1).await;
    // Wait until the join really runs (other tests may share the cores).
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let before = worker_cpu(&cluster);
        tokio::time::sleep(Duration::from_millis(500)).await;
        if (worker_cpu(&cluster) - before) / 0.5 > 0.5 {
            break;
        }
        assert!(Instant::now() < deadline, "the cross join never loaded the workers");
    }
    // For longer than the coordinator's worker timeout (5 s), the task API answers
    // fast and no worker is declared lost.
    let mut slowest = Duration::ZERO;
    let until = Instant::now() + Duration::from_secs(7);
    while Instant::now() < until {
        for w in &cluster.workers {
            let asked = Instant::now();
            let resp = http
                .get(format!("{}/v1/task", w.url))
                .timeout(Duration::from_secs(10))
                .send()
                .await
                .expect("task API answers");
            assert!(resp.status().is_success());
            slowest = slowest.max(asked.elapsed());
        }
        assert_eq!(live_workers(&http, &base).await, 2, "a busy worker was declared lost");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    println!("GET /v1/task under a CPU-bound join: slowest answer {slowest:?}");
    assert!(slowest < Duration::from_secs(2), "the task API took {slowest:?} to answer under load");
    let info = query_info(&base, &id).await;
    assert_eq!(info["state"], "RUNNING", "the join should still run: {}", info["error"]);

    let cancelled = Instant::now();
    let resp = http.delete(format!("{base}/v1/query/{id}")).send().await.unwrap();
    assert!(resp.status().is_success());
    let info = wait_for_query_end(&base, &id).await;
    assert_eq!(info["error"]["error_name"], "USER_CANCELED", "{info}");
    let freed = wait_for_idle_cores(&cluster, 0.3, Duration::from_secs(10)).await;
    println!("cores free {:?} after the DELETE", cancelled.elapsed().min(freed + Duration::from_millis(500)));
    cluster.assert_no_tasks_left().await;
    let got = cluster.client("tiny").execute("SELECT count(*) FROM orders").await.expect("the next query runs");
    assert_same_rows("after cancel", "", &got.rows, &oracle("tiny", "SELECT count(*) FROM orders").await);

    // Shapes that run long without emitting a batch: each loop reaches a yield, so
    // a cancel frees the cores as quickly.
    for (label, schema, sql) in QUIET_SHAPES {
        let freed = cancelled_under_load(&cluster, &http, schema, sql).await;
        println!("{label}: cores free {freed:?} after the DELETE");
        assert!(freed <= Duration::from_secs(2), "{label} kept the cores {freed:?} after its cancel");
        cluster.assert_no_tasks_left().await;
    }
}

/// Queries that emit nothing for a long while, each for a loop that must still yield.
const QUIET_SHAPES: [(&str, &str, &str); 5] = [
    // 2.25 * 10^12 row pairs at sf1, none of which passes the filter.
    ("filtered cross join", "sf1", "SELECT count(*) FROM orders a, orders b WHERE a.o_totalprice + b.o_totalprice < 0"),
    // Each probe row meets half a million build rows; the filter keeps none.
    (
        "hash join on a key of three values",
        "sf1",
        "SELECT count(*) FROM orders a JOIN orders b ON a.o_orderstatus = b.o_orderstatus \
         WHERE a.o_totalprice + b.o_totalprice < 0",
    ),
    (
        "scan whose filter rejects every row",
        "sf10",
        "SELECT count(*) FROM lineitem WHERE l_comment = 'no such comment'",
    ),
    (
        "aggregation over 60 million rows",
        "sf10",
        "SELECT l_comment, count(*) FROM lineitem GROUP BY l_comment HAVING count(*) < 0",
    ),
    (
        "sort of 60 million rows",
        "sf10",
        "SELECT max(rn) FROM (SELECT row_number() OVER (ORDER BY l_comment) rn FROM lineitem) t",
    ),
];

/// Starts `sql`, lets it load the workers for 3 s of busy time, cancels it, and
/// returns how long after the DELETE the workers' cores were idle (under 0.3 of a
/// core over half a second).
async fn cancelled_under_load(cluster: &Cluster, http: &reqwest::Client, schema: &str, sql: &str) -> Duration {
    let base = &cluster.coordinator.url;
    let id = cluster.start_statement(schema, sql).await;
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut busy = Duration::ZERO;
    // Long enough to be past generating the first rows and deep into the loop.
    while busy < Duration::from_secs(3) {
        let before = worker_cpu(cluster);
        tokio::time::sleep(Duration::from_millis(500)).await;
        if (worker_cpu(cluster) - before) / 0.5 > 0.5 {
            busy += Duration::from_millis(500);
        }
        assert!(Instant::now() < deadline, "{sql} never loaded the workers");
    }
    assert_eq!(query_info(base, &id).await["state"], "RUNNING", "{sql}");
    let cancelled = Instant::now();
    assert!(http.delete(format!("{base}/v1/query/{id}")).send().await.unwrap().status().is_success());
    let info = wait_for_query_end(base, &id).await;
    assert_eq!(info["error"]["error_name"], "USER_CANCELED", "{info}");
    // The idle half-second window that ends the wait is counted in.
    wait_for_idle_cores(cluster, 0.3, Duration::from_secs(10)).await;
    cancelled.elapsed()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_hundred_concurrent_clients_on_two_workers_all_succeed() {
    let cluster = Cluster::start(2, &[]).await;
    let sql = "SELECT l_returnflag, l_linestatus, count(*), sum(l_quantity) FROM lineitem GROUP BY 1, 2";
    let want = std::sync::Arc::new(oracle("tiny", sql).await);
    let base = cluster.coordinator.url.clone();
    // Watches membership for the whole run: a worker must never be declared lost.
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let watcher = tokio::spawn(async move {
        let http = reqwest::Client::new();
        let mut fewest = usize::MAX;
        while !*stopped.borrow() {
            fewest = fewest.min(live_workers(&http, &base).await);
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        fewest
    });
    let started = Instant::now();
    let mut clients = Vec::new();
    for c in 0..200usize {
        let client = cluster.client("tiny");
        let want = want.clone();
        clients.push(tokio::spawn(async move {
            let asked = Instant::now();
            let got = tokio::time::timeout(Duration::from_secs(300), client.execute(sql))
                .await
                .unwrap_or_else(|_| panic!("client {c} stuck"))
                .unwrap_or_else(|e| panic!("client {c} failed: {e}"));
            assert_same_rows(&format!("client {c}"), sql, &got.rows, &want);
            asked.elapsed()
        }));
    }
    let mut latencies = Vec::new();
    for c in clients {
        latencies.push(c.await.expect("client task"));
    }
    let total = started.elapsed();
    let _ = stop.send(true);
    let fewest = watcher.await.unwrap();
    latencies.sort();
    println!(
        "200 concurrent tiny queries on 2 workers: {total:?}, {:.1} queries/s, p50 {:?}, p99 {:?}",
        200.0 / total.as_secs_f64(),
        latencies[100],
        latencies[197]
    );
    assert_eq!(fewest, 2, "a worker was declared lost during the run");
    cluster.assert_no_tasks_left().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deep_long_and_huge_statements_get_answers_or_clear_errors() {
    let cluster = Cluster::start(1, &[]).await;
    let client = cluster.client("tiny");
    let refused = |sql: String, name: &'static str| {
        let client = client.clone();
        async move {
            match client.execute(&sql).await {
                Err(flotilla::client::ClientError::Query(flotilla::client::QueryError {
                    error_name, message, ..
                })) => {
                    assert_eq!(error_name, name, "{message}");
                    message
                }
                other => panic!("expected {name}, got {other:?}"),
            }
        }
    };
    let terms = format!("SELECT {}", vec!["1"; 10_000].join("+"));
    let m = refused(terms, "SYNTAX_ERROR").await;
    assert!(m.contains("nest"), "{m}");
    let parens = format!("SELECT {}1{}", "(".repeat(5000), ")".repeat(5000));
    refused(parens, "SYNTAX_ERROR").await;
    // Within the limit, a deep expression over a column runs on the workers.
    let deep = format!("SELECT count(*) FROM nation WHERE n_nationkey{} > 0", " + 1".repeat(300));
    let got = client.execute(&deep).await.expect("a 300-term expression runs");
    assert_same_rows("deep", "", &got.rows, &oracle("tiny", "SELECT count(*) FROM nation").await);
    // Deep plans ship: a 100-way join, a CASE nested 40 deep (the parser's limit is
    // 50) and one of 1,000 branches nest deeper than protobuf's default decoding limit.
    let joins: String =
        (1..100).map(|i| format!(" JOIN region r{i} ON r{i}.r_regionkey = r{}.r_regionkey", i - 1)).collect();
    let join_100 = format!("SELECT count(*), sum(r99.r_regionkey) FROM region r0{joins}");
    let got = client.execute(&join_100).await.expect("a 100-way join runs");
    assert_same_rows("100-way join", "", &got.rows, &oracle("tiny", &join_100).await);
    let nested = (0..40)
        .fold("n_nationkey".to_string(), |inner, i| format!("CASE WHEN n_nationkey = {i} THEN {i} ELSE {inner} END"));
    let flat: String = (0..1000).map(|i| format!(" WHEN n_name = 'x{i}' THEN {i}")).collect();
    let cases = format!("SELECT sum({nested}), sum(CASE{flat} ELSE n_regionkey END) FROM nation");
    let got = client.execute(&cases).await.expect("deep and wide CASE run");
    assert_same_rows("cases", "", &got.rows, &oracle("tiny", &cases).await);
    // Trino's arithmetic: overflow is NUMERIC_VALUE_OUT_OF_RANGE, on the coordinator
    // (no table) and on the workers, in operators, negation, abs, casts and sums
    // (integer and decimal); a division by zero and a cast of text that is no number
    // have their own codes.
    for overflowing in [
        "SELECT 9223372036854775807 + 1",
        "SELECT 4611686018427387904 * 4",
        "SELECT sum(x) FROM (VALUES (9223372036854775807), (9223372036854775807)) t(x)",
        "SELECT max(o_orderkey * 4611686018427387904) FROM orders",
        "SELECT sum(CAST(9223372036854775807 AS BIGINT) - o_orderkey) FROM orders",
        "SELECT o_orderstatus, sum(o_orderkey + 9223372036854000000) FROM orders GROUP BY 1",
        "SELECT max(-CAST(o_orderkey * 0 - 2147483648 AS INTEGER)) FROM orders",
        "SELECT max(abs(o_orderkey * 0 - 9223372036854775807 - 1)) FROM orders",
        "SELECT max(CAST(o_orderkey AS TINYINT)) FROM orders",
        "SELECT max(s) FROM (SELECT sum(o_orderkey + 9223372036854000000) OVER (ORDER BY o_orderkey \
         ROWS BETWEEN 1 PRECEDING AND CURRENT ROW) s FROM orders) t",
        "SELECT sum(CAST(o_orderkey AS DECIMAL(38,0)) * CAST('9999999999999999999999999999999999' AS DECIMAL(38,0))) \
         FROM orders",
    ] {
        refused(overflowing.to_string(), "NUMERIC_VALUE_OUT_OF_RANGE").await;
    }
    refused("SELECT sum(o_orderkey / (o_custkey - o_custkey)) FROM orders".into(), "DIVISION_BY_ZERO").await;
    refused("SELECT max(CAST(o_orderstatus AS INTEGER)) FROM orders".into(), "INVALID_CAST_ARGUMENT").await;
    let sums = "SELECT o_orderstatus, sum(o_orderkey), sum(o_custkey * 2 - 1), count(*) FROM orders GROUP BY 1";
    let got = client.execute(sums).await.expect("sums in range");
    assert_same_rows("integer sums", sums, &got.rows, &oracle("tiny", sums).await);
    let sliding = "SELECT sum(s), count(s) FROM (SELECT sum(o_orderkey) OVER (PARTITION BY o_custkey \
        ORDER BY o_orderdate, o_orderkey ROWS BETWEEN 2 PRECEDING AND CURRENT ROW) s FROM orders) t";
    let got = client.execute(sliding).await.expect("sliding sums in range");
    assert_same_rows("sliding sums", sliding, &got.rows, &oracle("tiny", sliding).await);
    // A statement of about 2 MB: a long IN list.
    let keys: Vec<String> = (1..=300_000).map(|k| (k * 3).to_string()).collect();
    let in_list = format!("SELECT count(*), sum(o_totalprice) FROM orders WHERE o_orderkey IN ({})", keys.join(","));
    assert!(in_list.len() > 2_000_000, "{}", in_list.len());
    let got = client.execute(&in_list).await.expect("a 2 MB statement runs");
    assert_same_rows("in-list", "", &got.rows, &oracle("tiny", &in_list).await);
    // Past the coordinator's limit: Trino's error, as a failed query.
    let huge = format!("SELECT 1 -- {}", "x".repeat(16 << 20));
    refused(huge, "QUERY_TEXT_TOO_LARGE").await;
    let got = client.execute("SELECT count(*) FROM region").await.expect("the coordinator still answers");
    assert_same_rows("after", "", &got.rows, &oracle("tiny", "SELECT count(*) FROM region").await);
    cluster.assert_no_tasks_left().await;
}

/// What a function may make is bounded on every node (`functions::bounded`): the
/// probes that took the coordinator to 7.8 GB while it folded constants, three at
/// once, each refused with its code, and the same over a table on the workers; the
/// nodes' peak resident size stays far below what one probe used to take.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_users_constant_expressions_stay_within_the_functions_limits() {
    let cluster = Cluster::start(1, &[]).await;
    let client = cluster.client("tiny");
    let probes = [
        ("SELECT cardinality(repeat('x', 2000000000))", "EXCEEDED_FUNCTION_MEMORY_LIMIT"),
        ("SELECT length(lpad('x', 2000000000))", "EXCEEDED_FUNCTION_MEMORY_LIMIT"),
        ("SELECT length(rpad('x', 2000000000))", "EXCEEDED_FUNCTION_MEMORY_LIMIT"),
        ("SELECT cardinality(transform(sequence(1, 100000000), x -> x))", "INVALID_FUNCTION_ARGUMENT"),
        ("SELECT count(*) FROM unnest(sequence(1, 100000000))", "INVALID_FUNCTION_ARGUMENT"),
        ("SELECT max(length(lpad(n_name, 100000000))) FROM nation", "EXCEEDED_FUNCTION_MEMORY_LIMIT"),
        ("SELECT max(cardinality(sequence(1, n_nationkey * 1000000))) FROM nation", "INVALID_FUNCTION_ARGUMENT"),
    ];
    for round in probes.chunks(3) {
        let runs = round.iter().map(|(sql, code)| {
            let client = client.clone();
            async move {
                match client.execute(sql).await {
                    Err(flotilla::client::ClientError::Query(e)) => {
                        assert_eq!(e.error_name, *code, "{sql}: {}", e.message)
                    }
                    other => panic!("{sql} was not refused: {other:?}"),
                }
            }
        });
        futures::future::join_all(runs).await;
    }
    // Values of everyday sizes, on the coordinator and on the workers.
    let got = client.execute("SELECT length(lpad('', 2000000, 'ab')), cardinality(sequence(1, 10000))").await.unwrap();
    assert_eq!(got.rows, vec![vec![Value::from(2_000_000), Value::from(10_000)]]);
    let padded = "SELECT sum(length(lpad(n_name, 1000, '*'))) FROM nation";
    assert_eq!(client.execute(padded).await.unwrap().rows, vec![vec![Value::from(25_000)]]);
    let (coordinator, worker) = (peak_rss(cluster.coordinator.child.id()), peak_rss(cluster.workers[0].child.id()));
    eprintln!("peak resident size: coordinator {} MB, worker {} MB", coordinator >> 20, worker >> 20);
    assert!(coordinator < 1 << 30 && worker < 1 << 30, "coordinator {coordinator} B, worker {worker} B");
    cluster.assert_no_tasks_left().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_query_still_planning_is_cancelled_and_planning_time_is_limited() {
    let cluster = Cluster::start(1, &[]).await;
    let http = reqwest::Client::new();
    let base = cluster.coordinator.url.clone();
    // Planning this takes seconds (the optimizer is superlinear in expression depth).
    let slow = format!("SELECT count(*) FROM nation WHERE n_nationkey{} > 0", " + 1".repeat(490));
    let id = cluster.start_statement("tiny", &slow).await;
    let info = query_info(&base, &id).await;
    assert_eq!(info["state"], "PLANNING", "{info}");
    let asked = Instant::now();
    http.delete(format!("{base}/v1/query/{id}")).send().await.unwrap();
    let info = wait_for_query_end(&base, &id).await;
    assert_eq!(info["error"]["error_name"], "USER_CANCELED", "{info}");
    assert!(asked.elapsed() < Duration::from_secs(2), "cancel during planning took {:?}", asked.elapsed());
    let limited = cluster.client("tiny").with_session("query_max_planning_time", "100ms");
    match limited.execute(&slow).await {
        Err(flotilla::client::ClientError::Query(flotilla::client::QueryError { error_name, message, .. })) => {
            assert_eq!(error_name, "EXCEEDED_TIME_LIMIT", "{message}");
        }
        other => panic!("expected EXCEEDED_TIME_LIMIT, got {other:?}"),
    }
    let got = cluster.client("tiny").execute("SELECT count(*) FROM nation").await.expect("next query");
    assert_same_rows("after", "", &got.rows, &oracle("tiny", "SELECT count(*) FROM nation").await);
    cluster.assert_no_tasks_left().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tasks_of_a_killed_coordinator_expire_on_the_workers() {
    let mut cluster = Cluster::start(2, &["--task-client-timeout", "3s"]).await;
    cluster.start_statement("sf0_1", CROSS_JOIN).await;
    cluster.wait_for_tasks(2).await;
    let _ = cluster.coordinator.child.kill();
    let _ = cluster.coordinator.child.wait();
    let killed = Instant::now();
    let deadline = killed + Duration::from_secs(20);
    while !cluster.remaining_tasks().await.is_empty() {
        assert!(Instant::now() < deadline, "tasks still on the workers 20 s after the coordinator died");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    println!("orphaned tasks gone {:?} after kill -9 of the coordinator (timeout 3 s)", killed.elapsed());
    wait_for_idle_cores(&cluster, 0.3, Duration::from_secs(10)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_busy_worker_stops_on_sigterm() {
    // SIGTERM drains: the running query may finish within the grace period, and after
    // it the worker stops anyway, aborting what is left, and its spill directory.
    let spill_tmp = tempfile::Builder::new().prefix("flotilla-spill-it-").tempdir().unwrap();
    let spill = spill_tmp.path().to_path_buf();
    let spill_arg = spill.display().to_string();
    let mut cluster = Cluster::start(1, &["--shutdown-grace-period", "1s", "--spill-path", &spill_arg]).await;
    let made: Vec<_> = std::fs::read_dir(&spill).expect("the worker makes its spill directory").collect();
    assert_eq!(made.len(), 1, "one directory, the worker's own");
    cluster.start_statement("sf0_1", CROSS_JOIN).await;
    cluster.wait_for_tasks(1).await;
    let pid = cluster.workers[0].child.id();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let before = cpu_seconds(pid);
        tokio::time::sleep(Duration::from_millis(500)).await;
        if (cpu_seconds(pid) - before) / 0.5 > 0.5 {
            break;
        }
        assert!(Instant::now() < deadline, "the cross join never loaded the worker");
    }
    // SAFETY: sending a signal to our own child process.
    assert_eq!(unsafe { libc::kill(pid as i32, libc::SIGTERM) }, 0);
    let signalled = Instant::now();
    let status = loop {
        if let Some(status) = cluster.workers[0].child.try_wait().unwrap() {
            break status;
        }
        assert!(signalled.elapsed() < Duration::from_secs(10), "a busy worker ignored SIGTERM (grace 1 s) for 10 s");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    println!("busy worker exited {:?} after SIGTERM ({status})", signalled.elapsed());
    assert!(status.success(), "{status}");
    let left: Vec<_> = std::fs::read_dir(&spill).unwrap().map(|e| e.unwrap().path()).collect();
    assert!(left.is_empty(), "a stopped worker left {left:?} in its spill path");
}
