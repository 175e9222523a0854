//! A worker's memory: one bounded pool that the tasks running here share fairly
//! (DataFusion's `FairSpillPool`: sorts, aggregations and joins that can spill get
//! an equal share each, and spill when it runs out), spill files in a directory of
//! the worker's own with a cap on their bytes, and for each query a limit on what
//! its tasks here hold together (`query_max_memory_per_node`).
//!
//! The task manager builds one `WorkerMemory` and asks it for each new task's
//! runtime: DataFusion's `RuntimeEnv` with the worker's object stores, caches and
//! spill directory, and the task's own `TaskMemoryPool`, which counts what the task
//! holds (reported in its status) and checks the query's limit before the shared
//! pool is asked.

use datafusion::common::exec_datafusion_err;
use std::collections::HashMap;
use std::num::NonZeroUsize;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Weak};

use datafusion::error::{DataFusionError, Result};
use datafusion::execution::disk_manager::{DiskManager, DiskManagerMode};
use datafusion::execution::memory_pool::{
    FairSpillPool, MemoryConsumer, MemoryLimit, MemoryPool, MemoryReservation, TrackConsumersPool, UnboundedMemoryPool,
};
use datafusion::execution::runtime_env::{RuntimeEnv, RuntimeEnvBuilder};

/// How the message of a failure over a query's per-node limit begins. (The task's
/// failure gets `EXCEEDED_LOCAL_MEMORY_LIMIT` from the error's kind, as does a full
/// worker pool's.)
pub const LOCAL_LIMIT_MARK: &str = "Query exceeded per-node memory limit";

/// Consumers that can spill may hold a query's per-node limit, and the worker's pool,
/// less this fraction of it (a tenth), which stays for those that cannot.
const SPILLABLE_HEADROOM_DIVISOR: usize = 10;

/// What consumers that can spill may hold of `limit`.
fn spillable_share(limit: usize) -> usize {
    limit - limit / SPILLABLE_HEADROOM_DIVISOR
}

/// How much memory a worker's tasks may hold and where they spill.
#[derive(Debug, Clone)]
pub struct MemorySettings {
    /// The pool every task of the worker reserves from.
    pub pool_bytes: usize,
    /// `spiller-spill-path`: spill files go to a directory of their own below it.
    pub spill_path: PathBuf,
    /// `max-spill-per-node`: bytes of spill files the worker may hold at once.
    pub max_spill_bytes: u64,
    /// `query.max-memory-per-node`: what one query's tasks here may hold together,
    /// unless its `query_max_memory_per_node` says otherwise.
    pub query_max_per_node: usize,
}

impl MemorySettings {
    /// The default pool: 70% of the machine's memory, or of the cgroup's limit when
    /// that is lower (a container's), and a query may use all of it.
    pub fn default_for_machine(spill_path: PathBuf) -> Self {
        let pool_bytes = (available_memory() as f64 * 0.7) as usize;
        MemorySettings { pool_bytes, spill_path, max_spill_bytes: 100 << 30, query_max_per_node: pool_bytes }
    }
}

