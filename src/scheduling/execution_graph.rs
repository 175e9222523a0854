//! `ExecutionGraph`: the state of one query in fault-tolerant mode (retry policy
//! `task`), after the API of Ballista/kapot's graph of the same name. It owns the
//! query's stage DAG, each stage's state (Unresolved -> Resolved -> Running ->
//! Successful, or Failed), every partition's current task attempt and executor, the
//! per-partition task failure counts, each stage's attempt count, and the spooled
//! output locations producers have pushed to their consumers.
//!
//! The fault-tolerant scheduler drives it with method calls: `pop_next_task` when a
//! worker has a free slot, `update_task_status` with what workers report,
//! `reset_stages_on_lost_executor` when a worker disappears, and it acts on the
//! returned `GraphEvent`s (cancel tasks, finish or fail the job). There is no I/O and
//! no DataFusion here: stages are described abstractly by `StageSpec`, so the
//! recovery rules can be unit tested directly.
//!
//! Invariant kept by every mutation: a Resolved or Running stage has all its inputs
//! complete, i.e. every producer is Successful with all its outputs available. When a
//! producer loses outputs (lost worker, fetch failure) and some consumer still needs
//! them, the producer re-runs the lost partitions and its Resolved/Running consumers
//! fall back to Unresolved, recursively towards the leaves.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

/// One stage as the planner describes it. `inputs` and `output_links` must mirror
/// each other; the stage without output links is the final stage.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StageSpec {
    pub stage_id: usize,
    pub partitions: usize,
    pub inputs: Vec<usize>,
    pub output_links: Vec<usize>,
}

/// Where one partition of a stage's output was spooled.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct PartitionLocation {
    pub stage_id: usize,
    pub partition: usize,
    pub executor_id: String,
    pub path: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JobStatus {
    Queued,
    Running,
    Successful,
    Failed(String),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TaskAttemptStatus {
    Running,
    Successful {
        locations: Vec<PartitionLocation>,
    },
    /// A failed attempt waiting to be retried (the partition is available again).
    Failed {
        reason: String,
    },
}

/// The current attempt of one partition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskInfo {
    /// The attempt number; unique per partition over the graph's lifetime.
    pub task_id: usize,
    pub executor_id: String,
    pub status: TaskAttemptStatus,
}

