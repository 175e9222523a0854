//! `SqlTask`: one task of one stage on this worker. It decodes its fragment, runs its
//! slice of the fragment's partitions, lays the output into its `OutputBuffer`, and
//! keeps a `TaskStateMachine` the coordinator long-polls. Created and looked up by the
//! `SqlTaskManager`; the task API handlers read its buffers and status.

use crate::error_code::{ErrorCode, FailureCode};
use datafusion::common::{exec_err, plan_datafusion_err, plan_err};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use datafusion::arrow::array::RecordBatch;
use datafusion::arrow::compute::BatchCoalescer;
use datafusion::error::DataFusionError;
use datafusion::execution::TaskContext;
use datafusion::physical_plan::metrics;
use datafusion::physical_plan::repartition::{BatchPartitioner, RepartitionExec};
use datafusion::physical_plan::{ExecutionPlan, ExecutionPlanProperties};
use futures::StreamExt;
use parking_lot::Mutex;
use tokio::sync::Notify;
use tokio::task::JoinHandle;

use super::task_output::{Finished, TaskOutput};
use super::task_plan::{task_context, task_plan, PartitionRun, TaskPlan};
use super::WorkerError;
use crate::codec::FlotillaCodec;
use crate::exchange::client::{ExchangeClient, ExchangeStats};
use crate::exchange::output_buffer::{BufferError, BufferResult, OutputBuffer};
use crate::exchange::remote_source::SourceLocations;
use crate::exchange::spool::SpoolWriter;
use crate::protocol::{
    OutputBufferSpec, SourceUpdate, TaskFailure, TaskId, TaskInfo, TaskState, TaskStats, TaskStatus,
};
use crate::scheduling::state_machine::StateMachine;

/// Most output buffers a task may have (consumer partitions): an output spec asking
/// for 10^11 would abort the worker on allocation.
pub const MAX_OUTPUT_BUFFERS: usize = 65_536;

/// Execution settings a task takes from its session.
#[derive(Debug, Clone)]
pub struct TaskSettings {
    pub batch_size: usize,
    pub output_buffer_bytes: u64,
}

impl TaskSettings {
    pub fn from_properties(props: &crate::config::SessionProperties, defaults: &TaskSettings) -> Self {
        TaskSettings {
            batch_size: props.batch_size.unwrap_or(defaults.batch_size),
            output_buffer_bytes: props.output_buffer_max_bytes.unwrap_or(defaults.output_buffer_bytes),
        }
    }
}

struct Inner {
    machine: StateMachine<TaskState>,
    failure: Option<TaskFailure>,
    handles: Vec<JoinHandle<()>>,
}

pub struct SqlTask {
    id: TaskId,
    node_id: String,
    partitions: Vec<usize>,
    /// The fragment's partition count.
    input_partitions: usize,
    /// For each partition the task runs: the plan's partition to execute (the plan
    /// may be narrowed to the task's partitions) and the fragment's it stands for.
    runs: Vec<(usize, usize)>,
    spec: OutputBufferSpec,
    inner: Mutex<Inner>,
    /// Woken on every status change, for long polls.
    status_changed: Arc<Notify>,
    output: TaskOutput,
    sources: Arc<SourceLocations>,
    input: Arc<ExchangeStats>,
    output_rows: AtomicU64,
    output_bytes: AtomicU64,
    /// Bytes written to each consumer partition of a partitioned output, reported
    /// once the task finished: what adaptive planning sizes the consumer's tasks by.
    partition_bytes: Vec<AtomicU64>,
    created: Instant,
    ended: Mutex<Option<Instant>>,
    /// When a client (the coordinator, or a consumer task) last asked about this task;
    /// a task nobody asks about for the client timeout is abandoned.
    last_contact: Mutex<Instant>,
    memory: Arc<super::memory::TaskMemoryPool>,
    /// The running plan, for what its operators spilled.
    plan: Arc<dyn ExecutionPlan>,
    /// Failure injection's `slow` kind: a wait after every batch the plan yields.
    batch_delay: Option<std::time::Duration>,
}

