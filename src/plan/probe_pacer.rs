//! `ProbePacerExec`: the probe input of a nested-loop join, handed over in slices
//! small enough that the join comes back for the next one within milliseconds, and
//! with a yield to the runtime every `YIELD_EVERY`. The worker puts one under every
//! `NestedLoopJoinExec` of a task's plan (`worker::task`); it owns nothing but its
//! input's stream.
//!
//! Why: DataFusion's nested-loop join joins one probe batch with every buffered
//! build row inside a single `poll_next`, and moves on to the next probe batch
//! without returning when nothing matched. With 1.5 million build rows and a probe
//! batch of 8,192 rows that is 10^10 row pairs, tens of seconds, in one poll: a
//! cancelled task's abort, which lands only when the task yields, waited for minutes
//! while the join's filter rejected everything. Its only contact with the runtime is
//! asking its probe input for more, so that is where the pacing goes.
//!
//! The slice size adapts: it halves when the join took longer than `SLICE_TARGET`
//! over the last slice and doubles (up to the whole batch) when it took under a
//! quarter of it, so a join over a small build side still gets whole batches.

use std::fmt;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use datafusion::arrow::datatypes::SchemaRef;
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::common::tree_node::TreeNodeRecursion;
use datafusion::error::{DataFusionError, Result};
use datafusion::execution::TaskContext;
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_plan::{
    DisplayAs, DisplayFormatType, ExecutionPlan, PlanProperties, RecordBatchStream, SendableRecordBatchStream,
};
use futures::{Stream, StreamExt};

/// How long the join should work on one slice.
const SLICE_TARGET: Duration = Duration::from_millis(5);
/// At most this long between two yields to the runtime while the join asks for slices.
const YIELD_EVERY: Duration = Duration::from_millis(50);

/// Passes its input on in adaptive slices (see the module's doc).
#[derive(Debug)]
pub struct ProbePacerExec {
    input: Arc<dyn ExecutionPlan>,
}

impl ProbePacerExec {
    pub fn new(input: Arc<dyn ExecutionPlan>) -> Self {
        ProbePacerExec { input }
    }
}

impl DisplayAs for ProbePacerExec {
    fn fmt_as(&self, _t: DisplayFormatType, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "ProbePacerExec")
    }
}

impl ExecutionPlan for ProbePacerExec {
    fn name(&self) -> &str {
        "ProbePacerExec"
    }

    fn properties(&self) -> &Arc<PlanProperties> {
        self.input.properties()
    }

    fn children(&self) -> Vec<&Arc<dyn ExecutionPlan>> {
        vec![&self.input]
    }

    fn maintains_input_order(&self) -> Vec<bool> {
        vec![true]
    }

    fn apply_expressions(
        &self,
        _f: &mut dyn FnMut(&Arc<dyn PhysicalExpr>) -> Result<TreeNodeRecursion>,
    ) -> Result<TreeNodeRecursion> {
        Ok(TreeNodeRecursion::Continue)
    }

    fn with_new_children(self: Arc<Self>, mut children: Vec<Arc<dyn ExecutionPlan>>) -> Result<Arc<dyn ExecutionPlan>> {
        match children.len() {
            1 => Ok(Arc::new(ProbePacerExec::new(children.remove(0)))),
            _ => Err(DataFusionError::Internal("ProbePacerExec has one child".into())),
        }
    }

    fn execute(&self, partition: usize, context: Arc<TaskContext>) -> Result<SendableRecordBatchStream> {
        let input = self.input.execute(partition, context)?;
        Ok(Box::pin(PacedStream::new(input)))
    }
}

/// Puts a pacer under every nested-loop join's probe input of `plan`.
pub fn pace_nested_loop_joins(plan: Arc<dyn ExecutionPlan>) -> Result<Arc<dyn ExecutionPlan>> {
    use datafusion::common::tree_node::{Transformed, TreeNode};
    use datafusion::physical_plan::joins::NestedLoopJoinExec;
    let paced = plan.transform_up(|node| {
        if !(node.as_ref() as &dyn std::any::Any).is::<NestedLoopJoinExec>() {
            return Ok(Transformed::no(node));
        }
        let children: Vec<Arc<dyn ExecutionPlan>> = node.children().into_iter().cloned().collect();
        let [build, probe] = children.as_slice() else { return Ok(Transformed::no(node)) };
        let probe = Arc::new(ProbePacerExec::new(probe.clone())) as Arc<dyn ExecutionPlan>;
        #[allow(deprecated)]
        let paced = node.clone().with_new_children(vec![build.clone(), probe])?;
        Ok(Transformed::yes(paced))
    })?;
    Ok(paced.data)
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
}

impl Pace {
    fn new(now: Instant) -> Self {
        Pace { slice: 1, handed: None, last_yield: now }
    }

    /// Called when the join asks for more at `now`: whether to yield first.
    fn asked(&mut self, now: Instant, batch_rows: usize) -> bool {
        if let Some(handed) = self.handed.take() {
            let worked = now.saturating_duration_since(handed);
            if worked > SLICE_TARGET {
                self.slice = (self.slice / 2).max(1);
            } else if worked < SLICE_TARGET / 4 {
                self.slice = self.slice.saturating_mul(2).min(batch_rows.max(1));
            }
        }
        if now.saturating_duration_since(self.last_yield) >= YIELD_EVERY {
            self.last_yield = now;
            return true;
        }
        false
    }

    fn handed(&mut self, now: Instant) {
        self.handed = Some(now);
    }
}

struct PacedStream {
    input: SendableRecordBatchStream,
    /// The input batch being handed over, and the offset of its next slice.
    current: Option<(RecordBatch, usize)>,
    pace: Pace,
    /// The largest batch seen: the slice never grows past it.
    batch_rows: usize,
}

impl PacedStream {
    fn new(input: SendableRecordBatchStream) -> Self {
        PacedStream { input, current: None, pace: Pace::new(Instant::now()), batch_rows: 1 }
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
        if this.pace.asked(Instant::now(), this.batch_rows) {
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
        assert!(!pace.asked(t, 8192));
        // Quick joins: the slice doubles up to the batch.
        for _ in 0..20 {
            pace.handed(t);
            t += Duration::from_micros(100);
            pace.asked(t, 8192);
        }
        assert_eq!(pace.slice, 8192);
        // A slow one: halved at each slow slice, never below a row.
        for _ in 0..20 {
            pace.handed(t);
            t += Duration::from_millis(40);
            pace.asked(t, 8192);
        }
        assert_eq!(pace.slice, 1);
    }

    #[test]
    fn the_runtime_gets_a_yield_at_least_every_period() {
        let start = Instant::now();
        let mut pace = Pace::new(start);
        assert!(!pace.asked(start + YIELD_EVERY / 2, 10));
        assert!(pace.asked(start + YIELD_EVERY, 10), "yields once the period is over");
        assert!(!pace.asked(start + YIELD_EVERY + Duration::from_millis(1), 10), "and the period starts again");
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
        let out: Vec<RecordBatch> = PacedStream::new(input).map(|b| b.unwrap()).collect().await;
        assert!(out.len() > 3, "sliced: {} batches", out.len());
        let keys: Vec<i64> = out
            .iter()
            .flat_map(|b| b.column(0).as_any().downcast_ref::<Int64Array>().unwrap().values().to_vec())
            .collect();
        assert_eq!(keys, (0..3000).collect::<Vec<i64>>());
    }
}
