//! The 99 TPC-DS queries on a real cluster equal single-node DataFusion's answers
//! over the `tpcds` catalog's generated rows: under the phased and all-at-once
//! policies, with `retry_policy` none and task, and as one task and as stages. The
//! first pass is also a stall detector: no query takes more than twice DataFusion's
//! time in the same run plus a second, on each of three tries.
//!
//! The texts are DuckDB's, with its parameters: `.ci/run` installs DuckDB's TPC-DS
//! extension from PyPI into its throwaway virtualenv and writes the 99 queries to
//! the directory `FLOTILLA_TPCDS_QUERIES` names (`tests/python/tpcds_queries.py`).
//! They are never committed here.

use std::time::{Duration, Instant};

use flotilla::coordinator::planner::single_node_context_in;
use flotilla::format::batch_to_json_rows;
use serde_json::Value;

use super::common::{assert_same_rows, missing_service, Cluster};

/// `(number, text)` of each query, in order.
fn queries() -> Option<Vec<(usize, String)>> {
    let dir = std::env::var("FLOTILLA_TPCDS_QUERIES").ok()?;
    let mut out = Vec::new();
    for n in 1..=99 {
        let path = std::path::Path::new(&dir).join(format!("q{n}.sql"));
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        out.push((n, text.trim().trim_end_matches(';').to_string()));
    }
    Some(out)
}

async fn oracle(sql: &str) -> Vec<Vec<Value>> {
    let ctx = single_node_context_in("tpcds", "tiny", 2, std::sync::Arc::new(Default::default()));
    let batches = ctx.sql(sql).await.expect("oracle plans").collect().await.expect("oracle runs");
    batches.iter().flat_map(|b| batch_to_json_rows(b).expect("encode")).collect()
}

/// The longest a query may take to DataFusion's `alone` before it counts as idle.
fn bound(alone: Duration) -> Duration {
    alone * 2 + Duration::from_secs(1)
}

/// The session each pass runs with.
const PASSES: [&[(&str, &str)]; 4] = [
    &[],
    &[("execution_policy", "all-at-once")],
    &[("retry_policy", "task")],
    &[("single_task_max_rows", "100000000")],
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tpcds_on_two_workers_matches_datafusion() {
    let Some(queries) = queries() else {
        return missing_service("tpcds_on_two_workers_matches_datafusion", "FLOTILLA_TPCDS_QUERIES is not set");
    };
    let cluster = Cluster::start(2, &[]).await;
    let mut wants = Vec::new();
    let (mut ours, mut theirs) = (Duration::ZERO, Duration::ZERO);
    for (n, sql) in &queries {
        let client = cluster.client("tiny").with_catalog("tpcds");
        let mut tries = Vec::new();
        // Twice DataFusion's time and a second: a CPU-bound query shares the two
        // cores with other tests here (q14 took 3.3 s to DataFusion's 1.7), while a
        // query that sits idle waits seconds beyond it (5 s, before) on every run.
        // A load spike from a neighbouring test passes on a second or third try; a
        // stall does not.
        for _ in 0..3 {
            let asked = Instant::now();
            let want = oracle(sql).await;
            let alone = asked.elapsed();
            let asked = Instant::now();
            let got = client.execute(sql).await.unwrap_or_else(|e| panic!("q{n} failed: {e}"));
            let took = asked.elapsed();
            assert_same_rows(&format!("q{n}"), sql, &got.rows, &want);
            tries.push((took, alone));
            if wants.len() < *n {
                wants.push(want);
            }
            if took <= bound(alone) {
                break;
            }
        }
        let stalled = tries.iter().all(|&(took, alone)| took > bound(alone));
        assert!(!stalled, "q{n} sat idle on every try: (flotilla, DataFusion) {tries:?}");
        let (took, alone) = tries[0];
        (ours, theirs) = (ours + took, theirs + alone);
    }
    println!("TPC-DS tiny, 99 queries: flotilla {ours:?}, DataFusion {theirs:?}");
    for session in &PASSES[1..] {
        let mut client = cluster.client("tiny").with_catalog("tpcds");
        for (k, v) in *session {
            client = client.with_session(*k, *v);
        }
        for (n, sql) in &queries {
            let label = format!("q{n} {session:?}");
            let got = client.execute(sql).await.unwrap_or_else(|e| panic!("{label} failed: {e}"));
            assert_same_rows(&label, sql, &got.rows, &wants[*n - 1]);
        }
    }
    cluster.assert_no_tasks_left().await;
}
