//! The client protocol and the metrics endpoints on a real cluster.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use super::common::{oracle, query_error, Cluster, BIN};
use clap::ValueEnum;
use datafusion::arrow::datatypes::DataType;
use datafusion::arrow::record_batch::RecordBatch;
use flotilla::format::{batch_to_json_rows, format_rows, Column, OutputFormat};
use serde_json::Value;

/// A 100k-row result arrives whole and in order, over several `nextUri` pages: the
/// first of at most 4,096 rows (and the rest of the batch it ends in), the later
/// ones sized to a byte target; `flotilla sql`'s csv and tsv, whose pages the
/// coordinator writes as text, print those rows as the client prints JSON ones; as
/// Arrow batches the rows and DataFusion's types arrive, and an empty result's schema.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_pages_arrive_whole_and_in_order() {
    let cluster = Cluster::start(2, &[]).await;
    let sql =
        "SELECT l_orderkey, l_linenumber, l_quantity FROM lineitem ORDER BY l_orderkey, l_linenumber LIMIT 100000";
    let mut page_rows = Vec::new();
    let got = cluster
        .client("sf0_1")
        .execute_with_progress(sql, |page| {
            if let Some(d) = page.data.as_ref().filter(|d| !d.is_empty()) {
                page_rows.push(d.len());
            }
        })
        .await
        .expect("query");
    assert_eq!(got.rows.len(), 100_000);
    assert!(page_rows.len() >= 2, "rows came in pages {page_rows:?}");
    assert!(page_rows[0] <= 4_096 + 8192, "the first page is small: {page_rows:?}");
    let want = oracle("sf0_1", sql).await;
    assert_eq!(got.rows, want, "rows differ from single-node DataFusion");
    // The same rows as Arrow batches: paged, in order, equal.
    let mut arrow_pages = Vec::new();
    let arrow = cluster
        .client("sf0_1")
        .with_rows_as_arrow()
        .execute_with_progress(sql, |page| {
            let rows: usize = page.batches.iter().flatten().map(|b| b.num_rows()).sum();
            if rows > 0 {
                arrow_pages.push(rows);
            }
        })
        .await
        .expect("query as Arrow");
    assert!(arrow.rows.is_empty());
    // Arrow's first page aims at the byte target from a guess of 64 bytes a row.
    assert!(arrow_pages.len() >= 2 && arrow_pages[0] <= 65_536 + 8192, "Arrow pages {arrow_pages:?}");
    let arrow_rows: Vec<Vec<Value>> = arrow.batches.iter().flat_map(|b| batch_to_json_rows(b).unwrap()).collect();
    assert_eq!(arrow_rows, want, "Arrow rows differ from single-node DataFusion");
    // `flotilla sql` asks for csv and tsv pages as text, which the coordinator writes
    // itself: they must read as the JSON rows printed by the client would.
    let tricky = "SELECT n_nationkey, n_name, concat(n_name, ',', chr(34), chr(9), chr(10), chr(92)) AS odd, \
                  CASE WHEN n_nationkey % 3 = 0 THEN NULL ELSE n_nationkey / 7.0 END AS dbl, \
                  CAST(n_nationkey AS DECIMAL(10,2)) / 3 AS dec, n_nationkey % 2 = 0 AS even, \
                  make_array(n_nationkey, n_regionkey) AS arr, DATE '1995-03-01' AS dt, \
                  CAST('2020-01-01 10:00:00.5' AS TIMESTAMP) AS ts FROM nation ORDER BY n_nationkey";
    // As Arrow: DataFusion's own types (decimals, dates, lists), values equal; and a
    // result without rows still tells its schema.
    let arrow = cluster.client("tiny").with_rows_as_arrow().execute(tricky).await.expect("tricky as Arrow");
    let oracle_ctx = flotilla::coordinator::planner::single_node_context("tiny", 2);
    let expected = oracle_ctx.sql(tricky).await.unwrap().collect().await.unwrap();
    let types =
        |b: &[RecordBatch]| -> Vec<DataType> { b[0].schema().fields().iter().map(|f| f.data_type().clone()).collect() };
    assert_eq!(types(&arrow.batches), types(&expected));
    let arrow_rows: Vec<Vec<Value>> = arrow.batches.iter().flat_map(|b| batch_to_json_rows(b).unwrap()).collect();
    assert_eq!(arrow_rows, oracle("tiny", tricky).await);
    let empty = "SELECT n_name, n_nationkey * 2 AS k FROM nation WHERE n_nationkey < 0";
    let none = cluster.client("tiny").with_rows_as_arrow().execute(empty).await.expect("empty as Arrow");
    assert_eq!(none.batches.iter().map(|b| b.num_rows()).sum::<usize>(), 0);
    let names: Vec<String> = none.batches[0].schema().fields().iter().map(|f| f.name().clone()).collect();
    assert_eq!(names, ["n_name", "k"]);
    for (schema, sql) in [("sf0_1", sql), ("tiny", tricky)] {
        let json = cluster.client(schema).execute(sql).await.expect("query");
        let columns: Vec<Column> = json.columns.clone();
        for format in [OutputFormat::Csv, OutputFormat::CsvHeader, OutputFormat::Tsv] {
            let name = format.to_possible_value().expect("a named format").get_name().to_string();
            let url = &cluster.coordinator.url;
            let out = std::process::Command::new(BIN)
                .args(["sql", "--server", url, "--catalog", "tpch", "--schema", schema, "--output-format", &name])
                .args(["-e", sql])
                .output()
                .expect("run flotilla sql");
            assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
            let printed = String::from_utf8(out.stdout).expect("UTF-8 output");
            assert_eq!(printed, format_rows(&columns, &json.rows, format), "{name} of {sql}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn protocol_errors_are_json_with_stable_codes() {
    let cluster = Cluster::start(1, &[]).await;
    let base = &cluster.coordinator.url;
    let http = reqwest::Client::new();
    let cases = [
        (http.get(format!("{base}/v1/statement/executing/20260101_000001_zzzzz/slug/1")), 404, "QUERY_NOT_FOUND"),
        (http.get(format!("{base}/v1/query/nope")), 404, "QUERY_NOT_FOUND"),
        (http.delete(format!("{base}/v1/statement/executing/nope/slug/1")), 404, "QUERY_NOT_FOUND"),
        (http.post(format!("{base}/v1/statement")).body(""), 400, "BAD_REQUEST"),
        (http.post(format!("{base}/v1/statement")).body(vec![0xff, 0xfe, 0x00]), 400, "BAD_REQUEST"),
        (
            http.post(format!("{base}/v1/statement")).header("X-Trino-Session", "no_equals_sign").body("SELECT 1"),
            400,
            "BAD_REQUEST",
        ),
        (http.post(format!("{base}/v1/announcement")).body("{broken"), 400, "BAD_REQUEST"),
    ];
    for (req, status, code) in cases {
        let resp = req.send().await.expect("coordinator answers");
        assert_eq!(resp.status().as_u16(), status);
        let body: Value = resp.json().await.expect("JSON error body");
        assert_eq!(body["error"]["code"], code, "{body}");
    }
    // A good statement with a bad token gets 400; the query itself is unaffected.
    let first: Value =
        http.post(format!("{base}/v1/statement")).body("SELECT 1").send().await.unwrap().json().await.unwrap();
    let next = first["nextUri"].as_str().unwrap();
    let bad_token = format!("{}/abc", next.rsplit_once('/').unwrap().0);
    let resp = http.get(bad_token).send().await.unwrap();
    assert_eq!(resp.status().as_u16(), 400);

    // Queries are private without logins too: an id is not enough to page or cancel
    // one (the slug of its nextUri is), and users see their own queries only.
    let alice: Value = http
        .post(format!("{base}/v1/statement"))
        .header("X-Trino-User", "alice")
        .body("SELECT count(*) FROM tpch.sf1.lineitem")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let (id, next) = (alice["id"].as_str().unwrap(), alice["nextUri"].as_str().unwrap());
    let slug = next.rsplit('/').nth(1).unwrap();
    assert!(slug.len() >= 16, "a slug in {next}");
    let guessed = next.replace(slug, "guessed");
    for req in [http.get(&guessed).header("X-Trino-User", "alice"), http.delete(&guessed)] {
        let resp = req.send().await.unwrap();
        assert_eq!(resp.status().as_u16(), 404);
        let body: Value = resp.json().await.unwrap();
        assert_eq!(body["error"]["code"], "QUERY_NOT_FOUND", "{body}");
    }
    let listed = |user: &'static str| {
        let http = http.clone();
        async move {
            let all: Vec<Value> = http
                .get(format!("{base}/v1/query"))
                .header("X-Trino-User", user)
                .send()
                .await
                .unwrap()
                .json()
                .await
                .unwrap();
            all.iter().any(|q| q["query_id"] == id)
        }
    };
    assert!(listed("alice").await && !listed("bob").await, "only alice lists her query");
    let info =
        |user: &str, query: &str| http.get(format!("{base}/v1/query/{id}{query}")).header("X-Trino-User", user).send();
    assert_eq!(info("bob", "").await.unwrap().status().as_u16(), 404);
    assert_eq!(info("bob", &format!("?slug={slug}")).await.unwrap().status().as_u16(), 200, "the infoUri's slug");
    assert_eq!(info("alice", "").await.unwrap().status().as_u16(), 200);
    let info_uri = alice["infoUri"].as_str().unwrap();
    assert!(info_uri.ends_with(&format!("?{id}&slug={slug}")), "{info_uri}");
    let bob_cancels = http.delete(format!("{base}/v1/query/{id}")).header("X-Trino-User", "bob").send().await;
    assert_eq!(bob_cancels.unwrap().status().as_u16(), 404);
    let cancel = http.delete(next).send().await.unwrap();
    assert!(cancel.status().is_success(), "the nextUri cancels: {}", cancel.status());
}

/// `USE`, `SET SESSION` and `RESET SESSION` change what flotilla's own client sends
/// with its next statements, as they change a Trino client's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn session_statements_change_what_the_client_sends() {
    let cluster = Cluster::start(1, &[]).await;
    let client = cluster.client("tiny");
    let count = |o: flotilla::client::QueryOutcome| o.rows[0][0].as_i64();
    // TPC-H spec 4.2.5: SF x 150,000 customers.
    assert_eq!(count(client.execute("SELECT count(*) FROM customer").await.unwrap()), Some(1_500));
    let used = client.execute("USE sf1").await.unwrap();
    assert_eq!(used.update_type.as_deref(), Some("USE"));
    assert_eq!(client.session().schema.as_deref(), Some("sf1"));
    assert_eq!(count(client.execute("SELECT count(*) FROM customer").await.unwrap()), Some(150_000));
    client.execute("SET SESSION hash_partition_count = 3").await.unwrap();
    assert_eq!(client.session().properties, vec![("hash_partition_count".to_string(), "3".to_string())]);
    let shown = client.execute("SHOW SESSION").await.unwrap();
    let row = shown.rows.iter().find(|r| r[0] == "hash_partition_count").expect("the property is listed");
    assert_eq!(row[1], "3", "{row:?}");
    client.execute("RESET SESSION hash_partition_count").await.unwrap();
    assert!(client.session().properties.is_empty());
    let (name, message) = query_error(client.execute("SET SESSION hash_partition_count = 'many'").await);
    assert_eq!(name, "INVALID_SESSION_PROPERTY", "{message}");
    let (name, message) = query_error(client.execute("USE nope").await);
    assert_eq!(name, "SCHEMA_NOT_FOUND", "{message}");
    assert_eq!(client.session().schema.as_deref(), Some("sf1"), "a failed USE changes nothing");

    // SET TIME ZONE is Trino's `time_zone_id` property; a zone is checked wherever it
    // comes from, the client's header included.
    let zone = "SELECT current_timezone()";
    assert_eq!(client.execute(zone).await.unwrap().rows, vec![vec![Value::from("UTC")]]);
    let set = client.execute("SET TIME ZONE 'Asia/Kolkata'").await.unwrap();
    assert_eq!(set.update_type.as_deref(), Some("SET TIME ZONE"));
    assert_eq!(client.execute(zone).await.unwrap().rows, vec![vec![Value::from("Asia/Kolkata")]]);
    client.execute("SET TIME ZONE INTERVAL '-08:00' HOUR TO MINUTE").await.unwrap();
    assert_eq!(client.execute(zone).await.unwrap().rows, vec![vec![Value::from("-08:00")]]);
    let (name, message) = query_error(client.execute("SET TIME ZONE 'Mars/Olympus'").await);
    assert_eq!((name.as_str(), message.as_str()), ("NOT_SUPPORTED", "Time zone not supported: Mars/Olympus"));
    client.execute("SET TIME ZONE LOCAL").await.unwrap();
    assert_eq!(client.execute(zone).await.unwrap().rows, vec![vec![Value::from("UTC")]]);
    let http = reqwest::Client::new();
    for bad in ["Mars/Olympus".to_string(), "x".repeat(100_000)] {
        let page: Value = http
            .post(format!("{}/v1/statement", cluster.coordinator.url))
            .header("X-Trino-Time-Zone", bad.as_str())
            .body(zone)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        let mut page = page;
        while page.get("error").is_none() {
            let next = page["nextUri"].as_str().unwrap_or_else(|| panic!("{page}")).to_string();
            page = http.get(next).send().await.unwrap().json().await.unwrap();
        }
        assert_eq!(page["error"]["errorName"], "NOT_SUPPORTED", "{page}");
        assert!(page["error"]["message"].as_str().unwrap().len() < 200, "{page}");
    }
}

