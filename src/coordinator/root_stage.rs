//! `SpooledRootStage`: the coordinator's root fragment in fault-tolerant mode. The
//! `FaultTolerantQueryScheduler` runs it once every other stage has succeeded, with
//! the locations of its inputs' spooled outputs, and may run it again when an input
//! had to be recomputed.
//!
//! A second run is only possible while no row has reached the client, so the root
//! holds back its first rows (up to `HOLD_BACK_BYTES`) until its inputs are read to
//! the end: most results are small, and for those a broken input never costs the
//! query. A larger result starts streaming and is no longer retryable.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use datafusion::execution::TaskContext;
use datafusion::physical_plan::ExecutionPlan;
use futures::future::{BoxFuture, FutureExt};
use futures::StreamExt;
use parking_lot::Mutex;

use super::query::QueryExecution;
use super::query_errors::root_error;
use crate::exchange::client::{ExchangeClient, ExchangeConfig};
use crate::exchange::remote_source::{attach_resolver, SourceLocations, SourceResolver};
use crate::protocol::{FailureReason, SourceUpdate};
use crate::scheduling::fault_tolerant::{RootFailure, RootProgress, RootStage};
use crate::scheduling::state_machine::QueryState;

/// Rows the root keeps back so that a failed read can still be retried.
pub const HOLD_BACK_BYTES: usize = 64 << 20;

pub struct SpooledRootStage {
    query: Arc<QueryExecution>,
    plan: Arc<dyn ExecutionPlan>,
    task_ctx: Arc<TaskContext>,
    http: reqwest::Client,
    exchange: ExchangeConfig,
    /// EXPLAIN ANALYZE: count rows, deliver none.
    analyze: bool,
    /// Rows of the run that succeeded.
    rows: Arc<AtomicU64>,
    /// The current run's `RootProgress`.
    progress: Arc<Mutex<RootProgress>>,
}

impl SpooledRootStage {
    pub fn new(
        query: Arc<QueryExecution>,
        plan: Arc<dyn ExecutionPlan>,
        task_ctx: Arc<TaskContext>,
        http: reqwest::Client,
        exchange: ExchangeConfig,
        analyze: bool,
    ) -> Self {
        let (rows, progress) = (Arc::new(AtomicU64::new(0)), Arc::new(Mutex::new(RootProgress::Reading)));
        SpooledRootStage { query, plan, task_ctx, http, exchange, analyze, rows, progress }
    }

    /// Rows the root produced in the run that succeeded.
    pub fn rows(&self) -> u64 {
        self.rows.load(Ordering::Relaxed)
    }
}

impl RootStage for SpooledRootStage {
    fn progress(&self) -> RootProgress {
        *self.progress.lock()
    }

    fn run(&self, sources: Vec<SourceUpdate>) -> BoxFuture<'static, Result<(), RootFailure>> {
        let q = self.query.clone();
        let client = ExchangeClient::new(self.http.clone(), self.exchange.clone(), q.root_input.clone());
        let locations = Arc::new(SourceLocations::new(0, client));
        locations.add(sources);
        let resolver: Arc<dyn SourceResolver> = locations;
        let plan = attach_resolver(self.plan.clone(), &resolver);
        let (task_ctx, analyze, rows_out, progress) =
            (self.task_ctx.clone(), self.analyze, self.rows.clone(), self.progress.clone());
        *progress.lock() = RootProgress::Reading;
        async move {
            let fatal = |e: &datafusion::error::DataFusionError| RootFailure::Fatal(root_error(e));
            let plan = plan.map_err(|e| fatal(&e))?;
            let mut stream = crate::runtime::execute_on_compute(plan, task_ctx);
            q.transition(QueryState::Running);
            let mut held = Vec::new();
            let mut held_bytes = 0usize;
            let mut streaming = false;
            let mut rows = 0u64;
            while let Some(batch) = stream.next().await {
                let batch = match batch {
                    Ok(b) => b,
                    Err(e) => {
                        let failure = crate::failure::failure_from_error(&e);
                        return Err(match (failure.reason, streaming) {
                            (FailureReason::Fetch { upstream, url }, false) => {
                                RootFailure::Fetch { upstream, url, message: failure.message }
                            }
                            _ => fatal(&e),
                        });
                    }
                };
                rows += batch.num_rows() as u64;
                if analyze {
                    continue;
                }
                if !streaming {
                    held_bytes += batch.get_array_memory_size();
                    held.push(batch);
                    if held_bytes < HOLD_BACK_BYTES {
                        continue;
                    }
                    streaming = true;
                    *progress.lock() = RootProgress::Streaming;
                    for b in std::mem::take(&mut held) {
                        if !q.emit(b).await {
                            return Ok(());
                        }
                    }
                    continue;
                }
                if !q.emit(batch).await {
                    return Ok(());
                }
            }
            if !streaming {
                *progress.lock() = RootProgress::InputsRead;
            }
            if !analyze {
                q.mark_output_complete();
            }
            for b in held {
                if !q.emit(b).await {
                    break;
                }
            }
            rows_out.store(rows, Ordering::Relaxed);
            Ok(())
        }
        .boxed()
    }
}
