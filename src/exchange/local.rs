//! In-process results: a consumer whose producer task runs in this very process (on
//! the same worker, or on another worker of `flotilla local`, or read by the
//! coordinator of `flotilla local`) takes the producer's pages by a call instead of an
//! HTTP request. Workers register in their `ExchangeConfig`'s `LocalExchanges` under
//! the URL they announce; `ExchangeClient` looks a source's URL up there before it
//! sends a request. Whoever starts nodes in one process hands them one registry
//! (`flotilla local` does); a node started alone has its own.
//!
//! The pages arrive as the producer's batches: no encoding into a body, no kernel
//! copies on both sides, no reassembling and decoding, which together were a third of
//! a join-heavy query's worker time at sf1. Tokens, acknowledgements and deletes mean
//! what they mean over HTTP.

use std::collections::HashMap;
use std::sync::{Arc, Weak};
use std::time::Duration;

use parking_lot::RwLock;

use super::output_buffer::BufferResult;
use crate::protocol::TaskId;

/// What a results request to a task in this process answers.
pub enum LocalFetch {
    Pages(BufferResult),
    /// What an HTTP client error or a failed task's answer would carry: final.
    Failed {
        code: crate::error_code::Named<crate::error_code::ApiCode>,
        /// A failed task's own error code.
        cause: Option<crate::error_code::FailureCode>,
        message: String,
    },
    /// What a server error would be: retried within the exchange's error budget.
    Transient(String),
}

/// A worker's results endpoints, callable in-process.
#[async_trait::async_trait]
pub trait LocalResults: Send + Sync {
    async fn results(&self, task: &TaskId, buffer: usize, token: u64, max_bytes: u64, max_wait: Duration)
        -> LocalFetch;

    /// The reader is done with `buffer`; errors are ignored, as a failed HTTP delete is.
    fn destroy_buffer(&self, task: &TaskId, buffer: usize);
}

/// The workers reachable in-process, by the URL they announce. Clones share one
/// registry.
#[derive(Clone, Default)]
pub struct LocalExchanges(Arc<RwLock<HashMap<String, Weak<dyn LocalResults>>>>);

impl LocalExchanges {
    /// Makes the worker announced as `url` reachable in-process.
    pub fn register(&self, url: &str, worker: Weak<dyn LocalResults>) {
        self.0.write().insert(url.to_string(), worker);
    }

    /// A stopped worker's sources go back to HTTP (and find it gone).
    pub fn unregister(&self, url: &str) {
        self.0.write().remove(url);
    }

    /// The worker at `url`, when it runs in this process.
    pub fn lookup(&self, url: &str) -> Option<Arc<dyn LocalResults>> {
        self.0.read().get(url).and_then(Weak::upgrade)
    }
}

impl std::fmt::Debug for LocalExchanges {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.0.read().keys()).finish()
    }
}
