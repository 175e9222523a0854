//! `OutputBuffer`: the pages a worker task has produced and not yet had acknowledged,
//! one client buffer per consumer (buffer id = consumer partition, consumer task, or
//! fragment partition, by `OutputBufferSpec`). The worker's task runner enqueues; the
//! results endpoint reads by token and acknowledges.
//!
//! The state is a plain struct with no I/O and no async (`OutputBufferState`), driven
//! by `enqueue` / `get` / `acknowledge` / `destroy` / `set_no_more_pages`, so the paging
//! and accounting rules are unit-tested directly. `OutputBuffer` wraps it with a lock
//! and `Notify`s for the producer waiting on space and consumers long-polling.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use tokio::sync::Notify;

use super::page::Page;
use crate::protocol::BufferInfo;

#[derive(Debug, Default)]
struct ClientBuffer {
    /// Pages from token `first_token` on.
    pages: VecDeque<Page>,
    first_token: u64,
    bytes: u64,
    destroyed: bool,
    pages_sent: u64,
    /// The consumer has been told the buffer is complete.
    completion_sent: bool,
}

/// What a read of one buffer returns.
#[derive(Debug, Clone)]
pub struct BufferResult {
    pub pages: Vec<Page>,
    pub next_token: u64,
    /// The buffer has no more pages and will never get any.
    pub complete: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BufferError {
    #[error("unknown output buffer {0}")]
    UnknownBuffer(usize),
    #[error("token {token} was already acknowledged (buffer {buffer} starts at {first})")]
    TokenAcknowledged { buffer: usize, token: u64, first: u64 },
    #[error("token {token} is ahead of buffer {buffer} (next token {next})")]
    TokenAhead { buffer: usize, token: u64, next: u64 },
}

/// The buffer state machine: paging, acknowledgement and byte accounting.
#[derive(Debug)]
pub struct OutputBufferState {
    buffers: Vec<ClientBuffer>,
    no_more_pages: bool,
    total_bytes: u64,
    max_bytes: u64,
}

impl OutputBufferState {
    pub fn new(buffer_count: usize, max_bytes: u64) -> Self {
        OutputBufferState {
            buffers: (0..buffer_count).map(|_| ClientBuffer::default()).collect(),
            no_more_pages: false,
            total_bytes: 0,
            max_bytes: max_bytes.max(1),
        }
    }

    pub fn buffer_count(&self) -> usize {
        self.buffers.len()
    }

    /// Adds a page to a buffer; a destroyed buffer drops it, since its consumer is gone.
    pub fn enqueue(&mut self, buffer: usize, page: Page) -> Result<(), BufferError> {
        let b = self.buffers.get_mut(buffer).ok_or(BufferError::UnknownBuffer(buffer))?;
        if b.destroyed {
            return Ok(());
        }
        let len = page.len() as u64;
        b.bytes += len;
        b.pages.push_back(page);
        self.total_bytes += len;
        Ok(())
    }

    /// True while the producer must wait for consumers to acknowledge pages.
    pub fn is_full(&self) -> bool {
        self.total_bytes >= self.max_bytes
    }

    pub fn total_bytes(&self) -> u64 {
        self.total_bytes
    }

    pub fn set_no_more_pages(&mut self) {
        self.no_more_pages = true;
    }

    /// Pages from `token`, up to `max_bytes` (always at least one page if any).
    /// Reading token `t` acknowledges everything before `t`, as a consumer only asks
    /// for `t` once it holds the pages before it.
    pub fn get(&mut self, buffer: usize, token: u64, max_bytes: u64) -> Result<BufferResult, BufferError> {
        self.acknowledge(buffer, token)?;
        let no_more = self.no_more_pages;
        let b = &mut self.buffers[buffer];
        let next = b.first_token + b.pages.len() as u64;
        if token > next {
            return Err(BufferError::TokenAhead { buffer, token, next });
        }
        let mut pages = Vec::new();
        let mut size = 0u64;
        for p in b.pages.iter() {
            if !pages.is_empty() && size + p.len() as u64 > max_bytes {
                break;
            }
            size += p.len() as u64;
            pages.push(p.clone());
        }
        let next_token = token + pages.len() as u64;
        b.pages_sent = b.pages_sent.max(next_token);
        let complete = b.destroyed || (no_more && next_token == next);
        b.completion_sent |= complete;
        Ok(BufferResult { pages, next_token, complete })
    }

    /// Drops pages before `token`. Acknowledging an old token again is harmless.
    pub fn acknowledge(&mut self, buffer: usize, token: u64) -> Result<(), BufferError> {
        let b = self.buffers.get_mut(buffer).ok_or(BufferError::UnknownBuffer(buffer))?;
        if token < b.first_token {
            return Ok(());
        }
        let next = b.first_token + b.pages.len() as u64;
        if token > next {
            return Err(BufferError::TokenAhead { buffer, token, next });
        }
        while b.first_token < token {
            let p = b.pages.pop_front().expect("page below next token");
            b.bytes -= p.len() as u64;
            self.total_bytes -= p.len() as u64;
            b.first_token += 1;
        }
        Ok(())
    }

