//! The pipelined scheduler driven by fake remote tasks: stage states from task
//! states, wiring of producers into consumers, the root cause among failures, lost
//! workers, and clean-up.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use tokio::task::JoinHandle;

use super::*;
use crate::cluster::node_manager::NodeManager;
use crate::scheduling::phased::AllAtOnceExecutionSchedule;
use crate::scheduling::testing::{eventually, two_stage_plan, workers, FakeCluster};

#[derive(Default)]
struct RootSink(Mutex<Vec<SourceUpdate>>);

impl RootSourceSink for RootSink {
    fn add_source(&self, update: SourceUpdate) {
        self.0.lock().push(update);
    }
}

struct Harness {
    cluster: Arc<FakeCluster>,
    stages: BTreeMap<usize, Arc<StageExecution>>,
    root: Arc<RootSink>,
    run: JoinHandle<(PipelinedQueryScheduler, Result<(), SchedulerError>)>,
}

fn settings(cluster: &Arc<FakeCluster>, worker_count: usize, nodes: Option<Arc<NodeManager>>) -> SchedulerSettings {
    SchedulerSettings {
        query_id: "q1".into(),
        attempt: 0,
        remote_tasks: cluster.clone(),
        codec: FlotillaCodec::new(crate::connector::Connectors::benchmark()),
        workers: workers(worker_count),
        node_scheduler: Arc::new(NodeScheduler::new()),
        session: BTreeMap::new(),
        nodes,
        tick: crate::scheduling::pipelined::IDLE_TICK,
    }
}

fn start(worker_count: usize, nodes: Option<Arc<NodeManager>>) -> Harness {
    let cluster = Arc::new(FakeCluster::default());
    let settings = settings(&cluster, worker_count, nodes);
    let plan = two_stage_plan(2);
    let schedule = Box::new(AllAtOnceExecutionSchedule::new(&plan.worker_stages()));
    let root = Arc::new(RootSink::default());
    let mut scheduler = PipelinedQueryScheduler::new(settings, plan, schedule, root.clone());
    let stages = scheduler.stages().into_iter().map(|s| (s.id(), s)).collect();
    let run = tokio::spawn(async move {
        let result = scheduler.run().await;
        (scheduler, result)
    });
    Harness { cluster, stages, root, run }
}

impl Harness {
    async fn stage_reaches(&self, stage: usize, state: StageState) {
        let s = &self.stages[&stage];
        eventually(&format!("stage {stage} to be {state:?}"), || s.state() == state).await;
    }

    async fn all_created(&self) {
        for stage in [1, 2] {
            for task in 0..2 {
                self.cluster.created(stage, task, 0).await;
            }
        }
    }

    async fn outcome(self) -> (PipelinedQueryScheduler, Result<(), SchedulerError>) {
        tokio::time::timeout(Duration::from_secs(10), self.run).await.expect("scheduler ends").expect("no panic")
    }
}

