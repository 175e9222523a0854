//! Wire types shared by the coordinator and the workers: task ids, the task update
//! request, task status and info, and the JSON error body. Both sides serialize these
//! with serde; keeping them in one module is what keeps the two sides in step.

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use base64::Engine;
use serde::{Deserialize, Serialize};

use crate::error_code::{ApiCode, ErrorCode, FailureCode, Named};

/// Header carrying the status version a long poll waits to see change.
pub const HEADER_CURRENT_VERSION: &str = "x-flotilla-current-version";
/// Header carrying how long a long poll may wait, in milliseconds.
pub const HEADER_MAX_WAIT: &str = "x-flotilla-max-wait";
/// Results response: the token to ask for next.
pub const HEADER_NEXT_TOKEN: &str = "x-flotilla-next-token";
/// Results response: `true` when the buffer is complete and nothing more will come.
pub const HEADER_BUFFER_COMPLETE: &str = "x-flotilla-buffer-complete";
/// Results response: the task failed; the body is the JSON error.
pub const HEADER_TASK_FAILED: &str = "x-flotilla-task-failed";
/// With `HEADER_TASK_FAILED`: the failed task's own error code, so that a reader
/// reports the cause when the coordinator cannot see the task (a worker cut off).
pub const HEADER_TASK_FAILURE_CODE: &str = "x-flotilla-task-failure-code";
/// Results request: how many bytes of pages the consumer takes at most.
pub const HEADER_MAX_SIZE: &str = "x-flotilla-max-size";
/// Statement protocol request (flotilla's own client only): send the rows of each page
/// as [`RowsAs`] names them (`csv`, `tsv`, `arrow`) instead of JSON `data`.
pub const HEADER_ROWS_AS: &str = "x-flotilla-rows-as";
/// Statement protocol request (flotilla's own client only): `POST /v1/statement` may
/// wait a few milliseconds and answer with a quick query's rows and end. Without it
/// the first answer is Trino's: `QUEUED`, no rows, no error, a `nextUri`, which is
/// all that clients written against Trino read from it.
pub const HEADER_EARLY_RESULTS: &str = "x-flotilla-early-results";
/// Statement protocol response to [`HEADER_ROWS_AS`] `csv` or `tsv`, for a page with
/// rows: the `QueryResults` document (its `textRows` member counting the rows), a
/// newline, then the rows as text. Trino clients never ask for it, so never see it.
pub const TEXT_RESULTS_CONTENT_TYPE: &str = "application/x-flotilla-results";
/// Statement protocol response to [`HEADER_ROWS_AS`] `arrow`, for a page with rows (or
/// the last page of a result without any, to carry its schema): the `QueryResults`
/// document (its `arrowRows` member counting the rows), a newline, then the rows as
/// the exchange frames pages (`exchange::page::frame_pages`: length-prefixed Arrow IPC
/// streams). Not a prefix of [`TEXT_RESULTS_CONTENT_TYPE`], which is matched as one.
pub const ARROW_RESULTS_CONTENT_TYPE: &str = "application/x-flotilla-arrow-results";

/// How a flotilla client asks for a page's rows ([`HEADER_ROWS_AS`]), in place of
/// Trino's JSON `data`: as delimited text lines, to print them, or as Arrow record
/// batches, to compute on them without turning every value into JSON and back.
#[derive(Debug, Clone, Copy)]
pub enum RowsAs {
    Text(crate::format::Delimited),
    Arrow,
}

impl RowsAs {
    /// The header's value.
    pub fn name(&self) -> &'static str {
        match self {
            RowsAs::Text(style) => style.name(),
            RowsAs::Arrow => "arrow",
        }
    }

    /// The form a client named with [`RowsAs::name`]; None for any other name, whose
    /// rows then come as JSON.
    pub fn by_name(name: &str) -> Option<Self> {
        match name {
            "arrow" => Some(RowsAs::Arrow),
            other => crate::format::Delimited::by_name(other).map(RowsAs::Text),
        }
    }
}

/// `query.stage.task.attempt`, e.g. `20261130_000001_abcde.2.0.0`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct TaskId {
    pub query_id: String,
    pub stage: usize,
    pub task: usize,
    pub attempt: usize,
}

