//! Unit tests of the `ExecutionGraph`, driven by task-status events.

use super::*;
use GraphEvent::*;

fn spec(stage_id: usize, partitions: usize, inputs: &[usize], output_links: &[usize]) -> StageSpec {
    StageSpec { stage_id, partitions, inputs: inputs.to_vec(), output_links: output_links.to_vec() }
}

/// Leaf stages 1 and 2 (two partitions each) feed the final stage 0.
fn three_stage() -> ExecutionGraph {
    ExecutionGraph::new("q1", vec![spec(0, 1, &[1, 2], &[]), spec(1, 2, &[], &[0]), spec(2, 2, &[], &[0])]).unwrap()
}

fn path(t: &TaskDescription) -> String {
    format!("/spool/{}/{}/{}", t.stage_id, t.partition, t.task_attempt)
}

fn update(t: &TaskDescription, state: TaskUpdateState) -> TaskStatusUpdate {
    TaskStatusUpdate { stage_id: t.stage_id, partition: t.partition, task_attempt: t.task_attempt, state }
}

fn ok(t: &TaskDescription) -> TaskStatusUpdate {
    update(t, TaskUpdateState::Successful { path: path(t) })
}

fn failed(t: &TaskDescription, retryable: bool) -> TaskStatusUpdate {
    update(t, TaskUpdateState::Failed { reason: "boom".into(), retryable })
}

fn fetch_failed(t: &TaskDescription, map_stage_id: usize, executor: &str) -> TaskStatusUpdate {
    update(
        t,
        TaskUpdateState::FetchFailed {
            map_stage_id,
            map_partition: 0,
            executor_id: executor.into(),
            reason: "connection refused".into(),
        },
    )
}

fn pop(g: &mut ExecutionGraph, executor: &str) -> TaskDescription {
    g.pop_next_task(executor).unwrap().expect("a task is available")
}

fn pop_all(g: &mut ExecutionGraph, executor: &str) -> Vec<TaskDescription> {
    std::iter::from_fn(|| g.pop_next_task(executor).unwrap()).collect()
}

fn report(g: &mut ExecutionGraph, executor: &str, updates: Vec<TaskStatusUpdate>) -> Vec<GraphEvent> {
    g.update_task_status(executor, updates, 3, 4).unwrap()
}

/// Runs every remaining task on `executor` until nothing is left.
fn finish(g: &mut ExecutionGraph, executor: &str) -> Vec<GraphEvent> {
    let mut events = Vec::new();
    loop {
        let tasks = pop_all(g, executor);
        if tasks.is_empty() {
            return events;
        }
        events.extend(report(g, executor, tasks.iter().map(ok).collect()));
    }
}

fn slot(g: &ExecutionGraph, stage: usize, partition: usize) -> Option<TaskInfo> {
    match &g.stage(stage).unwrap().state {
        ExecutionStage::Running { tasks } => tasks[partition].clone(),
        ExecutionStage::Successful { tasks, .. } => Some(tasks[partition].clone()),
        _ => None,
    }
}

fn running(task_id: usize, stage_id: usize, partition: usize, executor: &str) -> RunningTaskInfo {
    RunningTaskInfo { task_id, stage_id, partition, executor_id: executor.into() }
}

#[test]
fn three_stage_job_runs_to_completion() {
    let mut g = three_stage();
    assert_eq!(g.status(), &JobStatus::Queued);
    assert_eq!((g.stage_count(), g.available_tasks()), (3, 4));
    let leaves = pop_all(&mut g, "w1");
    assert_eq!(
        leaves.iter().map(|t| (t.stage_id, t.partition)).collect::<Vec<_>>(),
        vec![(1, 0), (1, 1), (2, 0), (2, 1)]
    );
    assert_eq!(g.status(), &JobStatus::Running);
    assert_eq!(g.running_stages(), vec![1, 2]);
    assert_eq!(g.running_tasks().len(), 4);
    let events = report(&mut g, "w1", leaves.iter().map(ok).collect());
    assert_eq!(events, vec![StageSucceeded(1), StageSucceeded(2), StageResolved(0)]);

    let last = pop(&mut g, "w2");
    assert_eq!((last.stage_id, last.partition, last.task_attempt), (0, 0, 0));
    let paths: Vec<&str> = last.input_locations[&1].iter().map(|l| l.path.as_str()).collect();
    assert_eq!(paths, vec!["/spool/1/0/0", "/spool/1/1/0"]);
    assert_eq!(last.input_locations[&2].len(), 2);
    assert_eq!(report(&mut g, "w2", vec![ok(&last)]), vec![StageSucceeded(0), JobFinished]);
    assert!(g.is_complete() && g.is_successful());
    assert_eq!(g.status(), &JobStatus::Successful);
    let expected =
        PartitionLocation { stage_id: 0, partition: 0, executor_id: "w2".into(), path: "/spool/0/0/0".into() };
    assert_eq!(g.output_locations(), vec![expected]);
    assert!(g.succeed_job().is_ok());
    assert_eq!(g.pop_next_task("w1").unwrap(), None);
}