impl std::fmt::Debug for SqlTask {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SqlTask({})", self.id)
    }
}

/// Everything needed to start a task, checked by the manager before creating it.
pub struct TaskStart {
    pub id: TaskId,
    pub node_id: String,
    pub fragment: Vec<u8>,
    pub partitions: Vec<usize>,
    pub task_index: usize,
    pub spec: OutputBufferSpec,
    pub sources: Vec<SourceUpdate>,
    pub settings: TaskSettings,
    pub client: ExchangeClient,
    pub input_stats: Arc<ExchangeStats>,
    pub task_ctx: Arc<TaskContext>,
    /// Spool the output here (retry policy `task`); the caller created it.
    pub spool: Option<Arc<SpoolWriter>>,
    /// Decodes the fragment: the worker's connectors.
    pub codec: FlotillaCodec,
    /// The task's share of the worker's memory pool (its `task_ctx` reserves there).
    pub memory: Arc<super::memory::TaskMemoryPool>,
    /// Failure injection: the task fails as it starts, before any of its work runs (a
    /// task failed after starting could finish first, and a test of retries that run
    /// out would see it succeed).
    pub fail_injected: bool,
    /// Failure injection's `slow` kind: a wait after every batch (a straggler).
    pub batch_delay: Option<std::time::Duration>,
}

/// A context with `base`'s session and functions, and `config` and `runtime`.
pub(crate) fn derived_context(
    base: &TaskContext,
    config: datafusion::prelude::SessionConfig,
    runtime: Arc<datafusion::execution::runtime_env::RuntimeEnv>,
) -> Arc<TaskContext> {
    Arc::new(TaskContext::new(
        base.task_id(),
        base.session_id(),
        config,
        base.scalar_functions().clone(),
        base.higher_order_functions().clone(),
        base.aggregate_functions().clone(),
        base.window_functions().clone(),
        runtime,
    ))
}

