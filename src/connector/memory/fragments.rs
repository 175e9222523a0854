//! A worker's share of the `memory` catalog's rows: the fragments its writers made,
//! each the batches of one writer partition, held in the worker's memory pool until
//! the table is dropped. The worker's `SqlTaskManager` owns one and hands it to
//! tasks through their session config; writers put fragments in, scans read them
//! (from another worker over `GET /v1/memory/fragments/ID`), and the coordinator
//! settles a write (`POST /v1/memory/settle`: what the commit kept stays, the rest
//! goes) and drops a table's fragments (`POST /v1/memory/drop`).
//!
//! A fragment is pending until its write is settled: a write that fails or is
//! cancelled leaves nothing behind once the coordinator settles it, even the
//! fragments of writers whose answer never reached the commit. A writer finishing
//! after its write was settled drops what it made.

use datafusion::common::{exec_datafusion_err, exec_err};
use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

use datafusion::arrow::ipc::reader::StreamReader;
use datafusion::arrow::ipc::writer::StreamWriter;
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::error::{DataFusionError, Result};
use datafusion::execution::memory_pool::{MemoryConsumer, MemoryPool, MemoryReservation};
use datafusion::execution::SendableRecordBatchStream;
use futures::StreamExt;
use serde::{Deserialize, Serialize};

/// How many settled writes a worker remembers, to turn away their late writers.
const SETTLED_KEPT: usize = 1024;

/// One fragment: its rows, and the pool bytes they hold.
struct Stored {
    /// The write (its staging address) that made it.
    staging: String,
    batches: Arc<Vec<RecordBatch>>,
    _reservation: MemoryReservation,
}

/// `POST /v1/memory/settle`: the end of a write.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Settle {
    pub staging: String,
    /// The fragments its commit published; every other fragment of the write goes.
    pub keep: Vec<String>,
}

/// The fragments of one worker.
pub struct MemoryFragments {
    /// The worker's URL: a fragment's address names it.
    url: String,
    pool: Arc<dyn MemoryPool>,
    /// Reads fragments held by other workers.
    http: reqwest::Client,
    stored: parking_lot::Mutex<HashMap<String, Stored>>,
    settled: parking_lot::Mutex<VecDeque<String>>,
}

impl std::fmt::Debug for MemoryFragments {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemoryFragments").field("url", &self.url).field("fragments", &self.stored.lock().len()).finish()
    }
}

impl MemoryFragments {
    pub fn new(url: &str, pool: Arc<dyn MemoryPool>, http: reqwest::Client) -> Self {
        MemoryFragments { url: url.to_string(), pool, http, stored: Default::default(), settled: Default::default() }
    }

    pub fn url(&self) -> &str {
        &self.url
    }

    /// Writes `input` as fragment `id` of the write `staging`, each batch reserved in
    /// the pool before it is kept; answers the rows written.
    pub async fn write(&self, staging: &str, id: &str, mut input: SendableRecordBatchStream) -> Result<u64> {
        let reservation = MemoryConsumer::new(format!("memory table fragment {id}")).register(&self.pool);
        let (mut batches, mut rows) = (Vec::new(), 0u64);
        while let Some(batch) = input.next().await {
            let batch = batch?;
            reservation.try_grow(batch.get_array_memory_size()).map_err(|e| {
                DataFusionError::ResourcesExhausted(format!(
                    "memory tables on worker {} cannot grow by another batch: {e}",
                    self.url
                ))
            })?;
            rows += batch.num_rows() as u64;
            batches.push(batch);
        }
        if self.settled.lock().contains(&staging.to_string()) {
            return exec_err!("the write {staging} was ended before its writer");
        }
        let stored = Stored { staging: staging.to_string(), batches: Arc::new(batches), _reservation: reservation };
        self.stored.lock().insert(id.to_string(), stored);
        Ok(rows)
    }

    /// A fragment held here.
    pub fn local(&self, id: &str) -> Option<Arc<Vec<RecordBatch>>> {
        self.stored.lock().get(id).map(|s| s.batches.clone())
    }

    /// Fragment `id` of worker `url`, from here or over HTTP.
    pub async fn read(&self, url: &str, id: &str) -> Result<Arc<Vec<RecordBatch>>> {
        let gone = || {
            exec_datafusion_err!(
                "memory table fragment {id} is gone from worker {url}: a worker that restarts loses its memory tables"
            )
        };
        if url == self.url {
            return self.local(id).ok_or_else(gone);
        }
        let fetched = self.http.get(format!("{url}/v1/memory/fragments/{id}")).send().await;
        let resp = fetched.map_err(|e| {
            exec_datafusion_err!("memory table fragment {id} cannot be read from worker {url} (lost with it?): {e}")
        })?;
        if resp.status() == reqwest::StatusCode::NOT_FOUND {
            return Err(gone());
        }
        if !resp.status().is_success() {
            return exec_err!("cannot read {id} from {url}: HTTP {}", resp.status());
        }
        let bytes = resp.bytes().await.map_err(|e| exec_datafusion_err!("reading {id}: {e}"))?;
        Ok(Arc::new(from_ipc(&bytes)?))
    }

    /// Ends a write: its fragments not in `keep` go, and a writer still running
    /// drops what it makes.
    pub fn settle(&self, settle: &Settle) {
        let mut settled = self.settled.lock();
        if !settled.contains(&settle.staging) {
            settled.push_back(settle.staging.clone());
            if settled.len() > SETTLED_KEPT {
                settled.pop_front();
            }
        }
        drop(settled);
        self.stored.lock().retain(|id, s| s.staging != settle.staging || settle.keep.contains(id));
    }

