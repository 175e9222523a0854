//! Trino's spooling protocol: a client that sends `X-Trino-Query-Data-Encoding`
//! (`json+zstd`, `json+lz4`, `json`, in its order of preference) gets each page's
//! rows as a segment instead of a `data` array: small ones inline (base64 in the
//! page), larger ones spooled, written under the coordinator's spooling directory and
//! fetched from `/v1/spooled/download/{id}`, then acknowledged with
//! `/v1/spooled/ack/{id}`, which deletes them. Unacknowledged segments expire
//! (`fs.segment.ttl`), and go with their query when it fails, is cancelled or is
//! abandoned. The disk they take is bounded, per query and for the node
//! (`fs.max-query-spooled-size`, `fs.max-spooled-size`): past either, a page's rows
//! come inline, so a client that pages without downloading cannot fill the disk. Segments are Trino's size, 8 MB growing to 16 MB, so a large
//! result needs few round trips, and compressed, so it crosses the network in a
//! fraction of its JSON.
//!
//! The statement protocol (`statement::serve_page`) calls `encode_segment`; the
//! routes below serve the files; `SegmentStore` owns them. Segment ids are random
//! 128-bit names: Trino's clients fetch them without credentials (the id is the
//! capability, as a query's slug is).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::response::{IntoResponse, Response};
use base64::Engine;
use futures::StreamExt;
use object_store::local::LocalFileSystem;
use object_store::path::Path as ObjectPath;
use object_store::{ObjectStore, ObjectStoreExt};
use serde_json::{json, Value};

use super::{CoordinatorError, CoordinatorState};
use crate::connector::object_storage::S3Settings;
pub use crate::etc::SpoolingConfig;

/// The encodings this coordinator writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encoding {
    Json,
    JsonZstd,
    JsonLz4,
}

impl Encoding {
    pub fn name(self) -> &'static str {
        match self {
            Encoding::Json => "json",
            Encoding::JsonZstd => "json+zstd",
            Encoding::JsonLz4 => "json+lz4",
        }
    }

    /// The first encoding of the client's list that this coordinator writes.
    pub fn negotiate(header: &str) -> Option<Encoding> {
        header.split(',').map(str::trim).find_map(|e| match e.to_ascii_lowercase().as_str() {
            "json" => Some(Encoding::Json),
            "json+zstd" => Some(Encoding::JsonZstd),
            "json+lz4" => Some(Encoding::JsonLz4),
            _ => None,
        })
    }

    /// The bytes compressed, or None when they are below the threshold (or the
    /// encoding has no compression).
    fn compress(self, bytes: &[u8], threshold: usize) -> std::io::Result<Option<Vec<u8>>> {
        if bytes.len() < threshold {
            return Ok(None);
        }
        match self {
            Encoding::Json => Ok(None),
            // A frame with its content size, which Trino's clients read it by.
            Encoding::JsonZstd => zstd::bulk::compress(bytes, 3).map(Some),
            // A raw block: the client is told the uncompressed size.
            Encoding::JsonLz4 => Ok(Some(lz4_flex::block::compress(bytes))),
        }
    }
}

/// One segment's rows: `rows` of them, from row `offset` of the result, as a JSON
/// array of rows.
pub struct SegmentRows {
    pub offset: u64,
    pub rows: u64,
    pub json: Vec<u8>,
}

/// The `data` member of a page: the segment, inline or spooled.
pub async fn encode_segment(
    coord: &CoordinatorState,
    query_id: &str,
    base: &str,
    encoding: Encoding,
    rows: SegmentRows,
) -> Result<Value, CoordinatorError> {
    let config = &coord.config.spooling;
    let uncompressed = rows.json.len();
    let compressed = encoding
        .compress(&rows.json, config.compression_threshold)
        .map_err(|e| CoordinatorError::Internal(e.to_string()))?;
    let mut metadata = json!({"rowOffset": rows.offset, "rowsCount": rows.rows});
    let bytes = match compressed {
        Some(c) => {
            metadata["uncompressedSize"] = json!(uncompressed);
            c
        }
        None => rows.json,
    };
    metadata["segmentSize"] = json!(bytes.len());
    let inline = config.inlining_enabled
        && rows.rows as usize <= config.inlining_max_rows
        && bytes.len() <= config.inlining_max_size;
    let segment = if inline {
        inline_segment(&bytes, metadata)
    } else {
        let spooled = coord.segments.put(query_id, &bytes).await.map_err(|e| {
            let location = &coord.segments.location;
            CoordinatorError::Internal(format!(
                "cannot write a spooled segment to the spooling location {location}: {e}"
            ))
        })?;
        // Over a quota: the rows come in the page itself, as Trino's clients read
        // an inline segment of any size.
        let Some(id) = spooled else {
            return Ok(json!({"encoding": encoding.name(), "segments": [inline_segment(&bytes, metadata)]}));
        };
        json!({
            "type": "spooled",
            "uri": format!("{base}/v1/spooled/download/{id}"),
            "ackUri": format!("{base}/v1/spooled/ack/{id}"),
            "headers": {},
            "metadata": metadata,
        })
    };
    Ok(json!({"encoding": encoding.name(), "segments": [segment]}))
}

