//! The spool of fault-tolerant execution (retry policy `task`): a producer task writes
//! each output buffer to a local Arrow IPC file instead of holding pages in memory
//! for a live consumer, and the results endpoint serves pages from those files for as
//! long as the task exists. Consumers may read a spooled output any number of times,
//! so a consumer attempt that fails can be retried without re-running its producers.
//!
//! `SqlTask` owns a `SpoolWriter` when its task update asks for spooling; the worker
//! API calls `read_spooled`. Files live under the worker's spool directory, one
//! directory per task attempt, and go when the coordinator deletes the task.
//!
//! Tokens are batch indices in the file, so a retried request for the same token gets
//! the same pages, as with in-memory buffers.

use std::collections::HashMap;
use std::fs::File;
use std::io::BufWriter;
use std::path::{Path, PathBuf};

use datafusion::arrow::array::RecordBatch;
use datafusion::arrow::error::ArrowError;
use datafusion::arrow::ipc::reader::FileReader;
use datafusion::arrow::ipc::writer::FileWriter;
use parking_lot::Mutex;

use super::output_buffer::BufferResult;
use super::page::Page;

#[derive(Debug, thiserror::Error)]
pub enum SpoolError {
    #[error("spool I/O on {path}: {source}")]
    Io { path: String, source: std::io::Error },
    #[error("spool file {path}: {source}")]
    Arrow { path: String, source: ArrowError },
    #[error("token {token} is ahead of spooled buffer {buffer} ({batches} batches)")]
    TokenAhead { buffer: usize, token: u64, batches: u64 },
    #[error("spool of buffer {0} is not finished")]
    NotFinished(usize),
    #[error("the spool was removed (the task was aborted)")]
    Removed,
}

/// Writes one task's output buffers as Arrow IPC files in its own directory.
pub struct SpoolWriter {
    dir: PathBuf,
    /// Broadcast output is the same for every consumer: one file serves them all.
    broadcast: bool,
    files: Mutex<SpoolFiles>,
}

#[derive(Default)]
struct SpoolFiles {
    open: HashMap<usize, FileWriter<BufWriter<File>>>,
    /// Set once the directory is gone: a partition runner still writing (an abort
    /// does not stop a runner mid-write) must not create files in it again.
    removed: bool,
}

impl std::fmt::Debug for SpoolWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SpoolWriter({})", self.dir.display())
    }
}

fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> SpoolError + '_ {
    move |source| SpoolError::Io { path: path.display().to_string(), source }
}

fn arrow_err(path: &Path) -> impl FnOnce(ArrowError) -> SpoolError + '_ {
    move |source| SpoolError::Arrow { path: path.display().to_string(), source }
}

/// The file holding `buffer` of the task spooled in `dir`.
pub fn spool_file(dir: &Path, buffer: usize, broadcast: bool) -> PathBuf {
    dir.join(format!("{}.arrow", if broadcast { 0 } else { buffer }))
}

impl SpoolWriter {
    /// Creates the task's (empty) spool directory.
    pub fn create(dir: PathBuf, broadcast: bool) -> Result<Self, SpoolError> {
        std::fs::create_dir_all(&dir).map_err(io_err(&dir))?;
        Ok(SpoolWriter { dir, broadcast, files: Mutex::new(SpoolFiles::default()) })
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn is_broadcast(&self) -> bool {
        self.broadcast
    }

    /// Appends a batch to a buffer's file, creating the file on first use.
    pub fn write(&self, buffer: usize, batch: &RecordBatch) -> Result<(), SpoolError> {
        let path = spool_file(&self.dir, buffer, self.broadcast);
        let mut files = self.files.lock();
        if files.removed {
            return Err(SpoolError::Removed);
        }
        let key = if self.broadcast { 0 } else { buffer };
        let writer = match files.open.entry(key) {
            std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),
            std::collections::hash_map::Entry::Vacant(v) => {
                let file = File::create(&path).map_err(io_err(&path))?;
                v.insert(FileWriter::try_new(BufWriter::new(file), &batch.schema()).map_err(arrow_err(&path))?)
            }
        };
        writer.write(batch).map_err(arrow_err(&path))
    }

    /// Writes every file's footer and flushes it; readers may open them from now on.
    /// Returns the bytes spooled, on disk.
    pub fn finish(&self) -> Result<u64, SpoolError> {
        let mut files = self.files.lock();
        let mut total = 0;
        for (buffer, mut writer) in files.open.drain() {
            let path = spool_file(&self.dir, buffer, self.broadcast);
            writer.finish().map_err(arrow_err(&path))?;
            let mut inner = writer.into_inner().map_err(arrow_err(&path))?;
            std::io::Write::flush(&mut inner).map_err(io_err(&path))?;
            total += inner.get_ref().metadata().map_err(io_err(&path))?.len();
        }
        Ok(total)
    }

    /// Deletes the task's files. The lock is held throughout, so no write can slip a
    /// new file in between.
    pub fn remove(&self) {
        let mut files = self.files.lock();
        files.open.clear();
        files.removed = true;
        if let Err(e) = std::fs::remove_dir_all(&self.dir) {
            if e.kind() != std::io::ErrorKind::NotFound {
                tracing::warn!("cannot remove spool directory {}: {e}", self.dir.display());
            }
        }
    }
}