#[test]
fn failed_task_is_retried_with_a_new_attempt() {
    let mut g = three_stage();
    let t = pop(&mut g, "w1");
    assert!(report(&mut g, "w1", vec![failed(&t, true)]).is_empty());
    assert_eq!(g.stage(1).unwrap().task_failures, vec![1, 0]);
    assert_eq!(g.available_tasks(), 4);
    let retry = pop(&mut g, "w2");
    assert_eq!((retry.stage_id, retry.partition, retry.task_attempt), (1, 0, 1));
    report(&mut g, "w2", vec![ok(&retry)]);
    assert!(matches!(slot(&g, 1, 0), Some(TaskInfo { task_id: 1, status: TaskAttemptStatus::Successful { .. }, .. })));
    assert_eq!(finish(&mut g, "w3").last(), Some(&JobFinished));
}

#[test]
fn max_task_failures_fails_the_job() {
    let mut g = three_stage();
    let first = pop(&mut g, "w1");
    let other = pop(&mut g, "w2");
    assert!(g.update_task_status("w1", vec![failed(&first, true)], 2, 4).unwrap().is_empty());
    let second = pop(&mut g, "w1");
    assert_eq!((second.partition, second.task_attempt), (0, 1));
    let events = g.update_task_status("w1", vec![failed(&second, true)], 2, 4).unwrap();
    assert_eq!(events[0], CancelTasks(vec![running(other.task_attempt, 1, 1, "w2")]));
    assert!(matches!(&events[1], JobFailed(msg) if msg.contains("failed 2 times")), "{events:?}");
    assert!(g.is_complete() && !g.is_successful());
    assert!(matches!(g.status(), JobStatus::Failed(_)));
    assert!(matches!(g.stage(1).unwrap().state, ExecutionStage::Failed { .. }));
    assert_eq!(g.pop_next_task("w3").unwrap(), None);
    assert!(g.to_string().contains("=========FailedStage[id=1, partitions=2]========="));

    // A non-retryable error needs no second chance.
    let mut g = three_stage();
    let t = pop(&mut g, "w1");
    let events = report(&mut g, "w1", vec![failed(&t, false)]);
    assert!(matches!(events.last(), Some(JobFailed(msg)) if msg.contains("non-retryable")));
}

#[test]
fn fetch_failure_reruns_producer_and_rolls_back_consumer() {
    let mut g = three_stage();
    let a = pop(&mut g, "w1");
    let rest = pop_all(&mut g, "w2");
    report(&mut g, "w1", vec![ok(&a)]);
    assert!(report(&mut g, "w2", rest.iter().map(ok).collect()).contains(&StageResolved(0)));
    let reader = pop(&mut g, "w3");
    assert!(report(&mut g, "w3", vec![fetch_failed(&reader, 1, "w1")]).is_empty());

    let consumer = g.stage(0).unwrap();
    assert!(matches!(consumer.state, ExecutionStage::Unresolved));
    assert_eq!(consumer.stage_attempt, 1);
    assert_eq!(consumer.task_failures, vec![0]);
    assert!(!consumer.inputs[&1].complete && consumer.inputs[&2].complete);
    assert_eq!(consumer.inputs[&1].locations.keys().copied().collect::<Vec<_>>(), vec![1]);
    assert_eq!(g.stage(1).unwrap().stage_attempt, 1);
    assert_eq!(slot(&g, 1, 0), None);
    assert_eq!(slot(&g, 1, 1).unwrap().executor_id, "w2");
    assert_eq!(g.available_tasks(), 1);

    let again = pop(&mut g, "w2");
    assert_eq!((again.stage_id, again.partition, again.task_attempt), (1, 0, 1));
    assert_eq!(report(&mut g, "w2", vec![ok(&again)]), vec![StageSucceeded(1), StageResolved(0)]);
    let reader = pop(&mut g, "w3");
    assert_eq!(reader.task_attempt, 1);
    assert!(reader.input_locations[&1].iter().all(|l| l.executor_id == "w2"));
    assert_eq!(report(&mut g, "w3", vec![ok(&reader)]).last(), Some(&JobFinished));
}

