//! The page codec of the exchange: a page is one Arrow IPC stream (schema, one batch,
//! end marker), and a results response is a run of length-prefixed pages. The producer
//! task encodes once when it enqueues; the `ExchangeClient` decodes on arrival.
//!
//! Each page carries its own schema so that any page can be decoded alone, whichever
//! token a consumer resumes from; the schema is small next to a page of rows.
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

/// An encoded page and the number of rows in it.
#[derive(Debug, Clone)]
pub struct Page {
    pub bytes: Bytes,
    pub rows: usize,
}

impl Page {
    pub fn encode(batch: &RecordBatch) -> Result<Page, ArrowError> {
        let mut out = Vec::with_capacity(batch.get_array_memory_size() / 2 + 1024);
        {
            let mut writer = StreamWriter::try_new(&mut out, &batch.schema())?;
            writer.write(batch)?;
            writer.finish()?;
        }
        Ok(Page { bytes: Bytes::from(out), rows: batch.num_rows() })
    }

    /// The batches of a page, whose arrays point into `bytes` (no copy where the
    /// buffers are aligned).
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

    pub fn len(&self) -> usize {
        self.bytes.len()
    }

    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }
}

/// Frames pages as `[u64 little-endian length][page]...` for one response body.
pub fn frame_pages(pages: &[Page]) -> Bytes {
    let total: usize = pages.iter().map(|p| p.len() + FRAME_HEADER).sum();
    let mut out = BytesMut::with_capacity(total);
    for p in pages {
        out.put_u64_le(p.len() as u64);
        out.put_slice(&p.bytes);
    }
    out.freeze()
}

/// Splits a response body back into pages; a truncated body is an error, never a
/// silently shorter result.
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
        let pages =
            vec![Page::encode(&batch(10)).unwrap(), Page::encode(&batch(0)).unwrap(), Page::encode(&batch(3)).unwrap()];
        assert_eq!(pages[0].rows, 10);
        let body = frame_pages(&pages);
        let raw = unframe_pages(body).unwrap();
        assert_eq!(raw.len(), 3);
        let decoded: Vec<RecordBatch> = raw.iter().flat_map(|b| Page::decode(b).unwrap()).collect();
        assert_eq!(decoded[0], batch(10));
        assert_eq!(decoded[1].num_rows(), 0);
        assert_eq!(decoded[2], batch(3));
    }

    #[test]
    fn decoded_columns_point_into_the_received_bytes() {
        let body = frame_pages(&[Page::encode(&batch(1000)).unwrap(), Page::encode(&batch(7)).unwrap()]);
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
        let body = frame_pages(&[Page::encode(&batch(5)).unwrap()]);
        let cut = body.slice(0..body.len() - 1);
        assert!(unframe_pages(cut).is_err());
        assert!(unframe_pages(Bytes::from_static(&[1, 0, 0, 0])).is_err());
        assert!(unframe_pages(Bytes::new()).unwrap().is_empty());
    }
}