/// Pages of a finished spool from batch `token` on, up to `max_bytes` (at least one
/// page if any is left). A buffer that never got a row has no file: it is complete
/// and empty. Blocking: call it off the async runtime.
pub fn read_spooled(
    dir: &Path,
    buffer: usize,
    broadcast: bool,
    token: u64,
    max_bytes: u64,
) -> Result<BufferResult, SpoolError> {
    let path = spool_file(dir, buffer, broadcast);
    let file = match File::open(&path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound && dir.is_dir() => {
            return Ok(BufferResult { pages: Vec::new(), next_token: token, complete: true });
        }
        Err(e) => return Err(io_err(&path)(e)),
    };
    let mut reader = FileReader::try_new_buffered(file, None).map_err(arrow_err(&path))?;
    let batches = reader.num_batches() as u64;
    if token > batches {
        return Err(SpoolError::TokenAhead { buffer, token, batches });
    }
    if token < batches {
        reader.set_index(token as usize).map_err(arrow_err(&path))?;
    }
    let mut pages = Vec::new();
    let mut size = 0u64;
    let mut next = token;
    while next < batches {
        let batch = reader.next().ok_or(SpoolError::NotFinished(buffer))?.map_err(arrow_err(&path))?;
        let page = Page::new(batch);
        size += page.len() as u64;
        pages.push(page);
        next += 1;
        if size >= max_bytes {
            break;
        }
    }
    Ok(BufferResult { pages, next_token: next, complete: next == batches })
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::arrow::array::Int64Array;
    use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef};
    use std::sync::Arc;

    fn batch(schema: &SchemaRef, from: i64, n: i64) -> RecordBatch {
        RecordBatch::try_new(schema.clone(), vec![Arc::new(Int64Array::from_iter_values(from..from + n))]).unwrap()
    }

    fn temp_dir(name: &str) -> PathBuf {
        std::env::temp_dir().join(format!("flotilla-spool-test-{name}-{}", crate::util::random_suffix(6)))
    }

    fn rows(r: &BufferResult) -> Vec<i64> {
        r.pages
            .iter()
            .map(|p| p.batch())
            .flat_map(|b| b.column(0).as_any().downcast_ref::<Int64Array>().unwrap().values().to_vec())
            .collect()
    }

    #[test]
    fn spooled_buffers_read_back_by_token_any_number_of_times() {
        let schema = Arc::new(Schema::new(vec![Field::new("x", DataType::Int64, false)]));
        let dir = temp_dir("read");
        let w = SpoolWriter::create(dir.clone(), false).unwrap();
        w.write(0, &batch(&schema, 0, 3)).unwrap();
        w.write(1, &batch(&schema, 100, 2)).unwrap();
        w.write(0, &batch(&schema, 3, 3)).unwrap();
        let spooled = w.finish().unwrap();
        let on_disk: u64 = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().metadata().unwrap().len()).sum();
        assert_eq!(spooled, on_disk);
        let all = read_spooled(&dir, 0, false, 0, u64::MAX).unwrap();
        assert_eq!(rows(&all), vec![0, 1, 2, 3, 4, 5]);
        assert_eq!(all.next_token, 2);
        assert!(all.complete);
        // A small limit still gives one page; the next token resumes after it.
        let first = read_spooled(&dir, 0, false, 0, 1).unwrap();
        assert_eq!((rows(&first), first.next_token, first.complete), (vec![0, 1, 2], 1, false));
        let rest = read_spooled(&dir, 0, false, 1, 1).unwrap();
        assert_eq!((rows(&rest), rest.complete), (vec![3, 4, 5], true));
        // Reading again (a retried consumer) gives the same rows.
        assert_eq!(rows(&read_spooled(&dir, 0, false, 0, u64::MAX).unwrap()), vec![0, 1, 2, 3, 4, 5]);
        assert_eq!(rows(&read_spooled(&dir, 1, false, 0, u64::MAX).unwrap()), vec![100, 101]);
        // A buffer that got no rows is empty and complete.
        let empty = read_spooled(&dir, 7, false, 0, u64::MAX).unwrap();
        assert!(empty.pages.is_empty() && empty.complete);
        assert!(matches!(read_spooled(&dir, 0, false, 5, 10), Err(SpoolError::TokenAhead { .. })));
        w.remove();
        assert!(!dir.exists());
        assert!(matches!(w.write(0, &batch(&schema, 0, 1)), Err(SpoolError::Removed)), "no file after removal");
        assert!(!dir.exists());
        assert!(read_spooled(&dir, 0, false, 0, 10).is_err(), "a removed spool is an error, not an empty result");
    }

    #[test]
    fn broadcast_spools_one_file_for_every_consumer() {
        let schema = Arc::new(Schema::new(vec![Field::new("x", DataType::Int64, false)]));
        let dir = temp_dir("broadcast");
        let w = SpoolWriter::create(dir.clone(), true).unwrap();
        w.write(0, &batch(&schema, 0, 2)).unwrap();
        w.finish().unwrap();
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 1);
        for consumer in 0..3 {
            assert_eq!(rows(&read_spooled(&dir, consumer, true, 0, u64::MAX).unwrap()), vec![0, 1]);
        }
        w.remove();
    }
}