fn parse_metrics(text: &str) -> HashMap<String, f64> {
    let mut out = HashMap::new();
    for line in text.lines() {
        if line.starts_with('#') || line.trim().is_empty() {
            continue;
        }
        let (name, value) = line.rsplit_once(' ').unwrap_or_else(|| panic!("bad metrics line: {line}"));
        let value: f64 = value.parse().unwrap_or_else(|_| panic!("bad value in: {line}"));
        assert!(name.chars().next().unwrap().is_ascii_alphabetic(), "bad name in: {line}");
        out.insert(name.to_string(), value);
    }
    out
}

async fn scrape(url: &str) -> HashMap<String, f64> {
    let resp = reqwest::get(format!("{url}/metrics")).await.expect("scrape");
    assert!(resp.headers()["content-type"].to_str().unwrap().starts_with("text/plain; version=0.0.4"));
    parse_metrics(&resp.text().await.unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_parse_and_move_after_a_query() {
    let cluster = Cluster::start(2, &[]).await;
    let before_c = scrape(&cluster.coordinator.url).await;
    let before_w = scrape(&cluster.workers[0].url).await;
    assert_eq!(before_c["flotilla_workers_alive"], 2.0);
    cluster.client("tiny").execute(flotilla::local::TPCH_QUERIES[2]).await.expect("q3");
    let after_c = scrape(&cluster.coordinator.url).await;
    let after_w = scrape(&cluster.workers[0].url).await;
    assert_eq!(after_c["flotilla_queries_submitted_total"], before_c["flotilla_queries_submitted_total"] + 1.0);
    assert_eq!(after_c["flotilla_queries{state=\"FINISHED\"}"], before_c["flotilla_queries{state=\"FINISHED\"}"] + 1.0);
    assert_eq!(after_c["flotilla_query_latency_seconds_count"], before_c["flotilla_query_latency_seconds_count"] + 1.0);
    assert!(
        after_c["flotilla_exchange_pages_total"] > before_c["flotilla_exchange_pages_total"],
        "the root stage read pages"
    );
    assert!(
        after_w["flotilla_pages_produced_total"] > before_w["flotilla_pages_produced_total"],
        "the worker produced pages"
    );
    assert!(after_w.contains_key("flotilla_tasks{state=\"RUNNING\"}"));
    assert!(after_w.contains_key("flotilla_output_buffer_bytes"));
}

/// A connection that never finishes its headers, or a body that stops half-way, is
/// closed after the server's read timeouts (15 s each) instead of held open.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stalled_headers_and_bodies_are_cut_off() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let cluster = Cluster::start(1, &[]).await;
    let addr = cluster.coordinator.url.trim_start_matches("http://").to_string();
    let stall = |first: &'static str| {
        let addr = addr.clone();
        async move {
            let mut tcp = tokio::net::TcpStream::connect(&addr).await.unwrap();
            tcp.write_all(first.as_bytes()).await.unwrap();
            let started = Instant::now();
            let mut answer = Vec::new();
            let read = tokio::time::timeout(Duration::from_secs(30), tcp.read_to_end(&mut answer)).await;
            assert!(read.is_ok(), "still open after 30 s: {first:?}");
            (started.elapsed(), String::from_utf8_lossy(&answer).into_owned())
        }
    };
    let headers = stall("GET /v1/info HTTP/1.1\r\nHost: x\r\n");
    let body = stall("POST /v1/statement HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n6\r\nSELECT\r\n");
    let ((headers_after, _), (body_after, body_answer)) = tokio::join!(headers, body);
    println!("unfinished headers closed after {headers_after:?}, a stalled body after {body_after:?}");
    assert!(headers_after >= Duration::from_secs(14), "closed too early: {headers_after:?}");
    assert!(body_after >= Duration::from_secs(14), "cut too early: {body_after:?}");
    assert!(body_answer.is_empty() || body_answer.starts_with("HTTP/1.1 4"), "{body_answer}");
    // The server still serves.
    let info = reqwest::get(format!("{}/v1/info", cluster.coordinator.url)).await.unwrap();
    assert!(info.status().is_success());
}

