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
//! A page decodes into arrays over the received bytes, without a copy: the
//! `PageAssembler` gathers each page of a body, as its chunks arrive, into a 64-byte
//! aligned buffer of its own. Arrow copies a column whose values lie at an address
//! their type does not allow, and decimals (16-byte values, half of a `lineitem` row)
//! lay 8-byte aligned in a received body; and the page's arrays account for that
//! page's memory only, not for a whole body they would otherwise point into.

use bytes::{Buf, BufMut, Bytes, BytesMut};
use datafusion::arrow::array::RecordBatch;
use datafusion::arrow::buffer::{Buffer, MutableBuffer};
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
    pub fn decode(bytes: &Buffer) -> Result<Vec<RecordBatch>, ArrowError> {
        let mut buffer = bytes.clone();
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

/// Splits a response body, fed as it arrives, back into encoded pages, each in a
/// buffer of its own aligned as Arrow's allocations are (64 bytes). A truncated body is
/// an error, never a silently shorter result.
pub struct PageAssembler {
    header: Vec<u8>,
    /// The page being gathered and its length.
    page: Option<(MutableBuffer, usize)>,
    pages: Vec<Buffer>,
    /// Largest allocation made ahead of the bytes: a length is the peer's word.
    prealloc_limit: usize,
}

impl PageAssembler {
    /// An assembler for a body of about `expected` bytes (allocated ahead at most).
    pub fn new(expected: usize) -> Self {
        PageAssembler {
            header: Vec::with_capacity(FRAME_HEADER),
            page: None,
            pages: Vec::new(),
            prealloc_limit: expected,
        }
    }

    pub fn push(&mut self, mut chunk: &[u8]) -> Result<(), String> {
        while !chunk.is_empty() {
            match &mut self.page {
                None => {
                    let take = (FRAME_HEADER - self.header.len()).min(chunk.len());
                    self.header.extend_from_slice(&chunk[..take]);
                    chunk = &chunk[take..];
                    if self.header.len() == FRAME_HEADER {
                        let len = self.header.as_slice().get_u64_le();
                        self.header.clear();
                        let len = usize::try_from(len).map_err(|_| format!("page of {len} bytes"))?;
                        self.page = Some((MutableBuffer::with_capacity(len.min(self.prealloc_limit)), len));
                    }
                }
                Some((buffer, len)) => {
                    let take = (*len - buffer.len()).min(chunk.len());
                    buffer.extend_from_slice(&chunk[..take]);
                    chunk = &chunk[take..];
                }
            }
            if let Some((buffer, len)) = &mut self.page {
                if buffer.len() == *len {
                    self.pages.push(std::mem::take(buffer).into());
                    self.page = None;
                }
            }
        }
        Ok(())
    }

    pub fn finish(self) -> Result<Vec<Buffer>, String> {
        if !self.header.is_empty() {
            return Err("truncated page frame header".into());
        }
        if let Some((buffer, len)) = self.page {
            return Err(format!("truncated page: expected {len} bytes, got {}", buffer.len()));
        }
        Ok(self.pages)
    }
}

/// A whole body split into pages (`PageAssembler` in one go).
pub fn unframe_pages(body: &[u8]) -> Result<Vec<Buffer>, String> {
    let mut assembler = PageAssembler::new(body.len());
    assembler.push(body)?;
    assembler.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::arrow::array::{Decimal128Array, Int64Array, StringArray};
    use datafusion::arrow::datatypes::{DataType, Field, Schema};
    use std::sync::Arc;

    fn batch(n: i64) -> RecordBatch {
        let schema = Arc::new(Schema::new(vec![
            Field::new("k", DataType::Int64, false),
            Field::new("s", DataType::Utf8, true),
            Field::new("d", DataType::Decimal128(15, 2), false),
        ]));
        let decimals = Decimal128Array::from_iter_values((0..n).map(|i| i as i128 * 101));
        RecordBatch::try_new(
            schema,
            vec![
                Arc::new(Int64Array::from_iter_values(0..n)),
                Arc::new(StringArray::from_iter((0..n).map(|i| (i % 3 != 0).then(|| format!("v{i}"))))),
                Arc::new(decimals.with_precision_and_scale(15, 2).unwrap()),
            ],
        )
        .unwrap()
    }

    #[test]
    fn pages_round_trip_through_frames() {
        let pages = vec![Page::new(batch(10)), Page::new(batch(0)), Page::new(batch(3))];
        assert_eq!(pages[0].batch().num_rows(), 10);
        let body = frame_pages(&pages).unwrap();
        let raw = unframe_pages(&body).unwrap();
        assert_eq!(raw.len(), 3);
        let decoded: Vec<RecordBatch> = raw.iter().flat_map(|b| Page::decode(b).unwrap()).collect();
        assert_eq!(decoded[0], batch(10));
        assert_eq!(decoded[1].num_rows(), 0);
        assert_eq!(decoded[2], batch(3));
        // A slice encodes as its rows only.
        let sliced = batch(10).slice(3, 4);
        let raw = unframe_pages(&frame_pages(&[Page::new(sliced.clone())]).unwrap()).unwrap();
        assert_eq!(Page::decode(&raw[0]).unwrap(), vec![sliced]);
    }

    /// No column is copied to be realigned, decimals (16-byte values) included, and a
    /// page's arrays hold that page's bytes only, whatever the chunks the body came in.
    #[test]
    fn decoded_columns_point_into_their_page() {
        let pages: Vec<Page> = [1000, 7, 3, 250].into_iter().map(|n| Page::new(batch(n))).collect();
        let body = frame_pages(&pages).unwrap();
        let mut assembler = PageAssembler::new(body.len());
        for chunk in body.chunks(7) {
            assembler.push(chunk).unwrap();
        }
        let raw = assembler.finish().unwrap();
        assert_eq!(raw.len(), pages.len());
        for (page, want) in raw.iter().zip(&pages) {
            let range = page.as_ptr() as usize..page.as_ptr() as usize + page.len();
            let decoded = Page::decode(page).unwrap();
            assert_eq!(&decoded[0], want.batch());
            for (c, column) in decoded[0].columns().iter().enumerate() {
                for b in column.to_data().buffers() {
                    assert!(range.contains(&(b.as_ptr() as usize)), "column {c} was copied out of its page");
                    assert!(
                        b.capacity() < page.len() + 64,
                        "column {c} holds {} B of a {} B page",
                        b.capacity(),
                        page.len()
                    );
                }
            }
        }
    }

    #[test]
    fn truncated_bodies_are_errors() {
        let body = frame_pages(&[Page::new(batch(5))]).unwrap();
        assert!(unframe_pages(&body[..body.len() - 1]).is_err());
        assert!(unframe_pages(&[1, 0, 0, 0]).is_err());
        // A length far beyond the body allocates no more than the body ahead of it.
        assert!(unframe_pages(&u64::MAX.to_le_bytes()).is_err());
        assert!(unframe_pages(&[]).unwrap().is_empty());
    }
}
