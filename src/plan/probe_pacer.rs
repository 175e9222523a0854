//! `ProbePacerExec`: the probe input of a join, handed over in slices small enough
//! that the join comes back for the next one within milliseconds, and with a yield
//! to the runtime every `YIELD_EVERY`. The worker puts one under every
//! `NestedLoopJoinExec` and `HashJoinExec` of a task's plan (`pace_joins`, called by
//! `worker::task`), and a `JoinPollClockExec` over the join; they own nothing but
//! their inputs' streams and the clock they share.
//!
//! Why: DataFusion's nested-loop join joins one probe batch with every buffered
//! build row inside a single `poll_next`, and moves on to the next probe batch
//! without returning when nothing matched. With 1.5 million build rows and a probe
//! batch of 8,192 rows that is 10^10 row pairs, tens of seconds, in one poll: a
//! cancelled task's abort, which lands only when the task yields, waited for minutes
//! while the join's filter rejected everything. A hash join on a key with few values
//! does the same (each probe row meets half a million build rows, and its output
//! coalescer returns nothing until a batch is full). A join's only contact with the
//! runtime inside such a poll is asking its probe input for more, so that is where
//! the pacing goes.
//!
//! The slice size adapts: it halves when the join took longer than `SLICE_TARGET`
//! over the last slice and doubles (up to the whole batch) when it took under a
//! quarter of it, so a join over a small build side still gets whole batches. The
//! join's own work is timed from the hand-over or from the join's latest poll,
//! whichever is later (the clock over the join records its polls), so time spent
//! by the operators above, between two polls, never shrinks the slices.

use std::fmt;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use crate::plan_node::plan_node;
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::error::Result;
use datafusion::execution::TaskContext;
use datafusion::physical_plan::{
    DisplayAs, DisplayFormatType, ExecutionPlan, RecordBatchStream, SendableRecordBatchStream,
};
use futures::{Stream, StreamExt};

/// How long the join should work on one slice.
const SLICE_TARGET: Duration = Duration::from_millis(5);
/// At most this long between two yields to the runtime while the join asks for slices.
const YIELD_EVERY: Duration = Duration::from_millis(50);

/// When each output partition of one join was last polled, shared by the join's
/// `JoinPollClockExec` (which records) and its probe's `ProbePacerExec` (which reads):
/// a join's output partition `p` reads its probe's partition `p`.
#[derive(Debug)]
pub struct JoinClock {
    base: Instant,
    /// Nanoseconds after `base`, by partition; 0 when not polled yet.
    polled: Vec<AtomicU64>,
}

impl JoinClock {
    fn new(partitions: usize) -> Arc<Self> {
        Arc::new(JoinClock { base: Instant::now(), polled: (0..partitions).map(|_| AtomicU64::new(0)).collect() })
    }

    fn record(&self, partition: usize, now: Instant) {
        if let Some(at) = self.polled.get(partition) {
            let nanos = now.saturating_duration_since(self.base).as_nanos().max(1);
            at.store(u64::try_from(nanos).unwrap_or(u64::MAX), Ordering::Relaxed);
        }
    }

    fn polled_at(&self, partition: usize) -> Option<Instant> {
        let nanos = self.polled.get(partition)?.load(Ordering::Relaxed);
        (nanos > 0).then(|| self.base + Duration::from_nanos(nanos))
    }
}

/// Passes its input on in adaptive slices (see the module's doc).
#[derive(Debug)]
pub struct ProbePacerExec {
    input: Arc<dyn ExecutionPlan>,
    clock: Option<Arc<JoinClock>>,
}

impl DisplayAs for ProbePacerExec {
    fn fmt_as(&self, _t: DisplayFormatType, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "ProbePacerExec")
    }
}

impl ExecutionPlan for ProbePacerExec {
    plan_node!(
        unary "ProbePacerExec",
        input: input,
        properties: input,
        rebuild: |this, child| ProbePacerExec { input: child, clock: this.clock.clone() }
    );

    fn execute(&self, partition: usize, context: Arc<TaskContext>) -> Result<SendableRecordBatchStream> {
        let input = self.input.execute(partition, context)?;
        Ok(Box::pin(PacedStream::new(input, self.clock.clone().map(|c| (c, partition)))))
    }
}

