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

/// Runs `f` on a thread with a stack large enough for deeply nested SQL, and returns
/// its result. Parsing and planning recurse over expression trees; a tokio worker's
/// 2 MiB stack overflows (and aborts the process) on a few thousand terms. The thread
/// is not joined when the receiver is dropped: a cancelled planning goes on to its end
/// in the background and its result is discarded; `f` is handed a check that says
/// whether that happened, to skip work with effects. The thread runs at the compute
/// threads' lower priority.
///
/// Threads are kept for the next call (up to `MAX_IDLE_BIG_STACK_THREADS` idle at
/// once): starting one, touching its fresh stack and building what it caches (the
/// planner's runtime) cost a query of tens of milliseconds most of a millisecond.
pub fn spawn_with_big_stack<T, F>(name: &str, f: F) -> tokio::sync::oneshot::Receiver<std::thread::Result<T>>
where
    T: Send + 'static,
    F: FnOnce(&dyn Fn() -> bool) -> T + Send + 'static,
{
    let (tx, rx) = tokio::sync::oneshot::channel();
    let mut job: BigStackJob = Box::new(move || {
        let abandoned = || tx.is_closed();
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(&abandoned)));
        let completed = result.is_ok();
        let _ = tx.send(result);
        completed
    });
    loop {
        let Some(idle) = IDLE_BIG_STACK.lock().pop() else { break };
        match idle.send(job) {
            Ok(()) => return rx,
            // That thread has gone; try the next.
            Err(std::sync::mpsc::SendError(j)) => job = j,
        }
    }
    let spawned = std::thread::Builder::new().name(name.to_string()).stack_size(PLANNING_STACK).spawn(move || {
        lower_priority();
        let mut job = job;
        loop {
            // A thread whose job panicked is not trusted with another: what it cached
            // may be half-built.
            if !job() {
                return;
            }
            let (next_tx, next_rx) = std::sync::mpsc::channel();
            {
                let mut idle = IDLE_BIG_STACK.lock();
                if idle.len() >= MAX_IDLE_BIG_STACK_THREADS {
                    return;
                }
                idle.push(next_tx);
            }
            match next_rx.recv() {
                Ok(next) => job = next,
                Err(_) => return,
            }
        }
    });
    if let Err(e) = spawned {
        // Without a thread the receiver just sees a closed channel; say why in the log.
        tracing::error!("cannot start a planning thread: {e}");
    }
    rx
}

/// Runs one call; false when it panicked.
type BigStackJob = Box<dyn FnOnce() -> bool + Send>;

/// Idle big-stack threads, each waiting on its channel for one job.
static IDLE_BIG_STACK: parking_lot::Mutex<Vec<std::sync::mpsc::Sender<BigStackJob>>> =
    parking_lot::Mutex::new(Vec::new());

/// A cap on idle threads kept; planning runs at most 2 x cores + 2 at once
/// (`coordinator::planning`), so on up to 7 cores none beyond that is ever kept.
const MAX_IDLE_BIG_STACK_THREADS: usize = 16;

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

#[cfg(test)]
mod tests {
    use super::spawn_with_big_stack;

    fn run<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> std::thread::Result<T> {
        spawn_with_big_stack("flotilla-test-big-stack", move |_| f()).blocking_recv().expect("the thread answers")
    }

    /// A thread is kept for the next call, one whose call panicked is not, and neither
    /// the panic nor the reuse changes what later calls get.
    #[test]
    fn big_stack_threads_are_reused_but_not_after_a_panic() {
        // Other tests plan concurrently and take idle threads too: the calls here only
        // assert what holds whichever thread runs them.
        let first = run(|| std::thread::current().id()).unwrap();
        let again: Vec<_> = (0..20).map(|_| run(|| std::thread::current().id()).unwrap()).collect();
        assert!(again.contains(&first) || again.windows(2).any(|w| w[0] == w[1]), "no thread was ever reused");
        let panicked = run(|| -> std::thread::ThreadId { panic!("planning bug") });
        assert!(panicked.is_err());
        // Deep recursion still fits: the stack is the big one, on new and reused threads.
        fn depth(n: u64) -> u64 {
            let pad = [n; 64];
            if n == 0 {
                0
            } else {
                std::hint::black_box(pad)[0] - n + 1 + depth(n - 1)
            }
        }
        for _ in 0..3 {
            assert_eq!(run(|| depth(50_000)).unwrap(), 50_000);
        }
        let abandoned = spawn_with_big_stack("flotilla-test-big-stack", |abandoned| {
            std::thread::sleep(std::time::Duration::from_millis(50));
            abandoned()
        });
        drop(abandoned);
        assert_eq!(run(|| 7).unwrap(), 7);
    }
}
