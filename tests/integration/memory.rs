//! Memory governance on real workers: TPC-H sf1 q9, q18 and q21 on 2 workers whose
//! pools hold 200 MiB each either answer as single-node DataFusion does or fail with
//! `EXCEEDED_LOCAL_MEMORY_LIMIT` (their hash joins' build sides cannot spill); a
//! sort too big for its share spills and answers right; no worker dies and the next
//! query runs. A query over its `query_max_memory_per_node` fails with that code,
//! naming the limit, while a small query beside it answers. Spill files are gone
//! after every query, failed or not. With 2 query slots, 10 concurrent queries all
//! answer, at most 2 active at a time and the others seen `QUEUED`, and a full queue
//! refuses with `QUERY_QUEUE_FULL`; a query over `query_max_memory` over the cluster
//! fails with `EXCEEDED_GLOBAL_MEMORY_LIMIT` while a small one answers. Hash partitions
//! and buffer sizes beyond what the workers hold fail at once with
//! `INVALID_SESSION_PROPERTY`, naming the largest value that fits.

use std::time::Duration;

use flotilla::client::ClientError;
use flotilla::local::TPCH_QUERIES;

use super::common::{assert_same_rows, files_below, oracle, query_info, Cluster};

/// Spill files below `dir`: every file but the workers' owner marks.
fn spill_files(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    files_below(dir).into_iter().filter(|p| p.file_name().is_none_or(|n| n != flotilla::util::OWNER_FILE)).collect()
}

/// Spilled bytes and peak memory over the query's tasks, from query info; each
/// stage's and the query's totals must be their tasks' sums.
async fn spilled_and_peak(base: &str, id: &str) -> (u64, u64) {
    let info = query_info(base, id).await;
    let stages = info["stages"].as_array().cloned().unwrap_or_default();
    let sum = |tasks: &[&serde_json::Value], key: &str| {
        tasks.iter().map(|t| t["stats"][key].as_u64().unwrap_or(0)).sum::<u64>()
    };
    let mut all = Vec::new();
    for s in &stages {
        let tasks: Vec<&serde_json::Value> = s["tasks"].as_array().into_iter().flatten().collect();
        let stage = (s["memory"]["spilled_bytes"].as_u64(), s["memory"]["peak_bytes"].as_u64());
        assert_eq!(
            stage,
            (Some(sum(&tasks, "spilled_bytes")), Some(sum(&tasks, "memory_peak_bytes"))),
            "stage {} adds up its tasks: {s}",
            s["stage"]
        );
        all.extend(tasks);
    }
    assert!(!all.is_empty(), "query info lists the tasks: {info}");
    let total = (sum(&all, "spilled_bytes"), sum(&all, "memory_peak_bytes"));
    let query = (info["memory"]["spilled_bytes"].as_u64(), info["memory"]["peak_bytes"].as_u64());
    assert_eq!(query, (Some(total.0), Some(total.1)), "the query adds up its stages: {}", info["memory"]);
    total
}