/// Segment files under the spooling directory, and their bytes.
fn spooled_files(dir: &std::path::Path) -> (usize, u64) {
    let files: Vec<_> =
        super::common::files_below(dir).into_iter().filter(|f| f.to_string_lossy().ends_with(".segment")).collect();
    (files.len(), files.iter().map(|f| std::fs::metadata(f).map_or(0, |m| m.len())).sum())
}

/// Trino's spooling protocol with a client that never downloads: the query's
/// segments stop at its quota (`fs.max-query-spooled-size`, 10 MB here) and the rest
/// of its rows come inline, every row once; a cancelled query's segments are gone
/// within seconds, while a finished one's wait for their client.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spooled_segments_are_bounded_and_go_with_a_cancelled_query() {
    let root_tmp = tempfile::Builder::new().prefix("flotilla-spool-quota-").tempdir().unwrap();
    let (root, spool) = (root_tmp.path().to_path_buf(), root_tmp.path().join("spool"));
    std::fs::create_dir_all(root.join("etc-coordinator")).unwrap();
    let manager =
        format!("spooling-manager.name=filesystem\nfs.location={}\nfs.max-query-spooled-size=10MB\n", spool.display());
    std::fs::write(root.join("etc-coordinator/spooling-manager.properties"), manager).unwrap();
    let c = super::common::EtcCluster::start(&root, &[], 1).await;
    let url = c.cluster.coordinator.url.clone();
    let http = reqwest::Client::new();
    let start = |sql: &'static str| {
        let request = http.post(format!("{url}/v1/statement")).header("X-Trino-User", "t");
        request.header("X-Trino-Query-Data-Encoding", "json").body(sql).send()
    };
    let sql = "SELECT l_orderkey, l_comment FROM tpch.sf0_1.lineitem";
    let mut doc: Value = start(sql).await.unwrap().json().await.unwrap();
    let (mut rows, mut spooled, mut inline, mut most) = (0u64, 0, 0, 0u64);
    loop {
        if let Some(data) = doc.get("data").filter(|d| !d.is_null()) {
            for segment in data["segments"].as_array().unwrap() {
                rows += segment["metadata"]["rowsCount"].as_u64().unwrap();
                match segment["type"].as_str().unwrap() {
                    "inline" => inline += 1,
                    _ => spooled += 1,
                }
            }
        }
        most = most.max(spooled_files(&spool).1);
        let Some(next) = doc.get("nextUri").and_then(Value::as_str) else { break };
        doc = http.get(next).send().await.unwrap().json().await.unwrap();
    }
    assert!(doc.get("error").is_none(), "{doc}");
    let want = oracle("sf0_1", "SELECT count(*) FROM lineitem").await;
    assert_eq!(Some(rows), want[0][0].as_u64(), "every row once");
    assert!(spooled >= 1 && inline >= 1, "spooled {spooled}, then inline {inline}");
    assert!(most <= 10 << 20, "the query's segments reached {most} bytes");
    let (finished, _) = spooled_files(&spool);
    assert!(finished >= 1, "a finished query's segments wait for their client");

    // A cancelled query's segments go.
    let doc: Value = start(sql).await.unwrap().json().await.unwrap();
    let mut next = doc["nextUri"].as_str().unwrap().to_string();
    let deadline = Instant::now() + Duration::from_secs(30);
    while spooled_files(&spool).0 == finished {
        assert!(Instant::now() < deadline, "the second query spooled nothing");
        let page: Value = http.get(&next).send().await.unwrap().json().await.unwrap();
        next = page["nextUri"].as_str().expect("still running").to_string();
    }
    let cancelled = http.delete(&next).send().await.unwrap();
    assert!(cancelled.status().is_success(), "the nextUri cancels: {}", cancelled.status());
    let deadline = Instant::now() + Duration::from_secs(10);
    while spooled_files(&spool).0 != finished {
        assert!(Instant::now() < deadline, "a cancelled query's segments stay: {:?}", spooled_files(&spool));
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    c.cluster.assert_no_tasks_left().await;
}
