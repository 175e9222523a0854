//! The page codec of the exchange. A page is one record batch a producer task has
//! laid into its output buffer. It stays a batch while it waits there: a consumer in
//! the same process takes it as it is, and only a results response over HTTP encodes
//! it, as one Arrow IPC stream (schema, the batch, end marker) straight into the
//! response body. A body is a run of length-prefixed streams; the `ExchangeClient`
//! decodes them on arrival.
//!
//! Encoding at the response rather than at the producer costs HTTP readers nothing
//! (the bytes were copied into the body anyway) and saves readers in the same process
//! the encode and decode altogether.
//!
//! Each encoded page carries its own schema so that any page can be decoded alone,
//! whichever token a consumer resumes from; the schema is small next to a page of rows.
//!
//! A page decodes into arrays over the received bytes, without a copy. The length
//! prefix is 8 bytes because IPC streams are multiples of 8 bytes: every page then
//! starts 8-byte aligned in the body, and Arrow need not copy a column to realign it.

use bytes::{Buf, BufMut, Bytes, BytesMut};
use datafusion::arrow::array::RecordBatch;
use datafusion::arrow::buffer::Buffer;
use datafusion::arrow::error::ArrowError;
use datafusion::arrow::ipc::reader::StreamDecoder;
use datafusion::arrow::ipc::writer::StreamWriter;

/// Bytes before each page in a response: its length, u64 little-endian.
const FRAME_HEADER: usize = 8;

/// A batch waiting in an output buffer, and the bytes it counts there.
#[derive(Debug, Clone)]
pub struct Page {
    batch: RecordBatch,
    size: usize,
    data_bytes: usize,
}

impl Page {
    /// The page of `batch`. It counts the memory the batch holds, which is what the
    /// buffer's byte limit is there to bound.
    pub fn new(batch: RecordBatch) -> Page {
        let size = batch.get_array_memory_size();
        let data_bytes = data_bytes(&batch);
        Page { batch, size, data_bytes }
    }

    /// Bytes of the rows' values, about what the page encodes to: the statistics'
    /// measure. A batch can hold much more (a builder's spare capacity).
    pub fn data_bytes(&self) -> usize {
        self.data_bytes
    }

    pub fn batch(&self) -> &RecordBatch {
        &self.batch
    }

    pub fn into_batch(self) -> RecordBatch {
        self.batch
    }

    /// Bytes counted against buffer and response limits.
    pub fn len(&self) -> usize {
        self.size
    }

    pub fn is_empty(&self) -> bool {
        self.size == 0
    }

    /// A page of no rows that counts `size` bytes, for the buffer's own tests.
    #[cfg(test)]
    pub(crate) fn counting(size: usize) -> Page {
        let schema = std::sync::Arc::new(datafusion::arrow::datatypes::Schema::empty());
        Page { batch: RecordBatch::new_empty(schema), size, data_bytes: size }
    }

    /// The batches of one encoded page, whose arrays point into `bytes` (no copy where
    /// the buffers are aligned).
    pub fn decode(bytes: &Bytes) -> Result<Vec<RecordBatch>, ArrowError> {
        let mut buffer = Buffer::from(bytes.clone());
        let mut decoder = StreamDecoder::new();
        let mut out = Vec::new();
        while !buffer.is_empty() {
            if let Some(batch) = decoder.decode(&mut buffer)? {
                out.push(batch);
            }
        }
        decoder.finish()?;
        Ok(out)
    }
}

fn data_bytes(batch: &RecordBatch) -> usize {
    batch
        .columns()
        .iter()
        .map(|c| c.to_data().get_slice_memory_size().unwrap_or_else(|_| c.get_array_memory_size()))
        .sum()
}