impl SqlTask {
    /// Decodes the fragment and starts running it. A fragment that does not decode is
    /// an error here, before any state exists, so a bad request changes nothing.
    pub fn start(start: TaskStart) -> Result<Arc<SqlTask>, DataFusionError> {
        let sources = Arc::new(SourceLocations::new(start.task_index, start.client));
        let codec = start.codec.with_resolver(sources.clone());
        let plan = codec.decode_plan(&start.fragment, &start.task_ctx)?;
        let (exec_plan, partitioner) = split_partitioner(&plan, &start.spec)?;
        let input_partitions = exec_plan.output_partitioning().partition_count();
        if let Some(bad) = start.partitions.iter().find(|p| **p >= input_partitions) {
            return plan_err!("partition {bad} out of range: fragment has {input_partitions}");
        }
        let TaskPlan { plan: exec_plan, runs, every_partition, join_filters } =
            task_plan(exec_plan, &start.partitions, input_partitions)?;
        let task_ctx = task_context(&start.task_ctx, every_partition, join_filters);
        let buffer_count = match start.spec {
            OutputBufferSpec::Partitioned { partitions } => partitions,
            OutputBufferSpec::Broadcast { buffers } => buffers,
            OutputBufferSpec::Passthrough => input_partitions,
        };
        if buffer_count == 0 || buffer_count > MAX_OUTPUT_BUFFERS {
            return plan_err!("an output of {buffer_count} buffers is out of range (1 to {MAX_OUTPUT_BUFFERS})");
        }
        // Every operator spends the task's budget for each batch it returns, so that one
        // looping over its input (a cross join feeding an aggregate) yields to the
        // runtime every so often, which is when an abort takes effect.
        let exec_plan = super::budgeted::budgeted(crate::plan::probe_pacer::pace_joins(exec_plan)?)?;
        let status_changed = Arc::new(Notify::new());
        let output = match start.spool {
            Some(spool) => TaskOutput::spool(spool),
            None => {
                let buffer = Arc::new(OutputBuffer::new(
                    buffer_count,
                    start.settings.output_buffer_bytes,
                    status_changed.clone(),
                ));
                if start.spec == OutputBufferSpec::Passthrough {
                    // Buffer ids are fragment partitions; those of other tasks stay empty
                    // and nobody asks for them, so they count as done from the start.
                    for b in (0..buffer_count).filter(|b| !start.partitions.contains(b)) {
                        buffer.destroy(b).map_err(|e| DataFusionError::Internal(e.to_string()))?;
                    }
                }
                TaskOutput::buffer(buffer, matches!(start.spec, OutputBufferSpec::Broadcast { .. }))
            }
        };
        let task = Arc::new(SqlTask {
            id: start.id.clone(),
            node_id: start.node_id,
            partitions: start.partitions.clone(),
            input_partitions,
            runs,
            spec: start.spec,
            inner: Mutex::new(Inner {
                machine: StateMachine::new(format!("task {}", start.id), TaskState::Planned),
                failure: None,
                handles: Vec::new(),
            }),
            status_changed,
            output,
            sources,
            input: start.input_stats,
            output_rows: AtomicU64::new(0),
            output_bytes: AtomicU64::new(0),
            partition_bytes: match start.spec {
                OutputBufferSpec::Partitioned { partitions } => (0..partitions).map(|_| AtomicU64::new(0)).collect(),
                _ => Vec::new(),
            },
            created: Instant::now(),
            ended: Mutex::new(None),
            last_contact: Mutex::new(Instant::now()),
            memory: start.memory,
            plan: exec_plan.clone(),
            batch_delay: start.batch_delay,
        });
        task.add_sources(start.sources);
        task.transition(TaskState::Running);
        if start.fail_injected {
            task.fail_injected();
            return Ok(task);
        }
        // On the compute runtime: CPU-bound operators there cannot starve the task API.
        let driver = crate::runtime::compute().spawn(task.clone().drive(
            exec_plan,
            partitioner,
            task_ctx,
            start.settings.batch_size,
        ));
        task.inner.lock().handles.push(driver);
        Ok(task)
    }

    pub fn id(&self) -> &TaskId {
        &self.id
    }

    /// The join key hashes its dynamic filter source `filter` collected, once its
    /// plan has run (see `plan::dynamic_filter`).
    pub fn dynamic_filter(&self, filter: usize) -> Option<Vec<u64>> {
        dynamic_filter_hashes(&self.plan, filter)
    }

    /// Records that a client asked about the task.
    pub fn touch(&self) {
        *self.last_contact.lock() = Instant::now();
    }

    /// How long since a client last asked about the task.
    pub fn idle(&self) -> Duration {
        self.last_contact.lock().elapsed()
    }

    /// Adds upstream locations; later updates of a stage replace earlier ones.
    pub fn add_sources(&self, updates: Vec<SourceUpdate>) {
        self.sources.add(updates);
    }

    fn transition(&self, to: TaskState) -> bool {
        let changed = self.inner.lock().machine.try_transition(to);
        if changed {
            if to.is_done() {
                *self.ended.lock() = Some(Instant::now());
            }
            self.status_changed.notify_waiters();
        }
        changed
    }

    pub fn state(&self) -> TaskState {
        self.inner.lock().machine.state()
    }

    /// Bytes of output held in memory.
    pub fn buffered_bytes(&self) -> u64 {
        self.output.buffered_bytes()
    }

    /// Pages of `buffer` from `token`, long-polling up to `max_wait`.
    pub async fn results(
        &self,
        buffer: usize,
        token: u64,
        max_bytes: u64,
        max_wait: Duration,
    ) -> Result<BufferResult, WorkerError> {
        self.output.get(buffer, token, max_bytes, max_wait).await
    }