/// `heavy_sql` under the session limit `limit` fails with `want` (an error name and
/// the limit as the message writes it), while a small query started beside it
/// answers right.
async fn over_limit_beside_a_small_query(
    client: &flotilla::client::StatementClient,
    limit: (&str, &str),
    heavy_sql: &str,
    want: (&str, &str),
) {
    let heavy = client.clone().with_session(limit.0, limit.1);
    let small_sql = "SELECT count(*) FROM nation";
    let (big, small) = tokio::join!(heavy.execute(heavy_sql), async {
        tokio::time::sleep(Duration::from_millis(200)).await;
        client.execute(small_sql).await
    });
    match big {
        Err(ClientError::Query(flotilla::client::QueryError { error_name, message, .. })) => {
            assert_eq!(error_name, want.0, "{message}");
            assert!(message.contains(want.1) && message.contains(limit.0), "{message}");
        }
        other => panic!("{heavy_sql} with {limit:?}: {other:?}"),
    }
    let small = small.expect("the small query answers");
    assert_same_rows("small", small_sql, &small.rows, &oracle("sf1", small_sql).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queries_spill_or_fail_clearly_within_a_200_mib_pool() {
    let spill = std::env::temp_dir().join(format!("flotilla-spill-test-{}", flotilla::util::random_suffix(8)));
    // Dropped after the cluster (declared before it), however the test ends.
    let _remove_spill = RemoveOnDrop(spill.clone());
    let spill_arg = spill.display().to_string();
    let c = Cluster::start(2, &["--memory", "200MB", "--spill-path", &spill_arg]).await;
    let client = c.client("sf1");
    let base = c.coordinator.url.clone();
    let mut spilled_somewhere = false;
    for q in [9, 18, 21] {
        let sql = TPCH_QUERIES[q - 1];
        match client.execute(sql).await {
            Ok(got) => {
                assert_same_rows(&format!("q{q}"), sql, &got.rows, &oracle("sf1", sql).await);
                let (spilled, peak) = spilled_and_peak(&base, &got.id).await;
                println!("q{q}: right, spilled {spilled} B, task peaks {peak} B");
                assert!(peak > 0, "q{q}: the tasks report what they held");
                spilled_somewhere |= spilled > 0;
            }
            Err(ClientError::Query(flotilla::client::QueryError { error_name, message, .. })) => {
                println!("q{q}: {error_name}: {message}");
                assert_eq!(error_name, "EXCEEDED_LOCAL_MEMORY_LIMIT", "q{q}: {message}");
            }
            Err(e) => panic!("q{q}: {e}"),
        }
        c.assert_no_tasks_left().await;
        assert!(spill_files(&spill).is_empty(), "spill files left after q{q}: {:?}", spill_files(&spill));
    }
    // With spill_enabled, joins are sort-merge joins whose sorts spill: the queries
    // whose hash joins did not fit finish in the same pool.
    let spilling = client.clone().with_session("spill_enabled", "true");
    for q in [18, 21] {
        let sql = TPCH_QUERIES[q - 1];
        let got = spilling.execute(sql).await.unwrap_or_else(|e| panic!("q{q} with spill_enabled: {e}"));
        assert_same_rows(&format!("q{q} spill_enabled"), sql, &got.rows, &oracle("sf1", sql).await);
        let (spilled, peak) = spilled_and_peak(&base, &got.id).await;
        println!("q{q} with spill_enabled: right, spilled {spilled} B, task peaks {peak} B");
        spilled_somewhere |= spilled > 0;
        c.assert_no_tasks_left().await;
        assert!(spill_files(&spill).is_empty(), "spill files left after q{q}: {:?}", spill_files(&spill));
    }

    // A sort of all of lineitem by a text column cannot fit in its share of the
    // pool: it spills, and the answer is still DataFusion's.
    let sort_sql = "SELECT count(*), sum(rn) FROM (SELECT l_comment, row_number() OVER (PARTITION BY l_suppkey \
        ORDER BY l_comment, l_orderkey, l_linenumber) AS rn FROM lineitem) t WHERE rn <= 2";
    let got = client.execute(sort_sql).await.expect("the sort spills and answers");
    assert_same_rows("spilling sort", sort_sql, &got.rows, &oracle("sf1", sort_sql).await);
    let (spilled, peak) = spilled_and_peak(&base, &got.id).await;
    println!("spilling sort: spilled {spilled} B, task peaks {peak} B");
    spilled_somewhere |= spilled > 0;
    assert!(spilled_somewhere, "a 200 MiB pool makes the sort spill");
    assert!(got.stats["spilledBytes"].as_u64().unwrap_or(0) <= spilled, "{}", got.stats);
    c.assert_no_tasks_left().await;
    assert!(spill_files(&spill).is_empty(), "spill files left after the sort: {:?}", spill_files(&spill));
    c.wait_for_live_workers_exactly(2).await;

    // One query's share of a worker: over it the query fails, naming the limit; a
    // small query beside it answers.
    // A hash join's build side cannot spill (DataFusion 55): orders does not fit in 4MB.
    over_limit_beside_a_small_query(
        &client,
        ("query_max_memory_per_node", "4MB"),
        "SELECT count(*), sum(o_totalprice) FROM lineitem JOIN orders ON l_orderkey = o_orderkey",
        ("EXCEEDED_LOCAL_MEMORY_LIMIT", "4.0 MiB"),
    )
    .await;
    c.assert_no_tasks_left().await;
    assert!(spill_files(&spill).is_empty(), "spill files left: {:?}", spill_files(&spill));
    c.wait_for_live_workers_exactly(2).await;

    // Session values beyond what the two 200 MiB workers hold fail at once with the
    // largest that fits (2 MiB a hash partition: 200); the largest runs right.
    let group_sql = "SELECT n_regionkey, count(*) FROM nation GROUP BY n_regionkey";
    for (name, value, most) in [
        ("hash_partition_count", "4096", "at most 200"),
        ("output_buffer_max_bytes", "150MB", "at most 100.0 MiB"),
        ("exchange_max_buffer_bytes", "1GB", "at most 100.0 MiB"),
    ] {
        match client.clone().with_session(name, value).execute(group_sql).await {
            Err(ClientError::Query(flotilla::client::QueryError { error_name, message, .. })) => {
                assert_eq!(error_name, "INVALID_SESSION_PROPERTY", "{message}");
                assert!(message.starts_with(name) && message.contains(most), "{name}={value}: {message}");
            }
            other => panic!("{name}={value} on 200 MiB workers: {other:?}"),
        }
    }
    let got = client.clone().with_session("hash_partition_count", "200").execute(group_sql).await.unwrap();
    assert_same_rows("200 partitions", group_sql, &got.rows, &oracle("sf1", group_sql).await);
    c.assert_no_tasks_left().await;
    drop(c);
}

/// Removes a directory the test made, on success and on panic alike.
struct RemoveOnDrop(std::path::PathBuf);

impl Drop for RemoveOnDrop {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// States of every query the coordinator lists.
async fn states(base: &str) -> Vec<String> {
    let list: serde_json::Value = reqwest::get(format!("{base}/v1/query")).await.unwrap().json().await.unwrap();
    list.as_array().into_iter().flatten().map(|q| q["state"].as_str().unwrap_or_default().to_string()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queries_beyond_the_slots_wait_queued_and_a_full_queue_refuses() {
    let c = Cluster::start_with(&["--max-concurrent-queries", "2", "--max-queued-queries", "8"], 2, &[]).await;
    let client = c.client("sf1");
    let base = c.coordinator.url.clone();
    let sql = "SELECT l_returnflag, count(*), sum(l_extendedprice) FROM lineitem GROUP BY 1 ORDER BY 1";
    let running: Vec<_> = (0..10)
        .map(|_| {
            let client = client.clone();
            tokio::spawn(async move { client.execute(sql).await })
        })
        .collect();
    // Watch the list: never more than 2 past QUEUED and not yet done; the queue full
    // at 8 waiting, when an 11th query is refused.
    let (mut most_active, mut refused) = (0, false);
    let deadline = std::time::Instant::now() + Duration::from_secs(300);
    while running.iter().any(|r| !r.is_finished()) {
        assert!(std::time::Instant::now() < deadline, "the 10 queries did not end");
        let now = states(&base).await;
        let active = now.iter().filter(|s| !matches!(s.as_str(), "QUEUED" | "FINISHED" | "FAILED")).count();
        most_active = most_active.max(active);
        if !refused && now.iter().filter(|s| *s == "QUEUED").count() == 8 {
            // A client of its own: clones share the slot `cancel_current` reads, so a
            // clone's failed query would cancel whichever of the ten the slot held.
            match c.client("sf1").execute("SELECT 1").await {
                Err(ClientError::Query(flotilla::client::QueryError { error_name, message, .. })) => {
                    assert_eq!(error_name, "QUERY_QUEUE_FULL", "{message}");
                    refused = true;
                }
                other => panic!("an 11th query with 8 waiting: {other:?}"),
            }
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(most_active <= 2, "{most_active} queries ran at once");
    assert!(refused, "the queue was seen full");
    let want = oracle("sf1", sql).await;
    for r in running {
        let got = r.await.unwrap().expect("a queued query runs in the end");
        assert_same_rows("queued", sql, &got.rows, &want);
    }
    // Slots are given back: the next query runs.
    assert_eq!(client.execute("SELECT 1").await.expect("a slot is free").rows, vec![vec![serde_json::json!(1)]]);

    // Over query_max_memory across the cluster (from the workers' heartbeats) a
    // query fails; a small one beside it answers.
    over_limit_beside_a_small_query(
        &client,
        ("query_max_memory", "20MB"),
        "SELECT count(*) FROM lineitem a JOIN lineitem b ON a.l_orderkey = b.l_orderkey",
        ("EXCEEDED_GLOBAL_MEMORY_LIMIT", "20.0 MiB"),
    )
    .await;
    c.assert_no_tasks_left().await;
}
