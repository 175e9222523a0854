//! One simulated query, driven as `coordinator::execution` drives a real one: the
//! `PipelinedQueryScheduler` beside a root that reads the stages' output (policy
//! `none`), or the `FaultTolerantQueryScheduler` with a root stage over spooled
//! outputs (policy `task`); then every task removed. The outcome is the query's error,
//! chosen among the failures as the coordinator chooses it.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use futures::future::{BoxFuture, FutureExt};
use parking_lot::Mutex;

use super::remote_task::SimTaskFactory;
use super::world::World;
use super::{Policy, Schedule};
use crate::codec::FlotillaCodec;
use crate::error_code::{ErrorCode, QueryError};
use crate::protocol::{SourceUpdate, TaskFailure, UpstreamTask};
use crate::scheduling::adaptive::AdaptivePolicy;
use crate::scheduling::fault_tolerant::{
    FaultTolerantQueryScheduler, RetryLimits, RootFailure, RootProgress, RootStage,
};
use crate::scheduling::node_scheduler::NodeScheduler;
use crate::scheduling::phased::{AllAtOnceExecutionSchedule, ExecutionSchedule, PhasedExecutionSchedule};
use crate::scheduling::pipelined::{
    query_failure, PipelinedFailure, PipelinedQueryScheduler, QueryFailure, RootSourceSink, SchedulerError,
    SchedulerSettings,
};
use crate::scheduling::speculation::SpeculationPolicy;
use crate::scheduling::stage_execution::TaskFailureReport;

/// The schedulers' idle tick in the simulator: long, so that a change that does not
/// wake a scheduler leaves the run quiet for long enough to be seen (`invariants`).
pub const SIM_TICK: Duration = Duration::from_secs(30);

/// What the query ended with: nothing, or its error's code and message.
pub type Outcome = Result<(), (ErrorCode, String)>;

fn settings(world: &Arc<World>, codec: FlotillaCodec) -> SchedulerSettings {
    SchedulerSettings {
        query_id: "sim".into(),
        attempt: 0,
        remote_tasks: Arc::new(SimTaskFactory { world: world.clone() }),
        codec,
        workers: world.nodes.live_workers(),
        node_scheduler: Arc::new(NodeScheduler::new()),
        session: BTreeMap::new(),
        nodes: Some(world.nodes.clone()),
        tick: SIM_TICK,
    }
}

fn query_error(e: &QueryError) -> (ErrorCode, String) {
    (e.error_name.known().unwrap_or(ErrorCode::GenericInternalError), e.message.clone())
}

fn report_error(r: &TaskFailureReport) -> (ErrorCode, String) {
    (r.failure.code.known().unwrap_or(ErrorCode::GenericInternalError), r.failure.message.clone())
}

pub async fn run(
    world: &Arc<World>,
    policy: Policy,
    schedule: Schedule,
    deps: &[(usize, usize, crate::plan::DependencyKind)],
    codec: FlotillaCodec,
) -> Outcome {
    match policy {
        Policy::None => run_pipelined(world, schedule, deps, codec).await,
        Policy::Task => run_fault_tolerant(world, codec).await,
    }
}

/// The pipelined root's failure, or the scheduler's.
type RunFailure = PipelinedFailure<TaskFailure>;

struct RootSink(Arc<World>);

impl RootSourceSink for RootSink {
    fn add_source(&self, update: SourceUpdate) {
        self.0.add_root_source(update);
    }
}

