//! `TaskOutput`: where a task's pages go and where its readers get them, behind one
//! type. Either the in-memory `OutputBuffer`, which streams pages to live consumers
//! and forgets what they acknowledged (retry policies `none` and `query`), or the
//! spool on disk, which serves pages only once the task has finished, and then for as
//! long as the task exists, so any consumer attempt can read them again (retry
//! policy `task`). `SqlTask` writes and finishes through it; the results endpoint
//! reads through it via the task.

use std::sync::Arc;
use std::time::Duration;

use datafusion::arrow::array::RecordBatch;
use datafusion::error::DataFusionError;
use tokio::sync::watch;

use super::WorkerError;
use crate::exchange::output_buffer::{BufferError, BufferResult, OutputBuffer};
use crate::exchange::page::Page;
use crate::exchange::spool::{read_spooled, SpoolError, SpoolWriter};
use crate::protocol::BufferInfo;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SpoolState {
    Writing,
    /// Every file is complete: readers may open them.
    Finished,
    /// The files are gone (the task was aborted or deleted).
    Removed,
}

pub struct TaskOutput(Kind);

enum Kind {
    Buffer { buffer: Arc<OutputBuffer>, broadcast: bool },
    Spool { spool: Arc<SpoolWriter>, state: watch::Sender<SpoolState> },
}

/// How a task's output ended.
pub enum Finished {
    /// Pages wait in memory for their readers: done when they have taken them all.
    Draining,
    /// Complete on disk, this many bytes.
    Spooled(u64),
}

impl TaskOutput {
    pub fn buffer(buffer: Arc<OutputBuffer>, broadcast: bool) -> Self {
        TaskOutput(Kind::Buffer { buffer, broadcast })
    }

    pub fn spool(spool: Arc<SpoolWriter>) -> Self {
        TaskOutput(Kind::Spool { spool, state: watch::channel(SpoolState::Writing).0 })
    }

    /// Adds a batch to `buffer` (to every buffer of a broadcast), waiting while a
    /// memory buffer is full. Returns the bytes it counts now (a spool counts its
    /// bytes on disk when it finishes).
    pub async fn write(&self, buffer: usize, batch: &RecordBatch) -> Result<u64, DataFusionError> {
        match &self.0 {
            Kind::Buffer { buffer: out, broadcast } => {
                let page = Page::new(batch.clone());
                let bytes = page.data_bytes() as u64;
                let result = if *broadcast { out.enqueue_all(page).await } else { out.enqueue(buffer, page).await };
                result.map_err(|e| DataFusionError::Internal(e.to_string()))?;
                Ok(bytes)
            }
            Kind::Spool { spool, .. } => {
                spool.write(buffer, batch).map_err(|e| DataFusionError::External(Box::new(e)))?;
                Ok(0)
            }
        }
    }

    /// Output kept in memory for readers (rather than spooled to files).
    pub fn is_memory(&self) -> bool {
        matches!(self.0, Kind::Buffer { .. })
    }

    /// Every page has been written.
    pub fn finish(&self) -> Result<Finished, DataFusionError> {
        match &self.0 {
            Kind::Buffer { buffer, .. } => {
                buffer.set_no_more_pages();
                Ok(Finished::Draining)
            }
            Kind::Spool { spool, state } => {
                let bytes = spool.finish().map_err(|e| DataFusionError::External(Box::new(e)))?;
                state.send_replace(SpoolState::Finished);
                Ok(Finished::Spooled(bytes))
            }
        }
    }

    /// Readers have everything: a drained memory buffer, or a finished spool.
    pub fn is_finished(&self) -> bool {
        match &self.0 {
            Kind::Buffer { buffer, .. } => buffer.is_finished(),
            Kind::Spool { state, .. } => *state.borrow() == SpoolState::Finished,
        }
    }

    /// Pages of `buffer` from `token`, waiting up to `max_wait` for some (a spool
    /// serves nothing before it is finished: consumers normally only start then).
    pub async fn get(
        &self,
        buffer: usize,
        token: u64,
        max_bytes: u64,
        max_wait: Duration,
    ) -> Result<BufferResult, WorkerError> {
        let (spool, state) = match &self.0 {
            Kind::Buffer { buffer: out, .. } => return Ok(out.get(buffer, token, max_bytes, max_wait).await?),
            Kind::Spool { spool, state } => (spool.clone(), state),
        };
        let mut rx = state.subscribe();
        let _ = tokio::time::timeout(max_wait, rx.wait_for(|s| *s != SpoolState::Writing)).await;
        if *rx.borrow() != SpoolState::Finished {
            // Not yet, or gone, which the task's reader failure reports.
            return Ok(BufferResult { pages: Vec::new(), next_token: token, complete: false });
        }
        let read = tokio::task::spawn_blocking(move || {
            read_spooled(spool.dir(), buffer, spool.is_broadcast(), token, max_bytes)
        })
        .await
        .map_err(|e| WorkerError::Spool(e.to_string()))?;
        read.map_err(|e| match e {
            SpoolError::TokenAhead { .. } => WorkerError::BadRequest(e.to_string()),
            other => WorkerError::Spool(other.to_string()),
        })
    }