/// The smaller of the machine's memory and the cgroup's limit.
pub fn available_memory() -> u64 {
    let machine = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| {
            m.lines()
                .find(|l| l.starts_with("MemTotal:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|kb| kb.parse::<u64>().ok())
        })
        .map(|kb| kb * 1024)
        .unwrap_or(4 << 30);
    let cgroup = ["/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"]
        .iter()
        .find_map(|p| std::fs::read_to_string(p).ok().and_then(|v| v.trim().parse::<u64>().ok()));
    cgroup.map_or(machine, |c| c.min(machine))
}

/// What one query holds on this worker, over all its tasks here.
#[derive(Debug)]
struct QueryMemory {
    limit: usize,
    reserved: AtomicUsize,
    /// Consumers of the query here that can spill, each held to an equal part of
    /// the query's spillable share.
    spillable_consumers: AtomicUsize,
}

impl QueryMemory {
    fn new(limit: usize) -> Self {
        QueryMemory { limit, reserved: AtomicUsize::new(0), spillable_consumers: AtomicUsize::new(0) }
    }

    /// What one consumer that can spill may hold: an equal part of the spillable
    /// share, as DataFusion's `FairSpillPool` gives out its pool.
    fn fair_share(&self) -> usize {
        spillable_share(self.limit) / self.spillable_consumers.load(Ordering::Relaxed).max(1)
    }
}

/// The worker's memory, shared by its tasks.
pub struct WorkerMemory {
    settings: MemorySettings,
    pool: Arc<dyn MemoryPool>,
    /// The process's runtime: the object stores and caches every task shares.
    connectors: Arc<RuntimeEnv>,
    disk: Arc<DiskManager>,
    node_id: String,
    /// `SPILL_PATH/NODE_ID`, this worker's own.
    spill_dir: std::path::PathBuf,
    queries: parking_lot::Mutex<HashMap<String, Weak<QueryMemory>>>,
}

impl WorkerMemory {
    /// The pool and the spill directory (`SPILL_PATH/NODE_ID`), over the object
    /// stores and caches of `connectors` (the process's runtime).
    pub fn new(settings: MemorySettings, connectors: Arc<RuntimeEnv>, node_id: &str) -> Result<Self> {
        // `--memory unlimited`: no pool at all, only the per-task counting (what the
        // benchmark compares the bounded pool's cost against).
        let pool: Arc<dyn MemoryPool> = if settings.pool_bytes == usize::MAX {
            Arc::new(UnboundedMemoryPool::default())
        } else {
            let fair = FairSpillPool::new(settings.pool_bytes);
            Arc::new(TrackConsumersPool::new(fair, NonZeroUsize::new(3).expect("three is not zero")))
        };
        // Marked as this process's, so that the next worker to start here removes it
        // if this one is killed before it can.
        let dir = settings.spill_path.join(node_id);
        crate::util::prepare_owned_dir(&dir)
            .map_err(|e| exec_datafusion_err!("cannot make the spill directory {}: {e}", dir.display()))?;
        let disk = DiskManager::builder()
            .with_mode(DiskManagerMode::Directories(vec![dir.clone()]))
            .with_max_temp_directory_size(settings.max_spill_bytes)
            .build()?;
        Ok(WorkerMemory {
            settings,
            pool,
            connectors,
            disk: Arc::new(disk),
            node_id: node_id.to_string(),
            spill_dir: dir,
            queries: Default::default(),
        })
    }

    pub fn settings(&self) -> &MemorySettings {
        &self.settings
    }

    /// The worker's own spill directory, gone; the shared parent stays (other
    /// workers on this machine may spill there).
    pub fn remove_spill_dir(&self) {
        let _ = std::fs::remove_dir_all(&self.spill_dir);
    }

    /// The worker's pool (what `memory` tables hold is reserved there too).
    pub fn pool(&self) -> Arc<dyn MemoryPool> {
        self.pool.clone()
    }

    /// Bytes reserved in the pool now, by every task.
    pub fn reserved(&self) -> usize {
        self.pool.reserved()
    }

    /// Bytes each query's tasks hold here now, by query id.
    pub fn query_reservations(&self) -> std::collections::BTreeMap<String, u64> {
        let queries = self.queries.lock();
        queries
            .iter()
            .filter_map(|(id, q)| q.upgrade().map(|q| (id.clone(), q.reserved.load(Ordering::Relaxed) as u64)))
            .filter(|(_, bytes)| *bytes > 0)
            .collect()
    }

    /// Bytes of spill files on disk now.
    pub fn spilled_on_disk(&self) -> u64 {
        self.disk.used_disk_space()
    }

    /// The runtime of a new task of `query_id`, whose tasks here may hold `limit`
    /// bytes together (the worker's default without one), and the task's pool.
    pub fn task_runtime(&self, query_id: &str, limit: Option<usize>) -> Result<(Arc<RuntimeEnv>, Arc<TaskMemoryPool>)> {
        let query = {
            let mut queries = self.queries.lock();
            queries.retain(|_, q| q.strong_count() > 0);
            match queries.get(query_id).and_then(Weak::upgrade) {
                Some(q) => q,
                None => {
                    let limit = limit.unwrap_or(self.settings.query_max_per_node);
                    let q = Arc::new(QueryMemory::new(limit));
                    queries.insert(query_id.to_string(), Arc::downgrade(&q));
                    q
                }
            }
        };
        let task_pool = Arc::new(TaskMemoryPool {
            inner: self.pool.clone(),
            query,
            node_id: self.node_id.clone(),
            reserved: AtomicUsize::new(0),
            peak: AtomicUsize::new(0),
        });
        let mut builder = RuntimeEnvBuilder::new()
            .with_memory_pool(task_pool.clone())
            .with_object_store_registry(self.connectors.object_store_registry.clone());
        builder.disk_manager = Some(self.disk.clone());
        let mut env = builder.build()?;
        // The builder only takes a cache configuration; the caches are the process's.
        env.cache_manager = self.connectors.cache_manager.clone();
        Ok((Arc::new(env), task_pool))
    }
}

/// One task's view of the worker's pool: what it holds now and at most, and the
/// query's limit checked before the pool is asked.
#[derive(Debug)]
pub struct TaskMemoryPool {
    inner: Arc<dyn MemoryPool>,
    query: Arc<QueryMemory>,
    node_id: String,
    reserved: AtomicUsize,
    peak: AtomicUsize,
}

impl TaskMemoryPool {
    /// Bytes the task holds now.
    pub fn reserved(&self) -> usize {
        self.reserved.load(Ordering::Relaxed)
    }

    /// The most the task has held at once.
    pub fn peak(&self) -> usize {
        self.peak.load(Ordering::Relaxed)
    }

    fn added(&self, n: usize) {
        let now = self.reserved.fetch_add(n, Ordering::Relaxed) + n;
        self.peak.fetch_max(now, Ordering::Relaxed);
    }
}

impl std::fmt::Display for TaskMemoryPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "task pool over {}", self.inner)
    }
}

