//! The two plan nodes of a dynamic filter (see `plan::dynamic_filter`), which run in
//! worker tasks. `DynamicFilterSourceExec` sits at the top of a partitioned join's
//! build-side stage and passes its rows on while it collects the hashes of their join
//! keys; the task serves them to the coordinator once its plan has run. The probe-side
//! stage, started afterwards, gets `DynamicFilterExec` at its top, holding the hashes
//! of all build-side tasks: it drops the rows whose keys no build row has, before they
//! are hashed into the exchange. A false match (two keys with one hash) only lets a row
//! through that the join then drops, so the answer never depends on the hashes.

use std::collections::HashSet;
use std::fmt;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::{Arc, OnceLock};

use crate::plan_node::plan_node;
use datafusion::arrow::array::{Array, BooleanArray, RecordBatch};
use datafusion::arrow::buffer::{BooleanBuffer, NullBuffer};
use datafusion::arrow::compute::filter_record_batch;
use datafusion::common::hash_utils::{create_hashes, RandomState};
use datafusion::error::Result;
use datafusion::execution::memory_pool::{MemoryConsumer, MemoryReservation};
use datafusion::execution::TaskContext;
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{DisplayAs, DisplayFormatType, ExecutionPlan, SendableRecordBatchStream};
use futures::StreamExt;
use parking_lot::Mutex;

/// Most distinct key hashes one build-side task collects: past it the filter is
/// dropped (8 bytes each, sent to the coordinator and on to every probe task), as a
/// build side that large keeps most probe rows anyway.
pub const MAX_KEY_HASHES: usize = 2 << 20;

/// The probe side stops filtering when, after this many rows, it kept more than
/// `USELESS_PASS_RATE` of them: hashing each row then costs more than it saves.
const JUDGE_AFTER_ROWS: u64 = 200_000;
const USELESS_PASS_RATE: f64 = 0.9;

/// Build and probe sides hash keys alike, in every process (a fixed seed).
const KEY_HASH_STATE: RandomState = RandomState::with_seed(0x666c_6f74_696c_6c61);

/// The hashes of `keys` (column indices) row by row into `hashes`, and which rows have
/// a NULL in any key (None: none has). A NULL key joins nothing.
fn key_hashes(batch: &RecordBatch, keys: &[usize], hashes: &mut Vec<u64>) -> Result<Option<NullBuffer>> {
    let arrays: Vec<_> = keys.iter().map(|k| batch.column(*k).clone()).collect();
    hashes.clear();
    hashes.resize(batch.num_rows(), 0);
    create_hashes(&arrays, &KEY_HASH_STATE, hashes)?;
    Ok(arrays.iter().fold(None, |acc, a| NullBuffer::union(acc.as_ref(), a.logical_nulls().as_ref())))
}

/// The values are hashes already: hashing them again would only cost time.
#[derive(Default)]
pub struct IdentityHasher(u64);

impl Hasher for IdentityHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 = (self.0 << 8) | u64::from(*b);
        }
    }
    fn write_u64(&mut self, v: u64) {
        self.0 = v;
    }
}

pub type KeyHashSet = HashSet<u64, BuildHasherDefault<IdentityHasher>>;

/// Key hashes as they travel (the task's dynamic-filter route, the plan codec): a
/// little-endian u64 each.
pub fn hashes_to_bytes(hashes: &[u64], out: &mut Vec<u8>) {
    out.reserve(hashes.len() * 8);
    for h in hashes {
        out.extend_from_slice(&h.to_le_bytes());
    }
}

/// The hashes in `bytes`; None unless they are whole u64s.
pub fn hashes_from_bytes(bytes: &[u8]) -> Option<Vec<u64>> {
    bytes
        .len()
        .is_multiple_of(8)
        .then(|| bytes.chunks_exact(8).map(|c| u64::from_le_bytes(c.try_into().expect("8 bytes"))).collect())
}

/// What one build-side task collected.
#[derive(Debug, Default)]
struct Collected {
    hashes: KeyHashSet,
    /// More than `MAX_KEY_HASHES`, or more than the task's memory pool would give:
    /// no filter (the join itself still runs).
    overflowed: bool,
    /// The set's memory in the task's pool, freed with the task's plan.
    reservation: Option<MemoryReservation>,
    started: usize,
    finished: usize,
}