    /// A reader holds the pages before `token`. Spooled pages stay until the task
    /// goes: another consumer attempt may need them.
    pub fn acknowledge(&self, buffer: usize, token: u64) -> Result<(), BufferError> {
        match &self.0 {
            Kind::Buffer { buffer: out, .. } => out.acknowledge(buffer, token),
            Kind::Spool { .. } => Ok(()),
        }
    }

    /// A reader is done with `buffer`; a spool keeps it, as above.
    pub fn destroy_buffer(&self, buffer: usize) -> Result<(), BufferError> {
        match &self.0 {
            Kind::Buffer { buffer: out, .. } => out.destroy(buffer),
            Kind::Spool { .. } => Ok(()),
        }
    }

    /// Frees everything: buffered pages, or the spool's files.
    pub fn release(&self) {
        match &self.0 {
            Kind::Buffer { buffer, .. } => buffer.destroy_all(),
            Kind::Spool { spool, state } => {
                spool.remove();
                state.send_replace(SpoolState::Removed);
            }
        }
    }

    /// Spooled output that is gone: readers cannot get it any more.
    pub fn is_gone(&self) -> bool {
        matches!(&self.0, Kind::Spool { state, .. } if *state.borrow() == SpoolState::Removed)
    }

    /// A memory buffer at its byte limit with a producer waiting.
    pub fn is_full(&self) -> bool {
        match &self.0 {
            Kind::Buffer { buffer, .. } => buffer.is_full(),
            Kind::Spool { .. } => false,
        }
    }

    /// Bytes held in memory.
    pub fn buffered_bytes(&self) -> u64 {
        match &self.0 {
            Kind::Buffer { buffer, .. } => buffer.total_bytes(),
            Kind::Spool { .. } => 0,
        }
    }

    pub fn info(&self) -> Vec<BufferInfo> {
        match &self.0 {
            Kind::Buffer { buffer, .. } => buffer.info(),
            Kind::Spool { .. } => Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::arrow::array::Int64Array;
    use datafusion::arrow::datatypes::{DataType, Field, Schema};

    fn batch(n: i64) -> RecordBatch {
        let schema = Arc::new(Schema::new(vec![Field::new("x", DataType::Int64, false)]));
        RecordBatch::try_new(schema, vec![Arc::new(Int64Array::from_iter_values(0..n))]).unwrap()
    }

    const WAIT: Duration = Duration::from_millis(20);

    #[tokio::test]
    async fn a_spool_serves_pages_only_once_finished_and_again_after() {
        let dir = std::env::temp_dir().join(format!("flotilla-task-output-{}", crate::util::random_suffix(8)));
        let out = TaskOutput::spool(Arc::new(SpoolWriter::create(dir.clone(), false).unwrap()));
        assert_eq!(out.write(1, &batch(3)).await.unwrap(), 0, "spooled bytes count at the end");
        let early = out.get(1, 0, 1 << 20, WAIT).await.unwrap();
        assert!(early.pages.is_empty() && !early.complete);
        assert!(!out.is_finished());
        let Finished::Spooled(bytes) = out.finish().unwrap() else { panic!("a spool finishes at once") };
        assert!(bytes > 0);
        assert!(out.is_finished());
        for _ in 0..2 {
            // Acknowledging and destroying keep the files: another attempt may read them.
            let read = out.get(1, 0, 1 << 20, WAIT).await.unwrap();
            assert_eq!((read.pages.len(), read.next_token, read.complete), (1, 1, true));
            out.acknowledge(1, 1).unwrap();
            out.destroy_buffer(1).unwrap();
        }
        let empty = out.get(0, 0, 1 << 20, WAIT).await.unwrap();
        assert!(empty.pages.is_empty() && empty.complete, "a buffer without rows is complete");
        assert!(!out.is_gone());
        out.release();
        assert!(out.is_gone() && !dir.exists());
        assert!(out.get(1, 0, 1 << 20, WAIT).await.unwrap().pages.is_empty());
    }

    #[tokio::test]
    async fn a_memory_buffer_streams_and_drains() {
        let buffer = Arc::new(OutputBuffer::new(2, 1 << 20, Arc::new(tokio::sync::Notify::new())));
        let out = TaskOutput::buffer(buffer, false);
        let bytes = out.write(1, &batch(5)).await.unwrap();
        assert!(bytes > 0 && out.buffered_bytes() >= bytes);
        let read = out.get(1, 0, 1 << 20, WAIT).await.unwrap();
        assert_eq!(read.pages.len(), 1, "pages flow before the task finishes");
        assert!(matches!(out.finish().unwrap(), Finished::Draining));
        assert!(!out.is_finished(), "readers still have to take what is left");
        out.acknowledge(1, 1).unwrap();
        out.destroy_buffer(0).unwrap();
        out.destroy_buffer(1).unwrap();
        assert!(out.is_finished());
        assert!(!out.is_gone());
    }
}
