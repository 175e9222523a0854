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
//! A page decodes into arrays over the received bytes, without a copy, when every
//! column's values lie at an address their type allows: Arrow copies a column to
//! realign it otherwise. Decimals need 16 bytes, and they are half of a `lineitem`
//! row. So each page's IPC stream (whose buffers the writer aligns to 64 bytes from
//! the stream's start) starts at a multiple of 64 bytes into the body, after its
//! length and the padding that gets it there, and the `ExchangeClient` gathers the
//! body into a 64-byte-aligned buffer.

use bytes::{Buf, BufMut, Bytes, BytesMut};
use datafusion::arrow::array::RecordBatch;
use datafusion::arrow::buffer::Buffer;
use datafusion::arrow::error::ArrowError;
use datafusion::arrow::ipc::reader::StreamDecoder;
use datafusion::arrow::ipc::writer::StreamWriter;

/// Bytes before each page in a response: its length and the number of zero bytes
/// between this header and the page, u64 little-endian each.
const FRAME_HEADER: usize = 16;
/// Each page starts this far into the body, or a multiple of it.
pub const PAGE_ALIGNMENT: usize = 64;

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

/// Encodes pages into one response body, `[u64 length][u64 padding][zeros][IPC
/// stream]...` (little-endian), each stream `PAGE_ALIGNMENT`-aligned from the start.
pub fn frame_pages(pages: &[Page]) -> Result<Bytes, ArrowError> {
    // A page encodes to about its rows' bytes (not the memory its batch holds, which
    // can be far more); the schema adds a little.
    let guess: usize = pages.iter().map(|p| p.data_bytes() + FRAME_HEADER + PAGE_ALIGNMENT + 1024).sum();
    let mut writer = BytesMut::with_capacity(guess).writer();
    for p in pages {
        let at = writer.get_ref().len();
        let padding = (PAGE_ALIGNMENT - (at + FRAME_HEADER) % PAGE_ALIGNMENT) % PAGE_ALIGNMENT;
        writer.get_mut().put_u64_le(0);
        writer.get_mut().put_u64_le(padding as u64);
        writer.get_mut().put_bytes(0, padding);
        let start = writer.get_ref().len();
        {
            let mut stream = StreamWriter::try_new(&mut writer, &p.batch.schema())?;
            stream.write(&p.batch)?;
            stream.finish()?;
        }
        let out = writer.get_mut();
        let len = (out.len() - start) as u64;
        out[at..at + 8].copy_from_slice(&len.to_le_bytes());
    }
    Ok(writer.into_inner().freeze())
}

/// Splits a response body back into encoded pages, slices of `body`; a truncated body
/// is an error, never a silently shorter result.
pub fn unframe_pages(body: &Buffer) -> Result<Vec<Buffer>, String> {
    let mut pages = Vec::new();
    let mut at = 0usize;
    while at < body.len() {
        let mut header: &[u8] = body
            .get(at..)
            .and_then(|b| b.get(..FRAME_HEADER))
            .ok_or_else(|| "truncated page frame header".to_string())?;
        let (len, padding) = (header.get_u64_le(), header.get_u64_le());
        at += FRAME_HEADER;
        let left = (body.len() - at) as u64;
        match padding.checked_add(len) {
            Some(need) if need <= left => {}
            _ => return Err(format!("truncated page: expected {padding} + {len} bytes, got {left}")),
        }
        at += padding as usize;
        pages.push(body.slice_with_length(at, len as usize));
        at += len as usize;
    }
    Ok(pages)
}

/// A body gathered from its chunks into one buffer aligned as Arrow's allocations are
/// (64 bytes), so that pages framed by `frame_pages` decode without realigning.
pub struct AlignedBody(datafusion::arrow::buffer::MutableBuffer);

impl AlignedBody {
    pub fn with_capacity(bytes: usize) -> Self {
        AlignedBody(datafusion::arrow::buffer::MutableBuffer::with_capacity(bytes))
    }

    pub fn extend(&mut self, chunk: &[u8]) {
        self.0.extend_from_slice(chunk);
    }

    pub fn finish(self) -> Buffer {
        self.0.into()
    }
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
        RecordBatch::try_new(
            schema,
            vec![
                Arc::new(Int64Array::from_iter_values(0..n)),
                Arc::new(StringArray::from_iter((0..n).map(|i| (i % 3 != 0).then(|| format!("v{i}"))))),
                Arc::new(
                    Decimal128Array::from_iter_values((0..n).map(|i| i as i128 * 101))
                        .with_precision_and_scale(15, 2)
                        .unwrap(),
                ),
            ],
        )
        .unwrap()
    }

    /// The body as the client gathers it.
    fn received(body: &[u8]) -> Buffer {
        let mut aligned = AlignedBody::with_capacity(body.len());
        aligned.extend(body);
        aligned.finish()
    }

    #[test]
    fn pages_round_trip_through_frames() {
        let pages = vec![Page::new(batch(10)), Page::new(batch(0)), Page::new(batch(3))];
        assert_eq!(pages[0].batch().num_rows(), 10);
        let body = frame_pages(&pages).unwrap();
        let raw = unframe_pages(&received(&body)).unwrap();
        assert_eq!(raw.len(), 3);
        let decoded: Vec<RecordBatch> = raw.iter().flat_map(|b| Page::decode(b).unwrap()).collect();
        assert_eq!(decoded[0], batch(10));
        assert_eq!(decoded[1].num_rows(), 0);
        assert_eq!(decoded[2], batch(3));
        // A slice encodes as its rows only.
        let sliced = batch(10).slice(3, 4);
        let raw = unframe_pages(&received(&frame_pages(&[Page::new(sliced.clone())]).unwrap())).unwrap();
        assert_eq!(Page::decode(&raw[0]).unwrap(), vec![sliced]);
    }

    /// No column is copied to be realigned, decimals (16-byte values) included, in any
    /// page of a body, whatever the lengths of the pages before it.
    #[test]
    fn decoded_columns_point_into_the_received_bytes() {
        let pages: Vec<Page> = [1000, 7, 3, 250].into_iter().map(|n| Page::new(batch(n))).collect();
        let body = received(&frame_pages(&pages).unwrap());
        let range = body.as_ptr() as usize..body.as_ptr() as usize + body.len();
        for raw in unframe_pages(&body).unwrap() {
            assert_eq!(raw.as_ptr() as usize % PAGE_ALIGNMENT, 0, "pages start aligned");
            let decoded = Page::decode(&raw).unwrap();
            for (c, column) in decoded[0].columns().iter().enumerate() {
                for b in column.to_data().buffers() {
                    assert!(range.contains(&(b.as_ptr() as usize)), "column {c} was copied out of the body");
                }
            }
        }
    }

    #[test]
    fn truncated_bodies_are_errors() {
        let body = frame_pages(&[Page::new(batch(5))]).unwrap();
        assert!(unframe_pages(&received(&body[..body.len() - 1])).is_err());
        assert!(unframe_pages(&received(&[1, 0, 0, 0])).is_err());
        // A padding that points past the end.
        let mut header = vec![0u8; 16];
        header[8..].copy_from_slice(&u64::MAX.to_le_bytes());
        assert!(unframe_pages(&received(&header)).is_err());
        assert!(unframe_pages(&received(&[])).unwrap().is_empty());
    }
}