#[test]
fn a_superseded_readers_report_still_marks_the_output_lost() {
    let mut g = three_stage();
    let a = pop(&mut g, "w1");
    let b = pop(&mut g, "w2");
    let rest = pop_all(&mut g, "w3");
    report(&mut g, "w1", vec![ok(&a)]);
    report(&mut g, "w2", vec![ok(&b)]);
    report(&mut g, "w3", rest.iter().map(ok).collect());
    let reader = pop(&mut g, "w3");
    // The counted fetch failure names w1; the graph re-runs w1's partition only.
    report(&mut g, "w3", vec![fetch_failed(&reader, 1, "w1")]);
    assert_eq!(g.stage(1).unwrap().stage_attempt, 1);
    assert_eq!(slot(&g, 1, 1).unwrap().executor_id, "w2");
    // A second report, about w2, came from the reader attempt just rolled back:
    // w2's partition joins the re-run of stage 1.
    let (touched, killed) = g.report_unreadable_output(1, 1, &path(&b), "w2").unwrap();
    assert!(touched.contains(&1) && killed.is_empty());
    assert_eq!(slot(&g, 1, 1), None);
    assert_eq!(g.available_tasks(), 2);
    // Stage 2's output on w3 is Successful: a report naming it re-runs it.
    let two = rest.iter().find(|t| t.stage_id == 2).expect("a task of stage 2");
    let (touched, _) = g.report_unreadable_output(2, two.partition, &path(two), "w3").unwrap();
    assert!(touched.contains(&2), "{touched:?}");
    assert!(matches!(g.stage(2).unwrap().state, ExecutionStage::Running { .. }));
    // A report about an output that was replaced since changes nothing.
    let redo = pop_all(&mut g, "w1");
    // Both partitions of each: stage 2 kept both of its outputs on w3.
    assert_eq!(redo.len(), 4, "{redo:?}");
    report(&mut g, "w1", redo.iter().map(ok).collect());
    assert!(matches!(g.stage(0).unwrap().state, ExecutionStage::Resolved));
    let stale_path = path(two);
    let before = g.stage(2).unwrap().stage_attempt;
    let (touched, _) = g.report_unreadable_output(2, two.partition, &stale_path, "w3").unwrap();
    assert!(touched.is_empty());
    assert_eq!(g.stage(2).unwrap().stage_attempt, before);
    assert!(g.report_unreadable_output(2, 99, "x", "w3").is_err());
}

#[test]
fn repeated_fetch_failures_exhaust_stage_attempts() {
    let mut g = ExecutionGraph::new("q2", vec![spec(0, 1, &[1], &[]), spec(1, 1, &[], &[0])]).unwrap();
    let map = pop(&mut g, "w1");
    report(&mut g, "w1", vec![ok(&map)]);
    let reader = pop(&mut g, "w2");
    assert!(g.update_task_status("w2", vec![fetch_failed(&reader, 1, "w1")], 3, 1).unwrap().is_empty());
    let map = pop(&mut g, "w3");
    report(&mut g, "w3", vec![ok(&map)]);
    let reader = pop(&mut g, "w2");
    let events = g.update_task_status("w2", vec![fetch_failed(&reader, 1, "w3")], 3, 1).unwrap();
    assert!(matches!(events.last(), Some(JobFailed(msg)) if msg.contains("stage 0 failed 2 times")), "{events:?}");
}