impl TaskInfo {
    fn locations(&self) -> &[PartitionLocation] {
        match &self.status {
            TaskAttemptStatus::Successful { locations } => locations,
            _ => &[],
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct RunningTaskInfo {
    pub task_id: usize,
    pub stage_id: usize,
    pub partition: usize,
    pub executor_id: String,
}

/// A task to launch: the attempt to report back with and where its inputs are.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskDescription {
    pub job_id: String,
    pub stage_id: usize,
    pub partition: usize,
    pub task_attempt: usize,
    /// Input stage -> all its partitions' locations, in partition order.
    pub input_locations: BTreeMap<usize, Vec<PartitionLocation>>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskStatusUpdate {
    pub stage_id: usize,
    pub partition: usize,
    pub task_attempt: usize,
    pub state: TaskUpdateState,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum TaskUpdateState {
    Successful {
        path: String,
    },
    Failed {
        reason: String,
        retryable: bool,
    },
    /// The task could not read `map_partition` of `map_stage_id` from `executor_id`.
    FetchFailed {
        map_stage_id: usize,
        map_partition: usize,
        executor_id: String,
        reason: String,
    },
}

/// What the scheduler has to act on after an update.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GraphEvent {
    StageSucceeded(usize),
    /// The stage can run: call `revive` (or just `pop_next_task`).
    StageResolved(usize),
    /// Attempts that no longer count and should be killed on their workers.
    CancelTasks(Vec<RunningTaskInfo>),
    JobFinished,
    JobFailed(String),
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GraphError {
    #[error("stage {0} is defined twice")]
    DuplicateStage(usize),
    #[error("stage {0} has no partitions")]
    NoPartitions(usize),
    #[error("a job needs exactly one final stage (without output links), found {0:?}")]
    FinalStages(Vec<usize>),
    #[error("stage {stage} links to unknown stage {link}")]
    UnknownLink { stage: usize, link: usize },
    #[error(
        "stages {producer} and {consumer} disagree about their link: inputs and output_links must mirror each other"
    )]
    InconsistentLinks { producer: usize, consumer: usize },
    #[error("the stage graph has a cycle through stage {0}")]
    Cycle(usize),
    #[error("unknown stage {0}")]
    UnknownStage(usize),
    #[error("stage {stage} has no partition {partition}")]
    UnknownPartition { stage: usize, partition: usize },
    #[error("stage {stage} does not read stage {input}")]
    NotAnInput { stage: usize, input: usize },
    #[error("stage {0} has run tasks (or is not resolved): its task count is fixed")]
    AlreadyStarted(usize),
    #[error("stage {stage} is running but its input {input} is incomplete")]
    IncompleteInput { stage: usize, input: usize },
    #[cfg(test)]
    #[error("job {job_id} cannot succeed: its final stage {stage} has not succeeded")]
    NotSuccessful { job_id: String, stage: usize },
}

/// What a stage has received from one input stage.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StageOutput {
    /// Producer partition -> its locations.
    pub locations: BTreeMap<usize, Vec<PartitionLocation>>,
    pub complete: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ExecutionStage {
    Unresolved,
    Resolved,
    /// One slot per partition; `None` means not handed out yet.
    Running {
        tasks: Vec<Option<TaskInfo>>,
    },
    /// `lost` partitions' outputs are gone, but no consumer needed them (yet); they
    /// re-run as soon as one does.
    Successful {
        tasks: Vec<TaskInfo>,
        lost: BTreeSet<usize>,
    },
    Failed {
        error: String,
    },
}

#[derive(Debug, Clone)]
pub struct Stage {
    pub stage_id: usize,
    pub partitions: usize,
    pub inputs: BTreeMap<usize, StageOutput>,
    pub output_links: Vec<usize>,
    pub state: ExecutionStage,
    /// Restarts of the whole stage for any reason, so a flapping cluster cannot loop a
    /// job forever; fetch failures are refused once it reaches `max_stage_failures`.
    pub stage_attempt: usize,
    /// Failed attempts per partition, over all stage attempts.
    pub task_failures: Vec<usize>,
    /// Why the previous stage attempt was rolled back.
    pub failure_reasons: BTreeSet<String>,
    /// Never reused, so a late report from a superseded attempt is recognisable.
    next_attempt: Vec<usize>,
}

impl Stage {
    fn inputs_complete(&self) -> bool {
        self.inputs.values().all(|o| o.complete)
    }

    pub fn running_tasks(&self) -> Vec<RunningTaskInfo> {
        let ExecutionStage::Running { tasks } = &self.state else { return Vec::new() };
        let running = tasks.iter().enumerate().filter_map(|(partition, t)| {
            let t = t.as_ref().filter(|t| t.status == TaskAttemptStatus::Running)?;
            Some(RunningTaskInfo {
                task_id: t.task_id,
                stage_id: self.stage_id,
                partition,
                executor_id: t.executor_id.clone(),
            })
        });
        running.collect()
    }
}

fn is_available(slot: &Option<TaskInfo>) -> bool {
    match slot {
        None => true,
        Some(t) => matches!(t.status, TaskAttemptStatus::Failed { .. }),
    }
}

fn task_succeeded(slot: &Option<TaskInfo>) -> bool {
    matches!(slot, Some(TaskInfo { status: TaskAttemptStatus::Successful { .. }, .. }))
}

/// Side effects gathered while one call cascades through the graph.
#[derive(Default)]
struct Effects {
    events: Vec<GraphEvent>,
    killed: Vec<RunningTaskInfo>,
    touched: BTreeSet<usize>,
}

#[derive(Debug, Clone)]
pub struct ExecutionGraph {
    job_id: String,
    status: JobStatus,
    stages: BTreeMap<usize, Stage>,
    /// Producers before consumers: tasks are handed out in this order, and recovery
    /// walks it backwards so a consumer's need is known before its producers are looked at.
    topo: Vec<usize>,
    final_stage: usize,
}

impl ExecutionGraph {
    pub fn new(job_id: &str, specs: Vec<StageSpec>) -> Result<Self, GraphError> {
        let mut stages = BTreeMap::new();
        for spec in specs {
            let (id, n) = (spec.stage_id, spec.partitions);
            if n == 0 {
                return Err(GraphError::NoPartitions(id));
            }
            let stage = Stage {
                stage_id: id,
                partitions: n,
                inputs: spec.inputs.iter().map(|&i| (i, StageOutput::default())).collect(),
                output_links: spec.output_links.iter().copied().collect::<BTreeSet<_>>().into_iter().collect(),
                state: if spec.inputs.is_empty() { ExecutionStage::Resolved } else { ExecutionStage::Unresolved },
                stage_attempt: 0,
                task_failures: vec![0; n],
                failure_reasons: BTreeSet::new(),
                next_attempt: vec![0; n],
            };
            if stages.insert(id, stage).is_some() {
                return Err(GraphError::DuplicateStage(id));
            }
        }
        for stage in stages.values() {
            let id = stage.stage_id;
            for &input in stage.inputs.keys() {
                let producer = stages.get(&input).ok_or(GraphError::UnknownLink { stage: id, link: input })?;
                if !producer.output_links.contains(&id) {
                    return Err(GraphError::InconsistentLinks { producer: input, consumer: id });
                }
            }
            for &output in &stage.output_links {
                let consumer = stages.get(&output).ok_or(GraphError::UnknownLink { stage: id, link: output })?;
                if !consumer.inputs.contains_key(&id) {
                    return Err(GraphError::InconsistentLinks { producer: id, consumer: output });
                }
            }
        }
        let finals: Vec<usize> = stages.values().filter(|s| s.output_links.is_empty()).map(|s| s.stage_id).collect();
        if finals.len() != 1 {
            return Err(GraphError::FinalStages(finals));
        }
        // Kahn's algorithm; the smallest ready id first keeps the order deterministic.
        let mut pending: BTreeMap<usize, usize> = stages.values().map(|s| (s.stage_id, s.inputs.len())).collect();
        let mut ready: BTreeSet<usize> = pending.iter().filter(|(_, n)| **n == 0).map(|(id, _)| *id).collect();
        let mut topo = Vec::with_capacity(stages.len());
        while let Some(id) = ready.pop_first() {
            topo.push(id);
            for c in &stages[&id].output_links {
                let n = pending.get_mut(c).expect("links were validated");
                *n -= 1;
                if *n == 0 {
                    ready.insert(*c);
                }
            }
        }
        if topo.len() < stages.len() {
            let stuck = stages.keys().copied().find(|id| !topo.contains(id)).unwrap_or_default();
            return Err(GraphError::Cycle(stuck));
        }
        Ok(ExecutionGraph {
            job_id: job_id.to_string(),
            status: JobStatus::Queued,
            stages,
            topo,
            final_stage: finals[0],
        })
    }

    #[cfg(test)]
    pub fn status(&self) -> &JobStatus {
        &self.status
    }

    #[cfg(test)]
    pub fn stage_count(&self) -> usize {
        self.stages.len()
    }

    pub fn stage(&self, stage_id: usize) -> Option<&Stage> {
        self.stages.get(&stage_id)
    }

    /// Every stage is successful.
    pub fn is_successful(&self) -> bool {
        self.stages.values().all(|s| matches!(s.state, ExecutionStage::Successful { .. }))
    }

    pub fn is_complete(&self) -> bool {
        matches!(self.status, JobStatus::Successful | JobStatus::Failed(_))
    }

    /// Tasks `pop_next_task` could hand out now. Resolved stages count because
    /// `pop_next_task` revives them itself.
    pub fn available_tasks(&self) -> usize {
        if self.is_complete() {
            return 0;
        }
        let per_stage = self.stages.values().map(|s| match &s.state {
            ExecutionStage::Resolved => s.partitions,
            ExecutionStage::Running { tasks } => tasks.iter().filter(|t| is_available(t)).count(),
            _ => 0,
        });
        per_stage.sum()
    }

    pub fn running_stages(&self) -> Vec<usize> {
        self.stages.values().filter(|s| matches!(s.state, ExecutionStage::Running { .. })).map(|s| s.stage_id).collect()
    }

    pub fn running_tasks(&self) -> Vec<RunningTaskInfo> {
        self.stages.values().flat_map(Stage::running_tasks).collect()
    }

    /// Resolved stages become Running; true if any did.
    pub fn revive(&mut self) -> bool {
        if self.is_complete() {
            return false;
        }
        let mut any = false;
        for stage in self.stages.values_mut() {
            if matches!(stage.state, ExecutionStage::Resolved) {
                stage.state = ExecutionStage::Running { tasks: vec![None; stage.partitions] };
                any = true;
            }
        }
        if any && self.status == JobStatus::Queued {
            self.status = JobStatus::Running;
        }
        any
    }

    /// The next task to launch on `executor_id`, marked running there. The caller must
    /// launch it (or report it failed), or the partition stays assigned.
    pub fn pop_next_task(&mut self, executor_id: &str) -> Result<Option<TaskDescription>, GraphError> {
        if self.is_complete() {
            return Ok(None);
        }
        self.revive();
        for &id in &self.topo {
            let stage = self.stages.get_mut(&id).expect("topo lists known stages");
            let ExecutionStage::Running { tasks } = &mut stage.state else { continue };
            let Some(partition) = tasks.iter().position(is_available) else { continue };
            if let Some((&input, _)) = stage.inputs.iter().find(|(_, o)| !o.complete) {
                return Err(GraphError::IncompleteInput { stage: id, input });
            }
            let attempt = stage.next_attempt[partition];
            stage.next_attempt[partition] += 1;
            tasks[partition] = Some(TaskInfo {
                task_id: attempt,
                executor_id: executor_id.to_string(),
                status: TaskAttemptStatus::Running,
            });
            let input_locations = stage.input_locations();
            return Ok(Some(TaskDescription {
                job_id: self.job_id.clone(),
                stage_id: id,
                partition,
                task_attempt: attempt,
                input_locations,
            }));
        }
        Ok(None)
    }

    /// Applies what `executor_id` reported. Reports from superseded attempts, or for
    /// stages no longer running, are ignored. The whole batch is checked first, so an
    /// error leaves the graph untouched.
    pub fn update_task_status(
        &mut self,
        executor_id: &str,
        statuses: Vec<TaskStatusUpdate>,
        max_task_failures: usize,
        max_stage_failures: usize,
    ) -> Result<Vec<GraphEvent>, GraphError> {
        for u in &statuses {
            let stage = self.stages.get(&u.stage_id).ok_or(GraphError::UnknownStage(u.stage_id))?;
            if u.partition >= stage.partitions {
                return Err(GraphError::UnknownPartition { stage: u.stage_id, partition: u.partition });
            }
            if let TaskUpdateState::FetchFailed { map_stage_id, .. } = &u.state {
                if !stage.inputs.contains_key(map_stage_id) {
                    return Err(GraphError::NotAnInput { stage: u.stage_id, input: *map_stage_id });
                }
            }
        }
        let mut fx = Effects::default();
        for u in statuses {
            if self.is_complete() {
                break;
            }
            self.apply_update(executor_id, u, max_task_failures, max_stage_failures, &mut fx);
        }
        let mut events = Vec::new();
        if !fx.killed.is_empty() {
            events.push(GraphEvent::CancelTasks(fx.killed));
        }
        events.extend(fx.events);
        Ok(events)
    }

    fn apply_update(
        &mut self,
        executor_id: &str,
        u: TaskStatusUpdate,
        max_task_failures: usize,
        max_stage_failures: usize,
        fx: &mut Effects,
    ) {
        let (s, p) = (u.stage_id, u.partition);
        let Some(stage) = self.stages.get_mut(&s) else { return };
        let stage_attempt = stage.stage_attempt;
        let ExecutionStage::Running { tasks } = &mut stage.state else { return };
        let Some(task) = tasks[p].as_mut() else { return };
        if task.task_id != u.task_attempt
            || task.executor_id != executor_id
            || task.status != TaskAttemptStatus::Running
        {
            return;
        }
        match u.state {
            TaskUpdateState::Successful { path } => {
                let location =
                    PartitionLocation { stage_id: s, partition: p, executor_id: executor_id.to_string(), path };
                task.status = TaskAttemptStatus::Successful { locations: vec![location] };
                if tasks.iter().all(task_succeeded) {
                    self.complete_stage(s, fx);
                }
            }
            TaskUpdateState::Failed { reason, retryable } => {
                task.status = TaskAttemptStatus::Failed { reason: reason.clone() };
                stage.task_failures[p] += 1;
                let failures = stage.task_failures[p];
                if retryable && failures < max_task_failures {
                    return;
                }
                let error = if retryable {
                    format!("task {p} of stage {s} failed {failures} times, most recent failure: {reason}")
                } else {
                    format!("task {p} of stage {s} failed with a non-retryable error: {reason}")
                };
                self.abort(s, error, fx);
            }
            TaskUpdateState::FetchFailed { map_stage_id, map_partition, executor_id: map_executor, reason } => {
                // Not the task's fault, so no task failure is counted; the stage as a
                // whole has to wait for the producer to recompute.
                let error = format!("task {p} of stage {s} could not fetch partition {map_partition} of stage {map_stage_id} from {map_executor}: {reason}");
                task.status = TaskAttemptStatus::Failed { reason: error.clone() };
                if stage_attempt >= max_stage_failures {
                    self.abort(
                        s,
                        format!("stage {s} failed {} times, most recent failure: {error}", stage_attempt + 1),
                        fx,
                    );
                    return;
                }
                fx.killed.extend(self.unresolve(s));
                if let Some(stage) = self.stages.get_mut(&s) {
                    stage.failure_reasons = BTreeSet::from([error]);
                }
                // Everything of the producer on that executor is suspect, not only the
                // partition that failed: the next reader would trip over the rest.
                if let Some(map) = self.stages.get_mut(&map_stage_id) {
                    if let ExecutionStage::Successful { tasks, lost } = &mut map.state {
                        lost.extend(
                            tasks.iter().enumerate().filter(|(_, t)| t.executor_id == map_executor).map(|(i, _)| i),
                        );
                    }
                }
                self.repair(fx);
            }
        }
    }

    /// Fails the stage and the job; every other running task is to be cancelled.
    fn abort(&mut self, stage_id: usize, error: String, fx: &mut Effects) {
        fx.killed.extend(self.running_tasks());
        self.fail_stage(stage_id, error.clone());
        self.fail_job(error.clone());
        fx.events.push(GraphEvent::JobFailed(error));
    }

    /// Running stage with all partitions successful -> Successful; pushes its outputs
    /// to its consumers and resolves those whose inputs are now all complete.
    fn complete_stage(&mut self, id: usize, fx: &mut Effects) -> bool {
        let Some(stage) = self.stages.get_mut(&id) else { return false };
        let ExecutionStage::Running { tasks } = &stage.state else { return false };
        let done: Option<Vec<TaskInfo>> = tasks
            .iter()
            .map(|t| t.clone().filter(|t| matches!(t.status, TaskAttemptStatus::Successful { .. })))
            .collect();
        let Some(done) = done else { return false };
        let locations: BTreeMap<usize, Vec<PartitionLocation>> =
            done.iter().enumerate().map(|(p, t)| (p, t.locations().to_vec())).collect();
        stage.state = ExecutionStage::Successful { tasks: done, lost: BTreeSet::new() };
        let consumers = stage.output_links.clone();
        fx.events.push(GraphEvent::StageSucceeded(id));
        for c in consumers {
            let Some(consumer) = self.stages.get_mut(&c) else { continue };
            consumer.inputs.insert(id, StageOutput { locations: locations.clone(), complete: true });
            if matches!(consumer.state, ExecutionStage::Unresolved) && consumer.inputs_complete() {
                consumer.state = ExecutionStage::Resolved;
                fx.events.push(GraphEvent::StageResolved(c));
            }
        }
        if id == self.final_stage && !self.is_complete() {
            self.status = JobStatus::Successful;
            fx.events.push(GraphEvent::JobFinished);
        }
        true
    }

    /// Any stage not yet successful or failed -> Failed.
    pub fn fail_stage(&mut self, stage_id: usize, err_msg: String) -> bool {
        let Some(stage) = self.stages.get_mut(&stage_id) else { return false };
        if matches!(stage.state, ExecutionStage::Successful { .. } | ExecutionStage::Failed { .. }) {
            return false;
        }
        stage.state = ExecutionStage::Failed { error: err_msg };
        true
    }

    pub fn fail_job(&mut self, error: String) {
        self.status = JobStatus::Failed(error);
    }

    fn stage_mut(&mut self, stage_id: usize) -> Result<&mut Stage, GraphError> {
        self.stages.get_mut(&stage_id).ok_or(GraphError::UnknownStage(stage_id))
    }
}

mod adaptive;
mod display;
mod recovery;
mod speculation;
#[cfg(test)]
#[path = "execution_graph_tests.rs"]
mod tests;