impl MemoryPool for TaskMemoryPool {
    fn name(&self) -> &str {
        "task"
    }

    fn register(&self, consumer: &MemoryConsumer) {
        if consumer.can_spill() {
            self.query.spillable_consumers.fetch_add(1, Ordering::Relaxed);
        }
        self.inner.register(consumer)
    }

    fn unregister(&self, consumer: &MemoryConsumer) {
        if consumer.can_spill() {
            self.query.spillable_consumers.fetch_sub(1, Ordering::Relaxed);
        }
        self.inner.unregister(consumer)
    }

    fn grow(&self, reservation: &MemoryReservation, additional: usize) {
        self.inner.grow(reservation, additional);
        self.query.reserved.fetch_add(additional, Ordering::Relaxed);
        self.added(additional);
    }

    fn shrink(&self, reservation: &MemoryReservation, shrink: usize) {
        self.inner.shrink(reservation, shrink);
        self.query.reserved.fetch_sub(shrink, Ordering::Relaxed);
        self.reserved.fetch_sub(shrink, Ordering::Relaxed);
    }

    fn try_grow(&self, reservation: &MemoryReservation, additional: usize) -> Result<()> {
        // Consumers that can spill (sorts, aggregations) stop short of the limit and
        // spill there, leaving the rest to those that cannot: a spilled sort's merge
        // grows past the buffer it reserved up front, and with the sorts of the other
        // partitions holding everything up to the limit it failed the query.
        let limit = match reservation.consumer().can_spill() {
            true => spillable_share(self.query.limit),
            false => self.query.limit,
        };
        // And each of them to an equal part of that: without it one sort could take
        // nearly all of the share, and a sort of another partition with nothing in
        // memory to spill was refused its first batch and failed the query.
        let share = self.query.fair_share();
        if reservation.consumer().can_spill() && reservation.size() + additional > share {
            return Err(DataFusionError::ResourcesExhausted(format!(
                "{LOCAL_LIMIT_MARK} of {} on worker {}: {} holds {} and asked for {} more, over its fair share \
                 of {} (query_max_memory_per_node)",
                human(self.query.limit),
                self.node_id,
                reservation.consumer().name(),
                human(reservation.size()),
                human(additional),
                human(share),
            )));
        }
        let held = self.query.reserved.fetch_add(additional, Ordering::Relaxed);
        if held + additional > limit {
            self.query.reserved.fetch_sub(additional, Ordering::Relaxed);
            return Err(DataFusionError::ResourcesExhausted(format!(
                "{LOCAL_LIMIT_MARK} of {} on worker {}: {} asked for {} more with the query holding {} here \
                 (query_max_memory_per_node)",
                human(self.query.limit),
                self.node_id,
                reservation.consumer().name(),
                human(additional),
                human(held),
            )));
        }
        // The same tenth of the worker's pool stays free of them too: with the sorts of
        // two queries each within its own limit, the pool's fair shares let them fill
        // it whole, and the first merge of either failed.
        if let (true, MemoryLimit::Finite(size)) = (reservation.consumer().can_spill(), self.inner.memory_limit()) {
            let in_pool = self.inner.reserved();
            if in_pool + additional > spillable_share(size) {
                self.query.reserved.fetch_sub(additional, Ordering::Relaxed);
                return Err(DataFusionError::ResourcesExhausted(format!(
                    "the memory pool of worker {} ({}) holds {}: {} asked for {} more, and operators that can \
                     spill keep a tenth of the pool free",
                    self.node_id,
                    human(size),
                    human(in_pool),
                    reservation.consumer().name(),
                    human(additional),
                )));
            }
        }
        if let Err(e) = self.inner.try_grow(reservation, additional) {
            self.query.reserved.fetch_sub(additional, Ordering::Relaxed);
            return Err(e);
        }
        self.added(additional);
        Ok(())
    }