/// Records each poll of the join below it in the join's `JoinClock`; passes its
/// batches on untouched.
#[derive(Debug)]
pub struct JoinPollClockExec {
    join: Arc<dyn ExecutionPlan>,
    clock: Arc<JoinClock>,
}

impl DisplayAs for JoinPollClockExec {
    fn fmt_as(&self, _t: DisplayFormatType, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "JoinPollClockExec")
    }
}

impl ExecutionPlan for JoinPollClockExec {
    plan_node!(
        unary "JoinPollClockExec",
        input: join,
        properties: input,
        rebuild: |this, child| JoinPollClockExec { join: child, clock: this.clock.clone() }
    );

    fn execute(&self, partition: usize, context: Arc<TaskContext>) -> Result<SendableRecordBatchStream> {
        let join = self.join.execute(partition, context)?;
        let clock = self.clock.clone();
        let schema = join.schema();
        let polls = PollClockStream { input: join, clock, partition, schema };
        Ok(Box::pin(polls))
    }
}

struct PollClockStream {
    input: SendableRecordBatchStream,
    clock: Arc<JoinClock>,
    partition: usize,
    schema: SchemaRef,
}

impl Stream for PollClockStream {
    type Item = Result<RecordBatch>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.clock.record(self.partition, Instant::now());
        self.input.poll_next_unpin(cx)
    }
}

impl RecordBatchStream for PollClockStream {
    fn schema(&self) -> SchemaRef {
        self.schema.clone()
    }
}

/// Puts a pacer under the probe input of every nested-loop and hash join of `plan`,
/// and a poll clock over the join.
pub fn pace_joins(plan: Arc<dyn ExecutionPlan>) -> Result<Arc<dyn ExecutionPlan>> {
    use datafusion::common::tree_node::{Transformed, TreeNode};
    use datafusion::physical_plan::joins::{HashJoinExec, NestedLoopJoinExec};
    use datafusion::physical_plan::ExecutionPlanProperties;
    let paced = plan.transform_up(|node| {
        let any = node.as_ref() as &dyn std::any::Any;
        if !any.is::<NestedLoopJoinExec>() && !any.is::<HashJoinExec>() {
            return Ok(Transformed::no(node));
        }
        let children: Vec<Arc<dyn ExecutionPlan>> = node.children().into_iter().cloned().collect();
        let [build, probe] = children.as_slice() else { return Ok(Transformed::no(node)) };
        let partitions =
            node.output_partitioning().partition_count().max(probe.output_partitioning().partition_count());
        let clock = JoinClock::new(partitions);
        let probe = Arc::new(ProbePacerExec { input: probe.clone(), clock: Some(clock.clone()) });
        #[allow(deprecated)]
        let join = node.clone().with_new_children(vec![build.clone(), probe])?;
        Ok(Transformed::yes(Arc::new(JoinPollClockExec { join, clock }) as Arc<dyn ExecutionPlan>))
    })?;
    Ok(paced.data)
}

thread_local! {
    /// When a pacer last yielded on this thread. A poll runs on one thread, so the
    /// pacers of nested joins (a 100-way join has 100) see each other's yields: one
    /// yield a period per poll, not one per join in turn.
    static LAST_YIELD: std::cell::Cell<Option<Instant>> = const { std::cell::Cell::new(None) };
}

/// What the pacer does at each ask of the join, decided from the clock: a plain
/// struct, so that the adaptation is tested without a runtime.
#[derive(Debug)]
struct Pace {
    /// Rows of the next slice.
    slice: usize,
    /// When the last slice was handed over (the join has worked since).
    handed: Option<Instant>,
    last_yield: Instant,
    /// Whether a slice went out since this pacer's last yield. It yields again only
    /// after one has: with a yield per pacer per period, the re-poll after each
    /// yield went one join deeper before the next pacer's period was over too, and a
    /// 100-way join never handed a row on (it ran for minutes, and hung CI).
    progressed: bool,
}

impl Pace {
    fn new(now: Instant) -> Self {
        Pace { slice: 1, handed: None, last_yield: now, progressed: true }
    }