#[tokio::test]
async fn stages_follow_their_tasks_to_the_end() {
    let h = start(2, None);
    h.all_created().await;
    h.stage_reaches(1, StageState::Scheduled).await;
    h.stage_reaches(2, StageState::Scheduled).await;
    let producers = h.cluster.stage_tasks(1);
    let consumers = h.cluster.stage_tasks(2);
    // One task per worker, each told its partition and output layout.
    assert_ne!(producers[0].worker(), producers[1].worker());
    let create = producers[0].requests.lock()[0].clone();
    assert_eq!(create.output, Some(OutputBufferSpec::Partitioned { partitions: 2 }));
    assert_eq!(create.partitions, vec![0]);
    // The consumers learn where both producers run; the coordinator where the consumers do.
    let expected: Vec<String> = producers.iter().map(|t| t.task_id().to_string()).collect();
    for c in &consumers {
        assert_eq!(c.sources_of(1), expected);
        assert_eq!(c.requests.lock()[0].output, Some(OutputBufferSpec::Broadcast { buffers: 1 }));
    }
    let root_sources = h.root.0.lock().clone();
    assert_eq!(root_sources.len(), 1);
    assert_eq!((root_sources[0].stage, root_sources[0].tasks.len(), root_sources[0].no_more), (2, 2, true));

    producers[0].set_state(TaskState::Running);
    h.stage_reaches(1, StageState::Running).await;
    producers[0].set_state(TaskState::Flushing);
    producers[1].set_state(TaskState::Running);
    h.stage_reaches(1, StageState::Running).await;
    producers[1].set_state(TaskState::Flushing);
    h.stage_reaches(1, StageState::Flushing).await;
    producers[0].finish();
    h.stage_reaches(1, StageState::Flushing).await;
    producers[1].finish();
    h.stage_reaches(1, StageState::Finished).await;
    assert_eq!(h.stages[&2].state(), StageState::Scheduled);
    for c in &consumers {
        c.finish();
    }
    let stages = h.stages.clone();
    let (scheduler, result) = h.outcome().await;
    result.expect("the query's stages finish");
    assert_eq!(stages[&2].state(), StageState::Finished);

    // Clean-up reaches every task, as a cancel (not an abort) after success.
    assert!(scheduler.remove_all_tasks(false).await.is_empty());
    for t in producers.iter().chain(&consumers) {
        assert_eq!(*t.deleted.lock(), Some(false), "task {} deleted", t.task_id());
    }
}

#[tokio::test]
async fn the_root_cause_wins_over_its_echoes() {
    let h = start(2, None);
    h.all_created().await;
    let producer = h.cluster.task(1, 1, 0).unwrap();
    let consumer = h.cluster.task(2, 0, 0).unwrap();
    // The consumer reports the producer's failure it read through the exchange, and
    // that report arrives first; the producer's own failure is the cause.
    consumer.fail(ErrorCode::RemoteTaskFailed, Some(&producer));
    producer.fail(ErrorCode::ExecutionError, None);
    let (stages, cluster) = (h.stages.clone(), h.cluster.clone());
    let (scheduler, result) = h.outcome().await;
    let Err(SchedulerError::TaskFailed(report)) = result else { panic!("the query fails with a task failure") };
    assert_eq!((report.stage, report.task.to_string()), (1, "q1.1.1.0".to_string()));
    assert_eq!(report.failure.code, "EXECUTION_ERROR");
    assert_eq!(stages[&1].state(), StageState::Failed);
    scheduler.remove_all_tasks(true).await;
    for t in cluster.tasks() {
        assert_eq!(*t.deleted.lock(), Some(true), "task {} aborted", t.task_id());
    }
}

#[test]
fn root_cause_ranking() {
    let report = |stage, code: ErrorCode, upstream: bool| TaskFailureReport {
        stage,
        task: TaskId::new("q", stage, 0, 0),
        worker: "w".into(),
        failure: match upstream {
            true => TaskFailure::fetch(code, String::new(), TaskId::new("q", stage - 1, 0, 0), "w"),
            false => TaskFailure::new(code, String::new()),
        },
    };
    let echo = report(3, ErrorCode::RemoteTaskFailed, true);
    let broken_link = report(2, ErrorCode::RemoteTaskUnreachable, true);
    let own = report(1, ErrorCode::ExceededTimeLimit, false);
    let pick = |v: Vec<TaskFailureReport>| pick_root_cause(v).map(|r| r.stage);
    assert_eq!(pick(vec![echo.clone(), broken_link.clone(), own]), Some(1));
    // Without a task's own failure, a broken data link is the cause, not an echo.
    assert_eq!(pick(vec![echo.clone(), broken_link]), Some(2));
    assert_eq!(pick(vec![echo]), Some(3));
    assert_eq!(pick(vec![]), None);
}