impl TaskId {
    pub fn new(query_id: &str, stage: usize, task: usize, attempt: usize) -> Self {
        TaskId { query_id: query_id.to_string(), stage, task, attempt }
    }
}

impl fmt::Display for TaskId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}.{}.{}", self.query_id, self.stage, self.task, self.attempt)
    }
}

impl FromStr for TaskId {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let parts: Vec<&str> = s.rsplitn(4, '.').collect();
        if parts.len() != 4 || parts[3].is_empty() {
            return Err(format!("malformed task id '{s}': expected query.stage.task.attempt"));
        }
        // The query id names spool directories on workers: no separators, no dots.
        if !parts[3].chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-') {
            return Err(format!("malformed task id '{s}': the query id may only hold letters, digits, '_' and '-'"));
        }
        let num = |p: &str| p.parse::<usize>().map_err(|_| format!("malformed task id '{s}'"));
        Ok(TaskId {
            query_id: parts[3].to_string(),
            stage: num(parts[2])?,
            task: num(parts[1])?,
            attempt: num(parts[0])?,
        })
    }
}

impl TryFrom<String> for TaskId {
    type Error = String;
    fn try_from(s: String) -> Result<Self, Self::Error> {
        s.parse()
    }
}

impl From<TaskId> for String {
    fn from(t: TaskId) -> String {
        t.to_string()
    }
}

/// Bytes that travel as base64 inside JSON (plan fragments).
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Base64Bytes(pub Vec<u8>);

impl fmt::Debug for Base64Bytes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "<{} bytes>", self.0.len())
    }
}

impl Serialize for Base64Bytes {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&base64::engine::general_purpose::STANDARD.encode(&self.0))
    }
}

impl<'de> Deserialize<'de> for Base64Bytes {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        base64::engine::general_purpose::STANDARD
            .decode(s.as_bytes())
            .map(Base64Bytes)
            .map_err(serde::de::Error::custom)
    }
}

/// How a producer task lays its output into buffers. The consumer's exchange mode
/// decides which buffer it reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "type")]
pub enum OutputBufferSpec {
    /// The fragment root is a `RepartitionExec`; its partitioning (hash or round robin)
    /// splits rows into `partitions` buffers, buffer id = consumer partition.
    Partitioned { partitions: usize },
    /// Every page goes to each of `buffers` buffers, buffer id = consumer task index.
    Broadcast { buffers: usize },
    /// Each fragment partition writes its own buffer, buffer id = fragment partition.
    Passthrough,
}

/// Where a producer task of an upstream stage runs and which fragment partitions it has.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UpstreamTask {
    pub task_id: TaskId,
    /// Base URL of the worker, e.g. `http://127.0.0.1:4021`.
    pub url: String,
    pub partitions: Vec<usize>,
}

/// The locations of one upstream stage, as known to the coordinator so far.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SourceUpdate {
    pub stage: usize,
    pub tasks: Vec<UpstreamTask>,
    /// No further tasks of this stage will be added.
    pub no_more: bool,
}

/// Body of `POST /v1/task/{taskId}`: the first request creates the task and must carry
/// the fragment; later ones only add upstream locations.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct TaskUpdateRequest {
    #[serde(default)]
    pub fragment: Option<Base64Bytes>,
    #[serde(default)]
    pub partitions: Vec<usize>,
    /// This task's index within its stage (the broadcast buffer it reads upstream).
    #[serde(default)]
    pub task_index: usize,
    #[serde(default)]
    pub output: Option<OutputBufferSpec>,
    #[serde(default)]
    pub sources: Vec<SourceUpdate>,
    /// Session properties that shape execution (batch size, buffer limits).
    #[serde(default)]
    pub session: BTreeMap<String, String>,
    /// Write the output to the worker's spool on disk, readable until the task is
    /// deleted, instead of streaming it (retry policy `task`).
    #[serde(default)]
    pub spool: bool,
}

/// Task states, as in Trino.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum TaskState {
    Planned,
    Running,
    Flushing,
    Finished,
    Canceled,
    Aborted,
    Failed,
}

impl TaskState {
    pub fn is_done(self) -> bool {
        matches!(self, TaskState::Finished | TaskState::Canceled | TaskState::Aborted | TaskState::Failed)
    }
}