#[test]
fn lost_executor_running_tasks_are_reset() {
    let mut g = three_stage();
    let a = pop(&mut g, "w1");
    let b = pop(&mut g, "w2");
    let (reset, killed) = g.reset_stages_on_lost_executor("w1").unwrap();
    assert_eq!(reset, BTreeSet::from([1]));
    assert_eq!(killed, vec![running(0, 1, 0, "w1")]);
    assert_eq!(g.running_tasks(), vec![running(0, 1, 1, "w2")]);
    let again = pop(&mut g, "w2");
    assert_eq!((again.stage_id, again.partition, again.task_attempt), (1, 0, 1));
    // The lost attempt's report arrives late and changes nothing.
    assert!(report(&mut g, "w1", vec![ok(&a)]).is_empty());
    assert_eq!(slot(&g, 1, 0).unwrap().status, TaskAttemptStatus::Running);
    assert_eq!(report(&mut g, "w2", vec![ok(&again), ok(&b)]), vec![StageSucceeded(1)]);
    assert_eq!(finish(&mut g, "w2").last(), Some(&JobFinished));
}

#[test]
fn lost_executor_outputs_rerun_and_consumers_roll_back() {
    let mut g = three_stage();
    let a = pop(&mut g, "w1");
    let rest = pop_all(&mut g, "w2");
    report(&mut g, "w1", vec![ok(&a)]);
    report(&mut g, "w2", rest.iter().map(ok).collect());
    pop(&mut g, "w3");
    let (reset, killed) = g.reset_stages_on_lost_executor("w1").unwrap();
    assert_eq!(reset, BTreeSet::from([0, 1]));
    assert_eq!(killed, vec![running(0, 0, 0, "w3")]);
    assert!(matches!(g.stage(0).unwrap().state, ExecutionStage::Unresolved));
    assert!(matches!(g.stage(2).unwrap().state, ExecutionStage::Successful { .. }));
    assert_eq!(g.running_stages(), vec![1]);
    assert_eq!(slot(&g, 1, 0), None);
    assert_eq!(slot(&g, 1, 1).unwrap().executor_id, "w2");
    assert_eq!(g.available_tasks(), 1);
    assert_eq!(finish(&mut g, "w2"), vec![StageSucceeded(1), StageResolved(0), StageSucceeded(0), JobFinished]);
    assert_eq!(g.output_locations()[0].path, "/spool/0/0/1");
}

#[test]
fn lost_outputs_rerun_only_once_needed_recursively() {
    // 2 -> 1 -> 0
    let mut g =
        ExecutionGraph::new("q3", vec![spec(0, 1, &[1], &[]), spec(1, 1, &[2], &[0]), spec(2, 2, &[], &[1])]).unwrap();
    finish_stage(&mut g, "w1");
    finish_stage(&mut g, "w2");
    pop(&mut g, "w3");
    // Stage 1 has consumed stage 2's outputs, so losing them costs nothing yet.
    let (reset, killed) = g.reset_stages_on_lost_executor("w1").unwrap();
    assert!(reset.is_empty() && killed.is_empty());
    assert!(matches!(&g.stage(2).unwrap().state, ExecutionStage::Successful { lost, .. } if lost.len() == 2));
    // Losing stage 1's output makes it re-run, which needs stage 2's outputs again.
    let (reset, killed) = g.reset_stages_on_lost_executor("w2").unwrap();
    assert_eq!(reset, BTreeSet::from([0, 1, 2]));
    assert_eq!(killed, vec![running(0, 0, 0, "w3")]);
    assert!(matches!(g.stage(1).unwrap().state, ExecutionStage::Unresolved));
    assert_eq!(g.running_stages(), vec![2]);
    assert_eq!(g.available_tasks(), 2);
    assert_eq!(finish(&mut g, "w4").last(), Some(&JobFinished));
    assert!(g.is_successful());
    assert_eq!(g.output_locations()[0].path, "/spool/0/0/1");
}

/// Runs the tasks available now (one stage in a chain) on `executor`.
fn finish_stage(g: &mut ExecutionGraph, executor: &str) {
    let tasks = pop_all(g, executor);
    assert!(!tasks.is_empty());
    report(g, executor, tasks.iter().map(ok).collect());
}

