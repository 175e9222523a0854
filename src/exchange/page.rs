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

use std::sync::Arc;

use bytes::{Buf, BufMut, Bytes, BytesMut};
use datafusion::arrow::array::{ArrayData, RecordBatch};
use datafusion::arrow::buffer::{Buffer, MutableBuffer};
use datafusion::arrow::datatypes::DataType;
use datafusion::arrow::error::ArrowError;
use datafusion::arrow::ipc::writer::StreamWriter;
use datafusion::arrow::ipc::{self, reader::FileDecoder};

use super::validate::check_batch;

/// Bytes before each page in a response: its length, u64 little-endian.
const FRAME_HEADER: usize = 8;

/// A batch waiting in an output buffer, and the bytes it counts there.
#[derive(Debug, Clone)]
pub struct Page {
    batch: RecordBatch,
    size: usize,
    data_bytes: usize,
    /// Room for its encoding in a response body (`encoded_size_guess`).
    encoded_guess: usize,
}

impl Page {
    /// The page of `batch`. It counts the memory the batch holds, which is what the
    /// buffer's byte limit is there to bound.
    pub fn new(batch: RecordBatch) -> Page {
        let size = batch.get_array_memory_size();
        let columns: Vec<ArrayData> = batch.columns().iter().map(|c| c.to_data()).collect();
        let data_bytes = columns.iter().map(column_bytes).sum();
        let encoded_guess = encoded_size_guess(&columns, data_bytes);
        Page { batch, size, data_bytes, encoded_guess }
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
        Page { batch: RecordBatch::new_empty(schema), size, data_bytes: size, encoded_guess: size }
    }

    /// The batches of one encoded page, whose arrays point into `bytes` (no copy where
    /// the buffers are aligned). Every batch is checked as Arrow's reader would check
    /// it (`validate::check_batch`) before it is handed on: bytes from the network are
    /// not trusted.
    pub fn decode(bytes: &Buffer) -> Result<Vec<RecordBatch>, ArrowError> {
        // Building arrays over unchecked bytes can trip one of Arrow's bounds
        // assertions (a panic, not undefined behaviour): that is a bad page too.
        crate::util::catch_quietly(|| decode_stream(bytes))
            .unwrap_or_else(|| Err(ArrowError::IpcError("malformed page".to_string())))
    }
}

/// Walks the messages of one IPC stream (schema, dictionaries, batches, end marker).
/// Arrow's `StreamDecoder` would check every batch its own way whatever it is told;
/// its `FileDecoder` can leave that to `check_batch`, given where each message lies.
fn decode_stream(bytes: &Buffer) -> Result<Vec<RecordBatch>, ArrowError> {
    let malformed = |what: &str| ArrowError::IpcError(format!("malformed page: {what}"));
    let word = |at: usize| -> Result<i32, ArrowError> {
        let b = bytes.get(at..at + 4).ok_or_else(|| malformed("truncated message header"))?;
        Ok(i32::from_le_bytes(b.try_into().expect("4 bytes")))
    };
    let (mut at, mut decoder, mut out) = (0usize, None::<FileDecoder>, Vec::new());
    while at < bytes.len() {
        // `[0xFFFFFFFF] <metadata length> <metadata> <body>`; a zero length ends it.
        let (prefix, meta) = match word(at)? {
            -1 => (8, word(at + 4)?),
            len => (4, len),
        };
        if meta == 0 {
            break;
        }
        let meta = usize::try_from(meta).map_err(|_| malformed("negative metadata length"))?;
        let header = bytes.get(at + prefix..at + prefix + meta).ok_or_else(|| malformed("truncated metadata"))?;
        let message = ipc::root_as_message(header).map_err(|e| malformed(&e.to_string()))?;
        let body = usize::try_from(message.bodyLength()).map_err(|_| malformed("negative body length"))?;
        let end = (at + prefix + meta).checked_add(body).filter(|e| *e <= bytes.len());
        let end = end.ok_or_else(|| malformed("truncated body"))?;
        let block = ipc::Block::new(0, (prefix + meta) as i32, body as i64);
        let slice = bytes.slice_with_length(at, end - at);
        match (message.header_type(), &mut decoder) {
            (ipc::MessageHeader::Schema, None) => {
                let schema = message.header_as_schema().ok_or_else(|| malformed("schema"))?;
                let schema = Arc::new(ipc::convert::fb_to_schema(schema));
                // SAFETY: every batch is checked in full by `check_batch` below before
                // anything reads its values.
                decoder = Some(unsafe { FileDecoder::new(schema, message.version()).with_skip_validation(true) });
            }
            (ipc::MessageHeader::DictionaryBatch, Some(d)) => d.read_dictionary(&block, &slice)?,
            (ipc::MessageHeader::RecordBatch, Some(d)) => {
                if let Some(batch) = d.read_record_batch(&block, &slice)? {
                    check_batch(&batch)?;
                    out.push(batch);
                }
            }
            (kind, _) => return Err(malformed(&format!("unexpected {kind:?} message"))),
        }
        at = end;
    }
    Ok(out)
}