/// Passes its input on and collects the hashes of its join keys.
#[derive(Debug)]
pub struct DynamicFilterSourceExec {
    input: Arc<dyn ExecutionPlan>,
    /// The filter's id in its query: the build stage's id.
    id: usize,
    keys: Vec<usize>,
    collected: Arc<Mutex<Collected>>,
}

impl DynamicFilterSourceExec {
    pub fn new(input: Arc<dyn ExecutionPlan>, id: usize, keys: Vec<usize>) -> Self {
        DynamicFilterSourceExec { input, id, keys, collected: Arc::default() }
    }

    pub fn id(&self) -> usize {
        self.id
    }

    pub fn keys(&self) -> &[usize] {
        &self.keys
    }

    /// The key hashes, once every partition this task started has run to its end;
    /// None before, or when there were too many.
    pub fn hashes(&self) -> Option<Vec<u64>> {
        let c = self.collected.lock();
        (c.started > 0 && c.finished == c.started && !c.overflowed).then(|| c.hashes.iter().copied().collect())
    }
}

impl DisplayAs for DynamicFilterSourceExec {
    fn fmt_as(&self, _t: DisplayFormatType, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "DynamicFilterSourceExec: filter={}, keys={:?}", self.id, self.keys)
    }
}

impl ExecutionPlan for DynamicFilterSourceExec {
    // A rebuild keeps the shared collection, so the task still finds it after
    // DataFusion rewraps the plan.
    plan_node!(
        unary "DynamicFilterSourceExec",
        input: input,
        properties: input,
        rebuild: |this, child| DynamicFilterSourceExec {
            input: child,
            id: this.id,
            keys: this.keys.clone(),
            collected: this.collected.clone(),
        }
    );

    fn execute(&self, partition: usize, context: Arc<TaskContext>) -> Result<SendableRecordBatchStream> {
        let pool = context.memory_pool().clone();
        let input = self.input.execute(partition, context)?;
        let schema = input.schema();
        {
            let mut c = self.collected.lock();
            c.started += 1;
            if c.reservation.is_none() {
                c.reservation =
                    Some(MemoryConsumer::new(format!("DynamicFilterSourceExec[{}]", self.id)).register(&pool));
            }
        }
        let (keys, collected) = (self.keys.clone(), self.collected.clone());
        let mut hashes = Vec::new();
        let collect = input.map(move |batch| {
            let batch = batch?;
            if !collected.lock().overflowed {
                let nulls = key_hashes(&batch, &keys, &mut hashes)?;
                let mut c = collected.lock();
                for (row, h) in hashes.iter().enumerate() {
                    if nulls.as_ref().is_none_or(|n| n.is_valid(row)) {
                        c.hashes.insert(*h);
                    }
                }
                // A bucket holds the u64 and a control byte.
                let bytes = c.hashes.capacity() * 9;
                let fits = c.reservation.as_mut().is_some_and(|r| r.try_resize(bytes).is_ok());
                if c.hashes.len() > MAX_KEY_HASHES || !fits {
                    c.overflowed = true;
                    c.hashes = KeyHashSet::default();
                    if let Some(r) = c.reservation.as_mut() {
                        r.free();
                    }
                }
            }
            Ok(batch)
        });
        // Counted at the end of the input only, not when a consumer drops the stream.
        let collected = self.collected.clone();
        let end = futures::stream::once(async move {
            collected.lock().finished += 1;
            None
        });
        let stream = collect.map(Some).chain(end).filter_map(futures::future::ready);
        Ok(Box::pin(RecordBatchStreamAdapter::new(schema, stream)))
    }
}

/// A register-blocked bloom filter over key hashes: each hash sets 4 bits of one
/// 64-bit word, 16 bits per key, so a check is one memory read and a compare with no
/// branch (about 1.5% false positives, rows the join then drops). A `HashSet`
/// lookup per probe row, or Parquet's split-block filter with its branches, cost
/// more than sending the row on: q22 at sf10 spent a third of a worker's time
/// checking 15M `orders` keys against 420K customers.
#[derive(Debug)]
pub struct KeyBloom {
    words: Vec<u64>,
}

impl KeyBloom {
    pub fn new(hashes: &[u64]) -> Self {
        let mut bloom = KeyBloom { words: vec![0; (hashes.len() / 4).max(1)] };
        for h in hashes {
            let (i, mask) = bloom.slot(*h);
            bloom.words[i] |= mask;
        }
        bloom
    }