    /// What a reader of the output is told instead of pages (code, message): the
    /// task's own failure, or that its spooled output is gone.
    pub fn reader_failure(&self) -> Option<(FailureCode, String)> {
        match self.failure() {
            Some(f) => Some((f.code, f.message)),
            None if self.output.is_gone() => Some((
                ErrorCode::TaskAborted.into(),
                format!("the spooled output of task {} is gone: the task was aborted or deleted", self.id),
            )),
            None => None,
        }
    }

    /// A reader holds the pages before `token`.
    pub fn acknowledge(&self, buffer: usize, token: u64) -> Result<(), BufferError> {
        self.output.acknowledge(buffer, token)
    }

    /// A reader is done with `buffer`.
    pub fn destroy_buffer(&self, buffer: usize) -> Result<(), BufferError> {
        self.output.destroy_buffer(buffer)
    }

    /// Frees what a finished task still holds: buffered pages and spool files.
    pub fn release(&self) {
        self.output.release();
    }

    pub fn failure(&self) -> Option<TaskFailure> {
        self.inner.lock().failure.clone()
    }

    fn fail(&self, failure: TaskFailure) {
        {
            let mut inner = self.inner.lock();
            if inner.machine.is_final() {
                return;
            }
            inner.failure = Some(failure);
        }
        self.transition(TaskState::Failed);
        self.stop();
    }

    /// Fails the task because no client asked about it for `idle` (its coordinator is
    /// gone); a reader still polling learns `ABANDONED_TASK`.
    pub fn abandon(&self, idle: Duration) {
        self.fail(TaskFailure::new(
            ErrorCode::AbandonedTask,
            format!("task {} was abandoned: no client asked about it for {idle:?}", self.id),
        ));
    }

    /// Fails the task on purpose (failure injection).
    pub fn fail_injected(&self) {
        self.fail(TaskFailure::new(ErrorCode::InjectedFailure, format!("injected task failure in task {}", self.id)));
    }

    /// Ends the task because its coordinator no longer needs it. A task that had
    /// produced all its output is FINISHED unless `abort`: its query ended well, and
    /// the delete can overtake its reader's last acknowledgement. Otherwise CANCELED
    /// (ABORTED when `abort`).
    pub fn end(&self, abort: bool) {
        if !abort && self.state() == TaskState::Flushing && self.transition(TaskState::Finished) {
            self.stop();
            return;
        }
        self.abort(!abort);
    }

    /// Ends the task as ABORTED (or CANCELED), stops its work and frees its buffers.
    pub fn abort(&self, cancel: bool) {
        self.transition(if cancel { TaskState::Canceled } else { TaskState::Aborted });
        self.stop();
    }

    fn stop(&self) {
        let handles = std::mem::take(&mut self.inner.lock().handles);
        for h in handles {
            h.abort();
        }
        self.release();
        self.status_changed.notify_waiters();
    }

    pub fn status(&self) -> TaskStatus {
        let inner = self.inner.lock();
        let elapsed = self.ended.lock().unwrap_or_else(Instant::now).duration_since(self.created);
        let output_partition_bytes = match inner.machine.state() {
            TaskState::Finished => self.partition_bytes.iter().map(|b| b.load(Ordering::Relaxed)).collect(),
            _ => Vec::new(),
        };
        TaskStatus {
            task_id: self.id.clone(),
            state: inner.machine.state(),
            version: inner.machine.version() * 2 + u64::from(self.output.is_full()),
            node_id: self.node_id.clone(),
            failure: inner.failure.clone(),
            output_buffer_overutilized: self.output.is_full(),
            output_buffer_bytes: self.output.buffered_bytes(),
            stats: TaskStats {
                input_rows: self.input.rows.load(Ordering::Relaxed),
                input_bytes: self.input.bytes.load(Ordering::Relaxed),
                output_rows: self.output_rows.load(Ordering::Relaxed),
                output_bytes: self.output_bytes.load(Ordering::Relaxed),
                elapsed_ms: elapsed.as_millis() as u64,
                memory_reserved_bytes: self.memory.reserved() as u64,
                memory_peak_bytes: self.memory.peak() as u64,
                spilled_bytes: spilled_bytes(&self.plan),
                output_partition_bytes,
            },
        }
    }