    fn reserved(&self) -> usize {
        self.reserved()
    }

    fn memory_limit(&self) -> MemoryLimit {
        self.inner.memory_limit()
    }
}

/// Bytes as people read them (`200.0 MiB`).
pub fn human(n: usize) -> String {
    let units = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = n as f64;
    let mut unit = 0;
    while v >= 1024.0 && unit < units.len() - 1 {
        v /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{n} B")
    } else {
        format!("{v:.1} {}", units[unit])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn memory(pool: usize, query: usize) -> (WorkerMemory, PathBuf) {
        let dir = std::env::temp_dir().join(format!("flotilla-memory-{}", crate::util::random_suffix(8)));
        let settings = MemorySettings {
            pool_bytes: pool,
            spill_path: dir.clone(),
            max_spill_bytes: 1 << 20,
            query_max_per_node: query,
        };
        let connectors = RuntimeEnvBuilder::new().build_arc().unwrap();
        (WorkerMemory::new(settings, connectors, "w1").unwrap(), dir)
    }

    /// The memory pool of a new task of `query`.
    fn task_pool(m: &WorkerMemory, query: &str) -> Arc<dyn MemoryPool> {
        m.task_runtime(query, None).unwrap().1
    }

    /// A consumer that can spill, as DataFusion's sorts are.
    fn spillable(name: &str, pool: &Arc<dyn MemoryPool>) -> MemoryReservation {
        MemoryConsumer::new(name).with_can_spill(true).register(pool)
    }

    #[test]
    fn a_query_is_held_to_its_limit_over_all_its_tasks_here() {
        let (m, dir) = memory(1000, 600);
        let (a, b, other) = (task_pool(&m, "q1"), task_pool(&m, "q1"), task_pool(&m, "q2"));
        let ra = MemoryConsumer::new("HashJoinInput").register(&a);
        let rb = MemoryConsumer::new("ExternalSorter").register(&b);
        ra.try_grow(400).unwrap();
        let err = rb.try_grow(300).unwrap_err().to_string();
        assert!(err.contains(LOCAL_LIMIT_MARK) && err.contains("ExternalSorter") && err.contains("w1"), "{err}");
        rb.try_grow(200).unwrap();
        assert_eq!(m.reserved(), 600);
        // Another query has a limit of its own; the pool still bounds both.
        let ro = MemoryConsumer::new("Aggregate").register(&other);
        assert!(ro.try_grow(500).is_err(), "the pool has 400 left");
        ro.try_grow(400).unwrap();
        ra.free();
        rb.shrink(100);
        assert_eq!(m.reserved(), 500);
        let _ = std::fs::remove_dir_all(dir);
    }

    /// Sorts that can spill stop a tenth short of the query's limit, so a merge that
    /// cannot spill still finds room.
    #[test]
    fn spillable_consumers_leave_a_tenth_of_the_limit_to_the_others() {
        let (m, dir) = memory(2000, 1000);
        let task = task_pool(&m, "q");
        let sort = spillable("ExternalSorter", &task);
        let merge = MemoryConsumer::new("ExternalSorterMerge").register(&task);
        sort.try_grow(900).unwrap();
        let err = sort.try_grow(1).unwrap_err().to_string();
        assert!(err.contains(LOCAL_LIMIT_MARK) && err.contains("ExternalSorter"), "{err}");
        merge.try_grow(100).unwrap();
        assert!(merge.try_grow(1).is_err(), "the limit still holds for all");
        let _ = std::fs::remove_dir_all(dir);
    }

    /// Two queries' sorts, each within its own limit, leave a tenth of the worker's
    /// pool to the merges; the pool's fair shares alone would let them fill it.
    #[test]
    fn spillable_consumers_of_all_queries_leave_a_tenth_of_the_pool() {
        let (m, dir) = memory(1000, 1000);
        let (a, b) = (task_pool(&m, "a"), task_pool(&m, "b"));
        let (sort_a, sort_b) = (spillable("ExternalSorter", &a), spillable("ExternalSorter", &b));
        sort_a.try_grow(500).unwrap();
        sort_b.try_grow(400).unwrap();
        let err = sort_b.try_grow(1).unwrap_err().to_string();
        assert!(err.contains("a tenth of the pool") && err.contains("w1"), "{err}");
        assert!(!err.contains(LOCAL_LIMIT_MARK), "not the query's limit: {err}");
        let merge = MemoryConsumer::new("ExternalSorterMerge").register(&b);
        merge.try_grow(100).unwrap();
        assert!(merge.try_grow(1).is_err(), "the pool is full");
        assert_eq!(m.reserved(), 1000);
        let _ = std::fs::remove_dir_all(dir);
    }

    /// Sorts of one query share its spillable part equally, so the one that comes
    /// last still finds room for its first batch (the others spill to make it).
    #[test]
    fn spillable_consumers_of_a_query_get_equal_parts() {
        let (m, dir) = memory(10_000, 1000);
        let (a, b) = (task_pool(&m, "q"), task_pool(&m, "q"));
        let (first, second) = (spillable("ExternalSorter[0]", &a), spillable("ExternalSorter[1]", &b));
        first.try_grow(450).unwrap();
        let err = first.try_grow(1).unwrap_err().to_string();
        assert!(err.contains(LOCAL_LIMIT_MARK) && err.contains("fair share of 450 B"), "{err}");
        second.try_grow(450).unwrap();
        // The first is gone: the one left may have the whole share.
        drop(first);
        second.try_grow(450).unwrap();
        assert!(second.try_grow(1).is_err(), "a tenth stays for those that cannot spill");
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn a_task_reports_what_it_holds_and_its_peak() {
        let (m, dir) = memory(1000, 1000);
        let (env, task) = m.task_runtime("q", Some(800)).unwrap();
        let r = MemoryConsumer::new("c").register(&env.memory_pool);
        r.try_grow(700).unwrap();
        assert!(r.try_grow(200).unwrap_err().to_string().contains("800 B"), "the query's own limit");
        r.shrink(500);
        assert_eq!((task.reserved(), task.peak()), (200, 700));
        drop(r);
        assert_eq!(task.reserved(), 0);
        let _ = std::fs::remove_dir_all(dir);
    }
}