/// How a task failed: its code (and so whether it is worth a retry), what it said,
/// and why, in the terms the schedulers act on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskFailure {
    /// Stable error code, e.g. `EXECUTION_ERROR`, `REMOTE_TASK_FAILED`, `REMOTE_TASK_UNREACHABLE`.
    pub code: FailureCode,
    pub message: String,
    #[serde(default)]
    pub reason: FailureReason,
}

/// Why a task failed, after Ballista's `FailedTask.failed_reason`: its own work, or an
/// upstream output it could not read. The fault-tolerant scheduler recomputes the
/// upstream of a fetch failure rather than the task that reported it; the pipelined
/// one reports the upstream as the cause.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum FailureReason {
    /// The task's own work failed, or its worker or coordinator ended it.
    #[default]
    Execution,
    /// Reading an upstream task's output failed: the link broke, or the upstream itself
    /// failed and this task echoes it (`REMOTE_TASK_FAILED`). `upstream` names its
    /// stage and partition, `url` the worker that ran it.
    Fetch { upstream: TaskId, url: String },
}

impl TaskFailure {
    /// A failure of the task's own work.
    pub fn new(code: impl Into<FailureCode>, message: impl Into<String>) -> Self {
        TaskFailure { code: code.into(), message: message.into(), reason: FailureReason::Execution }
    }

    /// A failure to read `upstream`'s output from the worker at `url`.
    pub fn fetch(code: ErrorCode, message: impl Into<String>, upstream: TaskId, url: impl Into<String>) -> Self {
        TaskFailure {
            code: code.into(),
            message: message.into(),
            reason: FailureReason::Fetch { upstream, url: url.into() },
        }
    }

    /// The upstream task and its worker's URL, for a fetch failure.
    pub fn upstream(&self) -> Option<(&TaskId, &str)> {
        match &self.reason {
            FailureReason::Fetch { upstream, url } => Some((upstream, url)),
            FailureReason::Execution => None,
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskStats {
    pub input_rows: u64,
    pub input_bytes: u64,
    pub output_rows: u64,
    pub output_bytes: u64,
    pub elapsed_ms: u64,
    /// Bytes the task holds in its worker's memory pool now, and at most so far.
    #[serde(default)]
    pub memory_reserved_bytes: u64,
    #[serde(default)]
    pub memory_peak_bytes: u64,
    /// Bytes its operators wrote to spill files.
    #[serde(default)]
    pub spilled_bytes: u64,
    /// Of a finished task with a partitioned output: the bytes it wrote to each
    /// consumer partition (adaptive planning sizes the consumer's tasks by them).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub output_partition_bytes: Vec<u64>,
}

/// Memory over several tasks (a stage's, a query's): what they hold now, their peaks
/// added up (at least the group's true peak, at most that sum, since the tasks need
/// not peak together), and what they spilled.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemoryStats {
    pub reserved_bytes: u64,
    pub peak_bytes: u64,
    pub spilled_bytes: u64,
}

impl MemoryStats {
    pub fn of<'a>(tasks: impl IntoIterator<Item = &'a TaskStats>) -> Self {
        tasks.into_iter().fold(MemoryStats::default(), |m, t| m + MemoryStats::from(t))
    }
}

impl std::ops::Add for MemoryStats {
    type Output = MemoryStats;

    fn add(self, o: MemoryStats) -> Self {
        MemoryStats {
            reserved_bytes: self.reserved_bytes + o.reserved_bytes,
            peak_bytes: self.peak_bytes + o.peak_bytes,
            spilled_bytes: self.spilled_bytes + o.spilled_bytes,
        }
    }
}

impl From<&TaskStats> for MemoryStats {
    fn from(t: &TaskStats) -> Self {
        MemoryStats {
            reserved_bytes: t.memory_reserved_bytes,
            peak_bytes: t.memory_peak_bytes,
            spilled_bytes: t.spilled_bytes,
        }
    }
}

/// `GET /v1/task/{taskId}/status`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskStatus {
    pub task_id: TaskId,
    pub state: TaskState,
    /// Increases on every change; a long poll waits for it to pass the caller's.
    pub version: u64,
    pub node_id: String,
    #[serde(default)]
    pub failure: Option<TaskFailure>,
    /// The output buffer is at its byte limit and a producer is waiting.
    pub output_buffer_overutilized: bool,
    pub output_buffer_bytes: u64,
    pub stats: TaskStats,
}