fn inline_segment(bytes: &[u8], metadata: Value) -> Value {
    json!({
        "type": "inline",
        "data": base64::engine::general_purpose::STANDARD.encode(bytes),
        "metadata": metadata,
    })
}

/// The spooled segments, by id, in the spooling location: a local directory or an
/// S3 prefix, through one object store.
#[derive(Debug)]
pub struct SegmentStore {
    store: Arc<dyn ObjectStore>,
    prefix: ObjectPath,
    /// For messages.
    location: String,
    segments: parking_lot::Mutex<HashMap<String, Segment>>,
    ttl: Duration,
    /// The quotas on unacknowledged bytes: the node's, one query's.
    max_bytes: u64,
    max_query_bytes: u64,
}

#[derive(Debug)]
struct Segment {
    query_id: String,
    path: ObjectPath,
    written: Instant,
    bytes: u64,
}

impl SegmentStore {
    /// A store in `config`'s location, emptied of what an earlier process left
    /// there (its ids died with it).
    pub async fn new(config: &SpoolingConfig) -> std::io::Result<Self> {
        let location = match &config.location {
            Some(l) => l.clone(),
            None => {
                std::env::temp_dir().join(format!("flotilla-spooling-{}", std::process::id())).display().to_string()
            }
        };
        let (store, prefix): (Arc<dyn ObjectStore>, ObjectPath) = match location.strip_prefix("s3://") {
            Some(rest) => {
                let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
                let settings = match &config.manager {
                    Some(p) => S3Settings::from_properties(p).map_err(std::io::Error::other)?.unwrap_or_default(),
                    None => S3Settings::default(),
                };
                let store = settings.client(bucket).map_err(std::io::Error::other)?;
                (store, ObjectPath::from(prefix))
            }
            None => {
                std::fs::create_dir_all(&location)?;
                (
                    Arc::new(LocalFileSystem::new_with_prefix(&location).map_err(std::io::Error::other)?),
                    ObjectPath::default(),
                )
            }
        };
        let store = SegmentStore {
            store,
            prefix,
            location,
            segments: Default::default(),
            ttl: config.segment_ttl,
            max_bytes: config.max_spooled_size,
            max_query_bytes: config.max_query_spooled_size,
        };
        store.remove_left_over().await;
        Ok(store)
    }

    /// Deletes the segments an earlier process wrote: nobody can name them now.
    async fn remove_left_over(&self) {
        let listed: Vec<_> = self.store.list(Some(&self.prefix)).filter_map(|r| async { r.ok() }).collect().await;
        for o in listed.into_iter().filter(|o| o.location.as_ref().ends_with(SEGMENT_SUFFIX)) {
            if let Err(e) = self.store.delete(&o.location).await {
                tracing::warn!("cannot remove spooled segment {} left in {}: {e}", o.location, self.location);
            }
        }
    }

    /// Writes a segment of `query_id` and answers its id; None when it would take the
    /// node's or the query's unacknowledged bytes past their quota. The bytes are
    /// counted before the write, so concurrent pages cannot pass a quota together.
    async fn put(&self, query_id: &str, bytes: &[u8]) -> object_store::Result<Option<String>> {
        let id = format!("{}{}", crate::util::random_suffix(16), crate::util::random_suffix(16));
        let path = self.prefix.clone().join(format!("{id}{SEGMENT_SUFFIX}"));
        let size = bytes.len() as u64;
        {
            let mut segments = self.segments.lock();
            let total: u64 = segments.values().map(|s| s.bytes).sum();
            let query: u64 = segments.values().filter(|s| s.query_id == query_id).map(|s| s.bytes).sum();
            if total + size > self.max_bytes || query + size > self.max_query_bytes {
                tracing::debug!(query = query_id, "spooling quota reached: the page's rows come inline");
                return Ok(None);
            }
            let segment =
                Segment { query_id: query_id.to_string(), path: path.clone(), written: Instant::now(), bytes: size };
            segments.insert(id.clone(), segment);
        }
        if let Err(e) = self.store.put(&path, bytes.to_vec().into()).await {
            self.segments.lock().remove(&id);
            return Err(e);
        }
        Ok(Some(id))
    }

