//! The fault-tolerant scheduler driven by fake remote tasks: retries under
//! `retry_policy=task`, errors that are not retried, fetch failures that recompute
//! an upstream output, and a lost worker whose outputs are recomputed elsewhere.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use futures::future::FutureExt;
use parking_lot::Mutex;
use tokio::task::JoinHandle;

use super::*;
use crate::cluster::node_manager::NodeManager;
use crate::scheduling::adaptive::AdaptivePolicy;
use crate::scheduling::node_scheduler::NodeScheduler;
use crate::scheduling::testing::{two_stage_plan, workers, FakeCluster, FakeRemoteTask};

/// The coordinator's root stage: records the sources of each run and succeeds.
#[derive(Default)]
struct FakeRoot {
    runs: Mutex<Vec<Vec<SourceUpdate>>>,
}

impl RootStage for FakeRoot {
    fn run(&self, sources: Vec<SourceUpdate>) -> BoxFuture<'static, Result<(), RootFailure>> {
        self.runs.lock().push(sources);
        futures::future::ready(Ok(())).boxed()
    }

    fn progress(&self) -> RootProgress {
        RootProgress::Reading
    }
}

struct Harness {
    cluster: Arc<FakeCluster>,
    nodes: Arc<NodeManager>,
    root: Arc<FakeRoot>,
    run: JoinHandle<(FaultTolerantQueryScheduler, Result<(), SchedulerError>)>,
}

fn start() -> Harness {
    start_with(None, 2)
}

fn start_with(adaptive: Option<AdaptivePolicy>, partitions: usize) -> Harness {
    let cluster = Arc::new(FakeCluster::default());
    let nodes = Arc::new(NodeManager::new(Duration::from_secs(60)));
    for w in workers(2) {
        nodes.announce(&w.node_id, &w.url);
    }
    let settings = SchedulerSettings {
        query_id: "q1".into(),
        attempt: 0,
        remote_tasks: cluster.clone(),
        codec: crate::codec::FlotillaCodec::new(crate::connector::Connectors::benchmark()),
        workers: workers(2),
        node_scheduler: Arc::new(NodeScheduler::new()),
        session: BTreeMap::new(),
        nodes: Some(nodes.clone()),
        tick: crate::scheduling::pipelined::IDLE_TICK,
    };
    let limits =
        RetryLimits { max_task_failures: 3, max_stage_failures: 3, slots_per_worker: 2, speculation: None, adaptive };
    let plan = two_stage_plan(partitions);
    let mut scheduler = FaultTolerantQueryScheduler::new(settings, limits, plan).expect("a valid graph");
    let root = Arc::new(FakeRoot::default());
    let root_stage: Arc<dyn RootStage> = root.clone();
    let run = tokio::spawn(async move {
        let result = scheduler.run(root_stage).await;
        (scheduler, result)
    });
    Harness { cluster, nodes, root, run }
}

impl Harness {
    async fn outcome(self) -> (FaultTolerantQueryScheduler, Result<(), SchedulerError>) {
        tokio::time::timeout(Duration::from_secs(10), self.run).await.expect("scheduler ends").expect("no panic")
    }