#[tokio::test]
async fn a_lost_worker_fails_the_query_naming_it() {
    let nodes = Arc::new(NodeManager::new(Duration::from_secs(60)));
    for w in workers(2) {
        nodes.announce(&w.node_id, &w.url);
    }
    let h = start(2, Some(nodes.clone()));
    h.all_created().await;
    for t in h.cluster.tasks() {
        t.set_state(TaskState::Running);
    }
    h.stage_reaches(2, StageState::Running).await;
    nodes.mark_lost("w2");
    let (_, result) = h.outcome().await;
    let Err(SchedulerError::TaskFailed(report)) = result else { panic!("the query fails with a task failure") };
    assert_eq!(report.failure.code, "REMOTE_HOST_GONE");
    assert_eq!(report.worker, "http://127.0.0.1:9002");
    assert!(report.failure.message.contains("w2"), "{}", report.failure.message);
}

#[tokio::test]
async fn no_workers_is_a_clear_error() {
    let h = start(0, None);
    let (_, result) = h.outcome().await;
    assert!(matches!(result, Err(SchedulerError::NoWorkers(_))), "{result:?}");
}

/// The event order behind TPC-DS's 5 s stalls: the root has every row while a stage
/// done producing keeps pages nobody will read (its consumer, a partitioned join
/// with an empty build side, never asked for them). The query ends then, on that
/// event, before any timer could run out (the scheduler's 500 ms tick, or the 5 s
/// grace period that used to wait for the unread stage). Clean-up then finishes it.
#[tokio::test]
async fn the_query_ends_when_the_root_has_every_row_though_pages_stay_unread() {
    let cluster = Arc::new(FakeCluster::default());
    let plan = two_stage_plan(2);
    let schedule = Box::new(AllAtOnceExecutionSchedule::new(&plan.worker_stages()));
    let mut scheduler =
        PipelinedQueryScheduler::new(settings(&cluster, 2, None), plan, schedule, Arc::new(RootSink::default()));
    let stages = scheduler.stages();
    let root = async {
        while cluster.tasks().len() < 4 || !cluster.tasks().iter().all(|t| t.created()) {
            tokio::task::yield_now().await;
        }
        // Stage 1 produced everything into buffers stage 2 will never read.
        for t in cluster.stage_tasks(1) {
            t.set_state(TaskState::Flushing);
        }
        // Stage 2 produced its rows and the root read them all.
        for t in cluster.stage_tasks(2) {
            t.set_state(TaskState::Flushing);
            t.finish();
        }
        Ok::<u64, SchedulerError>(42)
    };
    let ended = tokio::time::timeout(Duration::from_millis(400), scheduler.run_with_root(root)).await;
    let rows = ended.expect("the query ends before any timer runs out").expect("the query succeeds");
    assert_eq!(rows, 42);
    assert_eq!(stages[0].refresh(), StageState::Flushing, "stage 1's pages are still unread");
    assert!(scheduler.remove_all_tasks(false).await.is_empty());
    for s in &stages {
        assert_eq!(s.state(), StageState::Finished, "stage {}", s.id());
    }
    for t in cluster.tasks() {
        assert_eq!(t.status().state, TaskState::Finished, "task {}", t.task_id());
    }
}

/// A stage's failure before the root ends is the query's failure, though the root is
/// still waiting for rows.
#[tokio::test]
async fn a_stage_failure_ends_the_query_before_its_root() {
    let cluster = Arc::new(FakeCluster::default());
    let plan = two_stage_plan(2);
    let schedule = Box::new(AllAtOnceExecutionSchedule::new(&plan.worker_stages()));
    let mut scheduler =
        PipelinedQueryScheduler::new(settings(&cluster, 2, None), plan, schedule, Arc::new(RootSink::default()));
    let failing = cluster.clone();
    tokio::spawn(async move {
        while failing.stage_tasks(1).len() < 2 {
            tokio::task::yield_now().await;
        }
        failing.stage_tasks(1)[1].fail(ErrorCode::ExecutionError, None);
    });
    let root = futures::future::pending::<Result<u64, SchedulerError>>();
    let ended = tokio::time::timeout(Duration::from_secs(10), scheduler.run_with_root(root)).await;
    let Err(SchedulerError::TaskFailed(report)) = ended.expect("the failure ends the query") else {
        panic!("the query fails with its task's failure")
    };
    assert_eq!((report.stage, report.failure.code.name()), (1, "EXECUTION_ERROR"));
}