    /// The queries that have unacknowledged segments.
    pub fn queries(&self) -> std::collections::BTreeSet<String> {
        self.segments.lock().values().map(|s| s.query_id.clone()).collect()
    }

    /// Forgets every segment of `query_id` and deletes them (on a task of its own):
    /// its query failed, was cancelled or was abandoned, so no client will read them.
    pub fn remove_query(self: &Arc<Self>, query_id: &str) -> usize {
        let gone: Vec<Segment> = {
            let mut segments = self.segments.lock();
            let ids: Vec<String> =
                segments.iter().filter(|(_, s)| s.query_id == query_id).map(|(k, _)| k.clone()).collect();
            ids.into_iter().filter_map(|id| segments.remove(&id)).collect()
        };
        let n = gone.len();
        self.delete_later(gone);
        n
    }

    fn delete_later(self: &Arc<Self>, segments: Vec<Segment>) {
        if segments.is_empty() {
            return;
        }
        let this = self.clone();
        tokio::spawn(async move {
            for s in segments {
                if let Err(e) = this.store.delete(&s.path).await {
                    tracing::warn!(query = %s.query_id, "cannot remove spooled segment {}: {e}", s.path);
                }
            }
        });
    }

    /// Bytes of unacknowledged segments.
    pub fn spooled_bytes(&self) -> u64 {
        self.segments.lock().values().map(|s| s.bytes).sum()
    }

    async fn read(&self, id: &str) -> Option<Bytes> {
        let path = self.segments.lock().get(id).map(|s| s.path.clone())?;
        self.store.get(&path).await.ok()?.bytes().await.ok()
    }

    /// Deletes a segment; false when there is none of that id.
    async fn remove(&self, id: &str) -> bool {
        let removed = self.segments.lock().remove(id);
        match removed {
            Some(s) => {
                if let Err(e) = self.store.delete(&s.path).await {
                    tracing::warn!(query = %s.query_id, "cannot remove acknowledged segment {}: {e}", s.path);
                }
                true
            }
            None => false,
        }
    }

    /// Forgets the segments written longer than the TTL ago and deletes them (on a
    /// task of its own); how many.
    pub fn expire(self: &Arc<Self>, now: Instant) -> usize {
        let expired: Vec<Segment> = {
            let mut segments = self.segments.lock();
            let ids: Vec<String> = segments
                .iter()
                .filter(|(_, s)| now.duration_since(s.written) >= self.ttl)
                .map(|(k, _)| k.clone())
                .collect();
            ids.into_iter().filter_map(|id| segments.remove(&id)).collect()
        };
        let n = expired.len();
        if n > 0 {
            tracing::debug!("{n} spooled segments expired unacknowledged");
        }
        self.delete_later(expired);
        n
    }

    /// Segments not yet acknowledged.
    pub fn pending(&self) -> usize {
        self.segments.lock().len()
    }
}

const SEGMENT_SUFFIX: &str = ".segment";

fn unknown(id: &str) -> CoordinatorError {
    CoordinatorError::Gone(format!("spooled segment {id} does not exist: it was acknowledged, or it expired"))
}

/// `GET /v1/spooled/download/{id}`: the segment's bytes.
pub async fn download(
    State(coord): State<Arc<CoordinatorState>>,
    Path(id): Path<String>,
) -> Result<Response, CoordinatorError> {
    let bytes = coord.segments.read(&id).await.ok_or_else(|| unknown(&id))?;
    Ok(([(axum::http::header::CONTENT_TYPE, "application/octet-stream")], bytes).into_response())
}