    pub fn info(&self) -> TaskInfo {
        TaskInfo {
            status: self.status(),
            partitions: self.partitions.clone(),
            output: Some(self.spec),
            buffers: self.output.info(),
        }
    }

    /// Waits until the status version differs from `version` or `max_wait` passes.
    pub async fn wait_status(&self, version: u64, max_wait: Duration) -> TaskStatus {
        let deadline = tokio::time::Instant::now() + max_wait;
        loop {
            let notified = self.status_changed.notified();
            let status = self.status();
            if status.version != version {
                return status;
            }
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                return self.status();
            }
        }
    }

    async fn drive(
        self: Arc<Self>,
        plan: Arc<dyn ExecutionPlan>,
        partitioner: Option<datafusion::physical_plan::Partitioning>,
        ctx: Arc<TaskContext>,
        batch_size: usize,
    ) {
        // The fragment's partition count: a narrowed plan has only the task's.
        let input_partitions = self.input_partitions;
        // A JoinSet aborts every partition runner when the driver itself is aborted.
        let mut runs = tokio::task::JoinSet::new();
        for &(local, p) in &self.runs {
            let task = self.clone();
            let (plan, ctx, partitioner) = (plan.clone(), ctx.clone(), partitioner.clone());
            let run = PartitionRun { local, partition: p, input_partitions };
            runs.spawn(async move { task.run_partition(plan, run, partitioner, ctx, batch_size).await });
        }
        let mut first_error = None;
        while let Some(r) = runs.join_next().await {
            let outcome = r.unwrap_or_else(|e| exec_err!("partition runner ended: {e}"));
            if let Err(e) = outcome {
                first_error.get_or_insert(e);
                // One failed partition fails the task; stop the others now.
                runs.abort_all();
            }
        }
        let finished = match first_error {
            Some(e) => Err(e),
            None => {
                // Flushing before readers can see the last page: once a reader has
                // everything, a delete from the coordinator finds the task flushing
                // and finishes it (see `end`).
                if self.output.is_memory() {
                    self.transition(TaskState::Flushing);
                }
                self.output.finish()
            }
        };
        match finished {
            Err(e) => self.fail(crate::failure::failure_from_error(&e)),
            // A spooled task is done once its files are complete: nobody has to read
            // them for it to finish.
            Ok(Finished::Spooled(bytes)) => {
                self.output_bytes.store(bytes, Ordering::Relaxed);
                self.transition(TaskState::Flushing);
                self.transition(TaskState::Finished);
            }
            Ok(Finished::Draining) => {
                self.transition(TaskState::Flushing);
                loop {
                    let notified = self.status_changed.notified();
                    if self.output.is_finished() {
                        self.transition(TaskState::Finished);
                        break;
                    }
                    if self.state().is_done() {
                        break;
                    }
                    let _ = tokio::time::timeout(Duration::from_millis(500), notified).await;
                }
            }
        }
    }

    async fn run_partition(
        &self,
        plan: Arc<dyn ExecutionPlan>,
        run: PartitionRun,
        partitioning: Option<datafusion::physical_plan::Partitioning>,
        ctx: Arc<TaskContext>,
        batch_size: usize,
    ) -> Result<(), DataFusionError> {
        let PartitionRun { local, partition, input_partitions } = run;
        let mut stream = plan.execute(local, ctx)?;
        let schema = plan.schema();
        let mut partitioner = match &partitioning {
            Some(p) => Some(BatchPartitioner::try_new(p.clone(), metrics::Time::new(), partition, input_partitions)?),
            None => None,
        };
        let mut coalescers: HashMap<usize, BatchCoalescer> = HashMap::new();
        let target = batch_size.max(1);
        while let Some(batch) = stream.next().await {
            let batch = batch?;
            if let Some(delay) = self.batch_delay {
                tokio::time::sleep(delay).await;
            }
            if batch.num_rows() == 0 {
                continue;
            }
            let routed: Vec<(usize, RecordBatch)> = match partitioner.as_mut() {
                Some(p) => p.partition_iter(batch)?.collect::<Result<_, _>>()?,
                None => vec![(self.buffer_for(partition), batch)],
            };
            for (buffer, piece) in routed {
                let c = coalescers.entry(buffer).or_insert_with(|| BatchCoalescer::new(schema.clone(), target));
                c.push_batch(piece)?;
                while let Some(done) = c.next_completed_batch() {
                    self.emit(buffer, done).await?;
                }
            }
        }
        for (buffer, mut c) in coalescers {
            c.finish_buffered_batch()?;
            while let Some(done) = c.next_completed_batch() {
                self.emit(buffer, done).await?;
            }
        }
        Ok(())
    }

    fn buffer_for(&self, partition: usize) -> usize {
        match self.spec {
            OutputBufferSpec::Passthrough => partition,
            // Broadcast pages go to every buffer; the id is unused.
            _ => 0,
        }
    }

    async fn emit(&self, buffer: usize, batch: RecordBatch) -> Result<(), DataFusionError> {
        self.output_rows.fetch_add(batch.num_rows() as u64, Ordering::Relaxed);
        crate::metrics::PAGES_PRODUCED.fetch_add(1, Ordering::Relaxed);
        let bytes = self.output.write(buffer, &batch).await?;
        self.output_bytes.fetch_add(bytes, Ordering::Relaxed);
        if let Some(b) = self.partition_bytes.get(buffer) {
            // A spooled write counts its bytes only when the file is done: the
            // batch's own size stands in (what matters is how partitions compare).
            let written = if bytes > 0 { bytes } else { crate::exchange::page::data_bytes_of(&batch) as u64 };
            b.fetch_add(written, Ordering::Relaxed);
        }
        Ok(())
    }
}