/// `GET /v1/task/{taskId}`: status plus what the task runs.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TaskInfo {
    pub status: TaskStatus,
    pub partitions: Vec<usize>,
    pub output: Option<OutputBufferSpec>,
    pub buffers: Vec<BufferInfo>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct BufferInfo {
    pub buffer_id: usize,
    pub buffered_pages: usize,
    pub buffered_bytes: u64,
    pub pages_sent: u64,
    pub finished: bool,
}

/// `GET /v1/info` and `/v1/status` of a worker.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct NodeInfo {
    pub node_id: String,
    pub url: String,
    pub version: String,
    pub tasks: usize,
    pub running_tasks: usize,
    pub buffered_bytes: u64,
    pub uptime_ms: u64,
    /// Bytes of heap in use (Trino's `heapUsed`), not counting what the allocator
    /// keeps free.
    #[serde(default)]
    pub heap_used: u64,
}

/// What the coordinator answers an announcement with.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct AnnouncementAnswer {
    /// The coordinator process's incarnation, the last part of its query ids: a worker
    /// that hears a new one drops what queries of the one before left.
    #[serde(default)]
    pub coordinator_incarnation: Option<String>,
    /// The local directories of the coordinator's `files` catalog (its `--data-dir`
    /// warehouse, its allowed locations): a worker of the built-in catalogs opens
    /// files there too, so a cluster writes without the flag repeated per worker.
    #[serde(default)]
    pub files_directories: Vec<String>,
}

/// A worker's heartbeat to the coordinator.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Announcement {
    pub node_id: String,
    pub url: String,
    /// `node.environment`: a coordinator takes only workers of its own.
    #[serde(default)]
    pub environment: Option<String>,
    /// A worker shutting down gracefully gets no new queries.
    #[serde(default)]
    pub shutting_down: bool,
    /// Bytes each query's tasks hold in the worker's memory pool now, by query id:
    /// the coordinator holds queries to `query_max_memory` with them.
    #[serde(default)]
    pub query_memory: std::collections::BTreeMap<String, u64>,
    /// Bytes one query may hold on this worker (its `query.max-memory-per-node`, at
    /// most the memory pool): the coordinator bounds hash partitions and buffer sizes
    /// by it. 0 from a worker that does not say.
    #[serde(default)]
    pub query_memory_capacity: u64,
}

/// Every HTTP error body: `{"error": {"code": "...", "message": "..."}}`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ErrorBody {
    pub error: ErrorDetail,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ErrorDetail {
    pub code: Named<ApiCode>,
    pub message: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn task_id_round_trips_through_text_and_json() {
        let id = TaskId::new("20261130_000001_abcde", 2, 3, 1);
        assert_eq!(id.to_string(), "20261130_000001_abcde.2.3.1");
        assert_eq!(id.to_string().parse::<TaskId>().unwrap(), id);
        let json = serde_json::to_string(&id).unwrap();
        assert_eq!(json, "\"20261130_000001_abcde.2.3.1\"");
        assert_eq!(serde_json::from_str::<TaskId>(&json).unwrap(), id);
    }

    #[test]
    fn malformed_task_ids_are_rejected() {
        for bad in ["", "q", "q.1.2", "q.x.1.1", ".1.2.3", "q.1.2.-1", "../../etc.1.2.3", "/tmp/x.1.2.3", "a.b.1.2.3"] {
            assert!(bad.parse::<TaskId>().is_err(), "{bad} should not parse");
        }
    }

    #[test]
    fn fragment_bytes_travel_as_base64() {
        let req = TaskUpdateRequest {
            fragment: Some(Base64Bytes(vec![0, 1, 2, 255])),
            output: Some(OutputBufferSpec::Partitioned { partitions: 4 }),
            ..Default::default()
        };
        let json = serde_json::to_string(&req).unwrap();
        assert!(json.contains("\"AAEC/w==\""), "{json}");
        let back: TaskUpdateRequest = serde_json::from_str(&json).unwrap();
        assert_eq!(back.fragment.unwrap().0, vec![0, 1, 2, 255]);
        assert_eq!(back.output, Some(OutputBufferSpec::Partitioned { partitions: 4 }));
    }
}