async fn run_pipelined(
    world: &Arc<World>,
    schedule: Schedule,
    deps: &[(usize, usize, crate::plan::DependencyKind)],
    codec: FlotillaCodec,
) -> Outcome {
    let stages = world.plan.worker_stages();
    let schedule: Box<dyn ExecutionSchedule> = match schedule {
        Schedule::AllAtOnce => Box::new(AllAtOnceExecutionSchedule::new(&stages)),
        Schedule::Phased => Box::new(PhasedExecutionSchedule::new(&stages, deps).expect("a valid schedule")),
    };
    let sink = Arc::new(RootSink(world.clone()));
    let mut scheduler = PipelinedQueryScheduler::new(settings(world, codec), world.plan.clone(), schedule, sink);
    let root = async { world.run_pipelined_root().await.map_err(RunFailure::Root) };
    let outcome = world.timed(scheduler.run_with_root(root)).await;
    world.answered(outcome.is_ok());
    let reported = world.timed(scheduler.remove_all_tasks(outcome.is_err())).await;
    // The coordinator's choice, from the same function (`query_failure`).
    let Err(failure) = outcome else { return Ok(()) };
    Err(match query_failure(failure, reported) {
        QueryFailure::Task(best) => report_error(&best),
        QueryFailure::RemoteTask(e) => (e.error_code(), e.to_string()),
        QueryFailure::Scheduler(e) => (ErrorCode::RemoteTaskError, e.to_string()),
        QueryFailure::Root(f) => (f.code.known().unwrap_or(ErrorCode::GenericInternalError), f.message),
    })
}

/// The root stage of a fault-tolerant query: reads every input partition's spooled
/// output once, from the attempts the scheduler names.
struct SpooledRoot {
    world: Arc<World>,
    progress: Arc<Mutex<RootProgress>>,
}

impl RootStage for SpooledRoot {
    fn run(&self, sources: Vec<SourceUpdate>) -> BoxFuture<'static, Result<(), RootFailure>> {
        let world = self.world.clone();
        let progress = self.progress.clone();
        *progress.lock() = RootProgress::Reading;
        async move {
            tokio::time::sleep(world.delay()).await;
            let by_stage: BTreeMap<usize, Vec<UpstreamTask>> =
                sources.into_iter().map(|u| (u.stage, u.tasks)).collect();
            let inputs = world.plan.fragments[0].inputs.clone();
            if let Err(f) = world.read_spooled("the root", inputs, &by_stage) {
                let message = f.message.clone();
                return Err(match f.upstream() {
                    Some((upstream, url)) => {
                        RootFailure::Fetch { upstream: upstream.clone(), url: url.to_string(), message }
                    }
                    None => RootFailure::Fatal(QueryError::new(ErrorCode::GenericInternalError, message)),
                });
            }
            *progress.lock() = RootProgress::InputsRead;
            tokio::time::sleep(world.delay()).await;
            world.mark_root_done();
            Ok(())
        }
        .boxed()
    }

    fn progress(&self) -> RootProgress {
        *self.progress.lock()
    }
}

async fn run_fault_tolerant(world: &Arc<World>, codec: FlotillaCodec) -> Outcome {
    // Trino's defaults: four retries of a task; stages may restart often here, as the
    // seeds lose outputs on purpose.
    let speculation = world.params.speculation.then(|| SpeculationPolicy::new(1.5, 0.75));
    // Small partitions (`WorkerTask::partition_bytes`) and a small target: some
    // stages are coalesced, others keep their tasks; some build sides are broadcast.
    let adaptive = world.params.adaptive.then_some(AdaptivePolicy { target_bytes: 2 << 20, broadcast_bytes: 4 << 20 });
    let limits =
        RetryLimits { max_task_failures: 5, max_stage_failures: 10, slots_per_worker: 2, speculation, adaptive };
    let mut scheduler = match FaultTolerantQueryScheduler::new(settings(world, codec), limits, world.plan.clone()) {
        Ok(s) => s,
        Err(e) => return Err((ErrorCode::GenericInternalError, e.to_string())),
    };
    let root = Arc::new(SpooledRoot { world: world.clone(), progress: Arc::new(Mutex::new(RootProgress::Reading)) });
    let outcome = world.timed(scheduler.run(root)).await;
    for stage in scheduler.stages() {
        if let Some(change) = stage.info().adaptive {
            world.event(format!("stage {}: {change}", stage.id()));
        }
    }
    world.answered(outcome.is_ok());
    world.timed(scheduler.remove_all_tasks(outcome.is_err())).await;
    match outcome {
        Ok(()) => Ok(()),
        Err(SchedulerError::TaskFailed(report)) => Err(report_error(&report)),
        Err(SchedulerError::Root(e)) => Err(query_error(&e)),
        Err(e @ SchedulerError::NoWorkers(_)) => Err((ErrorCode::NoNodesAvailable, e.to_string())),
        Err(e) => Err((ErrorCode::GenericInternalError, e.to_string())),
    }
}