    /// Called when the join asks for more at `now`, having been polled last at
    /// `polled` (when known), a pacer of this thread having yielded last at
    /// `thread_yield`: whether to yield first.
    fn asked(
        &mut self,
        now: Instant,
        batch_rows: usize,
        polled: Option<Instant>,
        thread_yield: Option<Instant>,
    ) -> bool {
        if let Some(handed) = self.handed.take() {
            let began = polled.map_or(handed, |p| p.max(handed));
            let worked = now.saturating_duration_since(began);
            if worked > SLICE_TARGET {
                self.slice = (self.slice / 2).max(1);
            } else if worked < SLICE_TARGET / 4 {
                self.slice = self.slice.saturating_mul(2).min(batch_rows.max(1));
            }
        }
        let since = thread_yield.map_or(self.last_yield, |t| t.max(self.last_yield));
        if self.progressed && now.saturating_duration_since(since) >= YIELD_EVERY {
            self.last_yield = now;
            self.progressed = false;
            return true;
        }
        false
    }

    fn handed(&mut self, now: Instant) {
        self.handed = Some(now);
        self.progressed = true;
    }
}

struct PacedStream {
    input: SendableRecordBatchStream,
    /// The input batch being handed over, and the offset of its next slice.
    current: Option<(RecordBatch, usize)>,
    pace: Pace,
    /// The largest batch seen: the slice never grows past it.
    batch_rows: usize,
    /// The join's poll clock, and the partition this stream feeds.
    clock: Option<(Arc<JoinClock>, usize)>,
}

impl PacedStream {
    fn new(input: SendableRecordBatchStream, clock: Option<(Arc<JoinClock>, usize)>) -> Self {
        PacedStream { input, current: None, pace: Pace::new(Instant::now()), batch_rows: 1, clock }
    }

    fn next_slice(&mut self) -> Option<RecordBatch> {
        let (batch, offset) = self.current.as_mut()?;
        let len = self.pace.slice.min(batch.num_rows() - *offset);
        let slice = batch.slice(*offset, len);
        *offset += len;
        if *offset >= batch.num_rows() {
            self.current = None;
        }
        Some(slice)
    }
}

impl Stream for PacedStream {
    type Item = Result<RecordBatch>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = &mut *self;
        let polled = this.clock.as_ref().and_then(|(clock, partition)| clock.polled_at(*partition));
        let now = Instant::now();
        if this.pace.asked(now, this.batch_rows, polled, LAST_YIELD.get()) {
            LAST_YIELD.set(Some(now));
            cx.waker().wake_by_ref();
            return Poll::Pending;
        }
        if this.current.is_none() {
            match this.input.poll_next_unpin(cx) {
                Poll::Ready(Some(Ok(batch))) if batch.num_rows() > 0 => {
                    this.batch_rows = this.batch_rows.max(batch.num_rows());
                    this.current = Some((batch, 0));
                }
                Poll::Ready(Some(Ok(empty))) => return Poll::Ready(Some(Ok(empty))),
                other => return other,
            }
        }
        let slice = this.next_slice();
        this.pace.handed(Instant::now());
        Poll::Ready(slice.map(Ok))
    }
}