/// For a partitioned output the fragment root is the `RepartitionExec` that was cut:
/// the task runs its input and partitions rows itself, so that each task repartitions
/// only its own slice instead of the exec pulling every input partition.
fn split_partitioner(
    plan: &Arc<dyn ExecutionPlan>,
    spec: &OutputBufferSpec,
) -> Result<(Arc<dyn ExecutionPlan>, Option<datafusion::physical_plan::Partitioning>), DataFusionError> {
    match spec {
        OutputBufferSpec::Partitioned { partitions } => {
            let any = plan.as_ref() as &dyn std::any::Any;
            let rep = any
                .downcast_ref::<RepartitionExec>()
                .ok_or_else(|| plan_datafusion_err!("a partitioned output needs a RepartitionExec fragment root"))?;
            let partitioning = rep.partitioning().clone();
            if partitioning.partition_count() != *partitions {
                return plan_err!(
                    "output spec has {partitions} partitions, fragment repartitions into {}",
                    partitioning.partition_count()
                );
            }
            Ok((rep.input().clone(), Some(partitioning)))
        }
        _ => Ok((plan.clone(), None)),
    }
}

/// Bytes the operators of `plan` wrote to spill files so far.
/// The key hashes the plan's dynamic filter source `filter` collected, when complete.
fn dynamic_filter_hashes(plan: &Arc<dyn ExecutionPlan>, filter: usize) -> Option<Vec<u64>> {
    use crate::plan::dynamic_filter_exec::DynamicFilterSourceExec;
    match (plan.as_ref() as &dyn std::any::Any).downcast_ref::<DynamicFilterSourceExec>() {
        Some(source) if source.id() == filter => source.hashes(),
        _ => plan.children().into_iter().find_map(|c| dynamic_filter_hashes(c, filter)),
    }
}

fn spilled_bytes(plan: &Arc<dyn ExecutionPlan>) -> u64 {
    let own = plan.metrics().and_then(|m| m.spilled_bytes()).unwrap_or(0) as u64;
    own + plan.children().into_iter().map(spilled_bytes).sum::<u64>()
}