    /// The consumer is done (or gone): free the buffer's pages and drop later ones.
    pub fn destroy(&mut self, buffer: usize) -> Result<(), BufferError> {
        let b = self.buffers.get_mut(buffer).ok_or(BufferError::UnknownBuffer(buffer))?;
        self.total_bytes -= b.bytes;
        b.first_token += b.pages.len() as u64;
        b.pages.clear();
        b.bytes = 0;
        b.destroyed = true;
        Ok(())
    }

    /// Frees everything, for an aborted or removed task.
    pub fn destroy_all(&mut self) {
        for i in 0..self.buffers.len() {
            let _ = self.destroy(i);
        }
        self.no_more_pages = true;
    }

    /// Every page was produced and every buffer drained or destroyed.
    pub fn is_finished(&self) -> bool {
        self.no_more_pages && self.buffers.iter().all(|b| b.destroyed || (b.pages.is_empty() && b.completion_sent))
    }

    pub fn info(&self) -> Vec<BufferInfo> {
        self.buffers
            .iter()
            .enumerate()
            .map(|(i, b)| BufferInfo {
                buffer_id: i,
                buffered_pages: b.pages.len(),
                buffered_bytes: b.bytes,
                pages_sent: b.pages_sent,
                finished: b.destroyed || (self.no_more_pages && b.pages.is_empty() && b.completion_sent),
            })
            .collect()
    }
}

/// The shared, awaitable wrapper a task and its results endpoint use.
#[derive(Debug)]
pub struct OutputBuffer {
    state: Mutex<OutputBufferState>,
    /// Woken when pages are acknowledged or destroyed (the producer waits on it).
    space: Notify,
    /// Woken when pages are added or the buffer completes (readers wait on it).
    data: Notify,
    /// Woken when the buffer may have become finished.
    changed: Arc<Notify>,
}

impl OutputBuffer {
    pub fn new(buffer_count: usize, max_bytes: u64, changed: Arc<Notify>) -> Self {
        OutputBuffer {
            state: Mutex::new(OutputBufferState::new(buffer_count, max_bytes)),
            space: Notify::new(),
            data: Notify::new(),
            changed,
        }
    }

    /// Waits until there is room, then enqueues. Waiting here is the backpressure that
    /// stops a producer from materializing its whole output.
    pub async fn enqueue(&self, buffer: usize, page: Page) -> Result<(), BufferError> {
        loop {
            let notified = self.space.notified();
            {
                let mut s = self.state.lock();
                if !s.is_full() {
                    s.enqueue(buffer, page)?;
                    break;
                }
            }
            self.changed.notify_waiters();
            notified.await;
        }
        self.data.notify_waiters();
        Ok(())
    }

    /// Enqueues the same page into every buffer (broadcast), waiting for room once.
    pub async fn enqueue_all(&self, page: Page) -> Result<(), BufferError> {
        loop {
            let notified = self.space.notified();
            {
                let mut s = self.state.lock();
                if !s.is_full() {
                    for b in 0..s.buffer_count() {
                        s.enqueue(b, page.clone())?;
                    }
                    break;
                }
            }
            self.changed.notify_waiters();
            notified.await;
        }
        self.data.notify_waiters();
        Ok(())
    }

    pub fn set_no_more_pages(&self) {
        self.state.lock().set_no_more_pages();
        self.data.notify_waiters();
        self.changed.notify_waiters();
    }

    /// Long poll: waits up to `max_wait` for pages at `token` or completion.
    pub async fn get(
        &self,
        buffer: usize,
        token: u64,
        max_bytes: u64,
        max_wait: Duration,
    ) -> Result<BufferResult, BufferError> {
        let deadline = tokio::time::Instant::now() + max_wait;
        loop {
            let notified = self.data.notified();
            let result = {
                let mut s = self.state.lock();
                s.get(buffer, token, max_bytes)?
            };
            self.space.notify_waiters();
            self.changed.notify_waiters();
            if !result.pages.is_empty() || result.complete {
                return Ok(result);
            }
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                return Ok(result);
            }
        }
    }

    pub fn acknowledge(&self, buffer: usize, token: u64) -> Result<(), BufferError> {
        self.state.lock().acknowledge(buffer, token)?;
        self.space.notify_waiters();
        self.changed.notify_waiters();
        Ok(())
    }

    pub fn destroy(&self, buffer: usize) -> Result<(), BufferError> {
        self.state.lock().destroy(buffer)?;
        self.space.notify_waiters();
        self.data.notify_waiters();
        self.changed.notify_waiters();
        Ok(())
    }

    pub fn destroy_all(&self) {
        self.state.lock().destroy_all();
        self.space.notify_waiters();
        self.data.notify_waiters();
        self.changed.notify_waiters();
    }