impl RecordBatchStream for PacedStream {
    fn schema(&self) -> SchemaRef {
        self.input.schema()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::arrow::array::Int64Array;
    use datafusion::arrow::datatypes::{DataType, Field, Schema};
    use datafusion::physical_plan::stream::RecordBatchStreamAdapter;

    #[test]
    fn slices_shrink_when_the_join_is_slow_and_grow_when_it_is_quick() {
        let start = Instant::now();
        let mut pace = Pace::new(start);
        let mut t = start;
        assert!(!pace.asked(t, 8192, None, None));
        // Quick joins: the slice doubles up to the batch.
        for _ in 0..20 {
            pace.handed(t);
            t += Duration::from_micros(100);
            pace.asked(t, 8192, None, None);
        }
        assert_eq!(pace.slice, 8192);
        // A slow one: halved at each slow slice, never below a row.
        for _ in 0..20 {
            pace.handed(t);
            t += Duration::from_millis(40);
            pace.asked(t, 8192, None, None);
        }
        assert_eq!(pace.slice, 1);
        // Slow only because the operators above took their time between two polls
        // of the join: the slice grows again.
        for _ in 0..20 {
            pace.handed(t);
            let polled = t + Duration::from_millis(40);
            t = polled + Duration::from_micros(100);
            pace.asked(t, 8192, Some(polled), None);
        }
        assert_eq!(pace.slice, 8192);
    }

    #[test]
    fn the_runtime_gets_a_yield_at_least_every_period() {
        let start = Instant::now();
        let mut pace = Pace::new(start);
        assert!(!pace.asked(start + YIELD_EVERY / 2, 10, None, None));
        assert!(pace.asked(start + YIELD_EVERY, 10, None, None), "yields once the period is over");
        pace.handed(start + YIELD_EVERY);
        let t = start + YIELD_EVERY + Duration::from_millis(1);
        assert!(!pace.asked(t, 10, None, None), "and the period starts again");
    }

    /// After a yield a pacer hands a slice on before it yields again, however long
    /// the re-poll took to reach it: nested joins cannot keep each other from
    /// making progress.
    #[test]
    fn a_pacer_yields_again_only_after_a_slice_went_out() {
        let start = Instant::now();
        let mut pace = Pace::new(start);
        assert!(pace.asked(start + YIELD_EVERY, 10, None, None));
        let late = start + 10 * YIELD_EVERY;
        assert!(!pace.asked(late, 10, None, None), "no slice went out since the yield");
        pace.handed(late);
        assert!(pace.asked(late + YIELD_EVERY, 10, None, None));
    }

    /// A yield of another pacer on this thread (a join above or below in the same
    /// poll) starts the period again for this one too.
    #[test]
    fn a_yield_on_the_thread_counts_for_every_pacer() {
        let start = Instant::now();
        let mut pace = Pace::new(start);
        let elsewhere = start + YIELD_EVERY;
        assert!(!pace.asked(elsewhere + Duration::from_millis(1), 10, None, Some(elsewhere)));
        assert!(pace.asked(elsewhere + YIELD_EVERY, 10, None, Some(elsewhere)));
    }

    /// A hundred pacers stacked on each other, as under a 100-way join, pass every
    /// row on.
    #[tokio::test]
    async fn stacked_pacers_pass_every_row_on() {
        let schema = Arc::new(Schema::new(vec![Field::new("k", DataType::Int64, false)]));
        let batches: Vec<Result<RecordBatch>> = (0..20)
            .map(|b| {
                let keys = Int64Array::from_iter_values(b * 100..(b + 1) * 100);
                Ok(RecordBatch::try_new(schema.clone(), vec![Arc::new(keys)]).unwrap())
            })
            .collect();
        let mut stream: SendableRecordBatchStream =
            Box::pin(RecordBatchStreamAdapter::new(schema.clone(), futures::stream::iter(batches)));
        for _ in 0..100 {
            let paced = PacedStream::new(stream, None);
            stream = Box::pin(RecordBatchStreamAdapter::new(schema.clone(), paced));
        }
        let rows: usize = stream.map(|b| b.unwrap().num_rows()).fold(0, |a, n| async move { a + n }).await;
        assert_eq!(rows, 2000);
    }

    #[tokio::test]
    async fn every_row_arrives_once_and_in_order() {
        let schema = Arc::new(Schema::new(vec![Field::new("k", DataType::Int64, false)]));
        let batches: Vec<Result<RecordBatch>> = (0..3)
            .map(|b| {
                let keys = Int64Array::from_iter_values(b * 1000..(b + 1) * 1000);
                Ok(RecordBatch::try_new(schema.clone(), vec![Arc::new(keys)]).unwrap())
            })
            .collect();
        let input = Box::pin(RecordBatchStreamAdapter::new(schema.clone(), futures::stream::iter(batches)));
        let out: Vec<RecordBatch> = PacedStream::new(input, None).map(|b| b.unwrap()).collect().await;
        assert!(out.len() > 3, "sliced: {} batches", out.len());
        let keys: Vec<i64> = out
            .iter()
            .flat_map(|b| b.column(0).as_any().downcast_ref::<Int64Array>().unwrap().values().to_vec())
            .collect();
        assert_eq!(keys, (0..3000).collect::<Vec<i64>>());
    }
}