/// Encodes pages into one response body, `[u64 little-endian length][IPC stream]...`.
pub fn frame_pages(pages: &[Page]) -> Result<Bytes, ArrowError> {
    // A page encodes to about its rows' bytes (not the memory its batch holds, which
    // can be far more); the schema adds a little.
    let guess: usize = pages.iter().map(|p| p.data_bytes() + FRAME_HEADER + 1024).sum();
    let mut writer = BytesMut::with_capacity(guess).writer();
    for p in pages {
        let at = writer.get_ref().len();
        writer.get_mut().put_u64_le(0);
        {
            let mut stream = StreamWriter::try_new(&mut writer, &p.batch.schema())?;
            stream.write(&p.batch)?;
            stream.finish()?;
        }
        let out = writer.get_mut();
        let len = (out.len() - at - FRAME_HEADER) as u64;
        out[at..at + FRAME_HEADER].copy_from_slice(&len.to_le_bytes());
    }
    Ok(writer.into_inner().freeze())
}

/// Splits a response body back into encoded pages; a truncated body is an error,
/// never a silently shorter result.
pub fn unframe_pages(mut body: Bytes) -> Result<Vec<Bytes>, String> {
    let mut pages = Vec::new();
    while body.has_remaining() {
        if body.remaining() < FRAME_HEADER {
            return Err("truncated page frame header".into());
        }
        let len = body.get_u64_le();
        if (body.remaining() as u64) < len {
            return Err(format!("truncated page: expected {len} bytes, got {}", body.remaining()));
        }
        pages.push(body.split_to(len as usize));
    }
    Ok(pages)
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::arrow::array::{Int64Array, StringArray};
    use datafusion::arrow::datatypes::{DataType, Field, Schema};
    use std::sync::Arc;

    fn batch(n: i64) -> RecordBatch {
        let schema =
            Arc::new(Schema::new(vec![Field::new("k", DataType::Int64, false), Field::new("s", DataType::Utf8, true)]));
        RecordBatch::try_new(
            schema,
            vec![
                Arc::new(Int64Array::from_iter_values(0..n)),
                Arc::new(StringArray::from_iter((0..n).map(|i| (i % 3 != 0).then(|| format!("v{i}"))))),
            ],
        )
        .unwrap()
    }

    #[test]
    fn pages_round_trip_through_frames() {
        let pages = vec![Page::new(batch(10)), Page::new(batch(0)), Page::new(batch(3))];
        assert_eq!(pages[0].batch().num_rows(), 10);
        let body = frame_pages(&pages).unwrap();
        let raw = unframe_pages(body).unwrap();
        assert_eq!(raw.len(), 3);
        let decoded: Vec<RecordBatch> = raw.iter().flat_map(|b| Page::decode(b).unwrap()).collect();
        assert_eq!(decoded[0], batch(10));
        assert_eq!(decoded[1].num_rows(), 0);
        assert_eq!(decoded[2], batch(3));
        // A slice encodes as its rows only.
        let sliced = batch(10).slice(3, 4);
        let raw = unframe_pages(frame_pages(&[Page::new(sliced.clone())]).unwrap()).unwrap();
        assert_eq!(Page::decode(&raw[0]).unwrap(), vec![sliced]);
    }

    #[test]
    fn decoded_columns_point_into_the_received_bytes() {
        let body = frame_pages(&[Page::new(batch(1000)), Page::new(batch(7))]).unwrap();
        let range = body.as_ptr() as usize..body.as_ptr() as usize + body.len();
        for raw in unframe_pages(body.clone()).unwrap() {
            assert_eq!((raw.as_ptr() as usize - range.start) % 8, 0, "pages start 8-byte aligned in the body");
            let decoded = Page::decode(&raw).unwrap();
            let values = decoded[0].column(0).to_data().buffers()[0].as_ptr() as usize;
            assert!(range.contains(&values), "the key column was copied out of the body");
        }
    }

    #[test]
    fn truncated_bodies_are_errors() {
        let body = frame_pages(&[Page::new(batch(5))]).unwrap();
        let cut = body.slice(0..body.len() - 1);
        assert!(unframe_pages(cut).is_err());
        assert!(unframe_pages(Bytes::from_static(&[1, 0, 0, 0])).is_err());
        assert!(unframe_pages(Bytes::new()).unwrap().is_empty());
    }
}
