//! A query's life through the statement protocol and the CLI: lossless paging under
//! retried requests, abandoned and panicking queries cleaned up, final task states in
//! query info, JSON errors for what axum rejects, URIs from our own address, and a CLI
//! that streams a large result in flat memory.

use std::io::Read;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::common::{assert_same_rows, heap_used, oracle, peak_rss, query_info, rss, wait_for_query_end, Cluster, BIN};

/// Follows `nextUri`, sending every request twice at once (a client retrying a
/// request that timed out); both answers must be the same page.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn doubled_page_requests_lose_and_double_nothing() {
    let cluster = Cluster::start(2, &[]).await;
    let base = cluster.coordinator.url.clone();
    let http = reqwest::Client::new();
    let sql = "SELECT l_orderkey, l_linenumber FROM lineitem";
    let mut page: Value = http
        .post(format!("{base}/v1/statement"))
        .header("X-Trino-Schema", "sf0_1")
        .body(sql)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let first_next = page["nextUri"].as_str().unwrap().to_string();
    let mut rows: Vec<Vec<Value>> = Vec::new();
    let mut doubled = 0;
    while let Some(next) = page["nextUri"].as_str().map(str::to_string) {
        assert!(next.starts_with(&base), "nextUri {next} is not on the coordinator's address {base}");
        let (a, b) = tokio::join!(http.get(&next).send(), http.get(&next).send());
        let (a, b): (Value, Value) = (a.unwrap().json().await.unwrap(), b.unwrap().json().await.unwrap());
        assert_eq!(a["data"], b["data"], "two requests for {next} got different rows");
        assert_eq!(a["nextUri"], b["nextUri"]);
        doubled += 1;
        if let Some(data) = a["data"].as_array() {
            rows.extend(data.iter().map(|r| r.as_array().unwrap().clone()));
        }
        page = a;
    }
    assert!(page.get("error").is_none(), "{page}");
    println!("{} rows over {doubled} doubled page requests", rows.len());
    assert_same_rows("doubled paging", sql, &rows, &oracle("sf0_1", sql).await);
    // The last page stays the current one; a token that is neither it nor the next is refused.
    let resp = http.get(&first_next).send().await.unwrap();
    assert_eq!(resp.status().as_u16(), 410);
    let body: Value = resp.json().await.unwrap();
    assert_eq!(body["error"]["code"], "INVALID_TOKEN", "{body}");
    cluster.assert_no_tasks_left().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_query_whose_client_disappears_is_abandoned_with_its_tasks() {
    let cluster = Cluster::start_with(&["--query-client-timeout", "5s"], 2, &[]).await;
    let started = Instant::now();
    let id = cluster.start_statement("sf1", "SELECT l_orderkey, count(*) FROM lineitem GROUP BY l_orderkey").await;
    cluster.wait_for_tasks(1).await;
    let info = wait_for_query_end(&cluster.coordinator.url, &id).await;
    assert_eq!(info["error"]["error_name"], "ABANDONED_QUERY", "{info}");
    // Not before the timeout, and soon after it (the query alone runs far longer).
    let ended = started.elapsed();
    assert!(ended >= Duration::from_secs(5) && ended < Duration::from_secs(15), "abandoned after {ended:?}");
    cluster.assert_no_tasks_left().await;
}