#[test]
fn late_status_from_old_attempt_is_ignored() {
    let mut g = three_stage();
    let old = pop(&mut g, "w1");
    report(&mut g, "w1", vec![failed(&old, true)]);
    let new = pop(&mut g, "w1");
    assert_eq!(new.task_attempt, 1);
    assert!(report(&mut g, "w1", vec![ok(&old)]).is_empty());
    // Right attempt, wrong executor.
    assert!(report(&mut g, "w2", vec![ok(&new)]).is_empty());
    assert_eq!(slot(&g, 1, 0).unwrap().status, TaskAttemptStatus::Running);
    report(&mut g, "w1", vec![ok(&new)]);
    assert_eq!(
        slot(&g, 1, 0).unwrap().status,
        TaskAttemptStatus::Successful {
            locations: vec![PartitionLocation {
                stage_id: 1,
                partition: 0,
                executor_id: "w1".into(),
                path: "/spool/1/0/1".into()
            }]
        }
    );
    // A failure reported after the success is stale too.
    assert!(report(&mut g, "w1", vec![failed(&new, true)]).is_empty());
    assert_eq!(g.stage(1).unwrap().task_failures, vec![1, 0]);
    let bogus = TaskStatusUpdate {
        stage_id: 9,
        partition: 0,
        task_attempt: 0,
        state: TaskUpdateState::Successful { path: "x".into() },
    };
    assert_eq!(g.update_task_status("w1", vec![bogus], 3, 4), Err(GraphError::UnknownStage(9)));
}

#[test]
fn display_shows_stage_headers() {
    let mut g = three_stage();
    let text = g.to_string();
    assert!(text.starts_with("ExecutionGraph[job_id=q1, available_tasks=4, complete=false]\n"), "{text}");
    assert!(text.contains("=========UnResolvedStage[id=0, children=2]========="), "{text}");
    assert!(text.contains("=========ResolvedStage[id=1, partitions=2]========="), "{text}");
    let t = pop(&mut g, "w1");
    report(&mut g, "w1", vec![ok(&t)]);
    let text = g.to_string();
    assert!(
        text.contains(
            "=========RunningStage[id=1, partitions=2, attempt=0, successful=1, running=0, available=1]========="
        ),
        "{text}"
    );
    assert!(text.contains("partition 0: Successful(/spool/1/0/0) (attempt=0, executor=w1)"), "{text}");
    finish(&mut g, "w1");
    let text = g.to_string();
    assert!(
        text.contains("complete=true")
            && text.contains("=========SuccessfulStage[id=0, partitions=1, attempt=0]========="),
        "{text}"
    );
    assert!(text.contains("Inputs{1: StageOutput { partition_locations: {0: w1, 1: w1}, complete: true }"), "{text}");
}

#[test]
fn new_validates_the_dag() {
    let two_finals = ExecutionGraph::new("x", vec![spec(0, 1, &[], &[]), spec(1, 1, &[], &[])]);
    assert!(matches!(two_finals, Err(GraphError::FinalStages(f)) if f == vec![0, 1]));
    let unknown = ExecutionGraph::new("x", vec![spec(0, 1, &[3], &[])]);
    assert!(matches!(unknown, Err(GraphError::UnknownLink { stage: 0, link: 3 })));
    let one_sided = ExecutionGraph::new("x", vec![spec(0, 1, &[1], &[]), spec(1, 1, &[], &[])]);
    assert!(matches!(one_sided, Err(GraphError::InconsistentLinks { producer: 1, consumer: 0 })));
    let cycle =
        ExecutionGraph::new("x", vec![spec(0, 1, &[1], &[]), spec(1, 1, &[2], &[0, 2]), spec(2, 1, &[1], &[1])]);
    assert!(matches!(cycle, Err(GraphError::Cycle(_))));
    assert!(matches!(ExecutionGraph::new("x", vec![spec(0, 0, &[], &[])]), Err(GraphError::NoPartitions(0))));
}

/// Reading the end of a job, which only these tests need.
impl ExecutionGraph {
    pub fn succeed_job(&mut self) -> Result<(), GraphError> {
        if !matches!(self.stages[&self.final_stage].state, ExecutionStage::Successful { .. }) {
            return Err(GraphError::NotSuccessful { job_id: self.job_id.clone(), stage: self.final_stage });
        }
        self.status = JobStatus::Successful;
        Ok(())
    }

    /// The final stage's outputs, in partition order; empty until it succeeded.
    pub fn output_locations(&self) -> Vec<PartitionLocation> {
        match &self.stages[&self.final_stage].state {
            ExecutionStage::Successful { tasks, .. } => tasks.iter().flat_map(|t| t.locations().to_vec()).collect(),
            _ => Vec::new(),
        }
    }
}