/// `GET /v1/spooled/ack/{id}`: the client has the segment; it is deleted.
pub async fn acknowledge(
    State(coord): State<Arc<CoordinatorState>>,
    Path(id): Path<String>,
) -> Result<Response, CoordinatorError> {
    match coord.segments.remove(&id).await {
        true => Ok(axum::http::StatusCode::OK.into_response()),
        false => Err(unknown(&id)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_clients_first_known_encoding_is_used() {
        assert_eq!(Encoding::negotiate("json+zstd,json+lz4,json"), Some(Encoding::JsonZstd));
        assert_eq!(Encoding::negotiate("arrow-ipc, json+lz4"), Some(Encoding::JsonLz4));
        assert_eq!(Encoding::negotiate("json"), Some(Encoding::Json));
        assert_eq!(Encoding::negotiate("arrow-ipc"), None);
    }

    #[test]
    fn segments_compress_above_the_threshold_only() {
        let text = b"[[1,\"a\"],[2,\"b\"]]".repeat(1000);
        let z = Encoding::JsonZstd.compress(&text, 8192).unwrap().unwrap();
        assert_eq!(zstd::bulk::decompress(&z, text.len()).unwrap(), text);
        let l = Encoding::JsonLz4.compress(&text, 8192).unwrap().unwrap();
        assert_eq!(lz4_flex::block::decompress(&l, text.len()).unwrap(), text);
        assert!(z.len() < text.len() / 10 && l.len() < text.len() / 5);
        assert_eq!(Encoding::JsonZstd.compress(b"[[1]]", 8192).unwrap(), None);
        assert_eq!(Encoding::Json.compress(&text, 8192).unwrap(), None);
    }

    #[tokio::test]
    async fn segments_are_removed_when_acknowledged_or_expired() {
        let dir = tempfile::Builder::new().prefix("flotilla-spooling-").tempdir().unwrap();
        let config = SpoolingConfig {
            location: Some(dir.path().display().to_string()),
            segment_ttl: Duration::from_secs(60),
            ..Default::default()
        };
        std::fs::write(dir.path().join(format!("old{SEGMENT_SUFFIX}")), b"left by a stopped coordinator").unwrap();
        let store = Arc::new(SegmentStore::new(&config).await.unwrap());
        let files = || std::fs::read_dir(dir.path()).unwrap().count();
        assert_eq!(files(), 0, "an earlier process's segments go");
        let put = |bytes: &'static [u8]| {
            let store = store.clone();
            async move { store.put("q", bytes).await.unwrap().expect("under the quotas") }
        };
        let (a, b) = (put(b"one").await, put(b"two").await);
        assert_eq!(store.read(&a).await.as_deref(), Some(&b"one"[..]));
        assert!(store.remove(&a).await && !store.remove(&a).await);
        assert_eq!(store.expire(Instant::now()), 0);
        assert_eq!(store.expire(Instant::now() + Duration::from_secs(61)), 1);
        assert!(store.read(&b).await.is_none() && store.pending() == 0);
        let deadline = Instant::now() + Duration::from_secs(5);
        while files() > 0 {
            assert!(Instant::now() < deadline, "the expired segment's file stays");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    #[tokio::test]
    async fn quotas_bound_the_disk_and_a_failed_querys_segments_go() {
        let dir = tempfile::Builder::new().prefix("flotilla-spooling-").tempdir().unwrap();
        let config = SpoolingConfig {
            location: Some(dir.path().display().to_string()),
            max_spooled_size: 10,
            max_query_spooled_size: 6,
            ..Default::default()
        };
        let store = Arc::new(SegmentStore::new(&config).await.unwrap());
        let files = || std::fs::read_dir(dir.path()).unwrap().count();
        // A query's third 3-byte segment is past its 6 bytes; another query's fit
        // until the node's 10.
        assert!(store.put("q1", b"aaa").await.unwrap().is_some());
        assert!(store.put("q1", b"bbb").await.unwrap().is_some());
        assert_eq!(store.put("q1", b"ccc").await.unwrap(), None, "the query's quota");
        assert!(store.put("q2", b"ddd").await.unwrap().is_some());
        assert_eq!(store.put("q2", b"eee").await.unwrap(), None, "the node's quota");
        assert_eq!((store.spooled_bytes(), files()), (9, 3));
        assert_eq!(store.queries().into_iter().collect::<Vec<_>>(), ["q1", "q2"]);
        // q1 fails: its segments go, q2's stay, and the room is there again.
        assert_eq!(store.remove_query("q1"), 2);
        assert_eq!(store.spooled_bytes(), 3);
        let deadline = Instant::now() + Duration::from_secs(5);
        while files() > 1 {
            assert!(Instant::now() < deadline, "a removed query's segment files stay");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert!(store.put("q2", b"fff").await.unwrap().is_some());
    }
}