    pub fn is_full(&self) -> bool {
        self.state.lock().is_full()
    }

    pub fn is_finished(&self) -> bool {
        self.state.lock().is_finished()
    }

    pub fn total_bytes(&self) -> u64 {
        self.state.lock().total_bytes()
    }

    pub fn info(&self) -> Vec<BufferInfo> {
        self.state.lock().info()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn page(n: usize) -> Page {
        Page::counting(n)
    }

    #[test]
    fn get_returns_pages_from_token_and_repeats_until_acknowledged() {
        let mut s = OutputBufferState::new(2, 1000);
        s.enqueue(0, page(10)).unwrap();
        s.enqueue(0, page(20)).unwrap();
        s.enqueue(1, page(5)).unwrap();
        let r = s.get(0, 0, 1000).unwrap();
        assert_eq!(r.pages.len(), 2);
        assert_eq!(r.next_token, 2);
        assert!(!r.complete);
        // A retried request for the same token gets the same pages.
        let again = s.get(0, 0, 1000).unwrap();
        assert_eq!(again.pages.len(), 2);
        assert_eq!(s.total_bytes(), 35);
        // Asking for token 2 acknowledges tokens 0 and 1.
        let r = s.get(0, 2, 1000).unwrap();
        assert!(r.pages.is_empty());
        assert_eq!(s.total_bytes(), 5);
        // Old tokens are acknowledged already; asking again is not an error.
        assert!(s.acknowledge(0, 1).is_ok());
    }

    #[test]
    fn max_bytes_limits_a_response_but_never_below_one_page() {
        let mut s = OutputBufferState::new(1, 1000);
        for _ in 0..3 {
            s.enqueue(0, page(100)).unwrap();
        }
        let r = s.get(0, 0, 150).unwrap();
        assert_eq!(r.pages.len(), 1);
        let r = s.get(0, 0, 10).unwrap();
        assert_eq!(r.pages.len(), 1);
        let r = s.get(0, 1, 250).unwrap();
        assert_eq!(r.pages.len(), 2);
        assert_eq!(r.next_token, 3);
    }

    #[test]
    fn fullness_tracks_unacknowledged_bytes() {
        let mut s = OutputBufferState::new(1, 100);
        s.enqueue(0, page(60)).unwrap();
        assert!(!s.is_full());
        s.enqueue(0, page(60)).unwrap();
        assert!(s.is_full());
        s.acknowledge(0, 1).unwrap();
        assert!(!s.is_full());
        assert_eq!(s.total_bytes(), 60);
    }

    #[test]
    fn completion_needs_no_more_pages_and_a_drained_buffer() {
        let mut s = OutputBufferState::new(2, 100);
        s.enqueue(0, page(1)).unwrap();
        s.set_no_more_pages();
        assert!(!s.get(0, 0, 100).unwrap().complete || s.get(0, 0, 100).unwrap().next_token == 1);
        let r = s.get(0, 1, 100).unwrap();
        assert!(r.complete);
        assert!(!s.is_finished(), "buffer 1 not read yet");
        assert!(s.get(1, 0, 100).unwrap().complete);
        assert!(s.is_finished());
    }

    #[test]
    fn destroy_frees_bytes_and_drops_later_pages() {
        let mut s = OutputBufferState::new(2, 100);
        s.enqueue(0, page(30)).unwrap();
        s.enqueue(1, page(30)).unwrap();
        s.destroy(0).unwrap();
        assert_eq!(s.total_bytes(), 30);
        s.enqueue(0, page(30)).unwrap();
        assert_eq!(s.total_bytes(), 30);
        assert!(s.get(0, 0, 100).unwrap().complete);
        s.destroy_all();
        assert_eq!(s.total_bytes(), 0);
        assert!(s.is_finished());
    }

    #[test]
    fn bad_tokens_and_buffers_are_errors() {
        let mut s = OutputBufferState::new(1, 100);
        s.enqueue(0, page(1)).unwrap();
        assert_eq!(s.get(3, 0, 10).unwrap_err(), BufferError::UnknownBuffer(3));
        assert!(matches!(s.get(0, 5, 10), Err(BufferError::TokenAhead { .. })));
    }

    #[tokio::test]
    async fn a_full_buffer_blocks_the_producer_until_acknowledged() {
        let buf = Arc::new(OutputBuffer::new(1, 100, Arc::new(Notify::new())));
        buf.enqueue(0, page(100)).await.unwrap();
        let b2 = buf.clone();
        let producer = tokio::spawn(async move { b2.enqueue(0, page(10)).await });
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(!producer.is_finished(), "producer must wait while the buffer is full");
        let r = buf.get(0, 0, 1000, Duration::from_millis(10)).await.unwrap();
        assert_eq!(r.next_token, 1);
        buf.acknowledge(0, 1).unwrap();
        tokio::time::timeout(Duration::from_secs(5), producer).await.unwrap().unwrap().unwrap();
        assert_eq!(buf.total_bytes(), 10);
    }
}
