//! retry_policy=task on real processes: spooled stages give the same answers as
//! single-node DataFusion; every injected failure kind at every stage position is
//! survived with the right rows; a worker killed with SIGKILL mid-query is recomputed
//! around; retries are bounded; and no task or spool file outlives its query.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use super::common::{assert_same_rows, oracle, Cluster};
use super::failure_matrix::{set_failure, stage_positions, KINDS, PARTITIONED_JOINS, QUERY};
use flotilla::client::{ClientError, StatementClient};
use flotilla::local::TPCH_QUERIES;
use serde_json::{json, Value};

/// A spool directory of the test's own, removed when dropped.
struct SpoolDir(PathBuf);

impl SpoolDir {
    fn new(name: &str) -> SpoolDir {
        let dir = std::env::temp_dir().join(format!("flotilla-it-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("spool dir");
        SpoolDir(dir)
    }

    fn arg(&self) -> &str {
        self.0.to_str().expect("utf-8 temp dir")
    }

    /// Spooled files under the directory, at any depth (not the marker naming each
    /// worker directory's owner process).
    fn files(&self) -> Vec<PathBuf> {
        let mut files = super::common::files_below(&self.0);
        files.retain(|p| p.file_name().is_none_or(|n| n != "owner.pid"));
        files
    }

    /// Waits (bounded) until the workers have deleted every spool file.
    async fn assert_empty(&self) {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let left = self.files();
            if left.is_empty() {
                return;
            }
            assert!(Instant::now() < deadline, "spool files left after the query: {left:?}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

impl Drop for SpoolDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn task_mode(cluster: &Cluster, schema: &str) -> StatementClient {
    cluster.client(schema).with_session("retry_policy", "task").with_session("exchange_max_error_duration", "3s")
}

async fn query_info(cluster: &Cluster, id: &str) -> Value {
    let url = format!("{}/v1/query/{id}", cluster.coordinator.url);
    reqwest::Client::new().get(url).send().await.unwrap().json().await.unwrap()
}

/// Task ids of every attempt the query made.
fn attempts(info: &Value) -> Vec<String> {
    let stages = info["stages"].as_array().expect("stages");
    stages
        .iter()
        .flat_map(|s| s["tasks"].as_array().unwrap().iter().map(|t| t["task_id"].as_str().unwrap().to_string()))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tpch_with_retry_policy_task_matches_datafusion() {
    let spool = SpoolDir::new("tpch");
    let cluster = Cluster::start(3, &["--spool-dir", spool.arg()]).await;
    for schema in ["tiny", "sf0_1"] {
        let client = task_mode(&cluster, schema);
        for (i, sql) in TPCH_QUERIES.iter().enumerate() {
            let label = format!("{schema} q{} (retry_policy=task)", i + 1);
            let got = client.execute(sql).await.unwrap_or_else(|e| panic!("{label} failed: {e}"));
            assert_same_rows(&label, sql, &got.rows, &oracle(schema, sql).await);
        }
    }
    // The last query ran as an execution graph: one spooled task per partition, every
    // stage successful, shown as Ballista shows it.
    let last = task_mode(&cluster, "tiny").execute(QUERY).await.expect("query");
    let info = query_info(&cluster, &last.id).await;
    let graph = info["execution_graph"].as_str().expect("the query info carries the execution graph");
    assert!(graph.starts_with("ExecutionGraph[job_id="), "{graph}");
    assert!(graph.contains("SuccessfulStage[id=0"), "{graph}");
    assert!(!graph.contains("RunningStage"), "{graph}");
    adaptive_partitioning_coalesces_small_stages(&cluster).await;
    cluster.assert_no_tasks_left().await;
    spool.assert_empty().await;
}

/// Adaptive planning: with 32 hash partitions over a few MiB, the stages after the
/// scans run as fewer tasks, EXPLAIN ANALYZE says so, and the answers are
/// DataFusion's with and without it.
async fn adaptive_partitioning_coalesces_small_stages(cluster: &Cluster) {
    let adaptive = task_mode(cluster, "sf0_1").with_session("hash_partition_count", "32");
    let fixed = adaptive.clone().with_session("adaptive_partitioning_enabled", "false");
    for q in [3, 9, 18] {
        let sql = TPCH_QUERIES[q - 1];
        let expected = oracle("sf0_1", sql).await;
        for (label, client) in [("adaptive", &adaptive), ("fixed", &fixed)] {
            let got = client.execute(sql).await.unwrap_or_else(|e| panic!("q{q} {label}: {e}"));
            assert_same_rows(&format!("sf0_1 q{q} {label}"), sql, &got.rows, &expected);
        }
        let report = |client: StatementClient| async move {
            let got = client.execute(&format!("EXPLAIN ANALYZE {sql}")).await.expect("explain analyze");
            got.rows[0][0].as_str().expect("text").to_string()
        };
        let (with, without) = (report(adaptive.clone()).await, report(fixed.clone()).await);
        let changes: Vec<&str> = with.lines().filter(|l| l.contains("adaptive: 32 partitions run as")).collect();
        println!("q{q} adaptive: {changes:?}");
        assert!(!changes.is_empty(), "q{q}: no stage was coalesced:\n{with}");
        assert!(!without.contains("adaptive:"), "q{q}: coalesced with adaptive planning off:\n{without}");
        let tasks = |text: &str| text.lines().filter(|l| l.trim_start().starts_with("task ")).count();
        assert!(tasks(&with) < tasks(&without), "q{q}: {} tasks coalesced, {} not", tasks(&with), tasks(&without));
    } // Eight orders in ten of lineitem's rows join on one key: that partition of the
      // join's probe side is split over its producers, each task with all of its
      // build side; the answers are still DataFusion's.
    let skewed = "SELECT o_orderpriority, count(*) AS line_count, sum(l_quantity) AS quantity \
        FROM (SELECT CASE WHEN l_orderkey % 10 < 8 THEN 1 ELSE l_orderkey END AS k, l_quantity FROM lineitem) l \
        JOIN orders ON l.k = o_orderkey GROUP BY o_orderpriority";
    let partitioned = |c: &StatementClient| {
        c.clone().with_session("join_max_broadcast_table_size", "0B").with_session("hash_partition_count", "8")
    };
    let expected = oracle("sf0_1", skewed).await;
    for (label, client) in [("adaptive", partitioned(&adaptive)), ("fixed", partitioned(&fixed))] {
        let got = client.execute(skewed).await.unwrap_or_else(|e| panic!("skewed join {label}: {e}"));
        assert_same_rows(&format!("skewed join {label}"), skewed, &got.rows, &expected);
    }
    let got = partitioned(&adaptive).execute(&format!("EXPLAIN ANALYZE {skewed}")).await.expect("explain analyze");
    let text = got.rows[0][0].as_str().expect("text");
    let splits: Vec<&str> = text.lines().filter(|l| l.contains("skewed partition")).collect();
    println!("skewed join: {splits:?}");
    assert!(!splits.is_empty(), "the skewed partition was not split:\n{text}");
    // Planned as a partitioned join, the build side (one nation's suppliers) turns
    // out a few KB once its stage has run, before the probe side's aggregation
    // starts: the join stage broadcasts it and runs the aggregation's final step
    // itself, so the aggregated rows are never repartitioned.
    let small_build = "SELECT s.s_name, sum(a.qty) AS qty, count(*) AS orders \
        FROM (SELECT l_suppkey, l_orderkey, sum(l_quantity) AS qty FROM lineitem GROUP BY l_suppkey, l_orderkey) a \
        JOIN supplier s ON a.l_suppkey = s.s_suppkey WHERE s.s_nationkey = 3 GROUP BY s.s_name";
    let expected = oracle("sf0_1", small_build).await;
    for (label, client) in [("adaptive", partitioned(&adaptive)), ("fixed", partitioned(&fixed))] {
        let got = client.execute(small_build).await.unwrap_or_else(|e| panic!("small build side {label}: {e}"));
        assert_same_rows(&format!("small build side {label}"), small_build, &got.rows, &expected);
    }
    let explain = format!("EXPLAIN ANALYZE {small_build}");
    let got = partitioned(&adaptive).execute(&explain).await.expect("explain analyze");
    let text = got.rows[0][0].as_str().expect("text");
    let broadcast: Vec<&str> = text.lines().filter(|l| l.contains("broadcast; probe stage")).collect();
    println!("small build side: {broadcast:?}");
    assert_eq!(broadcast.len(), 1, "the build side was not broadcast:\n{text}");
    assert!(text.contains("adaptive: runs in stage"), "no probe stage was taken in:\n{text}");
    // Every join planned partitioned: those with nation or region as their build side
    // broadcast it, whose probe side is another join's output; DataFusion's answers.
    for q in [5, 7, 8, 9, 10, 21] {
        let sql = TPCH_QUERIES[q - 1];
        let got = partitioned(&adaptive).execute(sql).await.unwrap_or_else(|e| panic!("q{q} partitioned: {e}"));
        assert_same_rows(&format!("sf0_1 q{q} partitioned joins"), sql, &got.rows, &oracle("sf0_1", sql).await);
        let got = partitioned(&adaptive).execute(&format!("EXPLAIN ANALYZE {sql}")).await.expect("explain analyze");
        let text = got.rows[0][0].as_str().expect("text");
        let broadcast: Vec<&str> = text.lines().filter(|l| l.contains("broadcast; probe stage")).collect();
        println!("q{q} partitioned joins: {broadcast:?}");
        assert!(!broadcast.is_empty(), "q{q}: no build side broadcast:\n{text}");
    }
    let off = partitioned(&adaptive).with_session("adaptive_join_max_broadcast_size", "0B");
    let got = off.execute(&explain).await.expect("explain analyze");
    let text = got.rows[0][0].as_str().expect("text");
    assert!(!text.contains("broadcast; probe stage"), "broadcast with a 0B limit:\n{text}");
}

/// Each of the five kinds at the leaf, an intermediate and the root-feeding stage,
/// on the first attempt of that stage's tasks: the query retries what broke and
/// returns the rows of the run without failure.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retry_policy_task_survives_every_injected_failure() {
    let spool = SpoolDir::new("matrix");
    let cluster = Cluster::start(3, &["--enable-failure-injection", "--spool-dir", spool.arg()]).await;
    let positions = stage_positions(&cluster).await;
    // The positions are stages of the plan as cut: none is taken into another at run
    // time (a join broadcasting nation would take in the join before it). The fused
    // stage has its own case below.
    let client = task_mode(&cluster, "sf0_1")
        .with_session(PARTITIONED_JOINS.0, PARTITIONED_JOINS.1)
        .with_session("adaptive_join_max_broadcast_size", "0B");
    let clean = client.execute(QUERY).await.expect("run without failure");
    assert_same_rows("task mode without failure", QUERY, &clean.rows, &oracle("sf0_1", QUERY).await);
    for (position, stage) in &positions {
        for kind in KINDS {
            set_failure(&cluster, Some(json!({"stage": stage, "attempt": 0, "kind": kind}))).await;
            let cell = format!("{kind} at the {position} stage {stage}");
            let started = Instant::now();
            let got = tokio::time::timeout(Duration::from_secs(90), client.execute(QUERY))
                .await
                .unwrap_or_else(|_| panic!("{cell}: stuck"))
                .unwrap_or_else(|e| panic!("{cell}: {e}"));
            assert_same_rows(&cell, QUERY, &got.rows, &clean.rows);
            // Reported, not asserted: the failure table of docs/operations/retries.md quotes these.
            eprintln!("retry_policy=task, {cell}: right rows in {:.1?}", started.elapsed());
            // The stage really did run a second attempt.
            let retried = attempts(&query_info(&cluster, &got.id).await);
            let prefix = format!("{}.{stage}.", got.id);
            assert!(
                retried.iter().any(|t| t.starts_with(&prefix) && !t.ends_with(".0")),
                "{cell}: no later attempt of stage {stage} in {retried:?}"
            );
            set_failure(&cluster, None).await;
            cluster.assert_no_tasks_left().await;
            spool.assert_empty().await;
        }
    }
    // With nation's 25 rows broadcast, the join with it runs the join before it in
    // its own tasks: a failure of that stage's first attempt is retried the same.
    let fused = client.clone().with_session("adaptive_join_max_broadcast_size", "32MB");
    let run = fused.execute(QUERY).await.expect("run without failure");
    let info = query_info(&cluster, &run.id).await;
    let stages = info["stages"].as_array().expect("stages");
    let broadcast = |s: &&Value| s["adaptive"].as_str().is_some_and(|a| a.contains("broadcast; probe stage"));
    let stage =
        stages.iter().find(broadcast).unwrap_or_else(|| panic!("no join broadcast: {stages:?}"))["stage"].clone();
    set_failure(&cluster, Some(json!({"stage": stage, "attempt": 0, "kind": "task_failure"}))).await;
    let got = fused.execute(QUERY).await.expect("the fused stage's failure is retried");
    assert_same_rows("task failure in a fused stage", QUERY, &got.rows, &clean.rows);
    let prefix = format!("{}.{stage}.", got.id);
    let retried = attempts(&query_info(&cluster, &got.id).await);
    assert!(retried.iter().any(|t| t.starts_with(&prefix) && !t.ends_with(".0")), "no retry of {stage}: {retried:?}");
    set_failure(&cluster, None).await;
    cluster.assert_no_tasks_left().await;
    spool.assert_empty().await;
}

/// A failure on every attempt exhausts `task_retry_attempts`; a user error is not
/// retried at all. Both fail cleanly. Then a straggler: see
/// `a_slow_worker_is_copied_around`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retry_policy_task_gives_up_when_retries_run_out_and_copies_stragglers() {
    let spool = SpoolDir::new("give-up");
    let cluster = Cluster::start(3, &["--enable-failure-injection", "--spool-dir", spool.arg()]).await;
    let positions = stage_positions(&cluster).await;
    let (_, leaf) = positions[0];
    set_failure(&cluster, Some(json!({"stage": leaf, "kind": "task_failure"}))).await;
    let client = task_mode(&cluster, "sf0_1")
        .with_session(PARTITIONED_JOINS.0, PARTITIONED_JOINS.1)
        .with_session("task_retry_attempts", "2");
    let started = Instant::now();
    match client.execute(QUERY).await {
        Err(ClientError::Query(flotilla::client::QueryError { error_name, message, .. })) => {
            assert_eq!(error_name, "REMOTE_TASK_ERROR", "{message}");
            assert!(message.contains("failed 3 times"), "two retries, then the third failure is final: {message}");
            assert!(message.contains("injected task failure"), "{message}");
            assert!(message.contains("worker http://127.0.0.1:"), "{message}");
        }
        other => panic!("expected a failure, got {other:?}"),
    }
    assert!(started.elapsed() < Duration::from_secs(30), "took {:?}", started.elapsed());
    set_failure(&cluster, None).await;
    cluster.assert_no_tasks_left().await;
    spool.assert_empty().await;

    match task_mode(&cluster, "tiny").execute("SELECT sum(CAST(l_comment AS INT)) FROM lineitem").await {
        Err(ClientError::Query(flotilla::client::QueryError { error_name, message, .. })) => {
            assert_eq!(error_name, "INVALID_CAST_ARGUMENT", "{message}");
            assert!(message.contains("non-retryable"), "a user error is not retried: {message}");
        }
        other => panic!("expected a failure, got {other:?}"),
    }
    cluster.assert_no_tasks_left().await;
    spool.assert_empty().await;
    a_slow_worker_is_copied_around(&cluster, &spool).await;
}

/// One worker of three slowed by the injector's `slow` kind (a wait after every
/// batch its tasks' plans yield): with `task_speculation_enabled` some of its tasks
/// get copies on the other workers that finish first, the first attempts are
/// aborted, the rows are single-node DataFusion's, and nothing is left behind. The
/// times with and without a worker slowed by 100 ms a batch, and without
/// speculation, are printed, not asserted. Whether a copy wins at 100 ms is a race
/// (this query's tasks yield a few batches each, so a slowed one may end before its
/// copy does); the copies are asserted with the worker slowed by 2 s a batch, where
/// a copy launched after a few hundred milliseconds finishes long before.
async fn a_slow_worker_is_copied_around(cluster: &Cluster, spool: &SpoolDir) {
    // sf1: tasks long enough that noticing a straggler (200 ms at least) is a small
    // part of them, as in the queries speculation is for.
    let client = task_mode(cluster, "sf1").with_session(PARTITIONED_JOINS.0, PARTITIONED_JOINS.1);
    let want = oracle("sf1", QUERY).await;
    let timed = |client: StatementClient| async move {
        let started = Instant::now();
        let got = client.execute(QUERY).await.unwrap_or_else(|e| panic!("{e}"));
        (got, started.elapsed())
    };
    timed(client.clone()).await;
    let (_, even) = timed(client.clone()).await;
    let slow = &cluster.workers[2];
    let info: Value = reqwest::get(format!("{}/v1/info", slow.url)).await.unwrap().json().await.unwrap();
    let slow_node = info["node_id"].as_str().expect("the worker's node id").to_string();
    let slow_down = |delay_ms: u64| async move {
        let resp = reqwest::Client::new()
            .post(format!("{}/v1/failure-injection", slow.url))
            .json(&json!({"kind": "slow", "delay_ms": delay_ms}))
            .send()
            .await
            .unwrap();
        assert!(resp.status().is_success(), "failure injection endpoint: {}", resp.status());
    };
    slow_down(100).await;
    let copying = client.clone().with_session("task_speculation_enabled", "true");
    let (_, uncopied) = timed(client.clone()).await;
    let (got, copied) = timed(copying.clone()).await;
    assert_same_rows("speculation around a slow worker", QUERY, &got.rows, &want);
    eprintln!(
        "retry_policy=task, one worker of 3 slowed by 100 ms a batch: {even:.1?} without it, {uncopied:.1?} with it, \
         {copied:.1?} with it and task_speculation_enabled ({:.2}x)",
        copied.as_secs_f64() / even.as_secs_f64()
    );
    set_failure(cluster, None).await;
    slow_down(2000).await;
    let (got, _) = timed(copying).await;
    set_failure(cluster, None).await;
    assert_same_rows("speculation around a very slow worker", QUERY, &got.rows, &want);
    // A copy on another worker that finished before its first attempt on the slow
    // worker, as the scheduler recorded it (`copies_won`): the loser's own state may
    // be FINISHED as well as ABORTED, when it ended before the abort reached it.
    let info = query_info(cluster, &got.id).await;
    let stages = info["stages"].as_array().unwrap();
    let tasks: Vec<&Value> = stages.iter().flat_map(|s| s["tasks"].as_array().unwrap().iter()).collect();
    let state_of = |id: &Value| tasks.iter().find(|t| t["task_id"] == *id).map(|t| t["state"].clone());
    let copies_won: Vec<&Value> =
        stages.iter().filter_map(|s| s["copies_won"].as_array()).flat_map(|c| c.iter()).collect();
    for c in &copies_won {
        assert_ne!(c["winner_node"], c["loser_node"], "a copy runs on another worker: {c}");
        assert_eq!(state_of(&c["winner"]), Some(json!("FINISHED")), "the winning copy finished: {c}");
        let lost = state_of(&c["loser"]);
        assert!(lost == Some(json!("ABORTED")) || lost == Some(json!("FINISHED")), "the loser ended: {c} {lost:?}");
    }
    let won = copies_won.iter().any(|c| c["loser_node"] == slow_node.as_str());
    let states: Vec<String> =
        tasks.iter().map(|t| format!("{} {} {}", t["task_id"], t["node_id"], t["state"])).collect();
    assert!(won, "no copy beat an attempt on the slow worker {slow_node}: {states:#?}");
    cluster.assert_no_tasks_left().await;
    spool.assert_empty().await;
}

/// SIGKILL of a worker while its tasks run and its spool holds finished output: the
/// query finishes on the two survivors with the right rows.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retry_policy_task_finishes_on_the_survivors_of_a_killed_worker() {
    let spool = SpoolDir::new("kill");
    let mut cluster = Cluster::start(3, &["--spool-dir", spool.arg()]).await;
    let sql = "SELECT l_returnflag, l_linestatus, count(*), sum(l_quantity), sum(l_extendedprice) \
        FROM lineitem JOIN orders ON l_orderkey = o_orderkey GROUP BY 1, 2 ORDER BY 1, 2";
    let client = task_mode(&cluster, "sf1");
    let query = tokio::spawn(async move { client.execute(sql).await });
    // Wait until output has been spooled, so the victim holds finished work too.
    let deadline = Instant::now() + Duration::from_secs(60);
    while !spool.files().iter().any(|f| f.extension().is_some_and(|e| e == "arrow")) {
        assert!(Instant::now() < deadline, "nothing was spooled");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let victim = cluster.kill_worker(0);
    let killed_at = Instant::now();
    let got = tokio::time::timeout(Duration::from_secs(180), query)
        .await
        .expect("query must end")
        .expect("join")
        .expect("query succeeds");
    println!("retry_policy=task: the query ended {:?} after kill -9 of a worker", killed_at.elapsed());
    assert_same_rows("sf1 join after kill -9 (retry_policy=task)", sql, &got.rows, &oracle("sf1", sql).await);
    cluster.assert_no_tasks_left().await;
    // The survivors' spools are empty; the victim's directory is what it left behind.
    let victim_port = victim.url.rsplit(':').next().unwrap().to_string();
    let left: Vec<PathBuf> = spool
        .files()
        .into_iter()
        .filter(|f| !f.to_string_lossy().contains(&format!("worker-{victim_port}-")))
        .collect();
    assert!(left.is_empty(), "survivors kept spool files: {left:?}");
    // The victim could not clean up; the next worker started on this spool root does.
    let victim_dir = std::fs::read_dir(&spool.0)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| p.to_string_lossy().contains(&format!("worker-{victim_port}-")))
        .expect("the victim's spool directory is still there");
    let _restarted = super::common::spawn(&[
        "worker",
        "--coordinator",
        &cluster.coordinator.url,
        "--bind",
        "127.0.0.1:0",
        "--spool-dir",
        spool.arg(),
    ]);
    assert!(!victim_dir.exists(), "a new worker sweeps the spool of the killed one");
}

/// Cancelling a task-mode query mid-way deletes every attempt and its spool files.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_task_mode_query_leaves_no_task_or_spool_file() {
    let spool = SpoolDir::new("cancel");
    let cluster = Cluster::start(2, &["--spool-dir", spool.arg()]).await;
    let http = reqwest::Client::new();
    let sql = "SELECT l_orderkey, count(*) FROM lineitem GROUP BY l_orderkey ORDER BY 2 DESC, 1 LIMIT 5";
    let id = cluster.start_statement_with_session("sf1", sql, "retry_policy=task").await;
    let deadline = Instant::now() + Duration::from_secs(60);
    while spool.files().is_empty() {
        assert!(Instant::now() < deadline, "nothing was spooled");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let resp = http.delete(format!("{}/v1/query/{id}", cluster.coordinator.url)).send().await.unwrap();
    assert!(resp.status().is_success(), "cancel: {}", resp.status());
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let info = query_info(&cluster, &id).await;
        if info["state"] == json!("FAILED") {
            assert_eq!(info["error"]["error_name"], json!("USER_CANCELED"), "{info}");
            break;
        }
        assert!(Instant::now() < deadline, "query did not end after cancel: {}", info["state"]);
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    cluster.assert_no_tasks_left().await;
    spool.assert_empty().await;
}