/// Bytes of `batch`'s values, as `Page::data_bytes` counts them.
pub fn data_bytes_of(batch: &RecordBatch) -> usize {
    batch.columns().iter().map(|c| column_bytes(&c.to_data())).sum()
}

/// A column's bytes as Arrow IPC writes them. Arrow's slice size leaves out the data
/// buffers of string and binary views (the strings longer than 12 bytes), which the
/// IPC writer sends whole.
fn column_bytes(data: &ArrayData) -> usize {
    let slice = data.get_slice_memory_size().unwrap_or_else(|_| data.get_array_memory_size());
    let variadic = match data.data_type() {
        DataType::Utf8View | DataType::BinaryView => data.buffers()[1..].iter().map(|b| b.len()).sum(),
        _ => 0,
    };
    slice + variadic
}

/// Room for one page's encoding: its bytes, the IPC writer's padding of each buffer
/// to 64 bytes, and the schema and message headers. A short guess costs a copy of
/// the whole body when it grows.
fn encoded_size_guess(columns: &[ArrayData], data_bytes: usize) -> usize {
    let buffers: usize = columns.iter().map(buffer_count).sum();
    FRAME_HEADER + data_bytes + 64 * buffers + 1024 + 256 * columns.len()
}

fn buffer_count(data: &ArrayData) -> usize {
    1 + data.buffers().len() + data.child_data().iter().map(buffer_count).sum::<usize>()
}

/// Encodes pages into one response body, `[u64 little-endian length][IPC stream]...`.
pub fn frame_pages(pages: &[Page]) -> Result<Bytes, ArrowError> {
    frame_pages_after(&[], pages)
}

/// `prefix`, then the pages framed as [`frame_pages`] frames them, in one buffer (a
/// statement page puts its JSON document first).
pub fn frame_pages_after(prefix: &[u8], pages: &[Page]) -> Result<Bytes, ArrowError> {
    // A page encodes to about its rows' bytes (not the memory its batch holds, which
    // can be far more).
    let guess: usize = pages.iter().map(|p| p.encoded_guess).sum();
    let mut writer = BytesMut::with_capacity(prefix.len() + guess).writer();
    writer.get_mut().extend_from_slice(prefix);
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

/// A whole body split back into its encoded pages ([`PageAssembler`] in one go).
pub fn unframe_pages(body: &[u8]) -> Result<Vec<Buffer>, String> {
    let mut assembler = PageAssembler::new(body.len());
    assembler.push(body)?;
    assembler.finish()
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

    fn views(n: usize) -> RecordBatch {
        use datafusion::arrow::array::StringViewArray;
        let s =
            StringViewArray::from_iter((0..n).map(|i| (i % 5 != 0).then(|| format!("comment number {i}, ünïcödé"))));
        let k = Int64Array::from_iter_values(0..n as i64);
        RecordBatch::try_from_iter([("k", Arc::new(k) as _), ("s", Arc::new(s) as _)]).unwrap()
    }

    /// The encoding fits the room made for it (a short guess copies the body as it
    /// grows), and a page of string views counts its strings' bytes.
    #[test]
    fn view_pages_fit_their_guess_and_count_their_strings() {
        for n in [0, 1, 100, 5000] {
            let page = Page::new(views(n));
            let strings: usize =
                (0..n).filter(|i| i % 5 != 0).map(|i| format!("comment number {i}, ünïcödé").len()).sum();
            assert!(page.data_bytes() >= strings, "{} < {strings}", page.data_bytes());
            let body = frame_pages(std::slice::from_ref(&page)).unwrap();
            assert!(body.len() <= page.encoded_guess, "{} > {}", body.len(), page.encoded_guess);
        }
    }

    /// A page whose bytes were changed anywhere decodes to an error or to batches
    /// Arrow's own full validation accepts; it never panics past `decode`.
    #[test]
    fn tampered_pages_decode_to_errors_or_valid_batches() {
        let body = frame_pages(&[Page::new(views(40)), Page::new(batch(30))]).unwrap();
        let clean = unframe_pages(&body).unwrap();
        // A string's byte made invalid UTF-8 is caught.
        let mut bad = clean[0].to_vec();
        let at = bad.windows(14).position(|w| w == b"comment number").expect("a string in the page");
        bad[at + 3] = 0xff;
        assert!(Page::decode(&Buffer::from_vec(bad)).is_err());
        let (mut refused, mut accepted) = (0, 0);
        for page in &clean {
            for at in 0..page.len() {
                let mut bytes = page.to_vec();
                bytes[at] ^= 0x5a;
                match Page::decode(&Buffer::from_vec(bytes)) {
                    Err(_) => refused += 1,
                    Ok(batches) => {
                        accepted += 1;
                        for b in &batches {
                            for c in b.columns() {
                                c.to_data().validate_full().expect("accepted data is valid");
                            }
                        }
                    }
                }
            }
        }
        assert!(refused > 0 && accepted > 0, "{refused} refused, {accepted} accepted");
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