    /// Drops fragments (a dropped table's).
    pub fn drop_fragments(&self, ids: &[String]) {
        let mut stored = self.stored.lock();
        for id in ids {
            stored.remove(id);
        }
    }

    /// Drops every fragment whose write's query `keep` does not want (the queries of a
    /// coordinator that is gone); answers how many went.
    pub fn drop_unless(&self, keep: &dyn Fn(&str) -> bool) -> usize {
        let mut stored = self.stored.lock();
        let before = stored.len();
        stored.retain(|_, s| query_of(&s.staging).is_none_or(keep));
        before - stored.len()
    }

    /// Fragments held here.
    pub fn count(&self) -> usize {
        self.stored.lock().len()
    }
}

/// The query of a write, from its staging address (`memory:TABLE/QUERY-xxxxxx/`).
fn query_of(staging: &str) -> Option<&str> {
    let last = staging.trim_end_matches('/').rsplit('/').next()?;
    last.rsplit_once('-').map(|(query, _)| query)
}

/// A fragment as an Arrow IPC stream.
pub fn to_ipc(batches: &[RecordBatch]) -> Result<Vec<u8>> {
    let Some(first) = batches.first() else { return Ok(Vec::new()) };
    let mut out = Vec::new();
    let mut w = StreamWriter::try_new(&mut out, &first.schema())?;
    for b in batches {
        w.write(b)?;
    }
    w.finish()?;
    drop(w);
    Ok(out)
}

fn from_ipc(bytes: &[u8]) -> Result<Vec<RecordBatch>> {
    if bytes.is_empty() {
        return Ok(Vec::new());
    }
    let reader = StreamReader::try_new(std::io::Cursor::new(bytes), None)?;
    Ok(reader.collect::<std::result::Result<Vec<_>, _>>()?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::arrow::array::Int64Array;
    use datafusion::arrow::datatypes::{DataType, Field, Schema};
    use datafusion::execution::memory_pool::GreedyMemoryPool;
    use datafusion::physical_plan::stream::RecordBatchStreamAdapter;

    fn stream(values: Vec<i64>) -> SendableRecordBatchStream {
        let schema = Arc::new(Schema::new(vec![Field::new("a", DataType::Int64, false)]));
        let batch = RecordBatch::try_new(schema.clone(), vec![Arc::new(Int64Array::from(values))]).unwrap();
        Box::pin(RecordBatchStreamAdapter::new(schema, futures::stream::iter(vec![Ok(batch)])))
    }

    #[tokio::test]
    async fn fragments_hold_pool_bytes_until_dropped_and_settling_keeps_only_the_commit() {
        let pool: Arc<dyn MemoryPool> = Arc::new(GreedyMemoryPool::new(1 << 20));
        let f = MemoryFragments::new("http://w", pool.clone(), reqwest::Client::new());
        assert_eq!(f.write("memory:t/q1/", "a", stream(vec![1, 2, 3])).await.unwrap(), 3);
        assert_eq!(f.write("memory:t/q1/", "b", stream(vec![4])).await.unwrap(), 1);
        assert!(pool.reserved() > 0);
        f.settle(&Settle { staging: "memory:t/q1/".into(), keep: vec!["a".into()] });
        assert_eq!(f.count(), 1);
        let a = f.read("http://w", "a").await.unwrap();
        assert_eq!(a[0].num_rows(), 3);
        assert!(f.read("http://w", "b").await.unwrap_err().to_string().contains("is gone"));
        // A writer of a settled write keeps nothing.
        assert!(f.write("memory:t/q1/", "c", stream(vec![5])).await.is_err());
        assert_eq!(f.count(), 1);
        drop(a);
        f.drop_fragments(&["a".into()]);
        assert_eq!(pool.reserved(), 0);
    }

    #[tokio::test]
    async fn fragments_of_a_gone_coordinators_queries_are_dropped() {
        let pool: Arc<dyn MemoryPool> = Arc::new(GreedyMemoryPool::new(1 << 20));
        let f = MemoryFragments::new("http://w", pool.clone(), reqwest::Client::new());
        f.write("memory:m.s.t/20261206_000001_old01-abc123/", "a", stream(vec![1])).await.unwrap();
        f.write("memory:m.s.t/20261206_000001_new02-def456/", "b", stream(vec![2])).await.unwrap();
        let dropped = f.drop_unless(&|q| q.ends_with("_new02"));
        assert_eq!((dropped, f.count()), (1, 1));
        assert!(f.local("b").is_some() && f.local("a").is_none());
    }

    #[tokio::test]
    async fn a_full_pool_fails_the_write_and_keeps_nothing() {
        let pool: Arc<dyn MemoryPool> = Arc::new(GreedyMemoryPool::new(64));
        let f = MemoryFragments::new("http://w", pool.clone(), reqwest::Client::new());
        let e = f.write("memory:t/q/", "a", stream((0..1000).collect())).await.unwrap_err();
        assert!(matches!(e, DataFusionError::ResourcesExhausted(_)), "{e}");
        assert_eq!((f.count(), pool.reserved()), (0, 0));
    }

    #[test]
    fn fragments_travel_as_arrow_ipc() {
        let schema = Arc::new(Schema::new(vec![Field::new("a", DataType::Int64, false)]));
        let batch = RecordBatch::try_new(schema, vec![Arc::new(Int64Array::from(vec![7, 8]))]).unwrap();
        assert_eq!(from_ipc(&to_ipc(std::slice::from_ref(&batch)).unwrap()).unwrap(), vec![batch]);
        assert!(from_ipc(&to_ipc(&[]).unwrap()).unwrap().is_empty());
    }
}