    /// The word (by the high half of the hash) and its 4 bits (by the low 24 bits).
    #[inline]
    fn slot(&self, h: u64) -> (usize, u64) {
        let i = (((h >> 32) * self.words.len() as u64) >> 32) as usize;
        let mask =
            (1u64 << (h & 63)) | (1u64 << ((h >> 6) & 63)) | (1u64 << ((h >> 12) & 63)) | (1u64 << ((h >> 18) & 63));
        (i, mask)
    }

    #[inline]
    pub fn may_contain(&self, h: u64) -> bool {
        let (i, mask) = self.slot(h);
        self.words[i] & mask == mask
    }
}

/// Keeps the rows whose join keys hash to one of the build side's hashes, checked in
/// a `KeyBloom` made from them. The hashes are distinct (the coordinator's union) and
/// kept as a list: only the bloom filter is looked up.
#[derive(Debug)]
pub struct DynamicFilterExec {
    input: Arc<dyn ExecutionPlan>,
    keys: Vec<usize>,
    hashes: Arc<[u64]>,
    /// Made on first use, in the worker, once for all partitions.
    bloom: Arc<OnceLock<KeyBloom>>,
}

impl DynamicFilterExec {
    pub fn new(input: Arc<dyn ExecutionPlan>, keys: Vec<usize>, hashes: Arc<[u64]>) -> Self {
        DynamicFilterExec { input, keys, hashes, bloom: Arc::default() }
    }

    pub fn keys(&self) -> &[usize] {
        &self.keys
    }

    pub fn hashes(&self) -> &[u64] {
        &self.hashes
    }
}

impl DisplayAs for DynamicFilterExec {
    fn fmt_as(&self, _t: DisplayFormatType, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "DynamicFilterExec: keys={:?}, build_key_hashes={}", self.keys, self.hashes.len())
    }
}

impl ExecutionPlan for DynamicFilterExec {
    plan_node!(
        unary "DynamicFilterExec",
        input: input,
        properties: input,
        rebuild: |this, child| DynamicFilterExec {
            input: child,
            keys: this.keys.clone(),
            hashes: this.hashes.clone(),
            bloom: this.bloom.clone(),
        }
    );

    fn execute(&self, partition: usize, context: Arc<TaskContext>) -> Result<SendableRecordBatchStream> {
        let input = self.input.execute(partition, context)?;
        let schema = input.schema();
        self.bloom.get_or_init(|| KeyBloom::new(&self.hashes));
        let (keys, bloom) = (self.keys.clone(), self.bloom.clone());
        let mut hashes = Vec::new();
        let (mut seen, mut kept, mut filtering) = (0u64, 0u64, true);
        let stream = input.filter_map(move |batch| {
            let out = match batch {
                Ok(batch) if filtering => {
                    let rows = batch.num_rows() as u64;
                    let bloom = bloom.get().expect("made before the stream");
                    let kept_batch = keep_matching(&batch, &keys, bloom, &mut hashes);
                    if let Ok(b) = &kept_batch {
                        seen += rows;
                        kept += b.num_rows() as u64;
                        if seen >= JUDGE_AFTER_ROWS && kept as f64 > USELESS_PASS_RATE * seen as f64 {
                            tracing::debug!(seen, kept, "dynamic filter keeps most rows; passing the rest unfiltered");
                            filtering = false;
                        }
                    }
                    kept_batch
                }
                other => other,
            };
            futures::future::ready(match out {
                Ok(b) if b.num_rows() == 0 => None,
                other => Some(other),
            })
        });
        Ok(Box::pin(RecordBatchStreamAdapter::new(schema, stream)))
    }
}

fn keep_matching(batch: &RecordBatch, keys: &[usize], bloom: &KeyBloom, hashes: &mut Vec<u64>) -> Result<RecordBatch> {
    let nulls = key_hashes(batch, keys, hashes)?;
    let keep = BooleanBuffer::collect_bool(hashes.len(), |row| bloom.may_contain(hashes[row]));
    let keep = match nulls {
        Some(n) => &keep & n.inner(),
        None => keep,
    };
    Ok(filter_record_batch(batch, &BooleanArray::new(keep, None))?)
}