/// Queries POSTed and never polled do not pile up: each is abandoned, or its unread
/// rows dropped, once its client is `query.client.timeout` late, and the
/// coordinator's memory comes back; cancelled queries give the workers' back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unpolled_and_cancelled_queries_leave_no_memory_behind() {
    let cluster = Cluster::start_with(&["--query-client-timeout", "3s"], 2, &[]).await;
    let base = cluster.coordinator.url.clone();
    let sql = "SELECT * FROM tpch.tiny.orders";
    let coordinator_pid = cluster.coordinator.child.id();
    let workers_rss = || cluster.workers.iter().map(|w| rss(w.child.id())).sum::<u64>();
    let workers_heap = || async {
        let mut sum = 0;
        for w in &cluster.workers {
            sum += heap_used(&w.url).await;
        }
        sum
    };
    // Warm: the process's caches and pools are made by the first queries, and the
    // query history (the last 200 queries, plans included) is full of ones like
    // those below, read to their end by their client.
    let warm = oracle("tiny", "SELECT count(*) FROM orders").await;
    let mut readers = tokio::task::JoinSet::new();
    for _ in 0..8 {
        let client = cluster.client("tiny");
        readers.spawn(async move {
            for _ in 0..25 {
                assert_eq!(client.execute(sql).await.unwrap().rows.len(), 15_000);
            }
        });
    }
    while let Some(r) = readers.join_next().await {
        r.unwrap();
    }
    let got = cluster.client("tiny").execute("SELECT count(*) FROM (SELECT * FROM orders) t").await.unwrap();
    assert_same_rows("warm", "", &got.rows, &warm);
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let coordinator_before = heap_used(&base).await;
    let coordinator_rss_before = rss(coordinator_pid);

    let mut ids = Vec::new();
    for _ in 0..200 {
        ids.push(cluster.start_statement("tiny", sql).await);
    }
    let deadline = Instant::now() + Duration::from_secs(60);
    for id in &ids {
        let info = loop {
            let info = query_info(&base, id).await;
            if info["state"] == "FAILED" || info["state"] == "FINISHED" {
                break info;
            }
            assert!(Instant::now() < deadline, "query {id} never ended: {info}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        };
        assert!(
            info["state"] == "FINISHED" || info["error"]["error_name"] == "ABANDONED_QUERY",
            "an unpolled query ends by itself or as abandoned: {info}"
        );
    }
    // Past the timeout every unread row is gone; a late client is told so.
    tokio::time::sleep(Duration::from_secs(4)).await;
    let first = cluster.start_statement_page("tiny", sql, "").await;
    let late = first["nextUri"].as_str().unwrap().to_string();
    tokio::time::sleep(Duration::from_secs(5)).await;
    let resp = reqwest::get(&late).await.unwrap();
    let status = resp.status().as_u16();
    let body: Value = resp.json().await.unwrap();
    let said = status == 410 || body["error"]["errorName"] == "ABANDONED_QUERY";
    assert!(said, "a late client learns its rows are gone: {status} {body}");
    cluster.assert_no_tasks_left().await;
    // The memory comes back by itself, within a bounded time (the sweeps run twice a
    // second; a slow machine may still be tearing the last queries down).
    let bound = coordinator_before + coordinator_before / 10 + (32 << 20);
    let deadline = Instant::now() + Duration::from_secs(20);
    let coordinator_after = loop {
        tokio::time::sleep(Duration::from_secs(1)).await;
        let used = heap_used(&base).await;
        if used < bound || Instant::now() > deadline {
            break used;
        }
    };
    let coordinator_rss_after = rss(coordinator_pid);
    println!(
        "coordinator heap {coordinator_before} before 200 unpolled queries, {coordinator_after} after \
         (RSS {coordinator_rss_before}, {coordinator_rss_after})"
    );
    assert!(
        coordinator_after < bound,
        "the coordinator kept {coordinator_after} bytes against {coordinator_before} before"
    );

    // 200 queries cancelled while they run: the workers' memory returns too (measured
    // against the workers after the first 10 such queries).
    let big = "SELECT o_custkey, count(*), max(o_comment) FROM tpch.sf1.orders GROUP BY 1";
    let http = reqwest::Client::new();
    let (mut workers_before, mut workers_rss_before) = (0, 0);
    for i in 0..210 {
        if i == 10 {
            cluster.assert_no_tasks_left().await;
            tokio::time::sleep(Duration::from_secs(3)).await;
            workers_before = workers_heap().await;
            workers_rss_before = workers_rss();
        }
        let first = cluster.start_statement_page("sf1", big, "").await;
        tokio::time::sleep(Duration::from_millis(20)).await;
        http.delete(first["nextUri"].as_str().unwrap()).send().await.unwrap();
    }
    cluster.assert_no_tasks_left().await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let workers_after = workers_heap().await;
    println!(
        "workers' heap {workers_before} before 200 cancelled queries, {workers_after} after \
         (RSS {workers_rss_before}, {})",
        workers_rss()
    );
    assert!(
        workers_after <= workers_before + workers_before / 10,
        "the workers kept {workers_after} bytes against {workers_before} before"
    );
    // And they give it back to the system with no further work: what cancelled tasks
    // freed after the workers went idle is trimmed too.
    let deadline = Instant::now() + Duration::from_secs(10);
    while workers_rss() > workers_rss_before + workers_rss_before / 5 + (64 << 20) {
        assert!(
            Instant::now() < deadline,
            "the workers stay at {} bytes resident, {workers_rss_before} before",
            workers_rss()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panicking_query_runner_fails_its_query_only() {
    let cluster = Cluster::start_with(&["--enable-failure-injection"], 2, &[]).await;
    let client = cluster.client("tiny").with_session("test_inject_runner_panic", "true");
    match client.execute("SELECT l_orderkey, l_quantity FROM lineitem").await {
        Err(flotilla::client::ClientError::Query(flotilla::client::QueryError { error_name, message, .. })) => {
            assert_eq!(error_name, "GENERIC_INTERNAL_ERROR", "{message}");
            assert!(message.contains("panicked"), "{message}");
        }
        other => panic!("expected a failed query, got {other:?}"),
    }
    cluster.assert_no_tasks_left().await;
    let sql = "SELECT count(*) FROM lineitem";
    let got = cluster.client("tiny").execute(sql).await.expect("the next query runs");
    assert_same_rows("after panic", sql, &got.rows, &oracle("tiny", sql).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn finished_queries_show_finished_tasks_and_the_cli_takes_leading_comments() {
    let cluster = Cluster::start(2, &[]).await;
    let sql = "SELECT n_regionkey, count(*) FROM nation GROUP BY n_regionkey";
    let got = cluster.client("tiny").execute(sql).await.expect("query");
    let info = query_info(&cluster.coordinator.url, &got.id).await;
    let stages = info["stages"].as_array().expect("stages");
    assert!(!stages.is_empty());
    for stage in stages {
        for task in stage["tasks"].as_array().expect("tasks") {
            assert_eq!(task["state"], "FINISHED", "{task}");
        }
    }
    let out = Command::new(BIN)
        .args([
            "sql",
            "--server",
            &cluster.coordinator.url,
            "--output-format",
            "csv",
            "-e",
            "-- a note\nSELECT count(*) FROM region",
        ])
        .output()
        .expect("run flotilla sql");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let want = oracle("tiny", "SELECT count(*) FROM region").await;
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), want[0][0].to_string());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rejected_requests_are_json_and_uris_ignore_untrusted_headers() {
    let cluster = Cluster::start(1, &[]).await;
    let base = cluster.coordinator.url.clone();
    let http = reqwest::Client::new();
    // axum's own rejections: a body over the limit, a bad query parameter.
    // On a client of its own: the server answers before reading the whole body and
    // drops the connection, which a shared pool could hand to the next request.
    let oversized = reqwest::Client::new();
    let resp = oversized.post(format!("{base}/v1/statement")).body(vec![b' '; 18 << 20]).send().await.unwrap();
    assert_eq!(resp.status().as_u16(), 413);
    let body: Value = resp.json().await.expect("JSON error body");
    assert_eq!(body["error"]["code"], "REQUEST_TOO_LARGE", "{body}");
    let worker = &cluster.workers[0].url;
    let resp = http.delete(format!("{worker}/v1/task/q.1.0.0?abort=maybe")).send().await.unwrap();
    assert_eq!(resp.status().as_u16(), 400);
    let body: Value = resp.json().await.expect("JSON error body");
    assert_eq!(body["error"]["code"], "BAD_REQUEST", "{body}");
    // A forged Host or X-Forwarded-Proto does not reach the URIs handed out. The query
    // takes long enough not to be answered whole in the first response, which then
    // has a `nextUri`.
    let doc: Value = http
        .post(format!("{base}/v1/statement"))
        .header("Host", "evil.example/steal?")
        .header("X-Forwarded-Proto", "javascript")
        .body("SELECT count(*) FROM tpch.sf1.lineitem")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    for key in ["nextUri", "infoUri"] {
        let uri = doc[key].as_str().unwrap_or_default();
        assert!(uri.starts_with(&format!("{base}/")), "{key} {uri} is not on {base}");
    }
    let next = doc["nextUri"].as_str().unwrap();
    assert_eq!(http.delete(next).send().await.unwrap().status().as_u16(), 204);
    cluster.assert_no_tasks_left().await;
}

/// `flotilla sql` printing all of sf1 lineitem (6M rows) as CSV keeps its memory flat.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cli_streams_a_large_result_in_flat_memory() {
    let cluster = Cluster::start(2, &[]).await;
    let mut child = Command::new(BIN)
        .args([
            "sql",
            "--server",
            &cluster.coordinator.url,
            "--schema",
            "sf1",
            "--output-format",
            "csv",
            "-e",
            "SELECT * FROM lineitem",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("run flotilla sql");
    let pid = child.id();
    let mut stdout = child.stdout.take().unwrap();
    let counter = std::thread::spawn(move || {
        let mut buf = vec![0u8; 1 << 20];
        let (mut lines, mut bytes) = (0u64, 0u64);
        loop {
            match stdout.read(&mut buf) {
                Ok(0) | Err(_) => return (lines, bytes),
                Ok(n) => {
                    bytes += n as u64;
                    lines += buf[..n].iter().filter(|b| **b == b'\n').count() as u64;
                }
            }
        }
    });
    let started = Instant::now();
    let mut peak = 0;
    let deadline = started + Duration::from_secs(600);
    let status = loop {
        peak = peak.max(peak_rss(pid));
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        assert!(Instant::now() < deadline, "flotilla sql did not finish in 10 minutes");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let elapsed = started.elapsed();
    let (lines, bytes) = counter.join().unwrap();
    assert!(status.success());
    let want = oracle("sf1", "SELECT count(*) FROM lineitem").await;
    assert_eq!(Value::from(lines), want[0][0], "rows printed");
    println!(
        "flotilla sql: {lines} rows ({} MB of CSV) in {elapsed:?}, {:.0} rows/s, peak RSS {} MB",
        bytes >> 20,
        lines as f64 / elapsed.as_secs_f64(),
        peak >> 20
    );
    assert!(peak < 200 << 20, "peak RSS {} MB", peak >> 20);
    cluster.assert_no_tasks_left().await;
}