    /// Plays the workers from here on: every created task finishes.
    fn finish_everything(&self) -> JoinHandle<()> {
        let cluster = self.cluster.clone();
        tokio::spawn(async move {
            loop {
                for t in cluster.tasks() {
                    if t.created() {
                        t.finish();
                    }
                }
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
        })
    }
}

fn ids(tasks: &[Arc<FakeRemoteTask>]) -> Vec<String> {
    tasks.iter().map(|t| t.task_id().to_string()).collect()
}

#[tokio::test]
async fn a_failed_task_is_retried_and_its_new_output_read() {
    let h = start();
    let (p0, p1) = (h.cluster.created(1, 0, 0).await, h.cluster.created(1, 1, 0).await);
    // Spooled tasks: one per partition, spread over both workers.
    assert!(p0.requests.lock()[0].spool);
    assert_ne!(p0.worker(), p1.worker());
    p0.finish();
    p1.fail(ErrorCode::SpoolError, None);
    let retry = h.cluster.created(1, 1, 1).await;
    // The consumer stage does not start before its input is complete.
    assert!(h.cluster.stage_tasks(2).is_empty());
    retry.finish();
    let consumers = [h.cluster.created(2, 0, 0).await, h.cluster.created(2, 1, 0).await];
    for c in &consumers {
        assert_eq!(c.sources_of(1), vec!["q1.1.0.0".to_string(), "q1.1.1.1".to_string()]);
        c.finish();
    }
    let (root, cluster) = (h.root.clone(), h.cluster.clone());
    let (scheduler, result) = h.outcome().await;
    result.expect("the query succeeds after the retry");
    let runs = root.runs.lock().clone();
    assert_eq!(runs.len(), 1);
    let read: Vec<String> = runs[0][0].tasks.iter().map(|t| t.task_id.to_string()).collect();
    assert_eq!((runs[0][0].stage, read), (2, ids(&consumers)));
    // Every attempt, the failed one too, is removed from its worker at the end.
    scheduler.remove_all_tasks(false).await;
    assert_eq!(cluster.tasks().len(), 5);
    assert!(cluster.tasks().iter().all(|t| t.deleted.lock().is_some()));
}

#[tokio::test]
async fn an_error_of_the_query_itself_is_not_retried() {
    let h = start();
    let p0 = h.cluster.created(1, 0, 0).await;
    p0.fail(ErrorCode::ExecutionError, None);
    let cluster = h.cluster.clone();
    let (_, result) = h.outcome().await;
    let Err(SchedulerError::TaskFailed(report)) = result else { panic!("the query fails: {result:?}") };
    assert_eq!((report.stage, report.failure.code.name()), (1, "EXECUTION_ERROR"));
    assert!(cluster.task(1, 0, 1).is_none(), "no second attempt");
}

#[tokio::test]
async fn a_task_failing_every_attempt_fails_the_query() {
    let h = start();
    h.cluster.created(1, 1, 0).await.finish();
    for attempt in 0..3 {
        h.cluster.created(1, 0, attempt).await.fail(ErrorCode::TaskLost, None);
    }
    let cluster = h.cluster.clone();
    let (_, result) = h.outcome().await;
    let Err(SchedulerError::TaskFailed(report)) = result else { panic!("the query fails: {result:?}") };
    assert_eq!(report.failure.code, "TASK_LOST");
    assert!(cluster.task(1, 0, 3).is_none(), "max_task_failures is 3");
}

#[tokio::test]
async fn a_fetch_failure_recomputes_the_unreadable_output() {
    let h = start();
    let producers = [h.cluster.created(1, 0, 0).await, h.cluster.created(1, 1, 0).await];
    for p in &producers {
        p.finish();
    }
    let consumers = [h.cluster.created(2, 0, 0).await, h.cluster.created(2, 1, 0).await];
    consumers[1].finish();
    // Consumer 0 cannot read producer 1's spooled output: that output is recomputed,
    // not the consumer's own failure retried as is.
    consumers[0].fail(ErrorCode::RemoteTaskUnreachable, Some(&producers[1]));
    let recomputed = h.cluster.created(1, 1, 1).await;
    assert!(h.cluster.task(1, 0, 1).is_none(), "the readable output is kept");
    let finisher = h.finish_everything();
    let (root, cluster) = (h.root.clone(), h.cluster.clone());
    let (_, result) = h.outcome().await;
    finisher.abort();
    result.expect("the query succeeds after recomputing");
    assert_eq!(recomputed.status().state, TaskState::Finished);
    let rerun = cluster.latest(2, 0).expect("consumer 0");
    assert!(rerun.task_id().attempt >= 1, "consumer 0 ran again");
    assert_eq!(rerun.sources_of(1), vec!["q1.1.0.0".to_string(), "q1.1.1.1".to_string()]);
    assert_eq!(root.runs.lock().len(), 1);
}

#[tokio::test]
async fn a_lost_worker_has_its_outputs_recomputed_on_another() {
    let h = start();
    let producers = [h.cluster.created(1, 0, 0).await, h.cluster.created(1, 1, 0).await];
    for p in &producers {
        p.finish();
    }
    h.cluster.created(2, 0, 0).await;
    h.cluster.created(2, 1, 0).await;
    let gone = producers[1].worker().clone();
    let before = h.cluster.tasks().len();
    h.nodes.mark_lost(&gone.node_id);
    let finisher = h.finish_everything();
    let (cluster, root) = (h.cluster.clone(), h.root.clone());
    let (_, result) = h.outcome().await;
    finisher.abort();
    result.expect("the query survives the lost worker");
    let after: Vec<_> = cluster.tasks().into_iter().skip(before).collect();
    assert!(!after.is_empty(), "work was recomputed");
    assert!(after.iter().all(|t| t.worker() != &gone), "nothing runs on the lost worker");
    // What the root finally read, and what that read, ran on the live worker only.
    let last_run = root.runs.lock().last().cloned().expect("the root ran");
    for upstream in &last_run[0].tasks {
        assert_ne!(upstream.url, gone.url, "root reads {}", upstream.task_id);
    }
    assert_ne!(cluster.latest(1, 1).expect("partition 1").worker(), &gone);
}

#[test]
fn retry_limits_follow_the_session() {
    let defaults = RetryLimits::from_properties(&crate::config::SessionProperties::default(), 2);
    // Four retries: the fifth failure of a task is final; four stage restarts.
    assert_eq!((defaults.max_task_failures, defaults.max_stage_failures, defaults.slots_per_worker), (5, 4, 2));
    let session: BTreeMap<String, String> = [("task_retry_attempts", "0"), ("stage_retry_attempts", "1")]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let strict = RetryLimits::from_properties(&crate::config::SessionProperties::parse(&session).unwrap(), 0);
    assert_eq!((strict.max_task_failures, strict.max_stage_failures, strict.slots_per_worker), (1, 1, 1));
}

/// Adaptive planning: four tiny partitions of stage 2 run as one task over all
/// four, which its consumer is told; with a partition that fills the target alone,
/// it keeps a task of its own.
#[tokio::test]
async fn small_partitions_of_a_stage_that_has_not_started_share_a_task() {
    let policy = AdaptivePolicy { target_bytes: 4 << 20, broadcast_bytes: 0 };
    let h = start_with(Some(policy), 4);
    for p in 0..4 {
        h.cluster.created(1, p, 0).await.finish_with_partition_bytes(vec![1000, 2000, 5 << 20, 1000]);
    }
    let first = h.cluster.created(2, 0, 0).await;
    let second = h.cluster.created(2, 1, 0).await;
    let third = h.cluster.created(2, 2, 0).await;
    let partitions = |t: &FakeRemoteTask| t.requests.lock()[0].partitions.clone();
    assert_eq!((partitions(&first), partitions(&second), partitions(&third)), (vec![0, 1], vec![2], vec![3]));
    assert_eq!(first.sources_of(1).len(), 4, "each task reads every producer");
    for t in [&first, &second, &third] {
        t.finish();
    }
    let root = h.root.clone();
    let (scheduler, result) = h.outcome().await;
    result.expect("the query succeeds");
    let runs = root.runs.lock().clone();
    let read: Vec<Vec<usize>> = runs[0][0].tasks.iter().map(|t| t.partitions.clone()).collect();
    assert_eq!(read, vec![vec![0, 1], vec![2], vec![3]], "the root knows each task's partitions");
    let stage = scheduler.stages().into_iter().find(|s| s.id() == 2).expect("stage 2");
    let info = stage.info();
    assert_eq!(info.task_count, 3);
    let change = info.adaptive.expect("the change is recorded");
    assert!(change.contains("4 partitions run as 3 tasks"), "{change}");
}
