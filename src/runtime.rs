//! The process's compute runtime: where query execution runs, apart from the runtime
//! that serves HTTP, long polls and heartbeats. Workers run their tasks here and the
//! coordinator its root stages; `flotilla local` shares one among all of them.
//!
//! Why a second runtime: a DataFusion operator can spin on the CPU for seconds between
//! two `.await`s. On a shared runtime that starves the task API and the heartbeat, and
//! the coordinator declares a busy worker lost. Here the compute threads are as many as
//! the cores and run at a lower scheduling priority (nice 10), so the control threads
//! always get a core within milliseconds.

use std::sync::OnceLock;

static COMPUTE: OnceLock<tokio::runtime::Runtime> = OnceLock::new();

/// Stack of runtime threads: deep expressions are evaluated, encoded and decoded
/// recursively; only touched pages take memory.
pub const THREAD_STACK: usize = 16 << 20;

/// Niceness of compute threads: lower priority than the control plane's threads.
const COMPUTE_NICE: i32 = 10;

/// The compute runtime, built on first use with one worker thread per core.
pub fn compute() -> tokio::runtime::Handle {
    COMPUTE
        .get_or_init(|| {
            let cores = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(2);
            tokio::runtime::Builder::new_multi_thread()
                .worker_threads(cores)
                .thread_name("flotilla-compute")
                .thread_stack_size(THREAD_STACK)
                .on_thread_start(lower_priority)
                .enable_all()
                .build()
                .expect("building the compute runtime")
        })
        .handle()
        .clone()
}

/// Lowers the calling thread's priority; on Linux nice values are per thread.
fn lower_priority() {
    #[cfg(target_os = "linux")]
    // SAFETY: gettid has no preconditions; setpriority only reads its arguments.
    unsafe {
        let tid = libc::syscall(libc::SYS_gettid) as libc::id_t;
        let _ = libc::setpriority(libc::PRIO_PROCESS, tid, COMPUTE_NICE);
    }
}

/// Runs `f` on a fresh thread with a stack large enough for deeply nested SQL, and
/// returns its result. Parsing and planning recurse over expression trees; a tokio
/// worker's 2 MiB stack overflows (and aborts the process) on a few thousand terms.
/// The thread is not joined when the receiver is dropped: a cancelled planning goes
/// on to its end in the background and its result is discarded; `f` is handed a check
/// that says whether that happened, to skip work with effects. The thread runs at the
/// compute threads' lower priority.
pub fn spawn_with_big_stack<T, F>(name: &str, f: F) -> tokio::sync::oneshot::Receiver<std::thread::Result<T>>
where
    T: Send + 'static,
    F: FnOnce(&dyn Fn() -> bool) -> T + Send + 'static,
{
    let (tx, rx) = tokio::sync::oneshot::channel();
    let spawned = std::thread::Builder::new().name(name.to_string()).stack_size(PLANNING_STACK).spawn(move || {
        lower_priority();
        let abandoned = || tx.is_closed();
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(&abandoned)));
        let _ = tx.send(result);
    });
    if let Err(e) = spawned {
        // Without a thread the receiver just sees a closed channel; say why in the log.
        tracing::error!("cannot start a planning thread: {e}");
    }
    rx
}

/// Stack of planning threads: only touched pages take memory.
pub const PLANNING_STACK: usize = 256 << 20;

/// Executes `plan` on the compute runtime and returns its stream to a caller on the
/// control runtime (the coordinator's root stage, a query that reads no tables). Batches cross over
/// a small channel; dropping the stream stops the work.
pub fn execute_on_compute(
    plan: std::sync::Arc<dyn datafusion::physical_plan::ExecutionPlan>,
    ctx: std::sync::Arc<datafusion::execution::TaskContext>,
) -> datafusion::physical_plan::SendableRecordBatchStream {
    use datafusion::common::runtime::SpawnedTask;
    use futures::StreamExt;
    let (tx, rx) = tokio::sync::mpsc::channel(2);
    let schema = plan.schema();
    let producer = async move {
        // All partitions as one stream (the root stages have one).
        let mut stream = match datafusion::physical_plan::execute_stream(plan, ctx) {
            Ok(s) => s,
            Err(e) => {
                let _ = tx.send(Err(e)).await;
                return;
            }
        };
        while let Some(item) = stream.next().await {
            if tx.send(item).await.is_err() {
                return;
            }
        }
    };
    // SpawnedTask aborts the producer when dropped; entering the compute runtime makes
    // it spawn there.
    let task = {
        let handle = compute();
        let _entered = handle.enter();
        SpawnedTask::spawn(producer)
    };
    let batches =
        futures::stream::unfold(
            (rx, task),
            |(mut rx, task)| async move { rx.recv().await.map(|item| (item, (rx, task))) },
        );
    Box::pin(datafusion::physical_plan::stream::RecordBatchStreamAdapter::new(schema, batches))
}
